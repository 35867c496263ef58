//! Linux: the namespace layer, built before Landlock the way bubblewrap builds one.
//!
//! The helper moves itself into a new user and mount namespace and rebuilds its view
//! of the file system in place:
//!
//! 1. every write root is bind-mounted onto itself (so it stays writable);
//! 2. every other mount is remounted read-only, keeping its `nosuid`/`nodev`/
//!    `noexec` flags — so `chmod`, `chown`, `touch -d` and `setfattr` outside the
//!    roots fail with `EROFS`, which Landlock (no right for metadata) cannot do;
//! 3. every hidden path gets an empty read-only `tmpfs` (directories) or
//!    `/dev/null` (files and sockets) mounted over it: the tmux, D-Bus, Docker,
//!    SSH- and GPG-agent sockets, the user's secrets and the agent's own state are
//!    not there to connect to or read;
//! 4. a second, nested user and mount namespace is entered: the kernel locks every
//!    mount copied into it, so even a process with all capabilities inside cannot
//!    unmount an overlay or remount a read-only mount writable.
//!
//! Landlock, applied afterwards, also refuses every `mount` call. Nothing here needs
//! privileges: unprivileged user namespaces suffice. Where the kernel or a security
//! module refuses them, [`probe`] says why and the agent falls back to Landlock alone.

use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::statvfs::{FsFlags, statvfs};

use super::SandboxPolicy;

/// Why the namespace layer could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NamespaceError {
    #[error("user namespaces are unavailable ({0})")]
    Unshare(Errno),
    #[error("could not write {path}: {source}")]
    Map {
        path: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("could not {action} {}: {errno}", path.display())]
    Mount {
        action: &'static str,
        path: PathBuf,
        errno: Errno,
    },
    #[error("could not read the mount table: {0}")]
    MountTable(std::io::Error),
}

/// Enters a new user and mount namespace mapping this process's own ids.
fn enter_user_namespace() -> Result<(), NamespaceError> {
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
        .map_err(NamespaceError::Unshare)?;
    let write = |path: &'static str, text: String| {
        std::fs::write(path, text).map_err(|source| NamespaceError::Map { path, source })
    };
    write("/proc/self/setgroups", "deny".to_string())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))?;
    Ok(())
}

/// Whether this process can build the layer: enters a namespace and makes one
/// mount read-only. Run in a throwaway process (the helper's probe mode), since a
/// process that entered a namespace cannot leave it.
pub(crate) fn probe() -> Result<(), NamespaceError> {
    enter_user_namespace()?;
    make_private()?;
    remount_read_only(Path::new("/"))?;
    enter_user_namespace()
}

/// Makes every mount private: nothing done below propagates back to the
/// namespace this process came from.
fn make_private() -> Result<(), NamespaceError> {
    let root = Path::new("/");
    mount(
        None::<&str>,
        root,
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|errno| NamespaceError::Mount {
        action: "make private",
        path: root.to_path_buf(),
        errno,
    })
}

/// Builds the layer for `policy` around this process (single-threaded: a user
/// namespace cannot be entered by a process with several threads).
pub(crate) fn apply(policy: &SandboxPolicy) -> Result<(), NamespaceError> {
    let cwd = std::env::current_dir().ok();
    enter_user_namespace()?;
    make_private()?;
    let writable: Vec<PathBuf> = policy
        .write
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    for path in &writable {
        bind(path, path, MsFlags::MS_REC)?;
    }
    let under_root = |path: &Path| writable.iter().any(|w| path.starts_with(w));
    for point in mount_points()? {
        // `/proc` stays as it is: the nested namespace is mapped through it, and
        // what it lets a process write is guarded by capabilities in the first
        // namespace, which a command never has.
        if under_root(&point) || point.starts_with("/proc") {
            continue;
        }
        match remount_read_only(&point) {
            Ok(()) => {}
            // Mount points this process cannot even reach (below a directory it
            // may not search) are out of the command's reach too.
            Err(NamespaceError::Mount {
                errno: Errno::EACCES | Errno::ENOENT,
                ..
            }) => {}
            Err(e) => return Err(e),
        }
    }
    let mut hidden = policy.hide.clone();
    hidden.extend(sockets_in(&policy.scan));
    // A cover over a write root (a project under /tmp) would take the root away.
    hidden.retain(|h| !writable.iter().any(|w| w.starts_with(h)));
    for path in &hidden {
        hide(path)?;
    }
    fresh_ptys()?;
    // Locks every mount above: a namespace owned by a child user namespace gets
    // its mounts locked, read-only and overlays included.
    enter_user_namespace()?;
    // The working directory still refers to the mount beneath the binds.
    if let Some(cwd) = cwd {
        let _ = std::env::set_current_dir(cwd);
    }
    Ok(())
}

/// How deep [`sockets_in`] looks below each directory, and how many entries it
/// reads in all (a huge temp dir costs a bounded search).
const SCAN_DEPTH: usize = 4;
const SCAN_ENTRIES: usize = 20_000;

/// What servers (tmux, X11, SSH control masters, terminals, editors) leave in the
/// temp dirs: for each socket found up to [`SCAN_DEPTH`] levels down, the top
/// directory holding it (or the socket itself when it lies directly in one of
/// `dirs`), and the socket a symlink there points to, wherever it is.
fn sockets_in(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut budget = SCAN_ENTRIES;
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if is_socket(&path, kind)
                || (kind.is_dir() && holds_socket(&path, SCAN_DEPTH - 1, &mut budget))
            {
                found.push(path);
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// A socket, or a symlink to one.
fn is_socket(path: &Path, kind: std::fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    kind.is_socket()
        || (kind.is_symlink() && std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket()))
}

/// Whether a socket (or a link to one) lies in `dir` or below, `depth` levels at
/// most, reading no more than `budget` entries. Links to directories are not
/// followed.
fn holds_socket(dir: &Path, depth: usize, budget: &mut usize) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut subdirs = Vec::new();
    for entry in entries.flatten() {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if is_socket(&entry.path(), kind) {
            return true;
        }
        if kind.is_dir() {
            subdirs.push(entry.path());
        }
    }
    depth > 0
        && subdirs
            .iter()
            .any(|sub| holds_socket(sub, depth - 1, budget))
}

/// A pty instance of the command's own over `/dev/pts` (and `/dev/ptmx` leading to
/// it): the user's terminals are not there to read keystrokes from or write to,
/// while a pty the command opens works.
fn fresh_ptys() -> Result<(), NamespaceError> {
    let pts = Path::new("/dev/pts");
    if !pts.is_dir() {
        return Ok(());
    }
    mount(
        Some("devpts"),
        pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .map_err(|errno| NamespaceError::Mount {
        action: "mount a pty instance on",
        path: pts.to_path_buf(),
        errno,
    })?;
    let ptmx = Path::new("/dev/ptmx");
    if std::fs::symlink_metadata(ptmx).is_ok_and(|m| !m.file_type().is_symlink()) {
        bind(&pts.join("ptmx"), ptmx, MsFlags::empty())?;
    }
    Ok(())
}

fn bind(source: &Path, target: &Path, extra: MsFlags) -> Result<(), NamespaceError> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | extra,
        None::<&str>,
    )
    .map_err(|errno| NamespaceError::Mount {
        action: "bind",
        path: target.to_path_buf(),
        errno,
    })
}

/// Remounts the mount at `point` read-only, keeping the flags a user namespace
/// may not drop.
fn remount_read_only(point: &Path) -> Result<(), NamespaceError> {
    let mount_error = |errno| NamespaceError::Mount {
        action: "remount read-only",
        path: point.to_path_buf(),
        errno,
    };
    let current = statvfs(point).map_err(mount_error)?.flags();
    let mut flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY;
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if current.contains(fs) {
            flags |= ms;
        }
    }
    mount(None::<&str>, point, None::<&str>, flags, None::<&str>).map_err(mount_error)
}

/// Covers `path`: an empty read-only tmpfs over a directory, `/dev/null` over
/// anything else (a file, a socket). A path that does not exist needs nothing.
fn hide(path: &Path) -> Result<(), NamespaceError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    // A symlink is covered where it leads (`/var/run` → `/run`).
    let (path, meta) = if meta.file_type().is_symlink() {
        match std::fs::canonicalize(path) {
            Ok(target) => match std::fs::metadata(&target) {
                Ok(meta) => (target, meta),
                Err(_) => return Ok(()),
            },
            Err(_) => return Ok(()),
        }
    } else {
        (path.to_path_buf(), meta)
    };
    let mount_error = |action| {
        let path = path.clone();
        move |errno| NamespaceError::Mount {
            action,
            path,
            errno,
        }
    };
    if meta.is_dir() {
        // Its source marks the mount table as a command's ([`super::COVER_SOURCE`]).
        mount(
            Some(super::COVER_SOURCE),
            &path,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("size=4k,mode=0755"),
        )
        .map_err(mount_error("hide"))
    } else {
        bind(Path::new("/dev/null"), &path, MsFlags::empty())?;
        mount(
            None::<&str>,
            &path,
            None::<&str>,
            MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY,
            None::<&str>,
        )
        .map_err(mount_error("make read-only the cover of"))
    }
}

/// The mount points of this namespace, from `/proc/self/mountinfo`.
fn mount_points() -> Result<Vec<PathBuf>, NamespaceError> {
    let text =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(NamespaceError::MountTable)?;
    let mut points: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape(field)))
        .collect();
    points.sort();
    points.dedup();
    Ok(points)
}

/// Undoes mountinfo's octal escapes (`\040` is a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let code = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(u8::try_from(code).unwrap_or(b'?'));
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/mnt/with\040space"), "/mnt/with space");
        assert_eq!(unescape(r"/plain"), "/plain");
        assert_eq!(unescape(r"/tail\04"), r"/tail\04");
    }
}
