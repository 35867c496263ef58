//! A misbehaving model never kills the run: tool calls with broken or cut-off JSON
//! arguments get an error result the model can correct (bounded retries), and tool
//! calls written as text are run when enabled. Every case goes through the real wire
//! formats: the mock server encodes the scripted turns as Anthropic or OpenAI SSE and
//! the real providers parse them.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use roo_agent::event::{AgentEvent, EventSink, RunOutcome};
use roo_agent::permissions::{DenyApprover, PermissionMode, PermissionPolicy, RuleSet};
use roo_agent::tool::ToolRegistry;
use roo_agent::tools::builtin_tools;
use roo_agent::{Agent, AgentOptions, RunResult, SharedPolicy};
use roo_llm::mock_server::{MockServer, Protocol, RecordedRequest};
use roo_llm::script::Script;
use roo_llm::{
    ContentBlock, LlmSettings, ProviderKind, RetryPolicy, Role, Timeouts, build_provider,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::common::Workspace;

const PROTOCOLS: [ProviderKind; 2] = [ProviderKind::Anthropic, ProviderKind::OpenAi];

struct Run {
    result: RunResult,
    events: Vec<AgentEvent>,
    requests: Vec<RecordedRequest>,
    agent: Agent,
}

/// Runs one prompt with the built-in tools (acceptEdits, project = the workspace) against
/// the mock server replaying `script` in `kind`'s wire format.
async fn run(ws: &Workspace, kind: ProviderKind, script: &str, text_tool_calls: bool) -> Run {
    let script = Script::parse(script, false).unwrap_or_else(|e| panic!("bad script: {e}"));
    let server = MockServer::with_script(script).await.unwrap();
    let protocol = match kind {
        ProviderKind::Anthropic => Protocol::Anthropic,
        _ => Protocol::OpenAi,
    };
    let mut settings = LlmSettings::defaults(kind);
    settings.base_url = server.base_url(protocol);
    settings.api_key = Some("test-key".into());
    settings.retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    settings.timeouts = Timeouts {
        connect: Duration::from_secs(5),
        request: Duration::from_secs(30),
        idle: Duration::from_secs(10),
    };
    let provider = build_provider(&settings).unwrap();
    let tools = ToolRegistry::new();
    for tool in builtin_tools() {
        tools.register(tool);
    }
    let policy: SharedPolicy = Arc::new(RwLock::new(PermissionPolicy::new(
        ws.project.clone(),
        PermissionMode::AcceptEdits,
        RuleSet::default(),
    )));
    let options = AgentOptions {
        text_tool_calls,
        ..AgentOptions::default()
    };
    let mut agent = Agent::new(
        provider,
        tools,
        policy,
        Arc::new(DenyApprover),
        vec!["system".into()],
        ws.context(100_000),
        options,
        ws.session.join("plan.md"),
    );
    let (sink, mut rx) = EventSink::channel();
    let result = agent
        .run("write the file", &sink, CancellationToken::new())
        .await;
    drop(sink);
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    Run {
        result,
        events,
        requests: server.requests(),
        agent,
    }
}

/// Tool results of the last user message of the conversation sent in `request`.
fn last_results(request: &RecordedRequest) -> String {
    let messages = request.body["messages"].as_array().unwrap();
    // Anthropic: tool_result blocks in the last user message; OpenAI: trailing
    // `role: tool` messages.
    let mut out = String::new();
    for m in messages.iter().rev() {
        match m["role"].as_str() {
            Some("tool") => out.insert_str(0, &m["content"].to_string()),
            Some("user") if out.is_empty() => return m["content"].to_string(),
            _ => break,
        }
    }
    out
}

/// `(name, input, id)` of the tool calls of each assistant message of the agent.
fn assistant_calls(agent: &Agent) -> Vec<Vec<(String, Value, String)>> {
    agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| {
            m.tool_uses()
                .map(|(id, name, input)| (name.to_string(), input.clone(), id.to_string()))
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn broken_tool_arguments_become_an_error_result_the_model_corrects() {
    for kind in PROTOCOLS {
        let ws = Workspace::new();
        let run = run(
            &ws,
            kind,
            r#"
- tool_calls:
    - {name: WriteFile, raw_arguments: '{"path": "out.txt" "content": "hi"}'}
- when: {last_user_contains: "not valid JSON"}
  tool_calls:
    - {name: WriteFile, input: {path: out.txt, content: "hi\n"}}
- text: "Done."
"#,
            false,
        )
        .await;
        assert_eq!(run.result.outcome, RunOutcome::Completed, "{kind}");
        assert_eq!(run.result.final_text, "Done.", "{kind}");
        assert_eq!(
            std::fs::read_to_string(ws.project.join("out.txt")).unwrap(),
            "hi\n",
            "{kind}"
        );
        // The broken call stays in the history with a valid placeholder input, and
        // its error result tells the model what was wrong.
        let calls = assistant_calls(&run.agent);
        assert_eq!(calls[0].len(), 1, "{kind}");
        assert_eq!(
            (calls[0][0].0.as_str(), &calls[0][0].1),
            ("WriteFile", &json!({}))
        );
        let result = run.agent.messages()[2].content[0].clone();
        let ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } = result
        else {
            panic!("{kind}: {result:?}");
        };
        assert_eq!(tool_use_id, calls[0][0].2);
        assert!(is_error, "{kind}");
        assert!(content.contains("not valid JSON"), "{kind}: {content}");
        assert!(content.contains("Send the call again"), "{kind}: {content}");
        // The next request was accepted by the wire format with the placeholder.
        assert_eq!(run.requests.len(), 3, "{kind}");
        assert!(last_results(&run.requests[1]).contains("not valid JSON"));
    }
}

#[tokio::test]
async fn a_call_cut_at_max_tokens_asks_for_smaller_calls_without_echoing_the_input() {
    let marker = "TAIL-MARKER-7f3a";
    let big = format!(
        r#"{{"path": "big.txt", "content": "{}{marker}"#,
        "line of a long file\\n".repeat(5_000)
    );
    for kind in PROTOCOLS {
        let ws = Workspace::new();
        let run = run(
            &ws,
            kind,
            &format!(
                r#"
- tool_calls:
    - {{name: WriteFile, raw_arguments: '{big}'}}
  stop_reason: max_tokens
- when: {{last_user_contains: "output limit"}}
  tool_calls:
    - {{name: WriteFile, input: {{path: big.txt, content: "part one\n"}}}}
- text: "Wrote the first part."
"#
            ),
            false,
        )
        .await;
        assert_eq!(run.result.outcome, RunOutcome::Completed, "{kind}");
        assert!(ws.project.join("big.txt").exists(), "{kind}");
        let results = last_results(&run.requests[1]);
        assert!(results.contains("output limit"), "{kind}: {results}");
        assert!(results.contains("cut off"), "{kind}: {results}");
        assert!(
            results.contains("split a large WriteFile"),
            "{kind}: {results}"
        );
        // Neither the error result nor anything else sent back holds the raw input.
        let body = run.requests[1].body.to_string();
        assert!(!body.contains(marker), "{kind}: the raw input was echoed");
        // At most the short excerpt of its start (5,000 lines were sent).
        assert!(body.matches("line of a long file").count() <= 1, "{kind}");
        assert!(results.len() < 1_000, "{kind}: {} chars", results.len());
        assert!(
            run.events
                .iter()
                .any(|e| matches!(e, AgentEvent::Notice { text } if text.contains("output limit"))),
            "{kind}"
        );
    }
}

#[tokio::test]
async fn repeated_malformed_calls_end_the_run_as_not_finished() {
    for kind in PROTOCOLS {
        let ws = Workspace::new();
        let run = run(
            &ws,
            kind,
            r#"
- tool_calls: [{name: WriteFile, raw_arguments: '{"path": '}]
  stop_reason: max_tokens
- tool_calls: [{name: WriteFile, raw_arguments: '{"path": "a" "content": ""}'}]
- tool_calls: [{name: ReadFile, raw_arguments: '[1, 2]'}]
- text: "never reached"
"#,
            false,
        )
        .await;
        assert_eq!(
            run.result.outcome,
            RunOutcome::MalformedToolCalls { turns: 3 },
            "{kind}"
        );
        assert!(!run.result.outcome.is_success());
        assert!(
            run.result
                .outcome
                .describe()
                .contains("invalid arguments 3 turns in a row")
        );
        assert_eq!(run.requests.len(), 3, "{kind}");
        // The history stays valid: every call answered.
        let messages = run.agent.messages();
        assert_eq!(messages.len(), 7, "{kind}");
        assert_eq!(messages.last().unwrap().role, Role::User);
    }
}

#[tokio::test]
async fn a_good_call_resets_the_malformed_streak() {
    let ws = Workspace::new();
    let run = run(
        &ws,
        ProviderKind::OpenAi,
        r#"
- tool_calls: [{name: WriteFile, raw_arguments: '{"path": '}]
- tool_calls: [{name: WriteFile, raw_arguments: '{"path": '}]
- tool_calls:
    - {name: Glob, input: {pattern: "*"}}
    - {name: WriteFile, raw_arguments: '{"path": '}
- tool_calls: [{name: WriteFile, raw_arguments: '{"path": '}]
- text: "Gave up on it."
"#,
        false,
    )
    .await;
    assert_eq!(run.result.outcome, RunOutcome::Completed);
}

const CALL: &str =
    r#"{"name": "WriteFile", "arguments": {"path": "from-text.txt", "content": "written\n"}}"#;

#[tokio::test]
async fn tool_calls_written_as_text_are_run_as_calls() {
    let string_args = r#"{"name": "WriteFile", "arguments": "{\"path\": \"from-text.txt\", \"content\": \"written\\n\"}"}"#;
    let forms = [
        CALL.to_string(),
        format!("```json\n{CALL}\n```"),
        format!("<tool_call>\n{CALL}\n</tool_call>"),
        string_args.to_string(),
    ];
    for kind in PROTOCOLS {
        for text in &forms {
            let ws = Workspace::new();
            let script = serde_json::to_string(&json!([
                {"text": text},
                {"when": {"last_user_contains": "Created"}, "text": "Done."}
            ]))
            .unwrap();
            let run = run(&ws, kind, &script, true).await;
            assert_eq!(run.result.outcome, RunOutcome::Completed, "{kind} {text}");
            assert_eq!(run.result.final_text, "Done.", "{kind} {text}");
            assert_eq!(
                std::fs::read_to_string(ws.project.join("from-text.txt")).unwrap(),
                "written\n",
                "{kind} {text}"
            );
            // The assistant turn carries a proper call, not the text, and the next
            // request sent it back in the wire format with its result.
            let first = &run.agent.messages()[1];
            assert_eq!(first.text(), "", "{kind}");
            let calls = assistant_calls(&run.agent);
            assert_eq!(calls[0].len(), 1);
            assert_eq!(calls[0][0].0, "WriteFile");
            let id = &calls[0][0].2;
            let body = run.requests[1].body.to_string();
            assert!(body.contains(id.as_str()), "{kind}: {body}");
            assert!(last_results(&run.requests[1]).contains("Created"), "{kind}");
            assert!(run.events.iter().any(
                |e| matches!(e, AgentEvent::Notice { text } if text.contains("WriteFile call as text"))
            ));
        }
    }
}

#[tokio::test]
async fn with_text_tool_calls_off_the_text_stays_an_answer() {
    for kind in PROTOCOLS {
        let ws = Workspace::new();
        let script = serde_json::to_string(&json!([{ "text": CALL }])).unwrap();
        let run = run(&ws, kind, &script, false).await;
        assert_eq!(run.result.outcome, RunOutcome::Completed, "{kind}");
        assert_eq!(run.result.final_text, CALL);
        assert!(!ws.project.join("from-text.txt").exists(), "{kind}");
        assert_eq!(run.requests.len(), 1);
    }
}

#[tokio::test]
async fn a_text_call_to_an_unregistered_tool_stays_text() {
    for kind in PROTOCOLS {
        let ws = Workspace::new();
        let text =
            r#"<tool_call>{"name": "DeleteEverything", "arguments": {"path": "/"}}</tool_call>"#;
        let script = serde_json::to_string(&json!([{ "text": text }])).unwrap();
        let run = run(&ws, kind, &script, true).await;
        assert_eq!(run.result.outcome, RunOutcome::Completed, "{kind}");
        assert_eq!(run.result.final_text, text);
        assert!(assistant_calls(&run.agent)[0].is_empty());
        assert_eq!(run.requests.len(), 1);
    }
}
