//! Where pane teammates run (docs/BACKENDS.md): choosing a backend once per team
//! ([`detect`]), and the terminal multiplexers that host `roo-worker` panes
//! ([`tmux`], [`iterm2`]), and teammates on other hosts over ssh ([`ssh`]).

pub mod detect;
pub mod executor;
pub mod in_process;
pub mod iterm2;
pub mod nudge;
pub mod pane;
pub mod pane_executor;
pub mod ssh;
pub mod table;
pub mod tmux;
pub mod worker_launch;

pub use executor::{ExecError, Launch, TeammateExecutor};
pub use in_process::InProcessExecutor;
pub use iterm2::ITerm2Executor;
pub use pane_executor::{PaneExecutor, PaneHost};
pub use ssh::SshExecutor;
pub use table::{ExecutorTable, Location};
pub use tmux::{Placement, Socket, Tmux, TmuxExecutor, TmuxHost};
