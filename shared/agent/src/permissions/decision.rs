//! What the policy decides about one call and what the human is asked: plain data,
//! shared by the policy, the loop and the events a UI reads, so that none of them
//! needs the policy itself.

use serde::{Deserialize, Serialize};

/// The verdict of the policy on one call. `Ask` carries what the human is asked (a
/// [`PermissionRequest`]); inside the policy, a layer's verdict carries only the reason
/// (`PermissionDecision<String>`) until [`PermissionDecision::map_ask`] builds the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum PermissionDecision<Q = PermissionRequest> {
    /// Run the call.
    Allow,
    /// Do not run it; the model gets `reason` as an error result.
    Deny {
        /// Why, for the model.
        reason: String,
    },
    /// Ask the human.
    Ask(Q),
}

impl<Q> PermissionDecision<Q> {
    /// The same verdict with what `Ask` carries turned by `f`.
    pub fn map_ask<R>(self, f: impl FnOnce(Q) -> R) -> PermissionDecision<R> {
        match self {
            PermissionDecision::Allow => PermissionDecision::Allow,
            PermissionDecision::Deny { reason } => PermissionDecision::Deny { reason },
            PermissionDecision::Ask(question) => PermissionDecision::Ask(f(question)),
        }
    }
}

/// What the human is asked to approve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionRequest {
    /// Tool name.
    pub tool: String,
    /// One-line summary of the call, e.g. `Bash(cargo test)`.
    pub summary: String,
    /// The full input of the call.
    pub input: serde_json::Value,
    /// Why approval is needed.
    pub reason: String,
    /// The rule "always allow" would save, e.g. `Bash(cargo test *)`.
    pub suggested_rule: String,
    /// Whether "always allow" is offered: only where saving `suggested_rule` would
    /// approve this same call again and not far more than it (not for a compound or
    /// multi-line command, nor where a deny or ask rule, a dangerous command or a path
    /// outside the project would still ask). A teammate's call or plan saves nothing.
    #[serde(default)]
    pub offer_always: bool,
}
