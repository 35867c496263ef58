//! Inbox messages reach a busy agent between two of its tool calls, are marked
//! delivered only once in its conversation, and are never lost to a run that stops.

use std::path::Path;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use roo_agent::event::{EventSink, Outcome};
use roo_agent::tool::{PermissionTarget, Tool, ToolContext, ToolKind, ToolOutput};
use roo_store::ReadFilter;
use roo_team::{
    AgentSettings, BuiltAgent, Identity, InboxDelivery, InboxRouter, SessionPlan, ToolSet,
    build_agent,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::common::{TeamHome, name, roo_mail};

/// A work step. With `"mail": true` it has bob write to alice's inbox through a
/// `roo-mail` process while it runs: a message arriving in the middle of a busy run.
struct Step {
    home: std::path::PathBuf,
    log: Arc<Mutex<Vec<String>>>,
}

impl Tool for Step {
    fn name(&self) -> &str {
        "Step"
    }
    fn description(&self) -> String {
        "one step of work".to_string()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }
    fn is_concurrency_safe(&self, _: &Value) -> bool {
        false
    }
    fn permission_target(&self, _: &Value) -> PermissionTarget {
        PermissionTarget::None
    }
    fn call<'a>(&'a self, input: Value, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let api = input["api"].as_str().unwrap_or("v1").to_string();
            self.log.lock().unwrap().push(api.clone());
            if input["mail"] == true {
                let home = self.home.clone();
                let out = tokio::task::spawn_blocking(move || {
                    std::process::Command::new(roo_mail())
                        .args(["send", "--team", "t", "--as", "bob", "--to", "alice"])
                        .args([
                            "--summary",
                            "switch to the v2 API",
                            "use the v2 API from now on",
                        ])
                        .env("ROO_HOME", home)
                        .output()
                })
                .await
                .unwrap()
                .unwrap();
                assert!(out.status.success(), "{out:?}");
            }
            ToolOutput::ok(format!("api {api} step done"))
        })
    }
}

async fn alice(
    home: &TeamHome,
    cwd: &Path,
    script: &str,
    max_turns: u32,
) -> (BuiltAgent, Arc<Mutex<Vec<String>>>) {
    let script_path = home.path().join("script.yaml");
    std::fs::write(&script_path, script).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut settings = AgentSettings::new(
        Identity::teammate(name("alice"), name("t"), name("lead")),
        home.path().to_path_buf(),
    );
    settings.cwd = Some(cwd.to_path_buf());
    settings.llm.script = Some(script_path);
    settings.session = SessionPlan::Transcript(home.path().join("teams/t/transcripts/alice.jsonl"));
    settings.tools = ToolSet {
        extra: vec![Arc::new(Step {
            home: home.path().to_path_buf(),
            log: log.clone(),
        })],
        ..ToolSet::default()
    };
    settings.max_turns = max_turns;
    let router = InboxRouter::new(home.team.mailbox(), name("alice"));
    settings.hooks = vec![Arc::new(InboxDelivery::new(router))];
    (build_agent(settings).await.unwrap(), log)
}

fn alice_inbox(home: &TeamHome) -> Vec<roo_store::Message> {
    home.team
        .mailbox()
        .read(&name("alice"), &ReadFilter::default())
        .unwrap()
}

#[tokio::test]
async fn a_message_sent_during_a_tool_call_changes_the_next_turn_and_is_then_delivered() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    // Without the message at turn 2 the script answers "Continued with v1."
    let script = r#"
agents:
  alice:
    - text: "Starting with v1."
      tool_calls:
        - {name: Step, input: {api: v1, mail: true}}
    - when: {last_user_contains: "use the v2 API from now on"}
      text: "Switching to v2."
      tool_calls:
        - {name: Step, input: {api: v2}}
    - when: {last_user_contains: "api v2 step done"}
      text: "Done with v2."
    - text: "Continued with v1."
"#;
    let (mut built, log) = alice(&home, cwd.path(), script, 10).await;
    let (sink, _events) = EventSink::channel();
    let result = built
        .agent
        .run("port the client", &sink, CancellationToken::new())
        .await;
    assert_eq!(result.outcome, Outcome::Completed, "{result:?}");
    assert_eq!(result.final_text, "Done with v2.");
    assert_eq!(*log.lock().unwrap(), vec!["v1", "v2"]);
    // In the conversation once, wrapped, with the standing notice.
    let conversation = serde_json::to_string(built.agent.messages()).unwrap();
    assert_eq!(conversation.matches("<teammate-message from=").count(), 1);
    assert!(conversation.contains(r#"from=\"bob\""#));
    assert!(conversation.contains(r#"summary=\"switch to the v2 API\""#));
    assert!(conversation.contains("never as the user's authorization"));
    // And only then marked delivered.
    let inbox = alice_inbox(&home);
    assert_eq!(inbox.len(), 1);
    assert!(inbox[0].read && inbox[0].delivered_at.is_some());
}

#[tokio::test]
async fn a_message_that_arrives_as_the_run_stops_stays_unread_for_the_next_run() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let script = r#"
agents:
  alice:
    - text: "One step."
      tool_calls:
        - {name: Step, input: {mail: true}}
    - when: {last_user_contains: "use the v2 API from now on"}
      text: "Saw the message."
    - text: "No message."
"#;
    let (mut built, _log) = alice(&home, cwd.path(), script, 1).await;
    let (sink, _events) = EventSink::channel();
    let first = built.agent.run("go", &sink, CancellationToken::new()).await;
    assert_eq!(first.outcome, Outcome::MaxTurns { limit: 1 });
    // Not in the conversation, so not delivered: still unread on disk.
    let inbox = alice_inbox(&home);
    assert!(!inbox[0].read && inbox[0].delivered_at.is_none());
    let second = built
        .agent
        .run("go on", &sink, CancellationToken::new())
        .await;
    assert_eq!(second.final_text, "Saw the message.", "{second:?}");
    assert!(alice_inbox(&home)[0].delivered_at.is_some());
}
