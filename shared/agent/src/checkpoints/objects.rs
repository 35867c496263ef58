//! The object store of a project's checkpoints: file contents kept once each, named by
//! their SHA-256 (`objects/ab/cdef…`), so a file that did not change between two
//! checkpoints costs nothing the second time. Reading a project file for it never
//! follows a symlink and never blocks on a FIFO or device (the file tools' own open),
//! and a content read back is checked against its name before a rewind writes it.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ring::digest::{Context, SHA256};

use super::CheckpointError;
use super::record::{Entry, is_blob_name};
use crate::tools::confined;

/// The content-addressed files of one project's checkpoints.
#[derive(Debug, Clone)]
pub(super) struct Objects {
    dir: PathBuf,
}

impl Objects {
    /// The store in `dir` (created on first write).
    pub(super) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn path_of(&self, blob: &str) -> PathBuf {
        let (head, tail) = blob.split_at(blob.len().min(2));
        self.dir.join(head).join(tail)
    }

    /// Keeps the regular file at `path` (`mode`: its permission bits), if it is at most
    /// `max_bytes`; what it could not keep becomes [`Entry::Unrecorded`].
    pub(super) fn keep_file(
        &self,
        path: &Path,
        mode: u32,
        max_bytes: u64,
    ) -> Result<Entry, CheckpointError> {
        let mut file = match confined::open_regular(path) {
            Ok(file) => file,
            Err(e) => {
                return Ok(Entry::Unrecorded {
                    why: format!("could not be read: {e}"),
                });
            }
        };
        let mut content = Vec::new();
        let read = (&mut file)
            .take(max_bytes.saturating_add(1))
            .read_to_end(&mut content);
        if let Err(e) = read {
            return Ok(Entry::Unrecorded {
                why: format!("could not be read: {e}"),
            });
        }
        if content.len() as u64 > max_bytes {
            return Ok(Entry::Unrecorded {
                why: format!("larger than the checkpoint limit of {max_bytes} bytes"),
            });
        }
        let blob = self.put(&content)?;
        Ok(Entry::File {
            blob,
            mode: mode & 0o7777,
            size: content.len() as u64,
        })
    }

    /// Stores `content` (if not there yet) and returns its name.
    pub(super) fn put(&self, content: &[u8]) -> Result<String, CheckpointError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let blob = digest(content);
        let path = self.path_of(&blob);
        // Not followed: a symlink planted at the name is not the content.
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            return Ok(blob);
        }
        let io_error = |action, source| CheckpointError::Io {
            action,
            path: path.clone(),
            source,
        };
        let dir = path.parent().unwrap_or(&self.dir);
        super::create_private_dir(dir)?;
        let temp = dir.join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = File::options()
            .write(true)
            .create_new(true)
            .open(&temp)
            .and_then(|mut file| file.write_all(content))
            .and_then(|()| std::fs::rename(&temp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(io_error("write", e));
        }
        Ok(blob)
    }

    /// The content named `blob`, checked against its name. The store may have been
    /// written by another program: a name that is not a SHA-256 is refused (it could
    /// lead out of the store), the file is opened without following a symlink or
    /// blocking (a FIFO planted there), and only a regular file is read.
    pub(super) fn get(&self, blob: &str) -> Result<Vec<u8>, String> {
        if !is_blob_name(blob) {
            return Err(format!(
                "its saved content's name {blob:?} is not a SHA-256 (a damaged checkpoint file)"
            ));
        }
        let path = self.path_of(blob);
        let mut content = Vec::new();
        confined::open_regular(&path)
            .map_err(|e| match e {
                crate::tool::ToolError::NotFound { .. } => {
                    "its saved content was pruned".to_string()
                }
                e => format!(
                    "its saved content {} could not be read: {e}",
                    path.display()
                ),
            })?
            .read_to_end(&mut content)
            .map_err(|e| {
                format!(
                    "its saved content {} could not be read: {e}",
                    path.display()
                )
            })?;
        if digest(&content) != blob {
            return Err(format!(
                "its saved content {} does not match its checksum (refused)",
                path.display()
            ));
        }
        Ok(content)
    }
}

/// SHA-256 of `content` in lowercase hex.
fn digest(content: &[u8]) -> String {
    let mut context = Context::new(&SHA256);
    context.update(content);
    context
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_symlink_planted_at_a_contents_name_is_replaced_not_taken_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::new(dir.path().join("objects"));
        let blob = digest(b"kept");
        let path = objects.path_of(&blob);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(dir.path().join("elsewhere"), b"kept").unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &path).unwrap();
        assert_eq!(objects.put(b"kept").unwrap(), blob);
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(objects.get(&blob).unwrap(), b"kept");
    }
}
