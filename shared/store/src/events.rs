//! The team's event log (docs/PROTOCOL.md §9): one append-only record per change of the
//! team's state — who joined, spawned, died, sent, delivered, claimed, completed, asked,
//! answered, merged — with the store's time, the actor and its epoch.
//!
//! This module owns the record ([`Event`], [`EventKind`]), its line format and the
//! reader's judgement of a line (version, limits; a damaged line is skipped and counted,
//! never fatal), the file layout (`teams/<team>/events.jsonl`, rotated by size to
//! `events.1.jsonl` … with the sequence continuing) and the reads of either store.
//! Writers never call it directly: a change emits its events through its `doc::Guard`,
//! which appends them in the same locked change as the state they record — under the
//! document's lock then the events file's own lock (innermost) on files, in the same
//! transaction on PostgreSQL — so the log never disagrees with the state.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format_version::{FORMAT_MAJOR, FormatVersion};
use crate::fsio;
use crate::home::RooHome;
use crate::limits::{
    EVENT_LOG_KEEP, EVENT_LOG_ROTATE_BYTES, MAX_EVENT_IDS, MAX_EVENT_LINE, MAX_EVENT_TEXT,
};
use crate::lock::FileLock;
use crate::name::Name;
use crate::time::Timestamp;

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

    /// The kind's own fields in words, for one line.
    fn describe(&self) -> String {
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
        self.line(u64::MAX, crate::limits::MAX_TIMESTAMP)
            .map(|_| ())
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

/// The current event file of `team`.
pub(crate) fn events_path(home: &RooHome, team: &Name) -> PathBuf {
    home.team_dir(team).join(EVENTS_FILE)
}

/// Rotated file `n` (1 is the newest) next to `current`.
fn rotated(current: &Path, n: usize) -> PathBuf {
    current.with_file_name(format!("events.{n}.jsonl"))
}

/// How the file store rotates the log: the constants of [`crate::limits`], smaller in
/// tests.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rotation {
    pub(crate) bytes: u64,
    pub(crate) keep: usize,
}

impl Rotation {
    pub(crate) const DEFAULT: Rotation = Rotation {
        bytes: EVENT_LOG_ROTATE_BYTES,
        keep: EVENT_LOG_KEEP,
    };
}

/// Appends `drafts` to the file log at `current`, under its own lock (taken innermost:
/// the caller holds the document's lock, and this lock never waits on another): each
/// gets the next seq and the store's time; rotates first when the file is past
/// `rotation.bytes`. Synced like the inbox's archive. Returns the last seq written.
pub(crate) fn append_to_file(
    home: &RooHome,
    current: &Path,
    drafts: &[Draft],
    rotation: Rotation,
) -> Result<u64> {
    if drafts.is_empty() {
        return Ok(0);
    }
    let lock = FileLock::acquire(current, home.lock_policy())?;
    let mut last = last_seq_in_files(current, rotation.keep)?;
    let size = match std::fs::symlink_metadata(current) {
        Ok(meta) => meta.len(),
        Err(_) => 0,
    };
    if size >= rotation.bytes {
        lock.verify(current)?;
        rotate(current, rotation.keep)?;
    }
    let mut buf = Vec::new();
    // A line torn by a crash gets its own line (damaged, skipped), not the next one's.
    if !ends_with_newline(current)? {
        buf.push(b'\n');
    }
    for draft in drafts {
        last += 1;
        let line = draft
            .line(last, Timestamp::now())
            .map_err(|reason| Error::Unwritable {
                path: current.to_owned(),
                reason,
            })?;
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
    }
    let mut file = fsio::open_regular(
        current,
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600),
        "open the event log",
    )?
    .ok_or_else(|| {
        Error::io(
            "open the event log",
            current,
            std::io::ErrorKind::NotFound.into(),
        )
    })?;
    lock.verify(current)?;
    file.write_all(&buf)
        .map_err(|e| Error::io("append to the event log", current, e))?;
    file.sync_data()
        .map_err(|e| Error::io("sync the event log", current, e))?;
    Ok(last)
}

/// Whether the file at `path` is missing, empty, or ends with a newline.
fn ends_with_newline(path: &Path) -> Result<bool> {
    let Some(mut file) = fsio::open_regular(
        path,
        std::fs::OpenOptions::new().read(true),
        "read the event log",
    )?
    else {
        return Ok(true);
    };
    let len = file
        .seek(SeekFrom::End(0))
        .map_err(|e| Error::io("read the event log", path, e))?;
    if len == 0 {
        return Ok(true);
    }
    file.seek(SeekFrom::End(-1))
        .map_err(|e| Error::io("read the event log", path, e))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)
        .map_err(|e| Error::io("read the event log", path, e))?;
    Ok(last[0] == b'\n')
}

/// `events.jsonl` → `events.1.jsonl` → … → `events.<keep>.jsonl`; the oldest is dropped.
fn rotate(current: &Path, keep: usize) -> Result<()> {
    let oldest = rotated(current, keep.max(1));
    match std::fs::remove_file(&oldest) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("drop the oldest event log", &oldest, e)),
    }
    for n in (1..keep.max(1)).rev() {
        let from = rotated(current, n);
        if std::fs::symlink_metadata(&from).is_ok() {
            let to = rotated(current, n + 1);
            std::fs::rename(&from, &to).map_err(|e| Error::io("rotate the event log", &from, e))?;
        }
    }
    let first = rotated(current, 1);
    std::fs::rename(current, &first).map_err(|e| Error::io("rotate the event log", current, e))
}

/// The highest seq of a valid line, from the end of the current file, else of the
/// rotated ones (newest first); 0 when the log is empty. Reads the tail only, unless no
/// line there is valid.
fn last_seq_in_files(current: &Path, keep: usize) -> Result<u64> {
    let files = std::iter::once(current.to_owned()).chain((1..=keep).map(|n| rotated(current, n)));
    for path in files {
        if let Some(seq) = last_seq_in(&path)? {
            return Ok(seq);
        }
    }
    Ok(0)
}

/// The seq of the last valid line of `path`, if any.
fn last_seq_in(path: &Path) -> Result<Option<u64>> {
    let Some(mut file) = fsio::open_regular(
        path,
        std::fs::OpenOptions::new().read(true),
        "read the event log",
    )?
    else {
        return Ok(None);
    };
    let len = file
        .seek(SeekFrom::End(0))
        .map_err(|e| Error::io("read the event log", path, e))?;
    let tail = (2 * MAX_EVENT_LINE as u64 + 2).min(len);
    file.seek(SeekFrom::Start(len - tail))
        .map_err(|e| Error::io("read the event log", path, e))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| Error::io("read the event log", path, e))?;
    if let Some(seq) = max_seq(&bytes) {
        return Ok(Some(seq));
    }
    if tail == len {
        return Ok(None);
    }
    file.seek(SeekFrom::Start(0))
        .map_err(|e| Error::io("read the event log", path, e))?;
    bytes.clear();
    file.read_to_end(&mut bytes)
        .map_err(|e| Error::io("read the event log", path, e))?;
    Ok(max_seq(&bytes))
}

/// The highest seq of the valid lines in `bytes`.
fn max_seq(bytes: &[u8]) -> Option<u64> {
    bytes
        .split(|b| *b == b'\n')
        .filter_map(|line| std::str::from_utf8(line).ok())
        .filter_map(|line| parse_line(line).ok())
        .map(|event| event.seq)
        .max()
}

/// What reading the lines of one or more files found.
#[derive(Default)]
struct Found {
    events: Vec<Event>,
    skipped: usize,
}

impl Found {
    /// Takes the complete lines of `bytes` (an unterminated last line is a write in
    /// progress: left alone), keeping the valid ones and counting the damaged ones.
    fn take(&mut self, path: &Path, bytes: &[u8]) {
        let complete = match bytes.iter().rposition(|b| *b == b'\n') {
            Some(end) => &bytes[..end],
            None => return,
        };
        for (n, line) in complete.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let parsed = std::str::from_utf8(line)
                .map_err(|e| e.to_string())
                .and_then(parse_line);
            match parsed {
                Ok(event) => self.events.push(event),
                Err(why) => {
                    self.skipped += 1;
                    crate::quarantine::warn(format!(
                        "{} line {}: a damaged event is skipped ({why})",
                        path.display(),
                        n + 1
                    ));
                }
            }
        }
    }
}

/// The newest `limit` events with seq > `after` of the file log at `current`, in seq
/// order. Reads the current file, then the rotated ones only as far as needed.
pub(crate) fn read_files(
    current: &Path,
    after: Option<u64>,
    limit: usize,
    keep: usize,
) -> Result<EventPage> {
    let after = after.unwrap_or(0);
    let mut page = EventPage::default();
    let mut newer: Vec<Event> = Vec::new();
    let files = std::iter::once(current.to_owned()).chain((1..=keep).map(|n| rotated(current, n)));
    for path in files {
        let Some(bytes) = fsio::read_regular(&path, "read the event log")? else {
            continue;
        };
        let mut found = Found::default();
        found.take(&path, &bytes);
        page.skipped += found.skipped;
        let oldest = found.events.iter().map(|e| e.seq).min();
        if page.last_seq == 0 {
            page.last_seq = found.events.iter().map(|e| e.seq).max().unwrap_or(0);
        }
        let mut wanted: Vec<Event> = found.events.into_iter().filter(|e| e.seq > after).collect();
        wanted.append(&mut newer);
        newer = wanted;
        if oldest.is_some_and(|o| o <= after.saturating_add(1)) || newer.len() >= limit {
            break;
        }
    }
    page.events = ordered(newer, limit);
    Ok(page)
}

/// `events` in strictly increasing seq (a line seen twice across a rotation is kept
/// once), the newest `limit` of them.
fn ordered(mut events: Vec<Event>, limit: usize) -> Vec<Event> {
    events.sort_by_key(|e| e.seq);
    events.dedup_by_key(|e| e.seq);
    let skip = events.len().saturating_sub(limit);
    events.split_off(skip)
}

/// Builds an event from a row of the PostgreSQL store: its body with its seq and time.
pub(crate) fn from_row(seq: i64, time_ms: i64, body: &str) -> std::result::Result<Event, String> {
    let mut value: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(body).map_err(|e| e.to_string())?;
    let time = Timestamp::from_unix_ms(time_ms);
    let mut line = serde_json::Map::new();
    // The same key order as a file's line.
    if let Some(v) = value.remove("version") {
        line.insert("version".into(), v);
    }
    line.insert("seq".into(), seq.into());
    line.insert("time".into(), time.to_string().into());
    line.extend(value);
    let text = serde_json::to_string(&line).map_err(|e| e.to_string())?;
    parse_line(&text)
}

/// The newest `limit` events with seq > `after` of the PostgreSQL log `key`.
pub(crate) fn read_rows(
    pg: &crate::pg::PgStore,
    key: &str,
    after: Option<u64>,
    limit: usize,
) -> Result<EventPage> {
    let (rows, last_seq) = pg.events(key, after.unwrap_or(0), limit)?;
    let mut page = EventPage {
        last_seq,
        ..EventPage::default()
    };
    let mut events = Vec::new();
    for (seq, time_ms, body) in rows {
        match from_row(seq, time_ms, &body) {
            Ok(event) => events.push(event),
            Err(why) => {
                page.skipped += 1;
                crate::quarantine::warn(format!(
                    "postgresql roo_event, key {key}, seq {seq}: a damaged event is skipped ({why})"
                ));
            }
        }
    }
    page.events = ordered(events, limit);
    Ok(page)
}

impl crate::team::Team {
    /// The newest `limit` events of the team's log with seq > `after` (all when `None`),
    /// in seq order; damaged lines are skipped and counted ([`EventPage::skipped`]), never
    /// fatal. A team that does not exist is [`Error::TeamNotFound`].
    pub fn events(&self, after: Option<u64>, limit: usize) -> Result<EventPage> {
        let home = self.home();
        let path = events_path(home, self.name());
        let page = match home.pg() {
            Some(pg) => read_rows(pg, &home.key(&path)?, after, limit)?,
            None => read_files(&path, after, limit, Rotation::DEFAULT.keep)?,
        };
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
        if home.pg().is_none() && !path.is_file() {
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
        let line = d.line(u64::MAX, crate::limits::MAX_TIMESTAMP).unwrap();
        assert!(line.len() <= MAX_EVENT_LINE, "{}", line.len());
    }

    #[test]
    fn damaged_lines_are_skipped_and_counted_and_an_unfinished_line_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join(EVENTS_FILE);
        append_to_file(&home, &path, &[draft(1), draft(2)], Rotation::DEFAULT).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"not an event\n{\"half").unwrap();
        drop(f);
        append_to_file(&home, &path, &[draft(3)], Rotation::DEFAULT).unwrap();
        let page = read_files(&path, None, 100, 4).unwrap();
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3]);
        assert_eq!(page.skipped, 2);
        assert_eq!(page.last_seq, 3);
        let page = read_files(&path, Some(1), 1, 4).unwrap();
        assert_eq!(page.events.len(), 1);
        assert_eq!(page.events[0].seq, 3);
    }

    #[test]
    fn rotation_bounds_the_files_and_the_seq_continues() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join(EVENTS_FILE);
        let rotation = Rotation {
            bytes: 600,
            keep: 2,
        };
        for n in 1..=40 {
            append_to_file(&home, &path, &[draft(n)], rotation).unwrap();
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".jsonl"))
            .collect();
        names.sort();
        assert_eq!(names, ["events.1.jsonl", "events.2.jsonl", "events.jsonl"]);
        for name in &names {
            assert!(std::fs::metadata(dir.path().join(name)).unwrap().len() < 600 + 300);
        }
        let page = read_files(&path, None, 1000, 2).unwrap();
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        assert_eq!(*seqs.last().unwrap(), 40);
        assert!(seqs[0] > 1, "the oldest file was dropped: {seqs:?}");
    }

    #[test]
    fn concurrent_appends_get_distinct_consecutive_seqs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        std::thread::scope(|scope| {
            for _ in 0..6 {
                scope.spawn(|| {
                    let home = RooHome::new(dir.path());
                    for n in 0..60 {
                        append_to_file(&home, &path, &[draft(n)], Rotation::DEFAULT).unwrap();
                    }
                });
            }
        });
        let page = read_files(&path, None, usize::MAX, 4).unwrap();
        assert_eq!(page.skipped, 0, "a torn line");
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        let expected: Vec<u64> = (1..=360).collect();
        assert_eq!(seqs, expected);
    }

    #[test]
    fn a_symlinked_log_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join(EVENTS_FILE);
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"").unwrap();
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        let err = append_to_file(&home, &path, &[draft(1)], Rotation::DEFAULT).unwrap_err();
        assert!(matches!(err, Error::NotRegularFile { .. }), "{err}");
        assert!(read_files(&path, None, 10, 4).is_err());
        assert_eq!(std::fs::read(&outside).unwrap(), b"");
    }
}

/// The events of a message stored for `recipient`: `message_sent`, and for a question or
/// an answer `approval_asked` / `approval_answered` (and `plan_approved`). As its sender.
pub(crate) fn sent(
    message: &crate::message::Message,
    recipient: &Name,
    config: &crate::team::TeamConfig,
) -> Vec<Draft> {
    use crate::message::{MessageBody, PermissionDecision};
    let from = message.from.to_string();
    let to = recipient.to_string();
    let epoch = epoch_of(config, &from);
    let mut kinds = vec![EventKind::MessageSent {
        id: message.id.as_str().to_owned(),
        from: from.clone(),
        to: to.clone(),
        message_type: message.body.type_name().to_owned(),
        summary: message.summary.clone(),
    }];
    let asked = |request, request_id: &String| EventKind::ApprovalAsked {
        request,
        request_id: request_id.clone(),
        from: from.clone(),
        to: to.clone(),
    };
    let answered = |request, request_id: &String, approved| EventKind::ApprovalAnswered {
        request,
        request_id: request_id.clone(),
        by: from.clone(),
        to: to.clone(),
        approved,
    };
    match &message.body {
        MessageBody::PermissionRequest { request_id, .. } => {
            kinds.push(asked(ApprovalRequest::Permission, request_id));
        }
        MessageBody::PlanApprovalRequest { request_id, .. } => {
            kinds.push(asked(ApprovalRequest::Plan, request_id));
        }
        MessageBody::PermissionResponse {
            request_id,
            decision,
            ..
        } => kinds.push(answered(
            ApprovalRequest::Permission,
            request_id,
            *decision == PermissionDecision::Allow,
        )),
        MessageBody::PlanApprovalResponse {
            request_id,
            approve,
            ..
        } => {
            kinds.push(answered(ApprovalRequest::Plan, request_id, *approve));
            if *approve {
                kinds.push(EventKind::PlanApproved {
                    member: to.clone(),
                    request_id: request_id.clone(),
                });
            }
        }
        _ => {}
    }
    kinds
        .into_iter()
        .map(|kind| Draft::new(kind, from.clone(), epoch))
        .collect()
}

/// The `message_delivered` events of messages taken from `recipient`'s inbox (at most
/// [`MAX_EVENT_IDS`] ids each). As the recipient.
pub(crate) fn delivered(recipient: &Name, taken: &[crate::message::Message]) -> Vec<Draft> {
    taken
        .chunks(MAX_EVENT_IDS)
        .map(|chunk| {
            Draft::new(
                EventKind::MessageDelivered {
                    to: recipient.to_string(),
                    ids: chunk.iter().map(|m| m.id.as_str().to_owned()).collect(),
                },
                recipient.to_string(),
                None,
            )
        })
        .collect()
}

/// The epoch `actor`'s entry in `config` records, if any.
pub(crate) fn epoch_of(config: &crate::team::TeamConfig, actor: &str) -> Option<u64> {
    config.member(actor).and_then(|m| m.epoch)
}

/// Who acts for a change made without a member's identity (a `roo-mail` command, the
/// runtime's roster changes): the team's lead.
pub(crate) fn lead_of(config: &crate::team::TeamConfig) -> String {
    config
        .lead()
        .map(|lead| lead.name.to_string())
        .unwrap_or_else(|| "lead".to_owned())
}

/// `team_created`, as its lead.
pub(crate) fn team_created(lead: &crate::team::Member) -> Draft {
    Draft::new(
        EventKind::TeamCreated {
            lead: lead.name.to_string(),
        },
        lead.name.to_string(),
        None,
    )
}

/// `spawn` of a member added to the roster, as the lead.
pub(crate) fn spawned(config: &crate::team::TeamConfig, member: &crate::team::Member) -> Draft {
    let lead = lead_of(config);
    let epoch = epoch_of(config, &lead);
    Draft::new(
        EventKind::Spawn {
            member: member.name.to_string(),
            backend: member
                .backend_type
                .as_ref()
                .and_then(|b| serde_json::to_value(b).ok())
                .and_then(|v| v.as_str().map(str::to_owned)),
        },
        lead,
        epoch,
    )
}

/// `member_removed`, as the lead.
pub(crate) fn removed(config: &crate::team::TeamConfig, member: &crate::team::Member) -> Draft {
    let lead = lead_of(config);
    let epoch = epoch_of(config, &lead);
    Draft::new(
        EventKind::MemberRemoved {
            member: member.name.to_string(),
        },
        lead,
        epoch,
    )
}

/// `join` of `member` (its entry as joined), as itself.
pub(crate) fn joined(member: &crate::team::Member) -> Draft {
    Draft::new(
        EventKind::Join {
            member: member.name.to_string(),
        },
        member.name.to_string(),
        member.epoch,
    )
}

/// `death` of `member` (or `shutdown`, when it stopped at the lead's request), as `by`
/// (the lead when `None`).
pub(crate) fn died(
    config: &crate::team::TeamConfig,
    member: &crate::team::Member,
    by: Option<&Name>,
    reason: &str,
) -> Draft {
    let actor = by.map(Name::to_string).unwrap_or_else(|| lead_of(config));
    let epoch = epoch_of(config, &actor);
    let kind = if reason == crate::team::SHUT_DOWN_REASON {
        EventKind::Shutdown {
            member: member.name.to_string(),
        }
    } else {
        EventKind::Death {
            member: member.name.to_string(),
            reason: reason.to_owned(),
        }
    };
    Draft::new(kind, actor, epoch)
}

/// What a task list change's events are derived from: each task's status, owner and
/// number of notes before the change.
pub(crate) struct TaskMarks(Vec<TaskMark>);

struct TaskMark {
    id: crate::task::TaskId,
    status: crate::task::TaskStatus,
    owner: Option<Name>,
    notes: usize,
}

impl TaskMarks {
    pub(crate) fn of(list: &crate::task_list_doc::TaskListDoc) -> TaskMarks {
        TaskMarks(
            list.tasks
                .iter()
                .map(|t| TaskMark {
                    id: t.id.clone(),
                    status: t.status,
                    owner: t.owner.clone(),
                    notes: t.notes.len(),
                })
                .collect(),
        )
    }

    /// The events of the change from these marks to `list`, as `actor` (the lead when
    /// `None`), in task order.
    pub(crate) fn changes(
        &self,
        list: &crate::task_list_doc::TaskListDoc,
        config: &crate::team::TeamConfig,
        actor: Option<&Name>,
    ) -> Vec<Draft> {
        use crate::task::TaskStatus;
        let actor = actor
            .map(Name::to_string)
            .unwrap_or_else(|| lead_of(config));
        let epoch = epoch_of(config, &actor);
        let mut kinds = Vec::new();
        let owner_of = |o: &Option<Name>| o.as_ref().map(Name::to_string);
        for task in &list.tasks {
            let id = task.id.to_string();
            let Some(before) = self.0.iter().find(|m| m.id == task.id) else {
                kinds.push(EventKind::TaskCreated {
                    task: id.clone(),
                    subject: task.subject.clone(),
                });
                if let Some(owner) = &task.owner {
                    kinds.push(EventKind::TaskAssigned {
                        task: id,
                        owner: owner.to_string(),
                    });
                }
                continue;
            };
            if before.status == task.status && before.owner == task.owner {
                continue;
            }
            let new_note = task
                .notes
                .last()
                .filter(|_| task.notes.len() != before.notes)
                .map(|n| n.text.clone());
            kinds.push(match (task.status, &task.owner) {
                (TaskStatus::Completed, owner) => EventKind::TaskCompleted {
                    task: id,
                    owner: owner_of(owner),
                },
                (TaskStatus::InProgress, Some(owner)) => EventKind::TaskClaimed {
                    task: id,
                    owner: owner.to_string(),
                },
                (TaskStatus::Pending, None) if before.owner.is_some() => EventKind::TaskReleased {
                    task: id,
                    owner: owner_of(&before.owner),
                    reason: new_note.unwrap_or_else(|| "released".to_owned()),
                },
                (TaskStatus::Pending, Some(owner)) if before.owner != task.owner => {
                    EventKind::TaskAssigned {
                        task: id,
                        owner: owner.to_string(),
                    }
                }
                (status, _) => EventKind::TaskStatus {
                    task: id,
                    status: status.to_string(),
                },
            });
        }
        for gone in self
            .0
            .iter()
            .filter(|m| !list.tasks.iter().any(|t| t.id == m.id))
        {
            kinds.push(EventKind::TaskStatus {
                task: gone.id.to_string(),
                status: "deleted".to_owned(),
            });
        }
        kinds
            .into_iter()
            .map(|kind| Draft::new(kind, actor.clone(), epoch))
            .collect()
    }
}

impl crate::team::Team {
    /// A watcher woken when the team's log grows (files: a change of `events.jsonl`;
    /// PostgreSQL: the notification of a change that added events). Re-read with
    /// [`crate::Team::events`] after each wake, and now and then anyway: a wake may be
    /// missed while the link to the store is re-established.
    pub fn event_watcher(&self) -> Result<crate::watch::InboxWatcher> {
        let home = self.home();
        let path = events_path(home, self.name());
        match home.pg() {
            Some(pg) => {
                let key = home.key(&path)?;
                crate::watch::InboxWatcher::for_pg(path, pg.clone(), key)
            }
            None => crate::watch::InboxWatcher::new(path),
        }
    }
}
