//! Hostile review of the PostgreSQL binding (63df0a67): each test states a rule of
//! docs/PROTOCOL.md that the binding breaks. A second session of our own (`Raw`) stands
//! in for another participant's transaction, to line up races deterministically.
use std::time::Duration;

use roo_store::{Error, Member, NewTask, Outgoing, PgStore, ReadFilter, Team};

use super::common::{Raw, dsn, fresh_schema_url, home_at, name, psql, team_named};

fn pause() {
    std::thread::sleep(Duration::from_millis(400));
}

fn count(url: &str, where_: &str) -> i64 {
    psql(
        url,
        &format!("SELECT count(*) FROM roo_doc WHERE doc IS NOT NULL AND {where_}"),
    )
    .parse()
    .unwrap()
}

/// §8 "Deleting a team removes its rows … in the config's transaction"; §2/§4: a failed
/// operation writes nothing. The team's rows are deleted by statements that reach the
/// server only after COMMIT (they are `execute(&str)`, which first prepares: one more
/// round trip), so they run outside the transaction: a delete that fails there has
/// already committed the config's deletion, and leaves the inboxes behind.
#[test]
fn a_team_delete_that_fails_leaves_the_team_whole() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let (_d, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice"]);
    team.mailbox()
        .send(&name("lead"), "alice", Outgoing::text("hi", "hi"))
        .unwrap();
    // Another participant is changing alice's inbox right now.
    let raw = Raw::connect(&url);
    raw.exec("BEGIN; SELECT 1 FROM roo_doc WHERE key = 'teams/t/inboxes/alice.json' FOR UPDATE");
    // The deleting process does not wait for ever on a lock.
    let (_d2, impatient) = home_at(&format!("{url}%20-c%20lock_timeout%3D1000"));
    let result = Team::open(&impatient, name("t")).unwrap().delete(true);
    raw.exec("ROLLBACK");
    let config = count(&url, "key = 'teams/t/config.json'");
    let rows = count(&url, "key LIKE 'teams/t/%'");
    match &result {
        Ok(()) => assert_eq!(rows, 0, "deleted, but rows of the team remain"),
        Err(e) => assert_eq!(
            config, 1,
            "the delete failed ({e}) yet the config is gone and {rows} row(s) of the team are left"
        ),
    }
}

/// §2.4/§8: a change made while another participant deletes the row it waits for. The
/// waiter's `SELECT … FOR UPDATE` then returns no row, its change starts from "missing",
/// and its `UPDATE … WHERE key = $1` hits no row: it reports success and writes nothing.
/// Here through the public API only: a `team create` queued behind a `team delete`.
#[test]
fn a_team_create_queued_behind_a_team_delete_is_not_reported_done_for_nothing() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let (_d, home) = home_at(&url);
    team_named(&home, "t", &["alice"]);
    let (_d2, other) = home_at(&url);
    // Hold the config so the deleter and the creator queue in that order.
    let raw = Raw::connect(&url);
    raw.exec("BEGIN; SELECT 1 FROM roo_doc WHERE key = 'teams/t/config.json' FOR UPDATE");
    let created = std::thread::scope(|s| {
        let deleter = s.spawn(|| Team::open(&home, name("t")).unwrap().delete(true));
        pause();
        let creator = s.spawn(|| {
            let t = name("t");
            Team::create(
                &other,
                t.clone(),
                "anew",
                Member::new(name("lead"), &t),
                vec![],
            )
        });
        pause();
        raw.exec("COMMIT");
        deleter.join().unwrap().unwrap();
        creator.join().unwrap()
    });
    if let Ok(team) = created {
        let opened = Team::open(&other, team.name().clone());
        assert!(
            opened.is_ok(),
            "Team::create returned Ok but the team does not exist: {:?}",
            opened.err()
        );
    }
}

/// The same lost write through the store's own quarantine (§2.4): a task list that cannot
/// be read is moved to `roo_quarantine` and its row deleted by the first change; a second
/// `create` queued behind it gets `Ok(task)` for a task that was never stored (on files
/// the next change starts from an empty list and writes it).
#[test]
fn a_task_created_behind_a_quarantine_of_its_list_is_stored() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let (_d, home) = home_at(&url);
    team_named(&home, "t", &["alice"]);
    let (_d2, other) = home_at(&url);
    psql(
        &url,
        "UPDATE roo_doc SET doc = '{\"version\": \"1.0\", \"tasks\": 7}' \
         WHERE key = 'tasks/t/tasks.json'",
    );
    let raw = Raw::connect(&url);
    raw.exec("BEGIN; SELECT 1 FROM roo_doc WHERE key = 'tasks/t/tasks.json' FOR UPDATE");
    let new = |s: &str| NewTask {
        subject: s.into(),
        ..Default::default()
    };
    let (first, second) = std::thread::scope(|s| {
        let first = s.spawn(|| {
            Team::open(&home, name("t"))
                .unwrap()
                .tasks()
                .create(new("a"))
        });
        pause();
        let second = s.spawn(|| {
            Team::open(&other, name("t"))
                .unwrap()
                .tasks()
                .create(new("b"))
        });
        pause();
        raw.exec("COMMIT");
        (first.join().unwrap(), second.join().unwrap())
    });
    assert!(matches!(first, Err(Error::Corrupt { .. })), "{first:?}");
    let task = second.expect("the second create starts from an empty list");
    let team = Team::open(&home, name("t")).unwrap();
    let got = team.tasks().get(&task.id);
    assert!(
        got.is_ok(),
        "create returned task {} but it is not stored: {:?}",
        task.id,
        got.err()
    );
}

/// §2.2: a document of a newer major version is refused and left untouched — by every
/// participant. `Team::delete_rows` parses the config with serde directly, so a 2.0
/// config (here one that still has 1.0's members) is not refused: the team is deleted.
#[test]
fn deleting_a_team_refuses_a_config_of_a_newer_major_version() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let (_d, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice"]);
    psql(
        &url,
        "UPDATE roo_doc SET doc = jsonb_set(doc::jsonb, '{version}', '\"2.0\"')::json \
         WHERE key = 'teams/t/config.json'",
    );
    assert!(matches!(team.config(), Err(Error::NewerFormat { .. })));
    let result = team.delete(true);
    assert!(
        matches!(result, Err(Error::NewerFormat { .. })),
        "delete of a 2.0 config: {result:?}"
    );
    assert_eq!(count(&url, "key = 'teams/t/config.json'"), 1);
}

/// §4/§5.3: a late send must not undo a team delete ("a concurrent `team delete` must not
/// be undone by a late send", mailbox.rs). On PostgreSQL the send checks the config in one
/// request and writes the inbox in another transaction; a delete in between leaves an
/// orphan inbox, which a new team of the same name then adopts with the old messages.
#[test]
fn a_send_racing_a_team_delete_leaves_nothing_for_a_new_team_of_that_name() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let (_d, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice", "bob"]);
    let (_d2, other) = home_at(&url);
    // Another sender is creating bob's inbox right now (not committed yet).
    let raw = Raw::connect(&url);
    raw.exec("BEGIN; INSERT INTO roo_doc (key, doc) VALUES ('teams/t/inboxes/bob.json', NULL)");
    let sent = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            team.mailbox()
                .send(&name("alice"), "bob", Outgoing::text("old secret", "old"))
        });
        pause();
        // The send holds the team's config shared while it waits for the row: the
        // delete waits for it, so the other participant lets go meanwhile.
        let deleter = s.spawn(|| Team::open(&other, name("t")).unwrap().delete(true));
        pause();
        raw.exec("ROLLBACK");
        deleter.join().unwrap().unwrap();
        sender.join().unwrap()
    });
    eprintln!("late send: {sent:?}");
    let t = name("t");
    let anew = Team::create(
        &other,
        t.clone(),
        "a new team",
        Member::new(name("lead"), &t),
        vec![Member::new(name("bob"), &t)],
    )
    .unwrap();
    let inherited = anew
        .mailbox()
        .read(&name("bob"), &ReadFilter::default())
        .unwrap();
    assert!(
        inherited.is_empty(),
        "the new team's bob inherits the old team's messages: {inherited:?}"
    );
}

/// §2.1/§2.5: any UTF-8 text is a valid message text (on files, "\u0000" is written and
/// read back). jsonb refuses the escape `\u0000`, so on PostgreSQL the send fails with a
/// server error: a writer's check passed, the store refused it.
#[test]
fn a_message_text_with_a_nul_character_is_sent_as_on_files() {
    // Files without ROO_TEST_PG_DSN (where it passes), PostgreSQL with it.
    let fixture = super::common::team();
    let team = fixture.team;
    let text = "before\u{0}after";
    let sent = team
        .mailbox()
        .send(&name("lead"), "alice", Outgoing::text(text, "nul"));
    assert!(sent.is_ok(), "{sent:?}");
    let read = team
        .mailbox()
        .read(&name("alice"), &ReadFilter::default())
        .unwrap();
    assert_eq!(read[0].text, text);
}

/// §8 keeps keepalives so "death of a peer across a cut link is seen in seconds" — but
/// the store never reconnects: once its one connection is gone (server restart, failover,
/// an idle-session timeout, a network blip), every later operation of every clone fails
/// until the process restarts.
#[test]
fn the_store_works_again_after_its_connection_was_lost() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let app = format!("roo_review_{}", std::process::id());
    let (_d, home) = home_at(&format!("{url}&application_name={app}"));
    let team = team_named(&home, "t", &["alice"]);
    psql(
        &url,
        &format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = '{app}'"
        ),
    );
    pause();
    let _first = team.config(); // may fail: the link just broke
    pause();
    let again = team.config();
    assert!(again.is_ok(), "still failing: {:?}", again.err());
}

/// §2.4/§4: deleting a team removes everything of it (on files its `.corrupt-` files go
/// with its directories). On PostgreSQL its `roo_quarantine` rows stay, so a new team of
/// the same name is reported as having quarantined records from its first command on.
#[test]
fn a_new_team_does_not_inherit_the_quarantine_of_a_deleted_one() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let (_d, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice"]);
    let list = team.tasks();
    for subject in ["one", "two"] {
        list.create(NewTask {
            subject: subject.into(),
            ..Default::default()
        })
        .unwrap();
    }
    psql(
        &url,
        "UPDATE roo_doc SET doc = jsonb_set(doc::jsonb, '{tasks,1}', (doc::jsonb->'tasks'->1) - 'subject')::json \
         WHERE key = 'tasks/t/tasks.json'",
    );
    list.create(NewTask {
        subject: "three".into(),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        roo_store::quarantine::quarantined(&home, &name("t"))
            .unwrap()
            .len(),
        1
    );
    team.delete(true).unwrap();
    team_named(&home, "t", &["alice"]);
    let inherited = roo_store::quarantine::quarantined(&home, &name("t")).unwrap();
    assert!(inherited.is_empty(), "{inherited:?}");
}

/// §8 creates the tables "on first connect" — but every connect runs `CREATE TABLE IF NOT
/// EXISTS` / `CREATE INDEX IF NOT EXISTS`, which need CREATE on the schema and ownership
/// of the tables even when they exist: a role with only row privileges on an existing
/// store (the usual least-privilege deployment; PostgreSQL 15 gives ordinary roles no
/// CREATE on `public`) cannot connect at all.
#[test]
fn a_role_with_row_privileges_can_use_an_existing_store() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let (_d, home) = home_at(&url);
    team_named(&home, "t", &["alice"]);
    let schema = psql(&url, "SELECT current_schema()");
    let role = format!("roo_app_{}", std::process::id());
    psql(
        &url,
        &format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN; \
             GRANT USAGE ON SCHEMA {schema} TO {role}; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}; \
             GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}"
        ),
    );
    // The same server and schema, as that role.
    let as_role = url.replacen("://", &format!("://{role}@"), 1);
    let as_role = match as_role.find('@') {
        // drop the original user, if the DSN named one
        Some(_) if url.contains('@') => {
            let after = &url[url.find("://").unwrap() + 3..];
            let rest = &after[after.find('@').unwrap() + 1..];
            format!("postgresql://{role}@{rest}")
        }
        _ => as_role,
    };
    let connected = PgStore::connect(&as_role);
    assert!(connected.is_ok(), "{:?}", connected.err());
}
