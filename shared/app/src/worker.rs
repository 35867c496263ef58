//! `roo-worker`: one teammate process.
//!
//! The flags are the contract between the lead and a pane teammate (docs/TEAM.md
//! "roo-worker"); a person can start one by hand in a spare terminal too. It joins the
//! team itself (`Team::join`: refused while a live process is that member), runs the
//! teammate loop of `roo_team::teammate` (resuming its transcript when restarted),
//! renders its streaming output on its terminal with the lead's renderer and logs to
//! `teams/<team>/logs/<name>.log`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use roo_agent::config::HandedProjectConfig;
use roo_agent::event::EventSink;
use roo_agent::permissions::PermissionMode;
use roo_store::{Error as StoreError, Name, Team};
use roo_team::backend::worker_launch::{WorkerHandoff, WorkerLaunch};
use roo_team::teammate::{self, TeammateError, TeammateExit, TeammateSpec};
use roo_team::{
    AgentSettings, Identity, InboxRouter, Role, SessionPlan, TeamBinding, Trust, team_events,
};
use tokio_util::sync::CancellationToken;

use crate::entry::{self, Program};
use crate::exit::{self, AppError};
use crate::render::{Renderer, Style};

/// roo-worker — one RooCode Teams teammate.
#[derive(Debug, Parser)]
#[command(
    name = "roo-worker",
    version,
    about = "One RooCode Teams teammate: an agent loop with work and coordination tools",
    after_help = "Normally started by roo-lead in a tmux or iTerm2 pane. Example:\n  roo-worker --team auth-refactor --name alice --agent-id alice@auth-refactor --lead lead\n\nExit codes: 0 shut down at the lead's request, 1 stopped (SIGINT, SIGTERM, no lead) or\nrefused to join (its name is held by a live process, or is the lead's), or was declared\ndead while cut off from the store and replaced by another process, 2 usage or\nconfiguration error (no such team), 3 file or store I/O error, 4 the model could not be\nreached or refused."
)]
struct WorkerArgs {
    /// Every flag: the lead builds the same struct for a pane's command line.
    #[command(flatten)]
    launch: WorkerLaunch,
}

impl WorkerArgs {
    /// The teammate's settings for the one agent builder (`roo_team::build_agent`):
    /// who it is, its provider, mode and trust, its transcript under the team. It never
    /// asks about trust (it may have no terminal); its permission questions are denied
    /// until the team runtime sets an approver that asks the lead. With a handed clone
    /// gate, also the task that opens its workspace (see [`CloneWatcher`]).
    fn settings(
        &self,
        roo_home: PathBuf,
    ) -> Result<(AgentSettings, Option<CloneWatcher>), AppError> {
        let parse = |what: &'static str, value: &str| {
            Name::parse_as(what, value).map_err(|e| AppError::Usage(e.to_string()))
        };
        let (team, name, lead) = (
            parse("team name", &self.launch.team)?,
            parse("member name", &self.launch.name)?,
            parse(
                "lead name",
                self.launch
                    .lead
                    .as_deref()
                    .unwrap_or(roo_team::DEFAULT_LEAD_NAME),
            )?,
        );
        let session = SessionPlan::member(&roo_home, &team, &name);
        // A gate path from the handoff: only one the lead makes for this member, in its
        // private handoff directory; the worker waits on it and removes it once read.
        if let Some(gate) = &self.launch.clone_gate {
            roo_team::backend::clone_gate::check_gate_path(&roo_home, &team, &name, gate)
                .map_err(AppError::Usage)?;
        }
        let mut settings = AgentSettings::new(Identity::teammate(name, team, lead), roo_home);
        settings.llm = crate::setup::llm_flags(&self.launch.provider);
        settings.permission_mode = self
            .launch
            .permission_mode
            .as_deref()
            .map(str::parse::<PermissionMode>)
            .transpose()
            .map_err(|e| AppError::Usage(e.to_string()))?;
        settings.no_sandbox = self.launch.no_sandbox;
        settings.trust = if self.launch.trust_project {
            Trust::Granted
        } else {
            Trust::AsListed
        };
        settings.session = session;
        settings.cwd = self.launch.cwd.clone();
        settings.config_root = self.launch.config_root.clone();
        if let Some(max_turns) = self.launch.max_turns {
            settings.max_turns = max_turns;
        }
        // A clone the lead made just now: its root is the project root (no git asked), but
        // only when its own HEAD file names that branch. `--new-clone` given by hand on
        // another directory (`--cwd ~`) must not make that directory the sandbox's
        // writable project root: the root is then detected as for any worker.
        if let Some(branch) = &self.launch.new_clone {
            settings.project_root = self
                .launch
                .cwd
                .clone()
                .filter(|cwd| roo_agent::head_names_branch(cwd, branch));
            settings.fresh_checkout = Some(branch.clone());
        }
        // On another host: the project config the lead read in its own tree, never the
        // clone's (which the teammate can write); without one, none at all.
        settings.project_config = self.launch.project_config.clone().or_else(|| {
            self.launch.host.as_ref().map(|_| HandedProjectConfig {
                root: self
                    .launch
                    .cwd
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(".")),
                ..HandedProjectConfig::default()
            })
        });
        // Handed a clone gate: the lead is still making the clone. Its root is `--cwd`, but
        // no tool call or hook runs, and nothing of it is read, until the lead says the
        // clone is complete and its HEAD file names the branch (`clone_gate::watch`).
        let mut watcher = None;
        if let (Some(branch), Some(cwd), Some(gate)) = (
            &self.launch.new_clone,
            &self.launch.cwd,
            &self.launch.clone_gate,
        ) {
            let (workspace, watch) =
                roo_team::backend::clone_gate::watch(gate.clone(), cwd.clone(), branch.clone());
            settings.project_root = Some(cwd.clone());
            settings.fresh_checkout = None;
            settings.pending_workspace = Some(roo_team::settings::PendingWorkspace {
                environment: roo_agent::Environment::for_new_checkout(cwd, branch),
                // The clone's git directory is inside it: nothing of the lead's to grant.
                git_dirs: Vec::new(),
                gate: workspace,
                // Its instructions are read in the tree its config comes from (the
                // lead's), never in the clone.
                instructions_root: self
                    .launch
                    .config_root
                    .clone()
                    .unwrap_or_else(|| cwd.clone()),
            });
            watcher = Some(watch);
        }
        Ok((settings, watcher))
    }

    /// The teammate's spec: its settings, its binding to team `team` (which must exist)
    /// led by `team_lead` (what its config says; `--lead`, if given, must agree), its
    /// roster entry, its prompt and plan mode.
    fn spec(
        &self,
        roo_home: PathBuf,
        team: Team,
        team_lead: Name,
    ) -> Result<(TeammateSpec, Option<CloneWatcher>), AppError> {
        if let Some(lead) = &self.launch.lead
            && lead != team_lead.as_str()
        {
            return Err(AppError::Usage(format!(
                "--lead {lead}: the lead of team {} is {team_lead}; drop --lead or pass --lead {team_lead}",
                team.name()
            )));
        }
        let (mut settings, watcher) = self.settings(roo_home)?;
        let me = settings.identity.name.clone();
        settings.identity.role = Role::Teammate {
            lead: team_lead.clone(),
        };
        let lead = team_lead;
        let mode_after_plan = settings
            .permission_mode
            .filter(|m| *m != PermissionMode::Plan)
            .unwrap_or(PermissionMode::Default);
        let router = InboxRouter::new(team.mailbox(), me.clone());
        if let Some(hex) = &self.launch.lead_key {
            let key = roo_team::authority::LeadPublicKey::parse(hex).ok_or_else(|| {
                AppError::Usage(format!(
                    "--lead-key {hex}: not a lead key (64 hex digits of an Ed25519 public key)"
                ))
            })?;
            router.pin_lead_key(key);
        }
        let binding = TeamBinding {
            router,
            team,
            me,
            lead,
            presence: None,
            lead_key: None,
        };
        let mut spec = TeammateSpec::new(
            settings,
            binding,
            self.launch.prompt.clone().unwrap_or_default(),
        );
        // Its coordination tools (TaskCreate/Get/List/Update, SendMessage), bound from the
        // start; what it sends nudges recipients that run in panes.
        spec.tools = roo_team::teammate_tools(
            &roo_team::TeamTools::new(roo_team::TeamSlot::bound(spec.binding.clone()))
                .with_on_sent(roo_team::backend::nudge::roster_waker(
                    spec.binding.team.clone(),
                )),
        );
        spec.plan_mode_required = self.launch.plan_mode_required;
        spec.mode_after_plan = mode_after_plan;
        if let Some(id) = &self.launch.agent_id {
            spec.member.agent_id = id.clone();
        }
        let orphan = self
            .launch
            .orphan_timeout
            .unwrap_or(roo_team::backend::worker_launch::ORPHAN_TIMEOUT_SECS);
        spec.orphan_timeout = (orphan > 0).then(|| std::time::Duration::from_secs(orphan));
        spec.member.agent_type = Some(self.launch.agent_type.clone());
        spec.member.color = self.launch.color.clone();
        spec.member.model = self.launch.provider.model.clone();
        // The directory it works in (a lead passes its worktree), absolute in the roster.
        spec.member.worktree_path = self
            .launch
            .cwd
            .as_ref()
            .map(|dir| std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone()));
        Ok((spec, watcher))
    }
}

/// The task that opens a pending clone's workspace; it ends with the outcome.
type CloneWatcher = tokio::task::JoinHandle<Result<(), String>>;

/// Entry point of the `roo-worker` binary.
pub fn main() -> ExitCode {
    // The far end of a lead's handoff over ssh: a helper mode, before anything else.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().map(|a| a.as_os_str())
        == Some(std::ffi::OsStr::new(
            roo_team::backend::ssh::command::SERVE_HANDOFF_FLAG,
        ))
    {
        return crate::serve_handoff::run(&args[1..]);
    }
    let program = Program {
        name: "roo-worker",
        takes_handoff: true,
    };
    entry::main(program, |args| entry::block_on(run(args))?)
}

/// Joins the team, runs the teammate loop until the lead shuts it down (exit 0) or a
/// signal (SIGINT, SIGTERM, SIGHUP) ends it (exit 1, after marking it idle).
async fn run(mut args: WorkerArgs) -> Result<ExitCode, AppError> {
    crate::setup::probe_sandbox_ahead(args.launch.no_sandbox);
    // What the lead handed over with the environment: the prompt, a remote teammate's
    // project config (never on the command line).
    if let Some(doc) = roo_agent::exec::sandbox::handed_launch() {
        args.launch.take(
            WorkerHandoff::from_json(doc)
                .map_err(|e| AppError::Usage(format!("failed to take {e}")))?,
        );
    }
    // On another host than the lead's: its own pid is judged here, the lead's is not.
    if let Some(host) = &args.launch.host {
        Name::parse_as("host name", host).map_err(|e| AppError::Usage(format!("--host: {e}")))?;
        roo_store::set_this_host(host);
    }
    let home = crate::setup::store_home()?;
    let roo_home = home.root().to_path_buf();
    // Before joining: a worker that cannot start must not appear in the roster. (A clone
    // the lead is still making is waited for before it is used.)
    if let Some(dir) = &args.launch.cwd
        && args.launch.clone_gate.is_none()
        && !dir.is_dir()
    {
        return Err(AppError::Usage(format!(
            "--cwd {}: not a directory",
            dir.display()
        )));
    }
    let team_name = Name::parse_as("team name", &args.launch.team)
        .map_err(|e| AppError::Usage(e.to_string()))?;
    let (team, lead) = {
        let home = home.clone();
        let name = team_name.clone();
        tokio::task::spawn_blocking(move || {
            let team = Team::open(&home, name)?;
            let lead = team.config()?.lead().map(|m| m.name.clone());
            Ok::<_, StoreError>((team, lead))
        })
        .await
        .map_err(|e| AppError::Io(e.to_string()))?
        .map_err(|e| match e {
            StoreError::TeamNotFound { .. } => AppError::Usage(e.to_string()),
            other => AppError::Io(other.to_string()),
        })?
    };
    let lead = lead.ok_or_else(|| {
        AppError::Usage(format!(
            "team {team_name} names no lead among its members; its config is damaged"
        ))
    })?;
    let (mut spec, clone_watcher) = args.spec(roo_home, team.clone(), lead)?;
    spec.member.host = args.launch.host.clone();
    spec.settings.store_setting = home.store_setting();
    let me = spec.binding.me.clone();
    record_pane(&mut spec.member);
    // Nudges (after each inbox write the lead signals this pid) make the router read the
    // inbox at once; installed before joining, so the recorded pid always listens.
    let nudges = roo_team::backend::nudge::listen(spec.binding.router.clone())
        .map_err(|e| AppError::Io(format!("failed to listen for inbox nudges: {e}")))?;

    match team.open_log(&me) {
        Ok(file) => crate::logging::init_file(file),
        Err(e) => eprintln!("roo-worker: cannot write the log: {e}"),
    }
    let style = Style::for_stdout();
    let (sink, mut agent_events) = EventSink::channel();
    let (sender, mut team_events) = team_events();
    spec.output = sink;
    spec.events = Some(sender);
    println!(
        "{}",
        style.dim(&format!(
            "roo-worker: {me} of team {} (lead {})",
            team.name(),
            spec.binding.lead
        ))
    );

    let cancel = CancellationToken::new();
    let signals = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            crate::headless::wait_for_termination().await;
            cancel.cancel();
        }
    });
    // A clone the lead could not make: its tool calls fail saying why, and it stops.
    let clone_failed = clone_watcher.map(|watcher| {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if let Ok(Err(why)) = watcher.await {
                tracing::error!(error = %why, "no clone to work in");
                eprintln!("roo-worker: {why}; stopping");
                cancel.cancel();
            }
        })
    });
    let printer = tokio::spawn(async move {
        let mut renderer = Renderer::new(std::io::stdout(), style);
        loop {
            tokio::select! {
                event = agent_events.recv() => match event {
                    Some(event) => renderer.event(&event),
                    None => break,
                },
                Some(event) = team_events.recv() => {
                    renderer.break_line();
                    let _ = writeln!(renderer.out(), "{}", style.dim(&event.line()));
                }
            }
            let _ = renderer.out().flush();
        }
    });
    let exit = teammate::run(spec, cancel).await;
    signals.abort();
    if let Some(task) = clone_failed {
        task.abort();
    }
    nudges.abort();
    let _ = printer.await;
    finish(exit, &me, style)
}

/// In a tmux or iTerm2 pane: the roster records the pane, so the lead can reach and
/// nudge it.
fn record_pane(member: &mut roo_store::Member) {
    if let Some(pane) = std::env::var("TMUX_PANE")
        .ok()
        .filter(|p| p.starts_with('%'))
    {
        member.pane_id = Some(pane);
        member.backend_type = Some(roo_store::BackendType::Tmux);
    } else if let Some(session) = std::env::var("ITERM_SESSION_ID")
        .ok()
        .and_then(|s| roo_team::backend::iterm2::SessionId::parse(&s).ok())
    {
        // In an iTerm2 pane: its session (the GUID `it2 --session` takes).
        member.pane_id = Some(session.as_str().to_string());
        member.backend_type = Some(roo_store::BackendType::Iterm2);
    }
}

/// The worker's exit for how its teammate loop ended.
fn finish(
    exit: Result<TeammateExit, TeammateError>,
    me: &Name,
    style: Style,
) -> Result<ExitCode, AppError> {
    match exit {
        Ok(TeammateExit::ShutDown) => {
            tracing::info!(member = %me, "shut down at the lead's request");
            println!(
                "{}",
                style.dim("roo-worker: shut down at the lead's request")
            );
            Ok(ExitCode::from(exit::OK))
        }
        Ok(TeammateExit::Cancelled) => {
            tracing::info!(member = %me, "stopped by a signal");
            eprintln!("roo-worker: stopped by a signal; {me} is idle");
            Ok(ExitCode::from(exit::NOT_COMPLETED))
        }
        Ok(TeammateExit::LeadGone(why)) => {
            eprintln!("roo-worker: {why}; {me} stopped");
            Ok(ExitCode::from(exit::NOT_COMPLETED))
        }
        Ok(TeammateExit::LeftLeadGone(why)) => {
            tracing::info!(member = %me, "{why}; left the team");
            eprintln!("roo-worker: {why}; {me} left the team");
            Ok(ExitCode::from(exit::OK))
        }
        Ok(TeammateExit::Displaced(why)) => {
            eprintln!("roo-worker: {why}; stopped");
            Ok(ExitCode::from(exit::NOT_COMPLETED))
        }
        Err(e) => {
            tracing::error!(member = %me, error = %e, "teammate failed");
            Err(teammate_error(e))
        }
    }
}

/// The app error (and exit code) of a failed teammate loop.
fn teammate_error(error: TeammateError) -> AppError {
    match error {
        TeammateError::Build { source, .. } => crate::setup::app_error(source),
        // As `roo-mail team join` exits: a refused join 1, an unknown team 2.
        e @ TeammateError::Join {
            source: StoreError::NotPermitted { .. } | StoreError::MemberExists { .. },
            ..
        } => AppError::Refused(e.to_string()),
        e @ TeammateError::Join {
            source: StoreError::TeamNotFound { .. },
            ..
        } => AppError::Usage(e.to_string()),
        other => AppError::Io(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use roo_store::RooHome;

    use super::*;

    /// A refused join exits as `roo-mail team join` does (1), an unknown team 2.
    #[test]
    fn a_refused_join_exits_1_and_an_unknown_team_2() {
        let join = |source| TeammateError::Join {
            team: Name::parse("t").unwrap(),
            name: Name::parse("carol").unwrap(),
            source,
        };
        let held = join(StoreError::NotPermitted {
            action: "join team \"t\" as carol".into(),
            reason: "a live process (pid 42) already is member carol".into(),
        });
        assert_eq!(teammate_error(held).exit_code(), 1);
        let unknown = join(StoreError::TeamNotFound {
            team: "t".into(),
            path: "/h/teams/t".into(),
            store: None,
        });
        assert_eq!(teammate_error(unknown).exit_code(), 2);
    }

    /// The lead's side of the contract parses back to what it said, every flag set.
    #[test]
    fn a_launch_round_trips_through_roo_workers_parser() {
        use clap::Parser;
        use roo_team::backend::worker_launch::WorkerLaunch;
        let launch = WorkerLaunch {
            team: "crew".into(),
            name: "alice".into(),
            agent_id: Some("alice@crew".into()),
            agent_type: "Explore".into(),
            color: Some("green".into()),
            lead: Some("lead".into()),
            lead_key: Some("ab".repeat(32)),
            permission_mode: Some("acceptEdits".into()),
            plan_mode_required: true,
            provider: roo_team::backend::worker_launch::ProviderArgs {
                provider: Some("openai".into()),
                model: Some("-m2".into()),
                base_url: Some("http://127.0.0.1:9/v1".into()),
                script: Some("/s/script.yaml".into()),
            },
            no_sandbox: true,
            trust_project: true,
            prompt: Some("--help me: claim task 1".into()),
            cwd: Some("/repo/.roocode/worktrees/crew+alice".into()),
            config_root: Some("/repo".into()),
            new_clone: Some("roo/crew/alice".into()),
            max_turns: Some(7),
            orphan_timeout: Some(0),
            host: Some("gpu".into()),
            project_config: Some(roo_agent::config::HandedProjectConfig {
                root: "/lead/repo".into(),
                project: Some("rules: {}".into()),
                local: None,
                trusted: true,
                instructions: Vec::new(),
            }),
            clone_gate: Some("/h/run/handoff/crew+alice-1.clone".into()),
        };
        let mut argv = vec!["roo-worker".to_string()];
        argv.extend(launch.to_args());
        // The prompt and the project config go through the handoff, never argv.
        assert!(
            !argv
                .iter()
                .any(|a| a.contains("claim task") || a.contains("rules") || a.contains(".clone")),
            "{argv:?}"
        );
        let mut parsed = WorkerArgs::try_parse_from(&argv).unwrap();
        assert_eq!(parsed.launch.prompt, None);
        assert_eq!(parsed.launch.project_config, None);
        assert_eq!(parsed.launch.clone_gate, None);
        let handed =
            roo_team::backend::worker_launch::WorkerHandoff::from_json(launch.handoff().to_json())
                .unwrap();
        parsed.launch.take(handed);
        assert_eq!(parsed.launch, launch);
        let bare = WorkerLaunch {
            agent_id: None,
            color: None,
            lead: None,
            lead_key: None,
            permission_mode: None,
            plan_mode_required: false,
            provider: roo_team::backend::worker_launch::ProviderArgs::default(),
            no_sandbox: false,
            trust_project: false,
            prompt: None,
            cwd: None,
            config_root: None,
            new_clone: None,
            max_turns: None,
            orphan_timeout: None,
            host: None,
            project_config: None,
            clone_gate: None,
            agent_type: "general-purpose".into(),
            ..launch
        };
        let mut argv = vec!["roo-worker".to_string()];
        argv.extend(bare.to_args());
        assert_eq!(WorkerArgs::try_parse_from(&argv).unwrap().launch, bare);
        // A person may still give the prompt on the command line.
        let by_hand =
            WorkerArgs::try_parse_from(["roo-worker", "--team", "t", "--name", "a", "--prompt=go"])
                .unwrap();
        assert_eq!(by_hand.launch.prompt.as_deref(), Some("go"));
    }

    #[test]
    fn worker_flags_become_a_teammates_settings() {
        let args = WorkerArgs::try_parse_from([
            "roo-worker",
            "--team",
            "t",
            "--name",
            "alice",
            "--lead",
            "boss",
            "--permission-mode",
            "acceptEdits",
            "--script",
            "s.yaml",
            "--trust-project",
        ])
        .unwrap();
        let settings = args.settings(PathBuf::from("/h")).unwrap().0;
        assert_eq!(settings.identity.name.as_str(), "alice");
        assert_eq!(settings.identity.team.as_ref().unwrap().as_str(), "t");
        assert!(
            matches!(&settings.identity.role, Role::Teammate { lead } if lead.as_str() == "boss")
        );
        assert_eq!(settings.permission_mode, Some(PermissionMode::AcceptEdits));
        assert_eq!(
            settings.session,
            SessionPlan::Transcript(PathBuf::from("/h/teams/t/transcripts/alice.jsonl"))
        );
        assert_eq!(settings.llm.script, Some(PathBuf::from("s.yaml")));
        assert!(matches!(settings.trust, Trust::Granted));
    }

    #[test]
    fn new_clone_sets_the_project_root_only_when_the_clones_head_names_the_branch() {
        let dir = tempfile::TempDir::new().unwrap();
        let clone = dir.path().join("clone");
        std::fs::create_dir_all(clone.join(".git")).unwrap();
        std::fs::write(clone.join(".git/HEAD"), "ref: refs/heads/roo/t/alice\n").unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let root = |cwd: &std::path::Path, branch: &str| {
            let cwd = cwd.to_str().unwrap();
            let args = WorkerArgs::try_parse_from([
                "roo-worker",
                "--team",
                "t",
                "--name",
                "alice",
                "--new-clone",
                branch,
                "--cwd",
                cwd,
            ])
            .unwrap();
            args.settings(PathBuf::from("/h")).unwrap().0.project_root
        };
        assert_eq!(root(&clone, "roo/t/alice"), Some(clone.clone()));
        // A hand-run `--new-clone x --cwd ~`: the root is detected, not taken.
        assert_eq!(root(&home, "x"), None);
        // A clone on another branch is not the one named.
        assert_eq!(root(&clone, "roo/t/bob"), None);
    }

    #[test]
    fn a_worker_follows_the_teams_lead_and_refuses_another() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let t = Name::parse("t").unwrap();
        let boss = Name::parse("boss").unwrap();
        let team = Team::create(
            &home,
            t.clone(),
            "",
            roo_store::Member::new(boss.clone(), &t),
            Vec::new(),
        )
        .unwrap();
        let args =
            WorkerArgs::try_parse_from(["roo-worker", "--team", "t", "--name", "carol"]).unwrap();
        let spec = args
            .spec(dir.path().to_path_buf(), team.clone(), boss.clone())
            .unwrap()
            .0;
        assert_eq!(spec.binding.lead, boss);
        assert!(matches!(&spec.settings.identity.role, Role::Teammate { lead } if *lead == boss));
        let args = WorkerArgs::try_parse_from([
            "roo-worker",
            "--team",
            "t",
            "--name",
            "carol",
            "--lead",
            "lead",
        ])
        .unwrap();
        let err = args.spec(dir.path().to_path_buf(), team, boss).unwrap_err();
        assert!(
            err.to_string().contains("the lead of team t is boss"),
            "{err}"
        );
    }

    #[test]
    fn a_worker_name_that_could_escape_its_directory_is_refused() {
        let args =
            WorkerArgs::try_parse_from(["roo-worker", "--team", "t", "--name", "../x"]).unwrap();
        let err = args.settings(PathBuf::from("/h")).unwrap_err();
        assert!(err.to_string().contains("member name"), "{err}");
    }

    #[tokio::test]
    async fn a_clone_gate_outside_the_handoff_directory_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (home, clone) = (dir.path().join("home"), dir.path().join("clone"));
        std::fs::create_dir_all(clone.join(".git")).unwrap();
        std::fs::write(clone.join(".git/HEAD"), "ref: refs/heads/roo/t/alice\n").unwrap();
        // Shaped like a gate, but not in `run/handoff`: a file of the user's.
        let victim = dir.path().join("t+alice-0123456789abcdef.clone");
        std::fs::write(&victim, "ok\n").unwrap();
        let mut args = WorkerArgs::try_parse_from([
            "roo-worker",
            "--team",
            "t",
            "--name",
            "alice",
            "--new-clone",
            "roo/t/alice",
            "--cwd",
            clone.to_str().unwrap(),
        ])
        .unwrap();
        args.launch.clone_gate = Some(victim.clone());
        let refused = args.settings(home.clone());
        // Had it been taken, its watcher would have read the file and removed it by now.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "ok\n");
        let Err(err) = refused else {
            panic!("a foreign gate taken")
        };
        assert!(matches!(err, AppError::Usage(_)), "{err}");
        assert!(err.to_string().contains("refusing the clone gate"), "{err}");
        // The path the lead makes is taken.
        let team = Name::parse("t").unwrap();
        let alice = Name::parse("alice").unwrap();
        args.launch.clone_gate =
            Some(roo_team::backend::clone_gate::gate_path(&home, &team, &alice).unwrap());
        assert!(args.settings(home).unwrap().1.is_some());
    }
}
