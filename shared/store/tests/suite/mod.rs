//! Test modules.
mod common;
mod mailbox;
mod tasks;
mod team;
mod symlinks;
mod watch;
