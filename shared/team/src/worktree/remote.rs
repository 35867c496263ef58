//! A teammate's clone on another host (`hosts:`, docs/BACKENDS.md "The ssh backend"):
//! made there from the lead's commit, and its branch brought back by the lead.
//!
//! - **Making it** ([`LeadRepo::add_remote_worktree`]): the lead pushes the commit the
//!   teammate starts from (its branch `roo/<team>/<name>` when the lead has it, else
//!   `HEAD`) to `refs/roo/<team>/base/<name>` of the host's clone (`repo:`), then, over
//!   the same ssh, the host makes `<repo>/.roocode/worktrees/<team>+<name>` a `git clone
//!   --shared` of that clone on branch `roo/<team>/<name>` — the layout and isolation of a
//!   local teammate's clone (docs/WORKTREES.md: the teammate writes only its own clone,
//!   so it cannot move a peer's branch on that host), rather than a `git worktree`,
//!   whose commits write the host clone's shared git directory. A clone already there on
//!   that branch is reused (a restarted teammate continues). The lead's repository gets
//!   the branch at the start commit, as for a local clone.
//! - **Bringing the branch back** ([`LeadRepo::fetch_remote`], through
//!   [`LeadRepo::fetch_member`] wherever a local teammate's branch is fetched: before
//!   each lead turn, TeamMerge, cleanup): the *lead* fetches `roo/<team>/<name>` from the
//!   clone there over its own ssh, fast-forward only (no `+` in the refspec: a rewritten
//!   branch is an error naming it, never forced). The host needs no way to reach the
//!   lead and no credentials for it, so no `git bundle` fallback is needed; the
//!   teammate's commands never hold an ssh key of the lead's.
//!
//! Every git and ssh run here is blocking (callers use `spawn_blocking`) and runs
//! outside the lead's command sandbox (it needs the lead's ssh keys and the network),
//! with hooks and the fsmonitor off on both sides.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use roo_agent::config::HostConfig;
use roo_store::{Name, TeamConfig};

use super::git::{GitOutput, output_within};
use super::{
    FETCH_TIMEOUT, LeadRepo, Result, WORKTREES_DIR, WorktreeError, branch_name,
    check_ref_component, summarize_files, worktree_dir_name,
};
use crate::backend::ssh::command::{Ssh, sh_quote, ssh_hint};

/// How long making a clone on a host may take.
pub const REMOTE_CLONE_TIMEOUT: Duration = Duration::from_secs(300);

/// The clone of the project on one host, and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRepo {
    /// The host's name in `hosts:`.
    pub host: Name,
    /// ssh to it.
    pub ssh: Ssh,
    /// The clone there (`repo:`).
    pub repo: PathBuf,
}

/// The clones of the configured hosts, by host name.
pub type RemoteRepos = Arc<BTreeMap<Name, RemoteRepo>>;

impl RemoteRepo {
    /// The clone `host` names.
    pub fn of(host: &HostConfig) -> std::result::Result<RemoteRepo, String> {
        Ok(RemoteRepo {
            host: host.name.clone(),
            ssh: Ssh::new(host)?,
            repo: host.repo.clone(),
        })
    }

    /// The clones of `hosts` (an entry that cannot be reached is an error naming it).
    pub fn all(hosts: &BTreeMap<Name, HostConfig>) -> std::result::Result<RemoteRepos, String> {
        let mut all = BTreeMap::new();
        for (name, host) in hosts {
            all.insert(
                name.clone(),
                RemoteRepo::of(host).map_err(|e| format!("host {name}: {e}"))?,
            );
        }
        Ok(Arc::new(all))
    }

    /// Where teammate `member` of `team` works there.
    pub fn clone_path(&self, team: &Name, member: &Name) -> PathBuf {
        self.repo
            .join(WORKTREES_DIR)
            .join(worktree_dir_name(team, member))
    }

    /// git's address of `path` there.
    fn url(&self, path: &Path) -> String {
        self.ssh.git_url(path)
    }
}

/// The teammates of `config` on configured hosts: member name → its host's clone. A
/// member whose host is no longer configured is left out (nothing can reach it).
pub fn remote_members(config: &TeamConfig, hosts: &RemoteRepos) -> HashMap<Name, RemoteRepo> {
    let mut members = HashMap::new();
    for member in &config.members {
        let Some(host) = member.host.as_deref() else {
            continue;
        };
        match Name::parse(host).ok().and_then(|h| hosts.get(&h)) {
            Some(remote) => {
                members.insert(member.name.clone(), remote.clone());
            }
            None => {
                tracing::debug!(member = %member.name, host, "the member's host is not configured")
            }
        }
    }
    members
}

/// A teammate's clone on another host, as [`LeadRepo::add_remote_worktree`] left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteWorktree {
    /// The host.
    pub host: Name,
    /// The clone there.
    pub path: PathBuf,
    /// `roo/<team>/<name>`.
    pub branch: String,
    /// The commit it started from (for a new clone).
    pub base: String,
    /// An existing clone on the branch was reused.
    pub reused: bool,
    /// The lead's branch was created by this call.
    pub created_branch: bool,
    /// Things the lead should know.
    pub notices: Vec<String>,
}

/// Runs the command line `remote` on the host of `ssh`, stdin closed, for at most `limit`.
pub(super) fn run_ssh(ssh: &Ssh, remote: &str, limit: Duration) -> Result<GitOutput> {
    let mut command = std::process::Command::new(ssh.program());
    command
        .args(ssh.argv(remote))
        .stdin(std::process::Stdio::null());
    output_within(&mut command, limit, "ssh").map_err(|source| WorktreeError::Io {
        action: "run",
        path: ssh.program().to_path_buf(),
        source,
    })
}

fn quote(value: &str) -> Result<String> {
    sh_quote(value).map_err(|e| WorktreeError::Remote {
        host: String::new(),
        what: "build the remote command".into(),
        stderr: e.to_string(),
    })
}

/// The script the host runs to make (or reuse) the clone at `path` of `repo` on `branch`
/// at `base`, with the lead's commit identity; prints `created` or `reused`. Every value
/// is quoted; git runs with hooks and the fsmonitor off.
fn clone_script(
    repo: &Path,
    path: &Path,
    branch: &str,
    base: &str,
    identity: &[(&str, String)],
) -> Result<String> {
    let q = |p: &str| quote(p);
    let mut config = String::new();
    for (key, value) in identity {
        config.push_str(&format!(
            "g -C \"$path\" config {} {} || fail=1\n",
            q(key)?,
            q(value)?
        ));
    }
    Ok(format!(
        "set -u\n\
         g() {{ git -c core.hooksPath=/dev/null -c core.fsmonitor=false \"$@\"; }}\n\
         repo={repo}\n\
         dir=\"$repo\"/.roocode/worktrees\n\
         path={path}\n\
         branch={branch}\n\
         base={base}\n\
         [ -d \"$repo/.git\" ] || {{ echo \"$repo is not a clone of the project (no .git directory)\" >&2; exit 3; }}\n\
         for d in \"$repo/.roocode\" \"$dir\"; do\n\
           if [ -L \"$d\" ]; then echo \"$d is a symbolic link; RooCode never follows one there\" >&2; exit 3; fi\n\
         done\n\
         mkdir -p \"$dir\" || exit 3\n\
         [ -e \"$dir/.gitignore\" ] || [ -L \"$dir/.gitignore\" ] || ( set -C; printf '# RooCode teammates'\\'' clones: not part of the project.\\n*\\n' > \"$dir/.gitignore\" ) || true\n\
         if [ -e \"$path\" ] || [ -L \"$path\" ]; then\n\
           if [ -L \"$path\" ] || [ ! -d \"$path/.git\" ] || [ -L \"$path/.git\" ]; then\n\
             echo \"$path exists and is not a teammate's clone; move it away or pick another member name\" >&2; exit 3\n\
           fi\n\
           on=$(g -C \"$path\" symbolic-ref -q HEAD || true)\n\
           if [ \"$on\" != \"refs/heads/$branch\" ]; then\n\
             echo \"$path is a clone on ${{on:-a detached HEAD}}, not on $branch; check out $branch there or move it away\" >&2; exit 3\n\
           fi\n\
           echo reused\n\
           exit 0\n\
         fi\n\
         g clone --quiet --shared --no-checkout --no-tags \"$repo\" \"$path\" || {{ rm -rf -- \"$path\"; exit 4; }}\n\
         fail=0\n\
         {config}\
         g -C \"$path\" checkout --quiet -B \"$branch\" \"$base\" || fail=1\n\
         if [ \"$fail\" != 0 ]; then rm -rf -- \"$path\"; exit 4; fi\n\
         echo created\n",
        repo = q(&repo.display().to_string())?,
        path = q(&path.display().to_string())?,
        branch = q(branch)?,
        base = q(base)?,
    ))
}

/// The host's side of a fetch from a teammate's clone there, run by the host's shell as
/// `<this> '<clone>'` instead of `git upload-pack`: the clone is checked as a local one
/// is (`worktree/guard.rs`: a valid `HEAD`, no symlink or special file in its `.git`, at
/// most 200,000 entries, no `commondir`, `gitdir`, grafts or http-alternates, alternates
/// naming `repo`'s objects only, no config include or promisor remote), then `git
/// upload-pack --strict` serves the clone's `.git` itself (never the work tree) with
/// hooks, the attribute file and lazy fetches off and an inactivity timeout. The whole
/// script runs under `timeout` (coreutils) for [`FETCH_TIMEOUT`], the lead's own limit,
/// so nothing is left running on the host once the lead gave up; a host without
/// `timeout` gets `ulimit -t` (CPU seconds) instead. A refusal is one `roo-refused:
/// <reason>` line, which [`refused_on_host`] turns into a message.
pub fn upload_pack_command(repo: &Path) -> Result<String> {
    upload_pack_command_within(repo, FETCH_TIMEOUT)
}

/// [`upload_pack_command`] bounded by `limit` instead of [`FETCH_TIMEOUT`] (tests).
pub fn upload_pack_command_within(repo: &Path, limit: Duration) -> Result<String> {
    const SCRIPT: &str = r#"set -u
p=$1; g=$p/.git; repo=__REPO__
no() { echo "roo-refused: $1" >&2; exit 3; }
{ [ ! -L "$p" ] && [ -d "$g" ] && [ ! -L "$g" ]; } || no not-a-clone
{ [ -f "$g/HEAD" ] && [ ! -L "$g/HEAD" ] && [ "$(wc -c < "$g/HEAD")" -le 300 ]; } || no head
h=$(head -n 1 "$g/HEAD")
case $h in
  "ref: refs/"?*) ;;
  *[!0-9a-f]*|"") no head ;;
  *) [ "${#h}" = 40 ] || [ "${#h}" = 64 ] || no head ;;
esac
n=$(find "$g" 2>/dev/null | head -n 200001 | wc -l)
[ "$n" -le 200000 ] || no too-many
bad=$(find "$g" ! -type f ! -type d -print 2>/dev/null | head -n 1) || no unreadable
[ -z "$bad" ] || no special-file
find "$g" >/dev/null 2>&1 || no unreadable
for f in commondir gitdir info/grafts objects/info/http-alternates; do
  if [ -e "$g/$f" ] || [ -L "$g/$f" ]; then no redirect; fi
done
a=$g/objects/info/alternates
if [ -e "$a" ]; then
  [ "$(wc -c < "$a")" -le 1048576 ] || no alternates
  want=$(cd "$repo/.git/objects" && pwd -P) || no alternates
  n=0
  while IFS= read -r line || [ -n "$line" ]; do
    [ -z "$line" ] && continue
    n=$((n + 1))
    # Textually the host clone's objects, as `git clone --shared` wrote them: no path
    # through a link the teammate could retarget after this check.
    [ "$line" = "$repo/.git/objects" ] || [ "$line" = "$want" ] || no alternates
  done < "$a"
  [ "$n" -le 1 ] || no alternates
fi
for c in "$g/config" "$g/config.worktree"; do
  [ -e "$c" ] || continue
  keys=$(git config --file "$c" --no-includes --name-only --list 2>/dev/null) || no config
  if printf '%s\n' "$keys" | grep -qiE '^(include\.|includeif\.|extensions\.partialclone$|remote\..*\.promisor$)'; then no config; fi
done
GIT_NO_LAZY_FETCH=1 exec git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.attributesFile=/dev/null upload-pack --strict --timeout=30 "$g"
"#;
    let script = SCRIPT.replace("__REPO__", &quote(&repo.display().to_string())?);
    let limit = limit.as_secs().max(1);
    // `timeout` kills the script's whole process group (upload-pack, pack-objects).
    let bounded = format!(
        "if command -v timeout >/dev/null 2>&1; then exec timeout -k 5 {limit} sh -c \"$0\" \
         roo-upload-pack \"$@\"; fi; ulimit -t {limit} 2>/dev/null; exec sh -c \"$0\" \
         roo-upload-pack \"$@\""
    );
    Ok(format!("sh -c {} {}", quote(&bounded)?, quote(&script)?))
}

/// The reason of a `roo-refused:` line [`upload_pack_command`] printed, in words.
fn refused_on_host(stderr: &str) -> Option<&'static str> {
    let token = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("roo-refused: "))?;
    Some(match token.trim() {
        "not-a-clone" => "the path is not a teammate's clone (a real directory with a real .git)",
        "head" => {
            "its .git/HEAD is missing, a link or special file, or does not read `ref: refs/…`              or an object name; check out the teammate's branch there again"
        }
        "too-many" => "its .git holds more than 200000 entries; pack them (git gc) there",
        "special-file" => {
            "its .git holds a symlink or special file (FIFO, socket, device), which git would \
             follow out of the clone or block on; remove it there"
        }
        "unreadable" => "part of its .git cannot be read",
        "redirect" => {
            "its .git has commondir, gitdir, info/grafts or objects/info/http-alternates, which \
             would make git read outside the clone; remove it there"
        }
        "alternates" => {
            "its objects/info/alternates names other object stores than the host clone's, \
             where it was made to read"
        }
        "config" => {
            "its config has an include (include.path or includeIf) or a promisor remote, or \
             cannot be read; remove it there"
        }
        _ => "the clone failed the host's check",
    })
}

/// Whether the fetch failed in ssh itself (no connection, no key), by ssh's own lines.
fn ssh_failed(stderr: &str) -> bool {
    stderr.lines().any(is_ssh_line)
}

fn is_ssh_line(line: &str) -> bool {
    line.starts_with("ssh:")
        || line.contains("Permission denied (")
        || line.starts_with("Host key verification failed")
        || line.starts_with("ssh took longer than")
}

/// ssh's own lines of `stderr` (at most 3, each cut to 200 characters): the local ssh
/// client wrote them, nothing read on the host.
fn ssh_lines(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| is_ssh_line(l))
        .take(3)
        .map(|l| l.chars().take(200).collect::<String>())
        .collect::<Vec<_>>()
        .join("; ")
}

impl LeadRepo {
    /// This repository, which fetches the branches of `remotes` (member → its host's
    /// clone) from their hosts ([`LeadRepo::fetch_member`]).
    pub fn with_remotes(mut self, remotes: HashMap<Name, RemoteRepo>) -> LeadRepo {
        self.remotes = Arc::new(remotes);
        self
    }

    /// The teammates whose branches come from other hosts.
    pub fn remotes(&self) -> &HashMap<Name, RemoteRepo> {
        &self.remotes
    }

    /// Makes (or reuses) the clone of `member` of `team` on `remote`'s host. See the
    /// module documentation.
    pub fn add_remote_worktree(
        &self,
        team: &Name,
        member: &Name,
        remote: &RemoteRepo,
    ) -> Result<RemoteWorktree> {
        check_ref_component("team name", team)?;
        check_ref_component("member name", member)?;
        let branch = branch_name(team, member);
        let full_ref = format!("refs/heads/{branch}");
        let head = self.head()?;
        let existing = self
            .git
            .run(&self.root, &["rev-parse", "-q", "--verify", &full_ref])?;
        let mut notices = Vec::new();
        let base = if existing.success {
            existing.stdout.trim().to_string()
        } else {
            head.clone()
        };
        let failed = |what: &str, stderr: String| WorktreeError::Remote {
            host: remote.host.to_string(),
            what: what.to_string(),
            stderr: format!("{}{}", stderr.trim(), ssh_hint(&stderr)),
        };
        // The start commit into the host's clone, under a ref of the team's own.
        let git = self.remote_git(remote)?;
        let refspec = format!("+{base}:refs/roo/{team}/base/{member}");
        let url = remote.url(&remote.repo);
        let out = git.run_limited(
            &self.root,
            &[
                "push",
                "--quiet",
                "--no-verify",
                url.as_str(),
                refspec.as_str(),
            ],
            FETCH_TIMEOUT,
        )?;
        if !out.success {
            return Err(failed(
                &format!("push the start commit to {}", url),
                out.stderr,
            ));
        }
        let mut identity = Vec::new();
        for key in ["user.name", "user.email"] {
            let value = self.git.run(&self.root, &["config", "--get", key])?;
            if value.success {
                identity.push((key, value.stdout.trim_end_matches('\n').to_string()));
            }
        }
        let path = remote.clone_path(team, member);
        let script = clone_script(&remote.repo, &path, &branch, &base, &identity)?;
        let out = run_ssh(&remote.ssh, &script, REMOTE_CLONE_TIMEOUT)?;
        if !out.success {
            return Err(failed(
                &format!("make the clone {} there", path.display()),
                out.stderr,
            ));
        }
        let reused = out.stdout.trim() == "reused";
        if existing.success && !reused {
            let ahead = self.count(&format!("HEAD..{full_ref}"))?;
            notices.push(format!(
                "branch {branch} existed already ({ahead} commit(s) not in the lead's HEAD); \
                 its clone on host {} continues from it",
                remote.host
            ));
        }
        let created_branch = !existing.success;
        if created_branch {
            self.git
                .ok(&self.root, &["branch", "--no-track", &branch, &base])?;
        }
        let dirty = self.uncommitted(&self.root, false)?;
        if !dirty.is_empty() && !reused {
            notices.push(format!(
                "the lead's working tree has uncommitted changes ({}); the clone on host {} \
                 starts from {} without them: commit them first if teammates need them",
                summarize_files(&dirty),
                remote.host,
                super::short(&base)
            ));
        }
        Ok(RemoteWorktree {
            host: remote.host.clone(),
            path,
            branch,
            base,
            reused,
            created_branch,
            notices,
        })
    }

    /// Undoes [`LeadRepo::add_remote_worktree`] for a teammate whose spawn failed: a new
    /// clone there is removed, and the lead's branch when the call created it.
    pub fn discard_remote(&self, worktree: &RemoteWorktree, remote: &RemoteRepo) -> Result<()> {
        if !worktree.reused {
            let path = quote(&worktree.path.display().to_string())?;
            let script = format!("[ -d {path}/.git ] && [ ! -L {path} ] && rm -rf -- {path}; true");
            let out = run_ssh(&remote.ssh, &script, super::FETCH_TIMEOUT)?;
            if !out.success {
                return Err(WorktreeError::Remote {
                    host: remote.host.to_string(),
                    what: format!("remove the clone {} there", worktree.path.display()),
                    stderr: out.stderr,
                });
            }
        }
        if worktree.created_branch {
            let full_ref = format!("refs/heads/{}", worktree.branch);
            self.git
                .ok(&self.root, &["update-ref", "-d", &full_ref, &worktree.base])?;
        }
        Ok(())
    }

    /// Brings `roo/<team>/<member>` from its clone on `remote`'s host into the lead's
    /// repository over the lead's ssh: fast-forward only, no tags, hooks off. A branch
    /// that is not a fast-forward of the lead's is an error, never forced.
    pub fn fetch_remote(&self, team: &Name, member: &Name, remote: &RemoteRepo) -> Result<bool> {
        let path = remote.clone_path(team, member);
        let full_ref = format!("refs/heads/{}", branch_name(team, member));
        let refspec = format!("{full_ref}:{full_ref}");
        let url = remote.url(&path);
        let mut git = self.remote_git(remote)?;
        for (key, value) in super::guard::FETCH_ENV {
            git = git.env(key, value);
        }
        let upload_pack = format!("--upload-pack={}", upload_pack_command(&remote.repo)?);
        let out = git.run_limited(
            &self.root,
            &[
                "-c",
                "core.attributesFile=/dev/null",
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--no-recurse-submodules",
                upload_pack.as_str(),
                url.as_str(),
                refspec.as_str(),
            ],
            FETCH_TIMEOUT,
        )?;
        if !out.success {
            let stderr = match refused_on_host(&out.stderr) {
                Some(why) => format!(
                    "refused on host {}: {why}; nothing was fetched",
                    remote.host
                ),
                None if ssh_failed(&out.stderr) => {
                    format!("{}{}", ssh_lines(&out.stderr), ssh_hint(&out.stderr))
                }
                None => super::guard::fetch_failure(&out.stderr),
            };
            return Err(WorktreeError::Fetch {
                branch: branch_name(team, member),
                path: PathBuf::from(url),
                stderr,
            });
        }
        Ok(true)
    }

    /// The lead's git, reaching hosts with `remote`'s ssh (`GIT_SSH_COMMAND`).
    fn remote_git(&self, remote: &RemoteRepo) -> Result<super::Git> {
        let command = remote
            .ssh
            .git_ssh_command()
            .map_err(|e| WorktreeError::Remote {
                host: remote.host.to_string(),
                what: "build git's ssh command".into(),
                stderr: e.to_string(),
            })?;
        Ok(self
            .git
            .clone()
            .env("GIT_SSH_COMMAND", command)
            .env("GIT_SSH_VARIANT", "ssh"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_clone_script_is_valid_shell_with_hostile_values() {
        let script = clone_script(
            Path::new("/srv/it's $(app)"),
            Path::new("/srv/it's $(app)/.roocode/worktrees/crew+alice"),
            "roo/crew/alice",
            "0123abcd",
            &[("user.name", "O'Brien `x` $(y)\n".to_string())],
        )
        .unwrap();
        let out = std::process::Command::new("sh")
            .args(["-n", "-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{script}\n{:?}", out);
        // Run for real against a missing repository: it says so, and makes nothing.
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("no'repo");
        let path = repo.join(".roocode/worktrees/crew+alice");
        let script = clone_script(&repo, &path, "roo/crew/alice", "0123abcd", &[]).unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("not a clone"));
        assert!(!repo.exists());
    }

    #[test]
    fn the_clone_script_never_writes_through_a_dangling_gitignore_link() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".roocode/worktrees")).unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(&repo)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        git(&["init", "-q", "-b", "main"]);
        git(&[
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "i",
        ]);
        let base = git(&["rev-parse", "HEAD"]);
        let target = dir.path().join("profile");
        std::os::unix::fs::symlink(&target, repo.join(".roocode/worktrees/.gitignore")).unwrap();
        let path = repo.join(".roocode/worktrees/crew+alice");
        let script = clone_script(&repo, &path, "roo/crew/alice", &base, &[]).unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(
            std::fs::symlink_metadata(&target).is_err(),
            "target created"
        );
        assert!(path.join(".git").is_dir());
    }
}
