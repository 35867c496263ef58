//! The `Agent` tool (sub-agent path) and `TaskStop` for background tasks.

use std::fmt::Write as _;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::launch::{AgentInput, ChildLaunch};
use super::runtime::SubagentRuntime;
use super::tasks::{BackgroundTasks, Stop};
use crate::tool::{Delegation, ToolContext, ToolKind, ToolOutput, TypedTool};

impl SubagentRuntime {
    /// The Agent and TaskStop tools bound to this runtime.
    pub fn tools(&self) -> (Arc<SubagentTool>, Arc<TaskStopTool>) {
        (
            Arc::new(SubagentTool::new(self.clone())),
            Arc::new(TaskStopTool::new(
                self.tasks().clone(),
                self.stoppable_owner(),
            )),
        )
    }
}

/// Starts a sub-agent: definition-based or a fork of the caller.
pub struct SubagentTool {
    runtime: SubagentRuntime,
}

impl SubagentTool {
    /// The Agent tool over `runtime`.
    pub fn new(runtime: SubagentRuntime) -> Self {
        Self { runtime }
    }

    /// The runtime this tool starts children with.
    pub fn runtime(&self) -> &SubagentRuntime {
        &self.runtime
    }

    /// The description of the sub-agent path, with the agent types as they are on
    /// disk now (a new `.roocode/agents/x.md` shows up in the next request).
    pub fn describe(&self) -> String {
        format!("{SUBAGENT_USE}\n\n{}", self.agent_types())
    }

    /// The agent types a call may name, one line each.
    pub fn agent_types(&self) -> String {
        let scan = self.runtime.catalog().scan();
        let mut text = String::from("Agent types:");
        for def in scan.agents.values() {
            let _ = write!(
                text,
                "\n- {}: {}",
                def.name,
                one_line(&def.description, 300)
            );
        }
        if scan.agents.is_empty() {
            text.push_str("\n(none)");
        }
        text
    }
}

/// What the Agent tool's sub-agent path does, for its description.
pub const SUBAGENT_USE: &str = "Starts a sub-agent on a task: it works in its own context and \
     returns only its final report. With `subagent_type` it starts fresh and sees only \
     `prompt`, so say everything it needs; without, it forks you and sees this conversation. \
     Calls in one response run in parallel.";

fn one_line(text: &str, max: usize) -> String {
    super::tasks::clip(text.trim(), max)
}

impl TypedTool for SubagentTool {
    fn delegation(&self) -> Delegation {
        Delegation::BuiltInAgents
    }

    fn manages_sub_agents(&self) -> bool {
        true
    }

    type Input = AgentInput;
    const NAME: &'static str = "Agent";

    fn description(&self) -> String {
        self.describe()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    // A fork starts from the conversation that made the call.
    fn needs_conversation(&self) -> bool {
        true
    }

    fn summarize(&self, input: &Value) -> Option<String> {
        let what = input
            .get("description")
            .or_else(|| input.get("subagent_type"))
            .and_then(Value::as_str)
            .unwrap_or("fork");
        Some(format!("Agent({})", one_line(what, 64)))
    }

    async fn run(&self, input: AgentInput, ctx: &ToolContext) -> ToolOutput {
        self.runtime
            .call(
                ChildLaunch {
                    input,
                    extra_scope: None,
                    extra_tools: Vec::new(),
                },
                ctx,
            )
            .await
    }
}

/// Input of TaskStop.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopInput {
    /// The task's id (`a3`) or name.
    #[serde(alias = "name")]
    pub task_id: String,
}

/// Stops a background task.
pub struct TaskStopTool {
    tasks: BackgroundTasks,
    /// `Some`: a sub-agent's, which stops only the tasks it started.
    owner: Option<u64>,
}

impl TaskStopTool {
    /// TaskStop over `tasks`; `owner`: only the tasks of that agent (a sub-agent's), `None`: any.
    pub fn new(tasks: BackgroundTasks, owner: Option<u64>) -> Self {
        Self { tasks, owner }
    }
}

impl TypedTool for TaskStopTool {
    fn delegation(&self) -> Delegation {
        Delegation::BuiltInAgents
    }

    fn manages_sub_agents(&self) -> bool {
        true
    }

    type Input = StopInput;
    const NAME: &'static str = "TaskStop";

    fn description(&self) -> String {
        "Stops a background sub-agent now: its run and commands are ended, and its \
         <task-notification> says killed."
            .to_string()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    async fn run(&self, input: StopInput, _ctx: &ToolContext) -> ToolOutput {
        stop_task(&self.tasks, &input.task_id, self.owner)
    }
}

/// TaskStop on the task table: the text for the model.
pub fn stop_task(tasks: &BackgroundTasks, id_or_name: &str, owner: Option<u64>) -> ToolOutput {
    match tasks.stop(id_or_name.trim(), owner) {
        Stop::Stopped(id) => ToolOutput::ok(format!(
            "stopped task {id}; its notification will say killed"
        )),
        Stop::Ambiguous(ids) => ToolOutput::error(format!(
            "failed to stop task \"{}\": several running tasks have that name ({}); give the id",
            one_line(id_or_name, 64),
            ids.join(", ")
        )),
        Stop::NotRunning if tasks.knows(id_or_name.trim()) => ToolOutput::ok(format!(
            "task {} is not running any more; nothing to stop",
            id_or_name.trim()
        )),
        Stop::NotRunning => {
            let running: Vec<String> = tasks
                .list()
                .into_iter()
                .filter(|t| t.status == super::TaskStatus::Running)
                .map(|t| t.id)
                .collect();
            ToolOutput::error(format!(
                "failed to stop task \"{}\": there is no such task. Running tasks: {}",
                one_line(id_or_name, 64),
                if running.is_empty() {
                    "none".to_string()
                } else {
                    running.join(", ")
                }
            ))
        }
    }
}
