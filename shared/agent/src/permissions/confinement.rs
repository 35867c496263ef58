//! Layer 2: file tools stay inside the project.
//!
//! A path is judged by where it really leads, not by how it is spelled: every
//! symlink on the way is followed (a link inside the project that points outside
//! it must not pass), `.` and `..` are applied after that, and the
//! part that does not exist yet (a file about to be created) is appended as
//! given. The result must lie under the project root or one of the extra allowed
//! roots (the session directory, the plan file's directory). Bash commands are
//! not path-checked here: a shell can reach any path, so commands are governed by
//! layer 1, the rules and the mode instead.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Most symlinks followed while resolving one path (as Linux's `MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;

/// Why a path could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResolveError {
    /// The path loops through symlinks.
    TooManySymlinks,
}

/// Resolves `path` (absolute) to the real location it names: symlinks followed,
/// `.`/`..` applied, missing trailing components kept as given.
pub(crate) fn resolve(path: &Path) -> Result<PathBuf, ResolveError> {
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_components(&mut pending, path, true);
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    // Once a component is missing, nothing below it can be a symlink.
    let mut missing = false;
    while let Some(part) = pending.pop_front() {
        if part == "/" {
            resolved = PathBuf::from("/");
            missing = false;
            continue;
        }
        if part == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&part);
        if !missing {
            match std::fs::symlink_metadata(&candidate) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_SYMLINKS {
                        return Err(ResolveError::TooManySymlinks);
                    }
                    if let Ok(target) = std::fs::read_link(&candidate) {
                        let mut rest: VecDeque<OsString> = VecDeque::new();
                        push_components(&mut rest, &target, target.is_absolute());
                        rest.extend(pending.drain(..));
                        pending = rest;
                        continue;
                    }
                }
                Ok(_) => {}
                Err(_) => missing = true,
            }
        }
        resolved = candidate;
    }
    Ok(resolved)
}

/// Appends the components of `path` to `out` (`/` first if `absolute`).
fn push_components(out: &mut VecDeque<OsString>, path: &Path, absolute: bool) {
    if absolute {
        out.push_back(OsString::from("/"));
    }
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push_back(name.to_os_string()),
            Component::ParentDir => out.push_back(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
}

/// Resolves a root directory; falls back to the path as given when it cannot be
/// resolved, so a misconfigured root denies more, never less.
pub(crate) fn resolve_root(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_or_else(|_| path.to_path_buf(), |cwd| cwd.join(path))
    };
    resolve(&absolute).unwrap_or(absolute)
}

/// `path` with `.` and `..` applied to the text alone, symlinks ignored: how
/// the path looks, as opposed to where it leads.
pub(crate) fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Whether the resolved `path` is `root` or below it.
pub(crate) fn is_within(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn follows_symlinks_and_keeps_missing_tails() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir_all(root.join("project/src")).unwrap();
        fs::create_dir_all(root.join("outside")).unwrap();
        symlink(root.join("outside"), root.join("project/escape")).unwrap();
        symlink("../outside/secret", root.join("project/relative-escape")).unwrap();

        assert_eq!(
            resolve(&root.join("project/src/new/file.rs")).unwrap(),
            root.join("project/src/new/file.rs")
        );
        assert_eq!(
            resolve(&root.join("project/escape/x.txt")).unwrap(),
            root.join("outside/x.txt")
        );
        // A dangling link still resolves to where a write would land.
        assert_eq!(
            resolve(&root.join("project/relative-escape")).unwrap(),
            root.join("outside/secret")
        );
        assert_eq!(
            resolve(&root.join("project/src/../../outside")).unwrap(),
            root.join("outside")
        );
        assert_eq!(
            resolve(&root.join("project/missing/../../outside/y")).unwrap(),
            root.join("outside/y")
        );
    }

    #[test]
    fn symlink_loops_are_an_error() {
        let dir = tempfile::tempdir().unwrap();
        symlink(dir.path().join("b"), dir.path().join("a")).unwrap();
        symlink(dir.path().join("a"), dir.path().join("b")).unwrap();
        assert_eq!(
            resolve(&dir.path().join("a/x")),
            Err(ResolveError::TooManySymlinks)
        );
    }

    #[test]
    fn within_compares_whole_components() {
        assert!(is_within(Path::new("/p/a"), Path::new("/p")));
        assert!(is_within(Path::new("/p"), Path::new("/p")));
        assert!(!is_within(
            Path::new("/project-other/a"),
            Path::new("/project")
        ));
    }
}
