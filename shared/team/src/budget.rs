//! Spending caps of the lead, its teammates and their tasks (issue 32, "Budgets").
//!
//! [`TeamSpendGate`] is the [`SpendGate`] the builder gives an agent whose settings carry
//! a [`BudgetPlan`]. After every model response (its own or a sub-agent's) it adds the
//! spend to the agent's session total and, in a team, to the member's total in the
//! team's task list and to the task the member works on, in one locked write
//! ([`roo_store::TaskList::settle_spend`]), which under a cap in requests also reserves
//! the next request. Before every request it checks where the spend stands and stops the
//! request once a cap is reached: the session's (a lead's `--max-cost-usd`/
//! `--max-requests`, which cover its team), the team's, the member's or its task's; in a
//! team, under a cap in requests, the request must hold a reservation made in the same
//! locked change as a check ([`roo_store::TaskList::reserve_request`]), so agents running
//! at once cannot pass it: the first request of a run reserves alone (a write), the next
//! ones use the reservation of the previous response (a locked read), and one unused when
//! the run ends is given back. A spend that cannot be read fails closed: no request
//! starts. At 80 % of a cap the agent is told once (and a teammate tells its lead);
//! a teammate stopped by a cap releases its task with a note and reports to the lead.
//! Spend of a model whose price is unknown counts as requests only, which the agent is
//! told once. A lead that joins a team writes its caps into the team's list (the
//! session's made absolute on the team's total), where every teammate reads them.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use roo_agent::config::BudgetConfig;
use roo_agent::{SpendGate, SpendVerdict};
use roo_llm::Usage;
use roo_store::budget::{
    RequestSlot, Reserve, SpendCap, SpendRecord, SpendState, TeamCaps, describe_spend,
};
use roo_store::usage::{MAX_USAGE_COST_USD, MAX_USAGE_COUNT};
use roo_store::{Name, Outgoing, TaskFilter, TaskId, TaskStatus, TaskUsage};
use tokio::sync::Mutex;

use crate::binding::{TeamBinding, TeamSlot};

/// Share of a cap after which the agent (and the lead) are told.
pub const WARN_AT: f64 = 0.8;

/// What an agent's caps are, handed to the builder in its settings.
#[derive(Clone, Debug, Default)]
pub struct BudgetPlan {
    /// The session's caps (`--max-cost-usd`, `--max-requests`); a lead's cover its team.
    pub session: SpendCap,
    /// The team the agent is in or will be in (a lead's slot fills on TeamCreate).
    pub slot: TeamSlot,
    /// Whether the agent leads the team: it writes the caps; a teammate reads them.
    pub lead: bool,
}

/// Where a request stands against one scope's cap.
struct Scope {
    /// Stable key for "told once".
    key: String,
    /// The scope in words, e.g. "the team's cap".
    label: String,
    spent: TaskUsage,
    cap: SpendCap,
}

/// Whether the model's price was unknown for some request, and the agent told.
#[derive(Default, PartialEq)]
enum Unpriced {
    #[default]
    Known,
    ToTell,
    Told,
}

#[derive(Default)]
struct GateState {
    /// This agent's spend in this session (its sub-agents' included).
    own: TaskUsage,
    /// Own spend not yet added to the member's total in the team's list.
    unrecorded: TaskUsage,
    /// Spend not yet charged to a task (no task owned when it was spent).
    carry: TaskUsage,
    /// The task charged last.
    current: Option<TaskId>,
    /// The team whose caps this gate set up, and its total then (before this agent's
    /// earlier spend was added).
    bound: Option<(Name, TaskUsage)>,
    /// Scopes whose 80 % was told.
    warned: BTreeSet<String>,
    unpriced: Unpriced,
    /// The task released for a cap (reported once).
    released: BTreeSet<String>,
    /// Requests reserved in the team's list with a response (the next one), not started.
    idle: u64,
    /// Requests reserved in the team's list that started and are not answered yet.
    flying: u64,
    /// Whether this gate reserved a request yet (its first replaces any reservation an
    /// earlier process of the same member left).
    reserved_ever: bool,
    /// Why the spend cannot be trusted (the list damaged, reset or gone): the gate then
    /// starts no request for the rest of the session (fails closed).
    broken: Option<String>,
    /// The team's recorded spend seen last: a later read below it means the list was
    /// reset (damaged and moved aside, or replaced), and its caps with it.
    seen_team: TaskUsage,
    /// Whether the lead was told that the spend could not be read for a while (once per
    /// outage).
    told_unreadable: bool,
}

/// Why a reservation failed: `lasting` when trying again cannot help (the list is
/// damaged, of a newer format, or the team gone), else a store that did not answer in
/// time (a lock held, a server away).
struct Unread {
    lasting: bool,
    error: String,
}

/// How long a gate tries again to read a store that does not answer before it stops
/// the run (not the session: the next run tries again).
const UNREAD_WINDOW: std::time::Duration = std::time::Duration::from_secs(30);

/// The [`SpendGate`] of a lead or a teammate. See the module documentation.
pub struct TeamSpendGate {
    plan: BudgetPlan,
    /// The caps a lead writes into its team: from its `budget:` config and its session's.
    config: BudgetConfig,
    state: Mutex<GateState>,
}

impl TeamSpendGate {
    /// The gate of an agent with `plan`, whose config says `config`.
    pub fn new(plan: BudgetPlan, config: BudgetConfig) -> Arc<TeamSpendGate> {
        let mut plan = plan;
        if plan.lead {
            plan.session = plan.session.min(&SpendCap {
                usd: None,
                requests: config.requests,
            });
        }
        Arc::new(TeamSpendGate {
            plan,
            config,
            state: Mutex::new(GateState::default()),
        })
    }

    /// The agent's own spend in this session (its sub-agents' included).
    pub async fn own_spend(&self) -> TaskUsage {
        self.state.lock().await.own
    }

    /// A lead just in a team (or in another one): writes its caps there and notes the
    /// team's total, on which its session's caps are counted from now on. Its earlier
    /// spend is added to its member total with the next request.
    async fn set_up(&self, binding: &Arc<TeamBinding>, state: &mut GateState) {
        let team = binding.team.name().clone();
        if state.bound.as_ref().is_some_and(|(t, _)| *t == team) {
            return;
        }
        let tasks = binding.team.tasks();
        let me = binding.me.clone();
        let lead = self.plan.lead;
        let (session, config) = (self.plan.session, self.config);
        let result = tokio::task::spawn_blocking(move || {
            let base = tasks.spend_state(&me, None)?.team;
            if lead {
                let team_cap = team_cap(&config, &session, &base);
                tasks.set_caps(Some(&me), |caps: &mut TeamCaps| {
                    caps.team = team_cap;
                    caps.member_default = config.teammate_usd.map(usd_cap);
                    caps.task_default = config.task_usd.map(usd_cap);
                })?;
            }
            Ok::<_, roo_store::Error>(base)
        })
        .await;
        match result {
            Ok(Ok(base)) => state.bound = Some((team, base)),
            Ok(Err(e)) => tracing::warn!(error = %e, "failed to set the team's budget"),
            Err(e) => tracing::warn!(error = %e, "failed to set the team's budget"),
        }
    }

    async fn record(&self, usage: Usage, cost_usd: Option<f64>) {
        // The request is counted now, with its tokens and cost; if it was reserved when
        // it started, the same write takes the reservation off and reserves the next
        // request (a cap in requests permitting), so that one needs no write of its own.
        let spend = TaskUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_read_tokens: usage.cache_read_tokens,
            cache_write_tokens: usage.cache_write_tokens,
            requests: 0,
            cost_usd,
        };
        let mut state = self.state.lock().await;
        if cost_usd.is_none() && state.unpriced == Unpriced::Known {
            state.unpriced = Unpriced::ToTell;
        }
        state.own = add(&state.own, &spend);
        let counted = TaskUsage {
            requests: 1,
            ..spend
        };
        state.unrecorded = add(&state.unrecorded, &counted);
        let Some(binding) = self.plan.slot.get() else {
            return;
        };
        if state.broken.is_some() {
            return;
        }
        self.set_up(&binding, &mut state).await;
        let consumed = state.flying > 0;
        state.flying = state.flying.saturating_sub(1);
        let record = SpendRecord {
            spent: state.unrecorded,
            task_spent: (!self.plan.lead).then(|| add(&state.carry, &counted)),
            fallback: state.current.clone(),
            consumed,
            next: state.idle == 0,
        };
        let tasks = binding.team.tasks();
        let me = binding.me.clone();
        let sent = record.clone();
        let settled = tokio::task::spawn_blocking(move || tasks.settle_spend(&me, &sent)).await;
        match settled {
            Ok(Ok(settled)) => {
                state.unrecorded = TaskUsage::default();
                if settled.reserved_next {
                    state.idle += 1;
                    state.reserved_ever = true;
                }
                match settled.task {
                    Some(id) => {
                        state.current = Some(id);
                        state.carry = TaskUsage::default();
                    }
                    None => state.carry = record.task_spent.unwrap_or_default(),
                }
            }
            Ok(Err(e)) => tracing::warn!(member = %binding.me, error = %e, "failed to add usage"),
            Err(e) => tracing::warn!(member = %binding.me, error = %e, "failed to add usage"),
        }
    }

    /// The run ended: the request reserved with its last response will not start; it is
    /// given back (one write per run, none per request).
    async fn end_run(&self) {
        let mut state = self.state.lock().await;
        let (Some(binding), idle) = (self.plan.slot.get(), state.idle) else {
            return;
        };
        if idle == 0 {
            return;
        }
        state.idle = 0;
        let tasks = binding.team.tasks();
        let me = binding.me.clone();
        let released = tokio::task::spawn_blocking(move || tasks.release_request(&me, idle)).await;
        if let Ok(Err(e)) = released {
            tracing::warn!(error = %e, "failed to give back a reserved request");
        }
    }

    /// In a team: reserves the request in the team's task list if its caps allow, or
    /// uses the one reserved with the last response (see
    /// [`roo_store::TaskList::reserve_request`]), adding the spend not yet recorded.
    /// `Err`: the spend could not be read or written; the gate then fails closed.
    async fn reserve(
        &self,
        binding: &Arc<TeamBinding>,
        state: &mut GateState,
    ) -> Result<RequestSlot, Unread> {
        let tasks = binding.team.tasks();
        let me = binding.me.clone();
        let (pending, lead) = (state.unrecorded, self.plan.lead);
        let how = match (state.idle > 0, state.reserved_ever) {
            (true, _) => Reserve::Held,
            (false, false) => Reserve::Fresh,
            (false, true) => Reserve::More,
        };
        let slot =
            tokio::task::spawn_blocking(move || tasks.reserve_request(&me, &pending, lead, how))
                .await
                .map_err(|e| Unread {
                    lasting: false,
                    error: e.to_string(),
                })?
                .map_err(|e| Unread {
                    lasting: !passing(&e),
                    error: e.to_string(),
                })?;
        state.unrecorded = TaskUsage::default();
        if how == Reserve::Held {
            // Used, or given back by the store when refused.
            state.idle -= 1;
        }
        if slot.counted {
            state.flying += 1;
            state.reserved_ever = true;
        }
        Ok(slot)
    }

    /// [`Self::reserve`], tried again with backoff for [`UNREAD_WINDOW`] while the store
    /// does not answer in time. `Err`: the gate's verdict (a stop).
    async fn reserve_patiently(
        &self,
        binding: &Arc<TeamBinding>,
        state: &mut GateState,
    ) -> Result<RequestSlot, SpendVerdict> {
        let started = std::time::Instant::now();
        let mut pause = std::time::Duration::from_millis(250);
        loop {
            match self.reserve(binding, state).await {
                Ok(slot) => {
                    state.told_unreadable = false;
                    return self.check_record(binding, state, slot).await;
                }
                Err(Unread {
                    lasting: true,
                    error,
                }) => return Err(self.fail_closed(binding, state, &error).await),
                Err(Unread { error, .. }) if started.elapsed() + pause > UNREAD_WINDOW => {
                    return Err(self.stop_unread(binding, state, &error).await);
                }
                Err(_) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_secs(4));
                }
            }
        }
    }

    /// The slot, unless its team's recorded spend went below what this gate saw: the
    /// list was reset (its caps and spend gone), so the gate fails closed.
    async fn check_record(
        &self,
        binding: &Arc<TeamBinding>,
        state: &mut GateState,
        slot: RequestSlot,
    ) -> Result<RequestSlot, SpendVerdict> {
        let now = slot.state.team_recorded;
        let seen = state.seen_team;
        let lower = now.requests < seen.requests
            || now.cost_usd.unwrap_or(0.0) + 1e-9 < seen.cost_usd.unwrap_or(0.0);
        if lower {
            let error = format!(
                "its record went back from {} to {}: the task list was reset or replaced, \
                 and its caps with it",
                describe_spend(&seen),
                describe_spend(&now)
            );
            return Err(self.fail_closed(binding, state, &error).await);
        }
        state.seen_team = now;
        Ok(slot)
    }

    /// The store did not answer for [`UNREAD_WINDOW`]: this run starts no request (a cap
    /// that cannot be checked holds as reached); the next run tries again. A teammate
    /// tells its lead once per outage.
    async fn stop_unread(
        &self,
        binding: &Arc<TeamBinding>,
        state: &mut GateState,
        error: &str,
    ) -> SpendVerdict {
        let reason = format!(
            "the team's spend could not be read for {} s ({error}); no model request starts \
             while the caps cannot be checked (the next run tries again)",
            UNREAD_WINDOW.as_secs()
        );
        if !self.plan.lead && !state.told_unreadable {
            state.told_unreadable = true;
            tell_lead(
                binding,
                "paused: spend unreadable",
                format!("Budget: {reason}. I go idle; a new message starts me again."),
            )
            .await;
        }
        SpendVerdict::Stop(reason)
    }

    /// The spend cannot be trusted: no request starts, now or later in this session (a
    /// cap that cannot be checked holds as reached), and a teammate tells its lead.
    async fn fail_closed(
        &self,
        binding: &Arc<TeamBinding>,
        state: &mut GateState,
        error: &str,
    ) -> SpendVerdict {
        let reason = format!(
            "the team's spend could not be read ({error}); no model request starts while \
             the caps cannot be checked"
        );
        state.broken = Some(reason.clone());
        if !self.plan.lead {
            tell_lead(
                binding,
                "stopped: spend unreadable",
                format!("Budget: {reason}. I start no new model request and go idle."),
            )
            .await;
        }
        SpendVerdict::Stop(reason)
    }

    async fn decide(&self) -> SpendVerdict {
        let mut state = self.state.lock().await;
        if let Some(reason) = &state.broken {
            return SpendVerdict::Stop(reason.clone());
        }
        let binding = self.plan.slot.get();
        let mut scopes = Vec::new();
        let mut slot = None;
        if let Some(binding) = &binding {
            self.set_up(binding, &mut state).await;
            match self.reserve_patiently(binding, &mut state).await {
                Ok(reserved) => slot = Some(reserved),
                Err(verdict) => return verdict,
            }
        }
        let team_state = slot.as_ref().map(|s| &s.state);
        let session_spent = match (team_state, &state.bound) {
            // In a team: the team's spend since this session joined it (its own earlier
            // spend included: the reservation just added what was unrecorded).
            // Never less than its own spend.
            (Some(now), Some((_, base))) => max_spend(&minus(&now.team, base), &state.own),
            _ => state.own,
        };
        if self.plan.lead && !self.plan.session.is_empty() {
            scopes.push(Scope {
                key: "session".into(),
                label: "the session's cap (--max-cost-usd, --max-requests, budget.requests)".into(),
                spent: session_spent,
                cap: self.plan.session,
            });
        }
        if let (Some(now), Some(binding)) = (team_state, &binding) {
            scopes.extend(team_scopes(now, &binding.me, self.plan.lead));
        }
        let unpriced = state.unpriced == Unpriced::ToTell;
        if unpriced {
            state.unpriced = Unpriced::Told;
        }
        let refused = slot.as_ref().is_some_and(|s| s.refused_by.is_some());
        if let Some(over) = scopes.iter().find(|s| s.cap.reached(&s.spent)) {
            let reason = format!(
                "{} of {} was reached: spent {}",
                over.label,
                over.cap.describe(),
                describe_spend(&over.spent)
            );
            if let (Some(binding), Some(slot)) = (&binding, &slot)
                && slot.counted
            {
                state.flying = state.flying.saturating_sub(1);
                release(binding).await;
            }
            if let (Some(binding), false) = (&binding, self.plan.lead) {
                report_stop(binding, &mut state, &reason, over).await;
            }
            return SpendVerdict::Stop(reason);
        }
        if refused {
            // The list refused by a cap the scopes above do not show (a change between
            // the two looks is not possible: they are one state): stop all the same.
            return SpendVerdict::Stop("a cap in the team's task list was reached".into());
        }
        // Counted in the team's list with its response (reserved there until then, under
        // a cap in requests); not in a team yet: added to the list once in one.
        state.own.requests = state.own.requests.saturating_add(1);
        self.warnings(&binding, &mut state, &scopes, unpriced).await
    }

    /// The 80 % notices of `scopes` not told yet (a teammate's go to its lead too), and
    /// the one about an unknown price.
    async fn warnings(
        &self,
        binding: &Option<Arc<TeamBinding>>,
        state: &mut GateState,
        scopes: &[Scope],
        unpriced: bool,
    ) -> SpendVerdict {
        let mut told = Vec::new();
        for scope in scopes {
            if scope.cap.used(&scope.spent) >= WARN_AT && state.warned.insert(scope.key.clone()) {
                told.push(format!(
                    "Budget: {} of {} is {:.0} % spent ({}); at 100 % no new model request starts.",
                    scope.label,
                    scope.cap.describe(),
                    scope.cap.used(&scope.spent) * 100.0,
                    describe_spend(&scope.spent)
                ));
            }
        }
        if !told.is_empty()
            && let (Some(binding), false) = (binding, self.plan.lead)
        {
            tell_lead(binding, "budget at 80 %", told.join("\n")).await;
        }
        if unpriced && scopes.iter().any(|s| s.cap.usd.is_some()) {
            told.push(
                "Budget: the model's price is unknown (a local model?): its spend counts as \
                 requests only; caps in USD do not limit it."
                    .to_string(),
            );
        }
        match told.is_empty() {
            true => SpendVerdict::Go,
            false => SpendVerdict::Warn(told.join("\n")),
        }
    }
}

/// Gives back a request reserved in the team's list that does not start after all.
async fn release(binding: &Arc<TeamBinding>) {
    let tasks = binding.team.tasks();
    let me = binding.me.clone();
    let released = tokio::task::spawn_blocking(move || tasks.release_request(&me, 1)).await;
    if let Ok(Err(e)) = released {
        tracing::warn!(error = %e, "failed to take back a request that did not start");
    }
}

impl SpendGate for TeamSpendGate {
    fn before_request(&self) -> BoxFuture<'_, SpendVerdict> {
        Box::pin(self.decide())
    }

    fn spent(&self, usage: Usage, cost_usd: Option<f64>) -> BoxFuture<'_, ()> {
        Box::pin(self.record(usage, cost_usd))
    }

    fn run_ended(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.end_run())
    }
}

/// The team's cap a lead writes: its `budget:` team caps and its session's, made
/// absolute on the team's total `base` when the session joined it (the lower holds).
fn team_cap(config: &BudgetConfig, session: &SpendCap, base: &TaskUsage) -> Option<SpendCap> {
    let from_config = SpendCap {
        usd: config.team_usd,
        requests: None,
    };
    let from_session = SpendCap {
        usd: session.usd.map(|usd| base.cost_usd.unwrap_or(0.0) + usd),
        requests: session.requests.map(|n| base.requests.saturating_add(n)),
    };
    Some(bounded(from_config.min(&from_session))).filter(|cap| !cap.is_empty())
}

fn usd_cap(usd: f64) -> SpendCap {
    bounded(SpendCap {
        usd: Some(usd),
        requests: None,
    })
}

/// `cap` within what the task list holds (a larger amount is no cap in practice): a cap
/// the store refuses would fail the write of every cap beside it.
fn bounded(cap: SpendCap) -> SpendCap {
    SpendCap {
        usd: cap.usd.map(|usd| usd.clamp(0.0, MAX_USAGE_COST_USD)),
        requests: cap.requests.map(|n| n.min(MAX_USAGE_COUNT)),
    }
}

/// The team's, the member's and its task's scopes (a lead: the team's only).
fn team_scopes(now: &SpendState, me: &Name, lead: bool) -> Vec<Scope> {
    let mut scopes = Vec::new();
    if let Some(cap) = now.team_cap {
        scopes.push(Scope {
            key: "team".into(),
            label: "the team's cap".into(),
            spent: now.team,
            cap,
        });
    }
    if lead {
        return scopes;
    }
    if let Some(cap) = now.member_cap {
        scopes.push(Scope {
            key: format!("member:{me}"),
            label: format!("{me}'s cap"),
            spent: now.member,
            cap,
        });
    }
    if let Some((id, spent, Some(cap))) = &now.task {
        scopes.push(Scope {
            key: format!("task:{id}"),
            label: format!("task #{id}'s cap"),
            spent: *spent,
            cap: *cap,
        });
    }
    scopes
}

/// A teammate stopped by a cap: its in-progress tasks go back to pending with a note
/// saying why (a task's cap: that task only), and the lead is told, once per task.
async fn report_stop(
    binding: &Arc<TeamBinding>,
    state: &mut GateState,
    reason: &str,
    over: &Scope,
) {
    let tasks = binding.team.tasks();
    let me = binding.me.clone();
    let only = over.key.strip_prefix("task:").map(str::to_owned);
    let note = format!("released by {me}: {reason}");
    let released = tokio::task::spawn_blocking(move || {
        tasks.reclaim_where(Some(&me), |task, _| {
            (task.owner.as_ref() == Some(&me)
                && task.status == TaskStatus::InProgress
                && only.as_deref().is_none_or(|id| task.id.as_str() == id))
            .then(|| note.clone())
        })
    })
    .await;
    let ids: Vec<String> = match released {
        Ok(Ok(released)) => released.iter().map(|r| format!("#{}", r.task.id)).collect(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "failed to release a task over its budget");
            Vec::new()
        }
        Err(_) => Vec::new(),
    };
    if !state
        .released
        .insert(format!("{}:{}", over.key, ids.join(",")))
    {
        return;
    }
    let released = match ids.is_empty() {
        true => "I hold no task".to_string(),
        false => format!("I released task {} with a note", ids.join(", ")),
    };
    tell_lead(
        binding,
        "stopped by a budget",
        format!("Budget: {reason}. I start no new model request; {released} and go idle."),
    )
    .await;
}

/// A message from the teammate to its lead (failures are logged: the cap holds anyway).
async fn tell_lead(binding: &Arc<TeamBinding>, summary: &str, text: String) {
    let mailbox = binding.team.mailbox();
    let (me, lead) = (binding.me.clone(), binding.lead.clone());
    let message = Outgoing::text(text, summary);
    let sent = tokio::task::spawn_blocking(move || mailbox.send(&me, lead.as_str(), message)).await;
    if let Ok(Err(e)) = sent {
        tracing::warn!(error = %e, "failed to tell the lead about the budget");
    }
}

/// `a + b` (saturating: a running total for decisions, bounded where it is stored).
fn add(a: &TaskUsage, b: &TaskUsage) -> TaskUsage {
    TaskUsage {
        input_tokens: a.input_tokens.saturating_add(b.input_tokens),
        output_tokens: a.output_tokens.saturating_add(b.output_tokens),
        cache_read_tokens: a.cache_read_tokens.saturating_add(b.cache_read_tokens),
        cache_write_tokens: a.cache_write_tokens.saturating_add(b.cache_write_tokens),
        requests: a.requests.saturating_add(b.requests),
        cost_usd: match (a.cost_usd, b.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        },
    }
}

/// `a − b`, each part at least 0.
/// Each part of `a` and `b`, the larger.
fn max_spend(a: &TaskUsage, b: &TaskUsage) -> TaskUsage {
    TaskUsage {
        input_tokens: a.input_tokens.max(b.input_tokens),
        output_tokens: a.output_tokens.max(b.output_tokens),
        cache_read_tokens: a.cache_read_tokens.max(b.cache_read_tokens),
        cache_write_tokens: a.cache_write_tokens.max(b.cache_write_tokens),
        requests: a.requests.max(b.requests),
        cost_usd: match (a.cost_usd, b.cost_usd) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        },
    }
}

/// Whether `e` says "not now" (a lock held past its wait, a server away) rather than
/// "never" (a damaged list, a newer format, the team gone).
fn passing(e: &roo_store::Error) -> bool {
    use roo_store::Error;
    matches!(
        e,
        Error::Io { .. }
            | Error::Engine { .. }
            | Error::RowLocked { .. }
            | Error::LockTimeout { .. }
            | Error::LockLost { .. }
    )
}

fn minus(a: &TaskUsage, b: &TaskUsage) -> TaskUsage {
    TaskUsage {
        input_tokens: a.input_tokens.saturating_sub(b.input_tokens),
        output_tokens: a.output_tokens.saturating_sub(b.output_tokens),
        cache_read_tokens: a.cache_read_tokens.saturating_sub(b.cache_read_tokens),
        cache_write_tokens: a.cache_write_tokens.saturating_sub(b.cache_write_tokens),
        requests: a.requests.saturating_sub(b.requests),
        cost_usd: match (a.cost_usd, b.cost_usd) {
            (None, None) => None,
            (a, b) => Some((a.unwrap_or(0.0) - b.unwrap_or(0.0)).max(0.0)),
        },
    }
}

/// Every member's and every task's spend in `team`, with their caps: one line each, for
/// `/cost` and the headless summary. Empty when nothing was spent.
pub fn spend_lines(team: &roo_store::Team) -> roo_store::Result<Vec<String>> {
    let tasks = team.tasks();
    let (spend, caps) = tasks.spend()?;
    let mut lines = Vec::new();
    let capped = |cap: Option<SpendCap>| {
        cap.map(|c| format!(" (cap {})", c.describe()))
            .unwrap_or_default()
    };
    if !spend.is_empty() {
        let total = roo_store::budget::team_total(&spend);
        lines.push(format!(
            "team {}: {}{}",
            team.name(),
            describe_spend(&total),
            capped(caps.team)
        ));
    }
    for (member, spent) in &spend {
        lines.push(format!(
            "  {member}: {}{}",
            describe_spend(spent),
            capped(caps.member(member))
        ));
    }
    for task in tasks.list(&TaskFilter::default())? {
        if task.usage.is_empty() {
            continue;
        }
        lines.push(format!(
            "  task #{}: {}{}",
            task.id,
            describe_spend(&task.usage_total()),
            capped(caps.task(task.budget))
        ));
    }
    Ok(lines)
}
