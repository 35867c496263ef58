//! Test modules.
mod agent_loop;
mod common;
mod hooks;
mod model_misbehaviour;
mod permissions;
mod registry;
mod skills;
mod subagents;
mod tools;
