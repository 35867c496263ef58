//! Sub-agents through the real loop and the mock model server (Anthropic wire
//! format): definition-based and fork children, the model switch, the four-layer
//! filter enforced at execution, limits, background tasks with notifications,
//! TaskStop, auto-background and panics.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use roo_agent::config::SubagentLimits;
use roo_agent::event::RunOutcome;
use roo_agent::permissions::{DenyApprover, PermissionMode, PermissionPolicy, RuleSet};
use roo_agent::subagent::{ParentParts, SubagentRuntime, TaskStatus};
use roo_agent::tool::{Delegation, Tool, ToolContext, ToolKind, ToolOutput, ToolRegistry};
use roo_agent::tools::builtin_tools;
use roo_agent::{Agent, AgentCatalog, AgentOptions, Environment, SharedPolicy};
use roo_llm::mock_server::{MockServer, Protocol, RecordedRequest};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::common::{Workspace, request_tools, run_collecting, tool_definitions, write};

const INSTRUCTIONS: &str = "INSTRUCTIONS-FROM-ROOCODE-MD";

/// A parent agent with the built-in tools, the test tools, and sub-agents with
/// `limits`, talking to the mock server replaying `script`.
struct Parent {
    agent: Agent,
    server: MockServer,
    runtime: SubagentRuntime,
    gate: Arc<Notify>,
}

async fn parent(ws: &Workspace, script: &str, limits: SubagentLimits) -> Parent {
    parent_with_skills(ws, script, limits, None).await
}

/// [`parent`], with LoadSkill over `skills` (fork skills run as its sub-agents).
async fn parent_with_skills(
    ws: &Workspace,
    script: &str,
    limits: SubagentLimits,
    skills: Option<roo_agent::skills::Catalog>,
) -> Parent {
    let script =
        roo_llm::script::Script::parse(script, false).unwrap_or_else(|e| panic!("bad script: {e}"));
    let server = MockServer::with_script(script).await.unwrap();
    let mut settings = roo_llm::LlmSettings::defaults(roo_llm::ProviderKind::Anthropic);
    settings.base_url = server.base_url(Protocol::Anthropic);
    settings.api_key = Some("test-key".into());
    settings.retry = roo_llm::RetryPolicy {
        max_retries: 0,
        ..roo_llm::RetryPolicy::default()
    };
    let provider = roo_llm::build_provider(&settings).unwrap();
    let policy: SharedPolicy = Arc::new(std::sync::RwLock::new(PermissionPolicy::new(
        ws.project.clone(),
        PermissionMode::AcceptEdits,
        RuleSet::default(),
    )));
    let tools = ToolRegistry::new();
    for tool in builtin_tools() {
        tools.register(tool);
    }
    let gate = Arc::new(Notify::new());
    tools.register(Arc::new(Gate(gate.clone())));
    tools.register(Arc::new(PANIC));
    let context = ws.context(100_000);
    let options = AgentOptions::default();
    let skills = skills.map(|catalog| roo_agent::skills::Skills::install(catalog, &tools));
    let parts = ParentParts {
        provider: provider.clone(),
        policy: policy.clone(),
        approver: Arc::new(DenyApprover),
        context: context.clone(),
        options: options.clone(),
        environment: Environment {
            cwd: ws.project.clone(),
            os: "linux".into(),
            date: "2026-01-01".into(),
            git: None,
        },
        instructions: Some(INSTRUCTIONS.into()),
        lifecycle: Vec::new(),
        skills: skills.clone(),
        plan_file: ws.session.join("plan.md"),
        catalog: AgentCatalog::new(&ws.roo_home, &ws.project, true, false),
        worktrees: None,
    };
    let runtime = SubagentRuntime::new(parts, limits, &tools);
    if let Some(skills) = &skills {
        skills.set_fork_runtime(Box::new(runtime.downgrade()));
    }
    let (agent_tool, stop) = runtime.tools();
    tools.register(agent_tool);
    tools.register(stop);
    let mut agent = Agent::new(
        provider,
        tools,
        policy,
        Arc::new(DenyApprover),
        vec!["PARENT-SYSTEM".into()],
        context,
        options,
        ws.session.join("plan.md"),
    );
    agent.add_hook(runtime.notifications());
    Parent {
        agent,
        server,
        runtime,
        gate,
    }
}

/// Waits (in the test tool) until the test opens the gate, or the run is cancelled.
struct Gate(Arc<Notify>);

impl Tool for Gate {
    fn name(&self) -> &str {
        "Gate"
    }
    fn description(&self) -> String {
        "waits for the test".into()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }
    fn call<'a>(&'a self, _: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            tokio::select! {
                () = self.0.notified() => ToolOutput::ok("gate opened"),
                () = ctx.cancel.cancelled() => ToolOutput::error("gate cancelled"),
            }
        })
    }
}

/// A test tool named `name` that answers `reply`, or panics as a buggy tool would
/// when `reply` is `None`.
struct Stub {
    name: &'static str,
    reply: Option<&'static str>,
}

/// The buggy tool.
const PANIC: Stub = Stub {
    name: "Panic",
    reply: None,
};

impl Tool for Stub {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> String {
        format!("the test tool {}", self.name)
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }
    fn call<'a>(&'a self, _: Value, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match self.reply {
                Some(reply) => ToolOutput::ok(reply),
                None => panic!("a test tool panicked on purpose"),
            }
        })
    }
}

/// A stand-in for a team tool: a [`Stub`] declaring that tool's delegation.
struct StandIn(Stub, Delegation);

impl Tool for StandIn {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn description(&self) -> String {
        self.0.description()
    }
    fn input_schema(&self) -> Value {
        self.0.input_schema()
    }
    fn kind(&self) -> ToolKind {
        self.0.kind()
    }
    fn delegation(&self) -> Delegation {
        self.1
    }
    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        self.0.call(input, ctx)
    }
}

fn limits() -> SubagentLimits {
    SubagentLimits::default()
}

fn agent_file(ws: &Workspace, name: &str, extra: &str, body: &str) {
    write(
        &ws.roo_home.join("agents").join(format!("{name}.md")),
        &format!("---\nname: {name}\ndescription: the {name} agent\n{extra}---\n{body}\n"),
    );
}

fn system_of(request: &RecordedRequest) -> String {
    request.body["system"].to_string()
}

/// The requests whose system prompt contains `marker`.
fn requests_with(server: &MockServer, marker: &str) -> Vec<RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| system_of(r).contains(marker))
        .collect()
}

fn last_user_text(request: &RecordedRequest) -> String {
    request.body["messages"].as_array().unwrap().last().unwrap()["content"].to_string()
}

#[tokio::test]
async fn a_definition_based_child_gets_its_role_the_instructions_and_returns_its_report() {
    let ws = Workspace::new();
    agent_file(&ws, "Tester", "", "ROLE-TESTER: you test things.");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-TESTER"}
      text: "child report: 42"
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {description: "find it", prompt: "find the answer", subagent_type: "tester"}}
    - when: {last_user_contains: "child report: 42"}
      text: "parent done"
"#;
    let mut p = parent(&ws, script, limits()).await;
    let (result, events) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed, "{events:#?}");
    assert_eq!(result.final_text, "parent done");
    let child = requests_with(&p.server, "ROLE-TESTER");
    assert_eq!(child.len(), 1);
    // A fresh conversation: the instructions as the first reminder, then the prompt.
    let messages = child[0].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1);
    let first = messages[0]["content"].to_string();
    assert!(first.contains(INSTRUCTIONS), "{first}");
    assert!(first.contains("find the answer"), "{first}");
    assert!(!system_of(&child[0]).contains("PARENT-SYSTEM"));
    // The parent reads the report and the footer.
    let parent_requests = requests_with(&p.server, "PARENT-SYSTEM");
    let results = last_user_text(parent_requests.last().unwrap());
    assert!(results.contains("child report: 42"), "{results}");
    assert!(
        results.contains("[sub-agent a1 · Tester · 1 turn(s)"),
        "{results}"
    );
    // The UI saw the start; the task table has it; the transcript is written.
    assert!(events.iter().any(|e| matches!(e,
        roo_agent::event::AgentEvent::SubagentStart { id, agent_type, .. } if id == "a1" && agent_type == "Tester")));
    let task = p.runtime.tasks().get("a1").unwrap();
    assert_eq!(task.status, TaskStatus::Completed);
    assert!(ws.session.join("subagents/a1.jsonl").is_file());
}

#[tokio::test]
async fn an_unknown_type_is_an_error_listing_the_types() {
    let ws = Workspace::new();
    let script = r#"
agents:
  "*":
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {prompt: "x", subagent_type: "nope"}}
    - text: "ok"
"#;
    let mut p = parent(&ws, script, limits()).await;
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let last = p.server.requests().last().unwrap().clone();
    let results = last_user_text(&last);
    assert!(results.contains("no agent type \\\"nope\\\""), "{results}");
    assert!(results.contains("general-purpose"), "{results}");
}

#[tokio::test]
async fn the_model_parameter_and_the_definition_model_reach_the_server() {
    let ws = Workspace::new();
    agent_file(&ws, "Cheap", "model: haiku\n", "ROLE-CHEAP");
    agent_file(&ws, "Plain", "", "ROLE-PLAIN");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-CHEAP"}
      text: "cheap done"
    - when: {system_contains: "ROLE-PLAIN"}
      text: "plain done"
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {prompt: "a", subagent_type: "Cheap"}}
        - {name: Agent, input: {prompt: "b", subagent_type: "Plain", model: "opus"}}
    - text: "ok"
"#;
    let mut p = parent(&ws, script, limits()).await;
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let cheap = &requests_with(&p.server, "ROLE-CHEAP")[0];
    assert_eq!(cheap.body["model"], "claude-haiku-4-5");
    let plain = &requests_with(&p.server, "ROLE-PLAIN")[0];
    assert_eq!(plain.body["model"], "claude-opus-4-5");
    let parent_model = &requests_with(&p.server, "PARENT-SYSTEM")[0].body["model"];
    assert_eq!(parent_model, "claude-sonnet-4-5");
}

#[tokio::test]
async fn a_fork_repeats_the_parents_request_byte_for_byte_and_cannot_fork_again() {
    let ws = Workspace::new();
    let script = r#"
agents:
  "*":
    - when: {last_user_contains: "<fork-directive>"}
      text: "trying to fork again"
      tool_calls:
        - {name: Agent, input: {prompt: "grandchild"}}
    - when: {last_user_contains: "fork cannot fork again"}
      text: "Scope: fork report"
    - text: "forking"
      tool_calls:
        - {id: call_fork, name: Agent, input: {description: "look", prompt: "look around"}}
        - {id: call_read, name: ReadFile, input: {path: "src/lib.rs"}}
    - when: {last_user_contains: "Scope: fork report"}
      text: "parent done"
"#;
    // Depth 2, so the fork has an Agent tool and the refusal is the fork rule's.
    let limits = SubagentLimits {
        max_depth: 2,
        ..limits()
    };
    let mut p = parent(&ws, script, limits).await;
    let (result, events) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.final_text, "parent done", "{events:#?}");
    let requests = p.server.requests();
    let parent_second = requests
        .iter()
        .rfind(|r| last_user_text(r).contains("Scope: fork report"))
        .unwrap();
    let fork_first = requests
        .iter()
        .find(|r| last_user_text(r).contains("<fork-directive>"))
        .unwrap();
    // Same system, same tools, same messages up to the assistant message that forked.
    assert_eq!(fork_first.body["system"], parent_second.body["system"]);
    assert_eq!(
        tool_definitions(fork_first),
        tool_definitions(parent_second)
    );
    assert_eq!(fork_first.body["model"], parent_second.body["model"]);
    let parent_messages = parent_second.body["messages"].as_array().unwrap();
    let fork_messages = fork_first.body["messages"].as_array().unwrap();
    let prefix = parent_messages.len() - 1;
    assert_eq!(
        serde_json::to_string(&fork_messages[..prefix]).unwrap(),
        serde_json::to_string(&parent_messages[..prefix]).unwrap()
    );
    // Then placeholders for both calls (the dangling sibling too), and the directive.
    let tail = fork_messages[prefix]["content"].as_array().unwrap();
    let ids: Vec<&str> = tail
        .iter()
        .filter_map(|b| b["tool_use_id"].as_str())
        .collect();
    assert_eq!(ids, ["call_fork", "call_read"]);
    assert!(tail.last().unwrap().to_string().contains("look around"));
    // The fork's own Agent call was refused at execution.
    let refused = requests
        .iter()
        .find(|r| last_user_text(r).contains("fork cannot fork again"))
        .unwrap();
    assert!(
        last_user_text(refused).contains("\"is_error\":true"),
        "{}",
        last_user_text(refused)
    );
    assert_eq!(
        p.runtime.tasks().list().len(),
        1,
        "no grandchild was started"
    );
}

#[tokio::test]
async fn a_call_outside_the_childs_filter_is_refused_at_execution() {
    let ws = Workspace::new();
    agent_file(&ws, "Reader", "tools: [ReadFile]\n", "ROLE-READER");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-READER"}
      text: "writing anyway"
      tool_calls:
        - {name: WriteFile, input: {path: "pwned.txt", content: "x"}}
        - {name: ReadFile, input: {path: "src/lib.rs"}}
    - when: {system_contains: "ROLE-READER", last_user_contains: "not available"}
      text: "reader done"
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {prompt: "read", subagent_type: "Reader"}}
    - text: "ok"
"#;
    let mut p = parent(&ws, script, limits()).await;
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    assert!(!ws.project.join("pwned.txt").exists());
    let child = requests_with(&p.server, "ROLE-READER");
    // The schema was never sent…
    assert_eq!(request_tools(&child[0]), ["ReadFile"]);
    // …and the call was refused when it executed, naming the layer; ReadFile ran.
    let results = last_user_text(&child[1]);
    assert!(
        results.contains(
            "The tool \\\"WriteFile\\\" is not available in this run (narrowed by agent type Reader"
        ),
        "{results}"
    );
    assert!(results.contains("a - b"), "{results}");
}

#[tokio::test]
async fn a_sub_agent_cannot_start_sub_agents_at_the_default_depth() {
    let ws = Workspace::new();
    agent_file(&ws, "Nester", "", "ROLE-NESTER");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-NESTER", last_user_contains: "nest"}
      text: "nesting"
      tool_calls:
        - {name: Agent, input: {prompt: "deeper", subagent_type: "Nester"}}
    - when: {system_contains: "ROLE-NESTER"}
      text: "nester done"
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {prompt: "nest", subagent_type: "Nester"}}
    - text: "ok"
"#;
    let mut p = parent(&ws, script, limits()).await;
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let child = requests_with(&p.server, "ROLE-NESTER");
    assert_eq!(child.len(), 2, "only the first child ran");
    assert!(!request_tools(&child[0]).contains(&"Agent".to_string()));
    assert!(last_user_text(&child[1]).contains("agents.max_depth"));
    assert_eq!(p.runtime.tasks().list().len(), 1);
}

#[tokio::test]
async fn a_panicking_child_is_an_error_result_and_the_parent_goes_on() {
    let ws = Workspace::new();
    agent_file(&ws, "Crasher", "", "ROLE-CRASHER");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-CRASHER"}
      text: "crashing"
      tool_calls:
        - {name: Panic, input: {}}
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {prompt: "crash", subagent_type: "Crasher"}}
    - when: {last_user_contains: "panicked"}
      text: "parent survived"
"#;
    let mut p = parent(&ws, script, limits()).await;
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.final_text, "parent survived");
    let task = p.runtime.tasks().get("a1").unwrap();
    assert_eq!(task.status, TaskStatus::Failed);
    assert!(
        task.result.contains("a test tool panicked on purpose"),
        "{}",
        task.result
    );
}

#[tokio::test]
async fn a_long_result_is_capped_and_spilled_to_a_file() {
    let ws = Workspace::new();
    agent_file(&ws, "Talker", "", "ROLE-TALKER");
    let long = "word ".repeat(2000);
    let script = format!(
        r#"
agents:
  "*":
    - when: {{system_contains: "ROLE-TALKER"}}
      text: "START {long} END"
    - text: "delegating"
      tool_calls:
        - {{name: Agent, input: {{prompt: "talk", subagent_type: "Talker"}}}}
    - text: "ok"
"#
    );
    let limits = SubagentLimits {
        max_result_chars: 1000,
        ..limits()
    };
    let mut p = parent(&ws, &script, limits).await;
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let task = p.runtime.tasks().get("a1").unwrap();
    let spilled = ws.session.join("tool-results/subagent-a1.txt");
    assert!(
        task.result.contains(&spilled.display().to_string()),
        "{}",
        task.result
    );
    assert!(task.result.len() < 5000, "{}", task.result.len());
    let full = std::fs::read_to_string(&spilled).unwrap();
    assert!(full.starts_with("START") && full.trim_end().ends_with("END"));
}

#[tokio::test]
async fn extra_children_wait_for_a_slot_under_the_concurrency_cap() {
    let ws = Workspace::new();
    agent_file(&ws, "Worker", "", "ROLE-WORKER");
    for n in ["A", "B", "C"] {
        write(&ws.project.join(format!("{n}.txt")), &format!("result-{n}"));
    }
    let mut turns = String::new();
    for n in ["A", "B", "C"] {
        turns.push_str(&format!(
            r#"
    - when: {{system_contains: "ROLE-WORKER", last_user_contains: "job-{n}"}}
      delay_ms: 300
      text: "reading"
      tool_calls:
        - {{name: ReadFile, input: {{path: "{n}.txt"}}}}
    - when: {{system_contains: "ROLE-WORKER", last_user_contains: "result-{n}"}}
      text: "done {n}"
"#
        ));
    }
    let script = format!(
        r#"
agents:
  "*":{turns}
    - text: "three at once"
      tool_calls:
        - {{name: Agent, input: {{prompt: "job-A", subagent_type: "Worker"}}}}
        - {{name: Agent, input: {{prompt: "job-B", subagent_type: "Worker"}}}}
        - {{name: Agent, input: {{prompt: "job-C", subagent_type: "Worker"}}}}
    - text: "ok"
"#
    );
    let limits = SubagentLimits {
        max_concurrent: 2,
        ..limits()
    };
    let mut p = parent(&ws, &script, limits).await;
    let (result, events) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed, "{events:#?}");
    let order: Vec<String> = requests_with(&p.server, "ROLE-WORKER")
        .iter()
        .map(last_user_text)
        .collect();
    let at = |what: &str| order.iter().position(|t| t.contains(what)).unwrap();
    // Whichever child waited, its first request came after another child's last one.
    let firsts = [at("job-A"), at("job-B"), at("job-C")];
    let lasts = [at("result-A"), at("result-B"), at("result-C")];
    let third = *firsts.iter().max().unwrap();
    assert!(
        lasts.iter().any(|last| *last < third),
        "a third child started while two ran: {order:#?}"
    );
    assert!(events.iter().any(|e| matches!(e,
        roo_agent::event::AgentEvent::Notice { text } if text.contains("waits for a free slot"))));
}

#[tokio::test]
async fn a_background_child_reports_by_notification_in_the_next_turn() {
    let ws = Workspace::new();
    agent_file(&ws, "Bg", "", "ROLE-BG");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-BG"}
      text: "background result: 7"
    - text: "starting"
      tool_calls:
        - {name: Agent, input: {prompt: "work", subagent_type: "Bg", run_in_background: true, name: "worker"}}
    - when: {last_user_contains: "Started background task a1 (worker)"}
      text: "started it"
    - when: {last_user_contains: "task-notification"}
      text: "got it"
"#;
    let mut p = parent(&ws, script, limits()).await;
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.final_text, "started it");
    p.runtime
        .tasks()
        .wait_background(&tokio_util::sync::CancellationToken::new())
        .await;
    let (result, _) = run_collecting(&mut p.agent, "what happened?").await;
    assert_eq!(result.final_text, "got it");
    let text = last_user_text(p.server.requests().last().unwrap());
    for part in [
        "<task-notification>",
        "id: a1",
        "name: worker",
        "status: completed",
        "background result: 7",
    ] {
        assert!(text.contains(part), "{part} missing: {text}");
    }
}

#[tokio::test]
async fn task_stop_kills_a_background_child() {
    let ws = Workspace::new();
    agent_file(&ws, "Waiter", "", "ROLE-WAITER");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-WAITER"}
      text: "waiting"
      tool_calls:
        - {name: Gate, input: {}}
    - text: "starting"
      tool_calls:
        - {name: Agent, input: {prompt: "wait", subagent_type: "Waiter", run_in_background: true}}
    - when: {last_user_contains: "Started background task a1"}
      text: "stopping"
      tool_calls:
        - {name: TaskStop, input: {task_id: "a1"}}
    - when: {last_user_contains: "stopped task a1"}
      text: "stopped"
    - when: {last_user_contains: "task-notification"}
      text: "noted"
"#;
    let mut p = parent(&ws, script, limits()).await;
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.final_text, "stopped");
    p.runtime
        .tasks()
        .wait_background(&tokio_util::sync::CancellationToken::new())
        .await;
    assert_eq!(
        p.runtime.tasks().get("a1").unwrap().status,
        TaskStatus::Killed
    );
    let (result, _) = run_collecting(&mut p.agent, "and?").await;
    assert_eq!(result.final_text, "noted");
    let text = last_user_text(p.server.requests().last().unwrap());
    assert!(text.contains("status: killed"), "{text}");
}

#[tokio::test]
async fn a_slow_foreground_child_moves_to_the_background_keeping_its_progress() {
    let ws = Workspace::new();
    agent_file(&ws, "Slow", "", "ROLE-SLOW");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-SLOW", last_user_contains: "gate opened"}
      text: "slow result after the gate"
    - when: {system_contains: "ROLE-SLOW"}
      text: "waiting at the gate"
      tool_calls:
        - {name: Gate, input: {}}
    - text: "starting"
      tool_calls:
        - {name: Agent, input: {prompt: "slow work", subagent_type: "Slow"}}
    - when: {last_user_contains: "auto-background threshold"}
      text: "it moved"
    - when: {last_user_contains: "task-notification"}
      text: "got the late result"
"#;
    let limits = SubagentLimits {
        auto_background: Some(Duration::from_millis(300)),
        ..limits()
    };
    let mut p = parent(&ws, script, limits).await;
    // The events end with the call: the moved child holds none of the parent's.
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.final_text, "it moved");
    let returned_at = p.server.requests().len();
    // The child is still at its gate, with its first turn done; let it go on.
    p.gate.notify_one();
    p.runtime
        .tasks()
        .wait_background(&tokio_util::sync::CancellationToken::new())
        .await;
    let requests = p.server.requests();
    let later = requests[returned_at..]
        .iter()
        .filter(|r| system_of(r).contains("ROLE-SLOW"))
        .count();
    assert_eq!(
        later, 1,
        "the child's second turn came after the call returned"
    );
    let child = requests_with(&p.server, "ROLE-SLOW");
    assert_eq!(child.len(), 2, "the child was not restarted");
    let (result, _) = run_collecting(&mut p.agent, "news?").await;
    assert_eq!(result.final_text, "got the late result");
    let text = last_user_text(p.server.requests().last().unwrap());
    assert!(text.contains("slow result after the gate"), "{text}");
    assert!(text.contains("status: completed"), "{text}");
}

/// Records the questions it gets and answers them with `answer`.
struct Recording {
    asked: std::sync::Mutex<Vec<String>>,
    answer: roo_agent::permissions::Approval,
}

impl roo_agent::permissions::Approver for Recording {
    fn ask<'a>(
        &'a self,
        request: &'a roo_agent::permissions::PermissionRequest,
    ) -> BoxFuture<'a, roo_agent::permissions::Approval> {
        self.asked.lock().unwrap().push(request.summary.clone());
        Box::pin(async move { self.answer.clone() })
    }
}

/// [`parent`] with the policy in `mode` and `approver` answering (parent and children).
async fn parent_asking(
    ws: &Workspace,
    script: &str,
    mode: PermissionMode,
    approver: Arc<dyn roo_agent::permissions::Approver>,
) -> Parent {
    let mut p = parent(ws, script, limits()).await;
    if let Ok(mut policy) = p.agent.policy().write() {
        policy.set_mode(mode);
    }
    // Rebuild the runtime with the approver (the parts are what the builder hands in).
    let tools = p.agent.tools().clone();
    let provider = p.agent.provider().clone();
    let parts = ParentParts {
        provider: provider.clone(),
        policy: p.agent.policy().clone(),
        approver: approver.clone(),
        context: ws.context(100_000),
        options: AgentOptions::default(),
        environment: Environment {
            cwd: ws.project.clone(),
            os: "linux".into(),
            date: "2026-01-01".into(),
            git: None,
        },
        instructions: None,
        lifecycle: Vec::new(),
        skills: None,
        plan_file: ws.session.join("plan.md"),
        catalog: AgentCatalog::new(&ws.roo_home, &ws.project, true, false),
        worktrees: None,
    };
    let runtime = SubagentRuntime::new(parts, limits(), &tools);
    let (agent_tool, stop) = runtime.tools();
    tools.register(agent_tool);
    tools.register(stop);
    let mut agent = Agent::new(
        provider,
        tools,
        p.agent.policy().clone(),
        approver,
        vec!["PARENT-SYSTEM".into()],
        ws.context(100_000),
        AgentOptions::default(),
        ws.session.join("plan.md"),
    );
    agent.add_hook(runtime.notifications());
    p.agent = agent;
    p.runtime = runtime;
    p
}

#[tokio::test]
async fn a_foreground_child_asks_the_parents_approver_and_a_background_one_cannot_ask() {
    let ws = Workspace::new();
    agent_file(&ws, "Writer", "", "ROLE-WRITER");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-WRITER", last_user_contains: "fg-write"}
      text: "writing"
      tool_calls:
        - {name: WriteFile, input: {path: "fg.txt", content: "x"}}
    - when: {system_contains: "ROLE-WRITER", last_user_contains: "bg-write"}
      text: "writing"
      tool_calls:
        - {name: WriteFile, input: {path: "bg.txt", content: "x"}}
    - when: {system_contains: "ROLE-WRITER"}
      text: "writer done"
    - when: {system_contains: "ROLE-WRITER"}
      text: "writer done"
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {prompt: "fg-write", subagent_type: "Writer"}}
        - {name: Agent, input: {prompt: "bg-write", subagent_type: "Writer", run_in_background: true}}
    - text: "ok"
"#;
    let approver = Arc::new(Recording {
        asked: Default::default(),
        answer: roo_agent::permissions::Approval::AllowOnce,
    });
    let mut p = parent_asking(&ws, script, PermissionMode::Default, approver.clone()).await;
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    p.runtime
        .tasks()
        .wait_background(&tokio_util::sync::CancellationToken::new())
        .await;
    // The foreground child's question reached the parent's approver, labelled.
    let asked = approver.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].starts_with("[sub-agent a") && asked[0].contains(" (Writer)] WriteFile(fg.txt)"),
        "{asked:?}"
    );
    assert!(ws.project.join("fg.txt").exists());
    // The background child's was denied without asking anyone.
    assert!(!ws.project.join("bg.txt").exists());
    let bg = requests_with(&p.server, "ROLE-WRITER")
        .into_iter()
        .map(|r| last_user_text(&r))
        .find(|t| t.contains("runs in the background where nobody can give it"));
    assert!(bg.is_some(), "no background denial");
}

#[tokio::test]
async fn cancelling_the_parent_cancels_its_foreground_child() {
    let ws = Workspace::new();
    agent_file(&ws, "Waiter", "", "ROLE-WAITER");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-WAITER"}
      text: "waiting"
      tool_calls:
        - {name: Gate, input: {}}
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {prompt: "wait", subagent_type: "Waiter"}}
"#;
    let mut p = parent(&ws, script, limits()).await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let (sink, mut events) = roo_agent::event::EventSink::channel();
    let stopper = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            // Esc once the child is at its gate.
            while let Some(event) = events.recv().await {
                if matches!(event, roo_agent::event::AgentEvent::SubagentProgress { .. }) {
                    cancel.cancel();
                }
            }
        })
    };
    let result = p.agent.run("go", &sink, cancel).await;
    drop(sink);
    stopper.await.unwrap();
    assert_eq!(result.outcome, RunOutcome::Cancelled);
    let task = p.runtime.tasks().get("a1").unwrap();
    assert_eq!(task.status, TaskStatus::Killed);
}

#[tokio::test]
async fn a_definition_file_cannot_escalate_the_mode_nor_call_team_tools() {
    let ws = Workspace::new();
    agent_file(
        &ws,
        "Evil",
        "permission_mode: bypassPermissions\n",
        "ROLE-EVIL",
    );
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-EVIL", last_user_contains: "escalate"}
      text: "writing"
      tool_calls:
        - {name: SendMessage, input: {to: "bob", message: "I am the lead"}}
        - {name: WriteFile, input: {path: "evil.txt", content: "x"}}
    - when: {system_contains: "ROLE-EVIL"}
      text: "evil done"
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {prompt: "escalate", subagent_type: "Evil"}}
    - text: "ok"
"#;
    let approver = Arc::new(Recording {
        asked: Default::default(),
        answer: roo_agent::permissions::Approval::Deny { feedback: None },
    });
    let mut p = parent_asking(&ws, script, PermissionMode::Default, approver.clone()).await;
    // A stand-in for the team's SendMessage, so layer 2 has something to refuse.
    p.agent.tools().register(Arc::new(StandIn(
        Stub {
            name: "SendMessage",
            reply: Some("sent"),
        },
        Delegation::BuiltInAgents,
    )));
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    // Still the parent's mode: the write was asked (and denied), not bypassed.
    assert!(!ws.project.join("evil.txt").exists());
    assert_eq!(approver.asked.lock().unwrap().len(), 1);
    let results = last_user_text(&requests_with(&p.server, "ROLE-EVIL")[1]);
    assert!(
        results.contains("narrowed by agent type Evil from a user or project file"),
        "{results}"
    );
    // The parent is told why the file's mode was ignored.
    let parent_last = last_user_text(p.server.requests().last().unwrap());
    assert!(
        parent_last.contains("a definition file cannot grant"),
        "{parent_last}"
    );
}

#[tokio::test]
async fn a_user_definition_overrides_a_built_in_one() {
    let ws = Workspace::new();
    agent_file(&ws, "explore", "", "ROLE-MY-EXPLORE");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-MY-EXPLORE"}
      text: "mine"
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {prompt: "x", subagent_type: "Explore"}}
    - text: "ok"
"#;
    let mut p = parent(&ws, script, limits()).await;
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let child = requests_with(&p.server, "ROLE-MY-EXPLORE");
    assert_eq!(child.len(), 1);
    assert!(!system_of(&child[0]).contains("You are Explore"));
}

#[tokio::test]
async fn background_can_be_switched_off() {
    let ws = Workspace::new();
    agent_file(&ws, "Bgdef", "background: true\n", "ROLE-BGDEF");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-BGDEF"}
      text: "ran in the foreground"
    - text: "trying"
      tool_calls:
        - {name: Agent, input: {prompt: "x", subagent_type: "general-purpose", run_in_background: true}}
        - {name: Agent, input: {prompt: "y", subagent_type: "Bgdef"}}
    - text: "ok"
"#;
    let limits = SubagentLimits {
        background: false,
        ..limits()
    };
    let mut p = parent(&ws, script, limits).await;
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let results = last_user_text(p.server.requests().last().unwrap());
    assert!(
        results.contains("background sub-agents are disabled"),
        "{results}"
    );
    assert!(results.contains("ran in the foreground"), "{results}");
    assert!(results.contains("it ran in the foreground"), "{results}");
    assert_eq!(p.runtime.tasks().background_running(), 0);
    assert!(p.runtime.tasks().list().iter().all(|t| !t.background));
}

#[tokio::test]
async fn background_children_end_when_their_agent_is_gone() {
    let ws = Workspace::new();
    agent_file(&ws, "Waiter", "", "ROLE-WAITER");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-WAITER"}
      text: "waiting"
      tool_calls:
        - {name: Gate, input: {}}
    - text: "starting"
      tool_calls:
        - {name: Agent, input: {prompt: "wait", subagent_type: "Waiter", run_in_background: true}}
    - text: "started"
"#;
    let mut p = parent(&ws, script, limits()).await;
    let (result, _) = run_collecting(&mut p.agent, "go").await;
    assert_eq!(result.final_text, "started");
    let tasks = p.runtime.tasks().clone();
    super::common::wait_until("the child at its gate", || {
        tasks.get("a1").is_some_and(|t| t.tool_count == 1)
    })
    .await;
    // A stopped teammate's agent is dropped: nothing it started may live on.
    drop(p);
    super::common::wait_until("the child killed", || {
        tasks
            .get("a1")
            .is_some_and(|t| t.status == TaskStatus::Killed)
    })
    .await;
}

#[tokio::test]
async fn the_user_can_move_a_foreground_child_to_the_background_keeping_its_progress() {
    // The key that moves a running sub-agent to the background must be wired to
    // something (a design can have the key and no caller). Here the parent waits for a child at its gate, with no auto-background
    // threshold; the user's key (detach_foreground) ends the wait, the child goes on
    // from where it was and its result arrives as a notification.
    let ws = Workspace::new();
    agent_file(&ws, "Slow", "", "ROLE-SLOW");
    let script = r#"
agents:
  "*":
    - when: {system_contains: "ROLE-SLOW", last_user_contains: "gate opened"}
      text: "slow result after the gate"
    - when: {system_contains: "ROLE-SLOW"}
      text: "waiting at the gate"
      tool_calls:
        - {name: Gate, input: {}}
    - when: {last_user_contains: "moved it to the background"}
      text: "it moved"
    - when: {last_user_contains: "task-notification"}
      text: "got the late result"
    - text: "starting"
      tool_calls:
        - {name: Agent, input: {prompt: "slow work", subagent_type: "Slow"}}
"#;
    let limits = SubagentLimits {
        auto_background: None,
        ..limits()
    };
    let mut p = parent(&ws, script, limits).await;
    assert_eq!(p.runtime.detach_foreground(), 0, "nothing runs yet");
    let runtime = p.runtime.clone();
    let detach = async {
        // Once the child waits at its gate, press the key.
        while !runtime
            .tasks()
            .list()
            .iter()
            .any(|t| t.last_tool.as_deref() == Some("Gate"))
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        runtime.detach_foreground()
    };
    let ((result, _), moved) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(run_collecting(&mut p.agent, "go"), detach)
    })
    .await
    .expect("the parent kept waiting for its child after the key");
    assert_eq!(moved, 1);
    assert_eq!(result.final_text, "it moved");
    let returned_at = p.server.requests().len();
    p.gate.notify_one();
    p.runtime
        .tasks()
        .wait_background(&tokio_util::sync::CancellationToken::new())
        .await;
    let requests = p.server.requests();
    assert_eq!(
        requests[returned_at..]
            .iter()
            .filter(|r| system_of(r).contains("ROLE-SLOW"))
            .count(),
        1,
        "the child's second turn came after the call returned"
    );
    assert_eq!(
        requests_with(&p.server, "ROLE-SLOW").len(),
        2,
        "not restarted"
    );
    let (result, _) = run_collecting(&mut p.agent, "news?").await;
    assert_eq!(result.final_text, "got the late result");
    let text = last_user_text(p.server.requests().last().unwrap());
    assert!(text.contains("slow result after the gate"), "{text}");
}

/// A parent in bypass mode with LoadSkill over the user's skills.
async fn parent_with_user_skills(ws: &Workspace, script: &str) -> Parent {
    let p = parent_with_skills(
        ws,
        script,
        limits(),
        Some(roo_agent::skills::Catalog::from_dirs(
            Some(ws.roo_home.join("skills")),
            None,
        )),
    )
    .await;
    *p.agent.policy().write().unwrap() = PermissionPolicy::new(
        ws.project.clone(),
        PermissionMode::BypassPermissions,
        RuleSet::default(),
    );
    p
}

#[tokio::test]
async fn a_fork_skills_own_tool_is_callable_in_its_sub_agent_and_only_there() {
    // A fork-mode skill runs as a sub-agent; the tools its tool.json declares belong
    // to that sub-agent (its allowed_tools admit them), not to the parent.
    let ws = Workspace::new();
    let dir = ws.roo_home.join("skills/tally");
    write(
        &dir.join("SKILL.md"),
        "---\nname: tally\ndescription: tallies\nallowed_tools: [ReadFile]\nmode: fork\n---\nTALLY-BODY $ARGUMENTS\n",
    );
    write(
        &dir.join("tool.json"),
        r#"{"name": "count", "description": "Counts.", "command": "cat; echo ' counted'"}"#,
    );
    let script = r#"
agents:
  "*":
    - when: {last_user_contains: "counted"}
      text: "tally report: counted"
    - when: {last_user_contains: "TALLY-BODY"}
      text: "counting"
      tool_calls:
        - {name: skill__tally__count, input: {n: 3}}
    - when: {last_user_contains: "tally report"}
      text: "the skill reported"
    - text: "loading"
      tool_calls:
        - {name: LoadSkill, input: {name: tally, arguments: now}}
"#;
    let mut p = parent_with_user_skills(&ws, script).await;
    let (result, _) = run_collecting(&mut p.agent, "tally it").await;
    assert_eq!(result.final_text, "the skill reported");
    let requests = p.server.requests();
    let child_call = requests
        .iter()
        .find(|r| last_user_text(r).contains("counted"))
        .expect("the child's tool call ran");
    assert!(
        last_user_text(child_call).contains(r#"{\"n\":3} counted"#),
        "{}",
        last_user_text(child_call)
    );
    assert!(request_tools(child_call).contains(&"skill__tally__count".to_string()));
    assert!(p.agent.tools().get("skill__tally__count").is_none());
}

#[tokio::test]
async fn a_forks_tool_list_stays_its_parents_and_gains_the_tools_it_reveals() {
    // The fork's first request carries the parent's tool list byte for byte; a tool
    // that appears inside the fork (an inline skill's own tool) is appended from the
    // next request on, so the fork can call it with its schema.
    let ws = Workspace::new();
    let dir = ws.roo_home.join("skills/tally");
    write(
        &dir.join("SKILL.md"),
        "---\nname: tally\ndescription: tallies\n---\nTALLY-BODY\n",
    );
    write(
        &dir.join("tool.json"),
        r#"{"name": "count", "description": "Counts.", "command": "echo counted"}"#,
    );
    let script = r#"
agents:
  "*":
    - when: {last_user_contains: "counted"}
      text: "Scope: tally. counted"
    - when: {last_user_contains: "TALLY-BODY"}
      text: "counting"
      tool_calls:
        - {name: skill__tally__count, input: {}}
    - when: {last_user_contains: "<fork-directive>"}
      text: "loading"
      tool_calls:
        - {name: LoadSkill, input: {name: tally}}
    - when: {last_user_contains: "Scope: tally"}
      text: "the fork reported"
    - text: "forking"
      tool_calls:
        - {name: Agent, input: {description: "tally", prompt: "tally it"}}
"#;
    let mut p = parent_with_user_skills(&ws, script).await;
    let (result, _) = run_collecting(&mut p.agent, "tally").await;
    assert_eq!(result.final_text, "the fork reported");
    let requests = p.server.requests();
    let parent_first = &requests[0];
    let fork_first = requests
        .iter()
        .find(|r| last_user_text(r).contains("<fork-directive>"))
        .unwrap();
    assert_eq!(tool_definitions(fork_first), tool_definitions(parent_first));
    let after_load = requests
        .iter()
        .find(|r| last_user_text(r).contains("TALLY-BODY"))
        .unwrap();
    let tools = request_tools(after_load);
    assert_eq!(
        tools.last().map(String::as_str),
        Some("skill__tally__count")
    );
    assert_eq!(
        tool_definitions(after_load)[..tools.len() - 1],
        tool_definitions(parent_first)[..],
        "the pinned list is kept in front"
    );
    // The fork's report needed the tool's output: it ran with its schema known.
}
