//! Backend: detect (issue 10, being built).
