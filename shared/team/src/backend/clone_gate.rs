//! The gate between a lead making a pane teammate's clone and the teammate's `roo-worker`,
//! which starts while the clone is made (docs/WORKTREES.md "A pane teammate starts while its
//! clone is made"): the worker starts up, joins and sends its first model request, but no
//! tool call or command hook runs, and nothing of the clone is read, until the gate opens.
//!
//! The gate is a file under the lead's private handoff directory (`run/handoff`, mode 0700)
//! whose path reaches the worker through the handoff only, never its command line. The lead
//! writes it once, atomically ([`roo_store::replace_file`]), after the clone is complete:
//! `ok`, or `failed` and why on the next line. The worker polls it ([`watch`]); `ok` opens its
//! [`WorkspaceGate`] only once the clone's own `.git/HEAD` file names the teammate's branch
//! (so a gate file alone cannot make another directory its workspace); `failed` fails every
//! tool call with the reason and stops the worker. The worker takes only a gate path
//! [`gate_path`] could have made for it ([`check_gate_path`]); it removes the file once read
//! as `ok` or `failed`, and moves anything else there aside (`.corrupt-<time>`) and fails.
//! The lead removes it when the spawn fails, and fails the spawn when it cannot write it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use roo_agent::exec::sandbox::handoff::private_dir;
use roo_agent::tool::{WorkspaceGate, WorkspaceOpener};
use roo_store::Name;

use crate::backend::pane::handoff_dir;

/// How long a worker waits for its clone: the lead may wait [`crate::worktree::WORKTREES_LOCK_WAIT`]
/// for the worktrees lock before it starts the clone, and a large checkout takes minutes.
pub const CLONE_WAIT: Duration = Duration::from_secs(900);

/// Largest gate file read: `failed`, a newline and one error message.
const MAX_GATE_BYTES: u64 = 16 * 1024;

/// A new gate's path for `member` of `team` of a lead under `roo_home` (random, so a
/// restarted teammate never reads an old one).
pub fn gate_path(roo_home: &Path, team: &Name, member: &Name) -> std::io::Result<PathBuf> {
    Ok(handoff_dir(roo_home).join(format!(
        "{team}+{member}-{:016x}.clone",
        roo_store::random_u64()?
    )))
}

/// The lead's side: writes the outcome of making the clone to `path` (its directory is
/// created private when missing, [`private_dir`]). An error means the worker would wait
/// on a gate that never opens: the lead then fails the spawn.
pub fn open_gate(path: &Path, outcome: &Result<(), String>) -> Result<(), String> {
    let text = match outcome {
        Ok(()) => "ok\n".to_string(),
        Err(why) => format!("failed\n{}\n", why.replace('\n', " ")),
    };
    let dir = path
        .parent()
        .ok_or_else(|| format!("the clone gate {} has no directory", path.display()))?;
    private_dir(dir).map_err(|e| e.to_string())?;
    roo_store::replace_file(path, text.as_bytes()).map_err(|e| format!("write the clone gate: {e}"))
}

/// The lead's side: removes the gate of a spawn that failed (nobody will read it).
pub fn discard_gate(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// The worker's side, before it trusts a gate path it was handed: it must be a file
/// [`gate_path`] makes for `member` of `team` under `roo_home` — directly in
/// [`handoff_dir`], named `<team>+<member>-<16 hex digits>.clone` — so a handoff cannot
/// make the worker wait on, or remove, any other file.
pub fn check_gate_path(
    roo_home: &Path,
    team: &Name,
    member: &Name,
    path: &Path,
) -> Result<(), String> {
    use std::path::Component;
    let refuse = |why: &str| Err(format!("refusing the clone gate {}: {why}", path.display()));
    if path
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return refuse("its path has `.` or `..` in it");
    }
    let dir = handoff_dir(roo_home);
    // The same directory spelled another way (a ROO_HOME given through a link) is it too.
    let same_dir = |parent: &Path| {
        parent == dir
            || std::fs::canonicalize(parent)
                .is_ok_and(|p| std::fs::canonicalize(&dir).is_ok_and(|d| p == d))
    };
    if !path.parent().is_some_and(same_dir) {
        return refuse(&format!("it is not directly in {}", dir.display()));
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let hex = name
        .strip_prefix(&format!("{team}+{member}-"))
        .and_then(|rest| rest.strip_suffix(".clone"));
    match hex {
        Some(hex) if hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => Ok(()),
        _ => refuse(&format!(
            "its name is not `{team}+{member}-<16 hex digits>.clone`"
        )),
    }
}

/// What a look at a gate file found.
#[derive(Debug)]
enum Gate {
    /// No file yet.
    Missing,
    /// A regular file saying `ok` or `failed` (the latter with the lead's reason).
    Said(Result<(), String>),
    /// Something there that is no gate: not a regular file, or neither `ok` nor `failed`.
    Garbage(String),
    /// A file that could not be read.
    Unreadable(String),
}

/// What the gate file at `path` says.
fn read_gate(path: &Path) -> Gate {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular = || {
        Gate::Garbage(format!(
            "the clone gate {} is not a regular file",
            path.display()
        ))
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Gate::Missing,
        Err(_) if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) => {
            return not_regular();
        }
        Err(e) => return Gate::Unreadable(format!("the clone gate {}: {e}", path.display())),
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return not_regular();
    }
    let mut text = String::new();
    if let Err(e) = file.take(MAX_GATE_BYTES).read_to_string(&mut text) {
        return Gate::Garbage(format!("the clone gate {}: {e}", path.display()));
    }
    let mut lines = text.lines();
    match (lines.next(), lines.next()) {
        (Some("ok"), None) => Gate::Said(Ok(())),
        (Some("failed"), why) => Gate::Said(Err(format!(
            "the lead failed to make its clone: {}",
            why.unwrap_or("no reason given")
        ))),
        _ => Gate::Garbage(format!(
            "the clone gate {} holds neither `ok` nor `failed`",
            path.display()
        )),
    }
}

/// How often [`watch`] looks at the gate: often at first (a clone takes tens of
/// milliseconds), then every [`SLOW_POLL`].
const FAST_POLL: Duration = Duration::from_millis(2);
const FAST_FOR: Duration = Duration::from_secs(2);
const SLOW_POLL: Duration = Duration::from_millis(50);

/// The worker's side: a closed [`WorkspaceGate`] for the clone `cwd` on `branch`, and the
/// task that opens it from the gate file `path` (removed once read): the outcome it opened
/// with, so the worker can stop on a failure. It opens `Ok` only once the gate says `ok`
/// and `cwd/.git/HEAD` names `branch`; after [`CLONE_WAIT`] without that, it fails.
pub fn watch(
    path: PathBuf,
    cwd: PathBuf,
    branch: String,
) -> (WorkspaceGate, tokio::task::JoinHandle<Result<(), String>>) {
    let (opener, gate) = WorkspaceGate::new();
    let task = tokio::spawn(wait_and_open(opener, path, cwd, branch, CLONE_WAIT));
    (gate, task)
}

async fn wait_and_open(
    opener: WorkspaceOpener,
    path: PathBuf,
    cwd: PathBuf,
    branch: String,
    limit: Duration,
) -> Result<(), String> {
    let (outcome, seen) = wait_for_clone(&path, &cwd, &branch, limit).await;
    let outcome = match seen {
        // The lead's word, read: nobody reads it again.
        Seen::Said => {
            let _ = std::fs::remove_file(&path);
            outcome
        }
        // No gate: moved aside (kept for a look), never removed.
        Seen::Garbage => outcome.map_err(|why| match roo_store::move_aside(&path) {
            Ok(aside) => format!("{why}; it was moved aside to {}", aside.display()),
            Err(e) => format!("{why}; it could not be moved aside: {e}"),
        }),
        Seen::Nothing => outcome,
    };
    opener.open(outcome.clone());
    outcome
}

/// What [`wait_for_clone`] left at the gate's path.
enum Seen {
    /// A gate saying `ok` or `failed`.
    Said,
    /// Something that is no gate.
    Garbage,
    /// Nothing it read.
    Nothing,
}

async fn wait_for_clone(
    path: &Path,
    cwd: &Path,
    branch: &str,
    limit: Duration,
) -> (Result<(), String>, Seen) {
    let start = Instant::now();
    loop {
        match read_gate(path) {
            Gate::Said(Ok(())) if roo_agent::head_names_branch(cwd, branch) => {
                return (Ok(()), Seen::Said);
            }
            Gate::Said(Ok(())) => {
                return (
                    Err(format!(
                        "the lead said its clone {} is complete, but it is not a clone on {branch}",
                        cwd.display()
                    )),
                    Seen::Said,
                );
            }
            Gate::Said(Err(why)) => return (Err(why), Seen::Said),
            Gate::Garbage(why) => return (Err(why), Seen::Garbage),
            Gate::Unreadable(why) => return (Err(why), Seen::Nothing),
            Gate::Missing => {}
        }
        let waited = start.elapsed();
        if waited >= limit {
            return (
                Err(format!(
                    "the lead did not finish its clone {} within {} s",
                    cwd.display(),
                    limit.as_secs()
                )),
                Seen::Nothing,
            );
        }
        tokio::time::sleep(if waited < FAST_FOR {
            FAST_POLL
        } else {
            SLOW_POLL
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clone_on(dir: &Path, branch: &str) {
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(dir.join(".git/HEAD"), format!("ref: refs/heads/{branch}\n")).unwrap();
    }

    #[tokio::test]
    async fn the_gate_opens_only_once_the_lead_says_ok_and_the_clone_is_on_its_branch() {
        let tmp = tempfile::tempdir().unwrap();
        let (gate, cwd) = (tmp.path().join("run/handoff/g.clone"), tmp.path().join("c"));
        let (workspace, task) = watch(gate.clone(), cwd.clone(), "roo/t/a".into());
        tokio::time::sleep(Duration::from_millis(30)).await;
        // A clone that is there is not enough: the lead has not said it is complete.
        clone_on(&cwd, "roo/t/a");
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!task.is_finished(), "opened before the lead said ok");
        open_gate(&gate, &Ok(())).unwrap();
        assert_eq!(workspace.ready().await, Ok(()));
        assert_eq!(task.await.unwrap(), Ok(()));
        assert!(!gate.exists(), "the worker removes the gate it read");
    }

    #[tokio::test]
    async fn a_failed_clone_fails_the_gate_with_the_leads_reason() {
        let tmp = tempfile::tempdir().unwrap();
        let (gate, cwd) = (tmp.path().join("g.clone"), tmp.path().join("c"));
        let (workspace, task) = watch(gate.clone(), cwd, "roo/t/a".into());
        open_gate(&gate, &Err("run `git clone`: boom\nmore".into())).unwrap();
        let why = workspace.ready().await.unwrap_err();
        assert!(
            why.contains("failed to make its clone: run `git clone`: boom more"),
            "{why}"
        );
        assert_eq!(task.await.unwrap(), Err(why));
    }

    #[tokio::test]
    async fn ok_for_a_directory_that_is_no_clone_on_the_branch_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let (gate, cwd) = (tmp.path().join("g.clone"), tmp.path().join("c"));
        clone_on(&cwd, "main");
        open_gate(&gate, &Ok(())).unwrap();
        let (workspace, _task) = watch(gate, cwd, "roo/t/a".into());
        assert!(
            workspace
                .ready()
                .await
                .unwrap_err()
                .contains("not a clone on roo/t/a")
        );
    }

    #[tokio::test]
    async fn a_gate_that_is_a_symlink_or_garbage_is_refused_and_silence_times_out() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("target");
        std::fs::write(&target, "ok\n").unwrap();
        let link = tmp.path().join("link.clone");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(read_gate(&link), Gate::Garbage(_)));
        let garbage = tmp.path().join("garbage.clone");
        std::fs::write(&garbage, "maybe\n").unwrap();
        assert!(matches!(read_gate(&garbage), Gate::Garbage(why) if why.contains("neither")));
        let (opener, gate) = WorkspaceGate::new();
        let missing = tmp.path().join("missing.clone");
        let outcome = wait_and_open(
            opener,
            missing,
            tmp.path().join("c"),
            "b".into(),
            Duration::from_millis(20),
        )
        .await;
        assert!(outcome.unwrap_err().contains("did not finish"));
        assert!(gate.ready().await.is_err());
    }

    #[tokio::test]
    async fn a_garbage_gate_is_moved_aside_and_reported_never_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let (gate, cwd) = (tmp.path().join("g.clone"), tmp.path().join("c"));
        clone_on(&cwd, "roo/t/a");
        std::fs::write(&gate, "precious\n").unwrap();
        let (workspace, task) = watch(gate.clone(), cwd, "roo/t/a".into());
        let why = workspace.ready().await.unwrap_err();
        assert!(
            why.contains("neither") && why.contains("moved aside"),
            "{why}"
        );
        assert_eq!(task.await.unwrap(), Err(why));
        assert!(!gate.exists());
        let aside: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("g.clone.corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1, "{aside:?}");
        let kept = std::fs::read_to_string(tmp.path().join(&aside[0])).unwrap();
        assert_eq!(kept, "precious\n");
    }

    #[test]
    fn only_a_gate_path_the_lead_makes_for_this_member_is_taken() {
        let home = Path::new("/h");
        let (team, member) = (Name::parse("crew").unwrap(), Name::parse("alice").unwrap());
        let made = gate_path(home, &team, &member).unwrap();
        assert_eq!(check_gate_path(home, &team, &member, &made), Ok(()));
        let handoff = handoff_dir(home);
        for bad in [
            PathBuf::from("/etc/crew+alice-0123456789abcdef.clone"),
            handoff.join("../crew+alice-0123456789abcdef.clone"),
            handoff.join("sub/crew+alice-0123456789abcdef.clone"),
            handoff.join("crew+bob-0123456789abcdef.clone"),
            handoff.join("crew+alice-0123.clone"),
            handoff.join("crew+alice-0123456789abcdeg.clone"),
            handoff.join("crew+alice-0123456789abcdef.sock"),
            handoff.join("handoff.json"),
        ] {
            let refused = check_gate_path(home, &team, &member, &bad);
            assert!(refused.is_err(), "{}", bad.display());
        }
        // Through a link to ROO_HOME: the same directory.
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir_all(handoff_dir(&real)).unwrap();
        std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
        let linked = gate_path(&tmp.path().join("link"), &team, &member).unwrap();
        assert_eq!(check_gate_path(&real, &team, &member, &linked), Ok(()));
        let elsewhere = tmp.path().join("other/run/handoff");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let other = elsewhere.join(made.file_name().unwrap());
        assert!(check_gate_path(&real, &team, &member, &other).is_err());
    }

    #[test]
    fn a_gate_the_lead_cannot_write_is_an_error() {
        // Root ignores modes: a directory in the way of the gate makes the write fail.
        let tmp = tempfile::tempdir().unwrap();
        let gate = tmp.path().join("run/handoff/g.clone");
        std::fs::create_dir_all(&gate).unwrap();
        assert!(open_gate(&gate, &Ok(())).is_err());
    }
}
