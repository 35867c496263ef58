//! Waking a pane teammate right after its inbox was written.
//!
//! An idle `roo-worker` waits on its inbox with file-change notification and a polling
//! fallback ([`crate::InboxWatcher`]); where notification is unavailable (network file
//! systems, exhausted inotify watches) the fallback alone would cost up to its interval
//! per message. So whoever writes to a pane teammate's inbox — the lead, another
//! teammate, or a person with `roo-mail send` — also sends the worker's process
//! [`WAKE_SIGNAL`], and the worker reads its inbox at once.
//!
//! Why a signal to the pid, and this one: typing into the pane would mix with what the
//! person types there; a socket or FIFO per worker needs a path and cleanup. A signal
//! needs neither. `SIGURG`'s default action is to be ignored, so a wake can never kill
//! anything: not a worker that has not installed its handler yet, and not an unrelated
//! process that reused a dead worker's pid.

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::{BackendType, Member, Name, Team, TeamConfig};

/// The signal that wakes a worker.
pub const WAKE_SIGNAL: Signal = Signal::SIGURG;

/// Sends [`WAKE_SIGNAL`] to `pid`. Returns whether it was delivered.
pub fn send(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 1 {
        return false;
    }
    nix::sys::signal::kill(Pid::from_raw(raw), WAKE_SIGNAL).is_ok()
}

/// Wakes member `to` of `team` if the roster says it runs in a pane (tmux or iTerm2),
/// is not dead, and has a live pid other than this process. Returns whether a wake was
/// sent. Best effort: a roster that cannot be read wakes nobody (the worker's watcher
/// still delivers).
pub fn member(team: &Team, to: &Name) -> bool {
    team.config().is_ok_and(|config| in_roster(&config, to))
}

/// Wakes every pane member a message to `to` from `from` went to (`*`: all but the
/// sender; see [`TeamConfig::resolve`]). Returns how many were woken.
pub fn addressed(team: &Team, to: &str, from: &str) -> usize {
    let Ok(config) = team.config() else {
        return 0;
    };
    config
        .resolve(to, from)
        .unwrap_or_default()
        .iter()
        .filter(|name| in_roster(&config, name))
        .count()
}

fn in_roster(config: &TeamConfig, to: &Name) -> bool {
    config
        .members
        .iter()
        .find(|m| &m.name == to)
        .filter(|m| {
            m.dead_at.is_none()
                && matches!(
                    m.backend_type,
                    Some(BackendType::Tmux | BackendType::Iterm2)
                )
        })
        // A member on another host is not signalled: its pid is not a process here.
        .and_then(Member::local_pid)
        .filter(|pid| *pid != std::process::id() && crate::pid_alive(*pid))
        .is_some_and(send)
}
