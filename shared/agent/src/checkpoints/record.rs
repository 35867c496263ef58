//! What a session's checkpoints are on disk: one JSON file per session under the
//! project's shadow store (`<ROO_HOME>/checkpoints/<project>/sessions/<id>.json`), holding
//! each prompt with the state every path it changed had before its first change. It is
//! small (only the paths the agent changed), so it is rewritten whole, atomically, after
//! each change; the file contents it names live in the object store beside it.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::CheckpointError;
use super::scan::checked_relative;
use crate::tool::ToolError;
use crate::tools::confined;

/// Why a session's checkpoint file was not read.
#[derive(Debug)]
pub(super) enum Damage {
    /// It could not be read (it stays where it is).
    Unreadable(CheckpointError),
    /// A newer build wrote it (it stays where it is).
    Newer(CheckpointError),
    /// It is not a checkpoint file.
    Corrupt(String),
}

/// Whether `name` is a content's name: a SHA-256 in lowercase hex.
pub(super) fn is_blob_name(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Moves the damaged checkpoint file at `path` to `<store>/corrupt/` and says so.
fn move_aside(path: &Path, message: String) -> CheckpointError {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let store = path.parent().and_then(Path::parent);
    let aside = store.zip(name).map(|(store, name)| {
        store
            .join("corrupt")
            .join(format!("{}-{name}", super::now_ms()))
    });
    let moved = aside.filter(|aside| {
        aside
            .parent()
            .is_some_and(|dir| super::create_private_dir(dir).is_ok())
            && std::fs::rename(path, aside).is_ok()
    });
    let message = match moved {
        Some(aside) => format!("{message}; it was moved aside to {}", aside.display()),
        None => format!("{message}; it could not be moved aside"),
    };
    CheckpointError::Corrupt {
        path: path.to_path_buf(),
        message,
    }
}

/// The largest session checkpoint file read back: 64 MiB (one holds only the paths the
/// agent changed and their content names, far below this).
pub(super) const MAX_LOG_BYTES: u64 = 64 << 20;

fn libc_eloop() -> i32 {
    nix::errno::Errno::ELOOP as i32
}

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

    /// Reads the log at `path` as this build writes it for the project at `root`;
    /// `Ok(None)` if there is none. Another program may have written it: a file that is
    /// not a log, names another project, or holds a path that is not a plain path in the
    /// project or a content name that is not a SHA-256 is damaged, and is moved aside (to
    /// `<store>/corrupt/`) and refused, never used.
    pub(super) fn read(path: &Path, root: &Path) -> Result<Option<Self>, CheckpointError> {
        let log = match Self::parse(path) {
            Ok(Some(log)) => log,
            Ok(None) => return Ok(None),
            Err(Damage::Newer(e)) | Err(Damage::Unreadable(e)) => return Err(e),
            Err(Damage::Corrupt(message)) => return Err(move_aside(path, message)),
        };
        match log.check(root) {
            Ok(()) => Ok(Some(log)),
            Err(message) => Err(move_aside(path, message)),
        }
    }

    /// Reads the log at `path` as it is, unchecked and left in place (what pruning reads:
    /// a damaged file makes it keep every content).
    /// The file is opened without following a symlink or blocking (a FIFO), and read
    /// only if it is a regular file of at most [`MAX_LOG_BYTES`]: anything else is
    /// damaged.
    pub(super) fn parse(path: &Path) -> Result<Option<Self>, Damage> {
        let file = match confined::open_regular(path) {
            Ok(file) => file,
            Err(ToolError::NotFound { .. }) => return Ok(None),
            Err(e @ (ToolError::NotRegular { .. } | ToolError::IsDirectory { .. })) => {
                return Err(Damage::Corrupt(e.to_string()));
            }
            Err(ToolError::Io { source, .. }) if source.raw_os_error() == Some(libc_eloop()) => {
                return Err(Damage::Corrupt("it is a symbolic link".to_string()));
            }
            Err(ToolError::Io { source, .. }) => {
                return Err(Damage::Unreadable(CheckpointError::Io {
                    action: "read",
                    path: path.to_path_buf(),
                    source,
                }));
            }
            Err(e) => {
                return Err(Damage::Unreadable(CheckpointError::Io {
                    action: "read",
                    path: path.to_path_buf(),
                    source: io::Error::other(e.to_string()),
                }));
            }
        };
        let mut bytes = Vec::new();
        if let Err(source) = file.take(MAX_LOG_BYTES + 1).read_to_end(&mut bytes) {
            return Err(Damage::Unreadable(CheckpointError::Io {
                action: "read",
                path: path.to_path_buf(),
                source,
            }));
        }
        if bytes.len() as u64 > MAX_LOG_BYTES {
            return Err(Damage::Corrupt(format!(
                "it is larger than {MAX_LOG_BYTES} bytes, the most a checkpoint file holds"
            )));
        }
        let log: Self =
            serde_json::from_slice(&bytes).map_err(|e| Damage::Corrupt(e.to_string()))?;
        if log.version > FORMAT_VERSION {
            return Err(Damage::Newer(CheckpointError::Corrupt {
                path: path.to_path_buf(),
                message: format!(
                    "format version {} is newer than this build understands ({FORMAT_VERSION}); upgrade roo",
                    log.version
                ),
            }));
        }
        Ok(Some(log))
    }

    /// Whether every path and content the log names is one this build would have
    /// written for the project at `root`.
    fn check(&self, root: &Path) -> Result<(), String> {
        if self.root != root {
            return Err(format!(
                "it names the project {}, not {}",
                self.root.display(),
                root.display()
            ));
        }
        for prompt in &self.prompts {
            for (rel, entry) in &prompt.changes {
                if checked_relative(Path::new(rel)).as_deref() != Some(rel.as_str()) {
                    return Err(format!(
                        "the path {rel:?} is not a plain path in the project"
                    ));
                }
                if let Entry::File { blob, mode, .. } = entry {
                    if !is_blob_name(blob) {
                        return Err(format!("{rel}: {blob:?} is not a SHA-256 in hex"));
                    }
                    if *mode > 0o7777 {
                        return Err(format!("{rel}: the mode {mode:o} is not permission bits"));
                    }
                }
            }
        }
        Ok(())
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
