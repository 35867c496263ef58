//! The one agent builder: the lead, `roo-worker` and in-process teammates are all built
//! here, from a plain [`AgentSettings`].
//!
//! The settings say who the agent is ([`Identity`]), where it works, which model, mode,
//! trust, sandbox, tools and transcript it has, who answers its permission questions and
//! which turn hooks it runs. Nothing here parses flags or knows a UI: the binaries turn
//! their flags into settings, and the UI hands in its approver and trust question.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use roo_agent::config::ConfigError;
use roo_agent::permissions::{Approver, ParseModeError};
use roo_agent::skills::Skills;
use roo_agent::subagent::SubagentRuntime;
use roo_agent::tool::ToolContext;
use roo_agent::{
    Agent, AgentOptions, CheckpointLimits, Checkpoints, CommandHooks, Environment, McpServers,
    Persona, SessionError, SharedPolicy, system_prompt,
};
use roo_llm::{LlmError, LlmSettings, Provider};

use crate::settings::{AgentSettings, Identity, Role};

mod attachments;
mod confinement;
mod transcript;
mod workspace;

use attachments::{
    attach_hooks, command_hooks, instructions, mcp_servers, register_agent_tools, subagent_runtime,
    tool_registry,
};
use confinement::{command_setup, environment, permissions, sandbox_helper, tool_context};
use transcript::transcript;
use workspace::settle;

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
    /// Its MCP servers (`None`: none configured, or [`McpPlan::Off`](crate::settings::McpPlan::Off)): for `/mcp`,
    /// prompts as commands, teammates sharing them and the shutdown at exit.
    pub mcp: Option<McpServers>,
    /// The config's `team_turns`: whether an idle interactive lead takes its teammates'
    /// messages as a turn of its own.
    pub team_turns: bool,
    /// The config's `member_roles`: what a lead's spawner gives teammates in processes
    /// of their own on the PostgreSQL store.
    pub member_roles: roo_store::MemberRoles,
    /// The config's `verify:` (trusted files only): the command the lead's TeamMerge
    /// runs on a merge before the user's branch moves.
    pub verify: Option<roo_agent::config::VerifySetting>,
    /// Its spend gate (`None`: built without a [`crate::budget::BudgetPlan`]): what it
    /// spent, for the summaries.
    pub budget: Option<Arc<crate::budget::TeamSpendGate>>,
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
    let fresh_checkout = settings.fresh_checkout.take();
    let environment = environment(pending, fresh_checkout, &ws.cwd, &commands).await?;
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
    let mut options = agent_options(identity, settings.max_turns, &llm);
    options.checkpoints = checkpoints(&ws, session.id(), &mut notices);
    let budget = settings
        .budget
        .take()
        .map(|plan| crate::budget::TeamSpendGate::new(plan, ws.config.budget()));
    options.spend_gate = budget
        .clone()
        .map(|gate| roo_agent::SharedSpendGate(gate as Arc<dyn roo_agent::SpendGate>));
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
        member_roles: ws.config.member_roles(),
        verify: ws.config.verify().cloned(),
        budget,
    })
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

/// The agent's checkpoints in its project (its own clone for a teammate), under the
/// config's `checkpoints:` limits; `None` when they are off or cannot be opened (said).
fn checkpoints(
    ws: &workspace::Workspace,
    session_id: &str,
    notices: &mut Vec<String>,
) -> Option<Arc<Checkpoints>> {
    let limits = CheckpointLimits::from_section(ws.config.checkpoints());
    if !limits.enabled {
        return None;
    }
    match Checkpoints::open(&ws.roo_home, &ws.project_root, session_id, limits) {
        Ok(checkpoints) => Some(Arc::new(checkpoints)),
        Err(e) => {
            notices.push(format!("checkpoints are off for this session: {e}"));
            None
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

/// How long [`detect_project_root`]'s git run may take: it reads a few files, so only a
/// repository that holds it (a FIFO planted as `.git/HEAD`) reaches the limit.
const ROOT_DETECTION_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The git top level of `cwd`, or `cwd` itself outside a repository. Blocking. Git runs
/// as all of the crate's git does ([`crate::worktree::Git`]: no hooks, no fsmonitor, no
/// variables that redirect it), before the project is trusted, and bounded in time: a
/// git that does not answer is an error naming the directory, never a silent `cwd`.
pub fn detect_project_root(cwd: &Path) -> Result<PathBuf, BuildError> {
    let began = std::time::Instant::now();
    let out = crate::worktree::Git::new()
        .run_limited(cwd, &["rev-parse", "--show-toplevel"], ROOT_DETECTION_LIMIT)
        .ok();
    if out.as_ref().is_some_and(|out| !out.success) && began.elapsed() >= ROOT_DETECTION_LIMIT {
        return Err(BuildError::Inspect(format!(
            "`git rev-parse --show-toplevel` in {} did not answer within {} s and was ended; \
             a FIFO or device in the repository's .git (such as .git/HEAD) can hold git: \
             check the repository, or run from another directory",
            cwd.display(),
            ROOT_DETECTION_LIMIT.as_secs()
        )));
    }
    Ok(out
        .filter(|out| out.success)
        .map(|out| PathBuf::from(out.stdout.trim()))
        .filter(|p| p.is_dir())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .unwrap_or_else(|| cwd.to_path_buf()))
}
