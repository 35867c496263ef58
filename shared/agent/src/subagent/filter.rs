//! The four layers of a sub-agent's tool filter. Each is a [`ToolScope`] put on the
//! child's own registry, so a call outside it is refused when it executes — whatever
//! tool list the model saw (a fork keeps its parent's list; a prompt injection can
//! name any tool). Scopes add up: a call must pass every layer.
//!
//! 1. [`GLOBAL_DENY`] for every sub-agent, plus `Agent` and `TaskStop` once the depth
//!    limit is reached;
//! 2. [`CUSTOM_AGENT_DENY`] for definitions from user or project files;
//! 3. for a background child, every tool that [requires interaction]
//!    ([`background_deny`]) — judged per tool, so a new tool is never silently
//!    missing from, or wrongly added to, a hand-kept list that someone forgot to
//!    update;
//! 4. the definition's own `tools` / `disallowed_tools` (or a fork skill's
//!    `allowed_tools`).
//!
//! [requires interaction]: crate::tool::Tool::requires_interaction

use crate::tool::{ScopeError, ToolRegistry, ToolScope};

/// Denied to every sub-agent. Team management belongs to the lead (a sub-agent that
/// created or deleted a team would change the lead's team under it), and the plan-mode
/// tools are bound to the parent's policy and plan file: a child switching them would
/// switch its parent's mode (a sub-agent plans by answering; see the Plan agent).
/// `ShutdownResponse` answers the lead's request to shut its teammate down: the
/// teammate's to give, never a sub-agent's.
pub const GLOBAL_DENY: [&str; 6] = [
    "TeamCreate",
    "TeamMerge",
    "TeamDelete",
    "EnterPlanMode",
    "ExitPlanMode",
    "ShutdownResponse",
];

/// Also denied to agents defined in user or project files, which may come from a
/// cloned repository or the internet: such a file must not speak for the lead to its
/// teammates (`SendMessage`), rewrite the team's shared task list (`TaskCreate`,
/// `TaskUpdate`), stop work (`TaskStop`) or fan out into more agents (`Agent`), even
/// where the depth limit would allow it. Built-in definitions are reviewed with the
/// code and are not narrowed by this layer.
pub const CUSTOM_AGENT_DENY: [&str; 5] = [
    "SendMessage",
    "TaskCreate",
    "TaskUpdate",
    "TaskStop",
    "Agent",
];

/// Label of layer 3, as the model reads it in a refusal.
pub const BACKGROUND_LABEL: &str = "background sub-agent: nobody can answer it";

/// Layer 1: the global deny list, plus the sub-agent tools once `depth_reached`.
pub fn global_scope(depth_reached: bool) -> Result<ToolScope, ScopeError> {
    let mut names: Vec<&str> = GLOBAL_DENY.to_vec();
    let label = if depth_reached {
        names.extend(["Agent", "TaskStop"]);
        "sub-agent (team tools, plan mode; the nesting depth limit `agents.max_depth` is reached)"
    } else {
        "sub-agent (team tools, plan mode)"
    };
    ToolScope::deny(label, &names)
}

/// Layer 2, for user and project definitions.
pub fn custom_scope(agent: &str) -> Result<ToolScope, ScopeError> {
    ToolScope::deny(
        format!("agent type {agent} from a user or project file"),
        &CUSTOM_AGENT_DENY,
    )
}

/// Layer 3: the tools of `registry` that need a human at hand. `None` when it has none.
pub fn background_deny(registry: &ToolRegistry) -> Result<Option<ToolScope>, ScopeError> {
    let names: Vec<String> = registry
        .names()
        .into_iter()
        .filter(|name| registry.get(name).is_some_and(|t| t.requires_interaction()))
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    ToolScope::deny(BACKGROUND_LABEL, &names).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sub_agent_is_denied_the_team_plan_and_shutdown_tools() {
        let scope = global_scope(false).unwrap();
        for name in GLOBAL_DENY {
            assert!(!scope.admits(name), "{name}");
        }
        // A teammate's answer to its lead's shutdown request is its own.
        assert!(!scope.admits("ShutdownResponse"));
        assert!(scope.admits("ReadFile") && scope.admits("Agent"));
        assert!(!global_scope(true).unwrap().admits("Agent"));
    }
}
