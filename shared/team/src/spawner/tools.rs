//! The lead's `Agent` tool and `TaskStop`. `Agent` spawns a named teammate through
//! the lead's [`Spawner`] when the call names one; every other call starts a sub-agent
//! ([`roo_agent::subagent`]). A named call while the lead is in no team is an error,
//! never a sub-agent in the teammate's place: the model meant a teammate (its
//! TeamCreate may have failed), and a sub-agent would do the work silently in another
//! way. `TaskStop` stops a background task by id or name, or a teammate by name. Task
//! ids (`a3`) cannot be teammate names: the spawner refuses names of that form.

use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use roo_agent::permissions::PermissionMode;
use roo_agent::subagent::tool::stop_task;
use roo_agent::subagent::{BackgroundTasks, SubagentTool};
use roo_agent::tool::{Tool, ToolContext, ToolKind, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{SpawnRequest, Spawner};
use crate::tools::{bounded, parse_input, parse_name};

const AGENT: &str = "Agent";
const STOP: &str = "TaskStop";

/// Spawns a named teammate of the lead's team, or starts a sub-agent.
pub struct AgentTool {
    spawner: Spawner,
    subagents: Option<Arc<SubagentTool>>,
}

impl AgentTool {
    pub fn new(spawner: Spawner) -> AgentTool {
        AgentTool {
            spawner,
            subagents: None,
        }
    }

    /// Calls that do not spawn a teammate start a sub-agent with `tool`.
    pub fn with_subagents(mut self, tool: Arc<SubagentTool>) -> AgentTool {
        self.subagents = Some(tool);
        self
    }

    /// Whether this call is for a teammate: it names one (or there is no sub-agent path
    /// to take it).
    fn spawns_teammate(&self, input: &Value) -> bool {
        self.subagents.is_none() || named(input)
    }

    const TEAMMATE_TEXT: &str = "Spawns a named teammate in your team (create the team with TeamCreate first). It \
         works in its own git clone on branch roo/<team>/<name> (outside a git \
         repository it shares your directory), sees the team's task list and messages, \
         claims tasks itself, and reports by message; when it finishes a run it goes idle \
         and you get an idle notification. A message to a stopped teammate starts it again \
         with its history. Its commits appear on that branch in your repository (run no git \
         inside its clone); merge them with TeamMerge when its work is done. \
         `name`: the teammate's name (letters, digits, '.', '_', '-'); `prompt`: its \
         instructions; `description`: a few words for the UI; `subagent_type`: its role; \
         `model`: another model than yours; `plan_mode_required`: it must get your approval \
         of a plan before changing anything; `permission_mode`: yours or stricter.";
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
        match &self.subagents {
            None => Self::TEAMMATE_TEXT.to_string(),
            Some(sub) => {
                let mut text = format!(
                    "Two uses. (1) With `name`: {} Without a team, a call with `name` \
                     fails.\n\n(2) Without `name`: ",
                    Self::TEAMMATE_TEXT
                );
                text.push_str(&sub.describe());
                text
            }
        }
    }

    fn input_schema(&self) -> Value {
        let Some(sub) = &self.subagents else {
            return self.teammate_schema();
        };
        // One schema for both uses: the teammate's fields and the sub-agent's.
        let mut schema = sub.input_schema();
        let teammate = self.teammate_schema();
        if let (Some(props), Some(extra)) = (
            schema.get_mut("properties").and_then(Value::as_object_mut),
            teammate.get("properties").and_then(Value::as_object),
        ) {
            for (key, value) in extra {
                if !props.contains_key(key) {
                    props.insert(key.clone(), value.clone());
                }
            }
            if let Some(name) = props.get_mut("name") {
                *name = json!({"type": "string", "description": "A teammate's name: spawns a teammate of the team you lead (TeamCreate first). Leave it out to start a sub-agent."});
            }
        }
        schema
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    // Batches are formed before any call runs, so a named call may find a team that a
    // TeamCreate earlier in the same response made: it runs alone, in order, like
    // every teammate spawn. Unnamed calls are sub-agents and run together.
    fn is_concurrency_safe(&self, input: &Value) -> bool {
        self.subagents.is_some() && !named(input)
    }

    fn needs_conversation(&self) -> bool {
        self.subagents.is_some()
    }

    fn summarize(&self, input: &Value) -> String {
        match (&self.subagents, self.spawns_teammate(input)) {
            (Some(sub), false) => sub.summarize(input),
            _ => match input.get("name").and_then(Value::as_str) {
                Some(name) => format!("{AGENT}({})", crate::event::one_line(name, 64)),
                None => AGENT.to_string(),
            },
        }
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        async move {
            if let Some(sub) = &self.subagents
                && !self.spawns_teammate(&input)
            {
                // Teammate-only fields have no meaning for a sub-agent.
                let mut input = input;
                if let Some(map) = input.as_object_mut() {
                    map.remove("plan_mode_required");
                    map.remove("permission_mode");
                }
                return sub.call(input, ctx).await;
            }
            match self.spawn(input, ctx).await {
                Ok(text) => ToolOutput::ok(bounded(text)),
                Err(text) if self.subagents.is_some() && !self.spawner.in_team() => {
                    ToolOutput::error(bounded(format!(
                        "failed to {text}; to start a sub-agent instead, call Agent without `name`"
                    )))
                }
                Err(text) => ToolOutput::error(bounded(format!("failed to {text}"))),
            }
        }
        .boxed()
    }
}

impl AgentTool {
    fn teammate_schema(&self) -> Value {
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
            launcher: ctx.launcher.clone(),
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

/// Whether an Agent call names its agent.
fn named(input: &Value) -> bool {
    input
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.trim().is_empty())
}

/// Stops a background task, or a teammate's current work.
pub struct TaskStop {
    spawner: Spawner,
    tasks: Option<BackgroundTasks>,
}

impl TaskStop {
    pub fn new(spawner: Spawner) -> TaskStop {
        TaskStop {
            spawner,
            tasks: None,
        }
    }

    /// Ids and names of these background tasks are stopped too (first).
    pub fn with_tasks(mut self, tasks: BackgroundTasks) -> TaskStop {
        self.tasks = Some(tasks);
        self
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
        let tasks = if self.tasks.is_some() {
            "Stops a background task (a sub-agent started with run_in_background or moved to \
             the background; `task_id`: its id such as a3, or its name): its run is cancelled \
             and its notification says killed. Or "
        } else {
            ""
        };
        tasks.to_string()
            + "stops a teammate you spawned, now: its current run is cancelled (its commands are \
         ended), it is recorded idle, and it keeps its history — a later SendMessage to it \
         starts it again. Its tasks stay as they are (release them with TaskUpdate owner \"\" \
         if needed). For a graceful end ask it with SendMessage type shutdown_request. \
         `task_id`: the teammate's name."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "task_id": {"type": "string", "description": "The id or name of the background task, or the name of the teammate, to stop."}
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
            let input = match parse_input::<StopInput>(STOP, input) {
                Ok(input) => input,
                Err(e) => return ToolOutput::error(bounded(format!("failed to {e}"))),
            };
            if let Some(tasks) = &self.tasks
                && (tasks.knows(input.task_id.trim()) || !self.spawner.in_team())
            {
                return stop_task(tasks, &input.task_id, None);
            }
            let result = parse_name(STOP, "task_id", &input.task_id)
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
