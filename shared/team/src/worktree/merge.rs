//! Merging a teammate's branch into the lead's with `git merge --no-ff` (the team's
//! last step before clean-up: one merge commit per teammate), never leaving the
//! lead's tree half-merged.
//!
//! The branch is first fetched from the teammate's clone (fast-forward only).
//! The merge only starts on a tree whose tracked files are committed and with no
//! other merge, rebase, cherry-pick or revert in progress: `git merge --abort`
//! can then always restore it. A merge that stops — on conflicts, or because a
//! hook refused the merge commit — is aborted at once, and the conflicted files
//! are reported so the lead can resolve them deliberately (merge by hand, or ask
//! the teammate to rebase).

use std::path::PathBuf;

use roo_store::Name;

use super::git::nul_fields;
use super::{LeadRepo, Result, WorktreeError, branch_name, summarize_files};

/// How a merge ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeOutcome {
    /// A merge commit was made on the lead's branch.
    Merged {
        branch: String,
        /// The merge commit.
        commit: String,
        /// Uncommitted files left in the teammate's worktree, which the merge
        /// did not include (`XY path` lines).
        left_uncommitted: Vec<String>,
    },
    /// The lead's HEAD already contains the branch: nothing to merge.
    UpToDate {
        branch: String,
        left_uncommitted: Vec<String>,
    },
    /// The merge conflicted and was aborted; the lead's tree is as before.
    Conflict {
        branch: String,
        /// Files with conflicts, relative to the repository root.
        files: Vec<PathBuf>,
    },
}

impl MergeOutcome {
    /// One line for the lead.
    pub fn summary(&self) -> String {
        let leftover = |files: &[String]| {
            if files.is_empty() {
                String::new()
            } else {
                format!(
                    "; not merged: uncommitted files in the clone ({})",
                    summarize_files(files)
                )
            }
        };
        match self {
            MergeOutcome::Merged {
                branch,
                commit,
                left_uncommitted,
            } => format!(
                "merged {branch} with --no-ff as {}{}",
                super::short(commit),
                leftover(left_uncommitted)
            ),
            MergeOutcome::UpToDate {
                branch,
                left_uncommitted,
            } => format!("{branch} is already merged{}", leftover(left_uncommitted)),
            MergeOutcome::Conflict { branch, files } => format!(
                "merging {branch} conflicts in {}; the merge was aborted and the lead's tree is \
                 unchanged: have the teammate merge the lead's branch into its own and commit, \
                 then merge again",
                files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// Files whose presence in the git dir means an operation is in progress.
const IN_PROGRESS: &[(&str, &str)] = &[
    ("MERGE_HEAD", "merge"),
    ("CHERRY_PICK_HEAD", "cherry-pick"),
    ("REVERT_HEAD", "revert"),
    ("rebase-merge", "rebase"),
    ("rebase-apply", "rebase or am"),
];

impl LeadRepo {
    /// Merges `roo/<team>/<member>` into the lead's current branch (or
    /// detached HEAD) with `git merge --no-ff`. A conflict aborts the merge
    /// and is reported as [`MergeOutcome::Conflict`].
    pub fn merge(&self, team: &Name, member: &Name) -> Result<MergeOutcome> {
        self.merge_checked(team, member, true)
    }

    /// [`LeadRepo::merge`], refused (`ProtectedChanges`, nothing merged) when the branch
    /// changes what configures RooCode or git — anything under `.roocode/`, a `.git*`
    /// file (`.gitattributes` can name filters and merge drivers), a `ROOCODE.md` —
    /// unless `allow_protected`: those changes run with the user's rights later, so the
    /// person decides on them.
    pub fn merge_checked(
        &self,
        team: &Name,
        member: &Name,
        allow_protected: bool,
    ) -> Result<MergeOutcome> {
        self.fetch_member(team, member)?;
        let branch = branch_name(team, member);
        let full_ref = format!("refs/heads/{branch}");
        let root = &self.root;
        if !self
            .git
            .run(root, &["rev-parse", "-q", "--verify", &full_ref])?
            .success
        {
            return Err(WorktreeError::NoBranch {
                branch,
                root: root.clone(),
            });
        }
        if !allow_protected {
            let changed = self.git.ok(
                root,
                &["diff", "--name-only", "-z", &format!("HEAD...{full_ref}")],
            )?;
            let files: Vec<String> = changed
                .split('\0')
                .filter(|f| !f.is_empty() && is_protected_change(f))
                .map(str::to_string)
                .collect();
            if !files.is_empty() {
                return Err(WorktreeError::ProtectedChanges { branch, files });
            }
        }
        if let Some(what) = self.in_progress()? {
            return Err(WorktreeError::OperationInProgress {
                branch,
                what,
                root: root.clone(),
            });
        }
        let dirty = self.uncommitted(root, false)?;
        if !dirty.is_empty() {
            return Err(WorktreeError::LeadTreeDirty {
                branch,
                files: summarize_files(&dirty),
            });
        }
        let worktree = self.worktree_path(team, member);
        let left_uncommitted = if worktree.is_dir() {
            self.uncommitted(&worktree, true)?
        } else {
            Vec::new()
        };
        if self.count(&format!("HEAD..{full_ref}"))? == 0 {
            return Ok(MergeOutcome::UpToDate {
                branch,
                left_uncommitted,
            });
        }

        let before = self.head()?;
        let message = format!("Merge {branch} (teammate {member} of team {team})");
        let args = ["merge", "--no-ff", "--no-edit", "-m", &message, &full_ref];
        let out = self.git.run(root, &args)?;
        if out.success {
            return Ok(MergeOutcome::Merged {
                branch,
                commit: self.head()?,
                left_uncommitted,
            });
        }
        if !self.merge_head_exists()? {
            // git refused before touching anything (e.g. an untracked file
            // would be overwritten); make sure that is so.
            if self.head()? != before {
                return Err(WorktreeError::AbortFailed {
                    branch,
                    root: root.clone(),
                    why: format!("the merge failed ({}) yet HEAD moved", out.stderr),
                });
            }
            return Err(self.git.failure(root, &args, out.stderr));
        }
        let conflicted = self.git.ok(
            root,
            &["diff", "--name-only", "--diff-filter=U", "-z", "--relative"],
        )?;
        let files: Vec<PathBuf> = nul_fields(&conflicted).map(PathBuf::from).collect();
        self.abort_merge(&branch, &before)?;
        if files.is_empty() {
            // Stopped without conflicts: a hook refused the merge commit.
            return Err(self.git.failure(root, &args, out.stderr));
        }
        Ok(MergeOutcome::Conflict { branch, files })
    }

    /// `git merge --abort`, then checks that HEAD, index and tree are back.
    fn abort_merge(&self, branch: &str, before: &str) -> Result<()> {
        let root = &self.root;
        let fail = |why: String| WorktreeError::AbortFailed {
            branch: branch.to_string(),
            root: root.clone(),
            why,
        };
        let out = self.git.run(root, &["merge", "--abort"])?;
        if !out.success {
            return Err(fail(out.stderr));
        }
        if self.merge_head_exists()? {
            return Err(fail("MERGE_HEAD is still there".to_string()));
        }
        if self.head()? != before {
            return Err(fail("HEAD moved".to_string()));
        }
        let left = self.uncommitted(root, false)?;
        if !left.is_empty() {
            return Err(fail(format!(
                "files are still changed: {}",
                summarize_files(&left)
            )));
        }
        Ok(())
    }

    fn merge_head_exists(&self) -> Result<bool> {
        Ok(self
            .git
            .run(&self.root, &["rev-parse", "-q", "--verify", "MERGE_HEAD"])?
            .success)
    }

    /// Which operation is in progress in the lead's tree, if any.
    fn in_progress(&self) -> Result<Option<&'static str>> {
        let mut args = vec!["rev-parse", "--path-format=absolute"];
        for (file, _) in IN_PROGRESS {
            args.extend(["--git-path", file]);
        }
        let out = self.git.ok(&self.root, &args)?;
        for ((_, what), path) in IN_PROGRESS.iter().zip(out.lines()) {
            if std::path::Path::new(path).exists() {
                return Ok(Some(what));
            }
        }
        Ok(None)
    }
}

/// Whether a changed path configures RooCode or git: under `.roocode/` (any depth), a
/// `.git*` name (`.gitattributes`, `.gitmodules`, `.github/…`), or a `ROOCODE.md`.
fn is_protected_change(path: &str) -> bool {
    path.split('/').any(|part| {
        let lower = part.to_ascii_lowercase();
        lower == ".roocode" || lower.starts_with(".git") || lower == "roocode.md"
    })
}
