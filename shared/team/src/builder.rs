//! The one agent builder: the lead, `roo-worker` and in-process teammates are all built
//! here, from a plain [`AgentSettings`].
//!
//! The settings say who the agent is ([`Identity`]), where it works, which model, mode,
//! trust, sandbox, tools and transcript it has, who answers its permission questions and
//! which turn hooks it runs. Nothing here parses flags or knows a UI: the binaries turn
//! their flags into settings, and the UI hands in its approver and trust question.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use roo_agent::agent_loop::{Agent, AgentOptions, SharedPolicy};
use roo_agent::agents::AgentCatalog;
use roo_agent::config::{
    ConfigError, ConfigFiles, HandedProjectConfig, ProjectTrust, SubagentLimits,
};
use roo_agent::exec::Launcher;
use roo_agent::hooks::{AgentHook, CommandHooks, HookSetup};
use roo_agent::mcp::{Launch, McpHook, McpServers, McpSettings};
use roo_agent::permissions::{
    Approver, DenyApprover, ParseModeError, PermissionMode, PermissionPolicy,
};
use roo_agent::plan_mode::{PlanApprover, plan_mode_tools};
use roo_agent::prompt::{
    Environment, Instructions, Persona, instruction_parts, join_instructions, load_instructions,
    system_prompt,
};
use roo_agent::sandbox::CommandSetup;
use roo_agent::session::{
    Session, SessionError, latest_session, new_session_id, project_sessions_dir, session_path,
};
use roo_agent::skills::{Catalog, Skills};
use roo_agent::subagent::{ParentParts, SubagentRuntime};
use roo_agent::tool::{EnvSource, ReadFilter, Tool, ToolContext, ToolRegistry, WorkspaceGate};
use roo_agent::tools::builtin_tools;
use roo_llm::{LlmError, LlmFlags, LlmSettings, Provider};
use roo_store::Name;

use crate::trust::{Trust, TrustDecision, decide};
use crate::worktree::subagents::{SubagentWorktrees, WorktreeSettings};

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
    /// EnterPlanMode and ExitPlanMode (bound to this agent's policy and plan file)
    /// where a plan can be approved; an agent that starts in plan mode gets them
    /// whatever this says.
    pub plan_mode: bool,
    /// More tools (a team's coordination tools, …), registered after the others; a
    /// tool with the name of an earlier one replaces it.
    pub extra: Vec<Arc<dyn Tool>>,
    /// Tools registered deferred: their schemas are not sent until revealed (a lead's
    /// team tools until its team is bound, see `crate::reveal_on_bind`); one called by
    /// name is revealed and the model asked to call it again.
    pub deferred: Vec<Arc<dyn Tool>>,
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
            deferred: Vec::new(),
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
            .field(
                "deferred",
                &self.deferred.iter().map(|t| t.name()).collect::<Vec<_>>(),
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
    /// The project's config files as the lead read them in its own tree (a teammate on
    /// another host): when set, no project config file is read here at all, and
    /// `config_root` is not used for them.
    pub project_config: Option<HandedProjectConfig>,
    pub roo_home: PathBuf,
    /// Where the team's documents live, as `ROO_STORE` says it (`file`, or a PostgreSQL
    /// URL: a secret, never shown), for the CLIs its commands run through the relay and
    /// the pane workers it hands its environment to; `None`: the process's own
    /// `ROO_STORE` (sealed with the API keys).
    pub store_setting: Option<String>,
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
    pub hooks: Vec<Arc<dyn AgentHook>>,
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
            .field(
                "project_config",
                &self.project_config.as_ref().map(|c| &c.root),
            )
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
            project_config: None,
            roo_home,
            store_setting: None,
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

/// Builds one agent from `settings`: one step per part, in the order the parts need
/// each other (which is also the order the notices are told in).
pub async fn build_agent(settings: AgentSettings) -> Result<BuiltAgent, BuildError> {
    let AgentSettings {
        identity,
        cwd,
        project_root,
        config_root,
        project_config,
        roo_home,
        store_setting,
        llm,
        provider,
        permission_mode,
        trust,
        no_sandbox,
        sandbox_helper,
        tools: mut tool_set,
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
    // Where it works, under which configuration, with which model.
    let pending = pending_workspace.as_ref();
    let (cwd, project_root) = directories(cwd, project_root, pending.is_some()).await?;
    let (mut ws, trust_notices) = configuration(
        cwd,
        project_root,
        config_root,
        project_config,
        roo_home,
        &trust,
    )
    .await?;
    ws.store_setting = store_setting;
    let (llm, provider) = model(&llm, &ws.config, provider)?;

    // Its transcript: the trust notices are told first, then the repairs of a resume.
    let sessions = project_sessions_dir(&ws.roo_home, &ws.project_root);
    let (session, messages, mut notices) =
        open_session(&session_plan, &sessions, &ws.cwd, identity.name.as_str())?;
    notices.splice(0..0, trust_notices);
    let resumed = !messages.is_empty();
    let session_dir = session.dir();
    let plan_file = session_dir.join("plan.md");

    // What it may do and with what.
    let (mode, policy, read_filter) = permissions(&ws, permission_mode, &session_dir, &plan_file)?;
    let (tools, skills) = tool_registry(&ws, &mut tool_set, &policy, &plan_file, plan_approver);

    // How its commands and servers run, and what its tool calls run with.
    let helper = match sandbox_helper {
        Some(helper) => helper,
        None => std::env::current_exe().map_err(BuildError::Helper)?,
    };
    let mut commands = command_setup(&ws, &identity, &llm, no_sandbox, helper.clone(), pending)?;
    notices.append(&mut commands.notices);
    let mcp = mcp_servers(mcp_plan, &ws, &commands, &tools)?;
    let environment = environment(pending, &ws.cwd, &commands).await?;
    let context = tool_context(
        &identity,
        &ws,
        commands,
        env_source,
        read_filter.clone(),
        pending,
        session_dir,
    )?;
    // What it is told, and what runs around its turns.
    let options = AgentOptions {
        agent_name: identity.name.to_string(),
        max_turns,
        max_tokens: llm.max_tokens,
        prices: llm.prices.clone(),
        text_tool_calls: llm.text_tool_calls_enabled(),
        // The lead tells the user once whether the model server's context fits; its
        // teammates use the same server.
        check_server_window: identity.role == Role::Lead,
        ..AgentOptions::default()
    };
    let persona = persona.unwrap_or_else(|| default_persona(&identity));
    let system = system_prompt(&persona, &environment);
    let (command_hooks, hook_notices) = command_hooks(&ws, &identity, session.id(), &context);
    notices.extend(hook_notices);
    let session_id = session.id().to_string();
    let (instructions, instruction_notices) = instructions(&ws, pending, mode, read_filter).await;

    // Its sub-agents inherit its parts; then the agent itself.
    let parts = AgentParts {
        provider,
        policy,
        approver,
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
    register_agent_tools(&tools, subagents.as_ref(), tool_set.spawner.as_ref());
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
        hooks,
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
    let llm = LlmSettings::resolve(flags, &roo_agent::sandbox::secret_env, &files)?;
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
            Launch {
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

/// The Agent and TaskStop tools: the sub-agents', the lead's teammate spawner's, or
/// both in one (`Agent` with a `name` spawns a teammate; `TaskStop` stops either).
fn register_agent_tools(
    tools: &ToolRegistry,
    subagents: Option<&SubagentRuntime>,
    spawner: Option<&crate::Spawner>,
) {
    if let Some(runtime) = subagents {
        let (agent_tool, stop_tool) = runtime.tools();
        match spawner {
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
    } else if let Some(spawner) = spawner {
        for tool in spawner.tools() {
            tools.register(tool);
        }
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
