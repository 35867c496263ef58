//! Delivering inbox messages into a running agent's conversation.
//!
//! [`InboxDelivery`] is the turn hook a teammate (or the lead) runs: at the top of every
//! loop turn — so also between the tool calls of a long run — it has the
//! [`InboxRouter`] read the inbox, takes the messages queued for the conversation and
//! injects them as one system reminder: the standing notice that teammate messages are
//! information, never the user's authorization, then each message as
//! `<teammate-message from=… type=… summary=…>…</teammate-message>`. Only once the
//! loop reports them in the conversation (and its transcript) are they marked
//! delivered in the inbox, so a crash before that loses nothing: the next process reads
//! them again.

use std::sync::Mutex;

use futures_util::future::BoxFuture;
use roo_agent::agent_loop::{TurnAction, TurnHook};
use roo_store::{MessageId, render_reminder};

use crate::router::InboxRouter;

/// The turn hook that delivers a member's inbox into its conversation.
pub struct InboxDelivery {
    router: InboxRouter,
    /// Ids injected in the current turn, marked delivered by `injected`.
    injecting: Mutex<Vec<MessageId>>,
}

impl InboxDelivery {
    pub fn new(router: InboxRouter) -> InboxDelivery {
        InboxDelivery {
            router,
            injecting: Mutex::new(Vec::new()),
        }
    }

    fn injecting(&self) -> std::sync::MutexGuard<'_, Vec<MessageId>> {
        self.injecting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl TurnHook for InboxDelivery {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async move {
            // Read now: a message written a moment ago must make this turn, whether or
            // not the router's watcher has woken yet.
            if let Err(e) = self.router.poll().await {
                tracing::warn!(member = %self.router.member(), error = %e, "failed to read the inbox; delivering what is queued");
            }
            let messages = self.router.take_conversation();
            if messages.is_empty() {
                return TurnAction::Continue;
            }
            self.injecting()
                .extend(messages.iter().map(|m| m.id.clone()));
            TurnAction::Inject(vec![render_reminder(&messages)])
        })
    }

    fn injected(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let ids = std::mem::take(&mut *self.injecting());
            if let Err(e) = self.router.delivered(ids).await {
                // They are in the conversation; the receipt is late, not the message.
                tracing::warn!(member = %self.router.member(), error = %e, "failed to record delivery receipts");
            }
        })
    }
}
