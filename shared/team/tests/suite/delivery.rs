//! Inbox messages reach a busy agent between two of its tool calls, are marked
//! delivered only once in its conversation, and are never lost to a run that stops.

use std::sync::Arc;

use roo_agent::event::{EventSink, Outcome};
use roo_store::ReadFilter;
use roo_team::{InboxDelivery, InboxRouter, build_agent};
use tokio_util::sync::CancellationToken;

use super::common::{TeamHome, alice_settings, name};

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
    let (mut settings, log) = alice_settings(&home, cwd.path(), script, 10);
    let router = InboxRouter::new(home.team.mailbox(), name("alice"));
    settings.hooks = vec![Arc::new(InboxDelivery::new(router))];
    let mut built = build_agent(settings).await.unwrap();
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
    let (mut settings, _log) = alice_settings(&home, cwd.path(), script, 1);
    let router = InboxRouter::new(home.team.mailbox(), name("alice"));
    settings.hooks = vec![Arc::new(InboxDelivery::new(router))];
    let mut built = build_agent(settings).await.unwrap();
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
