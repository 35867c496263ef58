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
//! ([`SubagentLimits`], config section `agents:`) cap nesting depth, concurrency,
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
pub mod model;
pub mod runtime;
pub mod tasks;
pub mod tool;

use std::time::Duration;

pub use filter::BACKGROUND_LABEL;
pub use fork::{FORK_TAG, is_fork_context};
pub use isolation::{IsolatedWorkspace, WorktreeIsolation};
pub use runtime::{ParentParts, SubagentRuntime};
pub use tasks::{BackgroundTasks, TaskInfo, TaskNotifications, TaskStatus};
pub use tool::{AgentInput, SubagentTool, TaskStopTool};

/// How far sub-agents may go: config section `agents:` (see `config::AgentsSection`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentLimits {
    /// Nesting depth: 1 means the lead's sub-agents cannot start sub-agents.
    pub max_depth: u32,
    /// Sub-agents running at once (all depths together); more calls wait.
    pub max_concurrent: usize,
    /// Sub-agents started in one session (all depths together).
    pub max_per_session: u32,
    /// Characters of a result returned to the parent; the full text spills to a file.
    pub max_result_chars: usize,
    /// A foreground sub-agent still running after this moves to the background;
    /// `None` never.
    pub auto_background: Option<Duration>,
    /// Whether sub-agents may run in the background at all.
    pub background: bool,
}

impl SubagentLimits {
    /// The most `max_depth` may be.
    pub const MAX_DEPTH: u32 = 3;

    /// The limits a merged `agents:` section sets (unset keys keep their defaults).
    pub fn from_section(section: &crate::config::AgentsSection) -> Self {
        let default = Self::default();
        Self {
            max_depth: section
                .max_depth
                .unwrap_or(default.max_depth)
                .min(Self::MAX_DEPTH),
            max_concurrent: section
                .max_concurrent
                .map_or(default.max_concurrent, |n| n.max(1) as usize),
            max_per_session: section.max_per_session.unwrap_or(default.max_per_session),
            max_result_chars: section
                .max_result_chars
                .map_or(default.max_result_chars, |n| n as usize),
            auto_background: match section.auto_background_secs {
                Some(0) => None,
                Some(secs) => Some(Duration::from_secs(secs)),
                None => default.auto_background,
            },
            background: section.background.unwrap_or(default.background),
        }
    }
}

impl Default for SubagentLimits {
    fn default() -> Self {
        Self {
            max_depth: 1,
            max_concurrent: 4,
            max_per_session: 50,
            max_result_chars: 10_000,
            auto_background: Some(Duration::from_secs(120)),
            background: true,
        }
    }
}
