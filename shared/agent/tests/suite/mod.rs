//! Test modules.
mod agent_loop;
mod common;
mod model_misbehaviour;
mod permissions;
mod registry;
mod tools;
