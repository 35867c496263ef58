//! The Anthropic provider against the mock server: SSE framing with awkward chunk
//! boundaries, error events, broken streams, and the request it sends.

use std::time::Duration;

use roo_llm::anthropic::AnthropicProvider;
use roo_llm::mock_server::{MockReply, MockServer, RawEnd, RawReply, anthropic_sse};
use roo_llm::script::{ScriptTurn, ScriptedCall, ScriptedReply};
use roo_llm::{
    ContentBlock, LlmError, Message, Provider, ProviderKind, Request, Role, StopReason,
    StreamEvent, ToolSpec, Usage, collect,
};
use serde_json::json;

use super::support::{ask, drain, pieces, settings};

fn unicode_reply() -> ScriptedReply {
    ScriptedReply {
        thinking: Some("Überlegung: 検討中…".into()),
        signature: Some("EqQBCgIYAhIM".into()),
        text: Some("héllo 🦀 世界 — done".into()),
        tool_calls: vec![ScriptedCall::new(
            "toolu_01",
            "WriteFile",
            json!({"path": "docs/ß.md", "content": "emoji 🎉 and 中文"}),
        )],
        stop_reason: StopReason::ToolUse,
        usage: Usage {
            input_tokens: 120,
            output_tokens: 33,
            cache_read_tokens: 1000,
            cache_write_tokens: 50,
        },
        estimated_usage: false,
        delay: Duration::ZERO,
        error: None,
        error_status: None,
    }
}

#[tokio::test]
async fn chunk_boundaries_split_events_and_utf8_characters() {
    let server = MockServer::start().await.unwrap();
    let provider = AnthropicProvider::new(&settings(ProviderKind::Anthropic, &server)).unwrap();
    let reply = unicode_reply();
    let wire = anthropic_sse(&reply, "mock-model", "msg_1")
        .concat()
        .into_bytes();
    for size in [1, 2, 3, 5, 7, 64] {
        server.push(MockReply::Raw(RawReply::sse(pieces(&wire, size))));
        let (events, error) = drain(provider.stream(ask("hi"))).await;
        assert!(error.is_none(), "piece size {size}: {error:?}");
        assert_eq!(events, reply.events(), "piece size {size}");
    }
}

#[tokio::test]
async fn error_event_mid_stream_is_an_error_not_a_short_answer() {
    let server = MockServer::start().await.unwrap();
    let provider = AnthropicProvider::new(&settings(ProviderKind::Anthropic, &server)).unwrap();
    let events = [
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"partial\"}}\n\n",
        "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n",
    ];
    server.push(MockReply::Raw(RawReply::sse(events)));
    let (got, error) = drain(provider.stream(ask("hi"))).await;
    assert_eq!(
        got,
        vec![StreamEvent::TextDelta {
            text: "partial".into()
        }]
    );
    let error = error.expect("an error");
    assert!(
        error.to_string().contains("overloaded_error: Overloaded"),
        "{error}"
    );
    assert!(error.is_transient());
    // Text had already reached the consumer: no silent retry.
    assert_eq!(server.requests().len(), 1);

    server.push(MockReply::Raw(RawReply::sse(events)));
    let err = collect(provider.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Provider { .. }), "{err}");
}

#[tokio::test]
async fn error_event_before_any_content_is_retried() {
    let server = MockServer::start().await.unwrap();
    let provider = AnthropicProvider::new(&settings(ProviderKind::Anthropic, &server)).unwrap();
    server.push(MockReply::Raw(RawReply::sse([
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
        "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n",
    ])));
    server.push(MockReply::Turn(ScriptTurn {
        text: Some("recovered".into()),
        ..ScriptTurn::default()
    }));
    let response = collect(provider.stream(ask("hi")), |_| {}).await.unwrap();
    assert_eq!(response.message.text(), "recovered");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn connection_reset_mid_stream_is_an_error() {
    let server = MockServer::start().await.unwrap();
    let provider = AnthropicProvider::new(&settings(ProviderKind::Anthropic, &server)).unwrap();
    let wire = anthropic_sse(&unicode_reply(), "m", "msg").concat();
    let cut = wire.find("event: content_block_stop").unwrap();
    let partial = RawReply::sse([wire[..cut].to_owned()]).ending(RawEnd::Reset);
    server.push(MockReply::Raw(partial.clone()));
    let (events, error) = drain(provider.stream(ask("hi"))).await;
    assert!(!events.is_empty());
    let error = error.expect("an error after the reset");
    assert!(matches!(error, LlmError::Truncated { .. }), "{error}");

    // The same bytes ending cleanly (no message_stop) are just as much an error.
    server.push(MockReply::Raw(partial.ending(RawEnd::Complete)));
    let err = collect(provider.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("before message_stop"), "{err}");
}

#[tokio::test]
async fn request_has_headers_system_tools_cache_breakpoints_and_thinking() {
    let server = MockServer::start().await.unwrap();
    let provider = AnthropicProvider::new(&settings(ProviderKind::Anthropic, &server)).unwrap();
    server.push(MockReply::Turn(ScriptTurn {
        text: Some("ok".into()),
        ..ScriptTurn::default()
    }));
    let request = Request {
        system: vec!["You are alice.".into(), "Today is Monday.".into()],
        messages: vec![
            Message::user_text("read it"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Thinking {
                        thinking: "I should read.".into(),
                        signature: Some("sig-123".into()),
                    },
                    ContentBlock::RedactedThinking {
                        data: "opaque".into(),
                    },
                    ContentBlock::ToolUse {
                        id: "toolu_1".into(),
                        name: "ReadFile".into(),
                        input: json!({"path": "a.rs"}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "toolu_1".into(),
                    content: "fn main() {}".into(),
                    is_error: false,
                }],
            },
        ],
        tools: vec![ToolSpec {
            name: "ReadFile".into(),
            description: "Read a file".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        agent: "alice".into(),
        ..Request::default()
    };
    collect(provider.stream(request), |_| {}).await.unwrap();
    let recorded = &server.requests()[0];
    assert_eq!(recorded.path, "/v1/messages");
    assert_eq!(recorded.header("x-api-key"), Some("test-key"));
    assert_eq!(recorded.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(recorded.header("content-type"), Some("application/json"));
    let body = &recorded.body;
    assert_eq!(body["model"], "mock-model");
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["system"],
        json!([
            {"type": "text", "text": "You are alice.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Today is Monday."},
        ])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "read it",
                                          "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should read.", "signature": "sig-123"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "tool_use", "id": "toolu_1", "name": "ReadFile", "input": {"path": "a.rs"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "fn main() {}",
                 "cache_control": {"type": "ephemeral"}},
            ]},
        ])
    );
    assert_eq!(body["tools"][0]["name"], "ReadFile");
    assert_eq!(body["tools"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(
        body["tools"][0]["input_schema"]["properties"]["path"]["type"],
        "string"
    );
    // The agent name is ours; it never goes on the wire.
    assert!(!body.to_string().contains("\"agent\""));
}
