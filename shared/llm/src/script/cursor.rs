//! Which scripted turns each agent has used, in memory or persisted in a state file.
//!
//! Persisting (`ROO_SCRIPT_STATE`) lets a restarted process continue where it left off
//! and lets several processes of one scripted team share one file. The file is guarded
//! like the rest of the on-disk state: an `O_CREAT|O_EXCL` lock file holding the
//! holder's pid, retried with random short sleeps, removed when stale, and the state
//! rewritten whole through a temp file and a rename. Callers run this on a blocking
//! thread.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::error::{LlmError, Result};

/// Progress of one agent through its script.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCursor {
    /// Indices of the turns already used.
    #[serde(default)]
    pub used: BTreeSet<usize>,
    /// Tool call ids handed out so far (`toolu_script_<n>` counts from 1).
    #[serde(default)]
    pub tool_ids: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CursorState {
    #[serde(default)]
    agents: BTreeMap<String, AgentCursor>,
}

/// Per-agent cursors of a script.
#[derive(Debug)]
pub struct Cursors {
    state_path: Option<PathBuf>,
    memory: Mutex<CursorState>,
}

const LOCK_RETRIES: u32 = 200;
const STALE_AFTER: Duration = Duration::from_secs(10);

impl Cursors {
    /// Cursors that live as long as this process.
    pub fn in_memory() -> Self {
        Self {
            state_path: None,
            memory: Mutex::new(CursorState::default()),
        }
    }

    /// Cursors persisted in `path` (created on first use).
    pub fn persisted(path: PathBuf) -> Self {
        Self {
            state_path: Some(path),
            memory: Mutex::new(CursorState::default()),
        }
    }

    /// Whether updates touch the disk (and so belong on a blocking thread).
    pub fn is_persisted(&self) -> bool {
        self.state_path.is_some()
    }

    /// Runs `f` on the cursor of `agent` and keeps its changes. `f` must not change the
    /// cursor when it fails: persisted cursors drop a failed update, in-memory ones are
    /// updated in place.
    pub fn update<R>(
        &self,
        agent: &str,
        f: impl FnOnce(&mut AgentCursor) -> Result<R>,
    ) -> Result<R> {
        let Some(path) = &self.state_path else {
            let mut state = self.memory.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(cursor) = state.agents.get_mut(agent) {
                // In place, without a copy: long scripts would pay for cloning the
                // used set on every turn.
                return f(cursor);
            }
            let mut cursor = AgentCursor::default();
            let out = f(&mut cursor)?;
            state.agents.insert(agent.to_owned(), cursor);
            return Ok(out);
        };
        let _lock = FileLock::acquire(path)?;
        let mut state = read_state(path)?;
        let mut cursor = state.agents.get(agent).cloned().unwrap_or_default();
        let out = f(&mut cursor)?;
        state.agents.insert(agent.to_owned(), cursor);
        write_state(path, &state)?;
        Ok(out)
    }
}

fn read_state(path: &Path) -> Result<CursorState> {
    match fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(CursorState::default()),
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            LlmError::Script(format!(
                "read script state {}: {e}; delete the file to start the script over",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(CursorState::default()),
        Err(source) => Err(LlmError::Io {
            action: "read script state",
            path: path.to_owned(),
            source,
        }),
    }
}

fn write_state(path: &Path, state: &CursorState) -> Result<()> {
    let io = |action, source| LlmError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|e| io("create the directory of script state", e))?;
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let text = serde_json::to_string_pretty(state).unwrap_or_default();
    fs::write(&tmp, text).map_err(|e| io("write script state", e))?;
    fs::rename(&tmp, path).map_err(|e| io("replace script state", e))
}

/// An exclusive lock file next to the state file, removed on drop.
struct FileLock {
    path: PathBuf,
}

impl FileLock {
    fn acquire(state: &Path) -> Result<Self> {
        let mut name = state.as_os_str().to_owned();
        name.push(".lock");
        let path = PathBuf::from(name);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|source| LlmError::Io {
                action: "create the directory of",
                path: path.clone(),
                source,
            })?;
        }
        for attempt in 0..LOCK_RETRIES {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    // Best effort: the holder's pid helps a human spot a stuck lock.
                    let _ = writeln!(file, "{}", std::process::id());
                    return Ok(Self { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| SystemTime::now().duration_since(t).ok())
                        .is_some_and(|age| age > STALE_AFTER);
                    if stale {
                        let _ = fs::remove_file(&path);
                        continue;
                    }
                    let millis = 5 + (u64::from(attempt) * 37 + u64::from(std::process::id())) % 45;
                    std::thread::sleep(Duration::from_millis(millis));
                }
                Err(source) => {
                    return Err(LlmError::Io {
                        action: "create lock file",
                        path,
                        source,
                    });
                }
            }
        }
        Err(LlmError::Script(format!(
            "lock script state: {} stayed locked; remove it if no scripted agent is running",
            path.display()
        )))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persisted_cursors_survive_a_new_instance_and_threads() {
        let dir = std::env::temp_dir().join(format!("roo-llm-cursor-{}", std::process::id()));
        let path = dir.join("state.json");
        let _ = fs::remove_dir_all(&dir);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let cursors = Cursors::persisted(path.clone());
                    for _ in 0..10 {
                        cursors
                            .update("a", |c| {
                                c.tool_ids += 1;
                                Ok(())
                            })
                            .unwrap();
                    }
                });
            }
        });
        let again = Cursors::persisted(path.clone());
        let n = again.update("a", |c| Ok(c.tool_ids)).unwrap();
        assert_eq!(n, 40);
        // A failing update changes nothing.
        let _ = again.update("a", |c| {
            c.tool_ids = 0;
            Err::<(), _>(LlmError::Script("no".into()))
        });
        assert_eq!(again.update("a", |c| Ok(c.tool_ids)).unwrap(), 40);
        assert!(!dir.join("state.json.lock").exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
