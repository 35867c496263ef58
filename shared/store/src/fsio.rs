//! Opening files inside `ROO_HOME` safely: never through a symbolic link, never anything
//! but a regular file. Any sender can choose text that ends up in a store file, so a
//! symlink planted at a store path must not redirect it outside `ROO_HOME` (or print
//! another file's contents).

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::OFlag;

use crate::error::{Error, Result};

/// Opens `path` with `options` plus `O_NOFOLLOW|O_NONBLOCK` (a FIFO must not block the
/// open) and refuses anything that is not a regular file. `Ok(None)`: it does not exist.
pub(crate) fn open_regular(
    path: &Path,
    options: &mut OpenOptions,
    action: &'static str,
) -> Result<Option<File>> {
    let file = match options
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(Errno::ELOOP as i32) => {
            return Err(Error::NotRegularFile {
                path: path.to_owned(),
                kind: "symbolic link",
            });
        }
        // Opening a FIFO for writing without a reader fails with ENXIO.
        Err(e) if e.raw_os_error() == Some(Errno::ENXIO as i32) => {
            return Err(Error::NotRegularFile {
                path: path.to_owned(),
                kind: "FIFO or socket",
            });
        }
        Err(e) if e.raw_os_error() == Some(Errno::EISDIR as i32) => {
            return Err(Error::NotRegularFile {
                path: path.to_owned(),
                kind: "directory",
            });
        }
        Err(e) => return Err(Error::io(action, path, e)),
    };
    let meta = file.metadata().map_err(|e| Error::io(action, path, e))?;
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(Some(file));
    }
    Err(Error::NotRegularFile {
        path: path.to_owned(),
        kind: if kind.is_dir() {
            "directory"
        } else if kind.is_fifo() {
            "FIFO"
        } else if kind.is_socket() {
            "socket"
        } else {
            "device or other special file"
        },
    })
}

/// Reads the whole regular file at `path` (see [`open_regular`]): never through a
/// symlink, never a FIFO or device; `Ok(None)` if missing.
pub fn read_regular(path: &Path, action: &'static str) -> Result<Option<Vec<u8>>> {
    use std::io::Read;
    let Some(mut file) = open_regular(path, OpenOptions::new().read(true), action)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| Error::io(action, path, e))?;
    Ok(Some(bytes))
}

/// Appends `lines` (each without its newline) to the regular file `path`, creating it
/// 0600, and syncs it: the inbox archive's write.
pub(crate) fn append_lines(path: &Path, lines: &[String]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut buf = Vec::new();
    for line in lines {
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
    }
    let mut file = open_regular(
        path,
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600),
        "open archive",
    )?
    .ok_or_else(|| Error::io("open archive", path, std::io::ErrorKind::NotFound.into()))?;
    file.write_all(&buf)
        .map_err(|e| Error::io("append to archive", path, e))?;
    file.sync_data()
        .map_err(|e| Error::io("sync archive", path, e))
}

/// Makes `root/rel` a real directory, one component at a time below `root` (which the
/// caller trusts): a missing component is created, and each one must then be a real
/// directory — a symbolic link (dangling or not) or anything else there is an error
/// naming it, never followed. For writes into a project's `.roocode/`, whose content
/// comes from the repository.
pub fn make_real_dirs(root: &Path, rel: &Path) -> std::io::Result<std::path::PathBuf> {
    let mut path = root.to_path_buf();
    for component in rel.components() {
        let std::path::Component::Normal(name) = component else {
            return Err(std::io::Error::other(format!(
                "use {}: only plain names may follow {}",
                rel.display(),
                root.display()
            )));
        };
        path.push(name);
        for attempt in 0..2 {
            match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(std::io::Error::other(format!(
                        "use {}: it is a symbolic link, and roo never writes through one there; \
                         remove it (it may come from the repository)",
                        path.display()
                    )));
                }
                Ok(meta) if meta.is_dir() => break,
                Ok(_) => {
                    return Err(std::io::Error::other(format!(
                        "use {}: it exists and is not a directory; move it away",
                        path.display()
                    )));
                }
                Err(e) if e.kind() == ErrorKind::NotFound && attempt == 0 => {
                    match std::fs::create_dir(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(path)
}

/// Creates `path` as a new regular file holding `bytes` (`O_CREAT|O_EXCL|O_NOFOLLOW`:
/// never through a symbolic link, a dangling one included). `Ok(false)`, writing
/// nothing, when anything already exists there.
pub fn create_new_regular(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    use std::io::Write;
    let mut file = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(e),
    };
    if let Err(e) = file.write_all(bytes) {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(true)
}
