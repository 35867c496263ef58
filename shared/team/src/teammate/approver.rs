//! A teammate's approver: plans go to the lead as `plan_approval_request`, other
//! questions as `permission_request` ([`LeadApprover`]), and nothing is written before
//! a required plan is approved.
//!
//! In plan mode every write and command asks the approver (only the plan file is
//! allowed), so the [`PlanGate`] is where "no write before approval" holds: while the
//! plan of a `plan_mode_required` teammate is not approved, every question but
//! `ExitPlanMode` is refused without asking anybody. `ExitPlanMode` sends the plan and
//! waits for the lead's `plan_approval_response` through the router (matched on the
//! random request id and the lead as sender): approved, the tool runs (plan mode ends)
//! and at the top of the next turn the gate sets the mode the lead chose; rejected, the
//! model gets the lead's feedback as the tool's error result and stays in plan mode.
//!
//! A question open when the lead's process goes away is denied within a second
//! (`lead_watch`). One asked while no lead process runs at all (a worker started by hand
//! beside a team whose lead never started) puts a notice on the teammate's screen —
//! it waits for the lead's approval, no lead runs, how to start one — and is denied
//! when no lead has started within the orphan timeout. A `shutdown_request` from the lead while a question is open withdraws
//! it: the call is denied, and at the top of the next turn the request is put before the model, which
//! approves (the run stops) or rejects it (and may try the call again).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use roo_agent::event::{AgentEvent, EventSink};
use roo_agent::permissions::{Approval, Approver, PermissionMode, PermissionRequest};
use roo_agent::{AgentHook, SharedPolicy, TurnAction};
use roo_store::limits::MAX_MESSAGE_FIELDS;
use roo_store::{Mailbox, MessageBody, Name, Outgoing};
use serde_json::Value;

use crate::approver::LeadApprover;
use crate::router::{InboxRouter, ResponseKind, new_request_id};
use crate::teammate::lead_watch::unanswerable;

/// The tool whose call presents a plan.
const EXIT_PLAN_MODE: &str = "ExitPlanMode";

/// Whether a required plan is still unapproved, and what happens once it is.
pub struct PlanGate {
    /// A plan is required and not yet approved.
    pending: AtomicBool,
    /// Approved since the last turn: set the mode at the next turn's top.
    approved: AtomicBool,
    mode_after: PermissionMode,
    policy: OnceLock<SharedPolicy>,
}

impl PlanGate {
    /// A gate that holds writes back until a plan is approved if `required`, and then
    /// switches to `mode_after`.
    pub fn new(required: bool, mode_after: PermissionMode) -> PlanGate {
        PlanGate {
            pending: AtomicBool::new(required),
            approved: AtomicBool::new(false),
            mode_after,
            policy: OnceLock::new(),
        }
    }

    /// Hands the gate the agent's policy (after the agent is built).
    pub fn bind(&self, policy: SharedPolicy) {
        let _ = self.policy.set(policy);
    }

    /// Whether writes are held back for an unapproved plan.
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst)
    }

    fn approve(&self) {
        self.pending.store(false, Ordering::SeqCst);
        self.approved.store(true, Ordering::SeqCst);
    }
}

impl AgentHook for PlanGate {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async move {
            // ExitPlanMode leaves plan mode for the mode before it (default for a run
            // started in plan mode); the lead's mode applies from here on.
            if self.approved.swap(false, Ordering::SeqCst)
                && self.mode_after != PermissionMode::Plan
                && let Some(policy) = self.policy.get()
                && let Ok(mut policy) = policy.write()
                && policy.mode() != PermissionMode::Plan
            {
                policy.set_mode(self.mode_after);
                policy.set_plan_file(None);
            }
            TurnAction::Continue
        })
    }
}

/// The approver of a teammate (see the module documentation).
pub struct TeammateApprover {
    lead_approver: LeadApprover,
    router: InboxRouter,
    mailbox: Mailbox,
    lead: Name,
    gate: Arc<PlanGate>,
    no_lead: NoLead,
}

/// What a teammate does with a question while no lead process runs.
pub struct NoLead {
    /// Where the notice goes: the teammate's screen.
    pub notices: EventSink,
    /// How long the question waits for a lead to start (`None`: until one answers).
    pub timeout: Option<Duration>,
}

impl TeammateApprover {
    /// Asks `lead` through `router` (which must be running) and `mailbox`.
    pub fn new(
        lead_approver: LeadApprover,
        router: InboxRouter,
        mailbox: Mailbox,
        lead: Name,
        gate: Arc<PlanGate>,
        no_lead: NoLead,
    ) -> TeammateApprover {
        router.require_signed_answers();
        TeammateApprover {
            lead_approver,
            router,
            mailbox,
            lead,
            gate,
            no_lead,
        }
    }

    /// The screen notice of a question `summary` that waits while no lead runs.
    fn no_lead_notice(&self, summary: &str) -> String {
        let team = self.mailbox.team().name();
        let until = match self.no_lead.timeout {
            Some(timeout) => format!(
                "unanswered, it is denied in {}s (--orphan-timeout)",
                timeout.as_secs()
            ),
            None => "it waits until a lead answers (--orphan-timeout 0)".to_string(),
        };
        format!(
            "waiting for the lead's approval of {summary}, but no lead is running for team \
             {team}: start one with `roo-lead --team {team}` in the project, or restart this \
             worker with --permission-mode acceptEdits (or another mode that asks less); {until}"
        )
    }

    async fn ask_plan(&self, request: &PermissionRequest) -> Result<Approval, String> {
        let plan = request
            .input
            .get("plan")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        // The lead approves what it can see whole: a plan too long to send is not cut
        // and asked about, it is refused here.
        let limit = MAX_MESSAGE_FIELDS / 2;
        if plan.len() > limit {
            return Ok(Approval::Deny {
                feedback: Some(format!(
                    "the plan is {} bytes, more than the lead can be shown whole ({limit} bytes); it was not sent. Shorten it (keep the steps, drop the detail) and call ExitPlanMode again",
                    plan.len()
                )),
            });
        }
        let id = new_request_id().map_err(|e| e.to_string())?;
        let waiter = self
            .router
            .expect(ResponseKind::PlanApproval, &id, &self.lead)
            .map_err(|e| e.to_string())?;
        let outgoing = Outgoing::new(
            MessageBody::PlanApprovalRequest {
                request_id: id,
                plan,
            },
            "",
        )
        .with_summary(format!("{} asks to approve a plan", self.router.member()));
        let (mailbox, me, lead) = (
            self.mailbox.clone(),
            self.router.member().clone(),
            self.lead.clone(),
        );
        tokio::task::spawn_blocking(move || mailbox.send(&me, lead.as_str(), outgoing))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("failed to send the plan to the lead {}: {e}", self.lead))?;
        tracing::info!(member = %self.router.member(), "plan sent to the lead; waiting for approval");
        let answer = waiter.recv().await.map_err(|e| e.to_string())?;
        Ok(match answer.body {
            MessageBody::PlanApprovalResponse { approve: true, .. } => {
                self.gate.approve();
                Approval::AllowOnce
            }
            MessageBody::PlanApprovalResponse { feedback, .. } => {
                let feedback = feedback.trim();
                Approval::Deny {
                    feedback: Some(format!(
                        "The lead {} rejected the plan{}. You are still in plan mode: revise \
                         the plan and call ExitPlanMode again; change nothing until it is \
                         approved.",
                        self.lead,
                        if feedback.is_empty() {
                            String::new()
                        } else {
                            format!(": {feedback}")
                        }
                    )),
                }
            }
            other => Approval::Deny {
                feedback: Some(format!(
                    "the lead answered with a {} message, not a plan approval",
                    other.type_name()
                )),
            },
        })
    }
}

impl TeammateApprover {
    /// `ask`, unless the lead asks this member to shut down first: then the question is
    /// withdrawn (its waiter dropped) and the call denied, so the run reaches the top of
    /// its next turn, where the shutdown hook puts the request before the model.
    async fn unless_shut_down(
        &self,
        request: &PermissionRequest,
        ask: impl Future<Output = Approval>,
    ) -> Approval {
        let lead = &self.lead;
        let shutdown = self.router.request_queued(|m| {
            matches!(m.body, MessageBody::ShutdownRequest { .. }) && &m.from == lead
        });
        let nobody = unanswerable(self.mailbox.team(), self.no_lead.timeout, || {
            let text = self.no_lead_notice(&request.summary);
            tracing::warn!(member = %self.router.member(), "{text}");
            self.no_lead.notices.emit(AgentEvent::Notice { text });
        });
        tokio::pin!(ask);
        tokio::select! {
            approval = &mut ask => approval,
            // Nobody can answer once the lead's process is gone (denied within
            // seconds), or while no lead starts (denied after the orphan timeout):
            // never a wait without end.
            why = nobody => Approval::Deny {
                feedback: Some(format!(
                    "nobody can answer this question: {why}. The call is denied; a lead that \
                     adopts the team (roo-lead --team {}) can be asked again",
                    self.mailbox.team().name()
                )),
            },
            queued = shutdown => {
                if queued {
                    Approval::Deny {
                        feedback: Some(format!(
                            "the lead {lead} asked you to shut down before answering; answer \
                             that request (it follows) before you try again"
                        )),
                    }
                } else {
                    ask.await
                }
            }
        }
    }
}

impl Approver for TeammateApprover {
    fn ask<'a>(&'a self, request: &'a PermissionRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            if request.tool == EXIT_PLAN_MODE {
                let plan = async {
                    self.ask_plan(request)
                        .await
                        .unwrap_or_else(|why| Approval::Deny {
                            feedback: Some(format!(
                                "the plan could not be sent to the lead for approval: {why}"
                            )),
                        })
                };
                return self.unless_shut_down(request, plan).await;
            }
            if self.gate.pending() {
                return Approval::Deny {
                    feedback: Some(format!(
                        "{} needs the lead's approval of your plan first: nothing may be \
                         changed before it. Finish the plan and call ExitPlanMode to send it \
                         to the lead {}.",
                        request.summary, self.lead
                    )),
                };
            }
            self.unless_shut_down(request, self.lead_approver.ask(request))
                .await
        })
    }
}
