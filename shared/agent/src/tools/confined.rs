//! Opening files for the file tools: inside the allowed roots, through no
//! symlink swapped in after the permission check, never blocking on a FIFO or
//! a device.
//!
//! The permission layer judges a path by where it leads when it checks it
//! (layer 2, `permissions::confinement`). A symlink changed between that check and
//! the open would redirect the tool, so the tools do not open the path by name.
//! [`locate`] resolves it again, checks the result is under one of the allowed
//! roots, then walks to its parent directory one component at a time with
//! `openat(…, O_DIRECTORY | O_NOFOLLOW)` from `/`: every directory on the way is
//! a real directory at the moment it is opened, so the directory handle it
//! returns really lies inside the root. The file itself is then opened (or
//! created, or renamed into place) relative to that handle with `O_NOFOLLOW`.
//! A symlink that appears mid-way makes the call fail ("changed while being
//! opened"), never escape.
//!
//! Reads open with `O_NONBLOCK` and check the opened handle with `fstat`: a
//! FIFO, socket or device is refused before a single byte is read, without a
//! stat-then-open race.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fchmod, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};

use crate::permissions::confinement::{self, ResolveError};
use crate::tool::ToolError;

/// Whole attempts (resolve, walk, open) before a path that keeps changing is
/// given up on.
const ATTEMPTS: usize = 3;

/// A directory entry reached without following symlinks: an open handle on
/// its directory and its name in it.
#[derive(Debug)]
pub(crate) struct Located {
    dir: OwnedFd,
    name: OsString,
    /// Where the entry is, symlinks resolved (for messages).
    pub(crate) path: PathBuf,
}

/// How [`locate`] treats missing parent directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parents {
    /// They must exist.
    Existing,
    /// Missing ones are created (the root and below only).
    Create,
}

/// The roots a call may open paths under: `roots` as given (the permission
/// policy's allowed roots, already resolved), or the working directory when
/// none are given.
pub(crate) fn effective_roots(roots: &[PathBuf], cwd: &Path) -> Vec<PathBuf> {
    if roots.is_empty() {
        vec![confinement::resolve_root(cwd)]
    } else {
        roots.to_vec()
    }
}

/// The directory (or file) a search starts from: `path` resolved, checked to
/// be one of `roots` or below one, so the walk starts from a path with no
/// symlink in it rather than one a swapped link could redirect.
pub(crate) fn search_root(path: &Path, roots: &[PathBuf]) -> Result<PathBuf, ToolError> {
    let resolved = resolve(path)?;
    if roots
        .iter()
        .any(|root| confinement::is_within(&resolved, root))
    {
        Ok(resolved)
    } else {
        Err(ToolError::Outside {
            path: path.to_path_buf(),
            resolved,
        })
    }
}

/// Where `path` leads, as layer 2 judges it; a symlink loop is an error.
fn resolve(path: &Path) -> Result<PathBuf, ToolError> {
    confinement::resolve(path).map_err(|ResolveError::TooManySymlinks| ToolError::Io {
        action: "resolve",
        path: path.to_path_buf(),
        source: io::Error::from_raw_os_error(Errno::ELOOP as i32),
    })
}

/// Flags of the directory handles walked through: on Linux `O_PATH`, which
/// needs only search (x) permission on the directory, like a path lookup.
#[cfg(target_os = "linux")]
const DIR_ACCESS: OFlag = OFlag::O_PATH;
#[cfg(not(target_os = "linux"))]
const DIR_ACCESS: OFlag = OFlag::O_RDONLY;

/// Resolves `path` (absolute), checks that it lies strictly below one of
/// `roots`, and opens its parent directory without following symlinks.
pub(crate) fn locate(
    path: &Path,
    roots: &[PathBuf],
    parents: Parents,
) -> Result<Located, ToolError> {
    locate_with(path, roots, parents, Last::Follow)
}

/// Like [`locate`] with [`Parents::Existing`], but the last component is not resolved:
/// the entry is the name itself (a symlink there is the link, not where it leads), in
/// its parent directory reached without following links. What removes a name uses it.
pub(crate) fn locate_name(path: &Path, roots: &[PathBuf]) -> Result<Located, ToolError> {
    locate_with(path, roots, Parents::Existing, Last::Keep)
}

/// Whether [`locate_once`] resolves the last component of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    Follow,
    Keep,
}

fn locate_with(
    path: &Path,
    roots: &[PathBuf],
    parents: Parents,
    last_component: Last,
) -> Result<Located, ToolError> {
    let mut last = None;
    for _ in 0..ATTEMPTS {
        match locate_once(path, roots, parents, last_component) {
            Err(Attempt::Changed) => {
                last = Some(ToolError::Changed {
                    path: path.to_path_buf(),
                })
            }
            Err(Attempt::Failed(e)) => return Err(e),
            Ok(located) => return Ok(located),
        }
    }
    Err(last.unwrap_or(ToolError::Changed {
        path: path.to_path_buf(),
    }))
}

/// Why one attempt of [`locate`] stopped.
enum Attempt {
    /// A component changed under us (a symlink or file where a directory was).
    Changed,
    /// A final answer.
    Failed(ToolError),
}

fn locate_once(
    path: &Path,
    roots: &[PathBuf],
    parents: Parents,
    last_component: Last,
) -> Result<Located, Attempt> {
    let resolved = match (last_component, path.parent(), path.file_name()) {
        (Last::Keep, Some(parent), Some(name)) => {
            resolve(parent).map_err(Attempt::Failed)?.join(name)
        }
        _ => resolve(path).map_err(Attempt::Failed)?,
    };
    let Some(root) = roots
        .iter()
        .filter(|root| confinement::is_within(&resolved, root))
        .max_by_key(|root| root.as_os_str().len())
    else {
        return Err(Attempt::Failed(ToolError::Outside {
            path: path.to_path_buf(),
            resolved,
        }));
    };
    let (Some(parent), Some(name)) = (resolved.parent(), resolved.file_name()) else {
        return Err(Attempt::Failed(ToolError::IsDirectory { path: resolved }));
    };
    if resolved == *root {
        // The root itself is a directory the tools never replace or read as a file.
        return Err(Attempt::Failed(ToolError::IsDirectory { path: resolved }));
    }
    let root_depth = root.components().count();
    let mut dir = openat(
        AT_FDCWD,
        "/",
        DIR_ACCESS | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Attempt::Failed(ToolError::io("open", Path::new("/"), e.into())))?;
    let mut so_far = PathBuf::from("/");
    for (depth, component) in parent.components().enumerate() {
        let Component::Normal(part) = component else {
            continue;
        };
        so_far.push(part);
        // `depth` counts `/` as component 0, like `root_depth`: the root itself
        // (a session directory not made yet) and what is below it may be created.
        let below_root = depth + 1 >= root_depth;
        dir = match open_dir(&dir, part) {
            Ok(next) => next,
            Err(Errno::ENOENT) if below_root && parents == Parents::Create => {
                match mkdirat(&dir, part, Mode::from_bits_truncate(0o777)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => {
                        return Err(Attempt::Failed(ToolError::Io {
                            action: "create the directory",
                            path: so_far,
                            source: e.into(),
                        }));
                    }
                }
                open_dir(&dir, part).map_err(|e| classify(e, &so_far, "open the directory"))?
            }
            Err(e) => return Err(classify(e, &so_far, "open the directory")),
        };
    }
    Ok(Located {
        dir,
        name: name.to_os_string(),
        path: resolved,
    })
}

/// Opens directory `name` in `dir`, refusing a symlink.
fn open_dir(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    openat(
        dir,
        name,
        DIR_ACCESS | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// A symlink or a non-directory where a directory was resolved means the tree
/// changed since; anything else is a plain I/O error.
fn classify(e: Errno, path: &Path, action: &'static str) -> Attempt {
    match e {
        Errno::ELOOP | Errno::ENOTDIR => Attempt::Changed,
        _ => Attempt::Failed(ToolError::io(action, path, e.into())),
    }
}

/// What kind of non-regular file a mode names, for messages.
fn special_kind(mode: u32) -> Option<&'static str> {
    let kind = file_type(mode);
    match kind {
        k if k == SFlag::S_IFREG => None,
        k if k == SFlag::S_IFIFO => Some("a FIFO (named pipe)"),
        k if k == SFlag::S_IFCHR => Some("a character device"),
        k if k == SFlag::S_IFBLK => Some("a block device"),
        k if k == SFlag::S_IFSOCK => Some("a socket"),
        k if k == SFlag::S_IFLNK => Some("a symlink"),
        _ => Some("not a regular file"),
    }
}

impl Located {
    /// Opens the entry for reading: no symlink followed, without blocking, and
    /// only if the opened handle is a regular file.
    pub(crate) fn open_read(&self) -> Result<File, ToolError> {
        // Refuse a device by its name first, so it is never even opened (opening
        // some devices has effects); the check on the handle below is the one
        // that holds against a swap in between.
        if let Ok(stat) = fstatat(
            &self.dir,
            self.name.as_os_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            self.check_kind(mode_of(&stat))?;
        }
        let fd = openat(
            &self.dir,
            self.name.as_os_str(),
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::ELOOP => ToolError::Changed {
                path: self.path.clone(),
            },
            e => ToolError::io("read", &self.path, e.into()),
        })?;
        let file = File::from(fd);
        let meta = file
            .metadata()
            .map_err(|e| ToolError::io("read", &self.path, e))?;
        self.check_kind(meta.mode())?;
        Ok(file)
    }

    /// The mode bits of an existing entry (`None` if there is none); refuses a
    /// directory or a non-regular file.
    pub(crate) fn existing_mode(&self) -> Result<Option<u32>, ToolError> {
        match fstatat(
            &self.dir,
            self.name.as_os_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(stat) => {
                let mode = mode_of(&stat);
                // A symlink here appeared after the check; the rename below
                // replaces the link itself, inside this directory.
                if file_type(mode) == SFlag::S_IFLNK {
                    return Ok(None);
                }
                self.check_kind(mode)?;
                Ok(Some(mode & 0o7777))
            }
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(ToolError::io("inspect", &self.path, e.into())),
        }
    }

    /// Removes the entry (a file or a symlink, never a directory) from the directory
    /// handle: a directory on the way swapped for a symlink since [`locate`] cannot
    /// redirect it. Nothing there is not an error.
    pub(crate) fn remove(&self) -> Result<(), ToolError> {
        match unlinkat(&self.dir, self.name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(Errno::EISDIR) => Err(ToolError::IsDirectory {
                path: self.path.clone(),
            }),
            Err(e) => Err(ToolError::io("remove", &self.path, e.into())),
        }
    }

    fn check_kind(&self, mode: u32) -> Result<(), ToolError> {
        if file_type(mode) == SFlag::S_IFDIR {
            return Err(ToolError::IsDirectory {
                path: self.path.clone(),
            });
        }
        match special_kind(mode) {
            None => Ok(()),
            Some(kind) => Err(ToolError::NotRegular {
                path: self.path.clone(),
                kind,
            }),
        }
    }

    /// Replaces the entry with `content` atomically: a temporary file created in
    /// the same directory handle, flushed, then renamed over the name. `mode`
    /// (an existing file's permission bits) is kept.
    pub(crate) fn write_atomic(&self, content: &[u8], mode: Option<u32>) -> Result<(), ToolError> {
        use std::io::Write;
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);

        let temp = OsString::from(format!(
            ".{}.roo-{}-{}.tmp",
            self.name.to_string_lossy(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let write = || -> Result<(), Errno> {
            let fd = openat(
                &self.dir,
                temp.as_os_str(),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o666),
            )?;
            if let Some(mode) = mode {
                fchmod(&fd, Mode::from_bits_truncate(mode as nix::libc::mode_t))?;
            }
            let mut file = File::from(fd);
            file.write_all(content).map_err(io_errno)?;
            file.sync_data().map_err(io_errno)?;
            renameat(
                &self.dir,
                temp.as_os_str(),
                &self.dir,
                self.name.as_os_str(),
            )
        };
        write().map_err(|e| {
            let _ = unlinkat(&self.dir, temp.as_os_str(), UnlinkatFlags::NoRemoveDir);
            match e {
                Errno::EISDIR => ToolError::IsDirectory {
                    path: self.path.clone(),
                },
                e => ToolError::io("write", &self.path, e.into()),
            }
        })
    }
}

/// `st_mode` as `u32` (it is `u16` on macOS).
#[allow(clippy::unnecessary_cast)]
/// The file-type bits of a mode (`mode_t` is 16 bits on macOS, 32 on Linux).
fn file_type(mode: u32) -> SFlag {
    SFlag::from_bits_truncate(mode as nix::libc::mode_t) & SFlag::S_IFMT
}

// `st_mode` is u32 on Linux (the conversion is a no-op there) and u16 on macOS.
#[allow(clippy::useless_conversion)]
fn mode_of(stat: &nix::sys::stat::FileStat) -> u32 {
    u32::from(stat.st_mode)
}

fn io_errno(e: io::Error) -> Errno {
    e.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
}

/// Opens `path` for reading the way a search does: the last component must not
/// be a symlink, the open never blocks, and only a regular file is returned.
pub(crate) fn open_regular(path: &Path) -> Result<File, ToolError> {
    let fd = openat(
        AT_FDCWD,
        path,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| ToolError::io("read", path, e.into()))?;
    let file = File::from(fd);
    let meta = file
        .metadata()
        .map_err(|e| ToolError::io("read", path, e))?;
    if meta.is_dir() {
        return Err(ToolError::IsDirectory {
            path: path.to_path_buf(),
        });
    }
    match special_kind(meta.mode()) {
        None => Ok(file),
        Some(kind) => Err(ToolError::NotRegular {
            path: path.to_path_buf(),
            kind,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::tool::{Tool, ToolContext, ToolOutput};
    use crate::tools::{EditFile, Grep, ReadFile, WriteFile, run_blocking};
    use serde_json::json;
    use std::fs;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    fn ctx(dir: &Path, roots: Vec<PathBuf>) -> ToolContext {
        ToolContext {
            allowed_roots: roots,
            ..ToolContext::new(dir.to_path_buf(), dir.join("session"))
        }
    }

    /// Runs a tool call, failing (not hanging) if it does not finish; on a
    /// timeout `unblock` runs first so a reader stuck on a FIFO is released.
    async fn call_within(
        tool: &dyn Tool,
        input: serde_json::Value,
        ctx: &ToolContext,
        unblock: impl FnOnce(),
    ) -> ToolOutput {
        match tokio::time::timeout(Duration::from_secs(20), tool.call(input, ctx)).await {
            Ok(out) => out,
            Err(_) => {
                unblock();
                panic!("{} blocked on a non-regular file", tool.name());
            }
        }
    }

    /// Opens the write end without blocking, so a reader blocked in `open` or
    /// `read` on the FIFO gets EOF.
    fn release(fifo: &Path) {
        let _ = fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc_nonblock())
            .open(fifo);
    }

    fn libc_nonblock() -> i32 {
        OFlag::O_NONBLOCK.bits()
    }

    fn project_with_fifo() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        (dir, fifo)
    }

    #[tokio::test]
    async fn read_file_on_a_fifo_is_an_error_not_a_hang() {
        let (dir, fifo) = project_with_fifo();
        let ctx = ctx(dir.path(), Vec::new());
        let out = call_within(&ReadFile, json!({"path": "pipe"}), &ctx, || release(&fifo)).await;
        assert!(out.is_error, "{}", out.content);
        assert!(out.content.contains("FIFO"), "{}", out.content);
    }

    #[tokio::test]
    async fn edit_and_write_on_a_fifo_are_errors_not_hangs() {
        let (dir, fifo) = project_with_fifo();
        let ctx = ctx(dir.path(), Vec::new());
        let input = json!({"path": "pipe", "old_string": "a", "new_string": "b"});
        let out = call_within(&EditFile, input, &ctx, || release(&fifo)).await;
        assert!(out.is_error, "{}", out.content);
        assert!(out.content.contains("FIFO"), "{}", out.content);
        let input = json!({"path": "pipe", "content": "x"});
        let out = call_within(&WriteFile, input, &ctx, || release(&fifo)).await;
        assert!(out.is_error, "{}", out.content);
        assert!(out.content.contains("FIFO"), "{}", out.content);
        assert!(
            fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(),
            "the FIFO is left alone"
        );
    }

    #[tokio::test]
    async fn grep_skips_a_fifo_with_a_note() {
        let (dir, fifo) = project_with_fifo();
        fs::write(dir.path().join("a.txt"), "needle\n").unwrap();
        let ctx = ctx(dir.path(), Vec::new());
        let input = json!({"pattern": "needle", "path": "pipe"});
        let out = call_within(&Grep, input, &ctx, || release(&fifo)).await;
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.contains("not regular files"), "{}", out.content);
        assert!(out.content.contains("pipe"), "{}", out.content);
        let out = call_within(&Grep, json!({"pattern": "needle"}), &ctx, || release(&fifo)).await;
        assert_eq!(out.content, "a.txt");
    }

    #[tokio::test]
    async fn read_file_on_a_device_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path(), vec![PathBuf::from("/dev")]);
        for device in ["/dev/zero", "/dev/null"] {
            let out = call_within(&ReadFile, json!({"path": device}), &ctx, || {}).await;
            assert!(out.is_error, "{}", out.content);
            assert!(out.content.contains("character device"), "{}", out.content);
            // Reading /dev/zero whole would never end (and never stop allocating).
            let input = json!({"path": device, "old_string": "a", "new_string": "b"});
            let out = call_within(&EditFile, input, &ctx, || {}).await;
            assert!(out.is_error, "{}", out.content);
            assert!(out.content.contains("character device"), "{}", out.content);
        }
    }

    #[tokio::test]
    async fn blocking_work_returns_promptly_when_cancelled() {
        let cancel = CancellationToken::new();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let stuck = run_blocking("ReadFile", &cancel, move || {
            // Blocks like a read that never returns, until the test ends it.
            let _ = rx.recv();
            Ok(())
        });
        let trigger = cancel.clone();
        tokio::spawn(async move { trigger.cancel() });
        let result = tokio::time::timeout(Duration::from_secs(20), stuck).await;
        drop(tx);
        let err = result.expect("cancel did not end the call").unwrap_err();
        assert!(matches!(err, ToolError::Cancelled { .. }), "{err}");
    }

    #[test]
    fn locate_refuses_paths_outside_the_roots_and_symlinked_directories() {
        let dir = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(dir.path()).unwrap();
        let project = base.join("project");
        fs::create_dir_all(project.join("src")).unwrap();
        fs::create_dir_all(base.join("outside")).unwrap();
        std::os::unix::fs::symlink(base.join("outside"), project.join("out")).unwrap();
        let roots = [project.clone()];
        let err = locate(&project.join("out/x"), &roots, Parents::Create).unwrap_err();
        assert!(matches!(err, ToolError::Outside { .. }), "{err}");
        assert!(!base.join("outside/x").exists());
        let err = locate(&project, &roots, Parents::Create).unwrap_err();
        assert!(matches!(err, ToolError::IsDirectory { .. }), "{err}");
        let located = locate(&project.join("new/dir/f.txt"), &roots, Parents::Create).unwrap();
        located.write_atomic(b"hi", None).unwrap();
        assert_eq!(
            fs::read_to_string(project.join("new/dir/f.txt")).unwrap(),
            "hi"
        );
        let err = locate(&project.join("missing/f.txt"), &roots, Parents::Existing).unwrap_err();
        assert!(matches!(err, ToolError::NotFound { .. }), "{err}");
    }

    /// A scratch directory under the target's `tmp/` (what `CARGO_TARGET_TMPDIR` names
    /// for integration tests), never the shared `/tmp`.
    fn target_tmpdir() -> tempfile::TempDir {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp");
        fs::create_dir_all(&base).unwrap();
        tempfile::tempdir_in(base).unwrap()
    }

    #[test]
    fn a_located_remove_stays_in_its_directory_when_the_parent_is_swapped_for_a_link() {
        let dir = target_tmpdir();
        let base = fs::canonicalize(dir.path()).unwrap();
        let project = base.join("project");
        let outside = base.join("outside");
        fs::create_dir_all(project.join("sub")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(project.join("sub/f.txt"), "inside").unwrap();
        fs::write(outside.join("f.txt"), "outside").unwrap();
        let roots = [project.clone()];
        let located = locate_name(&project.join("sub/f.txt"), &roots).unwrap();
        // The directory is swapped for a link out of the project after the locate.
        fs::rename(project.join("sub"), project.join("sub-old")).unwrap();
        std::os::unix::fs::symlink(&outside, project.join("sub")).unwrap();
        located.remove().unwrap();
        assert_eq!(
            fs::read_to_string(outside.join("f.txt")).unwrap(),
            "outside"
        );
        assert!(!project.join("sub-old/f.txt").exists());

        // A symlink at the name is removed itself, never where it leads.
        std::os::unix::fs::symlink(outside.join("f.txt"), project.join("link")).unwrap();
        locate_name(&project.join("link"), &roots)
            .unwrap()
            .remove()
            .unwrap();
        assert!(fs::symlink_metadata(project.join("link")).is_err());
        assert!(outside.join("f.txt").exists());
    }
}
