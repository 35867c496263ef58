//! The agent loop against an in-process fake provider: stop conditions, batching,
//! ordering, cancellation, compaction, sessions and turn hooks.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use roo_agent::event::{AgentEvent, CompactionMethod, EventSink, RunOutcome};
use roo_agent::permissions::{DenyApprover, PermissionMode, PermissionPolicy, RuleSet};
use roo_agent::tool::{PermissionTarget, Tool, ToolContext, ToolKind, ToolOutput, ToolRegistry};
use roo_agent::{
    Agent, AgentHook, AgentOptions, CompactionOptions, Session, SharedPolicy, TurnAction,
};
use roo_llm::{
    ContentBlock, EventStream, Message, Provider, Request, Role, StopReason, StreamEvent, Usage,
};
use serde_json::{Value, json};
use tokio::sync::Barrier;
use tokio_util::sync::CancellationToken;

/// One scripted reply of the fake provider.
#[derive(Clone)]
enum Reply {
    /// Text and tool calls (name, input), with the prompt size to report.
    Turn {
        text: String,
        calls: Vec<(String, Value)>,
        input_tokens: u64,
    },
    /// Never answers (for cancel tests).
    Hang,
    /// Fails like a provider refusing the request (HTTP 400).
    Fail,
}

fn turn(text: &str, calls: &[(&str, Value)]) -> Reply {
    Reply::Turn {
        text: text.to_string(),
        calls: calls
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect(),
        input_tokens: 100,
    }
}

fn turn_sized(text: &str, calls: &[(&str, Value)], input_tokens: u64) -> Reply {
    Reply::Turn {
        text: text.to_string(),
        calls: calls
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect(),
        input_tokens,
    }
}

struct FakeProvider {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Request>>,
    window: u64,
    /// The window a local model server would report (`server_context`).
    server_window: Option<u64>,
    next_id: Mutex<u32>,
}

impl FakeProvider {
    fn new(replies: Vec<Reply>) -> Arc<Self> {
        Self::with_window(replies, 200_000)
    }

    fn with_window(replies: Vec<Reply>, window: u64) -> Arc<Self> {
        Arc::new(Self {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
            window,
            server_window: None,
            next_id: Mutex::new(0),
        })
    }

    fn with_server_window(replies: Vec<Reply>, server_window: u64) -> Arc<Self> {
        Arc::new(Self {
            server_window: Some(server_window),
            ..Arc::into_inner(Self::new(replies)).unwrap()
        })
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

impl Provider for FakeProvider {
    fn name(&self) -> &str {
        "fake"
    }
    fn model(&self) -> &str {
        "fake-model"
    }
    fn context_window(&self) -> u64 {
        self.window
    }
    fn server_context(&self) -> BoxFuture<'_, Option<roo_llm::ServerContext>> {
        let tokens = self.server_window;
        Box::pin(async move {
            tokens.map(|tokens| roo_llm::ServerContext {
                tokens,
                server: roo_llm::LocalServer::LlamaServer { slots: Some(1) },
                root: "http://127.0.0.1:8080".into(),
            })
        })
    }
    fn stream(&self, request: Request) -> EventStream {
        self.requests.lock().unwrap().push(request);
        let reply = self.replies.lock().unwrap().pop_front();
        let Some(Reply::Turn {
            text,
            calls,
            input_tokens,
        }) = reply
        else {
            if reply.is_none() {
                panic!("the fake provider ran out of replies");
            }
            if let Some(Reply::Fail) = reply {
                return Box::pin(futures_util::stream::iter([Err(roo_llm::LlmError::Http {
                    provider: "fake".into(),
                    status: 400,
                    message: "prompt is too long".into(),
                })]));
            }
            return Box::pin(futures_util::stream::pending());
        };
        let mut events = Vec::new();
        if !text.is_empty() {
            events.push(StreamEvent::TextDelta { text });
        }
        let has_calls = !calls.is_empty();
        for (name, input) in calls {
            let mut n = self.next_id.lock().unwrap();
            *n += 1;
            let id = format!("call_{n}");
            events.push(StreamEvent::ToolCallStart {
                id: id.clone(),
                name: name.clone(),
            });
            events.push(StreamEvent::ToolCallEnd { id, name, input });
        }
        events.push(StreamEvent::MessageStop {
            stop_reason: if has_calls {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            },
            usage: Usage {
                input_tokens,
                output_tokens: 10,
                ..Usage::default()
            },
        });
        Box::pin(futures_util::stream::iter(events.into_iter().map(Ok)))
    }
}

/// A tool that records calls, optionally waits on a barrier (to prove concurrency)
/// or blocks until cancelled.
struct Probe {
    name: &'static str,
    safe: bool,
    log: Arc<Mutex<Vec<String>>>,
    barrier: Option<Arc<Barrier>>,
    block_until_cancel: bool,
}

impl Tool for Probe {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> String {
        format!("probe {}", self.name)
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }
    fn is_concurrency_safe(&self, _: &Value) -> bool {
        self.safe
    }
    fn permission_target(&self, _: &Value) -> PermissionTarget {
        PermissionTarget::None
    }
    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let tag = input["tag"].as_str().unwrap_or("").to_string();
            self.log.lock().unwrap().push(format!("start {tag}"));
            if let Some(barrier) = &self.barrier {
                barrier.wait().await;
            }
            if self.block_until_cancel {
                ctx.cancel.cancelled().await;
                self.log.lock().unwrap().push(format!("cancelled {tag}"));
                return ToolOutput::error("killed by cancel");
            }
            self.log.lock().unwrap().push(format!("end {tag}"));
            ToolOutput::ok(format!("result {tag}"))
        })
    }
}

struct Fixture {
    dir: PathBuf,
    log: Arc<Mutex<Vec<String>>>,
}

impl Fixture {
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("roo-loop-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self {
            dir,
            log: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn probe(&self, name: &'static str, safe: bool) -> Probe {
        Probe {
            name,
            safe,
            log: self.log.clone(),
            barrier: None,
            block_until_cancel: false,
        }
    }

    fn agent(
        &self,
        provider: Arc<FakeProvider>,
        tools: Vec<Probe>,
        options: AgentOptions,
    ) -> Agent {
        let registry = ToolRegistry::new();
        for tool in tools {
            registry.register(Arc::new(tool));
        }
        let policy: SharedPolicy = Arc::new(RwLock::new(PermissionPolicy::new(
            self.dir.clone(),
            PermissionMode::Default,
            RuleSet::default(),
        )));
        let context = ToolContext::new(self.dir.clone(), self.dir.join("session"));
        Agent::new(
            provider,
            registry,
            policy,
            Arc::new(DenyApprover),
            vec!["system".to_string()],
            context,
            options,
            self.dir.join("plan.md"),
        )
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn run(agent: &mut Agent, input: &str) -> (roo_agent::RunResult, Vec<AgentEvent>) {
    let (sink, mut rx) = EventSink::channel();
    let result = agent.run(input, &sink, CancellationToken::new()).await;
    drop(sink);
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    (result, events)
}

fn tool_results(message: &Message) -> Vec<(String, String)> {
    message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } => Some((tool_use_id.clone(), content.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn ends_when_the_model_answers_without_tools() {
    let fx = Fixture::new();
    let provider = FakeProvider::new(vec![turn("All done.", &[])]);
    let mut agent = fx.agent(provider.clone(), vec![], AgentOptions::default());
    let (result, events) = run(&mut agent, "hello").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    assert_eq!(result.final_text, "All done.");
    assert_eq!(result.turns, 1);
    assert!(matches!(events.last(), Some(AgentEvent::Done { .. })));
    assert_eq!(provider.requests()[0].agent, "agent");
}

#[tokio::test]
async fn safe_calls_run_together_and_results_keep_call_order() {
    let fx = Fixture::new();
    let barrier = Arc::new(Barrier::new(2));
    let mut read = fx.probe("Read", true);
    read.barrier = Some(barrier);
    let edit = fx.probe("Edit", false);
    let provider = FakeProvider::new(vec![
        turn(
            "",
            &[
                ("Read", json!({"tag": "r1"})),
                ("Read", json!({"tag": "r2"})),
                ("Edit", json!({"tag": "e1"})),
            ],
        ),
        turn("done", &[]),
    ]);
    let mut agent = fx.agent(provider.clone(), vec![read, edit], AgentOptions::default());
    // If the two reads did not run at the same time, the barrier would never open.
    let (result, _) = tokio::time::timeout(Duration::from_secs(10), run(&mut agent, "go"))
        .await
        .expect("the two safe calls must run concurrently");
    assert_eq!(result.outcome, RunOutcome::Completed);
    let log = fx.log();
    let edit_start = log.iter().position(|l| l == "start e1").unwrap();
    assert!(log.iter().position(|l| l == "end r1").unwrap() < edit_start);
    assert!(log.iter().position(|l| l == "end r2").unwrap() < edit_start);

    let second = &provider.requests()[1];
    let results = tool_results(second.messages.last().unwrap());
    let order: Vec<&str> = results.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(order, ["result r1", "result r2", "result e1"]);
}

#[tokio::test]
async fn max_turns_stops_with_a_clear_outcome() {
    let fx = Fixture::new();
    let replies = (0..5)
        .map(|i| turn("", &[("Read", json!({"tag": format!("r{i}")}))]))
        .collect();
    let provider = FakeProvider::new(replies);
    let options = AgentOptions {
        max_turns: 3,
        ..AgentOptions::default()
    };
    let mut agent = fx.agent(provider.clone(), vec![fx.probe("Read", true)], options);
    let (result, events) = run(&mut agent, "loop forever").await;
    assert_eq!(result.outcome, RunOutcome::MaxTurns { limit: 3 });
    assert_eq!(provider.requests().len(), 3);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Notice { text } if text.contains("3 turns")))
    );
    // The history still pairs every call with a result.
    let last = agent.messages().last().unwrap();
    assert_eq!(last.role, Role::User);
    assert_eq!(tool_results(last).len(), 1);
}

#[tokio::test]
async fn repeated_unknown_tools_stop_the_run() {
    let fx = Fixture::new();
    let replies = (0..4).map(|_| turn("", &[("Nope", json!({}))])).collect();
    let provider = FakeProvider::new(replies);
    let mut agent = fx.agent(
        provider.clone(),
        vec![fx.probe("Read", true)],
        AgentOptions::default(),
    );
    let (result, _) = run(&mut agent, "x").await;
    assert_eq!(
        result.outcome,
        RunOutcome::UnknownTools {
            names: vec!["Nope".to_string()]
        }
    );
    assert_eq!(provider.requests().len(), 3);
    let results = tool_results(&provider.requests()[1].messages.last().unwrap().clone());
    assert!(results[0].1.contains("Unknown tool \"Nope\""));
    assert!(results[0].1.contains("Read"), "lists the available tools");
}

#[tokio::test]
async fn an_unknown_tool_once_is_just_an_error_result() {
    let fx = Fixture::new();
    let provider = FakeProvider::new(vec![
        turn("", &[("Nope", json!({}))]),
        turn("", &[("Read", json!({"tag": "a"}))]),
        turn("ok", &[]),
    ]);
    let mut agent = fx.agent(
        provider,
        vec![fx.probe("Read", true)],
        AgentOptions::default(),
    );
    let (result, _) = run(&mut agent, "x").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
}

#[tokio::test]
async fn cancel_during_a_tool_stops_it_and_keeps_pairs() {
    let fx = Fixture::new();
    let mut slow = fx.probe("Slow", false);
    slow.block_until_cancel = true;
    let provider = FakeProvider::new(vec![turn(
        "",
        &[
            ("Slow", json!({"tag": "s"})),
            ("Slow", json!({"tag": "never"})),
        ],
    )]);
    let mut agent = fx.agent(provider, vec![slow], AgentOptions::default());
    let (sink, mut rx) = EventSink::channel();
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    let watcher = tokio::spawn(async move {
        while let Some(event) = rx.recv().await {
            if matches!(event, AgentEvent::ToolStart { .. }) {
                canceller.cancel();
            }
        }
    });
    let result = agent.run("go", &sink, cancel).await;
    drop(sink);
    watcher.await.unwrap();
    assert_eq!(result.outcome, RunOutcome::Cancelled);
    assert_eq!(
        fx.log(),
        ["start s", "cancelled s"],
        "the second call never ran"
    );
    let results = tool_results(agent.messages().last().unwrap());
    assert_eq!(results.len(), 2);
    assert!(results[1].1.contains("Interrupted"));
}

#[tokio::test]
async fn cancel_while_waiting_for_the_model() {
    let fx = Fixture::new();
    let provider = FakeProvider::new(vec![Reply::Hang]);
    let mut agent = fx.agent(provider, vec![], AgentOptions::default());
    let (sink, _rx) = EventSink::channel();
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        c.cancel();
    });
    let result = tokio::time::timeout(Duration::from_secs(10), agent.run("x", &sink, cancel))
        .await
        .expect("cancel must end the run");
    assert_eq!(result.outcome, RunOutcome::Cancelled);
    assert_eq!(agent.messages(), &[Message::user_text("x")]);
}

#[tokio::test]
async fn compaction_summarizes_old_rounds_and_keeps_pairs() {
    let fx = Fixture::new();
    // Window of 10k tokens; each reply reports a growing prompt so the loop
    // compacts once it passes 80 %.
    let read = |i: u64, input_tokens: u64| {
        turn_sized(
            "",
            &[(
                "Read",
                json!({"tag": format!("r{i}"), "pad": "x".repeat(4000)}),
            )],
            input_tokens,
        )
    };
    let replies = vec![
        read(0, 2000),
        read(1, 3500),
        read(2, 5000),
        read(3, 6500),
        read(4, 8000), // the next prompt is over 80 % of the window
        turn_sized("SUMMARY: read r0..r4", &[], 500),
        read(5, 3000),
        turn("finished", &[]),
    ];
    let provider = FakeProvider::with_window(replies, 10_000);
    let options = AgentOptions {
        compaction: CompactionOptions {
            threshold: 0.8,
            keep_fraction: 0.3,
            summary_max_tokens: 500,
        },
        ..AgentOptions::default()
    };
    let mut agent = fx.agent(provider.clone(), vec![fx.probe("Read", true)], options);
    let session_path = fx.dir.join("s.jsonl");
    let session = Session::create(session_path.clone(), "s".into(), &fx.dir, "lead").unwrap();
    agent = agent.with_session(session, Vec::new());
    agent.set_instructions(Some("Always use tabs.".to_string()));

    let (result, events) = run(&mut agent, "read everything").await;
    assert_eq!(result.outcome, RunOutcome::Completed, "{events:?}");
    let compactions: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Compaction { method, .. } => Some(*method),
            _ => None,
        })
        .collect();
    assert_eq!(compactions, [CompactionMethod::Summary]);
    // The summary request ended with the instruction; the next request starts with it.
    let requests = provider.requests();
    let summary_request = requests
        .iter()
        .find(|r| {
            r.messages
                .last()
                .unwrap()
                .text()
                .contains("Summarize the conversation")
        })
        .expect("a summary request was sent");
    assert!(
        !summary_request.tools.is_empty(),
        "same tools as normal requests"
    );
    let after = requests.last().unwrap();
    let first = after.messages[0].text();
    assert!(first.contains("SUMMARY: read r0..r4"), "{first}");
    assert!(
        first.contains("Always use tabs."),
        "instructions survive compaction"
    );
    // Every call still has its result.
    let mut repaired = after.messages.clone();
    assert_eq!(roo_agent::repair_chain(&mut repaired), None);

    // The transcript replays to the compacted conversation.
    let restored = Session::open(&session_path).unwrap();
    assert_eq!(restored.messages, agent.messages());
}

#[tokio::test]
async fn compaction_drops_oldest_when_the_summary_would_not_fit() {
    let fx = Fixture::new();
    // One huge early round: summarizing it would not fit the window.
    let replies = vec![
        turn_sized(
            "",
            &[("Read", json!({"tag": "big", "pad": "x".repeat(70_000)}))],
            1000,
        ),
        turn_sized("", &[("Read", json!({"tag": "small"}))], 19_000),
        turn("finished", &[]),
    ];
    let provider = FakeProvider::with_window(replies, 20_000);
    let mut agent = fx.agent(
        provider.clone(),
        vec![fx.probe("Read", true)],
        AgentOptions::default(),
    );
    let (result, events) = run(&mut agent, "the original task").await;
    assert_eq!(result.outcome, RunOutcome::Completed, "{events:?}");
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::Compaction {
            method: CompactionMethod::DropOldest,
            ..
        }
    )));
    let last = provider.requests().last().unwrap().clone();
    assert!(last.messages[0].text().contains("the original task"));
    let mut repaired = last.messages.clone();
    assert_eq!(roo_agent::repair_chain(&mut repaired), None);
}

/// Restores a text after every compaction (how a lead keeps its team state).
struct RestoreAfterCompaction(&'static str);

impl AgentHook for RestoreAfterCompaction {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async { TurnAction::Continue })
    }

    fn after_compaction(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move { Some(self.0.to_string()) })
    }
}

#[tokio::test]
async fn a_hook_restores_its_text_after_compaction() {
    let fx = Fixture::new();
    let read = |i: u64, input_tokens: u64| {
        turn_sized(
            "",
            &[(
                "Read",
                json!({"tag": format!("r{i}"), "pad": "x".repeat(4000)}),
            )],
            input_tokens,
        )
    };
    let replies = vec![
        read(0, 2000),
        read(1, 5000),
        read(2, 8500), // the next prompt is over 80 % of the window
        turn_sized("SUMMARY: read r0..r2", &[], 500),
        turn("finished", &[]),
    ];
    let provider = FakeProvider::with_window(replies, 10_000);
    let options = AgentOptions {
        compaction: CompactionOptions {
            threshold: 0.8,
            keep_fraction: 0.3,
            summary_max_tokens: 500,
        },
        ..AgentOptions::default()
    };
    let mut agent = fx.agent(provider.clone(), vec![fx.probe("Read", true)], options);
    agent.set_instructions(Some("Always use tabs.".to_string()));
    agent.add_hook(Arc::new(RestoreAfterCompaction("TEAM: alice busy")));
    let (result, events) = run(&mut agent, "read everything").await;
    assert_eq!(result.outcome, RunOutcome::Completed, "{events:?}");
    let requests = provider.requests();
    let before: Vec<_> = requests[..3].iter().map(|r| r.messages[0].text()).collect();
    assert!(
        before.iter().all(|t| !t.contains("TEAM: alice busy")),
        "nothing is restored before a compaction"
    );
    let first = requests.last().unwrap().messages[0].text();
    assert!(first.contains("SUMMARY: read r0..r2"), "{first}");
    let (instructions, team) = (
        first
            .find("Always use tabs.")
            .expect("instructions restored"),
        first
            .find("TEAM: alice busy")
            .expect("the hook's text restored"),
    );
    assert!(
        instructions < team,
        "instructions first, then the hooks: {first}"
    );
}

#[tokio::test]
async fn the_pre_compact_hook_runs_once_before_a_compaction() {
    use roo_agent::config::{Hook, HookAction, HookEvent, Source};
    use roo_agent::{CommandHooks, HookSetup};
    let fx = Fixture::new();
    let read = |i: u64, input_tokens: u64| {
        turn_sized(
            "",
            &[("Read", json!({"tag": format!("r{i}")}))],
            input_tokens,
        )
    };
    let replies = vec![
        read(0, 2000),
        read(1, 8500), // the next prompt is over 80 % of the window
        turn_sized("SUMMARY", &[], 500),
        turn("finished", &[]),
    ];
    let provider = FakeProvider::with_window(replies, 10_000);
    let options = AgentOptions {
        compaction: CompactionOptions {
            threshold: 0.8,
            keep_fraction: 0.3,
            summary_max_tokens: 500,
        },
        ..AgentOptions::default()
    };
    let mut agent = fx.agent(provider, vec![fx.probe("Read", true)], options);
    let log = fx.dir.join("compact.log");
    let hook = Hook {
        event: HookEvent::PreCompact,
        condition: None,
        action: HookAction::Command {
            command: format!("cat >> '{}'; echo >> '{}'", log.display(), log.display()),
            timeout_ms: None,
        },
        source: Source::User,
    };
    let (hooks, _) = CommandHooks::new(
        &[hook],
        HookSetup {
            agent_name: "lead".into(),
            team: None,
            session_id: None,
            project_root: fx.dir.clone(),
            context: ToolContext::new(fx.dir.clone(), fx.dir.join("session")),
        },
    );
    agent.add_hook(Arc::new(hooks));
    let (result, events) = run(&mut agent, "read everything").await;
    assert_eq!(result.outcome, RunOutcome::Completed, "{events:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert_eq!(lines[0]["event"], "pre_compact");
    assert!(lines[0]["estimated_tokens"].as_u64().unwrap() > 8000);
}

struct Inbox(Mutex<Vec<String>>);

impl AgentHook for Inbox {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async move { TurnAction::Inject(std::mem::take(&mut *self.0.lock().unwrap())) })
    }
}

/// Stops the run at the top of the turn after the tool call tagged `after` ran, and
/// records what the loop told it.
struct StopAfter {
    after: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    consulted: Mutex<u32>,
}

impl AgentHook for StopAfter {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async move {
            *self.consulted.lock().unwrap() += 1;
            let ran = self
                .log
                .lock()
                .unwrap()
                .contains(&format!("end {}", self.after));
            if ran {
                TurnAction::Stop("shutdown approved".to_string())
            } else {
                TurnAction::Continue
            }
        })
    }
}

#[tokio::test]
async fn a_stop_from_a_turn_hook_ends_the_run_between_two_tool_calls() {
    let fx = Fixture::new();
    let provider = FakeProvider::new(vec![
        turn("", &[("Write", json!({"tag": "first"}))]),
        turn("", &[("Write", json!({"tag": "second"}))]),
        turn("done", &[]),
    ]);
    let mut agent = fx.agent(
        provider.clone(),
        vec![fx.probe("Write", false)],
        AgentOptions::default(),
    );
    let hook = Arc::new(StopAfter {
        after: "first",
        log: fx.log.clone(),
        consulted: Mutex::new(0),
    });
    agent.add_hook(hook.clone());
    let (result, events) = run(&mut agent, "two writes").await;
    assert_eq!(
        result.outcome,
        RunOutcome::Stopped {
            reason: "shutdown approved".to_string()
        },
        "{events:?}"
    );
    // The first call ran, the second was never asked for: one model request only.
    assert_eq!(*fx.log.lock().unwrap(), vec!["start first", "end first"]);
    assert_eq!(provider.requests().len(), 1);
    assert_eq!(result.turns, 1);
    assert_eq!(*hook.consulted.lock().unwrap(), 2);
    assert!(matches!(
        events.last(),
        Some(AgentEvent::Done {
            outcome: RunOutcome::Stopped { .. },
            ..
        })
    ));
    // The history is whole (the call has its result) and the agent runs again.
    let mut history = agent.messages().to_vec();
    assert_eq!(roo_agent::repair_chain(&mut history), None);
    assert!(result.outcome.describe().contains("shutdown approved"));
}

/// Injects one text once the call tagged `after` ran, and counts `injected` calls.
struct InjectAfter {
    after: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    text: Mutex<Option<String>>,
    injected: Mutex<u32>,
}

impl AgentHook for InjectAfter {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async move {
            let ran = self
                .log
                .lock()
                .unwrap()
                .contains(&format!("end {}", self.after));
            match self.text.lock().unwrap().take_if(|_| ran) {
                Some(text) => TurnAction::Inject(vec![text]),
                None => TurnAction::Continue,
            }
        })
    }
    fn injected(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move { *self.injected.lock().unwrap() += 1 })
    }
}

#[tokio::test]
async fn texts_injected_in_the_turn_a_hook_stops_wait_for_the_next_successful_call() {
    let fx = Fixture::new();
    let provider = FakeProvider::new(vec![turn("", &[("Write", json!({"tag": "first"}))])]);
    let mut agent = fx.agent(
        provider.clone(),
        vec![fx.probe("Write", false)],
        AgentOptions::default(),
    );
    agent.add_hook(Arc::new(StopAfter {
        after: "first",
        log: fx.log.clone(),
        consulted: Mutex::new(0),
    }));
    let news = Arc::new(InjectAfter {
        after: "first",
        log: fx.log.clone(),
        text: Mutex::new(Some("late news".to_string())),
        injected: Mutex::new(0),
    });
    agent.add_hook(news.clone());
    let (result, _) = run(&mut agent, "go").await;
    assert!(matches!(result.outcome, RunOutcome::Stopped { .. }));
    // No model call carried them: not delivered, not in the history, but not dropped.
    assert_eq!(*news.injected.lock().unwrap(), 0);
    assert!(!format!("{:?}", agent.messages()).contains("late news"));
}

/// Injects one text at the first turn, counts `injected` calls and records the reasons
/// given to `undeliverable`.
struct InjectOnce {
    text: Mutex<Option<String>>,
    injected: Mutex<u32>,
    undeliverable: Mutex<Vec<String>>,
}

impl InjectOnce {
    fn new(text: &str) -> Arc<InjectOnce> {
        Arc::new(InjectOnce {
            text: Mutex::new(Some(text.to_string())),
            injected: Mutex::new(0),
            undeliverable: Mutex::new(Vec::new()),
        })
    }
}

impl AgentHook for InjectOnce {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async move {
            match self.text.lock().unwrap().take() {
                Some(text) => TurnAction::Inject(vec![text]),
                None => TurnAction::Continue,
            }
        })
    }
    fn injected(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move { *self.injected.lock().unwrap() += 1 })
    }
    fn undeliverable(&self, reason: &str) -> BoxFuture<'_, ()> {
        let reason = reason.to_string();
        Box::pin(async move { self.undeliverable.lock().unwrap().push(reason) })
    }
}

/// Issue 18 item 4: an injected text counts as delivered only once a model call that
/// carried it succeeded. A failed call (the provider refused it, and refused the same
/// request without it too) leaves it undelivered and out of the history; the next call
/// carries it again, once.
#[tokio::test]
async fn injected_texts_are_delivered_only_after_a_successful_call() {
    let fx = Fixture::new();
    let provider = FakeProvider::new(vec![Reply::Fail, Reply::Fail, turn("ok", &[])]);
    let mut agent = fx.agent(provider.clone(), vec![], AgentOptions::default());
    let news = InjectOnce::new("late news");
    agent.add_hook(news.clone());
    let (result, _) = run(&mut agent, "go").await;
    assert!(
        matches!(result.outcome, RunOutcome::Error { .. }),
        "{result:?}"
    );
    let requests = provider.requests();
    assert!(format!("{:?}", requests[0].messages).contains("late news"));
    // The same request without it was refused too: it was not the cause.
    assert!(!format!("{:?}", requests[1].messages).contains("late news"));
    assert_eq!(*news.injected.lock().unwrap(), 0);
    assert!(news.undeliverable.lock().unwrap().is_empty());
    assert!(!format!("{:?}", agent.messages()).contains("late news"));

    let (result, _) = run(&mut agent, "again").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let third = format!("{:?}", provider.requests()[2].messages);
    assert_eq!(third.matches("late news").count(), 1, "{third}");
    assert!(!third.contains("could not be delivered"), "{third}");
    assert_eq!(*news.injected.lock().unwrap(), 1);
    assert_eq!(
        format!("{:?}", agent.messages())
            .matches("late news")
            .count(),
        1
    );
}

/// A text the provider refuses every request with (a teammate's message it will never
/// accept) does not jam the agent: the same request is tried once without it, and when
/// that is accepted the text is dropped, its hook told why, and the model told that a
/// message was lost. Without the probe every later call failed the same way.
#[tokio::test]
async fn a_text_the_provider_refuses_is_dropped_once_the_request_without_it_succeeds() {
    let fx = Fixture::new();
    let provider = FakeProvider::new(vec![Reply::Fail, turn("ok", &[])]);
    let mut agent = fx.agent(provider.clone(), vec![], AgentOptions::default());
    let news = InjectOnce::new("poisoned news");
    agent.add_hook(news.clone());
    let (result, _) = run(&mut agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed, "{result:?}");
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    let second = format!("{:?}", requests[1].messages);
    assert!(!second.contains("poisoned news"), "{second}");
    assert!(
        second.contains("1 injected message(s) could not be delivered"),
        "{second}"
    );
    assert_eq!(*news.injected.lock().unwrap(), 0);
    let reasons = news.undeliverable.lock().unwrap().clone();
    assert_eq!(reasons.len(), 1);
    assert!(reasons[0].contains("HTTP 400"), "{reasons:?}");
    let history = format!("{:?}", agent.messages());
    assert!(!history.contains("poisoned news"));
    assert!(history.contains("could not be delivered"));
}

#[tokio::test]
async fn turn_hooks_inject_messages_between_tool_calls() {
    let fx = Fixture::new();
    let provider = FakeProvider::new(vec![
        turn("", &[("Read", json!({"tag": "a"}))]),
        turn("ok", &[]),
    ]);
    let mut agent = fx.agent(
        provider.clone(),
        vec![fx.probe("Read", true)],
        AgentOptions::default(),
    );
    let inbox = Arc::new(Inbox(Mutex::new(vec![
        "<teammate-message from=\"bob\" type=\"text\">hi</teammate-message>".to_string(),
    ])));
    agent.add_hook(inbox.clone());
    let (result, _) = run(&mut agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let first = &provider.requests()[0];
    let text = first.messages.last().unwrap().text();
    assert!(text.contains("<system-reminder>") && text.contains("from=\"bob\""));
    // Delivered once, not again.
    assert!(
        !provider.requests()[1]
            .messages
            .last()
            .unwrap()
            .text()
            .contains("bob")
    );
}

#[tokio::test]
async fn transcript_resumes_the_same_conversation() {
    let fx = Fixture::new();
    let provider = FakeProvider::new(vec![
        turn("", &[("Read", json!({"tag": "a"}))]),
        turn("first answer", &[]),
        turn("second answer", &[]),
    ]);
    let path = fx.dir.join("t.jsonl");
    let session = Session::create(path.clone(), "t".into(), &fx.dir, "lead").unwrap();
    let mut agent = fx
        .agent(
            provider.clone(),
            vec![fx.probe("Read", true)],
            AgentOptions::default(),
        )
        .with_session(session, Vec::new());
    run(&mut agent, "one").await;
    run(&mut agent, "two").await;
    let restored = Session::open(&path).unwrap();
    assert_eq!(restored.messages, agent.messages());
    assert_eq!(restored.messages.len(), 6);
}

/// Approves everything and records what it was asked.
struct YesApprover(Mutex<Vec<String>>);

impl roo_agent::permissions::Approver for YesApprover {
    fn ask<'a>(
        &'a self,
        request: &'a roo_agent::permissions::PermissionRequest,
    ) -> BoxFuture<'a, roo_agent::permissions::Approval> {
        self.0.lock().unwrap().push(request.summary.clone());
        Box::pin(async { roo_agent::permissions::Approval::AllowOnce })
    }
}

#[tokio::test]
async fn plan_mode_round_trip_asks_for_approval_and_restores_the_mode() {
    let fx = Fixture::new();
    let plan_file = fx.dir.join("session/plan.md");
    let policy: SharedPolicy = Arc::new(RwLock::new(PermissionPolicy::new(
        fx.dir.clone(),
        PermissionMode::AcceptEdits,
        RuleSet::default(),
    )));
    let registry = ToolRegistry::new();
    for tool in roo_agent::plan_mode_tools(
        policy.clone(),
        plan_file.clone(),
        roo_agent::PlanApprover::Present,
    ) {
        registry.register(tool);
    }
    let provider = FakeProvider::new(vec![
        turn("", &[("EnterPlanMode", json!({}))]),
        turn(
            "",
            &[("ExitPlanMode", json!({"plan": "1. change a\n2. test"}))],
        ),
        turn("planned", &[]),
    ]);
    let approver = Arc::new(YesApprover(Mutex::new(Vec::new())));
    let context = ToolContext::new(fx.dir.clone(), fx.dir.join("session"));
    let mut agent = Agent::new(
        provider.clone(),
        registry,
        policy.clone(),
        approver.clone(),
        vec!["system".to_string()],
        context,
        AgentOptions::default(),
        plan_file.clone(),
    );
    let (result, _) = run(&mut agent, "plan it").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    // While in plan mode the request carried the plan-mode rules.
    let requests = provider.requests();
    assert!(
        requests[1]
            .system
            .iter()
            .any(|s| s.contains("Plan mode is active"))
    );
    assert!(
        !requests[2]
            .system
            .iter()
            .any(|s| s.contains("Plan mode is active"))
    );
    // Leaving plan mode went to the human, with the plan in the question.
    let asked = approver.0.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains("1. change a"));
    assert_eq!(
        std::fs::read_to_string(&plan_file).unwrap(),
        "1. change a\n2. test"
    );
    assert_eq!(policy.read().unwrap().mode(), PermissionMode::AcceptEdits);
}

#[tokio::test]
async fn a_run_reports_only_its_own_answer() {
    let fx = Fixture::new();
    let provider = FakeProvider::new(vec![turn("first answer", &[]), Reply::Hang]);
    let mut agent = fx.agent(provider, vec![], AgentOptions::default());
    let (first, _) = run(&mut agent, "one").await;
    assert_eq!(first.final_text, "first answer");
    let (sink, _rx) = EventSink::channel();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let second = agent.run("two", &sink, cancel).await;
    assert_eq!(second.outcome, RunOutcome::Cancelled);
    assert_eq!(second.final_text, "", "not the previous run's answer");
}

/// Runs `replies` (with Read calls) against a local server reporting a 10,000-token
/// window, compacting at 80 %; the run must complete. Returns its events.
async fn run_against_server_window(fx: &Fixture, replies: Vec<Reply>) -> Vec<AgentEvent> {
    let provider = FakeProvider::with_server_window(replies, 10_000);
    let options = AgentOptions {
        check_server_window: true,
        compaction: CompactionOptions {
            threshold: 0.8,
            keep_fraction: 0.3,
            summary_max_tokens: 500,
        },
        ..AgentOptions::default()
    };
    let mut agent = fx.agent(provider.clone(), vec![fx.probe("Read", true)], options);
    let (result, events) = run(&mut agent, "read").await;
    assert_eq!(result.outcome, RunOutcome::Completed, "{events:?}");
    events
}

/// Review finding (a7a6985e): the server's window is taken a sixth lower because this
/// crate's estimate counts fewer tokens than the server; but once a reply came, the prompt
/// size is the server's own usage count, in the server's tokens. A prompt the server
/// measured at 72 % of its 10,000-token slot is below the 80 % threshold (docs/LLM.md:
/// "compaction (at 80 % of the window)") and must not be compacted.
#[tokio::test]
async fn a_prompt_the_server_measured_below_80_percent_of_its_window_is_not_compacted() {
    let fx = Fixture::new();
    let read = |i: u64| turn_sized("", &[("Read", json!({"tag": format!("r{i}")}))], 7_200);
    let replies = vec![
        read(0),
        read(1),
        read(2),
        turn("done", &[]),
        turn("done", &[]),
        turn("done", &[]),
    ];
    let events = run_against_server_window(&fx, replies).await;
    let compactions = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Compaction { .. }))
        .count();
    assert_eq!(
        compactions, 0,
        "compacted at 72 % of the server's own count"
    );
}

/// And a prompt the server measured past 80 % of its window is compacted.
#[tokio::test]
async fn a_prompt_the_server_measured_past_80_percent_of_its_window_is_compacted() {
    let fx = Fixture::new();
    let read = |i: u64| turn_sized("", &[("Read", json!({"tag": format!("r{i}")}))], 8_200);
    let replies = vec![
        read(0),
        read(1),
        turn_sized("SUMMARY: read", &[], 500),
        read(2),
        turn("done", &[]),
        turn("done", &[]),
    ];
    let events = run_against_server_window(&fx, replies).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Compaction { .. })),
        "{events:?}"
    );
}
