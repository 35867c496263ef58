//! Member roles (docs/DISTRIBUTED.md "Authority in the database"): as a member role of
//! team `a`, the attacks of issue 33 are each refused by the server, while the member's
//! own work (join, presence, sends as itself, claims) goes through. The server is the
//! real one named by `ROO_TEST_PG_DSN`; each test has a schema of its own.
use std::process::Command;

use roo_store::{
    ClaimOptions, ClaimOutcome, MemberLogin, MemberState, Outgoing, ReadFilter, RooHome, Team,
    presence_key,
};

use super::common::{
    Raw, fresh_schema_url, home_at, name, new_task, psql, team_named, wait_out_restart_grace,
};

/// Teams `a` (alice, bob) and `b` (carol) in one schema, led by the owner's login, with a
/// member role for alice and bob.
struct Two {
    url: String,
    _dir: tempfile::TempDir,
    home: RooHome,
    a: Team,
    alice: MemberLogin,
    bob: MemberLogin,
}

fn two() -> Option<Two> {
    let dsn = super::common::dsn()?;
    let url = fresh_schema_url(&dsn);
    let (dir, home) = home_at(&url);
    let a = team_named(&home, "a", &["alice", "bob"]);
    let b = team_named(&home, "b", &["carol"]);
    b.mailbox()
        .send(
            &name("lead"),
            "carol",
            Outgoing::text("deploy password is hunter2", "secret"),
        )
        .unwrap();
    let store = home.pg().unwrap();
    assert!(store.can_create_member_roles().unwrap());
    let alice = store
        .create_member_role(&name("a"), &name("alice"))
        .unwrap();
    let bob = store.create_member_role(&name("a"), &name("bob")).unwrap();
    Some(Two {
        url,
        _dir: dir,
        home,
        a,
        alice,
        bob,
    })
}

impl Drop for Two {
    fn drop(&mut self) {
        if let Some(store) = self.home.pg() {
            let _ = store.drop_member_roles(&name("a"));
        }
    }
}

/// Team `a` opened on the server as `login`, whose member `member` has joined (its own
/// first join: its entry added).
fn joined_as(url: &str, login: &MemberLogin, member: &str) -> (tempfile::TempDir, Team) {
    let (dir, home) = home_at(&as_member(url, login));
    let team = Team::open(&home, name("a")).unwrap();
    team.join(roo_store::Member::new(name(member), team.name()))
        .unwrap();
    (dir, team)
}

/// `url` with `login`'s user and password in place of the owner's.
fn as_member(url: &str, login: &MemberLogin) -> String {
    let start = url.find("://").unwrap() + 3;
    let at = start + url[start..].find('@').unwrap();
    format!(
        "{}{}:{}{}",
        &url[..start],
        login.role(),
        login.password(),
        &url[at..]
    )
}

/// Runs `sql` as `login` with psql: its output, or its error.
fn psql_as(url: &str, login: &MemberLogin, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args([
            &as_member(url, login),
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-c",
            sql,
        ])
        .output()
        .expect("run psql");
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned()),
        false => Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
    }
}

/// The refusal of `result`, which must be one.
fn refused(what: &str, result: Result<String, String>) -> String {
    match result {
        Ok(out) => panic!("{what} was allowed: {out:?}"),
        Err(e) => e,
    }
}

/// The member's own work goes through its role: joining, presence (proven: the lead sees
/// it alive), sending as itself to a peer and to the lead, reading, claiming a task.
#[test]
fn a_member_role_does_its_members_work() {
    let Some(t) = two() else {
        return;
    };
    let task = t.a.tasks().create(new_task("work")).unwrap();
    let (_dir, alice_home) = home_at(&as_member(&t.url, &t.alice));
    let team = Team::open(&alice_home, name("a")).unwrap();
    team.join(roo_store::Member::new(name("alice"), team.name()))
        .unwrap();
    let presence = team.hold_presence(&name("alice")).unwrap();
    let mine = presence.team();
    mine.mailbox()
        .send(&name("alice"), "bob", Outgoing::text("hi bob", "hi"))
        .unwrap();
    mine.mailbox()
        .send(&name("alice"), "lead", Outgoing::text("hi lead", "hi"))
        .unwrap();
    assert_eq!(
        mine.mailbox()
            .send(&name("alice"), "*", Outgoing::text("hi all", "hi"))
            .unwrap()
            .len(),
        2
    );
    assert!(matches!(
        mine.tasks()
            .claim(&task.id, &name("alice"), &ClaimOptions::default())
            .unwrap(),
        ClaimOutcome::Claimed(_)
    ));
    let to_bob =
        t.a.mailbox()
            .read(&name("bob"), &ReadFilter::default())
            .unwrap();
    assert_eq!(to_bob.len(), 2);
    assert!(to_bob.iter().all(|m| m.from == "alice"));
    // The lead (the owner's login) sees alice alive by her presence, proven.
    let config = t.a.config().unwrap();
    assert_eq!(
        t.a.liveness(&config)
            .unwrap()
            .observed_state(config.member("alice").unwrap()),
        MemberState::Busy
    );
    // Alice takes what the lead sent her (a write of her own inbox).
    t.a.mailbox()
        .send(&name("lead"), "alice", Outgoing::text("go", "go"))
        .unwrap();
    assert_eq!(mine.mailbox().take_unread(&name("alice")).unwrap().len(), 1);
    assert_eq!(t.a.mailbox().unread_count(&name("alice")).unwrap(), 0);
}

/// Issue 33: a teammate host read another team's inbox ("deploy password is hunter2").
#[test]
fn a_member_role_cannot_read_another_team() {
    let Some(t) = two() else {
        return;
    };
    let seen = psql_as(
        &t.url,
        &t.alice,
        "SELECT count(*) FROM roo_doc WHERE key LIKE 'teams/b/%' OR key LIKE 'tasks/b/%'",
    );
    assert_eq!(seen.as_deref(), Ok("0"));
    let own = psql_as(
        &t.url,
        &t.alice,
        "SELECT count(*) > 0 FROM roo_doc WHERE key LIKE 'teams/a/%'",
    );
    assert_eq!(own.as_deref(), Ok("t"));
    let (_dir, alice_home) = home_at(&as_member(&t.url, &t.alice));
    assert!(Team::open(&alice_home, name("b")).is_err());
    assert_ne!(
        psql(
            &t.url,
            "SELECT count(*) FROM roo_doc WHERE key LIKE 'teams/b/%'"
        ),
        "0"
    );
}

/// Issue 33: `roo-mail send --from boss` and a raw UPDATE of the inbox row both
/// delivered as the lead.
#[test]
fn a_member_role_cannot_send_as_the_lead() {
    let Some(t) = two() else {
        return;
    };
    let (_dir, alice_home) = home_at(&as_member(&t.url, &t.alice));
    let team = Team::open(&alice_home, name("a")).unwrap();
    let forged = team
        .mailbox()
        .send(&name("lead"), "bob", Outgoing::text("approved", "approved"));
    let e = forged.expect_err("a send as the lead");
    assert!(e.to_string().contains("may send only as itself"), "{e}");
    let raw = refused(
        "a raw UPDATE of bob's inbox",
        psql_as(
            &t.url,
            &t.alice,
            "UPDATE roo_doc SET doc = '{\"version\":\"1.0\",\"messages\":[]}' \
             WHERE key = 'teams/a/inboxes/bob.json'",
        ),
    );
    assert!(raw.contains("permission denied"), "{raw}");
    let through = refused(
        "a forged message through roo_m_write",
        psql_as(
            &t.url,
            &t.alice,
            "SELECT roo_m_write('teams/a/inboxes/bob.json', \
             '{\"version\":\"1.0\",\"messages\":[{\"id\":\"x\",\"from\":\"lead\",\"to\":\"bob\",\
             \"type\":\"text\",\"text\":\"approved\",\"summary\":\"ok\",\"read\":false}]}')",
        ),
    );
    assert!(through.contains("may send only as itself"), "{through}");
    assert!(
        t.a.mailbox()
            .read(&name("bob"), &ReadFilter::default())
            .unwrap()
            .is_empty()
    );
}

/// Issue 33: answering a request is the lead's (PROTOCOL.md §5.2: only the lead sends
/// `permission_response`, `plan_approval_response`, `task_assignment`); a member role
/// sending one as itself is refused by the server too.
#[test]
fn a_member_role_cannot_answer_a_request() {
    let Some(t) = two() else {
        return;
    };
    for kind in [
        "permission_response",
        "plan_approval_response",
        "task_assignment",
    ] {
        let e = refused(
            kind,
            psql_as(
                &t.url,
                &t.alice,
                &format!(
                    "SELECT roo_m_write('teams/a/inboxes/bob.json', \
                     '{{\"version\":\"1.0\",\"messages\":[{{\"id\":\"x\",\"from\":\"alice\",\
                     \"to\":\"bob\",\"type\":\"{kind}\",\"request_id\":\"r1\",\
                     \"decision\":\"allow\",\"approve\":true,\"task_id\":\"1\",\
                     \"text\":\"\",\"summary\":null,\"read\":false}}]}}')"
                ),
            ),
        );
        assert!(e.contains("only the lead may"), "{e}");
    }
}

/// Issue 33: another team's `lead_key` rewritten; the roster is the config too.
#[test]
fn a_member_role_cannot_rewrite_the_roster_or_lead_key() {
    let Some(t) = two() else {
        return;
    };
    t.a.set_lead_key(&"ab".repeat(32)).unwrap();
    let (_dir, alice_home) = home_at(&as_member(&t.url, &t.alice));
    let team = Team::open(&alice_home, name("a")).unwrap();
    let e = team
        .set_lead_key(&"cd".repeat(32))
        .expect_err("a new lead key");
    assert!(e.to_string().contains("may not change the team"), "{e}");
    let roster = refused(
        "a member added to the roster",
        psql_as(
            &t.url,
            &t.alice,
            "SELECT roo_m_write('teams/a/config.json', json_build_object(\
               'version', doc->'version', 'name', doc->'name', \
               'description', doc->'description', 'lead_agent_id', doc->'lead_agent_id', \
               'created_at', doc->'created_at', 'lead_key', doc->'lead_key', \
               'members', (doc->'members')::jsonb || '[{\"name\":\"mallory\",\
                 \"agent_id\":\"mallory@a\",\"joined_at\":\"2026-01-01T00:00:00Z\"}]'::jsonb\
             )::text) FROM roo_doc WHERE key = 'teams/a/config.json'",
        ),
    );
    assert!(roster.contains("may not change the roster"), "{roster}");
    let raw = refused(
        "a raw UPDATE of the config",
        psql_as(
            &t.url,
            &t.alice,
            "UPDATE roo_doc SET doc = '{}' WHERE key = 'teams/a/config.json'",
        ),
    );
    assert!(raw.contains("permission denied"), "{raw}");
    let config = t.a.config().unwrap();
    assert_eq!(config.lead_key.as_deref(), Some("ab".repeat(32).as_str()));
    assert_eq!(config.members.len(), 3);
}

/// A pane or remote teammate's first join adds its own entry to the roster (the lead
/// starts its process before it is in the roster): allowed for its own name and agent
/// id only, and never with another entry.
#[test]
fn a_member_role_adds_only_itself_to_the_roster() {
    let Some(t) = two() else {
        return;
    };
    let store = t.home.pg().unwrap();
    let dave = store.create_member_role(&name("a"), &name("dave")).unwrap();
    let (_dir, dave_home) = home_at(&as_member(&t.url, &dave));
    let team = Team::open(&dave_home, name("a")).unwrap();
    team.join(roo_store::Member::new(name("dave"), team.name()))
        .unwrap();
    assert_eq!(t.a.config().unwrap().members.len(), 4);
    let erin = store.create_member_role(&name("a"), &name("erin")).unwrap();
    let append = |entries: &str| {
        format!(
            "SELECT roo_m_write('teams/a/config.json', jsonb_set(doc::jsonb, '{{members}}', \
               (doc->'members')::jsonb || '{entries}'::jsonb)::text) \
             FROM roo_doc WHERE key = 'teams/a/config.json'"
        )
    };
    for (what, entries) in [
        (
            "its entry with the lead's agent id",
            r#"[{"name":"erin","agent_id":"lead@a","joined_at":"2026-01-01T00:00:00Z"}]"#,
        ),
        (
            "its entry and another",
            r#"[{"name":"erin","agent_id":"erin@a","joined_at":"2026-01-01T00:00:00Z"},{"name":"mallory","agent_id":"mallory@a","joined_at":"2026-01-01T00:00:00Z"}]"#,
        ),
        (
            "an entry of dave's name",
            r#"[{"name":"Dave","agent_id":"erin@a","joined_at":"2026-01-01T00:00:00Z"}]"#,
        ),
    ] {
        let e = refused(what, psql_as(&t.url, &erin, &append(entries)));
        assert!(e.contains("may not change the roster"), "{what}: {e}");
    }
    assert_eq!(t.a.config().unwrap().members.len(), 4);
    let _ = store.drop_member_roles(&name("a"));
}

/// The handoff of a member's login: `ROO_STORE` the lead's URL with the role and no
/// password, `PGPASSWORD` the role's, and none of the lead's password anywhere; the URL
/// and password log in as the role (a session of member `alice`).
#[test]
fn a_members_handoff_logs_in_as_its_role_and_holds_none_of_the_leads_password() {
    let Some(t) = two() else {
        return;
    };
    let lead_pw = "lead-pw-canary-5e1d";
    // The lead's URL with a password (the server trusts the socket: any is taken).
    let start = t.url.find("://").unwrap() + 3;
    let at = start + t.url[start..].find('@').unwrap();
    let lead_url = format!("{}:{lead_pw}{}", &t.url[..at], &t.url[at..]);
    let mut env: std::collections::BTreeMap<String, String> = [
        ("ROO_STORE", lead_url.as_str()),
        ("PGPASSWORD", lead_pw),
        ("PGPASSFILE", "/home/lead/.pgpass"),
        ("DATABASE_URL", &format!("postgres://x:{lead_pw}@db/x")),
        ("OPENAI_API_KEY", "sk-kept"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let store = t.home.pg().unwrap();
    store
        .hand_member_login(&t.alice, &lead_url, &mut env)
        .unwrap();
    assert!(
        env.values().all(|v| !v.contains(lead_pw)),
        "the lead's password handed over: {env:?}"
    );
    assert!(!env.contains_key("PGPASSFILE") && !env.contains_key("DATABASE_URL"));
    assert_eq!(env["OPENAI_API_KEY"], "sk-kept");
    assert_eq!(env["PGPASSWORD"], t.alice.password());
    let url = &env["ROO_STORE"];
    assert!(url.contains(&format!("{}@", t.alice.role())), "{url}");
    // What the member's process does with it: its session is the role's.
    let lookup = |name: &str| env.get(name).cloned();
    let member = roo_store::PgStore::connect_with(url, &lookup).unwrap();
    let home = RooHome::new(t._dir.path().join("member")).with_store(member);
    let team = Team::open(&home, name("a")).unwrap();
    team.join(roo_store::Member::new(name("alice"), team.name()))
        .unwrap();
    assert_eq!(
        psql(
            &t.url,
            &format!(
                "SELECT count(*) > 0 FROM pg_stat_activity WHERE usename = '{}'",
                t.alice.role()
            )
        ),
        "t"
    );
}

/// Issue 33: the task list deleted (`roo-task list` then printed `[]`).
#[test]
fn a_member_role_cannot_delete_the_task_list() {
    let Some(t) = two() else {
        return;
    };
    t.a.tasks().create(new_task("keep me")).unwrap();
    for (what, sql) in [
        (
            "a raw DELETE",
            "DELETE FROM roo_doc WHERE key = 'tasks/a/tasks.json'",
        ),
        (
            "a delete through roo_m_delete",
            "SELECT roo_m_delete('tasks/a/tasks.json')",
        ),
        (
            "a null task list through roo_m_write",
            "SELECT roo_m_write('tasks/a/tasks.json', 'null')",
        ),
    ] {
        refused(what, psql_as(&t.url, &t.alice, sql));
    }
    assert_eq!(
        t.a.tasks()
            .list(&roo_store::TaskFilter::default())
            .unwrap()
            .len(),
        1
    );
}

/// Issue 33: a member emptied the team's task list (`tasks: []`) through `roo_m_write`,
/// the "delete its task list" of the issue by another route; nor may it remove or
/// renumber a task it did not create, or lower the next id.
#[test]
fn a_member_role_cannot_empty_the_task_list_or_remove_a_task() {
    let Some(t) = two() else {
        return;
    };
    t.a.tasks().create(new_task("keep me")).unwrap();
    t.a.tasks().create(new_task("and me")).unwrap();
    let rewrite = |change: &str| {
        format!(
            "SELECT roo_m_write('tasks/a/tasks.json', ({change})::text) \
             FROM (SELECT doc::jsonb AS d FROM roo_doc WHERE key = 'tasks/a/tasks.json') x"
        )
    };
    for (what, change, why) in [
        (
            "an emptied task list",
            "jsonb_set(d, '{tasks}', '[]')",
            "may not remove or renumber task",
        ),
        (
            "a removed task",
            "jsonb_set(d, '{tasks}', (d -> 'tasks') - 0)",
            "may not remove or renumber task",
        ),
        (
            "a renumbered task",
            "jsonb_set(d, '{tasks,0,id}', '\"77\"')",
            "may not remove or renumber task",
        ),
        (
            "tasks that are not a list",
            "jsonb_set(d, '{tasks}', '{}')",
            "tasks are not a list",
        ),
        (
            "a lowered next id",
            "jsonb_set(d, '{next_id}', '1')",
            "may not lower the task list's next id",
        ),
    ] {
        let e = refused(what, psql_as(&t.url, &t.alice, &rewrite(change)));
        assert!(e.contains(why), "{what}: {e}");
    }
    let left = t.a.tasks().list(&roo_store::TaskFilter::default()).unwrap();
    assert_eq!(left.len(), 2, "{left:?}");
    // A task the member created itself it may still delete (its creator may).
    psql_as(
        &t.url,
        &t.alice,
        &rewrite(
            "jsonb_set(d, '{tasks}', (d -> 'tasks') || jsonb_build_object('id', '9', \
             'subject', 'mine', 'status', 'pending', 'created_by', 'alice', \
             'created_at', (d -> 'tasks' -> 0 -> 'created_at'), \
             'updated_at', (d -> 'tasks' -> 0 -> 'updated_at')))",
        ),
    )
    .unwrap();
    psql_as(
        &t.url,
        &t.alice,
        &rewrite("jsonb_set(d, '{tasks}', (d -> 'tasks') - 2)"),
    )
    .unwrap();
    assert_eq!(
        t.a.tasks()
            .list(&roo_store::TaskFilter::default())
            .unwrap()
            .len(),
        2
    );
}

/// Issue 33: `SELECT … FOR UPDATE` of the task list made every claim fail after 10 s.
#[test]
fn a_member_role_cannot_lock_rows_itself() {
    let Some(t) = two() else {
        return;
    };
    let e = refused(
        "SELECT … FOR UPDATE",
        psql_as(
            &t.url,
            &t.alice,
            "SELECT 1 FROM roo_doc WHERE key = 'tasks/a/tasks.json' FOR UPDATE",
        ),
    );
    assert!(e.contains("permission denied"), "{e}");
}

/// Issue 33: `pg_terminate_backend` of a member's presence session (same role).
#[test]
fn a_member_role_cannot_end_a_peers_session() {
    let Some(t) = two() else {
        return;
    };
    let bob = Raw::connect(&as_member(&t.url, &t.bob));
    bob.exec("CREATE TEMP TABLE alive (x int)");
    let pid = bob.value("SELECT pg_backend_pid()::text");
    let e = refused(
        "pg_terminate_backend of bob's session",
        psql_as(
            &t.url,
            &t.alice,
            &format!("SELECT pg_terminate_backend({pid})"),
        ),
    );
    assert!(e.contains("must be a member of the role"), "{e}");
    bob.exec("SELECT 1 FROM alive");
}

/// Issue 33: a member's presence lock held from psql (its key is computable from the
/// config) kept a killed member "alive" with its task.
#[test]
fn a_peers_presence_key_held_by_another_role_does_not_count() {
    let Some(t) = two() else {
        return;
    };
    // A missing lock is evidence of death only once the server is past its start.
    wait_out_restart_grace(&t.url);
    let (_dir, bob_team) = joined_as(&t.url, &t.bob, "bob");
    let presence = bob_team.hold_presence(&name("bob")).unwrap();
    let epoch = presence.epoch().unwrap();
    let key = presence_key("a", "bob@a", epoch);
    // The server derives the same key.
    assert_eq!(
        psql(
            &t.url,
            &format!("SELECT roo_presence_key('a', 'bob@a', '{epoch}')")
        ),
        key.to_string()
    );
    let bob_alive = || {
        let config = t.a.config().unwrap();
        t.a.liveness(&config)
            .unwrap()
            .observed_state(config.member("bob").unwrap())
    };
    assert_eq!(bob_alive(), MemberState::Busy);
    // Bob's process dies; alice takes his key at once, on a session of her role.
    drop(presence);
    let alice = Raw::connect(&as_member(&t.url, &t.alice));
    alice.exec(&format!("SELECT pg_advisory_lock({key})"));
    assert_eq!(
        psql(
            &t.url,
            &format!(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
                 AND ((classid::int8 << 32) | objid::int8) = {key}"
            )
        ),
        "1",
        "alice holds bob's key"
    );
    assert_eq!(bob_alive(), MemberState::Dead);
}

/// TeamDelete's part: the team's roles are gone, their sessions ended, and a second
/// drop finds none.
#[test]
fn member_roles_are_dropped_with_their_team() {
    let Some(t) = two() else {
        return;
    };
    let store = t.home.pg().unwrap();
    let alice = Raw::connect(&as_member(&t.url, &t.alice));
    alice.exec("SELECT 1");
    assert_eq!(store.drop_member_roles(&name("a")).unwrap(), 2);
    // Ended by a signal: the session goes a moment later.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alice.try_exec("SELECT 1").is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "alice's session runs on"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        psql(
            &t.url,
            &format!(
                "SELECT count(*) FROM pg_roles WHERE rolname IN ('{}', '{}')",
                t.alice.role(),
                t.bob.role()
            )
        ),
        "0"
    );
    assert_eq!(store.drop_member_roles(&name("a")).unwrap(), 0);
}

/// Issue 33: a row lock held past the statement timeout made every claim fail. A member
/// role locks rows only through `roo_m_lock`, inside a change; one that then keeps its
/// transaction open (whatever it SETs) loses its session to the next change that wants a
/// row once it has held it longer than twice the lock wait.
#[test]
fn a_member_role_cannot_hold_a_row_past_the_limit() {
    let Some(t) = two() else {
        return;
    };
    let task = t.a.tasks().create(new_task("wanted")).unwrap();
    let alice = Raw::connect(&as_member(&t.url, &t.alice));
    alice.exec(
        "BEGIN; SET idle_in_transaction_session_timeout = 0; SET statement_timeout = 0; \
         SELECT * FROM roo_m_lock('tasks/a/tasks.json')",
    );
    let (_dir, bob_home) = home_at(&as_member(&t.url, &t.bob));
    let bob = Team::open(&bob_home, name("a")).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let claimed = loop {
        match bob
            .tasks()
            .claim(&task.id, &name("bob"), &ClaimOptions::default())
        {
            Ok(outcome) => break outcome,
            Err(e) => assert!(
                std::time::Instant::now() < deadline,
                "bob never got the task list alice holds: {e}"
            ),
        }
    };
    assert!(matches!(claimed, ClaimOutcome::Claimed(_)), "{claimed:?}");
    assert!(
        alice
            .try_exec("SELECT 1")
            .is_err_and(|e| e.contains("terminat") || e.contains("closed")),
        "alice's session still runs"
    );
}

/// A store whose login is not a superuser but has CREATEROLE and owns the tables (the
/// deployment of docs/DISTRIBUTED.md) creates member roles; one without CREATEROLE is
/// told so and works as before.
#[test]
fn only_a_login_that_may_create_roles_creates_member_roles() {
    let Some(dsn) = super::common::dsn() else {
        return;
    };
    let n = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let (lead, plain, schema) = (
        format!("roo_lead_{n}_{nanos}"),
        format!("roo_plain_{n}_{nanos}"),
        format!("roo_owned_{n}_{nanos}"),
    );
    psql(
        &dsn,
        &format!(
            "CREATE ROLE {lead} LOGIN CREATEROLE; CREATE ROLE {plain} LOGIN; \
             CREATE SCHEMA {schema} AUTHORIZATION {lead}"
        ),
    );
    let url_as = |role: &str| {
        let start = dsn.find("://").unwrap() + 3;
        let at = start + dsn[start..].find('@').unwrap();
        let sep = if dsn.contains('?') { '&' } else { '?' };
        format!(
            "{}{role}{}{sep}options=-c%20search_path%3D{schema}",
            &dsn[..start],
            &dsn[at..]
        )
    };
    {
        let (_dir, home) = home_at(&url_as(&lead));
        let team = team_named(&home, "a", &["alice", "bob"]);
        let store = home.pg().unwrap();
        assert!(store.can_create_member_roles().unwrap());
        let alice = store
            .create_member_role(&name("a"), &name("alice"))
            .unwrap();
        let (_alice_dir, alice_home) = home_at(&as_member(&url_as(&lead), &alice));
        Team::open(&alice_home, name("a"))
            .unwrap()
            .mailbox()
            .send(&name("alice"), "lead", Outgoing::text("hi", "hi"))
            .unwrap();
        assert_eq!(team.mailbox().unread_count(&name("lead")).unwrap(), 1);
        let e = Team::open(&alice_home, name("a"))
            .unwrap()
            .mailbox()
            .send(&name("lead"), "bob", Outgoing::text("forged", "forged"))
            .expect_err("a send as the lead");
        assert!(e.to_string().contains("may send only as itself"), "{e}");
        psql(
            &dsn,
            &format!(
                "GRANT USAGE ON SCHEMA {schema} TO {plain}; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {plain}"
            ),
        );
        // A login with row privileges only: as before member roles, it sees every row.
        let (_plain_dir, plain_home) = home_at(&url_as(&plain));
        let store = plain_home.pg().unwrap();
        assert!(!store.can_create_member_roles().unwrap());
        let e = store
            .create_member_role(&name("a"), &name("alice"))
            .expect_err("a member role from a login without CREATEROLE");
        assert!(e.to_string().contains("may not create roles"), "{e}");
        Team::open(&plain_home, name("a"))
            .unwrap()
            .mailbox()
            .send(
                &name("lead"),
                "alice",
                Outgoing::text("as today", "as today"),
            )
            .unwrap();
        assert_eq!(home.pg().unwrap().drop_member_roles(&name("a")).unwrap(), 1);
    }
    psql(
        &dsn,
        &format!("DROP SCHEMA {schema} CASCADE; DROP ROLE {plain}; DROP ROLE {lead}"),
    );
}

/// A send that bounds the peer's inbox (PROTOCOL.md §5.4: over 150 read messages, the
/// sender moves the oldest to the archive) is a member's right: read messages may go.
#[test]
fn a_member_role_may_move_a_peers_read_messages_to_the_archive() {
    let Some(t) = two() else {
        return;
    };
    for n in 0..151 {
        t.a.mailbox()
            .send(&name("lead"), "bob", Outgoing::text(format!("m{n}"), "m"))
            .unwrap();
    }
    assert_eq!(t.a.mailbox().take_unread(&name("bob")).unwrap().len(), 151);
    let (_dir, alice_home) = home_at(&as_member(&t.url, &t.alice));
    Team::open(&alice_home, name("a"))
        .unwrap()
        .mailbox()
        .send(
            &name("alice"),
            "bob",
            Outgoing::text("one more", "one more"),
        )
        .unwrap();
    let inbox =
        t.a.mailbox()
            .read(&name("bob"), &ReadFilter::default())
            .unwrap();
    assert!(inbox.len() <= 101, "{}", inbox.len());
    assert_eq!(inbox.last().unwrap().from, "alice");
    assert!(t.a.mailbox().archived(&name("bob")).unwrap().len() >= 51);
}

/// `url` on database `db` of the same server.
fn in_database(url: &str, db: &str) -> String {
    let start = url.find("://").unwrap() + 3;
    let slash = start + url[start..].find('/').unwrap();
    let end = url[slash..].find('?').map_or(url.len(), |q| slash + q);
    format!("{}/{db}{}", &url[..slash], &url[end..])
}

/// Hostile review H1: a member that owns objects or default privileges made the drop of
/// the team's roles fail and roll back, leaving every role its login. Now what it owns
/// here is taken back and every role goes; what it owns in another database keeps its
/// role, named in the error, but without its login.
#[test]
fn a_member_role_cannot_make_itself_undroppable() {
    let Some(t) = two() else {
        return;
    };
    let store = t.home.pg().unwrap();
    psql_as(
        &t.url,
        &t.alice,
        "ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC; SELECT lo_create(0)",
    )
    .unwrap();
    assert_eq!(store.drop_member_roles(&name("a")).unwrap(), 2);
    let roles_left = |roles: &str| {
        psql(
            &t.url,
            &format!("SELECT count(*) FROM pg_roles WHERE rolname IN ({roles})"),
        )
    };
    assert_eq!(
        roles_left(&format!("'{}', '{}'", t.alice.role(), t.bob.role())),
        "0"
    );
    // Again, with a large object in another database, which this one cannot reach.
    let alice = store
        .create_member_role(&name("a"), &name("alice"))
        .unwrap();
    let bob = store.create_member_role(&name("a"), &name("bob")).unwrap();
    let other = in_database(&t.url, "template1");
    let lo = psql_as(&other, &alice, "SELECT lo_create(0)").unwrap();
    let e = store
        .drop_member_roles(&name("a"))
        .expect_err("a role owning an object elsewhere");
    assert!(e.to_string().contains(alice.role()), "{e}");
    assert!(!e.to_string().contains(bob.role()), "{e}");
    assert_eq!(roles_left(&format!("'{}'", bob.role())), "0");
    assert_eq!(
        psql(
            &t.url,
            &format!(
                "SELECT rolcanlogin FROM pg_roles WHERE rolname = '{}'",
                alice.role()
            )
        ),
        "f"
    );
    refused(
        "a login of a revoked role",
        psql_as(&t.url, &alice, "SELECT 1"),
    );
    psql(
        &in_database(&t.url, "template1"),
        &format!("SELECT lo_unlink({lo})"),
    );
    assert_eq!(store.drop_member_roles(&name("a")).unwrap(), 1);
    assert_eq!(roles_left(&format!("'{}'", alice.role())), "0");
}

/// Hostile review H2: a presence lock with no live backend (a prepared transaction's,
/// whose pid is NULL, or a pid gone) counted as a live member.
#[test]
fn a_presence_lock_without_a_live_backend_does_not_count() {
    let Some(t) = two() else {
        return;
    };
    let key = presence_key("a", "bob@a", 1);
    let counts = |pid: &str| psql(&t.url, &format!("SELECT roo_presence_counts({pid}, {key})"));
    assert_eq!(counts("NULL"), "f");
    assert_eq!(counts("2147483647"), "f");
    // A live backend of the owner's login counts.
    assert_eq!(counts("pg_backend_pid()"), "t");
}

/// Hostile review H3: with `CREATE` on the store's schema (PUBLIC's before PostgreSQL
/// 15), a member could plant an exact-type overload (`cardinality(text[])`) that the
/// owner's functions would call. Member roles are then refused, with the fix.
#[test]
fn member_roles_are_refused_where_others_may_create_in_the_schema() {
    let Some(t) = two() else {
        return;
    };
    let schema = psql(&t.url, "SELECT current_schema()");
    psql(
        &t.url,
        &format!("GRANT CREATE ON SCHEMA {schema} TO PUBLIC"),
    );
    let store = t.home.pg().unwrap();
    let e = store
        .create_member_role(&name("a"), &name("alice"))
        .expect_err("a member role where PUBLIC may create");
    assert!(
        e.to_string()
            .contains(&format!("REVOKE CREATE ON SCHEMA {schema} FROM PUBLIC")),
        "{e}"
    );
    assert!(store.member_roles_refused().unwrap().is_some());
    psql(
        &t.url,
        &format!("REVOKE CREATE ON SCHEMA {schema} FROM PUBLIC"),
    );
    assert_eq!(store.member_roles_refused().unwrap(), None);
    store
        .create_member_role(&name("a"), &name("alice"))
        .unwrap();
}

/// `SELECT roo_m_write` of team `a`'s config with `field` of `member`'s entry set to
/// `value` (JSON), as `login`.
fn set_in_entry(
    url: &str,
    login: &MemberLogin,
    member: &str,
    field: &str,
    value: &str,
) -> Result<String, String> {
    psql_as(
        url,
        login,
        &format!(
            "SELECT roo_m_write('teams/a/config.json', \
               jsonb_set(d.doc::jsonb, ARRAY['members', (i - 1)::text, '{field}'], \
                         '{value}'::jsonb)::text) \
             FROM roo_doc d, json_array_elements(d.doc -> 'members') WITH ORDINALITY e(x, i) \
             WHERE d.key = 'teams/a/config.json' AND x ->> 'name' = '{member}'"
        ),
    )
}

/// Hostile review M2: a member changed a peer's entry (its epoch, pid, host, plan mode).
/// Of a peer's entry it may change only what marking it dead writes; its own is its own.
#[test]
fn a_member_role_changes_only_its_own_entry_and_a_peers_death() {
    let Some(t) = two() else {
        return;
    };
    for (field, value) in [
        ("epoch", "7"),
        ("pid", "1"),
        ("host", "\"elsewhere\""),
        ("plan_mode_required", "true"),
    ] {
        let e = refused(
            &format!("a peer's {field}"),
            set_in_entry(&t.url, &t.alice, "bob", field, value),
        );
        assert!(e.contains("only its own entry"), "{e}");
    }
    set_in_entry(&t.url, &t.alice, "alice", "plan_mode_required", "true").unwrap();
    // Of a live peer's entry, only its death, whole: not its state or reason alone.
    for (field, value) in [("is_active", "false"), ("dead_reason", "\"gone\"")] {
        let e = refused(
            &format!("a peer's {field} alone"),
            set_in_entry(&t.url, &t.alice, "bob", field, value),
        );
        assert!(e.contains("only to mark it dead"), "{e}");
    }
    // Bob holds no presence (no epoch): his death is the client's word, as before.
    set_in_entry(
        &t.url,
        &t.alice,
        "bob",
        "dead_at",
        "\"2026-01-01T00:00:00Z\"",
    )
    .unwrap();
    let config = t.a.config().unwrap();
    assert!(config.member("bob").unwrap().dead_at.is_some());
}

/// Hostile review: a member revived a peer the lead had marked dead (its `dead_at`
/// cleared or rewritten). Only the member itself clears its own, by joining again.
#[test]
fn a_member_role_cannot_revive_a_dead_peer() {
    let Some(t) = two() else {
        return;
    };
    t.a.mark_dead("bob", "gone").unwrap();
    for (field, value) in [
        ("dead_at", "null"),
        ("dead_at", "\"2030-01-01T00:00:00Z\""),
        ("is_active", "true"),
    ] {
        let e = refused(
            &format!("a dead peer's {field} = {value}"),
            set_in_entry(&t.url, &t.alice, "bob", field, value),
        );
        assert!(e.contains("never revive it"), "{e}");
    }
    let e = refused(
        "a dead peer's dead_at removed",
        psql_as(
            &t.url,
            &t.alice,
            "SELECT roo_m_write('teams/a/config.json', \
               jsonb_set(d.doc::jsonb, ARRAY['members', (i - 1)::text], \
                         (x::jsonb - 'dead_at'))::text) \
             FROM roo_doc d, json_array_elements(d.doc -> 'members') WITH ORDINALITY e(x, i) \
             WHERE d.key = 'teams/a/config.json' AND x ->> 'name' = 'bob'",
        ),
    );
    assert!(e.contains("never revive it"), "{e}");
    assert!(
        t.a.config()
            .unwrap()
            .member("bob")
            .unwrap()
            .dead_at
            .is_some()
    );
    // Bob himself joins again: his own entry, his own `dead_at` cleared.
    let (_dir, _bob_team) = joined_as(&t.url, &t.bob, "bob");
    assert!(
        t.a.config()
            .unwrap()
            .member("bob")
            .unwrap()
            .dead_at
            .is_none()
    );
}

/// Hostile review: a member declared a peer dead while the peer's presence was held.
/// The server lets it mark a peer with an epoch dead only when no presence lock of that
/// peer's key counts; once the peer's presence is gone, its liveness check still does.
#[test]
fn a_member_role_cannot_mark_a_peer_dead_while_its_presence_is_held() {
    let Some(t) = two() else {
        return;
    };
    wait_out_restart_grace(&t.url);
    let (_dir, bob_team) = joined_as(&t.url, &t.bob, "bob");
    let presence = bob_team.hold_presence(&name("bob")).unwrap();
    let (_d2, alice_team) = joined_as(&t.url, &t.alice, "alice");
    let forged = alice_team.declare_dead("bob", Some(&name("alice")), "forged");
    let config = t.a.config().unwrap();
    let bob = config.member("bob").unwrap();
    assert!(
        forged.is_err() && bob.dead_at.is_none(),
        "alice declared live bob dead: {:?}",
        bob.dead_at
    );
    assert_eq!(
        t.a.liveness(&config).unwrap().observed_state(bob),
        MemberState::Busy
    );
    // Bob's process ends: alice's own liveness check finds him gone and marks him.
    drop(presence);
    drop(bob_team);
    let deaths = alice_team.detect_dead(Some(&name("alice"))).unwrap();
    assert_eq!(deaths.len(), 1, "{deaths:?}");
    assert!(
        t.a.config()
            .unwrap()
            .member("bob")
            .unwrap()
            .dead_at
            .is_some()
    );
}

/// Hostile review M2: with member roles, a member's recorded pid is its own word: the
/// lead does not declare it dead by it (only by its presence).
#[test]
fn with_member_roles_a_pid_is_no_evidence() {
    let Some(t) = two() else {
        return;
    };
    let (_dir, alice_home) = home_at(&as_member(&t.url, &t.alice));
    let team = Team::open(&alice_home, name("a")).unwrap();
    team.join(roo_store::Member::new(name("alice"), team.name()))
        .unwrap();
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    set_in_entry(&t.url, &t.alice, "alice", "pid", &gone.id().to_string()).unwrap();
    assert_eq!(t.a.detect_dead(None).unwrap().len(), 0);
    assert!(
        t.a.config()
            .unwrap()
            .member("alice")
            .unwrap()
            .dead_at
            .is_none()
    );
}

/// Hostile review M3: a member rewrote the wrapper of a peer's inbox (its version, other
/// members, messages not a list). Only the messages of a peer's inbox change.
#[test]
fn a_member_role_cannot_change_a_peers_inbox_wrapper() {
    let Some(t) = two() else {
        return;
    };
    t.a.mailbox()
        .send(&name("lead"), "bob", Outgoing::text("hi", "hi"))
        .unwrap();
    let rewrite = |set: &str| {
        psql_as(
            &t.url,
            &t.alice,
            &format!(
                "SELECT roo_m_write(key, ({set})::text) FROM roo_doc \
                 WHERE key = 'teams/a/inboxes/bob.json'"
            ),
        )
    };
    for set in [
        "jsonb_set(doc::jsonb, '{version}', '\"9.0\"')",
        "jsonb_set(doc::jsonb, '{extra}', '1')",
        "jsonb_set(doc::jsonb, '{messages}', '{}')",
    ] {
        let e = refused(set, rewrite(set));
        assert!(e.contains("inbox"), "{e}");
    }
    // A new peer inbox starts at this major version.
    let start = |doc: &str| {
        psql_as(
            &t.url,
            &t.alice,
            &format!(
                "SELECT roo_m_placeholder('teams/a/inboxes/zed.json'); \
                 SELECT roo_m_write('teams/a/inboxes/zed.json', '{doc}')"
            ),
        )
    };
    refused(
        "a peer inbox of a newer major",
        start(r#"{"version": "9.0", "messages": []}"#),
    );
    start(r#"{"version": "1.0", "messages": []}"#).unwrap();
    // Her own send, which changes the messages only, goes through.
    let (_dir, alice_home) = home_at(&as_member(&t.url, &t.alice));
    Team::open(&alice_home, name("a"))
        .unwrap()
        .mailbox()
        .send(&name("alice"), "bob", Outgoing::text("hi bob", "hi"))
        .unwrap();
}

/// Hostile review L1: a member sent a message with an id of the lead's assignments
/// (`assign-…`, any case), which the lead's delivery check takes as its own.
#[test]
fn a_member_role_cannot_send_an_assignment_id() {
    let Some(t) = two() else {
        return;
    };
    t.a.mailbox()
        .send(&name("lead"), "bob", Outgoing::text("hi", "hi"))
        .unwrap();
    let send = |id: &str| {
        psql_as(
            &t.url,
            &t.alice,
            &format!(
                "SELECT roo_m_write(key, jsonb_set(doc::jsonb, '{{messages}}', \
                   (doc::jsonb -> 'messages') || \
                   '[{{\"id\": \"{id}\", \"from\": \"alice\", \"text\": \"x\"}}]')::text) \
                 FROM roo_doc WHERE key = 'teams/a/inboxes/bob.json'"
            ),
        )
    };
    let e = refused("an assignment's id", send("ASSIGN-1-2"));
    assert!(e.contains("assign-"), "{e}");
    send("m-1").unwrap();
}

/// Hostile review L2: a member's event call chose how many rows the log keeps (1: the
/// team's history gone) and logged lines of any size.
#[test]
fn a_member_role_cannot_shorten_the_event_log() {
    let Some(t) = two() else {
        return;
    };
    let log = |body: &str, n: usize, keep: i64| {
        psql_as(
            &t.url,
            &t.alice,
            &format!(
                "SELECT roo_m_event('teams/a/x.log', array_fill('{body}'::text, ARRAY[{n}]), \
                 {keep}, 'x')"
            ),
        )
    };
    log("e", 300, 1).unwrap();
    assert_eq!(
        psql(
            &t.url,
            "SELECT count(*) FROM roo_event WHERE key = 'teams/a/x.log'"
        ),
        "300"
    );
    refused(
        "an event line over the limit",
        log(&"x".repeat(20_000), 1, 1_000_000),
    );
}

/// Hostile review: any other login of the server (a bare `CREATE ROLE … LOGIN`, another
/// store's member role) took a dead member's presence key, read in `pg_locks`, and the
/// lead still saw the member busy. A lock counts only for a member role (its own key)
/// or a login that is the tables' owner, a member of it, or a superuser.
#[test]
fn a_presence_lock_taken_by_a_login_not_the_owners_keeps_no_dead_member_alive() {
    let Some(t) = two() else {
        return;
    };
    wait_out_restart_grace(&t.url);
    let (_dir, bob_team) = joined_as(&t.url, &t.bob, "bob");
    let presence = bob_team.hold_presence(&name("bob")).unwrap();
    let key = presence_key("a", "bob@a", presence.epoch().unwrap());
    let bob_state = || {
        let config = t.a.config().unwrap();
        t.a.liveness(&config)
            .unwrap()
            .observed_state(config.member("bob").unwrap())
    };
    assert_eq!(bob_state(), MemberState::Busy);
    let outsider = format!("roo_outsider_{}", std::process::id());
    psql(
        &t.url,
        &format!("DROP ROLE IF EXISTS {outsider}; CREATE ROLE {outsider} LOGIN"),
    );
    drop(presence);
    let start = t.url.find("://").unwrap() + 3;
    let at = start + t.url[start..].find('@').unwrap();
    let outsider_url = format!("{}{outsider}{}", &t.url[..start], &t.url[at..]);
    let session = Raw::connect(&outsider_url);
    session.exec(&format!("SELECT pg_advisory_lock({key})"));
    let state = bob_state();
    drop(session);
    psql(&t.url, &format!("DROP ROLE IF EXISTS {outsider}"));
    assert_eq!(state, MemberState::Dead, "an outsider login kept bob alive");
}

/// Review M3: a start's role is dropped by its name. The drop of an old start's role
/// (its process ended after a newer start of the same member got its own) leaves the
/// newer role's login alone, as does a drop naming another member; the newer start's own
/// drop ends it.
#[test]
fn dropping_an_old_starts_role_by_name_leaves_the_newer_starts_role() {
    let Some(t) = two() else {
        return;
    };
    let store = t.home.pg().unwrap();
    let old = t.alice.role().to_string();
    let newer = store
        .create_member_role(&name("a"), &name("alice"))
        .unwrap();
    assert!(
        !store
            .drop_member_role_named(&name("a"), &name("alice"), &old)
            .unwrap()
    );
    assert_eq!(psql_as(&t.url, &newer, "SELECT 1").unwrap(), "1");
    assert!(
        !store
            .drop_member_role_named(&name("a"), &name("bob"), newer.role())
            .unwrap()
    );
    assert_eq!(psql_as(&t.url, &newer, "SELECT 1").unwrap(), "1");
    assert!(
        store
            .drop_member_role_named(&name("a"), &name("alice"), newer.role())
            .unwrap()
    );
    refused(
        "the dropped role's login",
        psql_as(&t.url, &newer, "SELECT 1"),
    );
    assert_eq!(psql_as(&t.url, &t.bob, "SELECT 1").unwrap(), "1");
}

/// Review M2: a team deleted while its roles' drop failed (simulated: its rows deleted
/// behind the store's back, its roles left with their login) is created anew; the
/// creation revokes and drops the roles recorded for the name first, so the old roles do
/// not log in to the new team.
#[test]
fn a_role_left_from_a_deleted_team_does_not_log_in_to_a_new_team_of_its_name() {
    let Some(t) = two() else {
        return;
    };
    psql(
        &t.url,
        "DELETE FROM roo_doc WHERE key LIKE 'teams/a/%' OR key LIKE 'tasks/a/%'",
    );
    assert_eq!(psql_as(&t.url, &t.alice, "SELECT 1").unwrap(), "1");
    let again = super::common::team_named(&t.home, "a", &["alice"]);
    assert!(again.config().unwrap().member("alice").is_some());
    refused("the old team's role", psql_as(&t.url, &t.alice, "SELECT 1"));
    refused("the old team's role", psql_as(&t.url, &t.bob, "SELECT 1"));
    // The team existing, a second creation is refused and leaves its roles alone.
    let store = t.home.pg().unwrap();
    let alice = store
        .create_member_role(&name("a"), &name("alice"))
        .unwrap();
    assert!(
        roo_store::Team::create(
            &t.home,
            name("a"),
            "again",
            roo_store::Member::new(name("lead"), &name("a")),
            vec![],
        )
        .is_err()
    );
    assert_eq!(psql_as(&t.url, &alice, "SELECT 1").unwrap(), "1");
}

/// Review L1: the lead's password percent-encoded in another variable's URL (as a URL
/// must carry `@` or `/`) is left out of the handoff too, not only its decoded form.
#[test]
fn a_handoff_leaves_out_the_leads_password_percent_encoded() {
    let Some(t) = two() else {
        return;
    };
    let enc = "p%40ss%2Fcanary-5e1d";
    let start = t.url.find("://").unwrap() + 3;
    let at = start + t.url[start..].find('@').unwrap();
    let lead_url = format!("{}:{enc}{}", &t.url[..at], &t.url[at..]);
    let mut env: std::collections::BTreeMap<String, String> = [
        ("ROO_STORE", lead_url.clone()),
        ("DATABASE_URL", format!("postgres://x:{enc}@db/x")),
        (
            "LOWER_URL",
            "postgres://x:p%40ss%2fcanary-5e1d@db/x".to_owned(),
        ),
        ("UNRELATED", "kept".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let store = t.home.pg().unwrap();
    store
        .hand_member_login(&t.alice, &lead_url, &mut env)
        .unwrap();
    assert!(!env.contains_key("DATABASE_URL"), "{env:?}");
    assert!(!env.contains_key("LOWER_URL"), "{env:?}");
    assert_eq!(env.get("UNRELATED").map(String::as_str), Some("kept"));
}
