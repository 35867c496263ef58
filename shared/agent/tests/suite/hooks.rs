//! Command hooks from the config files, run by the loop through the real wire format
//! (mock server) with real shell commands: pre_tool_use blocks (checked on disk),
//! post_tool_use sees the result, `if` filters, hangs and crashes are reported and
//! never hang the agent, an untrusted project's hooks never run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use roo_agent::config::{ConfigFiles, ProjectTrust};
use roo_agent::event::{AgentEvent, RunOutcome};
use roo_agent::tool::ToolRegistry;
use roo_agent::tools::builtin_tools;
use roo_agent::{CommandHooks, HookSetup};
use serde_json::Value;

use super::common::{Workspace, last_tool_results, run_collecting, scripted_agent, write};

fn user_config(ws: &Workspace, text: &str) {
    write(&ws.roo_home.join("config.yaml"), text);
}

fn builtins() -> ToolRegistry {
    let tools = ToolRegistry::new();
    for tool in builtin_tools() {
        tools.register(tool);
    }
    tools
}

/// The hooks of the workspace's three config files, as the builder makes them.
fn command_hooks(ws: &Workspace, trust: ProjectTrust) -> Arc<CommandHooks> {
    let config = ConfigFiles::load(&ws.roo_home, &ws.project, trust).unwrap();
    let (hooks, notices) = CommandHooks::new(
        config.hooks(),
        HookSetup {
            agent_name: "lead".into(),
            team: None,
            session_id: Some("s1".into()),
            project_root: ws.project.clone(),
            context: ws.context(100_000),
        },
    );
    assert!(notices.is_empty(), "{notices:?}");
    Arc::new(hooks)
}

fn notices(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Notice { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_failing_pre_tool_use_hook_blocks_the_call_and_its_stderr_reaches_the_model() {
    let ws = Workspace::new();
    user_config(
        &ws,
        r#"
hooks:
  - event: pre_tool_use
    if: tool == "WriteFile" && path matches "*.secret"
    action:
      type: command
      command: 'echo "no secrets through $TOOL_NAME: $FILE_PATH" >&2; exit 2'
"#,
    );
    let (mut agent, server) = scripted_agent(
        &ws,
        r#"
- tool_calls:
    - {name: WriteFile, input: {path: keys.secret, content: "k"}}
    - {name: WriteFile, input: {path: notes.txt, content: "n"}}
- text: "done"
"#,
        builtins(),
    )
    .await;
    agent.add_hook(command_hooks(&ws, ProjectTrust::Untrusted));
    let (result, events) = run_collecting(&mut agent, "write").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    assert!(
        !ws.project.join("keys.secret").exists(),
        "the blocked call must not have run"
    );
    assert!(
        ws.project.join("notes.txt").exists(),
        "`if` lets the other call through"
    );
    let results = last_tool_results(&server.requests()[1]);
    let secret = ws.project.join("keys.secret");
    assert!(
        results.contains(&format!(
            "no secrets through WriteFile: {}",
            secret.display()
        )),
        "{results}"
    );
    assert!(results.contains("exited with code 2"), "{results}");
    assert!(results.contains("The call was not run"), "{results}");
    assert!(
        notices(&events)
            .iter()
            .any(|n| n.contains("pre_tool_use hook")),
        "{events:?}"
    );
}

#[tokio::test]
async fn post_tool_use_sees_the_result_on_stdin_and_its_failure_reaches_the_model() {
    let ws = Workspace::new();
    let log = ws.project.join("post.json");
    user_config(
        &ws,
        &format!(
            r#"
hooks:
  - event: post_tool_use
    if: tool == "WriteFile"
    action: {{type: command, command: 'cat > "{}"; echo "lint: $FILE_PATH has 1 warning" >&2; exit 1'}}
  - event: post_tool_use
    if: tool == "Bash"
    action: {{type: command, command: 'echo never >> "{}.bash"'}}
"#,
            log.display(),
            log.display()
        ),
    );
    let (mut agent, server) = scripted_agent(
        &ws,
        r#"
- tool_calls: [{name: WriteFile, input: {path: src/new.rs, content: "fn x() {}\n"}}]
- text: "done"
"#,
        builtins(),
    )
    .await;
    agent.add_hook(command_hooks(&ws, ProjectTrust::Untrusted));
    let (result, _) = run_collecting(&mut agent, "write").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&log).unwrap()).unwrap();
    assert_eq!(seen["event"], "post_tool_use");
    assert_eq!(seen["tool_name"], "WriteFile");
    assert_eq!(seen["tool_input"]["path"], "src/new.rs");
    assert_eq!(
        seen["file_path"],
        ws.project.join("src/new.rs").to_string_lossy().as_ref()
    );
    assert_eq!(seen["tool_result"]["is_error"], false);
    assert!(
        seen["tool_result"]["content"]
            .as_str()
            .unwrap()
            .contains("Created"),
        "{seen}"
    );
    let results = last_tool_results(&server.requests()[1]);
    assert!(results.contains("Created"), "{results}");
    assert!(results.contains("has 1 warning"), "{results}");
    assert!(
        !log.with_extension("json.bash").exists(),
        "`if` filtered the Bash hook"
    );
}

/// Whether a process with `marker` in its command line is running.
fn running(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(marker))
            .unwrap_or(false)
    })
}

#[tokio::test]
async fn a_hanging_hook_times_out_is_reported_and_leaves_no_process() {
    let ws = Workspace::new();
    user_config(
        &ws,
        r#"
hooks:
  - event: pre_tool_use
    if: path == "guarded.txt"
    action: {type: command, command: "sleep 31.4159", timeout_ms: 300}
  - event: post_tool_use
    if: path == "w.txt"
    action: {type: command, command: "sleep 31.4158 & wait", timeout_ms: 300}
"#,
    );
    let (mut agent, server) = scripted_agent(
        &ws,
        r#"
- tool_calls:
    - {name: WriteFile, input: {path: guarded.txt, content: "g"}}
    - {name: WriteFile, input: {path: w.txt, content: "w"}}
- text: "done"
"#,
        builtins(),
    )
    .await;
    agent.add_hook(command_hooks(&ws, ProjectTrust::Untrusted));
    let started = Instant::now();
    let (result, events) = run_collecting(&mut agent, "go").await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "hooks must not hang the agent"
    );
    assert_eq!(result.outcome, RunOutcome::Completed);
    // A guard that hangs fails closed.
    assert!(!ws.project.join("guarded.txt").exists());
    assert!(ws.project.join("w.txt").exists());
    let results = last_tool_results(&server.requests()[1]);
    assert!(
        results.contains("did not finish within 300 ms"),
        "{results}"
    );
    let notes = notices(&events);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("post_tool_use hook `sleep 31.4158 & wait`")
                && n.contains("did not finish within 300 ms")),
        "{notes:?}"
    );
    assert!(
        !running("31.4159") && !running("31.4158"),
        "hook processes left behind"
    );
}

#[tokio::test]
async fn a_crashing_hook_is_reported_and_blocks_only_what_it_guards() {
    let ws = Workspace::new();
    user_config(
        &ws,
        r#"
hooks:
  - event: pre_tool_use
    if: tool == "WriteFile"
    action: {type: command, command: 'kill -SEGV $$'}
  - event: stop
    action: {type: command, command: 'kill -ABRT $$'}
"#,
    );
    let (mut agent, server) = scripted_agent(
        &ws,
        r#"
- tool_calls: [{name: WriteFile, input: {path: w.txt, content: "w"}}]
- text: "done"
"#,
        builtins(),
    )
    .await;
    agent.add_hook(command_hooks(&ws, ProjectTrust::Untrusted));
    let (result, events) = run_collecting(&mut agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    assert!(!ws.project.join("w.txt").exists());
    let results = last_tool_results(&server.requests()[1]);
    assert!(
        results.contains("crashed (killed by signal 11)"),
        "{results}"
    );
    let notes = notices(&events);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("stop hook") && n.contains("killed by signal 6")),
        "{notes:?}"
    );
}

#[tokio::test]
async fn regression_an_untrusted_projects_hooks_never_run() {
    let ws = Workspace::new();
    let marker = ws.project.join("project-hook-ran");
    let config = format!(
        "hooks:\n  - event: session_start\n    action: {{type: command, command: 'touch \"{}\"'}}\n",
        marker.display()
    );
    ws.project_config("config.yaml", &config);
    ws.project_config("config.local.yaml", &config);
    for (trust, runs) in [
        (ProjectTrust::Untrusted, false),
        (ProjectTrust::Trusted, true),
    ] {
        let (mut agent, _server) = scripted_agent(&ws, "- text: hi\n", builtins()).await;
        agent.add_hook(command_hooks(&ws, trust));
        let (result, _) = run_collecting(&mut agent, "hello").await;
        assert_eq!(result.outcome, RunOutcome::Completed);
        assert_eq!(marker.exists(), runs, "{trust:?}");
    }
}

#[tokio::test]
async fn session_start_and_prompt_hooks_add_context_and_a_prompt_hook_can_block() {
    let ws = Workspace::new();
    user_config(
        &ws,
        r#"
hooks:
  - event: session_start
    action: {type: command, command: 'echo "Read ARCHITECTURE.md first."'}
  - event: user_prompt_submit
    action:
      type: command
      command: |
        if grep -q '"prompt":"deploy' ; then echo "deploys go through CI" >&2; exit 1; fi
        echo "branch: main"
"#,
    );
    let (mut agent, server) = scripted_agent(&ws, "- text: one\n- text: two\n", builtins()).await;
    agent.add_hook(command_hooks(&ws, ProjectTrust::Untrusted));
    let (result, _) = run_collecting(&mut agent, "hello").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let first = server.requests()[0].body["messages"].to_string();
    assert!(first.contains("Read ARCHITECTURE.md first."), "{first}");
    assert!(first.contains("branch: main"), "{first}");
    let (result, _) = run_collecting(&mut agent, "deploy to prod").await;
    match &result.outcome {
        RunOutcome::Stopped { reason } => {
            assert!(reason.contains("deploys go through CI"), "{reason}")
        }
        other => panic!("expected a blocked prompt, got {other:?}"),
    }
    assert_eq!(
        server.requests().len(),
        1,
        "a blocked prompt reaches no model"
    );
    assert!(
        !agent
            .messages()
            .iter()
            .any(|m| m.text().contains("deploy to prod")),
        "a blocked prompt is not in the conversation"
    );
}

#[test]
fn a_hook_on_an_event_nothing_fires_or_with_a_bad_if_is_a_config_error() {
    for (text, needle) in [
        (
            "hooks: [{event: session_end, action: {type: command, command: x}}]\n",
            "unknown variant `session_end`",
        ),
        (
            "hooks: [{event: stop, if: 'tool = \"x\"', action: {type: command, command: x}}]\n",
            "`hooks[0].if` unknown operator",
        ),
        (
            "hooks: [{event: stop, action: {type: command, command: x, timeout: 5}}]\n",
            "unknown field `timeout`",
        ),
        (
            "hooks: [{event: stop, iff: x, action: {type: command, command: x}}]\n",
            "unknown field `iff`",
        ),
        (
            "hooks: [{event: stop, action: {type: command, command: '  '}}]\n",
            "`hooks[0].action.command` is empty",
        ),
    ] {
        let ws = Workspace::new();
        user_config(&ws, text);
        let e = ConfigFiles::load(&ws.roo_home, &ws.project, ProjectTrust::Untrusted)
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{text}: {e}");
        assert!(e.contains("config.yaml"), "names the file: {e}");
    }
}

/// A tool slower than every hook's timeout.
struct Slow;

impl roo_agent::tool::Tool for Slow {
    fn name(&self) -> &str {
        "Slow"
    }
    fn description(&self) -> String {
        "takes a while".into()
    }
    fn input_schema(&self) -> Value {
        serde_json::json!({"type": "object"})
    }
    fn kind(&self) -> roo_agent::tool::ToolKind {
        roo_agent::tool::ToolKind::Internal
    }
    fn call<'a>(
        &'a self,
        _: Value,
        _: &'a roo_agent::tool::ToolContext,
    ) -> futures_util::future::BoxFuture<'a, roo_agent::tool::ToolOutput> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(800)).await;
            roo_agent::tool::ToolOutput::ok("slow work finished")
        })
    }
}

#[tokio::test]
async fn hook_timeouts_never_bound_the_call_they_surround() {
    // A generic per-call timeout around every tool would cut the Agent tool's own
    // 120 s (after which a foreground sub-agent moves to the background) short.
    // The hook point adds no deadline to the call; a hook's timeout is its own.
    let ws = Workspace::new();
    user_config(
        &ws,
        r#"
hooks:
  - event: pre_tool_use
    action: {type: command, command: "true", timeout_ms: 200}
  - event: post_tool_use
    action: {type: command, command: "true", timeout_ms: 200}
"#,
    );
    let tools = ToolRegistry::new();
    tools.register(Arc::new(Slow));
    let (mut agent, server) = scripted_agent(
        &ws,
        "- tool_calls: [{name: Slow, input: {}}]\n- text: done\n",
        tools,
    )
    .await;
    agent.add_hook(command_hooks(&ws, ProjectTrust::Untrusted));
    let (result, _) = run_collecting(&mut agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let results = last_tool_results(&server.requests()[1]);
    assert!(results.contains("slow work finished"), "{results}");
}
