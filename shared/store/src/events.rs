//! The team's event log (docs/PROTOCOL.md §9): one append-only record per change of the
//! team's state — who joined, spawned, died, sent, delivered, claimed, completed, asked,
//! answered, merged — with the store's time, the actor and its epoch.
//!
//! This module owns the record ([`Event`], [`EventKind`]), its line format and the
//! reader's judgement of a line (version, limits; a damaged line is skipped and counted,
//! never fatal), and the team's API to the log. `event_store.rs` keeps the lines (the file
//! layout, `teams/<team>/events.jsonl` rotated by size with the sequence continuing, and
//! the PostgreSQL rows); `event_drafts.rs` derives a change's events from what it wrote.
//! Writers never call it directly: a change emits its events through its `doc::Guard`,
//! which appends them in the same locked change as the state they record — under the
//! document's lock then the events file's own lock (innermost) on files, in the same
//! transaction on PostgreSQL — so the log never disagrees with the state.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::format_version::{FORMAT_MAJOR, FormatVersion};
use crate::limits::{MAX_EVENT_IDS, MAX_EVENT_LINE, MAX_EVENT_TEXT};
use crate::time::Timestamp;

#[path = "event_drafts.rs"]
mod drafts;
#[path = "event_store.rs"]
mod log_store;

pub(crate) use drafts::{TaskMarks, delivered, died, joined, removed, sent, spawned, team_created};
pub(crate) use log_store::{Rotation, append_to_file, events_path};
pub(crate) use log_store::{read_files, read_rows};

/// What every text field is cut to when a line with [`MAX_EVENT_TEXT`] still does not fit
/// in [`MAX_EVENT_LINE`] (32 ids of 64 characters fit).
const SHORT_EVENT_TEXT: usize = 64;

/// The file name of a team's current event log, in its team directory.
pub const EVENTS_FILE: &str = "events.jsonl";

/// Which question an approval event is about.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalRequest {
    /// A teammate asks to run a tool (`permission_request` / `permission_response`).
    Permission,
    /// A teammate submits a plan (`plan_approval_request` / `plan_approval_response`).
    Plan,
}

/// What happened, with its own fields. Serialized flat into the line: `"kind": "…"` plus
/// the fields. New kinds (budget warnings and stops, rewinds) are added in a later minor
/// version; a reader shows a kind it does not know as [`EventKind::Newer`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// The team was created with this lead.
    TeamCreated {
        /// The lead's name.
        lead: String,
    },
    /// A member was added to the roster (how a lead's spawner registers a teammate).
    Spawn {
        /// The member added.
        member: String,
        /// Its backend (`in-process`, `tmux`, …).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        backend: Option<String>,
    },
    /// A process joined as `member` (the epoch is the new one).
    Join {
        /// The member joined.
        member: String,
    },
    /// A member shut down on request (a clean exit).
    Shutdown {
        /// The member.
        member: String,
    },
    /// A member was declared dead.
    Death {
        /// The member.
        member: String,
        /// Why.
        reason: String,
    },
    /// A member was removed from the roster.
    MemberRemoved {
        /// The member.
        member: String,
    },
    /// A message was sent (never its body).
    MessageSent {
        /// The message id.
        id: String,
        /// Its sender.
        from: String,
        /// Its recipient as addressed (`*` for a broadcast).
        to: String,
        /// Its wire type (`text`, `permission_request`, …).
        message_type: String,
        /// Its summary, if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    /// Messages were taken from an inbox to be delivered to its member.
    MessageDelivered {
        /// The recipient.
        to: String,
        /// The ids delivered (at most [`MAX_EVENT_IDS`]).
        ids: Vec<String>,
    },
    /// A task was created.
    TaskCreated {
        /// Its id.
        task: String,
        /// Its subject.
        subject: String,
    },
    /// A task was claimed (or assigned) by its new owner.
    TaskClaimed {
        /// Its id.
        task: String,
        /// The owner.
        owner: String,
    },
    /// A pending task was given to an owner (only it may claim it).
    TaskAssigned {
        /// Its id.
        task: String,
        /// The owner.
        owner: String,
    },
    /// A task went back to the ready set.
    TaskReleased {
        /// Its id.
        task: String,
        /// The owner it had.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
        /// Why: `released`, `owner_gone`, `lease_expired`, `reassigned`, ….
        reason: String,
    },
    /// A task was completed.
    TaskCompleted {
        /// Its id.
        task: String,
        /// Its owner.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    /// A task's status changed otherwise (`pending`, `in_progress`, `deleted`).
    TaskStatus {
        /// Its id.
        task: String,
        /// The new status.
        status: String,
    },
    /// A teammate asked the lead a question.
    ApprovalAsked {
        /// About what.
        request: ApprovalRequest,
        /// The request id.
        request_id: String,
        /// Who asks.
        from: String,
        /// Who is asked.
        to: String,
    },
    /// The lead answered a question.
    ApprovalAnswered {
        /// About what.
        request: ApprovalRequest,
        /// The request id answered.
        request_id: String,
        /// Who answered.
        by: String,
        /// Whose question it was.
        to: String,
        /// Allowed / approved.
        approved: bool,
    },
    /// A teammate's plan was approved.
    PlanApproved {
        /// Whose plan.
        member: String,
        /// The request id.
        request_id: String,
    },
    /// Work was merged.
    Merge {
        /// The commit merged (or made by the merge).
        commit: String,
        /// Whose work, if one member's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        member: Option<String>,
    },
    /// A kind from a newer minor version, with its name: shown, never written.
    #[serde(skip)]
    Newer {
        /// The kind's name.
        kind: String,
    },
}

impl EventKind {
    /// The kind's name as the line writes it (`message_sent`).
    pub fn name(&self) -> &str {
        match self {
            EventKind::TeamCreated { .. } => "team_created",
            EventKind::Spawn { .. } => "spawn",
            EventKind::Join { .. } => "join",
            EventKind::Shutdown { .. } => "shutdown",
            EventKind::Death { .. } => "death",
            EventKind::MemberRemoved { .. } => "member_removed",
            EventKind::MessageSent { .. } => "message_sent",
            EventKind::MessageDelivered { .. } => "message_delivered",
            EventKind::TaskCreated { .. } => "task_created",
            EventKind::TaskClaimed { .. } => "task_claimed",
            EventKind::TaskAssigned { .. } => "task_assigned",
            EventKind::TaskReleased { .. } => "task_released",
            EventKind::TaskCompleted { .. } => "task_completed",
            EventKind::TaskStatus { .. } => "task_status",
            EventKind::ApprovalAsked { .. } => "approval_asked",
            EventKind::ApprovalAnswered { .. } => "approval_answered",
            EventKind::PlanApproved { .. } => "plan_approved",
            EventKind::Merge { .. } => "merge",
            EventKind::Newer { kind } => kind,
        }
    }

    /// The kind's own fields in words, for one line (`task #1 claimed by alice`): what
    /// [`Event::summary_line`] writes after the kind's name. Its fields are as written,
    /// untrusted: a caller that prints them escapes them.
    pub fn describe(&self) -> String {
        let task = |t: &str| format!("#{t}");
        match self {
            EventKind::TeamCreated { lead } => format!("team created, lead {lead}"),
            EventKind::Spawn { member, backend } => match backend {
                Some(b) => format!("{member} added ({b})"),
                None => format!("{member} added"),
            },
            EventKind::Join { member } => format!("{member} joined"),
            EventKind::Shutdown { member } => format!("{member} shut down"),
            EventKind::Death { member, reason } => format!("{member} died: {reason}"),
            EventKind::MemberRemoved { member } => format!("{member} removed"),
            EventKind::MessageSent {
                id,
                from,
                to,
                message_type,
                summary,
            } => {
                let summary = summary
                    .as_deref()
                    .map(|s| format!(": {s}"))
                    .unwrap_or_default();
                format!("{from} → {to} {message_type} {id}{summary}")
            }
            EventKind::MessageDelivered { to, ids } => {
                format!("{} delivered to {to}: {}", ids.len(), ids.join(" "))
            }
            EventKind::TaskCreated { task: t, subject } => {
                format!("task {} created: {subject}", task(t))
            }
            EventKind::TaskClaimed { task: t, owner } => {
                format!("task {} claimed by {owner}", task(t))
            }
            EventKind::TaskAssigned { task: t, owner } => {
                format!("task {} assigned to {owner}", task(t))
            }
            EventKind::TaskReleased {
                task: t,
                owner,
                reason,
            } => match owner {
                Some(o) => format!("task {} released by {o} ({reason})", task(t)),
                None => format!("task {} released ({reason})", task(t)),
            },
            EventKind::TaskCompleted { task: t, owner } => match owner {
                Some(o) => format!("task {} completed by {o}", task(t)),
                None => format!("task {} completed", task(t)),
            },
            EventKind::TaskStatus { task: t, status } => format!("task {} now {status}", task(t)),
            EventKind::ApprovalAsked {
                request,
                request_id,
                from,
                to,
            } => format!("{from} asks {to} ({}) {request_id}", request_name(*request)),
            EventKind::ApprovalAnswered {
                request,
                request_id,
                by,
                to,
                approved,
            } => {
                let verdict = if *approved { "yes" } else { "no" };
                format!(
                    "{by} answers {to} ({}) {request_id}: {verdict}",
                    request_name(*request)
                )
            }
            EventKind::PlanApproved { member, request_id } => {
                format!("plan of {member} approved {request_id}")
            }
            EventKind::Merge { commit, member } => match member {
                Some(m) => format!("merged {m}'s work at {commit}"),
                None => format!("merged {commit}"),
            },
            EventKind::Newer { kind } => format!("({kind}: a kind from a newer version)"),
        }
    }

    /// Cuts every text field to [`MAX_EVENT_TEXT`] characters and the id list to
    /// [`MAX_EVENT_IDS`]: what a writer does before it checks the line.
    fn clamp(&mut self, max_chars: usize) {
        let cut = |s: &mut String| *s = clamp_text(s, max_chars);
        match self {
            EventKind::TeamCreated { lead: a }
            | EventKind::Join { member: a }
            | EventKind::Shutdown { member: a }
            | EventKind::MemberRemoved { member: a } => cut(a),
            EventKind::Spawn { member, backend } => {
                cut(member);
                backend.iter_mut().for_each(cut);
            }
            EventKind::Death { member, reason } => {
                cut(member);
                cut(reason);
            }
            EventKind::MessageSent {
                id,
                from,
                to,
                message_type,
                summary,
            } => {
                [id, from, to, message_type].into_iter().for_each(cut);
                summary.iter_mut().for_each(cut);
            }
            EventKind::MessageDelivered { to, ids } => {
                cut(to);
                ids.truncate(MAX_EVENT_IDS);
                ids.iter_mut().for_each(cut);
            }
            EventKind::TaskCreated { task, subject: b }
            | EventKind::TaskClaimed { task, owner: b }
            | EventKind::TaskAssigned { task, owner: b }
            | EventKind::TaskStatus { task, status: b } => {
                cut(task);
                cut(b);
            }
            EventKind::TaskReleased {
                task,
                owner,
                reason,
            } => {
                cut(task);
                cut(reason);
                owner.iter_mut().for_each(cut);
            }
            EventKind::TaskCompleted { task, owner } => {
                cut(task);
                owner.iter_mut().for_each(cut);
            }
            EventKind::ApprovalAsked {
                request_id,
                from: a,
                to: b,
                ..
            }
            | EventKind::ApprovalAnswered {
                request_id,
                by: a,
                to: b,
                ..
            } => [request_id, a, b].into_iter().for_each(cut),
            EventKind::PlanApproved { member, request_id } => {
                cut(member);
                cut(request_id);
            }
            EventKind::Merge { commit, member } => {
                cut(commit);
                member.iter_mut().for_each(cut);
            }
            EventKind::Newer { kind } => cut(kind),
        }
    }
}

fn request_name(request: ApprovalRequest) -> &'static str {
    match request {
        ApprovalRequest::Permission => "permission",
        ApprovalRequest::Plan => "plan",
    }
}

/// `s` cut to [`MAX_EVENT_TEXT`] characters, ending in `…` when cut; control characters
/// become spaces (a line is one line, and a terminal shows no escapes from it).
fn clamp_text(s: &str, max_chars: usize) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max_chars)
        .collect();
    if s.chars().count() > max_chars {
        out.pop();
        out.push('…');
    }
    out
}

/// One record of the log.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The format version the line was written with.
    pub version: FormatVersion,
    /// Its place in the team's log: 1-based, strictly increasing, never reused (it
    /// continues across rotation).
    pub seq: u64,
    /// When, by the store's clock (the server's on PostgreSQL).
    pub time: Timestamp,
    /// What happened.
    pub kind: EventKind,
    /// Who made the change: a member's name (the one acting, or `roo-mail` for a
    /// command run without one).
    pub actor: String,
    /// The actor's epoch when it wrote as a joined member.
    pub epoch: Option<u64>,
    /// The line as stored (files) or as rebuilt from the row (PostgreSQL).
    line: String,
}

/// The line's shape as written.
#[derive(Serialize, Deserialize)]
struct Line {
    version: FormatVersion,
    seq: u64,
    time: Timestamp,
    actor: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    epoch: Option<u64>,
    #[serde(flatten)]
    kind: EventKind,
}

/// The fields every line has, whatever its kind (for a kind from a newer version).
#[derive(Deserialize)]
struct Common {
    version: FormatVersion,
    seq: u64,
    time: Timestamp,
    actor: String,
    #[serde(default)]
    epoch: Option<u64>,
    kind: String,
}

impl Event {
    /// The JSON line exactly as stored (files; rebuilt from its row on PostgreSQL).
    pub fn json_line(&self) -> &str {
        &self.line
    }

    /// One line for people: `seq time actor[@epoch] kind: what`.
    pub fn summary_line(&self) -> String {
        let epoch = self.epoch.map(|e| format!("@{e}")).unwrap_or_default();
        format!(
            "{:>5} {} {}{} {}: {}",
            self.seq,
            self.time,
            self.actor,
            epoch,
            self.kind.name(),
            self.kind.describe()
        )
    }
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.summary_line())
    }
}

/// A page of the log, as [`crate::Team::events`] returns it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventPage {
    /// The events, in seq order.
    pub events: Vec<Event>,
    /// Damaged lines skipped while reading (each also reported as a warning,
    /// [`crate::quarantine::take_warnings`]).
    pub skipped: usize,
    /// The highest seq the log holds (0: empty), even when `events` is empty.
    pub last_seq: u64,
}

/// An event a change emits: its kind and who acts; the store adds seq and time.
#[derive(Clone, Debug)]
pub(crate) struct Draft {
    pub(crate) kind: EventKind,
    pub(crate) actor: String,
    pub(crate) epoch: Option<u64>,
}

impl Draft {
    pub(crate) fn new(kind: EventKind, actor: impl Into<String>, epoch: Option<u64>) -> Draft {
        let actor = actor.into();
        let mut clamped = kind.clone();
        clamped.clamp(MAX_EVENT_TEXT);
        let draft = Draft {
            kind: clamped,
            actor: clamp_text(&actor, MAX_EVENT_TEXT),
            epoch,
        };
        if draft.check().is_ok() {
            return draft;
        }
        // Still too long for a line (many long ids, wide characters): every text shorter.
        let mut kind = kind;
        kind.clamp(SHORT_EVENT_TEXT);
        Draft {
            kind,
            actor: clamp_text(&actor, SHORT_EVENT_TEXT),
            epoch,
        }
    }

    /// The line with `seq` and `time`, refused (nothing written) if a reader would reject
    /// it.
    pub(crate) fn line(&self, seq: u64, time: Timestamp) -> std::result::Result<String, String> {
        let line = serde_json::to_string(&Line {
            version: FormatVersion::CURRENT,
            seq,
            time,
            actor: self.actor.clone(),
            epoch: self.epoch,
            kind: self.kind.clone(),
        })
        .map_err(|e| e.to_string())?;
        parse_line(&line)?;
        Ok(line)
    }

    /// Checks now that the line will be accepted whatever its seq and time (the widest
    /// ones), so a change fails before it writes anything.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        self.line(MAX_SEQ, crate::limits::MAX_TIMESTAMP).map(|_| ())
    }

    /// The row's body on PostgreSQL: the line without `seq` and `time`, which the row's
    /// columns hold.
    pub(crate) fn body(&self) -> std::result::Result<String, String> {
        let line = self.line(1, Timestamp::from_unix_ms(0))?;
        let mut value: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&line).map_err(|e| e.to_string())?;
        value.remove("seq");
        value.remove("time");
        serde_json::to_string(&value).map_err(|e| e.to_string())
    }
}

/// The reader's judgement of one line: `Err(why)` makes it damaged (skipped, counted).
/// The largest seq a line may carry: PostgreSQL's `bigint`, so a log copied between the
/// stores keeps its numbers, and a hostile line cannot make the next seq wrap.
pub(crate) const MAX_SEQ: u64 = i64::MAX as u64;

pub(crate) fn parse_line(line: &str) -> std::result::Result<Event, String> {
    if line.len() > MAX_EVENT_LINE {
        return Err(format!(
            "the line is {} bytes; the limit is {MAX_EVENT_LINE}",
            line.len()
        ));
    }
    if crate::limits::text_depth(line.as_bytes()) > 3 {
        return Err("the line is nested too deep".into());
    }
    let common: Common = serde_json::from_str(line).map_err(|e| e.to_string())?;
    if common.version.major > FORMAT_MAJOR {
        return Err(format!(
            "written in format version {}, newer than this build reads ({FORMAT_MAJOR}.x)",
            common.version
        ));
    }
    if common.seq == 0 {
        return Err("its seq is 0 (the log counts from 1)".into());
    }
    if common.seq > MAX_SEQ {
        return Err(format!(
            "its seq is over {MAX_SEQ} (the PostgreSQL store's bigint)"
        ));
    }
    if !crate::limits::timestamp_in_range(common.time) {
        return Err("its time is out of range".into());
    }
    let kind = match serde_json::from_str::<Line>(line) {
        Ok(parsed) => parsed.kind,
        Err(e) if KNOWN.contains(&common.kind.as_str()) => return Err(e.to_string()),
        Err(_) => EventKind::Newer {
            kind: common.kind.clone(),
        },
    };
    let mut clamped = kind.clone();
    clamped.clamp(MAX_EVENT_TEXT);
    if clamped != kind || clamp_text(&common.actor, MAX_EVENT_TEXT) != common.actor {
        return Err(format!(
            "a field is longer than {MAX_EVENT_TEXT} characters, lists more than \
             {MAX_EVENT_IDS} ids or holds a control character"
        ));
    }
    Ok(Event {
        version: common.version,
        seq: common.seq,
        time: common.time,
        kind,
        actor: common.actor,
        epoch: common.epoch,
        line: line.to_owned(),
    })
}

/// The kinds this build writes.
const KNOWN: &[&str] = &[
    "team_created",
    "spawn",
    "join",
    "shutdown",
    "death",
    "member_removed",
    "message_sent",
    "message_delivered",
    "task_created",
    "task_claimed",
    "task_assigned",
    "task_released",
    "task_completed",
    "task_status",
    "approval_asked",
    "approval_answered",
    "plan_approved",
    "merge",
];

impl crate::team::Team {
    /// The newest `limit` events of the team's log with seq > `after` (all when `None`),
    /// in seq order; damaged lines are skipped and counted ([`EventPage::skipped`]), never
    /// fatal. A team that does not exist is [`Error::TeamNotFound`].
    pub fn events(&self, after: Option<u64>, limit: usize) -> Result<EventPage> {
        let home = self.home();
        let path = events_path(home, self.name());
        let page = home.engine().events(home, &path, after, limit)?;
        if page.last_seq == 0 && page.skipped == 0 && !self.exists()? {
            return Err(self.not_found(&self.config_path()));
        }
        Ok(page)
    }

    /// Records an event that changes no document (a merge), as `actor` (its epoch from
    /// the team's config): under the config's lock (files) or in a transaction holding
    /// its row (PostgreSQL), like the events of any other change. A missing team is
    /// [`Error::TeamNotFound`] and nothing is written.
    pub fn record_event(&self, actor: &str, kind: EventKind) -> Result<()> {
        let path = self.config_path();
        let home = self.home();
        if home.engine().surely_missing(&path) {
            return Err(self.not_found(&path));
        }
        crate::doc::update_fenced(
            home,
            &path,
            || Err(self.not_found(&path)),
            |config: &mut crate::team::TeamConfig, guard| {
                let epoch = config.member(actor).and_then(|m| m.epoch);
                guard.emit(self.name(), Draft::new(kind.clone(), actor, epoch))?;
                Ok(crate::doc::Outcome::Keep(()))
            },
        )
    }
}

impl crate::team::Team {
    /// A watcher woken when the team's log grows (files: a change of `events.jsonl`;
    /// PostgreSQL: the notification of a change that added events). Re-read with
    /// [`crate::Team::events`] after each wake, and now and then anyway: a wake may be
    /// missed while the link to the store is re-established.
    pub fn event_watcher(&self) -> Result<crate::watch::InboxWatcher> {
        let home = self.home();
        home.engine().watcher(home, events_path(home, self.name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(n: usize) -> Draft {
        Draft::new(
            EventKind::TaskCreated {
                task: n.to_string(),
                subject: format!("subject {n}"),
            },
            "lead",
            None,
        )
    }

    #[test]
    fn a_line_round_trips_and_a_newer_kind_is_shown_not_refused() {
        let line = draft(1).line(7, Timestamp::from_unix_ms(1_000)).unwrap();
        let event = parse_line(&line).unwrap();
        assert_eq!(event.seq, 7);
        assert_eq!(event.json_line(), line);
        assert!(
            event.summary_line().contains("task #1 created: subject 1"),
            "{event}"
        );
        let newer = r#"{"version":"1.3","seq":3,"time":"2026-01-01T00:00:00.000Z","actor":"lead","kind":"budget_warning","spent":3}"#;
        let event = parse_line(newer).unwrap();
        assert_eq!(event.kind.name(), "budget_warning");
        let major = newer.replace("1.3", "2.0");
        assert!(parse_line(&major).unwrap_err().contains("newer"));
    }

    #[test]
    fn a_writer_cuts_long_fields_and_never_writes_a_line_a_reader_rejects() {
        let long = "x\u{1b}".repeat(5000);
        let d = Draft::new(
            EventKind::Death {
                member: "alice".into(),
                reason: long,
            },
            "lead",
            Some(3),
        );
        let line = d.line(1, Timestamp::from_unix_ms(0)).unwrap();
        assert!(line.len() <= MAX_EVENT_LINE, "{}", line.len());
        assert!(!line.contains('\u{1b}'));
        let forged = line.replace("…", &"y".repeat(400));
        assert!(parse_line(&forged).is_err());
        // Many long wide ids still make a line a reader takes.
        let ids: Vec<String> = (0..MAX_EVENT_IDS)
            .map(|n| format!("{n}{}", "é".repeat(400)))
            .collect();
        let d = Draft::new(
            EventKind::MessageDelivered {
                to: "alice".into(),
                ids,
            },
            "alice",
            None,
        );
        let line = d.line(MAX_SEQ, crate::limits::MAX_TIMESTAMP).unwrap();
        assert!(line.len() <= MAX_EVENT_LINE, "{}", line.len());
    }
}
