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
