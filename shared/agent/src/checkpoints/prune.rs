//! Keeping the checkpoint stores bounded: session files older than the age limit go,
//! then, while all stores together exceed the size limit, the oldest sessions' files;
//! a project with no session left loses its whole store, and a store that lost sessions
//! loses the contents no remaining session names. A session written to in the last hour
//! (one running now) and contents stored in the last hour are never pruned.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::CheckpointLimits;
use super::record::{Entry, SessionLog};

/// What is younger than this is never pruned (a running session may still need it).
const GRACE: Duration = Duration::from_secs(3600);

/// Prunes the stores under `base` (`<ROO_HOME>/checkpoints`) to `limits`. Best effort:
/// what cannot be removed stays.
pub(super) fn prune(base: &Path, limits: &CheckpointLimits) {
    let now = SystemTime::now();
    let Ok(projects) = std::fs::read_dir(base) else {
        return;
    };
    let mut sessions: Vec<(SystemTime, PathBuf)> = Vec::new();
    let mut touched: HashSet<PathBuf> = HashSet::new();
    for project in projects.flatten().map(|e| e.path()) {
        let mut kept = 0;
        for (modified, path) in session_files(&project) {
            let age = now.duration_since(modified).unwrap_or_default();
            if age > limits.max_age && age > GRACE {
                let _ = std::fs::remove_file(&path);
                touched.insert(project.clone());
            } else {
                kept += 1;
                sessions.push((modified, path));
            }
        }
        if kept == 0 && is_old(&project, now) {
            let _ = std::fs::remove_dir_all(&project);
            touched.remove(&project);
        }
    }
    let mut total = dir_size(base);
    sessions.sort();
    for (modified, path) in sessions {
        if total <= limits.max_total_bytes {
            break;
        }
        if now.duration_since(modified).unwrap_or_default() <= GRACE {
            continue;
        }
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if std::fs::remove_file(&path).is_ok() {
            total = total.saturating_sub(size);
            if let Some(project) = path.parent().and_then(Path::parent) {
                touched.insert(project.to_path_buf());
            }
        }
    }
    for project in touched {
        sweep(&project, now);
    }
}

/// The session files of one project's store, with when each was last written.
fn session_files(project: &Path) -> Vec<(SystemTime, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(project.join("sessions")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let modified = e.metadata().ok()?.modified().ok()?;
            Some((modified, e.path()))
        })
        .collect()
}

fn is_old(path: &Path, now: SystemTime) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|m| now.duration_since(m).unwrap_or_default() > GRACE)
}

/// Removes the contents of `project`'s store that no session file names.
fn sweep(project: &Path, now: SystemTime) {
    let mut named = HashSet::new();
    for (_, path) in session_files(project) {
        let Ok(Some(log)) = SessionLog::parse(&path) else {
            // A session file that cannot be read protects everything.
            return;
        };
        for prompt in log.prompts {
            for entry in prompt.changes.into_values() {
                if let Entry::File { blob, .. } = entry {
                    named.insert(blob);
                }
            }
        }
    }
    let Ok(heads) = std::fs::read_dir(project.join("objects")) else {
        return;
    };
    for head in heads.flatten() {
        let Ok(tails) = std::fs::read_dir(head.path()) else {
            continue;
        };
        for tail in tails.flatten() {
            let blob = format!(
                "{}{}",
                head.file_name().to_string_lossy(),
                tail.file_name().to_string_lossy()
            );
            if !named.contains(&blob) && is_old(&tail.path(), now) {
                let _ = std::fs::remove_file(tail.path());
            }
        }
    }
}

/// Bytes of the files under `dir`.
fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}
