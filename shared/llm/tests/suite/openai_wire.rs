//! The OpenAI-compatible provider against the mock server: interleaved tool calls,
//! usage-only final chunk, chunk boundaries, stream errors, and the request it sends.

use std::time::Duration;

use roo_llm::mock_server::{MockReply, MockServer, RawEnd, RawReply, openai_sse};
use roo_llm::openai::OpenAiProvider;
use roo_llm::script::{ScriptTurn, ScriptedCall, ScriptedReply};
use roo_llm::{
    ContentBlock, LlmError, Message, Provider, ProviderKind, Request, Role, StopReason,
    StreamEvent, ToolSpec, Usage, collect,
};
use serde_json::{Value, json};

use super::support::{ask, drain, pieces, settings};

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let data = json!({"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-4.1", "choices": [{"index": 0, "delta": delta, "logprobs": null,
        "finish_reason": finish}], "usage": null});
    format!("data: {data}\n\n")
}

fn call(index: u64, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
    let mut function = json!({"arguments": args});
    if let Some(name) = name {
        function["name"] = json!(name);
    }
    let mut c = json!({"index": index, "function": function});
    if let Some(id) = id {
        c["id"] = json!(id);
        c["type"] = json!("function");
    }
    json!({"tool_calls": [c]})
}

#[tokio::test]
async fn interleaved_tool_calls_are_routed_to_their_own_accumulators() {
    let server = MockServer::start().await.unwrap();
    let provider = OpenAiProvider::new(&settings(ProviderKind::OpenAi, &server)).unwrap();
    let chunks = vec![
        chunk(json!({"role": "assistant", "content": "Checking both. "}), None),
        chunk(call(0, Some("call_read"), Some("ReadFile"), ""), None),
        chunk(call(1, Some("call_grep"), Some("Grep"), ""), None),
        chunk(call(0, None, None, "{\"pa"), None),
        chunk(call(1, None, None, "{\"pattern\": \"fn ma"), None),
        chunk(call(0, None, None, "th\": \"src/ma"), None),
        chunk(call(1, None, None, "in\", \"path\": \"src\"}"), None),
        chunk(call(0, None, None, "in.rs\"}"), None),
        chunk(json!({}), Some("tool_calls")),
        // The usage-only final chunk of stream_options.include_usage.
        "data: {\"id\":\"chatcmpl-9\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4.1\",\"choices\":[],\"usage\":{\"prompt_tokens\":900,\"completion_tokens\":42,\"total_tokens\":942,\"prompt_tokens_details\":{\"cached_tokens\":512}}}\n\n".to_owned(),
        "data: [DONE]\n\n".to_owned(),
    ];
    server.push(MockReply::Raw(RawReply::sse(chunks.clone())));
    let mut seen = Vec::new();
    let response = collect(provider.stream(ask("go")), |e| seen.push(e.clone()))
        .await
        .unwrap();
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 388,
            output_tokens: 42,
            cache_read_tokens: 512,
            cache_write_tokens: 0
        }
    );
    assert_eq!(
        response.message.content,
        vec![
            ContentBlock::Text {
                text: "Checking both. ".into()
            },
            ContentBlock::ToolUse {
                id: "call_read".into(),
                name: "ReadFile".into(),
                input: json!({"path": "src/main.rs"})
            },
            ContentBlock::ToolUse {
                id: "call_grep".into(),
                name: "Grep".into(),
                input: json!({"pattern": "fn main", "path": "src"})
            },
        ]
    );
    // Every fragment reached the right call, in order.
    let fragments = |id: &str| -> String {
        seen.iter()
            .filter_map(|e| match e {
                StreamEvent::ToolInputDelta {
                    id: i,
                    partial_json,
                } if i == id => Some(partial_json.as_str()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(fragments("call_read"), "{\"path\": \"src/main.rs\"}");
    assert_eq!(
        fragments("call_grep"),
        "{\"pattern\": \"fn main\", \"path\": \"src\"}"
    );

    // The same stream cut into 3-byte pieces parses the same.
    let wire = chunks.concat().into_bytes();
    server.push(MockReply::Raw(RawReply::sse(pieces(&wire, 3))));
    let (events, error) = drain(provider.stream(ask("go"))).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events, seen);
}

#[tokio::test]
async fn scripted_reply_survives_any_chunking() {
    let server = MockServer::start().await.unwrap();
    let provider = OpenAiProvider::new(&settings(ProviderKind::OpenAi, &server)).unwrap();
    let reply = ScriptedReply {
        thinking: Some("思考中 🤔".into()),
        signature: None,
        text: Some("naïve café ☕".into()),
        tool_calls: vec![
            ScriptedCall::new("call_1", "Bash", json!({"command": "echo é"})),
            ScriptedCall::new("call_2", "Glob", json!({"pattern": "**/*.rs"})),
        ],
        stop_reason: StopReason::ToolUse,
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_tokens: 7,
            cache_write_tokens: 0,
        },
        estimated_usage: false,
        delay: Duration::ZERO,
        error: None,
        error_status: None,
    };
    let wire = openai_sse(&reply, "m", "chatcmpl-1").concat().into_bytes();
    for size in [1, 4, 9] {
        server.push(MockReply::Raw(RawReply::sse(pieces(&wire, size))));
        let (events, error) = drain(provider.stream(ask("x"))).await;
        assert!(error.is_none(), "size {size}: {error:?}");
        assert_eq!(events, reply.events(), "size {size}");
    }
}

#[tokio::test]
async fn error_chunk_and_reset_mid_stream_are_errors() {
    let server = MockServer::start().await.unwrap();
    let provider = OpenAiProvider::new(&settings(ProviderKind::OpenAi, &server)).unwrap();
    // OpenRouter-style error inside a 200 stream, after some text.
    server.push(MockReply::Raw(RawReply::sse([
        chunk(json!({"content": "Half"}), None),
        "data: {\"error\":{\"message\":\"upstream provider failed\",\"code\":502}}\n\n".to_owned(),
    ])));
    let (events, error) = drain(provider.stream(ask("x"))).await;
    assert_eq!(
        events,
        vec![StreamEvent::TextDelta {
            text: "Half".into()
        }]
    );
    assert!(
        error
            .unwrap()
            .to_string()
            .contains("upstream provider failed"),
        "error chunk must surface"
    );

    server.push(MockReply::Raw(
        RawReply::sse([chunk(json!({"content": "Half an ans"}), None)]).ending(RawEnd::Reset),
    ));
    let err = collect(provider.stream(ask("x")), |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Truncated { .. }), "{err}");
}

#[tokio::test]
async fn request_has_auth_stream_options_tools_and_tool_messages() {
    let server = MockServer::start().await.unwrap();
    let provider = OpenAiProvider::new(&settings(ProviderKind::OpenAi, &server)).unwrap();
    server.push(MockReply::Turn(ScriptTurn {
        text: Some("ok".into()),
        ..ScriptTurn::default()
    }));
    let request = Request {
        system: vec!["Role.".into(), "Env.".into()],
        messages: vec![
            Message::user_text("list files"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Text {
                        text: "Listing.".into(),
                    },
                    ContentBlock::ToolUse {
                        id: "call_1".into(),
                        name: "Bash".into(),
                        input: json!({"command": "ls"}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: "a\nb".into(),
                    is_error: false,
                }],
            },
        ],
        tools: vec![ToolSpec {
            name: "Bash".into(),
            description: "Run a command".into(),
            input_schema: json!({"type": "object"}),
        }],
        max_tokens: 256,
        temperature: Some(0.0),
        ..Request::default()
    };
    collect(provider.stream(request), |_| {}).await.unwrap();
    let recorded = &server.requests()[0];
    assert_eq!(recorded.path, "/v1/chat/completions");
    assert_eq!(recorded.header("authorization"), Some("Bearer test-key"));
    let body = &recorded.body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_tokens"], 256);
    assert_eq!(body["temperature"], 0.0);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Role.\n\nEnv."},
            {"role": "user", "content": "list files"},
            {"role": "assistant", "content": "Listing.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "Bash", "arguments": "{\"command\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a\nb"},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "Bash",
            "description": "Run a command", "parameters": {"type": "object"}}}])
    );
}
