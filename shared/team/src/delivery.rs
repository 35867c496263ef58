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
//! When the provider refuses a request carrying them but accepts it without them (see
//! `AgentHook::undeliverable`), they are marked read but not delivered and each sender is
//! told which of its messages were lost: one message a provider never accepts cannot
//! jam a member's every later call.

use std::sync::Mutex;

use futures_util::future::BoxFuture;
use roo_agent::{AgentHook, TurnAction};
use roo_store::{
    DELIVERY_BUDGET, FLOOD_SHOWN, Message, MessageId, Name, TEAMMATE_MESSAGE_NOTICE,
    render_collapsed, render_delivery,
};

use crate::router::InboxRouter;

/// The turn hook that delivers a member's inbox into its conversation.
pub struct InboxDelivery {
    router: InboxRouter,
    /// Rendered bytes of messages one turn injects.
    budget: usize,
    /// Messages (id, sender) injected and not yet carried by a successful model call;
    /// marked delivered by `injected`.
    injecting: Mutex<Vec<(MessageId, Name)>>,
    /// Messages (id, sender) collapsed into a digest entry of the pending injection;
    /// marked read (not delivered) by `injected`.
    digesting: Mutex<Vec<(MessageId, Name)>>,
    /// A sender whose messages are never collapsed (a teammate's lead).
    trusted: Option<Name>,
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
            digesting: Mutex::new(Vec::new()),
            trusted: None,
        }
    }

    /// The same, never collapsing `sender`'s messages into a digest entry: a teammate's
    /// lead, whose many task assignments at once are work, not a flood.
    pub fn never_collapse(mut self, sender: Name) -> InboxDelivery {
        self.trusted = Some(sender);
        self
    }

    fn injecting(&self) -> std::sync::MutexGuard<'_, Vec<(MessageId, Name)>> {
        self.injecting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn digesting(&self) -> std::sync::MutexGuard<'_, Vec<(MessageId, Name)>> {
        self.digesting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl AgentHook for InboxDelivery {
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
            let (shown, collapsed) =
                collapse_floods(self.router.take_conversation(), self.trusted.as_ref());
            let mut queued = fair_order(shown);
            // The digest of collapsed backlogs is part of the turn's budget: rendered
            // first, the messages shown in full get what it leaves.
            let collapsed_text = if collapsed.is_empty() {
                String::new()
            } else {
                tracing::debug!(member = %self.router.member(), collapsed = collapsed.len(), "collapsing senders' backlogs into digest entries");
                let read_with = format!(
                    "roo-mail read --team {} --as {} --archived --limit {}",
                    self.router.team_name(),
                    self.router.member(),
                    collapsed.len() + queued.len() + FLOOD_SHOWN
                );
                render_collapsed(&collapsed, &read_with)
            };
            let budget = self.budget.saturating_sub(collapsed_text.len());
            let Some(mut delivery) = render_delivery(&queued, budget) else {
                if collapsed.is_empty() {
                    return TurnAction::Continue;
                }
                // Only collapsed backlogs (never the case today: each sender's oldest
                // are shown), still one reminder with the notice.
                let text = format!("{TEAMMATE_MESSAGE_NOTICE}\n\n{collapsed_text}");
                self.digesting()
                    .extend(collapsed.iter().map(|m| (m.id.clone(), m.from.clone())));
                return TurnAction::Inject(vec![text]);
            };
            let later = queued.split_off(delivery.taken);
            if !later.is_empty() {
                tracing::debug!(member = %self.router.member(), now = queued.len(), waiting = later.len(), "delivering part of the inbox this turn");
                self.router.requeue_conversation(later);
            }
            if !collapsed_text.is_empty() {
                delivery.text.push_str("\n\n");
                delivery.text.push_str(&collapsed_text);
            }
            self.injecting()
                .extend(queued.iter().map(|m| (m.id.clone(), m.from.clone())));
            self.digesting()
                .extend(collapsed.iter().map(|m| (m.id.clone(), m.from.clone())));
            TurnAction::Inject(vec![delivery.text])
        })
    }

    fn injected(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let ids = std::mem::take(&mut *self.injecting())
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            if let Err(e) = self.router.delivered(ids).await {
                // They reached the model; the receipt is late, not the message.
                tracing::warn!(member = %self.router.member(), error = %e, "failed to record delivery receipts");
            }
            let digested = std::mem::take(&mut *self.digesting())
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            if let Err(e) = self.router.digested(digested).await {
                tracing::warn!(member = %self.router.member(), error = %e, "failed to mark collapsed messages read");
            }
        })
    }

    fn undeliverable(&self, reason: &str) -> BoxFuture<'_, ()> {
        let reason = reason.to_owned();
        Box::pin(async move {
            let mut messages = std::mem::take(&mut *self.injecting());
            messages.append(&mut self.digesting());
            tracing::warn!(member = %self.router.member(), count = messages.len(), error = %reason, "inbox messages the provider refuses are dropped");
            if let Err(e) = self.router.undeliverable(messages, &reason).await {
                tracing::warn!(member = %self.router.member(), error = %e, "failed to record undeliverable messages");
            }
        })
    }
}

/// `messages` (oldest first) split into those shown in full — each sender's oldest
/// [`FLOOD_SHOWN`] — and the rest of each sender's backlog, collapsed into a digest entry;
/// `trusted`'s messages are all shown.
fn collapse_floods(messages: Vec<Message>, trusted: Option<&Name>) -> (Vec<Message>, Vec<Message>) {
    let mut counts: Vec<(Name, usize)> = Vec::new();
    let (mut shown, mut collapsed) = (Vec::new(), Vec::new());
    for message in messages {
        let seen = match counts.iter_mut().find(|(from, _)| *from == message.from) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                counts.push((message.from.clone(), 1));
                1
            }
        };
        if seen > FLOOD_SHOWN && trusted != Some(&message.from) {
            collapsed.push(message);
        } else {
            shown.push(message);
        }
    }
    (shown, collapsed)
}

/// `messages` (oldest first) taken in turn from each sender, oldest first within a
/// sender: one member's flood cannot keep a peer's message out of the next turns.
fn fair_order(messages: Vec<roo_store::Message>) -> Vec<roo_store::Message> {
    let mut senders: Vec<(
        roo_store::Name,
        std::collections::VecDeque<roo_store::Message>,
    )> = Vec::new();
    for message in messages {
        match senders.iter_mut().find(|(from, _)| *from == message.from) {
            Some((_, queue)) => queue.push_back(message),
            None => senders.push((message.from.clone(), [message].into())),
        }
    }
    let mut out = Vec::new();
    loop {
        let mut any = false;
        for (_, queue) in &mut senders {
            if let Some(message) = queue.pop_front() {
                out.push(message);
                any = true;
            }
        }
        if !any {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use roo_store::{Message, Timestamp};

    use super::{collapse_floods, fair_order};

    fn message(id: &str, from: &str) -> Message {
        serde_json::from_value(serde_json::json!({
            "id": id, "from": from, "to": "lead", "type": "text", "text": id,
            "summary": "s", "timestamp": Timestamp::from_unix_ms(0), "read": false
        }))
        .unwrap()
    }

    #[test]
    fn senders_take_turns_oldest_first_within_each() {
        let queued = vec![
            message("b1", "bob"),
            message("b2", "bob"),
            message("b3", "bob"),
            message("a1", "alice"),
            message("b4", "bob"),
            message("c1", "carol"),
            message("a2", "alice"),
        ];
        let ids: Vec<String> = fair_order(queued)
            .into_iter()
            .map(|m| m.id.to_string())
            .collect();
        assert_eq!(ids, ["b1", "a1", "c1", "b2", "a2", "b3", "b4"]);
    }

    #[test]
    fn a_backlog_beyond_five_is_collapsed_but_never_the_trusted_senders() {
        let mut queued = Vec::new();
        for n in 0..8 {
            queued.push(message(&format!("b{n}"), "bob"));
            queued.push(message(&format!("l{n}"), "lead"));
        }
        queued.push(message("a0", "alice"));
        let ids =
            |list: &[Message]| -> Vec<String> { list.iter().map(|m| m.id.to_string()).collect() };
        let lead = roo_store::Name::parse("lead").unwrap();
        let (shown, collapsed) = collapse_floods(queued.clone(), Some(&lead));
        assert_eq!(ids(&collapsed), ["b5", "b6", "b7"]);
        assert_eq!(shown.len(), 5 + 8 + 1);
        let (shown, collapsed) = collapse_floods(queued, None);
        assert_eq!(ids(&collapsed), ["b5", "l5", "b6", "l6", "b7", "l7"]);
        assert_eq!(ids(&shown).last().unwrap(), "a0");
    }
}
