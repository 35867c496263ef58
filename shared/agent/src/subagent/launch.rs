//! What one Agent call asks for: the tool's input as the model wrote it
//! ([`AgentInput`]) and the child to start from it ([`ChildLaunch`]). A leaf: the tool
//! (which decodes the call) and the runtime (which starts the child) both read it, so
//! neither has to import the other for it.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::agents::Isolation;
use crate::tool::{Tool, ToolScope};

/// Input of the Agent tool.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentInput {
    /// 3-5 words for the UI.
    #[serde(default)]
    pub description: Option<String>,
    #[allow(
        missing_docs,
        reason = "a doc comment would become part of the tool's input schema, which the model reads; the schema stays as it is"
    )]
    pub prompt: String,
    /// An agent type listed above.
    #[serde(default, alias = "agent_type")]
    pub subagent_type: Option<String>,
    /// `inherit` (default), `haiku`, `sonnet`, `opus` or a model name.
    #[serde(default)]
    pub model: Option<String>,
    /// Return at once; the report comes later as a <task-notification>.
    #[serde(default)]
    pub run_in_background: bool,
    /// Names the task, for TaskStop.
    #[serde(default)]
    pub name: Option<String>,
    /// Work in a new git worktree.
    #[serde(default)]
    pub isolation: Option<Isolation>,
}

/// One child to start, as decided from the call.
pub(crate) struct ChildLaunch {
    pub input: AgentInput,
    /// Layer 4 for a fork skill (its `allowed_tools`); a definition brings its own.
    pub extra_scope: Option<ToolScope>,
    /// Tools only this child gets (a fork skill's own `tool.json` tools).
    pub extra_tools: Vec<Arc<dyn Tool>>,
}
