//! The CLIs on the PostgreSQL store (`ROO_STORE=postgresql://…`), against the throwaway
//! server of `ROO_TEST_PG_DSN` (scripts/test starts one); without it, each test says so
//! and passes. The team runtime on it: `team_pg.rs`; the store's credentials:
//! `store_pg_credentials.rs`.

use roo_tests::TempHome;
use roo_tests::pg::{OwnCluster, fresh_schema_url, psql, store_url, test_dsn, with_database};

/// A team's whole coordination through `roo-mail` and `roo-task` on the PostgreSQL store:
/// nothing is written under ROO_HOME, and a second home (another machine's) sees it all.
#[test]
fn roo_mail_and_roo_task_coordinate_a_team_on_postgresql() {
    let Some(url) = store_url() else { return };
    let here = TempHome::new();
    let there = TempHome::new();
    here.mail()
        .env("ROO_STORE", &url)
        .args([
            "team", "create", "--team", "t", "--lead", "lead", "--member", "alice",
        ])
        .run()
        .assert_ok();
    here.task()
        .env("ROO_STORE", &url)
        .args([
            "create",
            "--team",
            "t",
            "--as",
            "lead",
            "--subject",
            "parser",
        ])
        .run()
        .assert_ok();
    here.mail()
        .env("ROO_STORE", &url)
        .args([
            "send",
            "--team",
            "t",
            "--from",
            "lead",
            "--to",
            "alice",
            "--summary",
            "take the parser",
            "Please take task 1.",
        ])
        .run()
        .assert_ok();
    // Another home, the same store: alice reads and claims from "elsewhere".
    let unread = there
        .mail()
        .env("ROO_STORE", &url)
        .args([
            "read",
            "--team",
            "t",
            "--as",
            "alice",
            "--unread",
            "--mark-read",
            "--json",
        ])
        .run();
    unread.assert_ok();
    assert_eq!(
        unread.json()[0]["text"],
        "Please take task 1.",
        "{}",
        unread.stdout()
    );
    let claim = there
        .task()
        .env("ROO_STORE", &url)
        .args(["claim", "1", "--team", "t", "--as", "alice", "--json"])
        .run();
    claim.assert_ok();
    let task = here
        .task()
        .env("ROO_STORE", &url)
        .args(["get", "1", "--team", "t", "--json"])
        .run();
    task.assert_ok();
    assert_eq!(task.json()["owner"], "alice", "{}", task.stdout());
    assert_eq!(task.json()["status"], "in_progress");
    for home in [&here, &there] {
        assert!(
            !home.path().join("teams").exists() && !home.path().join("tasks").exists(),
            "a document was written under ROO_HOME"
        );
    }
}

/// An unreachable store is a loud error naming the server (exit 3), never files; a
/// `ROO_STORE` that is neither `file` nor a URL is a usage error; no credential is shown.
#[test]
fn an_unreachable_or_unknown_store_is_a_loud_error_and_never_files() {
    let env = TempHome::new();
    let out = env
        .mail()
        .env("ROO_STORE", "postgresql://roo:s3cret@127.0.0.1:1/roo")
        .args(["team", "create", "--team", "t", "--lead", "lead"])
        .run();
    assert_eq!(out.code(), 3, "{}", out.stderr());
    assert!(out.stderr().contains("127.0.0.1:1/roo"), "{}", out.stderr());
    assert!(!out.stderr().contains("s3cret"), "{}", out.stderr());
    assert!(!env.path().join("teams").exists());
    let out = env
        .task()
        .env("ROO_STORE", "mysql://roo@db/roo")
        .args(["list", "--team", "t"])
        .run();
    assert_eq!(out.code(), 2, "{}", out.stderr());
    assert!(out.stderr().contains("ROO_STORE"), "{}", out.stderr());
}

/// A fake server on 127.0.0.1 (its port returned) that accepts every connection and keeps
/// it open; with `logs_in`, it answers the start-up (no password, then ready) and then
/// nothing more. Each connection is kept until the test process ends.
fn silent_server(logs_in: bool) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                if logs_in {
                    let mut length = [0u8; 4];
                    if stream.read_exact(&mut length).is_err() {
                        return;
                    }
                    let mut body = vec![0u8; u32::from_be_bytes(length) as usize - 4];
                    if stream.read_exact(&mut body).is_err() {
                        return;
                    }
                    // AuthenticationOk, BackendKeyData, ReadyForQuery (idle).
                    let mut answer = b"R\0\0\0\x08\0\0\0\0".to_vec();
                    answer.extend_from_slice(b"K\0\0\0\x0c\0\0\0\x01\0\0\0\x02");
                    answer.extend_from_slice(b"Z\0\0\0\x05I");
                    let _ = stream.write_all(&answer);
                }
                // Read whatever comes, answer nothing.
                let mut sink = [0u8; 4096];
                while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
            });
        }
    });
    port
}

/// A server that accepts the connection and then never answers — at the start-up (the
/// TLS request, the login) or at the session's set-up statements — must not hold a CLI
/// for ever: it gives up and says so (exit 3), within the bound docs/DISTRIBUTED.md
/// states (21 s). The 60 s here only keeps a regression from hanging the suite.
#[test]
fn a_server_that_accepts_and_never_answers_ends_the_cli_with_a_sentence() {
    let env = TempHome::new();
    let (mute, logs_in) = (silent_server(false), silent_server(true));
    let cases = [
        (
            format!("postgresql://x@127.0.0.1:{mute}/x?sslmode=disable"),
            "did not answer the connection's start-up (TCP, TLS, login) in 10 s",
        ),
        // The default: verify-full, whose TLS request gets no answer.
        (
            format!("postgresql://x@127.0.0.1:{mute}/x"),
            "did not answer the connection's start-up (TCP, TLS, login) in 10 s",
        ),
        (
            format!("postgresql://x@127.0.0.1:{logs_in}/x?sslmode=disable"),
            "did not answer the session's set-up statements in 10 s",
        ),
    ];
    let mut running: Vec<_> = cases
        .iter()
        .map(|(url, _)| {
            env.task()
                .env("ROO_STORE", url)
                .args(["--team", "t1", "doctor"])
                .spawn()
        })
        .collect();
    for ((url, _), child) in cases.iter().zip(&mut running) {
        roo_tests::wait_until(
            &format!("roo-task doctor on {url} to end"),
            std::time::Duration::from_secs(60),
            || child.child().try_wait().unwrap(),
            || "it still runs".into(),
        );
    }
    for ((url, says), child) in cases.iter().zip(running) {
        let out = child.wait();
        assert_eq!(out.code(), 3, "{url}: {}", out.stderr());
        assert!(out.stderr().contains(says), "{url}: {}", out.stderr());
    }
}

/// roo-lead and roo-worker run on the store `ROO_STORE` names, never quietly on files: an
/// unreachable server stops them at start (exit 3, naming it, never its password), and a
/// team that exists only in files is not found there.
#[test]
fn the_team_runtime_uses_the_postgresql_store_and_never_falls_back_to_files() {
    let env = TempHome::new();
    for (bin, args) in [
        ("roo-lead", vec!["-p", "hi"]),
        ("roo-worker", vec!["--team", "t", "--name", "alice"]),
    ] {
        let out = env
            .cmd(bin)
            .env("ROO_STORE", "postgresql://roo:s3cret@127.0.0.1:1/roo")
            .args(args)
            .run();
        assert_eq!(out.code(), 3, "{bin}: {}", out.stderr());
        assert!(
            out.stderr().contains("127.0.0.1:1/roo"),
            "{bin}: {}",
            out.stderr()
        );
        assert!(!out.stderr().contains("s3cret"), "{}", out.stderr());
    }
    let Some(url) = store_url() else { return };
    env.mail()
        .env("ROO_STORE", "file")
        .args(["team", "create", "--team", "t", "--lead", "lead"])
        .run()
        .assert_ok();
    let out = env
        .cmd("roo-worker")
        .env("ROO_STORE", &url)
        .args(["--team", "t", "--name", "alice"])
        .run();
    assert_eq!(out.code(), 2, "{}", out.stderr());
    assert!(
        out.stderr().contains("the PostgreSQL store at ")
            && out.stderr().contains("has no team of that name"),
        "{}",
        out.stderr()
    );
}

/// Errors on the PostgreSQL store speak of the store, never of files it does not have:
/// a missing team is "the PostgreSQL store at … has no team of that name", not
/// "`teams/x/config.json` does not exist"; a row held past the lock wait is not a "lock
/// file" to remove (`shared/store/tests/pg/row_locks.rs`).
#[test]
fn a_missing_team_on_postgresql_names_the_store_not_a_file() {
    let Some(url) = store_url() else { return };
    let env = TempHome::new();
    for (bin, args) in [
        ("roo-task", vec!["list", "--team", "nope"]),
        (
            "roo-mail",
            vec![
                "send",
                "--team",
                "nope",
                "--from",
                "lead",
                "--to",
                "alice",
                "--summary",
                "s",
                "hi",
            ],
        ),
        ("roo-mail", vec!["read", "--team", "nope", "--as", "alice"]),
    ] {
        let out = env.cmd(bin).env("ROO_STORE", &url).args(&args).run();
        assert_eq!(out.code(), 2, "{bin} {args:?}: {}", out.stderr());
        let text = out.stderr();
        assert!(
            text.contains("the PostgreSQL store at ") && text.contains("has no team of that name"),
            "{bin} {args:?}: {text}"
        );
        assert!(
            !text.contains("config.json") && !text.contains("does not exist"),
            "{bin} {args:?}: names a file: {text}"
        );
    }
}

/// Eight `roo-task claim` processes race for one task, 100 rounds: exactly one wins each
/// round (exit 0), the others are refused (exit 1), and the task is the winner's.
#[test]
fn eight_processes_racing_for_a_task_have_exactly_one_winner_in_each_of_100_rounds() {
    let Some(url) = store_url() else { return };
    let env = TempHome::new();
    let racers: Vec<String> = (0..8).map(|i| format!("m{i}")).collect();
    let mut create = env
        .mail()
        .env("ROO_STORE", &url)
        .args(["team", "create", "--team", "t", "--lead", "lead"]);
    for racer in &racers {
        create = create.args(["--member", racer.as_str()]);
    }
    create.run().assert_ok();
    for round in 1..=100 {
        env.task()
            .env("ROO_STORE", &url)
            .args([
                "create",
                "--team",
                "t",
                "--subject",
                &format!("round {round}"),
            ])
            .run()
            .assert_ok();
        let children: Vec<_> = racers
            .iter()
            .map(|racer| {
                std::process::Command::new(roo_tests::bin("roo-task"))
                    .args(["claim", &round.to_string(), "--team", "t", "--as", racer])
                    .env("ROO_HOME", env.path())
                    .env("ROO_STORE", &url)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut winners = Vec::new();
        for (racer, child) in racers.iter().zip(children) {
            let out = child.wait_with_output().unwrap();
            match out.status.code() {
                Some(0) => winners.push(racer.clone()),
                Some(1) => {}
                code => panic!(
                    "round {round}, {racer}: exit {code:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let task = env
            .task()
            .env("ROO_STORE", &url)
            .args(["get", &round.to_string(), "--team", "t", "--json"])
            .run();
        assert_eq!(task.json()["owner"], winners[0].as_str(), "round {round}");
    }
}

/// Four workers, each a loop of `roo-task claim --next` processes, take 400 tasks: every
/// task exactly once.
#[test]
fn four_workers_claiming_next_take_400_tasks_each_exactly_once() {
    let Some(url) = store_url() else { return };
    let env = TempHome::new();
    env.mail()
        .env("ROO_STORE", &url)
        .args(["team", "create", "--team", "t", "--lead", "lead"])
        .args([
            "--member", "w0", "--member", "w1", "--member", "w2", "--member", "w3",
        ])
        .run()
        .assert_ok();
    let script = r#"for i in $(seq 1 400); do
        "$TASK" create --team t --subject "task $i" >/dev/null || exit 1; done"#;
    let made = std::process::Command::new("sh")
        .args(["-c", script])
        .env("TASK", roo_tests::bin("roo-task"))
        .env("ROO_HOME", env.path())
        .env("ROO_STORE", &url)
        .status()
        .unwrap();
    assert!(made.success());
    // Each worker prints the id of every task it claimed; exit 1 ends its loop.
    let worker = r#"while out=$("$TASK" claim --next --team t --as "$ME" --json); do
        printf '%s\n' "$out" | sed -n 's/.*"id": *"\([0-9]*\)".*/\1/p' | head -n1; done"#;
    let children: Vec<_> = ["w0", "w1", "w2", "w3"]
        .iter()
        .map(|me| {
            std::process::Command::new("sh")
                .args(["-c", worker])
                .env("TASK", roo_tests::bin("roo-task"))
                .env("ME", me)
                .env("ROO_HOME", env.path())
                .env("ROO_STORE", &url)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ids: Vec<u64> = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        ids.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.trim().parse::<u64>().ok()),
        );
    }
    let total = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), total, "a task was claimed twice");
    assert_eq!(total, 400, "{total} claims");
}

/// `doctor` that cannot read the quarantine says so (exit 3) rather than reporting that
/// nothing is quarantined (second review).
#[test]
fn doctor_reports_a_quarantine_it_cannot_read_instead_of_none() {
    let Some(url) = store_url() else { return };
    let env = TempHome::new();
    env.mail()
        .env("ROO_STORE", &url)
        .args(["team", "create", "--team", "t", "--lead", "lead"])
        .run()
        .assert_ok();
    psql(
        &url,
        "ALTER TABLE roo_quarantine RENAME COLUMN acknowledged TO gone",
    );
    let out = env
        .mail()
        .env("ROO_STORE", &url)
        .args(["doctor", "--team", "t"])
        .run();
    assert_eq!(out.code(), 3, "{}{}", out.stdout(), out.stderr());
    assert!(out.stderr().contains("quarantine"), "{}", out.stderr());
}

/// `store:` in the user's own config (`$ROO_HOME/config.yaml`) selects the store when
/// `ROO_STORE` is unset: the CLIs and the team runtime use it (never files behind the
/// CLIs' back), and `ROO_STORE=file` overrides it.
#[test]
fn store_in_the_user_config_selects_the_store_for_the_clis_and_the_runtime() {
    let Some(url) = store_url() else { return };
    let env = TempHome::new();
    std::fs::write(
        env.path().join("config.yaml"),
        format!("store: \"{url}\"\n"),
    )
    .unwrap();
    env.mail()
        .env_remove("ROO_STORE")
        .args(["team", "create", "--team", "t", "--lead", "lead"])
        .run()
        .assert_ok();
    assert!(!env.path().join("teams").exists(), "files were written");
    let shown = env
        .mail()
        .env_remove("ROO_STORE")
        .args(["team", "show", "--team", "t", "--json"])
        .run();
    shown.assert_ok();
    // ROO_STORE=file overrides the config: that team is not in the files.
    env.mail()
        .env("ROO_STORE", "file")
        .args(["team", "show", "--team", "t"])
        .run()
        .assert_code(2);
    // A worker looks for its team in the store: one that exists only in files is not
    // found, the store's is.
    env.mail()
        .env("ROO_STORE", "file")
        .args(["team", "create", "--team", "filesonly", "--lead", "lead"])
        .run()
        .assert_ok();
    let worker = env
        .cmd("roo-worker")
        .env_remove("ROO_STORE")
        .args(["--team", "filesonly", "--name", "alice"])
        .run();
    assert_eq!(worker.code(), 2, "{}", worker.stderr());
    assert!(
        worker.stderr().contains("has no team of that name"),
        "{}",
        worker.stderr()
    );
    // A bad value is refused, naming the file, without its value.
    std::fs::write(
        env.path().join("config.yaml"),
        "store: \"host=db password=s3cret\"\n",
    )
    .unwrap();
    let out = env
        .mail()
        .env_remove("ROO_STORE")
        .args(["team", "show", "--team", "t"])
        .run();
    assert_eq!(out.code(), 2, "{}", out.stderr());
    assert!(out.stderr().contains("config.yaml"), "{}", out.stderr());
    assert!(!out.stderr().contains("s3cret"), "{}", out.stderr());
}

/// `doctor` on the PostgreSQL store shows the presence connection's keepalive settings as
/// the server applies them, and how fast the death of a member is seen (the test server
/// is a unix socket: the settings do not apply, and a death is seen at once).
#[test]
fn doctor_shows_the_presence_connections_keepalives_on_postgresql() {
    let Some(url) = store_url() else { return };
    let home = TempHome::new();
    home.mail()
        .env("ROO_STORE", &url)
        .args(["team", "create", "--team", "t", "--lead", "lead"])
        .run()
        .assert_ok();
    let human = home
        .task()
        .env("ROO_STORE", &url)
        .args(["doctor", "--team", "t"])
        .run();
    human.assert_ok();
    let text = human.stdout();
    assert!(
        text.contains("presence connection (unix socket): tcp_keepalives_idle=0"),
        "{text}"
    );
    assert!(text.contains("tcp_user_timeout="), "{text}");
    assert!(text.contains("death detection: unix socket"), "{text}");
    // The test server's login is its superuser (docs/DISTRIBUTED.md "Authority in the
    // database").
    assert!(
        text.contains("member roles: this login may create them"),
        "{text}"
    );
    let json = home
        .mail()
        .env("ROO_STORE", &url)
        .args(["doctor", "--team", "t", "--json"])
        .run();
    json.assert_ok();
    let presence = &json.json()["presence"];
    assert_eq!(presence["unix_socket"], true, "{}", json.stdout());
    assert_eq!(presence["detects_in_seconds"], false);
    assert_eq!(presence["settings"]["tcp_keepalives_count"], "0");
    // The file store's doctor has no presence.
    let files = TempHome::new();
    files
        .mail()
        .args(["team", "create", "--team", "t", "--lead", "lead"])
        .run()
        .assert_ok();
    let out = files.mail().args(["doctor", "--team", "t", "--json"]).run();
    out.assert_ok();
    assert!(out.json().get("presence").is_none(), "{}", out.stdout());
}

/// Over TCP from another host (network namespaces, [`roo_tests::hosts`]), the presence
/// connection's session takes the product's keepalive settings and `doctor` says a death
/// is seen in seconds. Without root, `ip netns` or PostgreSQL it says `skipped` and passes.
#[test]
fn doctor_over_tcp_from_another_host_says_death_detection_takes_seconds() {
    use roo_tests::hosts::{Hosts, Need};
    let Some(hosts) = Hosts::new(&["a", "b"], &[Need::Postgres]) else {
        return;
    };
    let pg = hosts.postgres("a");
    let home = hosts.dir().join("home-b");
    std::fs::create_dir_all(&home).unwrap();
    let mail = |args: &[&str]| {
        hosts
            .cmd("b", roo_tests::bin("roo-mail"))
            .args(args)
            .env("ROO_STORE", pg.url())
            .env("ROO_HOME", &home)
            .run()
    };
    mail(&["team", "create", "--team", "t", "--lead", "lead"]).assert_ok();
    let out = mail(&["doctor", "--team", "t"]);
    out.assert_ok();
    let text = out.stdout();
    assert!(
        text.contains(
            "presence connection (TCP): tcp_keepalives_idle=2 tcp_keepalives_interval=1 \
             tcp_keepalives_count=3 tcp_user_timeout=5000"
        ),
        "{text}"
    );
    assert!(text.contains("death detection: seconds"), "{text}");
    // The harness's server has no TLS, so its URL writes sslmode=disable: said.
    assert!(
        text.contains(
            "warning: the store URL's sslmode=disable does not check the server's certificate"
        ),
        "{text}"
    );
    assert!(!text.contains(pg.password()), "{text}");
}

const MEMBER_URL: &str = "ROO_TEST_MEMBER_URL";
const MEMBER_HOME: &str = "ROO_TEST_MEMBER_HOME";

/// Helper of the test below, run in host b (this test binary again, in b's network
/// namespace): joins team `t` as carol over TCP, holds its presence, claims task 1 as
/// carol, prints `ready <epoch>`; then for each line on stdin: `send` sends a message to
/// the lead as carol and prints `sent` or `refused: <error>`; `rejoin` joins again and
/// holds a new presence, printing `rejoined <epoch>`.
#[test]
#[ignore = "helper process of a_member_behind_a_cut_link_is_declared_dead_and_fenced_when_it_comes_back"]
fn member_in_host_b() {
    use roo_store::{ClaimOptions, Member, Name, Outgoing, PgStore, RooHome, Team};
    use std::io::BufRead;
    let (Ok(url), Some(dir)) = (std::env::var(MEMBER_URL), std::env::var_os(MEMBER_HOME)) else {
        return;
    };
    let home = RooHome::new(dir).with_store(PgStore::connect(&url).unwrap());
    let team = Team::open(&home, Name::parse("t").unwrap()).unwrap();
    let carol = Name::parse("carol").unwrap();
    let join = || {
        team.join(Member::new(carol.clone(), team.name())).unwrap();
        team.hold_presence(&carol).unwrap()
    };
    let mut presence = join();
    let claimed = presence
        .team()
        .tasks()
        .claim(
            &roo_store::TaskId::parse("1").unwrap(),
            &carol,
            &ClaimOptions::default(),
        )
        .unwrap();
    assert!(matches!(claimed, roo_store::ClaimOutcome::Claimed(_)));
    println!("ready {}", presence.epoch().unwrap());
    for line in std::io::stdin().lock().lines() {
        match line.unwrap().as_str() {
            "send" => {
                let sent = presence.team().mailbox().send(
                    &carol,
                    "lead",
                    Outgoing::text("carol is back", "back"),
                );
                match sent {
                    Ok(_) => println!("sent"),
                    Err(e) => println!("refused: {e:?}"),
                }
            }
            "rejoin" => {
                drop(presence);
                presence = join();
                println!("rejoined {}", presence.epoch().unwrap());
            }
            _ => return,
        }
    }
}

/// Issue 21: a member on host b holds its presence over TCP; b's link is cut (no reset
/// reaches anyone) → the server drops b's presence session by its keepalives, a
/// `detect_dead` on the other side declares carol dead and releases her task; the link
/// back → carol's next write is refused (fenced) until she joins again, with a new epoch.
/// Without root, `ip netns` or PostgreSQL it says `skipped` and passes.
#[test]
fn a_member_behind_a_cut_link_is_declared_dead_and_fenced_when_it_comes_back() {
    use roo_store::{Name, PgStore, RooHome, TaskStatus, Team};
    use roo_tests::hosts::{Hosts, Need};
    use roo_tests::wait_until;
    use std::io::Write;
    use std::time::{Duration, Instant};
    let Some(hosts) = Hosts::new(&["a", "b"], &[Need::Postgres]) else {
        return;
    };
    let pg = hosts.postgres("a");
    let home_b = hosts.dir().join("home-b");
    std::fs::create_dir_all(&home_b).unwrap();
    let cli = |program: &str, args: &[&str]| {
        hosts
            .cmd("b", roo_tests::bin(program))
            .args(args)
            .env("ROO_STORE", pg.url())
            .env("ROO_HOME", &home_b)
            .run()
    };
    // The role creates the tables (it owns them); the lead's side then uses them.
    cli(
        "roo-mail",
        &["team", "create", "--team", "t", "--lead", "lead"],
    )
    .assert_ok();
    cli(
        "roo-task",
        &[
            "create",
            "--team",
            "t",
            "--as",
            "lead",
            "--subject",
            "carol's",
        ],
    )
    .assert_ok();
    let mut member = hosts
        .cmd("b", std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::store_pg::member_in_host_b",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(MEMBER_URL, pg.url())
        .env(MEMBER_HOME, &home_b)
        .spawn();
    let epoch: u64 = wait_until(
        "carol to hold her presence on host b",
        Duration::from_secs(60),
        || {
            let log = member.log();
            let (_, rest) = log.split_once("ready ")?;
            rest.lines().next()?.trim().parse().ok()
        },
        || member.describe(),
    );
    // The lead's side: the same database over the server's unix socket.
    let lead_dir = hosts.dir().join("home-a");
    let url = pg.admin_url().replacen("/postgres?", "/roo_test?", 1);
    let home = RooHome::new(&lead_dir).with_store(PgStore::connect(&url).unwrap());
    let team = Team::open(&home, Name::parse("t").unwrap()).unwrap();
    let lead = Name::parse("lead").unwrap();
    assert_eq!(
        team.config().unwrap().member("carol").unwrap().epoch,
        Some(epoch)
    );
    assert!(team.detect_dead(Some(&lead)).unwrap().is_empty());

    hosts.cut_link("b");
    let cut = Instant::now();
    let deaths = wait_until(
        "carol to be declared dead after her link was cut",
        Duration::from_secs(60),
        || {
            let deaths = team.detect_dead(Some(&lead)).unwrap();
            if deaths.is_empty() {
                std::thread::sleep(Duration::from_millis(100));
                return None;
            }
            Some(deaths)
        },
        || member.describe(),
    );
    eprintln!(
        "measured: carol declared dead {:.1} s after her link was cut (detect every 100 ms)",
        cut.elapsed().as_secs_f64()
    );
    assert_eq!(deaths[0].member.name, "carol");
    assert_eq!(deaths[0].released.len(), 1);
    let task = team
        .tasks()
        .get(&roo_store::TaskId::parse("1").unwrap())
        .unwrap();
    assert_eq!((task.status, task.owner), (TaskStatus::Pending, None));

    hosts.restore_link("b");
    let mut command = |line: &str, wanted: &str| {
        writeln!(member.stdin(), "{line}").unwrap();
        member.stdin().flush().unwrap();
        wait_until(
            &format!("carol's answer to {line}"),
            Duration::from_secs(60),
            || {
                let log = member.log();
                let answer = log.lines().rev().find(|l| {
                    l.starts_with("sent") || l.starts_with("refused") || l.starts_with("rejoined")
                })?;
                answer.starts_with(wanted).then(|| answer.to_owned())
            },
            || member.describe(),
        )
    };
    let refused = command("send", "refused");
    assert!(refused.contains("Fenced"), "{refused}");
    assert!(refused.contains("declared dead"), "{refused}");
    let rejoined = command("rejoin", "rejoined");
    let new_epoch: u64 = rejoined
        .trim_start_matches("rejoined ")
        .trim()
        .parse()
        .unwrap();
    assert_ne!(new_epoch, epoch);
    command("send", "sent");
    let texts: Vec<String> = team
        .mailbox()
        .read(&lead, &roo_store::ReadFilter::default())
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(texts, ["carol is back"]);
}

/// The help's exit codes: "2 usage or bad input (..., a bad ROO_STORE)"; "3 ... the
/// PostgreSQL store (ROO_STORE) unreachable or failing". A `postgresql://` URL that does
/// not parse (a port that is not a number) is a bad ROO_STORE, not a failing server, yet
/// it exits 3 ("failed to read the store URL … invalid connection string", the client's
/// reason dropped).
#[test]
fn a_store_url_that_does_not_parse_is_a_usage_error() {
    let env = TempHome::new();
    let out = env
        .task()
        .env("ROO_STORE", "postgresql://roo@db.example:nope/roo")
        .args(["list", "--team", "t"])
        .run();
    assert_eq!(out.code(), 2, "{}", out.stderr());
}

/// §8 (398f5486): "the server's message in engine errors". A login the server refuses
/// (no such database, role or password) is reported as "failed to connect …: db error":
/// `open_connection` keeps only the client error's own text, never its cause.
#[test]
fn a_refused_login_names_the_servers_reason() {
    let Some(dsn) = test_dsn() else { return };
    let Some(url) = with_database(&dsn, "roo_no_such_database") else {
        return;
    };
    let env = TempHome::new();
    let out = env
        .task()
        .env("ROO_STORE", &url)
        .args(["list", "--team", "t"])
        .run();
    assert_eq!(out.code(), 3, "{}", out.stderr());
    assert!(
        out.stderr().contains("does not exist"),
        "the server's reason is lost: {}",
        out.stderr()
    );
}

/// §8: "A lost connection (server restart, a cut link) fails what was under way on it;
/// the next operation connects again, LISTENs again and wakes every watcher to read
/// afresh." `roo-mail watch` is the CLIs' one long-running reader: the lost connection
/// wakes it at once, its read reconnects while the server still refuses connections
/// (a restart, a failover) and the watch exits 3 — a message sent a moment later is
/// never shown. (A restart is simulated on a database of its own: connections refused
/// for 2 s, the watch's session terminated.)
#[test]
fn roo_mail_watch_survives_a_server_restart() {
    let Some(dsn) = test_dsn() else { return };
    let db = format!(
        "roo_restart_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let Some(url) = with_database(&dsn, &db) else {
        return;
    };
    psql(&dsn, &format!("CREATE DATABASE {db}"));
    let env = TempHome::new();
    env.mail()
        .env("ROO_STORE", &url)
        .args([
            "team", "create", "--team", "t", "--lead", "lead", "--member", "alice",
        ])
        .run()
        .assert_ok();
    let watch = env
        .mail()
        .env("ROO_STORE", &url)
        .args([
            "watch",
            "--team",
            "t",
            "--as",
            "alice",
            "--count",
            "1",
            "--timeout",
            "30",
        ])
        .spawn();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    psql(
        &dsn,
        &format!(
            "ALTER DATABASE {db} ALLOW_CONNECTIONS false; \
             SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '{db}'"
        ),
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    psql(&dsn, &format!("ALTER DATABASE {db} ALLOW_CONNECTIONS true"));
    std::thread::sleep(std::time::Duration::from_millis(500));
    env.mail()
        .env("ROO_STORE", &url)
        .args([
            "send",
            "--team",
            "t",
            "--from",
            "lead",
            "--to",
            "alice",
            "--summary",
            "after",
            "sent after the restart",
        ])
        .run()
        .assert_ok();
    let out = watch.wait();
    let _ = std::process::Command::new("psql")
        .args([
            dsn.as_str(),
            "-qc",
            &format!("DROP DATABASE {db} WITH (FORCE)"),
        ])
        .output();
    assert_eq!(out.code(), 0, "{}", out.stderr());
    assert!(
        out.stdout().contains("sent after the restart"),
        "{}",
        out.stdout()
    );
}

/// A CLI rides out a server restart: 8 shell loops of 60 `roo-mail send` each, the server
/// stopped for 3 s in the middle (`pg_ctl stop`, then start) — a CLI started meanwhile
/// waits for it (connection refused, its socket gone, `57P03` while it starts: tried
/// again for up to 10 s before any statement ran), one cut mid-send connects again and
/// learns its change's outcome. Every send exits 0 and every message is delivered
/// exactly once. On a cluster of the test's own (restarting the shared one would fail
/// other tests).
#[test]
fn a_three_second_restart_during_eight_loops_of_sixty_sends_loses_and_fails_none() {
    let Some(cluster) = OwnCluster::start() else {
        return;
    };
    let url = fresh_schema_url(&cluster.dsn);
    let env = TempHome::new();
    let mut create = vec!["team", "create", "--team", "t", "--lead", "lead"];
    let members: Vec<String> = (0..8).map(|n| format!("m{n}")).collect();
    for member in &members {
        create.extend(["--member", member.as_str()]);
    }
    env.mail()
        .env("ROO_STORE", &url)
        .args(&create)
        .run()
        .assert_ok();
    let logs = roo_tests::TempDir::new();
    // Each loop logs `<i> <exit code>` per send, and a failure's stderr.
    let script = r#"for i in $(seq 1 60); do
        "$ROO_MAIL" send --team t --from lead --to "$TO" --summary "s $i" "m $TO $i" 2>>"$LOG.err"
        echo "$i $?" >>"$LOG"
    done"#;
    let loops: Vec<std::process::Child> = members
        .iter()
        .map(|member| {
            std::process::Command::new("sh")
                .args(["-c", script])
                .env("ROO_MAIL", roo_tests::bin("roo-mail"))
                .env("ROO_HOME", env.path())
                .env("ROO_STORE", &url)
                .env("TO", member)
                .env("LOG", logs.path().join(member))
                .spawn()
                .unwrap()
        })
        .collect();
    let sent = || {
        members
            .iter()
            .map(|m| {
                std::fs::read_to_string(logs.path().join(m))
                    .unwrap_or_default()
                    .lines()
                    .count()
            })
            .sum::<usize>()
    };
    // The restart in the middle: once about a quarter of the sends are done.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while sent() < 120 {
        assert!(
            std::time::Instant::now() < deadline,
            "the sends did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let before_restart = sent();
    cluster.restart_after(std::time::Duration::from_secs(3));
    for mut child in loops {
        assert!(child.wait().unwrap().success());
    }
    assert!(
        before_restart < 480,
        "every send was done before the restart began: it proves nothing"
    );
    let mut failures = Vec::new();
    for member in &members {
        let log = std::fs::read_to_string(logs.path().join(member)).unwrap();
        failures.extend(
            log.lines()
                .filter(|line| !line.ends_with(" 0"))
                .map(|line| format!("{member}: send {line}")),
        );
        let errors =
            std::fs::read_to_string(logs.path().join(format!("{member}.err"))).unwrap_or_default();
        failures.extend(errors.lines().map(|line| format!("{member}: {line}")));
    }
    assert!(
        failures.is_empty(),
        "sends failed:\n{}",
        failures.join("\n")
    );
    for member in &members {
        let out = env
            .mail()
            .env("ROO_STORE", &url)
            .args(["read", "--team", "t", "--as", member, "--json"])
            .run();
        out.assert_ok();
        let mut texts: Vec<String> = out
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["text"].as_str().unwrap().to_owned())
            .collect();
        texts.sort();
        let mut wanted: Vec<String> = (1..=60).map(|i| format!("m {member} {i}")).collect();
        wanted.sort();
        assert_eq!(
            texts, wanted,
            "{member}'s inbox is not each send exactly once"
        );
    }
}

/// Helper of the test below (this test binary again): joins team `t` as carol, holds her
/// presence, claims task 1, prints `ready`, and then only lives (until it is killed).
#[test]
#[ignore = "helper process of dropped_presence_connections_declare_nobody_dead_and_a_kill_9_is_still_seen"]
fn member_holding_task_1() {
    use roo_store::{ClaimOptions, Member, Name, PgStore, RooHome, Team};
    let (Ok(url), Some(dir)) = (std::env::var(MEMBER_URL), std::env::var_os(MEMBER_HOME)) else {
        return;
    };
    let home = RooHome::new(dir).with_store(PgStore::connect(&url).unwrap());
    let team = Team::open(&home, Name::parse("t").unwrap()).unwrap();
    let carol = Name::parse("carol").unwrap();
    team.join(Member::new(carol.clone(), team.name())).unwrap();
    let presence = team.hold_presence(&carol).unwrap();
    let claimed = presence
        .team()
        .tasks()
        .claim(
            &roo_store::TaskId::parse("1").unwrap(),
            &carol,
            &ClaimOptions::default(),
        )
        .unwrap();
    assert!(matches!(claimed, roo_store::ClaimOutcome::Claimed(_)));
    println!("ready");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// Team `t` on the store at `url` (lead `lead`, task 1), and carol holding her presence
/// and task 1 in a process of her own ([`member_holding_task_1`]); with the lead's side's
/// handle and the query that finds the pid of the session holding carol's presence lock
/// (0: none).
fn carol_on_task_1(
    url: &str,
) -> (
    roo_tests::TempDir,
    roo_store::Team,
    roo_tests::ChildGuard,
    String,
) {
    use roo_store::{Member, Name, NewTask, PgStore, RooHome, Team};
    use std::io::BufRead;
    let root = roo_tests::TempDir::new_in(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")));
    root.make_dirs(&["lead", "member"]);
    let home = RooHome::new(root.join("lead")).with_store(PgStore::connect(url).unwrap());
    let t = Name::parse("t").unwrap();
    let team = Team::create(
        &home,
        t.clone(),
        "",
        Member::new(Name::parse("lead").unwrap(), &t),
        vec![],
    )
    .unwrap();
    team.tasks()
        .create(NewTask {
            subject: "carol's".into(),
            description: String::new(),
            active_form: None,
            blocked_by: Vec::new(),
            blocks: Vec::new(),
            paths: Vec::new(),
            metadata: Default::default(),
            owner: None,
            by: None,
            budget: None,
        })
        .unwrap();
    let mut member = roo_tests::TestCommand::new(std::env::current_exe().unwrap())
        .args(["--exact", "suite::store_pg::member_holding_task_1"])
        .args(["--ignored", "--nocapture", "--test-threads=1"])
        .env(MEMBER_URL, url)
        .env(MEMBER_HOME, root.join("member"))
        .spawn();
    let stdout = member.child().stdout.take().unwrap();
    let ready = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        // libtest prints the test's name first, on the same line.
        .any(|line| line.ends_with("ready"));
    assert!(ready, "the member ended before holding its presence");
    let config = team.config().unwrap();
    let carol = config.member("carol").unwrap();
    let key = roo_store::presence_key("t", &carol.agent_id, carol.epoch.unwrap()) as u64;
    let holder = format!(
        "SELECT coalesce(max(pid), 0) FROM pg_locks WHERE locktype = 'advisory' AND granted \
         AND objsubid = 1 AND classid = {}::oid AND objid = {}::oid \
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        key >> 32,
        key & 0xffff_ffff
    );
    (root, team, member, holder)
}

/// Issue 33: a member's presence connection dropped 20 times, 0.4 s apart
/// (`pg_terminate_backend`, as a proxy reset or an idle killer would) while the lead's
/// side runs `detect_dead` every 10 ms (tighter than the lead's 200 ms monitor, so one
/// look at the lock while the member reconnects is caught) → nobody is declared dead and
/// the member keeps its task; then `kill -9` of the member → declared dead, its task
/// released, within a generous bound (the time measured is printed).
#[test]
fn dropped_presence_connections_declare_nobody_dead_and_a_kill_9_is_still_seen() {
    use roo_store::{Name, TaskId, TaskStatus};
    use roo_tests::wait_until;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    let Some(url) = store_url() else {
        return;
    };
    let (_root, team, member, holder) = carol_on_task_1(&url);
    let lead = Name::parse("lead").unwrap();
    let task_1 = TaskId::parse("1").unwrap();

    // The lead's side looks every 10 ms while the member's connection is dropped.
    let stop = Arc::new(AtomicBool::new(false));
    let deaths = Arc::new(Mutex::new(Vec::new()));
    let looking = std::thread::spawn({
        let (team, lead, stop, deaths) = (team.clone(), lead.clone(), stop.clone(), deaths.clone());
        move || {
            let mut looks = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let found = team.detect_dead(Some(&lead)).unwrap();
                deaths.lock().unwrap().extend(found);
                looks += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            looks
        }
    });
    let mut last = 0;
    for n in 1..=20 {
        let pid: i64 = wait_until(
            &format!("carol's presence lock to be held again before drop {n}"),
            Duration::from_secs(10),
            || {
                let declared = deaths.lock().unwrap();
                assert!(
                    declared.is_empty(),
                    "declared dead after {} drop(s): {:?}",
                    n - 1,
                    declared
                        .iter()
                        .map(|d| &d.member.dead_reason)
                        .collect::<Vec<_>>()
                );
                drop(declared);
                let pid: i64 = psql(&url, &holder).parse().ok()?;
                (pid != 0 && pid != last).then_some(pid)
            },
            || format!("{:#?}", team.config().map(|c| c.members)),
        );
        assert_eq!(
            psql(&url, &format!("SELECT pg_terminate_backend({pid})")),
            "t"
        );
        last = pid;
        std::thread::sleep(Duration::from_millis(400));
    }
    stop.store(true, Ordering::Relaxed);
    let looks = looking.join().unwrap();
    let declared: Vec<String> = deaths
        .lock()
        .unwrap()
        .iter()
        .map(|d| format!("{}: {:?}", d.member.name, d.member.dead_reason))
        .collect();
    eprintln!("measured: 20 drops of carol's presence connection, {looks} detect_dead looks");
    assert!(declared.is_empty(), "declared dead: {declared:?}");
    let config = team.config().unwrap();
    assert!(config.member("carol").unwrap().dead_at.is_none());
    let task = team.tasks().get(&task_1).unwrap();
    assert_eq!(
        (task.status, task.owner),
        (TaskStatus::InProgress, Some(Name::parse("carol").unwrap()))
    );

    // kill -9: the session ends, the lock is freed and never comes back.
    let killed = std::process::Command::new("kill")
        .args(["-9", &member.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let at = Instant::now();
    let deaths = wait_until(
        "carol to be declared dead after kill -9",
        Duration::from_secs(30),
        || {
            let deaths = team.detect_dead(Some(&lead)).unwrap();
            if deaths.is_empty() {
                std::thread::sleep(Duration::from_millis(200));
                return None;
            }
            Some(deaths)
        },
        || format!("{:#?}", team.config().map(|c| c.members)),
    );
    eprintln!(
        "measured: carol declared dead {:.2} s after kill -9 (detect every 200 ms)",
        at.elapsed().as_secs_f64()
    );
    assert_eq!(deaths[0].member.name, "carol");
    assert_eq!(deaths[0].released.len(), 1);
    let task = team.tasks().get(&task_1).unwrap();
    assert_eq!((task.status, task.owner), (TaskStatus::Pending, None));
}

/// Issue 33: a member's presence connection dropped 10 times, 0.4 s apart (its lock free
/// for the 12–25 ms of each reconnect), while a peer's side reclaims tasks of gone owners
/// and claims the next ready task every 5 ms (`roo-task reclaim`, then `roo-task claim`)
/// → the peer never gets the member's task; then `kill -9` of the member → the reclaim
/// releases it (after the absence window) and the peer claims it.
#[test]
fn dropped_presence_connections_release_no_task_to_a_peer_that_reclaims_and_claims() {
    use roo_store::{ClaimOptions, Member, Name, TaskId, TaskStatus};
    use roo_tests::wait_until;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    let Some(url) = store_url() else {
        return;
    };
    let (_root, team, member, holder) = carol_on_task_1(&url);
    let (lead, dave) = (Name::parse("lead").unwrap(), Name::parse("dave").unwrap());
    team.add_member(Member::new(dave.clone(), team.name()))
        .unwrap();
    let task_1 = TaskId::parse("1").unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let taken = Arc::new(Mutex::new(Vec::new()));
    let peer = std::thread::spawn({
        let (team, lead, dave, stop, taken) = (
            team.clone(),
            lead.clone(),
            dave.clone(),
            stop.clone(),
            taken.clone(),
        );
        move || {
            let mut rounds = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let list = team.tasks();
                let reclaimed = list.reclaim_gone(Some(&lead)).unwrap();
                let claimed = list.claim_next(&dave, &ClaimOptions::default()).unwrap();
                let mut taken = taken.lock().unwrap();
                taken.extend(
                    reclaimed
                        .into_iter()
                        .map(|r| format!("reclaimed: {}", r.reason)),
                );
                taken.extend(claimed.map(|t| format!("dave claimed task {}", t.id)));
                rounds += 1;
                drop(taken);
                std::thread::sleep(Duration::from_millis(5));
            }
            rounds
        }
    });
    let mut last = 0;
    for n in 1..=10 {
        let pid: i64 = wait_until(
            &format!("carol's presence lock to be held again before drop {n}"),
            Duration::from_secs(10),
            || {
                let taken = taken.lock().unwrap();
                assert!(taken.is_empty(), "after {} drop(s): {taken:?}", n - 1);
                drop(taken);
                let pid: i64 = psql(&url, &holder).parse().ok()?;
                (pid != 0 && pid != last).then_some(pid)
            },
            || format!("{:#?}", team.config().map(|c| c.members)),
        );
        assert_eq!(
            psql(&url, &format!("SELECT pg_terminate_backend({pid})")),
            "t"
        );
        last = pid;
        std::thread::sleep(Duration::from_millis(400));
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = peer.join().unwrap();
    eprintln!("measured: 10 drops of carol's presence connection, {rounds} reclaim+claim rounds");
    let taken = taken.lock().unwrap().clone();
    assert!(taken.is_empty(), "{taken:?}");
    let task = team.tasks().get(&task_1).unwrap();
    assert_eq!(
        (task.status, task.owner),
        (TaskStatus::InProgress, Some(Name::parse("carol").unwrap()))
    );

    // kill -9: the lock is freed for good; the reclaim releases the task after the window.
    let killed = std::process::Command::new("kill")
        .args(["-9", &member.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let at = Instant::now();
    let claimed = wait_until(
        "dave to claim carol's task after kill -9",
        Duration::from_secs(30),
        || {
            let list = team.tasks();
            list.reclaim_gone(Some(&lead)).unwrap();
            let claimed = list.claim_next(&dave, &ClaimOptions::default()).unwrap();
            if claimed.is_none() {
                std::thread::sleep(Duration::from_millis(200));
            }
            claimed
        },
        || format!("{:#?}", team.tasks().get(&task_1)),
    );
    eprintln!(
        "measured: carol's task claimed by dave {:.2} s after kill -9 (reclaim every 200 ms)",
        at.elapsed().as_secs_f64()
    );
    assert_eq!(claimed.id, task_1);
    let notes: Vec<_> = claimed.notes.iter().map(|n| n.text.clone()).collect();
    assert!(
        notes.iter().any(|n| n.contains("reclaimed from carol")),
        "{notes:?}"
    );
}

/// Issue 33 (connection budget): 50 `roo-mail watch` and then 50 `roo-mail send` started
/// at once, at a server with `max_connections=100` (a cluster of the test's own): every
/// send exits 0 and every watcher prints its message. A watcher holds one session while
/// it waits (its presence connection, with the LISTENs; its request session is closed
/// between reads and opened again by the next read); a send takes one, retried while the
/// server is full. Before, a watcher held two: 50 filled the server and 0 of 50 sends got
/// in (each failed with exit 3 after 10 s).
#[test]
fn fifty_watchers_and_fifty_senders_deliver_every_message_in_a_hundred_connections() {
    use std::io::BufRead;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};
    /// Every child killed and reaped, whatever the test's outcome.
    struct Children(Vec<Child>);
    impl Drop for Children {
        fn drop(&mut self) {
            for child in &mut self.0 {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
    let Some(cluster) = OwnCluster::start() else {
        return;
    };
    cluster.set_max_connections(100);
    let url = fresh_schema_url(&cluster.dsn);
    let env = TempHome::new();
    let members: Vec<String> = (1..=50).map(|n| format!("m{n}")).collect();
    let mut create = vec!["team", "create", "--team", "t", "--lead", "lead"];
    for member in &members {
        create.extend(["--member", member.as_str()]);
    }
    env.mail()
        .env("ROO_STORE", &url)
        .args(&create)
        .run()
        .assert_ok();
    let outputs = roo_tests::TempDir::new();
    let mail = |args: &[&str]| {
        let mut command = Command::new(roo_tests::bin("roo-mail"));
        command
            .args(args)
            .env("ROO_HOME", env.path())
            .env("ROO_STORE", &url)
            .env_remove("ROO_TEAM")
            .env_remove("ROO_AGENT_NAME");
        command
    };
    // The watchers, one after another: each says it watches before the next starts.
    let begun = Instant::now();
    let mut watchers = Children(Vec::new());
    for member in &members {
        let mut child = mail(&[
            "watch",
            "--team",
            "t",
            "--as",
            member,
            "--count",
            "1",
            "--timeout",
            "120",
        ])
        .stdout(std::fs::File::create(outputs.path().join(member)).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let stderr = child.stderr.take().unwrap();
        watchers.0.push(child);
        let mut lines = std::io::BufReader::new(stderr).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        assert!(
            first.contains("watching the inbox"),
            "watcher {member}: {first}"
        );
        // Its stderr stays drained (nothing more is expected).
        std::thread::spawn(move || lines.for_each(drop));
    }
    // Each waits with one session once its first read is done.
    let sessions = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' \
                    AND pid <> pg_backend_pid()";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held: usize = psql(&cluster.dsn, sessions).parse().unwrap();
        if held <= members.len() {
            eprintln!(
                "measured: {held} sessions held by 50 waiting watchers, {:.1} s after the \
                 first started",
                begun.elapsed().as_secs_f64()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "50 watchers still hold {held} sessions"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The senders, all at once.
    let started = Instant::now();
    let senders: Vec<(String, Child)> = members
        .iter()
        .map(|member| {
            let child = mail(&[
                "send",
                "--team",
                "t",
                "--from",
                "lead",
                "--to",
                member,
                "--summary",
                "hello",
                &format!("for {member}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
            (member.clone(), child)
        })
        .collect();
    let mut failed = Vec::new();
    for (member, child) in senders {
        let out = child.wait_with_output().unwrap();
        if !out.status.success() {
            failed.push(format!(
                "to {member}: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    eprintln!(
        "measured: 50 sends done {:.2} s after they started",
        started.elapsed().as_secs_f64()
    );
    assert!(failed.is_empty(), "sends failed:\n{}", failed.join("\n"));
    for (member, child) in members.iter().zip(&mut watchers.0) {
        assert!(child.wait().unwrap().success(), "watcher {member}");
        let printed = std::fs::read_to_string(outputs.path().join(member)).unwrap();
        assert!(
            printed.contains(&format!("for {member}")),
            "{member}: {printed}"
        );
    }
    eprintln!(
        "measured: every watcher printed its message {:.2} s after the sends started",
        started.elapsed().as_secs_f64()
    );
}
