//! Test modules.
mod common;
mod limits;
mod mailbox;
mod tasks;
mod team;
mod watch;
