//! Test modules.
mod common;
mod mailbox;
mod symlinks;
mod tasks;
mod team;
mod watch;
