//! The lead's spawner: in-process teammates through the Agent and TaskStop tools, a
//! panic that releases the teammate's task, a message that restarts a stopped teammate
//! from its transcript, a live name refused, the lead's lifetime ending its teammates,
//! and the errors a lead's model gets (no team, a teammate's slot, a pane backend, a
//! looser mode, a missing name).

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

struct Lead {
    home: TeamHome,
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
    let home = TeamHome::new();
    let script_path = home.path().join("script.yaml");
    std::fs::write(&script_path, script).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut template = AgentSettings::new(Identity::solo(name("lead")), home.path().to_path_buf());
    template.llm.script = Some(script_path.clone());
    // One provider for every teammate, as the lead shares its own: a restarted teammate
    // continues the script where it stopped.
    let player = roo_llm::script::ScriptPlayer::load(&script_path, None).unwrap();
    template.provider = Some(Arc::new(roo_llm::ScriptProvider::new(
        player, "script", 200_000,
    )));
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
        ],
        ..ToolSet::default()
    };
    let slot = TeamSlot::bound(TeamBinding {
        team: home.team.clone(),
        me: name("lead"),
        lead: name("lead"),
        router: InboxRouter::new(home.team.mailbox(), name("lead")),
    });
    let (sender, events) = team_events();
    let lifetime = CancellationToken::new();
    let spawner = Spawner::new(slot.clone(), backend, Some(sender), lifetime.clone());
    spawner.set_base(TeammateBase {
        settings: template,
        lead_mode: PermissionMode::AcceptEdits,
        git: Git::new(),
    });
    Lead {
        home,
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
        sandbox: None,
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
    assert!(err.to_string().contains("not built yet"), "{err}");

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
