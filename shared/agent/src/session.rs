//! Session transcripts: every turn appended to a JSONL file, and restored on resume.
//!
//! One JSON record per line, appended with one `write` each and never rewritten, so
//! a crash loses at most the line being written. On load a torn last line is dropped
//! (that is what a crash mid-write leaves); a corrupt line anywhere else is an error
//! naming the file and line, because silently skipping it could re-run old work.
//! Blocks added to the user message that ends the history (tool results, then a
//! delivered reminder) append a `user_blocks` record; compaction and `/clear` append a
//! `replace` record holding the new history. Replaying the file always gives the
//! conversation the agent last had, and nothing but a compaction, `/clear` or a repair
//! writes the history again.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use roo_llm::{ContentBlock, Message};
use serde::{Deserialize, Serialize};

use crate::conversation::{push_user, repair_chain};

/// Format version written in each session's `meta` record.
/// Version 2 added the `user_blocks` record.
pub const SESSION_FORMAT_VERSION: u32 = 2;

/// Errors of session persistence.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("failed to {action} {path}: {source}")]
    /// The file could not be read or written.
    Io {
        /// What was being done (`create`, `append to`).
        action: &'static str,
        /// The session file.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
    #[error("session file {path} is corrupt at line {line}: {message}")]
    /// A line of the file is not a record.
    Corrupt {
        /// The session file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    #[error(
        "session file {path} has format version {found}, newer than this build understands ({SESSION_FORMAT_VERSION}); upgrade roo"
    )]
    /// The file was written by a newer build.
    NewerVersion {
        /// The session file.
        path: PathBuf,
        /// Its format version.
        found: u32,
    },
    #[error("no session {id} in {dir}")]
    /// No session has that id.
    NotFound {
        /// The id asked for.
        id: String,
        /// The project's session directory.
        dir: PathBuf,
    },
    #[error("no earlier session for this project in {dir}")]
    /// `--continue` found no session to continue.
    NoneToContinue {
        /// The project's session directory.
        dir: PathBuf,
    },
}

/// Result alias of this module.
pub type Result<T, E = SessionError> = std::result::Result<T, E>;

/// One line of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// First line: who and where.
    Meta {
        version: u32,
        session_id: String,
        cwd: PathBuf,
        agent: String,
        created_ms: u64,
    },
    /// One message appended to the history.
    Message { message: Message },
    /// Blocks added to the user message that ends the history (tool results, then
    /// reminders or the next input), or a new user message if it ends with another
    /// role: one small record instead of a rewrite of the whole history.
    UserBlocks { blocks: Vec<ContentBlock> },
    /// The whole history replaced (compaction, `/clear`, repair).
    Replace {
        reason: String,
        messages: Vec<Message>,
    },
}

/// An open transcript being appended to.
#[derive(Debug)]
pub struct Session {
    id: String,
    path: PathBuf,
    file: File,
}

/// A transcript read back from disk.
#[derive(Debug)]
pub struct Restored {
    /// The open session, appended to from now on.
    pub session: Session,
    /// The conversation as restored.
    pub messages: Vec<Message>,
    /// What had to be repaired (torn last line, cut unfinished round).
    pub notices: Vec<String>,
}

impl Session {
    /// Creates a new transcript at `path` (parent dirs 0700, file 0600).
    pub fn create(path: PathBuf, id: String, cwd: &Path, agent: &str) -> Result<Self> {
        if let Some(dir) = path.parent() {
            create_private_dir(dir)?;
        }
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| SessionError::Io {
                action: "create session file",
                path: path.clone(),
                source,
            })?;
        let mut session = Self { id, path, file };
        let meta = Record::Meta {
            version: SESSION_FORMAT_VERSION,
            session_id: session.id.clone(),
            cwd: cwd.to_path_buf(),
            agent: agent.to_string(),
            created_ms: now_ms(),
        };
        session.append(&meta)?;
        Ok(session)
    }

    /// Opens an existing transcript, replays it and repairs the history.
    pub fn open(path: &Path) -> Result<Restored> {
        let (id, messages, mut notices) = replay(path)?;
        let mut messages = messages;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|source| SessionError::Io {
                action: "open session file",
                path: path.to_path_buf(),
                source,
            })?;
        let mut session = Self {
            id,
            path: path.to_path_buf(),
            file,
        };
        if let Some(what) = repair_chain(&mut messages) {
            session.append(&Record::Replace {
                reason: format!("resume repair: {what}"),
                messages: messages.clone(),
            })?;
            notices.push(format!("resumed session: {what}"));
        }
        Ok(Restored {
            session,
            messages,
            notices,
        })
    }

    /// Session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Transcript path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Directory for this session's side files (spilled tool results, plan file).
    pub fn dir(&self) -> PathBuf {
        self.path.with_extension("")
    }

    /// Appends one message.
    pub fn append_message(&mut self, message: &Message) -> Result<()> {
        self.append(&Record::Message {
            message: message.clone(),
        })
    }

    /// Appends blocks to the user message that ends the history (as a `user_blocks`
    /// record).
    pub fn append_user_blocks(&mut self, blocks: &[ContentBlock]) -> Result<()> {
        self.append(&Record::UserBlocks {
            blocks: blocks.to_vec(),
        })
    }

    /// Records that the whole history was replaced.
    pub fn replace(&mut self, reason: &str, messages: &[Message]) -> Result<()> {
        self.append(&Record::Replace {
            reason: reason.to_string(),
            messages: messages.to_vec(),
        })
    }

    fn append(&mut self, record: &Record) -> Result<()> {
        let mut line = serde_json::to_vec(record).map_err(|e| SessionError::Io {
            action: "encode a record for",
            path: self.path.clone(),
            source: io::Error::other(e),
        })?;
        line.push(b'\n');
        // One write per record: O_APPEND keeps concurrent readers from seeing
        // interleaved halves, and a crash leaves at most one torn last line.
        self.file
            .write_all(&line)
            .map_err(|source| SessionError::Io {
                action: "append to",
                path: self.path.clone(),
                source,
            })
    }
}

/// Where a project's sessions live: `<ROO_HOME>/projects/<slug of cwd>/`.
pub fn project_sessions_dir(roo_home: &Path, project_root: &Path) -> PathBuf {
    let slug: String = project_root
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    roo_home.join("projects").join(slug.trim_matches('-'))
}

/// A new session id: time-ordered and unique across processes.
pub fn new_session_id() -> String {
    format!("{}-{:05}", now_ms(), std::process::id() % 100_000)
}

/// Path of session `id` in `dir`, refusing ids that could escape it.
pub fn session_path(dir: &Path, id: &str) -> Result<PathBuf> {
    let valid = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let path = dir.join(format!("{id}.jsonl"));
    if !valid || !path.is_file() {
        return Err(SessionError::NotFound {
            id: id.to_string(),
            dir: dir.to_path_buf(),
        });
    }
    Ok(path)
}

/// The most recently modified session in `dir`.
pub fn latest_session(dir: &Path) -> Result<PathBuf> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(SessionError::NoneToContinue {
                dir: dir.to_path_buf(),
            });
        }
        Err(source) => {
            return Err(SessionError::Io {
                action: "list sessions in",
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max()
        .map(|(_, path)| path)
        .ok_or_else(|| SessionError::NoneToContinue {
            dir: dir.to_path_buf(),
        })
}

/// Reads a transcript: (session id, messages, notices). A torn last line (no
/// trailing newline, as an interrupted write leaves it) is cut off the file so the
/// next append starts on a clean line.
fn replay(path: &Path) -> Result<(String, Vec<Message>, Vec<String>)> {
    let io_err = |action: &'static str| {
        let path = path.to_path_buf();
        move |source| SessionError::Io {
            action,
            path,
            source,
        }
    };
    let bytes = fs::read(path).map_err(io_err("read session file"))?;
    let mut id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut messages = Vec::new();
    let mut notices = Vec::new();
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let (body, tail) = bytes.split_at(complete);
    let tail_record = if tail.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        serde_json::from_slice::<Record>(tail).ok()
    };
    if tail_record.is_none() && !tail.is_empty() {
        // Torn write: cut it so later appends do not glue onto it.
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_err("open session file"))?;
        file.set_len(complete as u64)
            .map_err(io_err("truncate the torn last line of"))?;
        notices.push(format!(
            "dropped a torn last line of {} (left by an interrupted write)",
            path.display()
        ));
    } else if tail_record.is_some() {
        let mut file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io_err("open session file"))?;
        file.write_all(b"\n")
            .map_err(io_err("finish the last line of"))?;
    }
    let records = body
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.iter().all(u8::is_ascii_whitespace))
        .map(|(n, line)| {
            serde_json::from_slice::<Record>(line).map_err(|e| SessionError::Corrupt {
                path: path.to_path_buf(),
                line: n + 1,
                message: e.to_string(),
            })
        })
        .chain(tail_record.map(Ok));
    for record in records {
        match record? {
            Record::Meta {
                version,
                session_id,
                ..
            } => {
                if version > SESSION_FORMAT_VERSION {
                    return Err(SessionError::NewerVersion {
                        path: path.to_path_buf(),
                        found: version,
                    });
                }
                id = session_id;
            }
            Record::Message { message } => messages.push(message),
            Record::UserBlocks { blocks } => push_user(&mut messages, blocks),
            Record::Replace { messages: new, .. } => messages = new,
        }
    }
    Ok((id, messages, notices))
}

fn create_private_dir(dir: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| SessionError::Io {
            action: "create directory",
            path: dir.to_path_buf(),
            source,
        })
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use roo_llm::{ContentBlock, Role};
    use serde_json::json;

    fn temp_dir() -> PathBuf {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "roo-session-test-{}-{}-{n}",
            std::process::id(),
            now_ms()
        ));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn round_trip_with_replace_and_torn_tail() {
        let dir = temp_dir();
        let path = dir.join("s1.jsonl");
        let mut s = Session::create(path.clone(), "s1".into(), &dir, "lead").unwrap();
        s.append_message(&Message::user_text("hello")).unwrap();
        s.append_message(&Message::assistant_text("hi")).unwrap();
        s.replace("compaction", &[Message::user_text("summary")])
            .unwrap();
        s.append_message(&Message::assistant_text("after")).unwrap();
        drop(s);
        // A crash mid-write leaves half a line.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"type\":\"message\",\"mess").unwrap();

        let restored = Session::open(&path).unwrap();
        assert_eq!(restored.session.id(), "s1");
        assert_eq!(
            restored.messages,
            vec![
                Message::user_text("summary"),
                Message::assistant_text("after")
            ]
        );
        assert_eq!(restored.notices.len(), 1);
        // Appending after the repair starts on a clean line.
        let mut s = restored.session;
        s.append_message(&Message::user_text("next")).unwrap();
        drop(s);
        let again = Session::open(&path).unwrap();
        assert!(again.notices.is_empty(), "{:?}", again.notices);
        assert_eq!(again.messages.len(), 3);
        fs::remove_dir_all(dir).unwrap();
    }

    /// Issue 18 item 4: blocks merged into the last user message (a delivered reminder)
    /// are appended as one record; the bytes already written never change.
    #[test]
    fn merged_user_blocks_append_a_record_and_replay() {
        let dir = temp_dir();
        let path = dir.join("s4.jsonl");
        let mut s = Session::create(path.clone(), "s4".into(), &dir, "lead").unwrap();
        s.append_message(&Message::user_text("hello")).unwrap();
        let before = fs::read(&path).unwrap();
        let reminder = ContentBlock::Text {
            text: "<system-reminder>msg</system-reminder>".into(),
        };
        s.append_user_blocks(std::slice::from_ref(&reminder))
            .unwrap();
        let after = fs::read(&path).unwrap();
        assert_eq!(&after[..before.len()], &before[..]);
        assert_eq!(
            after[before.len()..]
                .iter()
                .filter(|&&b| b == b'\n')
                .count(),
            1
        );
        drop(s);
        let restored = Session::open(&path).unwrap();
        assert_eq!(restored.messages.len(), 1);
        assert_eq!(restored.messages[0].content.len(), 2);
        assert_eq!(restored.messages[0].content[1], reminder);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn corrupt_middle_line_is_an_error_naming_the_line() {
        let dir = temp_dir();
        let path = dir.join("s2.jsonl");
        fs::write(&path, "{\"type\":\"meta\",\"version\":1,\"session_id\":\"s2\",\"cwd\":\"/\",\"agent\":\"lead\",\"created_ms\":0}\nnot json\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":[]}}\n").unwrap();
        let err = Session::open(&path).unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn resume_cuts_unfinished_round_and_records_it() {
        let dir = temp_dir();
        let path = dir.join("s3.jsonl");
        let mut s = Session::create(path.clone(), "s3".into(), &dir, "lead").unwrap();
        s.append_message(&Message::user_text("fix")).unwrap();
        s.append_message(&Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: "t1".into(),
                name: "Bash".into(),
                input: json!({"command": "sleep 100"}),
            }],
        })
        .unwrap();
        drop(s);
        let restored = Session::open(&path).unwrap();
        assert_eq!(restored.messages, vec![Message::user_text("fix")]);
        assert!(restored.notices[0].contains("cut 1 message"));
        // The repair itself is persisted: a second open needs none.
        let again = Session::open(&path).unwrap();
        assert!(again.notices.is_empty());
        assert_eq!(again.messages, vec![Message::user_text("fix")]);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn session_ids_cannot_escape_the_directory() {
        let dir = temp_dir();
        assert!(session_path(&dir, "../etc/passwd").is_err());
        assert!(session_path(&dir, "").is_err());
        fs::remove_dir_all(dir).unwrap();
    }
}
