//! The four layers of a sub-agent's tool filter. Each is a [`ToolScope`] put on the
//! child's own registry, so a call outside it is refused when it executes — whatever
//! tool list the model saw (a fork keeps its parent's list; a prompt injection can
//! name any tool). Scopes add up: a call must pass every layer. Layers 1 to 3 read
//! properties each tool declares, never a list of names kept here (this crate knows
//! no team, yet the team's tools must be filtered too):
//!
//! 1. every tool whose [delegation] is [`Delegation::NoSubAgent`], plus those that
//!    [manage sub-agents] once the depth limit is reached;
//! 2. for definitions from user or project files, every tool reserved to
//!    [`Delegation::BuiltInAgents`];
//! 3. for a background child, every tool that [requires interaction]
//!    ([`background_deny`]);
//! 4. the definition's own `tools` / `disallowed_tools` (or a fork skill's
//!    `allowed_tools`).
//!
//! [delegation]: crate::tool::Tool::delegation
//! [manage sub-agents]: crate::tool::Tool::manages_sub_agents
//! [requires interaction]: crate::tool::Tool::requires_interaction

use crate::tool::{Delegation, ScopeError, Tool, ToolRegistry, ToolScope};

/// Label of layer 3, as the model reads it in a refusal.
pub const BACKGROUND_LABEL: &str = "background sub-agent: nobody can answer it";

/// Layer 1: the tools no sub-agent may call, plus the sub-agent tools once
/// `depth_reached`.
pub fn global_scope(depth_reached: bool) -> ToolScope {
    fn no_sub_agent(tool: &dyn Tool) -> bool {
        tool.delegation() == Delegation::NoSubAgent
    }
    if depth_reached {
        ToolScope::deny_where(
            "sub-agent (team tools, plan mode; the nesting depth limit `agents.max_depth` is reached)",
            |tool| no_sub_agent(tool) || tool.manages_sub_agents(),
        )
    } else {
        ToolScope::deny_where("sub-agent (team tools, plan mode)", no_sub_agent)
    }
}

/// Layer 2, for user and project definitions.
pub fn custom_scope(agent: &str) -> ToolScope {
    ToolScope::deny_where(
        format!("agent type {agent} from a user or project file"),
        |tool| tool.delegation() == Delegation::BuiltInAgents,
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
    use futures_util::future::BoxFuture;
    use serde_json::Value;

    use super::*;
    use crate::tool::{ToolContext, ToolKind, ToolOutput};

    /// A tool with the properties of `TeamCreate`, `SendMessage`, `Agent` or `ReadFile`.
    struct Declared(&'static str, Delegation, bool);

    impl Tool for Declared {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> String {
            String::new()
        }
        fn input_schema(&self) -> Value {
            Value::Null
        }
        fn kind(&self) -> ToolKind {
            ToolKind::Internal
        }
        fn delegation(&self) -> Delegation {
            self.1
        }
        fn manages_sub_agents(&self) -> bool {
            self.2
        }
        fn call<'a>(&'a self, _: Value, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
            Box::pin(async { ToolOutput::ok("") })
        }
    }

    const TEAM_CREATE: Declared = Declared("TeamCreate", Delegation::NoSubAgent, false);
    const SHUTDOWN_RESPONSE: Declared = Declared("ShutdownResponse", Delegation::NoSubAgent, false);
    const SEND_MESSAGE: Declared = Declared("SendMessage", Delegation::BuiltInAgents, false);
    const AGENT: Declared = Declared("Agent", Delegation::BuiltInAgents, true);
    const READ_FILE: Declared = Declared("ReadFile", Delegation::AnyAgent, false);

    fn admits(scope: &ToolScope, tool: &Declared) -> bool {
        scope.admits_tool(tool.0, tool)
    }

    #[test]
    fn every_sub_agent_is_denied_the_team_plan_and_shutdown_tools() {
        let scope = global_scope(false);
        assert!(!admits(&scope, &TEAM_CREATE));
        // A teammate's answer to its lead's shutdown request is its own.
        assert!(!admits(&scope, &SHUTDOWN_RESPONSE));
        assert!(admits(&scope, &READ_FILE) && admits(&scope, &AGENT));
        assert!(!admits(&global_scope(true), &AGENT));
        assert!(admits(&global_scope(true), &SEND_MESSAGE));
    }

    #[test]
    fn a_custom_agent_is_denied_what_only_built_in_agents_may_call() {
        let scope = custom_scope("reviewer");
        assert!(!admits(&scope, &SEND_MESSAGE) && !admits(&scope, &AGENT));
        assert!(admits(&scope, &READ_FILE));
    }
}
