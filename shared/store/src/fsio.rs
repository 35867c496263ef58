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
