//! The mock server reports prompt caching as the Anthropic Messages API does, for the
//! requests the Anthropic provider really sends; the OpenAI-compatible path reports
//! none.

use roo_llm::mock_server::MockServer;
use roo_llm::script::Script;
use roo_llm::{
    ContentBlock, Message, ProviderKind, Request, Role, ToolSpec, Usage, build_provider, collect,
};
use serde_json::json;

use super::support::settings;

/// A conversation of `rounds` ReadFile rounds after the first input, with a tool list
/// long enough to be cached on its own (over 1024 tokens).
fn conversation(system: &str, rounds: usize) -> Request {
    let mut messages = vec![Message::user_text("Summarise the logs.")];
    for i in 0..rounds {
        messages.push(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: format!("toolu_{i}"),
                name: "ReadFile".into(),
                input: json!({"path": format!("{i}.log")}),
            }],
        });
        messages.push(Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: format!("toolu_{i}"),
                content: format!("{i} INFO served\n").repeat(300),
                is_error: false,
            }],
        });
    }
    Request {
        system: vec![system.to_owned()],
        messages,
        tools: vec![ToolSpec {
            name: "ReadFile".into(),
            description: "Reads a file. ".repeat(400),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        ..Request::default()
    }
}

async fn usages(kind: ProviderKind, requests: Vec<Request>) -> (Vec<Usage>, MockServer) {
    let mut yaml = String::from("agents:\n  \"*\":\n");
    for _ in &requests {
        yaml.push_str("    - text: ok\n");
    }
    let server = MockServer::with_script(Script::parse(&yaml, false).unwrap())
        .await
        .unwrap();
    let provider = build_provider(&settings(kind, &server)).unwrap();
    let mut usages = Vec::new();
    for request in requests {
        let response = collect(provider.stream(request), |_| {}).await.unwrap();
        usages.push(response.usage);
    }
    (usages, server)
}

#[tokio::test]
async fn anthropic_requests_read_what_earlier_ones_wrote() {
    let rules = "Work carefully. ".repeat(400);
    let requests = vec![
        conversation(&rules, 0),
        conversation(&rules, 0),
        conversation(&rules, 1),
        conversation(&rules, 2),
        conversation(&format!("{rules} The date changed."), 2),
    ];
    let (usages, server) = usages(ProviderKind::Anthropic, requests).await;
    let recorded = server.requests();
    for (usage, request) in usages.iter().zip(&recorded) {
        // What the client got is what the mock recorded, and the total stays the
        // estimate of the whole body.
        assert_eq!(
            request.usage.map(|u| u.context_tokens()),
            Some(usage.context_tokens())
        );
        let bytes = serde_json::to_string(&request.body).unwrap().len() as u64;
        assert_eq!(usage.context_tokens(), bytes.div_ceil(4));
    }
    let [first, again, grown, grown_more, changed] = usages[..] else {
        panic!("{usages:?}");
    };
    assert_eq!(first.cache_read_tokens, 0);
    assert!(first.cache_write_tokens > 1024, "{first:?}");
    // The same request again: everything up to the last breakpoint is read.
    assert_eq!(again.cache_read_tokens, first.cache_write_tokens);
    assert_eq!(again.cache_write_tokens, 0);
    // A conversation that grows reads what the previous request wrote and writes the
    // new round (the log) only.
    assert_eq!(grown.cache_read_tokens, first.cache_write_tokens);
    assert!(grown.cache_write_tokens > 1000, "{grown:?}");
    assert_eq!(
        grown_more.cache_read_tokens,
        grown.cache_read_tokens + grown.cache_write_tokens
    );
    // A changed system prompt: the tools are read (their own breakpoint), the system
    // prompt (1600 tokens) and the conversation are written again.
    assert!(changed.cache_read_tokens > 1024, "{changed:?}");
    assert!(changed.cache_read_tokens < first.cache_write_tokens - 1600);
    assert!(changed.cache_write_tokens > grown_more.cache_read_tokens - changed.cache_read_tokens);
}

/// `request` followed by one turn of `calls` parallel ReadFile calls and their results.
fn with_wide_turn(mut request: Request, calls: usize) -> Request {
    let ids: Vec<String> = (0..calls).map(|i| format!("toolu_wide_{i}")).collect();
    request.messages.push(Message {
        role: Role::Assistant,
        content: ids
            .iter()
            .map(|id| ContentBlock::ToolUse {
                id: id.clone(),
                name: "ReadFile".into(),
                input: json!({"path": format!("{id}.txt")}),
            })
            .collect(),
    });
    request.messages.push(Message {
        role: Role::User,
        content: ids
            .iter()
            .map(|id| ContentBlock::ToolResult {
                tool_use_id: id.clone(),
                content: format!("contents of {id}"),
                is_error: false,
            })
            .collect(),
    });
    request
}

#[tokio::test]
async fn a_turn_wider_than_the_lookback_still_reads_the_previous_request() {
    // Twelve parallel calls add 24 blocks, more than the 20 the API looks back over
    // from the newest breakpoint: the breakpoint kept on the previous user message
    // finds what the previous request wrote.
    let rules = "Work carefully. ".repeat(400);
    let before = conversation(&rules, 1);
    let requests = vec![before.clone(), with_wide_turn(before, 12)];
    let (usages, _server) = usages(ProviderKind::Anthropic, requests).await;
    let [first, wide] = usages[..] else {
        panic!("{usages:?}");
    };
    assert_eq!(wide.cache_read_tokens, first.cache_write_tokens);
}

#[tokio::test]
async fn openai_requests_report_no_cache() {
    let rules = "Work carefully. ".repeat(100);
    let requests = vec![conversation(&rules, 1), conversation(&rules, 1)];
    let (usages, server) = usages(ProviderKind::OpenAi, requests).await;
    for (usage, request) in usages.iter().zip(server.requests()) {
        assert_eq!((usage.cache_read_tokens, usage.cache_write_tokens), (0, 0));
        assert!(usage.input_tokens > 1024);
        assert_eq!(request.usage, Some(*usage));
    }
}
