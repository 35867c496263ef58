//! Second hostile review of `ROO_STORE` (4641aa8b) and the binding's reconnect (398f5486),
//! through the real binaries. Each test states what README/PROTOCOL §8 promise.

use roo_tests::TempHome;
use roo_tests::pg::{psql, test_dsn};

/// README: "the password is never printed". roo-lead failing to reach the store must not
/// print a password given as `?password=` (libpq's and tokio-postgres's query parameter).
#[test]
fn the_runtime_never_prints_a_password_from_the_query_string() {
    let env = TempHome::new();
    let out = env
        .cmd("roo-lead")
        .env(
            "ROO_STORE",
            "postgresql://db.example/roo?user=roo&password=s3cret",
        )
        .args(["-p", "hi"])
        .run();
    assert_eq!(out.code(), 3, "{}", out.stderr());
    assert!(
        out.stderr().contains("db.example:5432/roo"),
        "{}",
        out.stderr()
    );
    assert!(!out.stderr().contains("s3cret"), "{}", out.stderr());
}

/// The same promise for a refused value: the libpq keyword/value form, which psql and
/// most tools accept, is refused (exit 2) with the password in the message.
#[test]
fn a_refused_store_setting_never_prints_its_password() {
    let env = TempHome::new();
    let out = env
        .task()
        .env(
            "ROO_STORE",
            "host=db.example user=roo password=s3cret dbname=roo",
        )
        .args(["list", "--team", "t"])
        .run();
    assert_eq!(out.code(), 2, "{}", out.stderr());
    assert!(!out.stderr().contains("s3cret"), "{}", out.stderr());
}

/// The test server's DSN with another database name, if it has the usual shape.
fn with_database(dsn: &str, db: &str) -> Option<String> {
    let rest = dsn.split_once("://")?.1;
    let path = rest.find('/')?;
    let scheme_len = dsn.len() - rest.len();
    let start = scheme_len + path + 1;
    let end = dsn[start..].find('?').map_or(dsn.len(), |q| start + q);
    Some(format!("{}{db}{}", &dsn[..start], &dsn[end..]))
}

/// §8 (398f5486): "the server's message in engine errors". A login the server refuses
/// (no such database, role or password) is reported as "failed to connect …: db error":
/// `open_connection` keeps only the client error's own text, never its cause.
#[test]
fn a_refused_login_names_the_servers_reason() {
    let Some(dsn) = test_dsn() else { return };
    let Some(url) = with_database(&dsn, "roo_no_such_database") else {
        return;
    };
    let env = TempHome::new();
    let out = env
        .task()
        .env("ROO_STORE", &url)
        .args(["list", "--team", "t"])
        .run();
    assert_eq!(out.code(), 3, "{}", out.stderr());
    assert!(
        out.stderr().contains("does not exist"),
        "the server's reason is lost: {}",
        out.stderr()
    );
}

/// §8: "A lost connection (server restart, a cut link) fails what was under way on it;
/// the next operation connects again, LISTENs again and wakes every watcher to read
/// afresh." `roo-mail watch` is the CLIs' one long-running reader: the lost connection
/// wakes it at once, its read reconnects while the server still refuses connections
/// (a restart, a failover) and the watch exits 3 — a message sent a moment later is
/// never shown. (A restart is simulated on a database of its own: connections refused
/// for 2 s, the watch's session terminated.)
#[test]
fn roo_mail_watch_survives_a_server_restart() {
    let Some(dsn) = test_dsn() else { return };
    let db = format!(
        "roo_r2_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let Some(url) = with_database(&dsn, &db) else {
        return;
    };
    psql(&dsn, &format!("CREATE DATABASE {db}"));
    let env = TempHome::new();
    env.mail()
        .env("ROO_STORE", &url)
        .args([
            "team", "create", "--team", "t", "--lead", "lead", "--member", "alice",
        ])
        .run()
        .assert_ok();
    let watch = env
        .mail()
        .env("ROO_STORE", &url)
        .args([
            "watch",
            "--team",
            "t",
            "--as",
            "alice",
            "--count",
            "1",
            "--timeout",
            "30",
        ])
        .spawn();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    psql(
        &dsn,
        &format!(
            "ALTER DATABASE {db} ALLOW_CONNECTIONS false; \
             SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '{db}'"
        ),
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    psql(&dsn, &format!("ALTER DATABASE {db} ALLOW_CONNECTIONS true"));
    std::thread::sleep(std::time::Duration::from_millis(500));
    env.mail()
        .env("ROO_STORE", &url)
        .args([
            "send",
            "--team",
            "t",
            "--from",
            "lead",
            "--to",
            "alice",
            "--summary",
            "after",
            "sent after the restart",
        ])
        .run()
        .assert_ok();
    let out = watch.wait();
    let _ = std::process::Command::new("psql")
        .args([
            dsn.as_str(),
            "-qc",
            &format!("DROP DATABASE {db} WITH (FORCE)"),
        ])
        .output();
    assert_eq!(out.code(), 0, "{}", out.stderr());
    assert!(
        out.stdout().contains("sent after the restart"),
        "{}",
        out.stdout()
    );
}

/// The help's exit codes: "2 usage or bad input (..., a bad ROO_STORE)"; "3 ... the
/// PostgreSQL store (ROO_STORE) unreachable or failing". A `postgresql://` URL that does
/// not parse (a port that is not a number) is a bad ROO_STORE, not a failing server, yet
/// it exits 3 ("failed to read the store URL … invalid connection string", the client's
/// reason dropped).
#[test]
fn a_store_url_that_does_not_parse_is_a_usage_error() {
    let env = TempHome::new();
    let out = env
        .task()
        .env("ROO_STORE", "postgresql://roo@db.example:nope/roo")
        .args(["list", "--team", "t"])
        .run();
    assert_eq!(out.code(), 2, "{}", out.stderr());
}
