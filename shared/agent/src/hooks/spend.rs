//! The spend gate: what the loop asks before every model request and tells after every
//! response, so that a spending cap stops new requests (issue 32, "Budgets").
//!
//! The loop knows nothing about caps, teams or prices' meaning: it asks
//! [`SpendGate::before_request`] right before it starts a request (the first of a run
//! included) and reports each response's usage and cost to [`SpendGate::spent`] before
//! it runs the response's tool calls, and tells [`SpendGate::run_ended`] when a run ends
//! (whatever it set aside for a next request can go back). A gate in [`crate::AgentOptions::spend_gate`] is
//! shared with the agent's sub-agents (they start from their parent's options), so
//! their spend counts toward their parent.

use std::sync::{Arc, Mutex, PoisonError};

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

    /// After a run (one user input) ended, however it ended: no request of that run
    /// follows, so whatever the gate set aside for the next one can be given back.
    fn run_ended(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// A gate as the agent's options hold it (cheap to clone, printable).
#[derive(Clone)]
pub struct SharedSpendGate(pub Arc<dyn SpendGate>);

impl std::fmt::Debug for SharedSpendGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpendGate")
    }
}

/// A cap of its own in front of a parent's gate: a sub-agent whose definition sets
/// `budget:`. Its requests stop at its own cap or at its parent's, and count for both.
pub struct CappedGate {
    parent: Option<SharedSpendGate>,
    label: String,
    usd: Option<f64>,
    requests: Option<u64>,
    /// Requests and USD spent through this gate.
    spent: Mutex<(u64, f64)>,
}

impl CappedGate {
    /// A gate for `label` (e.g. "sub-agent scout") with these caps, in front of `parent`.
    pub fn new(
        parent: Option<SharedSpendGate>,
        label: String,
        usd: Option<f64>,
        requests: Option<u64>,
    ) -> CappedGate {
        CappedGate {
            parent,
            label,
            usd,
            requests,
            spent: Mutex::new((0, 0.0)),
        }
    }

    fn over(&self) -> Option<String> {
        let (n, usd) = *self.spent.lock().unwrap_or_else(PoisonError::into_inner);
        let reached =
            self.requests.is_some_and(|cap| n >= cap) || self.usd.is_some_and(|cap| usd >= cap);
        reached.then(|| {
            let cap = match (self.usd, self.requests) {
                (Some(u), Some(r)) => format!("{u} USD or {r} requests"),
                (Some(u), None) => format!("{u} USD"),
                (None, Some(r)) => format!("{r} requests"),
                (None, None) => String::new(),
            };
            format!(
                "{}'s cap of {cap} was reached: spent {usd:.4} USD in {n} requests",
                self.label
            )
        })
    }
}

impl SpendGate for CappedGate {
    fn before_request(&self) -> BoxFuture<'_, SpendVerdict> {
        Box::pin(async move {
            if let Some(reason) = self.over() {
                return SpendVerdict::Stop(reason);
            }
            match &self.parent {
                Some(parent) => parent.0.before_request().await,
                None => SpendVerdict::Go,
            }
        })
    }

    fn spent(&self, usage: Usage, cost_usd: Option<f64>) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            {
                let mut spent = self.spent.lock().unwrap_or_else(PoisonError::into_inner);
                spent.0 += 1;
                spent.1 += cost_usd.unwrap_or(0.0);
            }
            if let Some(parent) = &self.parent {
                parent.0.spent(usage, cost_usd).await;
            }
        })
    }

    fn run_ended(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(parent) = &self.parent {
                parent.0.run_ended().await;
            }
        })
    }
}
