//! Unit tests of the lead's side of a team, over a file store in a temporary
//! directory.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use roo_agent::permissions::PermissionMode;
use roo_agent::tool::ToolRegistry;
use roo_agent::{AgentHook, TurnAction};
use roo_store::{Member, MessageBody, MessageId, Name, Outgoing, RooHome, Team};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::authority::LeadKey;
use crate::binding::{TeamBinding, TeamSlot};
use crate::event::{TeamEvent, team_events};
use crate::router::InboxRouter;

fn name(s: &str) -> Name {
    Name::parse_as("name", s).unwrap()
}

/// Team `team` led by `lead`, with `alice` joined and busy (a join records
/// `is_active`; a roster entry alone never started).
fn create(dir: &Path, team: &str) -> Team {
    let team = name(team);
    let team = Team::create(
        &RooHome::new(dir),
        team.clone(),
        "",
        Member::new(name("lead"), &team),
        vec![Member::new(name("alice"), &team)],
    )
    .unwrap();
    team.set_active("alice", true).unwrap();
    team
}

/// The lead's binding to `team`, its router built the way TeamCreate builds it
/// (without events).
fn lead_binding(team: &Team) -> TeamBinding {
    TeamBinding {
        team: team.clone(),
        me: name("lead"),
        lead: name("lead"),
        router: InboxRouter::new(team.mailbox(), name("lead")),
        presence: None,
        lead_key: None,
    }
}

fn send(team: &Team, summary: &str) -> MessageId {
    team.mailbox()
        .send(&name("alice"), "lead", Outgoing::text("body", summary))
        .unwrap()[0]
        .id
        .clone()
}

async fn next_message(events: &mut mpsc::Receiver<TeamEvent>) -> TeamEvent {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("an event in time")
            .expect("the channel is open");
        if matches!(event, TeamEvent::Message { .. }) {
            return event;
        }
    }
}

#[tokio::test]
async fn team_input_waits_for_a_binding_and_a_message_that_wakes_the_lead() {
    let dir = tempfile::tempdir().unwrap();
    let team = create(dir.path(), "crew");
    let slot = TeamSlot::new();
    let wait = team_input(&slot);
    tokio::pin!(wait);
    // Unbound: nothing to wait for, even with a message in the inbox.
    send(&team, "before the binding");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut wait)
            .await
            .is_err()
    );
    // Bound later: the queued message resolves it once the router read it.
    let binding = slot.bind(lead_binding(&team)).unwrap();
    binding.router.poll().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), &mut wait)
        .await
        .expect("the message wakes the lead");
    // Progress news alone does not wake it.
    binding.router.take_conversation();
    team.mailbox()
        .send(
            &name("alice"),
            "lead",
            Outgoing::new(MessageBody::StatusUpdate, "50% done").with_summary("progress"),
        )
        .unwrap();
    binding.router.poll().await.unwrap();
    assert!(binding.router.has_conversation());
    assert!(
        tokio::time::timeout(Duration::from_millis(300), team_input(&slot))
            .await
            .is_err(),
        "a status_update alone does not wake the lead"
    );
    send(&team, "a real message");
    binding.router.poll().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), team_input(&slot))
        .await
        .expect("a text message wakes the lead");
}

#[tokio::test]
async fn slot_delivery_does_nothing_unbound_and_delivers_the_current_teams_inbox() {
    let dir = tempfile::tempdir().unwrap();
    let first = create(dir.path(), "one");
    let second = create(dir.path(), "two");
    let slot = TeamSlot::new();
    let hook = SlotDelivery::new(slot.clone());
    let waiting = send(&first, "before the lead had a team");
    assert_eq!(hook.before_turn().await, TurnAction::Continue);

    slot.bind(lead_binding(&first)).unwrap();
    let TurnAction::Inject(texts) = hook.before_turn().await else {
        panic!("the bound team's message is injected");
    };
    assert!(texts[0].contains("before the lead had a team"), "{texts:?}");
    hook.injected().await;
    let inbox = first
        .mailbox()
        .read(&name("lead"), &Default::default())
        .unwrap();
    let delivered = inbox.iter().find(|m| m.id == waiting).unwrap();
    assert!(
        delivered.delivered_at.is_some(),
        "marked delivered once injected"
    );
    assert_eq!(
        hook.before_turn().await,
        TurnAction::Continue,
        "delivered once"
    );

    // TeamDelete, then another team between two turns: the hook follows the slot.
    slot.clear();
    send(&first, "to the old team");
    slot.bind(lead_binding(&second)).unwrap();
    send(&second, "to the new team");
    let TurnAction::Inject(texts) = hook.before_turn().await else {
        panic!("the new team's message is injected");
    };
    assert!(texts[0].contains("to the new team"), "{texts:?}");
    assert!(!texts[0].contains("to the old team"), "{texts:?}");
}

#[tokio::test]
async fn the_monitor_reports_messages_of_a_router_bound_without_events() {
    let dir = tempfile::tempdir().unwrap();
    let team = create(dir.path(), "one");
    let slot = TeamSlot::new();
    let (sender, mut events) = team_events();
    let cancel = CancellationToken::new();
    let (mut status, _) = status::spawn_monitor(slot.clone(), sender, cancel.clone());
    let bound = slot.bind(lead_binding(&team)).unwrap();
    // The monitor reports alice's state once bound, then the router's messages.
    let alice = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            status.changed().await.unwrap();
            if let Some(s) = status.borrow().clone() {
                return s;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(alice.line(), "team one · alice busy");
    send(&team, "parser done");
    bound.router.poll().await.unwrap();
    assert_eq!(
        next_message(&mut events).await,
        TeamEvent::Message {
            from: name("alice"),
            kind: "text",
            preview: "parser done".to_string()
        }
    );
    cancel.cancel();
}

/// A teammate that joins and speaks within one monitor interval is reported as joined
/// before its message (`roo-lead -p --verbose` printed bob's `idle` before `joined`).
#[tokio::test]
async fn a_teammate_that_speaks_at_once_is_reported_joined_before_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let team = create(dir.path(), "one");
    let slot = TeamSlot::new();
    let (sender, mut events) = team_events();
    let cancel = CancellationToken::new();
    let (mut status, _) = status::spawn_monitor(slot.clone(), sender, cancel.clone());
    let bound = slot.bind(lead_binding(&team)).unwrap();
    tokio::time::timeout(Duration::from_secs(10), status.wait_for(Option::is_some))
        .await
        .unwrap()
        .unwrap();
    team.add_member(Member::new(name("bob"), team.name()))
        .unwrap();
    team.mailbox()
        .send(&name("bob"), "lead", Outgoing::text("body", "idle at once"))
        .unwrap();
    bound.router.poll().await.unwrap();
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("an event in time")
            .expect("the channel is open");
        let from_bob = matches!(&event, TeamEvent::Message { from, .. } if *from == name("bob"));
        seen.push(event);
        if from_bob {
            break;
        }
    }
    assert!(
        seen.contains(&TeamEvent::Joined { name: name("bob") }),
        "bob's message came before his join: {seen:?}"
    );
    cancel.cancel();
}

#[tokio::test]
async fn the_team_wait_returns_input_settled_or_timed_out() {
    let dir = tempfile::tempdir().unwrap();
    let team = create(dir.path(), "one");
    let slot = TeamSlot::new();
    let (_, mut status) = watch::channel(None);
    let soon = || tokio::time::Instant::now() + Duration::from_millis(300);
    assert_eq!(
        wait_for_team(&slot, &mut status, soon()).await,
        TeamWait::Unbound
    );
    slot.bind(lead_binding(&team)).unwrap();
    assert_eq!(
        wait_for_team(&slot, &mut status, soon()).await,
        TeamWait::TimedOut {
            busy: vec![name("alice")]
        }
    );
    send(&team, "news");
    assert_eq!(
        wait_for_team(&slot, &mut status, soon()).await,
        TeamWait::Input
    );
    // Past the deadline a busy team ends the wait even with a message waiting (a
    // chatty team cannot keep the lead past `--team-timeout`; CI flake of the demo
    // with `--timeout 0`).
    assert_eq!(
        wait_for_team(&slot, &mut status, tokio::time::Instant::now()).await,
        TeamWait::TimedOut {
            busy: vec![name("alice")]
        }
    );
    slot.get().unwrap().router.take_conversation();
    team.set_active("alice", false).unwrap();
    // A settled team's last message still gets its turn past the deadline.
    send(&team, "the last report");
    assert_eq!(
        wait_for_team(&slot, &mut status, tokio::time::Instant::now()).await,
        TeamWait::Input
    );
    slot.get().unwrap().router.take_conversation();
    // What the router has handed out (to the delivery hook) no longer holds the
    // lead: with alice idle, the team is settled.
    assert_eq!(
        wait_for_team(&slot, &mut status, soon()).await,
        TeamWait::Settled
    );
}

/// Issue 31: a roster member no process ever joined kept a headless lead waiting for the
/// whole team timeout.
#[tokio::test]
async fn the_team_wait_does_not_wait_for_a_member_that_never_started() {
    let dir = tempfile::tempdir().unwrap();
    let team = create(dir.path(), "one");
    team.add_member(Member::new(name("bob"), team.name()))
        .unwrap();
    let slot = TeamSlot::new();
    let (_, mut status) = watch::channel(None);
    slot.bind(lead_binding(&team)).unwrap();
    let far = || tokio::time::Instant::now() + Duration::from_secs(3600);
    // Alice works: the wait is for her, never for bob.
    let soon = tokio::time::Instant::now() + Duration::from_millis(300);
    assert_eq!(
        wait_for_team(&slot, &mut status, soon).await,
        TeamWait::TimedOut {
            busy: vec![name("alice")]
        }
    );
    team.set_active("alice", false).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(
        wait_for_team(&slot, &mut status, far()).await,
        TeamWait::Settled
    );
    assert!(started.elapsed() < Duration::from_secs(60), "it waited");
}

fn decider(dir: &Path, mode: PermissionMode) -> PolicyDecider {
    let tools = ToolRegistry::new();
    for tool in roo_agent::tools::builtin_tools() {
        tools.register(tool);
    }
    let policy = roo_agent::permissions::PermissionPolicy::new(
        dir.to_path_buf(),
        mode,
        roo_agent::permissions::RuleSet::new(),
    );
    PolicyDecider {
        policy: Arc::new(std::sync::RwLock::new(policy)),
        tools,
        project_root: dir.to_path_buf(),
    }
}

#[tokio::test]
async fn a_headless_lead_allows_only_what_its_own_policy_runs_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let alice = name("alice");
    let strict = decider(&root, PermissionMode::Default);
    let read = serde_json::json!({"path": "notes.txt"});
    assert!(strict.permission(&alice, "ReadFile", &read, "").await.allow);
    let write = serde_json::json!({"path": "notes.txt", "content": "x"});
    let denied = strict.permission(&alice, "WriteFile", &write, "").await;
    assert!(!denied.allow);
    assert!(
        denied.reason.contains("nobody can approve"),
        "{}",
        denied.reason
    );
    let outside = serde_json::json!({"path": "/etc/passwd"});
    assert!(
        !strict
            .permission(&alice, "ReadFile", &outside, "")
            .await
            .allow
    );
    let unknown = strict.permission(&alice, "Teleport", &read, "").await;
    assert!(
        !unknown.allow && unknown.reason.contains("no Teleport tool"),
        "{}",
        unknown.reason
    );
    assert!(!strict.plan(&alice, "1. edit").await.allow);

    let edits = decider(&root, PermissionMode::AcceptEdits);
    assert!(
        edits
            .permission(&alice, "WriteFile", &write, "")
            .await
            .allow
    );
    assert!(edits.plan(&alice, "1. edit").await.allow);
}

#[tokio::test]
async fn only_the_teams_lead_can_join_it_as_lead() {
    let dir = tempfile::tempdir().unwrap();
    create(dir.path(), "one");
    let home = RooHome::new(dir.path());
    let slot = TeamSlot::new();
    let (events, _rx) = team_events();
    let err = join_as_lead(
        &slot,
        &home,
        name("one"),
        name("alice"),
        events.clone(),
        false,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "team one is led by lead, not by alice; a lead can only lead its own team"
    );
    assert!(slot.get().is_none());
    let bound = join_as_lead(
        &slot,
        &home,
        name("one"),
        name("lead"),
        events.clone(),
        false,
    )
    .unwrap();
    assert!(bound.is_lead());
    assert!(matches!(
        join_as_lead(
            &slot,
            &home,
            name("one"),
            name("lead"),
            events.clone(),
            false
        ),
        Err(JoinError::Bound(_))
    ));
    assert!(matches!(
        join_as_lead(
            &TeamSlot::new(),
            &home,
            name("nosuch"),
            name("lead"),
            events,
            false
        ),
        Err(JoinError::Store(_))
    ));
}
/// A decider that never answers: the person looks away.
struct Silent;

impl RequestDecider for Silent {
    fn permission<'a>(
        &'a self,
        _from: &'a Name,
        _tool: &'a str,
        _input: &'a serde_json::Value,
        _summary: &'a str,
    ) -> BoxFuture<'a, Decision> {
        Box::pin(std::future::pending())
    }

    fn plan<'a>(&'a self, _from: &'a Name, _plan: &'a str) -> BoxFuture<'a, Decision> {
        Box::pin(std::future::pending())
    }
}

/// The lead's binding to `team` with a key, its router reporting to the receiver.
fn keyed_lead_binding(team: &Team) -> (TeamBinding, mpsc::Receiver<TeamEvent>) {
    let (events, rx) = team_events();
    let binding = TeamBinding {
        router: InboxRouter::with_events(team.mailbox(), name("lead"), events),
        presence: None,
        lead_key: Some(Arc::new(LeadKey::load_or_create(team).unwrap())),
        ..lead_binding(team)
    };
    (binding, rx)
}

/// alice asks the lead to run `make`, as request `id`.
fn ask_permission(team: &Team, id: &str) {
    team.mailbox()
        .send(
            &name("alice"),
            "lead",
            Outgoing::new(
                MessageBody::PermissionRequest {
                    request_id: id.to_string(),
                    tool: "Bash".to_string(),
                    input: serde_json::json!({"command": "make"}),
                },
                "",
            ),
        )
        .unwrap();
}

/// The next notice on `rx`, other events skipped.
async fn next_notice(rx: &mut mpsc::Receiver<TeamEvent>) -> String {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
            Ok(Some(TeamEvent::Notice { text })) => return text,
            Ok(Some(_)) => continue,
            other => panic!("no notice: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_question_whose_asker_ended_its_run_is_withdrawn_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let team = create(dir.path(), "w");
    let (binding, mut rx) = keyed_lead_binding(&team);
    ask_permission(&team, "req-1");
    binding.router.poll().await.unwrap();
    let answering = answer_requests(&binding, &Silent);
    tokio::pin!(answering);
    // While alice waits, the question stays open.
    assert!(
        tokio::time::timeout(Duration::from_millis(1200), &mut answering)
            .await
            .is_err()
    );
    team.set_active("alice", false).unwrap();
    let taken = tokio::time::timeout(Duration::from_secs(10), answering)
        .await
        .expect("withdrawn in time");
    assert_eq!(taken, 1);
    let notice = next_notice(&mut rx).await;
    assert_eq!(
        notice,
        "alice's permission question was withdrawn: its run ended without waiting for the answer"
    );
    // Nothing was sent to alice, and the request is acknowledged.
    assert!(
        team.mailbox()
            .read(&name("alice"), &roo_store::ReadFilter::default())
            .unwrap()
            .is_empty()
    );
}
#[tokio::test]
async fn a_lead_taken_over_withdraws_its_question_and_leaves_the_request_to_the_new_lead() {
    let dir = tempfile::tempdir().unwrap();
    let team = create(dir.path(), "w");
    let (binding, mut rx) = keyed_lead_binding(&team);
    ask_permission(&team, "req-1");
    binding.router.poll().await.unwrap();
    let answering = answer_requests(&binding, &Silent);
    tokio::pin!(answering);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut answering)
            .await
            .is_err()
    );
    binding.router.close();
    tokio::time::timeout(Duration::from_secs(10), answering)
        .await
        .expect("withdrawn in time");
    let notice = next_notice(&mut rx).await;
    assert_eq!(
        notice,
        "alice's permission question was withdrawn: this lead no longer leads the team"
    );
    let inbox = team
        .mailbox()
        .read(&name("lead"), &roo_store::ReadFilter::default())
        .unwrap();
    assert!(
        inbox.iter().all(|m| !m.read && m.acknowledged_at.is_none()),
        "{inbox:#?}"
    );
}
#[test]
fn only_the_leads_own_reclaim_notes_count_as_lost_work() {
    let dir = tempfile::tempdir().unwrap();
    let team = create(dir.path(), "w");
    let task = team
        .tasks()
        .create(roo_store::NewTask {
            subject: "Write the parser".to_string(),
            owner: Some(name("alice")),
            ..Default::default()
        })
        .unwrap();
    // A teammate writes what looks like the lead's note (on its own task).
    team.tasks()
        .update(
            &task.id,
            roo_store::TaskPatch {
                note: Some("reclaimed from bob: bob died: its process 1 is gone".to_string()),
                by: Some(name("alice")),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(lost_work(&team, &name("lead")).is_empty());
    // The lead's own declaration counts.
    team.declare_dead("alice", Some(&name("lead")), "its process 1 is gone")
        .unwrap();
    team.tasks()
        .update(
            &task.id,
            roo_store::TaskPatch {
                owner: Some(Some(name("alice"))),
                by: Some(name("lead")),
                force: true,
                ..Default::default()
            },
        )
        .ok();
    let _ = team
        .tasks()
        .release_owner(&name("alice"), Some(&name("lead")), "alice died");
    let lost = lost_work(&team, &name("lead"));
    assert_eq!(lost.len(), 1, "{:#?}", team.tasks().get(&task.id));
}
#[tokio::test]
async fn a_newer_question_from_the_same_teammate_withdraws_the_older() {
    let dir = tempfile::tempdir().unwrap();
    let team = create(dir.path(), "w");
    let (binding, mut rx) = keyed_lead_binding(&team);
    ask_permission(&team, "req-1");
    binding.router.poll().await.unwrap();
    let answering = answer_requests(&binding, &Silent);
    tokio::pin!(answering);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut answering)
            .await
            .is_err()
    );
    ask_permission(&team, "req-2");
    binding.router.poll().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), answering)
        .await
        .expect("withdrawn in time");
    let notice = next_notice(&mut rx).await;
    assert_eq!(
        notice,
        "alice's permission question was withdrawn: it asked a newer question"
    );
    // The newer one waits to be asked.
    let queued = binding.router.take_requests();
    assert_eq!(queued.len(), 1);
    assert!(
        matches!(&queued[0].body, MessageBody::PermissionRequest { request_id, .. } if request_id == "req-2")
    );
}

/// A decider whose first question panics, and which allows the rest.
struct PanicsOnce(std::sync::atomic::AtomicUsize);

impl RequestDecider for PanicsOnce {
    fn permission<'a>(
        &'a self,
        _from: &'a Name,
        _tool: &'a str,
        _input: &'a serde_json::Value,
        _summary: &'a str,
    ) -> BoxFuture<'a, Decision> {
        let calls = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            assert!(calls > 0, "the first question's answering panics");
            Decision {
                allow: true,
                reason: String::new(),
            }
        })
    }

    fn plan<'a>(&'a self, _from: &'a Name, _plan: &'a str) -> BoxFuture<'a, Decision> {
        Box::pin(std::future::pending())
    }
}

/// Issue 31 review, item 6: a panic while answering one teammate's question left it
/// among the askers for ever, so its later questions were never taken up.
#[tokio::test]
async fn a_panic_answering_a_teammates_question_does_not_stop_its_later_questions() {
    let dir = tempfile::tempdir().unwrap();
    let team = create(dir.path(), "w");
    let (binding, _rx) = keyed_lead_binding(&team);
    let slot = TeamSlot::new();
    let bound = slot.bind(binding).unwrap();
    let decider = Arc::new(PanicsOnce(std::sync::atomic::AtomicUsize::new(0)));
    let cancel = CancellationToken::new();
    let answerer = spawn_request_answerer(slot.clone(), decider.clone(), cancel.clone());
    ask_permission(&team, "req-1");
    let calls = || decider.0.load(std::sync::atomic::Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while calls() < 1 {
        assert!(tokio::time::Instant::now() < deadline, "req-1 never asked");
        bound.router.poll().await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ask_permission(&team, "req-2");
    while calls() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "alice's next question was never taken up after the panic"
        );
        bound.router.poll().await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cancel.cancel();
    answerer.await.unwrap();
}
