//! The ready clone: one teammate's clone made in the background before any spawn asks for
//! it, so a spawn in a git repository does not wait for about eight sandboxed git runs.
//!
//! The lead prepares it after TeamCreate and again after each spawn that used one
//! ([`LeadRepo::prepare_ready`]): made exactly as [`LeadRepo::add_worktree`] makes a clone
//! (the same sandboxed `git clone --shared`, identity and checkout) at the neutral path
//! `.roocode/worktrees/.ready+<team>` on branch [`READY_BRANCH`]. A name starting with `.`
//! is never a member's, so cleanup and TeamMerge never take it for a teammate's clone.
//! What the clone copied of the lead's state is recorded in this process: the lead's HEAD,
//! where it points, every local branch (the clone's `origin/*`) and the identity; the lead's
//! uncommitted changes are never copied, by either path. So is a fingerprint of every file
//! of the clone (type, mode, inode, size, change time), taken without following a link.
//!
//! A spawn uses it only when the lead's state reads the same now, the member has no
//! branch yet, and the clone is still a real directory whose files all carry the recorded
//! fingerprint and pass the fetch guard's check; it is then renamed to the member's path
//! and its branch renamed (`git branch -m`, confined to the clone) while the lead's branch
//! is created. Anything else — stale, missing, tampered, replaced by a link — removes what
//! is there (never through a link) and the spawn makes its clone as before. A preparation
//! holds the worktrees lock, so a spawn during one waits for it. A ready clone is removed
//! by the team's cleanup (TeamDelete) and by [`ReadyClones::remove_all`] at the lead's exit.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use roo_store::Name;

use super::{
    LeadRepo, Result, WORKTREES_DIR, Worktree, WorktreeError, check_not_symlink,
    check_ref_component, is_clone_dir, lock_worktrees, new_clone_notices,
};

/// The ready clone's branch until a spawn renames it to the teammate's.
pub const READY_BRANCH: &str = "roo-ready-clone";

/// The directory name of `team`'s ready clone under `.roocode/worktrees`.
pub fn ready_dir_name(team: &Name) -> String {
    format!(".ready+{team}")
}

/// The ready clones this lead prepared, by repository root and team (in memory only: a
/// clone no record vouches for is never used).
#[derive(Debug, Default)]
pub struct ReadyClones {
    prepared: Mutex<HashMap<(PathBuf, Name), Prepared>>,
    /// Set by [`ReadyClones::remove_all`]: a preparation still running removes its clone.
    closed: std::sync::atomic::AtomicBool,
}

/// What a ready clone copied of the lead's state, and what it looked like when made.
#[derive(Debug, Clone)]
struct Prepared {
    state: LeadState,
    fingerprint: Vec<Entry>,
}

/// The lead's state a clone copies: HEAD and every local branch (`git show-ref --head`,
/// only `HEAD` and `refs/heads/`), what HEAD points to, and the commit identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeadState {
    refs: Vec<(String, String)>,
    symbolic: Option<String>,
    identity: Vec<(&'static str, String)>,
}

impl LeadState {
    fn head(&self) -> Option<&str> {
        self.refs
            .iter()
            .find(|(name, _)| name == "HEAD")
            .map(|(_, oid)| oid.as_str())
    }

    fn has_ref(&self, full_ref: &str) -> bool {
        self.refs.iter().any(|(name, _)| name == full_ref)
    }
}

/// One file of a clone as `lstat` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    path: PathBuf,
    mode: u32,
    ino: u64,
    size: u64,
    ctime: (i64, i64),
}

impl ReadyClones {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(PathBuf, Name), Prepared>> {
        self.prepared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a ready clone of `team` in the repository at `root` is recorded.
    pub fn has(&self, root: &Path, team: &Name) -> bool {
        self.lock()
            .contains_key(&(root.to_path_buf(), team.clone()))
    }

    /// Removes every ready clone recorded here (the lead exits); failures are logged.
    pub fn remove_all(&self) {
        let all: Vec<(PathBuf, Name)> = {
            let mut prepared = self.lock();
            self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
            prepared.drain().map(|(key, _)| key).collect()
        };
        for (root, team) in all {
            let dir = root.join(WORKTREES_DIR);
            if check_not_symlink(&dir, false).is_err() {
                continue;
            }
            let removed = lock_worktrees(&dir)
                .and_then(|_lock| remove_entry(&dir.join(ready_dir_name(&team))));
            if let Err(e) = removed {
                tracing::warn!("could not remove the ready clone of team {team}: {e}");
            }
        }
    }
}

/// Removes whatever is at `path` without following a link: a link or file is unlinked, a
/// real directory removed with its contents.
pub(crate) fn remove_entry(path: &Path) -> Result<()> {
    let io = |source| WorktreeError::Io {
        action: "remove",
        path: path.to_path_buf(),
        source,
    };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(e)),
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path).map_err(io),
        Ok(_) => std::fs::remove_file(path).map_err(io),
    }
}

/// Every file under `root` (not `root` itself, whose change time a rename sets), sorted,
/// read with `lstat`: a link is an entry, never followed.
fn fingerprint(root: &Path) -> std::io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for item in std::fs::read_dir(&dir)? {
            let item = item?;
            let path = item.path();
            let meta = std::fs::symlink_metadata(&path)?;
            if meta.is_dir() {
                pending.push(path.clone());
            }
            entries.push(Entry {
                path: path.strip_prefix(root).unwrap_or(&path).to_path_buf(),
                mode: meta.mode(),
                ino: meta.ino(),
                size: meta.size(),
                ctime: (meta.ctime(), meta.ctime_nsec()),
            });
        }
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(entries)
}

impl LeadRepo {
    /// This repository with the ready clones of `ready`: [`LeadRepo::add_worktree`] uses one
    /// when it matches, and [`LeadRepo::prepare_ready`] records the one it makes there.
    pub fn with_ready(mut self, ready: Arc<ReadyClones>) -> LeadRepo {
        self.ready = Some(ready);
        self
    }

    /// `<root>/.roocode/worktrees/.ready+<team>`.
    pub fn ready_path(&self, team: &Name) -> PathBuf {
        self.root.join(WORKTREES_DIR).join(ready_dir_name(team))
    }

    /// Makes `team`'s ready clone (see the module documentation) unless one is recorded
    /// and present; whatever else is at its path is removed first. Blocking. `Ok(false)`:
    /// none was made (no record to keep it in, or the lead's state moved meanwhile).
    pub fn prepare_ready(&self, team: &Name) -> Result<bool> {
        check_ref_component("team name", team)?;
        let Some(ready) = self.ready.clone() else {
            return Ok(false);
        };
        let path = self.ready_path(team);
        let dir = self.ensure_worktrees_dir()?;
        let _lock = lock_worktrees(&dir)?;
        if ready.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(false);
        }
        if ready.has(&self.root, team) && is_clone_dir(&path) {
            return Ok(true);
        }
        ready.lock().remove(&(self.root.clone(), team.clone()));
        remove_entry(&path)?;
        let state = self.lead_state()?;
        let (Some(head), false) = (
            state.head().map(str::to_string),
            state.symbolic.as_deref() == Some(&format!("refs/heads/{READY_BRANCH}")),
        ) else {
            return Ok(false);
        };
        let made = self
            .make_clone(&path, READY_BRANCH, &head, state.identity.clone())
            .and_then(|()| self.lead_state());
        let fresh = match made {
            Ok(after) if after == state => fingerprint(&path).ok(),
            Ok(_) => None,
            Err(e) => {
                let _ = remove_entry(&path);
                return Err(e);
            }
        };
        let Some(fingerprint) = fresh else {
            remove_entry(&path)?;
            return Ok(false);
        };
        let mut prepared = ready.lock();
        // The lead exited meanwhile: nothing is left behind.
        if ready.closed.load(std::sync::atomic::Ordering::SeqCst) {
            drop(prepared);
            remove_entry(&path)?;
            return Ok(false);
        }
        prepared.insert(
            (self.root.clone(), team.clone()),
            Prepared { state, fingerprint },
        );
        Ok(true)
    }

    /// The lead's state a clone copies, read by three sandboxed git runs at once.
    pub(crate) fn lead_state(&self) -> Result<LeadState> {
        let (refs, symbolic, identity) = std::thread::scope(|scope| {
            let symbolic =
                scope.spawn(|| self.git.run(&self.root, &["symbolic-ref", "-q", "HEAD"]));
            let identity = scope.spawn(|| self.identity());
            let refs = self.git.ok(&self.root, &["show-ref", "--head"]);
            (refs, super::joined(symbolic), super::joined(identity))
        });
        let refs = refs?
            .lines()
            .filter_map(|line| line.split_once(' '))
            .filter(|(_, name)| *name == "HEAD" || name.starts_with("refs/heads/"))
            .map(|(oid, name)| (name.to_string(), oid.to_string()))
            .collect();
        let symbolic = symbolic?;
        Ok(LeadState {
            refs,
            symbolic: symbolic.success.then(|| symbolic.stdout.trim().to_string()),
            identity: identity?,
        })
    }

    /// `member`'s clone at `path` (branch `branch`, which the lead does not have yet) from
    /// `team`'s ready clone, when one is recorded and usable; `None` otherwise, having
    /// removed what was at the ready path. Called under the worktrees lock, with nothing
    /// at `path`.
    pub(crate) fn take_ready(
        &self,
        team: &Name,
        path: &Path,
        branch: &str,
    ) -> Result<Option<Worktree>> {
        let Some(ready) = self.ready.clone() else {
            return Ok(None);
        };
        let Some(prepared) = ready.lock().remove(&(self.root.clone(), team.clone())) else {
            return Ok(None);
        };
        let ready_path = self.ready_path(team);
        let full_ref = format!("refs/heads/{branch}");
        let state = self.lead_state()?;
        let usable = state == prepared.state
            && !state.has_ref(&full_ref)
            && check_not_symlink(&ready_path, false).is_ok()
            && is_clone_dir(&ready_path);
        if !usable {
            remove_entry(&ready_path)?;
            return Ok(None);
        }
        // Moved first, then checked where it now is: nothing can change it between.
        if std::fs::rename(&ready_path, path).is_err() {
            remove_entry(&ready_path)?;
            return Ok(None);
        }
        let intact = check_not_symlink(path, false).is_ok()
            && fingerprint(path).is_ok_and(|now| now == prepared.fingerprint)
            && self.check_clone(path).is_ok();
        if !intact {
            remove_entry(path)?;
            return Ok(None);
        }
        match self.rename_ready(path, branch, &state) {
            Ok(notices) => Ok(Some(Worktree {
                path: path.to_path_buf(),
                branch: branch.to_string(),
                repo_root: self.root.clone(),
                base: state.head().unwrap_or_default().to_string(),
                reused: false,
                created_branch: true,
                notices,
            })),
            Err(e) => {
                // Made as before instead.
                tracing::warn!("could not use the ready clone for {branch}: {e}");
                remove_entry(path)?;
                Ok(None)
            }
        }
    }

    /// Renames the clone's branch to `branch` (confined to it) while the lead gets that
    /// branch at `head` and its tree is read for the notices; the lead's branch is
    /// deleted again on failure.
    fn rename_ready(&self, path: &Path, branch: &str, state: &LeadState) -> Result<Vec<String>> {
        let head = state.head().unwrap_or_default();
        let (renamed, created, dirty) = std::thread::scope(|scope| {
            let created = scope.spawn(|| {
                self.git
                    .ok(&self.root, &["branch", "--no-track", branch, head])
            });
            let dirty = scope.spawn(|| self.uncommitted(&self.root, false));
            let renamed = self
                .git
                .confined_to(path)
                .ok(path, &["branch", "-m", READY_BRANCH, branch]);
            (renamed, super::joined(created), super::joined(dirty))
        });
        let checked = renamed.and_then(|_| {
            // Read from the clone's HEAD file, as a new clone's branch is checked.
            if roo_agent::head_names_branch(path, branch) {
                Ok(())
            } else {
                Err(WorktreeError::Occupied {
                    path: path.to_path_buf(),
                    why: format!("after renaming its branch HEAD does not name {branch}"),
                })
            }
        });
        let done = checked.and(dirty);
        match (done, created) {
            (Ok(dirty), Ok(_)) => Ok(new_clone_notices(
                &dirty,
                state.symbolic.is_some(),
                path,
                head,
                branch,
            )),
            (Err(e), Ok(_)) => {
                let full_ref = format!("refs/heads/{branch}");
                let _ = self
                    .git
                    .ok(&self.root, &["update-ref", "-d", &full_ref, head]);
                Err(e)
            }
            (_, Err(e)) => Err(e),
        }
    }
}
