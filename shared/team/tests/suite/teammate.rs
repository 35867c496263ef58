//! The teammate loop as an in-process teammate: idle notifications (once while nothing
//! changed), waking on a message with the full history, shutdown while idle (while busy:
//! `teammate_shutdown`), plan approval, permission asks, per-task usage, and a panic
//! reported as a death. The test plays the lead with `roo-mail` and reads the lead's inbox.

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use roo_agent::permissions::PermissionMode;
use roo_agent::tool::{PermissionTarget, Tool, ToolContext, ToolKind, ToolOutput};
use roo_store::{ClaimOptions, Message, MessageBody, NewTask, ReadFilter, TaskStatus, Team};
use roo_team::{
    InboxRouter, MemberState, TeamBinding, TeamEvent, TeammateEnd, TeammateExit, TeammateHandle,
    TeammateSpec, spawn_in_process, team_events,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::common::{TeamHome, alice_settings, name};

pub(super) const WAIT: Duration = Duration::from_secs(20);

/// Spawns alice in-process with `script` and `prompt`; `configure` adjusts the spec.
/// Returns the handle, the Step log and alice's team events.
pub(super) async fn spawn_alice(
    home: &TeamHome,
    cwd: &Path,
    script: &str,
    prompt: &str,
    configure: impl FnOnce(&mut TeammateSpec),
) -> (
    TeammateHandle,
    Arc<Mutex<Vec<String>>>,
    mpsc::Receiver<TeamEvent>,
) {
    let (settings, log) = alice_settings(home, cwd, script, 20);
    let binding = TeamBinding {
        team: home.team.clone(),
        me: name("alice"),
        lead: name("lead"),
        router: InboxRouter::new(home.team.mailbox(), name("alice")),
        presence: None,
        lead_key: None,
    };
    let (sender, events) = team_events();
    let mut spec = TeammateSpec::new(settings, binding, prompt.to_string());
    spec.events = Some(sender);
    configure(&mut spec);
    let handle = spawn_in_process(spec).await.unwrap();
    (handle, log, events)
}

/// Polls `check` every few milliseconds until it gives a value, or fails after `WAIT`.
pub(super) async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

pub(super) fn lead_inbox(team: &Team) -> Vec<Message> {
    team.mailbox()
        .read(&name("lead"), &ReadFilter::default())
        .unwrap()
}

pub(super) fn of_type(team: &Team, kind: &str) -> Vec<Message> {
    lead_inbox(team)
        .into_iter()
        .filter(|m| m.body.type_name() == kind)
        .collect()
}

/// Waits for alice's `n`th idle event (each one is sent after her `become_idle`).
pub(super) async fn idle_events(events: &mut mpsc::Receiver<TeamEvent>, n: usize) {
    let mut seen = 0;
    tokio::time::timeout(WAIT, async {
        while seen < n {
            if let Some(TeamEvent::MemberState {
                state: MemberState::Idle,
                ..
            }) = events.recv().await
            {
                seen += 1;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("alice went idle {seen} times, not {n}"));
}

pub(super) async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future).await.unwrap()
}

pub(super) fn alice_is_active(team: &Team) -> bool {
    team.config().unwrap().member("alice").unwrap().is_active()
}

const WAKE_SCRIPT: &str = r#"
agents:
  alice:
    - when: {last_user_contains: "switch to the v2 API"}
      text: "Switching to v2."
      tool_calls:
        - {name: Step, input: {api: v2}}
    - when: {last_user_contains: "add the docs"}
      text: "Docs."
      tool_calls:
        - {name: Step, input: {api: docs}}
    - when: {last_user_contains: "work on task 1"}
      text: "On task 1."
      tool_calls:
        - {name: Step, input: {api: task}}
    - text: "Step one."
      tool_calls:
        - {name: Step, input: {api: one, mail: true}}
    - text: "First job done."
    - text: "Second job done."
    - text: "Third job done."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_teammate_notifies_the_lead_wakes_on_a_message_and_resumes_with_its_history() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (handle, log, mut events) =
        spawn_alice(&home, cwd.path(), WAKE_SCRIPT, "do step one", |_| {}).await;

    // Run 1: bob's message reaches her between two tool calls and changes the next one.
    idle_events(&mut events, 1).await;
    assert_eq!(*log.lock().unwrap(), vec!["one", "v2"]);
    let idle = of_type(&home.team, "idle_notification");
    assert_eq!(idle.len(), 1, "{idle:?}");
    assert_eq!(idle[0].from, name("alice"));
    assert!(idle[0].text.contains("alice is idle"), "{}", idle[0].text);
    assert!(!alice_is_active(&home.team));
    let member = home.team.config().unwrap().member("alice").unwrap().clone();
    assert_eq!(member.pid, Some(std::process::id()));

    // Woken by the lead: a new run on top of the same conversation.
    home.mail(&[
        "send",
        "--as",
        "lead",
        "--to",
        "alice",
        "--summary",
        "add the docs",
        "add the docs",
    ]);
    idle_events(&mut events, 1).await;
    assert_eq!(*log.lock().unwrap(), vec!["one", "v2", "docs"]);
    // The same outcome and no tasks, but a new final answer: that is news for the lead,
    // so a second notification carries it (the answer is the teammate's report).
    let idle = of_type(&home.team, "idle_notification");
    assert_eq!(idle.len(), 2, "{idle:?}");
    assert!(
        idle[0].text.ends_with("Its final answer:\nFirst job done.")
            && idle[1]
                .text
                .ends_with("Its final answer:\nSecond job done."),
        "{idle:?}"
    );
    let transcript =
        std::fs::read_to_string(home.path().join("teams/t/transcripts/alice.jsonl")).unwrap();
    let first = transcript.find("do step one").unwrap();
    let second = transcript.rfind("add the docs").unwrap();
    assert!(first < second && transcript.contains("First job done."));
    let inbox = home
        .team
        .mailbox()
        .read(&name("alice"), &ReadFilter::default())
        .unwrap();
    assert!(inbox.iter().all(|m| m.delivered_at.is_some()), "{inbox:?}");

    // A task she owns changed: the next idle notifies again.
    let tasks = home.team.tasks();
    let task = tasks
        .create(NewTask {
            subject: "task 1".to_string(),
            ..NewTask::default()
        })
        .unwrap();
    tasks
        .claim(&task.id, &name("alice"), &ClaimOptions::default())
        .unwrap();
    home.mail(&[
        "send",
        "--as",
        "lead",
        "--to",
        "alice",
        "--summary",
        "task 1",
        "work on task 1",
    ]);
    idle_events(&mut events, 1).await;
    let idle = of_type(&home.team, "idle_notification");
    assert_eq!(idle.len(), 3, "{idle:?}");
    assert!(idle[2].text.contains("#1 in_progress"), "{}", idle[2].text);
    assert!(handle.ended().is_none());
}

const ONE_ANSWER: &str = r#"
agents:
  alice:
    - text: "Nothing to do yet."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_teammate_answers_the_leads_shutdown_request_and_ignores_others() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (handle, _log, mut events) =
        spawn_alice(&home, cwd.path(), ONE_ANSWER, "wait", |_| {}).await;
    idle_events(&mut events, 1).await;

    home.send(
        "bob",
        "alice",
        "shutdown_request",
        &["--request-id", "from-bob"],
    );
    let mailbox = home.team.mailbox();
    eventually("bob's request to be acknowledged", || {
        let inbox = mailbox.read(&name("alice"), &ReadFilter::default()).ok()?;
        inbox
            .iter()
            .any(|m| m.acknowledged_at.is_some())
            .then_some(())
    })
    .await;
    assert!(handle.ended().is_none(), "bob shut alice down");

    home.send(
        "lead",
        "alice",
        "shutdown_request",
        &["--request-id", "r-idle"],
    );
    assert_eq!(
        within(handle.wait()).await,
        TeammateEnd::Exited(TeammateExit::ShutDown)
    );
    let answers = of_type(&home.team, "shutdown_response");
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(matches!(
        &answers[0].body,
        MessageBody::ShutdownResponse { approve: true, request_id: Some(id), .. } if id == "r-idle"
    ));
}

const PLAN: &str = r#"
agents:
  alice:
    - when: {last_user_contains: "rejected the plan"}
      text: "Revised."
      tool_calls:
        - {name: ExitPlanMode, input: {plan: "plan v2: only touch out.txt"}}
    - when: {last_user_contains: "approved the plan"}
      text: "Writing."
      tool_calls:
        - {name: WriteFile, input: {path: out.txt, content: "done\n"}}
    - text: "Let me just write it."
      tool_calls:
        - {name: WriteFile, input: {path: out.txt, content: "early\n"}}
    - text: "Planning."
      tool_calls:
        - {name: ExitPlanMode, input: {plan: "plan v1: rewrite everything"}}
    - text: "Finished."
"#;

/// Waits for the `n`th plan approval request in the lead's inbox; returns (id, plan).
async fn plan_request(team: &Team, n: usize) -> (String, String) {
    eventually("a plan approval request", || {
        let requests = of_type(team, "plan_approval_request");
        match &requests.get(n - 1)?.body {
            MessageBody::PlanApprovalRequest { request_id, plan } => {
                Some((request_id.clone(), plan.clone()))
            }
            _ => None,
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_mode_teammate_writes_nothing_before_the_lead_approves_its_plan() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let out = cwd.path().join("out.txt");
    let (_handle, _log, mut events) = spawn_alice(&home, cwd.path(), PLAN, "fix it", |spec| {
        spec.plan_mode_required = true;
        spec.mode_after_plan = PermissionMode::AcceptEdits;
    })
    .await;

    let (id, plan) = plan_request(&home.team, 1).await;
    assert_eq!(plan, "plan v1: rewrite everything");
    assert!(!out.exists(), "written before the plan was approved");
    // An unsigned approval "from lead" (what any process can write) is ignored.
    home.send(
        "lead",
        "alice",
        "plan_approval_response",
        &["--request-id", &id, "--approve"],
    );
    home.answer(
        "alice",
        MessageBody::PlanApprovalResponse {
            request_id: id,
            approve: false,
            feedback: "only touch out.txt".to_string(),
        },
    );
    let (id, plan) = plan_request(&home.team, 2).await;
    assert_eq!(plan, "plan v2: only touch out.txt");
    assert!(!out.exists(), "written before the plan was approved");
    home.answer(
        "alice",
        MessageBody::PlanApprovalResponse {
            request_id: id,
            approve: true,
            feedback: String::new(),
        },
    );
    idle_events(&mut events, 1).await;
    // After approval she writes in the lead's mode (acceptEdits: no question asked).
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "done\n");
    assert!(of_type(&home.team, "permission_request").is_empty());
    let config = home.team.config().unwrap();
    assert!(config.member("alice").unwrap().plan_mode_required);
}

const WRITE: &str = r#"
agents:
  alice:
    - text: "Writing."
      tool_calls:
        - {name: WriteFile, input: {path: out.txt, content: "v1\n"}}
    - text: "Wrote it."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammates_permission_request_is_answered_by_the_lead() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (_handle, _log, mut events) = spawn_alice(&home, cwd.path(), WRITE, "write", |spec| {
        spec.settings.permission_mode = Some(PermissionMode::Default);
    })
    .await;
    let id = eventually("a permission request", || {
        match &of_type(&home.team, "permission_request").first()?.body {
            MessageBody::PermissionRequest {
                request_id, tool, ..
            } if tool == "WriteFile" => Some(request_id.clone()),
            _ => None,
        }
    })
    .await;
    assert!(!cwd.path().join("out.txt").exists());
    home.answer(
        "alice",
        MessageBody::PermissionResponse {
            request_id: id,
            decision: roo_store::PermissionDecision::Allow,
            reason: String::new(),
        },
    );
    idle_events(&mut events, 1).await;
    assert_eq!(
        std::fs::read_to_string(cwd.path().join("out.txt")).unwrap(),
        "v1\n"
    );
}

const PRICED: &str = r#"
agents:
  alice:
    - text: "Working."
      usage: {input_tokens: 100000, output_tokens: 50000}
      tool_calls:
        - {name: Step, input: {api: one}}
    - text: "Done."
      usage: {input_tokens: 200000, output_tokens: 10000}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_model_request_is_charged_to_the_task_the_teammate_owns() {
    let home = TeamHome::new();
    std::fs::write(
        home.path().join("config.yaml"),
        "prices: {script: {input: 1.0, output: 2.0}}\n",
    )
    .unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let tasks = home.team.tasks();
    let other = tasks
        .create(NewTask {
            subject: "someone else's".to_string(),
            ..NewTask::default()
        })
        .unwrap();
    let task = tasks
        .create(NewTask {
            subject: "mine".to_string(),
            ..NewTask::default()
        })
        .unwrap();
    home.team
        .join(roo_store::Member::new(name("alice"), home.team.name()))
        .unwrap();
    tasks
        .claim(&task.id, &name("alice"), &ClaimOptions::default())
        .unwrap();
    let (_handle, _log, mut events) = spawn_alice(&home, cwd.path(), PRICED, "work", |_| {}).await;
    idle_events(&mut events, 1).await;

    let charged = tasks.get(&task.id).unwrap();
    let usage = charged.usage.get(&name("alice")).copied().unwrap();
    assert_eq!(usage.input_tokens, 300_000);
    assert_eq!(usage.output_tokens, 60_000);
    assert_eq!(usage.requests, 2);
    // (300k × $1 + 60k × $2) per million tokens.
    assert!((usage.cost_usd.unwrap() - 0.42).abs() < 1e-9, "{usage:?}");
    assert!(tasks.get(&other.id).unwrap().usage.is_empty());
}

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

const PANIC: &str = r#"
agents:
  alice:
    - text: "Trying."
      tool_calls:
        - {name: Explode, input: {}}
    - text: "Unreachable."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_teammate_is_declared_dead_and_its_task_returns_to_pending() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let tasks = home.team.tasks();
    let task = tasks
        .create(NewTask {
            subject: "fragile".to_string(),
            ..NewTask::default()
        })
        .unwrap();
    home.team
        .join(roo_store::Member::new(name("alice"), home.team.name()))
        .unwrap();
    tasks
        .claim(&task.id, &name("alice"), &ClaimOptions::default())
        .unwrap();
    let (handle, _log, mut events) = spawn_alice(&home, cwd.path(), PANIC, "go", |spec| {
        spec.tools.push(Arc::new(Explode));
    })
    .await;
    let end = within(handle.wait()).await;
    assert!(
        matches!(&end, TeammateEnd::Died { reason } if reason.contains("the tool blew up")),
        "{end:?}"
    );
    let member = home.team.config().unwrap().member("alice").unwrap().clone();
    assert_eq!(member.state(), MemberState::Dead, "{member:?}");
    let released = tasks.get(&task.id).unwrap();
    assert_eq!(released.status, TaskStatus::Pending);
    assert_eq!(released.owner, None);
    assert!(
        released
            .notes
            .iter()
            .any(|n| n.text.contains("reclaimed from alice")),
        "{released:?}"
    );
    let mut dead_reported = false;
    while let Ok(event) = events.try_recv() {
        dead_reported |= matches!(
            event,
            TeamEvent::MemberState {
                state: MemberState::Dead,
                ..
            }
        );
    }
    assert!(dead_reported);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leads_shutdown_request_ends_a_teammate_waiting_for_a_permission_answer() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (handle, _log, _events) = spawn_alice(&home, cwd.path(), WRITE, "write", |spec| {
        spec.settings.permission_mode = Some(PermissionMode::Default);
    })
    .await;
    eventually("a permission request", || {
        (!of_type(&home.team, "permission_request").is_empty()).then_some(())
    })
    .await;
    home.send(
        "lead",
        "alice",
        "shutdown_request",
        &["--request-id", "r-stuck"],
    );
    assert_eq!(
        within(handle.wait()).await,
        TeammateEnd::Exited(TeammateExit::ShutDown)
    );
    assert!(!cwd.path().join("out.txt").exists());
    assert_eq!(of_type(&home.team, "shutdown_response").len(), 1);
}

const GREET: &str = r#"
agents:
  alice:
    - when: {last_user_contains: "are you there"}
      text: "Yes, back."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_restarted_without_a_prompt_takes_up_waiting_messages_at_once() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    home.mail(&[
        "send",
        "--as",
        "lead",
        "--to",
        "alice",
        "--summary",
        "ping",
        "are you there?",
    ]);
    let (handle, _log, mut events) = spawn_alice(&home, cwd.path(), GREET, "", |_| {}).await;
    idle_events(&mut events, 1).await;
    // One notification, after the run that answered the message, none before it.
    let idle = of_type(&home.team, "idle_notification");
    assert_eq!(idle.len(), 1, "{idle:?}");
    assert!(
        idle[0].text.contains("last run completed"),
        "{}",
        idle[0].text
    );
    drop(handle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roster_entry_that_requires_a_plan_keeps_a_restarted_teammate_from_writing() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let mut entry = roo_store::Member::new(name("alice"), home.team.name());
    entry.plan_mode_required = true;
    home.team.join(entry).unwrap();
    // Spawned without plan_mode_required, as a hand restart without the flag would be.
    let (_handle, _log, mut events) = spawn_alice(&home, cwd.path(), WRITE, "write", |_| {}).await;
    idle_events(&mut events, 1).await;
    assert!(!cwd.path().join("out.txt").exists());
    assert!(of_type(&home.team, "permission_request").is_empty());
    let transcript =
        std::fs::read_to_string(home.path().join("teams/t/transcripts/alice.jsonl")).unwrap();
    assert!(
        transcript.contains("needs the lead's approval of your plan first"),
        "{transcript}"
    );
}

const SLOW: &str = r#"
agents:
  alice:
    - text: "A slow job."
      tool_calls:
        - {name: Bash, input: {command: "sleep 300 & echo $! > bg.pid; sleep 301"}}
    - text: "Never reached."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_handle_stops_an_in_process_teammate_and_its_commands() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (handle, _log, _events) = spawn_alice(&home, cwd.path(), SLOW, "go", |spec| {
        spec.settings.permission_mode = Some(PermissionMode::BypassPermissions);
        // Commands run in the OS sandbox through a built binary's helper mode.
        let worker = super::common::roo_mail().with_file_name("roo-worker");
        spec.settings.sandbox_helper = Some(worker);
    })
    .await;
    let bg_pid = cwd.path().join("bg.pid");
    let bg: i32 = eventually("the background job", || {
        std::fs::read_to_string(&bg_pid).ok()?.trim().parse().ok()
    })
    .await;
    assert!(alice_is_active(&home.team));
    let ended = handle.watch_end();
    // The lead goes away: its handles drop.
    drop(handle);
    let mut ended = ended;
    let end = within(ended.wait_for(Option::is_some))
        .await
        .unwrap()
        .clone()
        .unwrap();
    assert_eq!(end, TeammateEnd::Exited(TeammateExit::Cancelled));
    assert!(!alice_is_active(&home.team));
    eventually("the background job to end", || {
        let stat = std::fs::read_to_string(format!("/proc/{bg}/stat")).ok();
        stat.is_none_or(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
        .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leads_watch_reports_a_killed_teammate_process_and_releases_its_task() {
    let home = TeamHome::new();
    let mut process = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let mut carol = roo_store::Member::new(name("carol"), home.team.name());
    carol.pid = Some(process.id());
    home.team.join(carol).unwrap();
    let tasks = home.team.tasks();
    let task = tasks
        .create(NewTask {
            subject: "carol's".to_string(),
            ..NewTask::default()
        })
        .unwrap();
    tasks
        .claim(&task.id, &name("carol"), &ClaimOptions::default())
        .unwrap();
    let (sender, mut events) = team_events();
    let cancel = tokio_util::sync::CancellationToken::new();
    // The lead's one liveness check: its team monitor.
    let slot = roo_team::TeamSlot::bound(TeamBinding {
        team: home.team.clone(),
        me: name("lead"),
        lead: name("lead"),
        router: InboxRouter::new(home.team.mailbox(), name("lead")),
        presence: None,
        lead_key: Some(std::sync::Arc::new(
            roo_team::authority::LeadKey::load_or_create(&home.team).unwrap(),
        )),
    });
    let (_status, _) = roo_team::spawn_monitor(slot, sender, cancel.clone());
    process.kill().unwrap();
    process.wait().unwrap();
    let dead = within(async {
        loop {
            if let Some(TeamEvent::MemberState {
                name,
                state: MemberState::Dead,
            }) = events.recv().await
            {
                return name;
            }
        }
    })
    .await;
    assert_eq!(dead, name("carol"));
    let released = tasks.get(&task.id).unwrap();
    assert_eq!(released.status, TaskStatus::Pending);
    assert_eq!(released.owner, None);
    cancel.cancel();
}
