//! The lead's side of a team, without a UI.
//!
//! A lead starts without a team: its [`TeamSlot`] is empty until its TeamCreate tool
//! (or `roo-lead --team`, [`join_as_lead`]) binds it, and TeamDelete empties it again.
//! Everything here follows the slot, so it can be installed when the lead is built:
//!
//! - [`SlotDelivery`], a turn hook: teammates' messages enter the lead's next turn
//!   (an [`InboxDelivery`] of the current binding; nothing while unbound);
//! - [`TeamStateReminder`], a turn hook: after a compaction the model gets the team's
//!   state back (members, states, open tasks);
//! - [`spawn_request_answerer`]: teammates' permission and plan-approval requests are
//!   answered by a [`RequestDecider`] — the person at the terminal
//!   ([`ApproverDecider`]) or, in a headless run, the lead's own permission policy
//!   ([`PolicyDecider`]) — never left waiting;
//! - [`wait_for_team`]: a headless lead's wait between its turns;
//! - [`status`]: teammates' states, the monitor that reports them, `/team` and `/tasks`.

pub mod status;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use roo_agent::agent_loop::SharedPolicy;
use roo_agent::hooks::{AgentHook, TurnAction};
use roo_agent::permissions::{Approval, Approver, PermissionMode, PermissionRequest};
use roo_agent::tool::ToolRegistry;
use roo_store::{
    Message, MessageBody, Name, Outgoing, PermissionDecision, RooHome, TaskFilter, Team,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::authority::{Answer, LeadKey};
use crate::binding::{TeamBinding, TeamSlot};
use crate::delivery::InboxDelivery;
use crate::event::{TeamEventSender, one_line};
use crate::router::InboxRouter;
use status::{TeamStatus, team_summary};

/// The turn hook that delivers the lead's inbox into its conversation while its slot
/// is bound (an [`InboxDelivery`] per binding), and does nothing while it is not.
pub struct SlotDelivery {
    slot: TeamSlot,
    current: Mutex<Option<(Arc<TeamBinding>, Arc<InboxDelivery>)>>,
    /// The delivery whose texts the loop is injecting this turn.
    injecting: Mutex<Option<Arc<InboxDelivery>>>,
}

impl SlotDelivery {
    pub fn new(slot: TeamSlot) -> SlotDelivery {
        SlotDelivery {
            slot,
            current: Mutex::new(None),
            injecting: Mutex::new(None),
        }
    }

    /// The delivery of the current binding, made on first use after each bind.
    fn delivery(&self) -> Option<Arc<InboxDelivery>> {
        let binding = self.slot.get();
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        match binding {
            None => {
                *current = None;
                None
            }
            Some(binding) => {
                if let Some((bound, delivery)) = current.as_ref()
                    && Arc::ptr_eq(bound, &binding)
                {
                    return Some(delivery.clone());
                }
                // The lead's own notices (a teammate's death, sent to itself) are never
                // collapsed: several deaths at once are each work to redo.
                let delivery = Arc::new(
                    InboxDelivery::new(binding.router.clone()).never_collapse(binding.me.clone()),
                );
                *current = Some((binding, delivery.clone()));
                Some(delivery)
            }
        }
    }
}

impl AgentHook for SlotDelivery {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async move {
            let Some(delivery) = self.delivery() else {
                return TurnAction::Continue;
            };
            let action = delivery.before_turn().await;
            if matches!(action, TurnAction::Inject(_)) {
                *self.injecting.lock().unwrap_or_else(|e| e.into_inner()) = Some(delivery);
            }
            action
        })
    }

    fn injected(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let delivery = self
                .injecting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(delivery) = delivery {
                delivery.injected().await;
            }
        })
    }

    fn undeliverable(&self, reason: &str) -> BoxFuture<'_, ()> {
        let reason = reason.to_owned();
        Box::pin(async move {
            let delivery = self
                .injecting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(delivery) = delivery {
                delivery.undeliverable(&reason).await;
            }
        })
    }
}

/// The turn hook that gives the lead's model its team's state back after a compaction
/// (which may have summarized it away): teammates with their states and open tasks.
pub struct TeamStateReminder {
    slot: TeamSlot,
}

impl TeamStateReminder {
    pub fn new(slot: TeamSlot) -> TeamStateReminder {
        TeamStateReminder { slot }
    }
}

impl AgentHook for TeamStateReminder {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async { TurnAction::Continue })
    }

    fn after_compaction(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move {
            let binding = self.slot.get()?;
            let team = binding.team.clone();
            let read = tokio::task::spawn_blocking(move || {
                let config = team.config()?;
                let tasks = team.tasks().list(&TaskFilter::default())?;
                let liveness = team.liveness(&config)?;
                Ok::<_, roo_store::Error>(team_summary(&config, &liveness, &tasks))
            })
            .await;
            match read {
                Ok(Ok(summary)) => Some(summary),
                Ok(Err(e)) => Some(roo_store::model_safe(&format!(
                    "You lead team {}; its state could not be read after the compaction ({e}). Use TaskList and the team tools to look.",
                    binding.team.name()
                ))),
                Err(_) => None,
            }
        })
    }
}

/// A decision on a teammate's request: yes or no, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allow: bool,
    pub reason: String,
}

/// Who decides teammates' permission and plan-approval requests for the lead.
pub trait RequestDecider: Send + Sync {
    /// `from` asks to run `tool` with `input` (`summary`: its one-line description).
    fn permission<'a>(
        &'a self,
        from: &'a Name,
        tool: &'a str,
        input: &'a serde_json::Value,
        summary: &'a str,
    ) -> BoxFuture<'a, Decision>;

    /// `from` asks to have `plan` approved before it writes anything.
    fn plan<'a>(&'a self, from: &'a Name, plan: &'a str) -> BoxFuture<'a, Decision>;
}

/// A headless lead's decisions: nobody can be asked, so a teammate's call is allowed
/// only if the lead's own permission policy would run the same call without asking (the
/// lead has the tool, and its rules and mode allow the input, paths taken from the
/// project root); anything the lead would have to ask about is denied with the reason.
/// A plan is approved only when the lead's mode lets writes through without asking
/// (`acceptEdits`, `bypassPermissions`), else rejected with the reason.
pub struct PolicyDecider {
    pub policy: SharedPolicy,
    pub tools: ToolRegistry,
    pub project_root: PathBuf,
}

impl RequestDecider for PolicyDecider {
    fn permission<'a>(
        &'a self,
        _from: &'a Name,
        tool: &'a str,
        input: &'a serde_json::Value,
        _summary: &'a str,
    ) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            let Some(lead_tool) = self.tools.get(tool) else {
                return Decision {
                    allow: false,
                    reason: format!(
                        "the lead runs headless (-p) and has no {tool} tool to judge this call by; nobody can approve it"
                    ),
                };
            };
            let Ok(policy) = self.policy.read() else {
                return Decision {
                    allow: false,
                    reason: "the lead's permission policy is unavailable".to_string(),
                };
            };
            match policy.check(lead_tool.as_ref(), input, &self.project_root) {
                roo_agent::permissions::PermissionDecision::Allow => Decision {
                    allow: true,
                    reason: format!(
                        "allowed by the lead's permission mode {} and rules",
                        policy.mode()
                    ),
                },
                roo_agent::permissions::PermissionDecision::Deny { reason } => Decision {
                    allow: false,
                    reason: format!("denied by the lead's rules: {reason}"),
                },
                roo_agent::permissions::PermissionDecision::Ask { reason } => Decision {
                    allow: false,
                    reason: format!(
                        "the lead runs headless (-p) in permission mode {} and nobody can approve this ({reason}); run the lead with a mode that allows it, or add an allow rule",
                        policy.mode()
                    ),
                },
            }
        })
    }

    fn plan<'a>(&'a self, _from: &'a Name, _plan: &'a str) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            let mode = self
                .policy
                .read()
                .map(|p| p.mode())
                .unwrap_or(PermissionMode::Default);
            if matches!(
                mode,
                PermissionMode::AcceptEdits | PermissionMode::BypassPermissions
            ) {
                Decision {
                    allow: true,
                    reason: format!("approved: the lead runs headless in mode {mode}"),
                }
            } else {
                Decision {
                    allow: false,
                    reason: format!(
                        "the lead runs headless (-p) in permission mode {mode} and nobody can review a plan; proceed without writing, or the lead must run with --permission-mode acceptEdits"
                    ),
                }
            }
        })
    }
}

/// An interactive lead's decisions: the person answers, through the lead's
/// [`Approver`] (the REPL's question channel). "Always" is taken as "yes, once": a
/// teammate's call saves no rule in the lead's config.
pub struct ApproverDecider {
    pub approver: Arc<dyn Approver>,
}

impl ApproverDecider {
    async fn ask(&self, request: PermissionRequest) -> Decision {
        match self.approver.ask(&request).await {
            Approval::AllowOnce | Approval::AllowAlways => Decision {
                allow: true,
                reason: "approved by the user".to_string(),
            },
            Approval::Deny { feedback } => Decision {
                allow: false,
                reason: feedback
                    .filter(|f| !f.trim().is_empty())
                    .unwrap_or_else(|| "denied by the user".to_string()),
            },
        }
    }
}

impl RequestDecider for ApproverDecider {
    fn permission<'a>(
        &'a self,
        from: &'a Name,
        tool: &'a str,
        input: &'a serde_json::Value,
        summary: &'a str,
    ) -> BoxFuture<'a, Decision> {
        Box::pin(self.ask(PermissionRequest {
            tool: tool.to_string(),
            summary: format!("teammate {from}: {}", one_line(summary, 200)),
            input: input.clone(),
            reason: format!("{from} asks the lead to allow this call (once)"),
            suggested_rule: "not saved for a teammate's call; a and y both allow once".to_string(),
        }))
    }

    fn plan<'a>(&'a self, from: &'a Name, plan: &'a str) -> BoxFuture<'a, Decision> {
        Box::pin(self.ask(PermissionRequest {
            tool: "ExitPlanMode".to_string(),
            summary: format!("teammate {from} asks to approve its plan"),
            input: serde_json::json!({ "plan": plan }),
            reason: one_line(plan, 400),
            suggested_rule: "nothing, a plan is approved once".to_string(),
        }))
    }
}

/// Answers every request queued in `binding`'s router: permission and plan-approval
/// requests through `decider`, with the response sent to the asker (its `request_id`
/// echoed); a shutdown request to the lead is acknowledged and ignored, and so is a
/// request from a name that is not a teammate (anyone can write into the lead's inbox:
/// such a question never reaches the person or the policy). Returns how many were
/// taken.
pub async fn answer_requests(binding: &TeamBinding, decider: &dyn RequestDecider) -> usize {
    let requests = binding.router.take_requests();
    if requests.is_empty() {
        return 0;
    }
    let team = binding.team.clone();
    let teammates: Vec<Name> = match tokio::task::spawn_blocking(move || team.config()).await {
        Ok(Ok(config)) => config
            .members
            .into_iter()
            .map(|m| m.name)
            .filter(|m| *m != binding.lead)
            .collect(),
        _ => Vec::new(),
    };
    let mut ids = Vec::with_capacity(requests.len());
    for request in &requests {
        if binding.router.is_closed() {
            // Another lead took the team over: the rest is its to answer, unacknowledged.
            break;
        }
        ids.push(request.id.clone());
        if !teammates.contains(&request.from) {
            tracing::warn!(from = %request.from, kind = request.body.type_name(), "ignored a request from someone who is not a teammate");
            continue;
        }
        // A question whose asker ended its run, died or left no longer waits: the
        // person's question is withdrawn (the decider's future dropped) and told why.
        let answered = tokio::select! {
            answer = answer_one(request, decider) => answer,
            why = async {
                tokio::select! {
                    why = asker_gone(&binding.team, &request.from) => why,
                    // A teammate asks one question at a time: a newer one means it no
                    // longer waits for this (it denied the call itself, e.g. on a
                    // shutdown request, and went on).
                    true = binding.router.request_queued(|m| {
                        m.from == request.from
                            && matches!(
                                m.body,
                                MessageBody::PermissionRequest { .. }
                                    | MessageBody::PlanApprovalRequest { .. }
                            )
                    }) => "it asked a newer question".to_string(),
                    () = binding.router.closed() => {
                        // Left unacknowledged for the lead that took over.
                        ids.pop();
                        "this lead no longer leads the team".to_string()
                    }
                }
            } => {
                let text = format!(
                    "{}'s {} was withdrawn: {why}",
                    request.from,
                    match &request.body {
                        MessageBody::PlanApprovalRequest { .. } => "plan approval request",
                        _ => "permission question",
                    }
                );
                tracing::info!(from = %request.from, "{text}");
                if let Some(events) = binding.router.events() {
                    events.send(crate::event::TeamEvent::Notice { text });
                }
                None
            }
        };
        if let Some(answer) = answered {
            let Some(answer) = sign(binding, &request.from, answer) else {
                tracing::warn!(to = %request.from, "the lead holds no key to sign its answer; the teammate would ignore it");
                continue;
            };
            let (mailbox, me, to) = (
                binding.team.mailbox(),
                binding.me.clone(),
                request.from.to_string(),
            );
            let sent = tokio::task::spawn_blocking(move || mailbox.send(&me, &to, answer)).await;
            if !matches!(sent, Ok(Ok(_))) {
                tracing::warn!(to = %request.from, result = ?sent.map(|r| r.map(|_| ())), "failed to answer a teammate's request");
            }
        }
    }
    let count = ids.len();
    if let Err(e) = binding.router.handled(ids).await {
        tracing::warn!(error = %e, "failed to acknowledge teammates' requests");
    }
    count
}

/// How often a question's asker is looked at while the question is open.
const ASKER_CHECK: Duration = Duration::from_millis(500);

/// Resolves, with the reason, once `asker` no longer waits for an answer: it left the
/// team, died, or went idle (its run ended, so the call it asked about is gone).
async fn asker_gone(team: &roo_store::Team, asker: &Name) -> String {
    loop {
        tokio::time::sleep(ASKER_CHECK).await;
        let (team, asker) = (team.clone(), asker.clone());
        let state = tokio::task::spawn_blocking(move || {
            let config = team.config()?;
            let liveness = team.liveness(&config)?;
            Ok::<_, roo_store::Error>(
                config
                    .member(asker.as_str())
                    .map(|m| liveness.observed_state(m)),
            )
        })
        .await;
        match state {
            Ok(Ok(None)) => return "it left the team".to_string(),
            Ok(Ok(Some(roo_store::MemberState::Dead))) => return "it died".to_string(),
            Ok(Ok(Some(roo_store::MemberState::Idle))) => {
                return "its run ended without waiting for the answer".to_string();
            }
            // Busy, or the config unreadable for a moment: keep the question open.
            _ => {}
        }
    }
}

/// `answer` to `to` with the lead's signature; `None` without a key.
fn sign(binding: &TeamBinding, to: &Name, answer: Outgoing) -> Option<Outgoing> {
    let key = binding.lead_key.as_ref()?;
    let signed = Answer::of(binding.team.name(), to, &answer.body)?;
    let signature = key.sign(&signed);
    Some(answer.with_signature(signature))
}

async fn answer_one(request: &Message, decider: &dyn RequestDecider) -> Option<Outgoing> {
    match &request.body {
        MessageBody::PermissionRequest {
            request_id,
            tool,
            input,
        } => {
            let summary = request.summary.as_deref().unwrap_or(tool);
            let decision = decider
                .permission(&request.from, tool, input, summary)
                .await;
            Some(Outgoing::new(
                MessageBody::PermissionResponse {
                    request_id: request_id.clone(),
                    decision: if decision.allow {
                        PermissionDecision::Allow
                    } else {
                        PermissionDecision::Deny
                    },
                    reason: decision.reason,
                },
                "",
            ))
        }
        MessageBody::PlanApprovalRequest { request_id, plan } => {
            let decision = decider.plan(&request.from, plan).await;
            Some(Outgoing::new(
                MessageBody::PlanApprovalResponse {
                    request_id: request_id.clone(),
                    approve: decision.allow,
                    feedback: decision.reason,
                },
                "",
            ))
        }
        other => {
            tracing::warn!(from = %request.from, kind = other.type_name(), "ignored a request to the lead");
            None
        }
    }
}

/// Answers teammates' requests as they arrive, for whatever team `slot` is bound to,
/// until `cancel`: a permission question never waits for the lead's next turn.
pub fn spawn_request_answerer(
    slot: TeamSlot,
    decider: Arc<dyn RequestDecider>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut bindings = slot.subscribe();
        loop {
            let binding = bindings.borrow_and_update().clone();
            match binding {
                Some(binding) => {
                    tokio::select! {
                        open = binding.router.requests() => {
                            if open {
                                answer_requests(&binding, decider.as_ref()).await;
                                continue;
                            }
                            // The router stopped: wait for another binding.
                            tokio::select! {
                                changed = bindings.changed() => if changed.is_err() { return },
                                _ = cancel.cancelled() => return,
                            }
                        }
                        changed = bindings.changed() => if changed.is_err() { return },
                        _ = cancel.cancelled() => return,
                    }
                }
                None => tokio::select! {
                    changed = bindings.changed() => if changed.is_err() { return },
                    _ = cancel.cancelled() => return,
                },
            }
        }
    })
}

/// How a headless lead's wait for its team ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TeamWait {
    /// Messages wait for the lead: take them as a new turn.
    Input,
    /// Every teammate is idle or dead and nothing is unread: the team is done.
    Settled,
    /// The deadline passed with these teammates still busy.
    TimedOut { busy: Vec<Name> },
    /// The lead has no team (any more).
    Unbound,
    /// The team config could not be read for [`BROKEN_AFTER`] (corrupt, quarantined,
    /// deleted under the lead): waiting longer cannot end well.
    Broken { error: String },
}

/// Whether a message waiting for the lead's conversation wakes an idle interactive
/// lead: everything but `status_update` (progress news waits for the next turn).
pub fn wakes_lead(message: &Message) -> bool {
    !matches!(message.body, MessageBody::StatusUpdate)
}

/// Resolves once a message that [wakes the lead](wakes_lead) waits for the conversation
/// of the team `slot` is bound to (whatever team that is by then); never while the slot
/// stays unbound or the router has stopped. What an idle interactive lead waits on
/// beside its keyboard.
pub async fn team_input(slot: &TeamSlot) {
    let mut bindings = slot.subscribe();
    loop {
        let binding = bindings.borrow_and_update().clone();
        let rebound = async {
            if bindings.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        match binding {
            Some(binding) => tokio::select! {
                true = binding.router.conversation_where(wakes_lead) => return,
                () = rebound => {}
            },
            None => rebound.await,
        }
    }
}

/// Quiet time after the team's last message before an idle lead takes its messages up:
/// several arriving together (two teammates finishing at once, a report and the idle
/// notification after it) make one turn.
pub const TEAM_QUIET: Duration = Duration::from_millis(300);
/// The longest an idle lead waits after the first message, however busy the team.
pub const TEAM_MAX_DELAY: Duration = Duration::from_secs(2);

/// Once messages wait for the lead's conversation: resolves when none has arrived for
/// [`TEAM_QUIET`], at most [`TEAM_MAX_DELAY`] after the call and never after `deadline`
/// (the team's timeout), so that a headless lead answers what arrives together in one
/// turn (every turn resends the whole prompt).
pub async fn gather_input(slot: &TeamSlot, deadline: tokio::time::Instant) {
    let Some(binding) = slot.get() else {
        return;
    };
    let until = (tokio::time::Instant::now() + TEAM_MAX_DELAY).min(deadline);
    let mut seen = binding.router.conversation_len();
    loop {
        tokio::time::sleep_until((tokio::time::Instant::now() + TEAM_QUIET).min(until)).await;
        if let Err(e) = binding.router.poll().await {
            tracing::warn!(error = %e, "failed to read the lead's inbox");
        }
        let now = binding.router.conversation_len();
        if now <= seen || tokio::time::Instant::now() >= until {
            return;
        }
        seen = now;
    }
}

/// How long the team config may fail to read before a headless lead stops waiting.
pub const BROKEN_AFTER: Duration = Duration::from_secs(2);

/// How long after a message to an idle teammate a headless lead still expects it to
/// wake (and so does not settle).
const WOKEN_WITHIN: Duration = Duration::from_secs(10);

/// How often the wait looks again even without a wake-up.
const WAIT_TICK: Duration = Duration::from_millis(250);

/// A headless lead's wait between its turns: returns [`TeamWait::Input`] as soon as a
/// message for the conversation is queued, [`TeamWait::Settled`] once every teammate is
/// idle or dead and the inbox holds nothing unread, [`TeamWait::TimedOut`] at
/// `deadline`. Requests are left to [`spawn_request_answerer`]. Wakes on the router's
/// conversation queue and the monitor's status, and looks again every 250 ms anyway.
pub async fn wait_for_team(
    slot: &TeamSlot,
    status: &mut watch::Receiver<Option<TeamStatus>>,
    deadline: tokio::time::Instant,
) -> TeamWait {
    // Once the router stopped (or the monitor ended), its wake-ups resolve at once:
    // stop selecting on them and rely on the tick.
    let mut router_open = true;
    let mut monitor_open = true;
    let mut failing_since: Option<(tokio::time::Instant, String)> = None;
    let mut undeclared_since: Option<tokio::time::Instant> = None;
    loop {
        let Some(binding) = slot.get() else {
            return TeamWait::Unbound;
        };
        // The states first, then the inbox: a teammate writes its messages before it
        // records itself idle, so what it said before going idle is read here.
        let team = binding.team.clone();
        let read = tokio::task::spawn_blocking(move || {
            let config = team.config()?;
            let liveness = team.liveness(&config)?;
            Ok::<_, roo_store::Error>({
                // A death the monitor has not declared yet: it is about to, and to tell
                // the lead's model; settling now would end the run before that message.
                let undeclared: Vec<Name> = config
                    .members
                    .iter()
                    .filter(|m| {
                        !config.is_lead(m.name.as_str())
                            && liveness.observed_state(m) == roo_store::MemberState::Dead
                            && m.state() != roo_store::MemberState::Dead
                    })
                    .map(|m| m.name.clone())
                    .collect();
                // An idle teammate with a fresh message that wakes it (the lead's last
                // turn may have just sent it) is about to be busy: not settled yet. Only
                // text and task assignments count, and only for WOKEN_WITHIN: a member
                // that does not wake by then (a worker that stopped) is not waited for.
                let now_ms = roo_store::Timestamp::now().unix_ms();
                let woken: Vec<Name> = config
                    .members
                    .iter()
                    .filter(|m| {
                        !config.is_lead(m.name.as_str())
                            && !m.shut_down()
                            && liveness.observed_state(m) == roo_store::MemberState::Idle
                    })
                    .filter(|m| {
                        let unread = roo_store::ReadFilter {
                            unread_only: true,
                            ..roo_store::ReadFilter::default()
                        };
                        team.mailbox().read(&m.name, &unread).is_ok_and(|mail| {
                            mail.iter().any(|message| {
                                matches!(
                                    message.body,
                                    roo_store::MessageBody::Text
                                        | roo_store::MessageBody::TaskAssignment { .. }
                                ) && (0..WOKEN_WITHIN.as_millis() as i64)
                                    .contains(&(now_ms - message.timestamp.unix_ms()))
                            })
                        })
                    })
                    .map(|m| m.name.clone())
                    .collect();
                (TeamStatus::of(&config, &liveness), undeclared, woken)
            })
        })
        .await;
        let settled = match read {
            Ok(Ok((now, undeclared, woken))) => {
                failing_since = None;
                if undeclared.is_empty() {
                    undeclared_since = None;
                } else {
                    undeclared_since.get_or_insert_with(tokio::time::Instant::now);
                }
                let waiting = undeclared_since.is_some_and(|since| since.elapsed() < BROKEN_AFTER);
                if waiting {
                    Err(undeclared)
                } else if !woken.is_empty() {
                    Err(woken)
                } else {
                    now.settled().then_some(()).ok_or(now.busy())
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "failed to read the team config");
                let since = failing_since
                    .get_or_insert_with(|| (tokio::time::Instant::now(), String::new()));
                since.1 = e.to_string();
                if since.0.elapsed() >= BROKEN_AFTER {
                    return TeamWait::Broken {
                        error: since.1.clone(),
                    };
                }
                Err(Vec::new())
            }
            Err(_) => Err(Vec::new()),
        };
        if let Err(e) = binding.router.poll().await {
            tracing::warn!(error = %e, "failed to read the lead's inbox");
        }
        // The monitor declares a death and then tells the lead's inbox, and publishes its
        // status only after both: settling also needs its view, so a death declared a
        // moment ago is not settled on before its message is in the inbox.
        let monitor_settled =
            !monitor_open || status.borrow().as_ref().is_some_and(TeamStatus::settled);
        // Past the deadline a busy team ends the wait, whatever its messages: the timeout
        // is for the whole wait, so a team that keeps writing cannot keep the lead past
        // it (the messages are still there to read). A settled team's last messages still
        // get their turn.
        if tokio::time::Instant::now() >= deadline {
            let monitor_busy = || -> Vec<Name> {
                status
                    .borrow()
                    .as_ref()
                    .map(TeamStatus::busy)
                    .unwrap_or_default()
            };
            let still_busy = match &settled {
                Err(busy) if busy.is_empty() => Some(monitor_busy()),
                Err(busy) => Some(busy.clone()),
                Ok(()) if !monitor_settled => Some(monitor_busy()).filter(|b| !b.is_empty()),
                Ok(()) => None,
            };
            if let Some(busy) = still_busy {
                return TeamWait::TimedOut { busy };
            }
        }
        if binding.router.has_conversation() {
            return TeamWait::Input;
        }
        let busy = match settled {
            Ok(()) if monitor_settled => return TeamWait::Settled,
            Ok(()) => Vec::new(),
            Err(busy) => busy,
        };
        tokio::select! {
            open = binding.router.conversation(), if router_open => router_open = open,
            changed = status.changed(), if monitor_open => monitor_open = changed.is_ok(),
            _ = tokio::time::sleep(WAIT_TICK) => {}
            _ = tokio::time::sleep_until(deadline) => {
                let busy = if busy.is_empty() {
                    status.borrow().as_ref().map(TeamStatus::busy).unwrap_or_default()
                } else {
                    busy
                };
                return TeamWait::TimedOut { busy };
            }
        }
    }
}

/// Puts `text` about teammate `member`'s death into the lead's own inbox, so its model
/// hears of it at its next turn (and a headless lead waiting for its team gets that
/// turn) rather than the work silently going back to pending. Blocking.
pub fn tell_lead_of_death(team: &Team, lead: &Name, member: &Name, text: &str) {
    let message = format!(
        "[team runtime] {text}. Its unfinished tasks are pending again; its commits stay on its branch. Reassign the work (spawn a teammate again with the Agent tool) or finish it yourself, and say what was not done."
    );
    let sent = team.mailbox().send(
        lead,
        lead.as_str(),
        Outgoing::text(message, format!("teammate {member} died")),
    );
    if let Err(e) = sent {
        tracing::warn!(%member, error = %e, "failed to tell the lead's model of a death");
    }
}

/// The tasks whose work was lost to a teammate's death and never finished: not
/// completed, with a `reclaimed from` note. A headless lead that ends with any does not
/// exit 0. Blocking.
/// Only notes written by `lead` count (a teammate can add notes, never as the lead).
pub fn lost_work(team: &Team, lead: &Name) -> Vec<roo_store::Task> {
    team.tasks()
        .list(&TaskFilter::default())
        .map(|tasks| {
            tasks
                .into_iter()
                .filter(|t| t.status != roo_store::TaskStatus::Completed)
                .filter(|t| {
                    t.notes.iter().any(|n| {
                        n.by.as_ref() == Some(lead) && n.text.starts_with("reclaimed from ")
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The team a lead's conversation leaves it leading: the team of its last successful
/// TeamCreate not followed by a successful TeamDelete (what `--continue` rebinds).
pub fn team_led_in(messages: &[roo_llm::Message]) -> Option<Name> {
    use roo_llm::ContentBlock;
    let mut calls: std::collections::HashMap<&str, (&str, &serde_json::Value)> =
        std::collections::HashMap::new();
    let mut led = None;
    for message in messages {
        for block in &message.content {
            match block {
                ContentBlock::ToolUse { id, name, input } => {
                    calls.insert(id, (name, input));
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    is_error: false,
                    ..
                } => match calls.get(tool_use_id.as_str()) {
                    Some((crate::tools::team::CREATE, input)) => {
                        led = input
                            .get("team_name")
                            .and_then(serde_json::Value::as_str)
                            .and_then(|name| Name::parse_as("team name", name.trim()).ok());
                    }
                    Some((crate::tools::team::DELETE, _)) => led = None,
                    _ => {}
                },
                _ => {}
            }
        }
    }
    led
}

/// What the user can do with team `team` that a lead left behind (a `-p` run that hit
/// its team timeout, a lead that crashed): lead it again, or delete it.
pub fn left_team_advice(team: &Name) -> String {
    format!(
        "resume it with `roo-lead --team {team}` (or `roo-lead --continue` to resume the \
         session that led it), or delete it with `roo-mail team delete --team {team}`"
    )
}

/// A lead leaving its team on purpose with teammates still running (`--keep-panes`):
/// its pid is taken off the lead entry, so they wait for the next lead without end
/// rather than stop as they do when the lead's process is gone (`teammate::lead_watch`).
pub async fn release_lead(slot: &TeamSlot) {
    let Some(binding) = slot.get().filter(|b| b.is_lead()) else {
        return;
    };
    let (team, me) = (binding.team.clone(), binding.me.clone());
    let own = std::process::id();
    let released = tokio::task::spawn_blocking(move || {
        team.update_member(me.as_str(), |lead| {
            if lead.pid == Some(own) {
                lead.pid = None;
            }
        })
    })
    .await;
    if !matches!(released, Ok(Ok(_))) {
        tracing::warn!("failed to release the lead entry for kept teammates");
    }
}

/// Why the lead could not join a team.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("{0}")]
    Store(#[from] roo_store::Error),
    #[error("team {team} is led by {lead}, not by {me}; a lead can only lead its own team")]
    NotLead { team: Name, lead: String, me: Name },
    #[error(transparent)]
    Bound(#[from] crate::binding::AlreadyBound),
    #[error(transparent)]
    Key(#[from] crate::authority::AuthorityError),
    #[error(
        "team {team} is led by a running roo-lead (pid {pid}); one lead per team: stop that one, or pass --take-over to lead it from here (it is told and stops leading)"
    )]
    LeadAlive { team: Name, pid: u32 },
    #[error(
        "lead team {team} from inside an agent's command ({why}): a command may not start a lead that claims a team; start roo-lead from your own terminal"
    )]
    InsideCommand { team: Name, why: String },
}

/// Binds `slot` to the existing team `team` with `me` as its lead (`roo-lead --team`):
/// the team's lead must be `me`. The new binding's router reports to `events`; the
/// caller runs it (`router.run`).
///
/// One lead per team: while the lead entry names another live process, this is refused
/// unless `take_over`, which records this process as the lead (the other lead's monitor
/// sees that and stops leading). Teammates waiting for a lead are adopted: the lead
/// entry names a live process again.
///
/// Refused inside an agent's command ([`roo_agent::sandbox::inside_agent_command`]),
/// whichever way the lead got here (`--team`, `--continue`, `--resume`): a
/// prompt-injected teammate must not take its own team over.
pub fn join_as_lead(
    slot: &TeamSlot,
    home: &RooHome,
    team: Name,
    me: Name,
    events: TeamEventSender,
    take_over: bool,
) -> Result<Arc<TeamBinding>, JoinError> {
    if let Some(why) = roo_agent::sandbox::inside_agent_command() {
        return Err(JoinError::InsideCommand { team, why });
    }
    let team = Team::open(home, team)?;
    let config = team.config()?;
    if !config.is_lead(me.as_str()) {
        let lead = config
            .lead()
            .map_or_else(|| config.lead_agent_id.clone(), |m| m.name.to_string());
        return Err(JoinError::NotLead {
            team: team.name().clone(),
            lead,
            me,
        });
    }
    // Checked and written under the config's lock: two leads starting at once cannot
    // both pass.
    if let roo_store::LeadClaim::Held(pid) = team.claim_lead(std::process::id(), take_over)? {
        return Err(JoinError::LeadAlive {
            team: team.name().clone(),
            pid,
        });
    }
    // Teammates on any host see it lead (PostgreSQL); every write of its binding is
    // fenced as the lead.
    let presence = team.hold_presence(&me)?;
    let key = LeadKey::load_or_create(&team)?;
    let router = InboxRouter::with_events(team.mailbox(), me.clone(), events);
    Ok(slot.bind(TeamBinding {
        team,
        lead: me.clone(),
        me,
        router,
        presence: Some(Arc::new(presence)),
        lead_key: Some(Arc::new(key)),
    })?)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use roo_store::{Member, MessageId};
    use tokio::sync::mpsc;

    use super::*;
    use crate::event::{TeamEvent, team_events};

    fn name(s: &str) -> Name {
        Name::parse_as("name", s).unwrap()
    }

    fn create(dir: &Path, team: &str) -> Team {
        let team = name(team);
        Team::create(
            &RooHome::new(dir),
            team.clone(),
            "",
            Member::new(name("lead"), &team),
            vec![Member::new(name("alice"), &team)],
        )
        .unwrap()
    }

    /// The lead's binding to `team`, its router built the way TeamCreate builds it
    /// (without events).
    fn lead_binding(team: &Team) -> TeamBinding {
        TeamBinding {
            team: team.clone(),
            me: name("lead"),
            lead: name("lead"),
            router: InboxRouter::new(team.mailbox(), name("lead")),
            presence: None,
            lead_key: None,
        }
    }

    fn send(team: &Team, summary: &str) -> MessageId {
        team.mailbox()
            .send(&name("alice"), "lead", Outgoing::text("body", summary))
            .unwrap()[0]
            .id
            .clone()
    }

    async fn next_message(events: &mut mpsc::Receiver<TeamEvent>) -> TeamEvent {
        loop {
            let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
                .await
                .expect("an event in time")
                .expect("the channel is open");
            if matches!(event, TeamEvent::Message { .. }) {
                return event;
            }
        }
    }

    #[tokio::test]
    async fn team_input_waits_for_a_binding_and_a_message_that_wakes_the_lead() {
        let dir = tempfile::tempdir().unwrap();
        let team = create(dir.path(), "crew");
        let slot = TeamSlot::new();
        let wait = team_input(&slot);
        tokio::pin!(wait);
        // Unbound: nothing to wait for, even with a message in the inbox.
        send(&team, "before the binding");
        assert!(
            tokio::time::timeout(Duration::from_millis(300), &mut wait)
                .await
                .is_err()
        );
        // Bound later: the queued message resolves it once the router read it.
        let binding = slot.bind(lead_binding(&team)).unwrap();
        binding.router.poll().await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), &mut wait)
            .await
            .expect("the message wakes the lead");
        // Progress news alone does not wake it.
        binding.router.take_conversation();
        team.mailbox()
            .send(
                &name("alice"),
                "lead",
                Outgoing::new(MessageBody::StatusUpdate, "50% done").with_summary("progress"),
            )
            .unwrap();
        binding.router.poll().await.unwrap();
        assert!(binding.router.has_conversation());
        assert!(
            tokio::time::timeout(Duration::from_millis(300), team_input(&slot))
                .await
                .is_err(),
            "a status_update alone does not wake the lead"
        );
        send(&team, "a real message");
        binding.router.poll().await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), team_input(&slot))
            .await
            .expect("a text message wakes the lead");
    }

    #[tokio::test]
    async fn slot_delivery_does_nothing_unbound_and_delivers_the_current_teams_inbox() {
        let dir = tempfile::tempdir().unwrap();
        let first = create(dir.path(), "one");
        let second = create(dir.path(), "two");
        let slot = TeamSlot::new();
        let hook = SlotDelivery::new(slot.clone());
        let waiting = send(&first, "before the lead had a team");
        assert_eq!(hook.before_turn().await, TurnAction::Continue);

        slot.bind(lead_binding(&first)).unwrap();
        let TurnAction::Inject(texts) = hook.before_turn().await else {
            panic!("the bound team's message is injected");
        };
        assert!(texts[0].contains("before the lead had a team"), "{texts:?}");
        hook.injected().await;
        let inbox = first
            .mailbox()
            .read(&name("lead"), &Default::default())
            .unwrap();
        let delivered = inbox.iter().find(|m| m.id == waiting).unwrap();
        assert!(
            delivered.delivered_at.is_some(),
            "marked delivered once injected"
        );
        assert_eq!(
            hook.before_turn().await,
            TurnAction::Continue,
            "delivered once"
        );

        // TeamDelete, then another team between two turns: the hook follows the slot.
        slot.clear();
        send(&first, "to the old team");
        slot.bind(lead_binding(&second)).unwrap();
        send(&second, "to the new team");
        let TurnAction::Inject(texts) = hook.before_turn().await else {
            panic!("the new team's message is injected");
        };
        assert!(texts[0].contains("to the new team"), "{texts:?}");
        assert!(!texts[0].contains("to the old team"), "{texts:?}");
    }

    #[tokio::test]
    async fn the_monitor_reports_messages_of_a_router_bound_without_events() {
        let dir = tempfile::tempdir().unwrap();
        let team = create(dir.path(), "one");
        let slot = TeamSlot::new();
        let (sender, mut events) = team_events();
        let cancel = CancellationToken::new();
        let mut status = status::spawn_monitor(slot.clone(), sender, cancel.clone());
        let bound = slot.bind(lead_binding(&team)).unwrap();
        // The monitor reports alice's state once bound, then the router's messages.
        let alice = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                status.changed().await.unwrap();
                if let Some(s) = status.borrow().clone() {
                    return s;
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(alice.line(), "team one · alice busy");
        send(&team, "parser done");
        bound.router.poll().await.unwrap();
        assert_eq!(
            next_message(&mut events).await,
            TeamEvent::Message {
                from: name("alice"),
                kind: "text",
                preview: "parser done".to_string()
            }
        );
        cancel.cancel();
    }

    #[tokio::test]
    async fn the_team_wait_returns_input_settled_or_timed_out() {
        let dir = tempfile::tempdir().unwrap();
        let team = create(dir.path(), "one");
        let slot = TeamSlot::new();
        let (_, mut status) = watch::channel(None);
        let soon = || tokio::time::Instant::now() + Duration::from_millis(300);
        assert_eq!(
            wait_for_team(&slot, &mut status, soon()).await,
            TeamWait::Unbound
        );
        slot.bind(lead_binding(&team)).unwrap();
        assert_eq!(
            wait_for_team(&slot, &mut status, soon()).await,
            TeamWait::TimedOut {
                busy: vec![name("alice")]
            }
        );
        send(&team, "news");
        assert_eq!(
            wait_for_team(&slot, &mut status, soon()).await,
            TeamWait::Input
        );
        // Past the deadline a busy team ends the wait even with a message waiting (a
        // chatty team cannot keep the lead past `--team-timeout`; CI flake of the demo
        // with `--timeout 0`).
        assert_eq!(
            wait_for_team(&slot, &mut status, tokio::time::Instant::now()).await,
            TeamWait::TimedOut {
                busy: vec![name("alice")]
            }
        );
        slot.get().unwrap().router.take_conversation();
        team.set_active("alice", false).unwrap();
        // A settled team's last message still gets its turn past the deadline.
        send(&team, "the last report");
        assert_eq!(
            wait_for_team(&slot, &mut status, tokio::time::Instant::now()).await,
            TeamWait::Input
        );
        slot.get().unwrap().router.take_conversation();
        // What the router has handed out (to the delivery hook) no longer holds the
        // lead: with alice idle, the team is settled.
        assert_eq!(
            wait_for_team(&slot, &mut status, soon()).await,
            TeamWait::Settled
        );
    }

    fn decider(dir: &Path, mode: PermissionMode) -> PolicyDecider {
        let tools = ToolRegistry::new();
        for tool in roo_agent::tools::builtin_tools() {
            tools.register(tool);
        }
        let policy = roo_agent::permissions::PermissionPolicy::new(
            dir.to_path_buf(),
            mode,
            roo_agent::permissions::RuleSet::new(),
        );
        PolicyDecider {
            policy: Arc::new(std::sync::RwLock::new(policy)),
            tools,
            project_root: dir.to_path_buf(),
        }
    }

    #[tokio::test]
    async fn a_headless_lead_allows_only_what_its_own_policy_runs_without_asking() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let alice = name("alice");
        let strict = decider(&root, PermissionMode::Default);
        let read = serde_json::json!({"path": "notes.txt"});
        assert!(strict.permission(&alice, "ReadFile", &read, "").await.allow);
        let write = serde_json::json!({"path": "notes.txt", "content": "x"});
        let denied = strict.permission(&alice, "WriteFile", &write, "").await;
        assert!(!denied.allow);
        assert!(
            denied.reason.contains("nobody can approve"),
            "{}",
            denied.reason
        );
        let outside = serde_json::json!({"path": "/etc/passwd"});
        assert!(
            !strict
                .permission(&alice, "ReadFile", &outside, "")
                .await
                .allow
        );
        let unknown = strict.permission(&alice, "Teleport", &read, "").await;
        assert!(
            !unknown.allow && unknown.reason.contains("no Teleport tool"),
            "{}",
            unknown.reason
        );
        assert!(!strict.plan(&alice, "1. edit").await.allow);

        let edits = decider(&root, PermissionMode::AcceptEdits);
        assert!(
            edits
                .permission(&alice, "WriteFile", &write, "")
                .await
                .allow
        );
        assert!(edits.plan(&alice, "1. edit").await.allow);
    }

    #[tokio::test]
    async fn only_the_teams_lead_can_join_it_as_lead() {
        let dir = tempfile::tempdir().unwrap();
        create(dir.path(), "one");
        let home = RooHome::new(dir.path());
        let slot = TeamSlot::new();
        let (events, _rx) = team_events();
        let err = join_as_lead(
            &slot,
            &home,
            name("one"),
            name("alice"),
            events.clone(),
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "team one is led by lead, not by alice; a lead can only lead its own team"
        );
        assert!(slot.get().is_none());
        let bound = join_as_lead(
            &slot,
            &home,
            name("one"),
            name("lead"),
            events.clone(),
            false,
        )
        .unwrap();
        assert!(bound.is_lead());
        assert!(matches!(
            join_as_lead(
                &slot,
                &home,
                name("one"),
                name("lead"),
                events.clone(),
                false
            ),
            Err(JoinError::Bound(_))
        ));
        assert!(matches!(
            join_as_lead(
                &TeamSlot::new(),
                &home,
                name("nosuch"),
                name("lead"),
                events,
                false
            ),
            Err(JoinError::Store(_))
        ));
    }
    /// A decider that never answers: the person looks away.
    struct Silent;

    impl RequestDecider for Silent {
        fn permission<'a>(
            &'a self,
            _from: &'a Name,
            _tool: &'a str,
            _input: &'a serde_json::Value,
            _summary: &'a str,
        ) -> BoxFuture<'a, Decision> {
            Box::pin(std::future::pending())
        }

        fn plan<'a>(&'a self, _from: &'a Name, _plan: &'a str) -> BoxFuture<'a, Decision> {
            Box::pin(std::future::pending())
        }
    }

    /// The lead's binding to `team` with a key, its router reporting to the receiver.
    fn keyed_lead_binding(team: &Team) -> (TeamBinding, mpsc::Receiver<TeamEvent>) {
        let (events, rx) = team_events();
        let binding = TeamBinding {
            router: InboxRouter::with_events(team.mailbox(), name("lead"), events),
            presence: None,
            lead_key: Some(Arc::new(LeadKey::load_or_create(team).unwrap())),
            ..lead_binding(team)
        };
        (binding, rx)
    }

    /// alice asks the lead to run `make`, as request `id`.
    fn ask_permission(team: &Team, id: &str) {
        team.mailbox()
            .send(
                &name("alice"),
                "lead",
                Outgoing::new(
                    MessageBody::PermissionRequest {
                        request_id: id.to_string(),
                        tool: "Bash".to_string(),
                        input: serde_json::json!({"command": "make"}),
                    },
                    "",
                ),
            )
            .unwrap();
    }

    /// The next notice on `rx`, other events skipped.
    async fn next_notice(rx: &mut mpsc::Receiver<TeamEvent>) -> String {
        loop {
            match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
                Ok(Some(TeamEvent::Notice { text })) => return text,
                Ok(Some(_)) => continue,
                other => panic!("no notice: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_question_whose_asker_ended_its_run_is_withdrawn_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let team = create(dir.path(), "w");
        let (binding, mut rx) = keyed_lead_binding(&team);
        ask_permission(&team, "req-1");
        binding.router.poll().await.unwrap();
        let answering = answer_requests(&binding, &Silent);
        tokio::pin!(answering);
        // While alice waits, the question stays open.
        assert!(
            tokio::time::timeout(Duration::from_millis(1200), &mut answering)
                .await
                .is_err()
        );
        team.set_active("alice", false).unwrap();
        let taken = tokio::time::timeout(Duration::from_secs(10), answering)
            .await
            .expect("withdrawn in time");
        assert_eq!(taken, 1);
        let notice = next_notice(&mut rx).await;
        assert_eq!(
            notice,
            "alice's permission question was withdrawn: its run ended without waiting for the answer"
        );
        // Nothing was sent to alice, and the request is acknowledged.
        assert!(
            team.mailbox()
                .read(&name("alice"), &roo_store::ReadFilter::default())
                .unwrap()
                .is_empty()
        );
    }
    #[tokio::test]
    async fn a_lead_taken_over_withdraws_its_question_and_leaves_the_request_to_the_new_lead() {
        let dir = tempfile::tempdir().unwrap();
        let team = create(dir.path(), "w");
        let (binding, mut rx) = keyed_lead_binding(&team);
        ask_permission(&team, "req-1");
        binding.router.poll().await.unwrap();
        let answering = answer_requests(&binding, &Silent);
        tokio::pin!(answering);
        assert!(
            tokio::time::timeout(Duration::from_millis(100), &mut answering)
                .await
                .is_err()
        );
        binding.router.close();
        tokio::time::timeout(Duration::from_secs(10), answering)
            .await
            .expect("withdrawn in time");
        let notice = next_notice(&mut rx).await;
        assert_eq!(
            notice,
            "alice's permission question was withdrawn: this lead no longer leads the team"
        );
        let inbox = team
            .mailbox()
            .read(&name("lead"), &roo_store::ReadFilter::default())
            .unwrap();
        assert!(
            inbox.iter().all(|m| !m.read && m.acknowledged_at.is_none()),
            "{inbox:#?}"
        );
    }
    #[test]
    fn only_the_leads_own_reclaim_notes_count_as_lost_work() {
        let dir = tempfile::tempdir().unwrap();
        let team = create(dir.path(), "w");
        let task = team
            .tasks()
            .create(roo_store::NewTask {
                subject: "Write the parser".to_string(),
                owner: Some(name("alice")),
                ..Default::default()
            })
            .unwrap();
        // A teammate writes what looks like the lead's note (on its own task).
        team.tasks()
            .update(
                &task.id,
                roo_store::TaskPatch {
                    note: Some("reclaimed from bob: bob died: its process 1 is gone".to_string()),
                    by: Some(name("alice")),
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(lost_work(&team, &name("lead")).is_empty());
        // The lead's own declaration counts.
        team.declare_dead("alice", Some(&name("lead")), "its process 1 is gone")
            .unwrap();
        team.tasks()
            .update(
                &task.id,
                roo_store::TaskPatch {
                    owner: Some(Some(name("alice"))),
                    by: Some(name("lead")),
                    force: true,
                    ..Default::default()
                },
            )
            .ok();
        let _ = team
            .tasks()
            .release_owner(&name("alice"), Some(&name("lead")), "alice died");
        let lost = lost_work(&team, &name("lead"));
        assert_eq!(lost.len(), 1, "{:#?}", team.tasks().get(&task.id));
    }
    #[tokio::test]
    async fn a_newer_question_from_the_same_teammate_withdraws_the_older() {
        let dir = tempfile::tempdir().unwrap();
        let team = create(dir.path(), "w");
        let (binding, mut rx) = keyed_lead_binding(&team);
        ask_permission(&team, "req-1");
        binding.router.poll().await.unwrap();
        let answering = answer_requests(&binding, &Silent);
        tokio::pin!(answering);
        assert!(
            tokio::time::timeout(Duration::from_millis(100), &mut answering)
                .await
                .is_err()
        );
        ask_permission(&team, "req-2");
        binding.router.poll().await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), answering)
            .await
            .expect("withdrawn in time");
        let notice = next_notice(&mut rx).await;
        assert_eq!(
            notice,
            "alice's permission question was withdrawn: it asked a newer question"
        );
        // The newer one waits to be asked.
        let queued = binding.router.take_requests();
        assert_eq!(queued.len(), 1);
        assert!(
            matches!(&queued[0].body, MessageBody::PermissionRequest { request_id, .. } if request_id == "req-2")
        );
    }
}
