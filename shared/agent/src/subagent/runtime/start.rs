//! Starting one sub-agent, in named steps: check the call ([`SubagentRuntime::checked`]),
//! decide what the child is ([`Plan`]), count it and enter it in the task table, give
//! it its own registry, runtime and tool layers ([`ChildTools`]), its workspace and
//! policy, and build its [`Agent`] ([`SubagentRuntime::child_agent`]) — the sub-agent's
//! counterpart of the team builder's `build_agent`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Inner, SubagentRuntime};
use crate::agent_loop::{Agent, AgentOptions, SharedPolicy};
use crate::agents::{AgentDefinition, DefinitionSource};
use crate::config::strictness;
use crate::event::{AgentEvent, EventSink};
use crate::permissions::PermissionMode;
use crate::prompt::{Environment, Persona, system_prompt};
use crate::session::Session;
use crate::skills::Skills;
use crate::subagent::approver::ChildApprover;
use crate::subagent::launch::AgentInput;
use crate::subagent::launch::ChildLaunch;
use crate::subagent::tasks::{Started, TaskEnd, TaskStatus};
use crate::subagent::{IsolatedWorkspace, WorktreeIsolation, filter, fork, model};
use crate::tool::{ToolContext, ToolRegistry, ToolScope};

/// A started child, for the waiting call.
pub(super) struct Running {
    pub(super) started: Started,
    pub(super) registry: ToolRegistry,
    pub(super) agent_type: String,
    pub(super) background: bool,
    pub(super) notes: Vec<String>,
    pub(super) name: Option<String>,
}

/// What the call asks for, decided before anything is started.
struct Plan {
    input: AgentInput,
    /// The call's prompt, trimmed and not empty.
    prompt: String,
    definition: Option<AgentDefinition>,
    /// The definition's name, or `fork`.
    agent_type: String,
    model: String,
    parent_mode: PermissionMode,
    mode: PermissionMode,
    /// Where the child's worktree comes from, if it runs in one.
    worktrees: Option<Arc<dyn WorktreeIsolation>>,
    background: bool,
    /// A fork's system prompt, pinned tool list and history.
    fork: Option<ForkStart>,
    /// What the parent should know about how its call was taken.
    notes: Vec<String>,
}

/// The parent's request a fork continues from.
struct ForkStart {
    system: Vec<String>,
    tools: Vec<roo_llm::ToolSpec>,
    history: Vec<roo_llm::Message>,
}

/// The child's own registry and runtime, its tools narrowed to its layers.
struct ChildTools {
    registry: ToolRegistry,
    runtime: SubagentRuntime,
    skills: Option<Skills>,
    /// The child is at the nesting limit: it starts no children of its own.
    depth_reached: bool,
}

impl SubagentRuntime {
    /// Starts the child `launch` asks for in its own task; every refusal is a message
    /// that reads after "failed to".
    pub(super) async fn start(
        &self,
        launch: ChildLaunch,
        ctx: &ToolContext,
    ) -> Result<Running, String> {
        let ChildLaunch {
            input,
            extra_scope,
            extra_tools,
        } = launch;
        let registry = self.checked(&input, ctx)?;
        let plan = self.plan(input, ctx).await?;
        self.count_start()?;
        let shared = &self.inner.shared;
        let started = shared.tasks.start(
            self.inner.owner,
            plan.input.name.clone(),
            plan.agent_type.clone(),
            plan.input.description.clone().unwrap_or_default(),
            plan.background,
            shared.session.child_token(),
            Some(ctx.events.clone()),
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
        let mut child = self
            .child_tools(&registry, &plan, extra_tools, extra_scope)
            .map_err(|e| failed(format!("start agent type {}: {e}", plan.agent_type)))?;
        let workspace = match &plan.worktrees {
            Some(worktrees) => Some(worktrees.create(&started.id).await.map_err(|e| {
                failed(format!("start sub-agent {} in a worktree: {e}", started.id))
            })?),
            None => None,
        };
        let agent = self.child_agent(&plan, &mut child, workspace.as_ref(), &started)?;
        ctx.events.emit(AgentEvent::SubagentStart {
            id: started.id.clone(),
            agent_type: plan.agent_type.clone(),
            description: plan.input.description.clone().unwrap_or_default(),
            background: plan.background,
        });
        let run_input = match &plan.fork {
            Some(_) => fork::directive(&plan.prompt),
            None => plan.prompt.clone(),
        };
        let isolation = plan.worktrees.zip(workspace);
        self.spawn(
            agent,
            run_input,
            &started,
            plan.agent_type.clone(),
            isolation,
        );
        Ok(Running {
            started,
            registry: child.registry,
            agent_type: plan.agent_type,
            background: plan.background,
            notes: plan.notes,
            name: plan.input.name,
        })
    }

    /// The call's refusals that need no definition: an empty prompt, an owner that
    /// ended, a fork of a fork, the depth limit, a background run when those are off.
    /// Returns the owning agent's registry.
    fn checked(&self, input: &AgentInput, ctx: &ToolContext) -> Result<ToolRegistry, String> {
        let inner = &self.inner;
        let limits = &inner.shared.limits;
        if input.prompt.trim().is_empty() {
            return Err("start a sub-agent: `prompt` is empty; say what it should do".into());
        }
        let registry = inner
            .registry
            .upgrade()
            .ok_or("start a sub-agent: the agent that owns it has ended")?;
        if input.subagent_type.is_none()
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
        Ok(registry)
    }

    /// Decides what the child is: its definition, model, mode, workspace, whether it
    /// runs in the background and, for a fork, what it continues from.
    async fn plan(&self, input: AgentInput, ctx: &ToolContext) -> Result<Plan, String> {
        let parts = &self.inner.parts;
        let limits = &self.inner.shared.limits;
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
            parts.provider.name(),
            &parts.options.model,
        )?;
        let parent_mode = parts
            .policy
            .read()
            .map(|p| p.mode())
            .unwrap_or(PermissionMode::DontAsk);
        let mode = child_mode(parent_mode, definition.as_ref(), &mut notes);
        let isolated = input.isolation.is_some()
            || definition
                .as_ref()
                .is_some_and(|d| d.isolation == Some(crate::agents::Isolation::Worktree));
        let worktrees = match (isolated, &parts.worktrees) {
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
        let fork = match (&definition, input.subagent_type.is_none()) {
            (_, true) => Some(fork_start(ctx)?),
            (Some(_), false) => None,
            // A call with a type has its definition.
            (None, false) => return Err("start a sub-agent: no definition and no fork".into()),
        };
        Ok(Plan {
            prompt: input.prompt.trim().to_string(),
            input,
            definition,
            agent_type,
            model,
            parent_mode,
            mode,
            worktrees,
            background,
            fork,
            notes,
        })
    }

    /// Counts one more start against the per-session cap, or refuses it.
    fn count_start(&self) -> Result<(), String> {
        let per_session = self.inner.shared.limits.max_per_session;
        self.inner
            .shared
            .started
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < per_session).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| {
                format!(
                    "start a sub-agent: this session already started {per_session}, the most \
                     it may (agents.max_per_session)"
                )
            })
    }

    /// The child's registry (a copy of `registry` with its own Agent and TaskStop, the
    /// launch's extra tools and skills bound to it), narrowed to the four layers.
    fn child_tools(
        &self,
        registry: &ToolRegistry,
        plan: &Plan,
        extra_tools: Vec<Arc<dyn crate::tool::Tool>>,
        extra_scope: Option<ToolScope>,
    ) -> Result<ChildTools, crate::tool::ScopeError> {
        let inner = &self.inner;
        let child_registry = registry.detached();
        let child_depth = inner.depth + 1;
        let depth_reached = child_depth >= inner.shared.limits.max_depth;
        let runtime = SubagentRuntime {
            inner: Arc::new(Inner {
                parts: inner.parts.clone(),
                registry: child_registry.downgrade(),
                shared: inner.shared.clone(),
                depth: child_depth,
                owner: inner.shared.next_owner.fetch_add(1, Ordering::SeqCst),
                fork: plan.fork.is_some(),
                _lifetime: None,
            }),
        };
        // The child's own Agent and TaskStop replace its parent's (which would start
        // children as the parent, and keep the parent's runtime alive); at the depth
        // limit layer 1 refuses them.
        let (agent_tool, stop_tool) = runtime.tools();
        child_registry.register(agent_tool);
        child_registry.register(stop_tool);
        for tool in extra_tools {
            child_registry.register(tool);
        }
        let skills = inner
            .parts
            .skills
            .as_ref()
            .map(|s| s.for_registry(&child_registry));
        if let Some(skills) = &skills
            && !depth_reached
        {
            skills.set_fork_runtime(Box::new(runtime.downgrade()));
        }
        let scopes = layers(
            depth_reached,
            plan.definition.as_ref(),
            extra_scope,
            plan.background,
            &child_registry,
        )?;
        for scope in scopes {
            child_registry.narrow(scope);
        }
        Ok(ChildTools {
            registry: child_registry,
            runtime,
            skills,
            depth_reached,
        })
    }

    /// The child's permission policy: rooted at its worktree if it has one, else the
    /// parent's (shared when the mode is the same, a copy in the child's mode if not).
    fn child_policy(
        &self,
        plan: &Plan,
        workspace: Option<&IsolatedWorkspace>,
    ) -> Result<SharedPolicy, String> {
        let parent = &self.inner.parts.policy;
        let mut policy = if let Some(workspace) = workspace {
            // Rooted at the worktree: its tools cannot write into the parent's tree.
            workspace.policy.clone()
        } else if plan.mode == plan.parent_mode {
            return Ok(parent.clone());
        } else {
            parent
                .read()
                .map_err(|_| "start a sub-agent: the permission policy is unavailable")?
                .clone()
        };
        policy.set_mode(plan.mode);
        Ok(Arc::new(std::sync::RwLock::new(policy)))
    }

    /// The child's [`Agent`]: its prompt and history, options, tool context (in its
    /// worktree, if any), transcript, approver and hooks (taking the child's skill
    /// scopes).
    fn child_agent(
        &self,
        plan: &Plan,
        child: &mut ChildTools,
        workspace: Option<&IsolatedWorkspace>,
        started: &Started,
    ) -> Result<Agent, String> {
        let parts = &self.inner.parts;
        let id = &started.id;
        let policy = self.child_policy(plan, workspace)?;
        let approver = Arc::new(ChildApprover::new(
            parts.approver.clone(),
            self.inner.shared.ask_lock.clone(),
            started.background.clone(),
            format!("sub-agent {id} ({})", plan.agent_type),
        ));
        let (system, messages, pinned) = match (&plan.fork, &plan.definition) {
            (Some(fork), _) => (
                fork.system.clone(),
                fork.history.clone(),
                Some(fork.tools.clone()),
            ),
            (None, Some(def)) => (
                role_system(def, &environment_in(&parts.environment, workspace)),
                Vec::new(),
                None,
            ),
            // A call without a type is a fork; with one, the definition was resolved.
            (None, None) => return Err("start a sub-agent: no definition and no fork".into()),
        };
        let options = AgentOptions {
            agent_name: plan.agent_type.clone(),
            model: plan.model.clone(),
            max_turns: plan
                .definition
                .as_ref()
                .and_then(|d| d.max_turns)
                .unwrap_or(parts.options.max_turns),
            pinned_tools: pinned,
            // The lead checked the server it shares with its sub-agents.
            check_server_window: false,
            // Its file changes count toward the parent's prompt (shared checkpoints).
            checkpoint_prompts: false,
            // Its spend counts toward its parent's caps; a definition's `budget:` caps it
            // too.
            spend_gate: match plan.definition.as_ref().and_then(|d| d.budget) {
                Some(budget) => Some(crate::hooks::SharedSpendGate(Arc::new(
                    crate::hooks::CappedGate::new(
                        parts.options.spend_gate.clone(),
                        format!("sub-agent {}", plan.agent_type),
                        budget.usd,
                        budget.requests,
                    ),
                ))),
                None => parts.options.spend_gate.clone(),
            },
            ..parts.options.clone()
        };
        let context = child_context(&parts.context, workspace);
        let transcript = context
            .session_dir
            .join("subagents")
            .join(format!("{id}.jsonl"));
        let mut agent = Agent::new(
            parts.provider.clone(),
            child.registry.clone(),
            policy,
            approver,
            system,
            context.clone(),
            options,
            parts.plan_file.clone(),
        );
        agent = match Session::create(
            transcript.clone(),
            id.clone(),
            &context.cwd,
            &plan.agent_type,
        ) {
            Ok(session) => agent.with_session(session, messages),
            Err(e) => {
                tracing::warn!(path = %transcript.display(), error = %e, "sub-agent transcript not written");
                agent.with_messages(messages)
            }
        };
        if plan.definition.is_some() {
            agent.set_instructions(parts.instructions.clone());
        }
        for hook in &parts.lifecycle {
            agent.add_hook(hook.clone());
        }
        if let Some(skills) = child.skills.take() {
            agent.add_hook(Arc::new(skills.scopes));
        }
        if !child.depth_reached {
            agent.add_hook(child.runtime.notifications());
        }
        Ok(agent)
    }
}

/// What a fork continues from: the request that made the call, which must end with
/// the call that forks. Checked before anything is started.
fn fork_start(ctx: &ToolContext) -> Result<ForkStart, String> {
    let snapshot = ctx.conversation.as_ref().ok_or(
        "fork: the conversation that made this call is not available; name a \
         `subagent_type` instead",
    )?;
    let history = fork::fork_history(&snapshot.messages)
        .ok_or("fork: the conversation does not end with the call that forks")?;
    Ok(ForkStart {
        system: snapshot.system.clone(),
        tools: snapshot.tools.clone(),
        history,
    })
}

/// The child's tool context: the parent's, without its conversation and events, in
/// the child's worktree (and its sandbox) if it has one.
fn child_context(parent: &ToolContext, workspace: Option<&IsolatedWorkspace>) -> ToolContext {
    let mut context = ToolContext {
        conversation: None,
        events: EventSink::discard(),
        ..parent.clone()
    };
    if let Some(workspace) = workspace {
        context.cwd = workspace.dir.clone();
        if let Some(sandbox) = &workspace.sandbox {
            context.launcher.sandbox = Some(sandbox.clone());
        }
    }
    context
}
/// The environment text of a child working in `workspace` (its working directory).
fn environment_in(environment: &Environment, workspace: Option<&IsolatedWorkspace>) -> Environment {
    let mut environment = environment.clone();
    if let Some(workspace) = workspace {
        environment.cwd = workspace.dir.clone();
    }
    environment
}

/// The four layers of the child's tool filter (see [`filter`]).
fn layers(
    depth_reached: bool,
    definition: Option<&AgentDefinition>,
    extra: Option<ToolScope>,
    background: bool,
    registry: &ToolRegistry,
) -> Result<Vec<ToolScope>, crate::tool::ScopeError> {
    let mut scopes = vec![filter::global_scope(depth_reached)];
    if let Some(def) = definition
        && def.source != DefinitionSource::BuiltIn
    {
        scopes.push(filter::custom_scope(&def.name));
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
    if wanted == PermissionMode::BypassPermissions && def.source != DefinitionSource::BuiltIn {
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
