//! The order of the tools in an agent's requests, kept for the prompt cache.
//!
//! Tools open the prefix a provider caches (tools → system → messages), so a tool put
//! in among the others changes the prefix of everything after it, the whole
//! conversation included. The registry lists tools by name. An agent sends its first
//! request in that order (after a fork's pinned list), then keeps the order it sent: a
//! tool that appears later — revealed by ToolSearch, a lead's team tools when its team
//! forms, an MCP server that connected late, a skill's own tool — goes after the tools
//! sent before, and one that went away is dropped. The tools sent before then stay a
//! prefix of the new list, and the cache the previous request wrote up to its last
//! tool is read again.

use std::collections::{HashMap, HashSet};

use roo_llm::ToolSpec;

/// The names of the tools the last request sent, in its order.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolOrder {
    names: Vec<String>,
}

impl ToolOrder {
    /// The order of `sent`.
    pub(crate) fn of(sent: &[ToolSpec]) -> Self {
        Self {
            names: sent.iter().map(|spec| spec.name.clone()).collect(),
        }
    }

    /// The tool list of the next request: `pinned` as it is, then the tools of
    /// `current` (the registry's, by name) that were sent before, in the order they
    /// were sent, then the others in `current`'s order.
    pub(crate) fn arrange(
        &self,
        pinned: Option<&[ToolSpec]>,
        current: Vec<ToolSpec>,
    ) -> Vec<ToolSpec> {
        let mut tools: Vec<ToolSpec> = pinned.map(<[ToolSpec]>::to_vec).unwrap_or_default();
        let mut placed: HashSet<String> = tools.iter().map(|spec| spec.name.clone()).collect();
        let mut rest: HashMap<String, ToolSpec> = HashMap::new();
        let mut new = Vec::new();
        let sent: HashSet<&str> = self.names.iter().map(String::as_str).collect();
        for spec in current {
            if placed.contains(&spec.name) {
                continue;
            }
            if sent.contains(spec.name.as_str()) {
                rest.insert(spec.name.clone(), spec);
            } else {
                new.push(spec);
            }
        }
        for name in &self.names {
            if let Some(spec) = rest.remove(name) {
                placed.insert(spec.name.clone());
                tools.push(spec);
            }
        }
        tools.extend(new);
        tools
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.to_string(),
            description: format!("{name} does it"),
            input_schema: json!({"type": "object"}),
        }
    }

    fn names(tools: &[ToolSpec]) -> Vec<&str> {
        tools.iter().map(|t| t.name.as_str()).collect()
    }

    fn registry(list: &[&str]) -> Vec<ToolSpec> {
        let mut list: Vec<&str> = list.to_vec();
        list.sort_unstable();
        list.into_iter().map(spec).collect()
    }

    #[test]
    fn the_first_request_sends_the_registry_order() {
        let tools = ToolOrder::default().arrange(None, registry(&["ReadFile", "Bash", "Agent"]));
        assert_eq!(names(&tools), ["Agent", "Bash", "ReadFile"]);
    }

    #[test]
    fn tools_that_appear_go_after_those_sent_and_gone_ones_are_dropped() {
        let first = ToolOrder::default().arrange(None, registry(&["Agent", "TeamCreate", "Bash"]));
        let order = ToolOrder::of(&first);
        // The team formed: its tools are revealed, some sort before those sent.
        let next = order.arrange(
            None,
            registry(&["Agent", "TeamCreate", "Bash", "SendMessage", "TaskList"]),
        );
        assert_eq!(
            names(&next),
            ["Agent", "Bash", "TeamCreate", "SendMessage", "TaskList"]
        );
        assert_eq!(next[..3], first[..], "the tools sent before stay a prefix");
        // Kept across later requests; a removed tool leaves the others in place.
        let after = ToolOrder::of(&next).arrange(
            None,
            registry(&["Agent", "TeamCreate", "SendMessage", "TaskList", "Aaa"]),
        );
        assert_eq!(
            names(&after),
            ["Agent", "TeamCreate", "SendMessage", "TaskList", "Aaa"]
        );
    }

    #[test]
    fn a_pinned_list_stays_in_front_byte_for_byte() {
        let mut parent_read = spec("ReadFile");
        parent_read.description = "the parent's description".into();
        let pinned = vec![spec("Bash"), parent_read.clone()];
        let current = registry(&["ReadFile", "Bash", "LoadSkill"]);
        let first = ToolOrder::default().arrange(Some(&pinned), current.clone());
        assert_eq!(names(&first), ["Bash", "ReadFile", "LoadSkill"]);
        assert_eq!(first[1], parent_read);
        let next = ToolOrder::of(&first).arrange(
            Some(&pinned),
            registry(&["ReadFile", "Bash", "LoadSkill", "Count"]),
        );
        assert_eq!(names(&next), ["Bash", "ReadFile", "LoadSkill", "Count"]);
    }
}
