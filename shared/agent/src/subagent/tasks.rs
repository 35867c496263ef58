//! The session's sub-agents as tasks: every child gets an entry (id, name, type,
//! status, usage, result) that `/tasks` lists until the session ends. A child that
//! runs in the background — asked for, by its definition, or moved there after
//! `auto_background_secs` — reports its end with a `<task-notification>` delivered at
//! the top of its parent's next turn ([`TaskNotifications`], a turn hook), and with an
//! [`AgentEvent::TaskEnded`] to the session's listener (the REPL prints one line).
//!
//! Ids are `a1`, `a2`, … in start order: unique per session, never random (random
//! ids can collide, and a collision would let one task overwrite another's entry),
//! and never a teammate's name (the spawner refuses names of that form).
//! The table holds at most `max_per_session` entries (every start counts), so it is
//! bounded without dropping any result; notifications wait in a list until a turn
//! takes them, and none is dropped.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use roo_llm::Usage;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use crate::event::{AgentEvent, EventSink};
use crate::hooks::{AgentHook, TurnAction};

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// The child is running.
    Running,
    /// The child finished its task.
    Completed,
    /// The child failed.
    Failed,
    /// The child was stopped before it finished.
    Killed,
}

impl TaskStatus {
    /// The status as a word (`running`).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Killed => "killed",
        }
    }
}

/// What `/tasks` shows of one task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskInfo {
    /// `a1`, `a2`, …
    pub id: String,
    /// The name the call gave it, if any.
    pub name: Option<String>,
    /// The definition's name, or `fork`.
    pub agent_type: String,
    /// The call's short description.
    pub description: String,
    /// Where the task is.
    pub status: TaskStatus,
    /// Runs (or ran, or moved) in the background.
    pub background: bool,
    /// How long it ran (so far).
    pub duration: Duration,
    /// Its model usage.
    pub usage: Usage,
    /// Its turns.
    pub turns: u32,
    /// Tool calls it made.
    pub tool_count: u32,
    /// The newest tool call, as one line.
    pub last_tool: Option<String>,
    /// The result as returned to the parent (capped, with its footer); empty while
    /// running.
    pub result: String,
}

/// What [`BackgroundTasks::stop`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// Cancelled the task with this id.
    Stopped(String),
    /// No running task has that id or name.
    NotRunning,
    /// Several running tasks have that name: these ids.
    Ambiguous(Vec<String>),
}

/// How a child ended, from its runner.
#[derive(Debug, Clone)]
pub struct TaskEnd {
    /// How it ended.
    pub status: TaskStatus,
    /// Result text for the parent (already capped, with its footer).
    pub result: String,
    /// Turns it took.
    pub turns: u32,
}

struct Entry {
    number: u64,
    /// The runtime (agent) that started it: its notifications go to that agent.
    owner: u64,
    info: TaskInfo,
    started: Instant,
    cancel: CancellationToken,
    background: Arc<AtomicBool>,
    /// The parent's run events while a foreground call waits for it (progress).
    progress: Option<EventSink>,
    /// The waiting foreground call, if any.
    waiter: Option<oneshot::Sender<TaskEnd>>,
}

#[derive(Default)]
struct Table {
    next: u64,
    entries: BTreeMap<u64, Entry>,
    /// Notifications not yet delivered, with their owner.
    pending: Vec<(u64, String)>,
    listener: Option<EventSink>,
}

/// The task table of one session, shared by every runtime (all depths).
#[derive(Clone, Default)]
pub struct BackgroundTasks {
    table: Arc<Mutex<Table>>,
    /// Woken whenever a task ends (headless runs wait on it).
    ended: Arc<Notify>,
    /// Woken when the user moves the foreground children to the background.
    detach: Arc<Notify>,
}

/// A started task, for its runner and the waiting call.
pub struct Started {
    /// The task id (`a1`).
    pub id: String,
    /// The task's number in the session.
    pub number: u64,
    /// Cancels the child.
    pub cancel: CancellationToken,
    /// Set when the task moves to the background.
    pub background: Arc<AtomicBool>,
    /// Fires when the task ends, unless it moved to the background first.
    pub done: oneshot::Receiver<TaskEnd>,
    /// The parent's run events, while the call waits (progress, "waits for a slot").
    pub progress: EventSink,
}

impl BackgroundTasks {
    /// An empty task table.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends [`AgentEvent::TaskEnded`] for every background task that ends to `sink`
    /// (`None`: to nobody; a headless run clears it before it closes its events).
    pub fn set_listener(&self, sink: Option<EventSink>) {
        self.lock().listener = sink;
    }

    /// Registers a new running task of `owner`; `cancel` is its own token.
    #[expect(clippy::too_many_arguments, reason = "one record's fields")]
    pub fn start(
        &self,
        owner: u64,
        name: Option<String>,
        agent_type: String,
        description: String,
        background: bool,
        cancel: CancellationToken,
        progress: Option<EventSink>,
    ) -> Started {
        let mut table = self.lock();
        table.next += 1;
        let number = table.next;
        let id = format!("a{number}");
        let (tx, rx) = oneshot::channel();
        let flag = Arc::new(AtomicBool::new(background));
        let progress_sink = progress.clone().unwrap_or_else(EventSink::discard);
        table.entries.insert(
            number,
            Entry {
                number,
                owner,
                info: TaskInfo {
                    id: id.clone(),
                    name,
                    agent_type,
                    description,
                    status: TaskStatus::Running,
                    background,
                    duration: Duration::ZERO,
                    usage: Usage::default(),
                    turns: 0,
                    tool_count: 0,
                    last_tool: None,
                    result: String::new(),
                },
                started: Instant::now(),
                cancel: cancel.clone(),
                background: flag.clone(),
                progress: if background { None } else { progress },
                waiter: Some(tx),
            },
        );
        Started {
            id,
            number,
            cancel,
            background: flag,
            done: rx,
            progress: progress_sink,
        }
    }

    /// Records a tool call of task `number`; returns the event for the parent's
    /// run while a foreground call waits for it.
    pub fn tool_started(&self, number: u64, summary: String) {
        let mut table = self.lock();
        let Some(entry) = table.entries.get_mut(&number) else {
            return;
        };
        entry.info.tool_count += 1;
        entry.info.last_tool = Some(summary.clone());
        if let Some(sink) = &entry.progress {
            sink.emit(AgentEvent::SubagentProgress {
                id: entry.info.id.clone(),
                tool_count: entry.info.tool_count,
                last_tool: summary,
            });
        }
    }

    /// Adds a model response's usage to task `number`.
    pub fn add_usage(&self, number: u64, usage: &Usage) {
        if let Some(entry) = self.lock().entries.get_mut(&number) {
            entry.info.usage.add(usage);
        }
    }

    /// Asks every foreground call waiting for a child to stop waiting: the children
    /// go on in the background (what the user's key for it does). Returns how many
    /// were running in the foreground.
    pub fn detach_foreground(&self) -> usize {
        let count = self
            .lock()
            .entries
            .values()
            .filter(|e| e.info.status == TaskStatus::Running && e.waiter.is_some())
            .count();
        self.detach.notify_waiters();
        count
    }

    /// Completes when [`BackgroundTasks::detach_foreground`] is called after this
    /// call (the future listens from the moment it is created).
    pub fn detach_requested(&self) -> tokio::sync::futures::Notified<'_> {
        self.detach.notified()
    }

    /// Moves a running task to the background: its end becomes a notification.
    /// `false` if it already ended (its result is then in the `done` receiver).
    pub fn move_to_background(&self, number: u64) -> bool {
        let mut table = self.lock();
        let Some(entry) = table.entries.get_mut(&number) else {
            return false;
        };
        if entry.info.status != TaskStatus::Running {
            return false;
        }
        entry.info.background = true;
        entry.background.store(true, Ordering::SeqCst);
        entry.progress = None;
        entry.waiter = None;
        true
    }

    /// Records the end of task `number`: a foreground waiter gets it; a background
    /// task's end becomes a notification for its owner's next turn.
    pub fn finish(&self, number: u64, end: TaskEnd) {
        let mut table = self.lock();
        let Some(entry) = table.entries.get_mut(&number) else {
            return;
        };
        entry.info.status = end.status;
        entry.info.turns = end.turns;
        entry.info.duration = entry.started.elapsed();
        entry.info.result = end.result.clone();
        entry.progress = None;
        let waiter = entry.waiter.take();
        let background = entry.info.background;
        let (owner, info) = (entry.owner, entry.info.clone());
        if background {
            table.pending.push((owner, notification(&info)));
            if let Some(listener) = &table.listener {
                listener.emit(AgentEvent::TaskEnded {
                    id: info.id.clone(),
                    name: info.name.clone(),
                    status: info.status.as_str().to_string(),
                    summary: first_line(&info.result),
                });
            }
        }
        drop(table);
        if let Some(waiter) = waiter {
            // A waiter gone (its call was dropped) just misses it; the table has it.
            let _ = waiter.send(end);
        }
        self.ended.notify_waiters();
    }

    /// Cancels a running task by id (`a3`) or name. A name shared by several running
    /// tasks is ambiguous (a later task must not silently take an earlier one's name
    /// and leave it reachable only by id): nothing is stopped and the ids are returned
    /// to choose from.
    /// `owner`: only tasks that agent started (a sub-agent stops its own children,
    /// never its siblings'); `None`: any task of the session (the top-level agent).
    pub fn stop(&self, id_or_name: &str, owner: Option<u64>) -> Stop {
        let table = self.lock();
        let running =
            |e: &&Entry| e.info.status == TaskStatus::Running && owner.is_none_or(|o| o == e.owner);
        if let Some(entry) = table
            .entries
            .values()
            .filter(running)
            .find(|e| e.info.id.eq_ignore_ascii_case(id_or_name))
        {
            entry.cancel.cancel();
            return Stop::Stopped(entry.info.id.clone());
        }
        let named: Vec<&Entry> = table
            .entries
            .values()
            .filter(running)
            .filter(|e| e.info.name.as_deref() == Some(id_or_name))
            .collect();
        match named.as_slice() {
            [] => Stop::NotRunning,
            [one] => {
                one.cancel.cancel();
                Stop::Stopped(one.info.id.clone())
            }
            many => Stop::Ambiguous(many.iter().map(|e| e.info.id.clone()).collect()),
        }
    }

    /// Every task, oldest first.
    pub fn list(&self) -> Vec<TaskInfo> {
        let table = self.lock();
        table
            .entries
            .values()
            .map(|e| {
                let mut info = e.info.clone();
                if info.status == TaskStatus::Running {
                    info.duration = e.started.elapsed();
                }
                info
            })
            .collect()
    }

    /// One task by id.
    pub fn get(&self, id: &str) -> Option<TaskInfo> {
        self.list()
            .into_iter()
            .find(|t| t.id.eq_ignore_ascii_case(id))
    }

    /// Whether a task of that id or name exists (running or not).
    pub fn knows(&self, id_or_name: &str) -> bool {
        self.lock().entries.values().any(|e| {
            e.info.id.eq_ignore_ascii_case(id_or_name) || e.info.name.as_deref() == Some(id_or_name)
        })
    }

    /// How many tasks run in the background now.
    pub fn background_running(&self) -> usize {
        self.lock()
            .entries
            .values()
            .filter(|e| e.info.background && e.info.status == TaskStatus::Running)
            .count()
    }

    /// Whether notifications wait for `owner`'s next turn.
    pub fn has_pending(&self, owner: u64) -> bool {
        self.lock().pending.iter().any(|(o, _)| *o == owner)
    }

    /// Waits until no background task runs (or `cancel` fires).
    pub async fn wait_background(&self, cancel: &CancellationToken) {
        loop {
            let ended = self.ended.notified();
            if self.background_running() == 0 {
                return;
            }
            tokio::select! {
                () = ended => {}
                () = cancel.cancelled() => return,
            }
        }
    }

    /// Cancels every running task (the session ends).
    pub fn cancel_all(&self) {
        for entry in self.lock().entries.values() {
            if entry.info.status == TaskStatus::Running {
                entry.cancel.cancel();
            }
        }
    }

    /// Waits until no task runs at all (after [`BackgroundTasks::cancel_all`]).
    pub async fn wait_all(&self) {
        loop {
            let ended = self.ended.notified();
            let running = self
                .lock()
                .entries
                .values()
                .any(|e| e.info.status == TaskStatus::Running);
            if !running {
                return;
            }
            ended.await;
        }
    }

    fn take_pending(&self, owner: u64) -> Vec<String> {
        let mut table = self.lock();
        let (mine, rest) = std::mem::take(&mut table.pending)
            .into_iter()
            .partition(|(o, _)| *o == owner);
        table.pending = rest;
        mine.into_iter().map(|(_, text)| text).collect()
    }

    /// Number of the entry, for tests of ordering.
    pub fn numbers(&self) -> Vec<u64> {
        self.lock().entries.values().map(|e| e.number).collect()
    }
}

/// The `<task-notification>` of an ended background task.
pub fn notification(info: &TaskInfo) -> String {
    let name = info
        .name
        .as_deref()
        .map(|n| format!("\nname: {n}"))
        .unwrap_or_default();
    format!(
        "<task-notification>\nid: {id}{name}\ntype: {kind}\nstatus: {status}\nsummary: {summary}\n\
         usage: {input} input tokens, {output} output tokens, {turns} turns, {tools} tool calls\n\
         duration: {secs:.1} s\nresult:\n{result}\n</task-notification>",
        id = info.id,
        kind = info.agent_type,
        status = info.status.as_str(),
        summary = info.description,
        input =
            info.usage.input_tokens + info.usage.cache_read_tokens + info.usage.cache_write_tokens,
        output = info.usage.output_tokens,
        turns = info.turns,
        tools = info.tool_count,
        secs = info.duration.as_secs_f64(),
        result = info.result,
    )
}

/// At most `max` characters of `text` on one line.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    roo_term::clip(&line, max)
}

fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    clip(line, 120)
}

/// The turn hook that delivers `owner`'s notifications at the top of its next turn.
pub struct TaskNotifications {
    tasks: BackgroundTasks,
    owner: u64,
}

impl TaskNotifications {
    /// The hook delivering `owner`'s notifications from `tasks`.
    pub fn new(tasks: BackgroundTasks, owner: u64) -> Self {
        Self { tasks, owner }
    }
}

impl AgentHook for TaskNotifications {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async move {
            let texts = self.tasks.take_pending(self.owner);
            if texts.is_empty() {
                TurnAction::Continue
            } else {
                TurnAction::Inject(texts)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(tasks: &BackgroundTasks, name: Option<&str>, background: bool) -> Started {
        tasks.start(
            0,
            name.map(str::to_string),
            "Explore".into(),
            "look".into(),
            background,
            CancellationToken::new(),
            None,
        )
    }

    fn end(status: TaskStatus) -> TaskEnd {
        TaskEnd {
            status,
            result: "the result\nmore".into(),
            turns: 2,
        }
    }

    #[test]
    fn ids_are_monotonic_and_a_shared_name_is_ambiguous() {
        let tasks = BackgroundTasks::new();
        let a = start(&tasks, Some("scout"), true);
        let b = start(&tasks, Some("scout"), true);
        assert_eq!((a.id.as_str(), b.id.as_str()), ("a1", "a2"));
        assert_eq!(
            tasks.stop("scout", None),
            Stop::Ambiguous(vec!["a1".into(), "a2".into()])
        );
        assert!(!a.cancel.is_cancelled() && !b.cancel.is_cancelled());
        assert_eq!(tasks.stop("A2", None), Stop::Stopped("a2".into()));
        assert!(b.cancel.is_cancelled());
        tasks.finish(b.number, end(TaskStatus::Killed));
        // One running task left with the name: the name now names it.
        assert_eq!(tasks.stop("scout", None), Stop::Stopped("a1".into()));
        assert_eq!(tasks.stop("nobody", None), Stop::NotRunning);
        // Another agent's task is not this one's to stop.
        assert_eq!(tasks.stop("a1", Some(7)), Stop::NotRunning);
    }

    #[test]
    fn only_background_ends_become_notifications_and_none_is_dropped() {
        let tasks = BackgroundTasks::new();
        let mut fg = start(&tasks, None, false);
        tasks.finish(fg.number, end(TaskStatus::Completed));
        assert_eq!(fg.done.try_recv().unwrap().status, TaskStatus::Completed);
        assert!(!tasks.has_pending(0));
        // A moved task: the waiter no longer gets it, the owner's next turn does.
        let moved = start(&tasks, None, false);
        assert!(tasks.move_to_background(moved.number));
        for _ in 0..100 {
            let bg = start(&tasks, None, true);
            tasks.finish(bg.number, end(TaskStatus::Failed));
        }
        tasks.finish(moved.number, end(TaskStatus::Completed));
        let texts = tasks.take_pending(0);
        assert_eq!(texts.len(), 101);
        assert!(texts[100].contains("id: a2") && texts[100].contains("status: completed"));
        assert!(!tasks.has_pending(0));
        // A finished task cannot move any more.
        assert!(!tasks.move_to_background(fg.number));
    }
}
