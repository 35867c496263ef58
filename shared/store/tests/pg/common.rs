//! The fixtures of the conformance suite, on the PostgreSQL store.
use std::process::Command;

use roo_store::{Member, Name, NewTask, PgStore, RooHome, Team};

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub home: RooHome,
    pub team: Team,
    /// The store's URL (a fresh schema), for more connections to it.
    pub url: String,
}

pub fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

/// The test server's URL, or `None` (the test is skipped, and says so).
pub fn dsn() -> Option<String> {
    let dsn = std::env::var("ROO_TEST_PG_DSN")
        .ok()
        .filter(|d| !d.is_empty());
    if dsn.is_none() {
        eprintln!("ROO_TEST_PG_DSN is not set: skipped (scripts/test sets it)");
    }
    dsn
}

/// A URL of the test server whose connections work in a new, empty schema.
pub fn fresh_schema_url(dsn: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let schema = format!(
        "roo_t_{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    psql(dsn, &format!("CREATE SCHEMA {schema}"));
    let sep = if dsn.contains('?') { '&' } else { '?' };
    format!("{dsn}{sep}options=-c%20search_path%3D{schema}")
}

/// Whether this run keeps its documents in files: a test that looks at the files
/// themselves returns early unless it does (`if common::not_files() { return; }`).
pub fn not_files() -> bool {
    std::env::var("ROO_TEST_PG_DSN").is_ok_and(|d| !d.is_empty())
}

/// A home for the test: in a fresh schema of the test server, or (without one) files;
/// with the schema's URL (empty for files).
pub fn home() -> (tempfile::TempDir, RooHome, String) {
    match dsn() {
        Some(dsn) => {
            let url = fresh_schema_url(&dsn);
            let (dir, home) = home_at(&url);
            (dir, home, url)
        }
        None => {
            let dir = tempfile::tempdir().unwrap();
            let home = RooHome::new(dir.path());
            (dir, home, String::new())
        }
    }
}

/// A team `t` led by `lead` with members `alice` and `bob`.
pub fn team() -> Fixture {
    let (dir, home, url) = home();
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
        url,
    }
}

/// Runs `sql` on the test server at `url` (psql; `-At`: bare values) and returns what it
/// printed; a failure fails the test.
pub fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A home whose documents live at `url` (a schema made by [`fresh_schema_url`]).
pub fn home_at(url: &str) -> (tempfile::TempDir, RooHome) {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path().join("home")).with_store(PgStore::connect(url).unwrap());
    (dir, home)
}

/// A home in a fresh schema of the test server, with the schema's URL; `None` without
/// `ROO_TEST_PG_DSN` (the test is skipped, and says so).
pub fn pg_home() -> Option<(tempfile::TempDir, RooHome, String)> {
    let url = fresh_schema_url(&dsn()?);
    let (dir, home) = home_at(&url);
    Some((dir, home, url))
}

/// A moment for another thread to reach the lock it queues on (races lined up by a
/// [`Raw`] session holding the row).
pub fn pause() {
    std::thread::sleep(std::time::Duration::from_millis(400));
}

/// A new task with `subject` and nothing else.
pub fn new_task(subject: &str) -> NewTask {
    NewTask {
        subject: subject.into(),
        ..Default::default()
    }
}

/// Waits until the server at `url` started more than [`roo_store::RESTART_GRACE`] ago:
/// before then a missing presence lock is no evidence of death, so a test that has a
/// member declared dead must not run earlier (a cluster started a moment ago).
pub fn wait_out_restart_grace(url: &str) {
    let older = format!(
        "SELECT now() - pg_postmaster_start_time() > interval '{} seconds'",
        roo_store::RESTART_GRACE.as_secs() + 1
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while psql(url, &older) != "t" {
        assert!(
            std::time::Instant::now() < deadline,
            "the server's start never left the restart grace"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Team `team` led by `lead`, with `members`.
pub fn team_named(home: &RooHome, team: &str, members: &[&str]) -> Team {
    let t = name(team);
    Team::create(
        home,
        t.clone(),
        "test team",
        Member::new(name("lead"), &t),
        members.iter().map(|m| Member::new(name(m), &t)).collect(),
    )
    .unwrap()
}

/// Another participant's own session, for holding row locks and uncommitted rows, to
/// line up races deterministically.
pub struct Raw {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Raw {
    pub fn connect(url: &str) -> Raw {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let (client, connection) = rt
            .block_on(tokio_postgres::connect(url, tokio_postgres::NoTls))
            .unwrap();
        rt.spawn(connection);
        Raw { rt, client }
    }

    pub fn exec(&self, sql: &str) {
        self.rt.block_on(self.client.batch_execute(sql)).unwrap();
    }

    /// [`Raw::exec`], its error as text.
    pub fn try_exec(&self, sql: &str) -> Result<(), String> {
        self.rt
            .block_on(self.client.batch_execute(sql))
            .map_err(|e| format!("{e} {:?}", e.as_db_error().map(|d| d.message())))
    }

    /// The first column of the one row `sql` returns, as text.
    pub fn value(&self, sql: &str) -> String {
        let row = self.rt.block_on(self.client.query_one(sql, &[])).unwrap();
        row.get::<_, String>(0)
    }
}

/// A member kept alive by its presence (the PostgreSQL store's test: a pid means nothing
/// there), held by this process on its own connections; [`LiveMember::kill`] drops it,
/// as the death of its process would. Without a server: a process whose pid its entry
/// records, as on files.
pub enum LiveMember {
    Presence(Option<roo_store::Presence>),
    Process(std::process::Child),
}

/// Joins `member` as a live member (see [`LiveMember`]), from a connection of its own.
pub fn live_member(f: &Fixture, mut member: Member) -> LiveMember {
    if f.url.is_empty() {
        let child = Command::new("sleep").arg("60").spawn().unwrap();
        member.pid = Some(child.id());
        f.team.join(member).unwrap();
        return LiveMember::Process(child);
    }
    let (_dir, home) = home_at(&f.url);
    let team = Team::open(&home, f.team.name().clone()).unwrap();
    let name = member.name.clone();
    team.join(member).unwrap();
    LiveMember::Presence(Some(team.hold_presence(&name).unwrap()))
}

impl LiveMember {
    pub fn kill(&mut self) {
        match self {
            LiveMember::Presence(presence) => {
                presence.take();
            }
            LiveMember::Process(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl Drop for LiveMember {
    fn drop(&mut self) {
        self.kill();
    }
}
