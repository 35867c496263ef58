//! Second hostile review of the PostgreSQL binding (398f5486, 4641aa8b): each test states
//! a rule of docs/PROTOCOL.md (or the file store's documented behaviour) that the binding
//! or `ROO_STORE` breaks. The first three need no server; the others skip without
//! `ROO_TEST_PG_DSN`, except the file twins, which show the rule on files.
use std::sync::mpsc;
use std::time::{Duration, Instant};

use roo_store::{Error, Member, NewTask, PgStore, RooHome, StoreChoice, TaskId, Team};

use super::common::{Raw, dsn, fresh_schema_url, home_at, name, psql, team_named};

fn new(subject: &str) -> NewTask {
    NewTask {
        subject: subject.into(),
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------------
// ROO_STORE: "messages show it without them [credentials]" (§8), "the password is never
// printed" (README). `redact` only drops a `user:password@` it finds before the first `/`
// or `?`; tokio-postgres takes the credentials up to the first `@` anywhere and also
// reads `password=` from the query string.
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// Locks: §3 "The wait in the queue has a deadline of 10 s, then the operation fails with a
// lock timeout naming the holder" (exit 3). On PostgreSQL a change waits for a row lock
// without any deadline (no lock_timeout, no idle_in_transaction_session_timeout), and the
// store's one connection serializes every other operation of the process behind it.
// ---------------------------------------------------------------------------------------

/// A participant that stopped inside a change (SIGSTOP, a debugger, a host cut off whose
/// TCP session the server keeps for the kernel's 2 h keepalive) holds the config row: on
/// files every other participant gets a lock timeout after 10 s; here they hang forever.
#[test]
fn a_change_behind_a_held_row_lock_fails_with_a_timeout_like_a_file_lock() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let (_d, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice"]);
    let raw = Raw::connect(&url);
    raw.exec("BEGIN; SELECT 1 FROM roo_doc WHERE key = 'teams/t/config.json' FOR UPDATE");
    let (tx, rx) = mpsc::channel();
    let list = team.tasks();
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let result = list.create(new("behind a stuck peer"));
        let _ = tx.send((started.elapsed(), result.map(|t| t.id)));
    });
    let got = rx.recv_timeout(Duration::from_secs(30));
    raw.exec("ROLLBACK");
    waiter.join().unwrap();
    match got {
        Ok((elapsed, Err(e))) => {
            assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
            assert!(
                matches!(e, Error::LockTimeout { .. } | Error::Engine { .. }),
                "{e}"
            );
        }
        Ok((_, Ok(id))) => panic!("created task {id} through a held lock?"),
        Err(_) => panic!(
            "the change still waited for the row lock after 30 s (files: a lock timeout \
             after 10 s, exit 3)"
        ),
    }
}

/// `WatchWaker::stop` "lets another thread ... stop a blocked InboxWatcher::wait
/// promptly" (watch.rs). On PostgreSQL the watcher's poll takes the store's one
/// connection, which another thread's change holds while it waits for a row lock: the
/// watcher cannot stop (nor any read of the process proceed) until that lock is free.
#[test]
fn a_watcher_stops_promptly_while_another_thread_waits_for_a_row_lock() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let (_d, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice"]);
    let mut watcher = team.mailbox().watcher(&name("alice")).unwrap();
    let waker = watcher.waker();
    let raw = Raw::connect(&url);
    raw.exec("BEGIN; SELECT 1 FROM roo_doc WHERE key = 'tasks/t/tasks.json' FOR UPDATE");
    let list = team.tasks();
    let blocked = std::thread::spawn(move || list.create(new("queued")).map(|t| t.id));
    std::thread::sleep(Duration::from_millis(300));
    let (tx, rx) = mpsc::channel();
    let waiting = std::thread::spawn(move || {
        let outcome = watcher.wait(Duration::from_secs(60));
        let _ = tx.send(outcome);
    });
    // Let the watcher reach its poll (every 500 ms), then stop it.
    std::thread::sleep(Duration::from_millis(1200));
    let stopped_at = Instant::now();
    waker.stop();
    let outcome = rx.recv_timeout(Duration::from_secs(5));
    let took = stopped_at.elapsed();
    raw.exec("ROLLBACK");
    let _ = blocked.join().unwrap();
    waiting.join().unwrap();
    assert!(
        outcome.is_ok(),
        "the watcher did not stop within 5 s ({took:?}): its poll waits for the \
         connection another thread's change holds"
    );
}

// ---------------------------------------------------------------------------------------
// Quarantine: §2.4 / doc.rs — damaged records are moved aside by the next change
// "whatever the change does next"; a whole damaged document is moved aside and the change
// fails with Error::Corrupt, "committed: the next change starts afresh, as with a file".
// On PostgreSQL the move is part of the change's transaction, so a change that then fails
// (or a nested change whose outer change fails) takes the quarantine back with it.
// ---------------------------------------------------------------------------------------

/// A task list with one damaged record; a change that fails after loading it (deleting
/// a task that does not exist). Files: the damaged record is in a `.corrupt-` file and the
/// warning says so. PostgreSQL: the warning says "moved … to roo_quarantine", yet nothing
/// is there and the record is still in the row.
#[test]
fn damaged_records_are_quarantined_even_when_the_change_then_fails() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let (_d, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice"]);
    let list = team.tasks();
    list.create(new("one")).unwrap();
    list.create(new("two")).unwrap();
    psql(
        &url,
        "UPDATE roo_doc SET doc = jsonb_set(doc::jsonb, '{tasks,1}', \
         (doc::jsonb->'tasks'->1) - 'subject')::json WHERE key = 'tasks/t/tasks.json'",
    );
    let _ = roo_store::quarantine::take_warnings();
    let err = list
        .delete(&TaskId::parse("99").unwrap(), None, false)
        .unwrap_err();
    assert!(matches!(err, Error::TaskNotFound { .. }), "{err}");
    let warnings = roo_store::quarantine::take_warnings();
    let found = roo_store::quarantine::quarantined(&home, &name("t")).unwrap();
    assert_eq!(
        found.len(),
        1,
        "warned {warnings:?}, but roo_quarantine holds {found:?}; the row still has {} tasks",
        psql(
            &url,
            "SELECT json_array_length(doc->'tasks') FROM roo_doc WHERE key = 'tasks/t/tasks.json'"
        )
    );
}

/// The same rule on files (passes): the quarantine outlives the failed change.
#[test]
fn damaged_records_are_quarantined_even_when_the_change_then_fails_on_files() {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let team = team_named(&home, "t", &["alice"]);
    let list = team.tasks();
    list.create(new("one")).unwrap();
    list.create(new("two")).unwrap();
    let path = home.task_list(&name("t"));
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["tasks"][1].as_object_mut().unwrap().remove("subject");
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let err = list
        .delete(&TaskId::parse("99").unwrap(), None, false)
        .unwrap_err();
    assert!(matches!(err, Error::TaskNotFound { .. }), "{err}");
    assert_eq!(
        roo_store::quarantine::quarantined(&home, &name("t"))
            .unwrap()
            .len(),
        1
    );
}

/// A task list row that cannot be read, left from an earlier team of that name (its
/// config quarantined and acknowledged — what Team::create's own refusal tells the user
/// to do — or damaged by hand). Files: the first `team create` moves the list aside and
/// fails with Error::Corrupt; the second creates the team. PostgreSQL: the move is a
/// savepoint of the config's change, which the Corrupt error rolls back — every attempt
/// fails the same way, reporting a move that never happened; the name is unusable.
#[test]
fn a_team_can_be_created_over_an_unreadable_task_list_as_on_files() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let (_d, home) = home_at(&url);
    team_named(&home, "other", &[]); // the schema exists
    psql(
        &url,
        "INSERT INTO roo_doc (key, doc) VALUES ('tasks/t/tasks.json', \
         '{\"version\": \"1.0\", \"tasks\": 7}')",
    );
    let create = || {
        let t = name("t");
        Team::create(
            &home,
            t.clone(),
            "again",
            Member::new(name("lead"), &t),
            vec![],
        )
    };
    let first = create();
    assert!(matches!(first, Err(Error::Corrupt { .. })), "{first:?}");
    let second = create();
    assert!(
        second.is_ok(),
        "second create: {:?}; roo_quarantine rows: {}",
        second.err(),
        psql(&url, "SELECT count(*) FROM roo_quarantine")
    );
}

/// The same on files (passes).
#[test]
fn a_team_can_be_created_over_an_unreadable_task_list_on_files() {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let path = home.task_list(&name("t"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, br#"{"version": "1.0", "tasks": 7}"#).unwrap();
    let create = || {
        let t = name("t");
        Team::create(
            &home,
            t.clone(),
            "again",
            Member::new(name("lead"), &t),
            vec![],
        )
    };
    let first = create();
    assert!(matches!(first, Err(Error::Corrupt { .. })), "{first:?}");
    assert!(create().is_ok());
}
