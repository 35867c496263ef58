//! The one agent builder: the lead, `roo-worker` and in-process teammates are all built
//! here, from a plain [`AgentSettings`].
//!
//! The settings say who the agent is ([`Identity`]), where it works, which model, mode,
//! trust, sandbox, tools and transcript it has, who answers its permission questions and
//! which turn hooks it runs. Nothing here parses flags or knows a UI: the binaries turn
//! their flags into settings, and the UI hands in its approver and trust question.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use roo_agent::config::{
    ConfigError, ConfigFiles, HandedProjectConfig, ProjectTrust, SubagentLimits,
};
use roo_agent::exec::sandbox::CommandSetup;
use roo_agent::exec::{EnvSource, Launcher};
use roo_agent::permissions::{Approver, ParseModeError, PermissionMode, PermissionPolicy};
use roo_agent::skills::{Catalog, Skills};
use roo_agent::subagent::{ParentParts, SubagentRuntime};
use roo_agent::tool::{ReadFilter, ToolContext, ToolRegistry};
use roo_agent::tools::builtin_tools;
use roo_agent::{
    Agent, AgentCatalog, AgentHook, AgentOptions, CommandHooks, Environment, HookSetup,
    Instructions, McpHook, McpLaunch, McpServers, McpSettings, Persona, PlanApprover, Session,
    SessionError, SharedPolicy, instruction_parts, join_instructions, latest_session,
    load_instructions, new_session_id, plan_mode_tools, project_sessions_dir, session_path,
    system_prompt,
};
use roo_llm::{LlmError, LlmFlags, LlmSettings, Provider};

use crate::settings::{
    AgentSettings, Identity, McpPlan, PendingWorkspace, Role, SessionPlan, SpawnTools, ToolSet,
};
use crate::trust::{Trust, TrustDecision, decide};
use crate::worktree::subagents::{SubagentWorktrees, WorktreeSettings};

/// Tool results longer than this spill to a file with a preview.
pub const MAX_RESULT_CHARS: usize = 40_000;

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

/// Builds one agent from `settings`: one step per part, in the order the parts need
/// each other (which is also the order the notices are told in).
pub async fn build_agent(settings: AgentSettings) -> Result<BuiltAgent, BuildError> {
    let mut settings = settings;
    // Where it works, under which configuration, with which model.
    let pending = settings.pending_workspace.take();
    let pending = pending.as_ref();
    let (ws, trust_notices, llm, provider) = settle(&mut settings, pending.is_some()).await?;
    let identity = &settings.identity;

    // Its transcript: the trust notices are told first, then the repairs of a resume.
    let (session, messages, mut notices) = transcript(&settings, &ws, trust_notices)?;
    let resumed = !messages.is_empty();
    let session_dir = session.dir();
    let plan_file = session_dir.join("plan.md");

    // What it may do and with what.
    let (mode, policy, read_filter) =
        permissions(&ws, settings.permission_mode, &session_dir, &plan_file)?;
    let mut tool_set = std::mem::take(&mut settings.tools);
    let (tools, skills) = tool_registry(
        &ws,
        &mut tool_set,
        &policy,
        &plan_file,
        settings.plan_approver,
    );

    // How its commands and servers run, and what its tool calls run with.
    let helper = sandbox_helper(settings.sandbox_helper.take())?;
    let no_sandbox = settings.no_sandbox;
    let mut commands = command_setup(&ws, identity, &llm, no_sandbox, helper.clone(), pending)?;
    notices.append(&mut commands.notices);
    let mcp = mcp_servers(std::mem::take(&mut settings.mcp), &ws, &commands, &tools)?;
    let environment = environment(pending, &ws.cwd, &commands).await?;
    let context = tool_context(
        identity,
        &ws,
        commands,
        settings.env_source.take(),
        read_filter.clone(),
        pending,
        session_dir,
    )?;
    // What it is told, and what runs around its turns.
    let options = agent_options(identity, settings.max_turns, &llm);
    let persona = settings
        .persona
        .take()
        .unwrap_or_else(|| default_persona(identity));
    let system = system_prompt(&persona, &environment);
    let (command_hooks, hook_notices) = command_hooks(&ws, identity, session.id(), &context);
    notices.extend(hook_notices);
    let session_id = session.id().to_string();
    let (instructions, instruction_notices) = instructions(&ws, pending, mode, read_filter).await;

    // Its sub-agents inherit its parts; then the agent itself.
    let parts = AgentParts {
        provider,
        policy,
        approver: settings.approver,
        context,
        options,
        environment,
        instructions,
        command_hooks,
        skills,
        plan_file,
    };
    let subagents = tool_set
        .subagents
        .then(|| subagent_runtime(&ws, &parts, &llm, no_sandbox, helper, session_id, &tools));
    register_agent_tools(&tools, subagents.as_ref(), tool_set.spawn_tools.as_ref());
    for name in &tool_set.remove {
        tools.remove(name);
    }

    let mut agent = Agent::new(
        parts.provider,
        tools,
        parts.policy,
        parts.approver,
        system,
        parts.context,
        parts.options,
        parts.plan_file,
    )
    .with_session(session, messages);
    let hook_notices = attach_hooks(
        &mut agent,
        &ws,
        std::mem::take(&mut settings.hooks),
        &parts.command_hooks,
        mcp.as_ref(),
        parts.skills.as_ref(),
        subagents.as_ref(),
    )
    .await;
    notices.extend(hook_notices);
    if !resumed {
        notices.extend(instruction_notices);
        agent.set_instructions(parts.instructions);
    }
    Ok(BuiltAgent {
        agent,
        cwd: ws.cwd,
        project_root: ws.project_root,
        roo_home: ws.roo_home,
        notices,
        llm,
        trusted: ws.trusted,
        command_hooks: parts.command_hooks,
        skills: parts.skills,
        subagents,
        mcp,
        team_turns: ws.config.team_turns(),
    })
}

/// The first steps of [`build_agent`]: where the agent works (`pending`: its directory
/// is still being made), under which configuration (with the trust notices), with which
/// model. Takes what it settles out of `settings`.
async fn settle(
    settings: &mut AgentSettings,
    pending: bool,
) -> Result<(Workspace, Vec<String>, LlmSettings, Arc<dyn Provider>), BuildError> {
    let (cwd, project_root) =
        directories(settings.cwd.take(), settings.project_root.take(), pending).await?;
    let (mut ws, trust_notices) = configuration(
        cwd,
        project_root,
        settings.config_root.take(),
        settings.project_config.take(),
        std::mem::take(&mut settings.roo_home),
        &settings.trust,
    )
    .await?;
    ws.store_setting = settings.store_setting.take();
    let (llm, provider) = model(&settings.llm, &ws.config, settings.provider.take())?;
    Ok((ws, trust_notices, llm, provider))
}

/// The session `settings` ask for in `ws`'s project, with the messages it resumes and
/// the notices so far: `trust_notices` first, then the repairs of a resume.
fn transcript(
    settings: &AgentSettings,
    ws: &Workspace,
    trust_notices: Vec<String>,
) -> Result<(Session, Vec<roo_llm::Message>, Vec<String>), BuildError> {
    let sessions = project_sessions_dir(&ws.roo_home, &ws.project_root);
    let name = settings.identity.name.as_str();
    let (session, messages, mut notices) =
        open_session(&settings.session, &sessions, &ws.cwd, name)?;
    notices.splice(0..0, trust_notices);
    Ok((session, messages, notices))
}

/// The executable that runs commands in the sandbox: `helper`, else the running one.
fn sandbox_helper(helper: Option<PathBuf>) -> Result<PathBuf, BuildError> {
    match helper {
        Some(helper) => Ok(helper),
        None => std::env::current_exe().map_err(BuildError::Helper),
    }
}

/// The loop's options for `identity`.
fn agent_options(identity: &Identity, max_turns: u32, llm: &LlmSettings) -> AgentOptions {
    AgentOptions {
        agent_name: identity.name.to_string(),
        max_turns,
        max_tokens: llm.max_tokens,
        prices: llm.prices.clone(),
        text_tool_calls: llm.text_tool_calls_enabled(),
        // The lead tells the user once whether the model server's context fits; its
        // teammates use the same server.
        check_server_window: identity.role == Role::Lead,
        ..AgentOptions::default()
    }
}

/// Where an agent works and the configuration in force there: what the first steps of
/// [`build_agent`] settle and every later one reads.
struct Workspace {
    /// The canonical working directory.
    cwd: PathBuf,
    project_root: PathBuf,
    /// Where the config files were read and whose trust applies.
    config_root: PathBuf,
    roo_home: PathBuf,
    /// [`AgentSettings::store_setting`].
    store_setting: Option<String>,
    /// The config files, after the trust decision.
    config: ConfigFiles,
    /// Whether the project's config is honoured in full.
    trusted: bool,
    /// Where the project's instructions, agent definitions and skills come from.
    definitions: Definitions,
}

/// Where an agent's project instructions (`ROOCODE.md`), agent definitions
/// (`.roocode/agents/`) and skills (`.roocode/skills/`) come from: never a tree its
/// teammate-self can write and a later start would obey.
enum Definitions {
    /// This tree: the project root, or, for a teammate in a clone, the lead's tree its
    /// config comes from (`config_root`).
    Tree(PathBuf),
    /// A teammate on another host: the instructions its lead read in its own tree
    /// (one part per file) were handed over; no project agents or skills are read (the
    /// clone's are the teammate's to write).
    Handed { instructions: Vec<String> },
}

impl Definitions {
    /// The tree agents and skills are read from, if any.
    fn tree(&self) -> Option<&Path> {
        match self {
            Definitions::Tree(root) => Some(root),
            Definitions::Handed { .. } => None,
        }
    }
}

/// The parts of the agent being built that [`Agent::new`] takes and its sub-agents
/// inherit.
struct AgentParts {
    provider: Arc<dyn Provider>,
    policy: SharedPolicy,
    approver: Arc<dyn Approver>,
    context: ToolContext,
    options: AgentOptions,
    environment: Environment,
    instructions: Option<String>,
    command_hooks: Arc<CommandHooks>,
    skills: Option<Skills>,
    plan_file: PathBuf,
}

/// The working directory (`None`: the process's) and project root, resolved. A pending
/// workspace's are given resolved: there is nothing to inspect yet.
async fn directories(
    cwd: Option<PathBuf>,
    project_root: Option<PathBuf>,
    pending: bool,
) -> Result<(PathBuf, PathBuf), BuildError> {
    let cwd = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(BuildError::CurrentDir)?,
    };
    if pending {
        let root = project_root.unwrap_or_else(|| cwd.clone());
        return Ok((cwd, root));
    }
    existing_workspace(cwd, project_root).await
}

/// The config files of `config_root` (default: the project root), or those `handed`
/// holds (then no project file here is read, and the lead's trust decision on them
/// is final: this host's trust list is not consulted), and the trust decision on them,
/// with its notices. They are loaded untrusted first: what that leaves out is what
/// trust would enable.
async fn configuration(
    cwd: PathBuf,
    project_root: PathBuf,
    config_root: Option<PathBuf>,
    handed: Option<HandedProjectConfig>,
    roo_home: PathBuf,
    trust: &Trust,
) -> Result<(Workspace, Vec<String>), BuildError> {
    let config_root = match config_root {
        Some(root) if handed.is_none() => {
            std::fs::canonicalize(&root).map_err(|source| BuildError::ProjectRoot {
                path: root.clone(),
                source,
            })?
        }
        _ => project_root.clone(),
    };
    let TrustDecision {
        config,
        mut notices,
    } = match &handed {
        // The lead's decision is final: this host's trust list (which could name the
        // lead's path for a project of its own) is never consulted for it.
        Some(handed) => {
            let config = ConfigFiles::load_handed(&roo_home, handed, ProjectTrust::Untrusted)?;
            if handed.trusted {
                TrustDecision {
                    config: config.with_trust(ProjectTrust::Trusted)?,
                    notices: Vec::new(),
                }
            } else {
                let notices = config
                    .ignored()
                    .iter()
                    .map(|ignored| {
                        format!("ignored {ignored} (the lead does not trust this project)")
                    })
                    .collect();
                TrustDecision { config, notices }
            }
        }
        None => {
            let config = ConfigFiles::load(&roo_home, &config_root, ProjectTrust::Untrusted)?;
            decide(config, &config_root, &roo_home, trust).await?
        }
    };
    notices.extend(config.user_only_notices().iter().cloned());
    let trusted = config.trust() == ProjectTrust::Trusted;
    let definitions = match handed {
        Some(handed) => Definitions::Handed {
            instructions: handed.instructions,
        },
        None => Definitions::Tree(config_root.clone()),
    };
    let workspace = Workspace {
        cwd,
        project_root,
        config_root,
        roo_home,
        store_setting: None,
        config,
        trusted,
        definitions,
    };
    Ok((workspace, notices))
}

/// The model settings (flags, then the environment, then the config files after the
/// trust filter: user over local over project) and the provider: the one given, or one
/// built from the settings.
fn model(
    flags: &LlmFlags,
    config: &ConfigFiles,
    provider: Option<Arc<dyn Provider>>,
) -> Result<(LlmSettings, Arc<dyn Provider>), BuildError> {
    let files = config.llm_settings()?;
    let llm = LlmSettings::resolve(flags, &roo_agent::exec::sandbox::secret_env, &files)?;
    let provider = match provider {
        Some(provider) => provider,
        None => roo_llm::build_provider(&llm)?,
    };
    Ok((llm, provider))
}

/// The permission mode (the settings', else the config's, else `default`) and the
/// policy over the config's rules, which lets the agent write its session directory
/// (the plan file) and hides the team state; with its read filter, which the tools and
/// `@include` honour. The policy is shared: plan mode switches its mode.
fn permissions(
    ws: &Workspace,
    mode: Option<PermissionMode>,
    session_dir: &Path,
    plan_file: &Path,
) -> Result<(PermissionMode, SharedPolicy, ReadFilter), BuildError> {
    let mode = match mode {
        Some(mode) => mode,
        None => ws
            .config
            .permission_mode()?
            .unwrap_or(PermissionMode::Default),
    };
    let mut policy = PermissionPolicy::new(ws.project_root.clone(), mode, ws.config.rules());
    policy.add_allowed_root(session_dir.to_path_buf());
    policy.hide_team_state(&ws.roo_home);
    if mode == PermissionMode::Plan {
        policy.set_plan_file(Some(plan_file.to_path_buf()));
    }
    let read_filter = policy.read_filter();
    Ok((mode, Arc::new(RwLock::new(policy)), read_filter))
}

/// The agent's tools before MCP's and the Agent tool: the work tools with the skills
/// (an untrusted project's skills are not read), plan mode's, the extra ones, then the
/// deferred ones.
fn tool_registry(
    ws: &Workspace,
    set: &mut ToolSet,
    policy: &SharedPolicy,
    plan_file: &Path,
    plan_approver: PlanApprover,
) -> (ToolRegistry, Option<Skills>) {
    let tools = ToolRegistry::new();
    let skills = set.work.then(|| {
        for tool in builtin_tools() {
            tools.register(tool);
        }
        Skills::install(
            match ws.definitions.tree() {
                Some(root) => Catalog::new(&ws.roo_home, root, ws.trusted),
                None => Catalog::new(&ws.roo_home, &ws.project_root, false),
            },
            &tools,
        )
    });
    // Nobody can approve a plan in a headless run, so EnterPlanMode would only be
    // refused there: the tools go only where a plan can be approved, or where the run
    // starts in plan mode (the model is told to finish with ExitPlanMode). A run that
    // starts in plan mode gets them even without `set.plan_mode`: its mode may come
    // from the config (a `roo-worker` started by hand without `--permission-mode`),
    // and without ExitPlanMode it could never leave plan mode.
    let starts_in_plan = policy
        .read()
        .is_ok_and(|p| p.mode() == roo_agent::permissions::PermissionMode::Plan);
    let plan_possible = plan_approver == PlanApprover::Present || starts_in_plan;
    if (set.plan_mode && plan_possible) || starts_in_plan {
        for tool in plan_mode_tools(policy.clone(), plan_file.to_path_buf(), plan_approver) {
            tools.register(tool);
        }
    }
    for tool in std::mem::take(&mut set.extra) {
        tools.register(tool);
    }
    for tool in std::mem::take(&mut set.deferred) {
        tools.register_deferred(tool);
    }
    (tools, skills)
}

/// How the agent's commands run: the config's sandbox (off with `no_sandbox`) around
/// the project root, plus the git directories of a checkout still being made, with the
/// provider's key scrubbed from their environment.
fn command_setup(
    ws: &Workspace,
    identity: &Identity,
    llm: &LlmSettings,
    no_sandbox: bool,
    helper: PathBuf,
    pending: Option<&PendingWorkspace>,
) -> Result<CommandSetup, BuildError> {
    let sandbox_settings = ws.config.sandbox_settings(
        &ws.project_root,
        roo_store::user_home().as_deref(),
        no_sandbox,
    )?;
    let mut commands = CommandSetup::for_agent(
        &sandbox_settings,
        &ws.project_root,
        &ws.roo_home,
        llm.api_key.as_deref(),
        helper,
    );
    if let (Some(pending), Some(policy)) = (pending, commands.sandbox.policy.as_mut()) {
        policy.write.extend(pending.git_dirs.iter().cloned());
    }
    if let Some(policy) = commands.sandbox.policy.as_mut() {
        // A command holding the spawn lock would stall every spawn of the team. The
        // lead's git adds worktrees beside it, so only a teammate's Landlock denies it.
        policy.conceal(
            crate::worktree::worktrees_lock_path(&ws.config_root),
            matches!(identity.role, Role::Teammate { .. }),
        );
    }
    Ok(commands)
}

/// A launcher of processes in the agent's sandbox, without the variables its commands
/// lose (for MCP servers and the git that inspects the workspace).
fn sandboxed_launcher(commands: &CommandSetup) -> Launcher {
    Launcher {
        env_remove: commands.env_remove.clone(),
        ..Launcher::new(Some(Arc::new(commands.sandbox.clone())))
    }
}

/// The agent's MCP servers, their tools attached: started now, so they connect while
/// the rest is built (the first prompt waits for them, bounded); or the process's,
/// shared; or none. An untrusted project's servers were filtered out with its config.
fn mcp_servers(
    plan: McpPlan,
    ws: &Workspace,
    commands: &CommandSetup,
    tools: &ToolRegistry,
) -> Result<Option<McpServers>, BuildError> {
    let mcp = match plan {
        McpPlan::Start if !ws.config.mcp_servers().is_empty() => Some(McpServers::start(
            ws.config.mcp_servers(),
            McpSettings::from_config(&ws.config)?,
            McpLaunch {
                project_root: ws.project_root.clone(),
                log_dir: ws.roo_home.join("logs"),
                launcher: sandboxed_launcher(commands),
            },
        )),
        McpPlan::Start | McpPlan::Off => None,
        McpPlan::Shared(servers) => Some(servers),
    };
    if let Some(mcp) = &mcp {
        mcp.attach(tools);
    }
    Ok(mcp)
}

/// What the system prompt says about where the agent works: given for a checkout still
/// being made, else detected, its git run in the agent's sandbox (see
/// `Environment::detect`).
async fn environment(
    pending: Option<&PendingWorkspace>,
    cwd: &Path,
    commands: &CommandSetup,
) -> Result<Environment, BuildError> {
    if let Some(pending) = pending {
        return Ok(pending.environment.clone());
    }
    let cwd = cwd.to_path_buf();
    let launcher = sandboxed_launcher(commands);
    tokio::task::spawn_blocking(move || Environment::detect(&cwd, &launcher))
        .await
        .map_err(|e| BuildError::Inspect(e.to_string()))
}

/// What every tool call runs with: the directories, the read filter, a pending
/// checkout's gate, and the launcher of commands — the sandbox, the variables they get
/// ([`tool_env`], the ones passed on) and lose, and the relay through which `roo-mail`
/// and `roo-task` in them reach the team through this agent.
fn tool_context(
    identity: &Identity,
    ws: &Workspace,
    commands: CommandSetup,
    env_source: Option<EnvSource>,
    read_filter: ReadFilter,
    pending: Option<&PendingWorkspace>,
    session_dir: PathBuf,
) -> Result<ToolContext, BuildError> {
    let mut env = tool_env(identity, &ws.roo_home);
    env.extend(commands.env_add);
    let mut env_remove = commands.env_remove;
    env_remove.extend(roo_agent::exec::ESCAPE_ENV.iter().map(|s| s.to_string()));
    let service = crate::relay::serve(
        crate::relay::RelayEnv {
            fixed: env.clone(),
            source: env_source.clone(),
            store: ws.store_setting.clone(),
        },
        matches!(identity.role, Role::Lead),
    )
    .map_err(|e| BuildError::Inspect(format!("could not start the team-command relay: {e}")))?;
    Ok(ToolContext {
        max_result_chars: MAX_RESULT_CHARS,
        read_filter,
        launcher: Launcher {
            sandbox: Some(Arc::new(commands.sandbox)),
            env_remove,
            env,
            env_source,
            service: Some(service),
        },
        workspace: pending.map(|p| p.gate.clone()),
        ..ToolContext::new(ws.cwd.clone(), session_dir)
    })
}

/// The config's command hooks, with their notices. They run for every agent built
/// here: the lead, `roo-worker` and in-process teammates (an untrusted project's hooks
/// were filtered out).
fn command_hooks(
    ws: &Workspace,
    identity: &Identity,
    session_id: &str,
    context: &ToolContext,
) -> (Arc<CommandHooks>, Vec<String>) {
    let (hooks, notices) = CommandHooks::new(
        ws.config.hooks(),
        HookSetup {
            agent_name: identity.name.to_string(),
            team: identity.team.as_ref().map(|t| t.to_string()),
            session_id: Some(session_id.to_string()),
            project_root: ws.project_root.clone(),
            context: context.clone(),
        },
    );
    (Arc::new(hooks), notices)
}

/// The project's instructions (`ROOCODE.md`), with the notices of what was refused.
/// `@include` honours the same ReadFile deny rules as the tools. They are read where
/// [`Workspace::definitions`] says: a teammate in a clone reads the lead's tree (also
/// while its checkout is still being made), under the same rules rooted there, never
/// the clone it can write; a teammate on another host gets those its lead handed over
/// (and its own user's on that host).
async fn instructions(
    ws: &Workspace,
    pending: Option<&PendingWorkspace>,
    mode: PermissionMode,
    read_filter: ReadFilter,
) -> (Option<String>, Vec<String>) {
    let root = match (pending, &ws.definitions) {
        (Some(pending), _) => Some(pending.instructions_root.clone()),
        (None, Definitions::Tree(root)) => Some(root.clone()),
        (None, Definitions::Handed { .. }) => None,
    };
    let read_filter = match &root {
        Some(root) if *root != ws.project_root => {
            PermissionPolicy::new(root.clone(), mode, ws.config.rules()).read_filter()
        }
        _ => read_filter,
    };
    let handed = match &ws.definitions {
        Definitions::Handed { instructions } if root.is_none() => instructions.clone(),
        _ => Vec::new(),
    };
    let home = ws.roo_home.clone();
    let loaded = tokio::task::spawn_blocking(move || {
        let denied = |path: &Path| read_filter.denied(path);
        match root {
            Some(root) => load_instructions(&root, &home, &denied),
            None => {
                let own = instruction_parts(None, Some(&home), &denied);
                let parts: Vec<String> = handed.into_iter().chain(own.parts).collect();
                Instructions {
                    text: join_instructions(&parts),
                    notices: own.notices,
                }
            }
        }
    })
    .await
    .unwrap_or_default();
    (loaded.text, loaded.notices)
}

/// The agent's sub-agents and background tasks (limits from the config's `agents:`).
/// They get the parent's parts — the Agent tool never learns whose they are — and
/// worktrees made by the agent's own git, in its sandbox. Fork-mode skills run on it.
fn subagent_runtime(
    ws: &Workspace,
    parts: &AgentParts,
    llm: &LlmSettings,
    no_sandbox: bool,
    helper: PathBuf,
    session: String,
    tools: &ToolRegistry,
) -> SubagentRuntime {
    let section = ws.config.agents();
    let parent = ParentParts {
        provider: parts.provider.clone(),
        policy: parts.policy.clone(),
        approver: parts.approver.clone(),
        context: parts.context.clone(),
        options: parts.options.clone(),
        environment: parts.environment.clone(),
        instructions: parts.instructions.clone(),
        lifecycle: if parts.command_hooks.is_empty() {
            Vec::new()
        } else {
            vec![parts.command_hooks.clone() as Arc<dyn AgentHook>]
        },
        skills: parts.skills.clone(),
        plan_file: parts.plan_file.clone(),
        catalog: AgentCatalog::new(
            &ws.roo_home,
            ws.definitions.tree().unwrap_or(&ws.project_root),
            ws.trusted && ws.definitions.tree().is_some(),
            section.verification.unwrap_or(false),
        ),
        worktrees: Some(Arc::new(SubagentWorktrees::new(WorktreeSettings {
            project_root: ws.project_root.clone(),
            git: crate::worktree::Git::new().in_launcher_of(&parts.context.launcher),
            config: ws.config.clone(),
            roo_home: ws.roo_home.clone(),
            api_key: llm.api_key.clone(),
            no_sandbox,
            helper,
            session_dir: parts.context.session_dir.clone(),
            session,
        }))),
    };
    let runtime = SubagentRuntime::new(parent, SubagentLimits::from_section(section), tools);
    if let Some(skills) = &parts.skills {
        skills.set_fork_runtime(Box::new(runtime.downgrade()));
    }
    runtime
}

/// The Agent and TaskStop tools: the sub-agents', or those of `spawn_tools` (the lead's
/// teammate spawner's, which take the sub-agents' over where there are some).
fn register_agent_tools(
    tools: &ToolRegistry,
    subagents: Option<&SubagentRuntime>,
    spawn_tools: Option<&SpawnTools>,
) {
    match (spawn_tools, subagents) {
        (Some(spawn_tools), subagents) => {
            for tool in spawn_tools(subagents) {
                tools.register(tool);
            }
        }
        (None, Some(runtime)) => {
            let (agent_tool, stop_tool) = runtime.tools();
            tools.register(agent_tool);
            tools.register(stop_tool);
        }
        (None, None) => {}
    }
}

/// Hooks the agent's loop: the settings' turn hooks, the config's command hooks, the
/// MCP servers', the skills' scopes and the sub-agents' notifications. Returns the
/// notices of the skills and agent definitions skipped (bad ones are reported at start).
async fn attach_hooks(
    agent: &mut Agent,
    ws: &Workspace,
    hooks: Vec<Arc<dyn AgentHook>>,
    command_hooks: &Arc<CommandHooks>,
    mcp: Option<&McpServers>,
    skills: Option<&Skills>,
    subagents: Option<&SubagentRuntime>,
) -> Vec<String> {
    let mut notices = Vec::new();
    for hook in hooks {
        agent.add_hook(hook);
    }
    if !command_hooks.is_empty() {
        agent.add_hook(command_hooks.clone());
    }
    if let Some(mcp) = mcp {
        agent.add_hook(Arc::new(McpHook::new(mcp.clone())));
    }
    if let Some(skills) = skills {
        agent.add_hook(Arc::new(skills.scopes.clone()));
        notices.extend(skill_notices(skills, ws).await);
    }
    if let Some(runtime) = subagents {
        agent.add_hook(runtime.notifications());
        let catalog = runtime.catalog().clone();
        notices.extend(
            tokio::task::spawn_blocking(move || catalog.scan().warnings)
                .await
                .unwrap_or_default(),
        );
    }
    notices
}

/// Skills skipped at start, and an untrusted project's skills (or a clone's on another
/// host) left unread.
async fn skill_notices(skills: &Skills, ws: &Workspace) -> Vec<String> {
    let catalog = skills.catalog.clone();
    let mut notices = tokio::task::spawn_blocking(move || catalog.scan().warnings)
        .await
        .unwrap_or_default();
    match ws.definitions.tree() {
        Some(root) => {
            let dir = root.join(".roocode").join("skills");
            if !ws.trusted && dir.is_dir() {
                notices.push(format!(
                    "the skills in {} are ignored: the project is not trusted",
                    dir.display()
                ));
            }
        }
        None => {
            let dir = ws.project_root.join(".roocode").join("skills");
            if dir.is_dir() {
                notices.push(format!(
                    "the skills in {} are ignored: a teammate on another host takes its \
                     project's instructions and config from its lead, never from its clone",
                    dir.display()
                ));
            }
        }
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
                     messages; the user speaks to you only through the lead. Your final answer of a run \
                     reaches the lead: report there.",
                    name = identity.name
                ),
                ..Persona::default()
            }
        }
    }
}

/// The session the conversation is recorded in, with the messages it resumes and the
/// repairs made reading them (as notices).
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

/// The git top level of `cwd`, or `cwd` itself outside a repository. Blocking. Git runs
/// as all of the crate's git does ([`crate::worktree::Git`]: no hooks, no fsmonitor, no
/// variables that redirect it), before the project is trusted.
pub fn detect_project_root(cwd: &Path) -> PathBuf {
    crate::worktree::Git::new()
        .run(cwd, &["rev-parse", "--show-toplevel"])
        .ok()
        .filter(|out| out.success)
        .map(|out| PathBuf::from(out.stdout.trim()))
        .filter(|p| p.is_dir())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .unwrap_or_else(|| cwd.to_path_buf())
}
