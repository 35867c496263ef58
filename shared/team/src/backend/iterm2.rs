//! The iTerm2 backend: each teammate is a `roo-worker` process in an iTerm2 pane, driven
//! through the `it2` CLI (PyPI package `it2`, built on iTerm2's Python API, which must
//! be enabled: iTerm2 > Settings > General > Magic > Enable Python API).
//!
//! The command lines are built by plain functions ([`commands`]) and unit-tested
//! exactly; [`It2`] runs them (tokio's process API, with a timeout, stderr turned into a
//! clear [`It2Error`]); [`ITerm2Panes`] holds the panes one lead created, with the
//! pane operations as inherent methods: spawn (split a pane and start the worker), set
//! a title, send text, close, is-alive. [`ITerm2Executor`] is the `TeammateExecutor` on
//! top of them (the worker's pid, join, wake, kill, shutdown, session watch).
//!
//! - **Where**: the first teammate's pane is split from the lead's own session
//!   (`$ITERM_SESSION_ID`) side by side (`--vertical`), each later one from the
//!   previous teammate's pane, stacked (if that pane is gone, from the one before it,
//!   or from the lead's).
//! - **Start**: `it2` can only split a pane that runs the profile's shell, so the
//!   worker is started by typing one line into that shell (`it2 session run`; the
//!   text waits in the terminal's input until the shell reads it). The line is
//!   ` /bin/sh '<launcher>'` — leading space: kept out of the shell's history by
//!   `HISTCONTROL=ignorespace` / `HIST_IGNORE_SPACE` / fish — and means the same in
//!   sh, bash, zsh, fish and tcsh, because the launcher's path is refused if it holds a
//!   character any of them would read specially. The launcher (mode 0700, under the
//!   directory given to [`ITerm2Panes::new`]) deletes itself, writes its pid to a file
//!   if asked (the worker keeps that pid), changes to the worker's
//!   directory, exports the given variables and `exec`s the worker's argv, each word
//!   quoted for `/bin/sh`. When the worker ends, the shell stays, so its last words stay
//!   readable until the pane is closed.
//! - **Credentials** are never on a command line, in the typed line or in the
//!   launcher: the caller passes only non-secret variables (the path of the
//!   credentials handoff file the worker reads and deletes, as for tmux); a variable
//!   whose name looks like a secret (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`,
//!   `*CREDENTIAL*`) is refused.
//! - **Liveness**: a pane is alive while `it2 session list --json` lists its session;
//!   the worker's own liveness is its pid in the roster, as for every pane teammate.
//! - **Cleanup** closes only the sessions this lead created, never the user's.

pub mod commands;
mod executor;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use roo_store::Name;
use tokio::process::Command;

pub use commands::{ListedSession, PaneLaunch, SessionId, Split};
pub use executor::{ITerm2Executor, ITerm2Host, SESSION_WATCH_INTERVAL};

/// How long one `it2` command may take (it connects to iTerm2 over its API socket).
pub const IT2_TIMEOUT: Duration = Duration::from_secs(15);

/// What `it2` exits with when it cannot reach iTerm2 (not running, API disabled).
const EXIT_CONNECTION: i32 = 2;
/// What `it2` exits with when the session it was given does not exist.
const EXIT_NOT_FOUND: i32 = 3;

/// Why an iTerm2 operation failed. Read after "failed to ".
#[derive(Debug, thiserror::Error)]
pub enum It2Error {
    #[error("run {bin} {args}: {source}; is it2 installed? See docs/BACKENDS.md")]
    Spawn {
        bin: String,
        args: String,
        source: std::io::Error,
    },
    #[error(
        "reach iTerm2 with `it2 {args}`: {stderr}; is iTerm2 running with its Python API \
         enabled (iTerm2 > Settings > General > Magic > Enable Python API)?"
    )]
    Connection { args: String, stderr: String },
    #[error("find iTerm2 session {session} (`it2 {args}`): {stderr}; was its pane closed?")]
    NotFound {
        session: String,
        args: String,
        stderr: String,
    },
    #[error("run `it2 {args}`: exit status {status}: {stderr}")]
    Failed {
        args: String,
        status: String,
        stderr: String,
    },
    #[error("run `it2 {args}`: no answer within {}s", timeout.as_secs())]
    Timeout { args: String, timeout: Duration },
    #[error("read it2's answer to `{args}`: {answer:?}")]
    Answer { args: String, answer: String },
    #[error("use {value:?} as an iTerm2 session id: expected a GUID or w<N>t<N>p<N>:<GUID>")]
    SessionId { value: String },
    #[error(
        "find the lead's iTerm2 session: ITERM_SESSION_ID is not set; run roo-lead in an \
         iTerm2 window"
    )]
    NoLeadSession,
    #[error("start {name} in iTerm2: {reason}")]
    Launch { name: String, reason: String },
    #[error("write the launcher {path}: {source}")]
    Launcher {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("close iTerm2 session {session}: this lead did not create it, so it stays open")]
    NotOurs { session: String },
}

impl From<It2Error> for crate::backend::executor::ExecError {
    fn from(source: It2Error) -> crate::backend::executor::ExecError {
        crate::backend::executor::ExecError::Backend {
            backend: "iTerm2",
            source: Box::new(source),
        }
    }
}

/// Runs `it2` commands.
#[derive(Debug, Clone)]
pub struct It2 {
    bin: PathBuf,
    timeout: Duration,
}

impl It2 {
    /// `it2` at `bin` (e.g. the path detection found), with [`IT2_TIMEOUT`].
    pub fn new(bin: impl Into<PathBuf>) -> It2 {
        It2 {
            bin: bin.into(),
            timeout: IT2_TIMEOUT,
        }
    }

    /// The same, with another timeout per command.
    pub fn with_timeout(self, timeout: Duration) -> It2 {
        It2 { timeout, ..self }
    }

    /// The executable this runs.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Runs `it2 ARGS` and returns its stdout; a failure carries its stderr.
    pub async fn run(&self, args: &[String]) -> Result<String, It2Error> {
        let shown = args.join(" ");
        let mut command = Command::new(&self.bin);
        command
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let child = command.spawn().map_err(|source| It2Error::Spawn {
            bin: self.bin.display().to_string(),
            args: shown.clone(),
            source,
        })?;
        let output = match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(result) => result.map_err(|source| It2Error::Spawn {
                bin: self.bin.display().to_string(),
                args: shown.clone(),
                source,
            })?,
            Err(_) => {
                return Err(It2Error::Timeout {
                    args: shown,
                    timeout: self.timeout,
                });
            }
        };
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            return Ok(stdout);
        }
        let stderr = one_line(&String::from_utf8_lossy(&output.stderr));
        // click's usage errors exit 2 too; they start with its usage line.
        let usage = stderr.starts_with("Usage:");
        Err(match output.status.code() {
            Some(EXIT_CONNECTION) if !usage => It2Error::Connection {
                args: shown,
                stderr,
            },
            Some(EXIT_NOT_FOUND) => It2Error::NotFound {
                session: commands::session_arg(args).unwrap_or_default(),
                args: shown,
                stderr,
            },
            _ => It2Error::Failed {
                args: shown,
                status: output.status.to_string(),
                stderr,
            },
        })
    }
}

/// A tool's stderr on one line, cut to a readable length.
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.is_empty() {
        return "(no message)".to_string();
    }
    roo_term::clip(&joined, 500)
}

/// The teammate panes one lead opened in iTerm2.
#[derive(Debug)]
pub struct ITerm2Panes {
    it2: It2,
    lead: SessionId,
    launchers: PathBuf,
    panes: Mutex<Vec<(Name, SessionId)>>,
}

impl ITerm2Panes {
    /// Panes split from the lead's session `lead`; launchers are written under
    /// `launchers` (created with mode 0700 if missing).
    pub fn new(it2: It2, lead: SessionId, launchers: impl Into<PathBuf>) -> ITerm2Panes {
        ITerm2Panes {
            it2,
            lead,
            launchers: launchers.into(),
            panes: Mutex::new(Vec::new()),
        }
    }

    /// Panes split from the session named by `iterm_session_id` (the lead's
    /// `$ITERM_SESSION_ID`).
    pub fn for_lead_session(
        it2: It2,
        iterm_session_id: Option<&str>,
        launchers: impl Into<PathBuf>,
    ) -> Result<ITerm2Panes, It2Error> {
        let lead = SessionId::parse(iterm_session_id.ok_or(It2Error::NoLeadSession)?)?;
        Ok(ITerm2Panes::new(it2, lead, launchers))
    }

    /// The directory launchers are written to.
    pub fn launchers(&self) -> &Path {
        &self.launchers
    }

    /// The lead's session.
    pub fn lead(&self) -> &SessionId {
        &self.lead
    }

    /// The panes created and not closed, in spawn order.
    pub fn panes(&self) -> Vec<(Name, SessionId)> {
        lock(&self.panes).clone()
    }

    /// Opens a pane for teammate `name` and starts `launch` in it; returns its session.
    /// A pane whose start failed is closed again.
    pub async fn spawn(&self, name: &Name, launch: &PaneLaunch) -> Result<SessionId, It2Error> {
        let launcher = self.write_launcher(name, launch)?;
        let typed = match commands::typed_line(&launcher) {
            Ok(line) => line,
            Err(reason) => {
                let _ = std::fs::remove_file(&launcher);
                return Err(It2Error::Launch {
                    name: name.to_string(),
                    reason,
                });
            }
        };
        let session = loop {
            let (target, split) = match lock(&self.panes).last() {
                Some((_, last)) => (last.clone(), Split::Below),
                None => (self.lead.clone(), Split::Beside),
            };
            let args = commands::split(&target, split);
            match self.it2.run(&args).await {
                Ok(out) => break commands::parse_split(&out, &args),
                // The previous teammate's pane was closed (by the user): forget it and
                // split from the one before, or from the lead.
                Err(It2Error::NotFound { .. }) if target != self.lead => {
                    lock(&self.panes).retain(|(_, s)| s != &target);
                }
                Err(e) => break Err(e),
            }
        };
        let session = match session {
            Ok(session) => session,
            Err(e) => {
                let _ = std::fs::remove_file(&launcher);
                return Err(e);
            }
        };
        let started = async {
            self.it2
                .run(&commands::set_name(&session, name.as_ref()))
                .await?;
            self.it2.run(&commands::run_line(&session, &typed)).await
        };
        if let Err(e) = started.await {
            let _ = self.it2.run(&commands::close(&session)).await;
            let _ = std::fs::remove_file(&launcher);
            return Err(e);
        }
        lock(&self.panes).push((name.clone(), session.clone()));
        Ok(session)
    }

    /// Sets the title (iTerm2's session name) of `session`.
    pub async fn set_title(&self, session: &SessionId, title: &str) -> Result<(), It2Error> {
        self.it2
            .run(&commands::set_name(session, title))
            .await
            .map(drop)
    }

    /// Types `text` into `session` as it is (no newline added).
    pub async fn send_text(&self, session: &SessionId, text: &str) -> Result<(), It2Error> {
        self.it2
            .run(&commands::send_text(session, text))
            .await
            .map(drop)
    }

    /// Closes `session` if this lead created it; the user's sessions are refused.
    pub async fn close(&self, session: &SessionId) -> Result<(), It2Error> {
        if !lock(&self.panes).iter().any(|(_, s)| s == session) {
            return Err(It2Error::NotOurs {
                session: session.to_string(),
            });
        }
        match self.it2.run(&commands::close(session)).await {
            // Already gone (closed by the user): what was asked holds.
            Ok(_) | Err(It2Error::NotFound { .. }) => {
                lock(&self.panes).retain(|(_, s)| s != session);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Closes every pane this lead created; returns the failures.
    pub async fn close_all(&self) -> Vec<It2Error> {
        let mut failures = Vec::new();
        for (_, session) in self.panes() {
            if let Err(e) = self.close(&session).await {
                failures.push(e);
            }
        }
        failures
    }

    /// Whether `session` still exists in iTerm2.
    pub async fn is_alive(&self, session: &SessionId) -> Result<bool, It2Error> {
        let listed = self.listed().await?;
        Ok(listed.iter().any(|s| s.id == session.as_str()))
    }

    /// Every session iTerm2 has (`it2 session list --json`).
    pub async fn listed(&self) -> Result<Vec<ListedSession>, It2Error> {
        let args = commands::list();
        let out = self.it2.run(&args).await?;
        commands::parse_list(&out, &args)
    }

    /// Forgets every pane without closing it (they are left to the user).
    pub fn forget_all(&self) {
        lock(&self.panes).clear();
    }

    fn write_launcher(&self, name: &Name, launch: &PaneLaunch) -> Result<PathBuf, It2Error> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let script = commands::launcher_script(launch).map_err(|reason| It2Error::Launch {
            name: name.to_string(),
            reason,
        })?;
        let dir = &self.launchers;
        private_dir(dir).map_err(|source| It2Error::Launcher {
            path: dir.clone(),
            source,
        })?;
        let path = dir.join(format!(
            "{name}-{}-{}.sh",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        write_new(&path, &script).map_err(|source| It2Error::Launcher {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }
}

/// Creates `dir` (and its parents) if missing and makes it private to the user.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Writes a new file (never through an existing file or link) readable only by the user.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .open(path)?;
    file.write_all(text.as_bytes())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
