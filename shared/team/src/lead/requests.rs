//! Teammates' questions to the lead: permission and plan-approval requests are answered
//! as they arrive ([`spawn_request_answerer`]) by a [`RequestDecider`] — the person at
//! the terminal ([`ApproverDecider`]) or, in a headless run, the lead's own permission
//! policy ([`PolicyDecider`]) — never left waiting. Each teammate's questions are
//! answered in order, different teammates' at the same time (so the person sees every
//! question that waits, not only the first asker's). A question is withdrawn once its
//! asker no longer waits for it, and an answer goes out signed with the lead's key.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use roo_agent::SharedPolicy;
use roo_agent::permissions::{Approval, Approver, PermissionMode, PermissionRequest};
use roo_agent::tool::ToolRegistry;
use roo_store::{Message, MessageBody, Name, Outgoing, PermissionDecision};
use tokio_util::sync::CancellationToken;

use crate::authority::Answer;
use crate::binding::{TeamBinding, TeamSlot};
use crate::event::one_line;

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
                roo_agent::permissions::PermissionDecision::Ask(request) => Decision {
                    allow: false,
                    reason: format!(
                        "the lead runs headless (-p) in permission mode {} and nobody can approve this ({}); run the lead with a mode that allows it, or add an allow rule",
                        policy.mode(),
                        request.reason
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
/// [`Approver`] (the REPL's question channel). "Always" is not offered: a teammate's
/// call saves no rule in the lead's config (an "always" answer counts as "yes, once").
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
            suggested_rule: String::new(),
            // Nothing is saved for a teammate's call: "always" is not offered.
            offer_always: false,
        }))
    }

    fn plan<'a>(&'a self, from: &'a Name, plan: &'a str) -> BoxFuture<'a, Decision> {
        Box::pin(self.ask(PermissionRequest {
            tool: "ExitPlanMode".to_string(),
            summary: format!("teammate {from} asks to approve its plan"),
            input: serde_json::json!({ "plan": plan }),
            reason: one_line(plan, 400),
            suggested_rule: String::new(),
            offer_always: false,
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
    answer_taken(binding, decider, requests).await
}

/// Answers `requests` (taken from `binding`'s router) in order, as [`answer_requests`]
/// does; returns how many were acknowledged.
async fn answer_taken(
    binding: &TeamBinding,
    decider: &dyn RequestDecider,
    requests: Vec<Message>,
) -> usize {
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
        // Teammates whose questions are being answered: their newer requests stay queued
        // (where the open question sees them and is withdrawn) until those end.
        let mut asking: HashSet<Name> = HashSet::new();
        let mut answering = tokio::task::JoinSet::new();
        // Whose questions each answering task answers: a task that panicked (its
        // result a `JoinError`) still frees its asker, whose later questions are then
        // taken up instead of waiting forever.
        let mut askers: HashMap<tokio::task::Id, Name> = HashMap::new();
        loop {
            let binding = bindings.borrow_and_update().clone();
            let Some(binding) = binding else {
                tokio::select! {
                    changed = bindings.changed() => if changed.is_err() { return },
                    _ = cancel.cancelled() => return,
                }
                continue;
            };
            let busy = asking.clone();
            tokio::select! {
                open = binding.router.request_queued(move |m| !busy.contains(&m.from)) => {
                    if open {
                        let taken = binding.router.take_requests_where(|m| !asking.contains(&m.from));
                        for (asker, requests) in by_asker(taken) {
                            asking.insert(asker.clone());
                            let (binding, decider) = (binding.clone(), decider.clone());
                            let task = answering.spawn(async move {
                                answer_taken(&binding, decider.as_ref(), requests).await;
                            });
                            askers.insert(task.id(), asker);
                        }
                        continue;
                    }
                    // The router stopped: wait for another binding.
                    tokio::select! {
                        changed = bindings.changed() => if changed.is_err() { return },
                        _ = cancel.cancelled() => return,
                    }
                }
                Some(done) = answering.join_next_with_id(), if !answering.is_empty() => {
                    let id = match done {
                        Ok((id, ())) => id,
                        Err(e) => {
                            tracing::warn!(error = %e, "answering a teammate's questions failed");
                            e.id()
                        }
                    };
                    if let Some(asker) = askers.remove(&id) {
                        asking.remove(&asker);
                    }
                }
                changed = bindings.changed() => if changed.is_err() { return },
                _ = cancel.cancelled() => return,
            }
        }
    })
}

/// `requests` grouped by asker, each group in its order, groups in order of first ask.
fn by_asker(requests: Vec<Message>) -> Vec<(Name, Vec<Message>)> {
    let mut groups: Vec<(Name, Vec<Message>)> = Vec::new();
    for request in requests {
        match groups.iter_mut().find(|(asker, _)| *asker == request.from) {
            Some((_, group)) => group.push(request),
            None => groups.push((request.from.clone(), vec![request])),
        }
    }
    groups
}
