//! Deleting a team on the PostgreSQL store: it removes the team's rows in the config's
//! transaction or not at all, refuses a config of a newer major version, and neither a
//! create queued behind it nor a send racing it can bring back the deleted team or its
//! messages (docs/PROTOCOL.md §2, §4, §8). A second session of our own (`Raw`) stands in
//! for another participant's transaction, to line up races deterministically.
use roo_store::{Error, Member, Outgoing, ReadFilter, Team};

use super::common::{Raw, home_at, name, pause, pg_home, psql, team_named};

/// How many live documents of the store at `url` match the SQL condition `where_`.
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
    let Some((_d, home, url)) = pg_home() else {
        return;
    };
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
    let Some((_d, home, url)) = pg_home() else {
        return;
    };
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

/// §2.2: a document of a newer major version is refused and left untouched — by every
/// participant. `Team::delete_rows` parses the config with serde directly, so a 2.0
/// config (here one that still has 1.0's members) is not refused: the team is deleted.
#[test]
fn deleting_a_team_refuses_a_config_of_a_newer_major_version() {
    let Some((_d, home, url)) = pg_home() else {
        return;
    };
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
    let Some((_d, home, url)) = pg_home() else {
        return;
    };
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
