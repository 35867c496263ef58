//! The agent engine of RooCode Teams.
//!
//! One loop, many agents: the lead, every teammate and every sub-agent run [`Agent`] with a
//! different tool set. The loop emits [`event::AgentEvent`]s and never knows which UI
//! consumes them.
//!
//! The public modules are the namespaces that hold many items a caller names: the
//! configuration files ([`config`]), what a run reports ([`event`]), process launch and the
//! OS sandbox ([`exec`]), the permission layers ([`permissions`]), skills ([`skills`]),
//! sub-agents ([`subagent`]), the tool seam ([`tool`]) and the built-in tools ([`tools`]).
//! Everything else is private; what the team runtime and the binaries use of it is
//! re-exported here: the loop and its options, the hook seam, the system prompt and
//! project instructions, sessions, checkpoints, agent definitions, plan mode and MCP
//! servers.

#![warn(missing_docs)]

mod agent_loop;
mod agents;
mod checkpoints;
pub mod config;
mod context;
mod conversation;
pub mod event;
pub mod exec;
mod front_matter;
mod hooks;
mod mcp;
pub mod permissions;
mod plan_mode;
mod prompt;
mod session;
pub mod skills;
pub mod subagent;
mod text_tool_call;
pub mod tool;
pub mod tools;

pub use agent_loop::{Agent, AgentOptions, RewindOutcome, RewindScope, RunResult, SharedPolicy};
pub use agents::{AgentCatalog, AgentDefinition, AgentScan, DefinitionError};
pub use checkpoints::{
    CallScope, CheckpointError, CheckpointLimits, CheckpointSummary, Checkpoints, ConversationMark,
    PendingCall, RestoreReport,
};
pub use context::CompactionOptions;
pub use conversation::repair_chain;
pub use hooks::{
    AgentHook, CommandHooks, HookSetup, PromptDecision, SharedSpendGate, SpendGate, SpendVerdict,
    ToolCallInfo, TurnAction, Verdict,
};
pub use mcp::{McpHook, McpLaunch, McpServers, McpSettings};
pub use plan_mode::{PlanApprover, plan_mode_tools};
pub use prompt::{
    Environment, GitInfo, Instructions, Persona, head_names_branch, instruction_parts,
    join_instructions, load_instructions, project_instruction_paths, system_prompt,
};
pub use session::{
    Restored, Session, SessionError, latest_session, new_session_id, project_sessions_dir,
    session_path,
};
