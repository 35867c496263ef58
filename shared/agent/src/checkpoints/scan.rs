//! Looking at the project's files for a checkpoint: one path (before a file tool writes
//! it) or the whole tree (before and after a shell command in a git project).
//!
//! The tree walk honours the project's `.gitignore` files (ignored directories such as
//! `target/` are never entered, which keeps a walk of a big project in milliseconds),
//! skips every `.git` entry (the user's repository, and hostile in a hostile tree) and
//! every nested repository (a teammate's clone, a submodule), never
//! follows a symlink, and stops at a bounded number of entries. Each file is known by its
//! stamp (size, times, inode, mode); only a file whose stamp changed is read again.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::CheckpointError;
use super::objects::Objects;
use super::record::Entry;

/// What identifies a file's version without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
    mode: u32,
}

impl Stamp {
    pub(super) fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            mode: meta.mode(),
        }
    }

    /// The file's size in bytes.
    pub(super) fn size(&self) -> u64 {
        self.size
    }
}

/// The stamp of `path` without following a symlink; `None` if nothing is there.
pub(super) fn stamp_of(path: &Path) -> Option<Stamp> {
    std::fs::symlink_metadata(path).ok().map(|m| Stamp::of(&m))
}

/// What `path` holds now, its content kept in `objects`.
pub(super) fn capture(
    path: &Path,
    objects: &Objects,
    max_bytes: u64,
) -> Result<Entry, CheckpointError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Entry::Missing),
        Err(e) => {
            return Ok(Entry::Unrecorded {
                why: format!("could not be inspected: {e}"),
            });
        }
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Ok(match std::fs::read_link(path) {
            Ok(target) => Entry::Symlink { target },
            Err(e) => Entry::Unrecorded {
                why: format!("its link could not be read: {e}"),
            },
        });
    }
    if kind.is_dir() {
        return Ok(Entry::Unrecorded {
            why: "it is a directory".to_string(),
        });
    }
    if !kind.is_file() {
        return Ok(Entry::Unrecorded {
            why: "it is not a regular file (a FIFO, socket or device)".to_string(),
        });
    }
    objects.keep_file(path, meta.mode(), max_bytes)
}

/// The relative form of `path` under `root`, if it lies there and is a plain relative
/// path (no `..`, no `.git` component) in UTF-8.
pub(super) fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    checked_relative(rel)
}

/// `rel` as a key if it is plain: only normal components, none of them `.git`, UTF-8.
pub(super) fn checked_relative(rel: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(part) if part != ".git" => parts.push(part.to_str()?),
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The files of the tree at `root` and their stamps, or `None` if it holds more than
/// `max_files` (then shell commands are not checkpointed). `skip` is left out (the
/// checkpoint store itself, when it lies inside the project).
pub(super) fn walk(
    root: &Path,
    max_files: usize,
    skip: Option<&Path>,
) -> Option<HashMap<String, Stamp>> {
    let skip = skip.map(Path::to_path_buf);
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .ignore(false)
        .parents(false)
        .git_global(false)
        .git_ignore(true)
        .git_exclude(true)
        .follow_links(false)
        // A nested repository (a teammate's clone under `.roocode/worktrees`, a
        // submodule) is a project of its own, checkpointed by whoever works in it.
        .filter_entry(move |entry| {
            let nested = entry.depth() > 0
                && entry.file_type().is_some_and(|t| t.is_dir())
                && std::fs::symlink_metadata(entry.path().join(".git")).is_ok();
            entry.file_name() != ".git"
                && !nested
                && skip.as_deref().is_none_or(|s| entry.path() != s)
        })
        .build();
    let mut files = HashMap::new();
    for entry in walker.flatten() {
        if entry.depth() == 0 || entry.file_type().is_some_and(|t| t.is_dir()) {
            continue;
        }
        let Some(rel) = relative(root, entry.path()) else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        if files.len() >= max_files {
            return None;
        }
        files.insert(rel, Stamp::of(&meta));
    }
    Some(files)
}

/// `root` joined with the key `rel`.
pub(super) fn absolute(root: &Path, rel: &str) -> PathBuf {
    root.join(rel)
}
