//! Backend: iterm2 (issue 10, being built).
