//! Quarantined data: `.corrupt-<timestamp>` files, the warnings about them, and the
//! doctor's acknowledgement.
//!
//! A damaged record (or a whole file that is not JSON) is moved to a `<file>.corrupt-<ts>`
//! sibling by the next *change* of the document (see `doc`). While such a sibling exists,
//! every command of the team reports it; `roo-mail doctor` / `roo-task doctor` lists them
//! and `--acknowledge` renames each to `<name>.acknowledged`, which ends the reports.
//! Task ids are never reissued: the task list's high-water mark also counts the ids found
//! in its quarantined files, acknowledged or not.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::home::RooHome;
use crate::name::Name;
use crate::pg::PgStore;

/// The suffix `doctor --acknowledge` gives a quarantined file.
pub const ACKNOWLEDGED_SUFFIX: &str = ".acknowledged";

static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records a warning for the program to show (the CLIs print them on stderr).
pub(crate) fn warn(text: String) {
    if let Ok(mut w) = WARNINGS.lock()
        && !w.contains(&text)
    {
        w.push(text);
    }
}

/// Records a warning for the program to show with the others.
pub fn warn_later(text: String) {
    warn(text);
}

/// Takes the warnings recorded so far in this process (damaged records skipped or
/// quarantined).
pub fn take_warnings() -> Vec<String> {
    WARNINGS
        .lock()
        .map(|mut w| std::mem::take(&mut *w))
        .unwrap_or_default()
}

/// The directories that hold a team's documents.
fn dirs(home: &RooHome, team: &Name) -> [PathBuf; 3] {
    [
        home.team_dir(team),
        home.inboxes_dir(team),
        home.tasks_dir(team),
    ]
}

/// `.corrupt-` files in `dir` whose name starts with `prefix`, acknowledged ones too if
/// `acknowledged`; sorted.
fn corrupt_in(dir: &Path, prefix: &str, acknowledged: bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(prefix)
                && name.contains(".corrupt-")
                && !name.starts_with('.')
                && (acknowledged || !name.ends_with(ACKNOWLEDGED_SUFFIX))
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// The team's quarantined files not yet acknowledged (in the PostgreSQL store, its
/// `roo_quarantine` rows, named `postgresql roo_quarantine #<id> (<key>)`).
///
/// A store that cannot be read is an error, never "nothing quarantined".
pub fn quarantined(home: &RooHome, team: &Name) -> Result<Vec<PathBuf>> {
    home.engine().quarantined(home, team)
}

/// [`quarantined`] in the PostgreSQL store.
pub(crate) fn quarantined_rows(home: &RooHome, pg: &PgStore, team: &Name) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for dir in [home.team_dir(team), home.tasks_dir(team)] {
        let prefix = format!("{}/", home.key(&dir)?);
        found.extend(
            pg.quarantined_under(&prefix)?
                .into_iter()
                .map(|(id, key)| PathBuf::from(format!("postgresql roo_quarantine #{id} ({key})"))),
        );
    }
    Ok(found)
}

/// [`quarantined`] files.
pub(crate) fn quarantined_files(home: &RooHome, team: &Name) -> Vec<PathBuf> {
    dirs(home, team)
        .iter()
        .flat_map(|d| corrupt_in(d, "", false))
        .collect()
}

/// Quarantined copies of the document at `path` (acknowledged ones too if
/// `acknowledged`): its `.corrupt-` siblings, or its rows of the PostgreSQL store's
/// `roo_quarantine` (named `postgresql roo_quarantine #<id>`).
pub(crate) fn siblings_of(home: &RooHome, path: &Path, acknowledged: bool) -> Result<Vec<PathBuf>> {
    home.engine().quarantined_copies(home, path, acknowledged)
}

/// [`siblings_of`] in the PostgreSQL store.
pub(crate) fn copies_in_rows(
    home: &RooHome,
    pg: &PgStore,
    path: &Path,
    acknowledged: bool,
) -> Result<Vec<PathBuf>> {
    Ok(pg
        .quarantined(&home.key(path)?, acknowledged)?
        .into_iter()
        .map(|(id, _)| PathBuf::from(format!("postgresql roo_quarantine #{id}")))
        .collect())
}

/// The texts of every quarantined copy of the document at `path`, acknowledged ones too.
pub(crate) fn texts_of(home: &RooHome, path: &Path) -> Result<Vec<Vec<u8>>> {
    home.engine().quarantined_texts(home, path)
}

/// [`texts_of`] in the PostgreSQL store.
pub(crate) fn texts_in_rows(home: &RooHome, pg: &PgStore, path: &Path) -> Result<Vec<Vec<u8>>> {
    Ok(pg
        .quarantined(&home.key(path)?, true)?
        .into_iter()
        .map(|(_, text)| text.into_bytes())
        .collect())
}

/// [`texts_of`] of files.
pub(crate) fn texts_in_files(path: &Path) -> Vec<Vec<u8>> {
    siblings(path, true)
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .collect()
}

/// Quarantined siblings of `path` (acknowledged ones too).
pub(crate) fn siblings(path: &Path, acknowledged: bool) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    corrupt_in(
        dir,
        &format!("{}.corrupt-", name.to_string_lossy()),
        acknowledged,
    )
}

/// Renames every quarantined file of the team to `<name>.acknowledged`; returns the new
/// paths. The files are kept for inspection.
pub fn acknowledge(home: &RooHome, team: &Name) -> Result<Vec<PathBuf>> {
    home.engine().acknowledge(home, team)
}

/// [`acknowledge`] in the PostgreSQL store.
pub(crate) fn acknowledge_rows(home: &RooHome, pg: &PgStore, team: &Name) -> Result<Vec<PathBuf>> {
    let mut done = Vec::new();
    for dir in [home.team_dir(team), home.tasks_dir(team)] {
        let prefix = format!("{}/", home.key(&dir)?);
        done.extend(
            pg.acknowledge_under(&prefix)?
                .into_iter()
                .map(|id| PathBuf::from(format!("postgresql roo_quarantine #{id}"))),
        );
    }
    Ok(done)
}

/// [`acknowledge`] of files: each renamed to `<name>.acknowledged`.
pub(crate) fn acknowledge_files(home: &RooHome, team: &Name) -> Result<Vec<PathBuf>> {
    let mut done = Vec::new();
    for path in quarantined_files(home, team) {
        let mut target = path.as_os_str().to_owned();
        target.push(ACKNOWLEDGED_SUFFIX);
        let target = PathBuf::from(target);
        std::fs::rename(&path, &target)
            .map_err(|e| Error::io("acknowledge quarantined file", &path, e))?;
        done.push(target);
    }
    Ok(done)
}

/// The highest task number mentioned in `bytes` as an `"id"` (or implied by a
/// `"next_id"`), whether or not the text parses.
pub(crate) fn highest_task_id(bytes: &[u8]) -> u64 {
    let mut highest = 0;
    for (key, offset) in [(&b"\"next_id\""[..], 1), (&b"\"id\""[..], 0)] {
        let mut at = 0;
        while let Some(pos) = find(&bytes[at..], key) {
            at += pos + key.len();
            let rest = &bytes[at..];
            let rest = skip(rest, |b| b.is_ascii_whitespace());
            let Some(rest) = rest.strip_prefix(b":") else {
                continue;
            };
            let rest = skip(rest, |b| b.is_ascii_whitespace());
            let rest = rest.strip_prefix(b"\"").unwrap_or(rest);
            let digits: Vec<u8> = rest
                .iter()
                .copied()
                .take_while(u8::is_ascii_digit)
                .take(19)
                .collect();
            if let Ok(n) = std::str::from_utf8(&digits).unwrap_or("").parse::<u64>() {
                highest = highest.max(n.saturating_sub(offset));
            }
        }
    }
    highest
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn skip(bytes: &[u8], what: impl Fn(&u8) -> bool) -> &[u8] {
    let n = bytes.iter().take_while(|b| what(b)).count();
    &bytes[n..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_found_in_damaged_text() {
        assert_eq!(highest_task_id(br#"{"next_id": 8, "tasks": [{"id": "3"#), 7);
        assert_eq!(highest_task_id(br#"{"tasks": [{"id" : "12", "x"#), 12);
        assert_eq!(highest_task_id(b"not json at all"), 0);
    }
}
