//! Membership over time: joining a team by hand, liveness (dead members and their tasks),
//! idle notifications without repeats, and assigning a task to another member.
//!
//! These are the store halves of the team runtime's mechanisms: each is one locked write
//! of the team config or the task list (or a documented sequence of them), so a lead, a
//! `roo-worker` started in a spare terminal and a script all see the same roster.

use crate::authority::TaskChange;
use crate::doc::Outcome;
use crate::error::{Error, Result};
use crate::limits::{MAX_DEAD_REASON, MAX_IDLE_FINGERPRINT};
use crate::lock::pid_alive;
use crate::mailbox::ASSIGN_KEY_PREFIX;
use crate::message::{MAX_SUMMARY_CHARS, Message, MessageBody, Outgoing};
use crate::name::Name;
use crate::task::{Task, TaskId};
use crate::task_list::Reclaimed;
use crate::team::{Member, MemberState, SHUT_DOWN_REASON, Team};
use crate::time::Timestamp;

/// What [`Team::join`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Joined {
    /// The member entry as written.
    pub member: Member,
    /// The entry it replaced: a dead holder of the name, a roster entry without a
    /// process, or this same process joining again. `None` if the name was new.
    pub replaced: Option<Member>,
}

/// What [`Team::declare_dead`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Death {
    /// The member entry, marked dead.
    pub member: Member,
    /// Whether this call marked it (`false`: it already was marked dead).
    pub newly_dead: bool,
    /// Its unfinished tasks, returned to the ready set.
    pub released: Vec<Reclaimed>,
}

/// What [`Team::become_idle`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Idle {
    /// The member entry after the change (`is_active: false`).
    pub member: Member,
    /// The notification sent to the lead; `None` if the last one carried the same
    /// fingerprint (nothing changed since).
    pub sent: Option<Message>,
}

/// What [`Team::assign_task`] did: the task write and the message, both done.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    /// The task after the change.
    pub task: Task,
    /// The `task_assignment` delivered to the new owner.
    pub message: Message,
}

impl Team {
    /// Registers the calling process as `member` of this existing team (what `roo-worker
    /// --team T --name carol` does when started by hand), in one locked write.
    ///
    /// - A new name is added, unless it equals an existing name in another letter case or
    ///   an existing agent id ([`Error::MemberExists`]).
    /// - An existing name is taken over if nobody live holds it: it is marked dead, or it
    ///   has no pid (a roster entry), or its pid is `member.pid` on the same host (the same
    ///   process joining again: idempotent), or its pid is not a live process. A pid is
    ///   judged only on its own host ([`Member::host`], [`crate::this_host`]): an entry of
    ///   another host stays held until it is marked dead. The entry keeps its agent id;
    ///   the joiner's pid, host, pane, backend and worktree replace the old ones; `agent_type`,
    ///   `model` and `color` are the joiner's where given, else the old entry's; the dead
    ///   marks are cleared and it is active. Its tasks are left as they are.
    /// - A name held by another live process is refused ([`Error::NotPermitted`]), and so
    ///   is the lead's name.
    ///
    /// Runtimes must record a pid for every running member (an in-process teammate: the
    /// lead's), or a hand join could take over a member that is running.
    ///
    /// On PostgreSQL an entry with an epoch is judged by its presence ([`crate::Liveness`]),
    /// not its pid (which may be another host's): the name is held while the lock of that
    /// epoch is held (checked under the row lock). The joined entry has no epoch: a
    /// running member then holds its presence ([`Team::hold_presence`]), which records
    /// one.
    pub fn join(&self, member: Member) -> Result<Joined> {
        self.join_as(member, false)
    }

    /// [`Team::join`] by a running member that lost its entry's vouching (declared dead
    /// while cut off): refused, in the same locked write, if its entry is gone (removed
    /// from the team) or records a shutdown at the lead's request — what others decided
    /// is not undone by joining again.
    pub fn join_again(&self, member: Member) -> Result<Joined> {
        self.join_as(member, true)
    }

    fn join_as(&self, member: Member, again: bool) -> Result<Joined> {
        let team = self.name().clone();
        let pg = self.home().engine().proves_presence();
        if let Some(host) = &member.host {
            Name::parse_as("host name", host)?;
        }
        // Its own checks decide who may be the member: a fence of an earlier epoch of
        // this handle (a member joining again after it was declared dead) does not.
        let team_handle = self.detached();
        team_handle.update_logged(|config, guard| {
            let lead_agent_id = config.lead_agent_id.clone();
            let same_name = config
                .members
                .iter()
                .position(|m| m.name.as_str().eq_ignore_ascii_case(member.name.as_str()));
            let exists = || Error::MemberExists {
                team: team.to_string(),
                name: member.name.to_string(),
            };
            let refused = |reason: String| Error::NotPermitted {
                action: format!("join team {team:?} again as {}", member.name),
                reason,
            };
            match same_name.map(|index| &config.members[index]) {
                None if again => return Err(refused("it was removed from the team".into())),
                Some(old) if again && old.shut_down() => {
                    return Err(refused("it shut down at the lead's request".into()));
                }
                _ => {}
            }
            let Some(index) = same_name else {
                if config.members.iter().any(|m| m.agent_id == member.agent_id) {
                    return Err(exists());
                }
                let mut joined = member.clone();
                joined.is_active = Some(true);
                joined.dead_at = None;
                joined.dead_reason = None;
                // Only a presence records an epoch (`hold_presence`).
                joined.epoch = None;
                config.members.push(joined.clone());
                guard.emit(&team, crate::events::joined(&joined))?;
                return Ok(Outcome::Write(Joined {
                    member: joined,
                    replaced: None,
                }));
            };
            let old = config.members[index].clone();
            if old.name != member.name {
                return Err(exists());
            }
            self.check_entry_free(&old, &member, &lead_agent_id, pg)?;
            let joined = rejoined(&old, &member);
            config.members[index] = joined.clone();
            guard.emit(&team, crate::events::joined(&joined))?;
            Ok(Outcome::Write(Joined {
                member: joined,
                replaced: Some(old),
            }))
        })
    }

    /// Whether `member` may take over `old`, the entry of its name: refused for the
    /// lead's entry, and while the entry's holder may still live — its presence held
    /// (PostgreSQL; unknown right after a server restart), or its pid alive here or on a
    /// host this one cannot check. The same process joining again may.
    fn check_entry_free(
        &self,
        old: &Member,
        member: &Member,
        lead_agent_id: &str,
        pg: bool,
    ) -> Result<()> {
        let team = self.name();
        let action = || format!("join team {team:?} as {}", member.name);
        if old.agent_id == lead_agent_id {
            return Err(Error::NotPermitted {
                action: action(),
                reason: "that is the team's lead; a worker joins under its own name".into(),
            });
        }
        // An entry a presence vouches for (PostgreSQL) is held while its lock is.
        let presence = pg && old.epoch.is_some();
        let evidence = match presence && old.dead_at.is_none() {
            true => self.evidence_now(old)?,
            false => Some(false),
        };
        // Right after a server restart a missing lock proves nothing (its holder may
        // be reconnecting): the name stays held until the lock says more.
        if evidence.is_none() {
            return Err(Error::NotPermitted {
                action: action(),
                reason: format!(
                    "member {name}'s presence (epoch {epoch}) cannot be judged yet: the \
                     store's server restarted less than {grace} s ago and its holder may \
                     be taking it again; try again in a few seconds",
                    name = old.name,
                    epoch = old.epoch.unwrap_or_default(),
                    grace = crate::pg::RESTART_GRACE.as_secs()
                ),
            });
        }
        if evidence == Some(true) {
            return Err(Error::NotPermitted {
                action: action(),
                reason: format!(
                    "a live process already is member {name} (its presence, epoch {epoch}, is \
                     held); stop it first, or join under another name (or, if that process \
                     is no longer {name}, run `roo-mail team mark-dead --team {team} {name} \
                     --reason ...` first)",
                    name = old.name,
                    epoch = old.epoch.unwrap_or_default()
                ),
            });
        }
        // The same process joining again: the same pid on the same host.
        let same_process = old.pid == member.pid && old.host == member.host;
        if let Some(pid) = old.pid
            && !presence
            && old.dead_at.is_none()
            && !same_process
            && old.local_pid().is_none()
        {
            // Its pid is a process of another host: nothing here can tell whether it
            // lives, so the name stays held until it is marked dead.
            return Err(Error::NotPermitted {
                action: action(),
                reason: format!(
                    "member {name} runs on host {host} (pid {pid} there), which this host \
                     cannot check; stop it there, or run `roo-mail team mark-dead --team \
                     {team} {name} --reason ...` first",
                    name = old.name,
                    host = old.host.as_deref().unwrap_or("of the lead"),
                ),
            });
        }
        if let Some(pid) = old.local_pid()
            && !presence
            && old.dead_at.is_none()
            && !same_process
            && pid_alive(pid)
        {
            return Err(Error::NotPermitted {
                action: action(),
                reason: format!(
                    "a live process (pid {pid}) already is member {name}; stop it first, or \
                     join under another name (if pid {pid} is no longer that member, its pid \
                     was reused: run `roo-mail team mark-dead --team {team} {name} --reason \
                     ...` first)",
                    name = old.name
                ),
            });
        }
        Ok(())
    }

    /// Marks member `name_or_id` dead (`dead_at` now, `dead_reason`, `is_active: false`) in
    /// one locked write; the reason is cut to 1 KiB. Already dead: left as it is. The lead
    /// cannot be marked dead. Returns the entry and whether this call marked it.
    pub fn mark_dead(&self, name_or_id: &str, reason: &str) -> Result<(Member, bool)> {
        self.mark_dead_by(name_or_id, None, reason)
    }

    /// [`Team::mark_dead`] as `by` (the lead when `None`), for the event log.
    fn mark_dead_by(
        &self,
        name_or_id: &str,
        by: Option<&Name>,
        reason: &str,
    ) -> Result<(Member, bool)> {
        self.update_logged(|config, guard| {
            let events = crate::events::died;
            let lead = config.lead_agent_id.clone();
            let member = config
                .members
                .iter_mut()
                .find(|m| m.name == name_or_id || m.agent_id == name_or_id)
                .ok_or_else(|| self.member_not_found(name_or_id))?;
            if member.agent_id == lead {
                return Err(Error::NotPermitted {
                    action: format!("mark member {name_or_id:?} dead"),
                    reason: "it is the team's lead".into(),
                });
            }
            if member.dead_at.is_some() {
                return Ok(Outcome::Keep((member.clone(), false)));
            }
            member.dead_at = Some(Timestamp::now());
            member.dead_reason = Some(truncate(reason, MAX_DEAD_REASON));
            member.is_active = Some(false);
            let marked = member.clone();
            guard.emit(self.name(), events(config, &marked, by, reason))?;
            Ok(Outcome::Write((marked, true)))
        })
    }

    /// Marks member `name_or_id` dead, then returns its unfinished tasks to the ready set
    /// with the note `"reclaimed from <name>: <reason>"` written by `by` — what the lead
    /// does when a teammate's process exits or its task panics. Two locked writes, in this
    /// order, so the dead member can no longer claim what is being released; if the
    /// second fails, calling again finishes it (both steps are idempotent).
    pub fn declare_dead(&self, name_or_id: &str, by: Option<&Name>, reason: &str) -> Result<Death> {
        let (member, newly_dead) = self.mark_dead_by(name_or_id, by, reason)?;
        let note = format!("{} died: {reason}", member.name);
        let released =
            self.tasks()
                .release_owner(&member.name, by, &truncate(&note, MAX_DEAD_REASON))?;
        Ok(Death {
            member,
            newly_dead,
            released,
        })
    }

    /// Records that member `name` stopped because its lead asked it to (it approved a
    /// `shutdown_request`): marked dead with the reason [`SHUT_DOWN_REASON`], so the lead
    /// says it shut down rather than died, and its unfinished tasks (if any) released with
    /// the note `"<name> shut down at the lead's request"`. Called by the member itself,
    /// just before its process or task ends; idempotent like [`Team::declare_dead`].
    pub fn record_shut_down(&self, name: &Name) -> Result<Death> {
        let (member, newly_dead) =
            self.mark_dead_by(name.as_str(), Some(name), SHUT_DOWN_REASON)?;
        let note = format!("{} {SHUT_DOWN_REASON}", member.name);
        let released = self
            .tasks()
            .release_owner(&member.name, Some(name), &note)?;
        Ok(Death {
            member,
            newly_dead,
            released,
        })
    }

    /// Records that member `name` stops on its own for `reason` (its lead is gone): its
    /// unfinished tasks released with the note `"<name> stopped: <reason>"`, then its
    /// entry marked dead with that reason, so the list says why and the roster keeps the
    /// entry (its host and clone, for `roo-mail team gc-hosts`). Called by the member
    /// itself: the release first, as its fenced writes are refused once it is marked dead.
    pub fn record_stop(&self, name: &Name, reason: &str) -> Result<Death> {
        let note = truncate(&format!("{name} stopped: {reason}"), MAX_DEAD_REASON);
        let released = self.tasks().release_owner(name, Some(name), &note)?;
        let (member, newly_dead) =
            self.mark_dead_by(name.as_str(), Some(name), &format!("stopped: {reason}"))?;
        Ok(Death {
            member,
            newly_dead,
            released,
        })
    }

    /// Finds members (the lead excepted) not yet marked dead whose process is gone by the
    /// store's test ([`crate::Liveness`]: a recorded pid that is no longer a live process;
    /// on PostgreSQL, for an entry with an epoch, a presence lock that is free), and
    /// [`Team::declare_dead`]s each (re-checked under the lock, so a member that rejoined
    /// meanwhile is left alone). A free presence lock counts only if it stays free on
    /// every look over [`crate::ABSENCE_WINDOW`] (a member reconnecting after a dropped
    /// connection is not dead): this call then blocks for that window. One config read
    /// and one `kill(pid, 0)` per member (PostgreSQL: one query on `pg_locks` for all)
    /// when nobody died: cheap enough to poll every 200 ms. Returns the deaths this call
    /// recorded.
    pub fn detect_dead(&self, by: Option<&Name>) -> Result<Vec<Death>> {
        let config = self.config()?;
        let first_look = std::time::Instant::now();
        let liveness = self.liveness(&config)?;
        let suspects: Vec<Member> = config
            .members
            .iter()
            .filter(|m| {
                m.agent_id != config.lead_agent_id
                    && m.dead_at.is_none()
                    && liveness.evidence(m) == Some(false)
            })
            .cloned()
            .collect();
        let mut deaths = Vec::new();
        for suspect in &self.still_gone(&config, suspects, first_look)? {
            let presence = self.home().engine().proves_presence();
            let reason = match (presence, suspect.epoch, suspect.pid) {
                (true, Some(epoch), _) => format!(
                    "its presence (epoch {epoch}) is gone: its process ended or lost its \
                     connection to the store"
                ),
                (_, _, Some(pid)) => format!("its process {pid} is no longer running"),
                _ => continue,
            };
            let marked = self.update_logged(|config, guard| {
                // The same entry (same process, same presence) still unmarked.
                let Some(member) = config.members.iter_mut().find(|m| {
                    m.name == suspect.name
                        && m.pid == suspect.pid
                        && m.epoch == suspect.epoch
                        && m.dead_at.is_none()
                }) else {
                    return Ok(Outcome::Keep(None));
                };
                if self.evidence_now(member)? != Some(false) {
                    return Ok(Outcome::Keep(None));
                }
                member.dead_at = Some(Timestamp::now());
                member.dead_reason = Some(reason.clone());
                member.is_active = Some(false);
                let marked = member.clone();
                guard.emit(
                    self.name(),
                    crate::events::died(config, &marked, by, &reason),
                )?;
                Ok(Outcome::Write(Some(marked)))
            })?;
            if let Some(member) = marked {
                let note = format!("{} died: {reason}", member.name);
                let released = self.tasks().release_owner(&member.name, by, &note)?;
                deaths.push(Death {
                    member,
                    newly_dead: true,
                    released,
                });
            }
        }
        Ok(deaths)
    }

    /// Ends a member's run: sets `is_active: false` and, unless the last idle notification
    /// it sent carried the same `fingerprint`, sends `notice` (an `idle_notification`) to
    /// the lead and records the fingerprint.
    ///
    /// The runtime chooses the fingerprint (e.g. a hash of what the member did since its
    /// last notification); the same fingerprint means "nothing changed", and the entry
    /// survives a restart. Order: the send first, then the config write (state and
    /// fingerprint), so whoever reads the member idle and then the lead's inbox finds what
    /// it said on going idle (the headless lead's settle check relies on it). A failed
    /// send writes nothing (the member stays busy, the next attempt notifies); a config
    /// write failing after the send is returned, and the next attempt may notify again:
    /// a repeat, never a silence. Only the member itself goes idle, so nobody races it.
    pub fn become_idle(&self, member: &Name, fingerprint: &str, notice: Outgoing) -> Result<Idle> {
        if !matches!(notice.body, MessageBody::IdleNotification { .. }) {
            return Err(Error::InvalidMessage {
                reason: format!(
                    "an idle notice must be an idle_notification, not a {}",
                    notice.body.type_name()
                ),
            });
        }
        if fingerprint.len() > MAX_IDLE_FINGERPRINT {
            return Err(Error::InvalidMessage {
                reason: format!(
                    "the idle fingerprint is {} bytes; the limit is {MAX_IDLE_FINGERPRINT}",
                    fingerprint.len()
                ),
            });
        }
        notice.validate()?;
        let config = self.config()?;
        let entry = config
            .member(member.as_str())
            .ok_or_else(|| self.member_not_found(member.as_str()))?;
        let sent = if entry.idle_fingerprint.as_deref() == Some(fingerprint) {
            if entry.is_active == Some(false) {
                return Ok(Idle {
                    member: entry.clone(),
                    sent: None,
                });
            }
            None
        } else {
            self.mailbox()
                .send(member, &config.lead_agent_id, notice)?
                .pop()
        };
        let after = self.update(|config| {
            let entry = config
                .members
                .iter_mut()
                .find(|m| &m.name == member)
                .ok_or_else(|| self.member_not_found(member.as_str()))?;
            entry.is_active = Some(false);
            entry.idle_fingerprint = Some(fingerprint.to_owned());
            Ok(Outcome::Write(entry.clone()))
        })?;
        Ok(Idle {
            member: after,
            sent,
        })
    }

    /// Makes `to` the owner of task `id` on `by`'s behalf and sends `to` a
    /// `task_assignment` — what the lead's TaskUpdate does when it sets another member as
    /// owner (setting yourself is a claim: use [`crate::TaskList::claim`]).
    ///
    /// Order: the task write first ([`crate::TaskList::assign`]: refused, writing nothing
    /// and sending nothing, if `to` is not a live member, the task is completed, or it is
    /// another member's claim and `by` is neither that member nor the lead, unless
    /// `force`), then the message, keyed `assign-<task>-<ms of the assignment note>`.
    /// Repeating the call for the same assignment writes nothing and sends nothing new: it
    /// delivers the message only if the first call could not, so a retry is safe. If the
    /// message cannot be delivered the task stays assigned and the error is
    /// [`Error::AssignmentUndelivered`], naming the key to re-send it with.
    pub fn assign_task(&self, id: &TaskId, to: &str, by: &Name, force: bool) -> Result<Assignment> {
        let config = self.config()?;
        let member = config.member(to).ok_or_else(|| self.member_not_found(to))?;
        let liveness = self.liveness(&config)?;
        let action = || format!("assign task {id} to {to}");
        if member.name == *by || member.agent_id == by.as_str() {
            return Err(Error::NotPermitted {
                action: action(),
                reason: "that is yourself; claim the task instead (`roo-task claim`)".into(),
            });
        }
        if !config.is_lead(by.as_str()) {
            // Its message, a task_assignment, is the lead's to send: refused before the
            // task is written, so a refused assignment writes nothing — with the task
            // authority's own reason when it has one (PROTOCOL.md §6.3).
            let task = self.tasks().get(id)?;
            let owner = (task.owner.as_ref() != Some(&member.name)).then_some(Some(&member.name));
            self.tasks().authorize(
                Some(by),
                Some(id),
                &TaskChange::Update {
                    what: "owner",
                    owner,
                    claim: owner.is_some(),
                    status: None,
                    edits: false,
                },
            )?;
            return Err(Error::NotPermitted {
                action: action(),
                reason: format!(
                    "only the team's lead assigns tasks (a task_assignment is the lead's to \
                     send); to move the task without a message, `roo-task update {id} --owner \
                     {to} --as NAME --force` (recorded in the task's notes)"
                ),
            });
        }
        if liveness.observed_state(member) == MemberState::Dead {
            return Err(Error::NotPermitted {
                action: action(),
                reason: format!("{} is dead; assign it to a live member", member.name),
            });
        }
        let to = member.name.clone();
        let task = self.tasks().assign(id, &to, by, force)?;
        // Keyed by the assignment's note, so repeating the same assignment (a retry after
        // a crash or an undelivered message) finds the copy already sent, if any.
        let note = format!("assigned to {to} by {by}");
        let assigned_at = task
            .notes
            .iter()
            .rev()
            .find(|n| n.text == note)
            .map_or(task.updated_at, |n| n.at);
        let key = format!("{ASSIGN_KEY_PREFIX}{id}-{}", assigned_at.unix_ms());
        // The subject is the task creator's words, not the lead's: quoted on one line (a
        // task written before subjects were checked may hold line breaks).
        let subject = format!("{:?}", task.subject);
        let text = format!(
            "{by} assigned task {id} to you. The task's subject (quoted): {subject}. Claim it \
             when you start (roo-task claim {id})."
        );
        let summary = truncate_chars(&format!("task {id}: {subject}"), MAX_SUMMARY_CHARS);
        let notice = Outgoing::new(
            MessageBody::TaskAssignment {
                task_id: id.to_string(),
            },
            text,
        )
        .with_summary(summary);
        let undelivered = |source: Error| Error::AssignmentUndelivered {
            team: self.name().to_string(),
            task: id.to_string(),
            to: to.to_string(),
            key: key.clone(),
            source: Box::new(source),
        };
        let mut report = self
            .mailbox()
            .send_keyed(by, to.as_str(), notice, Some(&key))
            .map_err(undelivered)?;
        if let Some((_, error)) = report.failed.pop() {
            return Err(undelivered(error));
        }
        let message = match report.delivered.pop() {
            Some((_, message)) => message,
            None => {
                // Already delivered by an earlier try with the same key (same write time).
                let status = self
                    .mailbox()
                    .status(&crate::MessageId::from_string(format!("{key}:{to}")))?;
                status.message
            }
        };
        Ok(Assignment { task, message })
    }
}

/// `text` cut to at most `max` bytes at a character boundary.
fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// `text` cut to at most `max` characters.
fn truncate_chars(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// The entry of `member` joining under the name of `old`: who it is now (its process,
/// pane, host, worktree), what it keeps of the old entry (id, colour, model and type if
/// it names none, idle fingerprint), alive as of now.
fn rejoined(old: &Member, member: &Member) -> Member {
    Member {
        name: old.name.clone(),
        agent_id: old.agent_id.clone(),
        agent_type: member.agent_type.clone().or(old.agent_type.clone()),
        model: member.model.clone().or(old.model.clone()),
        worktree_path: member.worktree_path.clone(),
        backend_type: member.backend_type,
        pane_id: member.pane_id.clone(),
        pid: member.pid,
        host: member.host.clone(),
        is_active: Some(true),
        plan_mode_required: member.plan_mode_required || old.plan_mode_required,
        color: member.color.clone().or(old.color.clone()),
        joined_at: Timestamp::now(),
        dead_at: None,
        dead_reason: None,
        idle_fingerprint: old.idle_fingerprint.clone(),
        // The old holder's presence vouches no more; the joiner's records its own.
        epoch: None,
        extra: old.extra.clone(),
    }
}
