//! The tool registry during a run, through the real wire format (mock server): a tool
//! registered or revealed by a call is in the next request's tool list; deferred tools
//! send their schema only once revealed; a call outside a narrowed set is refused when
//! it executes, even though the model called it.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use roo_agent::event::RunOutcome;
use roo_agent::tool::{
    Lookup, Tool, ToolContext, ToolKind, ToolOutput, ToolRegistry, ToolScope, WeakToolRegistry,
};
use roo_agent::tools::builtin_tools;
use serde_json::{Value, json};

use super::common::{Workspace, last_tool_results, request_tools, run_collecting, scripted_agent};

/// A tool that answers with its name.
struct Echo(&'static str);

impl Tool for Echo {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> String {
        format!("{} answers with its name.", self.0)
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"x": {"type": "string"}}})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }
    fn call<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move { ToolOutput::ok(format!("{} ran", self.0)) })
    }
}

/// What ToolSearch and an MCP connection do: registers a new tool and reveals a
/// deferred one in the registry it was built with, during a call. It holds the
/// registry weakly, as a tool registered in it must.
struct Discover(WeakToolRegistry);

impl Tool for Discover {
    fn name(&self) -> &str {
        "Discover"
    }
    fn description(&self) -> String {
        "Registers Fresh and reveals Later.".into()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }
    fn call<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let Some(registry) = self.0.upgrade() else {
                return ToolOutput::error("the registry is gone");
            };
            registry.register(Arc::new(Echo("Fresh")));
            let revealed = registry.reveal(&["Later"]);
            ToolOutput::ok(format!("revealed {revealed:?}"))
        })
    }
}

#[tokio::test]
async fn a_tool_registered_or_revealed_mid_run_is_in_the_next_request() {
    let ws = Workspace::new();
    let tools = ToolRegistry::new();
    tools.register(Arc::new(Discover(tools.downgrade())));
    tools.register_deferred(Arc::new(Echo("Later")));
    assert_eq!(tools.deferred_names(), vec!["Later".to_string()]);
    let (mut agent, server) = scripted_agent(
        &ws,
        r#"
- tool_calls: [{name: Discover, input: {}}]
- tool_calls: [{name: Fresh, input: {}}, {name: Later, input: {x: "y"}}]
- text: "done"
"#,
        tools.clone(),
    )
    .await;
    let (result, _) = run_collecting(&mut agent, "find tools").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(request_tools(&requests[0]), vec!["Discover"]);
    assert_eq!(
        request_tools(&requests[1]),
        vec!["Discover", "Fresh", "Later"],
        "the next request carries the new and the revealed tool"
    );
    let results = last_tool_results(&requests[2]);
    assert!(results.contains("Fresh ran"), "{results}");
    assert!(results.contains("Later ran"), "{results}");
    assert!(tools.deferred_names().is_empty());
}

#[tokio::test]
async fn a_deferred_tool_called_before_it_was_revealed_is_revealed_and_not_run() {
    let ws = Workspace::new();
    let tools = ToolRegistry::new();
    tools.register(Arc::new(Echo("Plain")));
    tools.register_deferred(Arc::new(Echo("Later")));
    let (mut agent, server) = scripted_agent(
        &ws,
        r#"
- tool_calls: [{name: Later, input: {x: "guess"}}]
- tool_calls: [{name: Later, input: {x: "y"}}]
- text: "done"
"#,
        tools.clone(),
    )
    .await;
    let (result, _) = run_collecting(&mut agent, "go").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    let requests = server.requests();
    assert_eq!(request_tools(&requests[0]), vec!["Plain"], "names only");
    let first = last_tool_results(&requests[1]);
    assert!(first.contains("had not been loaded"), "{first}");
    assert!(!first.contains("Later ran"), "{first}");
    // A revealed tool goes after those sent before (the cached prefix stays).
    assert_eq!(request_tools(&requests[1]), vec!["Plain", "Later"]);
    assert!(last_tool_results(&requests[2]).contains("Later ran"));
}

#[tokio::test]
async fn regression_a_call_outside_a_narrowed_set_is_refused_when_it_executes() {
    // A filter that only shapes the schema sent to the model lets a
    // prompt-injected call through. The model here calls WriteFile although it was
    // not offered; nothing may be written.
    let ws = Workspace::new();
    let tools = ToolRegistry::new();
    for tool in builtin_tools() {
        tools.register(tool);
    }
    let scope = ToolScope::allow_only("skill review", &["ReadFile", "Grep", "Glob"]).unwrap();
    let id = tools.narrow(scope);
    let (mut agent, server) = scripted_agent(
        &ws,
        r#"
- tool_calls:
    - {name: WriteFile, input: {path: pwned.txt, content: "x"}}
    - {name: ReadFile, input: {path: src/lib.rs}}
- text: "done"
"#,
        tools.clone(),
    )
    .await;
    let (result, _) = run_collecting(&mut agent, "review").await;
    assert_eq!(result.outcome, RunOutcome::Completed);
    assert!(
        !ws.project.join("pwned.txt").exists(),
        "the refused call must not have run"
    );
    let requests = server.requests();
    assert_eq!(
        request_tools(&requests[0]),
        vec!["Glob", "Grep", "ReadFile"]
    );
    let results = last_tool_results(&requests[1]);
    assert!(
        results.contains("not available in this run (narrowed by skill review)"),
        "{results}"
    );
    assert!(
        results.contains("pub fn add"),
        "the allowed call ran: {results}"
    );
    // Lifting the scope gives the tool back.
    assert!(tools.lift(id));
    assert!(matches!(tools.lookup("WriteFile"), Lookup::Ready(_)));
}

#[test]
fn scopes_add_up_and_never_widen() {
    let tools = ToolRegistry::new();
    for name in ["ReadFile", "WriteFile", "Bash", "mcp__github__create_issue"] {
        tools.register(Arc::new(Echo(name)));
    }
    tools.narrow(ToolScope::deny("sub-agents", &["Bash"]).unwrap());
    tools.narrow(
        ToolScope::allow_only("definition", &["ReadFile", "Bash", "mcp__github__*"]).unwrap(),
    );
    assert_eq!(
        tools.names(),
        vec![
            "ReadFile".to_string(),
            "mcp__github__create_issue".to_string()
        ]
    );
    match tools.lookup("Bash") {
        Lookup::Refused { scope } => assert_eq!(scope, "sub-agents"),
        _ => panic!("Bash must be refused"),
    }
    assert!(matches!(tools.lookup("Nope"), Lookup::Unknown));
    // A detached copy narrows on its own.
    let child = tools.detached();
    child.narrow(ToolScope::deny("background", &["mcp__*"]).unwrap());
    assert_eq!(child.names(), vec!["ReadFile".to_string()]);
    assert_eq!(tools.names().len(), 2);
}

#[test]
fn a_tool_filter_with_a_pattern_or_a_typo_is_an_error() {
    let e = ToolScope::allow_only("skill x", &["Bash(git *)"]).unwrap_err();
    assert!(e.to_string().contains("names whole tools"), "{e}");
    let e = ToolScope::allow_only("skill x", &["readfile"]).unwrap_err();
    assert!(e.to_string().contains("did you mean `ReadFile`"), "{e}");
}

#[test]
fn detach_hooks_follow_a_registry_to_its_copies_once_each() {
    use std::sync::Mutex;
    let registry = ToolRegistry::new();
    let seen: Arc<Mutex<Vec<usize>>> = Arc::default();
    let log = seen.clone();
    registry.on_detach(move |copy| log.lock().unwrap().push(copy.names().len()));
    let child = registry.detached();
    assert_eq!(seen.lock().unwrap().len(), 1);
    let _grandchild = child.detached();
    assert_eq!(
        seen.lock().unwrap().len(),
        2,
        "a copy of a copy inherits the hook once"
    );
    let _sibling = registry.detached();
    assert_eq!(seen.lock().unwrap().len(), 3);
}
