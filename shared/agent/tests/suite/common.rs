//! Shared fixtures: a temp `ROO_HOME`, a temp git project, a tool context.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use roo_agent::tool::ToolContext;
use serde_json::Value;

/// A temp `ROO_HOME`, a git project with a small Rust-like tree, and a session
/// directory outside the project.
pub struct Workspace {
    pub _dir: tempfile::TempDir,
    pub roo_home: PathBuf,
    pub project: PathBuf,
    pub session: PathBuf,
}

impl Workspace {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let roo_home = base.join("roo-home");
        let project = base.join("project");
        let session = roo_home.join("sessions/s1");
        std::fs::create_dir_all(&roo_home).unwrap();
        std::fs::create_dir_all(project.join("src")).unwrap();
        let status = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&project)
            .status()
            .unwrap();
        assert!(status.success());
        write(&project.join(".gitignore"), "target/\n");
        write(
            &project.join("src/lib.rs"),
            "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
        );
        write(&project.join("target/debug/stale.rs"), "pub fn add() {}\n");
        Self {
            _dir: dir,
            roo_home,
            project,
            session,
        }
    }

    /// A tool context running in the project.
    pub fn context(&self, max_result_chars: usize) -> ToolContext {
        let mut ctx = ToolContext {
            max_result_chars,
            ..ToolContext::new(self.project.clone(), self.session.clone())
        };
        ctx.launcher.env.push((
            "ROO_HOME".to_string(),
            self.roo_home.to_string_lossy().into_owned(),
        ));
        ctx
    }

    /// Writes a config file under the project's `.roocode/`.
    pub fn project_config(&self, name: &str, text: &str) {
        write(&self.project.join(".roocode").join(name), text);
    }
}

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Waits until `cond` holds, failing after 10 s with `what`.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An agent of `tools` in the workspace's project (acceptEdits) talking to the mock
/// server, which replays `script` in the Anthropic wire format. Returns the agent and
/// the server (which records every request).
pub async fn scripted_agent(
    ws: &Workspace,
    script: &str,
    tools: roo_agent::tool::ToolRegistry,
) -> (roo_agent::Agent, roo_llm::mock_server::MockServer) {
    use roo_agent::permissions::{DenyApprover, PermissionMode, PermissionPolicy, RuleSet};
    use roo_agent::{Agent, AgentOptions, SharedPolicy};
    use roo_llm::mock_server::{MockServer, Protocol};
    use std::sync::{Arc, RwLock};

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
    let policy: SharedPolicy = Arc::new(RwLock::new(PermissionPolicy::new(
        ws.project.clone(),
        PermissionMode::AcceptEdits,
        RuleSet::default(),
    )));
    let agent = Agent::new(
        provider,
        tools,
        policy,
        Arc::new(DenyApprover),
        vec!["system".into()],
        ws.context(100_000),
        AgentOptions::default(),
        ws.session.join("plan.md"),
    );
    (agent, server)
}

/// Runs `prompt` to its end; returns the result and every event.
pub async fn run_collecting(
    agent: &mut roo_agent::Agent,
    prompt: &str,
) -> (roo_agent::RunResult, Vec<roo_agent::event::AgentEvent>) {
    let (sink, mut rx) = roo_agent::event::EventSink::channel();
    let result = agent
        .run(prompt, &sink, tokio_util::sync::CancellationToken::new())
        .await;
    drop(sink);
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    (result, events)
}

/// Names of the tools sent with a recorded request.
/// The tool definitions of a request without their prompt-cache markers (which sit on
/// the last tool, wherever the list ends).
pub fn tool_definitions(request: &roo_llm::mock_server::RecordedRequest) -> Vec<Value> {
    let mut tools = request.body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for tool in &mut tools {
        if let Some(fields) = tool.as_object_mut() {
            fields.remove("cache_control");
        }
    }
    tools
}

pub fn request_tools(request: &roo_llm::mock_server::RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The tool results of the last user message of a recorded (Anthropic) request.
pub fn last_tool_results(request: &roo_llm::mock_server::RecordedRequest) -> String {
    let messages = request.body["messages"].as_array().unwrap();
    messages.last().unwrap()["content"].to_string()
}
