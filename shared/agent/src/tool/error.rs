//! [`ToolError`]: why a built-in tool call failed, and the error result the model
//! reads for it. It sits with the tool interface because the typed-tool adapter
//! reports unusable input through it too.

use std::io;
use std::path::{Path, PathBuf};

use super::ToolOutput;

/// Why a built-in tool call failed. The model sees `failed to {error}`, so every
/// message says what failed, on what, and what to try instead.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The input object does not match the tool's schema.
    #[error("parse the input of {tool}: {message}; check the tool's input schema")]
    InvalidInput {
        /// The tool.
        tool: &'static str,
        /// What the decoder said.
        message: String,
    },
    /// The path does not exist.
    #[error("open {path}: no such file or directory; check the path (Glob finds files by name)")]
    NotFound {
        /// The path as given.
        path: PathBuf,
    },
    /// A file tool was pointed at a directory.
    #[error("read {path}: it is a directory; list its contents with Glob (pattern `*`) instead")]
    IsDirectory {
        /// The path as given.
        path: PathBuf,
    },
    /// ReadFile refuses binary files.
    #[error(
        "read {path}: it looks like a binary file (NUL bytes in the first 8 KiB); ReadFile only \
         reads text, inspect binaries with Bash (e.g. `file`, `xxd | head`)"
    )]
    Binary {
        /// The file.
        path: PathBuf,
    },
    /// A window or position outside the file.
    #[error("read {path}: {message}")]
    OutOfRange {
        /// The file.
        path: PathBuf,
        /// What is out of range.
        message: String,
    },
    /// A FIFO, socket or device: reading or writing it could block forever.
    #[error(
        "open {path}: it is {kind}, not a regular file; the file tools only read and write \
         regular files (reading a pipe or device could block forever)"
    )]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is (`a FIFO`).
        kind: &'static str,
    },
    /// A directory on the way became a symlink (or a file) between the
    /// permission check and the open.
    #[error(
        "open {path}: the path changed while it was being opened (a symlink or file replaced a \
         directory on the way); nothing was read or written, try again"
    )]
    Changed {
        /// The path.
        path: PathBuf,
    },
    /// The path leads outside every directory the file tools may open.
    #[error(
        "open {path}: it leads to {resolved}, outside the directories file tools may use; work \
         on files inside the project"
    )]
    Outside {
        /// The path as given.
        path: PathBuf,
        /// Where it really leads.
        resolved: PathBuf,
    },
    /// A `~` path whose home directory is unknown.
    #[error(
        "expand `{path}`: {message}; give an absolute path or one relative to the working \
         directory (write `./{path}` for a file whose name starts with `~`)"
    )]
    Home {
        /// The path as given.
        path: String,
        /// Why the home directory is unknown.
        message: String,
    },
    /// Any other I/O failure.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (`read`, `write`).
        action: &'static str,
        /// The path.
        path: PathBuf,
        #[source]
        /// Why it failed.
        source: io::Error,
    },
    /// EditFile could not apply the edit; the message explains why and what to do.
    #[error("edit {path}: {message}")]
    Edit {
        /// The file.
        path: PathBuf,
        /// Why the edit failed and what to do.
        message: String,
    },
    /// The user's permission rules deny reading this file.
    #[error("read {path}: it is {reason}; leave it out or ask the user")]
    Denied {
        /// The file.
        path: PathBuf,
        /// Which rule denies it.
        reason: String,
    },
    /// A glob or regex did not compile.
    #[error("compile the pattern `{pattern}`: {message}")]
    Pattern {
        /// The pattern as given.
        pattern: String,
        /// What the compiler said.
        message: String,
    },
    /// The call was cancelled before it finished.
    #[error("finish {tool}: the call was cancelled")]
    Cancelled {
        /// The tool.
        tool: &'static str,
    },
    /// The blocking worker thread of the call died.
    #[error("finish {tool}: its worker thread stopped unexpectedly ({message})")]
    Worker {
        /// The tool.
        tool: &'static str,
        /// What is known of the failure.
        message: String,
    },
}

impl ToolError {
    /// An I/O error on a path, mapped to the clearer variants where one fits.
    pub(crate) fn io(action: &'static str, path: &Path, source: io::Error) -> Self {
        match source.kind() {
            io::ErrorKind::NotFound => Self::NotFound {
                path: path.to_path_buf(),
            },
            io::ErrorKind::IsADirectory => Self::IsDirectory {
                path: path.to_path_buf(),
            },
            _ => Self::Io {
                action,
                path: path.to_path_buf(),
                source,
            },
        }
    }

    /// The result the model sees.
    pub(crate) fn into_output(self) -> ToolOutput {
        ToolOutput::error(format!("failed to {self}"))
    }
}
