//! Liveness across hosts on the PostgreSQL store (issue 21): a member's presence lock on
//! its process's presence connection, its epoch, fenced writes, the server's clock.
//! Members that die are real processes (this test binary re-run as a helper) killed with
//! SIGKILL; the server is the real one named by `ROO_TEST_PG_DSN`.
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use roo_store::{
    ClaimOptions, ClaimOutcome, Error, Member, MemberState, NewTask, Outgoing, ReadFilter, RooHome,
    TaskStatus, Team,
};

use super::common::{
    dsn, fresh_schema_url, home_at, name, pg_home, psql, team_named, wait_out_restart_grace,
};

const HELPER_URL: &str = "ROO_TEST_PRESENCE_URL";
const HELPER_MEMBER: &str = "ROO_TEST_PRESENCE_MEMBER";
const HELPER_CLAIMS: &str = "ROO_TEST_PRESENCE_CLAIMS";
/// Set: the helper is the team's lead (`claim_lead`, then its presence).
pub(super) const HELPER_LEAD: &str = "ROO_TEST_PRESENCE_LEAD";

/// Helper mode of the tests below (a member's process): joins team `t` at
/// `$ROO_TEST_PRESENCE_URL` as `$ROO_TEST_PRESENCE_MEMBER` (or, with
/// `$ROO_TEST_PRESENCE_LEAD`, claims its lead entry), holds its presence, claims
/// task 1 as that member if `$ROO_TEST_PRESENCE_CLAIMS` is set, says `ready <epoch>` and
/// waits until its stdin closes (or it is killed).
#[test]
#[ignore = "helper process of the presence tests"]
fn presence_helper() {
    let (Ok(url), Ok(member)) = (std::env::var(HELPER_URL), std::env::var(HELPER_MEMBER)) else {
        return;
    };
    let (_dir, home) = home_at(&url);
    let team = Team::open(&home, name("t")).unwrap();
    let me = name(&member);
    if std::env::var_os(HELPER_LEAD).is_some() {
        // The team's lead: claims the lead entry instead of joining.
        let claimed = team.claim_lead(std::process::id(), false).unwrap();
        assert!(
            matches!(claimed, roo_store::LeadClaim::Claimed { .. }),
            "{claimed:?}"
        );
    } else {
        team.join(Member::new(me.clone(), team.name())).unwrap();
    }
    let presence = team.hold_presence(&me).unwrap();
    if std::env::var_os(HELPER_CLAIMS).is_some() {
        let claimed = presence
            .team()
            .tasks()
            .claim(
                &roo_store::TaskId::parse("1").unwrap(),
                &me,
                &ClaimOptions::default(),
            )
            .unwrap();
        assert!(matches!(claimed, ClaimOutcome::Claimed(_)), "{claimed:?}");
    }
    println!("ready {}", presence.epoch().unwrap());
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    drop(presence);
}

/// A member process holding its presence; killed (SIGKILL) and reaped on drop.
pub(super) struct MemberProcess(pub(super) Child);

impl MemberProcess {
    pub(super) fn start(url: &str, member: &str, claims: bool) -> (MemberProcess, u64) {
        Self::start_with(url, member, claims, &[])
    }

    /// [`MemberProcess::start`] with more environment (`HELPER_LEAD`).
    pub(super) fn start_with(
        url: &str,
        member: &str,
        claims: bool,
        env: &[(&str, &str)],
    ) -> (MemberProcess, u64) {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.envs(env.iter().copied());
        if claims {
            command.env(HELPER_CLAIMS, "1");
        }
        let mut child = command
            .args([
                "--exact",
                "presence::presence_helper",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(HELPER_URL, url)
            .env(HELPER_MEMBER, member)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let epoch = loop {
            let line = lines
                .next()
                .expect("the member process ended before it was ready")
                .unwrap();
            // The harness prints `test … ... ` before it on the same line.
            if let Some((_, epoch)) = line.split_once("ready ") {
                break epoch.trim().parse().unwrap();
            }
        };
        (MemberProcess(child), epoch)
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for MemberProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

fn task(team: &Team, subject: &str) -> roo_store::TaskId {
    team.tasks()
        .create(NewTask {
            subject: subject.into(),
            ..Default::default()
        })
        .unwrap()
        .id
}

/// Polls `detect_dead` every 100 ms until it reports a death (a generous deadline: the
/// test asserts what happens, never how fast).
fn detect_until_a_death(team: &Team) -> Vec<roo_store::Death> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let deaths = team.detect_dead(Some(&name("lead"))).unwrap();
        if !deaths.is_empty() {
            return deaths;
        }
        assert!(
            Instant::now() < deadline,
            "the killed member was never declared dead"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_killed_member_is_declared_dead_by_its_free_lock_and_its_task_released() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &[]);
    let id = task(&team, "carol's");
    let (mut carol, epoch) = MemberProcess::start(&url, "carol", true);
    let (_dave, _) = MemberProcess::start(&url, "dave", false);
    let config = team.config().unwrap();
    let entry = config.member("carol").unwrap().clone();
    assert_eq!(entry.epoch, Some(epoch));
    // Alive by its lock, whatever its pid says (here: a pid of this host, alive).
    let liveness = team.liveness(&config).unwrap();
    assert_eq!(liveness.evidence(&entry), Some(true));
    assert!(team.detect_dead(Some(&name("lead"))).unwrap().is_empty());
    carol.kill();
    let deaths = detect_until_a_death(&team);
    assert_eq!(deaths.len(), 1, "{deaths:?}");
    assert_eq!(deaths[0].member.name, "carol");
    assert!(
        deaths[0]
            .member
            .dead_reason
            .as_deref()
            .unwrap()
            .contains(&format!("presence (epoch {epoch}) is gone")),
        "{:?}",
        deaths[0].member.dead_reason
    );
    assert_eq!(deaths[0].released.len(), 1);
    let released = team.tasks().get(&id).unwrap();
    assert_eq!(
        (released.status, released.owner),
        (TaskStatus::Pending, None)
    );
    // Reported once; dave, alive, is never declared dead.
    assert!(team.detect_dead(Some(&name("lead"))).unwrap().is_empty());
    let config = team.config().unwrap();
    assert_eq!(config.member("dave").unwrap().state(), MemberState::Busy);
    assert_eq!(
        team.liveness(&config)
            .unwrap()
            .observed_state(config.member("dave").unwrap()),
        MemberState::Busy
    );
}

/// A pid means nothing across hosts: a member whose recorded pid is not a process here
/// (another host's) but whose presence is held is alive, and is not declared dead.
#[test]
fn a_member_with_a_foreign_pid_lives_by_its_presence() {
    let Some((_dir, home, _)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &[]);
    let mut carol = Member::new(name("carol"), team.name());
    carol.pid = Some(999_999_999); // no such process on this host
    team.join(carol).unwrap();
    // Carol's own handle: a presence fences the handle it was taken through.
    let presence = team.detached().hold_presence(&name("carol")).unwrap();
    assert!(presence.is_held());
    assert!(team.detect_dead(Some(&name("lead"))).unwrap().is_empty());
    let config = team.config().unwrap();
    let entry = config.member("carol").unwrap();
    assert_eq!(entry.observed_state(), MemberState::Dead, "the pid test");
    assert_eq!(
        team.liveness(&config).unwrap().observed_state(entry),
        MemberState::Busy
    );
    drop(presence);
    let deaths = detect_until_a_death(&team);
    assert_eq!(deaths[0].member.name, "carol");
}

/// A member on another host (`host` set): without an epoch its pid is no evidence here
/// either way — not even a pid that is alive on this host (this very process) — so it is
/// neither alive nor dead by it and `detect_dead` leaves it; once it holds its presence,
/// the lock decides from this host too, and its loss gets it declared dead.
#[test]
fn a_member_on_another_host_is_judged_by_its_presence_not_a_pid_of_this_host() {
    let Some((_dir, home, _)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &[]);
    let mut carol = Member::new(name("carol"), team.name());
    carol.pid = Some(std::process::id()); // alive here, but a pid of host b
    carol.host = Some("b".into());
    team.join(carol).unwrap();
    let config = team.config().unwrap();
    let entry = config.member("carol").unwrap();
    assert_eq!(team.liveness(&config).unwrap().evidence(entry), None);
    assert!(team.detect_dead(Some(&name("lead"))).unwrap().is_empty());
    let presence = team.detached().hold_presence(&name("carol")).unwrap();
    let config = team.config().unwrap();
    let entry = config.member("carol").unwrap();
    assert_eq!(team.liveness(&config).unwrap().evidence(entry), Some(true));
    drop(presence);
    let config = team.config().unwrap();
    let entry = config.member("carol").unwrap();
    assert_eq!(team.liveness(&config).unwrap().evidence(entry), Some(false));
    let deaths = detect_until_a_death(&team);
    assert_eq!(deaths[0].member.name, "carol");
}

#[test]
fn a_name_whose_presence_is_held_cannot_be_joined_or_held_again() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &[]);
    let (_carol, epoch) = MemberProcess::start(&url, "carol", false);
    let err = team
        .join(Member::new(name("carol"), team.name()))
        .unwrap_err();
    assert!(matches!(err, Error::NotPermitted { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("its presence, epoch {epoch}, is held")),
        "{err}"
    );
    let err = team.hold_presence(&name("carol")).unwrap_err();
    assert!(matches!(err, Error::NotPermitted { .. }), "{err}");
    // Nothing was written: the entry is the holder's.
    assert_eq!(
        team.config().unwrap().member("carol").unwrap().epoch,
        Some(epoch)
    );
}

#[test]
fn a_member_declared_dead_is_fenced_until_it_joins_again_with_a_new_epoch() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    let first = task(&team, "first");
    let second = task(&team, "second");
    // Carol's own process: its own connections.
    let (_carol_dir, carol_home) = home_at(&url);
    let carol_team = Team::open(&carol_home, name("t")).unwrap();
    let carol = name("carol");
    carol_team
        .join(Member::new(carol.clone(), carol_team.name()))
        .unwrap();
    let presence = carol_team.hold_presence(&carol).unwrap();
    let old_epoch = presence.epoch().unwrap();
    let mine = presence.team();
    mine.mailbox()
        .send(&carol, "alice", Outgoing::text("hello", "hello"))
        .unwrap();
    assert!(matches!(
        mine.tasks()
            .claim(&first, &carol, &ClaimOptions::default())
            .unwrap(),
        ClaimOutcome::Claimed(_)
    ));
    // Cut off (here: declared dead by hand, as a lead's detect would after a cut link)
    // while its process goes on.
    let death = team
        .declare_dead("carol", Some(&name("lead")), "its link was cut")
        .unwrap();
    assert_eq!(death.released.len(), 1);
    let inbox_before = home
        .read_raw(&team.mailbox().inbox_path(&name("alice")))
        .unwrap();
    let tasks_before = home.read_raw(&team.tasks().path()).unwrap();
    let err = mine
        .mailbox()
        .send(&carol, "alice", Outgoing::text("still here", "still here"))
        .unwrap_err();
    let Error::Fenced { epoch, reason, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(*epoch, old_epoch);
    assert!(reason.contains("declared dead"), "{reason}");
    assert!(
        err.to_string().contains("must join the team again"),
        "{err}"
    );
    // A claim is refused before it starts (the entry says dead), and its write would be.
    let err = mine
        .tasks()
        .claim(&second, &carol, &ClaimOptions::default())
        .unwrap_err();
    assert!(err.to_string().contains("join the team again"), "{err}");
    let err = mine
        .tasks()
        .update(
            &first,
            roo_store::TaskPatch {
                note: Some("progress".into()),
                by: Some(carol.clone()),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(matches!(err, Error::Fenced { .. }), "{err}");
    // Nothing was written.
    assert_eq!(
        home.read_raw(&team.mailbox().inbox_path(&name("alice")))
            .unwrap(),
        inbox_before
    );
    assert_eq!(home.read_raw(&team.tasks().path()).unwrap(), tasks_before);
    // Re-join through a new handle (a respawned process): a new epoch, and its writes
    // work again; the old handle stays fenced.
    let carol_again = Team::open(&carol_home, name("t")).unwrap();
    carol_again
        .join(Member::new(carol.clone(), carol_again.name()))
        .unwrap();
    let again = carol_again.hold_presence(&carol).unwrap();
    let new_epoch = again.epoch().unwrap();
    assert_ne!(new_epoch, old_epoch);
    assert_eq!(
        team.config().unwrap().member("carol").unwrap().epoch,
        Some(new_epoch)
    );
    again
        .team()
        .mailbox()
        .send(&carol, "alice", Outgoing::text("back", "back"))
        .unwrap();
    assert!(matches!(
        again
            .team()
            .tasks()
            .claim(&second, &carol, &ClaimOptions::default())
            .unwrap(),
        ClaimOutcome::Claimed(_)
    ));
    let err = mine
        .mailbox()
        .send(&carol, "alice", Outgoing::text("old", "old"))
        .unwrap_err();
    let Error::Fenced { reason, .. } = &err else {
        panic!("{err}");
    };
    assert!(reason.contains(&format!("epoch {new_epoch}")), "{reason}");
    // The entry is alive again, but not this handle's: its claim's write is refused.
    let third = task(&team, "third");
    let err = mine
        .tasks()
        .claim(&third, &carol, &ClaimOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::Fenced { .. }), "{err}");
    assert_eq!(team.tasks().get(&third).unwrap().owner, None);
    let texts: Vec<String> = team
        .mailbox()
        .read(&name("alice"), &ReadFilter::default())
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(texts, ["hello", "back"]);
}

/// A presence fences the handle it was taken through and every clone of it, made before
/// or after (a runtime's router and tools are clones made before it joins), config
/// writes included; holding the presence again after a re-join moves them all to the
/// new epoch. A handle writing as one member cannot hold another's presence.
#[test]
fn a_presence_fences_every_clone_of_its_handle_and_a_rejoin_moves_them_all() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    let lead = team_named(&home, "t", &["alice", "bob"]);
    let (_carol_dir, carol_home) = home_at(&url);
    let carol_team = Team::open(&carol_home, name("t")).unwrap();
    let carol = name("carol");
    // Made before the presence: what a worker's router and tools hold.
    let (early_mailbox, early_team) = (carol_team.mailbox(), carol_team.clone());
    carol_team
        .join(Member::new(carol.clone(), carol_team.name()))
        .unwrap();
    let presence = carol_team.hold_presence(&carol).unwrap();
    let err = carol_team.hold_presence(&name("bob")).unwrap_err();
    assert!(err.to_string().contains("already writes as carol"), "{err}");
    assert!(carol_team.detached().hold_presence(&name("bob")).is_ok());
    lead.declare_dead("carol", Some(&name("lead")), "cut off")
        .unwrap();
    let config_before = home.read_raw(&lead.config_path()).unwrap();
    let err = early_mailbox
        .send(&carol, "alice", Outgoing::text("late", "late"))
        .unwrap_err();
    assert!(matches!(err, Error::Fenced { .. }), "{err}");
    // A config write (going idle) is refused as well: it writes nothing.
    let err = early_team.set_active("carol", false).unwrap_err();
    assert!(matches!(err, Error::Fenced { .. }), "{err}");
    assert_eq!(home.read_raw(&lead.config_path()).unwrap(), config_before);
    assert!(matches!(
        presence.check().unwrap(),
        roo_store::PresenceState::Lost(reason) if reason.contains("declared dead")
    ));
    // Joining again goes through a fenced handle (its own checks decide), and holding the
    // presence again moves every clone to the new epoch.
    early_team
        .join(Member::new(carol.clone(), carol_team.name()))
        .unwrap();
    let again = carol_team.hold_presence(&carol).unwrap();
    assert_eq!(again.check().unwrap(), roo_store::PresenceState::Held);
    drop(presence);
    early_mailbox
        .send(&carol, "alice", Outgoing::text("back", "back"))
        .unwrap();
    early_team.set_active("carol", false).unwrap();
    assert_eq!(
        lead.config().unwrap().member("carol").unwrap().epoch,
        again.epoch()
    );
}

/// A change's times are the server's: with the server's `clock_timestamp()` replaced
/// (a function of the schema, searched before `pg_catalog`) claims, messages and deaths
/// carry its time, not this machine's.
#[test]
fn a_change_writes_the_servers_time() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let schema = url.rsplit("search_path%3D").next().unwrap().to_owned();
    psql(
        &dsn,
        &format!(
            "CREATE FUNCTION {schema}.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS \
             $$ SELECT timestamptz '2001-02-03 04:05:06.789+00' $$"
        ),
    );
    let url = format!("{url}%2Cpg_catalog");
    let (_dir, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice", "bob"]);
    let server = "2001-02-03T04:05:06.789Z";
    let config = team.config().unwrap();
    assert!(
        config
            .created_at
            .to_string()
            .starts_with("2001-02-03T04:05:0")
    );
    let id = task(&team, "t");
    let claimed = team
        .tasks()
        .claim(&id, &name("alice"), &ClaimOptions::default())
        .unwrap();
    let ClaimOutcome::Claimed(task) = claimed else {
        panic!("{claimed:?}");
    };
    let lease = task.lease.unwrap();
    assert!(
        lease
            .acquired_at
            .to_string()
            .starts_with("2001-02-03T04:05:0")
    );
    assert_eq!(
        lease.expires_at.unix_ms() - lease.acquired_at.unix_ms(),
        600_000
    );
    let sent = team
        .mailbox()
        .send(&name("alice"), "bob", Outgoing::text("hi", "hi"))
        .unwrap();
    assert!(
        sent[0]
            .timestamp
            .to_string()
            .starts_with("2001-02-03T04:05:0")
    );
    let (member, _) = team.mark_dead("bob", "test").unwrap();
    assert!(
        member
            .dead_at
            .unwrap()
            .to_string()
            .starts_with("2001-02-03T04:05:0"),
        "{server}"
    );
}

#[test]
fn the_presence_connection_sets_its_keepalives_per_session() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    let pg = home.pg().unwrap();
    let settings = pg.presence_settings().unwrap();
    let names: Vec<&str> = settings.server.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "tcp_keepalives_idle",
            "tcp_keepalives_interval",
            "tcp_keepalives_count",
            "tcp_user_timeout"
        ]
    );
    // The test server listens on a unix socket only: the settings do not apply there.
    assert!(settings.unix_socket);
    assert!(
        settings.verdict().starts_with("unix socket"),
        "{settings:?}"
    );
    // The session is the presence connection's own: another one has the defaults.
    assert_eq!(psql(&url, "SHOW tcp_keepalives_idle"), "0");
    assert!(home_for_files_has_no_presence_connection());
}

fn home_for_files_has_no_presence_connection() -> bool {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let t = name("t");
    let team = Team::create(
        &home,
        t.clone(),
        "files",
        Member::new(name("lead"), &t),
        vec![Member::new(name("alice"), &t)],
    )
    .unwrap();
    let before = std::fs::read(home.team_config(&t)).unwrap();
    let presence = team.hold_presence(&name("alice")).unwrap();
    // A no-op on files: no epoch, nothing written, writes as before.
    presence
        .team()
        .mailbox()
        .send(&name("alice"), "lead", Outgoing::text("hi", "hi"))
        .unwrap();
    presence.epoch().is_none()
        && presence.is_held()
        && std::fs::read(home.team_config(&t)).unwrap() == before
}

/// The presence connection lost (its session ended by the server, as a restart or a cut
/// link would): it connects again by itself, takes its lock again and LISTENs again.
#[test]
fn a_lost_presence_connection_comes_back_with_its_lock_and_its_listens() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice", "bob"]);
    let presence = team.hold_presence(&name("alice")).unwrap();
    let mut watcher = team.mailbox().watcher(&name("alice")).unwrap();
    let key = roo_store::presence_key("t", "alice@t", presence.epoch().unwrap());
    let ended = psql(
        &url,
        &format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' \
             AND granted AND objsubid = 1 AND classid = (({key}::int8 >> 32) & 4294967295)::oid \
             AND objid = ({key}::int8 & 4294967295)::oid"
        ),
    );
    assert_eq!(ended, "1", "the presence session was not found in pg_locks");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let config = team.config().unwrap();
        let alive = team
            .liveness(&config)
            .unwrap()
            .evidence(config.member("alice").unwrap());
        if presence.is_held() && alive == Some(true) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the presence lock never came back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(team.detect_dead(Some(&name("lead"))).unwrap().is_empty());
    // The watcher was woken by the loss; after it, a send wakes it again.
    let (_other_dir, other) = home_at(&url);
    Team::open(&other, name("t"))
        .unwrap()
        .mailbox()
        .send(&name("bob"), "alice", Outgoing::text("after", "after"))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while team.mailbox().unread_count(&name("alice")).unwrap() == 0 {
        assert!(Instant::now() < deadline, "the message never arrived");
        watcher.wait(Duration::from_secs(1));
    }
}

/// A presence asked for while the presence connection is being restored (the link just
/// came back, the server still refuses for a moment) waits for the connection instead of
/// failing: a member re-joining right after a partition holds its new presence.
#[test]
fn a_presence_asked_for_while_its_connection_is_restored_waits_for_it() {
    let Some(dsn) = dsn() else { return };
    // A role of the test's own, so its logins can be refused without touching others.
    let role = format!("roo_p_{}", std::process::id());
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
    let alice = team.hold_presence(&name("alice")).unwrap();
    // The server refuses the role's logins, and the presence session (the one holding
    // alice's lock) ends; the request connection stays.
    psql(&dsn, &format!("ALTER ROLE {role} NOLOGIN"));
    let key = roo_store::presence_key("t", "alice@t", alice.epoch().unwrap());
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
    while alice.is_held() {
        assert!(
            Instant::now() < deadline,
            "the presence session never ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Bob's presence is asked for now, while the connection cannot come back.
    let asking = {
        // Bob's own handle (alice's is fenced as alice).
        let team = team.detached();
        std::thread::spawn(move || team.hold_presence(&name("bob")))
    };
    // Give a failing call its chance to return, then let the role log in again.
    let waited = Instant::now();
    while !asking.is_finished() && waited.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    psql(&dsn, &format!("ALTER ROLE {role} LOGIN"));
    let bob = asking.join().unwrap();
    let bob = bob.expect("bob's presence was refused while the connection came back");
    assert!(bob.is_held());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !alice.is_held() {
        assert!(Instant::now() < deadline, "alice's lock never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A member declared dead while its presence connection was away must not hold its
/// presence lock again when that connection comes back (PROTOCOL.md §8: "a member
/// declared dead meanwhile stays dead"; `Presence::is_held`: "taken again then, unless
/// the member was declared dead meanwhile"). Otherwise the store reports a member marked
/// dead as alive by its own test, and the process believes it still holds its presence.
#[test]
fn a_member_declared_dead_while_its_presence_was_away_does_not_take_its_lock_again() {
    let Some(dsn) = dsn() else { return };
    // A role of the test's own, so its logins can be refused without touching others.
    let role = format!("roo_away_{}", std::process::id());
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
    // Meanwhile the lead declares alice dead by the store's test (her lock is free, and
    // a free lock is evidence once the server is out of its restart grace).
    wait_out_restart_grace(&dsn);
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
