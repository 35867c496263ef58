//! Waking a pane teammate right after its inbox was written.
//!
//! An idle `roo-worker` waits on its inbox with file-change notification and a polling
//! fallback (`roo_store::InboxWatcher`); where notification is unavailable (network file
//! systems, exhausted inotify watches) the fallback alone would cost up to its interval
//! per message. So after every inbox write to a pane teammate the lead also sends the
//! worker's process [`NUDGE_SIGNAL`], and the worker's [`listen`] task makes its router
//! read the inbox at once ([`InboxRouter::nudge`]).
//!
//! Why a signal to the pid, and this one: typing into the pane (`send-keys`) would mix
//! with what the person types there and race the worker's terminal; a socket or FIFO
//! per worker needs a path (socket paths are limited to ~100 bytes) and cleanup. A
//! signal needs neither. `SIGURG`'s default action is to be ignored, so a nudge can never
//! kill anything: not a worker that has not installed its handler yet, and not an
//! unrelated process that reused a dead worker's pid. The lead further sends it only to
//! a pid that both the roster (the worker recorded it when it joined) and tmux (the
//! pane's `#{pane_pid}`) name for that teammate ([`send`]'s caller checks).

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use roo_store::{BackendType, Name, Team};

use crate::router::InboxRouter;
use crate::tools::OnSent;

/// The signal that nudges a worker.
pub const NUDGE_SIGNAL: Signal = Signal::SIGURG;

/// Starts a task that nudges `router` whenever this process receives [`NUDGE_SIGNAL`].
/// The handler is installed before this returns (call it before joining the team, so
/// the pid in the roster always has it). Fails only if the handler cannot be installed.
pub fn listen(router: InboxRouter) -> std::io::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut nudges = signal(SignalKind::from_raw(NUDGE_SIGNAL as i32))?;
    Ok(tokio::spawn(async move {
        while nudges.recv().await.is_some() {
            router.nudge();
        }
    }))
}

/// Sends [`NUDGE_SIGNAL`] to `pid`. Returns whether it was delivered.
pub fn send(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 1 {
        return false;
    }
    nix::sys::signal::kill(Pid::from_raw(raw), NUDGE_SIGNAL).is_ok()
}

/// Nudges member `to` of `team` if the roster says it runs in a pane (tmux or iTerm2)
/// with a live pid other than this process. Returns whether a nudge was sent.
pub fn member(team: &Team, to: &Name) -> bool {
    let Ok(config) = team.config() else {
        return false;
    };
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
        .and_then(|m| m.pid)
        .filter(|pid| *pid != std::process::id() && roo_store::pid_alive(*pid))
        .is_some_and(send)
}

/// An [`OnSent`] hook (for a `roo-worker`'s team tools) that nudges each recipient
/// running in a pane ([`member`]).
pub fn roster_waker(team: Team) -> OnSent {
    std::sync::Arc::new(move |to: &Name| {
        member(&team, to);
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use roo_store::{Member, Outgoing, RooHome};
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn name(s: &str) -> Name {
        Name::parse(s).unwrap()
    }

    /// A router whose watcher has no notifications and polls once an hour: only a
    /// nudge can make it read the inbox within the test's time.
    fn deaf_router(dir: &std::path::Path) -> (Team, InboxRouter, CancellationToken) {
        let t = name("t");
        let team = Team::create(
            &RooHome::new(dir),
            t.clone(),
            "",
            Member::new(name("lead"), &t),
            vec![Member::new(name("alice"), &t)],
        )
        .unwrap();
        let router = InboxRouter::new(team.mailbox(), name("alice"));
        let watcher = roo_store::InboxWatcher::polling(
            team.mailbox().inbox_path(&name("alice")),
            Duration::from_secs(3600),
        );
        let cancel = CancellationToken::new();
        tokio::spawn({
            let (router, cancel) = (router.clone(), cancel.clone());
            async move { router.run_with(watcher, cancel).await }
        });
        (team, router, cancel)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_nudge_wakes_an_idle_router_whose_inbox_watch_is_blind() {
        let dir = tempfile::tempdir().unwrap();
        let (team, router, cancel) = deaf_router(dir.path());
        // Let the router reach its wait.
        tokio::time::sleep(Duration::from_millis(50)).await;
        team.mailbox()
            .send(&name("lead"), "alice", Outgoing::text("hello", "hi"))
            .unwrap();
        let unseen = tokio::time::timeout(Duration::from_millis(500), router.input()).await;
        assert!(unseen.is_err(), "a blind watcher does not see the write");
        router.nudge();
        tokio::time::timeout(Duration::from_secs(10), router.input())
            .await
            .expect("the nudge made the router read the inbox");
        assert_eq!(router.take_conversation().len(), 1);
        cancel.cancel();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_nudge_signal_to_this_pid_wakes_the_listening_router() {
        let dir = tempfile::tempdir().unwrap();
        let (team, router, cancel) = deaf_router(dir.path());
        let listener = listen(router.clone()).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        team.mailbox()
            .send(&name("lead"), "alice", Outgoing::text("hello", "hi"))
            .unwrap();
        assert!(send(std::process::id()));
        tokio::time::timeout(Duration::from_secs(10), router.input())
            .await
            .expect("the signal nudged the router");
        listener.abort();
        cancel.cancel();
    }
}
