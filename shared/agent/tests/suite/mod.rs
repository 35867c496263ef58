//! Test modules.
mod agent_loop;
mod common;
mod permissions;
mod tools;
