//! Inbox watcher.
use std::time::{Duration, Instant};

use roo_store::{InboxWatcher, Outgoing, WaitOutcome};

use super::common::{name, team};

#[test]
fn wakes_on_delivery_well_before_the_timeout() {
    let f = team();
    let mb = f.team.mailbox();
    let mut watcher = mb.watcher(&name("alice")).unwrap();
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
    let mut outcome = watcher.wait(Duration::from_secs(20));
    // Spurious changes (e.g. the lock's queue file) are allowed: look again.
    while outcome == WaitOutcome::Changed && mb.unread_count(&name("alice")).unwrap() == 0 {
        outcome = watcher.wait(Duration::from_secs(20));
    }
    assert_eq!(outcome, WaitOutcome::Changed);
    assert!(started.elapsed() < Duration::from_secs(20));
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

#[test]
fn polling_fallback_sees_a_change() {
    let f = team();
    let mb = f.team.mailbox();
    let path = mb.inbox_path(&name("bob"));
    let mut watcher = InboxWatcher::polling(path, Duration::from_millis(10));
    assert!(!watcher.uses_notifications());
    mb.send(&name("lead"), "bob", Outgoing::text("x", "a test message"))
        .unwrap();
    assert_eq!(watcher.wait(Duration::from_secs(20)), WaitOutcome::Changed);
}
