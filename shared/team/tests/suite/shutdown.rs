//! A shutdown request from the lead is put before a busy member's model, whose approval
//! ends the run between two tool calls; one from anybody else is ignored.

use std::sync::Arc;

use roo_agent::event::{EventSink, RunOutcome};
use roo_store::{MessageBody, ReadFilter};
use roo_team::{InboxDelivery, InboxRouter, ShutdownOnRequest, build_agent};
use tokio_util::sync::CancellationToken;

use super::common::{TeamHome, alice_settings, name};

const SCRIPT: &str = r#"
agents:
  alice:
    - text: "Step one."
      tool_calls:
        - {name: Step, input: {api: one, mail: [--as, bob, --to, alice, --type, shutdown_request, --request-id, from-bob]}}
    - text: "Step two."
      tool_calls:
        - {name: Step, input: {api: two, mail: [--as, lead, --to, alice, --type, shutdown_request, --request-id, r-7]}}
    - when: {last_user_contains: "Shutdown request"}
      text: "Agreed."
      tool_calls:
        - {name: ShutdownResponse, input: {approve: true, reason: "two steps done"}}
    - text: "Step three."
      tool_calls:
        - {name: Step, input: {api: three}}
    - text: "All steps done."
"#;

#[tokio::test]
async fn a_shutdown_request_from_the_lead_ends_the_run_between_two_tool_calls() {
    let home = TeamHome::new();
    let cwd = tempfile::tempdir().unwrap();
    let (mut settings, log) = alice_settings(&home, cwd.path(), SCRIPT, 10);
    let router = InboxRouter::new(home.team.mailbox(), name("alice"));
    let hook = ShutdownOnRequest::new(router.clone(), home.team.mailbox(), name("lead"));
    settings.tools.extra.push(hook.response_tool());
    settings.hooks = vec![Arc::new(InboxDelivery::new(router.clone())), Arc::new(hook)];
    let mut built = build_agent(settings).await.unwrap();
    let (sink, _events) = EventSink::channel();
    let result = built
        .agent
        .run("do the steps", &sink, CancellationToken::new())
        .await;
    // bob's request did nothing; the lead's was put before the model, which approved,
    // and the run stopped before step three.
    assert_eq!(
        result.outcome,
        RunOutcome::Stopped {
            reason: "alice approved the lead lead's request to shut down".to_string()
        }
    );
    assert_eq!(*log.lock().unwrap(), vec!["one", "two"]);
    assert_eq!(result.turns, 3);
    // The lead got the answer, with its request id.
    let lead_inbox = home
        .team
        .mailbox()
        .read(&name("lead"), &ReadFilter::default())
        .unwrap();
    assert_eq!(lead_inbox.len(), 1, "{lead_inbox:?}");
    assert_eq!(lead_inbox[0].from, name("alice"));
    assert!(matches!(
        &lead_inbox[0].body,
        MessageBody::ShutdownResponse { approve: true, request_id: Some(id), reason } if id == "r-7" && reason == "two steps done"
    ));
    // Both requests are acknowledged, neither went into the conversation.
    let alice_inbox = home
        .team
        .mailbox()
        .read(&name("alice"), &ReadFilter::default())
        .unwrap();
    assert_eq!(alice_inbox.len(), 2);
    assert!(alice_inbox.iter().all(|m| m.acknowledged_at.is_some()));
    let conversation = serde_json::to_string(built.agent.messages()).unwrap();
    assert!(!conversation.contains("<teammate-message from="));
}

#[test]
fn the_shutdown_response_schema_takes_what_it_took() {
    let home = TeamHome::new();
    let router = InboxRouter::new(home.team.mailbox(), name("alice"));
    let hook = ShutdownOnRequest::new(router, home.team.mailbox(), name("lead"));
    let mut schema = hook.response_tool().input_schema();
    for field in schema["properties"].as_object_mut().unwrap().values_mut() {
        field.as_object_mut().unwrap().remove("description");
    }
    assert_eq!(
        schema,
        serde_json::json!({
            "type": "object",
            "properties": {"approve": {"type": "boolean"}, "reason": {"type": "string"}},
            "required": ["approve", "reason"],
            "additionalProperties": false
        })
    );
}
