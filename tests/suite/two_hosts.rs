//! Two hosts on one machine (issue 21): network namespaces made by the test, PostgreSQL
//! in one, `sshd` in another ([`roo_tests::hosts`]). These tests prove the harness and
//! the facts a team across hosts relies on: ssh runs a command on the other host and
//! refuses a changed host key; a member's connection reaches the server by password over
//! the link; a cut link frees that connection's session advisory lock within seconds
//! when the session has the keepalive settings; everything is gone after the teardown.
//!
//! Without root, `ip netns`, sshd or PostgreSQL they print `skipped: …` and pass.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use roo_tests::hosts::{Hosts, Need, Witness, check_ssh_destination, sweep_leftovers};
use roo_tests::wait_until;

/// Asserts the teardown left nothing of `witness`'s set-up.
#[track_caller]
fn assert_all_gone(witness: &Witness) {
    let left = witness.leftovers();
    assert!(
        left.is_empty(),
        "left after the teardown:\n{}",
        left.join("\n")
    );
}

#[test]
fn ssh_from_host_a_runs_a_command_on_host_b_and_refuses_a_changed_host_key() {
    let Some(hosts) = Hosts::new(&["a", "b"], &[Need::Sshd]) else {
        return;
    };
    let witness = hosts.witness();
    let (a, b) = (hosts.addr("a"), hosts.addr("b"));
    let mut sshd = hosts.sshd("b");

    // SSH_CONNECTION is "<client> <port> <server> <port>"; the address shows the command
    // ran in b's namespace.
    let out = sshd
        .ssh("a", "echo \"$SSH_CONNECTION\"; ip -4 -o addr show dev eth0")
        .run();
    out.assert_ok();
    let stdout = out.stdout();
    let connection: Vec<&str> = stdout.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        (connection[0], connection[2]),
        (a.to_string().as_str(), b.to_string().as_str()),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("inet {b}/24")), "{stdout}");

    // A destination starting with '-' is an option to ssh: given as one, it runs a command
    // on the local host. The harness refuses it; after `--`, ssh takes it as a host name.
    let mark = hosts.dir().join("proxy-command-ran");
    let proxy = hosts.dir().join("proxy.sh");
    std::fs::write(&proxy, format!("#!/bin/sh\ntouch '{}'\n", mark.display())).unwrap();
    std::fs::set_permissions(&proxy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hostile = format!("-oProxyCommand={}", proxy.display());
    let refused = sshd.ssh_argv_to("a", &hostile, "true").unwrap_err();
    assert!(refused.contains("starts with '-'"), "{refused}");
    assert!(check_ssh_destination(&sshd.destination()).is_ok());
    let out = hosts
        .cmd("a", "ssh")
        .args(sshd.client_options())
        .args(["--", &hostile, "true"])
        .run();
    out.assert_code(255);
    assert!(!mark.exists(), "ssh ran the proxy command after `--`");
    // Without `--` and without the check, the same string does run it: the hazard is real.
    let out = hosts
        .cmd("a", "ssh")
        .args(sshd.client_options())
        .args([&hostile, "true"])
        .run();
    out.assert_code(255);
    assert!(
        mark.exists(),
        "expected the unguarded ssh to run the proxy command"
    );

    // A changed host key fails at once (BatchMode: no prompt) and runs nothing.
    sshd.replace_host_key();
    let out = sshd.ssh("a", "echo ran on b").run();
    out.assert_code(255);
    let stderr = out.stderr();
    assert!(
        stderr.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
            && stderr.contains("Host key verification failed"),
        "{stderr}"
    );
    assert!(!out.stdout().contains("ran on b"));

    drop(sshd);
    drop(hosts);
    assert_all_gone(&witness);
}

/// The session advisory lock the test's member connection holds (issue 21: liveness).
const LOCK_KEY: u32 = 21;

#[test]
fn postgres_in_host_a_serves_host_b_by_password_and_a_cut_link_frees_b_s_session_lock() {
    let Some(hosts) = Hosts::new(&["a", "b"], &[Need::Postgres]) else {
        return;
    };
    let witness = hosts.witness();
    let (a, b) = (hosts.addr("a"), hosts.addr("b"));
    let pg = hosts.postgres("a");

    // b reaches a's server over the link, with the role's password.
    let out = pg
        .psql(&hosts, "b", "SELECT inet_client_addr(), inet_server_addr()")
        .run();
    out.assert_ok();
    assert_eq!(out.stdout().trim(), format!("{b}|{a}"));
    // A wrong password, no password, or another role: refused.
    let psql_b = || {
        hosts
            .cmd("b", "psql")
            .args([&pg.url_without_password(), "-X", "-w", "-c", "SELECT 1"])
    };
    let out = psql_b().env("PGPASSWORD", "wrong").run();
    out.assert_code(2);
    assert!(
        out.stderr()
            .contains("password authentication failed for user \"roo_test\""),
        "{}",
        out.stderr()
    );
    let out = psql_b().run();
    out.assert_code(2);
    assert!(
        out.stderr().contains("no password supplied"),
        "{}",
        out.stderr()
    );
    let out = hosts
        .cmd("b", "psql")
        .args([
            &format!("postgresql://postgres@{a}/postgres"),
            "-X",
            "-w",
            "-c",
            "SELECT 1",
        ])
        .run();
    out.assert_code(2);
    assert!(
        out.stderr().contains("no pg_hba.conf entry"),
        "{}",
        out.stderr()
    );

    // b holds a session advisory lock on an idle connection whose server side has the
    // keepalive settings.
    let mut holder = hosts
        .cmd("b", "psql")
        .args([
            &pg.url_without_password(),
            "-X",
            "-w",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
        ])
        .env("PGPASSFILE", pg.passfile())
        .spawn();
    write!(
        holder.stdin(),
        "SET tcp_keepalives_idle = 2; SET tcp_keepalives_interval = 1;\n\
         SET tcp_keepalives_count = 3; SET tcp_user_timeout = 5000;\n\
         SELECT string_agg(name || '=' || setting, ',' ORDER BY name) FROM pg_settings\n\
           WHERE name LIKE 'tcp_%';\n\
         SELECT pg_advisory_lock({LOCK_KEY});\n\
         \\echo locked\n"
    )
    .unwrap();
    holder.stdin().flush().unwrap();
    wait_until(
        "b's session to take the lock",
        Duration::from_secs(30),
        || holder.log().contains("locked").then_some(()),
        || holder.describe(),
    );
    assert!(
        holder.log().contains(
            "tcp_keepalives_count=3,tcp_keepalives_idle=2,tcp_keepalives_interval=1,\
             tcp_user_timeout=5000"
        ),
        "{}",
        holder.describe()
    );
    let lock_holder = format!(
        "SELECT a.client_addr FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
         WHERE l.locktype = 'advisory' AND l.objid = {LOCK_KEY} AND l.granted"
    );
    let held_by = || {
        let out = pg.psql(&hosts, "a", &lock_holder).run();
        out.assert_ok();
        out.stdout().trim().to_owned()
    };
    assert_eq!(held_by(), b.to_string());

    // Pull b's cable: no reset reaches the server; only the keepalives tell it.
    hosts.cut_link("b");
    let cut = Instant::now();
    let freed_after = wait_until(
        "the server to free b's lock after the cut",
        Duration::from_secs(30),
        || held_by().is_empty().then(|| cut.elapsed()),
        || format!("held by {:?}\n--- server log ---\n{}", held_by(), pg.log()),
    );
    eprintln!(
        "measured: b's session advisory lock freed {:.1} s after b's link was cut \
         (tcp_keepalives_idle=2, interval=1, count=3, tcp_user_timeout=5000)",
        freed_after.as_secs_f64()
    );

    // Cable back: b connects again; and after a server restart too.
    hosts.restore_link("b");
    let out = pg.psql(&hosts, "b", "SELECT inet_client_addr()").run();
    out.assert_ok();
    assert_eq!(out.stdout().trim(), b.to_string());
    hosts.restart_postgres(&pg);
    let out = pg.psql(&hosts, "b", "SELECT 1").run();
    out.assert_ok();

    drop(hosts);
    assert_all_gone(&witness);
}

const DELIBERATE: &str = "deliberate panic: the drop must still tear everything down";

#[test]
fn teardown_leaves_no_namespace_link_process_or_file_even_when_the_test_panics() {
    let witness: Mutex<Option<Witness>> = Mutex::new(None);
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let Some(hosts) = Hosts::new(&["a", "b", "c"], &[Need::Postgres, Need::Sshd]) else {
            return;
        };
        *witness.lock().unwrap() = Some(hosts.witness());
        let _pg = hosts.postgres("a");
        let sshd = hosts.sshd("b");
        // A process the test spawned, one that left for a session of its own, and the
        // command of an ssh session (sshd gives it its own session too).
        let _sleeper = hosts.cmd("c", "sleep").arg("600").spawn();
        hosts
            .cmd("b", "sh")
            .args(["-c", "setsid -f sleep 601 </dev/null >/dev/null 2>&1"])
            .run()
            .assert_ok();
        let _session = sshd.ssh("a", "sleep 602").spawn();
        wait_until(
            "the detached sleep and the session's sleep in b",
            Duration::from_secs(30),
            || {
                let running = hosts.processes("b");
                (running.iter().any(|p| p == "sleep 601")
                    && running.iter().any(|p| p == "sleep 602"))
                .then_some(())
            },
            || format!("{:?}\n{}", hosts.processes("b"), sshd.log()),
        );
        std::panic::panic_any(DELIBERATE);
    }));
    let Some(witness) = witness.into_inner().unwrap() else {
        return;
    };
    match outcome {
        Err(panic) if panic.downcast_ref::<&str>() == Some(&DELIBERATE) => {}
        Err(panic) => std::panic::resume_unwind(panic),
        Ok(()) => panic!("the set-up was to panic"),
    }
    assert_eq!(witness.namespaces().len(), 4, "{:?}", witness.namespaces());
    assert_all_gone(&witness);
}

#[test]
fn namespaces_and_files_of_a_test_process_that_died_are_swept() {
    // Hosts::new tells whether namespaces can be made here at all.
    let Some(hosts) = Hosts::new(&["a"], &[]) else {
        return;
    };
    drop(hosts);
    // The "test process" that makes the namespace is a child that lives until the set-up
    // is complete (so no other test's sweep takes it early), then dies, as a test killed
    // by a timeout does.
    let mut creator = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    let dead = creator.id();
    let netns = format!("roo-{dead}-0-a");
    let dir = std::env::temp_dir().join(format!("roo-hosts-{dead}-0"));
    // The dead process's `unreachable` route, on a network of its own (10.0.<x>.0/24:
    // the harness never picks 10.0.*).
    let network = format!("10.0.{}.0/24", dead % 250);
    let route = |verb: &str| {
        std::process::Command::new("ip")
            .args(["-4", "route", verb, "unreachable", &network, "proto", "82"])
            .args(["metric", &dead.to_string()])
            .output()
            .unwrap()
    };
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let ip = |args: &[&str]| {
        let out = std::process::Command::new("ip")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ip(&["netns", "add", &netns]);
    assert!(route("add").status.success());
    let mut inside = std::process::Command::new("ip")
        .args(["netns", "exec", &netns, "sleep", "600"])
        .spawn()
        .unwrap();
    let cmdline = format!("/proc/{}/cmdline", inside.id());
    wait_until(
        "sleep to run inside the namespace",
        Duration::from_secs(10),
        || (std::fs::read(&cmdline).ok()? == b"sleep\x00600\x00").then_some(()),
        || format!("{:?}", std::fs::read(&cmdline)),
    );
    creator.kill().unwrap();
    creator.wait().unwrap();

    sweep_leftovers();

    assert!(!std::path::Path::new("/run/netns").join(&netns).exists());
    assert!(!dir.exists());
    let left = route("del");
    assert!(
        !left.status.success(),
        "the dead process's route to {network} is left"
    );
    // Its process was killed (SIGKILL), not left running.
    let status = inside.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
}

#[test]
fn a_connection_from_the_machine_s_own_namespace_to_the_hosts_network_fails_at_once() {
    let Some(hosts) = Hosts::new(&["a", "b"], &[Need::Sshd]) else {
        return;
    };
    let witness = hosts.witness();
    // The hosts reach each other over their switch.
    let sshd = hosts.sshd("b");
    sshd.ssh("a", "true").run().assert_ok();
    // A client started by mistake outside the hosts' namespaces, to an address no host
    // has and to a host's: refused here and now, never sent through the default route.
    let [a, b, c, _] = hosts.network().octets();
    for addr in [std::net::Ipv4Addr::new(a, b, c, 200), hosts.addr("b")] {
        let started = Instant::now();
        let err = std::net::TcpStream::connect_timeout(
            &std::net::SocketAddr::from((addr, 22)),
            Duration::from_secs(10),
        )
        .expect_err("a connection from the machine's own namespace");
        // `unreachable` answers "No route to host" (EHOSTUNREACH).
        assert!(
            [nix::libc::EHOSTUNREACH, nix::libc::ENETUNREACH]
                .map(Some)
                .contains(&err.raw_os_error()),
            "connect to {addr}: {err}"
        );
        assert!(started.elapsed() < Duration::from_secs(1), "{addr}: {err}");
    }
    drop(sshd);
    drop(hosts);
    assert_all_gone(&witness);
}
