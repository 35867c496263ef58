//! Removing a teammate's clone on another host once nothing in it is needed: by TeamDelete
//! (through [`LeadRepo::cleanup`]) and by `roo-mail team gc-hosts` for a team whose lead
//! died ([`LeadRepo::gc_hosts`]).
//!
//! The path removed is never taken from a record: it is the one the lead itself makes
//! for the member on that host ([`RemoteRepo::clone_path`]: `<repo>/.roocode/worktrees/
//! <team>+<name>`, `repo:` from the lead's own `hosts:` config, names that passed
//! [`Name`] and the ref-component check). What the roster records (the member's host and
//! `worktree_path`, in the store, which a teammate host can write) must name exactly that
//! path ([`check_recorded_clone`]), or the member is refused and nothing runs for it.
//!
//! A clone is removed only when its branch, fetched first by the lead, has nothing the
//! lead's HEAD lacks (merged, or never given work), and the host finds, without running
//! anything of the clone's, that it is still that clone as fetched ([`remove_script`]): a
//! real directory (no symlink on the way from `repo`, physical path checked), on the
//! teammate's branch, its branches and stash exactly the fetched tip, nothing staged
//! (its index against that tip, read by git with hooks and the fsmonitor off: no filter
//! runs without a work tree) and no file in its work tree changed after its index was
//! last written (uncommitted work). Anything
//! else keeps it, with the reason.

use std::path::{Path, PathBuf};

use roo_store::{Name, TeamConfig};

use super::remote::{RemoteRepo, run_ssh};
use super::{
    FETCH_TIMEOUT, LeadRepo, Result, WORKTREES_DIR, WorktreeError, branch_name, check_ref_component,
};
use crate::backend::ssh::command::sh_quote;

/// What became of one clone on a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteRemoval {
    /// Removed.
    Removed,
    /// Nothing was there (removed before).
    Gone,
    /// Kept, with why (in words).
    Kept(String),
}

/// Checks that `path` is the clone the lead makes for `member` of `team` on `remote`'s
/// host: absolute, no `.` or `..` component, exactly `<repo>/.roocode/worktrees/<team>+
/// <member>`. Returns that path. Used on every path before a removal runs, and on what
/// the roster records (`recorded`, hostile) before gc-hosts acts on a member.
pub fn check_recorded_clone(
    remote: &RemoteRepo,
    team: &Name,
    member: &Name,
    recorded: &Path,
) -> std::result::Result<PathBuf, String> {
    check_ref_component("team name", team).map_err(|e| e.to_string())?;
    check_ref_component("member name", member).map_err(|e| e.to_string())?;
    let want = remote.clone_path(team, member);
    // On the text, not on `Path::components`, which drops a `.` and a trailing `/`.
    let plain = |p: &Path| {
        let text = p.as_os_str().as_encoded_bytes();
        text.first() == Some(&b'/')
            && text[1..]
                .split(|b| *b == b'/')
                .all(|part| !part.is_empty() && part != b"." && part != b"..")
    };
    if !plain(&want) {
        return Err(format!(
            "host {}'s repo: {} is not a plain absolute path",
            remote.host,
            remote.repo.display()
        ));
    }
    if !plain(recorded) || recorded.as_os_str() != want.as_os_str() {
        return Err(format!(
            "the recorded clone {} of {member} on host {} is not {}, the clone the lead makes \
             there; nothing was run for it",
            recorded.display(),
            remote.host,
            want.display()
        ));
    }
    Ok(want)
}

/// The script the host runs to remove the clone at `path` (under `repo`) on `branch`,
/// whose tip the lead fetched as `tip`. Prints `removed` or `gone`; a refusal is one
/// `roo-kept: <reason>` line on stderr and exit 3. Every value is quoted.
fn remove_script(repo: &Path, path: &Path, branch: &str, tip: &str) -> Result<String> {
    let q = |v: &str| {
        sh_quote(v).map_err(|e| WorktreeError::Remote {
            host: String::new(),
            what: "build the remote command".into(),
            stderr: e.to_string(),
        })
    };
    const SCRIPT: &str = r#"set -u
no() { echo "roo-kept: $1" >&2; exit 3; }
dir=$repo/__DIR__
g=$path/.git
if [ ! -e "$path" ] && [ ! -L "$path" ]; then echo gone; exit 0; fi
for d in "$repo/.roocode" "$dir" "$path" "$g" "$g/HEAD" "$g/index"; do
  [ -L "$d" ] && no "$d is a symbolic link"
done
[ "${path%/*}" = "$dir" ] || no "$path is not in $dir"
want=$(cd -P -- "$repo" 2>/dev/null && pwd -P) || no "$repo cannot be entered"
real=$(cd -P -- "$dir" 2>/dev/null && pwd -P) || no "$dir cannot be entered"
[ "$real" = "${want%/}/__DIR__" ] || no "$dir resolves to $real, outside $repo"
{ [ -d "$g" ] && [ -f "$g/HEAD" ] && [ -f "$g/index" ]; } || no "$path is not a teammate's clone"
[ "$(head -n 1 "$g/HEAD")" = "ref: refs/heads/$branch" ] || no "it is not on $branch"
t=; if command -v timeout >/dev/null 2>&1; then t="timeout 30"; fi
refs=$($t git --git-dir="$g" -c core.hooksPath=/dev/null -c core.fsmonitor=false for-each-ref '--format=%(objectname) %(refname)' refs/heads refs/stash refs/remotes/origin 2>/dev/null) || no "its branches cannot be read"
printf '%s\n' "$refs" | grep -qxF "$tip refs/heads/$branch" || no "its branch $branch moved since the lead fetched it"
# Its other branches as the clone made them (each at the host clone's same branch); no stash.
printf '%s\n' "$refs" | while read -r sha ref; do
  case $ref in
    "refs/heads/$branch"|refs/remotes/origin/*) ;;
    refs/heads/*) printf '%s\n' "$refs" | grep -qxF "$sha refs/remotes/origin/${ref#refs/heads/}" || exit 1 ;;
    *) exit 1 ;;
  esac
done || no "its other branches or its stash hold commits the lead did not fetch"
$t git --git-dir="$g" -c core.hooksPath=/dev/null -c core.fsmonitor=false diff-index --cached --quiet "$tip" -- 2>/dev/null || no "it holds staged changes not committed"
changed=$(find "$path" -path "$g" -prune -o -newer "$g/index" -print 2>/dev/null | head -n 1)
[ -z "$changed" ] || no "it holds files changed since its last commit (${changed#"$path"/})"
# Removed from inside the checked directory, never through a path a link could redirect.
cd -P -- "$dir" && [ "$(pwd -P)" = "$real" ] || no "$dir moved"
rm -rf -- "./${path##*/}" || no "rm failed"
echo removed
"#;
    Ok(format!(
        "repo={}\npath={}\nbranch={}\ntip={}\n{}",
        q(&repo.display().to_string())?,
        q(&path.display().to_string())?,
        q(branch)?,
        q(tip)?,
        SCRIPT.replace("__DIR__", WORKTREES_DIR)
    ))
}

impl LeadRepo {
    /// Removes `member`'s clone on `remote`'s host if its branch in this repository (just
    /// fetched from there) has nothing the lead's HEAD lacks and the clone there is still
    /// as fetched (see the module documentation). Runs only on the path the lead makes.
    pub fn remove_remote_clone(
        &self,
        team: &Name,
        member: &Name,
        remote: &RemoteRepo,
    ) -> Result<RemoteRemoval> {
        let path = remote.clone_path(team, member);
        let path = match check_recorded_clone(remote, team, member, &path) {
            Ok(path) => path,
            Err(why) => return Ok(RemoteRemoval::Kept(why)),
        };
        let branch = branch_name(team, member);
        let full_ref = format!("refs/heads/{branch}");
        let tip = self
            .git
            .run(&self.root, &["rev-parse", "-q", "--verify", &full_ref])?;
        if !tip.success {
            return Ok(RemoteRemoval::Kept(format!(
                "branch {branch} is not in the lead's repository, so whether its work is \
                 merged is unknown"
            )));
        }
        if !self.changes(None, &full_ref)?.is_empty() {
            return Ok(RemoteRemoval::Kept(format!(
                "branch {branch} has commits the lead's HEAD lacks; merge with TeamMerge"
            )));
        }
        let script = remove_script(&remote.repo, &path, &branch, tip.stdout.trim())?;
        let out = run_ssh(&remote.ssh, &script, FETCH_TIMEOUT)?;
        match out.stdout.trim() {
            "removed" if out.success => Ok(RemoteRemoval::Removed),
            "gone" if out.success => Ok(RemoteRemoval::Gone),
            _ => {
                let why = out
                    .stderr
                    .lines()
                    .find_map(|l| l.strip_prefix("roo-kept: "))
                    .map(|w| w.chars().take(300).collect::<String>());
                match why {
                    Some(why) => Ok(RemoteRemoval::Kept(why)),
                    None => Err(WorktreeError::Remote {
                        host: remote.host.to_string(),
                        what: format!("remove the clone {} there", path.display()),
                        stderr: out.stderr,
                    }),
                }
            }
        }
    }

    /// `roo-mail team gc-hosts`: for each teammate of `config` on a configured host
    /// (`hosts`; with `only`, that host alone), its recorded clone checked against the
    /// one the lead makes ([`check_recorded_clone`]; refused: nothing runs for it), its
    /// branch fetched, and its clone removed as [`LeadRepo::remove_remote_clone`] says —
    /// unless `dry_run`, which fetches and reports what would be removed. One line per
    /// member; the second value says whether a member was refused or kept.
    pub fn gc_hosts(
        &self,
        config: &TeamConfig,
        hosts: &std::collections::BTreeMap<Name, RemoteRepo>,
        only: Option<&Name>,
        dry_run: bool,
    ) -> (Vec<String>, bool) {
        let team = &config.name;
        let mut lines = Vec::new();
        let mut held_back = false;
        for member in &config.members {
            if member.agent_id == config.lead_agent_id {
                continue;
            }
            let Some(host) = member.host.as_deref() else {
                continue;
            };
            let Ok(host) = Name::parse(host) else {
                lines.push(format!(
                    "{}: refused: its recorded host is not a host name",
                    member.name
                ));
                held_back = true;
                continue;
            };
            if only.is_some_and(|o| *o != host) {
                continue;
            }
            let Some(remote) = hosts.get(&host) else {
                lines.push(format!(
                    "{}: skipped: host {host} is not in this config's hosts:",
                    member.name
                ));
                held_back = true;
                continue;
            };
            let recorded = member.worktree_path.clone().unwrap_or_default();
            let path = match check_recorded_clone(remote, team, &member.name, &recorded) {
                Ok(path) => path,
                Err(why) => {
                    lines.push(format!("{}: refused: {why}", member.name));
                    held_back = true;
                    continue;
                }
            };
            let shown = format!("{} on host {host}", path.display());
            let repo = self.clone().with_remotes(
                [(member.name.clone(), remote.clone())]
                    .into_iter()
                    .collect(),
            );
            if let Err(e) = repo.fetch_member(team, &member.name) {
                lines.push(format!("{}: kept {shown}: {e}", member.name));
                held_back = true;
                continue;
            }
            let outcome = if dry_run {
                let full_ref = format!("refs/heads/{}", branch_name(team, &member.name));
                match self.changes(None, &full_ref) {
                    Ok(c) if c.is_empty() => Ok(RemoteRemoval::Kept(
                        "merged; would be removed (--dry-run)".into(),
                    )),
                    Ok(c) => Ok(RemoteRemoval::Kept(format!("{c}; merge with TeamMerge"))),
                    Err(e) => Err(e),
                }
            } else {
                repo.remove_remote_clone(team, &member.name, remote)
            };
            match outcome {
                Ok(RemoteRemoval::Removed) => {
                    lines.push(format!("{}: removed {shown}", member.name))
                }
                Ok(RemoteRemoval::Gone) => {
                    lines.push(format!("{}: {shown} was already gone", member.name))
                }
                Ok(RemoteRemoval::Kept(why)) => {
                    held_back |= !dry_run;
                    lines.push(format!("{}: kept {shown}: {why}", member.name))
                }
                Err(e) => {
                    held_back = true;
                    lines.push(format!("{}: kept {shown}: {e}", member.name))
                }
            }
        }
        (lines, held_back)
    }
}

/// The team runtime's [`roo_cli::hosts::HostCleaner`], which the `roo-mail` binary
/// installs: the hosts of the user's config under ROO_HOME (the lead's `hosts:`), the
/// repository around the current directory (the lead's), the system's git.
pub struct RuntimeCleaner;

impl roo_cli::hosts::HostCleaner for RuntimeCleaner {
    fn gc(
        &self,
        home: &roo_store::RooHome,
        config: &TeamConfig,
        host: Option<&Name>,
        dry_run: bool,
    ) -> std::result::Result<(Vec<String>, bool), String> {
        let hosts = roo_agent::config::user_hosts(home.root()).map_err(|e| e.to_string())?;
        if let Some(host) = host
            && !hosts.contains_key(host)
        {
            return Err(format!("--host {host}: not a host of your hosts: config"));
        }
        let remotes = RemoteRepo::all(&hosts)?;
        let cwd = std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?;
        let repo = match LeadRepo::discover(&cwd, &super::Git::new()).map_err(|e| e.to_string())? {
            super::Discovered::Repo(repo) => repo,
            super::Discovered::Shared { dir, .. } => {
                return Err(format!(
                    "{} is not the lead's repository (no git repository with a commit); run \
                     gc-hosts there",
                    dir.display()
                ));
            }
        };
        Ok(repo.gc_hosts(config, remotes.as_ref(), host, dry_run))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use roo_agent::config::HostConfig;

    use super::*;

    fn remote(repo: &str) -> RemoteRepo {
        RemoteRepo::of(&HostConfig {
            name: Name::parse("b").unwrap(),
            ssh: "alice@b.example".into(),
            repo: PathBuf::from(repo),
            roo_worker: "roo-worker".into(),
            ssh_config: None,
            tmux_socket: None,
        })
        .unwrap()
    }

    #[test]
    fn only_the_clone_the_lead_makes_passes() {
        let r = remote("/srv/app");
        let (t, m) = (Name::parse("crew").unwrap(), Name::parse("alice").unwrap());
        let good = PathBuf::from("/srv/app/.roocode/worktrees/crew+alice");
        assert_eq!(check_recorded_clone(&r, &t, &m, &good).unwrap(), good);
        for hostile in [
            "/",
            "/srv/app",
            "/home/alice",
            "/srv/app/.roocode/worktrees",
            "/srv/app/.roocode/worktrees/crew+bob",
            "/srv/app/.roocode/worktrees/crew+alice/..",
            "/srv/app/.roocode/worktrees/../worktrees/crew+alice",
            "/srv/app/.roocode/worktrees/./crew+alice",
            "/srv/app/.roocode/worktrees/crew+alice/",
            "/srv/app//.roocode/worktrees/crew+alice",
            "srv/app/.roocode/worktrees/crew+alice",
            "",
        ] {
            assert!(
                check_recorded_clone(&r, &t, &m, Path::new(hostile)).is_err(),
                "{hostile} passed"
            );
        }
        // A `repo:` that is not plain refuses everything.
        let r = remote("/srv/../etc");
        let p = PathBuf::from("/srv/../etc/.roocode/worktrees/crew+alice");
        assert!(check_recorded_clone(&r, &t, &m, &p).is_err());
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn sh(script: &str) -> std::process::Output {
        std::process::Command::new("sh")
            .args(["-c", script])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap()
    }

    /// The host's side, run for real: a clone as fetched is removed; one with a newer
    /// file, a moved branch, or reached through a symlinked directory is kept, untouched.
    #[test]
    fn the_host_removes_only_an_unchanged_clone_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("it's repo");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("f"), "1").unwrap();
        git(&repo, &["add", "f"]);
        git(
            &repo,
            &[
                "-c",
                "user.name=a",
                "-c",
                "user.email=a@b",
                "commit",
                "-q",
                "-m",
                "i",
            ],
        );
        let wt = repo.join(".roocode/worktrees");
        std::fs::create_dir_all(&wt).unwrap();
        let make = |name: &str| {
            let path = wt.join(format!("crew+{name}"));
            git(
                &wt,
                &[
                    "clone",
                    "-q",
                    "--shared",
                    repo.to_str().unwrap(),
                    path.to_str().unwrap(),
                ],
            );
            git(
                &path,
                &["checkout", "-q", "-b", &format!("roo/crew/{name}")],
            );
            let tip = git(&path, &["rev-parse", "HEAD"]);
            (path, tip)
        };
        // Unchanged: removed; a second run finds it gone.
        let (path, tip) = make("alice");
        // The index written after the checkout's files (as a fresh clone has it).
        std::thread::sleep(std::time::Duration::from_millis(20));
        git(&path, &["update-index", "--refresh"]);
        let script = remove_script(&repo, &path, "roo/crew/alice", &tip).unwrap();
        let out = sh(&script);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "removed",
            "{out:?}"
        );
        assert!(!path.exists());
        assert_eq!(String::from_utf8_lossy(&sh(&script).stdout).trim(), "gone");
        // A file changed after its last commit: kept.
        let (path, tip) = make("bob");
        std::thread::sleep(std::time::Duration::from_millis(1100));
        std::fs::write(path.join("f"), "changed").unwrap();
        let out = sh(&remove_script(&repo, &path, "roo/crew/bob", &tip).unwrap());
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("changed since its last commit"));
        assert!(path.join("f").exists());
        // A change staged (the index written after the file) but not committed: kept.
        let (staged, staged_tip) = make("dave");
        std::fs::write(staged.join("f"), "staged").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        git(&staged, &["add", "f"]);
        let out = sh(&remove_script(&repo, &staged, "roo/crew/dave", &staged_tip).unwrap());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("staged changes"),
            "{out:?}"
        );
        assert!(staged.join("f").exists());
        // A branch moved after the fetch: kept.
        let out = sh(&remove_script(&repo, &path, "roo/crew/bob", &"0".repeat(40)).unwrap());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("moved since"),
            "{out:?}"
        );
        assert!(path.exists());
        // The worktrees directory a link to elsewhere: nothing there is touched.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("crew+carol/.git")).unwrap();
        std::fs::write(elsewhere.join("crew+carol/keep"), "x").unwrap();
        let linked = dir.path().join("linked");
        std::fs::create_dir_all(linked.join(".roocode")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, linked.join(".roocode/worktrees")).unwrap();
        let path = linked.join(".roocode/worktrees/crew+carol");
        let out = sh(&remove_script(&linked, &path, "roo/crew/carol", &tip).unwrap());
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));
        assert!(elsewhere.join("crew+carol/keep").exists());
    }
}
