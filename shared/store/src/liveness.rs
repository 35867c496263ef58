//! Liveness: which members of a team are alive by the store's own test, and the
//! presence a running member holds (PROTOCOL.md §4.1, §8).
//!
//! On files a member with a recorded pid lives while that pid is a live process: a test
//! that holds on one machine, which is all the file store spans. On PostgreSQL a pid
//! means nothing across hosts: a running member holds a session advisory lock on its
//! process's presence connection, keyed by (team, agent id, epoch), and its entry records
//! the epoch; it lives while some session holds that lock, whatever its pid. The server
//! frees the lock when the member's session ends — at once when its process dies, within
//! seconds when its host or link goes (the presence connection's keepalives). An entry
//! without an epoch (no presence vouches for it: a member joined by hand, or by a runtime
//! that holds no presence) is judged by its pid as on files, and only on its own host
//! ([`crate::Member::local_pid`]): a pid of another host is no evidence either way.
//!
//! One look at a presence lock is not enough to declare a death: when a member's
//! presence connection drops (its session terminated, a proxy or NAT reset, an idle
//! killer) the lock is free for the moment the member takes to reconnect and take it
//! again (12–25 ms on one host). [`Team::detect_dead`] therefore declares a member whose
//! presence lock is free only if the lock is still free on every look, every
//! [`ABSENCE_RECHECK_EVERY`], over [`ABSENCE_WINDOW`] — its first and last look at least
//! that far apart, the last under the config's lock. A pid that is gone is final (it
//! does not come back): it is declared on one look.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::doc::Outcome;
use crate::error::{Error, Result};
use crate::lock::pid_alive;
use crate::name::Name;
use crate::pg::{Fence, HeldKeys, PgStore, PresenceConn, presence_key};
use crate::team::{Member, MemberState, Team, TeamConfig};

/// How long a member's presence lock must stay free, on every look, before
/// [`Team::detect_dead`] declares the member dead: longer than a member's worst reconnect
/// (a new session, TLS and login — a few round trips — plus one retry of the relock, 0.5
/// s), short enough that a `kill -9` is still declared within about 2 s (a 200 ms poll,
/// this window, a few queries).
pub const ABSENCE_WINDOW: Duration = Duration::from_secs(1);

/// How often a free presence lock is looked at again within [`ABSENCE_WINDOW`].
pub const ABSENCE_RECHECK_EVERY: Duration = Duration::from_millis(100);

/// Who is alive in one team at one moment, by the store's own test: on files each
/// member's recorded pid, on PostgreSQL each member's presence lock (read in one query).
#[derive(Clone, Debug)]
pub struct Liveness {
    team: Name,
    /// PostgreSQL: the presence lock keys held when this was read, and whether the
    /// server had just started (a lock not held is then no evidence). `None` on files.
    held: Option<HeldKeys>,
}

impl Liveness {
    /// What the store's test says of `member` now: `Some(false)` if its process is gone,
    /// `Some(true)` if it is there, `None` if nothing vouches either way (a roster entry:
    /// no pid, no epoch; or a member on another host without an epoch, whose pid means
    /// nothing here). PostgreSQL, with an epoch: whether its presence lock is held;
    /// otherwise (files, or no epoch): whether its recorded pid is a live process, judged
    /// only on its own host ([`Member::local_pid`]). A lock not held within
    /// [`crate::pg::RESTART_GRACE`] of the server's start is no evidence either way: the
    /// restart dropped every lock, and live members are taking theirs again.
    pub fn evidence(&self, member: &Member) -> Option<bool> {
        match (&self.held, member.epoch) {
            (Some(found), Some(epoch)) => {
                found.evidence(presence_key(self.team.as_str(), &member.agent_id, epoch))
            }
            // A pid of another host is no evidence here (`Member::local_pid`).
            _ => member.local_pid().map(pid_alive),
        }
    }

    /// The member's state as observed now: dead if marked dead or if its process is gone
    /// ([`Liveness::evidence`]), else as recorded: busy, idle, or not started (no process
    /// ever joined as it, so nothing vouches either way: [`Member::never_joined`]).
    pub fn observed_state(&self, member: &Member) -> MemberState {
        if self.evidence(member) == Some(false) {
            MemberState::Dead
        } else {
            member.state()
        }
    }

    /// Names of the members that can hold tasks: not observed dead. Tasks of owners
    /// outside this set are reclaimable.
    pub fn live_member_names(&self, config: &TeamConfig) -> Vec<Name> {
        config
            .members
            .iter()
            .filter(|m| self.observed_state(m) != MemberState::Dead)
            .map(|m| m.name.clone())
            .collect()
    }
}

/// A running member's presence: on PostgreSQL the session advisory lock that says it is
/// alive, held on the process's presence connection until this is dropped, with the
/// epoch its entry records. On files it holds nothing (a member lives while its pid
/// does).
///
/// On PostgreSQL, holding it fences the team handle it was taken through and every
/// clone of that handle, made before or after — the runtime's router, tools and
/// approver all write through clones of one handle: each change of the team's inboxes,
/// task list or config they make is refused ([`Error::Fenced`]) once the entry no
/// longer has this epoch or is marked dead. [`Presence::team`] is that handle.
pub struct Presence {
    team: Team,
    member: Name,
    epoch: Option<u64>,
    lock: Option<(Arc<PresenceConn>, i64)>,
}

/// What a [`Presence`] is worth at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PresenceState {
    /// Its lock is held and (as far as [`Presence::check`] read) its entry vouches for it.
    Held,
    /// Its presence connection lost the link; the lock is taken again once it is back,
    /// unless the member was declared dead meanwhile.
    Restoring,
    /// It vouches no more: the member was declared dead or its entry taken over (the
    /// reason says which). Its writes are refused; the member must join again.
    Lost(String),
}

impl std::fmt::Debug for Presence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Presence")
            .field("team", self.team.name())
            .field("member", &self.member)
            .field("epoch", &self.epoch)
            .finish()
    }
}

impl Presence {
    /// The team handle whose writes are made as this member (fenced on PostgreSQL).
    pub fn team(&self) -> &Team {
        &self.team
    }

    /// The member.
    pub fn member(&self) -> &Name {
        &self.member
    }

    /// The epoch recorded in the member's entry (`None` on files).
    pub fn epoch(&self) -> Option<u64> {
        self.epoch
    }

    /// Whether the lock is held at this moment (files: always). False while the
    /// presence connection is being restored after a lost link; it is taken again then,
    /// unless the member was declared dead meanwhile (its writes are then refused).
    pub fn is_held(&self) -> bool {
        self.lock
            .as_ref()
            .is_none_or(|(conn, key)| conn.holds(*key))
    }

    /// The state of the lock as this process knows it, without I/O (files: always held).
    pub fn state(&self) -> PresenceState {
        match &self.lock {
            None => PresenceState::Held,
            Some((conn, key)) if conn.forfeited(*key) => PresenceState::Lost(
                "it was declared dead, or its entry taken over, while its connection to the \
                 store was lost"
                    .into(),
            ),
            Some((conn, key)) if conn.holds(*key) => PresenceState::Held,
            Some(_) => PresenceState::Restoring,
        }
    }

    /// [`Presence::state`], and whether the member's entry (read now) still vouches for
    /// this presence: there, not marked dead, with this epoch — a member can be declared
    /// dead while its lock is held (by hand, or by a lead that read the lock while this
    /// process's link was down and had not yet lost it on the server's side). Files: the
    /// entry is there and not marked dead.
    pub fn check(&self) -> Result<PresenceState> {
        let state = self.state();
        if let PresenceState::Lost(_) = state {
            return Ok(state);
        }
        let config = self.team.config()?;
        let Some(entry) = config.members.iter().find(|m| m.name == self.member) else {
            return Ok(PresenceState::Lost(
                "it is no longer a member of the team".into(),
            ));
        };
        if let Some(at) = &entry.dead_at {
            return Ok(PresenceState::Lost(format!(
                "it was declared dead at {at} ({})",
                entry.dead_reason.as_deref().unwrap_or("no reason given")
            )));
        }
        if self.epoch.is_some() && entry.epoch != self.epoch {
            return Ok(PresenceState::Lost(
                "its entry was taken over by a later join".into(),
            ));
        }
        Ok(state)
    }
}

impl Drop for Presence {
    fn drop(&mut self) {
        if let Some((conn, key)) = self.lock.take() {
            conn.unlock(key);
        }
    }
}

impl Team {
    /// Who is alive in this team by the store's own test ([`Liveness`]), for `config`
    /// (read it first). Files: no I/O. PostgreSQL: one query on `pg_locks` for every
    /// member with an epoch (none if no member has one).
    pub fn liveness(&self, config: &TeamConfig) -> Result<Liveness> {
        let held = self.home().engine().held_presence(|| {
            config
                .members
                .iter()
                .filter_map(|m| {
                    m.epoch
                        .map(|epoch| presence_key(self.name().as_str(), &m.agent_id, epoch))
                })
                .collect()
        })?;
        Ok(Liveness {
            team: self.name().clone(),
            held,
        })
    }

    /// Those of `suspects` (members [`Liveness::evidence`] found gone) that stay gone:
    /// a member judged by its presence lock only if the lock is free on every look, every
    /// [`ABSENCE_RECHECK_EVERY`], until [`ABSENCE_WINDOW`] has passed since `first_look`
    /// (a reconnecting member takes it again meanwhile); a member judged by its pid at
    /// once (a dead pid does not come back). Blocks for up to the window when a presence
    /// is suspected; no I/O otherwise.
    pub(crate) fn still_gone(
        &self,
        config: &TeamConfig,
        mut suspects: Vec<Member>,
        first_look: Instant,
    ) -> Result<Vec<Member>> {
        let by_presence = |m: &Member| self.home().engine().proves_presence() && m.epoch.is_some();
        loop {
            let elapsed = first_look.elapsed();
            if elapsed >= ABSENCE_WINDOW || !suspects.iter().any(by_presence) {
                return Ok(suspects);
            }
            std::thread::sleep(ABSENCE_RECHECK_EVERY.min(ABSENCE_WINDOW - elapsed));
            let liveness = self.liveness(config)?;
            suspects.retain(|m| !by_presence(m) || liveness.evidence(m) == Some(false));
        }
    }

    /// [`Liveness::evidence`] for one member, read now (inside a change: under its lock).
    pub(crate) fn evidence_now(&self, member: &Member) -> Result<Option<bool>> {
        self.home().engine().evidence_now(self.name(), member)
    }

    /// [`Team::evidence_now`] on PostgreSQL.
    pub(crate) fn evidence_of_rows(
        pg: &PgStore,
        team: &Name,
        member: &Member,
    ) -> Result<Option<bool>> {
        match member.epoch {
            Some(epoch) => {
                let key = presence_key(team.as_str(), &member.agent_id, epoch);
                Ok(pg.held_keys(&[key])?.evidence(key))
            }
            // With member roles, the pid is the member's own word.
            None if pg.has_member_roles()? => Ok(None),
            None => Ok(member.local_pid().map(pid_alive)),
        }
    }

    /// Holds the presence of member `name` for this process (see [`Presence`]); dropping
    /// it lets the member count as gone. What a running member does right after joining
    /// ([`Team::join`]), and a lead after [`Team::claim_lead`].
    ///
    /// On PostgreSQL: draws a new epoch from the server, takes the lock keyed by (team,
    /// agent id, epoch) on the presence connection, then records the epoch in the entry
    /// in one change — so no one ever sees the entry with an epoch whose lock is not yet
    /// held — and fences this handle and its clones as `name` with that epoch. Refused if
    /// the entry is marked dead (join again first), if its current epoch's lock is held
    /// by a live session (another process is that member), or if this handle already
    /// writes as another member (give each member its own handle: [`Team::open`]). A
    /// member that joined again after being fenced holds its presence again through the
    /// same handle: its clones then write with the new epoch. On files: checks the entry
    /// exists and is not marked dead, and holds nothing.
    pub fn hold_presence(&self, name: &Name) -> Result<Presence> {
        // Its own checks decide; the fence of an earlier epoch must not refuse it.
        let unfenced = self.detached();
        let config = unfenced.config()?;
        let entry = config
            .members
            .iter()
            .find(|m| &m.name == name)
            .ok_or_else(|| self.member_not_found(name.as_str()))?;
        if entry.dead_at.is_some() {
            return Err(self.presence_of_dead(name, entry));
        }
        self.home().engine().hold_presence(self, name, entry)
    }

    /// Why `name` (its `entry`) may not hold its presence: it is marked dead.
    fn presence_of_dead(&self, name: &Name, entry: &Member) -> Error {
        Error::NotPermitted {
            action: self.presence_action(name),
            reason: format!(
                "{name} is marked dead ({}); it must join the team again first",
                entry.dead_reason.as_deref().unwrap_or("no reason given")
            ),
        }
    }

    fn presence_action(&self, name: &Name) -> String {
        format!(
            "hold the presence of {name} in team {:?}",
            self.name().as_str()
        )
    }

    /// [`Team::hold_presence`] of files: the checks were all.
    pub(crate) fn presence_of_files(&self, name: &Name) -> Presence {
        Presence {
            team: self.clone(),
            member: name.clone(),
            epoch: None,
            lock: None,
        }
    }

    /// [`Team::hold_presence`] on PostgreSQL, for `entry` found alive.
    pub(crate) fn presence_of_rows(
        &self,
        pg: &PgStore,
        name: &Name,
        entry: &Member,
    ) -> Result<Presence> {
        let action = || self.presence_action(name);
        let dead = |entry: &Member| self.presence_of_dead(name, entry);
        let unfenced = self.detached();
        if let Some(other) = pg.fence()
            && (other.team != self.name().as_str() || other.member != name.as_str())
        {
            return Err(Error::NotPermitted {
                action: action(),
                reason: format!(
                    "this team handle already writes as {} of team {:?}; open the team again \
                     for another member",
                    other.member, other.team
                ),
            });
        }
        let agent_id = entry.agent_id.clone();
        let conn = pg.presence()?;
        let epoch = pg.new_epoch()?;
        let key = presence_key(self.name().as_str(), &agent_id, epoch);
        let fence = Fence {
            team: self.name().as_str().to_owned(),
            member: name.as_str().to_owned(),
            epoch,
        };
        if !conn.lock(key, Some(fence.clone()))? {
            return Err(Error::Engine {
                action: action(),
                target: pg.target().to_owned(),
                detail: format!("the new presence lock {key} is held by another session"),
            });
        }
        let recorded = unfenced.update(|config| {
            let entry = config
                .members
                .iter_mut()
                .find(|m| &m.name == name)
                .ok_or_else(|| self.member_not_found(name.as_str()))?;
            if entry.agent_id != agent_id {
                return Err(Error::NotPermitted {
                    action: action(),
                    reason: "its entry was replaced meanwhile; try again".into(),
                });
            }
            if entry.dead_at.is_some() {
                return Err(dead(entry));
            }
            if let Some(old) = entry.epoch
                && self.evidence_now(entry)? == Some(true)
            {
                return Err(Error::NotPermitted {
                    action: action(),
                    reason: format!(
                        "a live process holds {name}'s presence (epoch {old}); stop it first, or \
                         join under another name"
                    ),
                });
            }
            entry.epoch = Some(epoch);
            Ok(Outcome::Write(()))
        });
        if let Err(e) = recorded {
            conn.unlock(key);
            return Err(e);
        }
        if let Err(other) = pg.set_fence(fence) {
            // Set by another thread meanwhile, as another member: this presence would
            // vouch for writes it does not fence. Nothing is held; the entry's epoch is
            // one no lock holds, which any join may take over.
            conn.unlock(key);
            return Err(Error::NotPermitted {
                action: action(),
                reason: format!(
                    "this team handle began writing as {} of team {:?} meanwhile",
                    other.member, other.team
                ),
            });
        }
        Ok(Presence {
            team: self.clone(),
            member: name.clone(),
            epoch: Some(epoch),
            lock: Some((conn, key)),
        })
    }

    /// This team through a new handle of its own, without a fence (see [`Presence`]):
    /// what each member a process runs writes through (a lead's in-process teammates),
    /// and what the operations use that decide by their own checks who may be a member
    /// (joining, holding a presence).
    pub fn detached(&self) -> Team {
        self.with_home(self.home().map_pg(crate::pg::PgStore::detached))
    }
}
