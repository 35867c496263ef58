//! Real git repositories for tests, and the demo fixtures shipped in `scripts/demo-data`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `scripts/demo-data/<name>` of this checkout.
pub fn demo_data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("scripts")
        .join("demo-data")
        .join(name)
}

/// Runs git in `dir` with a fixed identity; panics with its output on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "roo test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "roo test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .unwrap_or_else(|e| panic!("run git {args:?}: {e}"));
    assert!(
        out.status.success(),
        "git {args:?} in {} failed:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Makes `dir` a git repository with everything in it committed.
pub fn git_init_commit(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "initial"]);
}

/// Makes `dir` a git repository on `main` with its own identity (commits made there later,
/// by teammates in worktrees too, need no environment) and everything in it committed.
pub fn git_repo_with_identity(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Roo Test"]);
    git(dir, &["config", "user.email", "roo@example.invalid"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "initial"]);
}

/// Copies the bug-fix demo project (calc.py with a bug, its tests, and the project config
/// that lets the agent run them) into `dir` and commits it.
pub fn bugfix_repo(dir: &Path) {
    let data = demo_data("bugfix");
    for file in ["calc.py", "test_calc.py"] {
        std::fs::copy(data.join(file), dir.join(file)).unwrap();
    }
    std::fs::create_dir_all(dir.join(".roocode")).unwrap();
    std::fs::copy(data.join("config.yaml"), dir.join(".roocode/config.yaml")).unwrap();
    git_init_commit(dir);
}
