//! Checkpoints: what the files an agent changes held before it changed them, recorded in
//! a shadow store under `ROO_HOME`, so a person can rewind the code (and the
//! conversation) to before any prompt of the session.
//!
//! Each submitted prompt opens a checkpoint ([`Checkpoints::begin_prompt`]). Before every
//! file-changing tool call the loop asks for a [`CallScope`]: a file tool's target path, or,
//! for a command in a git project, the whole tree (the `.gitignore`d directories left out,
//! bounded in files, bytes and time); after the call, what changed is compared with what was
//! recorded, and each path the call changed keeps the state it had before the prompt's
//! first change. A file tool's path is compared at once; a command's tree is compared by the
//! next walk ([`Checkpoints::settle`]: the walk before the agent's next file-changing call,
//! the end of its run, a listing or a rewind), so a command costs one walk, not two; the
//! files' change and birth times tell what changed before the command returned. A rewind
//! puts back only those paths: a file the agent neither created nor changed is never
//! touched, whatever else changed since.
//!
//! The store is no git repository: contents are kept by their SHA-256 in an object
//! directory of RooCode's own and read back and written without git, so nothing of the
//! project (`.gitattributes` filters, hooks, a planted `.git`, config) can run, and the
//! user's repository (refs, stash, index, config, objects) is never read or written. The
//! loop calls it for the lead, teammates and sub-agents alike; tools know nothing of it.

mod objects;
mod prune;
mod record;
mod restore;
mod scan;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use objects::Objects;
pub use record::ConversationMark;
use record::{Entry, PromptRecord, SessionLog};
pub use restore::RestoreReport;
use scan::{Found, Known, Stamp, WalkStop};

use crate::config::CheckpointsSection;
use crate::tool::{PermissionTarget, Tool, ToolKind};

/// Errors of checkpoints.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file of the store could not be read or written.
    #[error("failed to {action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
    /// A session's checkpoint file is not one.
    #[error("checkpoint file {path} is corrupt: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// No prompt has that number.
    #[error(
        "no checkpoint {number}: this session has {count} (numbered from 1, oldest first; /rewind lists them)"
    )]
    NoSuchCheckpoint {
        /// The number asked for.
        number: usize,
        /// How many there are.
        count: usize,
    },
    /// The conversation before that prompt was replaced (compaction, `/clear`, rewind).
    #[error(
        "rewind the conversation to before checkpoint {number}: the conversation was compacted, cleared or rewound since; rewind the code only (`code`)"
    )]
    ConversationGone {
        /// The number asked for.
        number: usize,
    },
    /// Checkpoints are off (`checkpoints: {enabled: false}`) for this agent.
    #[error("rewind: checkpoints are off for this session (checkpoints.enabled in the config)")]
    Disabled,
    /// No session of that project has checkpoints.
    #[error("find checkpoints in {dir}: none were recorded for this project")]
    NoCheckpoints {
        /// Where they were looked for.
        dir: PathBuf,
    },
}

/// The limits of checkpoints, from the `checkpoints:` config section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointLimits {
    /// Whether checkpoints are recorded at all.
    pub enabled: bool,
    /// Session files older than this are pruned.
    pub max_age: Duration,
    /// All stores together are pruned to this many bytes (oldest sessions first).
    pub max_total_bytes: u64,
    /// A file larger than this is not kept (a rewind leaves it and says so).
    pub max_file_bytes: u64,
    /// A tree with more files than this is not checkpointed before commands.
    pub max_files: usize,
    /// A tree walk (before a command, or one that finds what commands changed) or the
    /// keeping of what it found that
    /// takes longer than this is cut short: the walk's checkpoint is skipped (and
    /// commands are not checkpointed for the rest of the session), what was not kept in
    /// time is kept on the next call.
    pub max_walk: Duration,
}

impl Default for CheckpointLimits {
    fn default() -> Self {
        Self {
            enabled: true,
            max_age: Duration::from_secs(7 * 24 * 3600),
            max_total_bytes: 2 << 30,
            max_file_bytes: 8 << 20,
            max_files: 50_000,
            max_walk: Duration::from_secs(2),
        }
    }
}

impl CheckpointLimits {
    /// The limits a merged `checkpoints:` section sets (defaults for what it leaves out).
    pub fn from_section(section: &CheckpointsSection) -> Self {
        let d = Self::default();
        Self {
            enabled: section.enabled.unwrap_or(d.enabled),
            max_age: section.max_age_days.map_or(d.max_age, |days| {
                Duration::from_secs(days.saturating_mul(24 * 3600))
            }),
            max_total_bytes: section
                .max_total_mb
                .map_or(d.max_total_bytes, |mb| mb.saturating_mul(1 << 20)),
            max_file_bytes: section
                .max_file_kb
                .map_or(d.max_file_bytes, |kb| kb.saturating_mul(1 << 10)),
            max_files: section
                .max_files
                .map_or(d.max_files, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            max_walk: section
                .max_walk_ms
                .map_or(d.max_walk, Duration::from_millis),
        }
    }
}

/// What a file-changing call may change, as the loop sees it before running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallScope {
    /// One path (a file tool's target), absolute.
    Path(PathBuf),
    /// Anything under the working directory (a command).
    Tree,
}

impl CallScope {
    /// The scope of calling `tool` with `input` in `cwd`: `None` for a call that changes
    /// no file (reads, team and task tools).
    pub fn of(tool: &dyn Tool, input: &serde_json::Value, cwd: &Path) -> Option<Self> {
        match tool.kind() {
            // A write judged as a write of a directory (a merge into the project) may
            // change anything under it.
            ToolKind::Write => match tool.permission_target(input) {
                PermissionTarget::Path(path) if !cwd.join(&path).is_dir() => {
                    Some(CallScope::Path(cwd.join(path)))
                }
                _ => Some(CallScope::Tree),
            },
            ToolKind::Execute => Some(CallScope::Tree),
            ToolKind::Read | ToolKind::Internal => None,
        }
    }
}

/// What was recorded before a call, compared after it.
#[derive(Debug)]
pub struct PendingCall {
    what: PendingWhat,
}

#[derive(Debug)]
enum PendingWhat {
    Path {
        rel: String,
        before: Entry,
        stamp: Option<Stamp>,
    },
    Tree(Ticket),
}

/// A running command's claim on its record: [`Checkpoints::after_call`] notes its return;
/// dropped without it (the call cancelled, its process killed), it counts as returned when
/// dropped, so a command that never returns does not own every later change.
#[derive(Debug)]
struct Ticket {
    id: u64,
    dropped: Arc<Mutex<Vec<(u64, SystemTime)>>>,
    returned: bool,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.returned {
            let mut dropped = self.dropped.lock().unwrap_or_else(|e| e.into_inner());
            dropped.push((self.id, SystemTime::now()));
        }
    }
}

/// One prompt of the session as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointSummary {
    /// Its number (1 = the session's oldest).
    pub number: usize,
    /// The prompt's first line, shortened.
    pub text: String,
    /// When it was submitted (ms since the epoch).
    pub at_ms: u64,
    /// The paths the agent changed answering it, each with `+` (created) or `~`.
    pub files: Vec<String>,
    /// Whether its conversation can still be rewound.
    pub conversation: bool,
}

/// An agent's checkpoints in one project: the session's file and the project's store.
#[derive(Debug)]
pub struct Checkpoints {
    root: PathBuf,
    store: PathBuf,
    log_path: PathBuf,
    objects: Objects,
    limits: CheckpointLimits,
    state: Mutex<State>,
    /// Commands whose call was dropped before it returned, with when.
    dropped: Arc<Mutex<Vec<(u64, SystemTime)>>>,
}

#[derive(Debug)]
struct State {
    log: SessionLog,
    /// The tree's files by stamp, and what each held when last read (`None`: not read
    /// since it changed).
    tree: HashMap<String, Known>,
    /// The walks made so far (the last one's number marks the files it found).
    generation: u64,
    /// Why commands are no longer checkpointed this session (a tree over a limit).
    tree_off: Option<String>,
    /// The commands whose changes the next walk finds ([`Checkpoints::settle`]): those
    /// still running and those returned since the last walk, oldest first.
    commands: Vec<Command>,
    /// The id the next command gets.
    next_command: u64,
    /// What the person and the agent are to be told, once ([`Checkpoints::take_notice`]).
    notice: Option<String>,
    /// Whether a checkpoint cut short in time was told already.
    partial_told: bool,
    /// Whether a failure was told already (once per session).
    warned: bool,
}

/// A command run since the known tree was walked, whose changes are not yet compared: the
/// next walk finds them and keeps them in its prompt. Each is tracked apart: sub-agents
/// share the checkpoints, and a background sub-agent's command may run beside the
/// parent's.
#[derive(Debug, Clone, Copy)]
struct Command {
    id: u64,
    /// The prompt it answered (an index into the log's prompts).
    prompt: usize,
    /// When it returned (`None` while it runs: every change a walk finds meanwhile may be
    /// its, and is kept as its, so no earlier state is lost).
    ended: Option<SystemTime>,
}

impl Checkpoints {
    /// The checkpoints of session `session_id` in the project at `root` (canonical),
    /// stored under `roo_home`; a resumed session's earlier checkpoints are read back.
    /// Prunes old stores first. Nothing is written before the first prompt.
    pub fn open(
        roo_home: &Path,
        root: &Path,
        session_id: &str,
        limits: CheckpointLimits,
    ) -> Result<Self, CheckpointError> {
        let base = roo_home.join("checkpoints");
        prune::prune(&base, &limits);
        let store = base.join(project_key(root));
        let log_path = store.join("sessions").join(format!("{session_id}.json"));
        let log = SessionLog::read(&log_path, root)?.unwrap_or_else(|| SessionLog::new(root));
        Ok(Self::with_log(root, store, log_path, log, limits))
    }

    /// The checkpoints session `session_id` recorded in the project at `root`, read back
    /// to be listed (nothing pruned).
    pub fn read(roo_home: &Path, root: &Path, session_id: &str) -> Result<Self, CheckpointError> {
        let store = roo_home.join("checkpoints").join(project_key(root));
        let sessions = store.join("sessions");
        let log_path = sessions.join(format!("{session_id}.json"));
        let Some(log) = SessionLog::read(&log_path, root)? else {
            return Err(CheckpointError::NoCheckpoints { dir: sessions });
        };
        let limits = CheckpointLimits::default();
        Ok(Self::with_log(root, store, log_path, log, limits))
    }

    /// The checkpoints of the most recent session in the project at `root` (a
    /// teammate's clone, rewound by its lead).
    pub fn open_latest(roo_home: &Path, root: &Path) -> Result<Self, CheckpointError> {
        let store = roo_home.join("checkpoints").join(project_key(root));
        let sessions = store.join("sessions");
        let latest = std::fs::read_dir(&sessions)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .max();
        let Some((_, log_path)) = latest else {
            return Err(CheckpointError::NoCheckpoints { dir: sessions });
        };
        let Some(log) = SessionLog::read(&log_path, root)? else {
            return Err(CheckpointError::NoCheckpoints { dir: sessions });
        };
        let limits = CheckpointLimits::default();
        Ok(Self::with_log(root, store, log_path, log, limits))
    }

    fn with_log(
        root: &Path,
        store: PathBuf,
        log_path: PathBuf,
        log: SessionLog,
        limits: CheckpointLimits,
    ) -> Self {
        Self {
            root: root.to_path_buf(),
            objects: Objects::new(store.join("objects")),
            store,
            log_path,
            limits,
            state: Mutex::new(State {
                log,
                tree: HashMap::new(),
                generation: 0,
                tree_off: None,
                commands: Vec::new(),
                next_command: 0,
                notice: None,
                partial_told: false,
                warned: false,
            }),
            dropped: Arc::default(),
        }
    }

    /// The project root the checkpoints cover.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether checkpoints are recorded.
    pub fn enabled(&self) -> bool {
        self.limits.enabled
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A prompt was submitted; `mark` is where the conversation stood before it.
    pub fn begin_prompt(&self, text: &str, mark: ConversationMark) -> Result<(), CheckpointError> {
        if !self.limits.enabled {
            return Ok(());
        }
        let mut state = self.state();
        // What the last run's commands changed belongs to its prompt, not this one (a
        // command still running, a background sub-agent's, keeps its own prompt).
        self.settle_locked(&mut state)?;
        // Another process may have rewound this session's files since (a lead rewinding
        // its stopped teammate's clone): its file is the truth, not what is in memory. A
        // damaged file is moved aside and said; what is in memory is written anew.
        let damaged = match SessionLog::read(&self.log_path, &self.root) {
            Ok(Some(log)) => {
                state.log = log;
                None
            }
            Ok(None) => None,
            Err(e) => Some(e),
        };
        state.log.prompts.push(PromptRecord {
            text: headline(text),
            at_ms: now_ms(),
            conversation: Some(mark),
            changes: Default::default(),
            rewind: false,
        });
        state.log.write(&self.log_path)?;
        damaged.map_or(Ok(()), Err)
    }

    /// The history was replaced (compaction, `/clear`): no earlier prompt's conversation
    /// can be cut back to any more.
    pub fn history_replaced(&self) {
        let mut state = self.state();
        for prompt in &mut state.log.prompts {
            prompt.conversation = None;
        }
        let _ = state.log.write(&self.log_path);
    }

    /// Records what `scope` may change before a call in `cwd` runs; `Ok(None)` when
    /// nothing needs recording (outside the project, a command outside a git project,
    /// before any prompt, or a tree over the file limit).
    pub fn before_call(
        &self,
        scope: &CallScope,
        cwd: &Path,
    ) -> Result<Option<PendingCall>, CheckpointError> {
        let mut state = self.state();
        if !self.limits.enabled || state.log.prompts.is_empty() {
            return Ok(None);
        }
        match scope {
            CallScope::Path(path) => {
                let Some(rel) = scan::relative(&self.root, &resolved(path)) else {
                    return Ok(None);
                };
                // What a command just changed is found first: it is the command's, and
                // the path's state before the command is what this prompt keeps.
                self.settle_locked(&mut state)?;
                let absolute = scan::absolute(&self.root, &rel);
                let stamp = scan::stamp_of(&absolute);
                let before = match state.tree.get(&rel) {
                    Some(Known {
                        stamp: known,
                        entry: Some(entry),
                        ..
                    }) if Some(*known) == stamp => entry.clone(),
                    _ => scan::capture(&absolute, &self.objects, self.limits.max_file_bytes)?,
                };
                Ok(Some(PendingCall {
                    what: PendingWhat::Path { rel, before, stamp },
                }))
            }
            CallScope::Tree => {
                // A command is checkpointed in a git project only (elsewhere the tree
                // may be a home directory); looked at each time, as a teammate's clone
                // is made after its agent.
                let git = self.root.join(".git").exists();
                if !git || !cwd.starts_with(&self.root) || state.tree_off.is_some() {
                    return Ok(None);
                }
                // One walk finds what the previous command changed and keeps what this
                // one may change.
                self.refresh_tree(&mut state)?;
                if state.tree_off.is_some() {
                    return Ok(None);
                }
                let prompt = state.log.prompts.len() - 1;
                let id = state.next_command;
                state.next_command += 1;
                state.commands.push(Command {
                    id,
                    prompt,
                    ended: None,
                });
                Ok(Some(PendingCall {
                    what: PendingWhat::Tree(Ticket {
                        id,
                        dropped: self.dropped.clone(),
                        returned: false,
                    }),
                }))
            }
        }
    }

    /// After a call: a file tool's path is compared with what
    /// [`before_call`](Self::before_call) recorded, and its earlier state kept in the
    /// prompt if it changed. A command's changes are found by the next walk
    /// ([`settle`](Self::settle)); here only the time it returned is noted.
    pub fn after_call(&self, pending: PendingCall) -> Result<(), CheckpointError> {
        let mut state = self.state();
        let (rel, before) = match pending.what {
            PendingWhat::Path { rel, before, stamp } => {
                let now = scan::stamp_of(&scan::absolute(&self.root, &rel));
                if now == stamp {
                    return Ok(());
                }
                state.tree.remove(&rel);
                (rel, before)
            }
            PendingWhat::Tree(mut ticket) => {
                ticket.returned = true;
                let ended = SystemTime::now();
                if let Some(command) = state.commands.iter_mut().find(|c| c.id == ticket.id) {
                    command.ended = Some(ended);
                }
                return Ok(());
            }
        };
        let Some(prompt) = state.log.prompts.last_mut() else {
            return Ok(());
        };
        prompt.changes.entry(rel).or_insert(before);
        state.log.write(&self.log_path)
    }

    /// Finds what the commands run since the last walk changed and keeps each changed
    /// path's earlier state in their prompt (one walk; nothing to do when no command ran
    /// since). The loop calls it when a run ends; a listing, a rewind, a new prompt and
    /// the next file-changing call do it first. A command still running (another agent's
    /// sharing these checkpoints) stays unsettled: what it changes is found by a later walk.
    pub fn settle(&self) -> Result<(), CheckpointError> {
        let mut state = self.state();
        self.settle_locked(&mut state)
    }

    fn settle_locked(&self, state: &mut State) -> Result<(), CheckpointError> {
        self.note_dropped(state);
        if state.commands.is_empty() {
            return Ok(());
        }
        match self.walk(state) {
            Ok(found) => self.attribute(state, found).map(|_| ()),
            Err(stop) => {
                self.tree_off(state, stop);
                Ok(())
            }
        }
    }

    /// Commands whose call was dropped before it returned count as returned then.
    fn note_dropped(&self, state: &mut State) {
        let dropped = std::mem::take(&mut *self.dropped.lock().unwrap_or_else(|e| e.into_inner()));
        for (id, at) in dropped {
            if let Some(command) = state.commands.iter_mut().find(|c| c.id == id) {
                command.ended.get_or_insert(at);
            }
        }
    }

    /// Brings the known tree up to the walk `found` made, and keeps, in the unsettled
    /// commands' prompt, the earlier state of each path they changed: a changed file whose
    /// change time is not after they returned, a file gone (a deletion leaves no time;
    /// putting it back destroys nothing), and a new file whose birth time (where kept) and
    /// change time are both by then (a file moved or linked in later is not theirs). A file created or changed only after they returned (a person's edit
    /// between calls) is not theirs. A file that changed is known by its new stamp, not
    /// read yet (it is read before the next command). Returns the keepable bytes found.
    fn attribute(&self, state: &mut State, found: Found) -> Result<u64, CheckpointError> {
        let Found {
            known,
            differ,
            found_known,
            keepable_bytes,
        } = found;
        state.tree = known;
        let generation = state.generation;
        self.note_dropped(state);
        let commands = std::mem::take(&mut state.commands);
        // Commands still running go on changing: they stay for the next walk, and what
        // changed meanwhile is kept as theirs (no earlier state is lost).
        state.commands = commands
            .iter()
            .filter(|c| c.ended.is_none())
            .copied()
            .collect();
        let running = state.commands.first().map(|c| c.prompt);
        // Whose a change made at `time` is: the oldest command that had not returned by
        // then, else one still running; a time unknown (a deletion) is the oldest's.
        let theirs = |time: Option<SystemTime>| -> Option<usize> {
            let Some(time) = time else {
                return commands.first().map(|c| c.prompt);
            };
            commands
                .iter()
                .find(|c| c.ended.is_some_and(|ended| time <= ended))
                .map(|c| c.prompt)
                .or(running)
        };
        let unrecorded = || Entry::Unrecorded {
            why: "it changed before it could be kept".to_string(),
        };
        let mut changed: Vec<(usize, String, Entry)> = Vec::new();
        // Files gone: known files the walk did not find.
        if found_known < state.tree.len() {
            state.tree.retain(|rel, known| {
                if known.seen_by(generation) {
                    return true;
                }
                if let Some(prompt) = theirs(None) {
                    let before = known.entry.take().unwrap_or_else(unrecorded);
                    changed.push((prompt, rel.clone(), before));
                }
                false
            });
        }
        for (rel, stamp) in differ {
            if let Some(known) = state.tree.get_mut(&rel) {
                if let Some(prompt) = theirs(stamp.changed().or(Some(UNIX_EPOCH))) {
                    let before = known.entry.take().unwrap_or_else(unrecorded);
                    changed.push((prompt, rel, before));
                }
                known.stamp = stamp;
                known.entry = None;
            } else {
                let born = scan::born(&scan::absolute(&self.root, &rel), &stamp);
                if let Some(prompt) = theirs(born.or(Some(UNIX_EPOCH))) {
                    changed.push((prompt, rel.clone(), Entry::Missing));
                }
                state.tree.insert(rel, Known::new(stamp, generation));
            }
        }
        let mut wrote = false;
        for (at, rel, before) in changed {
            if let Some(prompt) = state.log.prompts.get_mut(at) {
                prompt.changes.entry(rel).or_insert(before);
                wrote = true;
            }
        }
        if wrote {
            state.log.write(&self.log_path)?;
        }
        Ok(keepable_bytes)
    }

    /// Walks the tree, finds what the unsettled commands changed ([`attribute`](Self::attribute)),
    /// and keeps every file whose stamp changed since the last walk. A
    /// tree whose keepable files (those within `max_file_bytes`) add up to more than the
    /// whole store may hold (`max_total_bytes`) is too big, like one over `max_files` or
    /// one whose walk takes over `max_walk`: nothing of it is copied, so a project's data
    /// cannot fill the disk under `ROO_HOME`. Keeping the files that changed stops at
    /// `max_walk` too: those not kept by then are kept on the next call, and a rewind
    /// says of any that changed meanwhile that it was not kept.
    fn refresh_tree(&self, state: &mut State) -> Result<(), CheckpointError> {
        let started = Instant::now();
        let found = match self.walk(state) {
            Ok(found) => found,
            Err(stop) => {
                self.tree_off(state, stop);
                return Ok(());
            }
        };
        let bytes = self.attribute(state, found)?;
        if bytes > self.limits.max_total_bytes {
            self.tree_off(state, WalkStop::Bytes(self.limits.max_total_bytes));
            return Ok(());
        }
        let deadline = started + self.limits.max_walk;
        let mut late = 0usize;
        // Files whose stamp changed (or that are new) are read and kept anew.
        for (rel, known) in state.tree.iter_mut().filter(|(_, k)| k.entry.is_none()) {
            if Instant::now() >= deadline {
                late += 1;
                continue;
            }
            known.entry = Some(scan::capture(
                &scan::absolute(&self.root, rel),
                &self.objects,
                self.limits.max_file_bytes,
            )?);
        }
        if late > 0 && !std::mem::replace(&mut state.partial_told, true) {
            state.notice = Some(format!(
                "checkpoints: this checkpoint is partial: {late} changed files could not be \
                 kept within {} ms (checkpoints.max_walk_ms); they are kept on the next call, \
                 and a rewind says of any this command changes that it was not kept",
                self.limits.max_walk.as_millis()
            ));
        }
        Ok(())
    }

    /// Walks the tree against the known one (taken: a walk given up keeps it, and the
    /// caller turns tree checkpoints off), within the limits.
    fn walk(&self, state: &mut State) -> Result<Found, WalkStop> {
        let skip = self
            .store_inside_root()
            .and_then(|store| scan::relative(&self.root, &store));
        state.generation += 1;
        scan::walk(
            &self.root,
            std::mem::take(&mut state.tree),
            state.generation,
            (
                self.limits.max_files,
                self.limits.max_file_bytes,
                self.limits.max_walk,
            ),
            skip,
        )
    }

    /// Commands are no longer checkpointed this session, because of `stop`: said once.
    fn tree_off(&self, state: &mut State, stop: WalkStop) {
        let why = match stop {
            WalkStop::Files(max) => {
                format!("the project holds more than {max} files (checkpoints.max_files)")
            }
            WalkStop::Bytes(max) => format!(
                "the project's files add up to more than the checkpoint store may hold \
                 ({} MiB, checkpoints.max_total_mb)",
                max >> 20
            ),
            WalkStop::Time => format!(
                "looking through the project's files took longer than {} ms \
                 (checkpoints.max_walk_ms)",
                self.limits.max_walk.as_millis()
            ),
        };
        state.tree.clear();
        state.commands.clear();
        state.notice = Some(format!(
            "checkpoints: shell commands are not checkpointed for the rest of this session: \
             {why}; a rewind cannot undo what they change (file tools' writes still are \
             checkpointed)"
        ));
        state.tree_off = Some(why);
    }

    /// What the person and the agent are to be told about checkpoints, once: a
    /// checkpoint skipped or cut short.
    pub fn take_notice(&self) -> Option<String> {
        self.state().notice.take()
    }

    /// The store itself, when `ROO_HOME` lies inside the project (left out of walks).
    fn store_inside_root(&self) -> Option<PathBuf> {
        let store = std::fs::canonicalize(&self.store).ok()?;
        let base = store.parent()?.to_path_buf();
        base.starts_with(&self.root).then_some(base)
    }

    /// Tells whether this failure is the first (the caller says it once).
    pub fn first_failure(&self) -> bool {
        !std::mem::replace(&mut self.state().warned, true)
    }

    /// The session's prompts, newest first, with the files each changed.
    /// What the last commands changed is found first ([`settle`](Self::settle)).
    pub fn list(&self) -> Vec<CheckpointSummary> {
        if let Err(e) = self.settle() {
            tracing::warn!(error = %e, "checkpoints: settle before listing");
        }
        let state = self.state();
        let mut out: Vec<CheckpointSummary> = state
            .log
            .prompts
            .iter()
            .enumerate()
            .map(|(i, prompt)| CheckpointSummary {
                number: i + 1,
                text: prompt.text.clone(),
                at_ms: prompt.at_ms,
                files: prompt
                    .changes
                    .iter()
                    .map(|(rel, before)| match before {
                        Entry::Missing => format!("+{rel}"),
                        _ => format!("~{rel}"),
                    })
                    .collect(),
                conversation: prompt.conversation.is_some(),
            })
            .collect();
        out.reverse();
        out
    }

    /// The listing as text: one line per prompt (newest first), then the files it
    /// changed.
    pub fn describe(&self) -> String {
        let list = self.list();
        if list.is_empty() {
            return "no checkpoints yet: each prompt of the session makes one\n".to_string();
        }
        let mut out = String::new();
        for item in list {
            let _ = write!(out, "{:>3}  {}", item.number, item.text);
            if !item.conversation {
                out.push_str("  (code only)");
            }
            out.push('\n');
            if item.files.is_empty() {
                out.push_str("       no file changed\n");
            }
            for file in item.files {
                let _ = writeln!(out, "       {file}");
            }
        }
        out
    }

    fn check_number(state: &State, number: usize) -> Result<usize, CheckpointError> {
        let count = state.log.prompts.len();
        if number == 0 || number > count {
            return Err(CheckpointError::NoSuchCheckpoint { number, count });
        }
        Ok(number - 1)
    }

    /// Where the conversation stood before prompt `number`.
    pub fn conversation_mark(&self, number: usize) -> Result<ConversationMark, CheckpointError> {
        let state = self.state();
        let at = Self::check_number(&state, number)?;
        state.log.prompts[at]
            .conversation
            .ok_or(CheckpointError::ConversationGone { number })
    }

    /// The conversation was cut back to before prompt `number`: that prompt and the
    /// later ones keep their files but can no longer rewind the conversation.
    pub fn conversation_rewound(&self, number: usize) -> Result<(), CheckpointError> {
        let mut state = self.state();
        let at = Self::check_number(&state, number)?;
        for prompt in &mut state.log.prompts[at..] {
            prompt.conversation = None;
        }
        state.log.write(&self.log_path)
    }

    /// Puts every path the agent changed since before prompt `number` back to what it
    /// held then; files the agent did not change are left alone. The state replaced is
    /// kept as a checkpoint of its own (a later rewind to it undoes this one), and the
    /// rewound prompts leave the list.
    pub fn rewind_code(&self, number: usize) -> Result<RestoreReport, CheckpointError> {
        self.settle()?;
        let mut state = self.state();
        let at = Self::check_number(&state, number)?;
        let mut targets: Vec<(String, Entry)> = Vec::new();
        for prompt in &state.log.prompts[at..] {
            for (rel, before) in &prompt.changes {
                if !targets.iter().any(|(r, _)| r == rel) {
                    targets.push((rel.clone(), before.clone()));
                }
            }
        }
        let mut replaced = std::collections::BTreeMap::new();
        for (rel, _) in &targets {
            let now = scan::capture(
                &scan::absolute(&self.root, rel),
                &self.objects,
                self.limits.max_file_bytes,
            )?;
            replaced.insert(rel.clone(), now);
        }
        let mut report = RestoreReport::default();
        for (rel, before) in &targets {
            // What is there now but could not be kept (over `max_file_kb`, unreadable)
            // would be lost for good: it is left, so the rewind can always be undone.
            if let Some(Entry::Unrecorded { why }) = replaced.get(rel)
                && scan::stamp_of(&scan::absolute(&self.root, rel)).is_some()
            {
                report.skipped.push((
                    rel.clone(),
                    format!(
                        "what it holds now could not be kept to undo the rewind ({why}); \
                         move it away and rewind again"
                    ),
                ));
                continue;
            }
            restore::restore(&self.root, rel, before, &self.objects, &mut report);
            state.tree.remove(rel);
        }
        state.log.prompts.truncate(at);
        if !replaced.is_empty() {
            state.log.prompts.push(PromptRecord {
                text: format!("(the files as they were before rewinding to {number})"),
                at_ms: now_ms(),
                conversation: None,
                changes: replaced,
                rewind: true,
            });
        }
        state.log.write(&self.log_path)?;
        Ok(report)
    }
}

/// The store directory name of a project: its last component and a hash of its path.
fn project_key(root: &Path) -> String {
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect();
    let hash = ring::digest::digest(&ring::digest::SHA256, root.as_os_str().as_encoded_bytes());
    let hex: String = hash.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{}-{hex}", name.trim_start_matches('.'))
}

/// Where a file tool's target leads (symlinks followed, as the tool opens it).
fn resolved(path: &Path) -> PathBuf {
    crate::permissions::confinement::resolve(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The first line of `text`, at most 72 characters.
fn headline(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = line.trim();
    if line.chars().count() > 72 {
        let cut: String = line.chars().take(71).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Creates `dir` and its parents, private to the user (0700).
fn create_private_dir(dir: &Path) -> Result<(), CheckpointError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| CheckpointError::Io {
            action: "create the directory",
            path: dir.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests;
