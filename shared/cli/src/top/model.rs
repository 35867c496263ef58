//! The team view's model: what `team top` shows, built from one read of the store
//! ([`Snapshot::load`]: the roster with each member's observed state, the task list and
//! the newest events, the messages among them) by a pure function ([`TeamView::build`]),
//! so the frame renderer and the tests never touch the store.
//!
//! A member's spend is the usage recorded on tasks (PROTOCOL.md: each model request's
//! tokens and cost are added to the task its teammate owns), summed per member over all
//! tasks; what a member spent outside any task is not in the store, so not here.

use std::collections::HashMap;

use roo_store::{
    BackendType, Event, EventKind, Name, Task, TaskId, TaskStatus, TaskUsage, Team, TeamConfig,
    Timestamp,
};

use crate::exit::CliResult;

/// One event of the team's log, as the view shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct EventLine {
    /// When it happened (the store's time).
    pub time: Timestamp,
    /// Who did it (a member name), if anyone.
    pub actor: Option<String>,
    /// What kind of change (`task_claimed`, `message_sent`, …).
    pub kind: String,
    /// A one-line description (untrusted: escaped when shown).
    pub text: String,
}

/// One message as the view shows it: what the event log recorded when it was sent (ids
/// and summaries, never bodies), so a frame reads no inbox.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageLine {
    /// Sender (untrusted as recorded).
    pub from: String,
    /// Its recipient as addressed (`*` for a broadcast).
    pub to: String,
    /// When it was sent (the store's time).
    pub time: Timestamp,
    /// Its wire type (`text`, `task_assignment`, …).
    pub kind: String,
    /// Its summary, if it had one.
    pub summary: String,
}

impl MessageLine {
    /// The message a `message_sent` event records, if `e` is one.
    pub fn of(e: &Event) -> Option<MessageLine> {
        let EventKind::MessageSent {
            from,
            to,
            message_type,
            summary,
            ..
        } = &e.kind
        else {
            return None;
        };
        Some(MessageLine {
            from: from.clone(),
            to: to.clone(),
            time: e.time,
            kind: message_type.clone(),
            summary: summary.clone().unwrap_or_default(),
        })
    }
}

/// Everything the view reads from the store at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The team config (roster).
    pub config: TeamConfig,
    /// Each roster member's observed state (`busy`, `idle`, `dead`, …), in roster order.
    pub states: Vec<&'static str>,
    /// The task list.
    pub tasks: Vec<Task>,
    /// The messages the newest [`LOG_READ`] events record, oldest first.
    pub messages: Vec<MessageLine>,
    /// The newest events, oldest first.
    pub events: Vec<EventLine>,
    /// When it was read.
    pub now: Timestamp,
}

/// How many of the newest events a snapshot keeps for the EVENTS section.
pub const EVENTS_READ: usize = 200;
/// How many of the newest events a snapshot looks through for messages (each member's
/// last message, a followed member's messages). The files store parses its current log
/// file (at most `EVENT_LOG_ROTATE_BYTES`) whatever the count; PostgreSQL reads this many rows.
pub const LOG_READ: usize = 2000;

impl Snapshot {
    /// Reads the team: config and liveness, tasks, and the newest events (messages
    /// included: no inbox is read, so a frame costs the same however much the members
    /// wrote).
    pub fn load(team: &Team) -> CliResult<Snapshot> {
        Self::load_kept(team, &mut TaskCache::default())
    }

    /// [`Self::load`] for a view that redraws: the task list in `cache` is used again
    /// while the event log records no task change since it was read ([`TaskCache`]).
    pub fn load_kept(team: &Team, cache: &mut TaskCache) -> CliResult<Snapshot> {
        let config = team.config()?;
        let liveness = team.liveness(&config)?;
        let states = config
            .members
            .iter()
            .map(|m| liveness.observed_state(m).as_str())
            .collect();
        // The log first: a task change made after it was read has a newer event, so
        // the next load reads the list again.
        let log = team.events(None, LOG_READ)?.events;
        let tasks = cache.tasks(team, &log)?;
        let messages = log.iter().filter_map(MessageLine::of).collect();
        let shown = log.len().saturating_sub(EVENTS_READ);
        let events = log[shown..].iter().map(super::events::line).collect();
        Ok(Snapshot {
            config,
            states,
            tasks,
            messages,
            events,
            now: Timestamp::now(),
        })
    }
}

/// How long a task list read once may serve at most: the spend recorded on tasks and a
/// deleted task are not in the event log, so they show within this time.
pub const TASKS_KEPT: std::time::Duration = std::time::Duration::from_secs(5);

/// The task list a live view read last, and the newest event seq then. A team of
/// 10,000 tasks costs a parse of the whole list; the view reads it again only when an
/// event newer than that seq records a task change (created, claimed, assigned,
/// released, completed, a status; a death or removal, which release tasks; a kind
/// from a newer version), when the log's window does not reach back to it, or after
/// [`TASKS_KEPT`].
#[derive(Debug, Default)]
pub struct TaskCache {
    kept: Option<(Vec<Task>, std::time::Instant, u64)>,
}

impl TaskCache {
    fn tasks(&mut self, team: &Team, log: &[Event]) -> CliResult<Vec<Task>> {
        let newest = log.last().map_or(0, |e| e.seq);
        if let Some((tasks, read, seq)) = &self.kept
            && read.elapsed() < TASKS_KEPT
            && !tasks_changed(log, *seq)
        {
            let tasks = tasks.clone();
            if let Some(kept) = &mut self.kept {
                kept.2 = newest.max(kept.2);
            }
            return Ok(tasks);
        }
        let tasks = team.tasks().list(&roo_store::TaskFilter::default())?;
        self.kept = Some((tasks.clone(), std::time::Instant::now(), newest));
        Ok(tasks)
    }
}

/// Whether the events of `log` after seq `since` may have changed the task list.
fn tasks_changed(log: &[Event], since: u64) -> bool {
    let Some(newest) = log.last() else {
        return false;
    };
    if newest.seq <= since {
        return false;
    }
    // Newer events the window does not hold: nothing says what they were.
    if log.first().is_some_and(|e| e.seq > since + 1) {
        return true;
    }
    log.iter().filter(|e| e.seq > since).any(|e| {
        matches!(
            e.kind,
            EventKind::TaskCreated { .. }
                | EventKind::TaskClaimed { .. }
                | EventKind::TaskAssigned { .. }
                | EventKind::TaskReleased { .. }
                | EventKind::TaskCompleted { .. }
                | EventKind::TaskStatus { .. }
                | EventKind::Death { .. }
                | EventKind::MemberRemoved { .. }
                | EventKind::Newer { .. }
        )
    })
}

/// Where a task stands on the board.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Column {
    /// Claimed and being worked on.
    InProgress,
    /// Pending, every dependency done: it can be claimed.
    Pending,
    /// Pending while a task it waits on is unfinished.
    Blocked,
    /// Completed.
    Done,
}

impl Column {
    /// The word the board shows.
    pub fn label(self) -> &'static str {
        match self {
            Column::InProgress => "in progress",
            Column::Pending => "pending",
            Column::Blocked => "blocked",
            Column::Done => "done",
        }
    }
}

/// One task on the board.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    /// Its id.
    pub id: TaskId,
    /// Its subject (untrusted).
    pub subject: String,
    /// Where it stands.
    pub column: Column,
    /// Who owns it.
    pub owner: Option<Name>,
    /// The tasks it waits on that are not done yet.
    pub waits_on: Vec<TaskId>,
    /// Every task it depends on.
    pub blocked_by: Vec<TaskId>,
    /// Spend recorded on it, all members together.
    pub usage: TaskUsage,
    /// Its first description line (untrusted).
    pub description: String,
}

/// One member's row.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberRow {
    /// Its name.
    pub name: Name,
    /// Whether it is the lead.
    pub lead: bool,
    /// Its observed state (`busy`, `idle`, `dead`, or a state a newer store names).
    pub state: &'static str,
    /// The task it works on (the lowest-numbered in progress one it owns).
    pub task: Option<(TaskId, String)>,
    /// Since when: it claimed that task, or (without one) it joined.
    pub since: Timestamp,
    /// Its spend recorded on tasks.
    pub usage: TaskUsage,
    /// When it last sent a message (by the event log, or the inboxes).
    pub last_message: Option<Timestamp>,
    /// `tmux`, `iterm2`, `in-process`, or none recorded.
    pub backend: Option<BackendType>,
    /// The host it runs on, when not the lead's.
    pub host: Option<String>,
    /// Its pane id, when it runs in one.
    pub pane: Option<String>,
    /// Its process id.
    pub pid: Option<u32>,
    /// Why it is dead, if it is.
    pub dead_reason: Option<String>,
    /// Its agent type and model, when recorded.
    pub agent_type: Option<String>,
    /// Model override.
    pub model: Option<String>,
    /// The git worktree (or clone) it works in.
    pub worktree: Option<std::path::PathBuf>,
    /// Display colour.
    pub color: Option<String>,
}

/// How many tasks stand in each column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// In progress.
    pub in_progress: usize,
    /// Pending and claimable.
    pub pending: usize,
    /// Pending, waiting on unfinished tasks.
    pub blocked: usize,
    /// Done.
    pub done: usize,
}

/// The whole view at one moment.
#[derive(Clone, Debug)]
pub struct TeamView {
    /// The team's name.
    pub team: Name,
    /// What it is for (untrusted).
    pub description: String,
    /// When the snapshot was read.
    pub now: Timestamp,
    /// The roster, lead first.
    pub members: Vec<MemberRow>,
    /// The board: in progress, pending, blocked, then done (newest first).
    pub tasks: Vec<TaskRow>,
    /// Tasks per column.
    pub counts: Counts,
    /// Every member's spend together.
    pub total: TaskUsage,
    /// Messages, oldest first.
    pub messages: Vec<MessageLine>,
    /// The newest events, oldest first.
    pub events: Vec<EventLine>,
}

fn column(task: &Task, status: &HashMap<&str, TaskStatus>) -> (Column, Vec<TaskId>) {
    match task.status {
        TaskStatus::InProgress => (Column::InProgress, Vec::new()),
        TaskStatus::Completed => (Column::Done, Vec::new()),
        TaskStatus::Pending => {
            // A dependency that no longer exists (deleted) waits on nothing.
            let waits_on: Vec<TaskId> = task
                .blocked_by
                .iter()
                .filter(|id| {
                    status
                        .get(id.as_str())
                        .is_some_and(|s| *s != TaskStatus::Completed)
                })
                .cloned()
                .collect();
            if waits_on.is_empty() {
                (Column::Pending, waits_on)
            } else {
                (Column::Blocked, waits_on)
            }
        }
    }
}

/// Adds `u` to `total` (the store's own sum; a total past its bounds, which no real
/// team reaches, stays where it was).
fn add(total: &mut TaskUsage, u: &TaskUsage) {
    if let Ok(sum) = total.checked_add(u) {
        *total = sum;
    }
}

impl TeamView {
    /// The view of `snapshot`: pure, so it can be tested and timed without a store.
    pub fn build(snapshot: Snapshot) -> TeamView {
        let Snapshot {
            config,
            states,
            tasks,
            messages,
            events,
            now,
        } = snapshot;
        let status: HashMap<&str, TaskStatus> =
            tasks.iter().map(|t| (t.id.as_str(), t.status)).collect();
        let mut spend: HashMap<&str, TaskUsage> = HashMap::new();
        let mut total = TaskUsage::default();
        for task in &tasks {
            for (who, u) in &task.usage {
                add(spend.entry(who.as_str()).or_default(), u);
                add(&mut total, u);
            }
        }
        // The log records every message sent, also those read and archived since.
        let mut last_message: HashMap<&str, Timestamp> = HashMap::new();
        for m in &messages {
            let at = last_message.entry(m.from.as_str()).or_insert(m.time);
            *at = (*at).max(m.time);
        }
        let mut working: HashMap<&str, &Task> = HashMap::new();
        for task in tasks.iter().filter(|t| t.status == TaskStatus::InProgress) {
            if let Some(owner) = &task.owner {
                let slot = working.entry(owner.as_str()).or_insert(task);
                if task.id.number() < slot.id.number() {
                    *slot = task;
                }
            }
        }
        let mut members: Vec<MemberRow> = config
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let task = working.get(m.name.as_str());
                MemberRow {
                    name: m.name.clone(),
                    lead: m.agent_id == config.lead_agent_id,
                    state: states.get(i).copied().unwrap_or("unknown"),
                    task: task.map(|t| (t.id.clone(), t.subject.clone())),
                    since: task
                        .map(|t| t.lease.as_ref().map_or(t.updated_at, |l| l.acquired_at))
                        .unwrap_or(m.joined_at),
                    usage: spend.get(m.name.as_str()).copied().unwrap_or_default(),
                    last_message: last_message.get(m.name.as_str()).copied(),
                    backend: m.backend_type,
                    host: m.host.clone(),
                    pane: m.pane_id.clone(),
                    pid: m.pid,
                    dead_reason: m.dead_reason.clone(),
                    agent_type: m.agent_type.clone(),
                    model: m.model.clone(),
                    worktree: m.worktree_path.clone(),
                    color: m.color.clone(),
                }
            })
            .collect();
        // The lead first, then the roster's order.
        members.sort_by_key(|m| !m.lead);
        let mut counts = Counts::default();
        let mut rows: Vec<(TaskRow, Option<Timestamp>)> = tasks
            .iter()
            .map(|t| {
                let (column, waits_on) = column(t, &status);
                match column {
                    Column::InProgress => counts.in_progress += 1,
                    Column::Pending => counts.pending += 1,
                    Column::Blocked => counts.blocked += 1,
                    Column::Done => counts.done += 1,
                }
                let row = TaskRow {
                    id: t.id.clone(),
                    subject: t.subject.clone(),
                    column,
                    owner: t.owner.clone(),
                    waits_on,
                    blocked_by: t.blocked_by.clone(),
                    usage: t.usage_total(),
                    description: t.description.lines().next().unwrap_or_default().to_owned(),
                };
                (row, t.completed_at)
            })
            .collect();
        // In progress, pending, blocked by id; done newest first.
        rows.sort_by(|(a, a_done), (b, b_done)| {
            a.column.cmp(&b.column).then_with(|| {
                if a.column == Column::Done {
                    b_done.cmp(a_done).then(b.id.number().cmp(&a.id.number()))
                } else {
                    a.id.number().cmp(&b.id.number())
                }
            })
        });
        TeamView {
            team: config.name.clone(),
            description: config.description.clone(),
            now,
            members,
            tasks: rows.into_iter().map(|(r, _)| r).collect(),
            counts,
            total,
            messages,
            events,
        }
    }

    /// The tasks `name` owns, any status, board order.
    pub fn tasks_of<'a>(&'a self, name: &'a Name) -> impl Iterator<Item = &'a TaskRow> + 'a {
        self.tasks
            .iter()
            .filter(move |t| t.owner.as_ref() == Some(name))
    }
}
