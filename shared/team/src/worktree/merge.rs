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

use std::collections::BTreeSet;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
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

/// The teammate's branch fetched for a merge ([`LeadRepo::fetch_for_merge`]).
pub(super) struct Fetched {
    /// `roo/<team>/<member>`.
    pub(super) branch: String,
    /// Its commit, read once.
    pub(super) commit: String,
    /// Files left uncommitted in the teammate's clone.
    pub(super) left_uncommitted: Vec<String>,
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
    /// This repository, merging for an agent whose project root is `dir` (its working
    /// directory, perhaps a subdirectory of the repository): the instructions an agent
    /// started there reads (`dir/ROOCODE.md` and what it includes) are protected on a
    /// merge as well as the repository root's.
    pub fn with_project_root(mut self, dir: PathBuf) -> LeadRepo {
        self.project_root = Some(dir);
        self
    }

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
        let fetched = self.fetch_for_merge(team, member, false)?;
        if self.count(&format!("HEAD..{}", fetched.commit))? == 0 {
            return Ok(MergeOutcome::UpToDate {
                branch: fetched.branch,
                left_uncommitted: fetched.left_uncommitted,
            });
        }
        let renames_checked =
            self.check_what_merge_writes(&fetched.branch, &fetched.commit, allow_protected)?;
        self.run_merge(team, member, fetched, renames_checked)
    }

    /// What every merge does first: fetches `roo/<team>/<member>` from the teammate's
    /// clone, reads the branch's commit once, and refuses a lead's tree with a merge,
    /// rebase, cherry-pick or revert in progress or — unless `dirty_ok` — uncommitted
    /// changes to tracked files. Lists what is left uncommitted in the clone.
    pub(super) fn fetch_for_merge(
        &self,
        team: &Name,
        member: &Name,
        dirty_ok: bool,
    ) -> Result<Fetched> {
        self.fetch_member(team, member)?;
        let branch = branch_name(team, member);
        let full_ref = format!("refs/heads/{branch}");
        let root = &self.root;
        // Read the branch once: the check and the merge use this commit, whatever a
        // concurrent fetch does to the ref meanwhile.
        let resolved = self.git.run(
            root,
            &[
                "rev-parse",
                "-q",
                "--verify",
                &format!("{full_ref}^{{commit}}"),
            ],
        )?;
        let commit = resolved.stdout.trim().to_string();
        if !resolved.success || commit.is_empty() {
            return Err(WorktreeError::NoBranch {
                branch,
                root: root.clone(),
            });
        }
        if let Some(what) = self.in_progress()? {
            return Err(WorktreeError::OperationInProgress {
                branch,
                what,
                root: root.clone(),
            });
        }
        if !dirty_ok {
            let dirty = self.uncommitted(root, false)?;
            if !dirty.is_empty() {
                return Err(WorktreeError::LeadTreeDirty {
                    branch,
                    files: summarize_files(&dirty),
                });
            }
        }
        let worktree = self.worktree_path(team, member);
        let left_uncommitted = if worktree.is_dir() {
            self.uncommitted(&worktree, true)?
        } else {
            Vec::new()
        };
        Ok(Fetched {
            branch,
            commit,
            left_uncommitted,
        })
    }

    /// `git merge --no-ff` of the checked `commit` in the lead's tree, a merge that
    /// stops aborted at once.
    fn run_merge(
        &self,
        team: &Name,
        member: &Name,
        fetched: Fetched,
        renames_checked: bool,
    ) -> Result<MergeOutcome> {
        let Fetched {
            branch,
            commit,
            left_uncommitted,
        } = fetched;
        let root = &self.root;
        let before = self.head()?;
        let message = format!("Merge {branch} (teammate {member} of team {team})");
        // No directory-rename detection: it would move the branch's new files to paths
        // the check above did not look at.
        let mut args = vec!["-c", "merge.directoryRenames=false", "merge"];
        if !renames_checked {
            // Without `git merge-tree` the check saw the plain difference: the merge
            // must not move an edit onto a path renamed since (`ROOCODE.md`).
            args.extend(["-X", "no-renames"]);
        }
        args.extend(["--no-ff", "--no-edit", "-m", &message, &commit]);
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
    pub(super) fn in_progress(&self) -> Result<Option<&'static str>> {
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

/// Most paths one merge may add, change or remove in the lead's tree.
pub const MAX_MERGE_FILES: usize = 20_000;
/// Most bytes one merge may write into the lead's tree: the sizes of the files it adds or
/// changes, summed.
pub const MAX_MERGE_BYTES: u64 = 1 << 30;

/// One path the merge changes, from `git diff --raw --no-renames`.
struct Change {
    /// HEAD's mode; `000000` when the merge adds the path.
    old_mode: String,
    /// The branch's mode; `000000` when the branch removes the path.
    mode: String,
    /// The branch's object.
    id: String,
    path: Vec<u8>,
}

impl Change {
    fn writes(&self) -> bool {
        self.mode != "000000"
    }

    /// A file or symlink, whose blob the merge writes (not a submodule's commit).
    fn blob(&self) -> bool {
        matches!(self.mode.as_str(), "100644" | "100755" | "120000")
    }
}

fn lossy(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

impl LeadRepo {
    /// Refuses, before anything is written, a merge of `commit` that changes more than
    /// [`MAX_MERGE_FILES`] paths or writes more than [`MAX_MERGE_BYTES`], that changes
    /// a protected path (unless `allow_protected`: [`LeadRepo::merge_checked`]), or that
    /// would write where the lead's tree holds something git does not track or a
    /// submodule's checkout. Returns whether the paths checked are the merge's own
    /// result (`git merge-tree`, renames followed); `false` when this git has no
    /// `merge-tree --write-tree` and the merge must then run without rename detection.
    pub(super) fn check_what_merge_writes(
        &self,
        branch: &str,
        commit: &str,
        allow_protected: bool,
    ) -> Result<bool> {
        let (changes, renames_checked) = self.branch_changes(branch, commit)?;
        if !allow_protected {
            self.check_protected(branch, &changes)?;
        }
        // A submodule the merge replaces by a file or a directory (its gitlink goes, and
        // the merge writes at its path or under it): git removes its checkout, ignored
        // files and an old-style `.git` with unpushed commits too.
        let submodules: Vec<String> = changes
            .iter()
            .filter(|c| c.old_mode == "160000" && c.mode != "160000")
            .filter(|gitlink| {
                changes.iter().any(|c| {
                    c.writes()
                        && c.path
                            .strip_prefix(gitlink.path.as_slice())
                            .is_some_and(|rest| rest.is_empty() || rest.first() == Some(&b'/'))
                })
            })
            .map(|c| lossy(&c.path))
            .collect();
        if !submodules.is_empty() {
            return Err(WorktreeError::MergeReplacesSubmodule {
                branch: branch.to_string(),
                paths: submodules.join(", "),
            });
        }
        // Everything the merge writes, with each directory on the way: what the lead's
        // tree holds there must be tracked.
        let written: BTreeSet<&[u8]> = changes
            .iter()
            .filter(|c| c.writes())
            .map(|c| c.path.as_slice())
            .collect();
        let mut places = BTreeSet::new();
        for path in &written {
            for (i, b) in path.iter().enumerate() {
                if *b == b'/' {
                    places.insert(&path[..i]);
                }
            }
            places.insert(*path);
        }
        // `.roocode/` holds the runtime's own untracked state (teammates' clones): a
        // directory there is no reason to refuse new files in it, which the protection
        // check has judged; what is at the paths written in it still counts.
        let occupied: Vec<&[u8]> = places
            .into_iter()
            .filter(|place| {
                !(*place == b".roocode" && !written.contains(place) && self.real_dir(place))
            })
            .filter(|place| self.occupied(place))
            .collect();
        // One `git cat-file`: the size of every blob written, then what HEAD has at each
        // occupied place.
        let blobs: BTreeSet<&str> = changes
            .iter()
            .filter(|c| c.blob())
            .map(|c| c.id.as_str())
            .collect();
        let mut queries: Vec<Vec<u8>> = blobs.iter().map(|id| id.as_bytes().to_vec()).collect();
        queries.extend(occupied.iter().map(|place| {
            let mut query = b"HEAD:".to_vec();
            query.extend_from_slice(place);
            query
        }));
        let mut answers = if queries.is_empty() {
            Vec::new()
        } else {
            self.object_types(&queries)?
        }
        .into_iter();
        let mut sizes = std::collections::HashMap::new();
        for id in &blobs {
            let size = answers
                .next()
                .flatten()
                .and_then(|(_, size)| size.parse::<u64>().ok())
                .ok_or_else(|| {
                    self.git
                        .failure(&self.root, &["cat-file", id], "no such blob".to_string())
                })?;
            sizes.insert(*id, size);
        }
        let bytes: u64 = changes
            .iter()
            .filter(|c| c.blob())
            .filter_map(|c| sizes.get(c.id.as_str()))
            .sum();
        if bytes > MAX_MERGE_BYTES {
            return Err(WorktreeError::MergeTooLarge {
                branch: branch.to_string(),
                what: format!(
                    "write {} files of {} MiB into",
                    written.len(),
                    bytes.div_ceil(1 << 20)
                ),
            });
        }
        let mut untracked = Vec::new();
        for place in occupied {
            match answers.next().flatten() {
                None => untracked.push(place.to_vec()),
                // A tracked directory the branch turns into a file: git removes it with
                // what the lead keeps in it untracked.
                Some((kind, _)) if kind == "tree" && written.contains(place) => {
                    untracked.extend(self.untracked_under(place)?);
                }
                Some(_) => {}
            }
        }
        if !untracked.is_empty() {
            return Err(WorktreeError::MergeWouldOverwrite {
                branch: branch.to_string(),
                paths: self.describe_untracked(&untracked),
            });
        }
        Ok(renames_checked)
    }

    /// The tree `git merge` would make of HEAD and `commit` (`git merge-tree
    /// --write-tree`, git 2.38 or later; a tree with conflict markers when it
    /// conflicts), or `None` when this git cannot say.
    fn merge_result_tree(&self, commit: &str) -> Result<Option<String>> {
        let out = self.git.run(
            &self.root,
            &[
                "-c",
                "merge.directoryRenames=false",
                "merge-tree",
                "--write-tree",
                "--no-messages",
                "--name-only",
                "HEAD",
                commit,
            ],
        )?;
        let tree = out.stdout.lines().next().unwrap_or_default().trim();
        let is_id =
            (tree.len() == 40 || tree.len() == 64) && tree.bytes().all(|b| b.is_ascii_hexdigit());
        Ok(is_id.then(|| tree.to_string()))
    }

    /// The paths the merge writes — `git diff --raw --no-renames HEAD <result tree>`,
    /// a rename as a removal and an addition; without `merge-tree`, the branch's own
    /// difference `HEAD...<commit>` —, read until more than [`MAX_MERGE_FILES`]: then
    /// git is stopped and the merge refused. The flag says which of the two it is.
    fn branch_changes(&self, branch: &str, commit: &str) -> Result<(Vec<Change>, bool)> {
        let result = self.merge_result_tree(commit)?;
        let renames_checked = result.is_some();
        let range = match &result {
            Some(tree) => vec!["HEAD".to_string(), tree.clone()],
            None => vec![format!("HEAD...{commit}")],
        };
        let mut args: Vec<&str> = vec![
            "diff",
            "--raw",
            "-z",
            "--no-renames",
            "--no-abbrev",
            "--no-ext-diff",
            "--no-textconv",
        ];
        args.extend(range.iter().map(String::as_str));
        let mut changes = Vec::new();
        let mut header: Option<(String, String, String)> = None;
        let complete = self.git.for_each_field(&self.root, &args, |field| {
            match header.take() {
                None => {
                    // `:old_mode new_mode old_id new_id status`
                    let text = String::from_utf8_lossy(field);
                    let parts: Vec<&str> = text.split(' ').collect();
                    if let [old_mode, mode, _, id, _] = parts.as_slice() {
                        let old_mode = old_mode.trim_start_matches(':').to_string();
                        header = Some((old_mode, mode.to_string(), id.to_string()));
                    }
                    true
                }
                Some((old_mode, mode, id)) => {
                    changes.push(Change {
                        old_mode,
                        mode,
                        id,
                        path: field.to_vec(),
                    });
                    changes.len() <= MAX_MERGE_FILES
                }
            }
        })?;
        if !complete {
            return Err(WorktreeError::MergeTooLarge {
                branch: branch.to_string(),
                what: format!("add, change or remove more than {MAX_MERGE_FILES} files in"),
            });
        }
        Ok((changes, renames_checked))
    }

    /// Refuses changes to what configures RooCode or git, and to the files the project's
    /// `ROOCODE.md` instructions are made of (as the agent's own loader finds them in the
    /// lead's tree, `@include`s followed): those run or speak with the user's rights later.
    fn check_protected(&self, branch: &str, changes: &[Change]) -> Result<()> {
        let roots: Vec<PathBuf> = [
            Some(self.root.clone()),
            std::fs::canonicalize(&self.root).ok(),
        ]
        .into_iter()
        .flatten()
        .collect();
        // The repository root's instructions, and those of each directory from the
        // agent's project root up to it (an agent started in any of them reads these).
        let mut projects = vec![self.root.clone()];
        if let Some(dir) = &self.project_root {
            let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
            if roots.iter().any(|root| dir.starts_with(root)) {
                projects.extend(
                    dir.ancestors()
                        .take_while(|d| !roots.iter().any(|root| d == root))
                        .map(std::path::Path::to_path_buf),
                );
            }
        }
        let instructions: Vec<String> = projects
            .iter()
            .flat_map(|dir| roo_agent::project_instruction_paths(dir))
            .collect::<Vec<_>>()
            .iter()
            .filter_map(|path| roots.iter().find_map(|root| path.strip_prefix(root).ok()))
            .map(|path| path.to_string_lossy().into_owned())
            .filter(|path| !path.is_empty())
            .collect();
        let is_instructions = |path: &str| {
            instructions.iter().any(|file| {
                file == path
                    || file
                        .strip_prefix(path)
                        .is_some_and(|rest| rest.starts_with('/'))
            })
        };
        let mut files: Vec<String> = changes
            .iter()
            .map(|c| lossy(&c.path))
            .filter(|path| is_protected_change(path) || is_instructions(path))
            .collect();
        files.dedup();
        if files.is_empty() {
            return Ok(());
        }
        Err(WorktreeError::ProtectedChanges {
            branch: branch.to_string(),
            files,
        })
    }

    /// Whether something is at `place` (relative to the root) in the lead's tree, without
    /// following a symlink. An error other than "not there" counts as something.
    fn occupied(&self, place: &[u8]) -> bool {
        let path = self.root.join(std::ffi::OsStr::from_bytes(place));
        match std::fs::symlink_metadata(path) {
            Ok(_) => true,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ),
        }
    }

    /// Whether `place` (relative to the root) is a directory, not a symlink to one.
    fn real_dir(&self, place: &[u8]) -> bool {
        std::fs::symlink_metadata(self.root.join(std::ffi::OsStr::from_bytes(place)))
            .is_ok_and(|meta| meta.is_dir())
    }

    /// `git cat-file --batch-check` of each query (an object, or `<commit>:<path>`):
    /// its type and size, `None` when missing.
    fn object_types(&self, queries: &[Vec<u8>]) -> Result<Vec<Option<(String, String)>>> {
        let mut input = Vec::new();
        for query in queries {
            input.extend_from_slice(query);
            input.push(0);
        }
        let out = self.git.output_with_input(
            &self.root,
            &[
                "cat-file",
                "--batch-check=%(objecttype) %(objectsize)",
                "-z",
            ],
            input,
        )?;
        // A missing one is echoed as `<query> missing`, newlines and all.
        let mut rest = out.as_slice();
        let mut answers = Vec::with_capacity(queries.len());
        for query in queries {
            let mut missing = query.clone();
            missing.extend_from_slice(b" missing\n");
            if let Some(after) = rest.strip_prefix(missing.as_slice()) {
                rest = after;
                answers.push(None);
                continue;
            }
            let end = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
            let line = String::from_utf8_lossy(&rest[..end]).into_owned();
            rest = rest.get(end + 1..).unwrap_or_default();
            answers.push(
                line.split_once(' ')
                    .map(|(kind, size)| (kind.to_string(), size.to_string())),
            );
        }
        Ok(answers)
    }

    /// What the lead keeps untracked (ignored or not) under the tracked directory `dir`.
    fn untracked_under(&self, dir: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mut spec = dir.to_vec();
        spec.push(b'/');
        let spec = std::ffi::OsString::from_vec(spec);
        let args: [&std::ffi::OsStr; 6] = [
            "--literal-pathspecs".as_ref(),
            "ls-files".as_ref(),
            "-z".as_ref(),
            "--others".as_ref(),
            "--directory".as_ref(),
            spec.as_os_str(),
        ];
        let out = self.git.ok(&self.root, &args)?;
        Ok(nul_fields(&out)
            .map(|path| path.trim_end_matches('/').as_bytes().to_vec())
            .collect())
    }

    /// `path (ignored file)`, `path/ (untracked directory)`, … for the error, the first
    /// few only.
    fn describe_untracked(&self, paths: &[Vec<u8>]) -> String {
        const SHOWN: usize = 10;
        let shown: Vec<String> = paths.iter().take(SHOWN).map(|p| lossy(p)).collect();
        let mut input = Vec::new();
        for path in paths.iter().take(SHOWN) {
            input.extend_from_slice(path);
            input.push(0);
        }
        // It exits 1 when none is ignored: then there is no output either.
        let ignored: BTreeSet<String> = self
            .git
            .output_with_input(
                &self.root,
                &["check-ignore", "--stdin", "-z", "--no-index"],
                input,
            )
            .map(|out| {
                out.split(|b| *b == 0)
                    .filter(|p| !p.is_empty())
                    .map(lossy)
                    .collect()
            })
            .unwrap_or_default();
        let mut parts: Vec<String> = shown
            .iter()
            .map(|path| {
                let kind = match std::fs::symlink_metadata(self.root.join(path)) {
                    Ok(meta) if meta.is_dir() => "directory",
                    Ok(meta) if meta.is_symlink() => "symlink",
                    _ => "file",
                };
                let slash = if kind == "directory" { "/" } else { "" };
                let state = if ignored.contains(path) {
                    "ignored"
                } else {
                    "untracked"
                };
                format!("{path}{slash} ({state} {kind})")
            })
            .collect();
        if paths.len() > SHOWN {
            parts.push(format!("and {} more", paths.len() - SHOWN));
        }
        parts.join(", ")
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
