//! The sub-agent machinery of one agent: what a sub-agent takes from its parent
//! ([`ParentParts`]), what every runtime of a session shares (limits, slots, the task
//! table, the session's cancel) and the Agent tool's entry point,
//! `SubagentRuntime::call`. One call goes through three jobs, one module each:
//! `start` builds the child (its checks, plan, registry, tool layers, workspace,
//! policy and [`Agent`](crate::agent_loop::Agent)), `child` runs it in its own tokio
//! task to the [`TaskEnd`] the parent reads, and `wait` is the call's side
//! (foreground, background, detach).
//!
//! [`TaskEnd`]: super::tasks::TaskEnd

mod child;
mod start;
mod wait;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::{Arc, Weak};

use roo_llm::Provider;
use tokio::sync::{Mutex as AsyncMutex, Semaphore};
use tokio_util::sync::CancellationToken;

use super::launch::{AgentInput, ChildLaunch};
use super::tasks::{BackgroundTasks, TaskNotifications};
use crate::agent_loop::{AgentOptions, SharedPolicy};
use crate::agents::{AgentCatalog, AgentDefinition};
use crate::config::SubagentLimits;
use crate::hooks::AgentHook;
use crate::permissions::Approver;
use crate::prompt::Environment;
use crate::skills::Skills;
use crate::tool::{ToolContext, ToolOutput, ToolRegistry, WeakToolRegistry};

/// What a sub-agent takes from the agent that starts it. The builder hands these in;
/// the Agent tool never learns whether its agent is a lead, a teammate or a sub-agent.
#[derive(Clone)]
pub struct ParentParts {
    /// The model provider children call.
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
    /// The plan file of plan mode.
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
    /// The runtime, if it still exists.
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
            ChildLaunch {
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

    /// Whose tasks this agent's TaskStop may stop: `None` for a top-level agent (any
    /// task of the session), else only the tasks this sub-agent started.
    pub(crate) fn stoppable_owner(&self) -> Option<u64> {
        (self.inner.depth > 0).then_some(self.inner.owner)
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
    pub(crate) async fn call(&self, launch: ChildLaunch, ctx: &ToolContext) -> ToolOutput {
        match self.start(launch, ctx).await {
            Ok(running) => self.wait(running, ctx).await,
            Err(message) => ToolOutput::error(format!("failed to {message}")),
        }
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
}
