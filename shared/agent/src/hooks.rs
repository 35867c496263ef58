//! Hooks: what runs at points of an agent's life, around every tool call included.
//!
//! Two parts, each in its own file:
//! - the seam ([`AgentHook`], `hook.rs`): the one trait the loop calls at session
//!   start, on each submitted prompt, at the top of every turn, before and after every
//!   tool call, around a compaction and when a run stops. Everything that takes part
//!   in an agent's life (config commands, inbox delivery, shutdown, skill scopes, MCP
//!   notices) implements it and is added with one `Agent::add_hook`.
//! - the user's configured shell commands ([`CommandHooks`], `command.rs`): the
//!   `hooks:` of the config files, one implementation of that seam.
//!
//! Beside them, the spend gate ([`SpendGate`], `spend.rs`): asked before every model
//! request, told after every response, so that spending caps stop new requests.
//!
//! A hook's `if:` is parsed with the rest of the config
//! ([`crate::config::HookCondition`]).

mod command;
mod hook;
mod spend;

pub use command::{CommandHooks, HookSetup};
pub use hook::{AgentHook, PromptDecision, ToolCallInfo, TurnAction, Verdict};
pub use spend::{CappedGate, SharedSpendGate, SpendGate, SpendVerdict};
