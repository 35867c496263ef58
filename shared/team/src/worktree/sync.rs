//! Keeping the lead's `roo/<team>/<name>` branches current: before each of the lead's
//! turns, [`BranchSync`] fetches the branch of every teammate whose clone's branch
//! changed since the last look, so the lead's own `git log roo/<team>/<name>` or `git
//! diff main...roo/<team>/<name>` shows the teammate's commits without running git
//! inside the teammate's clone (whose config the teammate wrote).
//!
//! Whether a clone's branch changed is decided from file metadata only (size and
//! modification time of its loose ref and of its `packed-refs`, never followed through
//! a link), so a turn with nothing new costs a directory listing and a few `lstat`s; a
//! clone whose loose branch ref names the commit the lead's loose ref of that branch
//! names (a clone made just now, whose teammate is starting) is not fetched either: two
//! small file reads instead of a fetch's five processes.
//! The fetch is [`LeadRepo::fetch_member_within`] (fast-forward only, hooks off) with the
//! short [`SYNC_FETCH_TIMEOUT`]; a failure is left for TeamMerge and TeamDelete to report
//! (with their longer limit), and is not tried again before the clone's branch changes:
//! a clone that fails its fetch — refused, too big for the turn's limit, or made to stall
//! — costs one attempt, not one per turn. A teammate on another host, where nothing says
//! whether its branch moved, is fetched each turn while that works and at most once per
//! [`REMOTE_RETRY_AFTER`] after a failure.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use futures_util::future::BoxFuture;
use roo_agent::{AgentHook, TurnAction};
use roo_store::Name;

use super::{Discovered, Git, LeadRepo, SYNC_FETCH_TIMEOUT, WORKTREES_DIR, is_clone_dir};
use crate::binding::TeamSlot;

/// What is known of a clone's branch without reading it: (size, mtime) of its loose
/// ref and of its `packed-refs`.
type Fingerprint = [Option<(u64, SystemTime)>; 2];

/// How long after a failed fetch from a teammate's host the turn hook waits before it
/// tries that host again.
pub const REMOTE_RETRY_AFTER: Duration = Duration::from_secs(120);

/// The last fingerprint tried (fetched or failed), per clone directory, and when each
/// remote teammate's fetch last failed.
#[derive(Debug, Default)]
pub struct SyncState {
    fetched: HashMap<PathBuf, Fingerprint>,
    remote_failed: HashMap<Name, Instant>,
}

fn stat(path: &Path) -> Option<(u64, SystemTime)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

impl LeadRepo {
    /// Fetches the branch of each clone of `team` whose branch changed since `state`
    /// last saw it; returns the members fetched.
    pub fn sync_team(&self, team: &Name, state: &mut SyncState) -> Vec<Name> {
        let dir = self.root.join(WORKTREES_DIR);
        let prefix = format!("{team}+");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut fetched = Vec::new();
        for entry in entries.filter_map(|e| e.ok()) {
            let path = entry.path();
            let Some(member) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .and_then(|m| Name::parse(m).ok())
            else {
                continue;
            };
            if !is_clone_dir(&path) {
                continue;
            }
            let git_dir = path.join(".git");
            let now: Fingerprint = [
                stat(&git_dir.join(format!("refs/heads/roo/{team}/{member}"))),
                stat(&git_dir.join("packed-refs")),
            ];
            if state.fetched.get(&path) == Some(&now) {
                continue;
            }
            if self.remotes().contains_key(&member) {
                continue;
            }
            // Nothing to fetch (a clone made just now, or no commit since): no git runs.
            if self.branch_is_the_leads(team, &member, &path) {
                state.fetched.insert(path, now);
                continue;
            }
            // Tried once per state of the branch, whatever the outcome.
            let result = self.fetch_member_within(team, &member, SYNC_FETCH_TIMEOUT);
            state.fetched.insert(path, now);
            match result {
                Ok(_) => fetched.push(member),
                Err(e) => {
                    tracing::debug!(%member, error = %e, "could not fetch a teammate's branch")
                }
            }
        }
        // Teammates on other hosts: nothing here says whether their branch moved, so
        // each is fetched (one ssh each; a fetch with nothing new transfers nothing) —
        // after a failure, not again before REMOTE_RETRY_AFTER.
        let mut remote: Vec<(&Name, &super::RemoteRepo)> = self.remotes().iter().collect();
        remote.sort_by(|a, b| a.0.cmp(b.0));
        for (member, repo) in remote {
            if state
                .remote_failed
                .get(member)
                .is_some_and(|at| at.elapsed() < REMOTE_RETRY_AFTER)
            {
                continue;
            }
            match self.fetch_remote(team, member, repo) {
                Ok(_) => {
                    state.remote_failed.remove(member);
                    fetched.push(member.clone());
                }
                Err(e) => {
                    state.remote_failed.insert(member.clone(), Instant::now());
                    tracing::debug!(%member, host = %repo.host, error = %e,
                        "could not fetch a teammate's branch from its host")
                }
            }
        }
        fetched
    }
}

impl LeadRepo {
    /// Whether the branch of `member`'s clone at `clone` names the commit the lead's branch
    /// of that name names, read from the two loose ref files only ([`loose_ref`]): then a
    /// fetch would bring nothing. A packed or symbolic ref, a link, anything but a
    /// plain object name says no, and the branch is fetched as before.
    fn branch_is_the_leads(&self, team: &Name, member: &Name, clone: &Path) -> bool {
        let refname = format!("refs/heads/{}", super::branch_name(team, member));
        let lead_dir = match &self.git_dir {
            Some(dir) => dir.clone(),
            None => self.root.join(".git"),
        };
        match (
            loose_ref(&clone.join(".git").join(&refname)),
            loose_ref(&lead_dir.join(&refname)),
        ) {
            (Some(theirs), Some(ours)) => theirs == ours,
            _ => false,
        }
    }
}

/// The object name a loose ref file holds — a regular file (never through a link, never
/// blocking: [`super::guard::read_small_bytes`]) of 40 or 64 lowercase hex digits and a
/// newline — or `None`.
fn loose_ref(path: &Path) -> Option<Vec<u8>> {
    let bytes = super::guard::read_small_bytes(path).ok()?;
    let name = bytes.strip_suffix(b"\n")?;
    let plain = matches!(name.len(), 40 | 64)
        && name
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
    plain.then(|| name.to_vec())
}

/// The lead's turn hook that runs [`LeadRepo::sync_team`] for the team it leads.
pub struct BranchSync {
    slot: TeamSlot,
    cwd: PathBuf,
    git: Git,
    hosts: Option<super::RemoteRepos>,
    state: Arc<Mutex<(Option<LeadRepo>, SyncState)>>,
}

impl BranchSync {
    /// For the lead bound to `slot`, working in `cwd`, fetching with `git`.
    pub fn new(slot: TeamSlot, cwd: PathBuf, git: Git) -> BranchSync {
        BranchSync {
            slot,
            cwd,
            git,
            hosts: None,
            state: Arc::new(Mutex::new((None, SyncState::default()))),
        }
    }

    /// Also fetches the branches of teammates on these hosts (the roster's `host`), over
    /// the lead's ssh.
    pub fn with_hosts(mut self, hosts: super::RemoteRepos) -> BranchSync {
        self.hosts = Some(hosts).filter(|h| !h.is_empty());
        self
    }
}

impl AgentHook for BranchSync {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async move {
            let Some(binding) = self.slot.get().filter(|b| b.is_lead()) else {
                return TurnAction::Continue;
            };
            let team = binding.team.name().clone();
            let (state, cwd, git) = (self.state.clone(), self.cwd.clone(), self.git.clone());
            let (hosts, store) = (self.hosts.clone(), binding.team.clone());
            let _ = tokio::task::spawn_blocking(move || {
                // Who works on another host, as the roster says now.
                let remotes = match (&hosts, hosts.as_ref().map(|_| store.config())) {
                    (Some(hosts), Some(Ok(config))) => super::remote_members(&config, hosts),
                    _ => Default::default(),
                };
                let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
                if state.0.is_none() {
                    // Found once: the lead's repository does not move.
                    match LeadRepo::discover(&cwd, &git) {
                        Ok(Discovered::Repo(repo)) => state.0 = Some(repo),
                        _ => return,
                    }
                }
                let (repo, seen) = &mut *state;
                if let Some(repo) = repo {
                    repo.clone().with_remotes(remotes).sync_team(&team, seen);
                }
            })
            .await;
            TurnAction::Continue
        })
    }
}
