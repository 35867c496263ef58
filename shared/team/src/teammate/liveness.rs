//! Finding teammate processes that died: the lead's side of liveness for `roo-worker`s.
//!
//! [`watch_processes`] calls [`roo_store::Team::detect_dead`] every `interval` (one
//! config read and one `kill(pid, 0)` per member while nobody dies) until cancelled. Each
//! member found dead — its recorded pid is gone: SIGKILL, a crash, a closed pane — is
//! declared dead by the lead (its unfinished tasks back to pending with a note) and
//! reported once as [`TeamEvent::MemberState`] `Dead` plus a notice. In-process
//! teammates carry the lead's pid and are watched by their supervisor instead
//! ([`super::in_process`]).

use std::time::Duration;

use roo_store::{MemberState, Name, Team};
use tokio_util::sync::CancellationToken;

use crate::event::{TeamEvent, TeamEventSender};

/// How often the lead looks: a death is reported within this (plus a config read).
pub const LIVENESS_INTERVAL: Duration = Duration::from_millis(500);

/// Declares dead, and reports, every member whose process died, every `interval` until
/// `cancel`. A failed check (a lock held too long, a damaged config) is logged and
/// retried at the next tick.
pub async fn watch_processes(
    team: Team,
    lead: Name,
    events: TeamEventSender,
    interval: Duration,
    cancel: CancellationToken,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let (store, by) = (team.clone(), lead.clone());
        let deaths = match tokio::task::spawn_blocking(move || store.detect_dead(Some(&by))).await {
            Ok(Ok(deaths)) => deaths,
            Ok(Err(e)) => {
                tracing::warn!(team = %team.name(), error = %e, "failed to check teammates' processes");
                continue;
            }
            Err(e) => {
                tracing::warn!(team = %team.name(), error = %e, "failed to check teammates' processes");
                continue;
            }
        };
        for death in deaths {
            let name = death.member.name.clone();
            let reason = death.member.dead_reason.clone().unwrap_or_default();
            tracing::warn!(member = %name, %reason, "teammate died");
            events.send(TeamEvent::MemberState {
                name: name.clone(),
                state: MemberState::Dead,
            });
            events.send(TeamEvent::Notice {
                text: format!(
                    "teammate {name} died ({reason}); {} task(s) returned to pending",
                    death.released.len()
                ),
            });
        }
    }
}
