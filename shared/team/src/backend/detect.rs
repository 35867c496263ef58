//! Choosing where a lead's teammates run (docs/BACKENDS.md), once, before the first spawn.
//!
//! [`detect`] is a pure function of a captured environment ([`DetectEnv`]), so every
//! case is unit-tested; [`DetectEnv::capture`] reads the real process (`$TMUX`,
//! `TERM_PROGRAM` / `ITERM_SESSION_ID`, whether stdin and stdout are terminals, `tmux`
//! and `it2` on `PATH` via the `which` crate). The order, for `--teammate-mode auto`:
//!
//! 1. inside tmux (`$TMUX`) → tmux panes in the current window;
//! 2. inside iTerm2 → iTerm2 panes through `it2` if it is installed, else tmux (a
//!    detached session) if it is installed, else an error saying how to install `it2`;
//! 3. stdin or stdout not a terminal → in-process;
//! 4. tmux installed → a detached tmux session `roo-<team>` (the user attaches to it);
//! 5. otherwise → in-process.
//!
//! A forced mode (`--teammate-mode tmux|iterm2|in-process`, `ROO_TEAMMATE_MODE`) is
//! taken as asked; a forced backend that cannot work here (no `tmux`, no `it2`, not
//! inside iTerm2) is a [`DetectError`], which `roo-lead` reports with exit code 2.

use std::fmt;
use std::io::IsTerminal;
use std::path::PathBuf;

use roo_store::BackendType;

/// What the user asked for (`--teammate-mode`, `ROO_TEAMMATE_MODE`); the docs of its
/// values are the flag's help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Detect: inside tmux → its panes; inside iTerm2 → it2 panes (else tmux); no
    /// terminal → in-process; tmux installed → a detached session; else in-process.
    Auto,
    /// Tokio tasks inside the lead's process.
    InProcess,
    /// `roo-worker` processes in tmux panes (the lead's window inside tmux, else a
    /// detached session `roo-<team>`; tmux must be installed).
    Tmux,
    /// `roo-worker` processes in iTerm2 panes (inside iTerm2, with the it2 CLI).
    #[value(name = "iterm2")]
    ITerm2,
}

impl Mode {
    /// The flag value (`auto`, `in-process`, `tmux`, `iterm2`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::InProcess => "in-process",
            Mode::Tmux => "tmux",
            Mode::ITerm2 => "iterm2",
        }
    }
}

/// The facts detection looks at, captured once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetectEnv {
    /// The mode asked for.
    pub mode: Mode,
    /// `$TMUX` (the server socket, pid and session of the tmux we run in).
    pub tmux_var: Option<String>,
    /// `$TERM_PROGRAM` (`iTerm.app` inside iTerm2).
    pub term_program: Option<String>,
    /// `$ITERM_SESSION_ID` (`w0t0p0:<uuid>` inside iTerm2).
    pub iterm_session_id: Option<String>,
    /// Whether stdin is a terminal.
    pub stdin_tty: bool,
    /// Whether stdout is a terminal.
    pub stdout_tty: bool,
    /// `tmux` on `PATH`.
    pub tmux: Option<PathBuf>,
    /// `it2` on `PATH`.
    pub it2: Option<PathBuf>,
}

impl DetectEnv {
    /// The running process's environment, for `mode`.
    pub fn capture(mode: Mode) -> DetectEnv {
        DetectEnv {
            mode,
            tmux_var: var("TMUX"),
            term_program: var("TERM_PROGRAM"),
            iterm_session_id: var("ITERM_SESSION_ID"),
            stdin_tty: std::io::stdin().is_terminal(),
            stdout_tty: std::io::stdout().is_terminal(),
            tmux: which::which("tmux").ok(),
            it2: which::which("it2").ok(),
        }
    }

    /// Whether we run inside tmux (`$TMUX` set and not empty).
    pub fn inside_tmux(&self) -> bool {
        self.tmux_var.is_some()
    }

    /// Whether we run inside iTerm2 (`TERM_PROGRAM=iTerm.app` or `ITERM_SESSION_ID`).
    pub fn inside_iterm2(&self) -> bool {
        self.term_program.as_deref() == Some("iTerm.app") || self.iterm_session_id.is_some()
    }

    /// Whether both stdin and stdout are terminals (someone is there to watch panes).
    pub fn interactive(&self) -> bool {
        self.stdin_tty && self.stdout_tty
    }
}

/// An environment variable, `None` when unset, empty or not UTF-8.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Where tmux panes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmuxPlacement {
    /// Split from the lead's window (the lead runs inside tmux).
    CurrentWindow,
    /// A detached session `roo-<team>` the user attaches to ([`detached_session_name`]).
    DetachedSession,
}

/// Where teammates run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Tasks in the lead's process.
    InProcess,
    /// `roo-worker` processes in tmux panes.
    Tmux(TmuxPlacement),
    /// `roo-worker` processes in iTerm2 panes through `it2`.
    ITerm2,
}

impl Choice {
    /// The backend recorded in the team config for members spawned on this choice.
    pub fn backend_type(self) -> BackendType {
        match self {
            Choice::InProcess => BackendType::InProcess,
            Choice::Tmux(_) => BackendType::Tmux,
            Choice::ITerm2 => BackendType::Iterm2,
        }
    }
}

/// Why a choice was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// The mode was forced; `detail` says what was found.
    Forced { mode: Mode, detail: String },
    /// `$TMUX` is set.
    InsideTmux,
    /// Inside iTerm2 with `it2` installed.
    ITerm2WithIt2,
    /// Inside iTerm2, `it2` missing, tmux installed.
    ITerm2WithoutIt2,
    /// stdin or stdout is not a terminal.
    NoTerminal,
    /// A terminal, not inside tmux or iTerm2, tmux installed.
    TmuxInstalled,
    /// A terminal, not inside tmux or iTerm2, no tmux.
    NoMultiplexer,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Forced { mode, detail } => write!(
                f,
                "--teammate-mode {} (or ROO_TEAMMATE_MODE) asked for it; {detail}",
                mode.as_str()
            ),
            Reason::InsideTmux => write!(f, "running inside tmux ($TMUX is set)"),
            Reason::ITerm2WithIt2 => write!(f, "running inside iTerm2 and it2 is installed"),
            Reason::ITerm2WithoutIt2 => write!(
                f,
                "running inside iTerm2 without it2 (see docs/BACKENDS.md to install it); \
                 tmux is installed"
            ),
            Reason::NoTerminal => write!(
                f,
                "stdin or stdout is not a terminal, so nobody would watch teammate panes"
            ),
            Reason::TmuxInstalled => write!(
                f,
                "a terminal outside tmux and iTerm2, and tmux is installed"
            ),
            Reason::NoMultiplexer => write!(
                f,
                "a terminal outside tmux and iTerm2, and tmux is not installed"
            ),
        }
    }
}

/// The decision: where teammates run, why, and the tool that drives the panes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detection {
    pub choice: Choice,
    pub reason: Reason,
    /// `tmux` for [`Choice::Tmux`], `it2` for [`Choice::ITerm2`], `None` in-process.
    pub binary: Option<PathBuf>,
    /// Facts worth telling the user that did not decide (e.g. `$TMUX` set but no `tmux`).
    pub notes: Vec<String>,
}

impl Detection {
    /// One line naming the backend; `team` (if known) names the detached session.
    pub fn summary(&self, team: Option<&str>) -> String {
        match self.choice {
            Choice::InProcess => "in-process (teammates run inside the lead's process)".into(),
            Choice::Tmux(TmuxPlacement::CurrentWindow) => {
                "tmux (a pane per teammate in the current window)".into()
            }
            Choice::Tmux(TmuxPlacement::DetachedSession) => {
                let session = session_label(team);
                format!(
                    "tmux (a pane per teammate in the detached session {session}; \
                     attach with: {})",
                    attach_command(&session)
                )
            }
            Choice::ITerm2 => "iterm2 (a pane per teammate, split from this one by it2)".into(),
        }
    }

    /// The report `roo-lead --print-backend` prints: the backend, the reason, the tool
    /// and any notes, one per line.
    pub fn report(&self, team: Option<&str>) -> String {
        let mut out = format!("backend: {}\nreason: {}\n", self.summary(team), self.reason);
        if let Some(binary) = &self.binary {
            out.push_str(&format!("using: {}\n", binary.display()));
        }
        for note in &self.notes {
            out.push_str(&format!("note: {note}\n"));
        }
        out
    }
}

/// The detached tmux session of team `team`: `roo-<team>`.
pub fn detached_session_name(team: &str) -> String {
    format!("roo-{team}")
}

/// The command that attaches the user's terminal to `session`.
pub fn attach_command(session: &str) -> String {
    format!("tmux attach -t {session}")
}

fn session_label(team: Option<&str>) -> String {
    team.map_or_else(|| "roo-<team>".to_string(), detached_session_name)
}

/// How to install `it2` and make it work (shared by the errors and the docs).
pub const IT2_INSTALL: &str = "install it2 with `uv tool install it2` (or `pipx install it2`, \
     or `pip install --user it2`) and enable iTerm2's Python API (iTerm2 > Settings > \
     General > Magic > Enable Python API)";

/// How to install tmux.
pub const TMUX_INSTALL: &str =
    "install tmux 3.3 or later (`brew install tmux`, `apt install tmux`, `dnf install tmux`)";

/// Why no backend could be chosen. Read after "teammates: ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DetectError {
    #[error(
        "--teammate-mode tmux needs tmux, which is not on PATH; {TMUX_INSTALL}, \
         or pass --teammate-mode in-process"
    )]
    TmuxMissing,
    #[error(
        "--teammate-mode iterm2 needs the it2 CLI, which is not on PATH; {IT2_INSTALL}; \
         or pass --teammate-mode tmux or in-process"
    )]
    It2Missing,
    #[error(
        "--teammate-mode iterm2 needs to run inside iTerm2 (neither TERM_PROGRAM=iTerm.app \
         nor ITERM_SESSION_ID is set); run roo-lead in an iTerm2 window, or pass \
         --teammate-mode tmux or in-process"
    )]
    NotInITerm2,
    #[error(
        "running inside iTerm2, teammates open iTerm2 panes through the it2 CLI, which is \
         not on PATH, and tmux is not installed either; {IT2_INSTALL}; or {TMUX_INSTALL}; \
         or pass --teammate-mode in-process"
    )]
    ITerm2WithoutTools,
}

/// Chooses the backend for `env` (see the module documentation for the order).
pub fn detect(env: &DetectEnv) -> Result<Detection, DetectError> {
    let mut notes = Vec::new();
    if env.inside_tmux() && env.tmux.is_none() {
        notes.push("$TMUX is set but tmux is not on PATH, so its panes cannot be used".into());
    }
    let inside_tmux = env.inside_tmux() && env.tmux.is_some();
    let found = |choice, reason, binary: &Option<PathBuf>, notes| Detection {
        choice,
        reason,
        binary: binary.clone(),
        notes,
    };
    match env.mode {
        Mode::InProcess => Ok(found(
            Choice::InProcess,
            Reason::Forced {
                mode: Mode::InProcess,
                detail: "nothing else is needed".into(),
            },
            &None,
            notes,
        )),
        Mode::Tmux => {
            let Some(tmux) = &env.tmux else {
                return Err(DetectError::TmuxMissing);
            };
            let (placement, detail) = if inside_tmux {
                (
                    TmuxPlacement::CurrentWindow,
                    "inside tmux, so panes split from the current window",
                )
            } else {
                (
                    TmuxPlacement::DetachedSession,
                    "not inside tmux, so panes go to a detached session",
                )
            };
            Ok(found(
                Choice::Tmux(placement),
                Reason::Forced {
                    mode: Mode::Tmux,
                    detail: detail.into(),
                },
                &Some(tmux.clone()),
                notes,
            ))
        }
        Mode::ITerm2 => {
            if !env.inside_iterm2() {
                return Err(DetectError::NotInITerm2);
            }
            let Some(it2) = &env.it2 else {
                return Err(DetectError::It2Missing);
            };
            Ok(found(
                Choice::ITerm2,
                Reason::Forced {
                    mode: Mode::ITerm2,
                    detail: "inside iTerm2 and it2 is installed".into(),
                },
                &Some(it2.clone()),
                notes,
            ))
        }
        Mode::Auto => {
            if inside_tmux {
                return Ok(found(
                    Choice::Tmux(TmuxPlacement::CurrentWindow),
                    Reason::InsideTmux,
                    &env.tmux,
                    notes,
                ));
            }
            if env.inside_iterm2() {
                if env.it2.is_some() {
                    return Ok(found(
                        Choice::ITerm2,
                        Reason::ITerm2WithIt2,
                        &env.it2,
                        notes,
                    ));
                }
                if env.tmux.is_some() {
                    return Ok(found(
                        Choice::Tmux(TmuxPlacement::DetachedSession),
                        Reason::ITerm2WithoutIt2,
                        &env.tmux,
                        notes,
                    ));
                }
                return Err(DetectError::ITerm2WithoutTools);
            }
            if !env.interactive() {
                return Ok(found(Choice::InProcess, Reason::NoTerminal, &None, notes));
            }
            if env.tmux.is_some() {
                return Ok(found(
                    Choice::Tmux(TmuxPlacement::DetachedSession),
                    Reason::TmuxInstalled,
                    &env.tmux,
                    notes,
                ));
            }
            Ok(found(
                Choice::InProcess,
                Reason::NoMultiplexer,
                &None,
                notes,
            ))
        }
    }
}

#[cfg(test)]
mod tests;
