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
