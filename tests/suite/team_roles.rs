//! Issue 33's end-to-end check of member roles (docs/DISTRIBUTED.md "Authority in the
//! database"): two teams on one PostgreSQL server, and a teammate host of team A that
//! turns hostile. Hosts are network namespaces (`roo_tests::hosts`): PostgreSQL and the
//! lead of team `crew` on A, `sshd` on B and C. The lead spawns, over ssh, the real
//! `roo-worker` alice on C (she holds her presence and a task) and mallory on B, whose
//! host entry's `roo_worker` is this test binary's helper [`mallory_on_host_b`]: it takes
//! the lead's handoff exactly as `roo-worker` does (the same library calls, the same
//! re-execution with the sealed secrets), joins as itself so the spawn completes, and
//! then uses the credentials it was handed, from B's namespace, for every attack of the
//! issue, writing what the server answered to JSON files the test reads. Team `vault`
//! (team B), made on the owner's login, holds a secret.
//!
//! The test asserts that mallory was handed a member role (`roo_m_…`, never the lead's
//! password), that each attack was refused by the server (SQLSTATE 42501, a `roo_m_*`
//! function's refusal, rows hidden by row-level security, the held row's session ended
//! by the server), and that afterwards the state is intact: the secret unread by team A,
//! the lead key and roster unchanged, the task list there, alice alive and not declared
//! dead, a claim of the lead's going through once the held row is taken back, and alice
//! declared dead after a `kill -9` although mallory then holds her presence key.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use roo_store::{Name, PgStore, RooHome, Team, Timestamp};
use roo_tests::hosts::{Hosts, Need, NsCommand, Postgres, Sshd};
use roo_tests::{TestCommand, bin, wait_until};
use serde_json::Value;

/// Team A, whose host B turns hostile.
const TEAM: &str = "crew";
/// Team B, on the same server.
const VAULT: &str = "vault";
/// What team B's lead told carol.
const SECRET: &str = "deploy password is hunter2";
/// The text of every message mallory forges.
const FORGED: &str = "FORGED-BY-MALLORY";
/// Mallory's directory (its reports, and the test's go-ahead files), set by its wrapper.
const MALLORY_DIR: &str = "ROO_TEST_MALLORY_DIR";
/// The lead's API key.
const KEY: &str = "sk-canary-roles-3303";
/// The lead key of team A as it is before the attacks is compared, this is what mallory
/// tries to set.
const MALLORY_KEY: &str = "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd";

/// The lead makes team `crew`, spawns alice on host c with a task and mallory on host b,
/// and waits (its Bash ends when the test writes `go-final`). Alice works on her task
/// until the test kills her.
const SCRIPT: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew, description: "two teams, one server"}}
    - tool_calls:
        - {name: Agent, input: {name: alice, host: c, task: true, description: "long job", prompt: "Work on your task until go-alice appears."}}
    - tool_calls:
        - {name: Agent, input: {name: mallory, host: b, description: "helper", prompt: "Help alice."}}
    - tool_calls:
        - {name: Bash, input: {command: "while [ ! -e go-final ]; do sleep 0.2; done; echo go", timeout: 600000}}
    - text: "Done."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
  alice:
    - tool_calls:
        - {name: Bash, input: {command: "touch started; while [ ! -e go-alice ]; do sleep 0.2; done; echo go", timeout: 600000}}
    - text: "Waiting."
    - text: "Done."
    - text: "Done."
"#;

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

fn git(dir: &Path, args: &[&str]) {
    TestCommand::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .run()
        .assert_ok();
}

fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The files of the test, under the hosts' directory.
struct Setup {
    root: PathBuf,
    project: PathBuf,
    mallory: PathBuf,
    sockets: [String; 2],
}

/// The lead's project and a clone of it per host; on C a wrapper that runs `roo-worker`
/// with a home of the test's; on B one that serves the handoff with `roo-worker` (the
/// host's real one) but runs [`mallory_on_host_b`] as the worker; the ssh config
/// reaching `b` and `c`; the lead's user config naming both hosts, with member roles
/// required.
fn prepare(hosts: &Hosts, sshd_b: &Sshd<'_>, sshd_c: &Sshd<'_>) -> Setup {
    let root = hosts.dir().join("team");
    let project = root.join("project");
    let mallory = root.join("mallory");
    for dir in [
        "roo-a", "roo-b", "roo-c", "home-b", "home-c", "project", "mallory",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(project.join("a.txt"), "a\n").unwrap();
    git(&project, &["init", "-q"]);
    git(&project, &["config", "user.name", "Lead"]);
    git(&project, &["config", "user.email", "lead@example.com"]);
    git(&project, &["add", "a.txt"]);
    git(&project, &["commit", "-qm", "init"]);
    for host in ["b", "c"] {
        git(
            &root,
            &[
                "clone",
                "-q",
                &project.display().to_string(),
                &root.join(format!("remote-{host}")).display().to_string(),
            ],
        );
    }
    let exports = |host: &str| {
        format!(
            "#!/bin/sh\nROO_HOME='{roo}'\nHOME='{home}'\nGIT_CONFIG_NOSYSTEM=1\n\
             PATH='{bins}':$PATH\n{MALLORY_DIR}='{mallory}'\n\
             export ROO_HOME HOME GIT_CONFIG_NOSYSTEM PATH {MALLORY_DIR}\n",
            roo = root.join(format!("roo-{host}")).display(),
            home = root.join(format!("home-{host}")).display(),
            bins = bin("roo-mail").parent().unwrap().display(),
            mallory = if host == "b" {
                mallory.display().to_string()
            } else {
                String::new()
            },
        )
    };
    let worker = bin("roo-worker");
    write_script(
        &root.join("worker-c"),
        &format!(
            "{}exec '{}' \"$@\"\n",
            exports("c")
                .replace(&format!("{MALLORY_DIR}=''\n"), "")
                .replace(&format!(" {MALLORY_DIR}\n"), "\n"),
            worker.display()
        ),
    );
    // Mallory's host: the handoff is served by the host's real roo-worker; the worker the
    // pane runs (its flags dropped: mallory knows its name) is the hostile helper.
    write_script(
        &root.join("worker-b"),
        &format!(
            "{}if [ \"$1\" = --serve-handoff ]; then exec '{worker}' \"$@\"; fi\n\
             exec '{test}' --exact suite::team_roles::mallory_on_host_b --ignored \
             --nocapture --test-threads=1 >>'{log}' 2>&1\n",
            exports("b"),
            worker = worker.display(),
            test = std::env::current_exe().unwrap().display(),
            log = mallory.join("mallory.log").display(),
        ),
    );
    let ssh_config = root.join("ssh_config");
    let mut config = String::new();
    for (host, sshd) in [("b", sshd_b), ("c", sshd_c)] {
        config.push_str(&format!(
            "Host {host}\n  HostName {addr}\n  User {user}\n  IdentityFile {id}\n  \
             IdentitiesOnly yes\n  IdentityAgent none\n  UserKnownHostsFile {known}\n  \
             GlobalKnownHostsFile /dev/null\n  ConnectTimeout 10\n",
            addr = hosts.addr(host),
            user = sshd.destination().split('@').next().unwrap(),
            id = sshd.identity().display(),
            known = sshd.known_hosts().display(),
        ));
    }
    std::fs::write(&ssh_config, config).unwrap();
    // One private tmux server per host: the file system is shared, so one socket name
    // would put both hosts' panes in the first host's server.
    let sockets = ["b", "c"].map(|h| format!("roo-test-{}-roles-{h}", std::process::id()));
    let mut user_config = String::from("member_roles: required\nhosts:\n");
    for (host, socket) in ["b", "c"].iter().zip(&sockets) {
        user_config.push_str(&format!(
            "  {host}:\n    ssh: {host}\n    repo: {repo}\n    roo_worker: {worker}\n    \
             ssh_config: {config}\n    tmux_socket: {socket}\n",
            repo = root.join(format!("remote-{host}")).display(),
            worker = root.join(format!("worker-{host}")).display(),
            config = ssh_config.display(),
        ));
    }
    std::fs::write(root.join("roo-a/config.yaml"), user_config).unwrap();
    std::fs::write(root.join("script.yaml"), SCRIPT.trim_start()).unwrap();
    Setup {
        root,
        project,
        mallory,
        sockets,
    }
}

/// `roo-mail`/`roo-task` on host a with the owner's login (the lead's).
fn owner_cli<'h>(hosts: &'h Hosts, pg: &Postgres, setup: &Setup, program: &str) -> NsCommand<'h> {
    hosts
        .cmd("a", bin(program))
        .env("ROO_STORE", pg.url())
        .env("ROO_HOME", setup.root.join("roo-a"))
}

/// `sql` run by the cluster's superuser over its unix socket, on the store's database:
/// what it printed (`-At`).
fn admin_sql(pg: &Postgres, sql: &str) -> String {
    let url = pg.admin_url().replacen("/postgres?", "/roo_test?", 1);
    roo_tests::pg::psql(&url, sql)
}

/// The user of a `postgresql://user[:password]@…` URL, and whether it has a password.
fn url_user(url: &str) -> (String, bool) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let userinfo = rest.split_once('@').map_or("", |(u, _)| u);
    match userinfo.split_once(':') {
        Some((user, _)) => (user.to_owned(), true),
        None => (userinfo.to_owned(), false),
    }
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// The pid of the session holding advisory lock `key` (granted), if any.
fn holder_of(pg: &Postgres, key: i64) -> Option<String> {
    let out = admin_sql(
        pg,
        &format!(
            "SELECT l.pid || ' ' || a.usename FROM pg_locks l JOIN pg_stat_activity a \
             USING (pid) WHERE l.locktype = 'advisory' AND l.granted \
             AND ((l.classid::int8 << 32) | l.objid::int8) = {key}"
        ),
    );
    (!out.is_empty()).then_some(out)
}

/// Issue 33's done criterion: a teammate host of team A, with what the real spawn
/// handed it, is refused by the server when it reads team B, sends as the lead, answers
/// a request, rewrites the roster or the lead key, deletes the task list, terminates a
/// peer's backend, holds a row lock past the limit and holds a peer's presence key.
#[test]
fn a_hostile_teammate_host_is_refused_by_the_server_in_everything_beyond_its_member() {
    let Some(hosts) = Hosts::new(&["a", "b", "c"], &[Need::Postgres, Need::Sshd]) else {
        return;
    };
    let pg = hosts.postgres("a");
    pg.allow_member_roles();
    let sshd_b = hosts.sshd("b");
    let sshd_c = hosts.sshd("c");
    let setup = prepare(&hosts, &sshd_b, &sshd_c);
    let _servers = setup.sockets.clone().map(roo_tests::TmuxServer);
    let mallory_dir = &setup.mallory;

    // Team B, on the owner's login: carol has a secret from her lead.
    owner_cli(&hosts, &pg, &setup, "roo-mail")
        .args(["team", "create", "--team", VAULT, "--lead", "boss"])
        .args(["--member", "carol"])
        .run()
        .assert_ok();
    owner_cli(&hosts, &pg, &setup, "roo-mail")
        .args(["send", "--team", VAULT, "--from", "boss", "--to", "carol"])
        .args(["--summary", "secret", SECRET])
        .run()
        .assert_ok();

    let lead = hosts
        .cmd("a", "sh")
        .arg("-c")
        .arg(format!(
            "cd '{project}' && exec '{lead}' -p 'Run the job with alice and mallory.' \
             --provider script --script '{script}' --permission-mode bypassPermissions \
             --output-format stream-json --team-timeout 600",
            project = setup.project.display(),
            lead = bin("roo-lead").display(),
            script = setup.root.join("script.yaml").display(),
        ))
        .env("ROO_HOME", setup.root.join("roo-a"))
        .env("ROO_STORE", pg.url())
        .env("OPENAI_API_KEY", KEY)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .spawn();
    let context = || {
        let log = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        format!(
            "lead:\n{}\nmallory:\n{}\nalice's log on C:\n{}",
            lead.log(),
            log(mallory_dir.join("mallory.log")),
            log(setup
                .root
                .join(format!("roo-c/teams/{TEAM}/logs/alice.log"))),
        )
    };
    let wait = |what: &str, secs: u64, check: &mut dyn FnMut() -> Option<()>| {
        let mut checked = || {
            if let Some(status) = hosts.exit_status(&lead) {
                panic!("the lead ended ({status}) before {what}:\n{}", context());
            }
            let mallory = std::fs::read_to_string(mallory_dir.join("mallory.log"));
            if mallory.is_ok_and(|log| log.contains("panicked at")) {
                panic!("mallory failed before {what}:\n{}", context());
            }
            check()
        };
        wait_until(what, Duration::from_secs(secs), &mut checked, context);
    };
    let file = |name: &str| mallory_dir.join(name);
    let go = |step: &str| std::fs::write(file(step), "").unwrap();

    // Mallory took its handoff and joined; what it was handed is a member role's login.
    wait("mallory to take its handoff and join", 180, &mut || {
        file("joined").exists().then_some(())
    });
    let loot = read_json(&file("loot.json")).expect("mallory's loot.json");
    let store_url = loot["roo_store"].as_str().unwrap_or_default().to_owned();
    let handed_password = loot["pgpassword"].as_str().unwrap_or_default().to_owned();
    let (user, url_has_password) = url_user(&store_url);
    assert!(
        user.starts_with("roo_m_"),
        "mallory's host was handed the login {user:?}, not a member role (roo_m_…): the \
         spawn gives a teammate host the lead's own login"
    );
    assert!(
        !store_url.contains(pg.password()) && !handed_password.contains(pg.password()),
        "the lead's password reached mallory's host"
    );
    assert!(!url_has_password, "the member's password is in ROO_STORE");
    assert!(!handed_password.is_empty(), "no PGPASSWORD handed over");
    let session_user = loot["session_user"].as_str().unwrap_or_default();
    assert_eq!(session_user, user, "the server's session_user");

    // Team A before the attacks, as the lead's server sees it.
    let watch_home = RooHome::new(setup.root.join("watcher")).with_store(
        PgStore::connect(&pg.admin_url().replacen("/postgres?", "/roo_test?", 1)).unwrap(),
    );
    let team = Team::open(&watch_home, name(TEAM)).unwrap();
    let vault = Team::open(&watch_home, name(VAULT)).unwrap();
    let alice = || team.config().unwrap().member("alice").unwrap().clone();
    wait("alice to hold her presence on host c", 120, &mut || {
        let a = alice();
        (a.epoch.is_some() && a.host.as_deref() == Some("c")).then_some(())
    });
    let before = team.config().unwrap();
    let roster = |c: &roo_store::TeamConfig| -> Vec<String> {
        c.members.iter().map(|m| m.name.to_string()).collect()
    };
    assert!(before.lead_key.is_some(), "{before:?}");
    let tasks_before = team.tasks().list(&Default::default()).unwrap();
    assert_eq!(tasks_before.len(), 1, "{tasks_before:?}");
    let alice_before = alice();
    let alice_key =
        roo_store::presence_key(TEAM, &alice_before.agent_id, alice_before.epoch.unwrap());
    let alice_holder = holder_of(&pg, alice_key).expect("alice's presence lock");
    let alice_backend = alice_holder.split(' ').next().unwrap().to_owned();
    assert!(
        alice_holder.contains(" roo_m_") && !alice_holder.ends_with(&user),
        "alice's presence session: {alice_holder}"
    );

    // Alice's inbox has a message, so a forged one is added to a real inbox.
    owner_cli(&hosts, &pg, &setup, "roo-mail")
        .args(["send", "--team", TEAM, "--from", "lead", "--to", "alice"])
        .args(["--summary", "note", "keep going"])
        .run()
        .assert_ok();

    // The attacks.
    go("go-attacks");
    wait("mallory's attacks", 120, &mut || {
        file("attacks.json").exists().then_some(())
    });
    let report = read_json(&file("attacks.json")).expect("attacks.json");
    eprintln!("mallory's report: {report:#}");
    let attempts = report["attempts"].as_array().unwrap().clone();
    let find = |attack: &str| -> Vec<&Value> {
        attempts.iter().filter(|a| a["attack"] == attack).collect()
    };
    let show = |a: &Value| format!("{a}");
    // Every write refused with SQLSTATE 42501 (permission denied, or a roo_m_*
    // function's refusal), or, through the store, with the server's sentence.
    for attack in [
        "send as the lead",
        "answer a request",
        "rewrite the roster or key",
        "delete the task list",
        "terminate a peer's backend",
        "hold a row lock",
    ] {
        let tries = find(attack);
        assert!(!tries.is_empty(), "no attempt at {attack}: {report:#}");
        for a in tries {
            match a["via"].as_str() {
                // A session that ended meanwhile (the test's own `psql`) is no refusal,
                // and no success either: `pg_terminate_backend` says false.
                Some("sql") if a["pid"].is_string() && a["rows"] == "f" => {}
                Some("sql") => assert_eq!(
                    a["sqlstate"].as_str(),
                    Some("42501"),
                    "{attack}: not refused by the server: {}",
                    show(a)
                ),
                _ => assert!(
                    a["error"].as_str().is_some_and(|e| e.contains("member")),
                    "{attack}: not refused by the server: {}",
                    show(a)
                ),
            }
        }
    }
    for (how, wanted) in [
        (
            "a forged message from the lead through roo_m_write",
            "may send only as itself",
        ),
        (
            "a permission_response through roo_m_write",
            "only the lead may",
        ),
        (
            "a plan_approval_response through roo_m_write",
            "only the lead may",
        ),
        ("a task_assignment through roo_m_write", "only the lead may"),
        (
            "a member added through roo_m_write",
            "may not change the roster",
        ),
        (
            "a new lead_key through roo_m_write",
            "may not change the team's settings",
        ),
        ("roo_m_delete of the task list", "may not delete"),
        (
            "a null task list through roo_m_write",
            "may not remove the task list",
        ),
        ("a raw UPDATE of alice's inbox", "permission denied"),
        ("a raw DELETE of the task list", "permission denied"),
        ("SELECT … FOR UPDATE of the task list", "permission denied"),
    ] {
        let a = attempts
            .iter()
            .find(|a| a["how"] == how)
            .unwrap_or_else(|| panic!("no attempt {how:?}: {report:#}"));
        assert!(
            a["message"].as_str().is_some_and(|m| m.contains(wanted)),
            "{how}: {}",
            show(a)
        );
    }
    // Reading team B: nothing of it is visible, through the store or in SQL.
    for a in find("read team B") {
        match a["via"].as_str() {
            Some("sql") => assert_eq!(a["rows"].as_str(), Some("0"), "{}", show(a)),
            _ => assert!(a["error"].is_string(), "{}", show(a)),
        }
    }
    assert_eq!(find("read team B").len(), 4, "{report:#}");
    // Alice's presence session was among those it tried to end.
    assert!(
        find("terminate a peer's backend").iter().any(|a| {
            a["pid"].as_str() == Some(alice_backend.as_str()) && a["sqlstate"] == "42501"
        }),
        "{report:#}"
    );

    // Afterwards the state is intact.
    let after = team.config().unwrap();
    assert_eq!(after.lead_key, before.lead_key);
    assert_eq!(roster(&after), roster(&before));
    assert_eq!(
        admin_sql(
            &pg,
            &format!(
                "SELECT count(*) FROM roo_doc WHERE doc::text LIKE '%{FORGED}%' \
                 OR doc::text LIKE '%{MALLORY_KEY}%'"
            )
        ),
        "0",
        "a forged message or key reached the store"
    );
    assert_eq!(
        admin_sql(
            &pg,
            &format!(
                "SELECT count(*) FROM roo_doc WHERE key LIKE 'teams/{TEAM}/%' \
                 AND doc::text LIKE '%hunter2%'"
            )
        ),
        "0"
    );
    let carol = vault
        .mailbox()
        .read(&name("carol"), &roo_store::ReadFilter::default())
        .unwrap();
    assert_eq!(carol.len(), 1);
    assert_eq!(carol[0].text, SECRET);
    assert_eq!(vault.mailbox().unread_count(&name("carol")).unwrap(), 1);
    let listed = owner_cli(&hosts, &pg, &setup, "roo-task")
        .args(["list", "--team", TEAM, "--json"])
        .run();
    listed.assert_ok();
    assert!(listed.stdout().contains("\"id\""), "{}", listed.stdout());
    assert_eq!(team.tasks().list(&Default::default()).unwrap().len(), 1);
    let a = alice();
    assert!(a.dead_at.is_none(), "alice declared dead: {a:?}");
    assert_eq!(a.epoch, alice_before.epoch);
    assert_eq!(
        holder_of(&pg, alice_key).as_deref(),
        Some(alice_holder.as_str()),
        "alice's presence session ended"
    );
    let config = team.config().unwrap();
    assert_ne!(
        team.liveness(&config)
            .unwrap()
            .observed_state(config.member("alice").unwrap()),
        roo_store::MemberState::Dead
    );

    // A row held past the limit: the server ends mallory's session, and a claim by a
    // legitimate member (the lead) goes through within the 20 s limit and a lock wait.
    let created = owner_cli(&hosts, &pg, &setup, "roo-task")
        .args([
            "create",
            "--team",
            TEAM,
            "--as",
            "lead",
            "--subject",
            "wanted",
        ])
        .args(["--json"])
        .run();
    created.assert_ok();
    let id = serde_json::from_str::<Value>(&created.stdout()).unwrap()["id"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("roo-task create --json: {}", created.stdout()));
    go("go-rowlock");
    wait("mallory to hold the task list's row", 60, &mut || {
        file("row-locked").exists().then_some(())
    });
    let held = Instant::now();
    let mut failures = Vec::new();
    loop {
        let out = owner_cli(&hosts, &pg, &setup, "roo-task")
            .args(["claim", &id, "--team", TEAM, "--as", "lead"])
            .run();
        if out.code() == 0 {
            break;
        }
        failures.push(format!(
            "{:.1} s: {}",
            held.elapsed().as_secs_f64(),
            out.stderr()
        ));
        assert!(
            held.elapsed() < Duration::from_secs(50),
            "the lead never got the task list mallory holds:\n{}\n{}",
            failures.join("\n"),
            context()
        );
    }
    eprintln!(
        "figure: the task list's row held by mallory -> the lead's claim went through: {:.1} s \
         ({} claims failed before)",
        held.elapsed().as_secs_f64(),
        failures.len()
    );
    wait("mallory's row-lock report", 90, &mut || {
        file("rowlock.json").exists().then_some(())
    });
    let rowlock = read_json(&file("rowlock.json")).unwrap();
    eprintln!("mallory's row lock: {rowlock:#}");
    assert_eq!(
        rowlock["ended_by"].as_str(),
        Some("57P01"),
        "mallory's session holding the row was not ended by the server: {rowlock:#}"
    );
    let held_ms = rowlock["held_ms"].as_u64().unwrap();
    assert!(
        (19_000..50_000).contains(&held_ms),
        "mallory held the row {held_ms} ms"
    );

    // A peer's presence key: mallory queues for alice's key; alice is killed (-9);
    // mallory's session takes the key at once, and the lead declares alice dead all the
    // same.
    go("go-presence");
    wait("mallory to wait for alice's presence key", 60, &mut || {
        let waiting = admin_sql(
            &pg,
            &format!(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted \
                 AND ((classid::int8 << 32) | objid::int8) = {alice_key}"
            ),
        );
        (waiting == "1").then_some(())
    });
    let pid = alice().pid.expect("alice's pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let killed = Instant::now();
    wait("mallory to hold alice's presence key", 60, &mut || {
        file("holding-key").exists().then_some(())
    });
    let got: Timestamp = std::fs::read_to_string(file("holding-key"))
        .ok()
        .and_then(|t| Timestamp::parse(t.trim()))
        .expect("holding-key holds a time");
    let holder = holder_of(&pg, alice_key).unwrap_or_default();
    assert!(
        holder.ends_with(&format!(" {user}")),
        "alice's key held by {holder:?}"
    );
    wait("the lead to declare alice dead", 60, &mut || {
        alice().dead_at.is_some().then_some(())
    });
    eprintln!(
        "figure: alice kill -9 -> declared dead while mallory holds her key: {:.1} s",
        killed.elapsed().as_secs_f64()
    );
    let dead_at = alice().dead_at.unwrap();
    assert!(
        dead_at >= got,
        "alice was declared dead ({dead_at}) before mallory held her key ({got})"
    );
    assert_eq!(
        holder_of(&pg, alice_key).unwrap_or_default(),
        holder,
        "mallory let go of alice's key"
    );
    go("release");

    // The task list rewritten with no tasks (the issue's "delete its task list" by
    // another route): refused by the server, the list unchanged.
    let tasks_now = team.tasks().list(&Default::default()).unwrap().len();
    wait("mallory's last write", 60, &mut || {
        file("emptied.json").exists().then_some(())
    });
    let emptied = read_json(&file("emptied.json")).unwrap_or_default();
    assert_eq!(
        emptied["sqlstate"].as_str(),
        Some("42501"),
        "empty the task list: not refused by the server: {}",
        show(&emptied)
    );
    assert_eq!(
        team.tasks().list(&Default::default()).unwrap().len(),
        tasks_now,
        "the task list lost tasks"
    );
}

/// The hostile teammate: the worker of host b's entry (see [`prepare`]). Started by the
/// lead's spawn in a tmux pane on B, with `ROO_ENV_HANDOFF` in its environment, it does
/// what `roo-worker` does first (`roo_app::entry::main`): takes the handoff (which
/// re-executes this program with the handed environment and the secrets sealed), reads
/// the secrets back, opens the store the way `roo-worker` does (`RooHome::open` with the
/// sealed `ROO_STORE` and `PGPASSWORD`), joins team A as itself and holds its presence.
/// Then, step by step as the test allows, it attacks with those credentials.
#[test]
#[ignore = "helper process of a_hostile_teammate_host_is_refused_by_the_server_in_everything_beyond_its_member"]
fn mallory_on_host_b() {
    let Some(dir) = std::env::var_os(MALLORY_DIR).map(PathBuf::from) else {
        return;
    };
    if let Some(error) = roo_agent::exec::sandbox::handoff::enter_handoff() {
        panic!("{error}");
    }
    if let roo_agent::exec::sandbox::Sealing::Failed(error) =
        roo_agent::exec::sandbox::seal_secret_env()
    {
        panic!("{error}");
    }
    let secret = roo_agent::exec::sandbox::secret_env;
    let url = secret("ROO_STORE").expect("ROO_STORE handed over");
    let password = secret("PGPASSWORD");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let sql = Sql {
        url: url.clone(),
        password: password.clone(),
    };
    let session_user = runtime
        .block_on(async { sql.connect().await.query("SELECT session_user").await })
        .unwrap_or_else(|e| format!("{e:?}"));
    write(
        &dir.join("loot.json"),
        &serde_json::json!({
            "roo_store": url,
            "pgpassword": password,
            "session_user": session_user,
        }),
    );

    // Joins as itself, as roo-worker does, so the lead's spawn completes.
    roo_store::set_this_host("b");
    let home = RooHome::open(roo_store::root_from_env().unwrap(), &secret).unwrap();
    let team = Team::open(&home, name(TEAM)).unwrap();
    let me = name("mallory");
    let mut member = roo_store::Member::new(me.clone(), team.name());
    member.pid = Some(std::process::id());
    member.host = Some("b".into());
    team.join(member).unwrap();
    let _presence = team.hold_presence(&me).unwrap();
    write_text(&dir.join("joined"), "");

    await_file(&dir.join("go-attacks"));
    let config = team.config().unwrap();
    let lead = config.lead().unwrap().name.clone();
    let alice = config.member("alice").unwrap().clone();
    let mut attempts = Vec::new();
    // Reading team B, through the store and in SQL.
    attempts.push(store_try(
        "read team B",
        "open team vault through the store",
        Team::open(&home, name(VAULT)).map(|_| ()),
    ));
    attempts.push(store_try(
        "read team B",
        "read carol's inbox through the store",
        Team::open(&home, name(VAULT))
            .and_then(|v| v.mailbox().read(&name("carol"), &Default::default()))
            .map(|_| ()),
    ));
    runtime.block_on(async {
        let c = sql.connect().await;
        for (how, query) in [
            (
                "team B's rows in roo_doc",
                format!("SELECT count(*) FROM roo_doc WHERE key LIKE 'teams/{VAULT}/%' OR key LIKE 'tasks/{VAULT}/%'"),
            ),
            (
                "any row holding the secret",
                "SELECT (SELECT count(*) FROM roo_doc WHERE doc::text LIKE '%hunter2%') \
                 + (SELECT count(*) FROM roo_event WHERE key LIKE 'teams/vault/%')"
                    .to_owned(),
            ),
        ] {
            attempts.push(c.attempt("read team B", how, &query).await);
        }
    });
    // Sending as the lead.
    attempts.push(store_try(
        "send as the lead",
        "a send from the lead through the store",
        team.mailbox()
            .send(
                &lead,
                "alice",
                roo_store::Outgoing::text(FORGED, "approved"),
            )
            .map(|_| ()),
    ));
    let inbox = format!("teams/{TEAM}/inboxes/alice.json");
    let message = |from: &str, kind: &str| {
        format!(
            "SELECT roo_m_write('{inbox}', (SELECT jsonb_set(doc::jsonb, '{{messages}}', \
             (doc::jsonb -> 'messages') || jsonb_build_array(jsonb_build_object(\
             'id', 'm-mallory-{kind}', 'from', '{from}', 'to', 'alice', 'type', '{kind}', \
             'request_id', 'r1', 'decision', 'allow', 'approve', true, 'task_id', '1', \
             'text', '{FORGED}', 'summary', 'ok', 'read', false, \
             'timestamp', '2026-12-07T00:00:00Z')))::text FROM roo_doc WHERE key = '{inbox}'))"
        )
    };
    // Team A's task list key, config key.
    let tasks = format!("tasks/{TEAM}/tasks.json");
    let config_key = format!("teams/{TEAM}/config.json");
    let mut sql_attempts: Vec<(&str, &str, String)> = vec![
        (
            "send as the lead",
            "a raw UPDATE of alice's inbox",
            format!(
                "UPDATE roo_doc SET doc = jsonb_set(doc::jsonb, '{{messages}}', \
                 (doc::jsonb -> 'messages') || '[{{\"id\": \"x\", \"from\": \"{lead}\", \
                 \"text\": \"{FORGED}\"}}]')::json WHERE key = '{inbox}'"
            ),
        ),
        (
            "send as the lead",
            "a forged message from the lead through roo_m_write",
            message(lead.as_str(), "text"),
        ),
    ];
    for kind in [
        "permission_response",
        "plan_approval_response",
        "task_assignment",
    ] {
        let how: &'static str = match kind {
            "permission_response" => "a permission_response through roo_m_write",
            "plan_approval_response" => "a plan_approval_response through roo_m_write",
            _ => "a task_assignment through roo_m_write",
        };
        sql_attempts.push(("answer a request", how, message("mallory", kind)));
    }
    sql_attempts.extend([
        (
            "rewrite the roster or key",
            "a raw UPDATE of the config",
            format!(
                "UPDATE roo_doc SET doc = jsonb_set(doc::jsonb, '{{lead_key}}', \
                 '\"{MALLORY_KEY}\"')::json WHERE key = '{config_key}'"
            ),
        ),
        (
            "rewrite the roster or key",
            "a new lead_key through roo_m_write",
            format!(
                "SELECT roo_m_write(key, jsonb_set(doc::jsonb, '{{lead_key}}', \
                 '\"{MALLORY_KEY}\"')::text) FROM roo_doc WHERE key = '{config_key}'"
            ),
        ),
        (
            "rewrite the roster or key",
            "a member added through roo_m_write",
            format!(
                "SELECT roo_m_write(key, jsonb_set(doc::jsonb, '{{members}}', \
                 (doc::jsonb -> 'members') || '[{{\"name\": \"eve\", \"agent_id\": \
                 \"eve@{TEAM}\", \"joined_at\": \"2026-12-07T00:00:00Z\"}}]')::text) \
                 FROM roo_doc WHERE key = '{config_key}'"
            ),
        ),
        (
            "delete the task list",
            "a raw DELETE of the task list",
            format!("DELETE FROM roo_doc WHERE key = '{tasks}'"),
        ),
        (
            "delete the task list",
            "roo_m_delete of the task list",
            format!("SELECT roo_m_delete('{tasks}')"),
        ),
        (
            "delete the task list",
            "a null task list through roo_m_write",
            format!("SELECT roo_m_write('{tasks}', 'null')"),
        ),
        (
            "hold a row lock",
            "SELECT … FOR UPDATE of the task list",
            format!("SELECT 1 FROM roo_doc WHERE key = '{tasks}' FOR UPDATE"),
        ),
    ]);
    attempts.push(store_try(
        "rewrite the roster or key",
        "a new lead key through the store",
        team.set_lead_key(MALLORY_KEY),
    ));
    let alice_key = roo_store::presence_key(TEAM, &alice.agent_id, alice.epoch.unwrap_or(0));
    runtime.block_on(async {
        let c = sql.connect().await;
        for (attack, how, query) in &sql_attempts {
            attempts.push(c.attempt(attack, how, query).await);
        }
        // Terminating a peer's backend: alice's presence session (its lock's holder, by
        // the key computed from the config), and every other role's session it sees.
        let mut pids: Vec<String> = c
            .query(&format!(
                "SELECT string_agg(pid::text, ' ') FROM pg_locks WHERE locktype = 'advisory' \
                 AND granted AND ((classid::int8 << 32) | objid::int8) = {alice_key}"
            ))
            .await
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let others = c
            .query(
                "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity \
                 WHERE pid <> pg_backend_pid() AND usename IS NOT NULL \
                 AND usename <> session_user",
            )
            .await
            .unwrap_or_default();
        pids.extend(others.split_whitespace().map(str::to_owned));
        pids.sort();
        pids.dedup();
        for pid in pids {
            let mut a = c
                .attempt(
                    "terminate a peer's backend",
                    "pg_terminate_backend",
                    &format!("SELECT pg_terminate_backend({pid})"),
                )
                .await;
            a["pid"] = pid.into();
            attempts.push(a);
        }
    });
    write(
        &dir.join("attacks.json"),
        &serde_json::json!({ "attempts": attempts }),
    );

    // A row held in an open transaction, whatever it sets for itself.
    await_file(&dir.join("go-rowlock"));
    let rowlock = runtime.block_on(async {
        let (client, ended) = sql.connect_watched().await;
        let locked = client
            .simple_query(&format!(
                "BEGIN; SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0; \
                 SET LOCAL idle_in_transaction_session_timeout = 0; \
                 SELECT * FROM roo_m_lock('{tasks}')"
            ))
            .await;
        if let Err(e) = locked {
            return serde_json::json!({ "locked": false, "error": format!("{e:?}") });
        }
        let start = Instant::now();
        write_text(&dir.join("row-locked"), "");
        while start.elapsed() < Duration::from_secs(120) && !ended.is_finished() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let held_ms = start.elapsed().as_millis() as u64;
        let ended_by = match ended.is_finished() {
            true => ended.await.ok().flatten(),
            false => None,
        };
        serde_json::json!({ "locked": true, "held_ms": held_ms, "ended_by": ended_by })
    });
    write(&dir.join("rowlock.json"), &rowlock);

    // A peer's presence key: queued for alice's, held as soon as she is gone.
    await_file(&dir.join("go-presence"));
    let alice = team.config().unwrap().member("alice").unwrap().clone();
    let alice_key = roo_store::presence_key(TEAM, &alice.agent_id, alice.epoch.unwrap_or(0));
    runtime.block_on(async {
        let c = sql.connect().await;
        let _ = c
            .query("SET statement_timeout = 0; SET lock_timeout = 0; SELECT 1")
            .await;
        match c
            .query(&format!("SELECT pg_advisory_lock({alice_key})"))
            .await
        {
            Ok(_) => write_text(
                &dir.join("holding-key"),
                &Timestamp::system_now().to_string(),
            ),
            Err(e) => write_text(&dir.join("key-refused"), &format!("{e:?}")),
        }
        while !dir.join("release").exists() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        drop(c);
        // Last, the task list rewritten with no tasks (refused: no task may disappear).
        let c = sql.connect().await;
        let emptied = c
            .attempt(
                "empty the task list",
                "the task list rewritten with no tasks through roo_m_write",
                &format!(
                    "SELECT roo_m_write(key, jsonb_set(doc::jsonb, '{{tasks}}', '[]')::text) \
                     FROM roo_doc WHERE key = '{tasks}'"
                ),
            )
            .await;
        write(&dir.join("emptied.json"), &emptied);
    });
}

/// How mallory reaches the server: the handed URL, and `PGPASSWORD` when the URL has
/// no password (as libpq would take it).
struct Sql {
    url: String,
    password: Option<String>,
}

/// A session of mallory's.
struct Session {
    client: tokio_postgres::Client,
}

impl Sql {
    fn config(&self) -> tokio_postgres::Config {
        let mut config: tokio_postgres::Config = self.url.parse().expect("the handed URL");
        if config.get_password().is_none()
            && let Some(password) = &self.password
        {
            config.password(password.as_bytes());
        }
        config
    }

    async fn connect(&self) -> Session {
        let (client, connection) = self
            .config()
            .connect(tokio_postgres::NoTls)
            .await
            .expect("connect with the handed credentials");
        tokio::spawn(connection);
        Session { client }
    }

    /// A session, and a task that ends with the SQLSTATE the server ended it with.
    async fn connect_watched(
        &self,
    ) -> (
        tokio_postgres::Client,
        tokio::task::JoinHandle<Option<String>>,
    ) {
        let (client, connection) = self
            .config()
            .connect(tokio_postgres::NoTls)
            .await
            .expect("connect with the handed credentials");
        let ended = tokio::spawn(async move {
            connection.await.err().map(|e| {
                e.code()
                    .map_or_else(|| e.to_string(), |c| c.code().to_owned())
            })
        });
        (client, ended)
    }
}

impl Session {
    /// The first value of the last row `query` returned.
    async fn query(&self, query: &str) -> Result<String, tokio_postgres::Error> {
        let mut value = String::new();
        for message in self.client.simple_query(query).await? {
            if let tokio_postgres::SimpleQueryMessage::Row(row) = message {
                value = row.get(0).unwrap_or_default().to_owned();
            }
        }
        Ok(value)
    }

    /// `query` as attempt `how` of `attack`: what it returned (`rows`), or the server's
    /// refusal (`sqlstate`, `message`).
    async fn attempt(&self, attack: &str, how: &str, query: &str) -> Value {
        match self.query(query).await {
            Ok(rows) => serde_json::json!({
                "attack": attack, "how": how, "via": "sql", "rows": rows,
            }),
            Err(e) => serde_json::json!({
                "attack": attack, "how": how, "via": "sql",
                "sqlstate": e.code().map(|c| c.code().to_owned()),
                "message": e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned()),
            }),
        }
    }
}

/// A store call as attempt `how` of `attack`: `error` the store's error, if it failed.
fn store_try(attack: &str, how: &str, result: Result<(), roo_store::Error>) -> Value {
    serde_json::json!({
        "attack": attack, "how": how, "via": "store",
        "error": result.err().map(|e| e.to_string()),
    })
}

fn write(path: &Path, value: &Value) {
    write_text(path, &serde_json::to_string_pretty(value).unwrap());
}

/// Writes `text` to `path` whole (a temp file renamed), so the test never reads half.
fn write_text(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Waits for the test's go-ahead `path` (at most 10 minutes: then the test is gone).
fn await_file(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "no {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
