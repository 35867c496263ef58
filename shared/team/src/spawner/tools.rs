//! The lead's `Agent` tool (spawn a named teammate) and `TaskStop` (stop a teammate's
//! work now), both acting through the lead's [`Spawner`].

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use roo_agent::permissions::PermissionMode;
use roo_agent::tool::{Tool, ToolContext, ToolKind, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{SpawnRequest, Spawner};
use crate::tools::{bounded, parse_input, parse_name};

const AGENT: &str = "Agent";
const STOP: &str = "TaskStop";

/// Spawns a named teammate of the lead's team.
pub struct AgentTool {
    spawner: Spawner,
}

impl AgentTool {
    pub fn new(spawner: Spawner) -> AgentTool {
        AgentTool { spawner }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentInput {
    #[serde(default)]
    name: Option<String>,
    prompt: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, alias = "agent_type")]
    subagent_type: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    plan_mode_required: bool,
    #[serde(default)]
    permission_mode: Option<String>,
}

impl Tool for AgentTool {
    fn name(&self) -> &str {
        AGENT
    }

    fn description(&self) -> String {
        "Spawns a named teammate in your team (create the team with TeamCreate first). It \
         works in its own git worktree on branch roo/<team>/<name> (outside a git \
         repository it shares your directory), sees the team's task list and messages, \
         claims tasks itself, and reports by message; when it finishes a run it goes idle \
         and you get an idle notification. A message to a stopped teammate starts it again \
         with its history. Merge its branch with `git merge --no-ff` when its work is done. \
         `name`: the teammate's name (letters, digits, '.', '_', '-'); `prompt`: its \
         instructions; `description`: a few words for the UI; `subagent_type`: its role; \
         `model`: another model than yours; `plan_mode_required`: it must get your approval \
         of a plan before changing anything; `permission_mode`: yours or stricter."
            .to_string()
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The teammate's name, unique in the team."},
                "prompt": {"type": "string", "description": "What the teammate should do."},
                "description": {"type": "string", "description": "A short (3-5 words) description."},
                "subagent_type": {"type": "string", "description": "The teammate's role (recorded as its agent type)."},
                "model": {"type": "string", "description": "A model other than the lead's."},
                "plan_mode_required": {"type": "boolean", "description": "It must have a plan approved before it changes anything."},
                "permission_mode": {"type": "string", "enum": ["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"], "description": "Its permission mode: the lead's or a stricter one (default: the lead's)."}
            },
            "required": ["name", "prompt"],
            "additionalProperties": false
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    fn summarize(&self, input: &Value) -> String {
        match input.get("name").and_then(Value::as_str) {
            Some(name) => format!("{AGENT}({})", crate::event::one_line(name, 64)),
            None => AGENT.to_string(),
        }
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        async move {
            match self.spawn(input, ctx).await {
                Ok(text) => ToolOutput::ok(bounded(text)),
                Err(text) => ToolOutput::error(bounded(format!("failed to {text}"))),
            }
        }
        .boxed()
    }
}

impl AgentTool {
    async fn spawn(&self, input: Value, ctx: &ToolContext) -> Result<String, String> {
        let input: AgentInput = parse_input(AGENT, input).map_err(|e| e.to_string())?;
        let Some(name) = input.name.as_deref().filter(|n| !n.trim().is_empty()) else {
            return Err(
                "spawn an agent: `name` is required: the Agent tool spawns named \
                        teammates of your team (sub-agents without a team are not built)"
                    .to_string(),
            );
        };
        let name = parse_name(AGENT, "name", name).map_err(|e| e.to_string())?;
        if input.prompt.trim().is_empty() {
            return Err(format!(
                "spawn {name}: `prompt` is empty; say what it should do"
            ));
        }
        let permission_mode = input
            .permission_mode
            .as_deref()
            .map(str::parse::<PermissionMode>)
            .transpose()
            .map_err(|e| format!("spawn {name}: `permission_mode`: {e}"))?;
        let request = SpawnRequest {
            name,
            prompt: input.prompt,
            agent_type: input.subagent_type,
            model: input.model,
            plan_mode_required: input.plan_mode_required,
            permission_mode,
            cwd: ctx.cwd.clone(),
            sandbox: ctx.sandbox.clone(),
        };
        let _ = input.description;
        let spawned = self
            .spawner
            .spawn(request)
            .await
            .map_err(|e| e.to_string())?;
        let mut out = format!(
            "spawned teammate {} ({}) working in {}",
            spawned.name,
            super::backend_name(self.spawner.backend()),
            spawned.work_dir.display()
        );
        if let Some(branch) = &spawned.branch {
            out.push_str(&format!(" on branch {branch}"));
        }
        out.push_str(
            ". It reports by message and goes idle when done; you need not wait actively.",
        );
        for notice in spawned.notices {
            out.push_str(&format!("\nnote: {notice}"));
        }
        Ok(out)
    }
}

/// Stops a teammate's current work.
pub struct TaskStop {
    spawner: Spawner,
}

impl TaskStop {
    pub fn new(spawner: Spawner) -> TaskStop {
        TaskStop { spawner }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StopInput {
    #[serde(alias = "name", alias = "teammate")]
    task_id: String,
}

impl Tool for TaskStop {
    fn name(&self) -> &str {
        STOP
    }

    fn description(&self) -> String {
        "Stops a teammate you spawned, now: its current run is cancelled (its commands are \
         ended), it is recorded idle, and it keeps its history — a later SendMessage to it \
         starts it again. Its tasks stay as they are (release them with TaskUpdate owner \"\" \
         if needed). For a graceful end ask it with SendMessage type shutdown_request. \
         `task_id`: the teammate's name."
            .to_string()
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "task_id": {"type": "string", "description": "The name of the teammate to stop."}
            },
            "required": ["task_id"],
            "additionalProperties": false
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    fn call<'a>(&'a self, input: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        async move {
            let result = parse_input::<StopInput>(STOP, input)
                .and_then(|i| parse_name(STOP, "task_id", &i.task_id))
                .map_err(|e| e.to_string())
                .and_then(|name| {
                    self.spawner
                        .stop(&name)
                        .map(|was| (name, was))
                        .map_err(|e| e.to_string())
                });
            match result {
                Ok((name, true)) => ToolOutput::ok(format!(
                    "stopped {name}; a message to it starts it again with its history"
                )),
                Ok((name, false)) => ToolOutput::ok(format!(
                    "{name} was not running; a message to it starts it again"
                )),
                Err(e) => ToolOutput::error(bounded(format!("failed to {e}"))),
            }
        }
        .boxed()
    }
}
