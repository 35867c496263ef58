//! Test modules.
mod common;
mod limits;
mod mailbox;
mod membership;
mod symlinks;
mod tasks;
mod team;
mod usage;
mod watch;
