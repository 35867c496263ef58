//! Waking a pane teammate right after its inbox was written: the sending side is
//! [`roo_store::wake`] (the lead, teammates and `roo-mail send` all use it); this is the
//! worker's side, which turns [`WAKE_SIGNAL`] into an immediate inbox read, and the
//! hook that wakes each recipient of a worker's own messages.

use roo_store::{Name, Team};

use crate::router::InboxRouter;

use roo_store::wake::{WAKE_SIGNAL, member};

/// Starts a task that nudges `router` whenever this process receives [`WAKE_SIGNAL`].
/// The handler is installed before this returns (call it before joining the team, so
/// the pid in the roster always has it). Fails only if the handler cannot be installed.
pub fn listen(router: InboxRouter) -> std::io::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut nudges = signal(SignalKind::from_raw(WAKE_SIGNAL as i32))?;
    Ok(tokio::spawn(async move {
        while nudges.recv().await.is_some() {
            router.nudge();
        }
    }))
}

/// A hook for a `roo-worker`'s team tools (their [`crate::tools::OnSent`]) that nudges
/// each recipient running in a pane ([`member`]). Typed as the closure it is, so the
/// backends name no tool.
pub fn roster_waker(team: Team) -> std::sync::Arc<dyn Fn(&Name) + Send + Sync> {
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
        assert!(roo_store::wake::send(std::process::id()));
        tokio::time::timeout(Duration::from_secs(10), router.input())
            .await
            .expect("the signal nudged the router");
        listener.abort();
        cancel.cancel();
    }
}
