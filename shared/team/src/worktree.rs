//! One checkout per teammate, so teammates never overwrite each other and the lead
//! merges each one's branch with `--no-ff` (docs/WORKTREES.md): since issue 18 a clone
//! of the lead's repository, not a `git worktree`.
//!
//! A teammate `name` of team `team` works in `<repo>/.roocode/worktrees/<team>+<name>`,
//! a `git clone --shared` of the lead's repository (it reads the lead's objects through
//! `objects/info/alternates` and writes only its own), on branch `roo/<team>/<name>`
//! checked out by its short name, started from the lead's branch of that name when it
//! exists or else the lead's `HEAD`. Its command sandbox may write the clone only, so
//! nothing it does can move or delete a ref, the stash, a reflog, the index, a hook or
//! the config of the lead's repository, or prune its objects: a teammate may be
//! hostile, so nothing it writes into a git directory may run with the lead's rights.
//! The lead's runtime brings the branch in with `git fetch` ([`LeadRepo::fetch_member`],
//! fast-forward only) before it inspects, merges or cleans up; `upload-pack` ignores
//! the clone's hooks and program-valued config. This module creates (or reuses) the
//! clones, tells the lead when teammates must share its working directory instead
//! (outside a repository, no commit yet, a bare repository), cleans them up at the end —
//! removing the clean ones and keeping and reporting those with work or git-ignored
//! files in them — and merges a teammate's branch with `git merge --no-ff`, aborting
//! cleanly on a conflict. The API keeps the word *worktree* for the teammate's checkout.
//!
//! **The git CLI, not git2.** git2 is on the design card, but every operation here
//! is a handful of porcelain commands run a few times per team, where the CLI is
//! clearly better: it honours the user's git — config, LFS and other filters on
//! checkout, merge drivers, reftable and SHA-256 repositories — where libgit2
//! supports a subset; the lead's project detection already uses it; and libgit2 (C,
//! with its TLS and SSH dependencies) stays out of a 2-core build. The cost is a
//! process per command (a few ms), irrelevant at this rate. Everything here is
//! blocking: async callers use `spawn_blocking`. Every run has hooks and the
//! fsmonitor off (`worktree/git.rs`).
//!
//! **Safety.** Team and member names are [`Name`]s (no `/`, `..` or NUL can reach
//! a path) and must also make a valid branch name (no `..`, no `.lock` or `.`
//! ending). `.roocode`, `.roocode/worktrees` and the teammate's entry are never
//! followed through a symlink: a repository that commits `.roocode/worktrees` as
//! a link to `~` gets an error, not clones in your home directory. An existing
//! clone is reused only when it is on the teammate's own branch; anything else in
//! its place is an error that names it. `.roocode/worktrees/.gitignore` (`*`) keeps
//! the clones out of the lead's `git status`, `git add -A` and searches.
//!
//! The teammate's tools are confined to its clone by making the clone the project
//! root of its permission policy and command sandbox (see [`roots`]).

mod cleanup;
mod git;
mod guard;
mod merge;
mod new_clone;
pub mod remote;
pub mod remote_gc;
pub mod roots;
pub mod subagents;
mod sync;
mod verify;

use std::path::{Path, PathBuf};

use roo_store::Name;

pub use cleanup::{CleanupReport, CommitSummary, Kept, KeptWhy, LeftWork, Removed, WorkChanges};
pub use git::Git;
pub use guard::{FETCH_TIMEOUT, LOCAL_FETCH_TIMEOUT, SYNC_FETCH_TIMEOUT, check_clone_for_fetch};
pub use merge::{MAX_MERGE_BYTES, MAX_MERGE_FILES, MergeOutcome};
pub use remote::{RemoteRepo, RemoteRepos, RemoteWorktree, remote_members};
pub use remote_gc::{RemoteRemoval, check_recorded_clone};
pub use roots::{TeammateRoots, teammate_policy};
pub use sync::{BranchSync, REMOTE_RETRY_AFTER, SyncState};
pub use verify::{MergeTurn, PreparedMerge, ScratchTree, Verification};

/// `.roocode/worktrees` under the repository root.
pub const WORKTREES_DIR: &str = ".roocode/worktrees";

/// Most entries listed in a report (files, commits); the count says the rest.
pub const REPORT_LIMIT: usize = 50;

/// What went wrong with a worktree operation. Messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// git could not be started.
    #[error("run {program}: {source}; install git or put it on PATH", program = .program.display())]
    GitUnavailable {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A git command failed.
    #[error("run `git {command}` in {dir}: {stderr}", dir = .dir.display())]
    Git {
        command: String,
        dir: PathBuf,
        stderr: String,
    },
    /// A team or member name cannot be a branch name.
    #[error(
        "use {what} {value:?} in a branch name: {reason}; pick a name without `..` that does not end in `.` or `.lock`"
    )]
    BranchName {
        what: &'static str,
        value: String,
        reason: &'static str,
    },
    /// A path on the way to the worktree is a symlink.
    #[error(
        "use {path}: it is a symlink, and RooCode never follows one under .roocode/worktrees; remove it (it may come from the repository)",
        path = .path.display()
    )]
    Symlink { path: PathBuf },
    /// A path on the way to the worktree is not a directory.
    #[error("use {path}: it exists and is not a directory; move it away", path = .path.display())]
    NotADirectory { path: PathBuf },
    /// Something else occupies the teammate's worktree path.
    #[error("create the worktree {path}: {why}", path = .path.display())]
    Occupied { path: PathBuf, why: String },
    /// The teammate's branch is checked out in another worktree.
    #[error(
        "create the worktree {path}: branch {branch} is checked out in {elsewhere}; remove that worktree or pick another member name",
        path = .path.display(),
        elsewhere = .elsewhere.display()
    )]
    BranchCheckedOut {
        path: PathBuf,
        branch: String,
        elsewhere: PathBuf,
    },
    /// The lead's tree has uncommitted changes to tracked files.
    #[error(
        "merge {branch}: the lead's working tree has uncommitted changes ({files}); commit or stash them first, so a conflict can be aborted without touching them"
    )]
    LeadTreeDirty { branch: String, files: String },
    /// A merge, rebase, cherry-pick or revert is already in progress.
    #[error("merge {branch}: a {what} is already in progress in {root}; finish or abort it first", root = .root.display())]
    OperationInProgress {
        branch: String,
        what: &'static str,
        root: PathBuf,
    },
    /// The branch changes what configures RooCode or git; not merged without the
    /// person's say.
    #[error(
        "merge {branch}: it changes {}, which configure RooCode or git or are its instructions (a ROOCODE.md or a file one includes) and act with the user's rights later; nothing was merged. Review them (`git diff HEAD...{branch} -- <file>`), then merge with protected: true, which the user is asked to approve",
        files.join(", ")
    )]
    ProtectedChanges { branch: String, files: Vec<String> },
    /// The merge would write where the lead's tree holds files git does not track.
    #[error(
        "merge {branch}: it would overwrite or remove {paths} in the lead's tree, which git does not track (git replaces ignored files without asking); nothing was merged. Move them out of the way and merge again, or, if the teammate committed these paths by mistake, have it remove them from its branch (`git rm -r --cached <path>`, then commit) and merge again"
    )]
    MergeWouldOverwrite { branch: String, paths: String },
    /// The merge would replace a submodule by a file or directory, removing its checkout.
    #[error(
        "merge {branch}: it would replace the submodule {paths} by a file or directory, which removes the submodule's checkout (its ignored files and unpushed commits too); nothing was merged. Have the teammate keep the submodule in its branch, or remove the submodule by hand first (after saving what is in it) and merge again"
    )]
    MergeReplacesSubmodule { branch: String, paths: String },
    /// The merge would write more than the limits allow.
    #[error(
        "merge {branch}: it would {what} the lead's tree, more than a merge may ({files} files, {mib} MiB; a few commits of repeated directories can expand that far); nothing was merged. See what it holds with `git diff --stat HEAD...{branch}`, and have the teammate leave generated or bulk files out of its branch",
        files = merge::MAX_MERGE_FILES,
        mib = merge::MAX_MERGE_BYTES >> 20
    )]
    MergeTooLarge { branch: String, what: String },
    /// The user's uncommitted changes are in files a verified merge changes.
    #[error(
        "merge {branch}: your uncommitted changes to {files} are in files the merge changes; nothing was merged. A verified merge never touches uncommitted work: commit them (or move them away) and merge again"
    )]
    DirtyOverlap { branch: String, files: String },
    /// The lead's branch moved while a merge was verified.
    #[error(
        "merge {branch}: the lead's branch moved from {before} to {now} while the merge was verified, so the verified merge is not what would land; nothing was merged. Merge again to verify the merge with the new commits"
    )]
    BranchMoved {
        branch: String,
        before: String,
        now: String,
    },
    /// A verified merge needs `git merge-tree --write-tree`.
    #[error(
        "merge {branch} with verify: this git cannot compute a merge without a working tree (`git merge-tree --write-tree` needs git 2.38 or later); update git, or merge without verify"
    )]
    VerifyNeedsMergeTree { branch: String },
    /// The teammate's branch does not exist.
    #[error("merge {branch}: no such branch in {root}", root = .root.display())]
    NoBranch { branch: String, root: PathBuf },
    /// `git merge --abort` did not restore the lead's tree.
    #[error(
        "abort the conflicted merge of {branch} in {root}: {why}; run `git merge --abort` or `git reset --merge` there",
        root = .root.display()
    )]
    AbortFailed {
        branch: String,
        root: PathBuf,
        why: String,
    },
    /// The teammate's branch could not be brought into the lead's repository.
    #[error(
        "fetch {branch} from the teammate's clone {path}: {stderr}; if it is not a fast-forward of the lead's {branch}, have the teammate merge or rebase onto it",
        path = .path.display()
    )]
    Fetch {
        branch: String,
        path: PathBuf,
        stderr: String,
    },
    /// The teammate's clone holds what no fetch may read: git would follow it outside
    /// the clone (a symlink, extra alternates) or block on it (a FIFO).
    #[error(
        "fetch {branch} from the teammate's clone {path}: refused, {why}; nothing was fetched",
        path = .path.display()
    )]
    UnsafeClone {
        branch: String,
        path: PathBuf,
        why: String,
    },
    /// A step on another host (a teammate's clone there) failed.
    #[error("{what} on host {host}: {stderr}")]
    Remote {
        host: String,
        what: String,
        stderr: String,
    },
    /// A file-system operation failed.
    #[error("{action} {path}: {source}", path = .path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Result of this module.
pub type Result<T, E = WorktreeError> = std::result::Result<T, E>;

/// Where a teammate works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workspace {
    /// Its own worktree.
    Worktree(Worktree),
    /// The lead's directory, shared by every teammate; tell the lead why.
    Shared { dir: PathBuf, why: SharedWhy },
}

/// Why teammates share the lead's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SharedWhy {
    /// The directory is not in a git repository.
    NotARepository,
    /// The repository has no commit to branch from.
    NoCommits,
    /// A bare repository (or its git directory) has no working tree.
    NoWorkTree,
    /// git is not installed.
    NoGit(String),
}

impl Workspace {
    /// The teammate's working directory, and the project root of its file
    /// tools and command sandbox.
    pub fn dir(&self) -> &Path {
        match self {
            Workspace::Worktree(w) => &w.path,
            Workspace::Shared { dir, .. } => dir,
        }
    }

    /// What the lead should be told: why teammates share its directory, and
    /// the notes of a new worktree (a dirty lead tree, a detached HEAD).
    pub fn notices(&self) -> Vec<String> {
        match self {
            Workspace::Worktree(w) => w.notices.clone(),
            Workspace::Shared { dir, why } => {
                let why = match why {
                    SharedWhy::NotARepository => "it is not in a git repository".to_string(),
                    SharedWhy::NoCommits => {
                        "its repository has no commit yet to branch worktrees from (commit once to \
                         give each teammate its own)"
                            .to_string()
                    }
                    SharedWhy::NoWorkTree => {
                        "it is a bare repository or a git directory, with no working tree"
                            .to_string()
                    }
                    SharedWhy::NoGit(e) => format!("git cannot be run ({e})"),
                };
                vec![format!(
                    "teammates share the working directory {} because {why}: they see and can \
                     overwrite each other's changes, so give them separate files",
                    dir.display()
                )]
            }
        }
    }
}

/// A teammate's worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    /// `<repo>/.roocode/worktrees/<team>+<name>`.
    pub path: PathBuf,
    /// `roo/<team>/<name>`.
    pub branch: String,
    /// The lead's repository root.
    pub repo_root: PathBuf,
    /// The commit its branch started from (or, when reused, its tip).
    pub base: String,
    /// Whether it existed already (a restarted teammate continues there).
    pub reused: bool,
    /// Whether the lead's branch `roo/<team>/<name>` was created for it.
    pub created_branch: bool,
    /// Notes for the lead.
    pub notices: Vec<String>,
}

/// The lead's git repository.
#[derive(Debug, Clone)]
pub struct LeadRepo {
    root: PathBuf,
    git: Git,
    /// The repository's shared git directory, when verified (see [`LeadRepo::git_dir`]).
    git_dir: Option<PathBuf>,
    /// Teammates whose clones are on other hosts ([`LeadRepo::with_remotes`]).
    remotes: std::sync::Arc<std::collections::HashMap<Name, remote::RemoteRepo>>,
    /// The lead agent's project root when it is a directory inside the repository
    /// ([`LeadRepo::with_project_root`]): its instructions are protected on a merge too.
    project_root: Option<PathBuf>,
}

/// What [`LeadRepo::discover`] found.
#[derive(Debug, Clone)]
pub enum Discovered {
    /// A repository with a working tree and a commit.
    Repo(LeadRepo),
    /// No worktrees possible here; teammates share `dir`.
    Shared { dir: PathBuf, why: SharedWhy },
}

/// One entry of `git worktree list --porcelain` (worktrees of older versions).
#[derive(Debug, Clone, Default)]
pub(crate) struct ListedWorktree {
    pub(crate) path: PathBuf,
    pub(crate) head: Option<String>,
    /// Full ref name (`refs/heads/…`), `None` when detached.
    pub(crate) branch: Option<String>,
    pub(crate) locked: bool,
    pub(crate) prunable: bool,
}

/// `reported` (git's `--git-common-dir`) resolved, if `root`'s own `.git` confirms it.
fn verified_git_dir(root: &Path, reported: &Path) -> Option<PathBuf> {
    let reported = std::fs::canonicalize(reported).ok()?;
    let dot_git = root.join(".git");
    let verified = if std::fs::symlink_metadata(&dot_git).ok()?.is_dir() {
        std::fs::canonicalize(&dot_git).ok()?
    } else {
        roo_agent::exec::sandbox::linked_git_dirs(root)
            .into_iter()
            .next()?
    };
    (verified == reported).then_some(verified)
}

/// The branch of `member` of `team`: `roo/<team>/<member>`.
pub fn branch_name(team: &Name, member: &Name) -> String {
    format!("roo/{team}/{member}")
}

/// The worktree directory name of `member` of `team`: `<team>+<member>`
/// (`+` cannot occur in a [`Name`], so the split is unambiguous).
pub fn worktree_dir_name(team: &Name, member: &Name) -> String {
    format!("{team}+{member}")
}

/// Refuses names git would refuse in `roo/<team>/<name>`: [`Name`] already
/// excludes `/`, spaces, control characters and a leading `.`.
fn check_ref_component(what: &'static str, name: &Name) -> Result<()> {
    match name.ref_component_problem() {
        Some(reason) => Err(WorktreeError::BranchName {
            what,
            value: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Where `member` of `team` works, from the lead's directory `cwd`: its worktree
/// (created or reused), or the shared directory with the reason.
pub fn prepare(cwd: &Path, team: &Name, member: &Name, git: &Git) -> Result<Workspace> {
    match LeadRepo::discover(cwd, git)? {
        Discovered::Repo(repo) => repo.add_worktree(team, member).map(Workspace::Worktree),
        Discovered::Shared { dir, why } => Ok(Workspace::Shared { dir, why }),
    }
}

/// How long each direct git run of the lead's repository may take: [`LeadRepo::discover`]'s,
/// and the reads of its refs when a clone is made.
const DISCOVERY_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

impl LeadRepo {
    /// Finds the repository `cwd` is in. Outside a repository, in one without
    /// a commit, in a bare one, or without git, teammates share `cwd`.
    pub fn discover(cwd: &Path, git: &Git) -> Result<Discovered> {
        let shared = |why| {
            Ok(Discovered::Shared {
                dir: cwd.to_path_buf(),
                why,
            })
        };
        // One git run answers all four questions, in order: a working tree or not, its
        // top level, the shared git directory, and the commit worktrees branch from
        // (the last fails, exit 1, while there is no commit). It reads only the
        // repository's files and refs, never an object (so no lazy fetch) nor a program
        // the config names: it runs directly, not through the sandbox's two launches, and
        // bounded in time (a FIFO planted as a ref cannot hold it). Whether HEAD is a
        // commit is checked when a clone is made from it, confined (`new_clone.rs`).
        git::existing_dir(cwd)?;
        let began = std::time::Instant::now();
        let probe = match git.run_limited(
            cwd,
            &[
                "rev-parse",
                "--is-inside-work-tree",
                "--show-toplevel",
                "--git-common-dir",
                "--verify",
                "-q",
                "HEAD",
            ],
            DISCOVERY_LIMIT,
        ) {
            Ok(out) => out,
            Err(WorktreeError::GitUnavailable { source, .. }) => {
                return shared(SharedWhy::NoGit(source.to_string()));
            }
            Err(e) => return Err(e),
        };
        // A git that did not answer is not "no repository": sharing the lead's tree then
        // would hand every teammate the lead's files. It stops the spawn, saying why.
        if !probe.success && began.elapsed() >= DISCOVERY_LIMIT {
            return Err(WorktreeError::Git {
                command: "rev-parse --show-toplevel".to_string(),
                dir: cwd.to_path_buf(),
                stderr: format!(
                    "{}; a FIFO or device in the repository's .git (such as .git/HEAD) can \
                     hold git: check the repository",
                    probe.stderr
                ),
            });
        }
        let mut lines = probe.stdout.split_terminator('\n');
        match lines.next() {
            Some("true") => {}
            Some("false") => return shared(SharedWhy::NoWorkTree),
            _ => return shared(SharedWhy::NotARepository),
        }
        let (Some(top), Some(common)) = (lines.next(), lines.next()) else {
            return Err(WorktreeError::Git {
                command: "rev-parse --show-toplevel --git-common-dir".to_string(),
                dir: cwd.to_path_buf(),
                stderr: format!(
                    "unexpected output {:?} {}",
                    probe.stdout,
                    probe.stderr.trim()
                ),
            });
        };
        let root = std::fs::canonicalize(top).map_err(|source| WorktreeError::Io {
            action: "resolve the repository root",
            path: PathBuf::from(top),
            source,
        })?;
        if lines.next().is_none() {
            return Ok(Discovered::Shared {
                dir: root,
                why: SharedWhy::NoCommits,
            });
        }
        let git_dir = verified_git_dir(&root, &cwd.join(common));
        Ok(Discovered::Repo(LeadRepo {
            root,
            git: git.clone(),
            git_dir,
            remotes: Default::default(),
            project_root: None,
        }))
    }

    /// The repository's shared git directory (where worktrees and their branches are
    /// recorded; a teammate's commits write it), when git's answer matches what the
    /// checkout itself shows: its `.git` directory, or the verified target of its
    /// `.git` file ([`roo_agent::exec::sandbox::linked_git_dirs`]). `None` when they differ.
    pub fn git_dir(&self) -> Option<&Path> {
        self.git_dir.as_deref()
    }

    /// The repository's root (the lead's working tree), resolved.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where a new worktree of `member` of `team` will be and its branch, when one can
    /// be created while the teammate starts (see `Spawner::spawn`): the names make a
    /// branch, the shared git directory is verified, and nothing is at the path yet.
    /// `None`: prepare it first ([`LeadRepo::add_worktree`] says what is wrong, or
    /// reuses what is there).
    pub fn planned_worktree(&self, team: &Name, member: &Name) -> Option<(PathBuf, String)> {
        check_ref_component("team name", team).ok()?;
        check_ref_component("member name", member).ok()?;
        self.git_dir.as_ref()?;
        let path = self.worktree_path(team, member);
        for dir in [self.root.join(".roocode"), self.root.join(WORKTREES_DIR)] {
            match std::fs::symlink_metadata(&dir) {
                Ok(meta) if meta.is_dir() => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                _ => return None,
            }
        }
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Some((path, branch_name(team, member)))
            }
            _ => None,
        }
    }

    /// `<root>/.roocode/worktrees/<team>+<member>`.
    pub fn worktree_path(&self, team: &Name, member: &Name) -> PathBuf {
        self.root
            .join(WORKTREES_DIR)
            .join(worktree_dir_name(team, member))
    }

    /// Creates the clone of `member` of `team` (`git clone --shared`: it reads the
    /// lead's objects and writes only its own) on branch `roo/<team>/<member>`, from
    /// the lead's branch of that name when it exists (a restarted teammate continues
    /// its work) or else the lead's HEAD; or reuses the clone already there when it is
    /// on that branch. The lead's repository gets the branch too (at the clone's
    /// start), so [`LeadRepo::fetch_member`] can bring the teammate's commits in.
    pub fn add_worktree(&self, team: &Name, member: &Name) -> Result<Worktree> {
        check_ref_component("team name", team)?;
        check_ref_component("member name", member)?;
        let branch = branch_name(team, member);
        let full_ref = format!("refs/heads/{branch}");
        let path = self.worktree_path(team, member);
        let dir = self.ensure_worktrees_dir()?;
        let _lock = lock_worktrees(&dir)?;
        check_not_symlink(&path, true)?;

        let mut notices = Vec::new();
        if std::fs::symlink_metadata(&path).is_ok() {
            return self.reuse_clone(path, branch, notices);
        }
        // What the lead's repository says, read concurrently by direct git runs that read
        // refs only (bounded, as discovery): its HEAD, the member's branch if it exists,
        // and whether HEAD is on a branch (docs/WORKTREES.md "Making a clone: what runs where").
        let (head, existing, on_branch) = std::thread::scope(|scope| {
            let existing = scope.spawn(|| self.read_ref(&full_ref));
            let on_branch = scope.spawn(|| self.on_branch());
            (self.read_ref("HEAD"), joined(existing), joined(on_branch))
        });
        let (head, existing, on_branch) = (head?, existing?, on_branch?);
        let Some(head) = head else {
            return Err(WorktreeError::Git {
                command: "rev-parse -q --verify HEAD".to_string(),
                dir: self.root.clone(),
                stderr: "HEAD names no commit".to_string(),
            });
        };
        let base = match &existing {
            Some(tip) => {
                let ahead = self.count(&format!("HEAD..{full_ref}"))?;
                notices.push(format!(
                    "branch {branch} existed already ({ahead} commit(s) not in the lead's \
                     HEAD); its clone continues from it"
                ));
                tip.clone()
            }
            None => head.clone(),
        };
        // Everything else is one confined launch, the lead's status for the notice too.
        let created_branch = existing.is_none();
        let dirty = match self.make_clone(&path, &branch, &base, created_branch) {
            Ok(dirty) => dirty,
            Err(e) => {
                // Nothing half-made stays behind.
                let _ = std::fs::remove_dir_all(&path);
                return Err(e);
            }
        };
        if !dirty.is_empty() {
            notices.push(format!(
                "the lead's working tree has uncommitted changes ({}); the clone {} starts \
                 from HEAD {} without them: commit them first if teammates need them",
                summarize_files(&dirty),
                path.display(),
                short(&head)
            ));
        }
        if !on_branch {
            notices.push(format!(
                "the lead is on a detached HEAD ({}); {branch} starts there, and merging it \
                 back adds a merge commit on the detached HEAD",
                short(&head)
            ));
        }
        Ok(Worktree {
            path,
            branch,
            repo_root: self.root.clone(),
            base,
            reused: false,
            created_branch,
            notices,
        })
    }

    /// The clone at `path` when it is one on `branch` (a restarted teammate);
    /// anything else there is an error naming it.
    fn reuse_clone(&self, path: PathBuf, branch: String, notices: Vec<String>) -> Result<Worktree> {
        let occupied = |why: String| WorktreeError::Occupied {
            path: path.clone(),
            why,
        };
        if !is_clone_dir(&path) {
            return Err(occupied(
                "it exists and is not a teammate's clone (a `.git` directory of its own); move \
                 it away (a worktree of an older RooCode: `git worktree remove` it) or pick \
                 another member name"
                    .to_string(),
            ));
        }
        // An earlier teammate wrote it: checked like a fetch before any git reads it.
        if let Err(why) = self.check_clone(&path) {
            return Err(occupied(format!(
                "it is a clone git must not read: {why}; move it away or pick another member \
                 name"
            )));
        }
        let git = self.git.confined_to(&path);
        let on = git.run(&path, &["symbolic-ref", "-q", "HEAD"])?;
        let full_ref = format!("refs/heads/{branch}");
        if on.stdout.trim() != full_ref {
            let on = match on.stdout.trim() {
                "" => "a detached HEAD".to_string(),
                b => format!("branch {}", b.trim_start_matches("refs/heads/")),
            };
            return Err(occupied(format!(
                "it is a clone on {on}, not on {branch}; check out {branch} there, or move it \
                 away or pick another member name"
            )));
        }
        let base = git
            .ok(&path, &["rev-parse", "--verify", "-q", "HEAD^{commit}"])?
            .trim()
            .to_string();
        Ok(Worktree {
            path,
            branch,
            repo_root: self.root.clone(),
            base,
            reused: true,
            created_branch: false,
            notices,
        })
    }

    /// Undoes [`LeadRepo::add_worktree`] for a teammate whose spawn was refused: its
    /// new clone is removed, and the branch when the spawn created it.
    pub fn discard_new(&self, worktree: &Worktree) -> Result<()> {
        if worktree.reused {
            return Ok(());
        }
        if is_clone_dir(&worktree.path) {
            std::fs::remove_dir_all(&worktree.path).map_err(|source| WorktreeError::Io {
                action: "remove",
                path: worktree.path.clone(),
                source,
            })?;
        }
        if worktree.created_branch {
            let full_ref = format!("refs/heads/{}", worktree.branch);
            self.git
                .ok(&self.root, &["update-ref", "-d", &full_ref, &worktree.base])?;
        }
        Ok(())
    }

    /// Brings the teammate's branch from its clone into the lead's repository
    /// (`git fetch`, fast-forward only, no tags). Runs git's `upload-pack` in the
    /// clone, which ignores the clone's hooks and program-valued config. A branch
    /// that is not a fast-forward of the lead's is an error, never forced.
    ///
    /// The fetch runs with the lead's rights outside any sandbox, so the clone's whole
    /// git directory is checked first (`worktree/guard.rs`): no symlink, FIFO or other
    /// special file anywhere in it, nothing that redirects git (`commondir`, grafts,
    /// extra alternates, a config include) — a teammate cannot make the fetch read a
    /// file its sandbox hides, or block. The fetch names the clone's `.git` itself and runs
    /// `upload-pack --strict` ([`guard::LOCAL_UPLOAD_PACK`]), so git never takes the
    /// clone's work tree for its repository. It gets [`LOCAL_FETCH_TIMEOUT`], and git's
    /// message never reaches the model.
    pub fn fetch_member(&self, team: &Name, member: &Name) -> Result<bool> {
        self.fetch_member_within(team, member, LOCAL_FETCH_TIMEOUT)
    }

    /// [`LeadRepo::fetch_member`] with at most `limit` for a local clone's fetch (the turn
    /// hook's is shorter than the explicit actions'; a remote one has [`FETCH_TIMEOUT`]).
    pub fn fetch_member_within(
        &self,
        team: &Name,
        member: &Name,
        limit: std::time::Duration,
    ) -> Result<bool> {
        // A teammate on another host: fetched from there over the lead's ssh.
        if let Some(remote) = self.remotes.get(member) {
            return self.fetch_remote(team, member, remote);
        }
        let path = self.worktree_path(team, member);
        if !is_clone_dir(&path) {
            return Ok(false);
        }
        if let Err(why) = self.check_clone(&path) {
            return Err(WorktreeError::UnsafeClone {
                branch: branch_name(team, member),
                path,
                why,
            });
        }
        let full_ref = format!("refs/heads/{}", branch_name(team, member));
        let refspec = format!("{full_ref}:{full_ref}");
        // `.git` itself, never the clone's top directory (see `guard::LOCAL_UPLOAD_PACK`).
        let path_arg = path.join(".git").into_os_string();
        let upload_pack = format!("--upload-pack={}", guard::LOCAL_UPLOAD_PACK);
        let mut args: Vec<&std::ffi::OsStr> = guard::LOCAL_FETCH_CONFIG
            .iter()
            .map(|a| a.as_ref())
            .collect();
        args.extend::<[&std::ffi::OsStr; 8]>([
            "fetch".as_ref(),
            "--quiet".as_ref(),
            "--no-tags".as_ref(),
            "--no-write-fetch-head".as_ref(),
            "--no-recurse-submodules".as_ref(),
            upload_pack.as_ref(),
            path_arg.as_os_str(),
            refspec.as_ref(),
        ]);
        let mut git = self.git.clone();
        for (key, value) in guard::FETCH_ENV {
            git = git.env(key, value);
        }
        let out = git.run_limited(&self.root, &args, limit)?;
        if !out.success {
            return Err(WorktreeError::Fetch {
                branch: branch_name(team, member),
                path,
                stderr: guard::fetch_failure(&out.stderr),
            });
        }
        Ok(true)
    }

    /// Creates `.roocode` and `.roocode/worktrees` as real directories (never
    /// through a symlink), with a `.gitignore` that hides the worktrees from
    /// the lead's git and searches.
    fn ensure_worktrees_dir(&self) -> Result<PathBuf> {
        let dot = self.root.join(".roocode");
        let dir = self.root.join(WORKTREES_DIR);
        for d in [&dot, &dir] {
            check_not_symlink(d, true)?;
            match std::fs::create_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(WorktreeError::Io {
                        action: "create directory",
                        path: d.clone(),
                        source,
                    });
                }
            }
            // Created or not, it must be a real directory now.
            check_not_symlink(d, false)?;
        }
        // Never through a link, a dangling one included: anything there is left alone.
        let ignore = dir.join(".gitignore");
        roo_store::create_new_regular(
            &ignore,
            b"# RooCode teammates' worktrees: not part of the project.\n*\n",
        )
        .map_err(|source| WorktreeError::Io {
            action: "create",
            path: ignore,
            source,
        })?;
        Ok(dir)
    }

    /// The lead's HEAD commit.
    pub(crate) fn head(&self) -> Result<String> {
        Ok(self
            .git
            .ok(&self.root, &["rev-parse", "--verify", "HEAD^{commit}"])?
            .trim()
            .to_string())
    }

    /// `git rev-list --count <range>`.
    pub(crate) fn count(&self, range: &str) -> Result<usize> {
        let out = self.git.ok(&self.root, &["rev-list", "--count", range])?;
        Ok(out.trim().parse().unwrap_or(0))
    }

    /// Uncommitted changes in `dir` as `XY path` lines (`git status
    /// --porcelain`): with `untracked`, untracked files count too.
    pub(crate) fn uncommitted(&self, dir: &Path, untracked: bool) -> Result<Vec<String>> {
        let mode = if untracked {
            "--untracked-files=all"
        } else {
            "--untracked-files=no"
        };
        // A teammate's clone runs with its own config: confined to it.
        let git = if same_path(dir, &self.root) {
            self.git.clone()
        } else {
            self.git.confined_to(dir)
        };
        let out = git.ok(
            dir,
            &[
                "status",
                "--porcelain=v1",
                "-z",
                "--ignore-submodules=none",
                mode,
            ],
        )?;
        Ok(new_clone::status_entries(&out))
    }

    /// `git worktree list --porcelain -z`.
    pub(crate) fn list(&self) -> Result<Vec<ListedWorktree>> {
        let out = self
            .git
            .ok(&self.root, &["worktree", "list", "--porcelain", "-z"])?;
        let mut all = Vec::new();
        let mut current: Option<ListedWorktree> = None;
        // Records are lines separated by NUL, ended by an empty line.
        for line in out.split('\0') {
            if line.is_empty() {
                all.extend(current.take());
                continue;
            }
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            if key == "worktree" {
                all.extend(current.take());
                current = Some(ListedWorktree {
                    path: PathBuf::from(value),
                    ..ListedWorktree::default()
                });
                continue;
            }
            let Some(entry) = current.as_mut() else {
                continue;
            };
            match key {
                "HEAD" => entry.head = Some(value.to_string()),
                "branch" => entry.branch = Some(value.to_string()),
                "locked" => entry.locked = true,
                "prunable" => entry.prunable = true,
                _ => {}
            }
        }
        all.extend(current);
        Ok(all)
    }
}

/// How long [`lock_worktrees`] waits for another holder: long enough for a big
/// checkout, short enough that a stuck holder is reported rather than waited on
/// forever.
pub const WORKTREES_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// The lock file of `root`'s worktrees (hidden from every agent's commands).
pub fn worktrees_lock_path(root: &Path) -> PathBuf {
    root.join(WORKTREES_DIR).join(".lock")
}

/// Takes `<dir>/.lock` (a `flock`, released when the returned file closes,
/// also when the process dies). `git worktree add` and `remove` are not safe
/// against each other: one may read another's half-written admin directory
/// (`failed to read .git/worktrees/<id>/commondir`), so teammates spawned at
/// once take turns. A holder that keeps it past [`WORKTREES_LOCK_WAIT`] is an
/// error naming the file.
pub(crate) fn lock_worktrees(dir: &Path) -> Result<nix::fcntl::Flock<std::fs::File>> {
    lock_worktrees_within(dir, WORKTREES_LOCK_WAIT)
}

pub(crate) fn lock_worktrees_within(
    dir: &Path,
    wait: std::time::Duration,
) -> Result<nix::fcntl::Flock<std::fs::File>> {
    let path = dir.join(".lock");
    let deadline = std::time::Instant::now() + wait;
    let mut file = open_lock_file(&path)?;
    loop {
        match try_flock(file, &path)? {
            Ok(lock) => return Ok(lock),
            Err(back) => {
                if std::time::Instant::now() >= deadline {
                    return Err(WorktreeError::Io {
                        action: "lock",
                        path: path.clone(),
                        source: std::io::Error::other(format!(
                            "another process has held it for {} s; if no roo is adding or \
                             removing a worktree of this repository, end the process holding it \
                             (`fuser {}`)",
                            wait.as_secs(),
                            path.display()
                        )),
                    });
                }
                file = back;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

/// Opens (creating, mode 0600, never through a symlink) the lock file `path`.
pub(crate) fn open_lock_file(path: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|source| WorktreeError::Io {
            action: "lock",
            path: path.to_path_buf(),
            source,
        })
}

/// One attempt at an exclusive `flock` of `file` (the lock file `path`): the lock, or
/// the file back when another process holds it.
pub(crate) fn try_flock(
    file: std::fs::File,
    path: &Path,
) -> Result<std::result::Result<nix::fcntl::Flock<std::fs::File>, std::fs::File>> {
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Ok(lock)),
        Err((back, nix::errno::Errno::EWOULDBLOCK)) => Ok(Err(back)),
        Err((_, errno)) => Err(WorktreeError::Io {
            action: "lock",
            path: path.to_path_buf(),
            source: std::io::Error::from(errno),
        }),
    }
}

/// Fails if `path` is a symlink (or, with `missing_ok` false, not an existing
/// directory; with it, a missing path is fine but a non-directory is not).
fn check_not_symlink(path: &Path, missing_ok: bool) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(WorktreeError::Symlink {
            path: path.to_path_buf(),
        }),
        Ok(meta) if !meta.is_dir() => Err(WorktreeError::NotADirectory {
            path: path.to_path_buf(),
        }),
        Ok(_) => Ok(()),
        Err(e) if missing_ok && e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(WorktreeError::Io {
            action: "inspect",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Whether `path` is a teammate's clone: a real directory with a real `.git`
/// directory (not a symlink, not a worktree's `.git` file).
pub(crate) fn is_clone_dir(path: &Path) -> bool {
    let real_dir = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir() && !m.file_type().is_symlink())
    };
    real_dir(path) && real_dir(&path.join(".git"))
}

/// Whether two paths name the same place (resolved when they exist).
fn same_path(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The first 12 characters of a commit id.
pub(crate) fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// `a, b, c and 4 more` for status lines (`XY path`).
pub(crate) fn summarize_files(entries: &[String]) -> String {
    const SHOWN: usize = 5;
    let names: Vec<&str> = entries
        .iter()
        .take(SHOWN)
        .map(|e| e.get(3..).unwrap_or(e))
        .collect();
    let mut text = names.join(", ");
    if entries.len() > SHOWN {
        text.push_str(&format!(" and {} more", entries.len() - SHOWN));
    }
    text
}

/// The result of a scoped thread of [`LeadRepo::add_worktree`]; its panic goes on.
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[cfg(test)]
mod tests;
