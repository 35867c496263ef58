//! Test helpers: a temp home with a team, and the built `roo-mail` binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use roo_store::{Member, Name, RooHome, Team};

pub fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

/// A temp `ROO_HOME` holding team `t` with members lead, alice and bob.
pub struct TeamHome {
    pub dir: tempfile::TempDir,
    pub team: Team,
}

impl TeamHome {
    pub fn new() -> TeamHome {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let t = name("t");
        let team = Team::create(
            &home,
            t.clone(),
            "router tests",
            Member::new(name("lead"), &t),
            vec![Member::new(name("alice"), &t), Member::new(name("bob"), &t)],
        )
        .unwrap();
        TeamHome { dir, team }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `roo-mail ARGS` as another process would, with this home and team.
    pub fn mail(&self, args: &[&str]) {
        let out = Command::new(roo_mail())
            .args(args)
            .env("ROO_HOME", self.path())
            .env("ROO_TEAM", "t")
            .env_remove("ROO_AGENT_NAME")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "roo-mail {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The `roo-mail` binary of this build (`cargo build --bins` builds it; `scripts/test`
/// does so first).
pub fn roo_mail() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let bin = dir.join("roo-mail");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build --workspace --bins` first",
        bin.display()
    );
    bin
}
