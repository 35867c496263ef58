//! The inbox router: the single owner of one member's inbox.
//!
//! Nothing else in a member's process reads its inbox. The router reads the unread
//! messages (on every inbox change, with file notification and a polling fallback, and
//! whenever someone calls [`InboxRouter::poll`]) and hands each one to exactly one
//! consumer:
//!
//! - **responses** (`permission_response`, `plan_approval_response`,
//!   `shutdown_response`) go to whoever registered for that request id and sender with
//!   [`InboxRouter::expect`]; a response nobody waits for (a forgery, a late answer) is
//!   marked read, logged and reported, never handed to the model or to another waiter;
//! - **requests** a runtime must answer (`shutdown_request`, `permission_request`,
//!   `plan_approval_request`) queue for [`InboxRouter::take_requests`];
//! - everything else queues for the conversation ([`InboxRouter::take_conversation`]),
//!   which a turn hook drains at the top of every turn.
//!
//! So an approver waiting for a `permission_response` never races the turn hook for it.
//!
//! Nothing is marked on disk when it is read: a queued message stays unread until its
//! consumer says it is done ([`InboxRouter::delivered`] once the text is in the model's
//! context, [`InboxRouter::handled`] once a request was acted on), so a crash between
//! reading and using a message loses nothing (the next process reads it again). The
//! router remembers what it dispatched and never dispatches a message twice.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use roo_store::{
    InboxWatcher, Mailbox, Message, MessageBody, MessageId, Name, Outgoing, ReadFilter, WaitOutcome,
};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::authority::{Answer, LeadPublicKey};
use crate::event::{TeamEvent, TeamEventSender};

/// The longest one wait on the inbox lasts before the router looks again anyway.
const WAIT_SLICE: Duration = Duration::from_secs(60);

/// The kinds of response a runtime can wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResponseKind {
    Permission,
    PlanApproval,
    Shutdown,
}

impl ResponseKind {
    /// The response kind of `body` and its request id, if it is a response.
    pub fn of(body: &MessageBody) -> Option<(ResponseKind, Option<&str>)> {
        match body {
            MessageBody::PermissionResponse { request_id, .. } => {
                Some((ResponseKind::Permission, Some(request_id)))
            }
            MessageBody::PlanApprovalResponse { request_id, .. } => {
                Some((ResponseKind::PlanApproval, Some(request_id)))
            }
            MessageBody::ShutdownResponse { request_id, .. } => {
                Some((ResponseKind::Shutdown, request_id.as_deref()))
            }
            _ => None,
        }
    }
}

/// Whether a message is a request the runtime (not the model) must answer.
pub fn is_request(body: &MessageBody) -> bool {
    matches!(
        body,
        MessageBody::ShutdownRequest { .. }
            | MessageBody::PermissionRequest { .. }
            | MessageBody::PlanApprovalRequest { .. }
    )
}

/// Why the router failed.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    #[error(transparent)]
    Store(#[from] roo_store::Error),
    #[error("{kind:?} request {request_id} is already awaited; request ids must be unique")]
    AlreadyAwaited {
        kind: ResponseKind,
        request_id: String,
    },
    #[error("the inbox router stopped before the answer to request {request_id} arrived")]
    Closed { request_id: String },
    #[error("failed to generate a request id from /dev/urandom: {0}")]
    RequestId(std::io::Error),
    #[error("the inbox task failed: {0}")]
    Task(String),
}

/// A fresh request id: 128 random bits, so one member cannot guess the id of another's
/// open request. Never show it to a model.
pub fn new_request_id() -> Result<String, RouterError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(RouterError::RequestId)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("req-{hex}"))
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WaitKey {
    kind: ResponseKind,
    request_id: String,
}

struct Pending {
    from: Name,
    reply: oneshot::Sender<Message>,
    /// Forged answers to it reported to the lead so far.
    forgeries_reported: usize,
}

/// Forged answers to one question reported to the lead, at most.
const MAX_FORGERY_REPORTS: usize = 3;

/// Characters of a provider's error quoted back to the sender of an undeliverable message.
const UNDELIVERABLE_REASON_CHARS: usize = 300;

#[derive(Default)]
struct State {
    waiters: HashMap<WaitKey, Pending>,
    conversation: VecDeque<Message>,
    requests: VecDeque<Message>,
    /// Ids dispatched and (as far as the last read showed) still unread on disk.
    seen: HashSet<MessageId>,
    stopped: bool,
    /// Permission and plan answers must carry the lead's signature
    /// ([`InboxRouter::require_signed_answers`]); the key once pinned.
    signed: Option<Option<LeadPublicKey>>,
}

struct Inner {
    mailbox: Mailbox,
    me: Name,
    state: Mutex<State>,
    /// Serializes reads, so an older read is never dispatched after a newer one.
    poll_lock: tokio::sync::Mutex<()>,
    /// Bumped whenever a queue gains something or the router stops.
    changed: watch::Sender<u64>,
    /// Set at construction ([`InboxRouter::with_events`]) or once later
    /// ([`InboxRouter::attach_events`]).
    events: std::sync::OnceLock<TeamEventSender>,
    /// [`InboxRouter::nudge`]: read the inbox now (a pane backend's wake-up).
    nudged: tokio::sync::Notify,
    /// [`InboxRouter::close`]: stop reading for good.
    halt: CancellationToken,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind; keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The owner of one member's inbox. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct InboxRouter {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for InboxRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxRouter")
            .field("member", &self.inner.me)
            .finish_non_exhaustive()
    }
}

/// An open request: resolves with the response that answers it.
#[derive(Debug)]
pub struct Waiter {
    key: WaitKey,
    rx: oneshot::Receiver<Message>,
    router: Weak<Inner>,
}

impl Waiter {
    /// The request id awaited.
    pub fn request_id(&self) -> &str {
        &self.key.request_id
    }

    /// Waits for the response. Fails if the router stopped first.
    pub async fn recv(mut self) -> Result<Message, RouterError> {
        let request_id = self.key.request_id.clone();
        (&mut self.rx)
            .await
            .map_err(|_| RouterError::Closed { request_id })
    }
}

impl Drop for Waiter {
    /// Closes the request: a response arriving later is ignored.
    fn drop(&mut self) {
        if let Some(inner) = self.router.upgrade() {
            inner.state().waiters.remove(&self.key);
        }
    }
}

impl InboxRouter {
    /// The router of `me`'s inbox in `mailbox`'s team.
    pub fn new(mailbox: Mailbox, me: Name) -> InboxRouter {
        InboxRouter::build(mailbox, me, None)
    }

    /// The same, reporting every dispatched message (and every ignored response) as a
    /// [`TeamEvent`].
    pub fn with_events(mailbox: Mailbox, me: Name, events: TeamEventSender) -> InboxRouter {
        InboxRouter::build(mailbox, me, Some(events))
    }

    fn build(mailbox: Mailbox, me: Name, events: Option<TeamEventSender>) -> InboxRouter {
        InboxRouter {
            inner: Arc::new(Inner {
                mailbox,
                me,
                state: Mutex::new(State::default()),
                poll_lock: tokio::sync::Mutex::new(()),
                changed: watch::Sender::new(0),
                events: events.map(std::sync::OnceLock::from).unwrap_or_default(),
                nudged: tokio::sync::Notify::new(),
                halt: CancellationToken::new(),
            }),
        }
    }

    /// Reports every message dispatched from now on as a [`TeamEvent`] to `events`
    /// (for a router built without, e.g. by the lead's TeamCreate before its UI
    /// attaches). Returns `false`, changing nothing, if it already reports somewhere.
    pub fn attach_events(&self, events: TeamEventSender) -> bool {
        self.inner.events.set(events).is_ok()
    }

    /// Stops a running [`InboxRouter::run`] for good (this process no longer owns the
    /// inbox: another lead took the team over).
    pub fn close(&self) {
        self.inner.halt.cancel();
    }

    /// Whether [`InboxRouter::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.halt.is_cancelled()
    }

    /// Resolves once [`InboxRouter::close`] was called.
    pub async fn closed(&self) {
        self.inner.halt.cancelled().await
    }

    /// Where this router reports, if anywhere.
    pub fn events(&self) -> Option<&TeamEventSender> {
        self.inner.events.get()
    }

    /// Makes a running [`InboxRouter::run`] read the inbox now, without waiting for a
    /// file notification or the polling fallback (a pane teammate's process is nudged
    /// after each inbox write, see `backend::tmux`). A nudge while it is reading is
    /// kept for the next wait.
    pub fn nudge(&self) {
        self.inner.nudged.notify_one();
    }

    /// From now on a `permission_response` or `plan_approval_response` is taken only
    /// when it carries the lead's signature (`crate::authority`), checked with the key
    /// the team config names when the first answer arrives (pinned from then on). Every
    /// teammate's router does this; anything else claiming to answer is ignored and
    /// reported, and the question stays open.
    pub fn require_signed_answers(&self) {
        let mut state = self.inner.state();
        if state.signed.is_none() {
            state.signed = Some(None);
        }
    }

    /// Whether a lead key is pinned.
    pub fn has_lead_key(&self) -> bool {
        matches!(self.inner.state().signed, Some(Some(_)))
    }

    /// The same, with the lead's key given (an in-process teammate gets it from the
    /// lead's memory).
    pub fn pin_lead_key(&self, key: LeadPublicKey) {
        self.inner.state().signed = Some(Some(key));
    }

    /// The member whose inbox this is.
    pub fn member(&self) -> &Name {
        &self.inner.me
    }

    /// Opens a request: the response of `kind` with `request_id` from `from` will be
    /// handed to the returned waiter (and to nobody else). Register before sending the
    /// request, so the answer cannot arrive first. Fails once the router has stopped.
    pub fn expect(
        &self,
        kind: ResponseKind,
        request_id: &str,
        from: &Name,
    ) -> Result<Waiter, RouterError> {
        let key = WaitKey {
            kind,
            request_id: request_id.to_string(),
        };
        let (reply, rx) = oneshot::channel();
        let mut state = self.inner.state();
        if state.stopped {
            return Err(RouterError::Closed {
                request_id: request_id.to_string(),
            });
        }
        if state.waiters.contains_key(&key) {
            return Err(RouterError::AlreadyAwaited {
                kind,
                request_id: request_id.to_string(),
            });
        }
        state.waiters.insert(
            key.clone(),
            Pending {
                from: from.clone(),
                reply,
                forgeries_reported: 0,
            },
        );
        Ok(Waiter {
            key,
            rx,
            router: Arc::downgrade(&self.inner),
        })
    }

    /// Reads the unread messages once and dispatches those not dispatched before.
    /// Returns how many were dispatched.
    pub async fn poll(&self) -> Result<usize, RouterError> {
        let _one_read_at_a_time = self.inner.poll_lock.lock().await;
        let (mailbox, me) = (self.inner.mailbox.clone(), self.inner.me.clone());
        let unread = blocking(move || {
            mailbox.read(
                &me,
                &ReadFilter {
                    unread_only: true,
                    ..ReadFilter::default()
                },
            )
        })
        .await??;
        self.pin_key_if_needed(&unread).await;
        let Dispatch {
            count,
            acknowledge,
            ignore,
            events,
            forgeries,
        } = self.dispatch(unread);
        if !forgeries.is_empty() {
            self.report_forgeries(forgeries).await;
        }
        if let Some(sender) = self.inner.events.get() {
            for event in events {
                sender.send(event);
            }
        }
        if !acknowledge.is_empty() || !ignore.is_empty() {
            let (mailbox, me) = (self.inner.mailbox.clone(), self.inner.me.clone());
            blocking(move || {
                if !acknowledge.is_empty() {
                    mailbox.acknowledge(&me, &acknowledge)?;
                }
                if !ignore.is_empty() {
                    mailbox.mark_read(&me, &ignore)?;
                }
                Ok::<_, roo_store::Error>(())
            })
            .await??;
        }
        if count > 0 {
            self.inner.changed.send_modify(|n| *n += 1);
        }
        Ok(count)
    }

    /// Pins the lead's key from the team config the first time a signed kind of answer
    /// arrives, if signatures are required and no key is pinned yet.
    async fn pin_key_if_needed(&self, unread: &[Message]) {
        let wanted = matches!(self.inner.state().signed, Some(None))
            && unread
                .iter()
                .any(|m| Answer::of(self.team_name(), &self.inner.me, &m.body).is_some());
        if !wanted {
            return;
        }
        let team = self.inner.mailbox.team().clone();
        match blocking(move || LeadPublicKey::of_team(&team)).await {
            Ok(Ok(Some(key))) => {
                let mut state = self.inner.state();
                if matches!(state.signed, Some(None)) {
                    state.signed = Some(Some(key));
                }
            }
            Ok(Ok(None)) => {
                tracing::warn!(member = %self.inner.me, "the team config names no lead key: no answer can be verified");
            }
            Ok(Err(e)) => {
                tracing::warn!(member = %self.inner.me, error = %e, "failed to read the lead key");
            }
            Err(e) => {
                tracing::warn!(member = %self.inner.me, error = %e, "failed to read the lead key")
            }
        }
    }

    /// Tells the lead that answers to this member's open questions came from someone
    /// else (the request id stays secret: it is not in the text).
    async fn report_forgeries(&self, forgeries: Vec<(Name, Name, MessageId, ResponseKind)>) {
        let (mailbox, me) = (self.inner.mailbox.clone(), self.inner.me.clone());
        let sent = blocking(move || {
            for (lead, sender, message, kind) in forgeries {
                let text = format!(
                    "{me} ignored a {} response to its open question: it says it is from {sender} but is not signed by the lead's key (message {message}). Someone other than the lead's process tried to answer; the question is still open.",
                    kind_name(kind)
                );
                mailbox.send(
                    &me,
                    lead.as_str(),
                    roo_store::Outgoing::text(text, "forged answer ignored"),
                )?;
            }
            Ok::<_, roo_store::Error>(())
        })
        .await;
        if !matches!(sent, Ok(Ok(()))) {
            tracing::warn!(member = %self.inner.me, "failed to tell the lead about a forged answer");
        }
    }

    /// The name of the team whose inbox this is.
    pub fn team_name(&self) -> &Name {
        self.inner.mailbox.team().name()
    }

    fn dispatch(&self, unread: Vec<Message>) -> Dispatch {
        let mut out = Dispatch::default();
        let mut state = self.inner.state();
        let unread_ids: HashSet<MessageId> = unread.iter().map(|m| m.id.clone()).collect();
        for message in unread {
            if !state.seen.insert(message.id.clone()) {
                continue;
            }
            out.count += 1;
            if let Some((kind, Some(request_id))) = ResponseKind::of(&message.body) {
                let key = WaitKey {
                    kind,
                    request_id: request_id.to_string(),
                };
                let sender_matches = state
                    .waiters
                    .get(&key)
                    .is_some_and(|pending| pending.from == message.from);
                let unsigned = match (
                    &state.signed,
                    Answer::of(self.team_name(), &self.inner.me, &message.body),
                ) {
                    (Some(pinned), Some(answer)) => match (pinned, message.signature.as_deref()) {
                        (None, _) => {
                            Some("no lead key is known to verify it (the team config names none)")
                        }
                        (Some(_), None) => Some("it is not signed by the lead"),
                        (Some(key), Some(signature)) if !key.verify(&answer, signature) => {
                            Some("its signature is not the lead's")
                        }
                        _ => None,
                    },
                    _ => None,
                };
                let id = message.id.clone();
                let reason = if let Some(unsigned) = unsigned {
                    // Somebody answered an open question in the lead's place: the lead
                    // (and so the person) hears of it, once per message.
                    // At most a few reports per question: a flood of forgeries is not
                    // relayed to the lead one message each.
                    if let Some(pending) = state.waiters.get_mut(&key)
                        && pending.forgeries_reported < MAX_FORGERY_REPORTS
                    {
                        pending.forgeries_reported += 1;
                        out.forgeries.push((
                            pending.from.clone(),
                            message.from.clone(),
                            message.id.clone(),
                            kind,
                        ));
                    }
                    unsigned.to_string()
                } else if sender_matches && let Some(pending) = state.waiters.remove(&key) {
                    match pending.reply.send(message) {
                        Ok(()) => {
                            out.acknowledge.push(id);
                            continue;
                        }
                        Err(_) => "its waiter is gone".to_string(),
                    }
                } else if state.waiters.contains_key(&key) {
                    format!("it is not from {}", state.waiters[&key].from)
                } else {
                    "it answers no open request".to_string()
                };
                tracing::warn!(member = %self.inner.me, message = %id, %reason, "ignored a {} response", kind_name(kind));
                out.events.push(TeamEvent::Notice {
                    text: format!(
                        "ignored a {} response in {}'s inbox: {reason}",
                        kind_name(kind),
                        self.inner.me
                    ),
                });
                out.ignore.push(id);
                continue;
            }
            out.events.push(TeamEvent::message(&message));
            if is_request(&message.body) {
                state.requests.push_back(message);
            } else {
                state.conversation.push_back(message);
            }
        }
        // What the disk no longer shows as unread can be forgotten.
        state.seen.retain(|id| unread_ids.contains(id));
        out
    }

    /// Takes the messages queued for the conversation, oldest first. They stay unread
    /// on disk until [`InboxRouter::delivered`].
    pub fn take_conversation(&self) -> Vec<Message> {
        self.inner.state().conversation.drain(..).collect()
    }

    /// Puts messages taken with [`InboxRouter::take_conversation`] back at the front of
    /// the queue, in their order (what one turn could not deliver waits for the next).
    pub fn requeue_conversation(&self, messages: Vec<Message>) {
        if messages.is_empty() {
            return;
        }
        let mut state = self.inner.state();
        for message in messages.into_iter().rev() {
            state.conversation.push_front(message);
        }
        drop(state);
        self.inner.changed.send_modify(|n| *n += 1);
    }

    /// Takes the queued requests (shutdown, permission, plan approval), oldest first.
    /// They stay unread on disk until [`InboxRouter::handled`].
    pub fn take_requests(&self) -> Vec<Message> {
        self.inner.state().requests.drain(..).collect()
    }

    /// Takes the queued requests `wanted` picks, oldest first; the others stay queued in
    /// their order.
    pub fn take_requests_where(&self, wanted: impl Fn(&Message) -> bool) -> Vec<Message> {
        let mut state = self.inner.state();
        let (taken, kept): (VecDeque<Message>, VecDeque<Message>) =
            state.requests.drain(..).partition(|m| wanted(m));
        state.requests = kept;
        taken.into()
    }

    /// Whether a queue holds something.
    pub fn has_input(&self) -> bool {
        self.has_input_where(|_| true)
    }

    /// Whether a request is queued or a message `wakes` picks waits for the
    /// conversation (what wakes an idle teammate; FYI messages alone do not).
    pub fn has_input_where(&self, wakes: impl Fn(&Message) -> bool) -> bool {
        let state = self.inner.state();
        !state.requests.is_empty() || state.conversation.iter().any(wakes)
    }

    /// Whether messages wait for the conversation (requests aside).
    pub fn has_conversation(&self) -> bool {
        !self.inner.state().conversation.is_empty()
    }

    /// How many messages wait for the conversation.
    pub fn conversation_len(&self) -> usize {
        self.inner.state().conversation.len()
    }

    /// Receipt: these messages are in the model's context (marks them read and
    /// delivered).
    pub async fn delivered(&self, ids: Vec<MessageId>) -> Result<usize, RouterError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let (mailbox, me) = (self.inner.mailbox.clone(), self.inner.me.clone());
        Ok(blocking(move || mailbox.mark_delivered(&me, &ids))
            .await??
            .found)
    }

    /// These messages will never reach the model: its provider refused every request
    /// carrying them (`reason`). Marks them read, not delivered, and tells each sender
    /// which of its messages were lost, so it can send again differently.
    pub async fn undeliverable(
        &self,
        messages: Vec<(MessageId, Name)>,
        reason: &str,
    ) -> Result<usize, RouterError> {
        if messages.is_empty() {
            return Ok(0);
        }
        let reason: String = reason.chars().take(UNDELIVERABLE_REASON_CHARS).collect();
        let (mailbox, me) = (self.inner.mailbox.clone(), self.inner.me.clone());
        Ok(blocking(move || -> roo_store::Result<usize> {
            let ids: Vec<MessageId> = messages.iter().map(|(id, _)| id.clone()).collect();
            let marked = mailbox.mark_read(&me, &ids)?;
            let mut senders: Vec<&Name> = Vec::new();
            for (_, from) in &messages {
                if !senders.contains(&from) && *from != me {
                    senders.push(from);
                }
            }
            for sender in senders {
                let lost: Vec<&str> = messages
                    .iter()
                    .filter(|(_, from)| from == sender)
                    .map(|(id, _)| id.as_str())
                    .collect();
                let text = format!(
                    "{me} never received your message(s) {}: its model provider refused every request carrying them ({reason}). Send what matters again, shorter or reworded.",
                    lost.join(", ")
                );
                if let Err(e) = mailbox.send(&me, sender.as_str(), Outgoing::text(text, "message not delivered")) {
                    tracing::warn!(member = %me, to = %sender, error = %e, "failed to tell a sender its message was not delivered");
                }
            }
            Ok(marked)
        })
        .await??)
    }

    /// These messages were collapsed into a digest entry that reached the model (their
    /// count, size and summaries, not their text): marks them read, not delivered. They
    /// stay in the inbox (and then its archive), readable with `roo-mail read`.
    pub async fn digested(&self, ids: Vec<MessageId>) -> Result<usize, RouterError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let (mailbox, me) = (self.inner.mailbox.clone(), self.inner.me.clone());
        Ok(blocking(move || mailbox.mark_read(&me, &ids)).await??)
    }

    /// Receipt: these requests were acted on (marks them read and acknowledged).
    pub async fn handled(&self, ids: Vec<MessageId>) -> Result<usize, RouterError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let (mailbox, me) = (self.inner.mailbox.clone(), self.inner.me.clone());
        Ok(blocking(move || mailbox.acknowledge(&me, &ids))
            .await??
            .found)
    }

    /// Resolves with `true` once a queued request matches `wanted` (it stays queued for
    /// whoever takes requests), or with `false` when the router stopped. Lets a member
    /// waiting for an answer notice, e.g., that the lead asked it to shut down.
    pub async fn request_queued(&self, wanted: impl Fn(&Message) -> bool) -> bool {
        let mut changed = self.inner.changed.subscribe();
        loop {
            {
                let state = self.inner.state();
                if state.requests.iter().any(&wanted) {
                    return true;
                }
                if state.stopped {
                    return false;
                }
            }
            if changed.changed().await.is_err() {
                return false;
            }
        }
    }

    /// Resolves when a queue holds something, or the router stopped.
    pub async fn input(&self) {
        self.input_where(|_| true).await
    }

    /// Resolves when a request is queued or a message `wakes` picks waits for the
    /// conversation, or the router stopped. Other messages stay queued for the next
    /// turn without resolving it: an idle teammate waits here so that FYI messages
    /// (`status_update`) do not wake it.
    pub async fn input_where(&self, wakes: impl Fn(&Message) -> bool) {
        let mut changed = self.inner.changed.subscribe();
        loop {
            if self.inner.state().stopped || self.has_input_where(&wakes) {
                return;
            }
            if changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// Resolves when the request queue holds something (`true`) or the router stopped
    /// (`false`): what a lead's request answerer waits on, while messages for the
    /// conversation wait for the next turn.
    pub async fn requests(&self) -> bool {
        let mut changed = self.inner.changed.subscribe();
        loop {
            {
                let state = self.inner.state();
                if !state.requests.is_empty() {
                    return true;
                }
                if state.stopped {
                    return false;
                }
            }
            if changed.changed().await.is_err() {
                return false;
            }
        }
    }

    /// Resolves when messages wait for the conversation (`true`) or the router stopped
    /// (`false`): what a headless lead waits on between its turns.
    pub async fn conversation(&self) -> bool {
        self.conversation_where(|_| true).await
    }

    /// Resolves when a message `wakes` picks waits for the conversation (`true`) or the
    /// router stopped (`false`); other messages stay queued without resolving it.
    pub async fn conversation_where(&self, wakes: impl Fn(&Message) -> bool) -> bool {
        let mut changed = self.inner.changed.subscribe();
        loop {
            {
                let state = self.inner.state();
                if state.conversation.iter().any(&wakes) {
                    return true;
                }
                if state.stopped {
                    return false;
                }
            }
            if changed.changed().await.is_err() {
                return false;
            }
        }
    }

    /// Dispatches on every change of the inbox until `cancel`: file-change notification
    /// wakes it within milliseconds, polling catches what a notification missed. A read
    /// that fails (a lock held too long, a corrupt file) is reported and retried on the
    /// next change; waiters are closed when it returns.
    pub async fn run(&self, cancel: CancellationToken) -> Result<(), RouterError> {
        let (mailbox, me) = (self.inner.mailbox.clone(), self.inner.me.clone());
        let watcher = match blocking(move || mailbox.watcher(&me)).await {
            Ok(Ok(watcher)) => watcher,
            Ok(Err(e)) => return self.stopped(Err(e.into())),
            Err(e) => return self.stopped(Err(e)),
        };
        self.run_with(watcher, cancel).await
    }

    /// [`InboxRouter::run`] with a watcher of the caller's (e.g.
    /// `InboxWatcher::polling`, where file notifications do not work).
    pub async fn run_with(
        &self,
        watcher: InboxWatcher,
        cancel: CancellationToken,
    ) -> Result<(), RouterError> {
        let result = self.watch(watcher, &cancel).await;
        self.stopped(result)
    }

    fn stopped(&self, result: Result<(), RouterError>) -> Result<(), RouterError> {
        let mut state = self.inner.state();
        state.stopped = true;
        // Dropping the senders fails every open wait with `Closed`.
        state.waiters.clear();
        drop(state);
        self.inner.changed.send_modify(|n| *n += 1);
        result
    }

    async fn watch(
        &self,
        mut watcher: InboxWatcher,
        cancel: &CancellationToken,
    ) -> Result<(), RouterError> {
        loop {
            if self.inner.halt.is_cancelled() {
                return Ok(());
            }
            let polled = self.poll().await;
            // The team was deleted (TeamDelete, `roo-mail team delete`) under a router still
            // running: nothing is left to read, and a read that failed half-way through the
            // deletion is not worth reporting. A read that found messages found the team,
            // so only an empty or failed one asks the store (a round trip on PostgreSQL).
            let team = self.inner.mailbox.team().clone();
            // A store that cannot answer is not a deleted team.
            if !matches!(polled, Ok(n) if n > 0)
                && !blocking(move || team.exists().unwrap_or(true)).await?
            {
                tracing::info!(member = %self.inner.me, "the team is gone; the inbox router stops");
                return Ok(());
            }
            if let Err(e) = polled {
                tracing::warn!(member = %self.inner.me, error = %e, "failed to read the inbox");
                if let Some(events) = self.inner.events.get() {
                    events.send(TeamEvent::Notice {
                        text: format!("failed to read {}'s inbox: {e}", self.inner.me),
                    });
                }
            }
            let waker = watcher.waker();
            // Dropped rather than cancelled (the runtime shutting down with the task):
            // end the blocking wait too, or the runtime's shutdown waits for it.
            let mut stop_on_drop = StopOnDrop(Some(waker.clone()));
            let mut wait = tokio::task::spawn_blocking(move || {
                let outcome = watcher.wait(WAIT_SLICE);
                (watcher, outcome)
            });
            let (back, outcome) = tokio::select! {
                joined = &mut wait => joined.map_err(|e| RouterError::Task(e.to_string()))?,
                () = self.inner.nudged.notified() => {
                    waker.wake();
                    wait.await.map_err(|e| RouterError::Task(e.to_string()))?
                }
                _ = cancel.cancelled() => {
                    waker.stop();
                    let _ = wait.await;
                    return Ok(());
                }
                _ = self.inner.halt.cancelled() => {
                    waker.stop();
                    let _ = wait.await;
                    return Ok(());
                }
            };
            stop_on_drop.0 = None;
            watcher = back;
            if outcome == WaitOutcome::Stopped {
                return Ok(());
            }
        }
    }
}

#[derive(Default)]
struct Dispatch {
    count: usize,
    acknowledge: Vec<MessageId>,
    ignore: Vec<MessageId>,
    events: Vec<TeamEvent>,
    /// (the lead, the claimed sender, the message, its kind).
    forgeries: Vec<(Name, Name, MessageId, ResponseKind)>,
}

fn kind_name(kind: ResponseKind) -> &'static str {
    match kind {
        ResponseKind::Permission => "permission",
        ResponseKind::PlanApproval => "plan approval",
        ResponseKind::Shutdown => "shutdown",
    }
}

/// Runs blocking store work off the async runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RouterError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| RouterError::Task(e.to_string()))
}

/// Ends a blocking inbox wait when dropped while armed.
struct StopOnDrop(Option<roo_store::WatchWaker>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(waker) = self.0.take() {
            waker.stop();
        }
    }
}
