use super::*;

#[test]
fn channels_are_per_team_and_short() {
    let long = "t".repeat(64);
    assert_eq!(
        channel_of("teams/crew/config.json"),
        channel_of("tasks/crew/tasks.json")
    );
    assert_ne!(
        channel_of("teams/crew/config.json"),
        channel_of("teams/crow/config.json")
    );
    assert!(channel_of(&format!("teams/{long}/config.json")).len() < 63);
    assert_eq!(channel_of("other"), "roo");
}

/// Review (63df0a67): a change closure that panics (a bug, an overflow in a debug
/// build; the caller may catch it, e.g. a tokio task) unwinds through `update`
/// without a ROLLBACK: the connection stays in the open transaction, the row stays
/// locked for every other participant until this connection happens to COMMIT, and
/// the next thread's BEGIN only warns and commits the leftovers with its own change.
/// Run with ROO_TEST_PG_DSN set: `cargo nextest run -p roo-store --lib pg::tests`.
#[test]
fn a_panicking_change_leaves_no_transaction_open() {
    let Some(dsn) = std::env::var("ROO_TEST_PG_DSN")
        .ok()
        .filter(|d| !d.is_empty())
    else {
        return;
    };
    let schema = format!("roo_panic_{}", std::process::id());
    let psql = |url: &str, sql: &str| {
        std::process::Command::new("psql")
            .args([url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql])
            .output()
            .map(|o| {
                (
                    o.status.success(),
                    String::from_utf8_lossy(&o.stderr).into_owned(),
                )
            })
    };
    let Ok((true, _)) = psql(&dsn, &format!("CREATE SCHEMA {schema}")) else {
        panic!("create schema");
    };
    let sep = if dsn.contains('?') { '&' } else { '?' };
    let url = format!("{dsn}{sep}options=-c%20search_path%3D{schema}");
    let Ok(store) = PgStore::connect(&url) else {
        panic!("connect");
    };
    let key = "teams/p/config.json";
    let written = store.update(key, |_, _| {
        Ok(PgChange::Write((), r#"{"version":"1.0"}"#.to_string()))
    });
    assert!(written.is_ok(), "{:?}", written.err());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.update(key, |_, _| -> Result<PgChange<()>> { panic!("a bug") })
    }));
    assert!(caught.is_err());
    // Another participant (another process) wants the row.
    let other = psql(
        &url,
        &format!("SET lock_timeout = 1000; SELECT 1 FROM roo_doc WHERE key = '{key}' FOR UPDATE"),
    );
    assert!(
        matches!(other, Ok((true, _))),
        "the row is still locked by the panicked change: {other:?}"
    );
}

#[test]
fn urls_lose_their_credentials_in_messages() {
    assert_eq!(
        shown_url("postgresql://roo:s3cret@db.example:5432/roo").unwrap(),
        "postgresql://roo@db.example:5432/roo"
    );
    let shown = shown_url("postgresql://db/roo?user=roo&password=s3cret").unwrap();
    assert!(!shown.contains("s3cret"), "{shown}");
}
