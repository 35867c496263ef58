//! Sub-agents: the `Agent` tool's way of handing a task to another run of the same
//! loop, with its own conversation, tool registry, options and approver.
//!
//! Two ways to start one (docs/SUBAGENTS.md "The Agent tool"):
//! - **definition-based** (`subagent_type` names an agent definition): a fresh
//!   conversation whose system prompt is the role's prompt plus the environment, the
//!   project instructions (`ROOCODE.md`) as its first reminder and its own LoadSkill;
//! - **fork** (no type): the child's first request repeats the parent's last request
//!   byte for byte — system, tool list, messages up to the call — then one user message
//!   with placeholder results for that turn's calls and a `<fork-directive>`. The
//!   provider's prompt cache hits on the whole prefix. A fork cannot fork again.
//!
//! What a child may call is narrowed in four layers, each a [`ToolScope`] on its
//! registry and so enforced when a call executes ([`filter`]). Limits
//! ([`SubagentLimits`](crate::config::SubagentLimits), config section `agents:`) cap nesting depth, concurrency,
//! starts per session and result length. A child runs in its own tokio task with its
//! own cancellation: a panic or an error becomes an error result, the parent's Esc
//! cancels a foreground child, and a foreground child still running after
//! `auto_background_secs` moves to the background with its progress ([`tasks`]).
//!
//! [`ToolScope`]: crate::tool::ToolScope

pub mod approver;
pub mod filter;
pub mod fork;
pub mod isolation;
mod launch;
pub mod model;
pub mod runtime;
mod skill_fork;
pub mod tasks;
pub mod tool;

pub use filter::BACKGROUND_LABEL;
pub use fork::{FORK_TAG, is_fork_context};
pub use isolation::{IsolatedWorkspace, WorktreeIsolation};
pub use launch::AgentInput;
pub use runtime::{ParentParts, SubagentRuntime};
pub use tasks::{BackgroundTasks, TaskInfo, TaskNotifications, TaskStatus};
pub use tool::{SubagentTool, TaskStopTool};
