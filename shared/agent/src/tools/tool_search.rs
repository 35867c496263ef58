//! ToolSearch: finds deferred tools and loads their schemas.
//!
//! A deferred tool is known to the model by name only (listed in this tool's
//! description, which is re-read for every request so the system prompt stays
//! cacheable). ToolSearch matches a query against the names and descriptions of
//! the deferred tools, [reveals](crate::tool::ToolRegistry::reveal) the matches
//! and returns their schemas; from the next request on the client sends those
//! schemas with the others, so this works with every provider. It searches
//! whatever is deferred, not only MCP tools.

use std::fmt::Write as _;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::tool::{
    Tool, ToolContext, ToolKind, ToolOutput, ToolRegistry, TypedTool, WeakToolRegistry,
};

/// Default and largest `max_results`.
const DEFAULT_RESULTS: usize = 5;
const MAX_RESULTS: usize = 20;
/// How much of the description may list deferred names; the rest are counted.
const MAX_LISTING_CHARS: usize = 16 * 1024;

/// Input of ToolSearch.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSearchInput {
    /// Keywords matched against names and descriptions (`github issue`), or `select:name1,name2` for exact names.
    pub query: String,
    #[serde(default)]
    #[schemars(
        range(min = 1, max = MAX_RESULTS),
        extend("description" = format!("Most tools to return (default {DEFAULT_RESULTS}).")),
    )]
    #[allow(
        missing_docs,
        reason = "a doc comment would become part of the tool's input schema, which the model reads; the schema stays as it is"
    )]
    pub max_results: Option<usize>,
}

/// Searches the deferred tools of the registry it is registered in.
pub struct ToolSearch {
    registry: WeakToolRegistry,
}

impl ToolSearch {
    /// The tool's name.
    pub const NAME: &'static str = "ToolSearch";

    /// A ToolSearch over `registry` (held weakly: the registry holds the tool).
    pub fn new(registry: WeakToolRegistry) -> Self {
        Self { registry }
    }
}

/// How well `tool` matches the lowercase `terms` (0: not at all).
pub fn score(name: &str, description: &str, terms: &[String]) -> usize {
    let name = name.to_lowercase();
    let parts: Vec<&str> = name.split(['_', '-']).filter(|p| !p.is_empty()).collect();
    let description = description.to_lowercase();
    terms
        .iter()
        .map(|term| {
            if parts.iter().any(|p| p == term) {
                10
            } else if name.contains(term.as_str()) {
                5
            } else if description.contains(term.as_str()) {
                1
            } else {
                0
            }
        })
        .sum()
}

/// The deferred tools `query` selects, best first, at most `max`.
pub fn matches(tools: &[Arc<dyn Tool>], query: &str, max: usize) -> Vec<Arc<dyn Tool>> {
    let query = query.trim();
    if let Some(names) = query.strip_prefix("select:") {
        return names
            .split(',')
            .map(str::trim)
            .filter_map(|wanted| tools.iter().find(|t| t.name() == wanted).cloned())
            .take(max)
            .collect();
    }
    let terms: Vec<String> = query
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut scored: Vec<(usize, &Arc<dyn Tool>)> = tools
        .iter()
        .map(|t| (score(t.name(), &t.description(), &terms), t))
        .filter(|(s, _)| *s > 0)
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name().cmp(b.1.name())));
    scored
        .into_iter()
        .take(max)
        .map(|(_, t)| t.clone())
        .collect()
}

impl TypedTool for ToolSearch {
    type Input = ToolSearchInput;
    const NAME: &'static str = ToolSearch::NAME;

    fn description(&self) -> String {
        let names = self
            .registry
            .upgrade()
            .map(|r| r.deferred_names())
            .unwrap_or_default();
        let mut text = String::from(
            "Loads deferred tools: those listed below by name, whose schemas are not sent \
             yet. It returns the matches' descriptions and schemas; call them from your next \
             message on.\n\nDeferred tools:",
        );
        if names.is_empty() {
            text.push_str(" (none left: every tool is loaded)");
        }
        let mut listed = 0;
        for name in &names {
            if text.len() + name.len() + 3 > MAX_LISTING_CHARS {
                break;
            }
            let _ = write!(text, "\n- {name}");
            listed += 1;
        }
        if listed < names.len() {
            let _ = write!(
                text,
                "\n…and {} more (search by keywords to find them)",
                names.len() - listed
            );
        }
        text
    }

    /// A sub-agent's copy of the registry gets a ToolSearch that reveals in the copy.
    fn rebind(&self, registry: &ToolRegistry) -> Option<Arc<dyn Tool>> {
        Some(Arc::new(ToolSearch::new(registry.downgrade())))
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        false
    }

    fn summarize(&self, input: &Value) -> Option<String> {
        let query = input.get("query").and_then(Value::as_str).unwrap_or("?");
        Some(format!("ToolSearch({query})"))
    }

    async fn run(&self, input: ToolSearchInput, _ctx: &ToolContext) -> ToolOutput {
        let Some(registry) = self.registry.upgrade() else {
            return ToolOutput::error("failed to search tools: the tool registry is gone");
        };
        let max = input
            .max_results
            .unwrap_or(DEFAULT_RESULTS)
            .clamp(1, MAX_RESULTS);
        let found = matches(&registry.deferred_tools(), &input.query, max);
        if found.is_empty() {
            let left = registry.deferred_names();
            return ToolOutput::error(format!(
                "No deferred tool matches {:?}. {}",
                input.query,
                if left.is_empty() {
                    "Every tool is already loaded; call it directly.".to_string()
                } else {
                    format!("Deferred tools: {}.", left.join(", "))
                }
            ));
        }
        let names: Vec<String> = found.iter().map(|t| t.name().to_string()).collect();
        registry.reveal(&names);
        let mut text = format!(
            "Loaded {} tool(s); call them from your next message on.\n",
            found.len()
        );
        for tool in &found {
            let schema = serde_json::to_string(&tool.input_schema()).unwrap_or_default();
            let _ = write!(
                text,
                "\n<tool name=\"{}\">\n{}\nInput schema: {schema}\n</tool>\n",
                tool.name(),
                tool.description()
            );
        }
        ToolOutput::ok(text)
    }
}

#[cfg(test)]
mod tests;
