//! The one agent builder: the lead, `roo-worker` and in-process teammates are all built
//! here, from a plain [`AgentSettings`].
//!
//! The settings say who the agent is ([`Identity`]), where it works, which model, mode,
//! trust, sandbox, tools and transcript it has, who answers its permission questions and
//! which turn hooks it runs. Nothing here parses flags or knows a UI: the binaries turn
//! their flags into settings, and the UI hands in its approver and trust question.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use roo_agent::agent_loop::{Agent, AgentOptions, SharedPolicy, TurnHook};
use roo_agent::agents::AgentCatalog;
use roo_agent::config::{ConfigError, ConfigFiles, ProjectTrust};
use roo_agent::exec::Launcher;
use roo_agent::hooks::{CommandHooks, HookSetup};
use roo_agent::mcp::{Launch, McpHook, McpServers, McpSettings};
use roo_agent::permissions::{
    Approver, DenyApprover, ParseModeError, PermissionMode, PermissionPolicy,
};
use roo_agent::plan_mode::{PlanApprover, plan_mode_tools};
use roo_agent::prompt::{Environment, Persona, load_instructions, system_prompt};
use roo_agent::sandbox::CommandSetup;
use roo_agent::session::{
    Session, SessionError, latest_session, new_session_id, project_sessions_dir, session_path,
};
use roo_agent::skills::{Catalog, Skills};
use roo_agent::subagent::{ParentParts, SubagentLimits, SubagentRuntime};
use roo_agent::tool::{EnvSource, Tool, ToolContext, ToolRegistry, WorkspaceGate};
use roo_agent::tools::builtin_tools;
use roo_llm::{LlmError, LlmFlags, LlmSettings, Provider};
use roo_store::Name;

use crate::trust::{Trust, TrustDecision, decide};

/// Tool results longer than this spill to a file with a preview.
pub const MAX_RESULT_CHARS: usize = 40_000;

/// Who an agent is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The agent's name: sent with every model request (the scripted provider picks its
    /// replies by it), recorded in the transcript, exported to tools as `ROO_AGENT_NAME`
    /// when the agent is in a team.
    pub name: Name,
    /// The team it belongs to, if any (exported to tools as `ROO_TEAM`).
    pub team: Option<Name>,
    pub role: Role,
}

impl Identity {
    /// An agent outside any team (a plain `roo-lead` session).
    pub fn solo(name: Name) -> Identity {
        Identity {
            name,
            team: None,
            role: Role::Lead,
        }
    }

    /// A teammate `name` of `team`, working for `lead`.
    pub fn teammate(name: Name, team: Name, lead: Name) -> Identity {
        Identity {
            name,
            team: Some(team),
            role: Role::Teammate { lead },
        }
    }
}

/// What an agent is for; decides its default persona.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Works for the user directly (the lead, or a single agent).
    Lead,
    /// Works for the lead of its team.
    Teammate { lead: Name },
}

/// Which tools the agent gets.
#[derive(Clone)]
pub struct ToolSet {
    /// The work tools: ReadFile, WriteFile, EditFile, Bash, Glob, Grep.
    pub work: bool,
    /// EnterPlanMode and ExitPlanMode (bound to this agent's policy and plan file).
    pub plan_mode: bool,
    /// More tools (a team's coordination tools, …), registered after the others; a
    /// tool with the name of an earlier one replaces it.
    pub extra: Vec<Arc<dyn Tool>>,
    /// Names removed at the end (e.g. every code tool of a coordinator).
    pub remove: Vec<String>,
    /// Sub-agents: the `Agent` tool's sub-agent path and `TaskStop` for background
    /// tasks (limits from the config's `agents:`).
    pub subagents: bool,
    /// The lead's teammate spawner: `Agent` with a `name` spawns a teammate while the
    /// lead is in a team, and `TaskStop` stops teammates too. `None` for teammates,
    /// which cannot spawn teammates.
    pub spawner: Option<crate::Spawner>,
}

impl Default for ToolSet {
    fn default() -> Self {
        ToolSet {
            work: true,
            plan_mode: true,
            extra: Vec::new(),
            remove: Vec::new(),
            subagents: true,
            spawner: None,
        }
    }
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSet")
            .field("work", &self.work)
            .field("plan_mode", &self.plan_mode)
            .field(
                "extra",
                &self.extra.iter().map(|t| t.name()).collect::<Vec<_>>(),
            )
            .field("remove", &self.remove)
            .field("subagents", &self.subagents)
            .field("spawner", &self.spawner.is_some())
            .finish()
    }
}

/// Where an agent's MCP servers come from.
#[derive(Clone, Default)]
pub enum McpPlan {
    /// Start the servers of the config files (the first agent of a process: the
    /// lead, `roo-worker`).
    #[default]
    Start,
    /// Use the servers this process already started (an in-process teammate).
    Shared(McpServers),
    /// No MCP servers.
    Off,
}

impl std::fmt::Debug for McpPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            McpPlan::Start => "Start",
            McpPlan::Shared(_) => "Shared",
            McpPlan::Off => "Off",
        })
    }
}

/// Where the conversation is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionPlan {
    /// A new session in the project's sessions directory.
    New,
    /// Resume session `id` of the project.
    Resume(String),
    /// Resume the project's most recent session.
    Latest,
    /// This transcript file: resumed if it exists, else created (a teammate's
    /// `teams/<team>/transcripts/<name>.jsonl`).
    Transcript(PathBuf),
}

impl SessionPlan {
    /// A team member's transcript, `teams/<team>/transcripts/<name>.jsonl` under
    /// `roo_home`: a restarted member resumes its conversation.
    pub fn member(roo_home: &Path, team: &Name, member: &Name) -> SessionPlan {
        SessionPlan::Transcript(roo_store::RooHome::new(roo_home).transcript(team, member))
    }
}

/// Everything needed to build one agent. Start from [`AgentSettings::new`] and override
/// fields.
#[derive(Clone)]
pub struct AgentSettings {
    pub identity: Identity,
    /// Working directory; `None` is the process's. Canonicalized by the builder.
    pub cwd: Option<PathBuf>,
    /// Root the permission policy and the command sandbox confine writes to; `None` is
    /// the git top level of the working directory, or the directory itself.
    pub project_root: Option<PathBuf>,
    /// Where the project's config files are read and whose trust applies; default: the
    /// project root. A teammate in a worktree passes the lead's repository, so the
    /// user's uncommitted `config.local.yaml` (its deny rules too) and the trust list,
    /// which names the lead's root, apply to it.
    pub config_root: Option<PathBuf>,
    pub roo_home: PathBuf,
    /// Provider flags; the config files and the environment fill in the rest.
    pub llm: LlmFlags,
    /// Use this provider instead of building one from the settings (tests; a lead that
    /// shares its connection pool with in-process teammates).
    pub provider: Option<Arc<dyn Provider>>,
    /// `None`: the config files' mode, else `default`.
    pub permission_mode: Option<PermissionMode>,
    pub trust: Trust,
    /// Run commands without the OS sandbox.
    pub no_sandbox: bool,
    /// The executable that runs commands in the sandbox (`None`: the running one).
    pub sandbox_helper: Option<PathBuf>,
    pub tools: ToolSet,
    pub session: SessionPlan,
    /// Answers permission questions.
    pub approver: Arc<dyn Approver>,
    /// Whether ExitPlanMode can be approved by anyone.
    pub plan_approver: PlanApprover,
    /// Consulted at the top of every turn.
    pub hooks: Vec<Arc<dyn TurnHook>>,
    pub max_turns: u32,
    /// `None`: the role's default persona.
    pub persona: Option<Persona>,
    /// The working directory is still being made while the agent is built (a
    /// teammate's new worktree): see [`PendingWorkspace`]. `None`: it exists.
    pub pending_workspace: Option<PendingWorkspace>,
    /// Variables its commands get, read as each starts (a lead's team, once it made
    /// one: [`crate::TeamSlot::env_source`]).
    pub env_source: Option<EnvSource>,
    /// Its MCP servers: started here, or shared with the process's first agent.
    pub mcp: McpPlan,
}

/// A working directory being checked out while its agent is built and sends its first
/// model request; tool calls wait for [`PendingWorkspace::gate`]. `cwd` and
/// `project_root` must then be given, resolved (the builder cannot canonicalize a
/// directory that does not exist yet).
#[derive(Clone, Debug)]
pub struct PendingWorkspace {
    /// What the system prompt says about it.
    pub environment: Environment,
    /// Directories outside it that its commands write (the repository's shared git
    /// directory, verified by the caller): the sandbox cannot find them in a checkout
    /// that is not there yet.
    pub git_dirs: Vec<PathBuf>,
    /// Opens when the checkout is done (or failed).
    pub gate: WorkspaceGate,
    /// Where its instruction files (`ROOCODE.md`) are read: the checkout it is made
    /// from (a teammate's worktree starts from the lead's `HEAD`, so only uncommitted
    /// changes to those files differ). `@include`s are confined to it.
    pub instructions_root: PathBuf,
}

impl std::fmt::Debug for AgentSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSettings")
            .field("identity", &self.identity)
            .field("cwd", &self.cwd)
            .field("project_root", &self.project_root)
            .field("config_root", &self.config_root)
            .field("roo_home", &self.roo_home)
            .field("llm", &self.llm)
            .field(
                "provider",
                &self.provider.as_ref().map(|p| p.name().to_string()),
            )
            .field("permission_mode", &self.permission_mode)
            .field("trust", &self.trust)
            .field("no_sandbox", &self.no_sandbox)
            .field("sandbox_helper", &self.sandbox_helper)
            .field("tools", &self.tools)
            .field("session", &self.session)
            .field("plan_approver", &self.plan_approver)
            .field("hooks", &self.hooks.len())
            .field("max_turns", &self.max_turns)
            .field("persona", &self.persona)
            .field("pending_workspace", &self.pending_workspace)
            .field("env_source", &self.env_source.is_some())
            .field("mcp", &self.mcp)
            .finish_non_exhaustive()
    }
}

impl AgentSettings {
    /// Settings for `identity` with the defaults of an unattended agent: the process's
    /// working directory, trust as listed, the sandbox on, work and plan-mode tools, a
    /// new session, every question denied, 50 turns.
    pub fn new(identity: Identity, roo_home: PathBuf) -> AgentSettings {
        AgentSettings {
            identity,
            cwd: None,
            project_root: None,
            config_root: None,
            roo_home,
            llm: LlmFlags::default(),
            provider: None,
            permission_mode: None,
            trust: Trust::AsListed,
            no_sandbox: false,
            sandbox_helper: None,
            tools: ToolSet::default(),
            session: SessionPlan::New,
            approver: Arc::new(DenyApprover),
            plan_approver: PlanApprover::Absent,
            hooks: Vec::new(),
            max_turns: 50,
            persona: None,
            pending_workspace: None,
            env_source: None,
            mcp: McpPlan::Start,
        }
    }
}

/// An agent ready to run, and what its UI needs around it.
pub struct BuiltAgent {
    pub agent: Agent,
    /// The canonical working directory.
    pub cwd: PathBuf,
    pub project_root: PathBuf,
    pub roo_home: PathBuf,
    /// Things to tell the user at start (trust, sandbox, resume repairs, instructions).
    pub notices: Vec<String>,
    pub llm: LlmSettings,
    /// Whether the project's config is honoured in full (trusted this run or listed):
    /// a lead passes this on to the teammates it spawns.
    pub trusted: bool,
    /// The config's hooks (also added to the agent's loop): the team runtime fires
    /// `teammate_idle` and `task_completed` through them.
    pub command_hooks: Arc<CommandHooks>,
    /// The agent's skills (`None` without the work tools), for `/<skill>` commands.
    pub skills: Option<Skills>,
    /// The agent's sub-agents and background tasks (`None` without them): `/tasks`,
    /// and [`SubagentRuntime::shutdown`] when the session ends.
    pub subagents: Option<SubagentRuntime>,
    /// Its MCP servers (`None`: none configured, or [`McpPlan::Off`]): for `/mcp`,
    /// prompts as commands, teammates sharing them and the shutdown at exit.
    pub mcp: Option<McpServers>,
    /// The config's `team_turns`: whether an idle interactive lead takes its teammates'
    /// messages as a turn of its own.
    pub team_turns: bool,
}

/// Why an agent could not be built. Each message says what failed and on what.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("failed to read the current directory: {0}")]
    CurrentDir(std::io::Error),
    #[error("failed to open working directory {}: {source}", path.display())]
    WorkingDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to open project root {}: {source}", path.display())]
    ProjectRoot {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Mode(#[from] ParseModeError),
    #[error("{0}")]
    Llm(#[from] LlmError),
    /// The session to resume does not exist.
    #[error("{0}")]
    NoSuchSession(SessionError),
    #[error("{0}")]
    Session(SessionError),
    #[error("failed to locate the running executable, which runs commands in the sandbox: {0}")]
    Helper(std::io::Error),
    #[error("failed to inspect the working directory: {0}")]
    Inspect(String),
}

/// What kind of failure a [`BuildError`] is (the binaries map it to an exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildErrorKind {
    /// Bad input: a directory, session id or mode that does not work.
    Usage,
    /// Bad or missing configuration (config files, provider settings).
    Config,
    /// A file could not be read or written.
    Io,
}

impl BuildError {
    pub fn kind(&self) -> BuildErrorKind {
        match self {
            BuildError::WorkingDir { .. }
            | BuildError::ProjectRoot { .. }
            | BuildError::Mode(_)
            | BuildError::NoSuchSession(_) => BuildErrorKind::Usage,
            BuildError::Config(_) | BuildError::Llm(_) => BuildErrorKind::Config,
            BuildError::CurrentDir(_)
            | BuildError::Session(_)
            | BuildError::Helper(_)
            | BuildError::Inspect(_) => BuildErrorKind::Io,
        }
    }
}

/// Builds one agent from `settings`.
pub async fn build_agent(settings: AgentSettings) -> Result<BuiltAgent, BuildError> {
    let AgentSettings {
        identity,
        cwd,
        project_root,
        config_root,
        roo_home,
        llm,
        provider,
        permission_mode,
        trust,
        no_sandbox,
        sandbox_helper,
        tools: tool_set,
        session: session_plan,
        approver,
        plan_approver,
        hooks,
        max_turns,
        persona,
        pending_workspace,
        env_source,
        mcp: mcp_plan,
    } = settings;
    let cwd = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(BuildError::CurrentDir)?,
    };
    let (cwd, project_root) = match &pending_workspace {
        // Given resolved; nothing there to inspect yet.
        Some(_) => {
            let root = project_root.unwrap_or_else(|| cwd.clone());
            (cwd, root)
        }
        None => existing_workspace(cwd, project_root).await?,
    };

    // Loaded untrusted first: what that leaves out is what trust would enable.
    let config_root = match config_root {
        Some(root) => std::fs::canonicalize(&root).map_err(|source| BuildError::ProjectRoot {
            path: root.clone(),
            source,
        })?,
        None => project_root.clone(),
    };
    let config = ConfigFiles::load(&roo_home, &config_root, ProjectTrust::Untrusted)?;
    let TrustDecision {
        config,
        notices: trust_notices,
    } = decide(config, &config_root, &roo_home, &trust).await?;
    let trusted = config.trust() == ProjectTrust::Trusted;
    let team_turns = config.team_turns();
    let llm = resolve_llm(&llm, &config)?;
    let provider = match provider {
        Some(provider) => provider,
        None => roo_llm::build_provider(&llm)?,
    };

    let sessions = project_sessions_dir(&roo_home, &project_root);
    let (session, messages, mut notices) =
        open_session(&session_plan, &sessions, &cwd, identity.name.as_str())?;
    notices.splice(0..0, trust_notices);
    let resumed = !messages.is_empty();
    let session_dir = session.dir();
    let plan_file = session_dir.join("plan.md");

    let mode = match permission_mode {
        Some(mode) => mode,
        None => config.permission_mode()?.unwrap_or(PermissionMode::Default),
    };
    let mut policy = PermissionPolicy::new(project_root.clone(), mode, config.rules());
    policy.add_allowed_root(session_dir.clone());
    policy.hide_team_state(&roo_home);
    if mode == PermissionMode::Plan {
        policy.set_plan_file(Some(plan_file.clone()));
    }
    let read_filter = policy.read_filter();
    let policy: SharedPolicy = Arc::new(RwLock::new(policy));

    let tools = ToolRegistry::new();
    // Skills come with the work tools; an untrusted project's skills are not read.
    let skills = tool_set.work.then(|| {
        for tool in builtin_tools() {
            tools.register(tool);
        }
        Skills::install(Catalog::new(&roo_home, &project_root, trusted), &tools)
    });
    if tool_set.plan_mode {
        for tool in plan_mode_tools(policy.clone(), plan_file.clone(), plan_approver) {
            tools.register(tool);
        }
    }
    for tool in tool_set.extra {
        tools.register(tool);
    }

    let helper = match sandbox_helper {
        Some(helper) => helper,
        None => std::env::current_exe().map_err(BuildError::Helper)?,
    };
    let sandbox_settings =
        config.sandbox_settings(&project_root, roo_store::user_home().as_deref(), no_sandbox)?;
    let commands = CommandSetup::for_agent(
        &sandbox_settings,
        &project_root,
        &roo_home,
        llm.api_key.as_deref(),
        helper.clone(),
    );
    let mut commands = commands;
    if let (Some(pending), Some(policy)) = (&pending_workspace, commands.sandbox.policy.as_mut()) {
        policy.write.extend(pending.git_dirs.iter().cloned());
    }
    if let Some(policy) = commands.sandbox.policy.as_mut() {
        // A command holding the spawn lock would stall every spawn of the team. The
        // lead's git adds worktrees beside it, so only a teammate's Landlock denies it.
        policy.conceal(
            crate::worktree::worktrees_lock_path(&config_root),
            matches!(identity.role, Role::Teammate { .. }),
        );
    }
    notices.extend(commands.notices);
    // Servers start now and connect while the rest is built; the first prompt waits
    // for them (bounded). An untrusted project's servers were filtered out.
    let mcp = match mcp_plan {
        McpPlan::Start if !config.mcp_servers().is_empty() => Some(McpServers::start(
            config.mcp_servers(),
            McpSettings::from_config(&config)?,
            Launch {
                project_root: project_root.clone(),
                log_dir: roo_home.join("logs"),
                launcher: Launcher {
                    env_remove: commands.env_remove.clone(),
                    ..Launcher::new(Some(Arc::new(commands.sandbox.clone())))
                },
            },
        )),
        McpPlan::Start | McpPlan::Off => None,
        McpPlan::Shared(servers) => Some(servers),
    };
    if let Some(mcp) = &mcp {
        mcp.attach(&tools);
    }
    let environment = match &pending_workspace {
        Some(pending) => pending.environment.clone(),
        // Its git runs in the agent's sandbox (see `Environment::detect`).
        None => {
            let cwd = cwd.clone();
            let launcher = Launcher {
                env_remove: commands.env_remove.clone(),
                ..Launcher::new(Some(Arc::new(commands.sandbox.clone())))
            };
            tokio::task::spawn_blocking(move || Environment::detect(&cwd, &launcher))
                .await
                .map_err(|e| BuildError::Inspect(e.to_string()))?
        }
    };
    let mut env = tool_env(&identity, &roo_home);
    env.extend(commands.env_add);
    let mut env_remove = commands.env_remove;
    env_remove.extend(roo_agent::exec::ESCAPE_ENV.iter().map(|s| s.to_string()));
    // `roo-mail`/`roo-task` in this agent's commands reach the team through it.
    let service = crate::relay::serve(
        crate::relay::RelayEnv {
            fixed: env.clone(),
            source: env_source.clone(),
        },
        matches!(identity.role, Role::Lead),
    )
    .map_err(|e| BuildError::Inspect(format!("could not start the team-command relay: {e}")))?;
    let context = ToolContext {
        max_result_chars: MAX_RESULT_CHARS,
        read_filter: read_filter.clone(),
        launcher: Launcher {
            sandbox: Some(Arc::new(commands.sandbox)),
            env_remove,
            env,
            env_source,
            service: Some(service),
        },
        workspace: pending_workspace.as_ref().map(|p| p.gate.clone()),
        ..ToolContext::new(cwd.clone(), session_dir)
    };
    let options = AgentOptions {
        agent_name: identity.name.to_string(),
        max_turns,
        max_tokens: llm.max_tokens,
        prices: llm.prices.clone(),
        text_tool_calls: llm.text_tool_calls_enabled(),
        ..AgentOptions::default()
    };
    let persona = persona.unwrap_or_else(|| default_persona(&identity));
    let system = system_prompt(&persona, &environment);
    // The config's hooks run for every agent built here: the lead, `roo-worker`
    // and in-process teammates (an untrusted project's hooks were filtered out).
    let (command_hooks, hook_notices) = CommandHooks::new(
        config.hooks(),
        HookSetup {
            agent_name: identity.name.to_string(),
            team: identity.team.as_ref().map(|t| t.to_string()),
            session_id: Some(session.id().to_string()),
            project_root: project_root.clone(),
            context: context.clone(),
        },
    );
    notices.extend(hook_notices);
    let command_hooks = Arc::new(command_hooks);
    let session_id = session.id().to_string();
    let (instructions, instruction_notices) = {
        let (root, read_filter) = match &pending_workspace {
            // The same rules, applied to the checkout the instructions come from.
            Some(pending) => (
                pending.instructions_root.clone(),
                PermissionPolicy::new(pending.instructions_root.clone(), mode, config.rules())
                    .read_filter(),
            ),
            None => (project_root.clone(), read_filter.clone()),
        };
        let home = roo_home.clone();
        // `@include` honours the same ReadFile deny rules as the tools.
        let loaded = tokio::task::spawn_blocking(move || {
            load_instructions(&root, &home, &|path: &Path| read_filter.denied(path))
        })
        .await
        .unwrap_or_default();
        (loaded.text, loaded.notices)
    };
    // Sub-agents get the parent's parts; the Agent tool never learns whose they are.
    let subagents = tool_set.subagents.then(|| {
        let section = config.agents();
        let parts = ParentParts {
            provider: provider.clone(),
            policy: policy.clone(),
            approver: approver.clone(),
            context: context.clone(),
            options: options.clone(),
            environment: environment.clone(),
            instructions: instructions.clone(),
            lifecycle: if command_hooks.is_empty() {
                Vec::new()
            } else {
                vec![command_hooks.clone() as Arc<dyn roo_agent::hooks::LifecycleHook>]
            },
            skills: skills.clone(),
            plan_file: plan_file.clone(),
            catalog: AgentCatalog::new(
                &roo_home,
                &project_root,
                trusted,
                section.verification.unwrap_or(false),
            ),
            worktrees: Some(Arc::new(
                crate::worktree::subagents::SubagentWorktrees::new(
                    crate::worktree::subagents::WorktreeSettings {
                        project_root: project_root.clone(),
                        // Its git runs in the agent's own command sandbox.
                        git: crate::worktree::Git::new().in_launcher_of(&context.launcher),
                        config: config.clone(),
                        roo_home: roo_home.clone(),
                        api_key: llm.api_key.clone(),
                        no_sandbox,
                        helper: helper.clone(),
                        session_dir: context.session_dir.clone(),
                        session: session_id.clone(),
                    },
                ),
            )),
        };
        SubagentRuntime::new(parts, SubagentLimits::from_section(section), &tools)
    });
    if let (Some(runtime), Some(skills)) = (&subagents, &skills) {
        skills.set_fork_runtime(runtime);
    }
    if let Some(runtime) = &subagents {
        let (agent_tool, stop_tool) = runtime.tools();
        match &tool_set.spawner {
            Some(spawner) => {
                tools.register(Arc::new(
                    crate::spawner::tools::AgentTool::new(spawner.clone())
                        .with_subagents(agent_tool),
                ));
                tools.register(Arc::new(
                    crate::spawner::tools::TaskStop::new(spawner.clone())
                        .with_tasks(runtime.tasks().clone()),
                ));
            }
            None => {
                tools.register(agent_tool);
                tools.register(stop_tool);
            }
        }
    } else if let Some(spawner) = &tool_set.spawner {
        for tool in spawner.tools() {
            tools.register(tool);
        }
    }
    for name in &tool_set.remove {
        tools.remove(name);
    }
    let mut agent = Agent::new(
        provider, tools, policy, approver, system, context, options, plan_file,
    )
    .with_session(session, messages);
    for hook in hooks {
        agent.add_hook(hook);
    }
    if !command_hooks.is_empty() {
        agent.add_lifecycle_hook(command_hooks.clone());
    }
    if let Some(mcp) = &mcp {
        agent.add_lifecycle_hook(Arc::new(McpHook::new(mcp.clone())));
    }
    if let Some(skills) = &skills {
        agent.add_lifecycle_hook(Arc::new(skills.scopes.clone()));
        notices.extend(skill_notices(skills, &project_root, trusted).await);
    }
    if let Some(runtime) = &subagents {
        agent.add_hook(runtime.notifications());
        // Bad user or project definitions are reported at start (and skipped).
        let catalog = runtime.catalog().clone();
        notices.extend(
            tokio::task::spawn_blocking(move || catalog.scan().warnings)
                .await
                .unwrap_or_default(),
        );
    }
    if !resumed {
        notices.extend(instruction_notices);
        agent.set_instructions(instructions);
    }
    Ok(BuiltAgent {
        agent,
        cwd,
        project_root,
        roo_home,
        notices,
        llm,
        trusted,
        command_hooks,
        skills,
        subagents,
        mcp,
        team_turns,
    })
}

/// Skills skipped at start, and an untrusted project's skills left unread.
async fn skill_notices(skills: &Skills, project_root: &Path, trusted: bool) -> Vec<String> {
    let catalog = skills.catalog.clone();
    let mut notices = tokio::task::spawn_blocking(move || catalog.scan().warnings)
        .await
        .unwrap_or_default();
    let dir = project_root.join(".roocode").join("skills");
    if !trusted && dir.is_dir() {
        notices.push(format!(
            "the skills in {} are ignored: the project is not trusted",
            dir.display()
        ));
    }
    notices
}

/// The resolved working directory and project root of a directory that exists.
async fn existing_workspace(
    cwd: PathBuf,
    project_root: Option<PathBuf>,
) -> Result<(PathBuf, PathBuf), BuildError> {
    let cwd = std::fs::canonicalize(&cwd).map_err(|source| BuildError::WorkingDir {
        path: cwd.clone(),
        source,
    })?;
    let inspect = cwd.clone();
    let root = tokio::task::spawn_blocking(move || {
        Ok::<_, BuildError>(match project_root {
            Some(root) => {
                std::fs::canonicalize(&root).map_err(|source| BuildError::ProjectRoot {
                    path: root.clone(),
                    source,
                })?
            }
            None => detect_project_root(&inspect),
        })
    })
    .await
    .map_err(|e| BuildError::Inspect(e.to_string()))??;
    Ok((cwd, root))
}

/// The environment every command of the agent gets: `ROO_HOME`, and in a team
/// `ROO_TEAM` and `ROO_AGENT_NAME`, so `roo-mail` and `roo-task` need no arguments.
pub fn tool_env(identity: &Identity, roo_home: &Path) -> Vec<(String, String)> {
    let mut env = vec![(
        roo_store::ROO_HOME_ENV.to_string(),
        roo_home.to_string_lossy().into_owned(),
    )];
    if let Some(team) = &identity.team {
        env.push(("ROO_TEAM".to_string(), team.to_string()));
        env.push(("ROO_AGENT_NAME".to_string(), identity.name.to_string()));
    }
    env
}

/// The persona of a role.
pub fn default_persona(identity: &Identity) -> Persona {
    match (&identity.role, &identity.team) {
        (Role::Lead, _) => Persona::default(),
        (Role::Teammate { lead }, team) => {
            let team = team
                .as_ref()
                .map(|t| format!(" of team {t}"))
                .unwrap_or_default();
            Persona {
                role: format!(
                    "You are {name}, a RooCode teammate{team}, an AI coding agent working with other agents \
                     under the lead {lead}. You read code, change it and run commands to complete the \
                     software engineering tasks you take on. Coordinate through the team's task list and \
                     messages; the user speaks to you only through the lead.",
                    name = identity.name
                ),
                ..Persona::default()
            }
        }
    }
}

fn open_session(
    plan: &SessionPlan,
    sessions: &Path,
    cwd: &Path,
    agent: &str,
) -> Result<(Session, Vec<roo_llm::Message>, Vec<String>), BuildError> {
    let resume = match plan {
        SessionPlan::New => None,
        SessionPlan::Resume(id) => {
            Some(session_path(sessions, id).map_err(BuildError::NoSuchSession)?)
        }
        SessionPlan::Latest => Some(latest_session(sessions).map_err(BuildError::NoSuchSession)?),
        SessionPlan::Transcript(path) if path.is_file() => Some(path.clone()),
        SessionPlan::Transcript(path) => {
            let id = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(new_session_id);
            let session =
                Session::create(path.clone(), id, cwd, agent).map_err(BuildError::Session)?;
            return Ok((session, Vec::new(), Vec::new()));
        }
    };
    match resume {
        Some(path) => {
            let restored = Session::open(&path).map_err(BuildError::Session)?;
            Ok((restored.session, restored.messages, restored.notices))
        }
        None => {
            let id = new_session_id();
            let path = sessions.join(format!("{id}.jsonl"));
            let session = Session::create(path, id, cwd, agent).map_err(BuildError::Session)?;
            Ok((session, Vec::new(), Vec::new()))
        }
    }
}

fn resolve_llm(flags: &LlmFlags, config: &ConfigFiles) -> Result<LlmSettings, BuildError> {
    // In increasing priority (project, local, user), after the trust filter.
    let files = config.llm_settings()?;
    Ok(LlmSettings::resolve(
        flags,
        &roo_agent::sandbox::secret_env,
        &files,
    )?)
}

/// The git top level of `cwd`, or `cwd` itself outside a repository. Blocking.
pub fn detect_project_root(cwd: &Path) -> PathBuf {
    std::process::Command::new("git")
        .args(["rev-parse", "--show-toplevel"])
        .current_dir(cwd)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        .filter(|p| p.is_dir())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .unwrap_or_else(|| cwd.to_path_buf())
}
