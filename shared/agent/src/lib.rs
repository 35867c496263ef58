//! The agent engine of RooCode Teams.
//!
//! One loop, many agents: the lead, every teammate and every sub-agent run
//! [`agent_loop::Agent`] with a different tool set. The loop emits
//! [`event::AgentEvent`]s and never knows which UI consumes them.

pub mod agent_loop;
pub mod agents;
pub mod config;
pub mod context;
pub mod conversation;
pub mod event;
pub mod exec;
pub mod front_matter;
pub mod hooks;
pub mod mcp;
pub mod permissions;
pub mod plan_mode;
pub mod prompt;
pub mod session;
pub mod skills;
pub mod subagent;
pub mod text_tool_call;
pub mod tool;
pub mod tools;

/// The OS sandbox, where most callers have always found it.
pub use exec::sandbox;
