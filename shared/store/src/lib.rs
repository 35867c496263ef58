//! On-disk coordination state of RooCode Teams: team config, mailboxes, task list, and the
//! lock protocol that guards them (see `docs/PROTOCOL.md`, which this crate implements).
//!
//! Everything here is synchronous and has no LLM knowledge: the same code serves the
//! `roo-mail`/`roo-task` CLIs (which must start fast) and the async team runtime (which
//! calls it through `spawn_blocking`). Handles ([`RooHome`], [`Team`], [`Mailbox`],
//! [`TaskList`]) are cheap to clone and `Send + Sync`; all state lives in files, so
//! in-process teammates coordinate through the same locks as separate processes.
//!
//! **For the team runtime** (`docs/PROTOCOL.md` §4.1–§4.3, §6.5–§6.6): [`Team::join`]
//! registers a process as a member (refused while a live process holds the name);
//! [`Team::detect_dead`] (poll it) and [`Team::declare_dead`] mark a member dead and return
//! its unfinished tasks to the ready set; [`Team::become_idle`] goes idle and notifies the
//! lead once per fingerprint; [`Team::assign_task`] sets another member as owner, then
//! sends the `task_assignment`; [`TaskList::add_usage`] adds a model request's spend to a
//! task; [`Team::open_transcript`] / [`Team::open_log`] open a member's own files.
//! Liveness is the store's own test ([`Team::liveness`]): a pid on files, a presence
//! lock on PostgreSQL, which a running member holds with [`Team::hold_presence`] and
//! writes through ([`Presence::team`]: refused once it was declared dead).
//!
//! ```no_run
//! use roo_store::{Member, Name, Outgoing, RooHome, Team};
//! # fn main() -> roo_store::Result<()> {
//! let home = RooHome::from_env()?;
//! let name = Name::parse_as("team name", "refactor")?;
//! let lead = Member::new(Name::parse("lead")?, &name);
//! let alice = Member::new(Name::parse("alice")?, &name);
//! let team = Team::create(&home, name, "split the auth module", lead, vec![alice])?;
//! team.mailbox().send(
//!     &Name::parse("lead")?,
//!     "alice",
//!     Outgoing::text("Start with the data layer.", "start with the data layer"),
//! )?;
//! let unread = team.mailbox().take_unread(&Name::parse("alice")?)?;
//! assert_eq!(unread.len(), 1);
//! # Ok(()) }
//! ```

pub mod authority;
pub mod budget;
mod doc;
mod engine;
mod env;
mod error;
mod events;
mod format_version;
mod fsio;
mod home;
pub mod limits;
mod liveness;
mod lock;
mod mailbox;
mod member_files;
mod member_roles;
mod membership;
mod message;
mod name;
mod pg;
pub mod quarantine;
mod random;
pub mod relay;
mod task;
mod task_list;
mod task_list_doc;
mod team;
mod time;
mod untrusted;
pub mod usage;
pub mod wake;
mod watch;

pub use doc::{move_aside, replace_file};
pub use env::{ROO_HOME_ENV, ROO_LOCK_MODE_ENV, ROO_STORE_ENV};
pub use error::{Error, LockHolder, Result};
pub use events::{ApprovalRequest, EVENTS_FILE, Event, EventKind, EventPage};
pub use format_version::{FORMAT_MAJOR, FORMAT_MINOR, FormatVersion};
pub use fsio::{create_new_regular, make_real_dirs, read_regular};
pub use home::{
    RooHome, StoreChoice, root_from_env, shown_path, user_config_file, user_config_shown, user_home,
};
pub use liveness::{ABSENCE_RECHECK_EVERY, ABSENCE_WINDOW, Liveness, Presence, PresenceState};
pub use lock::{FileLock, LockInfo, LockPolicy, pid_alive};
pub use mailbox::{
    ARCHIVE_BATCH, ASSIGN_KEY_PREFIX, InboxDoc, Mailbox, MessageStatus, RETAINED_READ, ReadFilter,
    Receipt, SendReport,
};
pub use member_roles::MemberRoles;
pub use membership::{Assignment, Death, Idle, Joined};
pub use message::{
    DELIVERY_BUDGET, Delivery, FLOOD_SHOWN, MAX_SUMMARY_CHARS, Message, MessageBody, MessageId,
    MessageType, Outgoing, PermissionDecision, TEAMMATE_MESSAGE_NOTICE, render_collapsed,
    render_delivery, render_reminder,
};
pub use name::{MAX_NAME_LEN, Name};
pub use pg::pgpass;
pub use pg::{
    KEEPALIVE_COUNT, KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, MemberLogin, PgStore, PresenceSettings,
    RESTART_GRACE, SCHEMA_VERSION, USER_TIMEOUT, channel_of, presence_key,
};
pub use random::random_u64;
pub use task::{
    Lease, Task, TaskId, TaskNote, TaskStatus, check_line, paths_overlap, scopes_overlap,
};
pub use task_list::{
    ClaimOptions, ClaimOutcome, DEFAULT_LEASE, NewTask, ReadyReport, Reclaimed, TaskFilter,
    TaskList, TaskPatch, owner_gone,
};
pub use task_list_doc::{Reserved, TaskListDoc};
pub use team::{
    BackendType, LeadClaim, Member, MemberState, SHUT_DOWN_REASON, Team, TeamConfig, set_this_host,
    this_host,
};
pub use time::Timestamp;
pub use untrusted::model_safe;
pub use usage::TaskUsage;
pub use watch::{InboxWatcher, POLL_WITH_NOTIFY, POLL_WITHOUT_NOTIFY, WaitOutcome, WatchWaker};

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    fn assert_send<T: Send>() {}

    #[test]
    fn handles_are_send_sync_and_clone() {
        assert_send_sync::<super::RooHome>();
        assert_send_sync::<super::Team>();
        assert_send_sync::<super::Mailbox>();
        assert_send_sync::<super::TaskList>();
        assert_send_sync::<super::WatchWaker>();
        assert_send::<super::InboxWatcher>();
    }
}
