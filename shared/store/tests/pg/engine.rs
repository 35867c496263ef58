//! What only the PostgreSQL store has: its rows, its schema version, its notifications,
//! and races between separate connections (each its own server session, as separate
//! processes would have).
use std::process::Command;
use std::sync::{Arc, Barrier};

use roo_store::{
    ClaimOptions, ClaimOutcome, Error, Member, NewTask, Outgoing, PgStore, ReadFilter, RooHome,
    TaskStatus, Team,
};

use super::common::{dsn, fresh_schema_url, home_at, name, pg_home, psql, team_named};

/// A store of schema 1.0 (no event log) gets the event tables and schema 1.1 at the
/// first connect of this version, and its teams' changes are logged from then on.
#[test]
fn a_schema_1_0_store_is_upgraded_with_the_event_log() {
    let Some((dir, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    drop((team, home));
    psql(
        &url,
        "DROP TABLE roo_event; DROP TABLE roo_event_seq; \
         UPDATE roo_meta SET value = '1.0' WHERE key = 'schema_version'",
    );
    let home = RooHome::new(dir.path().join("home")).with_store(PgStore::connect(&url).unwrap());
    assert_eq!(
        psql(
            &url,
            "SELECT value FROM roo_meta WHERE key = 'schema_version'"
        ),
        "1.1"
    );
    let team = Team::open(&home, name("t")).unwrap();
    team.mailbox()
        .send(
            &name("lead"),
            "alice",
            Outgoing::text("hi", "after the upgrade"),
        )
        .unwrap();
    let page = team.events(None, 10).unwrap();
    let kinds: Vec<&str> = page.events.iter().map(|e| e.kind.name()).collect();
    assert_eq!(kinds, ["message_sent"]);
    assert_eq!(page.events[0].seq, 1);
}

/// The documents are rows keyed by their path under ROO_HOME, and nothing is written
/// under the home directory itself.
#[test]
fn documents_are_rows_keyed_by_their_path_and_no_file_is_written() {
    let Some((dir, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    team.mailbox()
        .send(
            &name("lead"),
            "alice",
            roo_store::Outgoing::text("hi", "a greeting"),
        )
        .unwrap();
    let keys = psql(
        &url,
        "SELECT key FROM roo_doc WHERE doc IS NOT NULL ORDER BY key",
    );
    assert_eq!(
        keys.lines().collect::<Vec<_>>(),
        [
            "tasks/t/tasks.json",
            "teams/t/config.json",
            "teams/t/inboxes/alice.json"
        ]
    );
    assert_eq!(
        psql(
            &url,
            "SELECT doc->'messages'->0->>'text' FROM roo_doc WHERE key = 'teams/t/inboxes/alice.json'"
        ),
        "hi"
    );
    assert!(!dir.path().join("home").exists(), "a file was written");
    assert_eq!(
        psql(
            &url,
            "SELECT value FROM roo_meta WHERE key = 'schema_version'"
        ),
        "1.1"
    );
}

/// Eight connections race for one task, 30 rounds: exactly one wins each round, and the
/// others are told who holds it.
#[test]
fn eight_connections_racing_for_a_task_have_exactly_one_winner_each_round() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let racers: Vec<String> = (0..8).map(|i| format!("m{i}")).collect();
    let (_dir, home) = home_at(&url);
    let refs: Vec<&str> = racers.iter().map(String::as_str).collect();
    let team = team_named(&home, "t", &refs);
    let homes: Vec<(tempfile::TempDir, RooHome)> = (0..8).map(|_| home_at(&url)).collect();
    for round in 0..30 {
        let task = team
            .tasks()
            .create(NewTask {
                subject: format!("round {round}"),
                ..Default::default()
            })
            .unwrap();
        let barrier = Arc::new(Barrier::new(8));
        let winners: Vec<bool> = std::thread::scope(|s| {
            let handles: Vec<_> = homes
                .iter()
                .zip(&racers)
                .map(|((_, home), racer)| {
                    let (barrier, id) = (barrier.clone(), task.id.clone());
                    s.spawn(move || {
                        let team = Team::open(home, name("t")).unwrap();
                        barrier.wait();
                        match team
                            .tasks()
                            .claim(&id, &name(racer), &ClaimOptions::default())
                            .unwrap()
                        {
                            ClaimOutcome::Claimed(_) => true,
                            ClaimOutcome::AlreadyOwned { .. } => false,
                            other => panic!("round {round}: {other:?}"),
                        }
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(
            winners.iter().filter(|w| **w).count(),
            1,
            "round {round}: {winners:?}"
        );
        let claimed = team.tasks().get(&task.id).unwrap();
        assert_eq!(claimed.status, TaskStatus::InProgress);
    }
}

/// A row a third party damaged: a reader reports it and leaves it; the next change
/// moves the damaged records to `roo_quarantine`, keeps the others, and hands out no
/// id twice.
#[test]
fn a_damaged_row_is_quarantined_by_the_next_change_and_its_good_records_kept() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    let list = team.tasks();
    for subject in ["one", "two"] {
        list.create(NewTask {
            subject: subject.into(),
            ..Default::default()
        })
        .unwrap();
    }
    // Task 2 loses its subject: that record no longer parses.
    psql(
        &url,
        "UPDATE roo_doc SET doc = jsonb_set(doc::jsonb, '{tasks,1}', (doc::jsonb->'tasks'->1) - 'subject')::json \
         WHERE key = 'tasks/t/tasks.json'",
    );
    let tasks = list.list(&Default::default()).unwrap();
    assert_eq!(tasks.len(), 1, "the reader skips the damaged record");
    assert_eq!(psql(&url, "SELECT count(*) FROM roo_quarantine"), "0");
    let third = list
        .create(NewTask {
            subject: "three".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        third.id.to_string(),
        "3",
        "id 2 must not be handed out again"
    );
    assert_eq!(
        psql(&url, "SELECT key FROM roo_quarantine"),
        "tasks/t/tasks.json"
    );
    assert_eq!(
        psql(&url, "SELECT doc::jsonb->0->>'id' FROM roo_quarantine"),
        "2"
    );
    assert_eq!(
        psql(
            &url,
            "SELECT json_array_length(doc->'tasks') FROM roo_doc WHERE key = 'tasks/t/tasks.json'"
        ),
        "2"
    );
}

/// A document of a newer major version is refused and left as it is; so is a database
/// whose schema a newer build made.
#[test]
fn newer_documents_and_newer_schemas_are_refused_untouched() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    psql(
        &url,
        "UPDATE roo_doc SET doc = '{\"version\": \"2.0\", \"reshaped\": true}' \
         WHERE key = 'teams/t/config.json'",
    );
    let err = team.config().unwrap_err();
    assert!(matches!(err, Error::NewerFormat { .. }), "{err}");
    let err = team.set_active("alice", false).unwrap_err();
    assert!(matches!(err, Error::NewerFormat { .. }), "{err}");
    assert_eq!(
        psql(
            &url,
            "SELECT doc->>'version' FROM roo_doc WHERE key = 'teams/t/config.json'"
        ),
        "2.0"
    );
    psql(
        &url,
        "UPDATE roo_meta SET value = '2.0' WHERE key = 'schema_version'",
    );
    let err = PgStore::connect(&url).unwrap_err();
    assert!(matches!(err, Error::Engine { .. }), "{err}");
    assert!(
        err.to_string().contains("newer than this build's 1.1"),
        "{err}"
    );
}

/// A change that fails writes nothing and sends no notification; a change that commits
/// notifies the team's channel with the document's key.
#[test]
fn only_committed_changes_notify_the_teams_channel() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    // Channels are the database's, not the schema's: a team name no other test uses.
    let t = format!("notify-{}", std::process::id());
    let team = team_named(&home, &t, &["alice"]);
    let key = format!("teams/{t}/config.json");
    let channel = roo_store::channel_of(&key);
    // A listener in its own session: psql LISTENs, waits, then prints what arrived.
    let listener = Command::new("psql")
        .args([url.as_str(), "-v", "ON_ERROR_STOP=1"])
        .arg("-c")
        .arg(format!("LISTEN {channel}"))
        .arg("-c")
        .arg("SELECT pg_sleep(1.5)")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    // Refused (alice is a member already): rolled back, no notification.
    let refused = team.add_member(Member::new(name("alice"), &name(&t)));
    assert!(
        matches!(refused, Err(Error::MemberExists { .. })),
        "{refused:?}"
    );
    team.set_active("alice", false).unwrap();
    let out = listener.wait_with_output().unwrap();
    let printed =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let notes: Vec<&str> = printed
        .lines()
        .filter(|l| l.contains("Asynchronous notification"))
        .collect();
    assert_eq!(notes.len(), 1, "{printed}");
    assert!(
        notes[0].contains(&format!("payload \"{key}\"")),
        "{printed}"
    );
}

/// An inbox watcher on the PostgreSQL store wakes on another connection's committed
/// send through the team's notification, long before its poll would.
#[test]
fn an_inbox_watcher_wakes_on_another_connections_send() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    let t = format!("watch-{}", std::process::id());
    let team = team_named(&home, &t, &["alice"]);
    let mut watcher = team
        .mailbox()
        .watcher(&name("alice"))
        .unwrap()
        .with_poll_interval(std::time::Duration::from_secs(60));
    assert!(watcher.uses_notifications());
    let (_other_dir, other) = home_at(&url);
    let sender = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        Team::open(&other, name(&t))
            .unwrap()
            .mailbox()
            .send(
                &name("lead"),
                "alice",
                roo_store::Outgoing::text("wake up", "wake up"),
            )
            .unwrap();
    });
    // The poll is a minute away: only the notification can end the wait as Changed.
    let outcome = watcher.wait(std::time::Duration::from_secs(10));
    sender.join().unwrap();
    assert_eq!(outcome, roo_store::WaitOutcome::Changed);
    let unread = team.mailbox().take_unread(&name("alice")).unwrap();
    assert_eq!(unread.len(), 1);
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

/// §8 creates the tables "on first connect" — but every connect runs `CREATE TABLE IF NOT
/// EXISTS` / `CREATE INDEX IF NOT EXISTS`, which need CREATE on the schema and ownership
/// of the tables even when they exist: a role with only row privileges on an existing
/// store (the usual least-privilege deployment; PostgreSQL 15 gives ordinary roles no
/// CREATE on `public`) cannot connect at all.
#[test]
fn a_role_with_row_privileges_can_use_an_existing_store() {
    let Some((_d, home, url)) = pg_home() else {
        return;
    };
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

/// The events of one change are written by one statement: consecutive seqs, and the log
/// pruned to its newest rows when the team's counter passes a multiple of 256 within
/// them (not only when one lands on it).
#[test]
fn a_changes_events_get_consecutive_seqs_and_the_log_is_pruned_when_they_pass_256() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    let mailbox = team.mailbox();
    for i in 0..40 {
        mailbox
            .send(&name("lead"), "alice", Outgoing::text(format!("m{i}"), "s"))
            .unwrap();
    }
    let log = "'teams/t/events.jsonl'";
    // A long log: rows up to 25,599 (the counter with them).
    psql(
        &url,
        &format!(
            "INSERT INTO roo_event (key, seq, body) \
               SELECT {log}, g, (SELECT body FROM roo_event WHERE key = {log} LIMIT 1) \
               FROM generate_series((SELECT seq FROM roo_event_seq WHERE key = {log}) + 1, \
                                    25599) g; \
             UPDATE roo_event_seq SET seq = 25599 WHERE key = {log}"
        ),
    );
    // 40 messages taken: two `message_delivered` events (32 ids at most each) in one change.
    assert_eq!(mailbox.take_unread(&name("alice")).unwrap().len(), 40);
    // Their seqs pass 25,600 = 100 × 256 without the counter ever holding it.
    let page = team.events(Some(25599), 10).unwrap();
    let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [25600, 25601]);
    assert!(
        page.events
            .iter()
            .all(|e| e.kind.name() == "message_delivered")
    );
    let kept = psql(
        &url,
        &format!("SELECT min(seq) || ' ' || count(*) FROM roo_event WHERE key = {log}"),
    );
    assert_eq!(
        kept, "602 25000",
        "the rows more than 25,000 behind the newest are pruned"
    );
}
