//! The test PostgreSQL server (`ROO_TEST_PG_DSN`, which `scripts/test` sets to a
//! throwaway cluster): its URL, a fresh schema per test, and `psql`.

use std::process::Command;

/// The server's URL, or `None` (the test is skipped, and says so).
pub fn test_dsn() -> Option<String> {
    let dsn = std::env::var("ROO_TEST_PG_DSN")
        .ok()
        .filter(|d| !d.is_empty());
    if dsn.is_none() {
        eprintln!("ROO_TEST_PG_DSN is not set: skipped (scripts/test sets it)");
    }
    dsn
}

/// Runs `sql` on the server at `url` and returns what it printed (`-At`: bare values);
/// a failure fails the test.
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

/// A URL of the server at `dsn` whose sessions work in a new, empty schema.
pub fn fresh_schema_url(dsn: &str) -> String {
    let schema = format!(
        "roo_e2e_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    psql(dsn, &format!("CREATE SCHEMA {schema}"));
    let sep = if dsn.contains('?') { '&' } else { '?' };
    format!("{dsn}{sep}options=-c%20search_path%3D{schema}")
}

/// The test server's URL with a fresh schema, or `None` (skipped, and said).
pub fn store_url() -> Option<String> {
    test_dsn().map(|dsn| fresh_schema_url(&dsn))
}

/// The server's URL `dsn` with another database name `db`, if it has the usual shape
/// (`scheme://authority/database?query`).
pub fn with_database(dsn: &str, db: &str) -> Option<String> {
    let rest = dsn.split_once("://")?.1;
    let path = rest.find('/')?;
    let scheme_len = dsn.len() - rest.len();
    let start = scheme_len + path + 1;
    let end = dsn[start..].find('?').map_or(dsn.len(), |q| start + q);
    Some(format!("{}{db}{}", &dsn[..start], &dsn[end..]))
}

/// A PostgreSQL cluster of the test's own (`scripts/pg-cluster`: a temp dir, a unix
/// socket only), for what must not touch the shared server of `ROO_TEST_PG_DSN`: its
/// authentication changed. Stopped and removed on drop.
pub struct OwnCluster {
    dir: std::path::PathBuf,
    /// `postgresql://<superuser>@localhost/postgres?host=<dir>`, as the script prints it.
    pub dsn: String,
    /// The superuser the cluster was made with.
    pub superuser: String,
}

impl OwnCluster {
    /// Starts one; `None` (said on stderr) where PostgreSQL is not installed, which
    /// `ROO_TEST_PG_DSN` being unset also means (the test is then skipped).
    pub fn start() -> Option<OwnCluster> {
        test_dsn()?;
        OwnCluster::start_in(&std::env::temp_dir())
    }

    /// Starts one whose directory (and socket) lies in `parent` (made traversable by
    /// the server's user); `None` (said on stderr) where PostgreSQL is not installed.
    pub fn start_in(parent: &std::path::Path) -> Option<OwnCluster> {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pg-cluster");
        let out = Command::new(&script)
            .arg("start")
            .env("TMPDIR", parent)
            .output()
            .expect("run scripts/pg-cluster");
        if !out.status.success() {
            eprintln!(
                "skipped: scripts/pg-cluster start failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = text.lines();
        let dir = std::path::PathBuf::from(lines.next().expect("the cluster's directory"));
        let dsn = lines.last().expect("the cluster's DSN").to_owned();
        let superuser = dsn
            .strip_prefix("postgresql://")
            .and_then(|rest| rest.split('@').next())
            .expect("a user in the DSN")
            .to_owned();
        Some(OwnCluster {
            dir,
            dsn,
            superuser,
        })
    }

    /// Stops the server (fast: its sessions are ended), keeps it stopped for `down` (its
    /// socket gone: connections are refused), starts it again, and returns once it
    /// accepts connections (`scripts/pg-cluster restart --down`).
    pub fn restart_after(&self, down: std::time::Duration) {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pg-cluster");
        let out = Command::new(script)
            .arg("restart")
            .arg(&self.dir)
            .args(["--down", &format!("{:.1}", down.as_secs_f64())])
            .output()
            .expect("run scripts/pg-cluster");
        assert!(
            out.status.success(),
            "scripts/pg-cluster restart: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Restarts the server with `max_connections` set to `n` (the script starts it with
    /// 200), and returns once it accepts connections again.
    pub fn set_max_connections(&self, n: u32) {
        let opts = self.dir.join("data/postmaster.opts");
        let text = std::fs::read_to_string(&opts).expect("read postmaster.opts");
        assert!(text.contains("max_connections=200"), "{text}");
        std::fs::write(
            &opts,
            text.replace("max_connections=200", &format!("max_connections={n}")),
        )
        .expect("write postmaster.opts");
        self.restart_after(std::time::Duration::ZERO);
        assert_eq!(psql(&self.dsn, "SHOW max_connections"), n.to_string());
    }

    /// The directory of the server's unix socket.
    pub fn socket_dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// From now on every connection must give a password (`scram-sha-256` for every
    /// local connection); returns once the server applies it.
    pub fn require_passwords(&self) {
        let hba = self.dir.join("data/pg_hba.conf");
        std::fs::write(&hba, "local all all scram-sha-256\n").expect("write pg_hba.conf");
        psql(&self.dsn, "SELECT pg_reload_conf()");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let refused = !Command::new("psql")
                .args(["-w", &self.dsn, "-Atc", "SELECT 1"])
                .env_remove("PGPASSWORD")
                .env("PGPASSFILE", "/nonexistent")
                .output()
                .expect("run psql")
                .status
                .success();
            if refused {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server still lets a connection in without a password"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pg-cluster");
        let _ = Command::new(script).arg("stop").arg(&self.dir).output();
    }
}
