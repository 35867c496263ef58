//! What the idle lead shows and does about its team: the one line a team event
//! prints above the prompt, and team turns, where teammates' messages start a
//! turn of the lead's own (when they have waited long enough, and how many in a
//! row before they pause for the person).

use roo_team::{TeamEvent, TeamSlot, TeamStatus};

use crate::render::Style;

/// Team turns in a row, without the person's prompt, before they pause: a lead and
/// teammates answering each other without end cost tokens nobody asked for.
pub(super) const MAX_TEAM_TURNS: u32 = 25;

/// When teammates' messages start a turn of their own while the lead is idle.
pub(super) struct TeamTurns {
    /// The `team_turns` setting.
    enabled: bool,
    /// A team turn was stopped or failed, or there were too many in a row: messages
    /// wait for the person's next prompt.
    pub(super) paused: bool,
    /// Team turns since the person's last prompt.
    pub(super) in_a_row: u32,
    /// When messages that wake the lead were first seen waiting ([`TEAM_MAX_DELAY`](roo_team::lead::TEAM_MAX_DELAY)).
    pub(super) waiting_since: Option<tokio::time::Instant>,
}

impl TeamTurns {
    pub(super) fn new(enabled: bool) -> TeamTurns {
        TeamTurns {
            enabled,
            paused: false,
            in_a_row: 0,
            waiting_since: None,
        }
    }

    pub(super) fn ready(&self) -> bool {
        self.enabled && !self.paused
    }

    /// The person submitted a prompt: team turns may start again afterwards.
    pub(super) fn person_spoke(&mut self) {
        self.paused = false;
        self.in_a_row = 0;
    }
}

/// Resolves when teammates' messages have waited for the lead long enough to take them
/// up: [`TEAM_QUIET`](roo_team::lead::TEAM_QUIET) after now (the caller starts this again after every message or
/// key, so typing and a burst of messages postpone it), at most [`TEAM_MAX_DELAY`](roo_team::lead::TEAM_MAX_DELAY)
/// after they were first seen (`since`).
pub(super) async fn team_wake(slot: &TeamSlot, since: &mut Option<tokio::time::Instant>) {
    roo_team::lead::team_input(slot).await;
    let now = tokio::time::Instant::now();
    let first = *since.get_or_insert(now);
    tokio::time::sleep_until(
        (now + roo_team::lead::TEAM_QUIET).min(first + roo_team::lead::TEAM_MAX_DELAY),
    )
    .await;
}

/// One styled line for a team event; a state change shows the whole status line, read
/// when the event is shown — so several changes seen in one poll would print the same
/// line several times: `last_status` (the status line shown last) leaves those out.
pub(super) fn team_line(
    style: &Style,
    event: &TeamEvent,
    status: &Option<TeamStatus>,
    last_status: &mut Option<String>,
) -> Option<String> {
    Some(match event {
        TeamEvent::MemberState { .. } if status.is_some() => {
            let line = status.as_ref().map(TeamStatus::line).unwrap_or_default();
            if last_status.as_deref() == Some(line.as_str()) {
                return None;
            }
            *last_status = Some(line.clone());
            style.dim(&line)
        }
        TeamEvent::Message { .. } => style.cyan(&event.line()),
        TeamEvent::Joined { .. } | TeamEvent::MemberState { .. } | TeamEvent::Notice { .. } => {
            style.dim(&event.line())
        }
    })
}
