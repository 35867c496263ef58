//! A server restart under a sender (issue 21): `pg_ctl restart` of a cluster of the test's
//! own (the shared test server is left alone: other tests use it meanwhile) while a
//! sender loops; every message it was told was sent arrives exactly once.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use roo_store::{Outgoing, ReadFilter, Team};

use super::common::{dsn, fresh_schema_url, home_at, name, team_named};
use crate::pg_proxy::PgProxy;

/// A throwaway cluster from `scripts/pg-cluster`, stopped and removed when dropped.
pub(super) struct Cluster {
    dir: PathBuf,
    pub(super) dsn: String,
}

fn pg_cluster() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-cluster")
}

impl Cluster {
    pub(super) fn start() -> Cluster {
        let out = Command::new(pg_cluster()).arg("start").output().unwrap();
        assert!(
            out.status.success(),
            "scripts/pg-cluster start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = stdout.lines().filter(|l| !l.trim().is_empty());
        let dir = PathBuf::from(lines.next().unwrap().trim());
        let dsn = lines.next_back().unwrap().trim().to_owned();
        Cluster { dir, dsn }
    }

    /// `pg_ctl restart` (fast: every session is ended), back when it accepts connections.
    pub(super) fn restart(&self) {
        let out = Command::new(pg_cluster())
            .arg("restart")
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/pg-cluster restart: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(pg_cluster())
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

/// Waits until `done`, failing after a minute with `what`.
pub(super) fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_sender_looping_through_a_server_restart_loses_and_repeats_nothing() {
    // The shared server's variable says PostgreSQL is there to start a cluster with.
    if dsn().is_none() {
        return;
    }
    let cluster = Cluster::start();
    let url = fresh_schema_url(&cluster.dsn);
    // Through a proxy only to see the store connect again.
    let proxy = PgProxy::for_dsn(&cluster.dsn);
    let (_dir, home) = home_at(&proxy.url_for(&url));
    let team = team_named(&home, "t", &["alice"]);
    let mb = team.mailbox();
    let sent = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let texts: Vec<String> = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let mut texts = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let text = format!("m{}", texts.len());
                mb.send(&name("lead"), "alice", Outgoing::text(&text, "loop"))
                    .unwrap_or_else(|e| panic!("send {text} failed: {e}"));
                texts.push(text);
                sent.store(texts.len(), Ordering::SeqCst);
            }
            texts
        });
        wait_for("20 sends", || sent.load(Ordering::SeqCst) >= 20);
        cluster.restart();
        let at_restart = sent.load(Ordering::SeqCst);
        wait_for("20 sends after the restart", || {
            sent.load(Ordering::SeqCst) >= at_restart + 20
        });
        stop.store(true, Ordering::SeqCst);
        sender.join().unwrap()
    });
    assert!(
        proxy.connections() >= 2,
        "the restart did not end the store's session"
    );
    let (_check_dir, check) = home_at(&url);
    let inbox = Team::open(&check, name("t"))
        .unwrap()
        .mailbox()
        .read(&name("alice"), &ReadFilter::default())
        .unwrap();
    let arrived: Vec<&str> = inbox.iter().map(|m| m.text.as_str()).collect();
    let expected: Vec<&str> = texts.iter().map(String::as_str).collect();
    assert_eq!(arrived, expected, "lost, repeated or reordered messages");
}

/// A server restart drops every presence lock at once, and members take theirs again
/// only once they have reconnected: within `RESTART_GRACE` of the server's start a lock
/// not held is no evidence, so a lead reading liveness at that moment declares nobody
/// dead. Here the member's process is stopped (SIGSTOP) across the restart, so its lock
/// stays missing: it is neither alive nor dead by the store's test until it resumes and
/// takes its lock again — or, stopped for longer than the grace, it is declared dead.
#[test]
fn a_member_whose_lock_is_missing_right_after_a_server_restart_is_not_declared_dead() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    if dsn().is_none() {
        return;
    }
    let cluster = Cluster::start();
    let url = fresh_schema_url(&cluster.dsn);
    let (_dir, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice"]);
    let (member, epoch) = super::presence::MemberProcess::start(&url, "carol", false);
    let pid = Pid::from_raw(member.0.id() as i32);
    let evidence = || {
        let config = team.config().unwrap();
        let entry = config.member("carol").unwrap().clone();
        assert_eq!(entry.epoch, Some(epoch));
        team.liveness(&config).unwrap().evidence(&entry)
    };
    assert_eq!(evidence(), Some(true));
    kill(pid, Signal::SIGSTOP).unwrap();
    cluster.restart();
    let restarted = Instant::now();
    // Checked well within the grace: the lock is missing, and that proves nothing.
    assert_eq!(evidence(), None, "a missing lock right after a restart");
    assert!(team.detect_dead(Some(&name("lead"))).unwrap().is_empty());
    assert!(restarted.elapsed() < roo_store::RESTART_GRACE / 2);
    // Resumed, it reconnects and takes its lock again: alive, the same epoch.
    kill(pid, Signal::SIGCONT).unwrap();
    wait_for("carol's lock to be taken again", || {
        evidence() == Some(true)
    });
    // Stopped across a restart for longer than the grace: declared dead after it.
    kill(pid, Signal::SIGSTOP).unwrap();
    cluster.restart();
    let restarted = Instant::now();
    while restarted.elapsed() < roo_store::RESTART_GRACE + Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(evidence(), Some(false));
    let deaths = team.detect_dead(Some(&name("lead"))).unwrap();
    assert_eq!(deaths.len(), 1, "{deaths:?}");
    kill(pid, Signal::SIGCONT).unwrap();
    drop(member);
}
