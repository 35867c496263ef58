//! The `roo-mail` and `roo-task` command-line interfaces: argument parsing (clap structs
//! live here so they can be tested), output, the one exit-code table ([`exit`]), and the
//! start-up every binary shares ([`entry`]; `roo-lead` and `roo-worker` use it too).
//!
//! No async runtime: both binaries are invoked once per message or claim by scripts and
//! agents' shells, so start-up time is part of the send latency.

mod common;
pub mod entry;
pub mod exit;
mod forward;
pub mod hosts;
pub mod mail;
mod output;
pub mod relay;
mod shape;
pub mod task;
mod team;
pub mod top;
