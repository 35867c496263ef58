//! Test modules.
mod common;
mod limits;
mod mailbox;
mod symlinks;
mod tasks;
mod team;
mod watch;
