use std::path::PathBuf;

use futures_util::future::BoxFuture;
use serde_json::json;

use super::*;
use crate::tool::{Lookup, ToolRegistry};

struct Fake(&'static str, &'static str);

impl Tool for Fake {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> String {
        self.1.to_string()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"marker": {"type": "string", "description": self.0}}})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }
    fn call<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async { ToolOutput::ok("ran") })
    }
}

fn registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.register(Arc::new(Fake("ReadFile", "reads a file")));
    for (name, description) in [
        (
            "mcp__github__create_issue",
            "Create an issue in a GitHub repository",
        ),
        ("mcp__github__list_issues", "List issues of a repository"),
        (
            "mcp__jira__create_ticket",
            "Open a ticket; like a github issue",
        ),
        ("mcp__weather__forecast", "Weather forecast for a city"),
    ] {
        registry.register_deferred(Arc::new(Fake(name, description)));
    }
    registry.register(Arc::new(ToolSearch::new(registry.downgrade())));
    registry
}

#[test]
fn keywords_rank_name_parts_over_descriptions() {
    let tools = registry().deferred_tools();
    let names = |q: &str, max| -> Vec<String> {
        matches(&tools, q, max)
            .iter()
            .map(|t| t.name().to_string())
            .collect()
    };
    assert_eq!(
        names("github issue", 5),
        [
            "mcp__github__create_issue",
            "mcp__github__list_issues",
            "mcp__jira__create_ticket"
        ]
    );
    assert_eq!(names("GITHUB issue", 1), ["mcp__github__create_issue"]);
    assert_eq!(names("forecast", 5), ["mcp__weather__forecast"]);
    assert!(names("nothing-like-it", 5).is_empty());
    assert_eq!(
        names("select: mcp__weather__forecast ,mcp__nope,ReadFile", 5),
        ["mcp__weather__forecast"],
        "select takes exact deferred names only"
    );
}

#[tokio::test]
async fn search_reveals_matches_and_the_listing_is_reread() {
    let registry = registry();
    let search = registry.get("ToolSearch").unwrap();
    let before = search.description();
    assert!(before.contains("- mcp__weather__forecast"), "{before}");
    assert!(
        !registry
            .specs()
            .iter()
            .any(|s| s.name == "mcp__weather__forecast")
    );

    let ctx = ToolContext::new(PathBuf::from("/"), PathBuf::from("/"));
    let out = search.call(json!({"query": "weather"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content
            .contains("<tool name=\"mcp__weather__forecast\">"),
        "{}",
        out.content
    );
    assert!(
        out.content
            .contains(r#""description":"mcp__weather__forecast""#),
        "schema missing: {}",
        out.content
    );
    assert!(matches!(
        registry.lookup("mcp__weather__forecast"),
        Lookup::Ready(_)
    ));
    assert!(
        registry
            .specs()
            .iter()
            .any(|s| s.name == "mcp__weather__forecast")
    );
    assert!(!search.description().contains("mcp__weather__forecast"));

    let none = search.call(json!({"query": "weather"}), &ctx).await;
    assert!(
        none.is_error
            && none
                .content
                .contains("Deferred tools: mcp__github__create_issue"),
        "{}",
        none.content
    );
    let bad = search.call(json!({"max_results": 2}), &ctx).await;
    assert!(bad.is_error);
}

#[tokio::test]
async fn a_sub_agents_copy_reveals_in_the_copy_not_in_its_parent() {
    // A detached registry (a sub-agent's) carries a ToolSearch bound to itself: what
    // the sub-agent looks up reaches its own next request, and the parent's prompt
    // does not grow with the sub-agent's searches.
    let parent = registry();
    let child = parent.detached();
    let search = child.get(ToolSearch::NAME).unwrap();
    let ctx = ToolContext::new(PathBuf::from("/"), PathBuf::from("/"));
    let out = search
        .call(json!({"query": "select:mcp__weather__forecast"}), &ctx)
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(matches!(
        child.lookup("mcp__weather__forecast"),
        Lookup::Ready(_)
    ));
    assert!(matches!(
        parent.lookup("mcp__weather__forecast"),
        Lookup::Deferred(_)
    ));
    // The copy's listing no longer names it; the parent's still does.
    assert!(
        !child
            .deferred_names()
            .contains(&"mcp__weather__forecast".to_string())
    );
    assert!(
        parent
            .deferred_names()
            .contains(&"mcp__weather__forecast".to_string())
    );
}
