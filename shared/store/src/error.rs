//! The error type of the store.
//!
//! Every variant is an *expected*, user-facing failure: the CLIs map each one onto a
//! documented exit code, so the set of variants is part of the public API. Messages are
//! lowercase fragments that read well after "failed to …", and say what failed, on what
//! path or name, and what to do about it.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Result alias of the store.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Who held a lock when we gave up waiting for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// Process id written into the lock file, if it could be read.
    pub pid: Option<u32>,
    /// How long the lock had been held, if known.
    pub age: Option<Duration>,
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "held by pid {pid}")?,
            None => write!(f, "held by an unknown process")?,
        }
        if let Some(age) = self.age {
            write!(f, " for {} ms", age.as_millis())?;
        }
        Ok(())
    }
}

/// Where a missing team was looked for, in words that fit the store: its config file,
/// or the PostgreSQL store (which has no files).
fn missing_team(path: &std::path::Path, store: Option<&str>) -> String {
    match store {
        None => format!("{} does not exist", path.display()),
        Some(target) => format!("the PostgreSQL store at {target} has no team of that name"),
    }
}

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A name did not match `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`.
    #[error("accept {what} {value:?}: {reason} (names match ^[A-Za-z0-9][A-Za-z0-9._-]{{0,63}}$)")]
    InvalidName {
        /// What kind of name ("team name", "member name").
        what: &'static str,
        /// The rejected input.
        value: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// Neither `ROO_HOME` nor `HOME` is set (or both are empty).
    #[error(
        "locate the RooCode home: neither ROO_HOME nor HOME is set; set ROO_HOME to a directory for RooCode's state"
    )]
    NoHome,

    /// A file-system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What we were doing ("read", "create directory", …).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// A setting from the environment has a value this build does not accept.
    #[error("use {name}: {reason}")]
    InvalidSetting {
        /// The variable.
        name: &'static str,
        /// What is wrong with its value.
        reason: String,
    },

    /// The PostgreSQL store failed: unreachable, refused the login, lost the connection,
    /// or holds a schema from a newer version. Never answered by falling back to files.
    #[error("{action} (PostgreSQL store at {target}): {detail}")]
    Engine {
        /// What we were doing ("connect", "update teams/x/config.json", …).
        action: String,
        /// The server, as the URL names it (host or socket directory, port, database;
        /// never the password).
        target: String,
        /// The server's or the client's message.
        detail: String,
    },

    /// A change of the PostgreSQL store waited longer than the lock wait for its row,
    /// which another session held.
    #[error(
        "update {key} (PostgreSQL store at {target}): another session held it for {} ms; retry \
         later (a session stopped inside a transaction loses its locks after 60 s)",
        waited.as_millis()
    )]
    RowLocked {
        /// The document.
        key: String,
        /// The server (host or socket directory, port, database).
        target: String,
        /// How long the change waited.
        waited: Duration,
    },

    /// The lock could not be taken within the retry budget.
    #[error(
        "acquire lock {path} after {attempts} attempts in {} ms ({holder}); retry later, or \
         remove the lock file if no roo process is running",
        waited.as_millis()
    )]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How many times we tried.
        attempts: u32,
        /// How long we waited in total.
        waited: Duration,
        /// Who held it when we gave up.
        holder: LockHolder,
    },

    /// The lock was broken while we held it (we outlived the stale age, e.g. stopped or
    /// swapped out), so our write was refused before it could replace newer data.
    #[error(
        "write {path}: the lock {lock} is no longer ours ({holder}), it was judged stale and \
         taken over while this process held it; nothing was written, retry the command"
    )]
    LockLost {
        /// The document that was not written.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// Who holds it now.
        holder: LockHolder,
    },

    /// A store path is a symbolic link, directory or special file instead of a regular
    /// file; the store never follows links or opens special files.
    #[error(
        "open {path}: it is a {kind}, not a regular file; roo never follows links or opens \
         special files inside ROO_HOME, remove it (or replace it with the real file)"
    )]
    NotRegularFile {
        /// The offending path.
        path: PathBuf,
        /// What it is ("symbolic link", "directory", "FIFO", …).
        kind: &'static str,
    },

    /// A JSON file could not be parsed; it was moved aside, never silently replaced.
    #[error(
        "parse {path}: {detail}; the corrupt file was moved aside to {moved_to}, inspect it and \
         restore what you need (the next write starts from an empty file)"
    )]
    Corrupt {
        /// The file that was corrupt.
        path: PathBuf,
        /// Where it was moved.
        moved_to: PathBuf,
        /// The parse error.
        detail: String,
    },

    /// A document cannot be read at all; it was left in place (only a change moves it).
    #[error(
        "read {path}: {detail}; the file is damaged and was left untouched (the next change \
         moves it aside to a .corrupt- file; see `roo-task doctor` / `roo-mail doctor`)"
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The parse error.
        detail: String,
    },

    /// A change would produce a document that readers reject; nothing was written.
    #[error(
        "write {path}: {reason}; the change was refused and nothing was written (a reader \
         would reject the result)"
    )]
    Unwritable {
        /// The document.
        path: PathBuf,
        /// What a reader would reject.
        reason: String,
    },

    /// A file was written by a newer, incompatible version of the protocol.
    #[error(
        "read {path}: it has format version {found}, but this program understands major version \
         {supported} only; upgrade roo (the file was left untouched)"
    )]
    NewerFormat {
        /// The file.
        path: PathBuf,
        /// The version found in the file.
        found: String,
        /// The major version we support.
        supported: u32,
    },

    /// The team exists but its task list does not, and no quarantined copy explains it
    /// (the list is created with the team and only moved to quarantine by a change): it
    /// was deleted outside roo. Damage, not an empty list; nothing was written.
    #[error(
        "read the task list of team {team:?}: it is missing though the team exists (deleted \
         outside roo, or lost); this is damage, not an empty list, and nothing was written. \
         Restore it ({path}) from a backup, or start an empty list with `roo-task doctor \
         --team {team} --acknowledge` (its tasks are then lost)",
        path = path.display()
    )]
    TaskListMissing {
        /// The team.
        team: String,
        /// The task list's path (on the PostgreSQL store, where the file layout names its
        /// document).
        path: PathBuf,
    },

    /// The team has no config (no file; or no row in the PostgreSQL store).
    #[error(
        "find team {team:?}: {}; create it with `roo-mail team create --team {team} --lead NAME`",
        missing_team(path, store.as_deref())
    )]
    TeamNotFound {
        /// The team.
        team: String,
        /// The config path that is missing (on the PostgreSQL store, where the file
        /// layout names its document).
        path: PathBuf,
        /// The PostgreSQL store the team was looked for in (its target: host or socket
        /// directory, port, database); `None` on the file store.
        store: Option<String>,
    },

    /// The team already exists.
    #[error(
        "create team {team:?}: it already exists at {path}; pick another name or delete it first"
    )]
    TeamExists {
        /// The team.
        team: String,
        /// Its config path.
        path: PathBuf,
    },

    /// The team still has active members.
    #[error(
        "delete team {team:?}: members {active:?} are still active; shut them down first (or force)"
    )]
    TeamActive {
        /// The team.
        team: String,
        /// Names of the active members.
        active: Vec<String>,
    },

    /// No member with that name or agent id.
    #[error("find member {name:?} in team {team:?}: no member has that name or agent id")]
    MemberNotFound {
        /// The team.
        team: String,
        /// The name or agent id looked up.
        name: String,
    },

    /// A member with that name already exists.
    #[error(
        "add member {name:?} to team {team:?}: a member with that name (in any letter case: names that differ only in case would share one inbox on a case-insensitive file system) or agent id exists"
    )]
    MemberExists {
        /// The team.
        team: String,
        /// The name.
        name: String,
    },

    /// A message recipient is not a member of the team.
    #[error(
        "send to {to:?} in team {team:?}: no member has that name or agent id (use a member name, \
         an agent id or \"*\")"
    )]
    UnknownRecipient {
        /// The team.
        team: String,
        /// The recipient as given.
        to: String,
    },

    /// A broadcast found nobody to deliver to.
    #[error("broadcast in team {team:?}: there are no members besides {from:?}")]
    NoRecipients {
        /// The team.
        team: String,
        /// The sender.
        from: String,
    },

    /// A message is malformed (missing summary, empty text, …).
    #[error("send message: {reason}")]
    InvalidMessage {
        /// What is wrong.
        reason: String,
    },

    /// The sender is not allowed to send this message (protocol rule).
    #[error("{action}: {reason}")]
    NotPermitted {
        /// What was attempted.
        action: String,
        /// Which rule forbids it.
        reason: String,
    },

    /// A write made as a member (PostgreSQL store, [`crate::Presence::team`]) whose entry
    /// no longer vouches for this process: declared dead (e.g. while its link was cut),
    /// taken over by a later join, or removed. Nothing was written; the process must join
    /// the team again (a new epoch) before it writes.
    #[error(
        "write as member {member:?} (epoch {epoch}) of team {team:?}: {reason}; nothing was \
         written — this process no longer is that member and must join the team again (e.g. \
         restart `roo-worker --team {team} --name {member}`)"
    )]
    Fenced {
        /// The team.
        team: String,
        /// The member the process wrote as.
        member: String,
        /// The epoch of its presence.
        epoch: u64,
        /// What its entry says instead.
        reason: String,
    },

    /// No message with that id.
    #[error("find message {id:?} in team {team:?}: no inbox or archive holds it")]
    MessageNotFound {
        /// The team.
        team: String,
        /// The id.
        id: String,
    },

    /// No task with that id.
    #[error("find task {id:?} in team {team:?}: no such task (see `roo-task list`)")]
    TaskNotFound {
        /// The team.
        team: String,
        /// The id.
        id: String,
    },

    /// A dependency would create a cycle.
    #[error(
        "add dependency in team {team:?}: task {task} blocked by {blocker} would create the cycle \
         {}",
        cycle.join(" -> ")
    )]
    DependencyCycle {
        /// The team.
        team: String,
        /// The task that would wait.
        task: String,
        /// The task it would wait on.
        blocker: String,
        /// The cycle, as task ids.
        cycle: Vec<String>,
    },

    /// A task was assigned, but its `task_assignment` message could not be delivered.
    #[error(
        "deliver the task_assignment of task {task} to {to} in team {team:?}: {source}; the task \
         is assigned to {to} all the same, re-send the message with `roo-mail send --team {team} \
         --to {to} --type task_assignment --task-id {task} --id {key} TEXT` (the key makes it \
         arrive once)"
    )]
    AssignmentUndelivered {
        /// The team.
        team: String,
        /// The task id.
        task: String,
        /// The new owner.
        to: String,
        /// The idempotency key of the message (`<key>:<to>` is its id).
        key: String,
        /// Why delivery failed.
        #[source]
        source: Box<Error>,
    },

    /// A task change is malformed or not allowed in the task's state.
    #[error("{action} task {id:?}: {reason}")]
    InvalidTask {
        /// What was attempted.
        action: &'static str,
        /// The task id ("" for a new task).
        id: String,
        /// What is wrong.
        reason: String,
    },
}

impl Error {
    /// Builds an [`Error::Io`].
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
