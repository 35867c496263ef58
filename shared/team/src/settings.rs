//! What an agent is built from: [`AgentSettings`], plain data (who the agent is, where it
//! works, its model, mode, trust, sandbox, tools, transcript, approver and hooks).
//!
//! A leaf of the crate: it names no builder step, spawner or backend, so everything that
//! carries settings (a backend's [`crate::backend::Launch`], the spawner's recipes, the
//! teammate loop) depends on this file only, and [`crate::builder`] turns the settings
//! into an agent.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use roo_agent::config::HandedProjectConfig;
use roo_agent::exec::EnvSource;
use roo_agent::permissions::{Approver, DenyApprover, PermissionMode};
use roo_agent::subagent::SubagentRuntime;
use roo_agent::tool::{Tool, WorkspaceGate};
use roo_agent::{AgentHook, Environment, McpServers, Persona, PlanApprover};
use roo_llm::{LlmFlags, Provider};
use roo_store::Name;

use crate::trust::Trust;
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
    /// The `Agent` and `TaskStop` of a lead that spawns teammates (its spawner's:
    /// `Agent` with a `name` spawns a teammate while the lead is in a team, and
    /// `TaskStop` stops teammates too), in place of the sub-agents' own. `None` for
    /// teammates, which cannot spawn teammates.
    pub spawn_tools: Option<SpawnTools>,
}

/// Builds the `Agent` and `TaskStop` tools that take over the sub-agents' ones, given
/// the agent's sub-agents once they exist (`None`: it has none); the builder registers
/// what it returns. The spawner provides one ([`crate::Spawner::spawn_tools`]), so the
/// builder knows no spawner.
pub type SpawnTools = Arc<dyn Fn(Option<&SubagentRuntime>) -> Vec<Arc<dyn Tool>> + Send + Sync>;

impl Default for ToolSet {
    fn default() -> Self {
        ToolSet {
            work: true,
            plan_mode: true,
            extra: Vec::new(),
            deferred: Vec::new(),
            remove: Vec::new(),
            subagents: true,
            spawn_tools: None,
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
            .field("spawn_tools", &self.spawn_tools.is_some())
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
    /// The branch of a checkout made for this agent just now in its working directory (a
    /// lead's new clone for a pane teammate): the environment of its system prompt is
    /// taken from that, without git, once the clone's `HEAD` file agrees
    /// (`Environment::for_fresh_checkout`); else it is detected. `None`: detected.
    pub fresh_checkout: Option<String>,
    /// The file the lead writes once this agent's new clone (`cwd`, on the branch
    /// [`AgentSettings::fresh_checkout`] names) is complete or failed: a pane teammate
    /// starts while the clone is made and waits on it ([`crate::backend::clone_gate`])
    /// before any tool call or hook. `None`: the clone is there already.
    pub clone_gate: Option<PathBuf>,
    /// Variables its commands get, read as each starts (a lead's team, once it made
    /// one: [`crate::TeamSlot::env_source`]).
    pub env_source: Option<EnvSource>,
    /// Its MCP servers: started here, or shared with the process's first agent.
    pub mcp: McpPlan,
    /// Its spending caps and the team they count in (`None`: no spend gate).
    pub budget: Option<crate::budget::BudgetPlan>,
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
            .field("fresh_checkout", &self.fresh_checkout)
            .field("clone_gate", &self.clone_gate)
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
            fresh_checkout: None,
            clone_gate: None,
            env_source: None,
            mcp: McpPlan::Start,
            budget: None,
        }
    }
}
