//! The team tools: claims, assignments, messages, TeamCreate and TeamDelete, lead-only
//! rules and input validation, called through a real `ToolRegistry` or a scripted agent
//! built with `build_agent`, against a temp `ROO_HOME`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roo_agent::event::{EventSink, RunOutcome};
use roo_agent::permissions::PermissionMode;
use roo_agent::tool::{Tool, ToolContext, ToolKind, ToolOutput, ToolRegistry};
use roo_agent::{AgentHook, TurnAction};
use roo_store::{Member, MessageBody, ReadFilter, RooHome, TaskStatus, Team};
use roo_team::{
    AgentSettings, Identity, InboxRouter, LeadTools, OnSent, SessionPlan, TeamBinding, TeamSlot,
    TeamTools, ToolSet, build_agent, lead_tools, teammate_tools,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::common::{TeamHome, name};

/// A slot bound to team `t` as `me`.
fn slot_of(team: &Team, me: &str) -> TeamSlot {
    TeamSlot::bound(TeamBinding {
        team: team.clone(),
        me: name(me),
        lead: name("lead"),
        router: InboxRouter::new(team.mailbox(), name(me)),
        presence: None,
        lead_key: (me == "lead").then(|| {
            std::sync::Arc::new(roo_team::authority::LeadKey::load_or_create(team).unwrap())
        }),
    })
}

/// A registry of the tools, and a recorder of `on_sent` calls.
fn registry(tools: Vec<Arc<dyn Tool>>) -> ToolRegistry {
    let registry = ToolRegistry::new();
    for tool in tools {
        registry.register(tool);
    }
    registry
}

fn recorder() -> (OnSent, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let hook: OnSent = Arc::new(move |to| log.lock().unwrap().push(to.to_string()));
    (hook, seen)
}

fn lead_config(home: &Path) -> LeadTools {
    let mut lead = LeadTools::new(RooHome::new(home), name("lead"));
    lead.shutdown_wait = Duration::from_secs(10);
    lead.worktrees = None;
    lead
}

async fn call(registry: &ToolRegistry, cwd: &Path, tool: &str, input: Value) -> ToolOutput {
    let ctx = ToolContext::new(cwd.to_path_buf(), cwd.to_path_buf());
    registry
        .get(tool)
        .unwrap_or_else(|| panic!("no tool {tool}"))
        .call(input, &ctx)
        .await
}

async fn ok(registry: &ToolRegistry, cwd: &Path, tool: &str, input: Value) -> String {
    let out = call(registry, cwd, tool, input.clone()).await;
    assert!(!out.is_error, "{tool} {input} failed: {}", out.content);
    out.content
}

async fn err(registry: &ToolRegistry, cwd: &Path, tool: &str, input: Value) -> String {
    let out = call(registry, cwd, tool, input.clone()).await;
    assert!(out.is_error, "{tool} {input} succeeded: {}", out.content);
    out.content
}

fn inbox(team: &Team, member: &str) -> Vec<roo_store::Message> {
    team.mailbox()
        .read(&name(member), &ReadFilter::default())
        .unwrap()
}

/// Settings of member `me` of team `t` running `script` with only the team tools.
fn member_settings(home: &TeamHome, cwd: &Path, me: &str, script: &Path) -> AgentSettings {
    let mut settings = AgentSettings::new(
        Identity::teammate(name(me), name("t"), name("lead")),
        home.path().to_path_buf(),
    );
    settings.cwd = Some(cwd.to_path_buf());
    settings.llm.script = Some(script.to_path_buf());
    settings.session = SessionPlan::member(home.path(), &name("t"), &name(me));
    settings.permission_mode = Some(PermissionMode::DontAsk);
    settings.tools = ToolSet {
        work: false,
        plan_mode: false,
        extra: teammate_tools(&TeamTools::new(slot_of(&home.team, me))),
        remove: Vec::new(),
        ..ToolSet::default()
    };
    settings.max_turns = 5;
    settings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_race_between_two_agents_is_refused_for_the_loser() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    home.team
        .tasks()
        .create(roo_store::NewTask {
            subject: "write the parser".into(),
            ..Default::default()
        })
        .unwrap();
    let script = home.path().join("script.yaml");
    std::fs::write(
        &script,
        r#"
agents:
  alice:
    - tool_calls: [{name: TaskUpdate, input: {id: "1", owner: alice}}]
    - text: done
  bob:
    - tool_calls: [{name: TaskUpdate, input: {id: 1, owner: bob}}]
    - text: done
"#,
    )
    .unwrap();
    let mut alice = build_agent(member_settings(&home, cwd.path(), "alice", &script))
        .await
        .unwrap();
    let mut bob = build_agent(member_settings(&home, cwd.path(), "bob", &script))
        .await
        .unwrap();
    let (sink, _events) = EventSink::channel();
    let (a, b) = tokio::join!(
        alice
            .agent
            .run("claim task 1", &sink, CancellationToken::new()),
        bob.agent
            .run("claim task 1", &sink, CancellationToken::new()),
    );
    assert_eq!(a.outcome, RunOutcome::Completed);
    assert_eq!(b.outcome, RunOutcome::Completed);
    let task = home
        .team
        .tasks()
        .get(&roo_store::TaskId::parse("1").unwrap())
        .unwrap();
    assert_eq!(task.status, TaskStatus::InProgress);
    let winner = task.owner.clone().unwrap();
    let (won, lost) = if winner == "alice" {
        (&alice, &bob)
    } else {
        (&bob, &alice)
    };
    let won = serde_json::to_string(won.agent.messages()).unwrap();
    let lost = serde_json::to_string(lost.agent.messages()).unwrap();
    assert!(won.contains("claimed it"), "{won}");
    assert!(
        lost.contains(&format!("already owned by {winner}")),
        "the loser was not refused: {lost}"
    );
    assert!(!lost.contains("claimed it"), "{lost}");
}

#[tokio::test]
async fn setting_another_member_as_owner_sends_a_task_assignment() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (hook, sent) = recorder();
    let lead = registry(lead_tools(
        &TeamTools::new(slot_of(&home.team, "lead")).with_on_sent(hook),
        lead_config(home.path()),
    ));
    let created = ok(
        &lead,
        cwd.path(),
        "TaskCreate",
        json!({"subject": "write the parser", "paths": ["src/parse.rs"]}),
    )
    .await;
    assert!(created.contains("created task #1"), "{created}");
    let out = ok(
        &lead,
        cwd.path(),
        "TaskUpdate",
        json!({"id": "1", "owner": "alice"}),
    )
    .await;
    assert!(out.contains("assigned it to alice"), "{out}");
    let messages = inbox(&home.team, "alice");
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(matches!(&messages[0].body, MessageBody::TaskAssignment { task_id } if task_id == "1"));
    assert_eq!(messages[0].from, name("lead"));
    assert_eq!(*sent.lock().unwrap(), vec!["alice"]);
    // Pre-assigned, still pending: only alice may claim it.
    let task = home
        .team
        .tasks()
        .get(&roo_store::TaskId::parse("1").unwrap())
        .unwrap();
    assert_eq!(
        (task.owner.as_ref().unwrap().as_str(), task.status),
        ("alice", TaskStatus::Pending)
    );
    let bob = registry(teammate_tools(&TeamTools::new(slot_of(&home.team, "bob"))));
    let refused = err(
        &bob,
        cwd.path(),
        "TaskUpdate",
        json!({"id": "1", "owner": "bob"}),
    )
    .await;
    assert!(refused.contains("already owned by alice"), "{refused}");
    // TaskCreate with an owner assigns at once.
    let out = ok(
        &lead,
        cwd.path(),
        "TaskCreate",
        json!({"subject": "write the docs", "owner": "bob"}),
    )
    .await;
    assert!(out.contains("assigned it to bob"), "{out}");
    assert!(
        inbox(&home.team, "bob")
            .iter()
            .any(|m| matches!(&m.body, MessageBody::TaskAssignment { task_id } if task_id == "2"))
    );
    assert_eq!(*sent.lock().unwrap(), vec!["alice", "bob"]);
}

#[tokio::test]
async fn another_members_claim_can_be_completed_by_the_lead_only() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let alice = registry(teammate_tools(&TeamTools::new(slot_of(
        &home.team, "alice",
    ))));
    let bob = registry(teammate_tools(&TeamTools::new(slot_of(&home.team, "bob"))));
    let lead = registry(teammate_tools(&TeamTools::new(slot_of(&home.team, "lead"))));
    ok(&alice, cwd.path(), "TaskCreate", json!({"subject": "a"})).await;
    // Starting an unowned task is a claim.
    let out = ok(
        &alice,
        cwd.path(),
        "TaskUpdate",
        json!({"id": "1", "status": "in_progress"}),
    )
    .await;
    assert!(
        out.contains("claimed it") && !out.contains("updated"),
        "{out}"
    );
    let refused = err(
        &bob,
        cwd.path(),
        "TaskUpdate",
        json!({"id": "1", "status": "completed"}),
    )
    .await;
    assert!(refused.contains("alice"), "{refused}");
    let refused = err(
        &bob,
        cwd.path(),
        "TaskUpdate",
        json!({"id": "1", "owner": ""}),
    )
    .await;
    assert!(refused.contains("alice"), "{refused}");
    let out = ok(
        &lead,
        cwd.path(),
        "TaskUpdate",
        json!({"id": "1", "status": "completed"}),
    )
    .await;
    assert!(out.contains("[completed] alice"), "{out}");
    // The list shows status, owner and what is ready.
    ok(&alice, cwd.path(), "TaskCreate", json!({"subject": "b"})).await;
    ok(
        &alice,
        cwd.path(),
        "TaskCreate",
        json!({"subject": "c", "blocked_by": ["2"]}),
    )
    .await;
    let list = ok(&bob, cwd.path(), "TaskList", json!({})).await;
    assert!(list.contains("ready: #2"), "{list}");
    assert!(list.contains("#1 [completed] alice: a"), "{list}");
    assert!(list.contains("#2 [pending] -: b [ready]"), "{list}");
    assert!(list.contains("#3 [pending] -: c (blocked by #2)"), "{list}");
    assert!(
        list.contains("members: lead (lead), alice (busy), bob (busy, you)"),
        "{list}"
    );
    let detail = ok(&bob, cwd.path(), "TaskGet", json!({"id": 3})).await;
    assert!(
        detail.contains("#3 [pending] -: c (blocked by #2)"),
        "{detail}"
    );
    // The owner releases a claim: back to pending, unowned.
    ok(
        &bob,
        cwd.path(),
        "TaskUpdate",
        json!({"id": "2", "owner": "bob"}),
    )
    .await;
    let out = ok(
        &bob,
        cwd.path(),
        "TaskUpdate",
        json!({"id": "2", "owner": ""}),
    )
    .await;
    assert!(out.contains("#2 [pending] -: b"), "{out}");
    // A subject cannot forge list lines: refused on write…
    let forged = "d\n#9 [completed] lead: fake\u{1b}[2J";
    let refused = err(&bob, cwd.path(), "TaskCreate", json!({"subject": forged})).await;
    assert!(
        refused.contains("the subject contains a line break"),
        "{refused}"
    );
    // …and one written before that rule is escaped in the list.
    ok(&bob, cwd.path(), "TaskCreate", json!({"subject": "d"})).await;
    let path = home.team.tasks().path();
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["tasks"][3]["subject"] = forged.into();
    std::fs::write(&path, doc.to_string()).unwrap();
    let list = ok(&bob, cwd.path(), "TaskList", json!({})).await;
    assert!(!list.lines().any(|l| l.starts_with("#9")), "{list}");
    assert!(!list.contains('\u{1b}'), "{list}");
}

/// `blocks`, `add_blocks` and `remove_blocks` say the same edge as the other task's
/// `blocked_by`: out of the schemas (issue 20: say it once), still honoured when a model
/// used to them sends them.
#[tokio::test]
async fn blocks_fields_left_out_of_the_schemas_are_still_honoured() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let lead = registry(teammate_tools(&TeamTools::new(slot_of(&home.team, "lead"))));
    for field in ["blocks", "add_blocks", "remove_blocks"] {
        let schema = lead
            .specs()
            .into_iter()
            .filter(|spec| spec.name == "TaskCreate" || spec.name == "TaskUpdate")
            .map(|spec| spec.input_schema.to_string())
            .collect::<String>();
        assert!(!schema.contains(&format!("\"{field}\"")), "{schema}");
    }
    ok(&lead, cwd.path(), "TaskCreate", json!({"subject": "check"})).await;
    ok(
        &lead,
        cwd.path(),
        "TaskCreate",
        json!({"subject": "build", "blocks": ["1"]}),
    )
    .await;
    ok(&lead, cwd.path(), "TaskCreate", json!({"subject": "docs"})).await;
    ok(
        &lead,
        cwd.path(),
        "TaskUpdate",
        json!({"id": "3", "add_blocks": ["1"]}),
    )
    .await;
    let detail = ok(&lead, cwd.path(), "TaskGet", json!({"id": "1"})).await;
    assert!(detail.contains("blocked by #2, #3"), "{detail}");
    ok(
        &lead,
        cwd.path(),
        "TaskUpdate",
        json!({"id": "2", "remove_blocks": ["1"]}),
    )
    .await;
    let detail = ok(&lead, cwd.path(), "TaskGet", json!({"id": "1"})).await;
    assert!(detail.contains("blocked by #3)"), "{detail}");
}

#[tokio::test]
async fn send_message_to_an_unknown_name_is_an_error_and_creates_no_file() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (hook, sent) = recorder();
    let alice = registry(teammate_tools(
        &TeamTools::new(slot_of(&home.team, "alice")).with_on_sent(hook),
    ));
    let out = err(
        &alice,
        cwd.path(),
        "SendMessage",
        json!({"to": "carol", "message": "hi", "summary": "hello"}),
    )
    .await;
    assert!(
        out.contains("\"carol\"") && out.contains("no member"),
        "{out}"
    );
    let out = err(
        &alice,
        cwd.path(),
        "SendMessage",
        json!({"to": "../lead", "message": "hi", "summary": "hello"}),
    )
    .await;
    assert!(out.contains("member name"), "{out}");
    let inboxes = home.path().join("teams/t/inboxes");
    let files: Vec<String> = std::fs::read_dir(&inboxes)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(files.iter().all(|f| !f.contains("carol")), "{files:?}");
    assert!(!home.path().join("teams/t/lead.json").exists());
    assert!(sent.lock().unwrap().is_empty());
    // A real name works and calls the hook.
    let out = ok(
        &alice,
        cwd.path(),
        "SendMessage",
        json!({"to": "bob", "message": "the schema changed", "summary": "schema changed"}),
    )
    .await;
    assert_eq!(out, "sent to bob");
    assert_eq!(inbox(&home.team, "bob")[0].text, "the schema changed");
    assert_eq!(*sent.lock().unwrap(), vec!["bob"]);
}

#[tokio::test]
async fn a_broadcast_reaches_every_member_but_the_sender() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (hook, sent) = recorder();
    let lead = registry(teammate_tools(
        &TeamTools::new(slot_of(&home.team, "lead")).with_on_sent(hook),
    ));
    let out = ok(&lead, cwd.path(), "SendMessage", json!({"to": "*", "message": "stop editing src/", "summary": "hands off src", "type": "status_update"})).await;
    assert!(
        out.contains("broadcast to 2 member(s): alice, bob"),
        "{out}"
    );
    for member in ["alice", "bob"] {
        let messages = inbox(&home.team, member);
        assert_eq!(messages.len(), 1, "{member}: {messages:?}");
        assert_eq!(messages[0].body, MessageBody::StatusUpdate);
        assert_eq!(messages[0].to, "*");
    }
    assert!(inbox(&home.team, "lead").is_empty());
    let mut seen = sent.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, vec!["alice", "bob"]);
}

/// Waits until `router` stopped (it refuses new requests).
async fn router_stopped(router: &InboxRouter) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while router
            .expect(roo_team::ResponseKind::Shutdown, "probe", &name("x"))
            .is_ok()
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
}

/// Ends the lead's lifetime and waits for the router of its team to stop (its blocking
/// inbox wait would otherwise hold the test runtime's shutdown up).
async fn stop_router(runtime: &CancellationToken, slot: &TeamSlot) {
    runtime.cancel();
    router_stopped(&slot.get().unwrap().router).await;
}

/// What an idle teammate's runtime does: waits on its inbox and stops when the lead
/// asks it to shut down (approving the request). Returns when it stopped.
fn idle_teammate(team: &Team, me: &str) -> tokio::task::JoinHandle<()> {
    let router = InboxRouter::new(team.mailbox(), name(me));
    let (mailbox, me) = (team.mailbox(), name(me));
    let cancel = CancellationToken::new();
    let run = {
        let (router, cancel) = (router.clone(), cancel.clone());
        tokio::spawn(async move { router.run(cancel).await })
    };
    tokio::spawn(async move {
        loop {
            router.input().await;
            router.take_conversation();
            let requests = router.take_requests();
            let mut asked = false;
            for request in &requests {
                if let MessageBody::ShutdownRequest { request_id } = &request.body
                    && request.from == name("lead")
                {
                    let answer = roo_store::Outgoing::new(
                        MessageBody::ShutdownResponse {
                            approve: true,
                            reason: "idle".to_string(),
                            request_id: request_id.clone(),
                        },
                        "",
                    );
                    mailbox.send(&me, "lead", answer).unwrap();
                    asked = true;
                }
            }
            // The lead may have deleted the team by now.
            let _ = router
                .handled(requests.into_iter().map(|m| m.id).collect())
                .await;
            if asked {
                break;
            }
        }
        cancel.cancel();
        let _ = run.await;
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_create_then_team_delete_refuses_a_busy_member_and_shuts_down_idle_ones() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let slot = TeamSlot::new();
    let config = lead_config(dir.path());
    let runtime = config.runtime.clone();
    let lead = registry(lead_tools(&TeamTools::new(slot.clone()), config));
    // Before TeamCreate the other tools say there is no team.
    let out = err(&lead, cwd.path(), "TaskList", json!({})).await;
    assert!(out.contains("TeamCreate"), "{out}");
    let out = ok(
        &lead,
        cwd.path(),
        "TeamCreate",
        json!({"team_name": "t2", "description": "demo"}),
    )
    .await;
    assert!(out.contains("created team t2"), "{out}");
    let binding = slot.get().unwrap();
    assert!(binding.is_lead());
    let team = binding.team.clone();
    let config = team.config().unwrap();
    assert_eq!(config.lead().unwrap().pid, Some(std::process::id()));
    let again = err(&lead, cwd.path(), "TeamCreate", json!({"team_name": "t3"})).await;
    assert!(again.contains("already in team t2"), "{again}");
    assert!(!dir.path().join("teams/t3").exists());

    let t2 = name("t2");
    let mut alice = Member::new(name("alice"), &t2);
    alice.pid = Some(std::process::id());
    alice.is_active = Some(true);
    let mut bob = Member::new(name("bob"), &t2);
    bob.pid = Some(std::process::id());
    bob.is_active = Some(false);
    team.add_member(alice).unwrap();
    team.add_member(bob).unwrap();

    let refused = err(&lead, cwd.path(), "TeamDelete", json!({})).await;
    assert!(refused.contains("busy (alice)"), "{refused}");
    assert!(team.config_path().is_file());
    assert!(
        inbox(&team, "bob").is_empty(),
        "nobody is asked to stop while one is busy"
    );

    team.set_active("alice", false).unwrap();
    let stopped = [idle_teammate(&team, "alice"), idle_teammate(&team, "bob")];
    let out = ok(&lead, cwd.path(), "TeamDelete", json!({})).await;
    assert!(
        out.contains("deleted team t2; shut down: alice, bob"),
        "{out}"
    );
    for teammate in stopped {
        tokio::time::timeout(Duration::from_secs(10), teammate)
            .await
            .unwrap()
            .unwrap();
    }
    assert!(!dir.path().join("teams/t2").exists());
    assert!(!dir.path().join("tasks/t2").exists());
    assert!(slot.get().is_none());
    // The router TeamCreate started has stopped: it takes no more requests.
    router_stopped(&binding.router).await;
    // The lead may found a new team now; its router stops with the lead's lifetime.
    ok(&lead, cwd.path(), "TeamCreate", json!({"team_name": "t3"})).await;
    stop_router(&runtime, &slot).await;
}

/// Issue 31: a roster member no process ever joined (`team add`) counted as busy, so
/// TeamDelete refused; it neither holds the delete up nor is asked to shut down.
#[tokio::test]
async fn team_delete_neither_waits_for_nor_asks_a_member_that_never_started() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let slot = TeamSlot::new();
    let config = lead_config(dir.path());
    let runtime = config.runtime.clone();
    let lead = registry(lead_tools(&TeamTools::new(slot.clone()), config));
    ok(&lead, cwd.path(), "TeamCreate", json!({"team_name": "t2"})).await;
    let binding = slot.get().unwrap();
    binding
        .team
        .add_member(Member::new(name("carol"), &name("t2")))
        .unwrap();
    let out = ok(&lead, cwd.path(), "TeamDelete", json!({})).await;
    assert!(
        out.starts_with("deleted team t2") && !out.contains("shut down"),
        "{out}"
    );
    assert!(!dir.path().join("teams/t2").exists());
    // The router TeamCreate started stopped with the team.
    router_stopped(&binding.router).await;
    runtime.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_delete_keeps_the_team_when_a_member_does_not_answer() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let slot = TeamSlot::new();
    let mut config = lead_config(dir.path());
    config.shutdown_wait = Duration::from_millis(300);
    let runtime = config.runtime.clone();
    let lead = registry(lead_tools(&TeamTools::new(slot.clone()), config));
    ok(&lead, cwd.path(), "TeamCreate", json!({"team_name": "t2"})).await;
    let team = slot.get().unwrap().team.clone();
    // bob never answers; carol, asked after him, answers at once.
    for member in ["bob", "carol"] {
        let mut entry = Member::new(name(member), &name("t2"));
        entry.pid = Some(std::process::id());
        entry.is_active = Some(false);
        team.add_member(entry).unwrap();
    }
    let carol = idle_teammate(&team, "carol");
    let out = err(&lead, cwd.path(), "TeamDelete", json!({})).await;
    assert!(out.contains("bob did not answer"), "{out}");
    assert!(
        !out.contains("carol did not answer") && out.contains("(shut down: carol)"),
        "an answer that came while bob was awaited was lost: {out}"
    );
    tokio::time::timeout(Duration::from_secs(10), carol)
        .await
        .unwrap()
        .unwrap();
    assert!(team.config_path().is_file());
    assert!(slot.get().is_some());
    assert!(matches!(
        inbox(&team, "bob")[0].body,
        MessageBody::ShutdownRequest {
            request_id: Some(_)
        }
    ));
    stop_router(&runtime, &slot).await;
}

#[tokio::test]
async fn a_teammate_cannot_create_or_delete_a_team_or_ask_for_a_shutdown() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let names: Vec<String> = teammate_tools(&TeamTools::default())
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "TaskCreate",
            "TaskGet",
            "TaskList",
            "TaskUpdate",
            "SendMessage"
        ]
    );
    // Even handed the lead's tools, a teammate's binding refuses them.
    let alice = registry(lead_tools(
        &TeamTools::new(slot_of(&home.team, "alice")),
        lead_config(home.path()),
    ));
    let out = err(
        &alice,
        cwd.path(),
        "TeamCreate",
        json!({"team_name": "mine"}),
    )
    .await;
    assert!(
        out.contains("already in team t as alice") && out.contains("only a lead"),
        "{out}"
    );
    assert!(!home.path().join("teams/mine").exists());
    let out = err(&alice, cwd.path(), "TeamDelete", json!({})).await;
    assert!(out.contains("only the team's lead (lead)"), "{out}");
    assert!(home.team.config_path().is_file());
    assert!(inbox(&home.team, "bob").is_empty());
    let out = err(
        &alice,
        cwd.path(),
        "SendMessage",
        json!({"to": "bob", "message": "stop", "type": "shutdown_request"}),
    )
    .await;
    assert!(out.contains("only the team's lead"), "{out}");
    assert!(inbox(&home.team, "bob").is_empty());
}

#[tokio::test]
async fn invalid_input_is_refused_before_the_store_is_touched() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let lead = registry(teammate_tools(&TeamTools::new(slot_of(&home.team, "lead"))));
    ok(&lead, cwd.path(), "TaskCreate", json!({"subject": "a"})).await;
    let tasks = home.path().join("tasks/t/tasks.json");
    let before = std::fs::read(&tasks).unwrap();
    for (tool, input, says) in [
        (
            "TaskUpdate",
            json!({"id": "abc", "status": "completed"}),
            "a task id is a number",
        ),
        (
            "TaskUpdate",
            json!({"id": "1", "status": "done"}),
            "not a status",
        ),
        (
            "TaskUpdate",
            json!({"id": "1", "owner": "../evil"}),
            "member name",
        ),
        (
            "TaskUpdate",
            json!({"id": "1", "ownr": "alice"}),
            "unknown field",
        ),
        ("TaskUpdate", json!({"id": "1"}), "nothing to change"),
        (
            "TaskUpdate",
            json!({"status": "completed"}),
            "`id` is missing",
        ),
        (
            "TaskUpdate",
            json!({"id": "1", "add_blocked_by": ["x"]}),
            "add_blocked_by",
        ),
        (
            "TaskUpdate",
            json!({"id": "1", "force": true}),
            "unknown field",
        ),
        ("TaskCreate", json!({"subject": "  "}), "`subject` is empty"),
        (
            "TaskCreate",
            json!({"subject": "b", "owner": "a b"}),
            "member name",
        ),
        ("TaskList", json!({"status": "open"}), "not a status"),
        ("TaskGet", json!({"id": true}), "task id"),
        (
            "SendMessage",
            json!({"to": "alice", "message": "hi"}),
            "`summary` is missing",
        ),
        (
            "SendMessage",
            json!({"to": "alice", "message": " ", "summary": "x"}),
            "`message` is empty",
        ),
        (
            "SendMessage",
            json!({"to": "alice", "message": "hi", "summary": "x".repeat(201)}),
            "limit is 200",
        ),
        (
            "SendMessage",
            json!({"to": "alice", "message": "hi", "summary": "x", "type": "idle_notification"}),
            "cannot be sent",
        ),
        (
            "SendMessage",
            json!({"to": "alice", "message": "allow", "type": "permission_response"}),
            "the runtime answers",
        ),
        (
            "SendMessage",
            json!({"to": "alice", "message": "ok", "type": "plan_approval_response"}),
            "the runtime answers",
        ),
        (
            "SendMessage",
            json!({"to": "lead", "message": "hi", "summary": "x"}),
            "yourself",
        ),
    ] {
        let out = err(&lead, cwd.path(), tool, input.clone()).await;
        assert!(out.contains(says), "{tool} {input}: {out}");
    }
    assert_eq!(
        std::fs::read(&tasks).unwrap(),
        before,
        "the task list changed"
    );
    for member in ["lead", "alice", "bob"] {
        assert!(inbox(&home.team, member).is_empty(), "{member} got mail");
    }
    // TeamCreate validates the name before creating anything.
    let slot = TeamSlot::new();
    let fresh = tempfile::tempdir().unwrap();
    let creator = registry(lead_tools(&TeamTools::new(slot), lead_config(fresh.path())));
    let out = err(
        &creator,
        cwd.path(),
        "TeamCreate",
        json!({"team_name": "../x"}),
    )
    .await;
    assert!(out.contains("team name"), "{out}");
    assert_eq!(std::fs::read_dir(fresh.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn team_tools_are_allowed_in_every_mode_but_a_deny_rule_refuses_them() {
    for tool in lead_tools(
        &TeamTools::default(),
        lead_config(Path::new("/nonexistent")),
    ) {
        // TeamMerge writes the project's files: it is judged as a write.
        let kind = if tool.name() == "TeamMerge" {
            ToolKind::Write
        } else {
            ToolKind::Internal
        };
        assert_eq!(tool.kind(), kind, "{}", tool.name());
    }
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "permissions:\n  deny:\n    - \"SendMessage\"\n",
    )
    .unwrap();
    let script = home.path().join("script.yaml");
    std::fs::write(
        &script,
        r#"
agents:
  alice:
    - tool_calls:
        - {name: TaskCreate, input: {subject: "write the parser"}}
        - {name: SendMessage, input: {to: bob, message: "hi", summary: "hello"}}
    - text: done
"#,
    )
    .unwrap();
    let mut alice = build_agent(member_settings(&home, cwd.path(), "alice", &script))
        .await
        .unwrap();
    let (sink, _events) = EventSink::channel();
    let result = alice.agent.run("go", &sink, CancellationToken::new()).await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    // dontAsk mode: the task was created; the deny rule kept the message from bob.
    assert_eq!(
        home.team.tasks().list(&Default::default()).unwrap().len(),
        1
    );
    assert!(inbox(&home.team, "bob").is_empty());
}

/// Runs git in `dir` with the user's and the system's config kept out.
fn git(base: &Path, dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", base.join("home"))
        .env("XDG_CONFIG_HOME", base.join("home/.config"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_delete_removes_clean_worktrees_and_reports_kept_ones() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(base.join("home/.config")).unwrap();
    let repo = base.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["config", "user.name", "Roo Test"],
        &["config", "user.email", "roo@example.invalid"],
        &["config", "maintenance.auto", "false"],
    ] {
        git(&base, &repo, args);
    }
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    git(&base, &repo, &["add", "-A"]);
    git(&base, &repo, &["commit", "-q", "-m", "initial"]);
    let g = roo_team::worktree::Git::new()
        .env("HOME", base.join("home"))
        .env("XDG_CONFIG_HOME", base.join("home/.config"))
        .env("GIT_CONFIG_NOSYSTEM", "1");

    let slot = TeamSlot::new();
    let mut config = lead_config(&base.join("roo"));
    config.worktrees = Some(g.clone());
    let runtime = config.runtime.clone();
    let lead = registry(lead_tools(&TeamTools::new(slot.clone()), config));
    ok(&lead, &repo, "TeamCreate", json!({"team_name": "t2"})).await;
    let mut worktrees = Vec::new();
    for member in ["alice", "bob"] {
        match roo_team::worktree::prepare(&repo, &name("t2"), &name(member), &g).unwrap() {
            roo_team::worktree::Workspace::Worktree(w) => worktrees.push(w),
            other => panic!("no worktree: {other:?}"),
        }
    }
    // alice commits work the lead has not merged; bob leaves his worktree clean.
    std::fs::write(worktrees[0].path.join("b.txt"), "bee\n").unwrap();
    git(&base, &worktrees[0].path, &["add", "b.txt"]);
    git(
        &base,
        &worktrees[0].path,
        &["commit", "-q", "-m", "alice: add b"],
    );

    let out = ok(&lead, &repo, "TeamDelete", json!({})).await;
    assert!(out.contains("deleted team t2"), "{out}");
    assert!(
        out.contains(&format!("kept {}", worktrees[0].path.display()))
            && out.contains("roo/t2/alice"),
        "{out}"
    );
    assert!(
        out.contains(&format!("removed {}", worktrees[1].path.display())),
        "{out}"
    );
    assert!(worktrees[0].path.join("b.txt").is_file());
    assert!(!worktrees[1].path.exists());
    assert!(slot.get().is_none());
    runtime.cancel();
}

/// Issue 18: the lead merges with TeamMerge (fetched from the clone, `--no-ff`, hooks
/// off); a conflict is aborted and its files named, the lead's tree left clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_merge_merges_with_no_ff_and_aborts_a_conflict_naming_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(base.join("home/.config")).unwrap();
    let repo = base.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["config", "user.name", "Roo Test"],
        &["config", "user.email", "roo@example.invalid"],
        &["config", "maintenance.auto", "false"],
    ] {
        git(&base, &repo, args);
    }
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    git(&base, &repo, &["add", "-A"]);
    git(&base, &repo, &["commit", "-q", "-m", "initial"]);
    let g = roo_team::worktree::Git::new()
        .env("HOME", base.join("home"))
        .env("XDG_CONFIG_HOME", base.join("home/.config"))
        .env("GIT_CONFIG_NOSYSTEM", "1");
    let slot = TeamSlot::new();
    let mut config = lead_config(&base.join("roo"));
    config.worktrees = Some(g.clone());
    let runtime = config.runtime.clone();
    let lead = registry(lead_tools(&TeamTools::new(slot.clone()), config));
    ok(&lead, &repo, "TeamCreate", json!({"team_name": "t2"})).await;
    let mut clones = Vec::new();
    for member in ["alice", "bob"] {
        match roo_team::worktree::prepare(&repo, &name("t2"), &name(member), &g).unwrap() {
            roo_team::worktree::Workspace::Worktree(w) => clones.push(w.path),
            other => panic!("no clone: {other:?}"),
        }
    }
    for (clone, text) in [(&clones[0], "alice\n"), (&clones[1], "bob\n")] {
        std::fs::write(clone.join("a.txt"), text).unwrap();
        git(&base, clone, &["commit", "-q", "-am", "edit a"]);
    }
    let out = ok(&lead, &repo, "TeamMerge", json!({"name": "alice"})).await;
    assert!(out.contains("merged roo/t2/alice with --no-ff"), "{out}");
    let parents = std::process::Command::new("git")
        .args(["rev-list", "--parents", "-n1", "HEAD"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&parents.stdout)
            .split_whitespace()
            .count(),
        3
    );
    let out = ok(&lead, &repo, "TeamMerge", json!({"name": "bob"})).await;
    assert!(
        out.contains("conflicts in a.txt") && out.contains("aborted"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "alice\n"
    );
    assert!(!repo.join(".git/MERGE_HEAD").exists());
    let status = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), "");
    let out = err(&lead, &repo, "TeamMerge", json!({"name": "nobody"})).await;
    assert!(out.contains("no such branch"), "{out}");
    runtime.cancel();
}

/// Adds member alice at the top of the first turn that finds the slot bound.
struct Joiner(TeamSlot);

impl AgentHook for Joiner {
    fn before_turn(&self) -> futures_util::future::BoxFuture<'_, TurnAction> {
        Box::pin(async move {
            if let Some(binding) = self.0.get()
                && binding.team.config().unwrap().member("alice").is_none()
            {
                let mut alice = Member::new(name("alice"), binding.team.name());
                alice.pid = Some(std::process::id());
                binding.team.add_member(alice).unwrap();
            }
            TurnAction::Continue
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_lead_founds_a_team_assigns_a_task_and_messages_a_teammate() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.yaml");
    std::fs::write(
        &script,
        r#"
agents:
  lead:
    - tool_calls: [{name: TeamCreate, input: {team_name: web, description: "ship the form"}}]
    - tool_calls:
        - {name: TaskCreate, input: {subject: "build the form", paths: ["src/form.rs"]}}
    - tool_calls:
        - {name: TaskUpdate, input: {id: "1", owner: alice}}
        - {name: SendMessage, input: {to: alice, summary: "start with the form", message: "Task 1 is yours."}}
    - text: done
"#,
    )
    .unwrap();
    let slot = TeamSlot::new();
    let (hook, sent) = recorder();
    let config = lead_config(dir.path());
    let runtime = config.runtime.clone();
    let tools = lead_tools(&TeamTools::new(slot.clone()).with_on_sent(hook), config);
    let mut settings = AgentSettings::new(Identity::solo(name("lead")), dir.path().to_path_buf());
    settings.cwd = Some(cwd.path().to_path_buf());
    settings.llm.script = Some(script);
    settings.permission_mode = Some(PermissionMode::Default);
    settings.tools = ToolSet {
        work: false,
        plan_mode: false,
        extra: tools,
        remove: Vec::new(),
        ..ToolSet::default()
    };
    // alice joins once the team exists, before the next turn (as the Agent tool would add her).
    settings.hooks = vec![Arc::new(Joiner(slot.clone()))];
    let mut lead = build_agent(settings).await.unwrap();
    let (sink, _events) = EventSink::channel();
    let result = lead
        .agent
        .run("ship the form with alice", &sink, CancellationToken::new())
        .await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let conversation = serde_json::to_string(lead.agent.messages()).unwrap();
    assert!(!conversation.contains("failed to"), "{conversation}");
    let team = slot.get().unwrap().team.clone();
    assert_eq!(team.name().as_str(), "web");
    let messages = inbox(&team, "alice");
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(matches!(&messages[0].body, MessageBody::TaskAssignment { task_id } if task_id == "1"));
    assert_eq!(messages[1].text, "Task 1 is yours.");
    assert_eq!(*sent.lock().unwrap(), vec!["alice", "alice"]);
    stop_router(&runtime, &slot).await;
}

/// Answers the first `shutdown_request` in `member`'s inbox (read directly, as another
/// process would) with `approve`.
fn answer_shutdown(
    team: &Team,
    member: &str,
    approve: bool,
    reason: &str,
) -> tokio::task::JoinHandle<()> {
    let team = team.clone();
    let (member, reason) = (member.to_string(), reason.to_string());
    tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let request_id = loop {
            let found = inbox(&team, &member)
                .into_iter()
                .filter(|m| !m.read)
                .find_map(|m| match m.body {
                    MessageBody::ShutdownRequest { request_id } => request_id.map(|r| (m.id, r)),
                    _ => None,
                });
            if let Some((id, request_id)) = found {
                team.mailbox().mark_read(&name(&member), &[id]).unwrap();
                break request_id;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no shutdown request for {member}"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let answer = roo_store::Outgoing::new(
            MessageBody::ShutdownResponse {
                approve,
                reason,
                request_id: Some(request_id),
            },
            "",
        );
        team.mailbox().send(&name(&member), "lead", answer).unwrap();
    })
}

/// A child process killed and reaped when dropped, even when the test fails.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_delete_keeps_the_team_when_a_member_refuses_or_its_process_lives_on() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let slot = TeamSlot::new();
    let mut config = lead_config(dir.path());
    config.shutdown_wait = Duration::from_millis(500);
    let runtime = config.runtime.clone();
    let lead = registry(lead_tools(&TeamTools::new(slot.clone()), config));
    ok(&lead, cwd.path(), "TeamCreate", json!({"team_name": "t2"})).await;
    let team = slot.get().unwrap().team.clone();
    // bob is a process of its own (a stand-in for a roo-worker).
    let mut worker = Reaped(
        std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap(),
    );
    let mut bob = Member::new(name("bob"), &name("t2"));
    bob.pid = Some(worker.0.id());
    bob.is_active = Some(false);
    team.add_member(bob).unwrap();

    let refusing = answer_shutdown(&team, "bob", false, "still merging");
    let out = err(&lead, cwd.path(), "TeamDelete", json!({})).await;
    refusing.await.unwrap();
    assert!(
        out.contains("bob refused to shut down: still merging"),
        "{out}"
    );
    assert!(team.config_path().is_file());

    // bob agrees but his process keeps running: the team stays, nothing is orphaned.
    let agreeing = answer_shutdown(&team, "bob", true, "bye");
    let out = err(&lead, cwd.path(), "TeamDelete", json!({})).await;
    agreeing.await.unwrap();
    assert!(
        out.contains(&format!(
            "bob agreed to shut down but its process {} is still running",
            worker.0.id()
        )),
        "{out}"
    );
    assert!(team.config_path().is_file());

    // Once the process is gone, bob counts as dead and the team goes.
    worker.0.kill().unwrap();
    worker.0.wait().unwrap();
    let out = ok(&lead, cwd.path(), "TeamDelete", json!({})).await;
    assert!(out.contains("deleted team t2"), "{out}");
    assert!(slot.get().is_none());
    runtime.cancel();
}
