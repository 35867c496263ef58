//! Where the event log lives and how it is appended and read: on files
//! `teams/<team>/events.jsonl` under its own lock (a `flock` on it, taken innermost),
//! rotated by size to `events.1.jsonl` … with the seq continuing, a damaged line skipped
//! and counted; on PostgreSQL rows of `roo_event`, read a page at a time. The line format is the parent
//! module's; this one only moves lines.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use nix::fcntl::Flock;

use super::{Draft, EVENTS_FILE, Event, EventPage, parse_line};
use crate::error::{Error, LockHolder, Result};
use crate::fsio;
use crate::home::RooHome;
use crate::limits::{EVENT_LOG_KEEP, EVENT_LOG_ROTATE_BYTES, MAX_EVENT_LINE};
use crate::lock::flock_within;
use crate::name::Name;
use crate::time::Timestamp;

/// The current event file of `team`.
pub(crate) fn events_path(home: &RooHome, team: &Name) -> PathBuf {
    home.team_dir(team).join(EVENTS_FILE)
}

/// Rotated file `n` (1 is the newest) next to `current`.
fn rotated(current: &Path, n: usize) -> PathBuf {
    current.with_file_name(format!("events.{n}.jsonl"))
}

/// How the file store rotates the log: the constants of [`crate::limits`], smaller in
/// tests.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rotation {
    pub(crate) bytes: u64,
    pub(crate) keep: usize,
}

impl Rotation {
    pub(crate) const DEFAULT: Rotation = Rotation {
        bytes: EVENT_LOG_ROTATE_BYTES,
        keep: EVENT_LOG_KEEP,
    };
}

/// Appends `drafts` to the file log at `current`, holding an exclusive `flock` on the
/// log file itself (taken innermost: the caller holds the document's lock, and this
/// lock never waits on another): each gets the next seq and the store's time; rotates
/// first when the file is past `rotation.bytes`. The last seq is the newest valid line's,
/// read from the end of the file. Not synced: the change's document is (§2.3), and a
/// power loss may only lose or tear the newest events (a torn line is skipped), never
/// the state. Returns the last seq written.
pub(crate) fn append_to_file(
    home: &RooHome,
    current: &Path,
    drafts: &[Draft],
    rotation: Rotation,
) -> Result<u64> {
    if drafts.is_empty() {
        return Ok(0);
    }
    let (file, len) = lock_log(home, current, rotation)?;
    let mut last = match last_seq_in_file(&file, current, len)? {
        Some(seq) => seq,
        None => last_seq_rotated(current, rotation.keep)?,
    };
    let mut buf = Vec::new();
    // A line torn by a crash gets its own line (damaged, skipped), not the next one's.
    if len > 0 && read_end(&file, current, len, 1)? != b"\n" {
        buf.push(b'\n');
    }
    for draft in drafts {
        last = last
            .checked_add(1)
            .filter(|seq| *seq <= crate::events::MAX_SEQ)
            .ok_or_else(|| Error::Unwritable {
                path: current.to_owned(),
                reason: "the log's seq reached its limit; rotate or remove the log".into(),
            })?;
        let line = draft
            .line(last, Timestamp::now())
            .map_err(|reason| Error::Unwritable {
                path: current.to_owned(),
                reason,
            })?;
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
    }
    (&*file)
        .write_all(&buf)
        .map_err(|e| Error::io("append to the event log", current, e))?;
    Ok(last)
}

/// The log file at `current`, opened and held with an exclusive `flock` (waited for at
/// most the lock policy's queue deadline, else its stale age), and its length. The file
/// held is the one `current` names once the lock is had: a holder may have rotated the
/// one opened first, and then it is opened again. A file of `rotation.bytes` or more is
/// rotated first, under its lock.
fn lock_log(home: &RooHome, current: &Path, rotation: Rotation) -> Result<(Flock<File>, u64)> {
    let policy = home.lock_policy();
    let deadline = policy.queue.unwrap_or(policy.stale_after);
    let started = Instant::now();
    let timeout = || Error::LockTimeout {
        path: current.to_owned(),
        attempts: 1,
        waited: started.elapsed(),
        holder: LockHolder {
            pid: None,
            age: None,
        },
    };
    loop {
        let left = deadline
            .checked_sub(started.elapsed())
            .ok_or_else(timeout)?;
        let held = flock_within(
            open_log(current)?,
            current,
            "lock the event log",
            left,
            timeout,
        )?;
        let meta = held
            .metadata()
            .map_err(|e| Error::io("read the event log", current, e))?;
        let named = match std::fs::symlink_metadata(current) {
            Ok(now) => now.dev() == meta.dev() && now.ino() == meta.ino(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(Error::io("read the event log", current, e)),
        };
        if !named {
            continue;
        }
        if meta.len() >= rotation.bytes {
            rotate(current, rotation.keep)?;
            continue;
        }
        return Ok((held, meta.len()));
    }
}

/// The log file at `path`, opened to read and append (created 0600), never through a
/// symbolic link or onto a special file.
fn open_log(path: &Path) -> Result<File> {
    fsio::open_regular(
        path,
        std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600),
        "open the event log",
    )?
    .ok_or_else(|| {
        Error::io(
            "open the event log",
            path,
            std::io::ErrorKind::NotFound.into(),
        )
    })
}

/// How much of the end of a log file is read first for its last seq: a few lines.
const TAIL_FIRST: u64 = 4096;

/// The last `size` bytes of `file` (`len` long).
fn read_end(file: &File, path: &Path, len: u64, size: u64) -> Result<Vec<u8>> {
    let size = size.min(len);
    let mut bytes = vec![0u8; usize::try_from(size).unwrap_or(0)];
    file.read_exact_at(&mut bytes, len - size)
        .map_err(|e| Error::io("read the event log", path, e))?;
    Ok(bytes)
}

/// The seq of the last valid line of `file` (`len` long), if any: its end read first,
/// then room for two lines (so the last complete one is in it), then all of it.
fn last_seq_in_file(file: &File, path: &Path, len: u64) -> Result<Option<u64>> {
    let two_lines = 2 * MAX_EVENT_LINE as u64 + 2;
    let mut size = TAIL_FIRST.min(len);
    loop {
        if let Some(seq) = last_valid_seq(&read_end(file, path, len, size)?) {
            return Ok(Some(seq));
        }
        if size >= len {
            return Ok(None);
        }
        size = if size < two_lines { two_lines } else { len };
    }
}

/// The last seq of the rotated files (newest first), when the current one has no valid
/// line; 0 for an empty log.
fn last_seq_rotated(current: &Path, keep: usize) -> Result<u64> {
    for n in 1..=keep {
        let path = rotated(current, n);
        let Some(file) = fsio::open_regular(
            &path,
            std::fs::OpenOptions::new().read(true),
            "read the event log",
        )?
        else {
            continue;
        };
        let len = file
            .metadata()
            .map_err(|e| Error::io("read the event log", &path, e))?
            .len();
        if let Some(seq) = last_seq_in_file(&file, &path, len)? {
            return Ok(seq);
        }
    }
    Ok(0)
}

/// The seq of the last valid line in `bytes`, parsed from the end: lines are appended in
/// seq order, so it is the newest. A line cut at the start of `bytes` is not valid JSON.
fn last_valid_seq(bytes: &[u8]) -> Option<u64> {
    bytes
        .rsplit(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .filter_map(|line| std::str::from_utf8(line).ok())
        .find_map(|line| parse_line(line).ok())
        .map(|event| event.seq)
}

/// `events.jsonl` → `events.1.jsonl` → … → `events.<keep>.jsonl`; the oldest is dropped.
fn rotate(current: &Path, keep: usize) -> Result<()> {
    let oldest = rotated(current, keep.max(1));
    match std::fs::remove_file(&oldest) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("drop the oldest event log", &oldest, e)),
    }
    for n in (1..keep.max(1)).rev() {
        let from = rotated(current, n);
        if std::fs::symlink_metadata(&from).is_ok() {
            let to = rotated(current, n + 1);
            std::fs::rename(&from, &to).map_err(|e| Error::io("rotate the event log", &from, e))?;
        }
    }
    let first = rotated(current, 1);
    std::fs::rename(current, &first).map_err(|e| Error::io("rotate the event log", current, e))
}

/// What reading the lines of one or more files found.
#[derive(Default)]
struct Found {
    events: Vec<Event>,
    skipped: usize,
}

impl Found {
    /// Takes the complete lines of `bytes` (an unterminated last line is a write in
    /// progress: left alone), keeping the valid ones and counting the damaged ones.
    fn take(&mut self, path: &Path, bytes: &[u8]) {
        let complete = match bytes.iter().rposition(|b| *b == b'\n') {
            Some(end) => &bytes[..end],
            None => return,
        };
        for (n, line) in complete.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let parsed = std::str::from_utf8(line)
                .map_err(|e| e.to_string())
                .and_then(parse_line);
            match parsed {
                Ok(event) => self.events.push(event),
                Err(why) => {
                    self.skipped += 1;
                    crate::quarantine::warn(format!(
                        "{} line {}: a damaged event is skipped ({why})",
                        path.display(),
                        n + 1
                    ));
                }
            }
        }
    }
}

/// The newest `limit` events with seq > `after` of the file log at `current`, in seq
/// order. Reads the current file, then the rotated ones only as far as needed.
pub(crate) fn read_files(
    current: &Path,
    after: Option<u64>,
    limit: usize,
    keep: usize,
) -> Result<EventPage> {
    let after = after.unwrap_or(0);
    let mut page = EventPage::default();
    let mut newer: Vec<Event> = Vec::new();
    let files = std::iter::once(current.to_owned()).chain((1..=keep).map(|n| rotated(current, n)));
    for path in files {
        let Some(bytes) = fsio::read_regular(&path, "read the event log")? else {
            continue;
        };
        let mut found = Found::default();
        found.take(&path, &bytes);
        page.skipped += found.skipped;
        let oldest = found.events.iter().map(|e| e.seq).min();
        if page.last_seq == 0 {
            page.last_seq = found.events.iter().map(|e| e.seq).max().unwrap_or(0);
        }
        let mut wanted: Vec<Event> = found.events.into_iter().filter(|e| e.seq > after).collect();
        wanted.append(&mut newer);
        newer = wanted;
        if oldest.is_some_and(|o| o <= after.saturating_add(1)) || newer.len() >= limit {
            break;
        }
    }
    page.events = ordered(newer, limit);
    Ok(page)
}

/// `events` in strictly increasing seq (a line seen twice across a rotation is kept
/// once), the newest `limit` of them.
fn ordered(mut events: Vec<Event>, limit: usize) -> Vec<Event> {
    events.sort_by_key(|e| e.seq);
    events.dedup_by_key(|e| e.seq);
    let skip = events.len().saturating_sub(limit);
    events.split_off(skip)
}

/// Builds an event from a row of the PostgreSQL store: its body with its seq and time.
pub(crate) fn from_row(seq: i64, time_ms: i64, body: &str) -> std::result::Result<Event, String> {
    let mut value: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(body).map_err(|e| e.to_string())?;
    let time = Timestamp::from_unix_ms(time_ms);
    let mut line = serde_json::Map::new();
    // The same key order as a file's line.
    if let Some(v) = value.remove("version") {
        line.insert("version".into(), v);
    }
    line.insert("seq".into(), seq.into());
    line.insert("time".into(), time.to_string().into());
    line.extend(value);
    let text = serde_json::to_string(&line).map_err(|e| e.to_string())?;
    parse_line(&text)
}

/// The newest `limit` events with seq > `after` of the PostgreSQL log `key`.
pub(crate) fn read_rows(
    pg: &crate::pg::PgStore,
    key: &str,
    after: Option<u64>,
    limit: usize,
) -> Result<EventPage> {
    let (rows, last_seq) = pg.events(key, after.unwrap_or(0), limit)?;
    let mut page = EventPage {
        last_seq,
        ..EventPage::default()
    };
    let mut events = Vec::new();
    for (seq, time_ms, body) in rows {
        match from_row(seq, time_ms, &body) {
            Ok(event) => events.push(event),
            Err(why) => {
                page.skipped += 1;
                crate::quarantine::warn(format!(
                    "postgresql roo_event, key {key}, seq {seq}: a damaged event is skipped ({why})"
                ));
            }
        }
    }
    page.events = ordered(events, limit);
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::super::EventKind;
    use super::*;

    fn draft(n: usize) -> Draft {
        Draft::new(
            EventKind::TaskCreated {
                task: n.to_string(),
                subject: format!("subject {n}"),
            },
            "lead",
            None,
        )
    }

    #[test]
    fn damaged_lines_are_skipped_and_counted_and_an_unfinished_line_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join(EVENTS_FILE);
        append_to_file(&home, &path, &[draft(1), draft(2)], Rotation::DEFAULT).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"not an event\n{\"half").unwrap();
        drop(f);
        append_to_file(&home, &path, &[draft(3)], Rotation::DEFAULT).unwrap();
        let page = read_files(&path, None, 100, 4).unwrap();
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3]);
        assert_eq!(page.skipped, 2);
        assert_eq!(page.last_seq, 3);
        let page = read_files(&path, Some(1), 1, 4).unwrap();
        assert_eq!(page.events.len(), 1);
        assert_eq!(page.events[0].seq, 3);
    }

    #[test]
    fn rotation_bounds_the_files_and_the_seq_continues() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join(EVENTS_FILE);
        let rotation = Rotation {
            bytes: 600,
            keep: 2,
        };
        for n in 1..=40 {
            append_to_file(&home, &path, &[draft(n)], rotation).unwrap();
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".jsonl"))
            .collect();
        names.sort();
        assert_eq!(names, ["events.1.jsonl", "events.2.jsonl", "events.jsonl"]);
        for name in &names {
            assert!(std::fs::metadata(dir.path().join(name)).unwrap().len() < 600 + 300);
        }
        let page = read_files(&path, None, 1000, 2).unwrap();
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        assert_eq!(*seqs.last().unwrap(), 40);
        assert!(seqs[0] > 1, "the oldest file was dropped: {seqs:?}");
    }

    #[test]
    fn concurrent_appends_get_distinct_consecutive_seqs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        std::thread::scope(|scope| {
            for _ in 0..6 {
                scope.spawn(|| {
                    let home = RooHome::new(dir.path());
                    for n in 0..60 {
                        append_to_file(&home, &path, &[draft(n)], Rotation::DEFAULT).unwrap();
                    }
                });
            }
        });
        let page = read_files(&path, None, usize::MAX, 4).unwrap();
        assert_eq!(page.skipped, 0, "a torn line");
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        let expected: Vec<u64> = (1..=360).collect();
        assert_eq!(seqs, expected);
    }

    #[test]
    fn concurrent_appends_across_rotations_get_consecutive_seqs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        // Many rotations while others wait on the file being rotated.
        let rotation = Rotation {
            bytes: 1500,
            keep: 100,
        };
        std::thread::scope(|scope| {
            for _ in 0..6 {
                scope.spawn(|| {
                    let home = RooHome::new(dir.path());
                    for n in 0..50 {
                        append_to_file(&home, &path, &[draft(n)], rotation).unwrap();
                    }
                });
            }
        });
        let page = read_files(&path, None, usize::MAX, rotation.keep).unwrap();
        assert_eq!(page.skipped, 0, "a torn line");
        let mut seqs = Vec::new();
        for n in (1..=rotation.keep).rev() {
            if let Ok(text) = std::fs::read_to_string(rotated(&path, n)) {
                seqs.extend(text.lines().map(|l| parse_line(l).unwrap().seq));
            }
        }
        let text = std::fs::read_to_string(&path).unwrap();
        seqs.extend(text.lines().map(|l| parse_line(l).unwrap().seq));
        let expected: Vec<u64> = (1..=300).collect();
        assert_eq!(
            seqs, expected,
            "every line once, in seq order, across the files"
        );
    }

    #[test]
    fn an_append_waits_for_the_flock_on_the_log_file() {
        use nix::fcntl::{Flock, FlockArg};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        std::fs::write(&path, b"").unwrap();
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        let held = Flock::lock(file, FlockArg::LockExclusive).unwrap();
        std::thread::scope(|scope| {
            let appender = scope.spawn(|| {
                let home = RooHome::new(dir.path());
                append_to_file(&home, &path, &[draft(2)], Rotation::DEFAULT).unwrap()
            });
            std::thread::sleep(std::time::Duration::from_millis(300));
            assert!(
                !appender.is_finished(),
                "the append did not wait for the lock"
            );
            // What another writer appends while it holds the lock comes first.
            let line = draft(1).line(1, Timestamp::now()).unwrap();
            (&*held).write_all(format!("{line}\n").as_bytes()).unwrap();
            drop(held);
            assert_eq!(appender.join().unwrap(), 2);
        });
        let page = read_files(&path, None, 10, 4).unwrap();
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2]);
        assert!(
            !dir.path().join("events.jsonl.lock").exists(),
            "no lock file is made"
        );
    }

    #[test]
    fn an_append_gives_up_on_a_log_locked_past_the_deadline() {
        use nix::fcntl::{Flock, FlockArg};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        std::fs::write(&path, b"").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let _held = Flock::lock(file, FlockArg::LockExclusive).unwrap();
        let policy = crate::lock::LockPolicy {
            queue: Some(std::time::Duration::from_millis(200)),
            ..Default::default()
        };
        let home = RooHome::new(dir.path()).with_lock_policy(policy);
        let err = append_to_file(&home, &path, &[draft(1)], Rotation::DEFAULT).unwrap_err();
        assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"", "nothing was written");
    }

    #[test]
    fn the_last_seq_is_found_behind_damaged_lines_of_any_length() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join(EVENTS_FILE);
        let drafts: Vec<Draft> = (1..=400).map(draft).collect();
        append_to_file(&home, &path, &drafts, Rotation::DEFAULT).unwrap();
        // Damage longer than the first read of the end, then longer than two lines.
        for (damage, next) in [(5_000, 401), (40_000, 402)] {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            let junk = "x".repeat(damage);
            f.write_all(format!("{junk}\n{{\"damaged\n").as_bytes())
                .unwrap();
            drop(f);
            let seq = append_to_file(&home, &path, &[draft(next)], Rotation::DEFAULT).unwrap();
            assert_eq!(seq, next as u64);
        }
        let page = read_files(&path, None, usize::MAX, 4).unwrap();
        assert_eq!(page.events.len(), 402);
        assert_eq!(page.skipped, 4);
    }

    /// Review of issue 31: a hostile line with seq 2^64 - 1 made the next seq wrap to 0
    /// (a panic in a debug build), and every later event was written as damaged. A seq
    /// over the bigint range is a damaged line; the largest valid one refuses the append.
    #[test]
    fn a_seq_at_the_top_of_its_range_neither_wraps_nor_panics() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join(EVENTS_FILE);
        let line = |seq: u64| draft(1).line(seq, Timestamp::now()).unwrap();
        let hostile = line(8).replace("\"seq\":8", &format!("\"seq\":{}", u64::MAX));
        assert!(hostile.contains(&u64::MAX.to_string()), "{hostile}");
        std::fs::write(&path, format!("{}\n{hostile}\n", line(7))).unwrap();
        assert_eq!(
            append_to_file(&home, &path, &[draft(2)], Rotation::DEFAULT).unwrap(),
            8,
            "the line over the range is damaged; the count goes on from 7"
        );
        std::fs::write(&path, format!("{}\n", line(i64::MAX as u64))).unwrap();
        let err = append_to_file(&home, &path, &[draft(3)], Rotation::DEFAULT).unwrap_err();
        assert!(matches!(err, Error::Unwritable { .. }), "{err}");
    }

    #[test]
    fn a_symlinked_log_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join(EVENTS_FILE);
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"").unwrap();
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        let err = append_to_file(&home, &path, &[draft(1)], Rotation::DEFAULT).unwrap_err();
        assert!(matches!(err, Error::NotRegularFile { .. }), "{err}");
        assert!(read_files(&path, None, 10, 4).is_err());
        assert_eq!(std::fs::read(&outside).unwrap(), b"");
    }
}
