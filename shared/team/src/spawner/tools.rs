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
use roo_agent::subagent::tool::{SUBAGENT_USE, stop_task};
use roo_agent::subagent::{BackgroundTasks, SubagentTool};
use roo_agent::tool::{
    Delegation, Tool, ToolContext, ToolKind, ToolOutput, TypedTool, input_schema,
};
use roo_store::{ClaimOptions, Name, NewTask, TaskId};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{SpawnRequest, Spawner};
use crate::tools::schema;
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
}

/// What a teammate is, for the Agent tool's description.
const TEAMMATE_WORK: &str = "It works on branch roo/<team>/<name> in its own clone (run no \
     git there; merge with TeamMerge). Its final answer reaches you when it stops; a message \
     starts it again.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentInput {
    #[serde(default)]
    name: Option<String>,
    prompt: String,
    /// 3-5 words for the UI.
    #[serde(default)]
    description: Option<String>,
    /// The teammate's role.
    #[serde(default, alias = "agent_type")]
    subagent_type: Option<String>,
    /// A model other than yours.
    #[serde(default)]
    model: Option<String>,
    /// The teammate must have a plan approved by you first.
    #[serde(default)]
    plan_mode_required: bool,
    /// Yours (default) or stricter.
    #[serde(default)]
    #[schemars(schema_with = "schema::permission_mode")]
    permission_mode: Option<String>,
    /// Also make it the teammate's task on the task list.
    #[serde(default)]
    task: bool,
    /// A configured host to run it on, over ssh.
    #[serde(default)]
    host: Option<String>,
    /// The teammate's spending cap: once reached, it stops, releases its task and reports.
    #[serde(default)]
    budget: Option<BudgetInput>,
}

/// A spending cap given to a spawned teammate (the lower of it and `budget.teammate_usd`
/// of the config holds).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetInput {
    /// Most USD.
    #[serde(default)]
    usd: Option<f64>,
    /// Most model requests.
    #[serde(default)]
    requests: Option<u64>,
}

impl Tool for AgentTool {
    fn delegation(&self) -> Delegation {
        Delegation::BuiltInAgents
    }

    fn manages_sub_agents(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        AGENT
    }

    fn description(&self) -> String {
        match &self.subagents {
            None => format!(
                "Spawns a teammate in the team you lead (TeamCreate first). {TEAMMATE_WORK}"
            ),
            Some(sub) => format!(
                "{SUBAGENT_USE}\n\nWith `name`, in a team you lead (TeamCreate first), it \
                 spawns a teammate instead. {TEAMMATE_WORK}\n\n{}",
                sub.agent_types()
            ),
        }
    }

    fn input_schema(&self) -> Value {
        let teammate = self.teammate_schema();
        let Some(sub) = &self.subagents else {
            return teammate;
        };
        // One schema for both uses: the sub-agent's fields and the teammate's.
        let mut schema = sub.input_schema();
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
                *name = json!({"type": "string", "description": "Spawns a teammate (see above)."});
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
            (Some(sub), false) => Tool::summarize(sub.as_ref(), input),
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
                    map.remove("task");
                    map.remove("host");
                    // A sub-agent's spend counts toward its parent's caps.
                    map.remove("budget");
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
    /// The teammate-only schema: [`AgentInput`]'s, with `name` required (it is parsed as
    /// optional so that a call without one, in the shared schema, is a sub-agent).
    fn teammate_schema(&self) -> Value {
        let mut schema = input_schema::<AgentInput>();
        if let Some(object) = schema.as_object_mut() {
            schema::require(object, "name");
            // `host` only where hosts are configured (tokens), naming them.
            let hosts = self.spawner.host_names();
            if let Some(props) = object.get_mut("properties").and_then(Value::as_object_mut) {
                if hosts.is_empty() {
                    props.remove("host");
                } else if let Some(host) = props.get_mut("host").and_then(Value::as_object_mut) {
                    let names: Vec<&str> = hosts.iter().map(Name::as_str).collect();
                    host.insert(
                        "description".into(),
                        json!(format!(
                            "Run it on this host over ssh: {}.",
                            names.join(", ")
                        )),
                    );
                }
            }
        }
        schema
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
        let host = input
            .host
            .as_deref()
            .map(|h| parse_name(AGENT, "host", h))
            .transpose()
            .map_err(|e| e.to_string())?;
        let permission_mode = input
            .permission_mode
            .as_deref()
            .map(str::parse::<PermissionMode>)
            .transpose()
            .map_err(|e| format!("spawn {name}: `permission_mode`: {e}"))?;
        self.set_budget(&name, input.budget.as_ref()).await?;
        // The task first, owned by the teammate-to-be, so that its id can be in the
        // prompt; a spawn that fails takes it away again.
        let task = if input.task {
            let subject = input
                .description
                .as_deref()
                .filter(|d| !d.trim().is_empty())
                .unwrap_or(&input.prompt);
            Some(self.create_task(&name, subject, &input.prompt).await?)
        } else {
            None
        };
        let prompt = match &task {
            Some(id) => format!(
                "{}\n\n(Task #{id} on the task list is yours: complete it with TaskUpdate when \
                 done.)",
                input.prompt
            ),
            None => input.prompt,
        };
        let request = SpawnRequest {
            name: name.clone(),
            prompt,
            agent_type: input.subagent_type,
            model: input.model,
            plan_mode_required: input.plan_mode_required,
            permission_mode,
            cwd: ctx.cwd.clone(),
            launcher: ctx.launcher.clone(),
            host,
        };
        let spawned = match self.spawner.spawn(request).await {
            Ok(spawned) => spawned,
            Err(e) => {
                if let Some(id) = task {
                    self.drop_task(id).await;
                }
                return Err(e.to_string());
            }
        };
        if let Some(id) = &task {
            self.start_task(id.clone(), name).await;
        }
        let mut out = match &spawned.host {
            Some(host) => format!(
                "spawned teammate {} on host {host} working in {} there",
                spawned.name,
                spawned.work_dir.display()
            ),
            None => format!(
                "spawned teammate {} ({}) working in {}",
                spawned.name,
                super::backend_name(self.spawner.backend()),
                spawned.work_dir.display()
            ),
        };
        if let Some(branch) = &spawned.branch {
            out.push_str(&format!(" on branch {branch}"));
        }
        out.push('.');
        if let Some(id) = task {
            out.push_str(&format!(" It owns task #{id}."));
        }
        for notice in spawned.notices {
            out.push_str(&format!("\nnote: {notice}"));
        }
        Ok(out)
    }

    /// Refuses a spawn while the team is over its cap; records the teammate's own cap.
    async fn set_budget(&self, name: &Name, budget: Option<&BudgetInput>) -> Result<(), String> {
        let binding = self.spawner.lead_binding().map_err(|e| e.to_string())?;
        let cap = budget.map(|b| roo_store::budget::SpendCap {
            usd: b.usd,
            requests: b.requests,
        });
        let tasks = binding.team.tasks();
        let (me, who) = (binding.me.clone(), name.clone());
        let result = tokio::task::spawn_blocking(move || {
            let now = tasks.spend_state(&me, None)?;
            if let Some(cap) = now.team_cap
                && cap.reached(&now.team)
            {
                return Ok(Err(format!(
                    "spawn {who}: the team reached its budget of {} (spent {}); no new work                      starts",
                    cap.describe(),
                    roo_store::budget::describe_spend(&now.team)
                )));
            }
            if let Some(cap) = cap {
                tasks.set_caps(Some(&me), |caps| {
                    caps.members.insert(who.clone(), cap);
                })?;
            }
            Ok::<_, roo_store::Error>(Ok(()))
        })
        .await
        .map_err(|e| e.to_string())?;
        match result {
            Ok(inner) => inner,
            Err(e) => Err(format!("spawn {name}: set its budget: {e}")),
        }
    }

    /// Creates the task of an Agent call with `task: true`, owned by `owner` (pending
    /// until it is claimed for it after the spawn). Returns its id.
    async fn create_task(
        &self,
        owner: &Name,
        subject: &str,
        prompt: &str,
    ) -> Result<TaskId, String> {
        let binding = self.spawner.lead_binding().map_err(|e| e.to_string())?;
        let new = NewTask {
            subject: crate::event::one_line(subject, TASK_SUBJECT_CHARS),
            description: prompt.to_string(),
            active_form: None,
            blocked_by: Vec::new(),
            blocks: Vec::new(),
            paths: Vec::new(),
            metadata: serde_json::Map::new(),
            owner: Some(owner.clone()),
            by: Some(binding.me.clone()),
            budget: None,
        };
        let tasks = binding.team.tasks();
        tokio::task::spawn_blocking(move || tasks.create(new))
            .await
            .map_err(|e| e.to_string())?
            .map(|task| task.id)
            .map_err(|e| format!("spawn {owner}: create its task: {e}"))
    }

    /// The spawned teammate's task goes in progress (claimed for it) if it is still
    /// pending and the teammate's: a fast teammate may have completed or released it
    /// already, and its choice stands. Failures are logged: the task stays assigned to
    /// the teammate, who can complete it from pending.
    async fn start_task(&self, id: TaskId, owner: Name) {
        let Ok(binding) = self.spawner.lead_binding() else {
            return;
        };
        let tasks = binding.team.tasks();
        let claimed = tokio::task::spawn_blocking(move || {
            tasks.claim_assigned(&id, &owner, &ClaimOptions::default())
        })
        .await;
        match claimed {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "failed to start a spawned teammate's task"),
            Err(e) => tracing::warn!(error = %e, "failed to start a spawned teammate's task"),
        }
    }

    /// Removes the task of a spawn that failed if it is still pending: a member of that
    /// name that was not this lead's to spawn (a worker started by hand) may have
    /// claimed it meanwhile, and its work stays. Failures are logged.
    async fn drop_task(&self, id: TaskId) {
        let Ok(binding) = self.spawner.lead_binding() else {
            return;
        };
        let (tasks, lead) = (binding.team.tasks(), binding.me.clone());
        let dropped =
            tokio::task::spawn_blocking(move || tasks.delete_pending(&id, Some(&lead))).await;
        if !matches!(dropped, Ok(Ok(_))) {
            tracing::warn!("failed to remove the task of a failed spawn: {dropped:?}");
        }
    }
}

/// The longest subject of a task an Agent call makes.
const TASK_SUBJECT_CHARS: usize = 120;

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

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopInput {
    /// A task's id (`a3`) or name, or a teammate's name.
    #[serde(alias = "name", alias = "teammate")]
    task_id: String,
    /// A teammate only: once stopped, put the files it changed in its clone back to before its prompt N (1: all of this session); 0 lists its prompts with the files each changed.
    #[serde(default)]
    rewind_to: Option<usize>,
}

impl TypedTool for TaskStop {
    fn delegation(&self) -> Delegation {
        Delegation::BuiltInAgents
    }

    fn manages_sub_agents(&self) -> bool {
        true
    }

    type Input = StopInput;
    const NAME: &'static str = STOP;

    fn description(&self) -> String {
        const TEAMMATE: &str = "its run is cancelled and it goes idle, keeping its history \
             and tasks; a message starts it again. To let it finish, send a shutdown_request \
             instead.";
        if self.tasks.is_some() {
            format!(
                "Stops a background sub-agent (its run ends; its <task-notification> says \
                 killed) or a teammate: {TEAMMATE}"
            )
        } else {
            format!("Stops a teammate now: {TEAMMATE}")
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    async fn run(&self, input: StopInput, _ctx: &ToolContext) -> ToolOutput {
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
        match (result, input.rewind_to) {
            (Ok((name, was)), Some(number)) => {
                let spawner = self.spawner.clone();
                let teammate = name.clone();
                let rewound =
                    tokio::task::spawn_blocking(move || spawner.rewind_clone(&teammate, number))
                        .await
                        .unwrap_or_else(|e| Err(format!("rewind {name}'s clone: {e}")));
                let stopped = if was { "stopped" } else { "was not running" };
                match rewound {
                    Ok(text) => ToolOutput::ok(bounded(format!("{name} {stopped}; {text}"))),
                    Err(e) => {
                        ToolOutput::error(bounded(format!("{name} {stopped}; failed to {e}")))
                    }
                }
            }
            (Ok((name, true)), None) => ToolOutput::ok(bounded(format!(
                "stopped {name}; a message to it starts it again with its history"
            ))),
            (Ok((name, false)), None) => ToolOutput::ok(bounded(format!(
                "{name} was not running; a message to it starts it again"
            ))),
            (Err(e), _) => ToolOutput::error(bounded(format!("failed to {e}"))),
        }
    }
}
