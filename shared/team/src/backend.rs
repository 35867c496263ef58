//! Where teammates run (docs/BACKENDS.md, docs/TEAM.md "Pane teammates"): one
//! interface ([`TeammateExecutor`], [`executor`]), one table of executors keyed by where
//! a teammate runs ([`ExecutorTable`], [`table`]), and the backends — the lead's own
//! process ([`in_process`]), `roo-worker`s in terminal panes ([`pane_executor`] over
//! [`tmux`] and [`iterm2`]) and `roo-worker`s on other hosts over ssh ([`ssh`]); the
//! worker backends share one worker table and one worker command line
//! ([`worker_launch`]). Choosing the pane backend once per team is [`detect`].
//!
//! A new backend is one module here implementing [`TeammateExecutor`] and one executor
//! set in the table at its [`Location`].

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
mod workers;

pub use executor::{ExecError, Launch, TeammateExecutor};
pub use in_process::InProcessExecutor;
pub use iterm2::ITerm2Executor;
pub use pane_executor::{PaneExecutor, PaneHost};
pub use ssh::SshExecutor;
pub use table::{BackendError, ExecutorTable, LeadBackends, Location};
pub use tmux::{Placement, Socket, Tmux, TmuxExecutor, TmuxHost};
