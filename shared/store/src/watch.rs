//! Waiting for an inbox to change: file-change notification plus a polling fallback.
//!
//! Polling every 500 ms would cost 250 ms on average. An [`InboxWatcher`] instead
//! subscribes to the inbox directory with `notify` (inotify on Linux) and wakes within
//! milliseconds of the atomic rename that delivers a message. It also compares the file's (inode, size,
//! mtime) signature on a timer, so a missed or unsupported notification (network file
//! systems, exhausted inotify watches) costs latency, never a message. A [`WatchWaker`]
//! lets another thread wake or stop a blocked [`InboxWatcher::wait`] promptly, which is how
//! the async runtime cancels an idle teammate's wait from `spawn_blocking`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use notify::{EventKind, RecursiveMode, Watcher};

use crate::error::Result;
use crate::pg::{PgStore, Subscription};

/// Polling interval when notifications work (a safety net only).
pub const POLL_WITH_NOTIFY: Duration = Duration::from_millis(500);
/// Polling interval when notifications are unavailable.
pub const POLL_WITHOUT_NOTIFY: Duration = Duration::from_millis(50);

/// Why [`InboxWatcher::wait`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The inbox file changed (look at it: it may or may not hold new messages).
    Changed,
    /// [`WatchWaker::wake`] was called.
    Woken,
    /// [`WatchWaker::stop`] was called; every later wait returns this at once.
    Stopped,
    /// The timeout passed without a change.
    TimedOut,
}

enum Signal {
    Changed,
    Wake,
    Stop,
}

type Signature = Option<(u64, u64, i64, i64)>;

/// A row's revision as a signature; `None` without a row. A store that cannot be read
/// gives a new signature at every poll, so the reader looks and reports the error.
fn pg_signature(pg: &PgStore, key: &str) -> Signature {
    pg_revision_signature(pg.revision(key))
}

fn pg_revision_signature(revision: Result<Option<i64>>) -> Signature {
    match revision {
        Ok(rev) => rev.map(|rev| (rev as u64, 0, 0, 0)),
        Err(_) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            Some((u64::MAX, now.as_secs(), i64::from(now.subsec_nanos()), -1))
        }
    }
}

fn signature(path: &Path) -> Signature {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

/// Wakes or stops an [`InboxWatcher`] from another thread. Cheap to clone.
#[derive(Clone, Debug)]
pub struct WatchWaker {
    tx: Sender<Signal>,
    stopped: Arc<AtomicBool>,
}

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Signal::Changed => "Changed",
            Signal::Wake => "Wake",
            Signal::Stop => "Stop",
        })
    }
}

impl WatchWaker {
    /// Makes the current (or next) wait return [`WaitOutcome::Woken`].
    pub fn wake(&self) {
        let _ = self.tx.send(Signal::Wake);
    }

    /// Makes the current and every later wait return [`WaitOutcome::Stopped`].
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let _ = self.tx.send(Signal::Stop);
    }
}

/// Blocks until one inbox file changes, a waker fires, or a timeout passes. `Send`; meant
/// to be moved into a blocking thread.
pub struct InboxWatcher {
    path: PathBuf,
    /// In the PostgreSQL store: the store, the inbox's key and the subscription to its
    /// notifications (the poll compares the row's revision instead of the file's).
    pg: Option<(PgStore, String, Subscription)>,
    rx: Receiver<Signal>,
    waker: WatchWaker,
    watcher: Option<notify::RecommendedWatcher>,
    poll: Duration,
    last: Signature,
    pending_wake: bool,
}

impl std::fmt::Debug for InboxWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxWatcher")
            .field("path", &self.path)
            .field("notifications", &self.uses_notifications())
            .field("postgresql", &self.pg.is_some())
            .field("poll", &self.poll)
            .finish()
    }
}

impl InboxWatcher {
    /// Watches the file at `path`, whose directory must exist.
    pub fn new(path: PathBuf) -> Result<InboxWatcher> {
        let (tx, rx) = mpsc::channel();
        let watcher = subscribe(&path, tx.clone());
        let poll = if watcher.is_some() {
            POLL_WITH_NOTIFY
        } else {
            POLL_WITHOUT_NOTIFY
        };
        Ok(InboxWatcher {
            last: signature(&path),
            path,
            pg: None,
            rx,
            waker: WatchWaker {
                tx,
                stopped: Arc::new(AtomicBool::new(false)),
            },
            watcher,
            poll,
            pending_wake: false,
        })
    }

    /// The same, with notifications disabled: polling only (for tests and comparisons).
    pub fn polling(path: PathBuf, interval: Duration) -> InboxWatcher {
        let (tx, rx) = mpsc::channel();
        InboxWatcher {
            last: signature(&path),
            path,
            pg: None,
            rx,
            waker: WatchWaker {
                tx,
                stopped: Arc::new(AtomicBool::new(false)),
            },
            watcher: None,
            poll: interval,
            pending_wake: false,
        }
    }

    /// Watches the inbox `key` of the PostgreSQL store `pg` (`path`: where its file would
    /// be, for messages): woken by the store's notifications of committed changes, and
    /// polling the row's revision every [`POLL_WITH_NOTIFY`] as the safety net — both on
    /// the store's presence connection, which never waits behind a change.
    pub(crate) fn for_pg(path: PathBuf, pg: PgStore, key: String) -> Result<InboxWatcher> {
        let (tx, rx) = mpsc::channel();
        let notify_tx = std::sync::Mutex::new(tx.clone());
        let subscription = pg.watch(
            &key,
            Arc::new(move |/* on the store's connection thread */| {
                if let Ok(tx) = notify_tx.lock() {
                    let _ = tx.send(Signal::Changed);
                }
            }),
        )?;
        let last = pg_signature(&pg, &key);
        Ok(InboxWatcher {
            last,
            path,
            pg: Some((pg, key, subscription)),
            rx,
            waker: WatchWaker {
                tx,
                stopped: Arc::new(AtomicBool::new(false)),
            },
            watcher: None,
            poll: POLL_WITH_NOTIFY,
            pending_wake: false,
        })
    }

    fn signature(&self) -> Signature {
        match &self.pg {
            // On the presence connection: never behind a change in progress.
            Some((pg, key, _)) => pg_signature(pg, key),
            None => signature(&self.path),
        }
    }

    /// The same watcher polling every `interval` (with notifications, the polling is only a
    /// safety net; a test sets it very long so that only a notification can deliver early).
    pub fn with_poll_interval(mut self, interval: Duration) -> InboxWatcher {
        self.poll = interval;
        self
    }

    /// Whether file-change notifications are active (else it only polls).
    pub fn uses_notifications(&self) -> bool {
        self.watcher.is_some() || self.pg.is_some()
    }

    /// A handle to wake or stop this watcher from another thread.
    pub fn waker(&self) -> WatchWaker {
        self.waker.clone()
    }

    /// Blocks until the inbox changes, a waker fires, or `timeout` passes.
    pub fn wait(&mut self, timeout: Duration) -> WaitOutcome {
        let deadline = Instant::now() + timeout;
        loop {
            if self.waker.stopped.load(Ordering::SeqCst) {
                return WaitOutcome::Stopped;
            }
            if std::mem::take(&mut self.pending_wake) {
                return WaitOutcome::Woken;
            }
            let now = Instant::now();
            let step = deadline.saturating_duration_since(now).min(self.poll);
            match self.rx.recv_timeout(step) {
                Ok(Signal::Changed) => {
                    // Coalesce a burst of events into one wake-up.
                    while let Ok(signal) = self.rx.try_recv() {
                        match signal {
                            Signal::Changed => {}
                            Signal::Wake => self.pending_wake = true,
                            Signal::Stop => {}
                        }
                    }
                    self.last = self.signature();
                    return WaitOutcome::Changed;
                }
                Ok(Signal::Wake) => return WaitOutcome::Woken,
                Ok(Signal::Stop) => return WaitOutcome::Stopped,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    let now_sig = self.signature();
                    if now_sig != self.last {
                        self.last = now_sig;
                        return WaitOutcome::Changed;
                    }
                    if Instant::now() >= deadline {
                        return WaitOutcome::TimedOut;
                    }
                }
            }
        }
    }
}

/// Subscribes to changes of `path` through its directory (the file itself is replaced by
/// rename on every write). `None` if notifications are unavailable.
fn subscribe(path: &Path, tx: Sender<Signal>) -> Option<notify::RecommendedWatcher> {
    let dir = path.parent()?.to_owned();
    let file_name = path.file_name()?.to_owned();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if matches!(event.kind, EventKind::Access(_)) {
            return;
        }
        if event
            .paths
            .iter()
            .any(|p| p.file_name() == Some(file_name.as_os_str()))
        {
            let _ = tx.send(Signal::Changed);
        }
    })
    .ok()?;
    watcher.watch(&dir, RecursiveMode::NonRecursive).ok()?;
    Some(watcher)
}
