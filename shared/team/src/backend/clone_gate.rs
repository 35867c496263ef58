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
//! tool call with the reason and stops the worker. The worker removes the file once read; the
//! lead removes it when the spawn fails.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
/// created private when missing). A failure is logged: the worker then waits until the
/// lead ends it (the lead fails the spawn on a failed clone in any case).
pub fn open_gate(path: &Path, outcome: &Result<(), String>) {
    let text = match outcome {
        Ok(()) => "ok\n".to_string(),
        Err(why) => format!("failed\n{}\n", why.replace('\n', " ")),
    };
    let written = private_parent(path)
        .and_then(|()| roo_store::replace_file(path, text.as_bytes()).map_err(|e| e.to_string()));
    if let Err(e) = written {
        tracing::warn!(gate = %path.display(), error = %e, "failed to write the clone gate");
    }
}

/// The lead's side: removes the gate of a spawn that failed (nobody will read it).
pub fn discard_gate(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// Creates `path`'s directory mode 0700 when missing; refuses one that is not a real
/// directory.
fn private_parent(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    let Some(dir) = path.parent() else {
        return Err("the gate has no directory".to_string());
    };
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("create {}: {e}", dir.display())),
    }
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        _ => Err(format!("{} is not a directory", dir.display())),
    }
}

/// What a gate file says: `None` while it is missing.
fn read_gate(path: &Path) -> Option<Result<(), String>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(Err(format!("the clone gate {}: {e}", path.display()))),
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Some(Err(format!(
            "the clone gate {} is not a regular file",
            path.display()
        )));
    }
    let mut text = String::new();
    if let Err(e) = file.take(MAX_GATE_BYTES).read_to_string(&mut text) {
        return Some(Err(format!("the clone gate {}: {e}", path.display())));
    }
    let mut lines = text.lines();
    Some(match (lines.next(), lines.next()) {
        (Some("ok"), None) => Ok(()),
        (Some("failed"), why) => Err(format!(
            "the lead failed to make its clone: {}",
            why.unwrap_or("no reason given")
        )),
        _ => Err(format!(
            "the clone gate {} holds neither `ok` nor `failed`",
            path.display()
        )),
    })
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
    let outcome = wait_for_clone(&path, &cwd, &branch, limit).await;
    let _ = std::fs::remove_file(&path);
    opener.open(outcome.clone());
    outcome
}

async fn wait_for_clone(
    path: &Path,
    cwd: &Path,
    branch: &str,
    limit: Duration,
) -> Result<(), String> {
    let start = Instant::now();
    loop {
        match read_gate(path) {
            Some(Ok(())) if roo_agent::head_names_branch(cwd, branch) => return Ok(()),
            Some(Ok(())) => {
                return Err(format!(
                    "the lead said its clone {} is complete, but it is not a clone on {branch}",
                    cwd.display()
                ));
            }
            Some(Err(why)) => return Err(why),
            None => {}
        }
        let waited = start.elapsed();
        if waited >= limit {
            return Err(format!(
                "the lead did not finish its clone {} within {} s",
                cwd.display(),
                limit.as_secs()
            ));
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
        open_gate(&gate, &Ok(()));
        assert_eq!(workspace.ready().await, Ok(()));
        assert_eq!(task.await.unwrap(), Ok(()));
        assert!(!gate.exists(), "the worker removes the gate it read");
    }

    #[tokio::test]
    async fn a_failed_clone_fails_the_gate_with_the_leads_reason() {
        let tmp = tempfile::tempdir().unwrap();
        let (gate, cwd) = (tmp.path().join("g.clone"), tmp.path().join("c"));
        let (workspace, task) = watch(gate.clone(), cwd, "roo/t/a".into());
        open_gate(&gate, &Err("run `git clone`: boom\nmore".into()));
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
        open_gate(&gate, &Ok(()));
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
        assert!(read_gate(&link).unwrap().is_err());
        let garbage = tmp.path().join("garbage.clone");
        std::fs::write(&garbage, "maybe\n").unwrap();
        assert!(
            read_gate(&garbage)
                .unwrap()
                .unwrap_err()
                .contains("neither")
        );
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
}
