//! Making a teammate's new clone: what the lead's repository says is read by direct,
//! bounded git runs that read refs only, and everything that reads an object or may
//! start a program a config names — the check that the start is a commit, the lead's
//! `git status` (for the notice), its commit identity, the clone, its checkout and the
//! lead's new branch — runs in **one** confined launch (`sh -c`), so the spawn pays the
//! sandbox helper's start and its second stage once instead of once per git run
//! (docs/WORKTREES.md "Making a clone: what runs where"). Apart from `worktree.rs`
//! because it is the one place that decides which of these runs may leave the sandbox.

use std::path::Path;

use super::{DISCOVERY_LIMIT, LeadRepo, Result, WorktreeError, check_not_symlink, git::nul_fields};

/// The one confined launch of a new clone (`$2` the lead's root, `$3` the clone's path,
/// `$4` its branch, `$5` the commit it starts from, `$6` `1` when the lead's repository
/// gets the branch too). Its stdout is the lead's `git status --porcelain=v1 -z` and
/// nothing else; each step that fails exits with its own code (see [`Step`]), so a
/// failure names its git command. The status runs beside the clone and its checkout
/// (its output is the only stdout), and is waited for before the lead's branch is made,
/// so a failed status still leaves no branch behind. The identity is read as `git config --get` reads it
/// (the last value, trailing newlines cut by `$(…)`), in the sandbox: an include in the
/// lead's config cannot copy a file the sandbox hides into the clone's config.
const MAKE_CLONE: &str = r#"root=$2 path=$3 branch=$4 base=$5 create=$6
g rev-parse --verify "$base^{commit}" >/dev/null || exit 101
g status --porcelain=v1 -z --ignore-submodules=none --untracked-files=no & status=$!
fail() { wait "$status"; exit "$1"; }
set --
if v=$(g config --get user.name); then set -- "$@" --config "user.name=$v"; fi
if v=$(g config --get user.email); then set -- "$@" --config "user.email=$v"; fi
g clone --quiet --shared --no-checkout "$@" --no-tags "$root" "$path" >&2 || fail 103
[ -d "$path" ] && [ ! -L "$path" ] && cd "$path" || fail 104
g checkout --quiet -B "$branch" "$base" >&2 || fail 105
wait "$status" || exit 102
if [ "$create" = 1 ]; then
  cd "$root" && g branch --no-track "$branch" "$base" >&2 || exit 106
fi
"#;

/// The steps of [`MAKE_CLONE`] by exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Commit = 101,
    Status = 102,
    Clone = 103,
    Enter = 104,
    Checkout = 105,
    Branch = 106,
}

impl Step {
    fn of(code: Option<i32>) -> Option<Step> {
        [
            Step::Commit,
            Step::Status,
            Step::Clone,
            Step::Enter,
            Step::Checkout,
            Step::Branch,
        ]
        .into_iter()
        .find(|s| code == Some(*s as i32))
    }
}

impl LeadRepo {
    /// `name` (a full ref or `HEAD`) resolved to an object name without reading the
    /// object, by a direct git run bounded to [`DISCOVERY_LIMIT`]; `None` when there is
    /// no such ref.
    pub(super) fn read_ref(&self, name: &str) -> Result<Option<String>> {
        let args = ["rev-parse", "-q", "--verify", name];
        let out = self.git.run_limited(&self.root, &args, DISCOVERY_LIMIT)?;
        match (out.success, out.stderr.is_empty()) {
            (true, _) => Ok(Some(out.stdout.trim().to_string())),
            // `-q`: a missing ref fails silently; anything said is an error.
            (false, true) => Ok(None),
            (false, false) => Err(self.git.failure(&self.root, &args, out.stderr)),
        }
    }

    /// Whether the lead's HEAD names a branch (not detached), by a direct git run that
    /// reads HEAD only, bounded to [`DISCOVERY_LIMIT`].
    pub(super) fn on_branch(&self) -> Result<bool> {
        let args = ["symbolic-ref", "-q", "HEAD"];
        let out = self.git.run_limited(&self.root, &args, DISCOVERY_LIMIT)?;
        match (out.success, out.stderr.is_empty()) {
            (true, _) => Ok(true),
            (false, true) => Ok(false),
            (false, false) => Err(self.git.failure(&self.root, &args, out.stderr)),
        }
    }

    /// `git clone --shared --no-checkout` of the lead's repository at `path` with the
    /// lead's commit identity, then a checkout of `branch` (its short name: never a
    /// detached HEAD) at `base`, and the lead's own `branch` at `base` when
    /// `create_branch`: one confined launch ([`MAKE_CLONE`]). Returns the lead's
    /// uncommitted changes (`XY path`, tracked files). On an error the lead's new branch
    /// is gone again; the clone's directory is the caller's to remove.
    pub(super) fn make_clone(
        &self,
        path: &Path,
        branch: &str,
        base: &str,
        create_branch: bool,
    ) -> Result<Vec<String>> {
        let args = [
            self.root.as_os_str(),
            path.as_os_str(),
            branch.as_ref(),
            base.as_ref(),
            if create_branch { "1" } else { "0" }.as_ref(),
        ];
        let out = self.git.run_script(&self.root, MAKE_CLONE, &args)?;
        if out.code != Some(0) {
            return Err(match Step::of(out.code) {
                // The checkout must not have turned our directory into a link.
                Some(Step::Enter) => check_not_symlink(path, false).err().unwrap_or_else(|| {
                    self.step_failure(Step::Enter, path, branch, base, out.stderr)
                }),
                Some(step) => self.step_failure(step, path, branch, base, out.stderr),
                None => WorktreeError::Git {
                    command: "clone (sh -c)".to_string(),
                    dir: self.root.clone(),
                    stderr: format!("the shell ended with {:?}: {}", out.code, out.stderr),
                },
            });
        }
        let checked =
            check_not_symlink(path, false).and_then(|()| self.check_on_branch(path, branch));
        if let Err(e) = checked {
            if create_branch {
                let full_ref = format!("refs/heads/{branch}");
                let _ = self
                    .git
                    .ok(&self.root, &["update-ref", "-d", &full_ref, base]);
            }
            return Err(e);
        }
        Ok(status_entries(&out.stdout))
    }

    /// The error of `step` of [`MAKE_CLONE`], naming its git command.
    fn step_failure(
        &self,
        step: Step,
        path: &Path,
        branch: &str,
        base: &str,
        stderr: String,
    ) -> WorktreeError {
        let (root, clone) = (self.root.display(), path.display());
        let (dir, command) = match step {
            Step::Commit => (&self.root, format!("rev-parse --verify {base}^{{commit}}")),
            Step::Status => (
                &self.root,
                "status --porcelain=v1 -z --ignore-submodules=none --untracked-files=no"
                    .to_string(),
            ),
            Step::Clone => (
                &self.root,
                format!("clone --quiet --shared --no-checkout --no-tags {root} {clone}"),
            ),
            Step::Enter => (&self.root, format!("clone … {clone} (then cd into it)")),
            Step::Checkout => (
                &path.to_path_buf(),
                format!("checkout --quiet -B {branch} {base}"),
            ),
            Step::Branch => (&self.root, format!("branch --no-track {branch} {base}")),
        };
        self.git.failure(dir, &[command], stderr)
    }

    /// The new clone at `path` is on `branch`: read from its HEAD file (no git run);
    /// only a clone that is not asks git what it is on, confined to it, for the error.
    fn check_on_branch(&self, path: &Path, branch: &str) -> Result<()> {
        if roo_agent::head_names_branch(path, branch) {
            return Ok(());
        }
        let on = self
            .git
            .confined_to(path)
            .run(path, &["symbolic-ref", "-q", "HEAD"])?;
        if on.stdout.trim() == format!("refs/heads/{branch}") {
            return Ok(());
        }
        Err(WorktreeError::Occupied {
            path: path.to_path_buf(),
            why: format!(
                "after the checkout HEAD is {:?}, not branch {branch}",
                on.stdout.trim()
            ),
        })
    }
}

/// `git status --porcelain=v1 -z` output as `XY path` entries (a rename's or copy's
/// source path dropped).
pub(super) fn status_entries(out: &str) -> Vec<String> {
    let mut files = Vec::new();
    let mut fields = nul_fields(out);
    while let Some(entry) = fields.next() {
        // A rename or copy is followed by its source path.
        if entry.starts_with('R') || entry.starts_with('C') {
            fields.next();
        }
        files.push(entry.to_string());
    }
    files
}
