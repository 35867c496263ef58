//! Looking at the project's files for a checkpoint: one path (before a file tool writes
//! it) or the whole tree (before a shell command in a git project, and to find what it
//! changed).
//!
//! The tree walk honours the project's `.gitignore` files (ignored directories such as
//! `target/` are never entered, which keeps a walk of a big project in milliseconds),
//! skips every `.git` entry (the user's repository, and hostile in a hostile tree),
//! `.roocode/worktrees` and every nested repository (a teammate's clone, a submodule),
//! never crosses into another file system or follows a symlink, and stops at a bounded
//! number of files and a bounded time. Each file is known by its stamp (size, times,
//! device, inode, mode); only a file whose stamp changed is read again.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::CheckpointError;
use super::objects::Objects;
use super::record::Entry;
use crate::tool::ToolError;
use crate::tools::confined;

/// What identifies a file's version without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    size: u64,
    dev: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
    mode: u32,
}

impl Stamp {
    pub(super) fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            size: meta.size(),
            dev: meta.dev(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            mode: meta.mode(),
        }
    }

    /// When the file (content or metadata) last changed: its change time (`ctime`).
    pub(super) fn changed(&self) -> Option<SystemTime> {
        time(self.ctime)
    }
}

/// What the walks know of one file: its stamp when last walked, what it held then
/// (`None`: not read since it changed), and the last walk that found it.
#[derive(Debug)]
pub(super) struct Known {
    pub(super) stamp: Stamp,
    pub(super) entry: Option<Entry>,
    seen: u64,
}

impl Known {
    /// A file found by walk `generation`, not read yet.
    pub(super) fn new(stamp: Stamp, generation: u64) -> Self {
        Self {
            stamp,
            entry: None,
            seen: generation,
        }
    }

    /// Whether walk `generation` found it.
    pub(super) fn seen_by(&self, generation: u64) -> bool {
        self.seen == generation
    }
}

/// What a walk found, against what the walks before knew.
#[derive(Debug)]
pub(super) struct Found {
    /// The known files, each one this walk found marked with its generation (stamps and
    /// contents as they were: the caller compares).
    pub(super) known: HashMap<String, Known>,
    /// The files found whose stamp is not the known one, or that were not known, with the
    /// stamp found.
    pub(super) differ: Vec<(String, Stamp)>,
    /// How many known files were found: fewer than were known, and some are gone.
    pub(super) found_known: usize,
    /// Bytes of the files found that are within the size kept.
    pub(super) keepable_bytes: u64,
}

/// `(seconds, nanoseconds)` since the epoch as a time (`None` before the epoch).
fn time((secs, nsecs): (i64, i64)) -> Option<SystemTime> {
    let secs = u64::try_from(secs).ok()?;
    let nsecs = u32::try_from(nsecs).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(secs, nsecs))
}

/// When the file at `path`, found with `stamp`, came to be where it is: the later of its
/// birth time (where the file system keeps one) and its change time. A rename or a hard
/// link keeps the birth time but sets the change time, so a person's file moved or linked
/// into the project is as late as the move, whenever it was made.
pub(super) fn born(path: &Path, stamp: &Stamp) -> Option<SystemTime> {
    let birth = std::fs::symlink_metadata(path)
        .ok()
        .filter(|meta| Stamp::of(meta) == *stamp)
        .and_then(|meta| meta.created().ok());
    match (birth, stamp.changed()) {
        (Some(birth), Some(changed)) => Some(birth.max(changed)),
        (birth, changed) => birth.or(changed),
    }
}

/// The stamp of `path` without following a symlink; `None` if nothing is there.
pub(super) fn stamp_of(path: &Path) -> Option<Stamp> {
    std::fs::symlink_metadata(path).ok().map(|m| Stamp::of(&m))
}

/// What `path` holds now, its content kept in `objects`.
pub(super) fn capture(
    path: &Path,
    objects: &Objects,
    max_bytes: u64,
) -> Result<Entry, CheckpointError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Entry::Missing),
        Err(e) => {
            return Ok(Entry::Unrecorded {
                why: format!("could not be inspected: {e}"),
            });
        }
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Ok(match std::fs::read_link(path) {
            Ok(target) => Entry::Symlink { target },
            Err(e) => Entry::Unrecorded {
                why: format!("its link could not be read: {e}"),
            },
        });
    }
    if kind.is_dir() {
        return Ok(Entry::Unrecorded {
            why: "it is a directory".to_string(),
        });
    }
    if !kind.is_file() {
        return Ok(Entry::Unrecorded {
            why: "it is not a regular file (a FIFO, socket or device)".to_string(),
        });
    }
    objects.keep_file(path, meta.mode(), max_bytes)
}

/// The relative form of `path` under `root`, if it lies there and is a plain relative
/// path (no `..`, no `.git` component) in UTF-8.
pub(super) fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    checked_relative(rel)
}

/// `rel` as a key if it is plain: only normal components, none of them `.git`, UTF-8,
/// and not under `.roocode/worktrees`.
pub(super) fn checked_relative(rel: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for component in rel.components() {
        match component {
            // Case-insensitive: on a case-insensitive file system `.GIT` is `.git`.
            Component::Normal(part) if !part.eq_ignore_ascii_case(".git") => {
                parts.push(part.to_str()?)
            }
            _ => return None,
        }
    }
    let rel = parts.join("/");
    (!parts.is_empty() && !excluded(&rel)).then_some(rel)
}

/// Why a tree walk stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WalkStop {
    /// The tree holds more files than the limit.
    Files(usize),
    /// The walk took longer than the limit.
    Time,
    /// The files to keep add up to more than the store may hold.
    Bytes(u64),
}

/// Walks the tree at `root` against `known` (what the walks before found), on a thread of
/// its own, waited for at most `max_time`: a walk that is not over by then (a huge tree,
/// a slow or hung file system) is given up, and the thread, told to stop, is left to end
/// by itself (with `known`). A file whose stamp is the known one costs a lookup, nothing
/// is allocated for it. `generation` marks the files found; `skip` (relative to `root`)
/// is left out: the checkpoint store itself, when it lies inside the project.
/// `max_file_bytes`: the size above which a file is not kept (counted apart).
pub(super) fn walk(
    root: &Path,
    known: HashMap<String, Known>,
    generation: u64,
    limits: (usize, u64, Duration),
    skip: Option<String>,
) -> Result<Found, WalkStop> {
    let (max_files, max_file_bytes, max_time) = limits;
    let deadline = Instant::now() + max_time;
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    let root = root.to_path_buf();
    let walker = move || {
        let mut walk = Walk {
            found: Found {
                known,
                differ: Vec::new(),
                found_known: 0,
                keepable_bytes: 0,
            },
            generation,
            files: 0,
            max_files,
            max_file_bytes,
            deadline,
            skip,
            dev: 0,
            seen: 0,
            warned: false,
        };
        let _ = sender.send(walk.run(&root).map(|()| walk.found));
    };
    if std::thread::Builder::new()
        .name("checkpoint-walk".into())
        .spawn(walker)
        .is_err()
    {
        return Err(WalkStop::Time);
    }
    let wait = deadline.saturating_duration_since(Instant::now()) + Duration::from_millis(50);
    receiver.recv_timeout(wait).unwrap_or(Err(WalkStop::Time))
}

/// The files of the tree at `root` and their stamps (a walk against nothing known).
#[cfg(test)]
pub(super) fn walk_files(
    root: &Path,
    max_files: usize,
    max_time: Duration,
) -> Result<HashMap<String, Stamp>, WalkStop> {
    let found = walk(
        root,
        HashMap::new(),
        1,
        (max_files, u64::MAX, max_time),
        None,
    )?;
    Ok(found.differ.into_iter().collect())
}

/// One walk of a tree: read each directory through its handle (`getdents`, the entry's
/// type from it) and `lstat` each file relative to that handle (`statx`), so no path is
/// resolved from the root per file. Honours the `.gitignore` files and
/// `.git/info/exclude`; never enters `.git`, `.roocode/worktrees`, a nested repository
/// (a directory holding `.git`: a teammate's clone, a submodule), a directory on another
/// file system (a mount), or a name that is not UTF-8; never follows a symlink.
struct Walk {
    found: Found,
    generation: u64,
    /// Files found so far.
    files: usize,
    max_files: usize,
    max_file_bytes: u64,
    deadline: Instant,
    skip: Option<String>,
    /// The root's file system.
    dev: u64,
    /// Entries seen since the clock was last read.
    seen: u32,
    /// An ignore file was skipped and said.
    warned: bool,
}

/// The most of one `.gitignore` (or `.git/info/exclude`) a walk reads: 1 MiB.
const MAX_IGNORE_BYTES: u64 = 1 << 20;

/// A directory's `.gitignore` rules (or `.git/info/exclude`'s), with the depth of the
/// directory (components of its relative path) they apply under.
struct Rules {
    depth: usize,
    matcher: Gitignore,
}

impl Walk {
    fn run(&mut self, root: &Path) -> Result<(), WalkStop> {
        let Ok(meta) = std::fs::symlink_metadata(root) else {
            return Ok(());
        };
        self.dev = meta.dev();
        let mut rules: Vec<Rules> = Vec::new();
        let mut exclude = GitignoreBuilder::new(root);
        self.add_ignore_file(&mut exclude, &root.join(".git/info/exclude"));
        if let Ok(matcher) = exclude.build()
            && !matcher.is_empty()
        {
            rules.push(Rules { depth: 0, matcher });
        }
        // Directories still to read: (relative path, depth).
        let mut pending: Vec<(String, usize)> = vec![(String::new(), 0)];
        let mut path = root.to_path_buf();
        while let Some((dir, depth)) = pending.pop() {
            // What is left of the rules of directories read before: those of this
            // directory's parents (the walk is depth first).
            if depth > 0 {
                rules.retain(|r| r.depth < depth);
            }
            path.clear();
            path.push(root);
            if !dir.is_empty() {
                path.push(&dir);
            }
            self.directory(&path, &dir, depth, &mut rules, &mut pending)?;
        }
        Ok(())
    }

    /// Reads the directory at `path` (`dir` relative to the root, `depth` components):
    /// stamps its files, queues its subdirectories.
    fn directory(
        &mut self,
        path: &Path,
        dir: &str,
        depth: usize,
        rules: &mut Vec<Rules>,
        pending: &mut Vec<(String, usize)>,
    ) -> Result<(), WalkStop> {
        let Ok(reader) = std::fs::read_dir(path) else {
            return Ok(());
        };
        let entries: Vec<(std::fs::DirEntry, std::ffi::OsString)> = reader
            .flatten()
            .map(|entry| {
                let name = entry.file_name();
                (entry, name)
            })
            .collect();
        let has = |wanted: &str| {
            entries
                .iter()
                .any(|(_, name)| name.eq_ignore_ascii_case(wanted))
        };
        if depth > 0 && has(".git") {
            return Ok(());
        }
        if has(".gitignore") {
            let mut builder = GitignoreBuilder::new(path);
            self.add_ignore_file(&mut builder, &path.join(".gitignore"));
            if let Ok(matcher) = builder.build()
                && !matcher.is_empty()
            {
                rules.push(Rules { depth, matcher });
            }
        }
        let mut rel = String::with_capacity(dir.len() + 32);
        for (entry, name) in &entries {
            self.tick()?;
            let Some(name) = name.to_str() else { continue };
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            rel.clear();
            if !dir.is_empty() {
                rel.push_str(dir);
                rel.push('/');
            }
            rel.push_str(name);
            // `.git` anywhere, and `.roocode/worktrees` (see [`excluded`]; the parents of
            // an entry were checked when they were entered).
            let skipped = name.eq_ignore_ascii_case(".git")
                || (kind.is_dir() && rel.eq_ignore_ascii_case(WORKTREES));
            if skipped || ignored(rules, &rel, depth, kind.is_dir()) {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if kind.is_dir() {
                if meta.dev() == self.dev && self.skip.as_deref() != Some(rel.as_str()) {
                    pending.push((rel.clone(), depth + 1));
                }
                continue;
            }
            if self.files >= self.max_files {
                return Err(WalkStop::Files(self.max_files));
            }
            self.files += 1;
            let stamp = Stamp::of(&meta);
            if stamp.size <= self.max_file_bytes {
                self.found.keepable_bytes = self.found.keepable_bytes.saturating_add(stamp.size);
            }
            match self.found.known.get_mut(rel.as_str()) {
                Some(known) => {
                    known.seen = self.generation;
                    self.found.found_known += 1;
                    if known.stamp != stamp {
                        self.found.differ.push((rel.clone(), stamp));
                    }
                }
                None => self.found.differ.push((rel.clone(), stamp)),
            }
        }
        Ok(())
    }

    /// Adds the rules of the ignore file at `path` to `builder`. The file is another
    /// program's: it is opened without following a symlink or blocking (a FIFO), read
    /// only if it is a regular file, and only up to [`MAX_IGNORE_BYTES`]; one that is not
    /// is skipped (its rules not applied) and said once per walk.
    fn add_ignore_file(&mut self, builder: &mut GitignoreBuilder, path: &Path) {
        let mut content = Vec::new();
        let read = confined::open_regular(path)
            .map_err(|e| match e {
                ToolError::NotFound { .. } => None,
                e => Some(e.to_string()),
            })
            .and_then(|file| {
                file.take(MAX_IGNORE_BYTES + 1)
                    .read_to_end(&mut content)
                    .map_err(|e| Some(format!("{}: {e}", path.display())))
            });
        let why = match read {
            Err(None) => return,
            Err(Some(why)) => why,
            Ok(_) if content.len() as u64 > MAX_IGNORE_BYTES => {
                format!("{} is larger than {MAX_IGNORE_BYTES} bytes", path.display())
            }
            Ok(_) => {
                for line in String::from_utf8_lossy(&content).lines() {
                    let _ = builder.add_line(Some(path.to_path_buf()), line);
                }
                return;
            }
        };
        if !self.warned {
            self.warned = true;
            tracing::warn!("checkpoints: an ignore file was skipped, its rules not applied: {why}");
        }
    }

    /// Reads the clock every 64 entries: past the deadline, the walk stops.
    fn tick(&mut self) -> Result<(), WalkStop> {
        self.seen += 1;
        if self.seen >= 64 {
            self.seen = 0;
            if Instant::now() >= self.deadline {
                return Err(WalkStop::Time);
            }
        }
        Ok(())
    }
}

/// Whether `rel` (an entry of a directory `depth` components deep) is ignored by the
/// nearest `.gitignore` rule that names it.
fn ignored(rules: &[Rules], rel: &str, depth: usize, is_dir: bool) -> bool {
    for rule in rules.iter().rev() {
        // The path relative to the directory whose rules these are.
        let tail = rel
            .splitn(rule.depth.min(depth) + 1, '/')
            .last()
            .unwrap_or(rel);
        match rule.matcher.matched(Path::new(tail), is_dir) {
            Match::None => {}
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
        }
    }
    false
}

/// Whether `rel` lies where checkpoints never look: the user's repository (`.git`
/// anywhere) or teammates' clones (`.roocode/worktrees`).
/// Names compare without regard to ASCII case: on a case-insensitive file system (macOS)
/// `.GIT` and `.RooCode/Worktrees` are the same entries.
pub(super) fn excluded(rel: &str) -> bool {
    let under_worktrees = rel
        .get(..WORKTREES.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(WORKTREES))
        && matches!(rel.as_bytes().get(WORKTREES.len()), None | Some(b'/'));
    under_worktrees || rel.split('/').any(|part| part.eq_ignore_ascii_case(".git"))
}

/// Where teammates' clones live inside a project.
const WORKTREES: &str = ".roocode/worktrees";

/// `root` joined with the key `rel`.
pub(super) fn absolute(root: &Path, rel: &str) -> PathBuf {
    root.join(rel)
}
