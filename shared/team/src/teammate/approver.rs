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
//! (`lead_watch`). A `shutdown_request` from the lead while a question is open withdraws
//! it: the call is denied, and at the top of the next turn the request is put before the model, which
//! approves (the run stops) or rejects it (and may try the call again).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use futures_util::future::BoxFuture;
use roo_agent::agent_loop::{SharedPolicy, TurnAction, TurnHook};
use roo_agent::permissions::{Approval, Approver, PermissionMode, PermissionRequest};
use roo_store::limits::MAX_MESSAGE_FIELDS;
use roo_store::{Mailbox, MessageBody, Name, Outgoing};
use serde_json::Value;

use crate::approver::LeadApprover;
use crate::router::{InboxRouter, ResponseKind, new_request_id};
use crate::teammate::lead_watch::lead_gone;

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

impl TurnHook for PlanGate {
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
}

impl TeammateApprover {
    /// Asks `lead` through `router` (which must be running) and `mailbox`.
    pub fn new(
        lead_approver: LeadApprover,
        router: InboxRouter,
        mailbox: Mailbox,
        lead: Name,
        gate: Arc<PlanGate>,
    ) -> TeammateApprover {
        router.require_signed_answers();
        TeammateApprover {
            lead_approver,
            router,
            mailbox,
            lead,
            gate,
        }
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
    async fn unless_shut_down(&self, ask: impl Future<Output = Approval>) -> Approval {
        let lead = &self.lead;
        let shutdown = self.router.request_queued(|m| {
            matches!(m.body, MessageBody::ShutdownRequest { .. }) && &m.from == lead
        });
        tokio::pin!(ask);
        tokio::select! {
            approval = &mut ask => approval,
            // Nobody can answer once the lead's process is gone: denied within
            // seconds, never a wait without end.
            why = lead_gone(self.mailbox.team()) => Approval::Deny {
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
                return self.unless_shut_down(plan).await;
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
            self.unless_shut_down(self.lead_approver.ask(request)).await
        })
    }
}
