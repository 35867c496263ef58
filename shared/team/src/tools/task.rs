//! TaskCreate, TaskGet, TaskList and TaskUpdate: the shared task list, for the model.
//!
//! Ownership follows the store (`docs/PROTOCOL.md` §6.3, §6.6): setting yourself as
//! owner (or a task you may take to `in_progress`) is an atomic claim, refused if
//! another member owns it; setting another member is an assignment, which also sends
//! that member a `task_assignment`. Who may change, give away or create what is the
//! store's one rule ([`roo_store::authority::may`], judged with the caller's name in
//! each write; TaskCreate asks it before creating a task for another member): only
//! the lead changes tasks it does not own. There is no way for the model to force a
//! change.

use roo_agent::tool::{Delegation, ToolContext, ToolKind, ToolOutput, TypedTool};
use roo_store::authority::TaskChange;
use roo_store::{
    ClaimOptions, ClaimOutcome, Name, NewTask, Task, TaskFilter, TaskId, TaskPatch, TaskStatus,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::budget::{task_ranks, within_budget};
use super::schema::{self, id_required};
use super::{TeamToolError, TeamTools, bounded, id_list, opt_id, parse_name, run_blocking};
use crate::event::one_line;

/// Most ready task ids TaskList names; the rest are counted.
pub const MAX_LISTED_TASKS: usize = 200;
/// Bytes of task lines TaskList shows (about 3,000 tokens, within [`super::MAX_TOOL_RESULT`]
/// with the rest of its result); the rest are counted, the most relevant kept.
pub const LIST_BUDGET: usize = 12 * 1024;
/// Bytes of TaskList's line of members.
const MEMBERS_BUDGET: usize = 2 * 1024;
/// Longest subject shown in a list line, in characters.
const SUBJECT_CHARS: usize = 120;
/// Newest notes TaskGet shows.
const SHOWN_NOTES: usize = 10;
/// Longest description TaskGet shows, in characters.
const DESCRIPTION_CHARS: usize = 8_000;

const STATUS_HELP: &str = "pending, in_progress or completed";

fn parse_id(tool: &'static str, raw: Option<&str>) -> Result<TaskId, TeamToolError> {
    let raw = raw.ok_or_else(|| TeamToolError::InvalidInput {
        tool,
        message: "`id` is missing: give the task id, e.g. \"3\"".into(),
    })?;
    TaskId::parse(raw).map_err(|e| TeamToolError::InvalidInput {
        tool,
        message: format!("`id`: {e}"),
    })
}

fn parse_ids(
    tool: &'static str,
    field: &str,
    raw: &[String],
) -> Result<Vec<TaskId>, TeamToolError> {
    raw.iter()
        .map(|id| {
            TaskId::parse(id).map_err(|e| TeamToolError::InvalidInput {
                tool,
                message: format!("`{field}`: {e}"),
            })
        })
        .collect()
}

fn parse_status(
    tool: &'static str,
    raw: Option<&str>,
) -> Result<Option<TaskStatus>, TeamToolError> {
    raw.map(|s| {
        TaskStatus::parse(s.trim()).ok_or_else(|| TeamToolError::InvalidInput {
            tool,
            message: format!("`status` {s:?} is not a status; use {STATUS_HELP}"),
        })
    })
    .transpose()
}

/// A field of the input as text (a string, or a number sent for an id).
fn field(input: &Value, key: &str) -> String {
    match input.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn ids(list: &[TaskId]) -> String {
    list.iter()
        .map(|id| format!("#{id}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One line per task: `#3 [pending] bob: Write the API (blocked by #1)`.
pub(crate) fn task_line(task: &Task) -> String {
    let owner = task.owner.as_ref().map_or("-", Name::as_str);
    let mut line = format!(
        "#{} [{}] {owner}: {}",
        task.id,
        task.status,
        one_line(&task.subject, SUBJECT_CHARS)
    );
    if !task.blocked_by.is_empty() {
        line.push_str(&format!(" (blocked by {})", ids(&task.blocked_by)));
    }
    line
}

fn task_detail(task: &Task) -> String {
    let mut out = task_line(task);
    if let Some(form) = &task.active_form {
        out.push_str(&format!("\nactive form: {}", one_line(form, SUBJECT_CHARS)));
    }
    if !task.blocks.is_empty() {
        out.push_str(&format!("\nblocks: {}", ids(&task.blocks)));
    }
    if !task.paths.is_empty() {
        let paths: Vec<String> = task
            .paths
            .iter()
            .take(20)
            .map(|p| one_line(p, 200))
            .collect();
        let more = task.paths.len().saturating_sub(20);
        out.push_str(&format!("\npaths: {}", paths.join(", ")));
        if more > 0 {
            out.push_str(&format!(" (+{more} more)"));
        }
    }
    if let Some(lease) = &task.lease {
        out.push_str(&format!(
            "\nlease: {} until {}",
            lease.owner, lease.expires_at
        ));
    }
    if !task.metadata.is_empty() {
        let meta = Value::Object(task.metadata.clone()).to_string();
        out.push_str(&format!("\nmetadata: {}", one_line(&meta, 2_000)));
    }
    if !task.usage.is_empty() {
        let total = task.usage_total();
        out.push_str(&format!(
            "\nusage: {} requests, {} input + {} output tokens",
            total.requests, total.input_tokens, total.output_tokens
        ));
    }
    // The notes before the description, and the description indented: a description
    // holding a `notes:` line cannot pass for the real section (its creator may be
    // another teammate than the note's author).
    let skip = task.notes.len().saturating_sub(SHOWN_NOTES);
    if !task.notes.is_empty() {
        out.push_str("\nnotes:");
        for note in &task.notes[skip..] {
            let by = note.by.as_ref().map_or(String::new(), |b| format!(" {b}"));
            out.push_str(&format!(
                "\n- {}{by}: {}",
                note.at,
                one_line(&note.text, 300)
            ));
        }
    }
    if !task.description.is_empty() {
        let description: String = task.description.chars().take(DESCRIPTION_CHARS).collect();
        out.push_str("\ndescription (each line indented by two spaces):");
        for line in description.lines() {
            out.push_str("\n  ");
            out.push_str(line);
        }
        if description.len() < task.description.len() {
            out.push_str("\n… (description cut)");
        }
    }
    out
}

/// Why a claim was refused, as the model reads it.
fn claim_refusal(id: &TaskId, outcome: ClaimOutcome) -> Result<Task, TeamToolError> {
    let refuse = |why: String| Err(TeamToolError::Refused(format!("claim task {id}: {why}")));
    match outcome {
        ClaimOutcome::Claimed(task) => Ok(*task),
        ClaimOutcome::AlreadyOwned { owner, status } => refuse(format!(
            "it is already owned by {owner} ({status}); pick another task (TaskList shows which \
             are ready) or ask {owner} with SendMessage"
        )),
        ClaimOutcome::Blocked { by } => refuse(format!(
            "it is blocked by unfinished tasks {}; finish those first",
            ids(&by)
        )),
        ClaimOutcome::NotPending { status } => refuse(format!(
            "it is {status}, not pending; reopen it with status pending first if it needs more work"
        )),
        ClaimOutcome::ScopeConflict { with, owner } => refuse(format!(
            "its paths overlap those of task #{with} in progress{}; wait for it or pick another \
             task",
            owner.map_or(String::new(), |o| format!(" by {o}"))
        )),
        ClaimOutcome::NotFound => refuse("there is no such task (see TaskList)".into()),
    }
}

// ---------------------------------------------------------------- TaskCreate

/// Creates a task in the team's list.
#[derive(Debug, Clone)]
pub struct TaskCreate {
    team: TeamTools,
}

impl TaskCreate {
    pub fn new(team: TeamTools) -> TaskCreate {
        TaskCreate { team }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateInput {
    /// One line ("Add the login endpoint").
    subject: String,
    /// What done means, files, hints.
    #[serde(default)]
    description: Option<String>,
    /// Shown while in progress ("Adding the login endpoint").
    #[serde(default)]
    active_form: Option<String>,
    /// Ids of tasks to finish first.
    #[serde(default, deserialize_with = "id_list")]
    blocked_by: Vec<String>,
    /// Ids of tasks waiting for this one: the same edge as their `blocked_by`, so
    /// accepted but not in the schema (one way to say it is enough).
    #[serde(default, deserialize_with = "id_list")]
    #[schemars(skip)]
    blocks: Vec<String>,
    /// Files or globs it touches, from the repo root; overlapping tasks never run at once.
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    /// Your name claims it; another member's assigns it.
    #[serde(default)]
    owner: Option<String>,
    /// Spending cap of the task in USD: once the model spend on it reaches it, whoever
    /// works on it stops and releases it.
    #[serde(default)]
    budget_usd: Option<f64>,
    /// Cap of the task in model requests, like `budget_usd`.
    #[serde(default)]
    budget_requests: Option<u64>,
}

const CREATE: &str = "TaskCreate";

impl TypedTool for TaskCreate {
    fn delegation(&self) -> Delegation {
        Delegation::BuiltInAgents
    }

    type Input = CreateInput;
    const NAME: &'static str = CREATE;

    fn description(&self) -> String {
        "Adds a task to the team's list. Split work by files, a few tasks per teammate; end \
         with a check task blocked_by the others."
            .to_string()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    async fn run(&self, input: CreateInput, ctx: &ToolContext) -> ToolOutput {
        match self.create(input, ctx).await {
            Ok(text) => ToolOutput::ok(bounded(text)),
            Err(e) => e.into_output(),
        }
    }
}

impl TaskCreate {
    async fn create(&self, input: CreateInput, ctx: &ToolContext) -> Result<String, TeamToolError> {
        if input.subject.trim().is_empty() {
            return Err(TeamToolError::InvalidInput {
                tool: CREATE,
                message: "`subject` is empty: say in one line what to do".into(),
            });
        }
        let new = NewTask {
            subject: input.subject.trim().to_string(),
            description: input.description.unwrap_or_default(),
            active_form: input.active_form.filter(|f| !f.trim().is_empty()),
            blocked_by: parse_ids(CREATE, "blocked_by", &input.blocked_by)?,
            blocks: parse_ids(CREATE, "blocks", &input.blocks)?,
            paths: input.paths,
            metadata: input.metadata.unwrap_or_default(),
            owner: None,
            by: None,
            budget: Some(roo_store::budget::SpendCap {
                usd: input.budget_usd,
                requests: input.budget_requests,
            })
            .filter(|cap| !cap.is_empty()),
        };
        let owner = input
            .owner
            .as_deref()
            .filter(|o| !o.trim().is_empty())
            .map(|o| parse_name(CREATE, "owner", o))
            .transpose()?;
        let binding = self.team.binding()?;
        let team = self.team.clone();
        run_blocking(CREATE, &ctx.cancel, move || {
            let tasks = binding.team.tasks();
            // Whether it may give the task that owner, before there is a task to give.
            tasks.authorize(
                Some(&binding.me),
                None,
                &TaskChange::Create {
                    owner: owner.as_ref(),
                },
            )?;
            let task = tasks.create(NewTask {
                by: Some(binding.me.clone()),
                ..new
            })?;
            let Some(owner) = owner else {
                return Ok(format!("created task {}", task_line(&task)));
            };
            let step = OwnerStep::of(&owner, &binding.me);
            match step.apply(&team, &binding, &task.id) {
                Ok((task, what)) => Ok(format!(
                    "created task #{} and {what}\n{}",
                    task.id,
                    task_line(&task)
                )),
                Err(e) => Err(TeamToolError::Refused(format!(
                    "set the owner of new task #{}: it was created ({}), but {e}",
                    task.id,
                    one_line(&task.subject, SUBJECT_CHARS)
                ))),
            }
        })
        .await
    }
}

/// What setting an owner means for the caller.
enum OwnerStep {
    /// Yourself: an atomic claim.
    Claim,
    /// Another member: an assignment with its `task_assignment`.
    Assign(Name),
}

impl OwnerStep {
    fn of(owner: &Name, me: &Name) -> OwnerStep {
        if owner == me {
            OwnerStep::Claim
        } else {
            OwnerStep::Assign(owner.clone())
        }
    }

    /// Blocking. Returns the task and what was done, for the result.
    fn apply(
        &self,
        team: &TeamTools,
        binding: &crate::binding::TeamBinding,
        id: &TaskId,
    ) -> Result<(Task, String), TeamToolError> {
        match self {
            OwnerStep::Claim => {
                let outcome =
                    binding
                        .team
                        .tasks()
                        .claim(id, &binding.me, &ClaimOptions::default())?;
                let task = claim_refusal(id, outcome)?;
                Ok((task, "claimed it (in_progress, yours)".to_string()))
            }
            OwnerStep::Assign(to) => {
                let assignment = binding
                    .team
                    .assign_task(id, to.as_str(), &binding.me, false)?;
                team.notify_sent(to);
                Ok((
                    assignment.task,
                    format!("assigned it to {to} (task_assignment sent)"),
                ))
            }
        }
    }
}

// ---------------------------------------------------------------- TaskGet

/// Shows one task in full.
#[derive(Debug, Clone)]
pub struct TaskGet {
    team: TeamTools,
}

impl TaskGet {
    pub fn new(team: TeamTools) -> TaskGet {
        TaskGet { team }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = id_required)]
pub struct IdInput {
    #[serde(default, alias = "task_id", deserialize_with = "opt_id")]
    #[schemars(with = "String")]
    id: Option<String>,
}

const GET: &str = "TaskGet";

impl TypedTool for TaskGet {
    type Input = IdInput;
    const NAME: &'static str = GET;

    fn description(&self) -> String {
        "Shows a task in full, with its latest notes.".to_string()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    async fn run(&self, input: IdInput, ctx: &ToolContext) -> ToolOutput {
        let result = async {
            let id = parse_id(GET, input.id.as_deref())?;
            let binding = self.team.binding()?;
            run_blocking(GET, &ctx.cancel, move || {
                Ok(task_detail(&binding.team.tasks().get(&id)?))
            })
            .await
        }
        .await;
        match result {
            Ok(text) => ToolOutput::ok(bounded(text)),
            Err(e) => e.into_output(),
        }
    }
}

// ---------------------------------------------------------------- TaskList

/// Lists the team's tasks, one line each, and which are ready.
#[derive(Debug, Clone)]
pub struct TaskList {
    team: TeamTools,
}

impl TaskList {
    pub fn new(team: TeamTools) -> TaskList {
        TaskList { team }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    #[serde(default)]
    #[schemars(schema_with = "schema::status")]
    status: Option<String>,
    /// Only this member's tasks.
    #[serde(default)]
    owner: Option<String>,
}

const LIST: &str = "TaskList";

impl TypedTool for TaskList {
    type Input = ListInput;
    const NAME: &'static str = LIST;

    fn description(&self) -> String {
        "Lists the tasks (which are ready to claim) and the members' states.".to_string()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    async fn run(&self, input: ListInput, ctx: &ToolContext) -> ToolOutput {
        let result = async {
            let filter = TaskFilter {
                status: parse_status(LIST, input.status.as_deref())?,
                owner: input
                    .owner
                    .as_deref()
                    .filter(|o| !o.trim().is_empty())
                    .map(|o| parse_name(LIST, "owner", o))
                    .transpose()?,
            };
            let binding = self.team.binding()?;
            run_blocking(LIST, &ctx.cancel, move || {
                let tasks = binding.team.tasks();
                let list = tasks.list(&filter)?;
                let report = tasks.ready_report()?;
                let config = binding.team.config()?;
                let liveness = binding.team.liveness(&config)?;
                let members = members_line(&config, &liveness, &binding.me);
                Ok(render_list(
                    binding.team.name(),
                    &members,
                    &list,
                    &report,
                    &binding.me,
                ))
            })
            .await
        }
        .await;
        match result {
            Ok(text) => ToolOutput::ok(bounded(text)),
            Err(e) => e.into_output(),
        }
    }
}

/// The team's members with their observed states, for SendMessage: `lead (lead), alice
/// (busy), bob (idle, you)`.
fn members_line(
    config: &roo_store::TeamConfig,
    liveness: &roo_store::Liveness,
    me: &Name,
) -> String {
    let members: Vec<(u8, String)> = config
        .members
        .iter()
        .map(|m| {
            let lead = config.is_lead(m.name.as_str());
            let state = if lead {
                "lead"
            } else {
                liveness.observed_state(m).label()
            };
            let you = if m.name == *me { ", you" } else { "" };
            let rank = u8::from(!lead && m.name != *me);
            (rank, format!("{} ({state}{you}),", m.name))
        })
        .collect();
    let (shown, more) = within_budget(members, MEMBERS_BUDGET);
    let mut line = shown.join(" ");
    line.pop();
    if more > 0 {
        line.push_str(&format!(
            " and {more} more (`roo-mail list --team {}` lists them all)",
            config.name
        ));
    }
    line
}

/// TaskList's result: the count, the members (first, so no cut can drop them), what is
/// ready, then the task lines — each [made safe](roo_store::model_safe) before it is
/// measured against [`LIST_BUDGET`], ranked by [`task_ranks`] — and how many were left
/// out.
fn render_list(
    team: &Name,
    members: &str,
    list: &[Task],
    report: &roo_store::ReadyReport,
    me: &Name,
) -> String {
    let ready: Vec<TaskId> = report.ready.iter().map(|t| t.id.clone()).collect();
    let mut out = format!("tasks of team {team}: {}", list.len());
    if list.is_empty() {
        out.push_str(" (none yet; TaskCreate adds one)");
    }
    out.push_str(&format!("\nmembers: {members}"));
    out.push_str(&format!(
        "\nready: {}",
        if ready.is_empty() {
            "none".to_string()
        } else {
            let mut shown = ids(&ready[..ready.len().min(MAX_LISTED_TASKS)]);
            if ready.len() > MAX_LISTED_TASKS {
                shown.push_str(&format!(" (+{} more)", ready.len() - MAX_LISTED_TASKS));
            }
            shown
        }
    ));
    if !report.held_back.is_empty() {
        let held: Vec<String> = report
            .held_back
            .iter()
            .take(20)
            .map(|(t, with)| format!("#{} (paths overlap #{with})", t.id))
            .collect();
        out.push_str(&format!("\nheld back by scope: {}", held.join(", ")));
    }
    let all: Vec<&Task> = list.iter().collect();
    let lines: Vec<((bool, usize, u8), String)> = list
        .iter()
        .zip(task_ranks(&all, Some(me)))
        .map(|(task, rank)| {
            let mut line = task_line(task);
            if ready.contains(&task.id) {
                line.push_str(" [ready]");
            }
            (rank, roo_store::model_safe(&line))
        })
        .collect();
    // What precedes the lines (members, ready ids, held back) and the closing count
    // fit with them in one tool result, whatever their size: nothing is cut off the end.
    let budget = LIST_BUDGET.min(super::MAX_TOOL_RESULT.saturating_sub(out.len() + 300));
    let (shown, more) = within_budget(lines, budget);
    for line in shown {
        out.push('\n');
        out.push_str(&line);
    }
    if more > 0 {
        out.push_str(&format!(
            "\n… {more} more tasks not shown (yours first, then in progress, blocked, pending; at \
             most five of another owner's before the rest): filter \
             by status or owner, or TaskGet one by id"
        ));
    }
    out
}

// ---------------------------------------------------------------- TaskUpdate

/// Changes a task: claims, assigns, releases, completes, edits, links.
#[derive(Debug, Clone)]
pub struct TaskUpdate {
    team: TeamTools,
}

impl TaskUpdate {
    pub fn new(team: TeamTools) -> TaskUpdate {
        TaskUpdate { team }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = id_required)]
pub struct UpdateInput {
    #[serde(default, alias = "task_id", deserialize_with = "opt_id")]
    #[schemars(with = "String")]
    id: Option<String>,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    active_form: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "schema::status")]
    status: Option<String>,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default, deserialize_with = "id_list")]
    add_blocked_by: Vec<String>,
    /// Accepted, not in the schema: the same edge as the other task's `add_blocked_by`.
    #[serde(default, deserialize_with = "id_list")]
    #[schemars(skip)]
    add_blocks: Vec<String>,
    #[serde(default, deserialize_with = "id_list")]
    remove_blocked_by: Vec<String>,
    /// Accepted, not in the schema: the same edge as the other task's
    /// `remove_blocked_by`.
    #[serde(default, deserialize_with = "id_list")]
    #[schemars(skip)]
    remove_blocks: Vec<String>,
    /// Replaces its paths.
    #[serde(default)]
    paths: Option<Vec<String>>,
    /// Merged; a null value deletes a key.
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
}

const UPDATE: &str = "TaskUpdate";

impl TypedTool for TaskUpdate {
    fn delegation(&self) -> Delegation {
        Delegation::BuiltInAgents
    }

    type Input = UpdateInput;
    const NAME: &'static str = UPDATE;

    fn description(&self) -> String {
        "Changes a task. Claim: `owner` your name, or `status` in_progress if unowned \
         (atomic). Assign: `owner` another member (told by message). Release: `owner` \"\". \
         Finish: `status` completed, once checked."
            .to_string()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    fn summarize(&self, input: &Value) -> Option<String> {
        let mut parts = vec![format!("#{}", one_line(&field(input, "id"), 20))];
        for key in ["owner", "status"] {
            if let Some(value) = input.get(key).and_then(Value::as_str) {
                parts.push(format!("{key}={}", one_line(value, 64)));
            }
        }
        Some(format!("{UPDATE}({})", parts.join(" ")))
    }

    async fn run(&self, input: UpdateInput, ctx: &ToolContext) -> ToolOutput {
        match self.update(input, ctx).await {
            Ok(text) => ToolOutput::ok(bounded(text)),
            Err(e) => e.into_output(),
        }
    }
}

/// The owner field as given: absent, "" (release) or a name.
enum OwnerChange {
    Keep,
    Release,
    Set(Name),
}

impl TaskUpdate {
    async fn update(&self, input: UpdateInput, ctx: &ToolContext) -> Result<String, TeamToolError> {
        let id = parse_id(UPDATE, input.id.as_deref())?;
        let status = parse_status(UPDATE, input.status.as_deref())?;
        let owner = match input.owner.as_deref().map(str::trim) {
            None => OwnerChange::Keep,
            Some("") => OwnerChange::Release,
            Some(name) => OwnerChange::Set(parse_name(UPDATE, "owner", name)?),
        };
        if let Some(subject) = &input.subject
            && subject.trim().is_empty()
        {
            return Err(TeamToolError::InvalidInput {
                tool: UPDATE,
                message: "`subject` is empty".into(),
            });
        }
        let mut patch = TaskPatch {
            subject: input.subject,
            description: input.description,
            active_form: input.active_form,
            status,
            add_blocked_by: parse_ids(UPDATE, "add_blocked_by", &input.add_blocked_by)?,
            add_blocks: parse_ids(UPDATE, "add_blocks", &input.add_blocks)?,
            remove_blocked_by: parse_ids(UPDATE, "remove_blocked_by", &input.remove_blocked_by)?,
            remove_blocks: parse_ids(UPDATE, "remove_blocks", &input.remove_blocks)?,
            paths: input.paths,
            metadata: input.metadata.unwrap_or_default(),
            ..TaskPatch::default()
        };
        // Edits besides owner and status.
        let edits = patch.subject.is_some()
            || patch.description.is_some()
            || patch.active_form.is_some()
            || !patch.add_blocked_by.is_empty()
            || !patch.add_blocks.is_empty()
            || !patch.remove_blocked_by.is_empty()
            || !patch.remove_blocks.is_empty()
            || patch.paths.is_some()
            || !patch.metadata.is_empty();
        let nothing_else = !edits && patch.status.is_none();
        if nothing_else && matches!(owner, OwnerChange::Keep) {
            return Err(TeamToolError::InvalidInput {
                tool: UPDATE,
                message: "nothing to change: give `owner`, `status` or a field to edit".into(),
            });
        }
        let binding = self.team.binding()?;
        let team = self.team.clone();
        run_blocking(UPDATE, &ctx.cancel, move || {
            let tasks = binding.team.tasks();
            let current = tasks.get(&id)?;
            let mine_or_free = current.owner.as_ref().is_none_or(|o| *o == binding.me);
            // Setting yourself, or starting an unowned task, is a claim; another member
            // is an assignment; "" releases it back to pending.
            let step = match &owner {
                OwnerChange::Set(name) => Some(OwnerStep::of(name, &binding.me)),
                OwnerChange::Keep
                    if patch.status == Some(TaskStatus::InProgress)
                        && current.status != TaskStatus::InProgress
                        && mine_or_free =>
                {
                    Some(OwnerStep::Claim)
                }
                _ => None,
            };
            if matches!(owner, OwnerChange::Release) {
                patch.owner = Some(None);
                if patch.status.is_none() && current.status == TaskStatus::InProgress {
                    patch.status = Some(TaskStatus::Pending);
                }
            }
            let mut done = Vec::new();
            let mut task = current;
            if let Some(step) = step {
                let (after, what) = step.apply(&team, &binding, &id)?;
                if matches!(step, OwnerStep::Claim) && patch.status == Some(TaskStatus::InProgress)
                {
                    patch.status = None;
                }
                task = after;
                done.push(what);
            }
            let patch_changes = patch.owner.is_some() || patch.status.is_some() || edits;
            if patch_changes {
                patch.by = Some(binding.me.clone());
                match tasks.update(&id, patch) {
                    Ok(after) => {
                        task = after;
                        done.push("updated it".to_string());
                    }
                    Err(e) if !done.is_empty() => {
                        return Err(TeamToolError::Refused(format!(
                            "update task #{id}: it was changed ({}), but the rest was refused: \
                             failed to {e}",
                            done.join(", ")
                        )));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(format!(
                "task #{id}: {}\n{}",
                done.join(", "),
                task_line(&task)
            ))
        })
        .await
    }
}
