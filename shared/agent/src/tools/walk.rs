//! The directory walk Glob and Grep share.
//!
//! Both must see the project the way its developers do: `.gitignore`, `.ignore`
//! and git's global excludes are honoured (also before `git init`), hidden files
//! such as `.github/` are included, and `.git/` itself is never entered. The walk
//! is sorted by path so results are stable from one call to the next. Symlinks
//! are not followed, to files or directories, so a search never reads outside
//! the tree it was allowed to search.

use std::path::Path;

use ignore::{DirEntry, WalkBuilder};
use serde_json::Value;

use super::target_path;
use crate::tool::{PermissionTarget, ReadFilter};

/// A walker over `root` with the shared settings.
pub(crate) fn walker(root: &Path) -> ignore::Walk {
    WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| entry.file_name() != ".git")
        .build()
}

/// Whether an entry is a regular file. Symlinks are skipped like symlinked
/// directories: a link may lead out of the project, and the permission sandbox
/// only vetted the directory searched, not where its links point.
pub(crate) fn is_file(entry: &DirEntry) -> bool {
    entry.file_type().is_some_and(|t| t.is_file())
}

/// The directory a Glob or Grep call searches (`path`, default the working
/// directory), for the permission layer.
pub(crate) fn search_target(input: &Value) -> PermissionTarget {
    let path = input.get("path").and_then(Value::as_str).unwrap_or(".");
    PermissionTarget::Path(target_path(if path.is_empty() { "." } else { path }))
}

/// Files a search left out because the permission rules deny reading them.
#[derive(Debug, Default)]
pub(crate) struct Skipped {
    count: usize,
    reason: Option<String>,
}

impl Skipped {
    /// Whether `path` is denied by `filter`; counts it if so.
    pub(crate) fn denied(&mut self, filter: &ReadFilter, path: &Path) -> bool {
        match filter.denied(path) {
            Some(reason) => {
                self.count += 1;
                self.reason.get_or_insert(reason);
                true
            }
            None => false,
        }
    }

    /// `[2 files skipped: denied by the permission rule …]`, if any were.
    pub(crate) fn note(&self, verb: &str) -> Option<String> {
        let reason = self.reason.as_deref()?;
        let files = if self.count == 1 { "file" } else { "files" };
        Some(format!("[{} {files} {verb}: {reason}]", self.count))
    }
}

/// `Name(pattern)` or `Name(pattern in path)`, the one-line summary of a search call.
pub(crate) fn search_summary(name: &str, input: &Value) -> String {
    let pattern = input.get("pattern").and_then(Value::as_str).unwrap_or("");
    match input.get("path").and_then(Value::as_str) {
        Some(path) if !path.is_empty() => format!("{name}({pattern} in {path})"),
        _ => format!("{name}({pattern})"),
    }
}
