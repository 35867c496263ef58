//! The store's credentials in what it shows: "messages show it without them" (docs/
//! PROTOCOL.md §8), "the password is never printed" (README) — whether the password
//! comes as `user:password@`, unencoded with a `/`, `?` or `@`, as `?password=`, or in
//! a refused libpq keyword/value setting. No server needed.
use roo_store::{PgStore, StoreChoice};

/// libpq's and tokio-postgres's `?password=` is shown as is: `shown` (printed by roo-lead
/// and roo-worker when they refuse the store) and the URL-parse error of `connect`.
#[test]
fn a_password_in_the_query_string_is_never_shown() {
    let url = "postgresql://db.example/roo?user=roo&password=s3cret";
    let choice = StoreChoice::parse(url).unwrap();
    let StoreChoice::Postgres { shown, .. } = &choice else {
        panic!("{choice:?}")
    };
    assert!(!shown.contains("s3cret"), "shown: {shown}");
    assert!(!format!("{choice:?}").contains("s3cret"), "{choice:?}");
    let err = PgStore::connect("postgresql://db.example:nope/roo?password=s3cret").unwrap_err();
    assert!(!err.to_string().contains("s3cret"), "{err}");
}

/// A password with an unencoded `/` or `?` is a valid URL for tokio-postgres (the store
/// connects with it), but `redact` then finds no `@` in what it takes for the authority
/// and shows the whole URL.
#[test]
fn a_password_with_a_slash_or_a_question_mark_is_never_shown() {
    for (url, password) in [
        ("postgresql://roo:se/cret@db.example/roo", "se/cret"),
        ("postgres://roo:se?cret@db.example/roo", "se?cret"),
    ] {
        let config: tokio_postgres::Config = url.parse().unwrap();
        assert_eq!(config.get_password(), Some(password.as_bytes()), "{url}");
        let StoreChoice::Postgres { shown, .. } = StoreChoice::parse(url).unwrap() else {
            panic!("{url}")
        };
        assert!(!shown.contains(password), "shown: {shown}");
    }
    let err = PgStore::connect("postgresql://roo:se/cret@db.example:nope/roo").unwrap_err();
    assert!(!err.to_string().contains("se/cret"), "{err}");
    // An unencoded `@`: tokio-postgres splits at the first one, so the rest of the
    // password becomes part of the host, which `describe` then names in every message.
    let err = PgStore::connect("postgresql://roo:p@ss@127.0.0.1:1/roo").unwrap_err();
    assert!(!err.to_string().contains("ss@127.0.0.1"), "{err}");
}

/// The libpq keyword/value form (`host=… password=…`, what `psql` and most tools accept)
/// is refused, rightly, but the refusal prints the value with its password.
#[test]
fn a_refused_store_setting_does_not_print_its_password() {
    for value in [
        "host=db.example user=roo password=s3cret dbname=roo",
        "roo:s3cret@db.example/roo",
    ] {
        let err = StoreChoice::parse(value).unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }
}
