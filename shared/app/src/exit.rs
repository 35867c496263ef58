//! Exit codes of `roo-lead` and `roo-worker`, and the errors that map onto them.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | the run completed (`roo-worker`: it shut down at the lead's request) |
//! | 1 | the run ended without completing (max turns, cancelled, stopped between turns, repeated unknown tools or malformed tool calls; a `-p` run whose team did not finish: teammates still busy at the team timeout, work lost to a teammate's death, or teammates that never started (docs/TEAM.md "Headless teams"); a `-p` run whose TeamCreate or named Agent call failed, e.g. a team an earlier run left in the way; `roo-worker`: stopped by SIGINT, SIGTERM or SIGHUP (its pane closed), or refused to join: its name is held by a live process or is the lead's, as `roo-mail team join` exits 1) |
//! | 2 | usage or configuration error (bad flag, no model configured, bad config file; `roo-worker`: no such team, or what its lead handed over could not be taken or its sealed document read) |
//! | 3 | file or session I/O error |
//! | 4 | the model could not be reached or refused the request |
//! | 5 | a budget cap stopped the run: `--max-cost-usd`/`--max-requests` or `budget:` (the session's or the team's); it says which cap and what was spent |

use roo_agent::event::RunOutcome;
use roo_cli::entry::Failure;

/// The run completed.
pub const OK: u8 = 0;
/// The run ended without completing.
pub const NOT_COMPLETED: u8 = 1;
/// The operation was refused (`roo-worker`: joining under a name a live process holds).
/// The code `roo-mail` and `roo-task` give a refusal (`roo_cli::exit::REFUSED`).
pub const REFUSED: u8 = 1;
/// Usage or configuration error. Also what a bad command line exits with, which the
/// start-up shared with `roo-mail` and `roo-task` decides ([`roo_cli::entry`]).
pub const USAGE: u8 = 2;
const _: () = assert!(USAGE == roo_cli::exit::USAGE);
/// File or session I/O error.
pub const IO: u8 = 3;
/// The model could not be reached or refused the request.
pub const MODEL: u8 = 4;
/// A budget cap stopped the run (no new model request was started).
pub const BUDGET: u8 = 5;

/// Errors that end `roo-lead` before or outside a run. Messages read after "roo-lead: ".
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    Usage(String),
    /// Refused by a rule of the team (exit 1), e.g. a name held by a live process.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Model(String),
}

impl AppError {
    /// The documented exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            AppError::Usage(_) | AppError::Config(_) => USAGE,
            AppError::Refused(_) => REFUSED,
            AppError::Io(_) => IO,
            AppError::Model(_) => MODEL,
        }
    }
}

/// An error ends `roo-lead` and `roo-worker` with `<program>: <message>` and its code.
impl From<AppError> for Failure {
    fn from(error: AppError) -> Failure {
        Failure {
            code: error.exit_code(),
            message: Some(error.to_string()),
        }
    }
}

/// Exit code for how a run ended.
pub fn for_outcome(outcome: &RunOutcome) -> u8 {
    match outcome {
        RunOutcome::Completed => OK,
        RunOutcome::MaxTurns { .. }
        | RunOutcome::Cancelled
        | RunOutcome::UnknownTools { .. }
        | RunOutcome::MalformedToolCalls { .. }
        | RunOutcome::Stopped { .. } => NOT_COMPLETED,
        RunOutcome::Error { .. } => MODEL,
        RunOutcome::OverBudget { .. } => BUDGET,
    }
}

/// The app error of a store failure met while setting up: a team that does not exist
/// a bad name or store setting is a usage error (2), anything else (I/O, locks, corrupt files) 3.
pub fn store_error(error: roo_store::Error) -> AppError {
    let message = error.to_string();
    match error {
        roo_store::Error::TeamNotFound { .. }
        | roo_store::Error::InvalidName { .. }
        | roo_store::Error::InvalidSetting { .. }
        | roo_store::Error::NoHome => AppError::Usage(message),
        _ => AppError::Io(message),
    }
}
