//! Whether a teammate's lead is still there.
//!
//! The lead entry of the team config names the lead's process (`pid`, written by
//! TeamCreate and by `roo-lead --team`). A teammate looks at it every
//! [`LEAD_CHECK`]: a recorded pid that is no longer a live process means the lead is
//! gone (killed, crashed, its terminal closed). On PostgreSQL a lead that holds its
//! presence is judged by its presence lock instead, from any host (`Team::liveness`). Then an open question is denied at once
//! (nobody can answer it) and an idle teammate waits for a new lead to adopt the team
//! (`roo-lead --team T` records its own pid) for at most its orphan timeout, then
//! stops. A lead entry without a pid (a team made by hand whose lead has not started)
//! is not "gone": there is no lead yet. A question asked then waits for a lead to
//! start, at most the orphan timeout ([`unanswerable`]), and the teammate's screen says
//! so: otherwise a worker started by hand would wait in silence for an answer nobody
//! can give.

use std::time::Duration;

use roo_store::{Team, pid_alive};

/// How often the lead's process is looked at.
pub const LEAD_CHECK: Duration = Duration::from_millis(500);

/// What the config says about the lead's process now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeadState {
    /// A live process leads the team.
    Alive(u32),
    /// The recorded lead process is gone.
    Gone(u32),
    /// No lead process is recorded: no lead has started (or one left on purpose).
    Absent,
    /// The config cannot be read right now.
    Unknown,
}

/// Reads the lead's state (blocking).
pub fn lead_state(team: &Team) -> LeadState {
    let Ok(config) = team.config() else {
        return LeadState::Unknown;
    };
    let Some(lead) = config.lead() else {
        return LeadState::Absent;
    };
    // A lead holding its presence (PostgreSQL) is judged by it, from any host.
    if let (Some(pid), Some(_)) = (lead.pid, lead.epoch) {
        match team.liveness(&config).map(|l| l.evidence(lead)) {
            Ok(Some(true)) => return LeadState::Alive(pid),
            Ok(Some(false)) => return LeadState::Gone(pid),
            Ok(None) => {}
            Err(_) => return LeadState::Unknown,
        }
    }
    match (lead.pid, lead.local_pid()) {
        (Some(pid), Some(_)) if pid_alive(pid) && runs_a_lead(pid) => LeadState::Alive(pid),
        (Some(pid), Some(_)) => LeadState::Gone(pid),
        // A teammate on another host cannot check the lead's process: it counts as there.
        (Some(pid), None) => LeadState::Alive(pid),
        (None, _) => LeadState::Absent,
    }
}

/// Whether `pid` still runs a lead: this process (an in-process teammate's lead), a
/// program whose command line names `roo-lead`, or one started before this process (a
/// pid reused after the lead died belongs to a process started after that, so after
/// this teammate's start if the lead died while it ran). Where `/proc` cannot tell, a
/// live pid counts.
fn runs_a_lead(pid: u32) -> bool {
    if pid == std::process::id() || !std::path::Path::new("/proc/self").exists() {
        return true;
    }
    let named = crate::process::argv(pid)
        .is_some_and(|args| args.first().is_some_and(|exe| exe.ends_with(b"roo-lead")));
    named
        || matches!(
            (start_time(&pid.to_string()), start_time("self")),
            (Some(theirs), Some(ours)) if theirs < ours
        )
}

/// A process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
fn start_time(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

async fn state(team: &Team) -> LeadState {
    let team = team.clone();
    tokio::task::spawn_blocking(move || lead_state(&team))
        .await
        .unwrap_or(LeadState::Unknown)
}

/// Resolves, with the reason, once nobody can answer a question to the lead: at once
/// when the lead's recorded process is gone; when no lead process is recorded, after
/// `timeout` without one starting (never with `None`). `on_absent` is called each time
/// such a wait begins.
pub async fn unanswerable(
    team: &Team,
    timeout: Option<Duration>,
    mut on_absent: impl FnMut(),
) -> String {
    let mut absent_since: Option<tokio::time::Instant> = None;
    loop {
        match state(team).await {
            LeadState::Gone(pid) => return format!("the lead's process {pid} is gone"),
            LeadState::Absent => match (absent_since, timeout) {
                (None, _) => {
                    on_absent();
                    absent_since = Some(tokio::time::Instant::now());
                }
                (Some(since), Some(timeout)) if since.elapsed() >= timeout => {
                    return format!(
                        "no lead ran for team {} within {}s (--orphan-timeout)",
                        team.name(),
                        timeout.as_secs()
                    );
                }
                (Some(_), _) => {}
            },
            LeadState::Alive(_) => absent_since = None,
            LeadState::Unknown => {}
        }
        tokio::time::sleep(LEAD_CHECK).await;
    }
}

/// Resolves once the lead has been gone for `timeout` without a new lead adopting the
/// team; `on_gone` and `on_back` are called as the lead goes and comes back.
pub async fn orphaned(
    team: &Team,
    timeout: Duration,
    mut on_gone: impl FnMut(u32),
    mut on_back: impl FnMut(u32),
) -> String {
    let mut gone_since: Option<(tokio::time::Instant, u32)> = None;
    loop {
        match state(team).await {
            LeadState::Gone(pid) => match gone_since {
                None => {
                    on_gone(pid);
                    gone_since = Some((tokio::time::Instant::now(), pid));
                }
                Some((since, _)) if since.elapsed() >= timeout => {
                    return format!(
                        "the lead's process {pid} is gone and no lead adopted the team within {}s",
                        timeout.as_secs()
                    );
                }
                Some(_) => {}
            },
            LeadState::Alive(pid) => {
                if gone_since.take().is_some_and(|(_, old)| old != pid) {
                    on_back(pid);
                }
            }
            LeadState::Absent | LeadState::Unknown => {}
        }
        tokio::time::sleep(LEAD_CHECK).await;
    }
}

/// How long a teammate on another host than its lead waits, its lead's presence lock
/// absent on every look, before it stops ([`lead_presence_gone`]). Longer than the lead's
/// worst reconnect: a dropped presence connection is back in well under a second
/// ([`roo_store::ABSENCE_WINDOW`] covers it with room), a server restart proves nothing
/// for [`roo_store::RESTART_GRACE`] (10 s) after the server is back, and a cut link keeps
/// the lock held until the server drops the session (about 5 s of keepalives, 10 s
/// measured) — so a lead whose link comes back within about 30 s keeps its teammates.
/// Short enough that, with the server's own detection of a dead host (about 10 s), a look
/// every [`LEAD_CHECK`] and the stop itself, a teammate of a dead lead is gone within
/// 60 s (docs/DISTRIBUTED.md "Liveness").
pub const LEAD_GONE_WINDOW: Duration = Duration::from_secs(30);

/// The absence of a lead's presence as seen on successive looks: gone once the lock was
/// absent on the first look and on every look since, the first and the last at least the
/// window apart. A look that finds it held ends the absence; a look that proves nothing
/// (the store unreachable, the server just restarted, no presence recorded) neither ends
/// it nor counts as absent: the last look before a verdict is always an absent one.
#[derive(Debug, Clone, Default)]
pub struct Absence {
    /// When the absence was first seen, and the lead entry (agent id, epoch) it was seen for.
    since: Option<(tokio::time::Instant, String, u64)>,
}

impl Absence {
    /// Records one look at `lead`'s presence (`evidence`: held, absent, or nothing) at
    /// `now`; returns whether it has been absent for at least `window`.
    pub fn observe(
        &mut self,
        lead: Option<(&str, u64)>,
        evidence: Option<bool>,
        now: tokio::time::Instant,
        window: Duration,
    ) -> bool {
        match (lead, evidence) {
            (Some((id, epoch)), Some(false)) => match &self.since {
                // Another lead entry (a new lead adopted the team) starts a new absence.
                Some((since, i, e)) if i == id && *e == epoch => {
                    now.duration_since(*since) >= window
                }
                _ => {
                    self.since = Some((now, id.to_owned(), epoch));
                    window.is_zero()
                }
            },
            (_, Some(true)) => {
                self.since = None;
                false
            }
            _ => false,
        }
    }
}

/// Resolves, with the reason, once the lead's presence lock (PostgreSQL) has been absent
/// on every look over `window` ([`Absence`]), judged by the server from any host —
/// never by the lead's pid, which means nothing on another host. Never resolves for a
/// lead without a presence (files, or a lead entry with no epoch), nor while the lead
/// runs on this teammate's host (`my_host`): those are judged as before (its pid).
pub async fn lead_presence_gone(team: &Team, my_host: Option<String>, window: Duration) -> String {
    let mut absence = Absence::default();
    loop {
        let look = {
            let (team, my_host) = (team.clone(), my_host.clone());
            tokio::task::spawn_blocking(move || {
                let config = team.config().ok()?;
                let lead = config.lead()?;
                let epoch = lead.epoch?;
                if lead.host == my_host {
                    return None;
                }
                let evidence = team.liveness(&config).ok()?.evidence(lead);
                Some((lead.agent_id.clone(), epoch, evidence))
            })
            .await
            .ok()
            .flatten()
        };
        let now = tokio::time::Instant::now();
        let gone = match &look {
            Some((id, epoch, evidence)) => {
                absence.observe(Some((id, *epoch)), *evidence, now, window)
            }
            None => absence.observe(None, None, now, window),
        };
        if gone {
            return format!(
                "the lead's presence in the store has been gone for {}s (its process ended, \
                 or its host or link did)",
                window.as_secs()
            );
        }
        tokio::time::sleep(LEAD_CHECK).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use roo_store::{Member, Name, RooHome};

    use super::*;

    /// Team `t` in `home`, with a lead and no process recorded.
    fn team_t(home: &std::path::Path) -> Team {
        let t = Name::parse("t").unwrap();
        Team::create(
            &RooHome::new(home),
            t.clone(),
            "",
            Member::new(Name::parse("lead").unwrap(), &t),
            Vec::new(),
        )
        .unwrap()
    }

    #[test]
    fn a_live_pid_that_no_longer_runs_a_lead_is_a_gone_lead() {
        let dir = tempfile::tempdir().unwrap();
        let team = team_t(dir.path());
        assert_eq!(lead_state(&team), LeadState::Absent);
        // The lead's pid now belongs to another program (pid reuse).
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = other.id();
        team.claim_lead(pid, true).unwrap();
        let state = lead_state(&team);
        let _ = other.kill();
        let _ = other.wait();
        assert_eq!(state, LeadState::Gone(pid));
        // This process (an in-process teammate's lead) is a lead.
        team.claim_lead(std::process::id(), true).unwrap();
        assert_eq!(lead_state(&team), LeadState::Alive(std::process::id()));
    }

    #[tokio::test]
    async fn a_question_while_no_lead_runs_is_told_once_and_given_up_after_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let team = team_t(dir.path());
        let mut told = 0;
        let why = unanswerable(&team, Some(Duration::from_millis(600)), || told += 1).await;
        assert_eq!(told, 1);
        assert_eq!(why, "no lead ran for team t within 0s (--orphan-timeout)");
        // A running lead answers: no notice, no giving up.
        team.claim_lead(std::process::id(), true).unwrap();
        let wait = unanswerable(&team, Some(Duration::ZERO), || told += 1);
        assert!(
            tokio::time::timeout(LEAD_CHECK * 3, wait).await.is_err(),
            "gave up although a lead runs"
        );
        assert_eq!(told, 1);
    }

    #[test]
    fn a_lead_is_gone_only_after_absent_looks_spanning_the_window() {
        let w = Duration::from_secs(30);
        let t0 = tokio::time::Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let lead = Some(("lead@t", 7));
        let mut a = Absence::default();
        assert!(!a.observe(lead, Some(false), at(0), w));
        // Looks that prove nothing (a restart, an unreachable store) neither end nor
        // conclude the absence.
        assert!(!a.observe(lead, None, at(20), w));
        assert!(!a.observe(None, None, at(31), w));
        assert!(a.observe(lead, Some(false), at(31), w));
        // Back within the window (a restart, a short cut link): the absence starts again.
        let mut a = Absence::default();
        assert!(!a.observe(lead, Some(false), at(0), w));
        assert!(!a.observe(lead, Some(true), at(29), w));
        assert!(!a.observe(lead, Some(false), at(30), w));
        assert!(!a.observe(lead, Some(false), at(59), w));
        assert!(a.observe(lead, Some(false), at(60), w));
        // A new lead adopting the team starts its own absence.
        let mut a = Absence::default();
        assert!(!a.observe(lead, Some(false), at(0), w));
        assert!(!a.observe(Some(("lead@t", 8)), Some(false), at(31), w));
        assert!(a.observe(Some(("lead@t", 8)), Some(false), at(61), w));
    }
}
