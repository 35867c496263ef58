//! Worktrees in real git repositories in temp dirs, with git's global and
//! system config kept out (`HOME` and `XDG_CONFIG_HOME` in the temp dir,
//! `GIT_CONFIG_NOSYSTEM=1`) and the identity set in the repository. This file holds
//! that world; the tests are grouped by subject in its children.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

struct World {
    _dir: tempfile::TempDir,
    base: PathBuf,
    git: Git,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("home/.config")).unwrap();
        let git = Git::new()
            .env("HOME", base.join("home"))
            .env("XDG_CONFIG_HOME", base.join("home/.config"))
            .env("GIT_CONFIG_NOSYSTEM", "1");
        World {
            _dir: dir,
            base,
            git,
        }
    }

    /// A repository at `<base>/repo` with `a.txt` and `b.txt` committed on main.
    fn repo(&self) -> PathBuf {
        let repo = self.base.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        self.sh(&repo, &["init", "-q", "-b", "main"]);
        self.sh(&repo, &["config", "user.name", "Roo Test"]);
        self.sh(&repo, &["config", "user.email", "roo@example.invalid"]);
        // No detached auto-maintenance outliving a test.
        self.sh(&repo, &["config", "maintenance.auto", "false"]);
        std::fs::write(repo.join("a.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(repo.join("b.txt"), "bee\n").unwrap();
        self.sh(&repo, &["add", "-A"]);
        self.sh(&repo, &["commit", "-q", "-m", "initial"]);
        repo
    }

    /// Runs git in `dir`; panics with its output on failure.
    fn sh(&self, dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", self.base.join("home"))
            .env("XDG_CONFIG_HOME", self.base.join("home/.config"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?} in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn lead(&self, repo: &Path) -> LeadRepo {
        match LeadRepo::discover(repo, &self.git).unwrap() {
            Discovered::Repo(r) => r,
            other => panic!("not a repo: {other:?}"),
        }
    }

    fn add(&self, repo: &Path, member: &str) -> Worktree {
        match prepare(repo, &name("team"), &name(member), &self.git).unwrap() {
            Workspace::Worktree(w) => w,
            other => panic!("no worktree: {other:?}"),
        }
    }

    fn commit_in(&self, dir: &Path, file: &str, text: &str, message: &str) {
        std::fs::write(dir.join(file), text).unwrap();
        self.sh(dir, &["add", file]);
        self.sh(dir, &["commit", "-q", "-m", message]);
    }

    fn head(&self, dir: &Path) -> String {
        self.sh(dir, &["rev-parse", "HEAD"]).trim().to_string()
    }
}

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

mod lifecycle;
mod merge;
mod merge_writes;
mod verify;
