//! Verified merges: a teammate's branch lands on the user's branch only after a command
//! (`verify:` in the config, or TeamMerge's `verify`) passed on the merged tree.
//!
//! This module owns the repository side of it: the merge queue's lock
//! ([`MergeTurn`]), the merge commit made without touching the user's tree, index or
//! refs (`git merge-tree --write-tree` and `git commit-tree`, after the same checks as
//! a plain merge), the scratch checkout of that commit the command runs in
//! ([`ScratchTree`], a `git clone --shared` under the lead's git directory, out of
//! teammates' reach, removed when dropped), the sandbox of the command (the lead's,
//! with the project's tree and git directory replaced by the scratch tree), and the
//! fast-forward that moves the user's branch to exactly the verified commit. The
//! user's uncommitted changes are never in the scratch tree; the fast-forward leaves
//! them where they are and is refused when the merge changes a file they touch. Running the command is the caller's (it is async).

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use roo_agent::exec::Launcher;
use roo_store::Name;

use super::git::nul_fields;
use super::merge::Fetched;
use super::{LeadRepo, MergeOutcome, Result, WorktreeError, open_lock_file, summarize_files};

/// A turn of a repository's merge queue: while one is held, no other merge of that
/// repository (another TeamMerge of this lead, or of another lead process with the same
/// `ROO_HOME`) starts. Released when dropped, or when the process ends however it ends.
#[derive(Debug)]
pub struct MergeTurn {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl MergeTurn {
    /// The lock file of the merge queue of the repository at `root`, in `run_dir`
    /// (`$ROO_HOME/run`, hidden from every agent's commands, so a teammate cannot hold
    /// it): `merges/<digest of the resolved root>.lock`.
    pub fn path(run_dir: &Path, root: &Path) -> PathBuf {
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        let digest = ring::digest::digest(&ring::digest::SHA256, root.as_os_str().as_bytes());
        let name: String = digest.as_ref()[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        run_dir.join("merges").join(format!("{name}.lock"))
    }

    /// Takes the turn if no one holds it (`None`: another merge runs). The caller
    /// waits between attempts, so a cancelled call stops waiting at once.
    pub fn try_take(path: &Path) -> Result<Option<MergeTurn>> {
        if let Some(dir) = path.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| WorktreeError::Io {
                    action: "create the merge queue's directory",
                    path: dir.to_path_buf(),
                    source,
                })?;
        }
        let file = open_lock_file(path)?;
        Ok(super::try_flock(file, path)?
            .ok()
            .map(|lock| MergeTurn { _lock: lock }))
    }
}

/// What [`LeadRepo::prepare_verified`] came to.
#[derive(Debug)]
pub enum Verification {
    /// Nothing to verify: the branch is merged already, or the merge conflicts.
    Done(MergeOutcome),
    /// A merge commit, checked out in a scratch tree, ready for the command.
    Ready(PreparedMerge),
}

/// A merge commit made for verification; the user's branch does not know it yet.
#[derive(Debug)]
pub struct PreparedMerge {
    /// `roo/<team>/<member>`.
    pub branch: String,
    /// The user's HEAD commit the merge was made on.
    pub before: String,
    /// The merge commit (parents: `before`, then the teammate's commit).
    pub merge_commit: String,
    /// Files left uncommitted in the teammate's clone (not merged).
    pub left_uncommitted: Vec<String>,
    /// The checkout of `merge_commit`.
    pub scratch: ScratchTree,
    /// Where the command runs: the agent's directory within the scratch tree.
    pub workdir: PathBuf,
}

/// A scratch checkout under the lead's git directory (mode 0700), removed with
/// everything in it when dropped, whatever ended the verification.
#[derive(Debug)]
pub struct ScratchTree {
    path: PathBuf,
}

/// The directory of the scratch trees in the lead's git directory. Not the temp dir:
/// every agent's commands, teammates' included, may write `/tmp`, `/var/tmp` and
/// `$TMPDIR`, so a teammate's command could rewrite the tree while it is verified and
/// make a failing merge pass; a teammate may write its own clone only.
pub const SCRATCH_DIR: &str = "roo-verify";

impl ScratchTree {
    /// A new empty directory `roo-verify-<pid>-<n>` in `base` (made, mode 0700, when
    /// missing; refused when it is no directory or a symlink), made with `mkdir` (never
    /// one that existed).
    pub fn create(base: &Path) -> Result<ScratchTree> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        match std::fs::DirBuilder::new().mode(0o700).create(base) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(source) => {
                return Err(WorktreeError::Io {
                    action: "create the scratch trees' directory",
                    path: base.to_path_buf(),
                    source,
                });
            }
        }
        if !std::fs::symlink_metadata(base).is_ok_and(|meta| meta.is_dir()) {
            return Err(WorktreeError::Io {
                action: "use the scratch trees' directory",
                path: base.to_path_buf(),
                source: std::io::Error::other(
                    "it is no directory (or a symlink): remove it and merge again",
                ),
            });
        }
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("roo-verify-{}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(ScratchTree { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 10_000 => {}
                Err(source) => {
                    return Err(WorktreeError::Io {
                        action: "create the scratch tree",
                        path,
                        source,
                    });
                }
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchTree {
    fn drop(&mut self) {
        if std::fs::remove_dir_all(&self.path).is_ok() {
            return;
        }
        // A command may have left directories it cannot be removed from (mode 000):
        // make them the owner's again, never through a symlink, and try once more.
        make_removable(&self.path);
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "scratch tree not removed");
        }
    }
}

/// Gives every directory under `dir` (itself included, symlinks never followed) mode
/// 0700.
fn make_removable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            _ => continue,
        }
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(&dir) {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
}

/// What `git merge-tree --write-tree` said.
enum MergedTree {
    Clean(String),
    Conflict(Vec<PathBuf>),
}

impl LeadRepo {
    /// The first half of a verified merge of `roo/<team>/<member>`: the fetch and every
    /// check of a plain merge ([`LeadRepo::merge_checked`]; uncommitted changes of the
    /// user are allowed), then the merge commit on the current HEAD — made by `git
    /// merge-tree` and `git commit-tree`, so the user's refs, index and tree are not
    /// touched — refused when the user's uncommitted changes are in files it changes,
    /// and checked out in a fresh [`ScratchTree`]. `project_dir` is the agent's
    /// directory: the command runs in the same place within the scratch tree.
    pub fn prepare_verified(
        &self,
        team: &Name,
        member: &Name,
        allow_protected: bool,
        project_dir: &Path,
    ) -> Result<Verification> {
        let Fetched {
            branch,
            commit,
            left_uncommitted,
        } = self.fetch_for_merge(team, member, true)?;
        let before = self.head()?;
        if self.count(&format!("{before}..{commit}"))? == 0 {
            return Ok(Verification::Done(MergeOutcome::UpToDate {
                branch,
                left_uncommitted,
            }));
        }
        if !self.check_what_merge_writes(&branch, &commit, allow_protected)? {
            return Err(WorktreeError::VerifyNeedsMergeTree { branch });
        }
        let tree = match self.merged_tree(&branch, &before, &commit)? {
            MergedTree::Clean(tree) => tree,
            MergedTree::Conflict(files) => {
                return Ok(Verification::Done(MergeOutcome::Conflict { branch, files }));
            }
        };
        let message = format!("Merge {branch} (teammate {member} of team {team})");
        let merge_commit = self
            .git
            .ok(
                &self.root,
                &[
                    "commit-tree",
                    &tree,
                    "-p",
                    &before,
                    "-p",
                    &commit,
                    "-m",
                    &message,
                ],
            )?
            .trim()
            .to_string();
        self.check_uncommitted_apart(&branch, &before, &merge_commit)?;
        let git_dir = self
            .git_dir
            .clone()
            .unwrap_or_else(|| self.root.join(".git"));
        let scratch = ScratchTree::create(&git_dir.join(SCRATCH_DIR))?;
        let root = self.root.as_os_str();
        let target = scratch.path().as_os_str();
        let clone: [&std::ffi::OsStr; 7] = [
            "clone".as_ref(),
            "--shared".as_ref(),
            "--no-checkout".as_ref(),
            "--quiet".as_ref(),
            "--".as_ref(),
            root,
            target,
        ];
        self.git.ok(&self.root, &clone)?;
        self.git.confined_to(scratch.path()).ok(
            scratch.path(),
            &["checkout", "--quiet", "--detach", &merge_commit],
        )?;
        let workdir = std::fs::canonicalize(project_dir)
            .ok()
            .and_then(|dir| {
                let root = std::fs::canonicalize(&self.root).ok()?;
                dir.strip_prefix(root).ok().map(Path::to_path_buf)
            })
            .map(|rel| scratch.path().join(rel))
            .filter(|dir| dir.is_dir())
            .unwrap_or_else(|| scratch.path().to_path_buf());
        Ok(Verification::Ready(PreparedMerge {
            branch,
            before,
            merge_commit,
            left_uncommitted,
            scratch,
            workdir,
        }))
    }

    /// The tree the merge of `commit` into `before` makes, or its conflicted files.
    fn merged_tree(&self, branch: &str, before: &str, commit: &str) -> Result<MergedTree> {
        let args = [
            "-c",
            "merge.directoryRenames=false",
            "merge-tree",
            "--write-tree",
            "--no-messages",
            "--name-only",
            "-z",
            before,
            commit,
        ];
        let out = self.git.run(&self.root, &args)?;
        let mut fields = nul_fields(&out.stdout);
        let tree = fields.next().unwrap_or_default();
        let is_id =
            (tree.len() == 40 || tree.len() == 64) && tree.bytes().all(|b| b.is_ascii_hexdigit());
        if !is_id {
            if out.stderr.contains("usage") || out.stderr.contains("unknown option") {
                return Err(WorktreeError::VerifyNeedsMergeTree {
                    branch: branch.to_string(),
                });
            }
            return Err(self.git.failure(&self.root, &args, out.stderr));
        }
        if out.success {
            return Ok(MergedTree::Clean(tree.to_string()));
        }
        let files: BTreeSet<PathBuf> = fields.map(PathBuf::from).collect();
        Ok(MergedTree::Conflict(files.into_iter().collect()))
    }

    /// Refuses a merge that changes a file the user has uncommitted changes to (the
    /// fast-forward would have to touch them).
    fn check_uncommitted_apart(&self, branch: &str, before: &str, merge: &str) -> Result<()> {
        let dirty = self.uncommitted(&self.root, false)?;
        if dirty.is_empty() {
            return Ok(());
        }
        let changed = self.git.ok(
            &self.root,
            &["diff", "--name-only", "-z", "--no-renames", before, merge],
        )?;
        let changed: BTreeSet<&str> = nul_fields(&changed).collect();
        let overlap: Vec<String> = dirty
            .into_iter()
            .filter(|entry| entry.get(3..).is_some_and(|path| changed.contains(path)))
            .collect();
        if overlap.is_empty() {
            return Ok(());
        }
        Err(WorktreeError::DirtyOverlap {
            branch: branch.to_string(),
            files: summarize_files(&overlap),
        })
    }

    /// How the verify command is started: `base` (the agent's launcher) with its
    /// sandbox's write roots cut to `scratch` and what lies outside this repository's
    /// tree and git directory (the temp dirs, the shell's devices, the user's
    /// `allow_write`), and without the agent's team service (the command speaks for no
    /// member). Without a sandbox policy the command runs as the agent's Bash would.
    pub fn verify_launcher(&self, base: &Launcher, scratch: &Path) -> Launcher {
        let mut launcher = base.clone();
        launcher.service = None;
        if let Some(sandbox) = &launcher.sandbox {
            let mut sandbox = (**sandbox).clone();
            if let Some(policy) = sandbox.policy.as_mut() {
                let mut repo: Vec<PathBuf> = vec![self.root.clone()];
                repo.extend(std::fs::canonicalize(&self.root));
                repo.extend(self.git_dir.iter().cloned());
                let overlaps = |w: &Path| repo.iter().any(|r| w.starts_with(r) || r.starts_with(w));
                policy.write.retain(|w| !overlaps(w));
                policy.write.insert(0, scratch.to_path_buf());
            }
            launcher.sandbox = Some(std::sync::Arc::new(sandbox));
        }
        launcher
    }

    /// The second half: moves the user's branch (or detached HEAD) to the verified merge
    /// commit with `git merge --ff-only --no-overwrite-ignore`, which keeps the user's
    /// uncommitted changes and ignored files — refused when HEAD moved since
    /// [`LeadRepo::prepare_verified`] (what was verified would not be what lands) or an
    /// operation is in progress.
    pub fn finish_verified(&self, prepared: &PreparedMerge) -> Result<MergeOutcome> {
        let branch = prepared.branch.clone();
        let now = self.head()?;
        if now != prepared.before {
            return Err(WorktreeError::BranchMoved {
                branch,
                before: super::short(&prepared.before).to_string(),
                now: super::short(&now).to_string(),
            });
        }
        if let Some(what) = self.in_progress()? {
            return Err(WorktreeError::OperationInProgress {
                branch,
                what,
                root: self.root.clone(),
            });
        }
        // The user's tree went on while the command ran: an ignored file that appeared
        // where the merge writes is refused, not overwritten (git's default).
        let args = [
            "merge",
            "--ff-only",
            "--no-overwrite-ignore",
            "--quiet",
            &prepared.merge_commit,
        ];
        let out = self.git.run(&self.root, &args)?;
        let after = self.head()?;
        if !out.success {
            if after != prepared.before {
                return Err(WorktreeError::AbortFailed {
                    branch,
                    root: self.root.clone(),
                    why: format!("the fast-forward failed ({}) yet HEAD moved", out.stderr),
                });
            }
            return Err(self.git.failure(&self.root, &args, out.stderr));
        }
        if after != prepared.merge_commit {
            return Err(self.git.failure(
                &self.root,
                &args,
                format!("HEAD is {after}, not the verified merge commit"),
            ));
        }
        Ok(MergeOutcome::Merged {
            branch,
            commit: after,
            left_uncommitted: prepared.left_uncommitted.clone(),
        })
    }
}
