//! The acceptance check of the layer: for equivalent responses, the Anthropic
//! protocol, the OpenAI-compatible protocol and the scripted provider yield identical
//! normalized event sequences (and so identical collected messages).

use roo_llm::mock_server::{MockServer, Protocol};
use roo_llm::script::{Cursors, Script, ScriptPlayer};
use roo_llm::{
    LlmSettings, Message, ProviderKind, Request, ScriptProvider, StreamEvent, build_provider,
};

use super::support::{drain, settings};

const SCRIPT: &str = r#"
agents:
  "*":
    - thinking: "The test fails on line 3; read the file, then search callers."
      text: "I'll look at the code first — ünïcödé ✓."
      tool_calls:
        - {name: ReadFile, input: {path: src/lib.rs}}
        - {name: Grep, input: {pattern: "fn parse", path: src, glob: "*.rs"}}
      usage: {input_tokens: 1200, output_tokens: 80, cache_read_tokens: 3000}
    - text: "Fixed the off-by-one in parse()."
      usage: {input_tokens: 1500, output_tokens: 12}
    - when: {last_user_contains: "max out"}
      text: "This answer was cut"
      stop_reason: max_tokens
      usage: {input_tokens: 10, output_tokens: 8192}
"#;

fn request(text: &str) -> Request {
    Request {
        system: vec!["You are a coding agent.".into()],
        messages: vec![Message::user_text(text)],
        ..Request::default()
    }
}

async fn run_all(kind: Option<ProviderKind>) -> Vec<Vec<StreamEvent>> {
    let script = Script::parse(SCRIPT, false).unwrap();
    let server = MockServer::with_script(script.clone()).await.unwrap();
    let provider = match kind {
        Some(kind) => build_provider(&settings(kind, &server)).unwrap(),
        None => std::sync::Arc::new(ScriptProvider::new(
            ScriptPlayer::new(script, "inline", Cursors::in_memory()),
            "script",
            200_000,
        )),
    };
    let mut runs = Vec::new();
    for text in ["fix the test", "please max out", "thanks"] {
        let (events, error) = drain(provider.stream(request(text))).await;
        assert!(error.is_none(), "{kind:?}: {error:?}");
        runs.push(events);
    }
    if kind.is_some() {
        // Complete responses leave the connection reusable: one for all requests.
        assert_eq!(server.connections(), 1, "{kind:?}: keep-alive was not used");
    }
    runs
}

#[tokio::test]
async fn anthropic_openai_and_script_yield_identical_events() {
    let scripted = run_all(None).await;
    let anthropic = run_all(Some(ProviderKind::Anthropic)).await;
    let openai = run_all(Some(ProviderKind::OpenAi)).await;
    assert_eq!(anthropic, scripted, "anthropic vs script");
    assert_eq!(openai, scripted, "openai vs script");

    // And the sequences are the interesting ones: thinking, text, two whole tool calls
    // with ids from the script, stop reasons and usage as scripted.
    let first = &scripted[0];
    assert!(matches!(first[0], StreamEvent::ThinkingDelta { .. }));
    assert!(matches!(first[1], StreamEvent::TextDelta { .. }));
    assert_eq!(
        first[2],
        StreamEvent::ToolCallStart {
            id: "toolu_script_1".into(),
            name: "ReadFile".into()
        }
    );
    assert!(matches!(&first[4], StreamEvent::ToolCallEnd { id, .. } if id == "toolu_script_1"));
    assert!(matches!(&first[7], StreamEvent::ToolCallEnd { id, .. } if id == "toolu_script_2"));
    let StreamEvent::MessageStop { stop_reason, usage } = first.last().unwrap() else {
        panic!("no stop");
    };
    assert_eq!(*stop_reason, roo_llm::StopReason::ToolUse);
    assert_eq!((usage.input_tokens, usage.cache_read_tokens), (1200, 3000));
    // The `when` turn was picked for the matching request, out of order.
    assert!(matches!(
        scripted[1].last(),
        Some(StreamEvent::MessageStop {
            stop_reason: roo_llm::StopReason::MaxTokens,
            ..
        })
    ));
}

#[tokio::test]
async fn the_mock_binary_protocols_match_the_settings_conventions() {
    // --base-url conventions: Anthropic root vs OpenAI up to /v1.
    let server = MockServer::start().await.unwrap();
    assert!(!server.base_url(Protocol::Anthropic).ends_with("/v1"));
    assert!(server.base_url(Protocol::OpenAi).ends_with("/v1"));
    let s = LlmSettings::defaults(ProviderKind::OpenAi);
    assert_eq!(s.base_url, "https://api.openai.com/v1");
}

/// Broken and cut-off tool arguments are a model mistake, not a broken stream: every
/// provider ends such a call as `ToolCallInvalid` (same error text) and the response
/// completes, while the well-formed call next to it stays intact.
#[tokio::test]
async fn broken_and_cut_tool_arguments_are_invalid_calls_on_every_provider() {
    let big = format!(
        r#"{{"path": "big.txt", "content": "{}TAIL-MARKER"#,
        "y".repeat(20_000)
    );
    let script = format!(
        r#"
- tool_calls:
    - {{name: Glob, input: {{pattern: "*.rs"}}}}
    - {{name: ReadFile, raw_arguments: '{{"path": "a.txt",, }}'}}
- tool_calls:
    - {{name: WriteFile, raw_arguments: '{big}'}}
  stop_reason: max_tokens
"#
    );
    let script = Script::parse(&script, false).unwrap();
    let mut all = Vec::new();
    for kind in [
        None,
        Some(ProviderKind::Anthropic),
        Some(ProviderKind::OpenAi),
    ] {
        let server = MockServer::with_script(script.clone()).await.unwrap();
        let provider = match kind {
            Some(kind) => build_provider(&settings(kind, &server)).unwrap(),
            None => std::sync::Arc::new(ScriptProvider::new(
                ScriptPlayer::new(script.clone(), "inline", Cursors::in_memory()),
                "script",
                200_000,
            )),
        };
        let mut runs = Vec::new();
        for _ in 0..2 {
            let response = roo_llm::collect(provider.stream(request("go")), |_| {})
                .await
                .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            runs.push(response);
        }
        all.push(runs);
    }
    for runs in &all[1..] {
        assert_eq!(runs[0].message, all[0][0].message);
        assert_eq!(runs[0].invalid_tool_calls, all[0][0].invalid_tool_calls);
        assert_eq!(runs[1].invalid_tool_calls, all[0][1].invalid_tool_calls);
        assert_eq!(runs[1].stop_reason, roo_llm::StopReason::MaxTokens);
    }
    let first = &all[1][0];
    let inputs: Vec<_> = first
        .message
        .tool_uses()
        .map(|(_, n, i)| (n, i.clone()))
        .collect();
    assert_eq!(
        inputs,
        [
            ("Glob", serde_json::json!({"pattern": "*.rs"})),
            ("ReadFile", serde_json::json!({}))
        ]
    );
    assert_eq!(first.invalid_tool_calls.len(), 1);
    assert!(first.invalid_tool_calls[0].error.contains("not valid JSON"));
    let cut = &all[2][1].invalid_tool_calls[0];
    assert_eq!(cut.name, "WriteFile");
    assert!(cut.error.contains("EOF"), "{}", cut.error);
    assert!(
        !cut.error.contains("TAIL-MARKER") && cut.error.len() < 300,
        "{}",
        cut.error
    );
}
