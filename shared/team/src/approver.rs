//! A teammate's permission questions, asked of the lead through the mailbox.
//!
//! [`LeadApprover`] opens a request with the member's [`InboxRouter`] (a fresh random
//! id, answered only by the lead), sends a `permission_request` to the lead and waits for
//! the `permission_response` the router hands it. The turn hook never sees that response,
//! and no other message can answer it: not one with another id, not one from another
//! member. "Always allow" is not offered: saving rules is the lead's user's decision, in
//! the lead's own config.

use futures_util::future::BoxFuture;
use roo_agent::permissions::{Approval, Approver, PermissionRequest};
use roo_store::limits::MAX_MESSAGE_FIELDS;
use roo_store::{Mailbox, MessageBody, Name, Outgoing, PermissionDecision};

use crate::event::one_line;
use crate::router::{InboxRouter, ResponseKind, new_request_id};

/// Longest summary of a request, in characters.
const SUMMARY_CHARS: usize = 120;

/// Asks the lead (and through it, the user) about a teammate's tool calls.
pub struct LeadApprover {
    router: InboxRouter,
    mailbox: Mailbox,
    lead: Name,
}

impl LeadApprover {
    /// Asks `lead` on behalf of the router's member; responses arrive through `router`,
    /// which must be running ([`InboxRouter::run`]) while a question is open.
    pub fn new(router: InboxRouter, mailbox: Mailbox, lead: Name) -> LeadApprover {
        router.require_signed_answers();
        LeadApprover {
            router,
            mailbox,
            lead,
        }
    }

    async fn ask_lead(&self, request: &PermissionRequest) -> Result<Approval, String> {
        let id = new_request_id().map_err(|e| e.to_string())?;
        let waiter = self
            .router
            .expect(ResponseKind::Permission, &id, &self.lead)
            .map_err(|e| e.to_string())?;
        // The person approves what they see: a call whose input cannot travel whole is
        // denied here, never shown in part and approved unseen.
        let input = request.input.clone();
        let size = serde_json::to_string(&input).map_or(0, |s| s.len());
        if size > MAX_MESSAGE_FIELDS / 2 {
            return Ok(Approval::Deny {
                feedback: Some(format!(
                    "the call's input is {size} bytes, more than the lead can be shown whole ({} bytes); it was not asked and is denied: split it into smaller calls",
                    MAX_MESSAGE_FIELDS / 2
                )),
            });
        }
        let outgoing = Outgoing::new(
            MessageBody::PermissionRequest {
                request_id: id,
                tool: request.tool.clone(),
                input,
            },
            format!("{}\n{}", request.summary, request.reason),
        )
        .with_summary(one_line(&request.summary, SUMMARY_CHARS));
        let (mailbox, me, lead) = (
            self.mailbox.clone(),
            self.router.member().clone(),
            self.lead.clone(),
        );
        tokio::task::spawn_blocking(move || mailbox.send(&me, lead.as_str(), outgoing))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("failed to ask the lead {}: {e}", self.lead))?;
        let answer = waiter.recv().await.map_err(|e| e.to_string())?;
        Ok(match answer.body {
            MessageBody::PermissionResponse {
                decision: PermissionDecision::Allow,
                ..
            } => Approval::AllowOnce,
            MessageBody::PermissionResponse { reason, .. } => Approval::Deny {
                feedback: Some(if reason.trim().is_empty() {
                    "the lead refused this call".to_string()
                } else {
                    format!("the lead refused this call: {}", reason.trim())
                }),
            },
            other => Approval::Deny {
                feedback: Some(format!(
                    "the lead answered with a {} message, not a permission response",
                    other.type_name()
                )),
            },
        })
    }
}

impl Approver for LeadApprover {
    fn ask<'a>(&'a self, request: &'a PermissionRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            self.ask_lead(request)
                .await
                .unwrap_or_else(|why| Approval::Deny {
                    feedback: Some(format!(
                        "{} needs approval, but the lead could not be asked: {why}",
                        request.summary
                    )),
                })
        })
    }
}
