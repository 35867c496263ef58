//! Keeping the lead's `roo/<team>/<name>` branches current: before each of the lead's
//! turns, [`BranchSync`] fetches the branch of every teammate whose clone's branch
//! changed since the last look, so the lead's own `git log roo/<team>/<name>` or `git
//! diff main...roo/<team>/<name>` shows the teammate's commits without running git
//! inside the teammate's clone (whose config the teammate wrote).
//!
//! Whether a clone's branch changed is decided from file metadata only (size and
//! modification time of its loose ref and of its `packed-refs`, never followed through
//! a link), so a turn with nothing new costs a directory listing and a few `lstat`s.
//! The fetch is [`LeadRepo::fetch_member`] (fast-forward only, hooks off); a failure is
//! left for TeamMerge and TeamDelete to report.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use futures_util::future::BoxFuture;
use roo_agent::agent_loop::{TurnAction, TurnHook};
use roo_store::Name;

use super::{Discovered, Git, LeadRepo, WORKTREES_DIR, is_clone_dir};
use crate::binding::TeamSlot;

/// What is known of a clone's branch without reading it: (size, mtime) of its loose
/// ref and of its `packed-refs`.
type Fingerprint = [Option<(u64, SystemTime)>; 2];

/// The last fingerprint fetched, per clone directory.
#[derive(Debug, Default)]
pub struct SyncState {
    fetched: HashMap<PathBuf, Fingerprint>,
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
            match self.fetch_member(team, &member) {
                Ok(_) => {
                    state.fetched.insert(path, now);
                    fetched.push(member);
                }
                Err(e) => {
                    tracing::debug!(%member, error = %e, "could not fetch a teammate's branch")
                }
            }
        }
        // Teammates on other hosts: nothing here says whether their branch moved, so
        // each is fetched (one ssh each; a fetch with nothing new transfers nothing).
        let mut remote: Vec<(&Name, &super::RemoteRepo)> = self.remotes().iter().collect();
        remote.sort_by(|a, b| a.0.cmp(b.0));
        for (member, repo) in remote {
            match self.fetch_remote(team, member, repo) {
                Ok(_) => fetched.push(member.clone()),
                Err(e) => tracing::debug!(%member, host = %repo.host, error = %e,
                    "could not fetch a teammate's branch from its host"),
            }
        }
        fetched
    }
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

impl TurnHook for BranchSync {
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
