//! Interaction layer of `roo-lead` and `roo-worker`: flags, wiring, the headless
//! runner and the interactive terminal UI. The agent engine lives in `roo-agent`;
//! nothing here decides what the agent does.
//!
//! Its only public items are the two binaries' entry points, [`lead::main`] and
//! [`worker::main`]; everything else is this crate's own.

mod approval_view;
mod demo;
mod entry;
mod exit;
mod flags;
mod headless;
pub mod lead;
mod left_team;
mod line_editor;
mod logging;
mod render;
mod repl;
mod serve_handoff;
mod setup;
mod skill_command;
mod tasks_view;
#[cfg(test)]
mod tool_properties;
mod trust;
pub mod worker;
