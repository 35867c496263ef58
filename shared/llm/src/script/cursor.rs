//! Which scripted turns each agent has used, in memory or persisted in a state file.
//!
//! Persisting (`ROO_SCRIPT_STATE`) lets a restarted process continue where it left off
//! and lets several processes of one scripted team share one file. The file is guarded
//! by the store's lock ([`roo_store::FileLock`], the one lock implementation of the
//! workspace) and rewritten whole through a temp file and a rename. Callers run this on
//! a blocking thread.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
        let _lock = lock(path)?;
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
    let text = serde_json::to_string_pretty(state).unwrap_or_default();
    roo_store::replace_file(path, text.as_bytes())
        .map_err(|e| io("write script state", std::io::Error::other(e)))
}

/// Takes the lock of the state file (`<path>.lock`), creating its directory first.
fn lock(path: &Path) -> Result<roo_store::FileLock> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|source| LlmError::Io {
            action: "create the directory of script state",
            path: path.to_owned(),
            source,
        })?;
    }
    roo_store::FileLock::acquire(path, &roo_store::LockPolicy::default())
        .map_err(|e| LlmError::Script(format!("lock script state: {e}")))
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

    #[test]
    fn a_lock_left_by_a_dead_process_does_not_block_the_script_state() {
        let dir = std::env::temp_dir().join(format!("roo-llm-cursor-dead-{}", std::process::id()));
        let path = dir.join("state.json");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let info = roo_store::LockInfo {
            pid: dead,
            time: roo_store::Timestamp::now(),
            token: format!("{dead}-0"),
        };
        fs::write(
            dir.join("state.json.lock"),
            serde_json::to_vec(&info).unwrap(),
        )
        .unwrap();
        let cursors = Cursors::persisted(path.clone());
        assert_eq!(cursors.update("a", |c| Ok(c.tool_ids)).unwrap(), 0);
        fs::remove_dir_all(&dir).unwrap();
    }
}
