//! The lock protocol of `docs/PROTOCOL.md` §3.1, plus a measured improvement (§3.3).
//!
//! **Protocol** (what every participant, including foreign programs, must do): take
//! `<file>.lock` with `O_CREAT|O_EXCL`; on failure retry after a random 5–100 ms, at most
//! 10 retries, then fail with a clear error. A lock older than 10 s (judged by the later
//! of its recorded time and its mtime) is stale; the lock file holds the holder's pid, so
//! a lock whose holder has died is stale at once. A stale lock is broken by renaming it to
//! a unique name and deleting it only if it is still the lock judged, so a fresh lock taken
//! meanwhile survives; every write is fenced ([`FileLock::verify`] right before its
//! rename), so a holder that outlived the stale age writes nothing.
//!
//! **Queue layer** (our improvement, on by default): before the `O_EXCL` step, a process
//! takes a blocking `flock` on the permanent sidecar `<file>.lock.queue`. Our own
//! processes then wait in the kernel and are woken the moment the previous holder is
//! done, instead of sleeping 5–100 ms and retrying; the `O_EXCL` lock file is still taken,
//! so programs that only speak the protocol are excluded exactly as before. Because only
//! the queue holder ever judges the lock file stale, two of our processes can never both
//! remove a lock and both proceed. The numbers behind this choice are in
//! `docs/BENCHMARKS.md`; the rules are in `docs/PROTOCOL.md`.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use crate::error::{Error, LockHolder, Result};
use crate::fsio;
use crate::time::Timestamp;

/// How locks are taken. [`LockPolicy::default`] is the protocol plus the queue layer;
/// [`LockPolicy::protocol`] is the protocol alone (`docs/PROTOCOL.md` §3.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockPolicy {
    /// Retries after the first failed `O_CREAT|O_EXCL` attempt (protocol: 10).
    pub retries: u32,
    /// Shortest random delay between attempts (protocol: 5 ms).
    pub min_delay: Duration,
    /// Longest random delay between attempts (protocol: 100 ms).
    pub max_delay: Duration,
    /// Age after which a lock is stale and removed (protocol: 10 s).
    pub stale_after: Duration,
    /// `Some(deadline)`: wait in the `flock` queue for at most `deadline` first.
    pub queue: Option<Duration>,
}

impl LockPolicy {
    /// The protocol alone (`docs/PROTOCOL.md` §3.1): no queue layer.
    pub const fn protocol() -> LockPolicy {
        LockPolicy {
            retries: 10,
            min_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(100),
            stale_after: Duration::from_secs(10),
            queue: None,
        }
    }
}

impl Default for LockPolicy {
    /// The protocol plus the `flock` queue layer with a 10 s deadline.
    fn default() -> LockPolicy {
        LockPolicy {
            queue: Some(Duration::from_secs(10)),
            ..LockPolicy::protocol()
        }
    }
}

/// What a lock file contains: one JSON object.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// Process id of the holder.
    pub pid: u32,
    /// When the lock was taken.
    pub time: Timestamp,
    /// Unique token of this acquisition, so a holder only ever removes its own lock.
    pub token: String,
}

/// A held lock on one file; released (lock file removed, queue left) on drop.
#[derive(Debug)]
pub struct FileLock {
    lock_path: PathBuf,
    token: String,
    _queue: Option<Flock<File>>,
}

/// An empty lock file is one being written: its creator writes the few bytes right after
/// the `O_EXCL` create. Older than this, its creator died (or stopped) in between.
const EMPTY_LOCK_GRACE: Duration = Duration::from_secs(2);

/// How far in the future a recorded time or mtime may lie before it is distrusted
/// (clock granularity, not clock skew: all participants share one machine).
const FUTURE_TOLERANCE: Duration = Duration::from_secs(1);

impl FileLock {
    /// Takes the lock guarding `target` (the lock file is `<target>.lock`).
    pub fn acquire(target: &Path, policy: &LockPolicy) -> Result<FileLock> {
        let started = Instant::now();
        let lock_path = sidecar(target, ".lock");
        let queue = match policy.queue {
            Some(deadline) => Some(enter_queue(target, &lock_path, deadline, started)?),
            None => None,
        };
        let mut rng = Rng::seeded();
        let token = format!("{}-{:016x}", std::process::id(), rng.next());
        let mut attempts = 0;
        loop {
            attempts += 1;
            let body = serde_json::to_vec(&LockInfo {
                pid: std::process::id(),
                time: Timestamp::now(),
                token: token.clone(),
            })
            .map_err(|e| Error::io("encode lock", &lock_path, e.into()))?;
            // O_EXCL never follows a symlink: a planted link makes the create fail.
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&lock_path)
            {
                Ok(mut file) => {
                    if let Err(e) = file.write_all(&body) {
                        let _ = std::fs::remove_file(&lock_path);
                        return Err(Error::io("write lock", &lock_path, e));
                    }
                    return Ok(FileLock {
                        lock_path,
                        token,
                        _queue: queue,
                    });
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    let holder = inspect(&lock_path);
                    if holder.is_stale(policy.stale_after) {
                        #[cfg(test)]
                        hooks::after_stale_judge();
                        break_stale(&lock_path, &holder, &mut rng)?;
                        // Retry at once: the removal was the wait. If what we moved aside
                        // was not the lock we judged, it was put back and we retry as
                        // under contention.
                        continue;
                    }
                    if attempts > policy.retries {
                        return Err(Error::LockTimeout {
                            path: lock_path,
                            attempts,
                            waited: started.elapsed(),
                            holder: holder.as_holder(),
                        });
                    }
                    std::thread::sleep(rng.delay(policy.min_delay, policy.max_delay));
                }
                Err(e) => return Err(Error::io("create lock", &lock_path, e)),
            }
        }
    }

    /// Path of the lock file.
    pub fn path(&self) -> &Path {
        &self.lock_path
    }

    /// The fence: succeeds only while the lock file still holds our token. A holder that
    /// outlived the stale age (stopped, swapped out) was judged stale and may have been
    /// replaced; it must then write nothing. `path` names the document for the error.
    pub fn verify(&self, path: &Path) -> Result<()> {
        match read_info(&self.lock_path) {
            Some(info) if info.token == self.token => Ok(()),
            _ => Err(Error::LockLost {
                path: path.to_owned(),
                lock: self.lock_path.clone(),
                holder: inspect(&self.lock_path).as_holder(),
            }),
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // Only remove the lock if it is still ours: had we been judged stale, the file may
        // now belong to someone else.
        let ours = read_info(&self.lock_path).is_some_and(|info| info.token == self.token);
        if ours {
            let _ = std::fs::remove_file(&self.lock_path);
        }
    }
}

/// Removes the stale lock `judged` — and only it. Between judging and removing, another
/// participant may have broken the same lock and taken a new one; a plain unlink would
/// delete that live lock. So the lock path is renamed to a unique name first (atomic: we
/// now own whatever we moved), the moved file is compared with the one judged (token and
/// inode), and only a match is deleted. A mismatch is linked back (`link` fails if the
/// place was taken again meanwhile, and then that holder's fence refuses its write).
fn break_stale(lock_path: &Path, judged: &Observed, rng: &mut Rng) -> Result<()> {
    let aside = sidecar(
        lock_path,
        &format!(".stale-{}-{:08x}", std::process::id(), rng.next() as u32),
    );
    match std::fs::rename(lock_path, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("move stale lock aside", lock_path, e)),
    }
    let moved = inspect(&aside);
    if !judged.same_lock(&moved) {
        // Someone else's lock: put it back unless the place was taken again meanwhile.
        if matches!(moved, Observed::Opaque { dir: true, .. }) {
            if std::fs::symlink_metadata(lock_path).is_err() {
                let _ = std::fs::rename(&aside, lock_path);
            }
        } else {
            let _ = std::fs::hard_link(&aside, lock_path);
        }
    }
    let removed = match moved {
        Observed::Opaque { dir: true, .. } => std::fs::remove_dir(&aside),
        _ => std::fs::remove_file(&aside),
    };
    match removed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        // A non-empty directory: leave it aside, it no longer blocks the lock.
        Err(_) if matches!(moved, Observed::Opaque { dir: true, .. }) => Ok(()),
        Err(e) => Err(Error::io("remove stale lock", &aside, e)),
    }
}

/// `<target><suffix>` next to `target`.
fn sidecar(target: &Path, suffix: &str) -> PathBuf {
    let mut os = target.as_os_str().to_owned();
    os.push(suffix);
    PathBuf::from(os)
}

/// Waits for the `flock` queue on `<target>.lock.queue` for at most `deadline`
/// ([`flock_within`]).
fn enter_queue(
    target: &Path,
    lock_path: &Path,
    deadline: Duration,
    started: Instant,
) -> Result<Flock<File>> {
    let queue_path = sidecar(target, ".lock.queue");
    let file = fsio::open_regular(
        &queue_path,
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600),
        "open lock queue",
    )?
    .ok_or_else(|| {
        Error::io(
            "open lock queue",
            &queue_path,
            std::io::Error::from(ErrorKind::NotFound),
        )
    })?;
    flock_within(file, &queue_path, "lock queue", deadline, || {
        Error::LockTimeout {
            path: lock_path.to_owned(),
            attempts: 1,
            waited: started.elapsed(),
            holder: inspect(lock_path).as_holder(),
        }
    })
}

/// An exclusive `flock` on `file` (at `path`, named in errors with `action`), waited for
/// at most `deadline`; `timeout` is the error when it was not had by then.
///
/// The uncontended case costs one non-blocking `flock`. Under contention a helper thread
/// blocks in the kernel so we are woken the instant the file is free; if we give up
/// first, the helper releases it as soon as it gets it.
pub(crate) fn flock_within(
    file: File,
    path: &Path,
    action: &'static str,
    deadline: Duration,
    timeout: impl FnOnce() -> Error,
) -> Result<Flock<File>> {
    let file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(held) => return Ok(held),
        Err((file, Errno::EWOULDBLOCK)) => file,
        Err((_, errno)) => return Err(Error::io(action, path, errno.into())),
    };
    let (tx, rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("roo-lock-queue".into())
        .spawn(move || {
            let outcome = Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| e);
            // If the waiter gave up, the send fails and the lock is released on drop.
            let _ = tx.send(outcome);
        })
        .map_err(|e| Error::io("spawn a lock waiter", path, e))?;
    match rx.recv_timeout(deadline) {
        Ok(Ok(held)) => Ok(held),
        Ok(Err(errno)) => Err(Error::io(action, path, errno.into())),
        Err(_) => Err(timeout()),
    }
}

/// Identity of one lock file (a replaced file has another inode or mtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    mtime_ns: i64,
    mtime_s: i64,
    len: u64,
}

impl FileId {
    fn of(meta: &std::fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            mtime_s: meta.mtime(),
            mtime_ns: meta.mtime_nsec(),
            len: meta.len(),
        }
    }
}

/// What we know about the current holder of a lock file (looked at with `lstat` and
/// `O_NOFOLLOW`: a symlink is never followed).
#[derive(Debug)]
enum Observed {
    /// The file vanished before we could look.
    Gone,
    /// Readable lock information.
    Info {
        info: LockInfo,
        id: FileId,
        mtime: Option<SystemTime>,
    },
    /// Unreadable (being written, written by a foreign program, a symlink, a directory…):
    /// judged by its own mtime.
    Opaque {
        id: FileId,
        mtime: Option<SystemTime>,
        empty: bool,
        dir: bool,
    },
}

impl Observed {
    fn is_stale(&self, stale_after: Duration) -> bool {
        match self {
            Observed::Gone => false,
            Observed::Info { info, mtime, .. } => {
                !pid_alive(info.pid) || lock_age(Some(info.time), *mtime) > stale_after
            }
            Observed::Opaque { mtime, empty, .. } => {
                let limit = if *empty {
                    stale_after.min(EMPTY_LOCK_GRACE)
                } else {
                    stale_after
                };
                lock_age(None, *mtime) > limit
            }
        }
    }

    /// Whether `other` (the file moved aside) is the very lock this observation judged.
    fn same_lock(&self, other: &Observed) -> bool {
        match (self, other) {
            (
                Observed::Info {
                    info: a, id: ia, ..
                },
                Observed::Info {
                    info: b, id: ib, ..
                },
            ) => a.token == b.token && (ia.dev, ia.ino) == (ib.dev, ib.ino),
            (Observed::Opaque { id: a, .. }, Observed::Opaque { id: b, .. }) => a == b,
            _ => false,
        }
    }

    fn as_holder(&self) -> LockHolder {
        match self {
            Observed::Gone => LockHolder {
                pid: None,
                age: None,
            },
            Observed::Info { info, mtime, .. } => LockHolder {
                pid: Some(info.pid),
                age: Some(lock_age(Some(info.time), *mtime)),
            },
            Observed::Opaque { mtime, .. } => LockHolder {
                pid: None,
                age: Some(lock_age(None, *mtime)),
            },
        }
    }
}

/// Age of a lock: time since the later of its recorded `time` and its mtime. A time
/// lying in the future (beyond a clock-granularity tolerance) is not trusted: it is
/// clamped to the other one, and when both are in the future (or unknown) the lock has no
/// credible age and counts as infinitely old — otherwise it would wedge the file forever.
/// Breaking a live lock by mistake loses nothing: its holder's fence refuses the write.
fn lock_age(recorded: Option<Timestamp>, mtime: Option<SystemTime>) -> Duration {
    let now = SystemTime::now();
    let credible = |t: SystemTime| t <= now + FUTURE_TOLERANCE;
    let recorded = recorded.and_then(|t| {
        u64::try_from(t.unix_ms())
            .ok()
            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
    });
    let newest = [recorded, mtime]
        .into_iter()
        .flatten()
        .filter(|t| credible(*t))
        .max();
    match newest {
        Some(t) => now.duration_since(t).unwrap_or(Duration::ZERO),
        None => Duration::MAX,
    }
}

fn inspect(lock_path: &Path) -> Observed {
    let Ok(meta) = std::fs::symlink_metadata(lock_path) else {
        return Observed::Gone;
    };
    let id = FileId::of(&meta);
    let mtime = meta.modified().ok();
    if meta.file_type().is_file()
        && let Some(info) = read_info(lock_path)
    {
        return Observed::Info { info, id, mtime };
    }
    Observed::Opaque {
        id,
        mtime,
        empty: meta.file_type().is_file() && meta.len() == 0,
        dir: meta.file_type().is_dir(),
    }
}

fn read_info(lock_path: &Path) -> Option<LockInfo> {
    let mut text = String::new();
    fsio::open_regular(lock_path, OpenOptions::new().read(true), "read lock")
        .ok()??
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether `pid` names a live (non-zombie) process on this machine.
pub fn pid_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) | Err(Errno::EPERM) => {}
        Err(_) => return false,
    }
    // A killed child that nobody has reaped yet still answers kill(0): look at its state.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].trim_start().chars().next())
            .is_some_and(|state| matches!(state, 'Z' | 'X')),
        Err(_) => true,
    }
}

/// A tiny splitmix64 generator for retry jitter, seeded from time, pid and a counter.
/// (Jitter needs no cryptographic quality, and `rand` is a heavy dependency for it.)
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn seeded() -> Rng {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut rng =
            Rng(nanos ^ (u64::from(std::process::id()) << 32) ^ count.wrapping_mul(0x9E37));
        rng.next();
        rng
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniformly random duration in `[min, max]`.
    fn delay(&mut self, min: Duration, max: Duration) -> Duration {
        let span = max.saturating_sub(min).as_micros() as u64;
        min + Duration::from_micros(if span == 0 {
            0
        } else {
            self.next() % (span + 1)
        })
    }
}

/// Test-only pause points, compiled into unit tests only (`#[cfg(test)]`), so no
/// environment or input can reach them in a shipped binary. Each is a per-thread closure,
/// so one thread of a test can be stopped at an exact point while others run.
#[cfg(test)]
pub(crate) mod hooks {
    use std::cell::RefCell;

    type Hook = Option<Box<dyn FnOnce()>>;

    thread_local! {
        static AFTER_STALE_JUDGE: RefCell<Hook> = RefCell::new(None);
        static BEFORE_FENCE: RefCell<Hook> = RefCell::new(None);
    }

    /// Runs `hook` once in this thread right after a lock was judged stale, before it is broken.
    pub(crate) fn set_after_stale_judge(hook: impl FnOnce() + 'static) {
        AFTER_STALE_JUDGE.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
    }

    /// Runs `hook` once in this thread right before a locked write checks its fence.
    pub(crate) fn set_before_fence(hook: impl FnOnce() + 'static) {
        BEFORE_FENCE.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
    }

    pub(crate) fn after_stale_judge() {
        AFTER_STALE_JUDGE.with(|h| {
            // One-shot: taken out before it runs, so it may block without holding the cell.
            let hook = h.borrow_mut().take();
            if let Some(hook) = hook {
                hook();
            }
        });
    }

    pub(crate) fn before_fence() {
        BEFORE_FENCE.with(|h| {
            // One-shot: taken out before it runs, so it may block without holding the cell.
            let hook = h.borrow_mut().take();
            if let Some(hook) = hook {
                hook();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn lock_file_holds_pid_and_is_removed_on_drop() {
        let dir = temp();
        let target = dir.path().join("inbox.json");
        let lock = FileLock::acquire(&target, &LockPolicy::default()).unwrap();
        let info = read_info(lock.path()).unwrap();
        assert_eq!(info.pid, std::process::id());
        drop(lock);
        assert!(!dir.path().join("inbox.json.lock").exists());
    }

    #[test]
    fn a_live_holder_makes_the_protocol_time_out_with_a_clear_error() {
        let dir = temp();
        let target = dir.path().join("tasks.json");
        let policy = LockPolicy {
            retries: 3,
            max_delay: Duration::from_millis(10),
            ..LockPolicy::protocol()
        };
        let _held = FileLock::acquire(&target, &policy).unwrap();
        let err = FileLock::acquire(&target, &policy).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("after 4 attempts"), "{text}");
        assert!(
            text.contains(&format!("held by pid {}", std::process::id())),
            "{text}"
        );
    }

    #[test]
    fn a_dead_holder_is_detected_at_once() {
        let dir = temp();
        let target = dir.path().join("config.json");
        let info = LockInfo {
            pid: 999_999_999,
            time: Timestamp::now(),
            token: "x".into(),
        };
        std::fs::write(
            dir.path().join("config.json.lock"),
            serde_json::to_vec(&info).unwrap(),
        )
        .unwrap();
        let started = Instant::now();
        let _lock = FileLock::acquire(&target, &LockPolicy::protocol()).unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn an_old_opaque_lock_is_stale_but_a_fresh_one_is_not() {
        let dir = temp();
        let target = dir.path().join("x.json");
        let lock_path = dir.path().join("x.json.lock");
        std::fs::write(&lock_path, b"written by someone else").unwrap();
        let policy = LockPolicy {
            retries: 1,
            max_delay: Duration::from_millis(5),
            stale_after: Duration::from_secs(3600),
            queue: None,
            ..LockPolicy::protocol()
        };
        assert!(matches!(
            FileLock::acquire(&target, &policy),
            Err(Error::LockTimeout { .. })
        ));
        let policy = LockPolicy {
            stale_after: Duration::ZERO,
            ..policy
        };
        std::thread::sleep(Duration::from_millis(20));
        FileLock::acquire(&target, &policy).unwrap();
    }

    #[test]
    fn threads_exclude_each_other() {
        let dir = temp();
        let target = dir.path().join("counter");
        std::fs::write(&target, "0").unwrap();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..25 {
                        let _lock = FileLock::acquire(&target, &LockPolicy::default()).unwrap();
                        let n: u32 = std::fs::read_to_string(&target).unwrap().parse().unwrap();
                        std::fs::write(&target, (n + 1).to_string()).unwrap();
                    }
                });
            }
        });
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "200");
    }

    /// A lock file that looks stale: its holder pid does not exist.
    fn plant_dead_lock(lock_path: &Path) {
        let info = LockInfo {
            pid: 999_999_999,
            time: Timestamp::now(),
            token: "dead".into(),
        };
        std::fs::write(lock_path, serde_json::to_vec(&info).unwrap()).unwrap();
    }

    fn token_in(lock_path: &Path) -> Option<String> {
        read_info(lock_path).map(|i| i.token)
    }

    /// Starts a thread that takes the lock of `target` with `policy`, pausing right after
    /// it judged the lock stale until `resume` is sent. Returns (judged, resume, handle).
    fn paused_breaker(
        target: PathBuf,
        policy: LockPolicy,
    ) -> (
        mpsc::Receiver<()>,
        mpsc::Sender<()>,
        std::thread::JoinHandle<Result<FileLock>>,
    ) {
        let (judged_tx, judged_rx) = mpsc::channel();
        let (resume_tx, resume_rx) = mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            hooks::set_after_stale_judge(move || {
                judged_tx.send(()).unwrap();
                resume_rx.recv().unwrap();
            });
            FileLock::acquire(&target, &policy)
        });
        (judged_rx, resume_tx, handle)
    }

    fn short(policy: LockPolicy) -> LockPolicy {
        LockPolicy {
            retries: 3,
            max_delay: Duration::from_millis(10),
            ..policy
        }
    }

    #[test]
    fn stale_lock_race_never_deletes_the_lock_another_writer_just_took_protocol_mode() {
        let dir = temp();
        let target = dir.path().join("tasks.json");
        let lock_path = dir.path().join("tasks.json.lock");
        plant_dead_lock(&lock_path);
        let policy = short(LockPolicy::protocol());
        let (judged, resume, slow) = paused_breaker(target.clone(), policy.clone());
        judged.recv().unwrap();
        // While the slow breaker sits between judging and removing, a fast one breaks the
        // same stale lock and takes the lock.
        let fast = FileLock::acquire(&target, &policy).unwrap();
        resume.send(()).unwrap();
        let slow = slow.join().unwrap();
        assert!(
            matches!(slow, Err(Error::LockTimeout { .. })),
            "both writers hold the lock: {slow:?}"
        );
        assert_eq!(token_in(&lock_path), Some(fast.token.clone()));
        fast.verify(&target).unwrap();
    }

    #[test]
    fn stale_lock_race_never_deletes_a_lock_of_a_protocol_only_participant_default_mode() {
        let dir = temp();
        let target = dir.path().join("inbox.json");
        let lock_path = dir.path().join("inbox.json.lock");
        plant_dead_lock(&lock_path);
        let (judged, resume, ours) = paused_breaker(target, short(LockPolicy::default()));
        judged.recv().unwrap();
        // A participant implementing only PROTOCOL.md §3.1 (no queue) breaks the stale
        // lock by unlink and takes it, live, with its own pid.
        std::fs::remove_file(&lock_path).unwrap();
        let foreign = LockInfo {
            pid: std::process::id(),
            time: Timestamp::now(),
            token: "foreign".into(),
        };
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&lock_path)
            .unwrap();
        file.write_all(&serde_json::to_vec(&foreign).unwrap())
            .unwrap();
        resume.send(()).unwrap();
        let ours = ours.join().unwrap();
        assert!(
            matches!(ours, Err(Error::LockTimeout { .. })),
            "took a lock a live participant holds: {ours:?}"
        );
        assert_eq!(token_in(&lock_path).as_deref(), Some("foreign"));
    }

    #[test]
    fn a_broken_lock_fails_the_fence_and_release_leaves_the_new_holders_lock() {
        let dir = temp();
        let target = dir.path().join("t.json");
        let lock_path = dir.path().join("t.json.lock");
        let old = FileLock::acquire(&target, &LockPolicy::protocol()).unwrap();
        old.verify(&target).unwrap();
        // Someone judges it stale (it outlived the stale age) and takes over.
        let impatient = LockPolicy {
            stale_after: Duration::ZERO,
            ..LockPolicy::protocol()
        };
        std::thread::sleep(Duration::from_millis(5));
        let new = FileLock::acquire(&target, &impatient).unwrap();
        let err = old.verify(&target).unwrap_err();
        assert!(matches!(err, Error::LockLost { .. }), "{err}");
        assert!(err.to_string().contains("nothing was written"), "{err}");
        drop(old);
        assert_eq!(token_in(&lock_path), Some(new.token.clone()));
    }

    fn set_mtime(path: &Path, when: SystemTime) {
        let t = nix::sys::time::TimeSpec::from(when.duration_since(UNIX_EPOCH).unwrap());
        nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            path,
            &t,
            &t,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )
        .unwrap();
    }

    fn hour_ago() -> SystemTime {
        SystemTime::now() - Duration::from_secs(3600)
    }

    #[test]
    fn a_lock_dated_in_the_future_with_a_live_pid_does_not_wedge_the_file() {
        let dir = temp();
        let target = dir.path().join("f.json");
        let lock_path = dir.path().join("f.json.lock");
        let info = LockInfo {
            pid: std::process::id(),
            time: Timestamp::now().plus(Duration::from_secs(86_400 * 365)),
            token: "future".into(),
        };
        std::fs::write(&lock_path, serde_json::to_vec(&info).unwrap()).unwrap();
        set_mtime(&lock_path, hour_ago());
        let policy = short(LockPolicy::protocol());
        FileLock::acquire(&target, &policy).expect("future time is clamped to the mtime");
        // Both the time and the mtime in the future: no credible age, so stale.
        std::fs::write(&lock_path, serde_json::to_vec(&info).unwrap()).unwrap();
        set_mtime(&lock_path, SystemTime::now() + Duration::from_secs(86_400));
        FileLock::acquire(&target, &policy).expect("a lock with no credible age is stale");
    }

    #[test]
    fn a_dangling_symlink_lock_is_judged_by_its_own_age_and_not_followed() {
        let dir = temp();
        let target = dir.path().join("s.json");
        let lock_path = dir.path().join("s.json.lock");
        let elsewhere = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, &lock_path).unwrap();
        let policy = short(LockPolicy::protocol());
        // Fresh: it blocks like any lock.
        assert!(matches!(
            FileLock::acquire(&target, &policy),
            Err(Error::LockTimeout { .. })
        ));
        set_mtime(&lock_path, hour_ago());
        let lock = FileLock::acquire(&target, &policy).expect("an old dangling symlink is stale");
        assert!(!elsewhere.exists(), "the symlink was followed");
        assert!(std::fs::symlink_metadata(&lock_path).unwrap().is_file());
        drop(lock);
    }

    #[test]
    fn an_empty_lock_left_by_a_dead_creator_does_not_block_for_the_stale_age() {
        let dir = temp();
        let target = dir.path().join("e.json");
        let lock_path = dir.path().join("e.json.lock");
        std::fs::write(&lock_path, b"").unwrap();
        let policy = short(LockPolicy::protocol());
        // Just created: its creator is writing it.
        assert!(matches!(
            FileLock::acquire(&target, &policy),
            Err(Error::LockTimeout { .. })
        ));
        set_mtime(&lock_path, SystemTime::now() - EMPTY_LOCK_GRACE * 2);
        assert!(EMPTY_LOCK_GRACE * 2 < policy.stale_after);
        FileLock::acquire(&target, &policy).expect("an empty lock past its grace is stale");
    }

    #[test]
    fn a_directory_at_the_lock_path_is_broken_when_old() {
        let dir = temp();
        let target = dir.path().join("d.json");
        let lock_path = dir.path().join("d.json.lock");
        std::fs::create_dir(&lock_path).unwrap();
        set_mtime(&lock_path, hour_ago());
        let lock = FileLock::acquire(&target, &short(LockPolicy::protocol())).unwrap();
        assert!(std::fs::symlink_metadata(&lock_path).unwrap().is_file());
        drop(lock);
    }

    #[test]
    fn a_symlinked_lock_queue_is_refused_and_its_target_untouched() {
        let dir = temp();
        let target = dir.path().join("q.json");
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"precious").unwrap();
        std::os::unix::fs::symlink(&outside, dir.path().join("q.json.lock.queue")).unwrap();
        let err = FileLock::acquire(&target, &LockPolicy::default()).unwrap_err();
        assert!(matches!(err, Error::NotRegularFile { .. }), "{err}");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read(&outside).unwrap(), b"precious");
    }

    #[test]
    fn jitter_stays_in_range() {
        let mut rng = Rng::seeded();
        for _ in 0..1000 {
            let d = rng.delay(Duration::from_millis(5), Duration::from_millis(100));
            assert!(d >= Duration::from_millis(5) && d <= Duration::from_millis(100));
        }
    }
}
