//! Who may change which task: the one rule every change of the task list obeys
//! (PROTOCOL.md §6.3 "Authority"), on every store.
//!
//! [`may`] is a pure function of the one acting, its [`Role`] in the team, the task as
//! it is and the change. [`crate::TaskList`] calls it inside each change's locked write
//! (so the files and the PostgreSQL store enforce the same rule, atomically), and a
//! caller may call it first to refuse before doing anything else (the team tools do,
//! through [`crate::TaskList::authorize`]).
//!
//! - **The lead** may do anything (leases up to [`crate::limits::MAX_LEASE`]).
//! - **A member** (any named actor that is not the lead) may create tasks owned by nobody
//!   or by itself, claim tasks under the claim rules (§6.3) with a lease of at most
//!   [`MAX_MEMBER_LEASE`], and change only the tasks it owns — never give one to someone
//!   else, nor change a task it does not own (a task waiting on one of its tasks
//!   included). Of a task it owns but did not create ([`Task::created_by`]: the lead's, a
//!   peer's, or an old task whose creator is not recorded) the wording is not its own: it
//!   may change the status, add notes and release it ([`note`] records such a release),
//!   but not edit its subject, description, active form, paths, metadata or
//!   dependencies, nor delete it ([`note`] records its completion too: the ownership
//!   rule already limits completing to a task it claimed or was given).
//!   Nor may it delete a task other tasks wait on (deleting it would unblock them), even
//!   its own.
//! - **An unnamed caller** (a person at the shell, no `--as` and no `ROO_AGENT_NAME`)
//!   keeps the model of the files: anything, except changing the owner or status of (or
//!   deleting) a member's in-progress claim.
//!
//! A refusal marked [`Refusal::forcible`] can be overridden by a named caller's `force`
//! (`--force` at the shell; recorded in the task's notes); no agent's command or tool
//! can pass it.

use std::time::Duration;

use crate::error::Error;
use crate::name::Name;
use crate::task::{Task, TaskId, TaskStatus};
use crate::team::TeamConfig;

/// The longest lease a member other than the lead may take or renew: 1 hour, six times
/// [`crate::DEFAULT_LEASE`] (renew as the work goes on). The lead may take up to
/// [`crate::limits::MAX_LEASE`].
pub const MAX_MEMBER_LEASE: Duration = Duration::from_secs(3600);

/// The one acting on the task list, as the team's config sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The team's lead.
    Lead,
    /// Any other name: a teammate, or a name the team does not know.
    Member,
    /// Nobody named (a person running the CLI without `--as` or `ROO_AGENT_NAME`).
    Unnamed,
}

impl Role {
    /// The role of `actor` in the team of `config`.
    pub fn of(config: &TeamConfig, actor: Option<&Name>) -> Role {
        match actor {
            None => Role::Unnamed,
            Some(name) if config.is_lead(name.as_str()) => Role::Lead,
            Some(_) => Role::Member,
        }
    }
}

/// A change of the task list, as [`may`] judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskChange<'a> {
    /// Create a task, pre-assigned to `owner` if given.
    Create { owner: Option<&'a Name> },
    /// Change an existing task: `what` names the change (for messages and notes), `owner`
    /// is the new owner if it changes (`Some(None)`: released), `claim` whether the owner
    /// or the status changes, `status` the new status if it changes, `edits` whether it
    /// changes the task's wording or shape (subject, description, active form, paths,
    /// metadata, dependencies; not a note).
    Update {
        what: &'a str,
        owner: Option<Option<&'a Name>>,
        claim: bool,
        status: Option<TaskStatus>,
        edits: bool,
    },
    /// Delete a task.
    Delete,
    /// Claim a task with this lease.
    Claim { lease: Duration },
    /// Renew one's lease for this long.
    Renew { lease: Duration },
}

/// Why a change was refused: it reads after "failed to" as `"<action>: <reason>"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// What was attempted ("update task 3").
    pub action: String,
    /// The rule, and who may do it.
    pub reason: String,
    /// Whether a named caller's `force` may override it (recorded in the task's notes).
    pub forcible: bool,
}

impl From<Refusal> for Error {
    fn from(refusal: Refusal) -> Error {
        Error::NotPermitted {
            action: refusal.action,
            reason: refusal.reason,
        }
    }
}

/// Whether `actor` (with `role`) may make `change` to `task` (`None` for a change that
/// makes or takes a task: create, claim). Pure: the caller reads the config and the task
/// in the same locked write that makes the change.
pub fn may(
    actor: Option<&Name>,
    role: Role,
    task: Option<&Task>,
    change: &TaskChange<'_>,
) -> Result<(), Refusal> {
    let id = task.map_or(String::new(), |t| format!(" {}", t.id));
    let refuse = |action: String, reason: String, forcible: bool| {
        Err(Refusal {
            action,
            reason,
            forcible,
        })
    };
    if role == Role::Lead {
        return Ok(());
    }
    match *change {
        TaskChange::Create { owner } => match owner {
            Some(owner) if role == Role::Member && Some(owner) != actor => refuse(
                format!("create a task owned by {owner}"),
                "only the lead may give a task to another member; create it without an owner \
                 (or owned by yourself) and ask the lead to assign it"
                    .into(),
                false,
            ),
            _ => Ok(()),
        },
        TaskChange::Claim { lease } | TaskChange::Renew { lease } => {
            if role == Role::Member && lease > MAX_MEMBER_LEASE {
                let verb = if matches!(change, TaskChange::Claim { .. }) {
                    "claim"
                } else {
                    "renew the lease on"
                };
                return refuse(
                    format!("{verb} task{id} with a lease of {} s", lease.as_secs()),
                    format!(
                        "a member's lease is at most {} s (1 hour); renew it (`roo-task renew`) \
                         as the work goes on — only the lead may take a longer one",
                        MAX_MEMBER_LEASE.as_secs()
                    ),
                    false,
                );
            }
            Ok(())
        }
        TaskChange::Update { .. } | TaskChange::Delete => {
            let Some(task) = task else {
                return Ok(());
            };
            let (verb, claim) = match *change {
                TaskChange::Update { claim, .. } => ("update", claim),
                _ => ("delete", true),
            };
            let action = format!("{verb} task{id}");
            let deleting = matches!(*change, TaskChange::Delete);
            match (role, actor) {
                (Role::Member, Some(actor)) => {
                    match &task.owner {
                        Some(owner) if owner == actor => {}
                        Some(owner) => {
                            return refuse(
                                action,
                                format!(
                                    "it is owned by {owner}; only its owner or the lead may \
                                     change it"
                                ),
                                true,
                            );
                        }
                        None => {
                            return refuse(
                                action,
                                format!(
                                    "it is owned by nobody; only the lead may change it — claim \
                                     it first (`roo-task claim {}`) to work on it",
                                    task.id
                                ),
                                true,
                            );
                        }
                    }
                    if let TaskChange::Update {
                        owner: Some(Some(new)),
                        ..
                    } = *change
                        && new != actor
                    {
                        return refuse(
                            format!("give task{id} to {new}"),
                            "only the lead may give a task to another member; release it \
                             (`--no-owner`) and tell the lead"
                                .into(),
                            true,
                        );
                    }
                    if task.created_by.as_ref() == Some(actor) {
                        return waited_on(task, action, deleting);
                    }
                    let creator = created_by(task);
                    match *change {
                        TaskChange::Update { edits: true, .. } => refuse(
                            action,
                            format!(
                                "it was created by {creator}; only its creator or the lead may \
                                 change its subject, description, active form, paths, metadata \
                                 or dependencies — add a note (`--note`) instead"
                            ),
                            true,
                        ),
                        TaskChange::Delete => refuse(
                            action,
                            format!(
                                "it was created by {creator}; only its creator or the lead may \
                                 delete it — release it (`--no-owner`) and tell the lead"
                            ),
                            true,
                        ),
                        _ => Ok(()),
                    }
                }
                _ => {
                    // Unnamed: the model of the files, less another member's claim.
                    if let Some(owner) = &task.owner
                        && claim
                        && task.status == TaskStatus::InProgress
                    {
                        let what = match *change {
                            TaskChange::Update { what, .. } => format!(" ({what})"),
                            _ => String::new(),
                        };
                        return refuse(
                            format!("{verb} task{id}{what} as an unnamed caller"),
                            format!(
                                "it is in progress and claimed by {owner}; only {owner} or the \
                                 lead may change its owner or status or delete it (pass --as \
                                 NAME), or force it with --force, which is recorded in the \
                                 task's notes"
                            ),
                            true,
                        );
                    }
                    Ok(())
                }
            }
        }
    }
}

/// Who created `task`, for a message.
fn created_by(task: &Task) -> String {
    task.created_by
        .as_ref()
        .map_or_else(|| "someone else".to_owned(), Name::to_string)
}

/// For a member's deletion: refuses a task other tasks wait on.
fn waited_on(task: &Task, action: String, deleting: bool) -> Result<(), Refusal> {
    if !deleting || task.blocks.is_empty() {
        return Ok(());
    }
    let waiters: Vec<&str> = task.blocks.iter().map(TaskId::as_str).collect();
    Err(Refusal {
        action,
        reason: format!(
            "tasks {} wait on it; only the lead may delete a task others wait on (deleting it \
             would unblock them) — complete it, or ask the lead",
            waiters.join(", ")
        ),
        forcible: true,
    })
}

/// The note a change [`may`] allowed leaves on `task`, if any: a member's release or
/// completion of a task it did not create says so, for the lead to see.
pub fn note(
    actor: Option<&Name>,
    role: Role,
    task: &Task,
    change: &TaskChange<'_>,
) -> Option<String> {
    let (Role::Member, Some(actor)) = (role, actor) else {
        return None;
    };
    if task.created_by.as_ref() == Some(actor) {
        return None;
    }
    let TaskChange::Update { owner, status, .. } = *change else {
        return None;
    };
    let creator = created_by(task);
    if owner == Some(None) {
        Some(format!(
            "released by {actor}, who did not create it (created by {creator})"
        ))
    } else if status == Some(TaskStatus::Completed) {
        Some(format!(
            "completed by {actor}, who owned it but did not create it (created by {creator})"
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::task::TaskId;
    use crate::time::Timestamp;

    fn name(s: &str) -> Name {
        Name::parse(s).unwrap()
    }

    fn task(owner: Option<&str>, status: TaskStatus) -> Task {
        let now = Timestamp::now();
        Task {
            id: TaskId::parse("3").unwrap(),
            subject: "s".into(),
            description: String::new(),
            active_form: None,
            status,
            owner: owner.map(name),
            blocks: Vec::new(),
            blocked_by: Vec::new(),
            metadata: Default::default(),
            paths: Vec::new(),
            lease: None,
            notes: Vec::new(),
            created_by: owner.map(name),
            created_at: now,
            updated_at: now,
            completed_at: None,
            usage: Default::default(),
            budget: None,
            extra: Default::default(),
        }
    }

    fn edit(what: &str) -> TaskChange<'_> {
        TaskChange::Update {
            what,
            owner: None,
            claim: false,
            status: None,
            edits: true,
        }
    }

    #[test]
    fn a_member_changes_only_its_own_tasks_and_never_gives_one_away() {
        let (carol, bob, lead) = (name("carol"), name("bob"), name("lead"));
        let me = Some(&carol);
        let m = Role::Member;
        for status in [TaskStatus::Pending, TaskStatus::InProgress] {
            for owner in [None, Some("lead"), Some("bob")] {
                let t = task(owner, status);
                let e = may(me, m, Some(&t), &edit("subject")).unwrap_err();
                assert!(e.reason.contains("only"), "{e:?}");
                assert_eq!(e.action, "update task 3");
                assert!(may(me, m, Some(&t), &TaskChange::Delete).is_err());
                assert!(may(None, Role::Unnamed, Some(&t), &edit("subject")).is_ok());
                assert!(may(Some(&lead), Role::Lead, Some(&t), &edit("subject")).is_ok());
            }
            let mine = task(Some("carol"), status);
            assert!(may(me, m, Some(&mine), &edit("subject")).is_ok());
            assert!(may(me, m, Some(&mine), &TaskChange::Delete).is_ok());
            let release = TaskChange::Update {
                what: "owner",
                owner: Some(None),
                claim: true,
                status: None,
                edits: false,
            };
            assert!(may(me, m, Some(&mine), &release).is_ok());
            let give = TaskChange::Update {
                what: "owner",
                owner: Some(Some(&bob)),
                claim: true,
                status: None,
                edits: false,
            };
            let e = may(me, m, Some(&mine), &give).unwrap_err();
            assert_eq!(e.action, "give task 3 to bob");
            assert!(may(Some(&lead), Role::Lead, Some(&mine), &give).is_ok());
        }
        let e = may(me, m, None, &TaskChange::Create { owner: Some(&lead) }).unwrap_err();
        assert!(!e.forcible);
        assert!(
            may(
                me,
                m,
                None,
                &TaskChange::Create {
                    owner: Some(&carol)
                }
            )
            .is_ok()
        );
        assert!(may(me, m, None, &TaskChange::Create { owner: None }).is_ok());
        assert!(
            may(
                None,
                Role::Unnamed,
                None,
                &TaskChange::Create { owner: Some(&bob) }
            )
            .is_ok()
        );
    }

    #[test]
    fn a_member_holding_a_task_it_did_not_create_may_not_reword_nor_delete_it() {
        let (carol, lead) = (name("carol"), name("lead"));
        let (me, m) = (Some(&carol), Role::Member);
        let complete = TaskChange::Update {
            what: "status",
            owner: None,
            claim: true,
            status: Some(TaskStatus::Completed),
            edits: false,
        };
        let release = TaskChange::Update {
            what: "owner",
            owner: Some(None),
            claim: true,
            status: Some(TaskStatus::Pending),
            edits: false,
        };
        let note = TaskChange::Update {
            what: "note",
            owner: None,
            claim: false,
            status: None,
            edits: false,
        };
        for creator in [Some("lead"), Some("bob"), None] {
            let mut held = task(Some("carol"), TaskStatus::InProgress);
            held.created_by = creator.map(name);
            let e = may(me, m, Some(&held), &edit("subject")).unwrap_err();
            assert!(e.reason.contains("only its creator or the lead"), "{e:?}");
            assert!(may(me, m, Some(&held), &TaskChange::Delete).is_err());
            for ok in [&complete, &release, &note] {
                assert!(may(me, m, Some(&held), ok).is_ok());
            }
            assert!(
                super::note(me, m, &held, &release)
                    .unwrap()
                    .contains("released by carol")
            );
            assert!(
                super::note(me, m, &held, &complete)
                    .unwrap()
                    .contains("completed by")
            );
            assert_eq!(super::note(me, m, &held, &note), None);
            let mut unowned = held.clone();
            unowned.owner = None;
            unowned.status = TaskStatus::Pending;
            let e = may(me, m, Some(&unowned), &complete).unwrap_err();
            assert!(e.reason.contains("claim it first"), "{e:?}");
            assert!(may(Some(&lead), Role::Lead, Some(&held), &edit("subject")).is_ok());
        }
        let mut own = task(Some("carol"), TaskStatus::Pending);
        assert!(may(me, m, Some(&own), &complete).is_ok());
        assert_eq!(super::note(me, m, &own, &complete), None);
        own.blocks.push(TaskId::parse("9").unwrap());
        let e = may(me, m, Some(&own), &TaskChange::Delete).unwrap_err();
        assert!(e.reason.contains("tasks 9 wait on it"), "{e:?}");
        assert!(may(None, Role::Unnamed, Some(&own), &TaskChange::Delete).is_ok());
        assert!(may(Some(&lead), Role::Lead, Some(&own), &TaskChange::Delete).is_ok());
    }

    #[test]
    fn a_members_lease_is_capped_and_the_leads_is_not() {
        let (carol, lead) = (name("carol"), name("lead"));
        let week = Duration::from_secs(7 * 24 * 3600);
        for change in [
            TaskChange::Claim { lease: week },
            TaskChange::Renew { lease: week },
        ] {
            assert!(may(Some(&carol), Role::Member, None, &change).is_err());
            assert!(may(Some(&lead), Role::Lead, None, &change).is_ok());
        }
        let cap = TaskChange::Claim {
            lease: MAX_MEMBER_LEASE,
        };
        assert!(may(Some(&carol), Role::Member, None, &cap).is_ok());
    }

    #[test]
    fn an_unnamed_caller_may_not_change_a_claim_without_force() {
        let t = task(Some("bob"), TaskStatus::InProgress);
        let status = TaskChange::Update {
            what: "status",
            owner: None,
            claim: true,
            status: Some(TaskStatus::Pending),
            edits: false,
        };
        let e = may(None, Role::Unnamed, Some(&t), &status).unwrap_err();
        assert!(e.forcible && e.reason.contains("claimed by bob"), "{e:?}");
        assert!(may(None, Role::Unnamed, Some(&t), &edit("subject")).is_ok());
    }
}
