//! Row locks on the PostgreSQL store. docs/PROTOCOL.md §3: "The wait in the queue has a
//! deadline of 10 s, then the operation fails with a lock timeout naming the holder"
//! (exit 3), and a process's other operations — its watchers among them — never wait
//! behind one change stuck on a row lock. A second session of our own (`Raw`) holds
//! the row.
use std::sync::mpsc;
use std::time::{Duration, Instant};

use roo_store::Error;

use super::common::{Raw, name, new_task, pg_home, team_named};

/// A participant that stopped inside a change (SIGSTOP, a debugger, a host cut off whose
/// TCP session the server keeps for the kernel's 2 h keepalive) holds the config row: on
/// files every other participant gets a lock timeout after 10 s; here they hang forever.
#[test]
fn a_change_behind_a_held_row_lock_fails_with_a_timeout_like_a_file_lock() {
    let Some((_d, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    let raw = Raw::connect(&url);
    raw.exec("BEGIN; SELECT 1 FROM roo_doc WHERE key = 'teams/t/config.json' FOR UPDATE");
    let (tx, rx) = mpsc::channel();
    let list = team.tasks();
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let result = list.create(new_task("behind a stuck peer"));
        let _ = tx.send((started.elapsed(), result.map(|t| t.id)));
    });
    let got = rx.recv_timeout(Duration::from_secs(30));
    raw.exec("ROLLBACK");
    waiter.join().unwrap();
    match got {
        Ok((elapsed, Err(e))) => {
            assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
            assert!(
                matches!(e, Error::RowLocked { .. } | Error::Engine { .. }),
                "{e}"
            );
            // The store has rows, not lock files.
            assert!(!e.to_string().contains("lock file"), "{e}");
        }
        Ok((_, Ok(id))) => panic!("created task {id} through a held lock?"),
        Err(_) => panic!(
            "the change still waited for the row lock after 30 s (files: a lock timeout \
             after 10 s, exit 3)"
        ),
    }
}

/// `WatchWaker::stop` "lets another thread ... stop a blocked InboxWatcher::wait
/// promptly" (watch.rs). On PostgreSQL the watcher's poll takes the store's one
/// connection, which another thread's change holds while it waits for a row lock: the
/// watcher cannot stop (nor any read of the process proceed) until that lock is free.
#[test]
fn a_watcher_stops_promptly_while_another_thread_waits_for_a_row_lock() {
    let Some((_d, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    let mut watcher = team.mailbox().watcher(&name("alice")).unwrap();
    let waker = watcher.waker();
    let raw = Raw::connect(&url);
    raw.exec("BEGIN; SELECT 1 FROM roo_doc WHERE key = 'tasks/t/tasks.json' FOR UPDATE");
    let list = team.tasks();
    let blocked = std::thread::spawn(move || list.create(new_task("queued")).map(|t| t.id));
    std::thread::sleep(Duration::from_millis(300));
    let (tx, rx) = mpsc::channel();
    let waiting = std::thread::spawn(move || {
        let outcome = watcher.wait(Duration::from_secs(60));
        let _ = tx.send(outcome);
    });
    // Let the watcher reach its poll (every 500 ms), then stop it.
    std::thread::sleep(Duration::from_millis(1200));
    let stopped_at = Instant::now();
    waker.stop();
    let outcome = rx.recv_timeout(Duration::from_secs(5));
    let took = stopped_at.elapsed();
    raw.exec("ROLLBACK");
    let _ = blocked.join().unwrap();
    waiting.join().unwrap();
    assert!(
        outcome.is_ok(),
        "the watcher did not stop within 5 s ({took:?}): its poll waits for the \
         connection another thread's change holds"
    );
}
