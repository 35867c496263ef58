//! Where pane teammates run (DESIGN.md §3): choosing a backend once per team
//! ([`detect`]), and the terminal multiplexers that host `roo-worker` panes
//! ([`tmux`], [`iterm2`]).

pub mod detect;
pub mod iterm2;
pub mod tmux;
