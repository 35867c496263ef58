//! Delivering inbox messages into a running agent's conversation.
//!
//! [`InboxDelivery`] is the turn hook a teammate (or the lead) runs: at the top of every
//! loop turn — so also between the tool calls of a long run — it has the
//! [`InboxRouter`] read the inbox, takes the messages queued for the conversation and
//! injects them as one system reminder: the standing notice that teammate messages are
//! information, never the user's authorization, then each message as
//! `<teammate-message from=… type=… summary=…>…</teammate-message>`.
//!
//! **Bounded.** One turn takes only what fits in [`roo_store::DELIVERY_BUDGET`] rendered
//! bytes, oldest first (at least one message; one too large alone is cut with a note
//! naming it), and ends with a digest of what still waits; the rest stay queued in the
//! router, in order, for the next turns (an idle member wakes for them as for any
//! queued message). So a flood reaches the model over several turns, never as one
//! request no provider accepts.
//!
//! **Receipts after the model.** The loop sends an injection with every model call until
//! one succeeds, and only then calls `injected`, which marks the messages delivered in the
//! inbox. A failed or cancelled call, or a crash, leaves them unread: the agent's next
//! call carries them again (or the next process reads them again). While an injection is
//! pending this hook injects nothing more, so a request never holds two turns' share.

use std::sync::Mutex;

use futures_util::future::BoxFuture;
use roo_agent::agent_loop::{TurnAction, TurnHook};
use roo_store::{DELIVERY_BUDGET, MessageId, render_delivery};

use crate::router::InboxRouter;

/// The turn hook that delivers a member's inbox into its conversation.
pub struct InboxDelivery {
    router: InboxRouter,
    /// Rendered bytes of messages one turn injects.
    budget: usize,
    /// Ids injected and not yet carried by a successful model call; marked delivered by
    /// `injected`.
    injecting: Mutex<Vec<MessageId>>,
}

impl InboxDelivery {
    /// Delivers `router`'s conversation queue, [`DELIVERY_BUDGET`] bytes per turn.
    pub fn new(router: InboxRouter) -> InboxDelivery {
        InboxDelivery::with_budget(router, DELIVERY_BUDGET)
    }

    /// The same with another per-turn budget (rendered bytes of messages).
    pub fn with_budget(router: InboxRouter, budget: usize) -> InboxDelivery {
        InboxDelivery {
            router,
            budget,
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
            if !self.injecting().is_empty() {
                // The last share is still on its way (its call failed or never ran): the
                // loop sends it again with this call, and nothing more joins it.
                return TurnAction::Continue;
            }
            // Read now: a message written a moment ago must make this turn, whether or
            // not the router's watcher has woken yet.
            if let Err(e) = self.router.poll().await {
                tracing::warn!(member = %self.router.member(), error = %e, "failed to read the inbox; delivering what is queued");
            }
            let mut queued = self.router.take_conversation();
            let Some(delivery) = render_delivery(&queued, self.budget) else {
                return TurnAction::Continue;
            };
            let later = queued.split_off(delivery.taken);
            if !later.is_empty() {
                tracing::debug!(member = %self.router.member(), now = queued.len(), waiting = later.len(), "delivering part of the inbox this turn");
                self.router.requeue_conversation(later);
            }
            self.injecting().extend(queued.iter().map(|m| m.id.clone()));
            TurnAction::Inject(vec![delivery.text])
        })
    }

    fn injected(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let ids = std::mem::take(&mut *self.injecting());
            if let Err(e) = self.router.delivered(ids).await {
                // They reached the model; the receipt is late, not the message.
                tracing::warn!(member = %self.router.member(), error = %e, "failed to record delivery receipts");
            }
        })
    }
}
