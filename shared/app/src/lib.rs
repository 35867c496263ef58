//! Interaction layer of `roo-lead` and `roo-worker`: flags, wiring, the headless
//! runner and the interactive terminal UI. The agent engine lives in `roo-agent`;
//! nothing here decides what the agent does.

pub mod approval_view;
pub mod demo;
pub mod exit;
pub mod headless;
pub mod lead;
pub mod line_editor;
pub mod logging;
pub mod render;
pub mod repl;
pub mod setup;
pub mod skill_command;
pub mod tasks_view;
pub mod trust;
pub mod worker;
