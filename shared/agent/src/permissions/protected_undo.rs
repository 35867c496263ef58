//! Layer 4's promise for commands: what a command nobody answered changed under the
//! project's `.git/` (config, hooks, info, redirects) and `.roocode/` does not stay.
//!
//! File tools are asked for every write there ([`super::mode::asks_despite_rules`]),
//! but a shell reaches any path: an allow rule such as `Bash(git config *)` would let
//! `git config core.hooksPath …` or a redirect into `.git/hooks/pre-commit` run unasked,
//! and the hook would then run with the user's rights outside the sandbox at their next
//! commit. The sandbox cannot make those paths read-only while commits keep working
//! (git writes `index`, `HEAD` and new files beside them in `.git/`, so `.git/commondir`
//! — which moves git's config elsewhere — can always be created), so the loop takes a
//! [`ProtectedSnapshot`] of them before a command that an allow rule or the mode let run
//! and, once the command and everything it started have ended (the sandbox supervisor
//! ends them), puts back what changed and removes what was added. Nothing is followed:
//! an entry is compared and restored as what it is (file, directory, symlink), and no
//! write goes through a symlink. A call the person answered, and `bypassPermissions`,
//! are not guarded.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What is guarded, relative to the project root: git's config and the files that
/// replace or extend it, its hooks and `info/` (excludes, attributes, grafts), and
/// RooCode's own project directory.
pub const GUARDED: [&str; 6] = [
    ".git/config",
    ".git/config.worktree",
    ".git/commondir",
    ".git/hooks",
    ".git/info",
    ".roocode",
];

/// Teammates' clones (docs/WORKTREES.md): the team runtime's, written by teammates
/// while the lead's commands run, and holding no configuration of the project.
const NOT_GUARDED: &str = ".roocode/worktrees";

/// Most entries a snapshot records; beyond it the rest is reported, not guarded.
const MAX_ENTRIES: usize = 5_000;
/// Most bytes of file content a snapshot keeps in all.
const MAX_BYTES: u64 = 16 << 20;

/// One entry as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir {
        mode: u32,
    },
    File {
        mode: u32,
        content: Vec<u8>,
    },
    Symlink {
        target: PathBuf,
    },
    /// A FIFO, socket or device: compared by kind only, never restored.
    Other,
}

/// The guarded entries of one project at one moment.
#[derive(Debug, Clone)]
pub struct ProtectedSnapshot {
    root: PathBuf,
    entries: BTreeMap<PathBuf, Entry>,
    /// Whether the limits cut the walk short.
    partial: bool,
}

impl ProtectedSnapshot {
    /// Records the guarded entries under `root` (the resolved project root).
    pub fn take(root: &Path) -> Self {
        let mut snapshot = Self {
            root: root.to_path_buf(),
            entries: BTreeMap::new(),
            partial: false,
        };
        let mut bytes = 0;
        for name in GUARDED {
            snapshot.walk(Path::new(name), &mut bytes);
        }
        snapshot
    }

    fn walk(&mut self, relative: &Path, bytes: &mut u64) {
        if relative == Path::new(NOT_GUARDED) {
            return;
        }
        if self.entries.len() >= MAX_ENTRIES {
            self.partial = true;
            return;
        }
        let path = self.root.join(relative);
        if !real_parents(&self.root, relative) {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            return;
        };
        let kind = meta.file_type();
        let mode = meta.permissions().mode() & 0o7777;
        let entry = if kind.is_symlink() {
            match std::fs::read_link(&path) {
                Ok(target) => Entry::Symlink { target },
                Err(_) => Entry::Other,
            }
        } else if kind.is_dir() {
            Entry::Dir { mode }
        } else if kind.is_file() {
            if *bytes + meta.size() > MAX_BYTES {
                self.partial = true;
                return;
            }
            match std::fs::read(&path) {
                Ok(content) => {
                    *bytes += content.len() as u64;
                    Entry::File { mode, content }
                }
                Err(_) => return,
            }
        } else {
            Entry::Other
        };
        let is_dir = matches!(entry, Entry::Dir { .. });
        self.entries.insert(relative.to_path_buf(), entry);
        if is_dir && let Ok(children) = std::fs::read_dir(&path) {
            let mut names: Vec<_> = children.flatten().map(|c| c.file_name()).collect();
            names.sort();
            for name in names {
                self.walk(&relative.join(name), bytes);
            }
        }
    }

    /// Puts back what changed since `self` was taken and removes what was added.
    /// Returns one line per entry undone or that could not be undone, empty when
    /// nothing changed.
    pub fn undo_changes(&self) -> Vec<String> {
        let now = Self::take(&self.root);
        let mut report = Vec::new();
        // Added entries, deepest first, so a directory is empty when it goes.
        for (relative, entry) in now.entries.iter().rev() {
            if self.entries.contains_key(relative) || self.partial {
                continue;
            }
            let path = self.root.join(relative);
            let removed = if matches!(entry, Entry::Dir { .. }) {
                std::fs::remove_dir(&path)
            } else {
                std::fs::remove_file(&path)
            };
            report.push(outcome("removed", relative, removed));
        }
        // Changed or removed entries, parents first.
        for (relative, before) in &self.entries {
            let after = now.entries.get(relative);
            if after == Some(before) {
                continue;
            }
            let restored = self.restore(relative, before, after);
            report.push(outcome("restored", relative, restored));
        }
        report
    }

    fn restore(
        &self,
        relative: &Path,
        before: &Entry,
        after: Option<&Entry>,
    ) -> std::io::Result<()> {
        let path = self.root.join(relative);
        if !real_parents(&self.root, relative) {
            return Err(std::io::Error::other("a directory above it was replaced"));
        }
        // What stands there now goes first, unless it is the directory to keep.
        match (before, after) {
            (Entry::Dir { .. }, Some(Entry::Dir { .. })) => {}
            (_, Some(Entry::Dir { .. })) => std::fs::remove_dir_all(&path)?,
            (_, Some(_)) => std::fs::remove_file(&path)?,
            (_, None) => {}
        }
        match before {
            Entry::Dir { mode } => {
                if !matches!(after, Some(Entry::Dir { .. })) {
                    std::fs::create_dir(&path)?;
                }
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))
            }
            Entry::File { mode, content } => {
                use std::io::Write;
                use std::os::unix::fs::OpenOptionsExt;
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(*mode)
                    .custom_flags(nix::libc::O_NOFOLLOW)
                    .open(&path)?;
                file.write_all(content)?;
                file.set_permissions(std::fs::Permissions::from_mode(*mode))
            }
            Entry::Symlink { target } => std::os::unix::fs::symlink(target, &path),
            Entry::Other => Err(std::io::Error::other("it is not a file, directory or link")),
        }
    }
}

/// Whether every directory between `root` and `relative`'s parent is a real
/// directory (no symlink a write could follow).
fn real_parents(root: &Path, relative: &Path) -> bool {
    let mut path = root.to_path_buf();
    let Some(parent) = relative.parent() else {
        return true;
    };
    for part in parent.components() {
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_dir() => {}
            _ => return false,
        }
    }
    true
}

fn outcome(done: &str, relative: &Path, result: std::io::Result<()>) -> String {
    match result {
        Ok(()) => format!("{done} {}", relative.display()),
        Err(e) => format!("could not undo the change to {}: {e}", relative.display()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn puts_back_changed_removed_and_added_entries_and_follows_no_link() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join(".roocode")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join(".roocode/config.yaml"), "a: 1\n").unwrap();
        let outside = tempfile::tempdir().unwrap();
        let snapshot = ProtectedSnapshot::take(root);
        assert!(snapshot.undo_changes().is_empty());

        std::fs::write(root.join(".git/config"), "[core]\n\thooksPath = /x\n").unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(root.join(".git/commondir"), "/elsewhere\n").unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/other\n").unwrap();
        std::fs::remove_dir_all(root.join(".roocode")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join(".roocode")).unwrap();

        let report = snapshot.undo_changes();
        assert_eq!(report.len(), 5, "{report:?}");
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!root.join(".git/hooks/pre-commit").exists());
        assert!(!root.join(".git/commondir").exists());
        assert_eq!(
            std::fs::read_to_string(root.join(".roocode/config.yaml")).unwrap(),
            "a: 1\n"
        );
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        // What commits write is not guarded.
        assert_eq!(
            std::fs::read_to_string(root.join(".git/HEAD")).unwrap(),
            "ref: refs/heads/other\n"
        );
    }

    #[test]
    fn teammates_clones_under_roocode_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".roocode/worktrees/crew+alice")).unwrap();
        std::fs::write(root.join(".roocode/config.yaml"), "a: 1\n").unwrap();
        let snapshot = ProtectedSnapshot::take(root);
        std::fs::write(root.join(".roocode/worktrees/crew+alice/a.txt"), "a\n").unwrap();
        std::fs::create_dir(root.join(".roocode/worktrees/crew+bob")).unwrap();
        assert!(snapshot.undo_changes().is_empty());
        assert!(root.join(".roocode/worktrees/crew+alice/a.txt").is_file());
        assert!(root.join(".roocode/worktrees/crew+bob").is_dir());
    }
}
