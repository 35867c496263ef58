//! The shared task list (`tasks/<team>/tasks.json`) and its operations.
//!
//! Every change is one locked whole-file update, so each operation is atomic with respect
//! to every other process: a claim checks and takes a task in the same write, ids come
//! from a high-water mark kept in the file (never reused, even after deletes),
//! `blocks`/`blocked_by` are kept symmetric, and a dependency that would close a cycle is
//! refused. A failed operation writes nothing. Who holds a task (claims, leases,
//! assignment, reclaiming, readiness) is in `task_list/claims.rs`.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use crate::authority::{self, Role, TaskChange, may};
use crate::doc::{self, Outcome};
use crate::error::{Error, Result};
use crate::limits::{MAX_LEASE, MAX_TASK_NOTES};
use crate::name::Name;
use crate::task::{Lease, Task, TaskId, TaskNote, TaskStatus, check_line, scopes_overlap};
use crate::task_list_doc::TaskListDoc;
use crate::team::{MemberState, Team, TeamConfig};
use crate::time::Timestamp;
use crate::usage::TaskUsage;

mod claims;
mod spend;

/// Lease a claim gets unless the caller says otherwise.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(600);

/// A task to create.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NewTask {
    /// One line: what to do (required).
    pub subject: String,
    /// Details.
    pub description: String,
    /// Present-continuous form.
    pub active_form: Option<String>,
    /// Tasks it waits on.
    pub blocked_by: Vec<TaskId>,
    /// Tasks that wait on it.
    pub blocks: Vec<TaskId>,
    /// Scope.
    pub paths: Vec<String>,
    /// Free-form data.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Pre-assigned owner (the task stays pending until that owner claims it).
    pub owner: Option<Name>,
    /// Who creates it (checked by [`crate::authority::may`]: only the lead may create a
    /// task for another member, nor make another's task wait on it); `None`: unnamed.
    pub by: Option<Name>,
    /// The task's own spending cap.
    pub budget: Option<crate::budget::SpendCap>,
}

/// A change to a task; `None`/empty fields are left alone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskPatch {
    /// New subject.
    pub subject: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New active form.
    pub active_form: Option<String>,
    /// New status.
    pub status: Option<TaskStatus>,
    /// `Some(Some(x))` sets the owner, `Some(None)` clears it.
    pub owner: Option<Option<Name>>,
    /// Tasks that will wait on this one (both sides are updated).
    pub add_blocks: Vec<TaskId>,
    /// Tasks this one will wait on (both sides are updated).
    pub add_blocked_by: Vec<TaskId>,
    /// Dependencies to drop (both sides).
    pub remove_blocks: Vec<TaskId>,
    /// Dependencies to drop (both sides).
    pub remove_blocked_by: Vec<TaskId>,
    /// New scope.
    pub paths: Option<Vec<String>>,
    /// Merged into metadata; a `null` value deletes the key.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// A note to append.
    pub note: Option<String>,
    /// Who makes the change (recorded with the note; judged by
    /// [`crate::authority::may`]).
    pub by: Option<Name>,
    /// Make a change [`crate::authority::may`] refuses `by` as not its to make anyway
    /// (needs `by`; the override is recorded in the task's notes).
    pub force: bool,
}

impl TaskPatch {
    /// The fields besides owner and status it changes (names for messages and notes).
    pub fn edited_fields(&self) -> Vec<&'static str> {
        let mut fields = Vec::new();
        let mut add = |changed: bool, name: &'static str| {
            if changed {
                fields.push(name);
            }
        };
        add(self.subject.is_some(), "subject");
        add(self.description.is_some(), "description");
        add(self.active_form.is_some(), "active form");
        add(
            !(self.add_blocks.is_empty()
                && self.add_blocked_by.is_empty()
                && self.remove_blocks.is_empty()
                && self.remove_blocked_by.is_empty()),
            "dependencies",
        );
        add(self.paths.is_some(), "paths");
        add(!self.metadata.is_empty(), "metadata");
        add(self.note.is_some(), "note");
        fields
    }
}

/// Which tasks [`TaskList::list`] returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only this status.
    pub status: Option<TaskStatus>,
    /// Only this owner.
    pub owner: Option<Name>,
}

/// How a claim is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimOptions {
    /// Lease length.
    pub lease: Duration,
    /// Claim even if the task's scope overlaps another in-progress task's.
    pub ignore_scope: bool,
}

impl Default for ClaimOptions {
    fn default() -> Self {
        ClaimOptions {
            lease: DEFAULT_LEASE,
            ignore_scope: false,
        }
    }
}

/// What a claim did.
#[derive(Clone, Debug, PartialEq)]
pub enum ClaimOutcome {
    /// The task is now `in_progress` and owned by the claimer (also when it already was).
    Claimed(Box<Task>),
    /// Someone else owns it.
    AlreadyOwned {
        /// The owner.
        owner: Name,
        /// Its status.
        status: TaskStatus,
    },
    /// Some blockers are not completed.
    Blocked {
        /// The unfinished blockers.
        by: Vec<TaskId>,
    },
    /// It is not pending (and not the claimer's).
    NotPending {
        /// Its status.
        status: TaskStatus,
    },
    /// Its scope overlaps an in-progress task of another owner.
    ScopeConflict {
        /// The in-progress task.
        with: TaskId,
        /// That task's owner.
        owner: Option<Name>,
    },
    /// No such task.
    NotFound,
}

/// The ready set, and what was held back for scope.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ReadyReport {
    /// Pending, unowned, unblocked, no scope conflict; id order.
    pub ready: Vec<Task>,
    /// Otherwise ready, but overlapping the scope of the given in-progress task.
    pub held_back: Vec<(Task, TaskId)>,
}

/// A task returned to the ready set by [`TaskList::reclaim_where`].
#[derive(Clone, Debug, PartialEq)]
pub struct Reclaimed {
    /// The task after the change.
    pub task: Task,
    /// Who owned it.
    pub previous_owner: Name,
    /// Why it was reclaimed.
    pub reason: String,
}

impl Team {
    /// The team's task list.
    pub fn tasks(&self) -> TaskList {
        TaskList::new(self.clone())
    }
}

/// The task list of one team. Cheap to clone, `Send + Sync`.
#[derive(Clone, Debug)]
pub struct TaskList {
    team: Team,
}

impl TaskList {
    /// The task list of `team`.
    pub fn new(team: Team) -> TaskList {
        TaskList { team }
    }

    /// Path of the file.
    pub fn path(&self) -> PathBuf {
        self.team.home().task_list(self.team.name())
    }

    /// Creates a task with the next id; dependencies are validated and made symmetric.
    pub fn create(&self, new: NewTask) -> Result<Task> {
        let invalid = |reason: String| Error::InvalidTask {
            action: "create",
            id: String::new(),
            reason,
        };
        if new.subject.trim().is_empty() {
            return Err(invalid("the subject is empty".into()));
        }
        check_line("the subject", &new.subject).map_err(invalid)?;
        if let Some(active_form) = &new.active_form {
            check_line("the active form", active_form).map_err(invalid)?;
        }
        self.update_doc(new.by.as_ref(), |config, list| {
            let by = new.by.as_ref();
            let role = Role::of(config, by);
            may(
                by,
                role,
                None,
                &TaskChange::Create {
                    owner: new.owner.as_ref(),
                },
            )
            .map_err(Error::from)?;
            for waiter in &new.blocks {
                let task = self.find(list, waiter)?;
                may(by, role, Some(task), &DEPENDENCIES).map_err(Error::from)?;
            }
            let now = Timestamp::now();
            let id = TaskId::from_number(list.next_id);
            list.next_id += 1;
            list.tasks.push(Task {
                id: id.clone(),
                subject: new.subject.trim().to_owned(),
                description: new.description.clone(),
                active_form: new.active_form.clone(),
                status: TaskStatus::Pending,
                owner: new.owner.clone(),
                blocks: Vec::new(),
                blocked_by: Vec::new(),
                metadata: new.metadata.clone(),
                paths: new.paths.clone(),
                lease: None,
                notes: Vec::new(),
                created_by: new.by.clone(),
                created_at: now,
                updated_at: now,
                completed_at: None,
                usage: Default::default(),
                budget: new.budget,
                extra: Default::default(),
            });
            for blocker in &new.blocked_by {
                self.add_edge(list, &id, blocker)?;
            }
            for waiter in &new.blocks {
                self.add_edge(list, waiter, &id)?;
            }
            let task = self.find(list, &id)?;
            self.check_limits("create", task)?;
            Ok(Outcome::Write(task.clone()))
        })
    }

    /// One task.
    pub fn get(&self, id: &TaskId) -> Result<Task> {
        let list = self.load()?;
        Ok(self.find(&list, id)?.clone())
    }

    /// Tasks matching `filter`, in id order.
    pub fn list(&self, filter: &TaskFilter) -> Result<Vec<Task>> {
        let mut tasks = self.load()?.tasks;
        tasks.retain(|t| {
            filter.status.is_none_or(|s| t.status == s)
                && filter
                    .owner
                    .as_ref()
                    .is_none_or(|o| t.owner.as_ref() == Some(o))
        });
        tasks.sort_by_key(|t| t.id.number());
        Ok(tasks)
    }

    /// Applies `patch` to task `id`.
    ///
    /// Refused, writing nothing, unless [`may`] lets `patch.by` make it (a member changes
    /// only its own tasks and gives none away; an unnamed caller does not change the owner
    /// or status of another's claim), or a named caller's `patch.force` overrides it
    /// (recorded in the task's notes); a task becomes in progress only for a member of
    /// the team.
    pub fn update(&self, id: &TaskId, patch: TaskPatch) -> Result<Task> {
        self.update_doc(patch.by.as_ref(), |config, list| {
            let now = Timestamp::now();
            let forced = self.authorize_update(config, list, id, &patch)?;
            self.apply_dependencies(config, list, id, &patch, now)?;
            let unfinished = unfinished_blockers(list, id);
            let index = self.index(list, id)?;
            let task = &mut list.tasks[index];
            self.apply_edits(id, task, &patch)?;
            self.apply_owner_and_status(id, task, &patch, &unfinished, now)?;
            for text in forced {
                push_note(task, now, patch.by.clone(), text);
            }
            if let Some(text) = patch.note.clone() {
                push_note(task, now, patch.by.clone(), text);
            }
            if task.status == TaskStatus::InProgress
                && let Some(owner) = &task.owner
                && config.member(owner.as_str()).is_none()
            {
                return Err(not_a_member("update", id, owner));
            }
            task.updated_at = now;
            let task = task.clone();
            self.check_limits("update", &task)?;
            Ok(Outcome::Write(task))
        })
    }

    /// Whether `patch.by` may make `patch` to task `id` ([`may`]): the notes to record
    /// on it (a forced change, what the lead changed of another's task), or the refusal.
    fn authorize_update(
        &self,
        config: &TeamConfig,
        list: &TaskListDoc,
        id: &TaskId,
        patch: &TaskPatch,
    ) -> Result<Vec<String>> {
        let task = self.find(list, id)?;
        let new_owner = patch
            .owner
            .as_ref()
            .filter(|o| **o != task.owner)
            .map(Option::as_ref);
        let changes_status = patch.status.is_some_and(|s| s != task.status);
        let mut change = Vec::new();
        if let Some(owner) = new_owner {
            change.push(format!(
                "owner {} -> {}",
                owner_str(task.owner.as_ref()),
                owner_str(owner)
            ));
        }
        if changes_status {
            change.push(format!(
                "status {} -> {}",
                task.status,
                patch.status.unwrap_or(task.status)
            ));
        }
        let edited = patch.edited_fields();
        let edits = edited.iter().any(|f| *f != "note");
        change.extend(edited.into_iter().map(str::to_owned));
        let what = change.join(", ");
        let change = TaskChange::Update {
            what: &what,
            owner: new_owner,
            claim: new_owner.is_some() || changes_status,
            status: patch.status.filter(|_| changes_status),
            edits,
        };
        let forced = self.authorize_in(config, patch.by.as_ref(), patch.force, task, &change)?;
        let by = patch.by.as_ref();
        let noted = authority::note(by, Role::of(config, by), task, &change);
        Ok(forced.into_iter().chain(noted).collect())
    }

    /// The dependencies `patch` adds to or drops from task `id`. A dependency added to or
    /// dropped from another task changes that task too: it is authorized on that task
    /// (a forced change noted there).
    fn apply_dependencies(
        &self,
        config: &TeamConfig,
        list: &mut TaskListDoc,
        id: &TaskId,
        patch: &TaskPatch,
        now: Timestamp,
    ) -> Result<()> {
        let mut forced_others = Vec::new();
        for other in patch.add_blocks.iter().chain(&patch.remove_blocks) {
            let task = self.find(list, other)?;
            if let Some(note) =
                self.authorize_in(config, patch.by.as_ref(), patch.force, task, &DEPENDENCIES)?
            {
                forced_others.push((other.clone(), note));
            }
        }
        for blocker in &patch.add_blocked_by {
            self.add_edge(list, id, blocker)?;
        }
        for waiter in &patch.add_blocks {
            self.add_edge(list, waiter, id)?;
        }
        for blocker in &patch.remove_blocked_by {
            remove_edge(list, id, blocker);
        }
        for waiter in &patch.remove_blocks {
            remove_edge(list, waiter, id);
        }
        for (other, note) in forced_others {
            let index = self.index(list, &other)?;
            push_note(&mut list.tasks[index], now, patch.by.clone(), note);
        }
        Ok(())
    }

    /// The fields `patch` edits on task `id` (subject, description, active form, paths,
    /// metadata — a null value removes a key), checked as a new task's are.
    fn apply_edits(&self, id: &TaskId, task: &mut Task, patch: &TaskPatch) -> Result<()> {
        if let Some(subject) = &patch.subject {
            if subject.trim().is_empty() {
                return Err(self.invalid("update", id, "the subject is empty"));
            }
            check_line("the subject", subject)
                .map_err(|reason| self.invalid("update", id, &reason))?;
            subject.trim().clone_into(&mut task.subject);
        }
        if let Some(description) = &patch.description {
            task.description = description.clone();
        }
        if let Some(active_form) = &patch.active_form {
            check_line("the active form", active_form)
                .map_err(|reason| self.invalid("update", id, &reason))?;
            task.active_form = Some(active_form.clone());
        }
        if let Some(paths) = &patch.paths {
            task.paths = paths.clone();
        }
        for (key, value) in &patch.metadata {
            if value.is_null() {
                task.metadata.remove(key);
            } else {
                task.metadata.insert(key.clone(), value.clone());
            }
        }
        Ok(())
    }

    /// The owner and status `patch` sets on task `id`: a blocked task does not start, a
    /// completion is dated, and an in-progress task needs an owner, whose lease it gets
    /// (kept if that owner holds one already); any other status holds no lease.
    fn apply_owner_and_status(
        &self,
        id: &TaskId,
        task: &mut Task,
        patch: &TaskPatch,
        unfinished: &[TaskId],
        now: Timestamp,
    ) -> Result<()> {
        if let Some(owner) = &patch.owner {
            task.owner = owner.clone();
        }
        if let Some(status) = patch.status {
            if status == TaskStatus::InProgress
                && task.status != TaskStatus::InProgress
                && !unfinished.is_empty()
            {
                return Err(self.invalid(
                    "update",
                    id,
                    &format!("it is blocked by unfinished tasks {}", join(unfinished)),
                ));
            }
            if status != task.status && status == TaskStatus::Completed {
                task.completed_at = Some(now);
            }
            if status != TaskStatus::Completed {
                task.completed_at = None;
            }
            task.status = status;
        }
        match (task.status, task.owner.clone()) {
            (TaskStatus::InProgress, None) => Err(self.invalid(
                "update",
                id,
                "an in-progress task needs an owner (--owner NAME), or use claim",
            )),
            (TaskStatus::InProgress, Some(owner)) => {
                if task.lease.as_ref().is_none_or(|l| l.owner != owner) {
                    task.lease = Some(new_lease(owner, now, DEFAULT_LEASE));
                }
                Ok(())
            }
            _ => {
                task.lease = None;
                Ok(())
            }
        }
    }

    /// Adds `usage` spent by `member` on task `id` to that member's running total, in one
    /// locked write (the team runtime calls it after each model request of a teammate
    /// that owns the task). Any status and any owner: spend is recorded where it happened,
    /// even if the task changed hands meanwhile. A value over the bounds of
    /// [`crate::usage`] (or a total that would exceed them) is refused and nothing is
    /// written; an all-zero `usage` writes nothing either. `updated_at` is left alone
    /// (spend is not a change of the task's work). Returns the task after the change.
    pub fn add_usage(&self, id: &TaskId, member: &Name, usage: &TaskUsage) -> Result<Task> {
        self.update_doc(Some(member), |_, list| {
            let index = self.index(list, id)?;
            let task = &mut list.tasks[index];
            if *usage == TaskUsage::default() {
                return Ok(Outcome::Keep(task.clone()));
            }
            let before = task.usage.get(member).copied().unwrap_or_default();
            let after = before.checked_add(usage).map_err(|reason| {
                self.invalid("add usage to", id, &format!("{member}'s {reason}"))
            })?;
            task.usage.insert(member.clone(), after);
            let task = task.clone();
            self.check_limits("add usage to", &task)?;
            Ok(Outcome::Write(task))
        })
    }

    /// Deletes task `id` and drops it from every other task's dependencies. Its id is
    /// never reused. Refused unless [`may`] lets `by` (a member deletes only its own
    /// tasks; an unnamed caller no in-progress one), or `force` overrides it (the
    /// returned task then carries a note saying so).
    pub fn delete(&self, id: &TaskId, by: Option<&Name>, force: bool) -> Result<Task> {
        self.delete_where(id, by, force, |_| true)?
            .ok_or_else(|| self.invalid("delete", id, "it was not deleted"))
    }

    /// [`delete`](Self::delete) only if task `id` is still pending: `Ok(None)`, writing
    /// nothing, when it is not (someone claimed or finished it meanwhile). One locked
    /// write.
    pub fn delete_pending(&self, id: &TaskId, by: Option<&Name>) -> Result<Option<Task>> {
        self.delete_where(id, by, false, |t| t.status == TaskStatus::Pending)
    }

    fn delete_where(
        &self,
        id: &TaskId,
        by: Option<&Name>,
        force: bool,
        only: impl Fn(&Task) -> bool,
    ) -> Result<Option<Task>> {
        self.update_doc(by, |config, list| {
            let index = self.index(list, id)?;
            if !only(&list.tasks[index]) {
                return Ok(Outcome::Keep(None));
            }
            let forced =
                self.authorize_in(config, by, force, &list.tasks[index], &TaskChange::Delete)?;
            let mut task = list.tasks.remove(index);
            let now = Timestamp::now();
            if let Some(text) = forced {
                push_note(&mut task, now, by.cloned(), text);
            }
            for other in list.tasks.iter_mut() {
                let before = other.blocks.len() + other.blocked_by.len();
                other.blocks.retain(|x| x != id);
                other.blocked_by.retain(|x| x != id);
                if other.blocks.len() + other.blocked_by.len() != before {
                    other.updated_at = now;
                }
            }
            Ok(Outcome::Write(Some(task)))
        })
    }

    /// The list; refuses a team without a config (one round trip on PostgreSQL), and a
    /// team whose list is missing with no quarantined copy to explain it
    /// ([`Error::TaskListMissing`]).
    fn load(&self) -> Result<TaskListDoc> {
        let (list, team) = self.load_in_team()?;
        if !team {
            return Err(self.team_not_found());
        }
        if let Some(list) = list {
            return Ok(list);
        }
        // Files: the list was read before the config, and a team being created writes its
        // list before its config: read it again before calling it missing.
        if self.team.home().engine().documents_are_files()
            && let (Some(list), _) = self.load_in_team()?
        {
            return Ok(list);
        }
        if self.missing_unexplained()? {
            return Err(self.list_missing());
        }
        Ok(TaskListDoc::empty())
    }

    fn load_in_team(&self) -> Result<(Option<TaskListDoc>, bool)> {
        doc::load_in_team::<TaskListDoc>(self.team.home(), &self.path(), &self.team.config_path())
    }

    /// Whether no quarantined copy of the list (acknowledged or not) explains its
    /// absence: a list moved aside whole by a change is an empty list until the next
    /// change writes one.
    fn missing_unexplained(&self) -> Result<bool> {
        Ok(crate::quarantine::siblings_of(self.team.home(), &self.path(), true)?.is_empty())
    }

    fn list_missing(&self) -> Error {
        Error::TaskListMissing {
            team: self.team.name().to_string(),
            path: self.path(),
        }
    }

    /// Whether the team's task list is missing as damage ([`Error::TaskListMissing`]):
    /// the team exists, the list does not, and no quarantined copy explains it. What
    /// `doctor` reports.
    pub fn is_missing(&self) -> Result<bool> {
        match self.load() {
            Err(Error::TaskListMissing { .. }) => Ok(true),
            Err(e) => Err(e),
            Ok(_) => Ok(false),
        }
    }

    /// Starts an empty task list for a team whose list is missing
    /// ([`TaskList::is_missing`]): what `doctor --acknowledge` does, the owner's
    /// acceptance that the lost tasks are gone. Its ids start above every id its
    /// quarantined copies mention (none are known of the lost list). Returns whether it
    /// wrote one; a list that exists, or whose absence a quarantine explains, is left.
    pub fn restore_missing(&self) -> Result<bool> {
        if !self.is_missing()? {
            return Ok(false);
        }
        let fresh = std::cell::Cell::new(false);
        doc::update_in_team(
            self.team.home(),
            &self.path(),
            doc::InTeam {
                config: &self.team.config_path(),
                missing: &|| self.team_not_found(),
            },
            || {
                fresh.set(true);
                Ok(TaskListDoc::empty())
            },
            |_, _, _| {
                Ok(if fresh.replace(false) {
                    Outcome::Write(true)
                } else {
                    Outcome::Keep(false)
                })
            },
        )
    }

    /// One locked change of the list, which also gets the team's config (read in the
    /// same round trip on PostgreSQL); refuses a team without a config rather than
    /// creating a stray task list. The id high-water mark is raised above the ids of the
    /// list's quarantined copies first ([`Document::after_quarantine`]). `change` may run
    /// more than once (on PostgreSQL, again when the link was lost before it committed).
    ///
    /// The change's events (tasks created, claimed, released, completed, …) are derived
    /// from what it changed and logged in it, as `actor` (the lead when `None`).
    fn update_doc<R>(
        &self,
        actor: Option<&Name>,
        mut change: impl FnMut(&TeamConfig, &mut TaskListDoc) -> Result<Outcome<R>>,
    ) -> Result<R> {
        let home = self.team.home();
        let config = self.team.config_path();
        if home.engine().surely_missing(&config) {
            return Err(self.team_not_found());
        }
        home.ensure_doc_dir(&home.tasks_dir(self.team.name()))?;
        let missing = || self.team_not_found();
        // Set when the list was missing in this run of the change: damage unless a
        // quarantined copy explains it (read with the list, under its lock).
        let fresh = std::cell::Cell::new(false);
        doc::update_in_team(
            home,
            &self.path(),
            doc::InTeam {
                config: &config,
                missing: &missing,
            },
            || {
                fresh.set(true);
                Ok(TaskListDoc::empty())
            },
            |config, list, guard| {
                if fresh.replace(false) && !list.quarantined {
                    return Err(self.list_missing());
                }
                let before = crate::events::TaskMarks::of(list);
                let outcome = change(config, list)?;
                if let Outcome::Write(_) = &outcome {
                    for draft in before.changes(list, config, actor) {
                        guard.emit(self.team.name(), draft)?;
                    }
                }
                Ok(outcome)
            },
        )
    }

    fn team_not_found(&self) -> Error {
        Error::TeamNotFound {
            team: self.team.name().to_string(),
            path: self.team.config_path(),
            store: self.team.home().engine().target(),
        }
    }

    /// [`may`] `by` make `change` to `task` (`force`: a named caller overrides a forcible
    /// refusal)? With `force` used, returns the note that records the override.
    fn authorize_in(
        &self,
        config: &TeamConfig,
        by: Option<&Name>,
        force: bool,
        task: &Task,
        change: &TaskChange<'_>,
    ) -> Result<Option<String>> {
        let refusal = match may(by, Role::of(config, by), Some(task), change) {
            Ok(()) => return Ok(None),
            Err(refusal) => refusal,
        };
        if !force || !refusal.forcible {
            return Err(refusal.into());
        }
        let Some(by) = by else {
            return Err(self.invalid(
                "force a change of",
                &task.id,
                "say who forces it with --as NAME; it is recorded in the task's notes",
            ));
        };
        let over = match (&task.owner, task.status) {
            (Some(owner), TaskStatus::InProgress) => format!("{owner}'s claim"),
            (Some(owner), _) => format!("{owner}'s task"),
            (None, _) => "the lead's authority".to_owned(),
        };
        let what = match change {
            TaskChange::Update { what, .. } => what,
            _ => "deleted",
        };
        Ok(Some(format!("forced by {by} over {over}: {what}")))
    }

    /// Refuses, writing nothing, what [`may`] refuses `by` to do to task `id` (`None`: a
    /// change that makes or takes a task), read from the list and the team's config as
    /// they are now. For a caller that must not start a change of several steps (create,
    /// then assign) it may not finish; every change checks again in its own write.
    pub fn authorize(
        &self,
        by: Option<&Name>,
        id: Option<&TaskId>,
        change: &TaskChange<'_>,
    ) -> Result<()> {
        let config = self.team.config()?;
        let task = match id {
            Some(id) => Some(self.get(id)?),
            None => None,
        };
        may(by, Role::of(&config, by), task.as_ref(), change).map_err(Error::from)
    }

    /// Refuses a claim whose lease [`may`] refuses `owner`.
    fn authorize_claim(
        &self,
        config: &TeamConfig,
        owner: &Name,
        task: Option<&Task>,
        lease: Duration,
    ) -> Result<()> {
        may(
            Some(owner),
            Role::of(config, Some(owner)),
            task,
            &TaskChange::Claim { lease },
        )
        .map_err(Error::from)
    }

    /// Refuses a claim by a non-member or a member marked dead.
    fn check_claimer(
        &self,
        config: &TeamConfig,
        action: &'static str,
        id: &TaskId,
        owner: &Name,
    ) -> Result<()> {
        match config.member(owner.as_str()) {
            None => Err(not_a_member(action, id, owner)),
            Some(member) if member.state() == MemberState::Dead => Err(Error::NotPermitted {
                action: format!("{action} task {id} for {owner}"),
                reason: format!(
                    "{owner} is marked dead in the team config; it must join the team again \
                     (e.g. `roo-worker --team {} --name {owner}`) before it can hold a task",
                    self.team.name()
                ),
            }),
            Some(_) => Ok(()),
        }
    }

    fn check_limits(&self, action: &'static str, task: &Task) -> Result<()> {
        task.check_limits()
            .map_err(|reason| self.invalid(action, &task.id, &reason))
    }

    fn index(&self, list: &TaskListDoc, id: &TaskId) -> Result<usize> {
        list.tasks
            .iter()
            .position(|t| &t.id == id)
            .ok_or_else(|| self.not_found(id))
    }

    fn find<'a>(&self, list: &'a TaskListDoc, id: &TaskId) -> Result<&'a Task> {
        Ok(&list.tasks[self.index(list, id)?])
    }

    fn not_found(&self, id: &TaskId) -> Error {
        Error::TaskNotFound {
            team: self.team.name().to_string(),
            id: id.to_string(),
        }
    }

    fn invalid(&self, action: &'static str, id: &TaskId, reason: &str) -> Error {
        Error::InvalidTask {
            action,
            id: id.to_string(),
            reason: reason.to_owned(),
        }
    }

    /// Records "`waiter` is blocked by `blocker`" on both sides; refuses unknown ids,
    /// self-dependencies and cycles.
    fn add_edge(&self, list: &mut TaskListDoc, waiter: &TaskId, blocker: &TaskId) -> Result<()> {
        let w = self.index(list, waiter)?;
        let b = self.index(list, blocker)?;
        if w == b {
            return Err(self.invalid("update", waiter, "a task cannot block itself"));
        }
        if list.tasks[w].blocked_by.contains(blocker) {
            return Ok(());
        }
        if let Some(mut path) = path_between(list, blocker, waiter) {
            path.insert(0, waiter.to_string());
            return Err(Error::DependencyCycle {
                team: self.team.name().to_string(),
                task: waiter.to_string(),
                blocker: blocker.to_string(),
                cycle: path,
            });
        }
        list.tasks[w].blocked_by.push(blocker.clone());
        if !list.tasks[b].blocks.contains(waiter) {
            list.tasks[b].blocks.push(waiter.clone());
        }
        Ok(())
    }
}

/// A change of a task's dependencies (made from another task's side).
const DEPENDENCIES: TaskChange<'static> = TaskChange::Update {
    what: "dependencies",
    owner: None,
    claim: false,
    status: None,
    edits: true,
};

fn owner_str(owner: Option<&Name>) -> &str {
    owner.map_or("nobody", Name::as_str)
}

/// Appends a note, keeping the newest [`MAX_TASK_NOTES`].
fn push_note(task: &mut Task, at: Timestamp, by: Option<Name>, text: String) {
    task.notes.push(TaskNote { at, by, text });
    let excess = task.notes.len().saturating_sub(MAX_TASK_NOTES);
    task.notes.drain(..excess);
}

fn not_a_member(action: &'static str, id: &TaskId, owner: &Name) -> Error {
    Error::NotPermitted {
        action: format!("{action} task {id} for {owner}"),
        reason: format!(
            "{owner} is not a member of the team; only members can hold a task (see `roo-mail \
             list`)"
        ),
    }
}

fn check_lease(action: &'static str, id: &TaskId, lease: Duration) -> Result<()> {
    if lease > MAX_LEASE {
        return Err(Error::InvalidTask {
            action,
            id: id.to_string(),
            reason: format!(
                "a lease of {} s is out of range; give at most {} s (7 days) and renew it",
                lease.as_secs(),
                MAX_LEASE.as_secs()
            ),
        });
    }
    Ok(())
}

fn join(ids: &[TaskId]) -> String {
    ids.iter()
        .map(TaskId::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

fn new_lease(owner: Name, now: Timestamp, length: Duration) -> Lease {
    Lease {
        owner,
        acquired_at: now,
        renewed_at: now,
        expires_at: now.plus(length),
    }
}

fn remove_edge(list: &mut TaskListDoc, waiter: &TaskId, blocker: &TaskId) {
    for task in list.tasks.iter_mut() {
        if &task.id == waiter {
            task.blocked_by.retain(|x| x != blocker);
        } else if &task.id == blocker {
            task.blocks.retain(|x| x != waiter);
        }
    }
}

/// A blocked-by path from `from` to `to` (ids, `from` first, `to` last), if any.
fn path_between(list: &TaskListDoc, from: &TaskId, to: &TaskId) -> Option<Vec<String>> {
    let by_id: HashMap<&TaskId, &Task> = list.tasks.iter().map(|t| (&t.id, t)).collect();
    let mut stack = vec![(from, vec![from.to_string()])];
    let mut seen = HashSet::new();
    while let Some((id, path)) = stack.pop() {
        if id == to {
            return Some(path);
        }
        if !seen.insert(id) {
            continue;
        }
        for next in by_id
            .get(id)
            .map(|t| t.blocked_by.iter())
            .into_iter()
            .flatten()
        {
            let mut p = path.clone();
            p.push(next.to_string());
            stack.push((next, p));
        }
    }
    None
}

fn unfinished_blockers(list: &TaskListDoc, id: &TaskId) -> Vec<TaskId> {
    let Some(task) = list.tasks.iter().find(|t| &t.id == id) else {
        return Vec::new();
    };
    task.blocked_by
        .iter()
        .filter(|b| {
            list.tasks
                .iter()
                .find(|t| &t.id == *b)
                .is_some_and(|t| t.status != TaskStatus::Completed)
        })
        .cloned()
        .collect()
}

/// Why `task`'s owner counts as gone: not among `live_members`, or its lease expired.
pub fn owner_gone(task: &Task, now: Timestamp, live_members: &[Name]) -> Option<String> {
    let owner = task.owner.as_ref()?;
    if !live_members.contains(owner) {
        return Some(format!("{owner} is no longer a live member of the team"));
    }
    if task.status == TaskStatus::InProgress
        && let Some(lease) = &task.lease
        && lease.expires_at < now
    {
        return Some(format!(
            "the lease of {owner} expired at {}",
            lease.expires_at
        ));
    }
    None
}
