//! Shared fixtures: a temp `ROO_HOME`, a temp git project, a tool context.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use roo_agent::tool::ToolContext;
use tokio_util::sync::CancellationToken;

/// A temp `ROO_HOME`, a git project with a small Rust-like tree, and a session
/// directory outside the project.
pub struct Workspace {
    pub _dir: tempfile::TempDir,
    pub roo_home: PathBuf,
    pub project: PathBuf,
    pub session: PathBuf,
}

impl Workspace {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let roo_home = base.join("roo-home");
        let project = base.join("project");
        let session = roo_home.join("sessions/s1");
        std::fs::create_dir_all(&roo_home).unwrap();
        std::fs::create_dir_all(project.join("src")).unwrap();
        let status = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&project)
            .status()
            .unwrap();
        assert!(status.success());
        write(&project.join(".gitignore"), "target/\n");
        write(
            &project.join("src/lib.rs"),
            "pub fn add(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
        );
        write(&project.join("target/debug/stale.rs"), "pub fn add() {}\n");
        Self {
            _dir: dir,
            roo_home,
            project,
            session,
        }
    }

    /// A tool context running in the project.
    pub fn context(&self, max_result_chars: usize) -> ToolContext {
        ToolContext {
            cwd: self.project.clone(),
            session_dir: self.session.clone(),
            cancel: CancellationToken::new(),
            env: vec![(
                "ROO_HOME".to_string(),
                self.roo_home.to_string_lossy().into_owned(),
            )],
            max_result_chars,
            allowed_roots: Vec::new(),
        }
    }

    /// Writes a config file under the project's `.roocode/`.
    pub fn project_config(&self, name: &str, text: &str) {
        write(&self.project.join(".roocode").join(name), text);
    }
}

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Waits until `cond` holds, failing after 10 s with `what`.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
