//! Mailboxes: one inbox file per member, written under its lock, bounded by an archive.
//!
//! `teams/<team>/inboxes/<name>.json` holds `{"version": "1.0", "messages": [...]}` (a bare
//! JSON array, the shape before versions, is read as version 1.0 too). Every change is
//! the lock protocol's whole-file read → modify → atomic replace.
//!
//! **Bounded inboxes.** An inbox keeps every unread message and the newest
//! [`RETAINED_READ`] read ones. When more than `RETAINED_READ + ARCHIVE_BATCH` read
//! messages accumulate, the oldest read ones are appended to
//! `<name>.archive.jsonl` (one message per line, fsynced) under the same lock, then the
//! shortened inbox is written. The cost of a send therefore depends on the unread backlog,
//! not on the inbox's history. A crash between the append and the replace can leave a
//! message in both files; readers of the archive keep the first copy of an id.
//!
//! **Receipts.** `delivered_at` is set when a message is handed to a model
//! ([`Mailbox::take_unread`], [`Mailbox::mark_delivered`]); `acknowledged_at` when the
//! recipient acknowledges it. Receipts for archived messages are appended to the archive
//! as `{"receipt": "...", "id": "...", "at": "..."}` lines.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, ErrorKind};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::doc::{self, Document, Guard, Outcome};
use crate::error::{Error, Result};
use crate::format_version::FormatVersion;
use crate::limits::{MAX_UNREAD_BYTES, MAX_UNREAD_PER_SENDER, PROTOCOL_RESERVE};
use crate::message::{Message, MessageId, Outgoing};
use crate::name::Name;
use crate::team::{Team, TeamConfig};
use crate::time::Timestamp;
use crate::watch::InboxWatcher;

/// Read messages an inbox keeps before archiving.
pub const RETAINED_READ: usize = 100;
/// Read messages beyond [`RETAINED_READ`] that trigger an archive pass (amortises it).
pub const ARCHIVE_BATCH: usize = 50;

/// What a receipt ([`Mailbox::mark_delivered`], [`Mailbox::acknowledge`]) found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Receipt {
    /// How many of the ids (each counted once) were found, in the inbox or the archive,
    /// and marked.
    pub found: usize,
    /// The ids in neither the inbox nor the archive, each once, in the order given.
    pub unknown: Vec<MessageId>,
}

/// The inbox document.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct InboxDoc {
    /// Format version.
    #[serde(default)]
    pub version: FormatVersion,
    /// Messages in arrival order.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// Members this version does not know (from a newer minor version), kept on rewrite.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Document for InboxDoc {
    const RECORDS: Option<&'static str> = Some("messages");

    fn version(&self) -> FormatVersion {
        self.version
    }

    fn parse(bytes: &[u8]) -> serde_json::Result<Self> {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        match first {
            // An empty file is an empty inbox (e.g. made by `touch`).
            None => Ok(InboxDoc::default()),
            // The bare array of the shape before versions.
            Some(b'[') => Ok(InboxDoc {
                version: FormatVersion::CURRENT,
                messages: serde_json::from_slice(bytes)?,
                extra: Default::default(),
            }),
            Some(_) => serde_json::from_slice(bytes),
        }
    }

    fn check(&self) -> std::result::Result<(), String> {
        self.messages.iter().try_for_each(Message::check_limits)
    }
}

/// Which messages [`Mailbox::read`] returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadFilter {
    /// Only unread messages.
    pub unread_only: bool,
    /// Also archived messages (oldest first, before the inbox's).
    pub include_archived: bool,
    /// At most this many, the newest.
    pub limit: Option<usize>,
}

/// Where a message is and what happened to it.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageStatus {
    /// The inbox that holds it.
    pub inbox: Name,
    /// The message, receipts included.
    pub message: Message,
    /// Whether it has moved to the archive.
    pub archived: bool,
}

impl MessageStatus {
    /// `acknowledged`, `delivered`, `read` or `unread`.
    pub fn state(&self) -> &'static str {
        let m = &self.message;
        if m.acknowledged_at.is_some() {
            "acknowledged"
        } else if m.delivered_at.is_some() {
            "delivered"
        } else if m.read {
            "read"
        } else {
            "unread"
        }
    }
}

/// What [`Mailbox::send_keyed`] did, recipient by recipient.
#[derive(Debug)]
pub struct SendReport {
    /// The idempotency key the copies' ids derive from (`<key>:<recipient>`), if any.
    pub key: Option<String>,
    /// The copies written now, one per recipient that got the message, with the
    /// recipient (resolved from `to`: a name, an agent id or `*`).
    pub delivered: Vec<(Name, Message)>,
    /// Recipients that already held the keyed copy (an earlier try delivered it).
    pub already: Vec<(Name, MessageId)>,
    /// Recipients whose inbox could not be written, with the error.
    pub failed: Vec<(Name, Error)>,
}

impl SendReport {
    fn record(&mut self, recipient: Name, delivery: Delivery) {
        match delivery {
            Delivery::Delivered(message) => self.delivered.push((recipient, *message)),
            Delivery::Already(id) => self.already.push((recipient, id)),
            Delivery::Elsewhere => {}
        }
    }
}

pub use crate::message::ASSIGN_KEY_PREFIX;

/// One send, as [`Mailbox::send_keyed`] was asked for it.
struct Send<'a> {
    from: &'a Name,
    to: &'a str,
    message: &'a Outgoing,
    /// The key the copies' ids derive from (`<key>:<recipient>`), if any.
    key: Option<&'a str>,
    /// Whether the key is the caller's (a copy may be there from an earlier call).
    retryable: bool,
}

impl Send<'_> {
    /// The checks of a send on the team's `config` (PROTOCOL.md §5.3): the sender is a
    /// member, a lead-only type (or a key with the lead's [`ASSIGN_KEY_PREFIX`]) comes from
    /// the lead, an answer goes to one member, a lead-bound one to the lead. Returns the
    /// recipients.
    fn check(&self, config: &TeamConfig) -> Result<Vec<Name>> {
        let (from, to, message) = (self.from, self.to, self.message);
        let kind = message.body.type_name();
        if config.member(from.as_str()).is_none() {
            return Err(Error::NotPermitted {
                action: format!("send {kind} from {from:?}"),
                reason: format!(
                    "{from:?} is not a member of team {}; a message's sender must be a member \
                     (a person or script sends as one, e.g. --as {}, or joins first with \
                     `roo-mail team join NAME`)",
                    config.name,
                    config.lead().map_or("lead", |l| l.name.as_str())
                ),
            });
        }
        if message.body.lead_only() && !config.is_lead(from.as_str()) {
            return Err(Error::NotPermitted {
                action: format!("send {kind} from {from:?}"),
                reason: "only the team's lead may send it".into(),
            });
        }
        if let Some(key) = self.key.filter(|_| self.retryable)
            && key
                .get(..ASSIGN_KEY_PREFIX.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(ASSIGN_KEY_PREFIX))
            && !config.is_lead(from.as_str())
        {
            return Err(Error::NotPermitted {
                action: format!("send {kind} from {from:?} with the key {key:?}"),
                reason: format!(
                    "keys starting with {ASSIGN_KEY_PREFIX:?} are the lead's (its task \
                     assignments); choose another key"
                ),
            });
        }
        if (message.body.lead_only() || message.body.to_lead_only()) && to == "*" {
            return Err(Error::NotPermitted {
                action: format!("broadcast {kind}"),
                reason: "it answers one request and must go to one member".into(),
            });
        }
        if message.body.to_lead_only() && !config.is_lead(to) {
            return Err(Error::NotPermitted {
                action: format!("send {kind} to {to:?}"),
                reason: "it may only be sent to the team's lead".into(),
            });
        }
        config.resolve(to, from.as_str())
    }
}

/// What one recipient's change did with a send.
enum Delivery {
    /// The copy was written (or found written by this send's own earlier attempt).
    Delivered(Box<Message>),
    /// An earlier call with the caller's key wrote it.
    Already(MessageId),
    /// The name given is another member's agent id: nothing was written there.
    Elsewhere,
}

#[derive(Serialize, Deserialize)]
struct ReceiptLine {
    receipt: String,
    id: MessageId,
    at: Timestamp,
}

/// The mailboxes of one team. Cheap to clone, `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Mailbox {
    team: Team,
}

impl Mailbox {
    /// The mailbox of `team`.
    pub fn new(team: Team) -> Mailbox {
        Mailbox { team }
    }

    /// The team.
    pub fn team(&self) -> &Team {
        &self.team
    }

    /// Path of `name`'s inbox.
    pub fn inbox_path(&self, name: &Name) -> PathBuf {
        self.team.home().inbox(self.team.name(), name)
    }

    /// Path of `name`'s archive.
    pub fn archive_path(&self, name: &Name) -> PathBuf {
        self.team.home().inbox_archive(self.team.name(), name)
    }

    /// Sends `message` from `from` to `to` (a member name, an agent id, or `*` for every
    /// member but the sender). Each inbox is written under its own lock. Returns the
    /// stored copies, one per recipient; if any recipient could not be written, returns
    /// that error (use [`Mailbox::send_keyed`] to learn who got the message).
    pub fn send(&self, from: &Name, to: &str, message: Outgoing) -> Result<Vec<Message>> {
        let mut report = self.send_keyed(from, to, message, None)?;
        match report.failed.drain(..).next() {
            Some((_, error)) => Err(error),
            None => Ok(report.delivered.into_iter().map(|(_, m)| m).collect()),
        }
    }

    /// Sends like [`Mailbox::send`] but tries every recipient and reports each outcome,
    /// and is idempotent per key: with `key` (a name-like string), the copy for
    /// `recipient` gets the id `<key>:<recipient>` and a recipient whose inbox or archive
    /// already holds that id is skipped (listed in [`SendReport::already`]), so a retry
    /// with the same key delivers only to those that missed it. A broadcast (`*`) without
    /// a key gets a fresh one ([`SendReport::key`]) so it can be retried safely. Only a
    /// caller's key costs a look-up in each recipient's archive.
    /// Errors before any delivery (validation, permissions, unknown recipient) are
    /// returned as `Err`; per-recipient failures are in [`SendReport::failed`].
    pub fn send_keyed(
        &self,
        from: &Name,
        to: &str,
        message: Outgoing,
        key: Option<&str>,
    ) -> Result<SendReport> {
        message.validate()?;
        // Only a key given by the caller can already be in an inbox; a fresh one cannot,
        // so an ordinary broadcast skips the look-up (and its archive read).
        let retryable = key.is_some();
        let key = match key {
            Some(raw) => Some(Name::parse_as("message key", raw)?.to_string()),
            None if to == "*" => Some(MessageId::generate().as_str().to_owned()),
            None => None,
        };
        self.ensure_inbox_dir()?;
        let mut report = SendReport {
            key: key.clone(),
            delivered: Vec::new(),
            already: Vec::new(),
            failed: Vec::new(),
        };
        let send = Send {
            from,
            to,
            message: &message,
            key: key.as_deref(),
            retryable,
        };
        // On PostgreSQL, to one member by name, the inbox is known before the config is
        // read: the checks run on the config the change reads with the inbox, in the same
        // round trip (a send is two round trips; a refused one leaves no row). Files read
        // the config first, so an unknown recipient's inbox is never even locked.
        if !self.team.home().engine().documents_are_files()
            && to != "*"
            && let Ok(recipient) = Name::parse(to)
        {
            match self.deliver(&send, &recipient, true) {
                Ok(Delivery::Elsewhere) => {} // another member's agent id: resolved below
                Ok(delivery) => {
                    report.record(recipient, delivery);
                    return Ok(report);
                }
                Err((true, refused)) => return Err(refused),
                Err((false, error)) => {
                    report.failed.push((recipient, error));
                    return Ok(report);
                }
            }
        }
        let config = self.team.config()?;
        let recipients = send.check(&config)?;
        for recipient in recipients {
            match self.deliver(&send, &recipient, false) {
                Ok(delivery) => report.record(recipient, delivery),
                Err((_, error)) => report.failed.push((recipient, error)),
            }
        }
        Ok(report)
    }

    /// Writes `send`'s copy for `recipient` in one change of its inbox. With `check`, the
    /// send's checks run first on the config the change reads ([`Send::check`]); their
    /// refusal is `Err((true, _))`, any other failure `Err((false, _))`.
    ///
    /// The copy's id is chosen once, before the first attempt: a change run again (on
    /// PostgreSQL, when the link was lost before it was known to have committed) or a
    /// keyed retry by the caller finds a copy already there and writes nothing more.
    fn deliver(
        &self,
        send: &Send,
        recipient: &Name,
        check: bool,
    ) -> std::result::Result<Delivery, (bool, Error)> {
        let (from, to, message) = (send.from, send.to, send.message);
        let kind = message.body.type_name();
        let id = match send.key {
            Some(key) => MessageId::from_string(format!("{key}:{recipient}")),
            None => MessageId::generate(),
        };
        let mut stored = Message {
            id,
            from: from.clone(),
            to: if to == "*" {
                "*".to_owned()
            } else {
                recipient.to_string()
            },
            body: message.body.clone(),
            text: message.text.clone(),
            summary: message
                .summary
                .as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            timestamp: Timestamp::now(),
            read: false,
            delivered_at: None,
            acknowledged_at: None,
            signature: message.signature.clone(),
        };
        let archive = self.archive_path(recipient);
        let refused = std::cell::Cell::new(false);
        let mut runs = 0;
        let result = self.update_in_team(recipient, |config, inbox, fence| {
            runs += 1;
            refused.set(false);
            if check {
                match send.check(config) {
                    Ok(resolved) if resolved.as_slice() == std::slice::from_ref(recipient) => {}
                    Ok(_) => return Ok(Outcome::Keep(Delivery::Elsewhere)),
                    Err(e) => {
                        refused.set(true);
                        return Err(e);
                    }
                }
            }
            // A keyed send may be the caller's retry; a change run again, this send's.
            if send.retryable || runs > 1 {
                let mut earlier: Vec<Message> = inbox
                    .messages
                    .iter()
                    .filter(|m| m.id == stored.id)
                    .cloned()
                    .collect();
                if earlier.is_empty() {
                    earlier = fence
                        .read_archive(&archive, Some(&stored.id))?
                        .into_iter()
                        .filter(|m| m.id == stored.id)
                        .collect();
                }
                if let Some(first) = earlier.first() {
                    // Only the same sender's earlier copy makes this a retry: another
                    // member cannot use the key to swallow this message.
                    if first.from != stored.from {
                        return Err(Error::NotPermitted {
                            action: format!("send {kind} to {recipient}"),
                            reason: format!(
                                "the key of id {} was used by {} already; send with another --id",
                                stored.id, first.from
                            ),
                        });
                    }
                    return Ok(Outcome::Keep(match send.retryable {
                        true => Delivery::Already(stored.id.clone()),
                        // Unkeyed, the id is this send's own: its earlier attempt wrote it.
                        false => Delivery::Delivered(Box::new(first.clone())),
                    }));
                }
            }
            // Stamped under the lock, by the store's clock (PostgreSQL: the server's).
            stored.timestamp = Timestamp::now();
            let unread: usize = inbox
                .messages
                .iter()
                .filter(|m| !m.read)
                .map(encoded_len)
                .sum();
            let size = encoded_len(&stored);
            let own: usize = inbox
                .messages
                .iter()
                .filter(|m| !m.read && m.from == stored.from)
                .map(encoded_len)
                .sum();
            if own.saturating_add(size) > MAX_UNREAD_PER_SENDER {
                return Err(Error::NotPermitted {
                    action: format!("send {kind} to {recipient}"),
                    reason: format!(
                        "{} already has {own} bytes of unread messages in {recipient}'s inbox \
                         and this one is {size} bytes, over the limit of \
                         {MAX_UNREAD_PER_SENDER} bytes per sender; retry after {recipient} \
                         has read them",
                        stored.from
                    ),
                });
            }
            // The protocol's own messages have room beyond a full inbox.
            let limit = match stored.body {
                crate::message::MessageBody::Text
                | crate::message::MessageBody::StatusUpdate
                | crate::message::MessageBody::TaskAssignment { .. } => MAX_UNREAD_BYTES,
                _ => MAX_UNREAD_BYTES + PROTOCOL_RESERVE,
            };
            if unread.saturating_add(size) > limit {
                return Err(Error::NotPermitted {
                    action: format!("send {kind} to {recipient}"),
                    reason: format!(
                        "the inbox is full: it holds {unread} bytes of unread messages and \
                         this one is {size} bytes, over the limit of {MAX_UNREAD_BYTES} bytes \
                         ({} MiB); retry after {recipient} has read its messages",
                        MAX_UNREAD_BYTES / (1024 * 1024)
                    ),
                });
            }
            for draft in crate::events::sent(&stored, recipient, config) {
                fence.emit(self.team.name(), draft)?;
            }
            inbox.messages.push(stored.clone());
            Ok(Outcome::Write(Delivery::Delivered(Box::new(
                stored.clone(),
            ))))
        });
        result.map_err(|e| (refused.get(), e))
    }

    /// Messages in `name`'s inbox (and archive, if asked), oldest first. No lock needed.
    pub fn read(&self, name: &Name, filter: &ReadFilter) -> Result<Vec<Message>> {
        let mut messages = if filter.include_archived {
            self.archived(name)?
        } else {
            Vec::new()
        };
        messages.extend(self.load(name)?.messages);
        if filter.unread_only {
            messages.retain(|m| !m.read);
        }
        if let Some(limit) = filter.limit {
            let skip = messages.len().saturating_sub(limit);
            messages.drain(..skip);
        }
        Ok(messages)
    }

    /// Number of unread messages in `name`'s inbox. No lock needed.
    pub fn unread_count(&self, name: &Name) -> Result<usize> {
        Ok(self.load(name)?.messages.iter().filter(|m| !m.read).count())
    }

    /// Marks the given messages read; returns how many changed.
    pub fn mark_read(&self, name: &Name, ids: &[MessageId]) -> Result<usize> {
        let wanted: HashSet<&MessageId> = ids.iter().collect();
        self.update(name, |inbox, fence| {
            let mut changed = Vec::new();
            for m in inbox.messages.iter_mut().filter(|m| wanted.contains(&m.id)) {
                if !m.read {
                    m.read = true;
                    changed.push(m.clone());
                }
            }
            for draft in crate::events::delivered(name, &changed) {
                fence.emit(self.team.name(), draft)?;
            }
            let changed = changed.len();
            Ok(if changed > 0 {
                Outcome::Write(changed)
            } else {
                Outcome::Keep(0)
            })
        })
    }

    /// Atomically returns the unread messages and marks them read and delivered. An agent
    /// calls this at the top of each loop turn; with nothing unread it takes no lock on
    /// files.
    pub fn take_unread(&self, name: &Name) -> Result<Vec<Message>> {
        // On PostgreSQL the change's own locked read is the look: a look first would make
        // a take with mail three round trips instead of two.
        if self.team.home().engine().documents_are_files() && self.unread_count(name)? == 0 {
            return Ok(Vec::new());
        }
        self.update(name, |inbox, fence| {
            // Inside the change: the store's clock (PostgreSQL: the server's).
            let now = Timestamp::now();
            let mut taken = Vec::new();
            for m in inbox.messages.iter_mut().filter(|m| !m.read) {
                m.read = true;
                m.delivered_at.get_or_insert(now);
                taken.push(m.clone());
            }
            for draft in crate::events::delivered(name, &taken) {
                fence.emit(self.team.name(), draft)?;
            }
            Ok(if taken.is_empty() {
                Outcome::Keep(taken)
            } else {
                Outcome::Write(taken)
            })
        })
    }

    /// Receipt: the messages were delivered into the recipient model's context (marks them
    /// read too).
    pub fn mark_delivered(&self, name: &Name, ids: &[MessageId]) -> Result<Receipt> {
        self.receipt(name, ids, "delivered")
    }

    /// Receipt: the recipient acknowledged the messages (marks them read too), in the inbox
    /// or the archive.
    pub fn acknowledge(&self, name: &Name, ids: &[MessageId]) -> Result<Receipt> {
        self.receipt(name, ids, "acknowledged")
    }

    fn receipt(&self, name: &Name, ids: &[MessageId], kind: &'static str) -> Result<Receipt> {
        let wanted: HashSet<&MessageId> = ids.iter().collect();
        let archive = self.archive_path(name);
        self.update(name, |inbox, fence| {
            // Inside the change: the store's clock (PostgreSQL: the server's).
            let now = Timestamp::now();
            // Each run starts from every id (a change may run again).
            let mut missing = wanted.clone();
            let mut found = 0;
            let mut newly_delivered = Vec::new();
            for m in inbox.messages.iter_mut() {
                if missing.remove(&m.id) {
                    found += 1;
                    if !m.read {
                        newly_delivered.push(m.clone());
                    }
                    m.read = true;
                    if kind == "acknowledged" {
                        m.acknowledged_at.get_or_insert(now);
                    } else {
                        m.delivered_at.get_or_insert(now);
                    }
                }
            }
            for draft in crate::events::delivered(name, &newly_delivered) {
                fence.emit(self.team.name(), draft)?;
            }
            if !missing.is_empty() {
                let archived: HashSet<MessageId> = fence
                    .read_archive(&archive, None)?
                    .into_iter()
                    .map(|m| m.id)
                    .filter(|id| missing.contains(id))
                    .collect();
                missing.retain(|id| !archived.contains(*id));
                let lines: Vec<ReceiptLine> = archived
                    .into_iter()
                    .map(|id| ReceiptLine {
                        receipt: kind.to_owned(),
                        id,
                        at: now,
                    })
                    .collect();
                found += lines.len();
                append_lines(&archive, &lines, fence)?;
            }
            let mut unknown: Vec<MessageId> = Vec::new();
            for id in ids.iter().filter(|id| missing.contains(id)) {
                if !unknown.contains(id) {
                    unknown.push(id.clone());
                }
            }
            Ok(Outcome::Write(Receipt { found, unknown }))
        })
    }

    /// Finds a message by id in any inbox or archive of the team.
    pub fn status(&self, id: &MessageId) -> Result<MessageStatus> {
        let names = self.inbox_names()?;
        for name in &names {
            if let Some(message) = self.load(name)?.messages.into_iter().find(|m| &m.id == id) {
                return Ok(MessageStatus {
                    inbox: name.clone(),
                    message,
                    archived: false,
                });
            }
        }
        for name in &names {
            let path = self.archive_path(name);
            if let Some(message) = self.archive_at(&path, Some(id))?.into_iter().next() {
                return Ok(MessageStatus {
                    inbox: name.clone(),
                    message,
                    archived: true,
                });
            }
        }
        Err(Error::MessageNotFound {
            team: self.team.name().to_string(),
            id: id.to_string(),
        })
    }

    /// Archived messages of `name`, oldest first, receipts applied.
    pub fn archived(&self, name: &Name) -> Result<Vec<Message>> {
        self.archive_at(&self.archive_path(name), None)
    }

    /// The archive at `path` outside an update (see [`Fence::read_archive`] inside one).
    fn archive_at(&self, path: &Path, only: Option<&MessageId>) -> Result<Vec<Message>> {
        let home = self.team.home();
        home.engine().archive(home, path, only)
    }

    /// Names of the inboxes that exist on disk.
    pub fn inbox_names(&self) -> Result<Vec<Name>> {
        let dir = self.team.home().inboxes_dir(self.team.name());
        let mut names: Vec<Name> = self
            .team
            .home()
            .doc_names(&dir, ".json")?
            .iter()
            .filter_map(|file| file.strip_suffix(".json"))
            .filter_map(|stem| Name::parse(stem).ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// A watcher that wakes when `name`'s inbox changes.
    pub fn watcher(&self, name: &Name) -> Result<InboxWatcher> {
        self.ensure_inbox_dir()?;
        let home = self.team.home();
        home.engine().watcher(home, self.inbox_path(name))
    }

    fn load(&self, name: &Name) -> Result<InboxDoc> {
        Ok(doc::load::<InboxDoc>(self.team.home(), &self.inbox_path(name))?.unwrap_or_default())
    }

    /// [`Mailbox::update`] whose change also gets the team's config, as it reads it (on
    /// PostgreSQL in the change's first round trip, held shared until the commit).
    fn update_in_team<R>(
        &self,
        name: &Name,
        mut change: impl FnMut(&TeamConfig, &mut InboxDoc, &Fence) -> Result<Outcome<R>>,
    ) -> Result<R> {
        let path = self.inbox_path(name);
        let archive = self.archive_path(name);
        let config = self.team.config_path();
        let missing = || self.team.not_found(&config);
        doc::update_in_team(
            self.team.home(),
            &path,
            doc::InTeam {
                config: &config,
                missing: &missing,
            },
            || Ok(InboxDoc::default()),
            |team, inbox, guard| {
                let fence = Fence {
                    guard: std::cell::RefCell::new(guard),
                    inbox: &path,
                };
                let outcome = change(team, inbox, &fence)?;
                if let Outcome::Write(_) = &outcome {
                    archive_overflow(inbox, &archive, &fence)?;
                }
                Ok(outcome)
            },
        )
    }

    fn update<R>(
        &self,
        name: &Name,
        mut change: impl FnMut(&mut InboxDoc, &Fence) -> Result<Outcome<R>>,
    ) -> Result<R> {
        let path = self.inbox_path(name);
        let archive = self.archive_path(name);
        doc::update_fenced(
            self.team.home(),
            &path,
            || Ok(InboxDoc::default()),
            |inbox, guard| {
                let fence = Fence {
                    guard: std::cell::RefCell::new(guard),
                    inbox: &path,
                };
                let outcome = change(inbox, &fence)?;
                if let Outcome::Write(_) = &outcome {
                    archive_overflow(inbox, &archive, &fence)?;
                }
                Ok(outcome)
            },
        )
    }

    /// Creates `inboxes/` inside an existing team directory (never the team directory
    /// itself: a concurrent `team delete` must not be undone by a late send). Nothing to
    /// do on PostgreSQL: every change of an inbox checks the team's config itself.
    fn ensure_inbox_dir(&self) -> Result<()> {
        if !self.team.home().engine().documents_are_files() {
            return Ok(());
        }
        let dir = self.team.home().inboxes_dir(self.team.name());
        match std::fs::DirBuilder::new().create(&dir) {
            Ok(()) => {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(|e| Error::io("set permissions of", &dir, e))
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Err(Error::TeamNotFound {
                team: self.team.name().to_string(),
                path: self.team.config_path(),
                store: None,
            }),
            Err(e) => Err(Error::io("create directory", &dir, e)),
        }
    }
}

/// Moves the oldest read messages beyond [`RETAINED_READ`] to the archive, once more than
/// `RETAINED_READ + ARCHIVE_BATCH` have accumulated.
fn archive_overflow(inbox: &mut InboxDoc, archive: &Path, fence: &Fence) -> Result<()> {
    let read = inbox.messages.iter().filter(|m| m.read).count();
    if read <= RETAINED_READ + ARCHIVE_BATCH {
        return Ok(());
    }
    let mut to_move = read - RETAINED_READ;
    let mut moved = Vec::with_capacity(to_move);
    let mut kept = Vec::with_capacity(inbox.messages.len() - to_move);
    for m in inbox.messages.drain(..) {
        if m.read && to_move > 0 {
            to_move -= 1;
            moved.push(m);
        } else {
            kept.push(m);
        }
    }
    append_lines(archive, &moved, fence)?;
    inbox.messages = kept;
    Ok(())
}

/// The inbox's guard during an update, for archive appends.
struct Fence<'a, 'g> {
    guard: std::cell::RefCell<&'a mut Guard<'g>>,
    inbox: &'a Path,
}

impl Fence<'_, '_> {
    /// Emits an event of the team's log in this change ([`Guard::emit`]).
    fn emit(&self, team: &Name, draft: crate::events::Draft) -> Result<()> {
        self.guard.borrow_mut().emit(team, draft)
    }

    /// The archive at `path`, read under the inbox's guard (in the PostgreSQL store, in
    /// the update's transaction).
    fn read_archive(&self, path: &Path, only: Option<&MessageId>) -> Result<Vec<Message>> {
        match self.guard.borrow().archive_lines(path)? {
            Some(lines) => fold_archive(lines.into_iter().map(Ok), only, path),
            None => read_archive_filtered(path, only),
        }
    }
}

/// Appends `items` to the archive at `path`, as JSON lines, under the inbox's guard: a
/// file append only while the inbox lock is still ours (a holder that outlived the stale
/// age must not append), or rows in the update's transaction.
fn append_lines<T: Serialize>(path: &Path, items: &[T], fence: &Fence) -> Result<()> {
    if items.is_empty() {
        return Ok(());
    }
    let lines = items
        .iter()
        .map(|item| serde_json::to_string(item).map_err(|e| Error::io("encode", path, e.into())))
        .collect::<Result<Vec<String>>>()?;
    fence
        .guard
        .borrow_mut()
        .append_lines(fence.inbox, path, &lines)
}

/// Reads an archive file, folding receipt lines into their messages (see
/// [`fold_archive`]).
pub(crate) fn read_archive_filtered(path: &Path, only: Option<&MessageId>) -> Result<Vec<Message>> {
    let Some(file) =
        crate::fsio::open_regular(path, std::fs::OpenOptions::new().read(true), "open archive")?
    else {
        return Ok(Vec::new());
    };
    let lines = BufReader::new(file)
        .lines()
        .map(|line| line.map_err(|e| Error::io("read archive", path, e)));
    fold_archive(lines, only, path)
}

/// Folds archive lines (a file's or the PostgreSQL store's rows) into messages, receipts
/// applied. Torn or foreign lines (e.g. a crash mid-append) are skipped; duplicates keep
/// the first copy.
pub(crate) fn fold_archive(
    lines: impl Iterator<Item = Result<String>>,
    only: Option<&MessageId>,
    path: &Path,
) -> Result<Vec<Message>> {
    let mut messages: Vec<Message> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for line in lines {
        let line = line?;
        if let Some(id) = only
            && !line.contains(id.as_str())
        {
            continue;
        }
        if line.contains("\"receipt\"")
            && let Ok(receipt) = serde_json::from_str::<ReceiptLine>(&line)
        {
            if let Some(&i) = index.get(&receipt.id) {
                let m: &mut Message = &mut messages[i];
                match receipt.receipt.as_str() {
                    "acknowledged" => {
                        m.acknowledged_at.get_or_insert(receipt.at);
                    }
                    _ => {
                        m.delivered_at.get_or_insert(receipt.at);
                    }
                }
            }
            continue;
        }
        if let Ok(message) = serde_json::from_str::<Message>(&line)
            && !index.contains_key(&message.id)
        {
            // Only writers' records: one beyond the limits is reported and skipped (the
            // archive is append-only; the line stays for inspection).
            if let Err(reason) = message.check_limits() {
                crate::quarantine::warn(format!(
                    "{}: skipped an archived record over the limits ({reason})",
                    path.display()
                ));
                continue;
            }
            index.insert(message.id.clone(), messages.len());
            messages.push(message);
        }
    }
    Ok(messages)
}

/// Bytes of `message` encoded as JSON (what it adds to the inbox file).
fn encoded_len(message: &Message) -> usize {
    serde_json::to_vec(message).map_or(usize::MAX, |v| v.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::{FileLock, LockPolicy};

    #[test]
    fn an_archive_append_by_a_holder_that_lost_the_inbox_lock_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = dir.path().join("alice.json");
        let archive = dir.path().join("alice.archive.jsonl");
        let policy = LockPolicy::protocol();
        let ours = FileLock::acquire(&inbox, &policy).unwrap();
        let home = crate::RooHome::new(dir.path());
        let mut guard = Guard::file(&ours, &home);
        let fence = Fence {
            guard: std::cell::RefCell::new(&mut guard),
            inbox: &inbox,
        };
        append_lines(&archive, &["first"], &fence).unwrap();
        // Judged stale and broken by another process, which now holds the lock.
        std::fs::remove_file(ours.path()).unwrap();
        let _theirs = FileLock::acquire(&inbox, &policy).unwrap();
        let err = append_lines(&archive, &["second"], &fence).unwrap_err();
        assert!(matches!(err, Error::LockLost { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&archive).unwrap(), "\"first\"\n");
    }
}
