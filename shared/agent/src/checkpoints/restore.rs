//! Writing a recorded state back into the project: only the paths the agent changed, and
//! never through a symlink. Only regular files are written (never a symlink, a device or
//! a FIFO, and never with setuid, setgid or world-writable bits), whatever the checkpoint
//! file says: another program may have written it. Every directory between the root and a path must be a real
//! directory (a symlink swapped in for one makes that path skipped, never followed); the
//! file is written, and a file the agent created removed, through the file tools' confined open (a temporary file renamed over
//! the name, relative to a directory handle reached without following links), so nothing
//! is ever written outside the project. What could not be restored is said, with why.

use std::path::Path;

use super::objects::Objects;
use super::record::Entry;
use super::scan::{absolute, checked_relative};
use crate::tools::confined::{self, Parents};

/// What a code rewind did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Paths written back to what they held (relative to the project root).
    pub restored: Vec<String>,
    /// Paths the agent had created, removed.
    pub removed: Vec<String>,
    /// Paths left as they are, with why.
    pub skipped: Vec<(String, String)>,
}

impl RestoreReport {
    /// The report as lines for a person or a model.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if self.restored.is_empty() && self.removed.is_empty() && self.skipped.is_empty() {
            return "no file to restore: the agent changed none since then\n".to_string();
        }
        for path in &self.restored {
            out.push_str(&format!("restored {path}\n"));
        }
        for path in &self.removed {
            out.push_str(&format!("removed {path} (the agent had created it)\n"));
        }
        for (path, why) in &self.skipped {
            out.push_str(&format!("left {path} as it is: {why}\n"));
        }
        out
    }
}

/// Puts `rel` under `root` (canonical) back to `entry`, adding to `report` what it did
/// or why it left the path.
pub(super) fn restore(
    root: &Path,
    rel: &str,
    entry: &Entry,
    objects: &Objects,
    report: &mut RestoreReport,
) {
    let skipped = |report: &mut RestoreReport, why: String| {
        report.skipped.push((rel.to_string(), why));
    };
    if checked_relative(Path::new(rel)).as_deref() != Some(rel) {
        return skipped(report, "its name is not a plain path in the project".into());
    }
    if let Err(why) = plain_parents(root, rel) {
        return skipped(report, why);
    }
    let path = absolute(root, rel);
    let now = std::fs::symlink_metadata(&path).ok();
    if now.as_ref().is_some_and(|m| m.is_dir()) {
        return skipped(report, "it is a directory now".into());
    }
    let outcome = match entry {
        Entry::Unrecorded { why } => Err(format!("its earlier state was not kept ({why})")),
        Entry::Missing => match now {
            None => Ok(false),
            Some(_) => remove(root, &path)
                .map(|()| true)
                .map_err(|e| format!("could not be removed: {e}")),
        },
        // A link is never planted: the checkpoint file could have been written by another
        // program, and a link is a way out of the project for whatever follows it.
        Entry::Symlink { target } => Err(format!(
            "it was a symbolic link to {}, which a rewind never creates (make it again \
             with `ln -s` if you want it back)",
            target.display()
        )),
        Entry::File { blob, mode, .. } => objects.get(blob).and_then(|content| {
            // A symlink at the name is replaced, never written through.
            if now.as_ref().is_some_and(|m| m.file_type().is_symlink()) {
                remove(root, &path).map_err(|e| format!("could not be replaced: {e}"))?;
            }
            confined::locate(&path, &[root.to_path_buf()], Parents::Create)
                .and_then(|located| located.write_atomic(&content, Some(safe_mode(*mode))))
                .map(|()| false)
                .map_err(|e| format!("could not be written: {e}"))
        }),
    };
    match outcome {
        Ok(true) => report.removed.push(rel.to_string()),
        Ok(false) if matches!(entry, Entry::Missing) => {}
        Ok(false) => report.restored.push(rel.to_string()),
        Err(why) => skipped(report, why),
    }
}

/// Removes the file or symlink at `path` through a handle on its directory reached
/// without following links (never by path: a directory swapped for a symlink after
/// [`plain_parents`] looked cannot make the removal land outside the project).
fn remove(root: &Path, path: &Path) -> Result<(), crate::tool::ToolError> {
    confined::locate_name(path, &[root.to_path_buf()])?.remove()
}

/// The permission bits a rewind writes for a recorded `mode`: never setuid, setgid,
/// sticky or writable by others, whatever the checkpoint file says.
fn safe_mode(mode: u32) -> u32 {
    mode & 0o775
}

/// Checks that every directory between `root` and `rel` is a real directory (or not
/// there yet), so removing or creating at `rel` stays inside the project.
fn plain_parents(root: &Path, rel: &str) -> Result<(), String> {
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(format!(
                    "{} is a symlink now, which a rewind never follows",
                    at.display()
                ));
            }
            Ok(meta) if !meta.is_dir() => {
                return Err(format!("{} is not a directory now", at.display()));
            }
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}
