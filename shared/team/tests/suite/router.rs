//! The inbox router against real inboxes written by `roo-mail` processes and by other
//! threads.

use std::time::Duration;

use roo_store::{MessageBody, ReadFilter};
use roo_team::{InboxRouter, ResponseKind, RouterError, TeamEvent, new_request_id, team_events};
use tokio_util::sync::CancellationToken;

use super::common::{TeamHome, name};

fn on_disk(home: &TeamHome, member: &str) -> Vec<roo_store::Message> {
    home.team
        .mailbox()
        .read(&name(member), &ReadFilter::default())
        .unwrap()
}

#[tokio::test]
async fn a_permission_response_goes_to_its_waiter_and_never_to_the_turn_hook() {
    let home = TeamHome::new();
    let router = InboxRouter::new(home.team.mailbox(), name("alice"));
    let id = new_request_id().unwrap();
    let waiter = router
        .expect(ResponseKind::Permission, &id, &name("lead"))
        .unwrap();
    // The answer and an ordinary message land together, written by other processes.
    home.send(
        "lead",
        "alice",
        "permission_response",
        &["--request-id", &id, "--decision", "allow"],
    );
    home.mail(&[
        "send",
        "--as",
        "bob",
        "--to",
        "alice",
        "--summary",
        "parser is done",
        "the parser is done",
    ]);
    assert_eq!(router.poll().await.unwrap(), 2);
    // The turn hook's queue holds only the text message.
    let conversation = router.take_conversation();
    assert_eq!(conversation.len(), 1);
    assert_eq!(conversation[0].body, MessageBody::Text);
    let answer = waiter.recv().await.unwrap();
    assert!(matches!(
        answer.body,
        MessageBody::PermissionResponse { ref request_id, .. } if *request_id == id
    ));
    // On disk: the response is acknowledged; the text stays unread until delivered.
    let disk = on_disk(&home, "alice");
    let response = disk.iter().find(|m| m.id == answer.id).unwrap();
    assert!(response.read && response.acknowledged_at.is_some());
    let text = disk.iter().find(|m| m.id == conversation[0].id).unwrap();
    assert!(!text.read && text.delivered_at.is_none());
    router
        .delivered(vec![conversation[0].id.clone()])
        .await
        .unwrap();
    let text = on_disk(&home, "alice")
        .into_iter()
        .find(|m| m.id == conversation[0].id)
        .unwrap();
    assert!(text.read && text.delivered_at.is_some());
    // Nothing is dispatched twice.
    assert_eq!(router.poll().await.unwrap(), 0);
}

#[tokio::test]
async fn a_response_from_the_wrong_member_or_to_no_open_request_is_ignored() {
    let home = TeamHome::new();
    let (events, mut seen) = team_events();
    let router = InboxRouter::with_events(home.team.mailbox(), name("lead"), events);
    let id = new_request_id().unwrap();
    let waiter = router
        .expect(ResponseKind::Shutdown, &id, &name("alice"))
        .unwrap();
    // bob answers alice's shutdown request, and somebody answers a request never made.
    home.send(
        "bob",
        "lead",
        "shutdown_response",
        &["--approve", "--request-id", &id],
    );
    home.send(
        "alice",
        "lead",
        "shutdown_response",
        &["--approve", "--request-id", "req-made-up"],
    );
    assert_eq!(router.poll().await.unwrap(), 2);
    assert!(router.take_conversation().is_empty());
    assert!(router.take_requests().is_empty());
    // Both were marked read (not looked at again) and reported.
    assert!(on_disk(&home, "lead").iter().all(|m| m.read));
    let mut notices = Vec::new();
    while let Ok(TeamEvent::Notice { text }) = seen.try_recv() {
        notices.push(text);
    }
    assert!(
        notices.iter().any(|n| n.contains("not from alice")),
        "{notices:?}"
    );
    assert!(
        notices.iter().any(|n| n.contains("no open request")),
        "{notices:?}"
    );
    // alice's real answer still reaches the waiter.
    home.send(
        "alice",
        "lead",
        "shutdown_response",
        &["--approve", "--request-id", &id],
    );
    router.poll().await.unwrap();
    let answer = waiter.recv().await.unwrap();
    assert_eq!(answer.from, name("alice"));
}

#[tokio::test]
async fn requests_queue_for_the_runtime_and_stay_unread_until_handled() {
    let home = TeamHome::new();
    let router = InboxRouter::new(home.team.mailbox(), name("alice"));
    home.send("lead", "alice", "shutdown_request", &["--request-id", "r1"]);
    router.poll().await.unwrap();
    assert!(router.take_conversation().is_empty());
    let requests = router.take_requests();
    assert_eq!(requests.len(), 1);
    assert!(matches!(
        requests[0].body,
        MessageBody::ShutdownRequest { .. }
    ));
    assert!(!on_disk(&home, "alice")[0].read);
    router.handled(vec![requests[0].id.clone()]).await.unwrap();
    assert!(on_disk(&home, "alice")[0].acknowledged_at.is_some());
}

#[tokio::test]
async fn a_crash_between_reading_and_delivering_loses_nothing() {
    let home = TeamHome::new();
    home.mail(&[
        "send",
        "--as",
        "bob",
        "--to",
        "alice",
        "--summary",
        "use the v2 API",
        "use v2",
    ]);
    {
        // This process read the message and died before it reached the model.
        let router = InboxRouter::new(home.team.mailbox(), name("alice"));
        router.poll().await.unwrap();
        assert_eq!(router.take_conversation().len(), 1);
    }
    let restarted = InboxRouter::new(home.team.mailbox(), name("alice"));
    restarted.poll().await.unwrap();
    let again = restarted.take_conversation();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].text, "use v2");
    restarted
        .delivered(vec![again[0].id.clone()])
        .await
        .unwrap();
    let after = InboxRouter::new(home.team.mailbox(), name("alice"));
    assert_eq!(after.poll().await.unwrap(), 0);
}

#[tokio::test]
async fn run_wakes_on_a_write_from_another_process_and_closes_waiters_when_stopped() {
    let home = TeamHome::new();
    let router = InboxRouter::new(home.team.mailbox(), name("alice"));
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let router = router.clone();
        let cancel = cancel.clone();
        async move { router.run(cancel).await }
    });
    let waiter = router
        .expect(ResponseKind::PlanApproval, "plan-1", &name("lead"))
        .unwrap();
    home.mail(&[
        "send",
        "--as",
        "bob",
        "--to",
        "alice",
        "--summary",
        "tests pass now",
        "tests pass",
    ]);
    tokio::time::timeout(Duration::from_secs(10), router.input())
        .await
        .expect("the router did not see the message");
    assert_eq!(router.take_conversation()[0].text, "tests pass");
    // A second writer: a thread in this process, through the store.
    let mailbox = home.team.mailbox();
    std::thread::spawn(move || {
        mailbox
            .send(
                &name("lead"),
                "alice",
                roo_store::Outgoing::new(
                    MessageBody::PlanApprovalResponse {
                        request_id: "plan-1".to_string(),
                        approve: true,
                        feedback: String::new(),
                    },
                    "",
                ),
            )
            .unwrap();
    });
    let answer = tokio::time::timeout(Duration::from_secs(10), waiter.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(
        answer.body,
        MessageBody::PlanApprovalResponse { approve: true, .. }
    ));
    let open = router
        .expect(ResponseKind::Permission, "p-1", &name("lead"))
        .unwrap();
    cancel.cancel();
    task.await.unwrap().unwrap();
    assert!(matches!(open.recv().await, Err(RouterError::Closed { .. })));
    assert!(matches!(
        router.expect(ResponseKind::Permission, "p-2", &name("lead")),
        Err(RouterError::Closed { .. })
    ));
    // Stopped: waiting for input returns at once.
    tokio::time::timeout(Duration::from_secs(1), router.input())
        .await
        .unwrap();
}

#[tokio::test]
async fn request_ids_are_unique_and_a_duplicate_wait_is_refused() {
    let home = TeamHome::new();
    let router = InboxRouter::new(home.team.mailbox(), name("alice"));
    let (a, b) = (new_request_id().unwrap(), new_request_id().unwrap());
    assert_ne!(a, b);
    assert_eq!(a.len(), "req-".len() + 32);
    let first = router
        .expect(ResponseKind::Permission, &a, &name("lead"))
        .unwrap();
    assert!(matches!(
        router.expect(ResponseKind::Permission, &a, &name("lead")),
        Err(RouterError::AlreadyAwaited { .. })
    ));
    // Dropping a waiter closes its request: the id can be awaited again.
    drop(first);
    router
        .expect(ResponseKind::Permission, &a, &name("lead"))
        .unwrap();
}

#[tokio::test]
async fn without_file_notifications_polling_still_delivers() {
    let home = TeamHome::new();
    let router = InboxRouter::new(home.team.mailbox(), name("alice"));
    let path = home.team.mailbox().inbox_path(&name("alice"));
    let watcher = roo_store::InboxWatcher::polling(path, Duration::from_millis(20));
    assert!(!watcher.uses_notifications());
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (router, cancel) = (router.clone(), cancel.clone());
        async move { router.run_with(watcher, cancel).await }
    });
    home.mail(&[
        "send",
        "--as",
        "bob",
        "--to",
        "alice",
        "--summary",
        "polled not notified",
        "hello",
    ]);
    tokio::time::timeout(Duration::from_secs(10), router.input())
        .await
        .expect("polling did not pick up the message");
    assert_eq!(router.take_conversation()[0].text, "hello");
    cancel.cancel();
    task.await.unwrap().unwrap();
}

/// A router whose task is dropped with its runtime (a lead exiting while a teammate's
/// router waits) must not hold the runtime's shutdown for its one-minute wait slice.
#[test]
fn a_running_router_dropped_with_its_runtime_ends_its_inbox_wait() {
    let home = TeamHome::new();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let router = InboxRouter::new(home.team.mailbox(), name("alice"));
    let running = router.clone();
    runtime.spawn(async move { running.run(CancellationToken::new()).await });
    // Let it reach its blocking wait: a first read, then the wait (if it has not got
    // there yet the test proves less, but cannot fail falsely).
    runtime.block_on(async {
        for _ in 0..20 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let started = std::time::Instant::now();
    drop(runtime);
    // Far below the 60 s slice: the drop only waits for the blocking thread to notice.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the runtime's shutdown waited {:?} for the inbox wait",
        started.elapsed()
    );
}

/// TeamDelete removes the team while its lead's router still runs: at its next wake the
/// router stops by itself, and no "failed to read the inbox" notice reaches the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_whose_team_is_deleted_stops_quietly() {
    let home = TeamHome::new();
    let (sender, mut events) = team_events();
    let router = InboxRouter::with_events(home.team.mailbox(), name("lead"), sender);
    let running = {
        let router = router.clone();
        tokio::spawn(async move { router.run(CancellationToken::new()).await })
    };
    home.mail(&[
        "send",
        "--as",
        "alice",
        "--to",
        "lead",
        "--summary",
        "hi",
        "hello",
    ]);
    tokio::time::timeout(Duration::from_secs(20), async {
        while router.take_conversation().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    std::fs::remove_dir_all(home.path().join("teams/t")).unwrap();
    // Its next wake (a nudge, a notification, the polling) finds the team gone.
    router.nudge();
    let ended = tokio::time::timeout(Duration::from_secs(20), running).await;
    assert!(ended.is_ok(), "the router kept running on a deleted team");
    while let Ok(event) = events.try_recv() {
        assert!(
            !matches!(&event, TeamEvent::Notice { text } if text.contains("failed to read")),
            "{event:?}"
        );
    }
}
