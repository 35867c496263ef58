//! The spend gate: what the loop asks before every model request and tells after every
//! response, so that a spending cap stops new requests (issue 32, "Budgets").
//!
//! The loop knows nothing about caps, teams or prices' meaning: it asks
//! [`SpendGate::before_request`] right before it starts a request (the first of a run
//! included) and reports each response's usage and cost to [`SpendGate::spent`] before
//! it runs the response's tool calls. A gate in [`crate::AgentOptions::spend_gate`] is
//! shared with the agent's sub-agents (they start from their parent's options), so
//! their spend counts toward their parent.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use roo_llm::Usage;

/// What the gate says about the next model request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpendVerdict {
    /// Start it.
    Go,
    /// Start it, and tell the agent (a system reminder with the request) and the user
    /// (a notice) this text, e.g. that 80 % of a cap is spent.
    Warn(String),
    /// Do not start it: the run ends with [`crate::event::RunOutcome::OverBudget`] and
    /// this reason (which cap, and what was spent).
    Stop(String),
}

/// Accounts an agent's model spend and decides whether the next request may start.
pub trait SpendGate: Send + Sync {
    /// Right before every model request.
    fn before_request(&self) -> BoxFuture<'_, SpendVerdict>;

    /// After every model response: its usage, and its cost in USD at the model's price
    /// (`None`: the price is unknown, e.g. a local model).
    fn spent(&self, usage: Usage, cost_usd: Option<f64>) -> BoxFuture<'_, ()>;
}

/// A gate as the agent's options hold it (cheap to clone, printable).
#[derive(Clone)]
pub struct SharedSpendGate(pub Arc<dyn SpendGate>);

impl std::fmt::Debug for SharedSpendGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpendGate")
    }
}
