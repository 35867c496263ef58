//! What the lead's git may read from a teammate's clone (docs/WORKTREES.md "What the
//! lead's git reads from a clone").
//!
//! The lead fetches a teammate's branch with its own rights, outside any sandbox: git's
//! `upload-pack` then reads the clone's git directory, which the teammate wrote. Before
//! every fetch the whole git directory is checked ([`check_clone_for_fetch`]) without
//! following anything: `HEAD` is a regular file reading `ref: refs/…` or an object name;
//! every entry is a real directory or a regular file (a symlink would make git read a
//! file outside the clone, a FIFO or device would block it); the small files git reads
//! whole are at most 1 MiB; nothing redirects git elsewhere (`commondir`, `gitdir`,
//! `info/grafts`, `objects/info/http-alternates`); the alternates name the lead's object
//! directory only, as `git clone --shared` wrote them; and the config, read here without
//! blocking and given to `git config` on its stdin, has no `include`/`includeIf` and no
//! promisor remote ([`LeadRepo::check_clone`]). The fetch names the clone's `.git` and
//! runs `upload-pack --strict` with `core.attributesFile=/dev/null` and no lazy fetch
//! ([`LOCAL_UPLOAD_PACK`]; the fetching git's own `-c`s, [`LOCAL_FETCH_CONFIG`], allow
//! the `file` transport only and do not reach upload-pack), for at most
//! [`SYNC_FETCH_TIMEOUT`] before a turn or [`LOCAL_FETCH_TIMEOUT`] for TeamMerge and
//! cleanup; what it printed never reaches the model ([`fetch_failure`]).
//!
//! **Between the check and the fetch.** The teammate's commands keep running, and it
//! owns its clone: after the walk it can put back anything the check refuses (a link,
//! a FIFO, alternates or grafts naming another repository, a `.git` exchanged with
//! another directory). Fetching through a descriptor of `.git` opened at check time
//! would not help: the teammate can change every entry inside that directory as well.
//! What such a swap can still do, with the lead's rights: make `upload-pack` read a
//! file or repository the lead's user can read. File content shows only in git's
//! messages, which never reach the model; a FIFO or a slow read costs one fetch its
//! time limit, and the turn hook tries a clone again only once its branch changed.
//! Objects come in only from git object stores the clone points at (alternates,
//! grafts, a linked ref or `.git`), and only those reachable from the fetched branch.
//! A teammate's commands can read everything but the sandbox's hidden paths
//! (docs/PERMISSIONS.md: the secrets list, `sandbox.deny_read`, `$ROO_HOME`'s team
//! state), so what a swap adds is a repository inside a hidden path — e.g.
//! one under a `deny_read` directory — whose objects the lead's `upload-pack` can still
//! read and import into the lead's repository (where the teammate then reads them
//! through its alternates). That, and a stall bounded by the limit, is the residual.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::LeadRepo;

/// How long a fetch from a teammate's clone on another host may take (ssh, network).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a fetch from a teammate's clone on this machine may take when the lead asked
/// for it (TeamMerge, cleanup): an honest branch with large files must fit. Nothing can
/// block it (the check refuses FIFOs and devices), so this bounds what a clone changed
/// between the check and the fetch could cost.
pub const LOCAL_FETCH_TIMEOUT: Duration = Duration::from_secs(60);

/// The same before each lead turn ([`BranchSync`](super::BranchSync), which fails
/// quietly and tries again only once the clone's branch changed): short, as the turn
/// waits for it.
pub const SYNC_FETCH_TIMEOUT: Duration = Duration::from_secs(15);

/// How long `git config` may take to list the keys of a clone's config (given on its
/// stdin, at most 1 MiB): far more than it needs.
const CONFIG_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Most entries under a clone's `.git` the check walks.
const MAX_CLONE_ENTRIES: usize = 200_000;

/// Largest small file git reads whole from a clone's git directory.
const MAX_GIT_FILE: u64 = 1 << 20;

/// Files a clone the runtime made never has, each of which makes git read another
/// repository or file, or rewrite history: refused when present.
const REDIRECTS: &[&str] = &[
    "commondir",
    "gitdir",
    "info/grafts",
    "objects/info/http-alternates",
];

/// Files git reads whole: at most [`MAX_GIT_FILE`] each.
const SMALL_FILES: &[&str] = &[
    "HEAD",
    "config",
    "config.worktree",
    "packed-refs",
    "shallow",
    "objects/info/alternates",
];

/// `-c` settings of the lead's `git fetch` from a clone on this machine: no transport
/// but `file`, so nothing can make the fetching git connect anywhere. They reach the
/// fetching git only: git removes `GIT_CONFIG_PARAMETERS` from the environment of the
/// `upload-pack` it starts, whose settings are in [`LOCAL_UPLOAD_PACK`].
pub(crate) const LOCAL_FETCH_CONFIG: &[&str] = &[
    "-c",
    "protocol.allow=never",
    "-c",
    "protocol.file.allow=always",
];

/// The `upload-pack` the lead's fetch runs in a clone on this machine (`--upload-pack`,
/// run by the shell with the clone's `.git` as its argument). `--strict`: the argument
/// is the repository, or the fetch fails — git never tries `<dir>/.git` and then `<dir>`,
/// so a clone whose `.git` lost its `HEAD` cannot make git serve a repository the
/// teammate built in its work tree. `core.attributesFile=/dev/null` overrides one the
/// clone's config names (pack-objects would read it; a FIFO would block it); the
/// clone's own `info/attributes` is still read, which is why the check's walk refuses
/// a link or special file there. No lazy fetch from a promisor remote.
pub(crate) const LOCAL_UPLOAD_PACK: &str =
    "GIT_NO_LAZY_FETCH=1 git -c core.attributesFile=/dev/null upload-pack --strict";

/// The environment of every fetch from a clone: no lazy fetch from a promisor remote
/// the clone's config names.
pub(crate) const FETCH_ENV: &[(&str, &str)] = &[("GIT_NO_LAZY_FETCH", "1")];

/// `rel` inside the clone, as shown in a message: a teammate chose the name, so it is
/// quoted with escapes and cut short.
fn shown(git_dir: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(git_dir).unwrap_or(path);
    let text = format!("{:?}", Path::new(".git").join(rel));
    roo_term::clip_with(&text, 120, "…\"")
}

/// Why the clone at `clone` is not safe to fetch from with the lead's rights, if it is
/// not (see the module documentation); `lead_objects` is the lead's object directory.
/// Reads nothing but directory listings, `lstat`s and the alternates file, never
/// following a link; the reason names the offending path and quotes no file content.
pub fn check_clone_for_fetch(clone: &Path, lead_objects: &Path) -> std::result::Result<(), String> {
    let git = clone.join(".git");
    match std::fs::symlink_metadata(&git) {
        Ok(meta) if meta.is_dir() => {}
        _ => return Err("its .git is not a real directory".to_string()),
    }
    for name in REDIRECTS {
        let path = git.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            return Err(format!(
                "{} exists, which would make git read outside the clone or rewrite its \
                 history; remove it",
                shown(&git, &path)
            ));
        }
    }
    check_head(&git)?;
    for name in SMALL_FILES {
        let path = git.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() && meta.len() <= MAX_GIT_FILE => {}
            Ok(_) => {
                return Err(format!(
                    "{} is not a regular file of at most 1 MiB",
                    shown(&git, &path)
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {}", shown(&git, &path), e.kind())),
        }
    }
    // Everything under .git: a clone a teammate filled with entries cannot make this walk,
    // run before each lead turn, take long: past the cap it is refused.
    let mut seen = 0usize;
    let mut stack = vec![git.clone()];
    while let Some(dir) = stack.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("{}: {}", shown(&git, &dir), e.kind()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {}", shown(&git, &dir), e.kind()))?;
            seen += 1;
            if seen > MAX_CLONE_ENTRIES {
                return Err(format!(
                    "its .git holds more than {MAX_CLONE_ENTRIES} entries; pack them (git gc) \
                     in the clone"
                ));
            }
            let kind = entry
                .file_type()
                .map_err(|e| format!("{}: {}", shown(&git, &entry.path()), e.kind()))?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if !kind.is_file() {
                return Err(format!(
                    "{} is a symlink or special file (FIFO, socket, device), which git would \
                     follow out of the clone or block on; remove it",
                    shown(&git, &entry.path())
                ));
            }
        }
    }
    let objects = git.join("objects");
    let alternates = objects.join("info").join("alternates");
    // Read after the walk found it a regular file; opened without following a link.
    let text = read_small(&alternates).map_err(|e| format!("{}: {e}", shown(&git, &alternates)))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let ours = match lines.as_slice() {
        [] => true,
        // Resolved through no link: a link (in the clone, or in /tmp) could be retargeted
        // between this check and the fetch.
        [one] => {
            let written = objects.join(one.trim());
            !through_a_link(&written) && super::same_path(&written, lead_objects)
        }
        _ => false,
    };
    if !ours {
        return Err(format!(
            "{} names other object stores than the lead's {}, where the clone was made to \
             read; put back the single line `{}`",
            shown(&git, &alternates),
            lead_objects.display(),
            lead_objects.display()
        ));
    }
    Ok(())
}

/// The clone's `HEAD` exists, is a regular file and reads as a git `HEAD` (`ref: refs/…`
/// or an object name): without one, `upload-pack` given the clone's top directory would
/// take that directory (the teammate's work tree, outside this check) for the repository.
/// The fetch names `.git` itself and runs `upload-pack --strict`, so git never falls back
/// to the work tree; this makes the refusal say why.
fn check_head(git: &Path) -> std::result::Result<(), String> {
    let head = git.join("HEAD");
    let bad = || {
        format!(
            "{} is missing or is not a regular file reading `ref: refs/…` or an object name; \
             check out the teammate's branch there again",
            shown(git, &head)
        )
    };
    match std::fs::symlink_metadata(&head) {
        Ok(meta) if meta.is_file() && meta.len() <= MAX_GIT_FILE => {}
        _ => return Err(bad()),
    }
    let text = read_small(&head).map_err(|_| bad())?;
    let line = text.strip_suffix('\n').unwrap_or(&text);
    let is_ref = line
        .strip_prefix("ref: refs/")
        .is_some_and(|r| !r.is_empty() && !r.contains('\n'));
    let is_hash = matches!(line.len(), 40 | 64) && line.bytes().all(|b| b.is_ascii_hexdigit());
    if is_ref || is_hash {
        Ok(())
    } else {
        Err(bad())
    }
}

/// Whether any leading part of `path` is a symbolic link (or cannot be inspected).
fn through_a_link(path: &Path) -> bool {
    let mut prefix = PathBuf::new();
    for component in path.components() {
        prefix.push(component);
        if matches!(component, std::path::Component::Normal(_))
            && std::fs::symlink_metadata(&prefix).is_ok_and(|m| m.file_type().is_symlink())
        {
            return true;
        }
    }
    false
}

/// The regular file `path` (never through a link, never blocking), at most
/// [`MAX_GIT_FILE`] bytes, as text; empty when missing.
fn read_small(path: &Path) -> std::result::Result<String, String> {
    read_small_bytes(path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

/// [`read_small`]'s bytes.
pub(super) fn read_small_bytes(path: &Path) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}", e.kind())),
    };
    match file.metadata() {
        Ok(meta) if meta.is_file() => {}
        _ => return Err("not a regular file".to_string()),
    }
    let mut bytes = Vec::new();
    file.take(MAX_GIT_FILE)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}", e.kind()))?;
    Ok(bytes)
}

impl LeadRepo {
    /// [`check_clone_for_fetch`], then the clone's config files: no `include.*` or
    /// `includeIf.*` (git would read the file it names, with the lead's rights) and no
    /// promisor remote (`extensions.partialClone`, `remote.*.promisor`: a lazy fetch to a
    /// URL of the teammate's choosing). Each file is read here ([`read_small`]: never
    /// through a link, never blocking on a FIFO swapped in after the walk, at most 1 MiB)
    /// and given to `git config --file -` on its stdin (includes not followed; git reads
    /// `--file -` from stdin since 2.2, and an older one fails the check, never passes
    /// it), which has [`CONFIG_READ_TIMEOUT`].
    pub fn check_clone(&self, clone: &Path) -> std::result::Result<(), String> {
        check_clone_for_fetch(clone, &self.objects_dir())?;
        let git = clone.join(".git");
        for name in ["config", "config.worktree"] {
            let path = git.join(name);
            if std::fs::symlink_metadata(&path).is_err() {
                continue;
            }
            let bytes =
                read_small_bytes(&path).map_err(|e| format!("{}: {e}", shown(&git, &path)))?;
            let out = self
                .git
                .run_limited_input(
                    &self.root,
                    &[
                        "config",
                        "--file",
                        "-",
                        "--no-includes",
                        "--null",
                        "--name-only",
                        "--list",
                    ],
                    bytes,
                    CONFIG_READ_TIMEOUT,
                )
                .map_err(|e| format!("{}: {e}", shown(&git, &path)))?;
            if !out.success {
                return Err(format!(
                    "git cannot read {} as a config file; fix or remove it",
                    shown(&git, &path)
                ));
            }
            let refused = super::git::nul_fields(&out.stdout).find(|key| {
                let key = key.to_ascii_lowercase();
                key.starts_with("include.")
                    || key.starts_with("includeif.")
                    || key == "extensions.partialclone"
                    || (key.starts_with("remote.") && key.ends_with(".promisor"))
            });
            if let Some(key) = refused {
                let what = if key.to_ascii_lowercase().starts_with("include") {
                    "a config include (include.path or includeIf), which would make git read \
                     another file"
                } else {
                    "a promisor remote, which would make git fetch from a URL the clone names"
                };
                return Err(format!(
                    "{} has {what}; remove it from the clone's config",
                    shown(&git, &path)
                ));
            }
        }
        Ok(())
    }

    /// The lead's object directory (what a clone's alternates must name).
    pub(crate) fn objects_dir(&self) -> PathBuf {
        match &self.git_dir {
            Some(dir) => dir.join("objects"),
            None => self.root.join(".git").join("objects"),
        }
    }
}

/// What the model is told of a failed fetch: git's own message is never passed on —
/// it may quote a file the clone pointed git at — only what it means, recognised from
/// it, or the runtime's own words (a timeout).
pub(crate) fn fetch_failure(stderr: &str) -> String {
    if stderr.contains("non-fast-forward") || stderr.contains("[rejected]") {
        return "the teammate's branch is not a fast-forward of the lead's (git refused it)"
            .to_string();
    }
    if let Some(line) = stderr
        .lines()
        .find(|l| l.starts_with("git took longer than") || l.starts_with("ssh took longer than"))
    {
        return line.to_string();
    }
    if stderr.contains("couldn't find remote ref") {
        return "the clone has no such branch".to_string();
    }
    "git did not complete the fetch (its message is not shown, as it could quote a file \
     the clone points at; run the same `git fetch` in the lead's repository to see it)"
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failed_fetch_tells_the_model_what_happened_without_gits_words() {
        let leak = "error: bad graft data: https://user:ghp_SECRET@github.com\n";
        for (stderr, said) in [
            (
                format!("{leak} ! [rejected]        roo/t/a -> roo/t/a  (non-fast-forward)"),
                "not a fast-forward",
            ),
            (
                format!("{leak}fatal: couldn't find remote ref refs/heads/roo/t/a"),
                "no such branch",
            ),
            (
                "git took longer than 15 s and was ended".to_string(),
                "took longer",
            ),
            (format!("{leak}fatal: the remote end hung up"), "not shown"),
        ] {
            let told = super::fetch_failure(&stderr);
            assert!(told.contains(said), "{told}");
            assert!(
                !told.contains("SECRET") && !told.contains("github"),
                "{told}"
            );
        }
    }
}
