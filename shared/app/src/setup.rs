//! Turning `roo-lead`'s flags into [`AgentSettings`] and building the lead with the one
//! agent builder (`roo_team::build_agent`), which `roo-worker` and in-process teammates
//! share. What is the lead's alone lives here: its approver is the terminal (a question
//! channel the REPL answers) or nobody (a `-p` run), and its trust question is asked on
//! the terminal.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use roo_agent::Agent;
use roo_agent::PlanApprover;
use roo_agent::permissions::{Approval, Approver, DenyApprover, PermissionMode, PermissionRequest};
use roo_llm::LlmFlags;
use roo_store::{BackendType, Name, RooHome};
use roo_team::backend::detect::{DetectEnv, DetectError, Detection, Mode as DetectMode, detect};
use roo_team::worktree::Git;
use roo_team::{
    AgentSettings, ApproverDecider, BuildError, BuildErrorKind, Identity, LeadTools, PolicyDecider,
    RequestDecider, SessionPlan, SlotDelivery, Spawner, TeamEvent, TeamEventSender, TeamSlot,
    TeamStateReminder, TeamStatus, TeamTools, TeammateBase, Trust, lead_tools, team_events,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::exit::AppError;
use crate::flags::LeadArgs;
use roo_team::backend::worker_launch::ProviderArgs;

/// A question for the human, with the channel for the answer.
pub struct PendingApproval {
    pub request: PermissionRequest,
    pub reply: oneshot::Sender<Approval>,
}

/// Asks through the terminal UI: sends the request to the REPL and waits.
pub struct ChannelApprover {
    tx: mpsc::Sender<PendingApproval>,
}

impl ChannelApprover {
    /// An approver and the receiving end the UI answers from.
    pub fn new() -> (ChannelApprover, mpsc::Receiver<PendingApproval>) {
        let (tx, rx) = mpsc::channel(1);
        (ChannelApprover { tx }, rx)
    }
}

impl Approver for ChannelApprover {
    fn ask<'a>(&'a self, request: &'a PermissionRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let pending = PendingApproval {
                request: request.clone(),
                reply,
            };
            if self.tx.send(pending).await.is_err() {
                return Approval::Deny {
                    feedback: Some("nobody is there to answer".to_string()),
                };
            }
            answer.await.unwrap_or(Approval::Deny {
                feedback: Some("the question was dismissed".to_string()),
            })
        })
    }
}

/// An agent ready to run, and what the UI needs around it.
pub struct Built {
    pub agent: Agent,
    /// Things to tell the user at start (resume repairs).
    pub notices: Vec<String>,
    /// Permission questions for the interactive UI.
    pub approvals: Option<mpsc::Receiver<PendingApproval>>,
    /// Where the team runtime reports teammates' messages and states…
    pub team_sender: TeamEventSender,
    /// …and where the UI reads them (the REPL shows them even while the user types).
    pub team_events: mpsc::Receiver<TeamEvent>,
    /// The lead's team, once it has one: the team tools bind it (TeamCreate) and
    /// unbind it (TeamDelete); `--team` binds it at start.
    pub team: TeamSlot,
    /// The teammates' states while the slot is bound (`None` while not), kept current
    /// by the team monitor.
    pub team_status: watch::Receiver<Option<TeamStatus>>,
    /// Where the spawner (the Agent tool) starts teammates (`--teammate-mode`).
    pub teammate_mode: BackendType,
    /// The lead's teammates (the Agent tool's): in-process ones end with the team's
    /// background tasks.
    pub spawner: Spawner,
    /// The lead's skills, for `/<skill>` (`None` without the work tools).
    pub skills: Option<roo_agent::skills::Skills>,
    /// The lead's sub-agents and background tasks (`/tasks`; shut down at exit).
    pub subagents: Option<roo_agent::subagent::SubagentRuntime>,
    /// The process's MCP servers (`None`: none configured): `/mcp`, prompt commands,
    /// shared with in-process teammates, shut down at exit.
    pub mcp: Option<roo_agent::McpServers>,
    /// The config's `team_turns`: the idle interactive lead takes its teammates'
    /// messages as a turn of its own.
    pub team_turns: bool,
    /// Stops the lead's team background tasks (monitor, request answerer, a `--team`
    /// router, in-process teammates) when `Built` is dropped.
    _team_tasks_guard: tokio_util::sync::DropGuard,
}

/// The lead's settings from its flags. `interactive` selects the approver (the terminal,
/// or a denial: nobody can answer a headless run) and whether trust is asked.
pub fn lead_settings(
    args: &LeadArgs,
    interactive: bool,
    roo_home: PathBuf,
) -> Result<(AgentSettings, Option<mpsc::Receiver<PendingApproval>>), AppError> {
    let name =
        Name::parse(roo_team::DEFAULT_LEAD_NAME).map_err(|e| AppError::Usage(e.to_string()))?;
    let mut settings = AgentSettings::new(Identity::solo(name), roo_home);
    settings.cwd = args.cwd.clone();
    settings.llm = llm_flags(&args.provider);
    settings.permission_mode = args
        .permission_mode
        .as_deref()
        .map(|m| m.parse::<PermissionMode>())
        .transpose()
        .map_err(|e| AppError::Usage(e.to_string()))?;
    settings.trust = if args.trust_project {
        Trust::Granted
    } else if interactive {
        Trust::Ask(Arc::new(crate::trust::TerminalQuestion))
    } else {
        Trust::AsListed
    };
    settings.no_sandbox = args.no_sandbox;
    settings.session = match (&args.resume, args.continue_latest) {
        (Some(id), _) => SessionPlan::Resume(id.clone()),
        (None, true) => SessionPlan::Latest,
        (None, false) => SessionPlan::New,
    };
    settings.max_turns = args.max_turns;
    if args.coordinator {
        settings
            .tools
            .remove
            .extend(roo_agent::permissions::CODE_TOOLS.map(str::to_string));
    }
    if let Some(team) = &args.team {
        settings.identity.team =
            Some(Name::parse_as("team", team).map_err(|e| AppError::Usage(e.to_string()))?);
    }
    let approvals = if interactive {
        let (approver, approvals) = ChannelApprover::new();
        settings.approver = Arc::new(approver);
        settings.plan_approver = PlanApprover::Present;
        Some(approvals)
    } else {
        settings.approver = Arc::new(DenyApprover);
        settings.plan_approver = PlanApprover::Absent;
        None
    };
    Ok((settings, approvals))
}

/// The backend the lead's teammates get, decided once at start (docs/BACKENDS.md,
/// `roo_team::backend::detect`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeammateBackend {
    /// What the teammates this lead spawns run on.
    pub backend: BackendType,
    /// The decision: where tmux panes go, the `tmux` / `it2` found, why. `None` when no
    /// backend could be chosen (see [`teammate_backend`]).
    pub detection: Option<Detection>,
    /// What to tell the user at start, if anything.
    pub notice: Option<String>,
}

/// Decides the teammates' backend for `env`.
///
/// A forced backend that cannot work here is a usage error (exit 2). With `auto`, an
/// environment where no pane backend works although one is expected (iTerm2 without
/// `it2` or tmux) does not stop a lead that may never spawn: the backend is iterm2 with
/// no detection, and the notice says how to install `it2`.
pub fn teammate_backend(env: &DetectEnv) -> Result<TeammateBackend, AppError> {
    match detect(env) {
        Ok(detection) => Ok(TeammateBackend {
            backend: detection.choice.backend_type(),
            notice: (!detection.notes.is_empty())
                .then(|| format!("teammates: {}", detection.notes.join("; "))),
            detection: Some(detection),
        }),
        Err(e @ DetectError::ITerm2WithoutTools) if env.mode == DetectMode::Auto => {
            Ok(TeammateBackend {
                backend: BackendType::Iterm2,
                detection: None,
                notice: Some(format!("teammates: {e}")),
            })
        }
        Err(e) => Err(AppError::Usage(format!("teammates: {e}"))),
    }
}

/// Builds the lead agent from its flags, with its team machinery: the slot the team
/// tools bind, the turn hooks that follow it (teammates' messages into the next turn,
/// the team state back after a compaction), the monitor of teammates' states and the
/// answerer of their requests (the terminal, or the lead's own policy in a `-p` run).
pub async fn build(args: &LeadArgs, interactive: bool) -> Result<Built, AppError> {
    build_in(args, interactive, store_home()?).await
}

/// [`build`] with the state directory and store `home` instead of `ROO_HOME`'s
/// (`roo-lead demo` runs in a temporary one, on files).
pub async fn build_in(
    args: &LeadArgs,
    interactive: bool,
    home: RooHome,
) -> Result<Built, AppError> {
    let roo_home = home.root().to_path_buf();
    probe_sandbox_ahead(args.no_sandbox);
    let TeammateBackend {
        backend: teammate_mode,
        detection: teammate_detection,
        notice: backend_notice,
    } = teammate_backend(&DetectEnv::capture(args.teammate_mode))?;
    crate::logging::init(&roo_home, "roo-lead");
    // Hosts teammates may run on: the user's own config only (a bad entry: exit 2).
    let hosts = roo_agent::config::user_hosts(&roo_home)
        .map_err(|e| AppError::Config(format!("failed to {e}")))?;
    let remote_repos = roo_team::worktree::RemoteRepo::all(&hosts)
        .map_err(|e| AppError::Config(format!("hosts: {e}")))?;
    let (mut settings, approvals) = lead_settings(args, interactive, roo_home)?;
    settings.store_setting = home.store_setting();
    let lead_name = settings.identity.name.clone();
    // The team machinery exists before the agent, so the team tools (in
    // `settings.tools.extra`) can get the slot, the event sender and the lifetime token.
    let slot = TeamSlot::new();
    settings.budget = Some(roo_team::budget::BudgetPlan {
        session: session_caps(args)?,
        slot: slot.clone(),
        lead: true,
    });
    let (team_sender, team_events) = team_events();
    let team_tasks = CancellationToken::new();
    // The lead's routers report through the monitor, which reports a teammate's join
    // before its first message.
    let (team_status, routed) =
        roo_team::spawn_monitor(slot.clone(), team_sender.clone(), team_tasks.clone());
    add_team_hooks(&mut settings, &slot, &remote_repos);
    // The team tools (kept by a coordinator, which loses only the code tools). The git
    // of TeamDelete's cleanup and of the spawner's worktrees runs in the sandbox of the
    // lead's tool call.
    let spawner = Spawner::new(
        slot.clone(),
        teammate_mode,
        Some(team_sender.clone()),
        team_tasks.clone(),
    );
    let backends = roo_team::backend::LeadBackends {
        binary: teammate_detection.and_then(|d| d.binary),
        hosts: &hosts,
        roo_home: &settings.roo_home,
        lifetime: &team_tasks,
    };
    spawner.set_executors(&backends).map_err(backend_error)?;
    let lead = LeadTools {
        events: Some(routed.clone()),
        runtime: team_tasks.clone(),
        worktrees: Some(Git::new()),
        hosts: Some(remote_repos.clone()),
        ..LeadTools::new(home.clone(), lead_name.clone())
    };
    let verify = lead.verify.clone();
    let team_tool_names = add_team_tools(&mut settings, &slot, &spawner, lead);
    let template = teammate_template(&settings);
    let approver = settings.approver.clone();
    let built = roo_team::build_agent(settings).await.map_err(app_error)?;
    if let Some(setting) = &built.verify {
        let _ = verify.set(setting.clone());
    }
    roo_team::reveal_on_bind(&slot, built.agent.tools(), team_tool_names);
    spawner.set_base(teammate_base(template, &built));
    let decider: Arc<dyn RequestDecider> = if interactive {
        Arc::new(ApproverDecider { approver })
    } else {
        Arc::new(PolicyDecider {
            policy: built.agent.policy().clone(),
            tools: built.agent.tools().clone(),
            project_root: built.project_root.clone(),
        })
    };
    roo_team::spawn_request_answerer(slot.clone(), decider, team_tasks.clone());
    let lead_of = LeadOf {
        slot: &slot,
        home: &home,
        name: lead_name,
        events: &routed,
        runtime: &team_tasks,
    };
    let rejoined = lead_team_at_start(args, lead_of, &built.agent)?;
    Ok(Built {
        team_sender,
        team_events,
        team: slot,
        team_status,
        teammate_mode,
        spawner,
        _team_tasks_guard: team_tasks.drop_guard(),
        skills: built.skills,
        subagents: built.subagents,
        mcp: built.mcp,
        agent: built.agent,
        notices: built
            .notices
            .into_iter()
            .chain(backend_notice)
            .chain(rejoined)
            .collect(),
        approvals,
        team_turns: built.team_turns,
    })
}

/// The turn hooks that follow the team bound to `slot`: teammates' messages into the
/// next turn, the team state back after a compaction, teammates' new commits onto the
/// lead's `roo/<team>/<name>` branches; and the team's environment for commands.
fn add_team_hooks(
    settings: &mut AgentSettings,
    slot: &TeamSlot,
    remote_repos: &roo_team::worktree::RemoteRepos,
) {
    settings
        .hooks
        .push(Arc::new(SlotDelivery::new(slot.clone())));
    settings
        .hooks
        .push(Arc::new(TeamStateReminder::new(slot.clone())));
    // Teammates' new commits reach the lead's `roo/<team>/<name>` before each turn.
    let lead_cwd = match &settings.cwd {
        Some(cwd) => Some(cwd.clone()),
        None => std::env::current_dir().ok(),
    };
    if let Some(cwd) = lead_cwd {
        settings.hooks.push(Arc::new(
            roo_team::worktree::BranchSync::new(slot.clone(), cwd, Git::new())
                .with_hosts(remote_repos.clone()),
        ));
    }
    settings.env_source = Some(slot.env_source());
}

/// The lead's team tools and the spawner behind `Agent` and `TaskStop` (teammates
/// through the spawner, sub-agents otherwise). A team's tools wait for the team:
/// TeamCreate alone is sent until one is bound. Returns the names of those that wait.
fn add_team_tools(
    settings: &mut AgentSettings,
    slot: &TeamSlot,
    spawner: &Spawner,
    lead: LeadTools,
) -> Vec<String> {
    let team_tools = TeamTools::new(slot.clone()).with_on_sent(spawner.on_sent());
    let (deferred, now): (Vec<_>, Vec<_>) = lead_tools(&team_tools, lead)
        .into_iter()
        .partition(|tool| roo_team::waits_for_team(tool.as_ref()));
    let team_tool_names: Vec<String> = deferred.iter().map(|t| t.name().to_string()).collect();
    settings.tools.extra.extend(now);
    settings.tools.deferred.extend(deferred);
    settings.tools.spawn_tools = Some(spawner.spawn_tools());
    team_tool_names
}

/// A backend's executor that cannot be made: a bad `hosts:` entry is a config error,
/// anything else (no `roo-worker`, no iTerm2 session) a usage error.
fn backend_error(e: roo_team::backend::BackendError) -> AppError {
    if e.in_hosts_config() {
        AppError::Config(e.to_string())
    } else {
        AppError::Usage(e.to_string())
    }
}

/// The session's caps from `--max-cost-usd` and `--max-requests`; a negative or
/// non-finite amount is a usage error.
fn session_caps(args: &LeadArgs) -> Result<roo_store::budget::SpendCap, AppError> {
    if let Some(usd) = args.max_cost_usd
        && !(usd.is_finite() && usd >= 0.0)
    {
        return Err(AppError::Usage(format!(
            "--max-cost-usd must be an amount of USD of 0 or more, not {usd}"
        )));
    }
    let cap = roo_store::budget::SpendCap {
        usd: args.max_cost_usd,
        requests: args.max_requests,
    };
    cap.check()
        .map_err(|e| AppError::Usage(format!("--max-cost-usd/--max-requests: {e}")))?;
    Ok(cap)
}

/// The settings teammates start from, taken from the lead's before its agent is built:
/// its identity and home, store, model settings, sandbox choice and turn limit.
fn teammate_template(settings: &AgentSettings) -> AgentSettings {
    let mut template = AgentSettings::new(settings.identity.clone(), settings.roo_home.clone());
    template.store_setting = settings.store_setting.clone();
    template.llm = settings.llm.clone();
    template.no_sandbox = settings.no_sandbox;
    template.max_turns = settings.max_turns;
    template
}

/// What teammates inherit from the built lead: its provider, its MCP connections (for
/// in-process teammates), its trust and permission mode.
fn teammate_base(mut template: AgentSettings, built: &roo_team::BuiltAgent) -> TeammateBase {
    template.provider = Some(built.agent.provider().clone());
    // In-process teammates use this process's MCP connections.
    template.mcp = match &built.mcp {
        Some(servers) => roo_team::McpPlan::Shared(servers.clone()),
        None => roo_team::McpPlan::Off,
    };
    template.trust = if built.trusted {
        Trust::Granted
    } else {
        Trust::AsListed
    };
    let lead_mode = built
        .agent
        .policy()
        .read()
        .map(|p| p.mode())
        .unwrap_or(PermissionMode::Default);
    TeammateBase {
        settings: template,
        lead_mode,
        git: Git::new(),
        project_trusted: built.trusted,
        member_roles: built.member_roles,
    }
}

/// Who leads a team from this process, and what its binding needs.
struct LeadOf<'a> {
    slot: &'a TeamSlot,
    home: &'a RooHome,
    name: Name,
    events: &'a TeamEventSender,
    /// The lifetime of the team's tasks (the inbox router among them).
    runtime: &'a CancellationToken,
}

/// Leads a team from the start: the one `--team` names (an error if that fails), or
/// the one a resumed session led (a notice either way). Returns the notices.
fn lead_team_at_start(
    args: &LeadArgs,
    lead: LeadOf<'_>,
    agent: &Agent,
) -> Result<Vec<String>, AppError> {
    let mut rejoined = Vec::new();
    if let Some(team) = &args.team {
        let team = Name::parse_as("team", team).map_err(|e| AppError::Usage(e.to_string()))?;
        let binding = roo_team::join_as_lead(
            lead.slot,
            lead.home,
            team,
            lead.name,
            lead.events.clone(),
            args.take_over,
        )
        .map_err(|e| match e {
            roo_team::lead::JoinError::Store(e) => crate::exit::store_error(e),
            e @ roo_team::lead::JoinError::InsideCommand { .. } => AppError::Refused(e.to_string()),
            other => AppError::Usage(other.to_string()),
        })?;
        // Roster members no process ever joined are said at once: the lead does not
        // wait for them, and the person learns how to start them.
        rejoined.extend(roo_team::lead::status::not_started_notice(&binding.team));
        spawn_router(binding, lead.runtime.clone());
    } else if (args.continue_latest || args.resume.is_some())
        && let Some(team) = roo_team::lead::team_led_in(agent.messages())
    {
        // A resumed session that led a team leads it again (and adopts its teammates).
        match roo_team::join_as_lead(
            lead.slot,
            lead.home,
            team.clone(),
            lead.name,
            lead.events.clone(),
            false,
        ) {
            Ok(binding) => {
                rejoined.push(format!("leading team {team} again, as this session did"));
                rejoined.extend(roo_team::lead::status::not_started_notice(&binding.team));
                spawn_router(binding, lead.runtime.clone());
            }
            Err(e) => rejoined.push(format!(
                "this session led team {team}, which it does not lead now: {e}"
            )),
        }
    }
    Ok(rejoined)
}

/// Runs the lead's inbox router of `binding` until `cancel`.
fn spawn_router(binding: Arc<roo_team::TeamBinding>, cancel: CancellationToken) {
    tokio::spawn(async move {
        if let Err(e) = binding.router.run(cancel).await {
            tracing::warn!(error = %e, "the lead's inbox router stopped");
        }
    });
}

/// The first start-up step of an agent's process (lead or worker): the sandbox's
/// namespace probe, an exec of this binary, starts now on a thread of its own and runs
/// while the rest starts (see `roo_agent::exec::sandbox::probe_ahead`).
pub fn probe_sandbox_ahead(no_sandbox: bool) {
    if !no_sandbox && let Ok(helper) = std::env::current_exe() {
        roo_agent::exec::sandbox::probe_ahead(helper);
    }
}

/// The provider flags as the builder takes them.
pub fn llm_flags(provider: &ProviderArgs) -> LlmFlags {
    LlmFlags {
        provider: provider.provider.clone(),
        model: provider.model.clone(),
        base_url: provider.base_url.clone(),
        script: provider.script.clone(),
        ..LlmFlags::default()
    }
}

/// The app error (and so the exit code) of a build failure.
pub fn app_error(error: BuildError) -> AppError {
    let message = error.to_string();
    match error.kind() {
        BuildErrorKind::Usage => AppError::Usage(message),
        BuildErrorKind::Config => AppError::Config(message),
        BuildErrorKind::Io => AppError::Io(message),
    }
}

/// `ROO_HOME` (or `~/.roocode`) on the store the user chose: files, or the PostgreSQL
/// store `ROO_STORE` (sealed with the API keys at start) or `store:` in the user config
/// names, connected here (unreachable: exit 3, naming the server; a bad value: exit 2).
pub fn store_home() -> Result<RooHome, AppError> {
    let root = roo_store::root_from_env().map_err(|e| AppError::Config(e.to_string()))?;
    let lookup = |name: &str| roo_agent::exec::sandbox::secret_env(name);
    RooHome::open(root, &lookup).map_err(crate::exit::store_error)
}

/// `ROO_HOME`, or `~/.roocode`, for what needs only its directory (the config files).
pub fn roo_home() -> Result<PathBuf, AppError> {
    roo_store::root_from_env().map_err(|e| AppError::Config(e.to_string()))
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use roo_team::Role;

    use super::*;

    fn settings(argv: &[&str], interactive: bool) -> (AgentSettings, bool) {
        let args =
            LeadArgs::try_parse_from(std::iter::once("roo-lead").chain(argv.iter().copied()))
                .unwrap();
        let (settings, approvals) = lead_settings(&args, interactive, PathBuf::from("/h")).unwrap();
        (settings, approvals.is_some())
    }

    #[test]
    fn a_headless_lead_asks_nobody() {
        let (s, approvals) = settings(&["-p", "hi", "--continue", "--max-turns", "7"], false);
        assert_eq!(s.identity.name.as_str(), roo_team::DEFAULT_LEAD_NAME);
        assert_eq!(s.identity.role, Role::Lead);
        assert!(s.identity.team.is_none());
        assert!(matches!(s.trust, Trust::AsListed));
        assert_eq!(s.plan_approver, PlanApprover::Absent);
        assert!(!approvals);
        assert_eq!(s.session, SessionPlan::Latest);
        assert_eq!(s.max_turns, 7);
    }

    #[test]
    fn an_interactive_lead_asks_on_the_terminal() {
        let (s, approvals) = settings(&["--resume", "abc", "--permission-mode", "plan"], true);
        assert!(matches!(s.trust, Trust::Ask(_)));
        assert_eq!(s.plan_approver, PlanApprover::Present);
        assert!(approvals);
        assert_eq!(s.session, SessionPlan::Resume("abc".to_string()));
        assert_eq!(s.permission_mode, Some(PermissionMode::Plan));
        let (s, _) = settings(&["--trust-project"], true);
        assert!(matches!(s.trust, Trust::Granted));
    }

    fn plain_terminal(mode: DetectMode) -> DetectEnv {
        DetectEnv {
            mode,
            tmux_var: None,
            term_program: None,
            iterm_session_id: None,
            stdin_tty: true,
            stdout_tty: true,
            tmux: None,
            it2: None,
        }
    }

    #[test]
    fn a_forced_backend_that_cannot_work_is_a_usage_error() {
        for mode in [DetectMode::Tmux, DetectMode::ITerm2] {
            let err = teammate_backend(&plain_terminal(mode)).unwrap_err();
            assert!(matches!(err, AppError::Usage(_)), "{err}");
            assert_eq!(err.exit_code(), 2);
            assert!(
                err.to_string().starts_with("teammates: --teammate-mode "),
                "{err}"
            );
        }
    }

    #[test]
    fn the_detected_backend_is_what_the_spawner_gets() {
        let tmux = DetectEnv {
            tmux_var: Some("/tmp/tmux-1/default,1,0".into()),
            tmux: Some(PathBuf::from("/usr/bin/tmux")),
            ..plain_terminal(DetectMode::Auto)
        };
        let chosen = teammate_backend(&tmux).unwrap();
        assert_eq!(chosen.backend, BackendType::Tmux);
        assert_eq!(chosen.notice, None);
        let detection = chosen.detection.unwrap();
        assert_eq!(
            detection.choice,
            roo_team::backend::detect::Choice::Tmux(
                roo_team::backend::detect::TmuxPlacement::CurrentWindow
            )
        );
        assert_eq!(detection.binary, Some(PathBuf::from("/usr/bin/tmux")));
        let plain = teammate_backend(&plain_terminal(DetectMode::Auto)).unwrap();
        assert_eq!(plain.backend, BackendType::InProcess);
        assert_eq!(plain.notice, None);
    }

    #[test]
    fn iterm2_without_tools_in_auto_mode_starts_the_lead_with_the_install_advice() {
        let env = DetectEnv {
            term_program: Some("iTerm.app".into()),
            ..plain_terminal(DetectMode::Auto)
        };
        let chosen = teammate_backend(&env).unwrap();
        assert_eq!(chosen.backend, BackendType::Iterm2);
        assert_eq!(chosen.detection, None);
        let notice = chosen.notice.unwrap();
        assert!(notice.contains("uv tool install it2"), "{notice}");
    }

    #[test]
    fn every_mode_the_lead_accepts_is_in_its_help() {
        use clap::CommandFactory;
        let help = LeadArgs::command().render_long_help().to_string();
        for mode in PermissionMode::ALL {
            let (s, _) = settings(&["--permission-mode", mode.as_str()], false);
            assert_eq!(s.permission_mode, Some(mode));
            assert!(
                help.contains(mode.as_str()),
                "{mode} is not in --help:\n{help}"
            );
        }
    }

    #[test]
    fn a_bad_mode_is_a_usage_error_before_anything_is_built() {
        let args = LeadArgs::try_parse_from(["roo-lead", "--permission-mode", "yolo"]).unwrap();
        let err = lead_settings(&args, false, PathBuf::from("/h")).unwrap_err();
        assert!(matches!(err, AppError::Usage(_)), "{err}");
    }
}
