//! Third review of issue 21's presences: liveness right after a server restart, where a
//! missing lock is no evidence either way — so it must not let anyone take a live
//! member's name or a live lead's place either.
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use roo_store::{Error, LeadClaim, Member};

use super::common::{dsn, fresh_schema_url, home_at, name, psql, team_named};
use super::presence::{HELPER_LEAD, MemberProcess};
use super::restart::{Cluster, wait_for};

/// Carol's process is stopped (SIGSTOP) across a server restart, so its lock is missing
/// while the server is young: a join under her name then must be refused as if the lock
/// were held (it may be taken again any moment), not take her entry over — which would
/// make two processes that member once she resumes.
#[test]
fn a_join_right_after_a_server_restart_does_not_take_over_a_member_whose_lock_is_missing() {
    if dsn().is_none() {
        return;
    }
    let cluster = Cluster::start();
    let url = fresh_schema_url(&cluster.dsn);
    let (_dir, home) = home_at(&url);
    let team = team_named(&home, "t", &[]);
    let (member, epoch) = MemberProcess::start(&url, "carol", false);
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
    if dsn().is_none() {
        return;
    }
    let cluster = Cluster::start();
    let url = fresh_schema_url(&cluster.dsn);
    let (_dir, home) = home_at(&url);
    let team = team_named(&home, "t", &[]);
    team.update_member("lead", |m| m.host = Some("b".into()))
        .unwrap();
    let (lead, epoch) = MemberProcess::start_with(&url, "lead", false, &[(HELPER_LEAD, "1")]);
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
    if dsn().is_none() {
        return;
    }
    let cluster = Cluster::start();
    let url = fresh_schema_url(&cluster.dsn);
    let (_dir, home) = home_at(&url);
    let team = team_named(&home, "t", &[]);
    let (member, epoch) = MemberProcess::start(&url, "carol", false);
    let pid = Pid::from_raw(member.0.id() as i32);
    let evidence = || {
        let config = team.config().unwrap();
        let entry = config.member("carol").unwrap().clone();
        assert_eq!(entry.epoch, Some(epoch));
        team.liveness(&config).unwrap().evidence(&entry)
    };
    assert_eq!(evidence(), Some(true));
    // The new cluster's own start is out of the grace first.
    wait_for("the cluster's start to be out of the grace", || {
        psql(
            &cluster.dsn,
            "SELECT now() - pg_postmaster_start_time() > interval '11 seconds'",
        ) == "t"
    });
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
