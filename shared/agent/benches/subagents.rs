//! Benchmark: Agent call → the sub-agent's first model request, for the definition
//! path (general-purpose) and the fork path, through the real loop and the mock LLM
//! server (Anthropic wire format, answers instantly). Each request is stamped by the
//! server when it has been read (`RecordedRequest::received_at`); the latency runs from
//! the arrival of the parent's request answered with the Agent call to the arrival of
//! the child's first request — the response, the call's parsing and dispatch, the
//! child's registry, scopes, transcript and prompt, on one clock.
//!
//! `cargo bench -p roo-agent --bench subagents` (`ROO_BENCH_N`, default 25). Results:
//! docs/BENCHMARKS.md ("Sub-agents").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use roo_agent::config::SubagentLimits;
use roo_agent::event::EventSink;
use roo_agent::permissions::{DenyApprover, PermissionMode, PermissionPolicy, RuleSet};
use roo_agent::subagent::{ParentParts, SubagentRuntime};
use roo_agent::tool::{ToolContext, ToolRegistry};
use roo_agent::tools::builtin_tools;
use roo_agent::{Agent, AgentCatalog, AgentOptions, Environment, SharedPolicy};
use roo_llm::mock_server::{MockServer, Protocol};
use tokio_util::sync::CancellationToken;

/// Rounds of conversation before the call, so the fork copies a real history.
const HISTORY_TURNS: usize = 6;

fn script(fork: bool) -> String {
    let call = if fork {
        r#"{name: Agent, input: {description: "look", prompt: "look around"}}"#
    } else {
        r#"{name: Agent, input: {description: "look", prompt: "CHILD look around", subagent_type: "general-purpose"}}"#
    };
    let mut turns = String::new();
    for i in 0..HISTORY_TURNS {
        turns.push_str(&format!(
            "    - when: {{last_user_contains: \"step {i}\"}}\n      text: \"noted step {i}: {}\"\n",
            "some context ".repeat(40)
        ));
    }
    format!(
        r#"
agents:
  "*":
    - when: {{system_contains: "general-purpose agent"}}
      text: "child done"
    - when: {{last_user_contains: "<fork-directive>"}}
      text: "fork done"
{turns}    - when: {{last_user_contains: "now delegate"}}
      text: "delegating"
      tool_calls:
        - {call}
    - text: "parent done"
"#
    )
}

async fn once(fork: bool) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let project = base.join("project");
    let roo_home = base.join("home");
    let session = roo_home.join("session");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::create_dir_all(&session).unwrap();
    std::fs::write(project.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    let script = roo_llm::script::Script::parse(&script(fork), false).unwrap();
    let server = MockServer::with_script(script).await.unwrap();
    let mut settings = roo_llm::LlmSettings::defaults(roo_llm::ProviderKind::Anthropic);
    settings.base_url = server.base_url(Protocol::Anthropic);
    settings.api_key = Some("bench-key".into());
    let provider = roo_llm::build_provider(&settings).unwrap();
    let policy: SharedPolicy = Arc::new(RwLock::new(PermissionPolicy::new(
        project.clone(),
        PermissionMode::BypassPermissions,
        RuleSet::default(),
    )));
    let tools = ToolRegistry::new();
    for tool in builtin_tools() {
        tools.register(tool);
    }
    let context = ToolContext::new(project.clone(), session.clone());
    let environment = Environment {
        cwd: project.clone(),
        os: "linux".into(),
        date: "2026-01-01".into(),
        git: None,
    };
    let parts = ParentParts {
        provider: provider.clone(),
        policy: policy.clone(),
        approver: Arc::new(DenyApprover),
        context: context.clone(),
        options: AgentOptions::default(),
        environment: environment.clone(),
        instructions: None,
        lifecycle: Vec::new(),
        skills: None,
        plan_file: session.join("plan.md"),
        catalog: AgentCatalog::new(&roo_home, &project, true, false),
        worktrees: None,
    };
    let runtime = SubagentRuntime::new(parts, SubagentLimits::default(), &tools);
    let (agent_tool, stop) = runtime.tools();
    tools.register(agent_tool);
    tools.register(stop);
    let system = roo_agent::system_prompt(&Default::default(), &environment);
    let mut agent = Agent::new(
        provider,
        tools,
        policy,
        Arc::new(DenyApprover),
        system,
        context,
        AgentOptions::default(),
        session.join("plan.md"),
    );
    agent.add_hook(runtime.notifications());
    let sink = EventSink::discard();
    for i in 0..HISTORY_TURNS {
        agent
            .run(&format!("step {i}"), &sink, CancellationToken::new())
            .await;
    }
    let result = agent
        .run("now delegate src/lib.rs", &sink, CancellationToken::new())
        .await;
    assert!(result.outcome.is_success(), "{:?}", result.outcome);
    let requests = server.requests();
    let is_child = |r: &roo_llm::mock_server::RecordedRequest| {
        let body = r.body.to_string();
        body.contains("general-purpose agent") || body.contains("<fork-directive>")
    };
    let child = requests.iter().position(is_child).expect("a child request");
    // The parent's request just before the child's is the one answered with the call.
    let call = requests[..child]
        .iter()
        .rposition(|r| !is_child(r))
        .unwrap();
    requests[child].received_at - requests[call].received_at
}

fn pct(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let i = ((samples.len() - 1) as f64 * p).round() as usize;
    samples[i].as_secs_f64() * 1000.0
}

fn main() {
    let n: usize = std::env::var("ROO_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "machine: {} cores; n = {n}; history before the call: {HISTORY_TURNS} rounds",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let started = Instant::now();
    let (mut definition, mut fork) = (Vec::new(), Vec::new());
    for _ in 0..n {
        // Alternate so load hits both alike.
        definition.push(runtime.block_on(once(false)));
        fork.push(runtime.block_on(once(true)));
    }
    for (what, samples) in [
        ("definition (general-purpose)", &mut definition),
        ("fork", &mut fork),
    ] {
        println!(
            "Agent call → first request, {what}: p50 {:.2} ms, p90 {:.2} ms",
            pct(samples, 0.5),
            pct(samples, 0.9)
        );
    }
    println!("total {:.1} s", started.elapsed().as_secs_f64());
}
