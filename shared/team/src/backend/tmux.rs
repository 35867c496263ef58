//! Backend: tmux (issue 10, being built).
