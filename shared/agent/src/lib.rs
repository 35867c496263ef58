//! The agent engine of RooCode Teams.
//!
//! One loop, many agents: the lead, every teammate and every sub-agent run
//! [`agent_loop::AgentLoop`] with a different tool set. The loop emits
//! [`event::AgentEvent`]s and never knows which UI consumes them.

pub mod tool;
pub mod tools;
pub mod permissions;
pub mod config;
