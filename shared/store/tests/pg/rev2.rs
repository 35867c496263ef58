//! Hostile review of liveness on the PostgreSQL store (presence locks, epochs, fencing).
use std::time::{Duration, Instant};

use super::common::{dsn, home_at, name, psql, team_named};

/// A member declared dead while its presence connection was away must not hold its
/// presence lock again when that connection comes back (PROTOCOL.md §8: "a member
/// declared dead meanwhile stays dead"; `Presence::is_held`: "taken again then, unless
/// the member was declared dead meanwhile"). Otherwise the store reports a member marked
/// dead as alive by its own test, and the process believes it still holds its presence.
#[test]
fn a_member_declared_dead_while_its_presence_was_away_does_not_take_its_lock_again() {
    let Some(dsn) = dsn() else { return };
    // A role of the test's own, so its logins can be refused without touching others.
    let role = format!("roo_rev2_{}", std::process::id());
    psql(
        &dsn,
        &format!("CREATE ROLE {role} LOGIN; CREATE SCHEMA {role} AUTHORIZATION {role}"),
    );
    let sep = if dsn.contains('?') { '&' } else { '?' };
    let url = format!("{dsn}{sep}options=-c%20search_path%3D{role}").replacen(
        "postgres@",
        &format!("{role}@"),
        1,
    );
    let (_dir, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice", "bob"]);
    // The lead is another process: its own connections (this process wants alice's lock,
    // which to its own eyes makes her alive).
    let (_lead_dir, lead_home) = home_at(&url);
    let lead = roo_store::Team::open(&lead_home, name("t")).unwrap();
    let alice = team.hold_presence(&name("alice")).unwrap();
    let key = roo_store::presence_key("t", "alice@t", alice.epoch().unwrap());
    let held_by_anyone = || {
        psql(
            &dsn,
            &format!(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
                 AND objsubid = 1 AND classid = (({key}::int8 >> 32) & 4294967295)::oid \
                 AND objid = ({key}::int8 & 4294967295)::oid"
            ),
        ) != "0"
    };
    // Alice's presence connection is lost and cannot come back for now (the role's
    // logins are refused); the request connection stays.
    psql(&dsn, &format!("ALTER ROLE {role} NOLOGIN"));
    let ended = psql(
        &dsn,
        &format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' \
             AND granted AND objsubid = 1 AND classid = (({key}::int8 >> 32) & 4294967295)::oid \
             AND objid = ({key}::int8 & 4294967295)::oid"
        ),
    );
    assert_eq!(ended, "1");
    let deadline = Instant::now() + Duration::from_secs(60);
    while alice.is_held() || held_by_anyone() {
        assert!(
            Instant::now() < deadline,
            "the presence session never ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Meanwhile the lead declares alice dead by the store's test (her lock is free).
    let deaths = lead.detect_dead(Some(&name("lead"))).unwrap();
    assert_eq!(deaths.len(), 1, "alice was not declared dead");
    assert_eq!(deaths[0].member.name, name("alice"));
    // The presence connection comes back: it is live once `presence_settings` answers
    // (the thread takes its locks again before it publishes the connection).
    psql(&dsn, &format!("ALTER ROLE {role} LOGIN"));
    let pg = home.pg().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while pg.presence_settings().is_err() {
        assert!(
            Instant::now() < deadline,
            "the presence connection never came back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Give the periodic retry its chance too (every 500 ms).
    let waited = Instant::now();
    while waited.elapsed() < Duration::from_secs(2) && !alice.is_held() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let config = team.config().unwrap();
    let entry = config.member("alice").unwrap();
    assert!(entry.dead_at.is_some(), "alice stays marked dead");
    assert!(
        !alice.is_held(),
        "the presence of a member declared dead was taken again after the reconnect"
    );
    assert!(
        matches!(alice.state(), roo_store::PresenceState::Lost(_)),
        "{:?}",
        alice.state()
    );
    assert!(
        !held_by_anyone(),
        "the lock of a member declared dead is held again on the server"
    );
    assert_ne!(
        team.liveness(&config).unwrap().evidence(entry),
        Some(true),
        "the store's own test says a member marked dead is alive"
    );
    drop(alice);
    drop(team);
    drop(home);
    drop(lead);
    drop(lead_home);
    psql(
        &dsn,
        &format!("DROP SCHEMA {role} CASCADE; DROP OWNED BY {role}; DROP ROLE {role}"),
    );
}

/// A fenced send whose `COMMIT` never reached the server runs again after the store
/// connects again; if its member was declared dead while the store was away, the run
/// again is refused (`Error::Fenced`) and nothing is written (PROTOCOL.md §8).
#[test]
fn a_fenced_send_cut_before_its_commit_is_refused_when_declared_dead_meanwhile() {
    use crate::pg_proxy::PgProxy;
    use roo_store::{Error, Outgoing, ReadFilter, Team};
    let Some(dsn) = dsn() else { return };
    let url = super::common::fresh_schema_url(&dsn);
    let proxy = PgProxy::for_dsn(&dsn);
    let (_dir, home) = home_at(&proxy.url_for(&url));
    let team = team_named(&home, "t", &["alice", "carol"]);
    let carol = team.hold_presence(&name("carol")).unwrap();
    let (_direct_dir, direct) = home_at(&url);
    let lead_team = Team::open(&direct, name("t")).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    proxy.cut_at_commit_then(1, false, move || {
        tx.send(lead_team.declare_dead("carol", Some(&name("lead")), "cut off"))
            .unwrap();
    });
    let err = carol
        .team()
        .mailbox()
        .send(&name("carol"), "alice", Outgoing::text("late", "late"))
        .unwrap_err();
    rx.recv().unwrap().unwrap();
    assert!(matches!(err, Error::Fenced { .. }), "{err}");
    let inbox = Team::open(&direct, name("t"))
        .unwrap()
        .mailbox()
        .read(&name("alice"), &ReadFilter::default())
        .unwrap();
    assert!(inbox.is_empty(), "a fenced send wrote: {inbox:?}");
}
