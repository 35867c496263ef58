//! A lead's wait for its team between turns. A headless lead waits in
//! [`wait_for_team`] until a message is queued for its conversation, every teammate is
//! idle or dead with nothing unread, or the team's deadline; [`gather_input`] then lets
//! messages arriving together make one turn. An interactive lead waits on
//! [`team_input`] beside its keyboard.

use std::time::Duration;

use roo_store::{Liveness, MemberState, Message, MessageBody, Name, ReadFilter, Team, TeamConfig};
use tokio::sync::watch;
use tokio::time::Instant;

use super::status::TeamStatus;
use crate::binding::TeamSlot;
use crate::router::InboxRouter;

/// How a headless lead's wait for its team ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TeamWait {
    /// Messages wait for the lead: take them as a new turn.
    Input,
    /// Every teammate is idle or dead and nothing is unread: the team is done.
    Settled,
    /// The deadline passed with these teammates still busy.
    TimedOut { busy: Vec<Name> },
    /// The lead has no team (any more).
    Unbound,
    /// The team config could not be read for [`BROKEN_AFTER`] (corrupt, quarantined,
    /// deleted under the lead): waiting longer cannot end well.
    Broken { error: String },
}

/// Whether a message waiting for the lead's conversation wakes an idle interactive
/// lead: everything but `status_update` (progress news waits for the next turn).
pub fn wakes_lead(message: &Message) -> bool {
    !matches!(message.body, MessageBody::StatusUpdate)
}

/// Resolves once a message that [wakes the lead](wakes_lead) waits for the conversation
/// of the team `slot` is bound to (whatever team that is by then); never while the slot
/// stays unbound or the router has stopped. What an idle interactive lead waits on
/// beside its keyboard.
pub async fn team_input(slot: &TeamSlot) {
    let mut bindings = slot.subscribe();
    loop {
        let binding = bindings.borrow_and_update().clone();
        let rebound = async {
            if bindings.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        match binding {
            Some(binding) => tokio::select! {
                true = binding.router.conversation_where(wakes_lead) => return,
                () = rebound => {}
            },
            None => rebound.await,
        }
    }
}

/// Quiet time after the team's last message before an idle lead takes its messages up:
/// several arriving together (two teammates finishing at once, a report and the idle
/// notification after it) make one turn.
pub const TEAM_QUIET: Duration = Duration::from_millis(300);
/// The longest an idle lead waits after the first message, however busy the team.
pub const TEAM_MAX_DELAY: Duration = Duration::from_secs(2);

/// Once messages wait for the lead's conversation: resolves when none has arrived for
/// [`TEAM_QUIET`], at most [`TEAM_MAX_DELAY`] after the call and never after `deadline`
/// (the team's timeout), so that a headless lead answers what arrives together in one
/// turn (every turn resends the whole prompt).
pub async fn gather_input(slot: &TeamSlot, deadline: Instant) {
    let Some(binding) = slot.get() else {
        return;
    };
    let until = (Instant::now() + TEAM_MAX_DELAY).min(deadline);
    let mut seen = binding.router.conversation_len();
    loop {
        tokio::time::sleep_until((Instant::now() + TEAM_QUIET).min(until)).await;
        if let Err(e) = binding.router.poll().await {
            tracing::warn!(error = %e, "failed to read the lead's inbox");
        }
        let now = binding.router.conversation_len();
        if now <= seen || Instant::now() >= until {
            return;
        }
        seen = now;
    }
}

/// How long the team config may fail to read before a headless lead stops waiting.
pub const BROKEN_AFTER: Duration = Duration::from_secs(2);

/// How long after a message to an idle teammate a headless lead still expects it to
/// wake (and so does not settle).
const WOKEN_WITHIN: Duration = Duration::from_secs(10);

/// How often the wait looks again even without a wake-up.
const WAIT_TICK: Duration = Duration::from_millis(250);

/// A headless lead's wait between its turns: returns [`TeamWait::Input`] as soon as a
/// message for the conversation is queued, [`TeamWait::Settled`] once every teammate is
/// idle or dead and the inbox holds nothing unread, [`TeamWait::TimedOut`] at
/// `deadline`. Requests are left to [`spawn_request_answerer`](super::spawn_request_answerer).
/// Wakes on the router's conversation queue and the monitor's status, and looks again
/// every 250 ms anyway.
pub async fn wait_for_team(
    slot: &TeamSlot,
    status: &mut watch::Receiver<Option<TeamStatus>>,
    deadline: Instant,
) -> TeamWait {
    let mut waiting = Waiting::new();
    loop {
        let Some(binding) = slot.get() else {
            return TeamWait::Unbound;
        };
        // The states first, then the inbox: a teammate writes its messages before it
        // records itself idle, so what it said before going idle is read here.
        let team = binding.team.clone();
        let read = tokio::task::spawn_blocking(move || TeamRead::of(&team)).await;
        let look = match waiting.judge(read) {
            Ok(look) => look,
            Err(end) => return end,
        };
        if let Err(e) = binding.router.poll().await {
            tracing::warn!(error = %e, "failed to read the lead's inbox");
        }
        // The monitor declares a death and then tells the lead's inbox, and publishes its
        // status only after both: settling also needs its view, so a death declared a
        // moment ago is not settled on before its message is in the inbox.
        let monitor_settled =
            !waiting.monitor_open || status.borrow().as_ref().is_some_and(TeamStatus::settled);
        if Instant::now() >= deadline
            && let Some(busy) = busy_at_deadline(&look, monitor_settled, status)
        {
            return TeamWait::TimedOut { busy };
        }
        if binding.router.has_conversation() {
            return TeamWait::Input;
        }
        let busy = match look {
            Ok(()) if monitor_settled => return TeamWait::Settled,
            Ok(()) => Vec::new(),
            Err(busy) => busy,
        };
        if let Some(end) = waiting
            .next_look(&binding.router, status, deadline, busy)
            .await
        {
            return end;
        }
    }
}

/// What one look at the team found: `Ok` when it is settled, else who keeps it busy
/// (nobody named when the look itself failed: the monitor's view decides then).
type Look = Result<(), Vec<Name>>;

/// The team as one blocking read of its config found it.
struct TeamRead {
    /// Deaths the monitor has not declared yet ([`undeclared_deaths`]).
    undeclared: Vec<Name>,
    /// Idle teammates a fresh message is about to wake ([`woken_teammates`]).
    woken: Vec<Name>,
    status: TeamStatus,
}

impl TeamRead {
    /// Reads the team's config and liveness, and the inboxes of its idle teammates
    /// (blocking).
    fn of(team: &Team) -> Result<TeamRead, roo_store::Error> {
        let config = team.config()?;
        let liveness = team.liveness(&config)?;
        Ok(TeamRead {
            undeclared: undeclared_deaths(&config, &liveness),
            woken: woken_teammates(team, &config, &liveness),
            status: TeamStatus::of(&config, &liveness),
        })
    }
}

/// Teammates dead by their liveness whom the config does not mark dead yet: the monitor
/// is about to declare them, and to tell the lead's model; settling now would end the
/// run before that message.
fn undeclared_deaths(config: &TeamConfig, liveness: &Liveness) -> Vec<Name> {
    config
        .members
        .iter()
        .filter(|m| {
            !config.is_lead(m.name.as_str())
                && liveness.observed_state(m) == MemberState::Dead
                && m.state() != MemberState::Dead
        })
        .map(|m| m.name.clone())
        .collect()
}

/// Idle teammates with a fresh message that wakes them (the lead's last turn may have
/// just sent it): they are about to be busy, so the team is not settled yet.
fn woken_teammates(team: &Team, config: &TeamConfig, liveness: &Liveness) -> Vec<Name> {
    let now_ms = roo_store::Timestamp::now().unix_ms();
    config
        .members
        .iter()
        .filter(|m| {
            !config.is_lead(m.name.as_str())
                && !m.shut_down()
                && liveness.observed_state(m) == MemberState::Idle
        })
        .filter(|m| wakes_soon(team, &m.name, now_ms))
        .map(|m| m.name.clone())
        .collect()
}

/// Whether `member`'s unread mail holds a message that wakes it, sent less than
/// [`WOKEN_WITHIN`] before `now_ms`. Only text and task assignments count, and only for
/// that long: a member that does not wake by then (a worker that stopped) is not waited
/// for.
fn wakes_soon(team: &Team, member: &Name, now_ms: i64) -> bool {
    let unread = ReadFilter {
        unread_only: true,
        ..ReadFilter::default()
    };
    team.mailbox().read(member, &unread).is_ok_and(|mail| {
        mail.iter().any(|message| {
            matches!(
                message.body,
                MessageBody::Text | MessageBody::TaskAssignment { .. }
            ) && (0..WOKEN_WITHIN.as_millis() as i64)
                .contains(&(now_ms - message.timestamp.unix_ms()))
        })
    })
}

/// Who keeps the team busy once its deadline has passed, `None` when it is settled.
/// Past the deadline a busy team ends the wait, whatever its messages: the timeout is for
/// the whole wait, so a team that keeps writing cannot keep the lead past it (the
/// messages are still there to read). A settled team's last messages still get their
/// turn.
fn busy_at_deadline(
    look: &Look,
    monitor_settled: bool,
    status: &watch::Receiver<Option<TeamStatus>>,
) -> Option<Vec<Name>> {
    match look {
        Err(busy) if busy.is_empty() => Some(monitor_busy(status)),
        Err(busy) => Some(busy.clone()),
        Ok(()) if !monitor_settled => Some(monitor_busy(status)).filter(|b| !b.is_empty()),
        Ok(()) => None,
    }
}

/// The teammates busy in the monitor's last status.
fn monitor_busy(status: &watch::Receiver<Option<TeamStatus>>) -> Vec<Name> {
    status
        .borrow()
        .as_ref()
        .map(TeamStatus::busy)
        .unwrap_or_default()
}

/// What the wait keeps from one look to the next.
struct Waiting {
    /// Whether the router's and the monitor's wake-ups are still selected on: once the
    /// router stopped (or the monitor ended), they resolve at once, and the wait relies
    /// on the tick.
    router_open: bool,
    monitor_open: bool,
    /// Since when the team config fails to read, and its last error.
    failing_since: Option<(Instant, String)>,
    /// Since when a death stands undeclared.
    undeclared_since: Option<Instant>,
}

impl Waiting {
    fn new() -> Waiting {
        Waiting {
            router_open: true,
            monitor_open: true,
            failing_since: None,
            undeclared_since: None,
        }
    }

    /// What one read of the team says, or the end of the wait once the config has
    /// failed to read for [`BROKEN_AFTER`].
    fn judge(
        &mut self,
        read: Result<Result<TeamRead, roo_store::Error>, tokio::task::JoinError>,
    ) -> Result<Look, TeamWait> {
        match read {
            Ok(Ok(read)) => Ok(self.judge_read(read)),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "failed to read the team config");
                let since = self
                    .failing_since
                    .get_or_insert_with(|| (Instant::now(), String::new()));
                since.1 = e.to_string();
                if since.0.elapsed() >= BROKEN_AFTER {
                    return Err(TeamWait::Broken {
                        error: since.1.clone(),
                    });
                }
                Ok(Err(Vec::new()))
            }
            Err(_) => Ok(Err(Vec::new())),
        }
    }

    /// A death undeclared for less than [`BROKEN_AFTER`] keeps the team busy, and so
    /// does a teammate about to wake; else the states decide.
    fn judge_read(&mut self, read: TeamRead) -> Look {
        self.failing_since = None;
        if read.undeclared.is_empty() {
            self.undeclared_since = None;
        } else {
            self.undeclared_since.get_or_insert_with(Instant::now);
        }
        let waiting = self
            .undeclared_since
            .is_some_and(|since| since.elapsed() < BROKEN_AFTER);
        if waiting {
            Err(read.undeclared)
        } else if !read.woken.is_empty() {
            Err(read.woken)
        } else {
            read.status
                .settled()
                .then_some(())
                .ok_or(read.status.busy())
        }
    }

    /// Waits for a reason to look again: a message for the conversation, a new status
    /// from the monitor, or the tick. At `deadline` the wait ends timed out with `busy`
    /// (the monitor's busy teammates when `busy` names nobody).
    async fn next_look(
        &mut self,
        router: &InboxRouter,
        status: &mut watch::Receiver<Option<TeamStatus>>,
        deadline: Instant,
        busy: Vec<Name>,
    ) -> Option<TeamWait> {
        tokio::select! {
            open = router.conversation(), if self.router_open => self.router_open = open,
            changed = status.changed(), if self.monitor_open => self.monitor_open = changed.is_ok(),
            _ = tokio::time::sleep(WAIT_TICK) => {}
            _ = tokio::time::sleep_until(deadline) => {
                let busy = if busy.is_empty() { monitor_busy(status) } else { busy };
                return Some(TeamWait::TimedOut { busy });
            }
        }
        None
    }
}
