//! A member's own files under its team: the transcript (`transcripts/<name>.jsonl`, what
//! a restarted teammate resumes from) and the log (`logs/<name>.log`).
//!
//! The agent runtime owns their contents; the store owns where they are and how they are
//! opened: only for a team that exists, under a validated [`Name`], directories created
//! 0700 and files 0600, never through a symbolic link or onto a special file (a name a
//! model chose must not redirect a write outside `ROO_HOME`).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::fsio;
use crate::home::ensure_dir;
use crate::name::Name;
use crate::team::Team;

impl Team {
    /// `teams/<team>/transcripts/<member>.jsonl` (the path only; nothing is created).
    pub fn transcript_path(&self, member: &Name) -> PathBuf {
        self.home().transcript(self.name(), member)
    }

    /// `teams/<team>/logs/<member>.log` (the path only; nothing is created).
    pub fn log_path(&self, member: &Name) -> PathBuf {
        self.home().log(self.name(), member)
    }

    /// Opens `member`'s transcript for appending, creating it (0600) and its directory
    /// (0700) if needed. Refuses a team without a config, and a path that is a symbolic
    /// link, directory or special file.
    pub fn open_transcript(&self, member: &Name) -> Result<File> {
        self.open_member_file(self.transcript_path(member), "open transcript")
    }

    /// Opens `member`'s log for appending, like [`Team::open_transcript`].
    pub fn open_log(&self, member: &Name) -> Result<File> {
        self.open_member_file(self.log_path(member), "open log")
    }

    /// The whole transcript of `member`, or `None` if it has none yet (never through a
    /// symbolic link).
    pub fn read_transcript(&self, member: &Name) -> Result<Option<Vec<u8>>> {
        fsio::read_regular(&self.transcript_path(member), "read transcript")
    }

    /// Creates the directory of `path`, one of this team's local files (the lead's key,
    /// a transcript, a log), 0700, for a team that exists: on the PostgreSQL store the
    /// team's directory under `ROO_HOME` holds only such files, and exists only once
    /// one is written. Refuses a symbolic link in its place.
    pub fn prepare_local_file(&self, path: &std::path::Path) -> Result<()> {
        self.prepare_member_file(path, "create directory")
    }

    fn prepare_member_file(&self, path: &std::path::Path, action: &'static str) -> Result<()> {
        let config = self.config_path();
        if !self.home().doc_exists(&config)? {
            return Err(self.not_found(&config));
        }
        if let Some(dir) = path.parent() {
            ensure_dir(dir)?;
            // The directory is ours to create: a planted link in its place must not
            // redirect the member's files (create_dir_all follows it silently).
            let meta = std::fs::symlink_metadata(dir).map_err(|e| Error::io(action, dir, e))?;
            if meta.file_type().is_symlink() {
                return Err(Error::NotRegularFile {
                    path: dir.to_owned(),
                    kind: "symbolic link",
                });
            }
        }
        Ok(())
    }

    fn open_member_file(&self, path: PathBuf, action: &'static str) -> Result<File> {
        let config = self.config_path();
        self.prepare_member_file(&path, action)?;
        let mut options = OpenOptions::new();
        options.append(true).create(true).mode(0o600);
        match fsio::open_regular(&path, &mut options, action)? {
            Some(file) => Ok(file),
            // open_regular reports a missing file only without O_CREAT; with it, the
            // directory vanished between ensure_dir and open (the team was deleted).
            None => Err(self.not_found(&config)),
        }
    }
}
