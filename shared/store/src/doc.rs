//! Versioned JSON documents: whole-file read, corruption handling, atomic replace.
//!
//! Every file of the protocol is one JSON document carrying `"version": "MAJOR.MINOR"`.
//! This module owns the three rules that keep those files trustworthy:
//! - a file written by a newer *major* version is refused with a clear error and left
//!   untouched (newer minors are read; unknown fields are ignored);
//! - a file that does not parse is moved aside to `<name>.corrupt-<timestamp>` with an
//!   error naming the new path — never silently replaced, and never moved aside by a
//!   reader that does not hold the lock (it could be racing a writer);
//! - a write goes to a temp file in the same directory, is fsynced, then renamed over the
//!   original, so readers see the old or the new document, never half of one.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::events::Draft;
use crate::format_version::{FORMAT_MAJOR, FormatVersion};
use crate::fsio;
use crate::home::RooHome;
use crate::limits;
use crate::lock::{FileLock, Rng, pid_alive};
use crate::name::Name;
use crate::pg::{PgChange, PgStore, PgWrites, Wants};
use crate::team::TeamConfig;
use crate::time::Timestamp;

/// A document type stored in one file.
pub(crate) trait Document: Serialize + DeserializeOwned {
    /// The version recorded in the document.
    fn version(&self) -> FormatVersion;

    /// The member holding the document's records (`"messages"`, `"tasks"`), if it has
    /// any: a damaged record is quarantined alone and the others are kept.
    const RECORDS: Option<&'static str> = None;

    /// Parses the file's bytes; documents with a legacy shape override this.
    fn parse(bytes: &[u8]) -> serde_json::Result<Self> {
        serde_json::from_slice(bytes)
    }

    /// The writers' limits (`docs/PROTOCOL.md` §2.5) the reader applies to a parsed
    /// document: `Err(reason)` makes it damaged, so a record beyond them is skipped by
    /// readers and quarantined by the next change, like any damaged record.
    fn check(&self) -> std::result::Result<(), String> {
        Ok(())
    }

    /// Whether every change must first see the texts of the document's quarantined copies
    /// (acknowledged ones too) through [`Document::after_quarantine`]: the task list's id
    /// high-water mark counts the ids in them (§6.1).
    const COUNTS_QUARANTINE: bool = false;

    /// Adjusts the document, before each change, to the texts of its quarantined copies
    /// (only called when [`Document::COUNTS_QUARANTINE`]).
    fn after_quarantine(&mut self, _quarantined: &[Vec<u8>]) {}
}

/// A document that did not parse as a whole, and what of it could be kept.
struct Damaged<T> {
    /// Why it did not parse.
    detail: String,
    /// The document with only its valid records, and the records that are not valid.
    salvaged: Option<(T, Vec<serde_json::Value>)>,
}

/// Reads `path` without the lock, and never moves or changes it. Returns `None` if it
/// does not exist. A document with damaged records is returned with its valid records
/// (and a warning, [`crate::quarantine::take_warnings`]); one that cannot be read at all
/// is an [`Error::Damaged`] — the next *change* moves it aside.
pub(crate) fn load<T: Document>(home: &RooHome, path: &Path) -> Result<Option<T>> {
    home.engine().load(home, path)
}

/// [`load`] from a file.
pub(crate) fn load_file<T: Document>(path: &Path) -> Result<Option<T>> {
    settle(path, try_load(path)?)
}

/// [`load`] from a row of the PostgreSQL store.
pub(crate) fn load_row<T: Document>(
    home: &RooHome,
    pg: &PgStore,
    path: &Path,
) -> Result<Option<T>> {
    judge_row(path, pg.read(&home.key(path)?)?.as_deref())
}

/// [`load`] of a team's document (an inbox or the task list), and whether the team's
/// config exists: on PostgreSQL one round trip for both.
pub(crate) fn load_in_team<T: Document>(
    home: &RooHome,
    path: &Path,
    config: &Path,
) -> Result<(Option<T>, bool)> {
    home.engine().load_in_team(home, path, config)
}

/// [`load_in_team`] from a row of the PostgreSQL store: one round trip for both.
pub(crate) fn load_row_in_team<T: Document>(
    home: &RooHome,
    pg: &PgStore,
    path: &Path,
) -> Result<(Option<T>, bool)> {
    let (text, team) = pg.read_in_team(&home.key(path)?)?;
    Ok((judge_row(path, text.as_deref())?, team))
}

/// A row's text (`None`: no document) judged like a file by [`load`].
fn judge_row<T: Document>(path: &Path, text: Option<&str>) -> Result<Option<T>> {
    match text {
        Some(text) => settle(path, parse_loaded(path, text.as_bytes())?),
        None => Ok(None),
    }
}

/// What a reader makes of a loaded document: damaged records skipped with a warning, a
/// document unreadable as a whole an [`Error::Damaged`].
fn settle<T: Document>(
    path: &Path,
    loaded: std::result::Result<Option<T>, Damaged<T>>,
) -> Result<Option<T>> {
    match loaded {
        Ok(doc) => Ok(doc),
        Err(Damaged {
            detail,
            salvaged: Some((doc, bad)),
        }) => {
            crate::quarantine::warn(format!(
                "{}: {} damaged record(s) are skipped ({detail}); the next change moves them \
                 to a .corrupt- file",
                path.display(),
                bad.len()
            ));
            Ok(Some(doc))
        }
        Err(Damaged { detail, .. }) => Err(Error::Damaged {
            path: path.to_owned(),
            detail,
        }),
    }
}

/// Reads `path`; the caller holds its lock and is about to change it. Damaged records are
/// moved to a `.corrupt-<timestamp>` sibling, the file is rewritten with the valid ones,
/// and those are returned; a file that cannot be read at all is moved aside whole.
pub(crate) fn load_locked<T: Document>(path: &Path, lock: &FileLock) -> Result<Option<T>> {
    match try_load(path)? {
        Ok(doc) => Ok(doc),
        Err(Damaged {
            detail,
            salvaged: Some((doc, bad)),
        }) => {
            // Quarantine first, then drop the bad records from the file, so each bad
            // record lands in exactly one quarantined file whatever the change does next.
            let moved_to = quarantine_records::<T>(path, bad.clone(), &detail, lock)?;
            store(path, &doc, lock)?;
            crate::quarantine::warn(format!(
                "{}: moved {} damaged record(s) to {} ({detail}); the other records are kept",
                path.display(),
                bad.len(),
                moved_to.display()
            ));
            Ok(Some(doc))
        }
        Err(Damaged { detail, .. }) => {
            let moved_to = move_aside(path)?;
            Err(Error::Corrupt {
                path: path.to_owned(),
                moved_to,
                detail,
            })
        }
    }
}

/// Splits a document that does not parse into its valid and its damaged records, if the
/// document itself is sound JSON with a records array.
fn salvage<T: Document>(bytes: &[u8]) -> Option<(T, Vec<serde_json::Value>)> {
    use serde_json::Value;
    let key = T::RECORDS?;
    let (shell, records) = match serde_json::from_slice::<Value>(bytes).ok()? {
        Value::Array(items) => (serde_json::Map::new(), items),
        Value::Object(mut map) => match map.remove(key)? {
            Value::Array(items) => (map, items),
            _ => return None,
        },
        _ => return None,
    };
    let parses = |shell: &serde_json::Map<String, Value>, records: Vec<Value>| {
        let mut doc = shell.clone();
        doc.insert(key.to_owned(), Value::Array(records));
        serde_json::to_vec(&doc)
            .ok()
            .and_then(|b| parse_bounded::<T>(&b).ok())
    };
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for record in records {
        if parses(&shell, vec![record.clone()]).is_some() {
            good.push(record);
        } else {
            bad.push(record);
        }
    }
    if bad.is_empty() {
        return None;
    }
    let doc = parses(&shell, good)?;
    Some((doc, bad))
}

/// Writes `bad` records of `path` to a new `.corrupt-<timestamp>` sibling, in the
/// document's own shape (so they can be inspected and merged back), and returns its path.
fn quarantine_records<T: Document>(
    path: &Path,
    bad: Vec<serde_json::Value>,
    detail: &str,
    lock: &FileLock,
) -> Result<PathBuf> {
    let key = T::RECORDS.unwrap_or("records");
    let mut doc = serde_json::Map::new();
    doc.insert("version".into(), FormatVersion::CURRENT.to_string().into());
    doc.insert("quarantined_because".into(), detail.into());
    doc.insert(key.into(), serde_json::Value::Array(bad));
    let mut bytes =
        serde_json::to_vec_pretty(&doc).map_err(|e| Error::io("encode", path, e.into()))?;
    bytes.push(b'\n');
    let target = corrupt_sibling(path);
    write_atomically(&target, &bytes, || lock.verify(path))?;
    Ok(target)
}

/// `Ok(Ok(doc))`, `Ok(Err(damage))`, or `Err` for I/O and newer-version errors.
fn try_load<T: Document>(path: &Path) -> Result<std::result::Result<Option<T>, Damaged<T>>> {
    let Some(bytes) = fsio::read_regular(path, "read")? else {
        return Ok(Ok(None));
    };
    parse_loaded(path, &bytes)
}

/// The reader's judgement of a document's bytes, from a file or a row: `Ok(Ok(doc))`,
/// `Ok(Err(damage))`, or `Err` for a newer major version.
fn parse_loaded<T: Document>(
    path: &Path,
    bytes: &[u8],
) -> Result<std::result::Result<Option<T>, Damaged<T>>> {
    let bytes = bytes.to_vec();
    match parse_bounded::<T>(&bytes) {
        Ok(doc) => {
            check_version(path, doc.version())?;
            Ok(Ok(Some(doc)))
        }
        Err(parse_error) => {
            // A newer major may have changed the shape: report the version, not corruption.
            if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&bytes)
                && let Some(version) = value
                    .get("version")
                    .and_then(|v| v.as_str())
                    .and_then(FormatVersion::parse)
            {
                check_version(path, version)?;
            }
            Ok(Err(Damaged {
                detail: parse_error,
                salvaged: salvage::<T>(&bytes),
            }))
        }
    }
}

fn check_version(path: &Path, version: FormatVersion) -> Result<()> {
    if version.major > FORMAT_MAJOR {
        return Err(Error::NewerFormat {
            path: path.to_owned(),
            found: version.to_string(),
            supported: FORMAT_MAJOR,
        });
    }
    Ok(())
}

/// Renames a corrupt `path` to `<name>.corrupt-<timestamp>` (made unique) and returns
/// where it went.
pub fn move_aside(path: &Path) -> Result<PathBuf> {
    let target = corrupt_sibling(path);
    std::fs::rename(path, &target).map_err(|e| Error::io("move corrupt file aside", path, e))?;
    Ok(target)
}

/// A free `<name>.corrupt-<timestamp>[-N]` path next to `path`.
fn corrupt_sibling(path: &Path) -> PathBuf {
    let stamp = Timestamp::now().to_string().replace(':', "-");
    let mut n = 0;
    loop {
        let mut os = path.as_os_str().to_owned();
        os.push(format!(".corrupt-{stamp}"));
        if n > 0 {
            os.push(format!("-{n}"));
        }
        let target = PathBuf::from(os);
        if std::fs::symlink_metadata(&target).is_err() {
            return target;
        }
        n += 1;
    }
}

/// The reader's parse: the document's own shape, and no deeper than
/// [`limits::MAX_DOCUMENT_DEPTH`].
fn parse_bounded<T: Document>(bytes: &[u8]) -> std::result::Result<T, String> {
    let depth = limits::text_depth(bytes);
    if depth > limits::MAX_DOCUMENT_DEPTH {
        return Err(format!(
            "the document is nested {depth} levels deep; the limit is {}",
            limits::MAX_DOCUMENT_DEPTH
        ));
    }
    let doc = T::parse(bytes).map_err(|e| e.to_string())?;
    doc.check()?;
    Ok(doc)
}

/// Writes `doc` to `path` atomically (temp file in the same directory, fsync, rename),
/// checking right before the rename that `lock` is still ours (the fence).
///
/// Never writes what a reader would reject: the encoded document is parsed back with the
/// reader's own checks first, and if that fails nothing is written.
pub(crate) fn store<T: Document>(path: &Path, doc: &T, lock: &FileLock) -> Result<()> {
    let mut bytes =
        serde_json::to_vec_pretty(doc).map_err(|e| Error::io("encode", path, e.into()))?;
    bytes.push(b'\n');
    if let Err(reason) = parse_bounded::<T>(&bytes) {
        return Err(Error::Unwritable {
            path: path.to_owned(),
            reason,
        });
    }
    write_atomically(path, &bytes, || {
        #[cfg(test)]
        crate::lock::hooks::before_fence();
        lock.verify(path)
    })
}

/// Replaces `path` with `bytes` atomically (temp file in the same directory, mode 0600,
/// fsync, rename): readers see the old or the new file, never half of one; a failure
/// leaves `path` untouched. The one atomic write of the workspace: config edits and the
/// script cursor use it too. Take the file's [`FileLock`] first if others may write it.
pub fn replace_file(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically(path, bytes, || Ok(()))
}

/// Replaces `path` with `bytes` atomically; `fence` runs right before the rename and its
/// failure leaves `path` untouched.
pub(crate) fn write_atomically(
    path: &Path,
    bytes: &[u8],
    fence: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(
        ".{file_name}.tmp-{}-{:08x}",
        std::process::id(),
        Rng::seeded().next() as u32
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|e| Error::io("create temp file", &temp, e))?;
        file.write_all(bytes)
            .map_err(|e| Error::io("write temp file", &temp, e))?;
        file.sync_data()
            .map_err(|e| Error::io("sync temp file", &temp, e))?;
        fence()?;
        std::fs::rename(&temp, path).map_err(|e| Error::io("replace", path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Removes `.<name>.tmp-<pid>-<hex>` files of `path` left by writers that died between
/// creating and renaming them (their pid is not alive). Called by the lock holder before
/// each write, so it costs one directory listing per write and never runs on reads; a
/// temp file of a live writer (even one that lost its lock) is left alone. Best effort.
pub(crate) fn sweep_temp_files(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        let Some(rest) = file_name.strip_prefix(&prefix) else {
            continue;
        };
        let Some(pid) = rest
            .split_once('-')
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !pid_alive(pid) && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether a locked update changed the document (and so must be written back).
pub(crate) enum Outcome<R> {
    /// Write the document back, then return the value.
    Write(R),
    /// Leave the file alone, return the value.
    Keep(R),
}

/// Locked read → modify → write. `missing` supplies the document when the file does not
/// exist (or refuses). If `change` fails, nothing is written. Both may run more than once
/// on the PostgreSQL store: again from scratch when the link was lost before the change
/// committed (a change that committed is never run again).
pub(crate) fn update<T: Document, R>(
    home: &RooHome,
    path: &Path,
    missing: impl FnMut() -> Result<T>,
    mut change: impl FnMut(&mut T) -> Result<Outcome<R>>,
) -> Result<R> {
    update_fenced(home, path, missing, |doc, _| change(doc))
}

/// What holds a document still while it changes, and takes the change's writes of its
/// own (the inbox's archive appends): the file's [`FileLock`] (such a write is fenced
/// with [`FileLock::verify`]), or the PostgreSQL transaction (it is part of it).
pub(crate) enum Guard<'a> {
    File {
        lock: &'a FileLock,
        home: &'a RooHome,
        /// Events the change emitted, appended once its document is written.
        events: Vec<(PathBuf, Draft)>,
    },
    Pg {
        home: &'a RooHome,
        pg: &'a PgStore,
        writes: &'a mut PgWrites,
    },
}

impl<'a> Guard<'a> {
    /// The guard of a change of a file held by `lock`.
    pub(crate) fn file(lock: &'a FileLock, home: &'a RooHome) -> Guard<'a> {
        Guard::File {
            lock,
            home,
            events: Vec::new(),
        }
    }

    /// Emits an event of `team`'s log, written in this same change: on files appended
    /// after the document (still under its lock, taking the log's own lock innermost),
    /// on PostgreSQL in the same transaction. Refused now, before anything is written, if
    /// a reader would reject its line; nothing is logged if the change then fails.
    pub(crate) fn emit(&mut self, team: &Name, draft: Draft) -> Result<()> {
        let (home, path) = match self {
            Guard::File { home, .. } | Guard::Pg { home, .. } => {
                (*home, crate::events::events_path(home, team))
            }
        };
        let unwritable = |reason| Error::Unwritable {
            path: path.clone(),
            reason,
        };
        draft.check().map_err(unwritable)?;
        let mut draft = draft;
        // On PostgreSQL a handle writing as a member knows its epoch.
        if draft.epoch.is_none()
            && let Guard::Pg { pg, .. } = self
            && let Some(fence) = pg.fence()
            && fence.member == draft.actor
            && fence.team == team.as_str()
        {
            draft.epoch = Some(fence.epoch);
        }
        match self {
            Guard::File { events, .. } => events.push((path, draft)),
            Guard::Pg { writes, .. } => {
                let body = draft.body().map_err(unwritable)?;
                writes.event(&home.key(&path)?, body);
            }
        }
        Ok(())
    }

    /// On files: appends the events the change emitted, after its document at `path` was
    /// written (or kept), while its lock is still held and still ours.
    fn flush_events(&mut self, path: &Path) -> Result<()> {
        let Guard::File { lock, home, events } = self else {
            return Ok(());
        };
        if events.is_empty() {
            return Ok(());
        }
        lock.verify(path)?;
        let pending = std::mem::take(events);
        let mut logs: Vec<(PathBuf, Vec<Draft>)> = Vec::new();
        for (log, draft) in pending {
            match logs.iter_mut().find(|(l, _)| *l == log) {
                Some((_, drafts)) => drafts.push(draft),
                None => logs.push((log, vec![draft])),
            }
        }
        for (log, drafts) in logs {
            crate::events::append_to_file(home, &log, &drafts, crate::events::Rotation::DEFAULT)?;
        }
        Ok(())
    }

    /// The lines of the archive at `archive` as the PostgreSQL store holds them, read in
    /// the transaction; `None` for files (the caller reads the file).
    pub(crate) fn archive_lines(&self, archive: &Path) -> Result<Option<Vec<String>>> {
        match self {
            Guard::File { .. } => Ok(None),
            Guard::Pg { home, pg, .. } => pg
                .archive_lines_in_transaction(&home.key(archive)?)
                .map(Some),
        }
    }

    /// Appends `lines` (one JSON text each) to the archive `archive` of the document at
    /// `path`: a file written under the document's lock, or rows in the same transaction.
    pub(crate) fn append_lines(
        &mut self,
        path: &Path,
        archive: &Path,
        lines: &[String],
    ) -> Result<()> {
        match self {
            Guard::File { lock, .. } => {
                lock.verify(path)?;
                fsio::append_lines(archive, lines)
            }
            Guard::Pg { home, writes, .. } => {
                let key = home.key(archive)?;
                for line in lines {
                    writes.archive(&key, line.clone());
                }
                Ok(())
            }
        }
    }
}

/// [`update`] whose `change` also gets the [`Guard`], for writes of its own (the inbox's
/// archive appends).
pub(crate) fn update_fenced<T: Document, R>(
    home: &RooHome,
    path: &Path,
    missing: impl FnMut() -> Result<T>,
    mut change: impl FnMut(&mut T, &mut Guard) -> Result<Outcome<R>>,
) -> Result<R> {
    update_core(home, path, None, missing, |_, doc, guard| {
        change(doc, guard)
    })
}

/// Where a team's document finds its team's config, and the error when there is none.
pub(crate) struct InTeam<'a> {
    /// The config's path.
    pub(crate) config: &'a Path,
    /// The error when the team has no config.
    pub(crate) missing: &'a dyn Fn() -> Error,
}

/// [`update_fenced`] of a team's document (an inbox or the task list) whose `change` also
/// gets the team's config: read unlocked before the change on files (as
/// `Team::config` reads it), and on PostgreSQL in the change's first round trip, held
/// shared until the commit. No config: `team.missing`, and nothing is written.
pub(crate) fn update_in_team<T: Document, R>(
    home: &RooHome,
    path: &Path,
    team: InTeam<'_>,
    missing: impl FnMut() -> Result<T>,
    mut change: impl FnMut(&TeamConfig, &mut T, &mut Guard) -> Result<Outcome<R>>,
) -> Result<R> {
    update_core(home, path, Some(&team), missing, |config, doc, guard| {
        // Always given when a team is.
        let config = config.ok_or_else(team.missing)?;
        change(config, doc, guard)
    })
}

/// [`update_fenced`] and [`update_in_team`] on either store.
fn update_core<T: Document, R>(
    home: &RooHome,
    path: &Path,
    team: Option<&InTeam<'_>>,
    missing: impl FnMut() -> Result<T>,
    change: impl FnMut(Option<&TeamConfig>, &mut T, &mut Guard) -> Result<Outcome<R>>,
) -> Result<R> {
    home.engine().update(home, path, team, missing, change)
}

/// [`update_core`] on a file, under its lock.
pub(crate) fn update_file<T: Document, R>(
    home: &RooHome,
    path: &Path,
    team: Option<&InTeam<'_>>,
    mut missing: impl FnMut() -> Result<T>,
    mut change: impl FnMut(Option<&TeamConfig>, &mut T, &mut Guard) -> Result<Outcome<R>>,
) -> Result<R> {
    let config = match team {
        Some(team) => Some(load::<TeamConfig>(home, team.config)?.ok_or_else(team.missing)?),
        None => None,
    };
    let lock = FileLock::acquire(path, home.lock_policy())?;
    let mut doc = match load_locked::<T>(path, &lock)? {
        Some(doc) => doc,
        None => missing()?,
    };
    if T::COUNTS_QUARANTINE {
        // Read under the lock: a record the load just quarantined counts.
        doc.after_quarantine(&crate::quarantine::texts_of(home, path)?);
    }
    let mut guard = Guard::file(&lock, home);
    match change(config.as_ref(), &mut doc, &mut guard)? {
        Outcome::Write(r) => {
            sweep_temp_files(path);
            store(path, &doc, &lock)?;
            // The change is made: a log that cannot take its lines (a full disk, a
            // damaged log) is reported, never turned into a failure a caller would retry.
            if let Err(error) = guard.flush_events(path) {
                crate::quarantine::warn(format!(
                    "the change to {} was made, but its events were not added to the team's \
                     event log: {error}",
                    path.display()
                ));
            }
            Ok(r)
        }
        Outcome::Keep(r) => {
            guard.flush_events(path)?;
            Ok(r)
        }
    }
}

/// [`update_core`] on a row of the PostgreSQL store: the same rules as on a file, in one
/// transaction. A damaged row is repaired by whoever holds its lock when it is found,
/// and that repair is committed on its own, whatever the change then does (a file's
/// quarantine is a rename that stays): its damaged records go to `roo_quarantine` and the
/// valid ones are written back, then the change runs again on them; a document that
/// cannot be read at all goes there whole, the row is deleted, and the change fails with
/// [`Error::Corrupt`] (the next change starts afresh, as with a file).
pub(crate) fn update_row<T: Document, R>(
    home: &RooHome,
    pg: &PgStore,
    path: &Path,
    team: Option<&InTeam<'_>>,
    mut missing: impl FnMut() -> Result<T>,
    mut change: impl FnMut(Option<&TeamConfig>, &mut T, &mut Guard) -> Result<Outcome<R>>,
) -> Result<R> {
    enum Step<R> {
        Done(R),
        Repaired,
        Corrupt(Error),
    }
    let key = home.key(path)?;
    let wants = Wants {
        config: team.is_some(),
        quarantine: T::COUNTS_QUARANTINE,
        presence: crate::pg::wants_presence(&key),
    };
    for _ in 0..3 {
        let step = pg.update_with(&key, wants, |text, reads, writes| {
            let config = match team {
                Some(team) => Some(
                    judge_row::<TeamConfig>(team.config, reads.config.as_deref())?
                        .ok_or_else(team.missing)?,
                ),
                None => None,
            };
            let mut doc = match text {
                None => missing()?,
                Some(text) => match repair_text::<T>(&key, path, text, writes)? {
                    Repair::Sound(Some(doc)) => doc,
                    Repair::Sound(None) => missing()?,
                    Repair::Salvaged(text) => return Ok(PgChange::Write(Step::Repaired, text)),
                    Repair::Whole(corrupt) => return Ok(PgChange::Delete(Step::Corrupt(corrupt))),
                },
            };
            if T::COUNTS_QUARANTINE {
                let texts: Vec<Vec<u8>> = reads
                    .quarantined
                    .iter()
                    .map(|text| text.as_bytes().to_vec())
                    .collect();
                doc.after_quarantine(&texts);
            }
            let outcome = change(
                config.as_ref(),
                &mut doc,
                &mut Guard::Pg {
                    home,
                    pg,
                    writes: &mut *writes,
                },
            )?;
            Ok(match outcome {
                Outcome::Write(r) => PgChange::Write(Step::Done(r), encode_checked(path, &doc)?),
                Outcome::Keep(r) => PgChange::Keep(Step::Done(r)),
            })
        })?;
        match step {
            Step::Done(r) => return Ok(r),
            Step::Repaired => continue,
            Step::Corrupt(corrupt) => return Err(corrupt),
        }
    }
    Err(Error::Engine {
        action: format!("update {key}"),
        target: pg.target().to_owned(),
        detail: "the row was damaged again after each repair".into(),
    })
}

/// What a row's text is, and the repair of a damaged one (its quarantine in `writes`).
enum Repair<T> {
    Sound(Option<T>),
    /// Damaged records quarantined; the text of the valid ones, to write back.
    Salvaged(String),
    /// Unreadable as a whole: quarantined whole; the error the change reports.
    Whole(Error),
}

fn repair_text<T: Document>(
    key: &str,
    path: &Path,
    text: String,
    writes: &mut PgWrites,
) -> Result<Repair<T>> {
    let quarantined = format!("postgresql roo_quarantine, key {key}");
    Ok(match parse_loaded::<T>(path, text.as_bytes())? {
        Ok(doc) => Repair::Sound(doc),
        Err(Damaged {
            detail,
            salvaged: Some((doc, bad)),
        }) => {
            writes.quarantine(
                key,
                &detail,
                serde_json::to_string(&bad).unwrap_or_default(),
            );
            crate::quarantine::warn(format!(
                "{key}: moved {} damaged record(s) to {quarantined} ({detail}); the other \
                 records are kept",
                bad.len()
            ));
            Repair::Salvaged(encode_checked(path, &doc)?)
        }
        Err(Damaged { detail, .. }) => {
            writes.quarantine(key, &detail, text);
            Repair::Whole(Error::Corrupt {
                path: path.to_owned(),
                moved_to: PathBuf::from(&quarantined),
                detail,
            })
        }
    })
}

/// Moves what is damaged in the row of `path` to `roo_quarantine`, in a transaction of its
/// own: damaged records (the valid ones are written back), or the whole document (the row
/// is deleted; returned as the [`Error::Corrupt`] the change reports). Nothing to do for a
/// sound or missing row. With the warning every reader and writer of a file gives.
pub(crate) fn repair_row<T: Document>(
    home: &RooHome,
    pg: &PgStore,
    path: &Path,
) -> Result<Option<Error>> {
    let key = home.key(path)?;
    pg.update_unchecked(&key, |text, writes| {
        let Some(text) = text else {
            return Ok(PgChange::Keep(None));
        };
        Ok(match repair_text::<T>(&key, path, text, writes)? {
            Repair::Sound(_) => PgChange::Keep(None),
            Repair::Salvaged(text) => PgChange::Write(None, text),
            Repair::Whole(corrupt) => PgChange::Delete(Some(corrupt)),
        })
    })
}

/// A row's text judged by the reader's rules, for a change that handles the row itself
/// (a team's deletion): a newer major version is [`Error::NewerFormat`], a document that
/// does not parse is [`Error::Damaged`] (nothing is moved; the caller changes nothing).
pub(crate) fn parse_row<T: Document>(path: &Path, text: &str) -> Result<Option<T>> {
    match parse_loaded::<T>(path, text.as_bytes())? {
        Ok(doc) => Ok(doc),
        Err(Damaged { detail, .. }) => Err(Error::Damaged {
            path: path.to_owned(),
            detail,
        }),
    }
}

/// The document's text for a row, refused (nothing written) if a reader would reject it.
fn encode_checked<T: Document>(path: &Path, doc: &T) -> Result<String> {
    let text = serde_json::to_string(doc).map_err(|e| Error::io("encode", path, e.into()))?;
    if let Err(reason) = parse_bounded::<T>(text.as_bytes()) {
        return Err(Error::Unwritable {
            path: path.to_owned(),
            reason,
        });
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::LockPolicy;
    use serde::Deserialize;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Doc {
        #[serde(default)]
        version: FormatVersion,
        n: u32,
    }

    impl Doc {
        /// A value the reader refuses.
        const REFUSED: u32 = 666;
    }

    impl Document for Doc {
        fn version(&self) -> FormatVersion {
            self.version
        }

        fn check(&self) -> std::result::Result<(), String> {
            match self.n {
                Doc::REFUSED => Err("refused".into()),
                _ => Ok(()),
            }
        }
    }

    #[test]
    fn round_trip_and_missing() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join("d.json");
        assert_eq!(load::<Doc>(&home, &path).unwrap(), None);
        let doc = Doc {
            version: FormatVersion::CURRENT,
            n: 7,
        };
        let lock = FileLock::acquire(&path, home.lock_policy()).unwrap();
        store(&path, &doc, &lock).unwrap();
        drop(lock);
        assert_eq!(load::<Doc>(&home, &path).unwrap(), Some(doc));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"version\": \"1.0\""), "{text}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn newer_major_is_refused_and_left_alone_newer_minor_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join("d.json");
        std::fs::write(&path, r#"{"version":"1.7","n":1,"future":true}"#).unwrap();
        assert_eq!(load::<Doc>(&home, &path).unwrap().unwrap().n, 1);
        std::fs::write(&path, r#"{"version":"2.0","m":"reshaped"}"#).unwrap();
        let err = load::<Doc>(&home, &path).unwrap_err();
        assert!(matches!(err, Error::NewerFormat { .. }), "{err}");
        assert!(err.to_string().contains("format version 2.0"), "{err}");
        assert!(path.exists());
    }

    #[test]
    fn corrupt_file_is_moved_aside_loudly() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join("d.json");
        std::fs::write(&path, b"{\"n\": 1,").unwrap();
        // A reader reports it and leaves it; the next change moves it aside.
        let err = load::<Doc>(&home, &path).unwrap_err();
        assert!(matches!(err, Error::Damaged { .. }), "{err}");
        assert!(path.exists());
        let lock = FileLock::acquire(&path, home.lock_policy()).unwrap();
        let err = load_locked::<Doc>(&path, &lock).unwrap_err();
        let Error::Corrupt { moved_to, .. } = &err else {
            panic!("{err}")
        };
        assert!(!path.exists());
        assert_eq!(std::fs::read(moved_to).unwrap(), b"{\"n\": 1,");
        let name = moved_to.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("d.json.corrupt-"), "{name}");
        assert!(err.to_string().contains(&name), "{err}");
    }

    #[test]
    fn failed_change_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join("d.json");
        let mk = || {
            Ok(Doc {
                version: FormatVersion::CURRENT,
                n: 0,
            })
        };
        update(&home, &path, mk, |d: &mut Doc| {
            d.n = 1;
            Ok(Outcome::Write(()))
        })
        .unwrap();
        let before = std::fs::read(&path).unwrap();
        let err = update(&home, &path, mk, |d: &mut Doc| {
            d.n = 99;
            Err::<Outcome<()>, _>(Error::InvalidMessage {
                reason: "no".into(),
            })
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), before);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            leftovers
                .iter()
                .all(|n| !n.to_string_lossy().contains(".tmp-")),
            "{leftovers:?}"
        );
    }

    fn mk() -> Result<Doc> {
        Ok(Doc {
            version: FormatVersion::CURRENT,
            n: 0,
        })
    }

    fn set(n: u32) -> impl FnMut(&mut Doc) -> Result<Outcome<()>> {
        move |d: &mut Doc| {
            d.n = n;
            Ok(Outcome::Write(()))
        }
    }

    const FENCE_DIR_ENV: &str = "ROO_TEST_FENCE_DIR";

    /// Helper mode of the test below: writes `n = 1` to `$ROO_TEST_FENCE_DIR/d.json` in
    /// the default lock mode, stopping itself (`SIGSTOP`) while it holds the lock right
    /// before the fence. Passes only if the write is refused as `LockLost`.
    #[test]
    #[ignore = "helper process for a_holder_stopped_past_the_stale_age_does_not_overwrite_newer_data"]
    fn fence_helper_stops_while_holding_the_lock() {
        let Some(dir) = std::env::var_os(FENCE_DIR_ENV) else {
            return;
        };
        let dir = PathBuf::from(dir);
        let home = RooHome::new(&dir);
        crate::lock::hooks::set_before_fence(|| {
            nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP).unwrap();
        });
        let outcome = update(&home, &dir.join("d.json"), mk, set(1));
        assert!(
            matches!(outcome, Err(Error::LockLost { .. })),
            "a holder that outlived the stale age wrote: {outcome:?}"
        );
    }

    fn process_state(pid: u32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat[stat.rfind(')')? + 1..].trim_start().chars().next()
    }

    #[test]
    fn a_holder_stopped_past_the_stale_age_does_not_overwrite_newer_data() {
        use std::time::{Duration, Instant};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.json");
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "doc::tests::fence_helper_stops_while_holding_the_lock",
                "--ignored",
                "--test-threads=1",
            ])
            .env(FENCE_DIR_ENV, dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(30);
        while process_state(pid) != Some('T') {
            assert!(Instant::now() < deadline, "the holder never stopped");
            assert!(
                child.try_wait().unwrap().is_none(),
                "the holder exited early"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // The holder is stopped with the lock. A participant in protocol mode waits until
        // the lock is older than the stale age (1 s here, set through LockPolicy so the
        // test stays short; the real age is 10 s), breaks it and writes newer data.
        let lock_path = dir.path().join("d.json.lock");
        assert!(lock_path.exists());
        let home = RooHome::new(dir.path()).with_lock_policy(LockPolicy {
            retries: 1000,
            max_delay: Duration::from_millis(20),
            stale_after: Duration::from_secs(1),
            ..LockPolicy::protocol()
        });
        update(&home, &path, mk, set(2)).unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGCONT,
        )
        .unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("1 passed"), "{text}");
        let doc: Doc = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(doc.n, 2, "the resumed holder overwrote newer data");
        assert!(!lock_path.exists(), "a lock was left behind");
    }

    #[test]
    fn temp_files_of_dead_writers_are_swept_on_write_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join("d.json");
        let dead = dir.path().join(".d.json.tmp-999999999-0badf00d");
        let live = dir
            .path()
            .join(format!(".d.json.tmp-{}-0000beef", std::process::id()));
        let other = dir.path().join(".e.json.tmp-999999999-0badf00d");
        for p in [&dead, &live, &other] {
            std::fs::write(p, b"half a document").unwrap();
        }
        update(&home, &path, mk, set(1)).unwrap();
        assert!(!dead.exists(), "a dead writer's temp file stayed");
        assert!(live.exists(), "a live writer's temp file was removed");
        assert!(other.exists(), "another document's temp file was touched");
    }

    #[test]
    fn a_change_that_fails_after_emitting_logs_nothing() {
        use crate::events::{Draft, EVENTS_FILE, EventKind};
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let team = Name::parse("t").unwrap();
        let log = home.team_dir(&team).join(EVENTS_FILE);
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let path = dir.path().join("d.json");
        let join = |n: &str| Draft::new(EventKind::Join { member: n.into() }, n, None);
        // Refused by the change itself after it emitted.
        let refused = update_fenced(&home, &path, mk, |d: &mut Doc, guard| {
            d.n = 1;
            guard.emit(&team, join("alice"))?;
            Err::<Outcome<()>, _>(Error::InvalidMessage {
                reason: "no".into(),
            })
        });
        assert!(refused.is_err());
        // The document's lock lost (judged stale, taken by another) before its write.
        let lost = update_fenced(&home, &path, mk, |d: &mut Doc, guard| {
            d.n = 2;
            guard.emit(&team, join("bob"))?;
            let lock = dir.path().join("d.json.lock");
            std::fs::remove_file(&lock).unwrap();
            std::fs::write(
                &lock,
                br#"{"pid":1,"time":"2026-01-01T00:00:00.000Z","token":"x"}"#,
            )
            .unwrap();
            Ok(Outcome::Write(()))
        });
        assert!(matches!(lost, Err(Error::LockLost { .. })), "{lost:?}");
        std::fs::remove_file(dir.path().join("d.json.lock")).unwrap();
        // A document its reader would refuse (not written, nor its events).
        let unwritable = update_fenced(&home, &path, mk, |d: &mut Doc, guard| {
            d.n = Doc::REFUSED;
            guard.emit(&team, join("dave"))?;
            Ok(Outcome::Write(()))
        });
        assert!(
            matches!(unwritable, Err(Error::Unwritable { .. })),
            "{unwritable:?}"
        );
        assert!(!log.exists(), "a failed change logged an event");
        // A change that succeeds logs its event after its document.
        update_fenced(&home, &path, mk, |d: &mut Doc, guard| {
            d.n = 3;
            guard.emit(&team, join("carol"))?;
            Ok(Outcome::Write(()))
        })
        .unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains("\"seq\":1") && text.contains("carol"),
            "{text}"
        );
    }

    #[test]
    fn a_symlinked_document_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join("d.json");
        let outside = dir.path().join("outside.json");
        std::fs::write(&outside, r#"{"version":"1.0","n":42}"#).unwrap();
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        let err = load::<Doc>(&home, &path).unwrap_err();
        assert!(matches!(err, Error::NotRegularFile { .. }), "{err}");
        let err = update(&home, &path, mk, set(1)).unwrap_err();
        assert!(matches!(err, Error::NotRegularFile { .. }), "{err}");
        assert_eq!(
            std::fs::read_to_string(&outside).unwrap(),
            r#"{"version":"1.0","n":42}"#
        );
        assert!(std::fs::symlink_metadata(&path).unwrap().is_symlink());
    }

    #[test]
    fn a_fifo_document_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let path = dir.path().join("d.json");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = load::<Doc>(&home, &path).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
    }
}
