//! Third review of issue 21's presences: liveness right after a server restart, where a
//! missing lock is no evidence either way — so it must not let anyone take a live
//! member's name or a live lead's place either.
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use roo_store::{Error, LeadClaim, Member};

use super::common::{dsn, fresh_schema_url, home_at, name, team_named};
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
