//! A busy teammate's model answers the lead's shutdown request (approve: it exits;
//! reject: the lead gets the reason and the teammate keeps working; no answer: approved
//! when the run ends), the ShutdownResponse tool cannot answer a request nobody made,
//! TeamDelete reports a real rejection, a rejection of a request sent as a message
//! reaches the lead's conversation, and a status_update does not wake an idle
//! teammate. In-process teammates with the scripted provider, the test playing the lead
//! with `roo-mail` (or the lead's tools) against a temp `ROO_HOME`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use roo_agent::tool::{PermissionTarget, Tool, ToolContext, ToolKind, ToolOutput};
use roo_agent::{AgentHook, TurnAction};
use roo_store::{Message, MessageBody, ReadFilter, Team};
use roo_team::{
    InboxDelivery, InboxRouter, LeadTools, TeamBinding, TeamEvent, TeamSlot, TeamTools,
    TeammateEnd, TeammateExit, lead_tools,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::common::{Recording, TeamHome, name};
use super::teammate::{
    WAIT, alice_is_active, eventually, idle_events, of_type, spawn_alice, within,
};

fn transcript(home: &TeamHome) -> String {
    std::fs::read_to_string(home.path().join("teams/t/transcripts/alice.jsonl")).unwrap()
}

/// The shutdown reminder the model read (from the transcript).
fn reminder_of(transcript: &str) -> &str {
    let start = transcript
        .find("Shutdown request:")
        .expect("no shutdown reminder");
    let len = transcript[start..].find("</system-reminder>").unwrap();
    &transcript[start..start + len]
}

fn inbox(team: &Team, member: &str) -> Vec<Message> {
    team.mailbox()
        .read(&name(member), &ReadFilter::default())
        .unwrap()
}

/// The lead's shutdown responses: (approve, reason, request id).
fn responses(team: &Team) -> Vec<(bool, String, Option<String>)> {
    of_type(team, "shutdown_response")
        .into_iter()
        .map(|m| match m.body {
            MessageBody::ShutdownResponse {
                approve,
                reason,
                request_id,
            } => (approve, reason, request_id),
            _ => unreachable!(),
        })
        .collect()
}

const APPROVES: &str = r#"
agents:
  alice:
    - when: {last_user_contains: "Shutdown request"}
      text: "Step one is committed; agreed."
      tool_calls:
        - {name: ShutdownResponse, input: {approve: true, reason: "step one is committed"}}
    - text: "Step one."
      tool_calls:
        - {name: Step, input: {api: one, mail: [--as, lead, --to, alice, --type, shutdown_request, --request-id, r-busy, "wrap up, the release is cut"]}}
    - text: "Step two."
      tool_calls:
        - {name: Step, input: {api: two}}
    - text: "Done."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_teammate_asked_to_shut_down_approves_with_the_tool_and_exits() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (handle, log, _events) = spawn_alice(&home, cwd.path(), APPROVES, "go", |_| {}).await;
    assert_eq!(
        within(handle.wait()).await,
        TeammateEnd::Exited(TeammateExit::ShutDown)
    );
    // The run stopped before step two: her model's answer, with her reason.
    assert_eq!(*log.lock().unwrap(), vec!["one"]);
    assert_eq!(
        responses(&home.team),
        vec![(
            true,
            "step one is committed".to_string(),
            Some("r-busy".to_string())
        )]
    );
    assert!(!alice_is_active(&home.team));
    // The model read the lead's text, never the secret request id.
    let transcript = transcript(&home);
    assert!(
        transcript.contains("Shutdown request: the lead lead asks you to shut down")
            && transcript.contains("wrap up, the release is cut"),
        "{transcript}"
    );
    assert!(!reminder_of(&transcript).contains("r-busy"), "{transcript}");
    assert!(
        inbox(&home.team, "alice")
            .iter()
            .all(|m| m.acknowledged_at.is_some())
    );
}

const REJECTS: &str = r#"
agents:
  alice:
    - when: {last_user_contains: "Shutdown request"}
      text: "Not yet."
      tool_calls:
        - {name: ShutdownResponse, input: {approve: false, reason: "halfway through the parser; step two left"}}
    - text: "Step one."
      tool_calls:
        - {name: Step, input: {api: one, mail: [--as, lead, --to, alice, --type, shutdown_request, --request-id, r-busy]}}
    - text: "Step two."
      tool_calls:
        - {name: Step, input: {api: two}}
    - text: "Parser done."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_teammate_rejects_a_shutdown_request_tells_the_lead_why_and_keeps_working() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (handle, log, mut events) =
        spawn_alice(&home, cwd.path(), REJECTS, "write the parser", |_| {}).await;
    idle_events(&mut events, 1).await;
    // She finished her work, and the lead got one answer: no, with the reason.
    assert_eq!(*log.lock().unwrap(), vec!["one", "two"]);
    assert!(handle.ended().is_none());
    assert_eq!(
        responses(&home.team),
        vec![(
            false,
            "halfway through the parser; step two left".to_string(),
            Some("r-busy".to_string())
        )]
    );
    assert!(transcript(&home).contains("Parser done."));
    assert!(
        inbox(&home.team, "alice")
            .iter()
            .all(|m| m.acknowledged_at.is_some())
    );

    // Idle now, nothing to finish: the lead's next request is approved at once, without
    // asking her model.
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
    let answers = responses(&home.team);
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(answers[1].0 && answers[1].2.as_deref() == Some("r-idle"));
    assert!(!transcript(&home).contains("r-idle"));
}

const IGNORES: &str = r#"
agents:
  alice:
    - text: "Step one."
      tool_calls:
        - {name: Step, input: {api: one, mail: [--as, lead, --to, alice, --type, shutdown_request, --request-id, r-late]}}
    - text: "Step two first."
      tool_calls:
        - {name: Step, input: {api: two}}
    - text: "Done."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_request_the_model_leaves_unanswered_is_approved_when_its_run_ends() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (handle, log, _events) = spawn_alice(&home, cwd.path(), IGNORES, "go", |_| {}).await;
    assert_eq!(
        within(handle.wait()).await,
        TeammateEnd::Exited(TeammateExit::ShutDown)
    );
    // Her run went on to its end, then she was idle and the request was approved.
    assert_eq!(*log.lock().unwrap(), vec!["one", "two"]);
    let answers = responses(&home.team);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(answers[0].0, "{answers:?}");
    assert!(answers[0].1.contains("run ended"), "{answers:?}");
    assert_eq!(answers[0].2.as_deref(), Some("r-late"));
    assert!(!alice_is_active(&home.team));
}

const FORGES: &str = r#"
agents:
  alice:
    - text: "Step one."
      tool_calls:
        - {name: Step, input: {api: one, mail: [--as, bob, --to, alice, --type, shutdown_request, --request-id, from-bob]}}
    - text: "I'll answer that."
      tool_calls:
        - {name: ShutdownResponse, input: {approve: true, reason: "bob asked"}}
    - text: "Step two."
      tool_calls:
        - {name: Step, input: {api: two}}
    - text: "Done."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_response_without_an_open_request_is_an_error_and_sends_nothing() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (handle, log, mut events) = spawn_alice(&home, cwd.path(), FORGES, "go", |_| {}).await;
    idle_events(&mut events, 1).await;
    // bob's request is not the lead's: acknowledged and ignored, nothing to answer. The
    // tool said so, and she kept working.
    assert_eq!(*log.lock().unwrap(), vec!["one", "two"]);
    assert!(handle.ended().is_none());
    let transcript = transcript(&home);
    // Without a request of the lead the tool is not even offered (it comes with the
    // lead's request): the call is an error result.
    assert!(
        transcript.contains("The schema of ShutdownResponse had not been loaded"),
        "{transcript}"
    );
    assert!(!transcript.contains("Shutdown request: the lead"));
    for member in ["lead", "bob"] {
        let sent: Vec<Message> = inbox(&home.team, member)
            .into_iter()
            .filter(|m| matches!(m.body, MessageBody::ShutdownResponse { .. }))
            .collect();
        assert!(sent.is_empty(), "{member}: {sent:?}");
    }
    assert!(
        inbox(&home.team, "alice")
            .iter()
            .all(|m| m.acknowledged_at.is_some())
    );
}

/// Holds the run until a `shutdown_request` is in alice's inbox (read from disk, as
/// another process would), so the request reaches her while she is busy.
struct HoldUntilAsked {
    team: Team,
    entered: Arc<std::sync::atomic::AtomicBool>,
}

impl Tool for HoldUntilAsked {
    fn name(&self) -> &str {
        "Hold"
    }
    fn description(&self) -> String {
        "works until the lead asks".to_string()
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
        Box::pin(async move {
            self.entered
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let deadline = Instant::now() + WAIT;
            while !inbox(&self.team, "alice")
                .iter()
                .any(|m| matches!(m.body, MessageBody::ShutdownRequest { .. }))
            {
                assert!(Instant::now() < deadline, "no shutdown request came");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            ToolOutput::ok("held")
        })
    }
}

const HOLDS: &str = r#"
agents:
  alice:
    - when: {last_user_contains: "Shutdown request"}
      text: "Still merging."
      tool_calls:
        - {name: ShutdownResponse, input: {approve: false, reason: "still merging the parser branch"}}
    - text: "Working."
      tool_calls:
        - {name: Hold, input: {}}
    - text: "Merged."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_delete_reports_a_teammates_rejection_with_its_reason() {
    let home = TeamHome::new();
    home.team.remove_member("bob").unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let entered = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hold = Arc::new(HoldUntilAsked {
        team: home.team.clone(),
        entered: entered.clone(),
    });
    let (handle, _log, mut events) =
        spawn_alice(&home, cwd.path(), HOLDS, "merge the parser", |spec| {
            spec.settings.tools.extra.push(hold);
        })
        .await;
    eventually("alice to be working", || {
        entered
            .load(std::sync::atomic::Ordering::SeqCst)
            .then_some(())
    })
    .await;
    // The race TeamDelete can meet: it reads alice idle (her roster entry says so here),
    // and her request arrives while she is in fact working.
    home.team.set_active("alice", false).unwrap();
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
    let mut config = LeadTools::new(roo_store::RooHome::new(home.path()), name("lead"));
    config.worktrees = None;
    config.shutdown_wait = WAIT;
    let tools = lead_tools(&TeamTools::new(slot.clone()), config);
    let delete = tools.iter().find(|t| t.name() == "TeamDelete").unwrap();
    let ctx = ToolContext::new(cwd.path().to_path_buf(), cwd.path().to_path_buf());

    let out = delete.call(json!({}), &ctx).await;
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content
            .contains("alice refused to shut down: still merging the parser branch"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("the team was left in place"),
        "{}",
        out.content
    );
    assert!(home.team.config_path().is_file());
    // She goes on and finishes; then, idle, she approves the next TeamDelete at once.
    idle_events(&mut events, 1).await;
    assert!(transcript(&home).contains("Merged."));
    assert!(handle.ended().is_none());
    let out = delete.call(json!({}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains("deleted team t; shut down: alice"),
        "{}",
        out.content
    );
    assert_eq!(
        within(handle.wait()).await,
        TeammateEnd::Exited(TeammateExit::ShutDown)
    );
}

const FYI: &str = r#"
agents:
  alice:
    - when: {last_user_contains: "review module 2"}
      text: "Reviewing module 2."
    - text: "Nothing to do yet."
    - text: "Woken by news."
"#;

/// Waits for alice's router to report a message of `kind` in her inbox.
async fn message_seen(events: &mut mpsc::Receiver<TeamEvent>, kind: &str) {
    tokio::time::timeout(WAIT, async {
        loop {
            if let Some(TeamEvent::Message { kind: k, .. }) = events.recv().await
                && k == kind
            {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("alice's router never saw a {kind}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_teammate_is_not_woken_by_a_status_update_and_reads_it_with_the_next_message() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let mut recording = None;
    let (handle, _log, mut events) = spawn_alice(&home, cwd.path(), FYI, "wait", |spec| {
        let provider = Recording::new(&home.path().join("script.yaml"));
        spec.settings.provider = Some(provider.clone());
        recording = Some(provider);
        // Her router reports what it reads, so the test knows she has seen the news.
        spec.binding.router = InboxRouter::with_events(
            home.team.mailbox(),
            name("alice"),
            spec.events.clone().unwrap(),
        );
    })
    .await;
    let provider = recording.unwrap();
    idle_events(&mut events, 1).await;
    assert_eq!(provider.count(), 1);

    // The lead broadcasts progress news: FYI, it must not start a run.
    home.send("lead", "*", "status_update", &["bob finished module 1"]);
    message_seen(&mut events, "status_update").await;
    // Nor does another member's idle notification, should one reach her.
    home.send("bob", "alice", "idle_notification", &["bob is idle"]);
    message_seen(&mut events, "idle_notification").await;
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        assert_eq!(provider.count(), 1, "an FYI message woke alice");
        assert!(!alice_is_active(&home.team));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        inbox(&home.team, "alice")
            .iter()
            .all(|m| m.delivered_at.is_none())
    );

    // A real message wakes her; the news comes with it, in the same request.
    home.mail(&[
        "send",
        "--as",
        "lead",
        "--to",
        "alice",
        "--summary",
        "module 2",
        "please review module 2",
    ]);
    eventually("alice's next model request", || {
        (provider.count() >= 2).then_some(())
    })
    .await;
    let request = provider.requests.lock().unwrap()[1].clone();
    assert!(
        request.contains("type=\"status_update\"")
            && request.contains("bob finished module 1")
            && request.contains("bob is idle")
            && request.contains("please review module 2"),
        "{request}"
    );
    assert!(request.contains("status_update is FYI only"), "{request}");
    idle_events(&mut events, 1).await;
    assert_eq!(provider.count(), 2);
    let delivered = inbox(&home.team, "alice");
    assert_eq!(delivered.len(), 3, "{delivered:?}");
    assert!(delivered.iter().all(|m| m.delivered_at.is_some()));
    assert!(handle.ended().is_none());
}

const REJECTS_A_MESSAGE: &str = r#"
agents:
  alice:
    - when: {last_user_contains: "Shutdown request"}
      text: "Not yet."
      tool_calls:
        - {name: ShutdownResponse, input: {approve: false, reason: "the migration is half applied"}}
    - text: "Migrating."
      tool_calls:
        - {name: Step, input: {api: one, mail: [--as, lead, --to, alice, --type, shutdown_request, "time to stop"]}}
    - text: "Migration applied."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_of_the_leads_message_request_reaches_the_leads_conversation() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (handle, _log, mut events) =
        spawn_alice(&home, cwd.path(), REJECTS_A_MESSAGE, "migrate", |_| {}).await;
    idle_events(&mut events, 1).await;
    assert!(handle.ended().is_none());
    // A request sent like SendMessage's (no request id): the answer is no waiter's, so
    // the lead's delivery hook puts it before the lead's model, reason included.
    let delivery = InboxDelivery::new(InboxRouter::new(home.team.mailbox(), name("lead")));
    let TurnAction::Inject(texts) = delivery.before_turn().await else {
        panic!("nothing for the lead's next turn");
    };
    let text = texts.join("\n");
    assert!(
        text.contains("from=\"alice\" type=\"shutdown_response\"")
            && text.contains("approve=\"false\"")
            && text.contains("the migration is half applied"),
        "{text}"
    );
}
