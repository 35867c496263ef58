//! What a session's checkpoints are on disk: one JSON file per session under the
//! project's shadow store (`<ROO_HOME>/checkpoints/<project>/sessions/<id>.json`), holding
//! each prompt with the state every path it changed had before its first change. It is
//! small (only the paths the agent changed), so it is rewritten whole, atomically, after
//! each change; the file contents it names live in the object store beside it.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::CheckpointError;

/// Format version of a session's checkpoint file.
pub(super) const FORMAT_VERSION: u32 = 1;

/// What a path held at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Entry {
    /// Nothing was there.
    Missing,
    /// A regular file: its content's object and its permission bits.
    File {
        /// SHA-256 of the content, in hex: its name in the object store.
        blob: String,
        /// Permission bits.
        mode: u32,
        /// Bytes.
        size: u64,
    },
    /// A symlink and where it pointed (never followed).
    Symlink {
        /// The link's text.
        target: PathBuf,
    },
    /// Something that was not kept (too large, a FIFO or device, unreadable): a rewind
    /// leaves it as it is and says why.
    Unrecorded {
        /// Why it was not kept.
        why: String,
    },
}

/// Where the conversation stood when a prompt was submitted: a rewind of the
/// conversation cuts it back to this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationMark {
    /// Messages in the history before the prompt.
    pub messages: usize,
    /// Content blocks of the last message then (the prompt joins a history that ends with
    /// a user message by adding blocks to it).
    pub tail_blocks: usize,
}

/// One prompt of the session and what the agent changed while answering it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PromptRecord {
    /// The prompt's first line, shortened.
    pub text: String,
    /// When it was submitted (ms since the epoch).
    pub at_ms: u64,
    /// Where the conversation stood before it; `None` once the history was replaced
    /// (compaction, `/clear`, a rewind of the conversation) so it cannot be cut back.
    pub conversation: Option<ConversationMark>,
    /// Each path (relative to the project root) the agent changed while answering, with
    /// what it held before the first change.
    pub changes: BTreeMap<String, Entry>,
    /// This entry is the state a code rewind replaced, not a prompt.
    #[serde(default)]
    pub rewind: bool,
}

/// A session's checkpoint file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SessionLog {
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// The project root the paths are relative to.
    pub root: PathBuf,
    /// The prompts, oldest first.
    pub prompts: Vec<PromptRecord>,
}

impl SessionLog {
    /// An empty log for `root`.
    pub(super) fn new(root: &Path) -> Self {
        Self {
            version: FORMAT_VERSION,
            root: root.to_path_buf(),
            prompts: Vec::new(),
        }
    }

    /// Reads the log at `path`; `Ok(None)` if there is none.
    pub(super) fn read(path: &Path) -> Result<Option<Self>, CheckpointError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(CheckpointError::Io {
                    action: "read",
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let log: Self = serde_json::from_slice(&bytes).map_err(|e| CheckpointError::Corrupt {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        if log.version > FORMAT_VERSION {
            return Err(CheckpointError::Corrupt {
                path: path.to_path_buf(),
                message: format!(
                    "format version {} is newer than this build understands ({FORMAT_VERSION}); upgrade roo",
                    log.version
                ),
            });
        }
        Ok(Some(log))
    }

    /// Writes the log to `path` atomically (a temporary file renamed over it), 0600. Not
    /// flushed to the disk: a crash may lose the last checkpoint, never leave half a file
    /// read back (a torn file is refused as corrupt, and a session starts a new one).
    pub(super) fn write(&self, path: &Path) -> Result<(), CheckpointError> {
        let io_error = |action, source| CheckpointError::Io {
            action,
            path: path.to_path_buf(),
            source,
        };
        let bytes = serde_json::to_vec(self).map_err(|e| io_error("encode", e.into()))?;
        let dir = path.parent().unwrap_or(Path::new("/"));
        super::create_private_dir(dir)?;
        let temp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&temp)
            .and_then(|mut file| file.write_all(&bytes))
            .and_then(|()| std::fs::rename(&temp, path));
        written.map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            io_error("write", e)
        })
    }
}
