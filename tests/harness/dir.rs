//! Temp directories that remove themselves, and a temp `ROO_HOME`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::command::TestCommand;

/// A fresh directory under the system temp dir, removed on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `roo-test-<pid>-<n>-<nanos>` under the system temp dir.
    pub fn new() -> TempDir {
        TempDir::new_in(&std::env::temp_dir())
    }

    /// Creates `roo-test-<pid>-<n>-<nanos>` under `parent` (for tests that need
    /// a directory outside the system temp dir, which the OS sandbox leaves
    /// writable).
    pub fn new_in(parent: &Path) -> TempDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = parent.join(format!(
            "roo-test-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside it.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }

    /// Creates the directories `rels` inside it (with their parents).
    pub fn make_dirs(&self, rels: &[&str]) {
        for rel in rels {
            std::fs::create_dir_all(self.join(rel)).unwrap();
        }
    }

    /// Writes a file (creating parents).
    pub fn write(&self, rel: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, contents).unwrap();
        path
    }

    /// Reads a file as text.
    pub fn read(&self, rel: impl AsRef<Path>) -> String {
        let path = self.join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }

    /// Every file below the directory, as paths relative to it, sorted.
    pub fn files(&self) -> Vec<String> {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(root, &path, out);
                } else if let Ok(rel) = path.strip_prefix(root) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.path, &self.path, &mut out);
        out.sort();
        out
    }
}

impl Default for TempDir {
    fn default() -> Self {
        TempDir::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A temp `ROO_HOME` plus a temp working directory; commands made from it use both.
#[derive(Debug, Default)]
pub struct TempHome {
    /// The `ROO_HOME` directory.
    pub home: TempDir,
    /// The working directory for commands.
    pub cwd: TempDir,
}

impl TempHome {
    /// A fresh home and working directory.
    pub fn new() -> TempHome {
        TempHome::default()
    }

    /// The `ROO_HOME` path.
    pub fn path(&self) -> &Path {
        self.home.path()
    }

    /// A command running the built binary `name` with this home and working directory.
    pub fn cmd(&self, name: &str) -> TestCommand {
        TestCommand::new(crate::bin(name))
            .env("ROO_HOME", self.home.path())
            .current_dir(self.cwd.path())
    }

    /// `roo-mail` with this home.
    pub fn mail(&self) -> TestCommand {
        self.cmd("roo-mail")
    }

    /// `roo-task` with this home.
    pub fn task(&self) -> TestCommand {
        self.cmd("roo-task")
    }

    /// Creates team `team` led by `lead` with `members` through the CLI.
    pub fn team(&self, team: &str, lead: &str, members: &[&str]) {
        let mut cmd = self
            .mail()
            .args(["team", "create", "--team", team, "--lead", lead]);
        for m in members {
            cmd = cmd.args(["--member", m]);
        }
        cmd.run().assert_ok();
    }
}
