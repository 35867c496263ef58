//! Team config (`teams/<team>/config.json`) and the [`Team`] handle.
//!
//! The config is the roster: who leads, who is a member, how each member runs. It is
//! changed only under its lock, like every other file. A terminated member is removed
//! from `members` (no tombstones), so "listed" means "alive or idle". [`Team`] is the
//! cheap, cloneable handle the other parts of the store hang off: its mailbox and its
//! task list.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::doc::{self, Document, Outcome};
use crate::error::{Error, Result};
use crate::format_version::FormatVersion;
use crate::home::RooHome;
use crate::lock::pid_alive;
use crate::mailbox::Mailbox;
use crate::name::Name;
use crate::task_list_doc::TaskListDoc;
use crate::time::Timestamp;

/// Where a member runs (per member: one team may mix backends).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendType {
    /// A `roo-worker` process in a tmux pane.
    #[serde(rename = "tmux")]
    Tmux,
    /// A `roo-worker` process in an iTerm2 pane.
    #[serde(rename = "iterm2")]
    Iterm2,
    /// A task inside the lead's process.
    #[serde(rename = "in-process")]
    InProcess,
}

/// One member of a team.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Member {
    /// Name, unique in the team; also the inbox file name.
    pub name: Name,
    /// Agent id, unique in the team (default `<name>@<team>`); messages may address it.
    pub agent_id: String,
    /// The agent definition it runs (`general-purpose`, `Explore`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// Model override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Git worktree it works in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_path: Option<PathBuf>,
    /// Where it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_type: Option<BackendType>,
    /// Terminal pane id (tmux `%N`, iTerm2 session id), when it runs in a pane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane_id: Option<String>,
    /// Process id, when it runs as its own process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The host it runs on, when not the lead's: a name of the lead's `hosts:` config
    /// (PROTOCOL.md §4). Its `pid` is a process of that host, so no other host judges it
    /// by that pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Absent or `true`: active; `false`: idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_active: Option<bool>,
    /// Must send a plan for approval before writing.
    #[serde(default)]
    pub plan_mode_required: bool,
    /// Display colour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// When it joined.
    pub joined_at: Timestamp,
    /// When it was found dead (its process exited, its task panicked); absent while it
    /// lives. Cleared when a new process joins under its name ([`Team::join`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_at: Option<Timestamp>,
    /// Why it counts as dead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_reason: Option<String>,
    /// Fingerprint of the last `idle_notification` it sent (see [`Team::become_idle`]),
    /// so a restarted member does not repeat it while nothing changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_fingerprint: Option<String>,
    /// PostgreSQL store only: the epoch of the process that holds this member's presence
    /// (a server transaction id, new at each [`Team::hold_presence`]); the member lives
    /// while the session advisory lock keyed by (team, agent id, epoch) is held, whatever
    /// its pid (PROTOCOL.md §8). Absent on files, and for an entry no presence vouches for
    /// (judged by its pid then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// Members this version does not know (from a newer minor version), kept on rewrite.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

static THIS_HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Records that this process runs on host `name` of the lead's `hosts:` (a `roo-worker`
/// started there with `--host`); the first call wins. Members recorded on this host are
/// judged by their pids here, and the others (the lead's host included) are not.
pub fn set_this_host(name: &str) {
    let _ = THIS_HOST.set(name.to_owned());
}

/// The host this process runs on ([`set_this_host`]); `None`: the lead's.
pub fn this_host() -> Option<&'static str> {
    THIS_HOST.get().map(String::as_str)
}

/// The `dead_reason` of a member that stopped because its lead asked it to (PROTOCOL.md
/// §4.1): it counts as dead (not active, cannot claim) but did not die.
pub const SHUT_DOWN_REASON: &str = "shut down at the lead's request";

impl Member {
    /// A member with only a name; the agent id is `<name>@<team>`.
    pub fn new(name: Name, team: &Name) -> Member {
        Member {
            agent_id: format!("{name}@{team}"),
            name,
            agent_type: None,
            model: None,
            worktree_path: None,
            backend_type: None,
            pane_id: None,
            pid: None,
            host: None,
            is_active: None,
            plan_mode_required: false,
            color: None,
            joined_at: Timestamp::now(),
            dead_at: None,
            dead_reason: None,
            idle_fingerprint: None,
            epoch: None,
            extra: Default::default(),
        }
    }

    /// Its pid when that is a process of this host: `None` for a member on another host
    /// than this process's ([`Member::host`], [`this_host`]), whose pid means nothing
    /// here (a local process of that number is somebody else).
    pub fn local_pid(&self) -> Option<u32> {
        self.pid.filter(|_| self.host.as_deref() == this_host())
    }

    /// Absent or `true` means active.
    pub fn is_active(&self) -> bool {
        self.is_active != Some(false)
    }

    /// Whether no process ever joined as it: a roster entry as `team create --member` and
    /// `team add` write it — no `pid`, no `epoch`, no `is_active` (every join writes
    /// `is_active: true`, going idle `false`) and not marked dead. A member that ran and
    /// died or shut down is not one (it is marked dead, or its pid is recorded).
    pub fn never_joined(&self) -> bool {
        self.dead_at.is_none()
            && self.pid.is_none()
            && self.epoch.is_none()
            && self.is_active.is_none()
    }

    /// The recorded state: dead if marked dead, not started if no process ever joined as
    /// it ([`Member::never_joined`]), else busy (active) or idle.
    pub fn state(&self) -> MemberState {
        if self.dead_at.is_some() {
            MemberState::Dead
        } else if self.never_joined() {
            MemberState::NotStarted
        } else if self.is_active() {
            MemberState::Busy
        } else {
            MemberState::Idle
        }
    }

    /// Whether it stopped at its lead's request ([`Team::record_shut_down`]) rather than
    /// died: marked dead with the reason [`SHUT_DOWN_REASON`].
    pub fn shut_down(&self) -> bool {
        self.dead_at.is_some() && self.dead_reason.as_deref() == Some(SHUT_DOWN_REASON)
    }

    /// The state as observed now by the file store's test: also dead when it has a
    /// recorded pid that is not a live process (it died and nobody has marked it yet).
    /// A member on another host ([`Member::host`]) is never judged by a pid of this host.
    /// For the store's own test (on PostgreSQL, the member's presence lock) use
    /// [`Team::liveness`].
    pub fn observed_state(&self) -> MemberState {
        if self.local_pid().is_some_and(|pid| !pid_alive(pid)) {
            MemberState::Dead
        } else {
            self.state()
        }
    }
}

/// What a member is doing, as far as the team config says.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum MemberState {
    /// Running (`is_active` absent or `true`).
    Busy,
    /// Its run ended; it waits for messages (`is_active: false`).
    Idle,
    /// Gone without shutting down (`dead_at` set, or observed: its pid is not alive).
    Dead,
    /// A roster entry no process ever joined ([`Member::never_joined`]): nobody works
    /// as it, so nobody waits for it, and deleting the team does not need `--force`.
    NotStarted,
}

impl MemberState {
    /// The name on the wire (JSON, stream-json): `busy`, `idle`, `dead` or `not_started`.
    pub fn as_str(self) -> &'static str {
        match self {
            MemberState::Busy => "busy",
            MemberState::Idle => "idle",
            MemberState::Dead => "dead",
            MemberState::NotStarted => "not_started",
        }
    }

    /// The name people read: as [`MemberState::as_str`], but `not started`.
    pub fn label(self) -> &'static str {
        match self {
            MemberState::NotStarted => "not started",
            other => other.as_str(),
        }
    }
}

impl std::fmt::Display for MemberState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// The team config document.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TeamConfig {
    /// Format version.
    #[serde(default)]
    pub version: FormatVersion,
    /// Team name.
    pub name: Name,
    /// What the team is for.
    #[serde(default)]
    pub description: String,
    /// Agent id of the lead (also a member).
    pub lead_agent_id: String,
    /// When the team was created.
    pub created_at: Timestamp,
    /// The roster, lead included.
    #[serde(default)]
    pub members: Vec<Member>,
    /// The lead's public key (hex Ed25519): members accept only answers to their
    /// permission and plan questions signed by it (PROTOCOL.md §5.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_key: Option<String>,
    /// Members this version does not know (from a newer minor version), kept on rewrite.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Document for TeamConfig {
    fn version(&self) -> FormatVersion {
        self.version
    }
}

impl TeamConfig {
    /// The lead's member entry.
    pub fn lead(&self) -> Option<&Member> {
        self.members
            .iter()
            .find(|m| m.agent_id == self.lead_agent_id)
    }

    /// Whether `name` (a member name or agent id) is the lead.
    pub fn is_lead(&self, name: &str) -> bool {
        self.lead()
            .is_some_and(|lead| lead.name == name || lead.agent_id == name)
    }

    /// The member with this name or agent id.
    pub fn member(&self, name_or_id: &str) -> Option<&Member> {
        self.members
            .iter()
            .find(|m| m.name == name_or_id)
            .or_else(|| self.members.iter().find(|m| m.agent_id == name_or_id))
    }

    /// Names of the members that can hold tasks: not marked dead, and without a recorded
    /// pid that is not alive. Tasks of owners outside this set are reclaimable.
    pub fn live_member_names(&self) -> Vec<Name> {
        self.members
            .iter()
            .filter(|m| m.observed_state() != MemberState::Dead)
            .map(|m| m.name.clone())
            .collect()
    }

    /// Inbox names a message to `to` goes to: one member, or with `*` every member but
    /// `from`. Unknown recipients are an error, never a new inbox.
    pub fn resolve(&self, to: &str, from: &str) -> Result<Vec<Name>> {
        if to == "*" {
            let names: Vec<Name> = self
                .members
                .iter()
                .filter(|m| m.name != from && m.agent_id != from)
                .map(|m| m.name.clone())
                .collect();
            if names.is_empty() {
                return Err(Error::NoRecipients {
                    team: self.name.to_string(),
                    from: from.to_owned(),
                });
            }
            return Ok(names);
        }
        self.member(to)
            .map(|m| vec![m.name.clone()])
            .ok_or_else(|| Error::UnknownRecipient {
                team: self.name.to_string(),
                to: to.to_owned(),
            })
    }
}

/// What [`Team::claim_lead`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeadClaim {
    /// This process leads the team now; `taken_from` the live lead it replaced.
    Claimed { taken_from: Option<u32> },
    /// Another live process leads it (its pid); nothing was written.
    Held(u32),
}

/// A handle on one team under one home: cheap to clone, `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Team {
    home: RooHome,
    name: Name,
}

impl Team {
    /// Creates the team with `lead` as its first member plus `members`, and an empty task
    /// list. Refuses if the team exists.
    pub fn create(
        home: &RooHome,
        name: Name,
        description: &str,
        lead: Member,
        members: Vec<Member>,
    ) -> Result<Team> {
        // Teammates work on git branches `roo/<team>/<member>`: a name git cannot use
        // there would make every spawn fail, so it is refused before anything exists.
        if let Some(reason) = name.ref_component_problem() {
            return Err(Error::InvalidName {
                what: "team name",
                value: name.to_string(),
                reason,
            });
        }
        let team = Team {
            // A handle of its own: a presence fences it and its clones only.
            home: home.map_pg(crate::pg::PgStore::detached),
            name,
        };
        let config_path = home.team_config(&team.name);
        // A quarantined config means the team existed: refounding it would adopt its
        // inboxes and task list under a new roster.
        if let Some(quarantined) =
            crate::quarantine::siblings_of(home, &config_path, false)?.first()
        {
            return Err(Error::NotPermitted {
                action: format!("create team {:?}", team.name.as_str()),
                reason: format!(
                    "its config was quarantined to {} and its inboxes and tasks still exist; \
                     restore the config from that file, or acknowledge it with `roo-mail doctor \
                     --team {} --acknowledge` to create the team anew over them",
                    quarantined.display(),
                    team.name
                ),
            });
        }
        // On PostgreSQL, roles recorded for an earlier team of this name (its delete
        // failed to drop them) would log in to the new team: they lose their login and go
        // before anything is made, or the creation fails. Not while the team exists (the
        // creation is refused below, and its members keep their roles).
        if let Some(pg) = home.pg()
            && !home.doc_exists(&config_path)?
        {
            pg.drop_member_roles(&team.name)
                .map_err(|e| Error::NotPermitted {
                    action: format!("create team {:?}", team.name.as_str()),
                    reason: format!(
                        "the member roles left by an earlier team of that name could not be \
                         dropped, so nothing was created: {e}"
                    ),
                })?;
        }
        home.ensure_doc_dir(&home.inboxes_dir(&team.name))?;
        home.ensure_doc_dir(&home.tasks_dir(&team.name))?;
        let mut roster = vec![lead.clone()];
        for member in members {
            if roster.iter().any(|m| {
                m.name.as_str().eq_ignore_ascii_case(member.name.as_str())
                    || m.agent_id == member.agent_id
            }) {
                return Err(Error::MemberExists {
                    team: team.name.to_string(),
                    name: member.name.to_string(),
                });
            }
            roster.push(member);
        }
        // On PostgreSQL a damaged task list left by an earlier team of this name is
        // quarantined first, in a transaction of its own (a file's is moved aside by the
        // load below and stays so, whatever the creation does).
        if let Some(corrupt) = home
            .engine()
            .repair::<TaskListDoc>(home, &home.task_list(&team.name))?
        {
            return Err(corrupt);
        }
        let created = std::cell::Cell::new(false);
        doc::update_fenced(
            home,
            &config_path,
            || {
                created.set(true);
                Ok(TeamConfig {
                    version: FormatVersion::CURRENT,
                    name: team.name.clone(),
                    description: description.to_owned(),
                    lead_agent_id: lead.agent_id.clone(),
                    created_at: Timestamp::now(),
                    members: roster.clone(),
                    lead_key: None,
                    extra: Default::default(),
                })
            },
            |_, guard| {
                // Set by this run's `missing` only (a change may run again).
                if !created.replace(false) {
                    return Err(Error::TeamExists {
                        team: team.name.to_string(),
                        path: config_path.clone(),
                    });
                }
                // On PostgreSQL the team is rows, its local files (transcripts, logs, the
                // lead's key) files of the home that wrote them: what this home still holds
                // under the name belongs to an earlier team deleted from elsewhere, and a
                // new member of the same name must not resume its conversation. Removed
                // under the new config row's lock, before anyone can join.
                if !home.engine().documents_are_files() {
                    team.remove_local_dirs()?;
                }
                // The task list is created before the config becomes visible, so a team
                // that exists always has one.
                let tasks = home.task_list(&team.name);
                doc::update(
                    home,
                    &tasks,
                    || Ok(TaskListDoc::empty()),
                    |_| Ok(Outcome::Write(())),
                )?;
                guard.emit(&team.name, crate::events::team_created(&lead))?;
                Ok(Outcome::Write(()))
            },
        )?;
        Ok(team)
    }

    /// Opens an existing team; refuses one without a config.
    pub fn open(home: &RooHome, name: Name) -> Result<Team> {
        let path = home.team_config(&name);
        if !home.doc_exists(&path)? {
            return Err(Error::TeamNotFound {
                team: name.to_string(),
                path,
                store: home.engine().target(),
            });
        }
        Ok(Team {
            // A handle of its own: a presence fences it and its clones only.
            home: home.map_pg(crate::pg::PgStore::detached),
            name,
        })
    }

    /// Team name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// This team under `home` (the same home with another store handle).
    pub(crate) fn with_home(&self, home: RooHome) -> Team {
        Team {
            home,
            name: self.name.clone(),
        }
    }

    /// The home it lives in.
    pub fn home(&self) -> &RooHome {
        &self.home
    }

    /// Path of the config file.
    pub fn config_path(&self) -> PathBuf {
        self.home.team_config(&self.name)
    }

    /// Whether the team still exists (its config is there, as a file or a row).
    pub fn exists(&self) -> Result<bool> {
        self.home.doc_exists(&self.config_path())
    }

    /// Reads the config (no lock needed: writes are atomic renames).
    pub fn config(&self) -> Result<TeamConfig> {
        let path = self.config_path();
        doc::load::<TeamConfig>(&self.home, &path)?.ok_or_else(|| self.not_found(&path))
    }

    /// The team's mailbox.
    pub fn mailbox(&self) -> Mailbox {
        Mailbox::new(self.clone())
    }

    /// Adds a member; refuses a duplicate name or agent id. Names that differ only in case
    /// count as duplicates: they would share one inbox file on a case-insensitive file
    /// system (macOS's default).
    pub fn add_member(&self, member: Member) -> Result<Member> {
        self.update_logged(|config, guard| {
            if config.members.iter().any(|m| {
                m.name.as_str().eq_ignore_ascii_case(member.name.as_str())
                    || m.agent_id == member.agent_id
            }) {
                return Err(Error::MemberExists {
                    team: self.name.to_string(),
                    name: member.name.to_string(),
                });
            }
            guard.emit(&self.name, crate::events::spawned(config, &member))?;
            config.members.push(member.clone());
            Ok(Outcome::Write(member.clone()))
        })
    }

    /// Changes one member's fields under the lock (`is_active`, `pane_id`, `pid`, …).
    /// The name and agent id cannot change. `change` may run more than once, each time on
    /// the entry as stored (on PostgreSQL, again when the link was lost before the change
    /// committed).
    pub fn update_member(
        &self,
        name_or_id: &str,
        mut change: impl FnMut(&mut Member),
    ) -> Result<Member> {
        self.update(|config| {
            let member = config
                .members
                .iter_mut()
                .find(|m| m.name == name_or_id || m.agent_id == name_or_id)
                .ok_or_else(|| self.member_not_found(name_or_id))?;
            let (name, agent_id) = (member.name.clone(), member.agent_id.clone());
            change(member);
            member.name = name;
            member.agent_id = agent_id;
            Ok(Outcome::Write(member.clone()))
        })
    }

    /// Records `pid` as the process leading the team, in one locked write: refused
    /// (`LeadClaim::Held`) while the lead entry names another live process — on
    /// PostgreSQL, one whose presence is held, on any host — unless `take_over`. One lead
    /// per team (PROTOCOL.md §4.1). The new lead holds its presence next
    /// ([`Team::hold_presence`]).
    pub fn claim_lead(&self, pid: u32, take_over: bool) -> Result<LeadClaim> {
        self.update(|config| {
            let lead_id = config.lead_agent_id.clone();
            let lead = config
                .members
                .iter_mut()
                .find(|m| m.agent_id == lead_id)
                .ok_or_else(|| self.member_not_found(&lead_id))?;
            // On PostgreSQL a lead holding its presence lives wherever it runs — and so
            // does one whose lock is missing right after a server restart, which proves
            // nothing; otherwise (or once its lock is gone) its pid is judged, on its own
            // host only.
            let other = lead
                .pid
                .filter(|p| *p != pid || lead.host.as_deref() != this_host());
            let before = match other {
                Some(other) if lead.epoch.is_some() && self.evidence_now(lead)? != Some(false) => {
                    Some(other)
                }
                _ => lead.local_pid().filter(|p| *p != pid && pid_alive(*p)),
            };
            if let Some(held) = before
                && !take_over
            {
                return Ok(Outcome::Keep(LeadClaim::Held(held)));
            }
            if lead.pid != Some(pid) {
                // Another process leads now: the old one's presence vouches no more.
                lead.epoch = None;
            }
            lead.pid = Some(pid);
            lead.dead_at = None;
            lead.dead_reason = None;
            Ok(Outcome::Write(LeadClaim::Claimed { taken_from: before }))
        })
    }

    /// Records the lead's public key (hex), replacing any earlier one.
    pub fn set_lead_key(&self, key: &str) -> Result<()> {
        if key.is_empty() || key.len() > 128 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::NotPermitted {
                action: format!("set the lead key of team {:?}", self.name.as_str()),
                reason: "a lead key is hex of at most 128 characters".to_string(),
            });
        }
        self.update(|config| {
            if config.lead_key.as_deref() == Some(key) {
                return Ok(Outcome::Keep(()));
            }
            config.lead_key = Some(key.to_owned());
            Ok(Outcome::Write(()))
        })
    }

    /// Where the lead keeps its private key (0600, beside the config; hidden from every
    /// agent's commands with the rest of `teams/`).
    pub fn lead_key_path(&self) -> PathBuf {
        self.home.team_dir(&self.name).join("lead.key")
    }

    /// Marks a member active or idle.
    pub fn set_active(&self, name_or_id: &str, active: bool) -> Result<Member> {
        self.update_member(name_or_id, |m| m.is_active = Some(active))
    }

    /// Removes a member (it terminated). The lead cannot be removed. Its member role, if
    /// it had one, loses its login and goes first: if that fails, the removal fails with
    /// the reason and nothing is removed (a roster without it and a role that still logs
    /// in would be a login no one tracks).
    pub fn remove_member(&self, name_or_id: &str) -> Result<Member> {
        let config = self.config()?;
        let member = config
            .members
            .iter()
            .find(|m| m.name == name_or_id || m.agent_id == name_or_id)
            .ok_or_else(|| self.member_not_found(name_or_id))?;
        if member.agent_id != config.lead_agent_id {
            self.home
                .engine()
                .drop_member_role(&self.name, &member.name)
                .map_err(|e| Error::NotPermitted {
                    action: format!("remove member {}", member.name),
                    reason: format!("its member role could not be dropped: {e}"),
                })?;
        }
        self.remove_from_roster(name_or_id)
    }

    fn remove_from_roster(&self, name_or_id: &str) -> Result<Member> {
        self.update_logged(|config, guard| {
            let index = config
                .members
                .iter()
                .position(|m| m.name == name_or_id || m.agent_id == name_or_id)
                .ok_or_else(|| self.member_not_found(name_or_id))?;
            if config.members[index].agent_id == config.lead_agent_id {
                return Err(Error::NotPermitted {
                    action: format!("remove member {name_or_id:?}"),
                    reason: "it is the team's lead; delete the team instead".into(),
                });
            }
            let removed = config.members.remove(index);
            guard.emit(&self.name, crate::events::removed(config, &removed))?;
            Ok(Outcome::Write(removed))
        })
    }

    /// Deletes the team directory and its task list. Unless `force`, refuses while any
    /// member other than the lead is active (busy and not dead: a member whose process
    /// was killed, or a roster entry no process ever joined, does not hold the team up).
    pub fn delete(&self, force: bool) -> Result<()> {
        self.home.engine().delete_team(self, force)
    }

    /// [`Team::delete`] of files.
    pub(crate) fn delete_files(&self, force: bool) -> Result<()> {
        let path = self.config_path();
        let lock = crate::lock::FileLock::acquire(&path, self.home.lock_policy())?;
        let config =
            doc::load_locked::<TeamConfig>(&path, &lock)?.ok_or_else(|| self.not_found(&path))?;
        let active: Vec<String> = config
            .members
            .iter()
            .filter(|m| {
                m.agent_id != config.lead_agent_id && m.observed_state() == MemberState::Busy
            })
            .map(|m| m.name.to_string())
            .collect();
        if !force && !active.is_empty() {
            return Err(Error::TeamActive {
                team: self.name.to_string(),
                active,
            });
        }
        self.remove_local_dirs()
    }

    /// Removes the team's directories under `ROO_HOME`: renamed first, so concurrent
    /// operations see the team gone at once, then removed.
    fn remove_local_dirs(&self) -> Result<()> {
        let stamp = Timestamp::now().unix_ms();
        for dir in [
            self.home.team_dir(&self.name),
            self.home.tasks_dir(&self.name),
        ] {
            let Some(parent) = dir.parent() else { continue };
            let doomed = parent.join(format!(".{}.deleted-{stamp}", self.name));
            match std::fs::rename(&dir, &doomed) {
                Ok(()) => remove_renamed(&doomed)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove directory", &dir, e)),
            }
        }
        Ok(())
    }

    /// [`Team::delete`] in the PostgreSQL store: the same check and every row of the team
    /// gone in the config's transaction, then this host's own files of the team (the
    /// lead's key, transcripts, logs).
    pub(crate) fn delete_rows(&self, pg: &crate::pg::PgStore, force: bool) -> Result<()> {
        self.delete_team_rows(pg, &self.config_path(), force)?;
        // Its members' roles go with it (each loses its login first).
        if let Err(e) = pg.drop_member_roles(&self.name) {
            crate::quarantine::warn(format!("deleted team {}, but failed to {e}", self.name));
        }
        // This host's own files of the team (the lead's key, transcripts, logs).
        self.remove_local_dirs()
    }

    /// The rows of [`Team::delete_rows`].
    fn delete_team_rows(&self, pg: &crate::pg::PgStore, path: &Path, force: bool) -> Result<()> {
        use crate::pg::PgChange;
        let key = self.home.key(path)?;
        let team_dir = format!("{}/", self.home.key(&self.home.team_dir(&self.name))?);
        let tasks_dir = format!("{}/", self.home.key(&self.home.tasks_dir(&self.name))?);
        pg.update(&key, |text, writes| {
            let Some(text) = text else {
                return Err(self.not_found(path));
            };
            // The reader's rules: a newer major is refused, a damaged config reported.
            let config: TeamConfig =
                doc::parse_row(path, &text)?.ok_or_else(|| self.not_found(path))?;
            // Under the row lock: no member joins or holds a presence meanwhile.
            let liveness = self.liveness(&config)?;
            let active: Vec<String> = config
                .members
                .iter()
                .filter(|m| {
                    m.agent_id != config.lead_agent_id
                        && liveness.observed_state(m) == MemberState::Busy
                })
                .map(|m| m.name.to_string())
                .collect();
            if !force && !active.is_empty() {
                return Err(Error::TeamActive {
                    team: self.name.to_string(),
                    active,
                });
            }
            writes.delete_under(&team_dir);
            writes.delete_under(&tasks_dir);
            Ok(PgChange::Delete(()))
        })
    }

    /// Locked read → change → write of the config; refuses a missing team.
    pub(crate) fn update<R>(
        &self,
        change: impl FnMut(&mut TeamConfig) -> Result<Outcome<R>>,
    ) -> Result<R> {
        let path = self.config_path();
        if self.home.engine().surely_missing(&path) {
            return Err(self.not_found(&path));
        }
        doc::update(&self.home, &path, || Err(self.not_found(&path)), change)
    }

    /// [`Team::update`] whose change also gets the [`doc::Guard`], to emit the events of
    /// the change ([`doc::Guard::emit`]).
    pub(crate) fn update_logged<R>(
        &self,
        change: impl FnMut(&mut TeamConfig, &mut doc::Guard) -> Result<Outcome<R>>,
    ) -> Result<R> {
        let path = self.config_path();
        if self.home.engine().surely_missing(&path) {
            return Err(self.not_found(&path));
        }
        doc::update_fenced(&self.home, &path, || Err(self.not_found(&path)), change)
    }

    pub(crate) fn not_found(&self, path: &Path) -> Error {
        Error::TeamNotFound {
            team: self.name.to_string(),
            path: path.to_owned(),
            store: self.home.engine().target(),
        }
    }

    pub(crate) fn member_not_found(&self, name: &str) -> Error {
        Error::MemberNotFound {
            team: self.name.to_string(),
            name: name.to_owned(),
        }
    }
}

/// Removes a directory renamed out of the way. A writer that opened it (or a file in it)
/// before the rename may still finish a write there — a message acknowledged while the
/// team is deleted — so a removal that finds the directory not empty is retried a few
/// times; nobody can open it by its new name.
fn remove_renamed(doomed: &std::path::Path) -> Result<()> {
    let mut attempts = 0;
    loop {
        match std::fs::remove_dir_all(doomed) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty && attempts < 5 => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => return Err(Error::io("remove directory", doomed, e)),
        }
    }
}
