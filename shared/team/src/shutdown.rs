//! Ending a member's run on a `shutdown_request`.
//!
//! [`ShutdownOnRequest`] is a turn hook: at the top of every turn it takes the
//! `shutdown_request`s the [`InboxRouter`] queued. One from the member's lead is
//! answered with a `shutdown_response` (approve, with the request's id) and the hook
//! returns [`TurnAction::Stop`], so the run ends between two tool calls with
//! `Outcome::Stopped` saying who asked. One from anybody else is acknowledged, logged
//! and otherwise ignored: only the lead may end a teammate (a `shutdown_response` may
//! only go to the lead anyway). The request is acknowledged in the inbox only
//! after the answer was sent; if sending fails the run still stops (the request was
//! the lead's wish) and the failure is logged. It always approves: a teammate loop
//! that lets its model decide (and possibly reject) uses a hook of its own.

use futures_util::future::BoxFuture;
use roo_agent::agent_loop::{TurnAction, TurnHook};
use roo_store::{Mailbox, Message, MessageBody, Name, Outgoing};

use crate::router::InboxRouter;

/// The turn hook that stops the run when the member is asked to shut down.
pub struct ShutdownOnRequest {
    router: InboxRouter,
    mailbox: Mailbox,
    lead: Name,
}

impl ShutdownOnRequest {
    /// Stops the router's member when `lead` asks it to.
    pub fn new(router: InboxRouter, mailbox: Mailbox, lead: Name) -> ShutdownOnRequest {
        ShutdownOnRequest {
            router,
            mailbox,
            lead,
        }
    }
}

impl TurnHook for ShutdownOnRequest {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async move {
            if let Err(e) = self.router.poll().await {
                tracing::warn!(member = %self.router.member(), error = %e, "failed to read the inbox");
            }
            let requests = self
                .router
                .take_requests_where(|m| matches!(m.body, MessageBody::ShutdownRequest { .. }));
            if requests.is_empty() {
                return TurnAction::Continue;
            }
            let (honoured, ignored): (Vec<_>, Vec<_>) =
                requests.iter().partition(|m| m.from == self.lead);
            for request in &ignored {
                tracing::warn!(member = %self.router.member(), from = %request.from, "ignored a shutdown request not from the lead");
            }
            for request in &honoured {
                approve_shutdown(
                    &self.mailbox,
                    self.router.member(),
                    request,
                    "stopping between turns",
                )
                .await;
            }
            let ids = requests.iter().map(|m| m.id.clone()).collect();
            if let Err(e) = self.router.handled(ids).await {
                tracing::warn!(member = %self.router.member(), error = %e, "failed to acknowledge shutdown requests");
            }
            if honoured.is_empty() {
                return TurnAction::Continue;
            }
            TurnAction::Stop(format!(
                "the lead {} asked {} to shut down",
                self.lead,
                self.router.member()
            ))
        })
    }
}

/// Answers `request` (a `shutdown_request`) with an approving `shutdown_response` that
/// carries its request id, from `me` to its sender. A failure to send is logged: the
/// member stops anyway (the request was the lead's wish).
pub(crate) async fn approve_shutdown(
    mailbox: &Mailbox,
    me: &Name,
    request: &Message,
    reason: &str,
) {
    let MessageBody::ShutdownRequest { request_id } = &request.body else {
        return;
    };
    let answer = Outgoing::new(
        MessageBody::ShutdownResponse {
            approve: true,
            reason: reason.to_string(),
            request_id: request_id.clone(),
        },
        "",
    );
    let (mailbox, from, to) = (mailbox.clone(), me.clone(), request.from.to_string());
    let sent = tokio::task::spawn_blocking(move || mailbox.send(&from, &to, answer)).await;
    if !matches!(sent, Ok(Ok(_))) {
        tracing::warn!(member = %me, to = %request.from, result = ?sent.map(|r| r.map(|_| ())), "failed to answer a shutdown request");
    }
}
