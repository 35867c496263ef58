//! The CLIs on the PostgreSQL store (`ROO_STORE=postgresql://…`), against the throwaway
//! server of `ROO_TEST_PG_DSN` (scripts/test starts one); without it, each test says so
//! and passes. The team runtime refuses that store for now, loudly.

use roo_tests::TempHome;

/// The test server's URL with a fresh schema, or `None` (skipped, and said).
fn store_url() -> Option<String> {
    let dsn = std::env::var("ROO_TEST_PG_DSN")
        .ok()
        .filter(|d| !d.is_empty());
    let Some(dsn) = dsn else {
        eprintln!("ROO_TEST_PG_DSN is not set: skipped (scripts/test sets it)");
        return None;
    };
    let schema = format!(
        "roo_e2e_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let out = std::process::Command::new("psql")
        .args([dsn.as_str(), "-v", "ON_ERROR_STOP=1", "-qc"])
        .arg(format!("CREATE SCHEMA {schema}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sep = if dsn.contains('?') { '&' } else { '?' };
    Some(format!("{dsn}{sep}options=-c%20search_path%3D{schema}"))
}

/// A team's whole coordination through `roo-mail` and `roo-task` on the PostgreSQL store:
/// nothing is written under ROO_HOME, and a second home (another machine's) sees it all.
#[test]
fn roo_mail_and_roo_task_coordinate_a_team_on_postgresql() {
    let Some(url) = store_url() else { return };
    let here = TempHome::new();
    let there = TempHome::new();
    here.mail()
        .env("ROO_STORE", &url)
        .args([
            "team", "create", "--team", "t", "--lead", "lead", "--member", "alice",
        ])
        .run()
        .assert_ok();
    here.task()
        .env("ROO_STORE", &url)
        .args([
            "create",
            "--team",
            "t",
            "--as",
            "lead",
            "--subject",
            "parser",
        ])
        .run()
        .assert_ok();
    here.mail()
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
            "take the parser",
            "Please take task 1.",
        ])
        .run()
        .assert_ok();
    // Another home, the same store: alice reads and claims from "elsewhere".
    let unread = there
        .mail()
        .env("ROO_STORE", &url)
        .args([
            "read",
            "--team",
            "t",
            "--as",
            "alice",
            "--unread",
            "--mark-read",
            "--json",
        ])
        .run();
    unread.assert_ok();
    assert_eq!(
        unread.json()[0]["text"],
        "Please take task 1.",
        "{}",
        unread.stdout()
    );
    let claim = there
        .task()
        .env("ROO_STORE", &url)
        .args(["claim", "1", "--team", "t", "--as", "alice", "--json"])
        .run();
    claim.assert_ok();
    let task = here
        .task()
        .env("ROO_STORE", &url)
        .args(["get", "1", "--team", "t", "--json"])
        .run();
    task.assert_ok();
    assert_eq!(task.json()["owner"], "alice", "{}", task.stdout());
    assert_eq!(task.json()["status"], "in_progress");
    for home in [&here, &there] {
        assert!(
            !home.path().join("teams").exists() && !home.path().join("tasks").exists(),
            "a document was written under ROO_HOME"
        );
    }
}

/// An unreachable store is a loud error naming the server (exit 3), never files; a
/// `ROO_STORE` that is neither `file` nor a URL is a usage error; no credential is shown.
#[test]
fn an_unreachable_or_unknown_store_is_a_loud_error_and_never_files() {
    let env = TempHome::new();
    let out = env
        .mail()
        .env("ROO_STORE", "postgresql://roo:s3cret@127.0.0.1:1/roo")
        .args(["team", "create", "--team", "t", "--lead", "lead"])
        .run();
    assert_eq!(out.code(), 3, "{}", out.stderr());
    assert!(out.stderr().contains("127.0.0.1:1/roo"), "{}", out.stderr());
    assert!(!out.stderr().contains("s3cret"), "{}", out.stderr());
    assert!(!env.path().join("teams").exists());
    let out = env
        .task()
        .env("ROO_STORE", "mysql://roo@db/roo")
        .args(["list", "--team", "t"])
        .run();
    assert_eq!(out.code(), 2, "{}", out.stderr());
    assert!(out.stderr().contains("ROO_STORE"), "{}", out.stderr());
}

/// roo-lead and roo-worker do not run on the PostgreSQL store yet: they say so and stop
/// (exit 2) rather than quietly using files while the CLIs use the database.
#[test]
fn the_team_runtime_refuses_a_postgresql_store_rather_than_ignoring_it() {
    let env = TempHome::new();
    for (bin, args) in [
        ("roo-lead", vec!["-p", "hi"]),
        ("roo-worker", vec!["--team", "t", "--name", "alice"]),
    ] {
        let out = env
            .cmd(bin)
            .env("ROO_STORE", "postgresql://roo:s3cret@db.example/roo")
            .args(args)
            .run();
        assert_eq!(out.code(), 2, "{bin}: {}", out.stderr());
        assert!(
            out.stderr().contains(
                "selects the PostgreSQL store, which roo-lead and roo-worker do not run on yet"
            ),
            "{bin}: {}",
            out.stderr()
        );
        assert!(!out.stderr().contains("s3cret"), "{}", out.stderr());
    }
}
