//! Markdown files with YAML front matter (`SKILL.md`, `agents/<name>.md`): one reader
//! and one parser for both, so the two kinds of file never drift apart.
//!
//! The files come from the user's home and from cloned repositories, so reading is
//! bounded, refuses symlinks and special files, and every error names the problem in
//! words a user can act on.

use std::fmt;
use std::fs;
use std::io::Read;
use std::path::Path;

use serde::de::DeserializeOwned;

/// Where a definition (skill, agent) came from; a later one replaces an earlier one of
/// the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DefinitionSource {
    /// Shipped with the program.
    BuiltIn,
    /// From the user's home (`~/.roocode`).
    User,
    /// From the project (`.roocode/`).
    Project,
}

impl fmt::Display for DefinitionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DefinitionSource::BuiltIn => "built-in",
            DefinitionSource::User => "user",
            DefinitionSource::Project => "project",
        })
    }
}

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file is there but not acceptable (not regular, too big, not UTF-8).
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads a regular file of at most `max` bytes, refusing symlinks and special files.
pub fn read_bounded(path: &Path, max: u64) -> Result<String, ReadError> {
    let meta = fs::symlink_metadata(path)?;
    if !meta.is_file() {
        return Err(ReadError::Invalid(
            "is not a regular file (symlinks are not followed)".to_string(),
        ));
    }
    if meta.len() > max {
        return Err(ReadError::Invalid(format!(
            "is {} bytes, more than the limit of {max}",
            meta.len()
        )));
    }
    let mut text = String::new();
    fs::File::open(path)?
        .take(max + 1)
        .read_to_string(&mut text)
        .map_err(|e| ReadError::Invalid(format!("is not UTF-8 text: {e}")))?;
    if text.len() as u64 > max {
        return Err(ReadError::Invalid(format!(
            "grew past the limit of {max} bytes"
        )));
    }
    Ok(text)
}

/// What [`list_dir`] lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entries {
    /// Sub-folders (one skill each), named as they are.
    Folders,
    /// Regular `.md` files (one agent type each), named without `.md`.
    MarkdownFiles,
}

/// Most directory entries looked at in one folder: a folder with millions of entries
/// must not stall every request.
const MAX_ENTRIES_LOOKED_AT: usize = 2000;

/// The entries of `dir` that define something, as (name, path), sorted by name and at
/// most `max`. Hidden entries are left out; symlinks are not followed but reported.
/// Problems go to `warnings` as lines naming the path; `what` names the entries in
/// them (`skill folders`). A folder that does not exist lists nothing, silently.
pub fn list_dir(
    dir: &Path,
    entries: Entries,
    what: &str,
    max: usize,
    warnings: &mut Vec<String>,
) -> Vec<(String, std::path::PathBuf)> {
    let read = match fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            warnings.push(format!("skipped the {what} in {}: {e}", dir.display()));
            return Vec::new();
        }
    };
    let mut found = Vec::new();
    for entry in read.flatten().take(MAX_ENTRIES_LOOKED_AT) {
        let path = entry.path();
        let Ok(file_name) = entry.file_name().into_string() else {
            warnings.push(format!("skipped {}: the name is not UTF-8", path.display()));
            continue;
        };
        let name = match entries {
            Entries::Folders => file_name,
            Entries::MarkdownFiles => match file_name.strip_suffix(".md") {
                Some(stem) => stem.to_string(),
                None => continue,
            },
        };
        if name.starts_with('.') {
            continue;
        }
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => warnings.push(format!(
                "skipped {}: a symlink; put the {} itself there",
                path.display(),
                match entries {
                    Entries::Folders => "folder",
                    Entries::MarkdownFiles => "file",
                }
            )),
            Ok(meta) if entries == Entries::Folders && meta.is_dir() => found.push((name, path)),
            Ok(meta) if entries == Entries::MarkdownFiles && meta.is_file() => {
                found.push((name, path));
            }
            _ => {}
        }
    }
    found.sort();
    if found.len() > max {
        warnings.push(format!(
            "{} holds {} {what}; only the first {max} (by name) are loaded",
            dir.display(),
            found.len()
        ));
        found.truncate(max);
    }
    found
}

/// Splits a file into its front matter, deserialized as `T`, and its body (trimmed).
/// Accepts a byte-order mark and CRLF line ends. The error is a fragment to put after
/// the file's name.
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<(T, String), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.replace("\r\n", "\n");
    let rest = text
        .strip_prefix("---\n")
        .ok_or("does not start with YAML front matter (a `---` line, the fields, a `---` line)")?;
    let (yaml, body) = match rest.find("\n---\n") {
        Some(i) => (&rest[..i], &rest[i + 5..]),
        None => match rest.strip_suffix("\n---") {
            Some(yaml) => (yaml, ""),
            None => return Err("the front matter has no closing `---` line".to_string()),
        },
    };
    let front: T = serde_yaml_ng::from_str(yaml).map_err(|e| format!("bad front matter: {e}"))?;
    Ok((front, body.trim().to_string()))
}

/// Collapses runs of whitespace (a folded YAML description) into single spaces.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Front {
        name: String,
    }

    #[test]
    fn splits_with_bom_and_crlf_and_reports_each_problem() {
        let (front, body) =
            parse::<Front>("\u{feff}---\r\nname: x\r\n---\r\n\r\nBody.\r\n").unwrap();
        assert_eq!((front.name.as_str(), body.as_str()), ("x", "Body."));
        let (_, body) = parse::<Front>("---\nname: x\n---").unwrap();
        assert_eq!(body, "");
        for (text, want) in [
            ("name: x", "does not start with YAML front matter"),
            ("---\nname: x\n", "no closing"),
            ("---\nname: [x\n---\nb", "bad front matter"),
            ("---\nname: x\nrogue: 1\n---\nb", "unknown field"),
        ] {
            let err = parse::<Front>(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn reading_is_bounded_and_refuses_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.md");
        fs::write(&file, "12345").unwrap();
        assert_eq!(read_bounded(&file, 5).unwrap(), "12345");
        let err = read_bounded(&file, 4).unwrap_err().to_string();
        assert!(err.contains("more than the limit of 4"), "{err}");
        let link = dir.path().join("b.md");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let err = read_bounded(&link, 5).unwrap_err().to_string();
        assert!(err.contains("symlinks are not followed"), "{err}");
        fs::write(&file, [0xff, 0xfe]).unwrap();
        let err = read_bounded(&file, 5).unwrap_err().to_string();
        assert!(err.contains("not UTF-8"), "{err}");
    }
}
