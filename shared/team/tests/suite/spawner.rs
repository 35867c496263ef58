//! The lead's spawner: in-process teammates through the Agent and TaskStop tools, a
//! panic that releases the teammate's task, a message that restarts a stopped teammate
//! from its transcript, a live name refused, the lead's lifetime ending its teammates,
//! and the errors a lead's model gets (no team, a teammate's slot, a pane backend, a
//! looser mode, a missing name).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use roo_agent::permissions::PermissionMode;
use roo_agent::tool::{PermissionTarget, Tool, ToolContext, ToolKind, ToolOutput};
use roo_store::{BackendType, MemberState, NewTask, Outgoing, TaskStatus};
use roo_team::worktree::Git;
use roo_team::{
    AgentSettings, Identity, InboxRouter, OnSent, SpawnError, SpawnRequest, Spawner, TeamBinding,
    TeamEvent, TeamSlot, TeammateBase, TeammateEnd, TeammateExit, ToolSet, team_events,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::common::{Step, TeamHome, name};

const WAIT: Duration = Duration::from_secs(20);

/// A tool that panics, as a bug in a tool would.
struct Explode;

impl Tool for Explode {
    fn name(&self) -> &str {
        "Explode"
    }
    fn description(&self) -> String {
        "panics".to_string()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }
    fn permission_target(&self, _: &Value) -> PermissionTarget {
        PermissionTarget::None
    }
    fn call<'a>(&'a self, _: Value, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move { panic!("the tool blew up") })
    }
}

/// A tool that waits until its call is cancelled (a long command).
struct Hang;

impl Tool for Hang {
    fn name(&self) -> &str {
        "Hang"
    }
    fn description(&self) -> String {
        "waits".to_string()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }
    fn permission_target(&self, _: &Value) -> PermissionTarget {
        PermissionTarget::None
    }
    fn call<'a>(&'a self, _: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            ctx.cancel.cancelled().await;
            ToolOutput::error("cancelled")
        })
    }
}

/// A tool that records whether the checkout is in its working directory when it runs.
struct LookAround {
    log: Arc<Mutex<Vec<String>>>,
}

impl Tool for LookAround {
    fn name(&self) -> &str {
        "LookAround"
    }
    fn description(&self) -> String {
        "looks at the working directory".to_string()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }
    fn permission_target(&self, _: &Value) -> PermissionTarget {
        PermissionTarget::None
    }
    fn call<'a>(&'a self, _: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let seen = ctx.cwd.join("README.md").is_file();
            self.log
                .lock()
                .unwrap()
                .push(format!("checkout there: {seen}"));
            ToolOutput::ok("looked")
        })
    }
}

/// The lead's provider, counting the requests its teammates make.
struct Counting {
    inner: Arc<dyn roo_llm::Provider>,
    requests: Arc<AtomicUsize>,
}

impl roo_llm::Provider for Counting {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn context_window(&self) -> u64 {
        self.inner.context_window()
    }
    fn stream(&self, request: roo_llm::Request) -> roo_llm::EventStream {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.inner.stream(request)
    }
}

struct Lead {
    home: TeamHome,
    requests: Arc<AtomicUsize>,
    slot: TeamSlot,
    spawner: Spawner,
    lifetime: CancellationToken,
    events: mpsc::Receiver<TeamEvent>,
    log: Arc<Mutex<Vec<String>>>,
    cwd: tempfile::TempDir,
}

/// Team `t` bound as its lead's, a spawner on `backend` whose teammates replay `script`
/// and have the Step, Explode and Hang tools besides their team tools.
fn lead(script: &str, backend: BackendType) -> Lead {
    lead_with(script, backend, Git::new())
}

/// [`lead`] whose worktrees are made by `git`.
fn lead_with(script: &str, backend: BackendType, git: Git) -> Lead {
    let home = TeamHome::new();
    let script_path = home.path().join("script.yaml");
    std::fs::write(&script_path, script).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut template = AgentSettings::new(Identity::solo(name("lead")), home.path().to_path_buf());
    template.llm.script = Some(script_path.clone());
    // One provider for every teammate, as the lead shares its own: a restarted teammate
    // continues the script where it stopped.
    let player = roo_llm::script::ScriptPlayer::load(&script_path, None).unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    template.provider = Some(Arc::new(Counting {
        inner: Arc::new(roo_llm::ScriptProvider::new(player, "script", 200_000)),
        requests: requests.clone(),
    }));
    template.no_sandbox = true;
    template.max_turns = 20;
    template.tools = ToolSet {
        extra: vec![
            Arc::new(Step {
                home: home.path().to_path_buf(),
                log: log.clone(),
            }),
            Arc::new(Explode),
            Arc::new(Hang),
            Arc::new(LookAround { log: log.clone() }),
        ],
        ..ToolSet::default()
    };
    let slot = TeamSlot::bound(TeamBinding {
        team: home.team.clone(),
        me: name("lead"),
        lead: name("lead"),
        router: InboxRouter::new(home.team.mailbox(), name("lead")),
        presence: None,
        lead_key: Some(std::sync::Arc::new(
            roo_team::authority::LeadKey::load_or_create(&home.team).unwrap(),
        )),
    });
    let (sender, events) = team_events();
    let lifetime = CancellationToken::new();
    let spawner = Spawner::new(slot.clone(), backend, Some(sender), lifetime.clone());
    spawner.set_base(TeammateBase {
        settings: template,
        lead_mode: PermissionMode::AcceptEdits,
        git,
        project_trusted: false,
        member_roles: roo_store::MemberRoles::Auto,
    });
    Lead {
        home,
        requests,
        slot,
        spawner,
        lifetime,
        events,
        log,
        cwd: tempfile::tempdir().unwrap(),
    }
}

fn request(lead: &Lead, who: &str, prompt: &str) -> SpawnRequest {
    SpawnRequest {
        name: name(who),
        prompt: prompt.to_string(),
        agent_type: Some("tester".to_string()),
        model: None,
        plan_mode_required: false,
        permission_mode: None,
        cwd: lead.cwd.path().to_path_buf(),
        launcher: roo_agent::exec::Launcher::default(),
        host: None,
    }
}

async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn state(lead: &Lead, who: &str) -> MemberState {
    lead.home
        .team
        .config()
        .unwrap()
        .member(who)
        .unwrap()
        .observed_state()
}

const PANIC_THEN_BACK: &str = r#"
agents:
  alice:
    - when: {last_user_contains: "come back"}
      text: "Back."
      tool_calls:
        - {name: Step, input: {api: back}}
    - tool_calls:
        - {name: TaskUpdate, input: {id: "1", owner: alice}}
        - {name: Step, input: {api: claimed}}
        - {name: Explode, input: {}}
    - text: "Unreachable."
    - text: "Done again."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawned_teammate_that_panics_releases_its_task_and_a_message_restarts_it() {
    let mut lead = lead(PANIC_THEN_BACK, BackendType::InProcess);
    let tasks = lead.home.team.tasks();
    let task = tasks
        .create(NewTask {
            subject: "fragile".to_string(),
            ..NewTask::default()
        })
        .unwrap();
    let spawned = lead
        .spawner
        .spawn(request(&lead, "alice", "claim task 1"))
        .await
        .unwrap();
    // Outside a repository the teammate shares the lead's directory, and is told so.
    assert_eq!(spawned.branch, None);
    assert!(
        spawned.notices.iter().any(|n| n.contains("share")),
        "{:?}",
        spawned.notices
    );
    let end = eventually("alice's death", || lead.spawner.ended(&name("alice"))).await;
    assert!(
        matches!(&end, TeammateEnd::Died { reason } if reason.contains("the tool blew up")),
        "{end:?}"
    );
    // Dead, never idle; the task is back to pending.
    let pending = eventually("the task released", || {
        let t = tasks.get(&task.id).unwrap();
        (t.status == TaskStatus::Pending && t.owner.is_none()).then_some(t)
    })
    .await;
    assert!(
        pending
            .notes
            .iter()
            .any(|n| n.text.contains("reclaimed from alice")),
        "{pending:?}"
    );
    assert_eq!(state(&lead, "alice"), MemberState::Dead);
    let member = lead
        .home
        .team
        .config()
        .unwrap()
        .member("alice")
        .unwrap()
        .clone();
    assert_eq!(member.agent_type.as_deref(), Some("tester"));
    assert_eq!(member.backend_type, Some(BackendType::InProcess));
    // The lead learns why (its monitor reports the state itself, from the roster).
    let notice = tokio::time::timeout(WAIT, async {
        loop {
            match lead.events.recv().await {
                Some(TeamEvent::Notice { text }) if text.contains("alice died") => break text,
                Some(TeamEvent::MemberState { name, .. }) => {
                    panic!("the teammate reported its own state ({name}): the monitor does")
                }
                Some(_) => {}
                None => panic!("the event channel closed"),
            }
        }
    })
    .await
    .unwrap();
    assert!(notice.contains("the tool blew up"), "{notice}");

    // A message to the dead teammate starts it again, from its transcript.
    lead.home
        .team
        .mailbox()
        .send(
            &name("lead"),
            "alice",
            Outgoing::text("come back and carry on", "come back"),
        )
        .unwrap();
    let on_sent: OnSent = lead.spawner.on_sent();
    tokio::task::spawn_blocking(move || on_sent(&name("alice")))
        .await
        .unwrap();
    eventually("alice's run after the restart", || {
        lead.log
            .lock()
            .unwrap()
            .contains(&"back".to_string())
            .then_some(())
    })
    .await;
    eventually("alice idle after the restart", || {
        (state(&lead, "alice") == MemberState::Idle).then_some(())
    })
    .await;
    assert_eq!(lead.spawner.names(), vec![name("alice")]);
    // The restarted run resumed the transcript: the first run's claim is in it.
    let transcript =
        std::fs::read_to_string(lead.home.path().join("teams/t/transcripts/alice.jsonl")).unwrap();
    assert!(transcript.contains("claim task 1"), "{transcript}");
    assert!(
        transcript.contains("come back and carry on"),
        "{transcript}"
    );
}

const IDLE: &str = r#"
agents:
  alice:
    - text: "Ready."
    - text: "Ready again."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_name_is_refused_and_task_stop_stops_it() {
    let lead = lead(IDLE, BackendType::InProcess);
    lead.spawner
        .spawn(request(&lead, "alice", "wait for work"))
        .await
        .unwrap();
    eventually("alice idle", || {
        (state(&lead, "alice") == MemberState::Idle).then_some(())
    })
    .await;
    let again = lead
        .spawner
        .spawn(request(&lead, "alice", "another"))
        .await
        .unwrap_err();
    assert!(
        matches!(again, SpawnError::AlreadyRunning { .. }),
        "{again}"
    );

    // TaskStop through the tool, as the lead's model calls it.
    let tools = lead.spawner.tools();
    let stop = tools.iter().find(|t| t.name() == "TaskStop").unwrap();
    let ctx = ToolContext::new(lead.cwd.path().to_path_buf(), lead.cwd.path().to_path_buf());
    let out = stop.call(json!({"task_id": "alice"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    let end = eventually("alice stopped", || lead.spawner.ended(&name("alice"))).await;
    assert_eq!(end, TeammateEnd::Exited(TeammateExit::Cancelled));
    let unknown = stop.call(json!({"task_id": "zed"}), &ctx).await;
    assert!(
        unknown.is_error && unknown.content.contains("no teammate"),
        "{}",
        unknown.content
    );
    // Stopped, the name may be spawned again.
    lead.spawner
        .spawn(request(&lead, "alice", "back to work"))
        .await
        .unwrap();
    assert_eq!(lead.spawner.names(), vec![name("alice")]);
    // Stopped again before the test's directory goes: a run still writing its transcript
    // would make that directory again after the test removed it (a leftover `.tmp*`).
    lead.spawner.stop(&name("alice")).unwrap();
    eventually("alice stopped again", || {
        lead.spawner.names().is_empty().then_some(())
    })
    .await;
}

const HANG: &str = r#"
agents:
  alice:
    - tool_calls:
        - {name: Hang, input: {}}
    - text: "Never."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leads_lifetime_and_unbinding_end_its_teammates() {
    let lead = lead(HANG, BackendType::InProcess);
    lead.spawner
        .spawn(request(&lead, "alice", "hang"))
        .await
        .unwrap();
    eventually("alice busy", || {
        (state(&lead, "alice") == MemberState::Busy).then_some(())
    })
    .await;
    lead.lifetime.cancel();
    // Cancelled out of its hanging call: recorded idle, not running.
    eventually("alice stopped", || {
        let active = lead
            .home
            .team
            .config()
            .unwrap()
            .member("alice")
            .unwrap()
            .is_active;
        (active == Some(false)).then_some(())
    })
    .await;
    assert!(lead.spawner.names().is_empty());

    // TeamDelete clears the slot: the teammates of that team end too.
    let lead = self::lead(HANG, BackendType::InProcess);
    lead.spawner
        .spawn(request(&lead, "bob", "hang"))
        .await
        .unwrap();
    lead.slot.clear();
    eventually("bob stopped", || {
        let active = lead
            .home
            .team
            .config()
            .unwrap()
            .member("bob")
            .unwrap()
            .is_active;
        (active == Some(false)).then_some(())
    })
    .await;
    assert!(lead.spawner.names().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_leads_model_cannot_spawn() {
    let tmux = lead(IDLE, BackendType::Tmux);
    let err = tmux
        .spawner
        .spawn(request(&tmux, "alice", "x"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("cannot open tmux panes here"),
        "{err}"
    );

    let lead = lead(IDLE, BackendType::InProcess);
    let mut looser = request(&lead, "alice", "x");
    looser.permission_mode = Some(PermissionMode::BypassPermissions);
    let err = lead.spawner.spawn(looser).await.unwrap_err();
    assert!(matches!(err, SpawnError::LooserMode { .. }), "{err}");

    let tools = lead.spawner.tools();
    let agent = tools.iter().find(|t| t.name() == "Agent").unwrap();
    let ctx = ToolContext::new(lead.cwd.path().to_path_buf(), lead.cwd.path().to_path_buf());
    let out = agent.call(json!({"prompt": "x"}), &ctx).await;
    assert!(
        out.is_error && out.content.contains("`name` is required"),
        "{}",
        out.content
    );
    let out = agent
        .call(json!({"name": "../evil", "prompt": "x"}), &ctx)
        .await;
    assert!(out.is_error, "{}", out.content);
    let out = agent
        .call(json!({"name": "alice", "prompt": "x", "fork": true}), &ctx)
        .await;
    assert!(
        out.is_error && out.content.contains("unknown field"),
        "{}",
        out.content
    );
    assert!(lead.spawner.names().is_empty());

    // Not bound, or bound as a teammate: no spawning.
    lead.slot.clear();
    let err = lead
        .spawner
        .spawn(request(&lead, "alice", "x"))
        .await
        .unwrap_err();
    assert!(matches!(err, SpawnError::NoTeam), "{err}");
    let teammate_slot = TeamSlot::bound(TeamBinding {
        team: lead.home.team.clone(),
        me: name("bob"),
        lead: name("lead"),
        router: InboxRouter::new(lead.home.team.mailbox(), name("bob")),
        presence: None,
        lead_key: None,
    });
    let as_bob = Spawner::new(
        teammate_slot,
        BackendType::InProcess,
        None,
        CancellationToken::new(),
    );
    let err = as_bob
        .spawn(request(&lead, "carol", "x"))
        .await
        .unwrap_err();
    assert!(matches!(err, SpawnError::NotLead { .. }), "{err}");
}

const PEER: &str = r#"
agents:
  alice:
    - when: {last_user_contains: "come back"}
      text: "Back."
      tool_calls:
        - {name: Step, input: {api: back}}
    - text: "Ready."
    - text: "Done."
  bob:
    - tool_calls:
        - {name: SendMessage, input: {to: alice, summary: "come back", message: "come back, alice"}}
    - text: "Sent."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammates_message_restarts_a_stopped_peer() {
    let lead = lead(PEER, BackendType::InProcess);
    lead.spawner
        .spawn(request(&lead, "alice", "wait for work"))
        .await
        .unwrap();
    eventually("alice idle", || {
        (state(&lead, "alice") == MemberState::Idle).then_some(())
    })
    .await;
    lead.spawner.stop(&name("alice")).unwrap();
    eventually("alice stopped", || lead.spawner.ended(&name("alice"))).await;
    lead.spawner
        .spawn(request(&lead, "bob", "tell alice"))
        .await
        .unwrap();
    eventually("alice's run on bob's message", || {
        lead.log
            .lock()
            .unwrap()
            .contains(&"back".to_string())
            .then_some(())
    })
    .await;
    assert_eq!(lead.spawner.names(), vec![name("alice"), name("bob")]);
}

const LOOK: &str = r#"
agents:
  alice:
    - tool_calls:
        - {name: LookAround, input: {}}
    - text: "Looked."
"#;

/// A git that holds `git worktree add` until `release` exists, then fails it if `fail`
/// exists, else runs it.
fn held_git(dir: &std::path::Path) -> (Git, std::path::PathBuf, std::path::PathBuf) {
    let (release, fail) = (dir.join("release"), dir.join("fail"));
    let wrapper = dir.join("git-held");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" checkout --quiet -B \"*)\n  while [ ! -e '{}' ]; do sleep 0.01; done\n  \
             if [ -e '{}' ]; then echo 'fatal: refused by the test' >&2; exit 1; fi;;\nesac\nexec git \"$@\"\n",
            release.display(),
            fail.display()
        ),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&wrapper).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&wrapper, perms).unwrap();
    (Git::new().with_program(&wrapper), release, fail)
}

/// The lead's directory as a repository with one commit holding README.md.
fn commit_readme(dir: &std::path::Path) {
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "README.md"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "-qm",
            "one",
        ],
    ] {
        if args[0] == "add" {
            std::fs::write(dir.join("README.md"), "# readme\n").unwrap();
        }
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammates_first_request_does_not_wait_for_its_worktree_but_its_tools_do() {
    let scratch = tempfile::tempdir().unwrap();
    let (git, release, _) = held_git(scratch.path());
    let lead = Arc::new(lead_with(LOOK, BackendType::InProcess, git));
    commit_readme(lead.cwd.path());
    let spawning = {
        let lead = lead.clone();
        tokio::spawn(async move {
            let request = request(&lead, "alice", "look around");
            lead.spawner.spawn(request).await
        })
    };
    // Its model is asked while git is still held in the clone's checkout...
    eventually("alice's first request", || {
        (lead.requests.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
    assert!(
        !spawning.is_finished(),
        "the spawn returned before its worktree was made"
    );
    // ... and its tool call waits for the checkout.
    std::fs::write(&release, "").unwrap();
    let spawned = spawning.await.unwrap().unwrap();
    assert_eq!(spawned.branch.as_deref(), Some("roo/t/alice"));
    assert!(spawned.work_dir.join("README.md").is_file());
    let seen = eventually("alice's tool call", || {
        lead.log.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(seen, "checkout there: true");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worktree_that_fails_while_its_teammate_starts_fails_the_spawn_and_runs_no_tool() {
    let scratch = tempfile::tempdir().unwrap();
    let (git, release, fail) = held_git(scratch.path());
    let lead = Arc::new(lead_with(LOOK, BackendType::InProcess, git));
    commit_readme(lead.cwd.path());
    let spawning = {
        let lead = lead.clone();
        tokio::spawn(async move {
            let request = request(&lead, "alice", "look around");
            lead.spawner.spawn(request).await
        })
    };
    eventually("alice's first request", || {
        (lead.requests.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
    std::fs::write(&fail, "").unwrap();
    std::fs::write(&release, "").unwrap();
    let error = spawning.await.unwrap().unwrap_err();
    assert!(
        matches!(&error, SpawnError::Worktree { message, .. } if message.contains("refused by the test")),
        "{error}"
    );
    assert!(
        lead.spawner.names().is_empty(),
        "{:?}",
        lead.spawner.names()
    );
    eventually("alice stopped", || {
        (state(&lead, "alice") != MemberState::Busy).then_some(())
    })
    .await;
    // The refused spawn leaves no clone and no branch behind (issue 18).
    assert!(!lead.cwd.path().join(".roocode/worktrees/t+alice").exists());
    let branches = std::process::Command::new("git")
        .args(["branch", "--list", "roo/*"])
        .current_dir(lead.cwd.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&branches.stdout), "");
    assert!(
        lead.log.lock().unwrap().is_empty(),
        "{:?}",
        lead.log.lock().unwrap()
    );
}

/// A teammate whose worktree failed while it started is stopped with the failed spawn:
/// its loop does not live on unseen (TaskStop could not reach it), and its name can be
/// spawned again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_whose_worktree_failed_is_stopped_and_its_name_spawns_again() {
    let scratch = tempfile::tempdir().unwrap();
    let (git, release, fail) = held_git(scratch.path());
    let lead = Arc::new(lead_with(LOOK, BackendType::InProcess, git));
    commit_readme(lead.cwd.path());
    std::fs::write(&fail, "").unwrap();
    std::fs::write(&release, "").unwrap();
    let error = lead
        .spawner
        .spawn(request(&lead, "alice", "look around"))
        .await
        .unwrap_err();
    assert!(matches!(&error, SpawnError::Worktree { .. }), "{error}");
    std::fs::remove_file(&fail).unwrap();
    // The stop lands as the loop notices its cancellation; until then the name is taken.
    let deadline = Instant::now() + WAIT;
    loop {
        match lead
            .spawner
            .spawn(request(&lead, "alice", "look around"))
            .await
        {
            Ok(_) => break,
            Err(e) => assert!(
                Instant::now() < deadline,
                "the first alice was never stopped: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(lead.spawner.names(), vec![name("alice")]);
}

const SUB_AGENT: &str = r#"
agents:
  alice:
    - when: {last_user_contains: "SUB-DONE"}
      text: "alice done"
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {description: "sub job", prompt: "do the sub job", subagent_type: "general-purpose"}}
  general-purpose:
    - text: "SUB-DONE"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_teammate_runs_a_sub_agent_and_task_ids_are_not_teammate_names() {
    let lead = lead(SUB_AGENT, BackendType::InProcess);
    lead.spawner
        .spawn(request(&lead, "alice", "work"))
        .await
        .unwrap();
    eventually("alice idle", || {
        (state(&lead, "alice") == MemberState::Idle).then_some(())
    })
    .await;
    let transcript =
        roo_store::RooHome::new(lead.home.path()).transcript(&name("t"), &name("alice"));
    let text = std::fs::read_to_string(&transcript).unwrap();
    assert!(text.contains("SUB-DONE"), "{text}");
    assert!(text.contains("[sub-agent a1 · general-purpose"), "{text}");
    assert!(text.contains("alice done"), "{text}");
    // A teammate named like a task id would make TaskStop ambiguous.
    let reserved = lead
        .spawner
        .spawn(request(&lead, "a3", "work"))
        .await
        .unwrap_err();
    assert!(
        matches!(reserved, SpawnError::ReservedName { .. }),
        "{reserved}"
    );
}

/// A pane backend whose panes never open.
struct NoPanes;

impl roo_team::backend::TeammateExecutor for NoPanes {
    fn backend(&self) -> BackendType {
        BackendType::Tmux
    }
    fn label(&self) -> &'static str {
        "no-panes"
    }
    fn spawn(
        &self,
        launch: roo_team::backend::Launch,
    ) -> BoxFuture<'_, Result<Vec<String>, roo_team::backend::ExecError>> {
        Box::pin(async move {
            Err(roo_team::backend::ExecError::Start {
                name: launch.name,
                message: "no pane for the test".to_string(),
            })
        })
    }
    fn is_active(&self, _: &roo_store::Name) -> bool {
        false
    }
    fn kill(&self, _: &roo_store::Name) -> BoxFuture<'_, Result<(), roo_team::backend::ExecError>> {
        Box::pin(async { Ok(()) })
    }
    fn shutdown_all(&self, _: bool) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// Issue 18: a spawn refused after its clone was made (here its pane never opens)
/// leaves no clone and no branch behind; a later spawn of the name starts afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_spawn_removes_the_clone_and_branch_it_made() {
    let lead = lead(LOOK, BackendType::Tmux);
    lead.spawner
        .set_executor(roo_team::backend::Location::Worker, Arc::new(NoPanes));
    commit_readme(lead.cwd.path());
    let error = lead
        .spawner
        .spawn(request(&lead, "alice", "look around"))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("no pane for the test"),
        "{error}"
    );
    assert!(!lead.cwd.path().join(".roocode/worktrees/t+alice").exists());
    let branches = std::process::Command::new("git")
        .args(["branch", "--list", "roo/*"])
        .current_dir(lead.cwd.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&branches.stdout), "");
}

/// Without sub-agents the lead's Agent only spawns teammates: its schema, derived from
/// its input struct, takes what the hand-written one did (`name` required), and TaskStop
/// takes a teammate's name.
#[tokio::test]
async fn the_teammate_only_agent_and_task_stop_schemas_take_what_they_took() {
    let spawner = Spawner::new(
        TeamSlot::new(),
        BackendType::InProcess,
        None,
        CancellationToken::new(),
    );
    let tools = spawner.tools();
    let schema = |name: &str| {
        let tool = tools.iter().find(|t| t.name() == name).unwrap();
        let mut schema = tool.input_schema();
        for field in schema["properties"].as_object_mut().unwrap().values_mut() {
            let field = field.as_object_mut().unwrap();
            field.remove("description");
            field.remove("default");
        }
        schema
    };
    let string = json!({"type": "string"});
    assert_eq!(
        schema("Agent"),
        json!({
            "type": "object",
            "properties": {
                "name": string,
                "prompt": string,
                "description": string,
                "subagent_type": string,
                "model": string,
                "plan_mode_required": {"type": "boolean"},
                "permission_mode": {
                    "type": "string",
                    "enum": ["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"]
                },
                "task": {"type": "boolean"},
                // Added by issue 32: the teammate's spending cap.
                "budget": {
                    "type": "object",
                    "properties": {
                        "usd": {"description": "Most USD.", "type": "number"},
                        "requests": {
                            "description": "Most model requests.",
                            "type": "integer",
                            "minimum": 0
                        }
                    },
                    "additionalProperties": false
                }
            },
            "required": ["prompt", "name"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        schema("TaskStop"),
        json!({
            "type": "object",
            "properties": {
                "task_id": string,
                "rewind_to": {"type": "integer", "minimum": 0}
            },
            "required": ["task_id"],
            "additionalProperties": false
        })
    );
    let agent = tools.iter().find(|t| t.name() == "Agent").unwrap();
    assert!(agent.description().contains("TeamCreate first"));
    assert!(!agent.description().contains("sub-agent"));
}

/// With hosts configured (`hosts:` of the user's config), the Agent schema offers `host`,
/// naming them, in one short line; without, it does not mention hosts at all (above).
#[tokio::test]
async fn the_agent_schema_offers_host_only_when_hosts_are_configured() {
    let spawner = Spawner::new(
        TeamSlot::new(),
        BackendType::InProcess,
        None,
        CancellationToken::new(),
    );
    let host = |n: &str| roo_agent::config::HostConfig {
        name: name(n),
        ssh: format!("alice@{n}.example"),
        repo: std::path::PathBuf::from("/srv/app"),
        roo_worker: "roo-worker".into(),
        ssh_config: None,
        tmux_socket: None,
    };
    let hosts = ["gpu", "b"]
        .into_iter()
        .map(|n| (name(n), host(n)))
        .collect();
    let home = tempfile::TempDir::new().unwrap();
    let lifetime = CancellationToken::new();
    let _watchers = lifetime.clone().drop_guard();
    spawner
        .set_executors(&roo_team::backend::LeadBackends {
            binary: None,
            hosts: &hosts,
            roo_home: home.path(),
            lifetime: &lifetime,
        })
        .unwrap();
    let tools = spawner.tools();
    let agent = tools.iter().find(|t| t.name() == "Agent").unwrap();
    let schema = agent.input_schema();
    assert_eq!(schema["properties"]["host"]["type"], "string");
    assert_eq!(
        schema["properties"]["host"]["description"],
        "Run it on this host over ssh: b, gpu."
    );
}

/// A toy backend, not shipped: its teammates are names in a list, where a container or
/// Kubernetes launcher would start a `roo-worker`. Plugging it in is one executor set at
/// its location — what a shipped backend's one arm in the executor table's match
/// (`ExecutorTable::fill`) does: nothing else in the spawner names a backend.
#[derive(Default)]
struct Toy {
    /// (name, prompt, work directory, whether the lead's key was pinned) per start.
    started: Mutex<Vec<(String, String, std::path::PathBuf, bool)>>,
    active: Mutex<Vec<roo_store::Name>>,
    killed: Mutex<Vec<String>>,
    shut_down: Mutex<Vec<bool>>,
}

impl roo_team::backend::TeammateExecutor for Toy {
    fn backend(&self) -> BackendType {
        BackendType::Tmux
    }
    fn label(&self) -> &'static str {
        "toy"
    }
    fn spawn(
        &self,
        launch: roo_team::backend::Launch,
    ) -> BoxFuture<'_, Result<Vec<String>, roo_team::backend::ExecError>> {
        self.started.lock().unwrap().push((
            launch.name.to_string(),
            launch.prompt.clone(),
            launch.work_dir.clone(),
            launch.lead_key.is_some(),
        ));
        self.active.lock().unwrap().push(launch.name.clone());
        let notice = format!("{} runs in the toy", launch.name);
        Box::pin(async move { Ok(vec![notice]) })
    }
    fn is_active(&self, name: &roo_store::Name) -> bool {
        self.active.lock().unwrap().contains(name)
    }
    fn kill(
        &self,
        name: &roo_store::Name,
    ) -> BoxFuture<'_, Result<(), roo_team::backend::ExecError>> {
        self.active.lock().unwrap().retain(|n| n != name);
        self.killed.lock().unwrap().push(name.to_string());
        Box::pin(async { Ok(()) })
    }
    fn shutdown_all(&self, keep: bool) -> BoxFuture<'_, ()> {
        self.active.lock().unwrap().clear();
        self.shut_down.lock().unwrap().push(keep);
        Box::pin(async {})
    }
}

/// Issue 30: a new backend is one executor in the table. The toy, set at the worker
/// location, gets the one `Launch` of a spawn, its notices reach the lead, TaskStop
/// ends its teammate, a message to the stopped one starts it again from its
/// transcript (an empty prompt), and the lead's exit shuts it down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toy_backend_plugs_in_at_its_location_in_the_executor_table() {
    use roo_team::backend::Location;
    let lead = lead(LOOK, BackendType::Tmux);
    let toy = Arc::new(Toy::default());
    lead.spawner.set_executor(Location::Worker, toy.clone());
    let spawned = lead
        .spawner
        .spawn(request(&lead, "alice", "look around"))
        .await
        .unwrap();
    assert!(
        spawned
            .notices
            .contains(&"alice runs in the toy".to_string()),
        "{:?}",
        spawned.notices
    );
    assert_eq!(
        *toy.started.lock().unwrap(),
        vec![(
            "alice".to_string(),
            "look around".to_string(),
            spawned.work_dir.clone(),
            true
        )]
    );
    assert_eq!(lead.spawner.names(), vec![name("alice")]);

    assert!(lead.spawner.stop(&name("alice")).unwrap());
    eventually("the toy killed alice", || {
        (*toy.killed.lock().unwrap() == ["alice"]).then_some(())
    })
    .await;
    assert!(lead.spawner.names().is_empty());

    (lead.spawner.on_sent())(&name("alice"));
    eventually("alice started again", || {
        let started = toy.started.lock().unwrap();
        (started.len() == 2).then(|| started[1].1.clone())
    })
    .await
    .is_empty()
    .then_some(())
    .expect("a restart resumes with an empty prompt");
    eventually("alice running again", || {
        (lead.spawner.names() == vec![name("alice")]).then_some(())
    })
    .await;

    lead.spawner.shutdown(true).await;
    assert_eq!(*toy.shut_down.lock().unwrap(), vec![true]);
}

const WRITE_README: &str = r#"
agents:
  alice:
    - tool_calls:
        - {name: WriteFile, input: {path: README.md, content: "alice was here\n"}}
    - text: "Done."
  bob:
    - tool_calls:
        - {name: WriteFile, input: {path: README.md, content: "bob was here\n"}}
    - text: "Done."
"#;

/// Review M5: a teammate that rewrites its own roster entry (its `worktree_path` pointed
/// at another directory with checkpoints, here bob's clone) does not steer the lead's
/// rewind there: the rewind goes by the lead's own record of the start, refuses while
/// the roster disagrees, and touches nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewind_goes_by_the_leads_record_not_a_rewritten_roster_entry() {
    let lead = lead(WRITE_README, BackendType::InProcess);
    commit_readme(lead.cwd.path());
    let alice = lead
        .spawner
        .spawn(request(&lead, "alice", "write"))
        .await
        .unwrap();
    let bob = lead
        .spawner
        .spawn(request(&lead, "bob", "write"))
        .await
        .unwrap();
    let read = |dir: &std::path::Path| std::fs::read_to_string(dir.join("README.md")).unwrap();
    eventually("both teammates' writes", || {
        (read(&alice.work_dir) == "alice was here\n" && read(&bob.work_dir) == "bob was here\n")
            .then_some(())
    })
    .await;
    eventually("both teammates idle", || {
        (state(&lead, "alice") != MemberState::Busy && state(&lead, "bob") != MemberState::Busy)
            .then_some(())
    })
    .await;
    lead.spawner.stop(&name("alice")).unwrap();
    // alice (any teammate may write its own entry) points her entry at bob's clone.
    let bob_dir = bob.work_dir.clone();
    lead.home
        .team
        .update_member("alice", |m| {
            m.host = None;
            m.worktree_path = Some(bob_dir.clone());
        })
        .unwrap();
    let rewind = |number: usize| {
        let spawner = lead.spawner.clone();
        tokio::task::spawn_blocking(move || spawner.rewind_clone(&name("alice"), number))
    };
    let refused = rewind(1).await.unwrap().unwrap_err();
    assert!(
        refused.contains("refused") && refused.contains("roster"),
        "{refused}"
    );
    assert_eq!(read(&bob.work_dir), "bob was here\n");
    assert_eq!(read(&alice.work_dir), "alice was here\n");
    // Her entry as the lead wrote it: the rewind is of her own clone.
    let alice_dir = alice.work_dir.clone();
    lead.home
        .team
        .update_member("alice", |m| m.worktree_path = Some(alice_dir.clone()))
        .unwrap();
    let rewound = rewind(1).await.unwrap().unwrap();
    assert!(rewound.contains("rewound alice's clone"), "{rewound}");
    assert_eq!(read(&alice.work_dir), "# readme\n");
    assert_eq!(read(&bob.work_dir), "bob was here\n");
}

/// Review M3 (e): while one spawn of a name is under way (its clone held in checkout,
/// not yet registered), a second spawn of the name is refused at once, before it starts
/// anything (on PostgreSQL its member role would replace the first one's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_spawn_of_a_name_being_spawned_is_refused_before_it_starts() {
    let scratch = tempfile::tempdir().unwrap();
    let (git, release, _) = held_git(scratch.path());
    let lead = Arc::new(lead_with(LOOK, BackendType::InProcess, git));
    commit_readme(lead.cwd.path());
    let first = {
        let lead = lead.clone();
        tokio::spawn(async move {
            let request = request(&lead, "alice", "look around");
            lead.spawner.spawn(request).await
        })
    };
    eventually("alice's first request", || {
        (lead.requests.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
    let second = tokio::time::timeout(
        Duration::from_secs(5),
        lead.spawner.spawn(request(&lead, "alice", "look around")),
    )
    .await;
    // Only the first one's model was asked.
    let asked = lead.requests.load(Ordering::SeqCst);
    std::fs::write(&release, "").unwrap();
    assert_eq!(asked, 1);
    let refused = second
        .expect("the second spawn waited on the first one's checkout")
        .unwrap_err();
    assert!(
        matches!(refused, SpawnError::AlreadyRunning { .. }),
        "{refused}"
    );
    first.await.unwrap().unwrap();
}
