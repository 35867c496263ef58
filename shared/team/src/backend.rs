//! Where teammates run (docs/BACKENDS.md, docs/TEAM.md "Pane teammates"): one
//! interface ([`TeammateExecutor`], [`executor`]), one table of executors keyed by where
//! a teammate runs ([`ExecutorTable`], [`table`]), and the backends — the lead's own
//! process ([`in_process`]), `roo-worker`s in terminal panes ([`pane_executor`] over
//! [`tmux`] and [`iterm2`]) and `roo-worker`s on other hosts over ssh ([`ssh`]); the
//! worker backends share one worker table and one worker command line
//! ([`worker_launch`]). Choosing the pane backend once per team is [`detect`].
//!
//! Which backend runs the team's workers is decided and its executor made in one place:
//! the one `match` over [`roo_store::BackendType`] in [`table`] ([`ExecutorTable::fill`],
//! which the lead's set-up calls once through `Spawner::set_executors`). A new backend
//! (say a container launcher chosen by `--teammate-mode container`) is one module here
//! implementing [`TeammateExecutor`] (a `roo-worker` backend reuses the worker table and
//! [`worker_launch`]) and one arm in that match; besides, the values it needs in the
//! closed enums that name backends: a [`roo_store::BackendType`] (the roster records it;
//! the demo's sentence about it in `roo-app` is then asked for by the compiler) and, if
//! the user picks it, a [`detect::Mode`] (the `--teammate-mode` values) with its
//! detection.

pub mod clone_gate;
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
