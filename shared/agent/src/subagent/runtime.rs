//! Starting and running one sub-agent: the parent's parts, the child's registry and
//! scopes, its own tokio task and cancellation, and the result the parent reads.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use futures_util::FutureExt;
use roo_llm::Provider;
use tokio::sync::{Mutex as AsyncMutex, Semaphore};
use tokio_util::sync::CancellationToken;

use super::approver::ChildApprover;
use super::tasks::{BackgroundTasks, Started, TaskEnd, TaskNotifications, TaskStatus};
use super::tool::{AgentInput, SubagentTool, TaskStopTool};
use super::{filter, fork, model};
use crate::agent_loop::{Agent, AgentOptions, RunResult, SharedPolicy};
use crate::agents::{AgentCatalog, AgentDefinition, Source};
use crate::config::{SubagentLimits, strictness};
use crate::event::{AgentEvent, EventSink, Outcome};
use crate::hooks::AgentHook;
use crate::permissions::{Approver, PermissionMode};
use crate::prompt::{Environment, Persona, system_prompt};
use crate::session::Session;
use crate::skills::Skills;
use crate::tool::{ToolContext, ToolOutput, ToolRegistry, ToolScope, WeakToolRegistry};
use crate::tools::spill_if_large;

/// What a sub-agent takes from the agent that starts it. The builder hands these in;
/// the Agent tool never learns whether its agent is a lead, a teammate or a sub-agent.
#[derive(Clone)]
pub struct ParentParts {
    pub provider: Arc<dyn Provider>,
    /// The parent's policy: shared when the child has the same mode (one "always
    /// allow" ledger), copied with a stricter mode otherwise.
    pub policy: SharedPolicy,
    /// Answers a foreground child's questions (the human, for a lead).
    pub approver: Arc<dyn Approver>,
    /// The parent's tool context: working directory, session directory, environment,
    /// sandbox, read filter.
    pub context: ToolContext,
    /// The parent's options (model, output budget, prices, turns).
    pub options: AgentOptions,
    /// What a definition-based child's system prompt says about its environment.
    pub environment: Environment,
    /// The project instructions (`ROOCODE.md`), a definition-based child's first
    /// reminder.
    pub instructions: Option<String>,
    /// Hooks that run inside children too (the config's command hooks).
    pub lifecycle: Vec<Arc<dyn AgentHook>>,
    /// The parent's skills; a child gets its own LoadSkill over the same catalog.
    pub skills: Option<Skills>,
    pub plan_file: PathBuf,
    /// The agent definitions, re-read at each call.
    pub catalog: AgentCatalog,
    /// Makes worktrees for `isolation: worktree`; `None`: not available here.
    pub worktrees: Option<Arc<dyn super::WorktreeIsolation>>,
}

/// The agent type that runs fork-mode skills.
pub const SKILL_AGENT: &str = "general-purpose";

/// The sub-agent machinery of one agent: what its Agent tool calls. Cheap to clone.
#[derive(Clone)]
pub struct SubagentRuntime {
    inner: Arc<Inner>,
}

struct Inner {
    parts: ParentParts,
    /// The owning agent's registry (weak: its Agent tool holds this runtime).
    registry: WeakToolRegistry,
    shared: Arc<Shared>,
    /// Depth of the owning agent: 0 for a lead, teammate or worker.
    depth: u32,
    /// Which agent's notifications are whose.
    owner: u64,
    /// The owning agent is a fork.
    fork: bool,
    /// The top-level runtime's: when its agent is gone (a teammate stopped and
    /// dropped), every child of the session is cancelled, its commands killed.
    _lifetime: Option<tokio_util::sync::DropGuard>,
}

/// A [`SubagentRuntime`] handle that does not keep it alive (what its agent's skills
/// keep, since the runtime keeps the skills).
#[derive(Clone)]
pub struct WeakSubagentRuntime(Weak<Inner>);

impl WeakSubagentRuntime {
    pub fn upgrade(&self) -> Option<SubagentRuntime> {
        self.0.upgrade().map(|inner| SubagentRuntime { inner })
    }
}

/// What every runtime of a session shares (all depths).
struct Shared {
    limits: SubagentLimits,
    slots: Arc<Semaphore>,
    started: AtomicU32,
    tasks: BackgroundTasks,
    next_owner: AtomicU64,
    ask_lock: Arc<AsyncMutex<()>>,
    /// Parent of every child's own token: cancelled when the session ends.
    session: CancellationToken,
}

/// One child to start, as decided from the call.
pub(crate) struct Launch {
    pub input: AgentInput,
    /// Layer 4 for a fork skill (its `allowed_tools`); a definition brings its own.
    pub extra_scope: Option<ToolScope>,
    /// Tools only this child gets (a fork skill's own `tool.json` tools).
    pub extra_tools: Vec<Arc<dyn crate::tool::Tool>>,
}

impl SubagentRuntime {
    /// The runtime of a top-level agent (lead, teammate, worker) whose tools are
    /// `registry`. Register [`SubagentRuntime::tools`] there and add
    /// [`SubagentRuntime::notifications`] to the agent as a turn hook.
    pub fn new(parts: ParentParts, limits: SubagentLimits, registry: &ToolRegistry) -> Self {
        let shared = Arc::new(Shared {
            slots: Arc::new(Semaphore::new(limits.max_concurrent.max(1))),
            limits,
            started: AtomicU32::new(0),
            tasks: BackgroundTasks::new(),
            next_owner: AtomicU64::new(1),
            ask_lock: Arc::new(AsyncMutex::new(())),
            session: CancellationToken::new(),
        });
        let lifetime = shared.session.clone().drop_guard();
        Self {
            inner: Arc::new(Inner {
                parts,
                registry: registry.downgrade(),
                shared,
                depth: 0,
                owner: 0,
                fork: false,
                _lifetime: Some(lifetime),
            }),
        }
    }

    /// A handle that does not keep the runtime alive.
    pub fn downgrade(&self) -> WeakSubagentRuntime {
        WeakSubagentRuntime(Arc::downgrade(&self.inner))
    }

    /// Runs a fork-mode skill: a general-purpose sub-agent with the skill's expanded
    /// body as its prompt and the skill's `allowed_tools` as its layer 4.
    pub async fn run_skill(
        &self,
        skill: &crate::skills::Skill,
        arguments: &str,
        ctx: &ToolContext,
    ) -> ToolOutput {
        let scope = match crate::skills::SkillScopes::scope_of(skill) {
            Ok(scope) => scope,
            Err(e) => return ToolOutput::error(format!("failed to load skill: {e}")),
        };
        let input = AgentInput {
            description: Some(format!("skill {}", skill.name)),
            prompt: crate::skills::expand(skill, arguments),
            subagent_type: Some(SKILL_AGENT.to_string()),
            model: None,
            run_in_background: false,
            name: None,
            isolation: None,
        };
        self.call(
            Launch {
                input,
                extra_scope: scope,
                extra_tools: crate::skills::SkillTool::of(skill)
                    .into_iter()
                    .map(|t| Arc::new(t) as Arc<dyn crate::tool::Tool>)
                    .collect(),
            },
            ctx,
        )
        .await
    }

    /// The Agent and TaskStop tools bound to this runtime.
    pub fn tools(&self) -> (Arc<SubagentTool>, Arc<TaskStopTool>) {
        (
            Arc::new(SubagentTool::new(self.clone())),
            Arc::new(TaskStopTool::new(
                self.inner.shared.tasks.clone(),
                (self.inner.depth > 0).then_some(self.inner.owner),
            )),
        )
    }

    /// The turn hook delivering this agent's task notifications.
    pub fn notifications(&self) -> Arc<TaskNotifications> {
        Arc::new(TaskNotifications::new(
            self.inner.shared.tasks.clone(),
            self.inner.owner,
        ))
    }

    /// The session's tasks (all depths), for `/tasks` and TaskStop.
    pub fn tasks(&self) -> &BackgroundTasks {
        &self.inner.shared.tasks
    }

    /// The limits in force.
    pub fn limits(&self) -> &SubagentLimits {
        &self.inner.shared.limits
    }

    /// The agent definitions.
    pub fn catalog(&self) -> &AgentCatalog {
        &self.inner.parts.catalog
    }

    /// Moves every sub-agent a foreground call is waiting for to the background (the
    /// user's key for it); returns how many. They keep their progress; their results
    /// arrive as notifications. Nothing moves when background runs are switched off.
    pub fn detach_foreground(&self) -> usize {
        if !self.inner.shared.limits.background {
            return 0;
        }
        self.inner.shared.tasks.detach_foreground()
    }

    /// Whether this agent's notifications wait for its next turn.
    pub fn has_pending(&self) -> bool {
        self.inner.shared.tasks.has_pending(self.inner.owner)
    }

    /// Ends the session's sub-agents: cancels every running one (their commands are
    /// killed) and waits until all have ended.
    pub async fn shutdown(&self) {
        self.inner.shared.session.cancel();
        self.inner.shared.tasks.cancel_all();
        self.inner.shared.tasks.wait_all().await;
    }

    /// Runs one Agent call; every failure is an error result.
    pub(crate) async fn call(&self, launch: Launch, ctx: &ToolContext) -> ToolOutput {
        match self.start(launch, ctx).await {
            Ok(running) => self.wait(running, ctx).await,
            Err(message) => ToolOutput::error(format!("failed to {message}")),
        }
    }

    async fn start(&self, launch: Launch, ctx: &ToolContext) -> Result<Running, String> {
        let Launch {
            input,
            extra_scope,
            extra_tools,
        } = launch;
        let inner = &self.inner;
        let shared = &inner.shared;
        let limits = &shared.limits;
        let prompt = input.prompt.trim().to_string();
        if prompt.is_empty() {
            return Err("start a sub-agent: `prompt` is empty; say what it should do".into());
        }
        let registry = inner
            .registry
            .upgrade()
            .ok_or("start a sub-agent: the agent that owns it has ended")?;
        let is_fork = input.subagent_type.is_none();
        if is_fork
            && (inner.fork
                || ctx
                    .conversation
                    .as_ref()
                    .is_some_and(|c| fork::is_fork_context(&c.messages)))
        {
            return Err(
                "fork: this agent is itself a fork, and a fork cannot fork again; do the work \
                 yourself with your tools"
                    .into(),
            );
        }
        if inner.depth >= limits.max_depth {
            return Err(format!(
                "start a sub-agent: the nesting depth limit (agents.max_depth = {}) is reached",
                limits.max_depth
            ));
        }
        if input.run_in_background && !limits.background {
            return Err(
                "start a background sub-agent: background sub-agents are disabled \
                 (agents.background: false); call Agent again without run_in_background"
                    .into(),
            );
        }
        let mut notes = Vec::new();
        let definition = match &input.subagent_type {
            Some(kind) => Some(self.definition(kind).await?),
            None => None,
        };
        let agent_type = definition
            .as_ref()
            .map(|d| d.name.clone())
            .unwrap_or_else(|| "fork".to_string());
        let model = model::resolve(
            input
                .model
                .as_deref()
                .or(definition.as_ref().and_then(|d| d.model.as_deref())),
            inner.parts.provider.name(),
            &inner.parts.options.model,
        )?;
        let parent_mode = inner
            .parts
            .policy
            .read()
            .map(|p| p.mode())
            .unwrap_or(PermissionMode::DontAsk);
        let mode = child_mode(parent_mode, definition.as_ref(), &mut notes);
        let isolated = input.isolation.is_some()
            || definition
                .as_ref()
                .is_some_and(|d| d.isolation == Some(crate::agents::Isolation::Worktree));
        let worktrees = match (isolated, &inner.parts.worktrees) {
            (false, _) => None,
            (true, Some(worktrees)) => Some(worktrees.clone()),
            (true, None) => {
                return Err(
                    "start a sub-agent in a worktree: this agent cannot make worktrees \
                     (it is not in a git repository it owns); call Agent again without \
                     `isolation`"
                        .into(),
                );
            }
        };
        let background = if input.run_in_background {
            true
        } else if definition.as_ref().is_some_and(|d| d.background) {
            if !limits.background {
                notes.push(format!(
                    "agent type {agent_type} asks to run in the background, which is disabled \
                     (agents.background: false); it ran in the foreground"
                ));
            }
            limits.background
        } else {
            false
        };
        // The fork's inputs, checked before anything is started.
        let fork_start = if is_fork {
            let snapshot = ctx.conversation.as_ref().ok_or(
                "fork: the conversation that made this call is not available; name a \
                 `subagent_type` instead",
            )?;
            let history = fork::fork_history(&snapshot.messages)
                .ok_or("fork: the conversation does not end with the call that forks")?;
            Some((snapshot.system.clone(), snapshot.tools.clone(), history))
        } else {
            None
        };

        // The per-session cap counts every start.
        let per_session = limits.max_per_session;
        shared
            .started
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < per_session).then_some(n + 1)
            })
            .map_err(|_| {
                format!(
                    "start a sub-agent: this session already started {per_session}, the most \
                     it may (agents.max_per_session)"
                )
            })?;

        let cancel = shared.session.child_token();
        let started = shared.tasks.start(
            inner.owner,
            input.name.clone(),
            agent_type.clone(),
            input.description.clone().unwrap_or_default(),
            background,
            cancel.clone(),
            Some(ctx.events.clone()),
        );
        let id = started.id.clone();

        // The child's registry, its own Agent tool, skills and the four layers.
        let child_registry = registry.detached();
        let child_depth = inner.depth + 1;
        let depth_reached = child_depth >= limits.max_depth;
        let child_runtime = SubagentRuntime {
            inner: Arc::new(Inner {
                parts: inner.parts.clone(),
                registry: child_registry.downgrade(),
                shared: shared.clone(),
                depth: child_depth,
                owner: shared.next_owner.fetch_add(1, Ordering::SeqCst),
                fork: is_fork,
                _lifetime: None,
            }),
        };
        // The child's own Agent and TaskStop replace its parent's (which would start
        // children as the parent, and keep the parent's runtime alive); at the depth
        // limit layer 1 refuses them.
        let (agent_tool, stop_tool) = child_runtime.tools();
        child_registry.register(agent_tool);
        child_registry.register(stop_tool);
        for tool in extra_tools {
            child_registry.register(tool);
        }
        let child_skills = inner
            .parts
            .skills
            .as_ref()
            .map(|s| s.for_registry(&child_registry));
        if let Some(skills) = &child_skills
            && !depth_reached
        {
            skills.set_fork_runtime(Box::new(child_runtime.downgrade()));
        }
        let scopes = layers(
            depth_reached,
            definition.as_ref(),
            extra_scope,
            background,
            &child_registry,
        );
        // A child that cannot start still ends in the task table, with why.
        let failed = |message: String| {
            shared.tasks.finish(
                started.number,
                TaskEnd {
                    status: TaskStatus::Failed,
                    result: message.clone(),
                    turns: 0,
                },
            );
            message
        };
        let scopes = scopes.map_err(|e| failed(format!("start agent type {agent_type}: {e}")))?;
        for scope in scopes {
            child_registry.narrow(scope);
        }

        let workspace = match &worktrees {
            Some(worktrees) => Some(
                worktrees
                    .create(&id)
                    .await
                    .map_err(|e| failed(format!("start sub-agent {id} in a worktree: {e}")))?,
            ),
            None => None,
        };
        let policy = if let Some(workspace) = &workspace {
            // Rooted at the worktree: its tools cannot write into the parent's tree.
            let mut policy = workspace.policy.clone();
            policy.set_mode(mode);
            Arc::new(std::sync::RwLock::new(policy))
        } else if mode == parent_mode {
            inner.parts.policy.clone()
        } else {
            let mut policy = inner
                .parts
                .policy
                .read()
                .map_err(|_| "start a sub-agent: the permission policy is unavailable")?
                .clone();
            policy.set_mode(mode);
            Arc::new(std::sync::RwLock::new(policy))
        };
        let approver = Arc::new(ChildApprover::new(
            inner.parts.approver.clone(),
            shared.ask_lock.clone(),
            started.background.clone(),
            format!("sub-agent {id} ({agent_type})"),
        ));

        let (system, messages, run_input, pinned) = match (fork_start, &definition) {
            (Some((system, tools, history)), _) => {
                (system, history, fork::directive(&prompt), Some(tools))
            }
            (None, Some(def)) => (
                role_system(
                    def,
                    &environment_in(&inner.parts.environment, workspace.as_ref()),
                ),
                Vec::new(),
                prompt.clone(),
                None,
            ),
            // A call without a type is a fork; with one, the definition was resolved.
            (None, None) => return Err("start a sub-agent: no definition and no fork".into()),
        };
        let options = AgentOptions {
            agent_name: agent_type.clone(),
            model,
            max_turns: definition
                .as_ref()
                .and_then(|d| d.max_turns)
                .unwrap_or(inner.parts.options.max_turns),
            pinned_tools: pinned,
            // The lead checked the server it shares with its sub-agents.
            check_server_window: false,
            ..inner.parts.options.clone()
        };
        let mut context = ToolContext {
            conversation: None,
            events: EventSink::discard(),
            ..inner.parts.context.clone()
        };
        if let Some(workspace) = &workspace {
            context.cwd = workspace.dir.clone();
            if let Some(sandbox) = &workspace.sandbox {
                context.launcher.sandbox = Some(sandbox.clone());
            }
        }
        let transcript = context
            .session_dir
            .join("subagents")
            .join(format!("{id}.jsonl"));
        let mut agent = Agent::new(
            inner.parts.provider.clone(),
            child_registry.clone(),
            policy,
            approver,
            system,
            context.clone(),
            options,
            inner.parts.plan_file.clone(),
        );
        agent = match Session::create(transcript.clone(), id.clone(), &context.cwd, &agent_type) {
            Ok(session) => agent.with_session(session, messages),
            Err(e) => {
                tracing::warn!(path = %transcript.display(), error = %e, "sub-agent transcript not written");
                agent.with_messages(messages)
            }
        };
        if definition.is_some() {
            agent.set_instructions(inner.parts.instructions.clone());
        }
        for hook in &inner.parts.lifecycle {
            agent.add_hook(hook.clone());
        }
        if let Some(skills) = child_skills {
            agent.add_hook(Arc::new(skills.scopes));
        }
        if !depth_reached {
            agent.add_hook(child_runtime.notifications());
        }

        ctx.events.emit(AgentEvent::SubagentStart {
            id: id.clone(),
            agent_type: agent_type.clone(),
            description: input.description.clone().unwrap_or_default(),
            background,
        });
        let isolation = worktrees.zip(workspace);
        self.spawn(agent, run_input, &started, agent_type.clone(), isolation);
        Ok(Running {
            started,
            registry: child_registry,
            agent_type,
            background,
            notes,
            name: input.name,
        })
    }

    async fn definition(&self, kind: &str) -> Result<AgentDefinition, String> {
        let catalog = self.inner.parts.catalog.clone();
        let scan = tokio::task::spawn_blocking(move || catalog.scan())
            .await
            .map_err(|e| format!("read the agent definitions: {e}"))?;
        for warning in &scan.warnings {
            tracing::warn!("{warning}");
        }
        scan.get(kind).cloned().ok_or_else(|| {
            let names: Vec<&str> = scan.agents.values().map(|d| d.name.as_str()).collect();
            format!(
                "start a sub-agent: there is no agent type \"{kind}\". Available types: {}; or \
                 leave out subagent_type to fork yourself",
                names.join(", ")
            )
        })
    }

    /// Runs the child in its own task; its end (or panic) goes to the task table.
    fn spawn(
        &self,
        mut agent: Agent,
        input: String,
        started: &Started,
        agent_type: String,
        isolation: Option<(Arc<dyn super::WorktreeIsolation>, super::IsolatedWorkspace)>,
    ) {
        let shared = self.inner.shared.clone();
        let number = started.number;
        let id = started.id.clone();
        let cancel = started.cancel.clone();
        let (sink, mut rx) = EventSink::channel();
        let tasks = shared.tasks.clone();
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                match event {
                    AgentEvent::ToolStart { summary, .. } => tasks.tool_started(number, summary),
                    AgentEvent::Usage { turn, .. } => tasks.add_usage(number, &turn),
                    _ => {}
                }
            }
        });
        let limit = shared.limits.max_result_chars;
        // Only where to spill: the parent's events and conversation are not kept
        // alive by a child that outlives the call.
        let spill = ToolContext {
            max_result_chars: limit,
            conversation: None,
            events: EventSink::discard(),
            ..self.inner.parts.context.clone()
        };
        let waiting_events = started.progress.clone();
        let weak: Weak<Shared> = Arc::downgrade(&shared);
        tokio::spawn(async move {
            let slots = shared.slots.clone();
            let permit = match slots.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    waiting_events.emit(AgentEvent::Notice {
                        text: format!(
                            "sub-agent {id} waits for a free slot ({} running, agents.max_concurrent)",
                            shared.limits.max_concurrent
                        ),
                    });
                    tokio::select! {
                        permit = slots.acquire_owned() => permit.ok(),
                        () = cancel.cancelled() => None,
                    }
                }
            };
            drop(waiting_events);
            let begun = Instant::now();
            let end = if permit.is_none() {
                TaskEnd {
                    status: TaskStatus::Killed,
                    result: format!("sub-agent {id} was stopped before it started"),
                    turns: 0,
                }
            } else {
                let run = AssertUnwindSafe(agent.run(&input, &sink, cancel.clone()))
                    .catch_unwind()
                    .await;
                drop(sink);
                match run {
                    Ok(result) => report(&id, &agent_type, &result, begun, &spill),
                    Err(panic) => TaskEnd {
                        status: TaskStatus::Failed,
                        result: format!(
                            "sub-agent {id} ({agent_type}) failed: it panicked ({}); the parent goes on",
                            panic_message(panic.as_ref())
                        ),
                        turns: 0,
                    },
                }
            };
            drop(permit);
            drop(agent);
            let mut end = end;
            if let Some((worktrees, workspace)) = isolation {
                // No changes: the worktree goes; else the parent learns where they are.
                match worktrees.finish(&workspace).await {
                    None => end.result.push_str(&format!(
                        "\n(worked in worktree {} on branch {}; it left no changes, so the \
                         worktree was removed)",
                        workspace.dir.display(),
                        workspace.branch
                    )),
                    Some(kept) => end.result.push_str(&format!("\n{kept}")),
                }
            }
            if let Some(shared) = weak.upgrade() {
                shared.tasks.finish(number, end);
            }
        });
    }

    /// Waits for a foreground child, moves it to the background after the
    /// threshold, or returns at once for a background one.
    async fn wait(&self, running: Running, ctx: &ToolContext) -> ToolOutput {
        let Running {
            mut started,
            registry,
            agent_type,
            background,
            notes,
            name,
        } = running;
        let tasks = &self.inner.shared.tasks;
        let id = started.id.clone();
        let name_part = name.map(|n| format!(" ({n})")).unwrap_or_default();
        let moved = |how: &str| {
            let mut text = format!(
                "{how} background task {id}{name_part} ({agent_type}). Its result arrives as a \
                 <task-notification> at the top of a later turn; do not wait or poll for it. \
                 Stop it with TaskStop {{\"task_id\": \"{id}\"}}."
            );
            for note in &notes {
                text.push_str(&format!("\nnote: {note}"));
            }
            ToolOutput::ok(text)
        };
        if background {
            return moved("Started");
        }
        let limits = &self.inner.shared.limits;
        let threshold = limits.auto_background.filter(|_| limits.background);
        let after_threshold = async {
            match threshold {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending().await,
            }
        };
        // The user's key moves foreground children to the background, unless
        // background runs are switched off.
        let detach = async {
            if limits.background {
                tasks.detach_requested().await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        let how = tokio::select! {
            end = &mut started.done => Err(end),
            () = ctx.cancel.cancelled() => {
                started.cancel.cancel();
                Err((&mut started.done).await)
            }
            () = after_threshold => Ok("Still running after the auto-background threshold \
                                        (agents.auto_background_secs); it continues with its \
                                        progress as"),
            () = detach => Ok("The user moved it to the background; it continues with its \
                               progress as"),
        };
        let end = match how {
            Err(end) => end,
            Ok(how) => {
                if tasks.move_to_background(started.number) {
                    // Nobody can answer it now: its interactive tools go too.
                    if let Ok(Some(scope)) = filter::background_deny(&registry) {
                        registry.narrow(scope);
                    }
                    return moved(how);
                }
                (&mut started.done).await
            }
        };
        let Ok(end) = end else {
            return ToolOutput::error(format!(
                "failed to run sub-agent {id}: it ended without a result"
            ));
        };
        let mut text = end.result;
        for note in &notes {
            text.push_str(&format!("\nnote: {note}"));
        }
        match end.status {
            TaskStatus::Completed => ToolOutput::ok(text),
            _ => ToolOutput::error(text),
        }
    }
}

/// The environment text of a child working in `workspace` (its working directory).
fn environment_in(
    environment: &Environment,
    workspace: Option<&super::IsolatedWorkspace>,
) -> Environment {
    let mut environment = environment.clone();
    if let Some(workspace) = workspace {
        environment.cwd = workspace.dir.clone();
    }
    environment
}

/// A started child, for the waiting call.
struct Running {
    started: Started,
    registry: ToolRegistry,
    agent_type: String,
    background: bool,
    notes: Vec<String>,
    name: Option<String>,
}

/// The four layers of the child's tool filter (see [`filter`]).
fn layers(
    depth_reached: bool,
    definition: Option<&AgentDefinition>,
    extra: Option<ToolScope>,
    background: bool,
    registry: &ToolRegistry,
) -> Result<Vec<ToolScope>, crate::tool::ScopeError> {
    let mut scopes = vec![filter::global_scope(depth_reached)?];
    if let Some(def) = definition
        && def.source != Source::BuiltIn
    {
        scopes.push(filter::custom_scope(&def.name)?);
    }
    if background && let Some(scope) = filter::background_deny(registry)? {
        scopes.push(scope);
    }
    if let Some(def) = definition
        && let Some(scope) = def.tool_scope()?
    {
        scopes.push(scope);
    }
    scopes.extend(extra);
    Ok(scopes)
}

/// The child's mode: its definition's when that is at least as strict as the
/// parent's, else the parent's. `bypassPermissions` from a user or project file is
/// refused (a cloned repository's file cannot grant it); the notes say what was
/// ignored.
fn child_mode(
    parent: PermissionMode,
    definition: Option<&AgentDefinition>,
    notes: &mut Vec<String>,
) -> PermissionMode {
    let Some(def) = definition else {
        return parent;
    };
    let Some(wanted) = def.permission_mode else {
        return parent;
    };
    let file = def
        .path
        .as_ref()
        .map(|p| format!(" ({})", p.display()))
        .unwrap_or_default();
    if wanted == PermissionMode::BypassPermissions && def.source != Source::BuiltIn {
        let note = format!(
            "agent type {}{file} asks for permissionMode bypassPermissions, which a definition \
             file cannot grant; it runs in {}",
            def.name,
            parent.as_str()
        );
        tracing::warn!("{note}");
        notes.push(note);
        return parent;
    }
    if strictness(wanted) >= strictness(parent) {
        wanted
    } else {
        notes.push(format!(
            "agent type {}{file} asks for permissionMode {}, looser than its parent's {}; it \
             runs in {}",
            def.name,
            wanted.as_str(),
            parent.as_str(),
            parent.as_str()
        ));
        parent
    }
}

/// A definition-based child's system prompt: the role's prompt, the working
/// guidelines and the environment.
fn role_system(def: &AgentDefinition, environment: &Environment) -> Vec<String> {
    let role = format!(
        "{}\n\nYou are a sub-agent: another agent gave you the task in the first message. \
         Nobody answers questions; work with your tools and end with a concise report — your \
         final message is all the other agent sees.",
        def.prompt.trim()
    );
    system_prompt(
        &Persona {
            role,
            ..Persona::default()
        },
        environment,
    )
}

/// The parent's view of how a child ended: its final text, capped, with a footer.
fn report(
    id: &str,
    agent_type: &str,
    result: &RunResult,
    begun: Instant,
    spill: &ToolContext,
) -> TaskEnd {
    let status = match result.outcome {
        Outcome::Completed => TaskStatus::Completed,
        Outcome::Cancelled => TaskStatus::Killed,
        _ => TaskStatus::Failed,
    };
    let mut text = match &result.outcome {
        Outcome::Completed if result.final_text.trim().is_empty() => {
            "(the sub-agent finished without a final message)".to_string()
        }
        Outcome::Completed => result.final_text.clone(),
        other => {
            let mut text = format!("sub-agent {id} ({agent_type}) {}", other.describe());
            if !result.final_text.trim().is_empty() {
                text.push_str(&format!("; its last message:\n{}", result.final_text));
            }
            text
        }
    };
    // The hard cap: the full text spills to the session directory, named in the result.
    text = spill_if_large(ToolOutput::ok(text), &format!("subagent-{id}"), spill).content;
    let tokens = result.usage.context_tokens() + result.usage.output_tokens;
    text.push_str(&format!(
        "\n\n[sub-agent {id} · {agent_type} · {turns} turn(s) · {tokens} tokens · {secs:.1} s]",
        turns = result.turns,
        secs = begun.elapsed().as_secs_f64()
    ));
    TaskEnd {
        status,
        result: text,
        turns: result.turns,
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        clip(text, 200)
    } else if let Some(text) = panic.downcast_ref::<String>() {
        clip(text, 200)
    } else {
        "no message".to_string()
    }
}

/// At most `max` characters of `text` on one line.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.chars().count() <= max {
        line
    } else {
        let mut cut: String = line.chars().take(max).collect();
        cut.push('…');
        cut
    }
}
