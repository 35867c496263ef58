//! Inbox watcher.
use std::time::{Duration, Instant};

use roo_store::{InboxWatcher, Outgoing, WaitOutcome};

use super::common::{name, team};

/// Only a file-change notification can wake the watcher before `TIMEOUT`: its polling
/// interval is an hour, so the polling fallback looks at the file first when the timeout
/// ends (`recv_timeout` never returns early), and a poll-detected change therefore comes
/// at `TIMEOUT` or later. Notification arrives in milliseconds.
#[test]
fn notification_wakes_the_watcher_before_polling_could() {
    const TIMEOUT: Duration = Duration::from_secs(30);
    let f = team();
    let mb = f.team.mailbox();
    let mut watcher = mb
        .watcher(&name("alice"))
        .unwrap()
        .with_poll_interval(Duration::from_secs(3600));
    assert!(watcher.uses_notifications());
    let sender = {
        let mb = mb.clone();
        std::thread::spawn(move || {
            mb.send(
                &name("lead"),
                "alice",
                Outgoing::text("wake up", "wake up call"),
            )
            .unwrap();
        })
    };
    let started = Instant::now();
    let mut outcome = watcher.wait(TIMEOUT);
    // Spurious changes (e.g. the lock's queue file) are allowed: look again.
    while outcome == WaitOutcome::Changed
        && mb.unread_count(&name("alice")).unwrap() == 0
        && started.elapsed() < TIMEOUT
    {
        outcome = watcher.wait(TIMEOUT.saturating_sub(started.elapsed()));
    }
    let elapsed = started.elapsed();
    assert_eq!(outcome, WaitOutcome::Changed);
    assert!(
        elapsed < TIMEOUT,
        "woken after {elapsed:?}: by polling at the timeout, not by notification"
    );
    sender.join().unwrap();
}

#[test]
fn times_out_and_can_be_woken_and_stopped_from_another_thread() {
    let f = team();
    let mut watcher = f.team.mailbox().watcher(&name("bob")).unwrap();
    assert_eq!(
        watcher.wait(Duration::from_millis(30)),
        WaitOutcome::TimedOut
    );
    let waker = watcher.waker();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        for _ in 0..3 {
            tx.send(watcher.wait(Duration::from_secs(30))).unwrap();
        }
    });
    waker.wake();
    assert_eq!(rx.recv().unwrap(), WaitOutcome::Woken);
    waker.stop();
    assert_eq!(rx.recv().unwrap(), WaitOutcome::Stopped);
    assert_eq!(rx.recv().unwrap(), WaitOutcome::Stopped);
    t.join().unwrap();
}

/// With notifications off, only polling can see the change; it must do so at its
/// interval, long before the timeout (a change found only when the timeout ends means
/// the fallback does not poll).
#[test]
fn polling_fallback_sees_a_change_at_its_interval_without_notification() {
    const TIMEOUT: Duration = Duration::from_secs(30);
    let f = team();
    let mb = f.team.mailbox();
    let path = mb.inbox_path(&name("bob"));
    let mut watcher = InboxWatcher::polling(path, Duration::from_millis(10));
    assert!(!watcher.uses_notifications());
    mb.send(&name("lead"), "bob", Outgoing::text("x", "a test message"))
        .unwrap();
    let started = Instant::now();
    assert_eq!(watcher.wait(TIMEOUT), WaitOutcome::Changed);
    let elapsed = started.elapsed();
    assert!(
        elapsed < TIMEOUT,
        "the change was seen only at the timeout ({elapsed:?}), not by polling"
    );
}
