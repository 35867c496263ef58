//! The store across a lost server session (issue 21): a connection the server ended
//! comes back by itself; `pg_ctl restart` of a cluster of the test's own (the shared test
//! server is left alone: other tests use it meanwhile) under a sender loses and repeats
//! no message; and right after a restart or a backend crash, when every presence lock
//! is gone at once, a missing lock is no evidence either way — it lets nobody declare a
//! member dead, take a live member's name or a live lead's place.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use roo_store::{Error, LeadClaim, Member, Outgoing, ReadFilter, RooHome, Team};

use super::common::{
    dsn, fresh_schema_url, home_at, name, pause, psql, team_named, wait_out_restart_grace,
};
use super::presence::{HELPER_LEAD, MemberProcess};
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

    /// Restarts the server with `max_connections` set to `n` (the script starts it with
    /// 200 on its command line, which `postmaster.opts` keeps for a restart).
    pub(super) fn set_max_connections(&self, n: u32) {
        let opts = self.dir.join("data/postmaster.opts");
        let text = std::fs::read_to_string(&opts).unwrap();
        assert!(text.contains("max_connections=200"), "{text}");
        let text = text.replace("max_connections=200", &format!("max_connections={n}"));
        std::fs::write(&opts, text).unwrap();
        self.restart();
        assert_eq!(psql(&self.dsn, "SHOW max_connections"), n.to_string());
    }

    /// The server's log so far.
    pub(super) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
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

/// A team `t` (lead `lead`, `members`) in a fresh schema of a [`Cluster`] of the test's
/// own. The fields drop in order: the team and its home before the cluster.
struct OwnTeam {
    team: Team,
    _home: RooHome,
    _dir: tempfile::TempDir,
    url: String,
    cluster: Cluster,
}

/// An [`OwnTeam`]; `None` without `ROO_TEST_PG_DSN` (which says PostgreSQL is there to
/// start a cluster with).
fn team_on_own_cluster(members: &[&str]) -> Option<OwnTeam> {
    dsn()?;
    let cluster = Cluster::start();
    let url = fresh_schema_url(&cluster.dsn);
    let (dir, home) = home_at(&url);
    let team = team_named(&home, "t", members);
    Some(OwnTeam {
        team,
        _home: home,
        _dir: dir,
        url,
        cluster,
    })
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
    let Some(own) = team_on_own_cluster(&["alice"]) else {
        return;
    };
    let (team, url, cluster) = (&own.team, own.url.as_str(), &own.cluster);
    let (member, epoch) = MemberProcess::start(url, "carol", false);
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

/// §8 keeps keepalives so "death of a peer across a cut link is seen in seconds" — but
/// the store never reconnects: once its one connection is gone (server restart, failover,
/// an idle-session timeout, a network blip), every later operation of every clone fails
/// until the process restarts.
#[test]
fn the_store_works_again_after_its_connection_was_lost() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let app = format!("roo_reconnect_{}", std::process::id());
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

/// Carol's process is stopped (SIGSTOP) across a server restart, so its lock is missing
/// while the server is young: a join under her name then must be refused as if the lock
/// were held (it may be taken again any moment), not take her entry over — which would
/// make two processes that member once she resumes.
#[test]
fn a_join_right_after_a_server_restart_does_not_take_over_a_member_whose_lock_is_missing() {
    let Some(own) = team_on_own_cluster(&[]) else {
        return;
    };
    let (team, url, cluster) = (&own.team, own.url.as_str(), &own.cluster);
    let (member, epoch) = MemberProcess::start(url, "carol", false);
    let pid = Pid::from_raw(member.0.id() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    cluster.restart();
    let mut joiner = Member::new(name("carol"), team.name());
    joiner.pid = Some(std::process::id());
    let joined = team.join(joiner);
    kill(pid, Signal::SIGCONT).unwrap();
    assert!(
        matches!(joined, Err(Error::NotPermitted { .. })),
        "a second process took over carol's entry while her lock was missing: {joined:?}"
    );
    // Resumed, carol takes her lock again: her entry still vouches for her.
    wait_for("carol's lock to be taken again", || {
        let config = team.config().unwrap();
        let entry = config.member("carol").unwrap().clone();
        entry.epoch == Some(epoch) && team.liveness(&config).unwrap().evidence(&entry) == Some(true)
    });
    drop(member);
}

/// The same for the lead: a lead on another host (its `host` set, so its pid means
/// nothing here) holds its presence; stopped across a restart, its lock is missing while
/// the server is young, and a `claim_lead` without take-over must say it is held.
#[test]
fn claim_lead_right_after_a_server_restart_does_not_take_over_a_lead_whose_lock_is_missing() {
    let Some(own) = team_on_own_cluster(&[]) else {
        return;
    };
    let (team, url, cluster) = (&own.team, own.url.as_str(), &own.cluster);
    team.update_member("lead", |m| m.host = Some("b".into()))
        .unwrap();
    let (lead, epoch) = MemberProcess::start_with(url, "lead", false, &[(HELPER_LEAD, "1")]);
    let pid = Pid::from_raw(lead.0.id() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    cluster.restart();
    let claimed = team.claim_lead(std::process::id(), false);
    kill(pid, Signal::SIGCONT).unwrap();
    assert!(
        matches!(claimed, Ok(LeadClaim::Held(p)) if p == lead.0.id()),
        "a second lead took the team while the first one's lock was missing: {claimed:?}"
    );
    wait_for("the lead's lock to be taken again", || {
        let config = team.config().unwrap();
        let entry = config.lead().unwrap().clone();
        entry.epoch == Some(epoch) && team.liveness(&config).unwrap().evidence(&entry) == Some(true)
    });
    drop(lead);
}

/// A backend that crashes (here: killed with SIGKILL) makes the postmaster end every
/// session and reinitialize, without restarting: `pg_postmaster_start_time()` stays as
/// it was, but every presence lock is gone at once, as after a restart. A member whose
/// process is stopped (SIGSTOP) cannot take its lock again yet; right after the crash
/// its missing lock must prove nothing, so the lead's detect declares nobody dead.
#[test]
fn a_member_whose_lock_is_missing_right_after_a_backend_crash_is_not_declared_dead() {
    let Some(own) = team_on_own_cluster(&[]) else {
        return;
    };
    let (team, url, cluster) = (&own.team, own.url.as_str(), &own.cluster);
    let (member, epoch) = MemberProcess::start(url, "carol", false);
    let pid = Pid::from_raw(member.0.id() as i32);
    let evidence = || {
        let config = team.config().unwrap();
        let entry = config.member("carol").unwrap().clone();
        assert_eq!(entry.epoch, Some(epoch));
        team.liveness(&config).unwrap().evidence(&entry)
    };
    assert_eq!(evidence(), Some(true));
    // The new cluster's own start is out of the grace first.
    wait_out_restart_grace(&cluster.dsn);
    kill(pid, Signal::SIGSTOP).unwrap();
    // A session of its own, to crash: its backend's pid, then SIGKILL of that backend.
    let mut sleeper = std::process::Command::new("psql")
        .args([
            cluster.dsn.as_str(),
            "-Atc",
            "SELECT pg_backend_pid(), pg_sleep(600)",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let find = || {
        psql(
            &cluster.dsn,
            "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT pg_backend_pid(), pg_sleep%' \
             AND pid <> pg_backend_pid()",
        )
    };
    wait_for("the session to crash", || !find().is_empty());
    let backend = find().parse::<i32>().unwrap();
    kill(Pid::from_raw(backend), Signal::SIGKILL).unwrap();
    let crashed = std::time::Instant::now();
    let _ = sleeper.wait();
    // The postmaster ends every other session a moment later (asynchronously): until
    // then the stopped member's lock may still be held. The store reconnects by itself
    // (the server accepts connections again once it has reinitialized): then the lock is
    // missing, and that proves nothing yet.
    wait_for("the crash to end every session", || {
        evidence() != Some(true)
    });
    assert_eq!(
        evidence(),
        None,
        "a missing lock right after a backend crash"
    );
    assert!(team.detect_dead(Some(&name("lead"))).unwrap().is_empty());
    assert!(crashed.elapsed() < roo_store::RESTART_GRACE / 2);
    kill(pid, Signal::SIGCONT).unwrap();
    wait_for("carol's lock to be taken again", || {
        evidence() == Some(true)
    });
    drop(member);
}
