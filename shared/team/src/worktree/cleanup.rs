//! Cleaning up a team's clones: each teammate's branch is first fetched into the
//! lead's repository ([`LeadRepo::fetch_member`]); a clone with nothing in it that
//! the lead's HEAD lacks is removed (and its branch deleted with `git branch -d`);
//! one with uncommitted files, commits not merged, commits on other branches or a
//! stash, or git-ignored files (`.env`, logs: a removal would delete them
//! silently) is kept and reported, so the lead can merge it with TeamMerge
//! ([`LeadRepo::merge`]). Git worktrees made by earlier versions are still
//! cleaned the old way (`git worktree remove`, never `--force`).

use std::fmt;
use std::path::PathBuf;

use roo_store::Name;

use super::git::nul_fields;
use super::{LeadRepo, ListedWorktree, REPORT_LIMIT, Result, WORKTREES_DIR, branch_name, short};

/// What a cleanup did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Worktrees removed, with whether their branch was deleted.
    pub removed: Vec<Removed>,
    /// Worktrees kept, with why.
    pub kept: Vec<Kept>,
    /// Directories under `.roocode/worktrees/<team>+…` that are not worktrees
    /// of this repository: left alone.
    pub strays: Vec<PathBuf>,
}

/// A removed worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub member: Name,
    pub path: PathBuf,
    pub branch: String,
    /// Whether the branch was deleted too (it was fully merged).
    pub branch_deleted: bool,
}

/// A kept worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub member: Name,
    pub path: PathBuf,
    pub branch: String,
    pub why: KeptWhy,
}

/// Why a worktree was kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptWhy {
    /// It holds work the lead's HEAD lacks.
    Changes(WorkChanges),
    /// It is not on the teammate's branch (the teammate switched branches or
    /// detached HEAD): its commits may be nowhere else.
    OtherBranch(Option<String>),
    /// It is locked (`git worktree lock`).
    Locked,
    /// It holds git-ignored files (`XY path` lines, at most [`REPORT_LIMIT`]).
    Ignored(Vec<String>),
    /// Its other branches or stash hold this many commits the lead lacks.
    OtherRefs(usize),
    /// Its branch could not be fetched into the lead's repository; the message.
    NotFetched(String),
    /// git refused to remove it; its message.
    RemoveFailed(String),
    /// It is on another host (the teammate ran there) and its branch is merged, but the
    /// host kept it (`why`: changed since the fetch, not the clone the lead made, ssh
    /// failed); whether the lead's branch was deleted.
    OnHost {
        host: Name,
        branch_deleted: bool,
        why: String,
    },
}

/// Work in a teammate's worktree that the lead's HEAD does not have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkChanges {
    /// Uncommitted files as `git status --porcelain` lines (`XY path`), at
    /// most [`REPORT_LIMIT`].
    pub uncommitted: Vec<String>,
    /// How many uncommitted files in all.
    pub uncommitted_count: usize,
    /// Commits on the branch not in the lead's HEAD, newest first, at most
    /// [`REPORT_LIMIT`].
    pub unmerged: Vec<CommitSummary>,
    /// How many unmerged commits in all.
    pub unmerged_count: usize,
}

/// One commit: id and subject line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitSummary {
    pub id: String,
    pub subject: String,
}

impl WorkChanges {
    /// Nothing the lead lacks.
    pub fn is_empty(&self) -> bool {
        self.uncommitted_count == 0 && self.unmerged_count == 0
    }
}

impl fmt::Display for WorkChanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.unmerged_count > 0 {
            let subjects: Vec<String> = self
                .unmerged
                .iter()
                .take(3)
                .map(|c| format!("{} {}", short(&c.id), c.subject))
                .collect();
            parts.push(format!(
                "{} unmerged commit(s) ({}{})",
                self.unmerged_count,
                subjects.join("; "),
                if self.unmerged_count > 3 { "; …" } else { "" }
            ));
        }
        if self.uncommitted_count > 0 {
            parts.push(format!(
                "{} uncommitted file(s) ({})",
                self.uncommitted_count,
                super::summarize_files(&self.uncommitted)
            ));
        }
        f.write_str(&parts.join(", "))
    }
}

impl fmt::Display for Kept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kept {} (branch {}): ", self.path.display(), self.branch)?;
        match &self.why {
            KeptWhy::Changes(changes) => {
                write!(f, "{changes}")?;
                if changes.uncommitted_count > 0 {
                    f.write_str("; commit them in the clone, then")?;
                } else {
                    f.write_str(";")?;
                }
                f.write_str(" merge with TeamMerge")
            }
            KeptWhy::Ignored(files) => write!(
                f,
                "it holds git-ignored files ({}); delete the directory by hand once they are \
                 not needed",
                super::summarize_files(files)
            ),
            KeptWhy::OtherRefs(n) => write!(
                f,
                "{n} commit(s) the lead lacks are on its other branches or stash; check it by hand"
            ),
            KeptWhy::NotFetched(why) => write!(f, "{why}"),
            KeptWhy::OtherBranch(Some(b)) => write!(
                f,
                "it is on branch {} instead; merge or remove it by hand",
                b.trim_start_matches("refs/heads/")
            ),
            KeptWhy::OtherBranch(None) => f.write_str(
                "it is on a detached HEAD; its commits may be on no branch, so check it by hand",
            ),
            KeptWhy::Locked => f.write_str("it is locked (`git worktree unlock` to allow removal)"),
            KeptWhy::RemoveFailed(why) => write!(f, "git did not remove it: {why}"),
            KeptWhy::OnHost {
                host,
                branch_deleted,
                why,
            } => write!(
                f,
                "it is on host {host}{}{}; remove it there by hand once nothing in it is needed",
                if *branch_deleted {
                    " (its branch was merged and is deleted here)"
                } else {
                    ""
                },
                if why.is_empty() {
                    String::new()
                } else {
                    format!(", kept there: {why}")
                }
            ),
        }
    }
}

impl CleanupReport {
    /// One line per removed and kept worktree and stray directory, for the lead.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for r in &self.removed {
            lines.push(format!(
                "removed {} ({}{})",
                r.path.display(),
                r.branch,
                if r.branch_deleted {
                    ", branch deleted"
                } else {
                    ", branch kept"
                }
            ));
        }
        lines.extend(self.kept.iter().map(Kept::to_string));
        for s in &self.strays {
            lines.push(format!(
                "left {} alone: it is not a teammate's clone",
                s.display()
            ));
        }
        lines
    }
}

/// How long each git run of [`LeadRepo::left_work`] may take.
const LEFT_WORK_GIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(15);

/// What a teammate of a team its lead left behind holds that the lead's HEAD lacks, read
/// without changing the clone ([`LeadRepo::left_work`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftWork {
    /// The teammate's clone, when there is one.
    pub clone: Option<PathBuf>,
    /// The teammate's branch (`roo/<team>/<name>`) in the lead's repository.
    pub branch: String,
    /// Its unmerged commits and (in its clone) uncommitted files.
    pub changes: WorkChanges,
    /// Git-ignored files and directories in its clone (`!! path` lines, at most
    /// [`REPORT_LIMIT`]).
    pub ignored: Vec<String>,
    /// Why part of it could not be read: a clone the guard refused (nothing run in it),
    /// a branch that could not be fetched (its commits as last fetched).
    pub unread: Option<String>,
}

impl LeftWork {
    /// Nothing in it that the lead's HEAD lacks.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.ignored.is_empty() && self.unread.is_none()
    }
}

impl LeadRepo {
    /// What `member` of `team`, left behind by its lead, holds that the lead's HEAD
    /// lacks: its branch fetched first (as [`BranchSync`](super::BranchSync) would, with
    /// its short limit), its clone's uncommitted and ignored files listed by git
    /// confined to the clone — and only once the clone passed the guard
    /// (`worktree/guard.rs`): a refused clone is reported, not read.
    pub fn left_work(&self, team: &Name, member: &Name) -> Result<LeftWork> {
        let branch = branch_name(team, member);
        let full_ref = format!("refs/heads/{branch}");
        let path = self.worktree_path(team, member);
        let mut left = LeftWork {
            clone: None,
            branch: branch.clone(),
            changes: WorkChanges::default(),
            ignored: Vec::new(),
            unread: None,
        };
        if !super::is_clone_dir(&path) {
            left.changes = self.changes(None, &full_ref)?;
            return Ok(left);
        }
        left.clone = Some(path.clone());
        if let Err(why) = self.check_clone(&path) {
            let e = super::WorktreeError::UnsafeClone { branch, path, why };
            left.unread = Some(e.to_string());
            left.changes = self.changes(None, &full_ref)?;
            return Ok(left);
        }
        if let Err(e) = self.fetch_member_within(team, member, super::SYNC_FETCH_TIMEOUT) {
            left.unread = Some(e.to_string());
        }
        // Git in the clone reads the teammate's config (a clean filter may never end):
        // each run is bounded, so the report, printed as the lead exits, always ends.
        let bounded = LeadRepo {
            git: self.git.clone().limited(LEFT_WORK_GIT_LIMIT),
            ..self.clone()
        };
        left.changes = bounded.changes(Some(&path), &full_ref)?;
        left.ignored = bounded.ignored(&path)?;
        Ok(left)
    }

    /// Cleans up the worktrees of `team` (all members found under
    /// `.roocode/worktrees/<team>+…`).
    pub fn cleanup(&self, team: &Name) -> Result<CleanupReport> {
        self.cleanup_where(team, None)
    }

    /// Cleans up the worktree of one member of `team` (a teammate that left).
    pub fn cleanup_member(&self, team: &Name, member: &Name) -> Result<CleanupReport> {
        self.cleanup_where(team, Some(member))
    }

    fn cleanup_where(&self, team: &Name, only: Option<&Name>) -> Result<CleanupReport> {
        let mut report = CleanupReport::default();
        let dir = self.root.join(WORKTREES_DIR);
        let prefix = format!("{team}+");
        let wanted = |m: &Name| only.is_none_or(|o| o == m);
        // Never through a symlink; a missing directory holds nothing to lock.
        super::check_not_symlink(&dir, true)?;
        let _lock = if dir.is_dir() {
            Some(super::lock_worktrees(&dir)?)
        } else {
            None
        };
        let mut handled = std::collections::BTreeSet::new();
        // Worktrees of earlier versions (`git worktree add`).
        let listed = self.list()?;
        let mut ours: Vec<(Name, ListedWorktree)> = Vec::new();
        for entry in &listed {
            let Some(member) = member_of(&dir, &prefix, &entry.path) else {
                continue;
            };
            if wanted(&member) {
                ours.push((member, entry.clone()));
            }
        }
        if ours.iter().any(|(_, e)| e.prunable) {
            self.git.ok(&self.root, &["worktree", "prune"])?;
        }
        for (member, entry) in ours {
            handled.insert(member.clone());
            self.clean_one(team, member, entry, &mut report)?;
        }
        // Clones, and directories that look like ours but are not.
        let mut entries: Vec<PathBuf> = match std::fs::read_dir(&dir) {
            Ok(read) => read.filter_map(|e| e.ok()).map(|e| e.path()).collect(),
            Err(_) => Vec::new(),
        };
        entries.sort();
        for path in entries {
            let Some(member) = member_of(&dir, &prefix, &path).filter(|m| wanted(m)) else {
                continue;
            };
            if listed.iter().any(|w| super::same_path(&w.path, &path)) {
                continue;
            }
            if super::is_clone_dir(&path) {
                handled.insert(member.clone());
                self.clean_clone(team, member, path, &mut report)?;
            } else {
                report.strays.push(path);
            }
        }
        // Branches whose clone is gone (deleted, or a spawn that never made one).
        let refs = self.git.ok(
            &self.root,
            &[
                "for-each-ref",
                "--format=%(refname)",
                &format!("refs/heads/roo/{team}/"),
            ],
        )?;
        for full_ref in refs.lines() {
            let Some(member) = full_ref
                .strip_prefix(&format!("refs/heads/roo/{team}/"))
                .and_then(|m| Name::parse(m).ok())
            else {
                continue;
            };
            if !wanted(&member) || handled.contains(&member) {
                continue;
            }
            let branch = branch_name(team, &member);
            let mut path = self.worktree_path(team, &member);
            // A teammate on another host: its latest commits first; its clone there stays.
            let host = self.remotes().get(&member).map(|r| r.host.clone());
            if let Some(remote) = self.remotes().get(&member) {
                path = PathBuf::from(remote.ssh.git_url(&remote.clone_path(team, &member)));
                if let Err(e) = self.fetch_member(team, &member) {
                    report.kept.push(Kept {
                        member,
                        path,
                        branch,
                        why: KeptWhy::NotFetched(e.to_string()),
                    });
                    continue;
                }
            }
            let changes = self.changes(None, full_ref)?;
            if let Some(host) = host
                && changes.is_empty()
            {
                // Merged (or never given work): its clone there is removed unless the
                // host finds it changed since the fetch (`worktree/remote_gc.rs`).
                let removal = match self.remotes().get(&member) {
                    Some(remote) => self.remove_remote_clone(team, &member, remote),
                    None => Ok(super::RemoteRemoval::Kept(String::new())),
                };
                let branch_deleted = self.delete_branch(&branch)?;
                match removal {
                    Ok(super::RemoteRemoval::Removed | super::RemoteRemoval::Gone) => {
                        report.removed.push(Removed {
                            member,
                            path,
                            branch,
                            branch_deleted,
                        })
                    }
                    Ok(super::RemoteRemoval::Kept(why)) => report.kept.push(Kept {
                        member,
                        path,
                        branch,
                        why: KeptWhy::OnHost {
                            host,
                            branch_deleted,
                            why,
                        },
                    }),
                    Err(e) => report.kept.push(Kept {
                        member,
                        path,
                        branch,
                        why: KeptWhy::OnHost {
                            host,
                            branch_deleted,
                            why: e.to_string(),
                        },
                    }),
                }
            } else if changes.is_empty() {
                let branch_deleted = self.delete_branch(&branch)?;
                report.removed.push(Removed {
                    member,
                    path,
                    branch,
                    branch_deleted,
                });
            } else {
                report.kept.push(Kept {
                    member,
                    path,
                    branch,
                    why: KeptWhy::Changes(changes),
                });
            }
        }
        Ok(report)
    }

    /// Fetches the teammate's branch from its clone and removes the clone when
    /// nothing in it is missing from the lead's HEAD.
    fn clean_clone(
        &self,
        team: &Name,
        member: Name,
        path: PathBuf,
        report: &mut CleanupReport,
    ) -> Result<()> {
        let branch = branch_name(team, &member);
        let full_ref = format!("refs/heads/{branch}");
        let keep = |why| Kept {
            member: member.clone(),
            path: path.clone(),
            branch: branch.clone(),
            why,
        };
        // Checked before any git reads it, here or confined in it: git must not follow
        // what the clone points at, nor block on it (`worktree/guard.rs`).
        if let Err(why) = self.check_clone(&path) {
            let e = super::WorktreeError::UnsafeClone {
                branch: branch.clone(),
                path: path.clone(),
                why,
            };
            report.kept.push(keep(KeptWhy::NotFetched(e.to_string())));
            return Ok(());
        }
        let git = self.git.confined_to(&path);
        let on = git.run(&path, &["symbolic-ref", "-q", "HEAD"])?;
        let on = on.stdout.trim();
        if on != full_ref {
            let other = (!on.is_empty()).then(|| on.to_string());
            report.kept.push(keep(KeptWhy::OtherBranch(other)));
            return Ok(());
        }
        if let Err(e) = self.fetch_member(team, &member) {
            report.kept.push(keep(KeptWhy::NotFetched(e.to_string())));
            return Ok(());
        }
        let changes = self.changes(Some(&path), &full_ref)?;
        if !changes.is_empty() {
            report.kept.push(keep(KeptWhy::Changes(changes)));
            return Ok(());
        }
        // Commits only on the clone's other branches or in its stash.
        let lead_head = self.head()?;
        let mut args = vec!["rev-list", "--count", "--branches"];
        let stash = git.run(&path, &["rev-parse", "-q", "--verify", "refs/stash"])?;
        if stash.success {
            args.push("refs/stash");
        }
        args.extend(["--not", &lead_head]);
        let other = git.run(&path, &args)?;
        let other: usize = other.stdout.trim().parse().unwrap_or(0);
        if other > 0 {
            report.kept.push(keep(KeptWhy::OtherRefs(other)));
            return Ok(());
        }
        let ignored = self.ignored(&path)?;
        if !ignored.is_empty() {
            report.kept.push(keep(KeptWhy::Ignored(ignored)));
            return Ok(());
        }
        if let Err(e) = std::fs::remove_dir_all(&path) {
            report.kept.push(keep(KeptWhy::RemoveFailed(e.to_string())));
            return Ok(());
        }
        let branch_deleted = self.delete_branch(&branch)?;
        report.removed.push(Removed {
            member,
            path,
            branch,
            branch_deleted,
        });
        Ok(())
    }

    /// Git-ignored files and directories in the clone at `path` (`!! path`
    /// lines, at most [`REPORT_LIMIT`]).
    fn ignored(&self, path: &std::path::Path) -> Result<Vec<String>> {
        let out = self.git.confined_to(path).ok(
            path,
            &[
                "status",
                "--porcelain=v1",
                "-z",
                "--ignored=traditional",
                "--untracked-files=normal",
            ],
        )?;
        Ok(nul_fields(&out)
            .filter(|e| e.starts_with("!! "))
            .take(REPORT_LIMIT)
            .map(String::from)
            .collect())
    }

    fn clean_one(
        &self,
        team: &Name,
        member: Name,
        entry: ListedWorktree,
        report: &mut CleanupReport,
    ) -> Result<()> {
        let branch = branch_name(team, &member);
        let full_ref = format!("refs/heads/{branch}");
        let path = entry.path.clone();
        let keep = |why| Kept {
            member: member.clone(),
            path: path.clone(),
            branch: branch.clone(),
            why,
        };
        if entry.prunable {
            // Its directory is gone (pruned above); the branch may still hold work.
            let changes = self.changes(None, &full_ref)?;
            let branch_deleted = changes.is_empty() && self.delete_branch(&branch)?;
            if !changes.is_empty() {
                report.kept.push(keep(KeptWhy::Changes(changes)));
            } else {
                report.removed.push(Removed {
                    member,
                    path,
                    branch,
                    branch_deleted,
                });
            }
            return Ok(());
        }
        if entry.branch.as_deref() != Some(full_ref.as_str()) {
            report.kept.push(keep(KeptWhy::OtherBranch(entry.branch)));
            return Ok(());
        }
        let changes = self.changes(Some(&path), &full_ref)?;
        if !changes.is_empty() {
            report.kept.push(keep(KeptWhy::Changes(changes)));
            return Ok(());
        }
        if entry.locked {
            report.kept.push(keep(KeptWhy::Locked));
            return Ok(());
        }
        let path_arg = path.as_os_str().to_os_string();
        let out = self.git.run(
            &self.root,
            &["worktree".as_ref(), "remove".as_ref(), path_arg.as_os_str()],
        )?;
        if !out.success {
            report.kept.push(keep(KeptWhy::RemoveFailed(out.stderr)));
            return Ok(());
        }
        let branch_deleted = self.delete_branch(&branch)?;
        report.removed.push(Removed {
            member,
            path,
            branch,
            branch_deleted,
        });
        Ok(())
    }

    /// What the worktree at `path` (if any) and branch `full_ref` hold that
    /// the lead's HEAD lacks.
    pub fn changes_of(&self, team: &Name, member: &Name) -> Result<WorkChanges> {
        self.fetch_member(team, member)?;
        let full_ref = format!("refs/heads/{}", branch_name(team, member));
        let path = self.worktree_path(team, member);
        let path = path.is_dir().then_some(path);
        self.changes(path.as_deref(), &full_ref)
    }

    pub(super) fn changes(
        &self,
        path: Option<&std::path::Path>,
        full_ref: &str,
    ) -> Result<WorkChanges> {
        let mut changes = WorkChanges::default();
        if let Some(path) = path {
            let all = self.uncommitted(path, true)?;
            changes.uncommitted_count = all.len();
            changes.uncommitted = all.into_iter().take(REPORT_LIMIT).collect();
        }
        let exists = self
            .git
            .run(&self.root, &["rev-parse", "-q", "--verify", full_ref])?
            .success;
        if exists {
            let range = format!("HEAD..{full_ref}");
            changes.unmerged_count = self.count(&range)?;
            let limit = format!("--max-count={REPORT_LIMIT}");
            let log = self.git.ok(
                &self.root,
                &["log", "-z", "--format=%H%x1f%s", &limit, &range, "--"],
            )?;
            changes.unmerged = nul_fields(&log)
                .filter_map(|rec| {
                    let (id, subject) = rec.trim_start_matches('\n').split_once('\x1f')?;
                    Some(CommitSummary {
                        id: id.to_string(),
                        subject: subject.to_string(),
                    })
                })
                .collect();
        }
        Ok(changes)
    }

    /// `git branch -d <branch>`: deletes it only if merged. Returns whether it
    /// was deleted.
    fn delete_branch(&self, branch: &str) -> Result<bool> {
        Ok(self.git.run(&self.root, &["branch", "-d", branch])?.success)
    }
}

/// The member whose worktree `path` is, when it is `<dir>/<team>+<member>`.
fn member_of(dir: &std::path::Path, prefix: &str, path: &std::path::Path) -> Option<Name> {
    let parent = path.parent()?;
    if !super::same_path(parent, dir) {
        return None;
    }
    let name = path.file_name()?.to_str()?;
    Name::parse(name.strip_prefix(prefix)?).ok()
}
