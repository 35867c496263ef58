//! Shared fixtures.
use roo_store::{Member, Name, RooHome, Team};

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub home: RooHome,
    pub team: Team,
}

pub fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

/// A team `t` led by `lead` with members `alice` and `bob`.
pub fn team() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let t = name("t");
    let members = vec![Member::new(name("alice"), &t), Member::new(name("bob"), &t)];
    let team = Team::create(
        &home,
        t.clone(),
        "test team",
        Member::new(name("lead"), &t),
        members,
    )
    .unwrap();
    Fixture {
        _dir: dir,
        home,
        team,
    }
}

/// Whether this run keeps its documents elsewhere than in files (the PostgreSQL run of
/// this suite, `tests/pg.rs`): a test that looks at the files returns early then.
pub fn not_files() -> bool {
    false
}

/// A member kept alive by a process of its own: on files a `sleep` whose pid its entry
/// records (the file store's test); [`LiveMember::kill`] ends it.
pub struct LiveMember(std::process::Child);

/// Joins `member` as a live member (see [`LiveMember`]).
pub fn live_member(f: &Fixture, mut member: Member) -> LiveMember {
    let child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    member.pid = Some(child.id());
    f.team.join(member).unwrap();
    LiveMember(child)
}

impl LiveMember {
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for LiveMember {
    fn drop(&mut self) {
        self.kill();
    }
}
