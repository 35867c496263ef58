//! The one exit-code table of `roo-mail` and `roo-task`, and the error type that maps
//! onto it.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success (also: output closed early by a pipe reader such as `head`) |
//! | 1 | operation refused: claim lost, task blocked, cycle, not permitted (e.g. a name held by a live process), team exists or still active, a write as a member declared dead or taken over (fenced) |
//! | 2 | usage or bad input: bad flags, invalid name, unknown team/member/task/message (an `ack` with some unknown id: the rest are acknowledged), no `ROO_HOME`/`HOME`, a `ROO_STORE` that is neither `file` nor a `postgresql://` URL |
//! | 3 | I/O failure, lock timeout, corrupt file (moved aside), file from a newer format, the PostgreSQL store unreachable or failing |
//!
//! Every store error is mapped explicitly (no wildcard arm), so a new error variant does
//! not compile until someone decides its exit code. Each CLI prints the table in its
//! `--help` with examples of its own commands ([`MAIL_EXIT_CODES_HELP`],
//! [`TASK_EXIT_CODES_HELP`]).

use std::io;

use roo_store::Error as StoreError;

use crate::entry::Failure;

/// Success.
pub const OK: u8 = 0;
/// The operation was refused (e.g. claim lost).
pub const REFUSED: u8 = 1;
/// Usage error or bad input.
pub const USAGE: u8 = 2;
/// I/O failure or lock timeout.
pub const IO: u8 = 3;

/// The exit-code table as `roo-mail --help` prints it.
pub const MAIL_EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success
  1  operation refused (sender not a member, inbox full, no recipients, a name held by a
     live process, team exists or still active, ...)
  2  usage or bad input (bad flags, invalid name, unknown team, member, recipient or
     message, a value over a limit, neither ROO_HOME nor HOME set, a bad ROO_STORE)
  3  I/O failure, lock timeout, corrupt file (moved aside), a file from a newer format, or
     the PostgreSQL store (ROO_STORE) unreachable or failing
A send that reaches only some recipients reports who got it and exits with the failure's
code; re-run it with the --id it prints to deliver to the rest without duplicates. An ack
with some unknown id exits 2 after acknowledging the others.";

/// The exit-code table as `roo-task --help` prints it.
pub const TASK_EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success
  1  operation refused (claim lost, nothing ready, task blocked, dependency cycle, another
     member's claim, a name held by a live process, team exists or still active, ...)
  2  usage or bad input (bad flags, invalid name, unknown team, member or task, a value
     over a limit, neither ROO_HOME nor HOME set, a bad ROO_STORE)
  3  I/O failure, lock timeout, corrupt file (moved aside), a file from a newer format, or
     the PostgreSQL store (ROO_STORE) unreachable or failing";

/// A failure of a CLI command.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Bad flags or input not caught by the argument parser.
    #[error("{0}")]
    Usage(String),
    /// The operation was refused (e.g. a claim lost to another teammate).
    #[error("{0}")]
    Refused(String),
    /// Writing output failed.
    #[error("write output: {0}")]
    Output(#[from] io::Error),
}

/// Result alias of the CLIs.
pub type CliResult<T = ()> = Result<T, CliError>;

impl CliError {
    /// The exit code of this error.
    pub fn code(&self) -> u8 {
        match self {
            CliError::Store(e) => store_code(e),
            CliError::Usage(_) => USAGE,
            CliError::Refused(_) => REFUSED,
            CliError::Output(e) if e.kind() == io::ErrorKind::BrokenPipe => OK,
            CliError::Output(_) => IO,
        }
    }
}

/// The exit code of a store error.
pub fn store_code(error: &StoreError) -> u8 {
    match error {
        StoreError::TeamExists { .. }
        | StoreError::TeamActive { .. }
        | StoreError::MemberExists { .. }
        | StoreError::NoRecipients { .. }
        | StoreError::NotPermitted { .. }
        | StoreError::Fenced { .. }
        | StoreError::DependencyCycle { .. } => REFUSED,
        StoreError::InvalidName { .. }
        | StoreError::InvalidSetting { .. }
        | StoreError::NoHome
        | StoreError::InvalidMessage { .. }
        | StoreError::InvalidTask { .. }
        | StoreError::Unwritable { .. }
        | StoreError::TeamNotFound { .. }
        | StoreError::MemberNotFound { .. }
        | StoreError::UnknownRecipient { .. }
        | StoreError::MessageNotFound { .. }
        | StoreError::TaskNotFound { .. } => USAGE,
        StoreError::Io { .. }
        | StoreError::Engine { .. }
        | StoreError::LockTimeout { .. }
        | StoreError::RowLocked { .. }
        | StoreError::LockLost { .. }
        | StoreError::NotRegularFile { .. }
        | StoreError::Corrupt { .. }
        | StoreError::Damaged { .. }
        | StoreError::TaskListMissing { .. }
        | StoreError::NewerFormat { .. } => IO,
        // The task write happened; the code is the failed delivery's.
        StoreError::AssignmentUndelivered { source, .. } => store_code(source),
    }
}

/// An error ends the CLI with `<program>: failed to <message>` and its exit code; a
/// broken pipe is silent and exits 0.
impl From<CliError> for Failure {
    fn from(error: CliError) -> Failure {
        let silent = matches!(&error, CliError::Output(e) if e.kind() == io::ErrorKind::BrokenPipe);
        Failure {
            code: error.code(),
            message: (!silent).then(|| format!("failed to {error}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_table() {
        let refused = StoreError::TeamExists {
            team: "t".into(),
            path: "/x".into(),
        };
        assert_eq!(CliError::from(refused).code(), REFUSED);
        let bad = StoreError::TaskNotFound {
            team: "t".into(),
            id: "9".into(),
        };
        assert_eq!(CliError::from(bad).code(), USAGE);
        let io_err = StoreError::Io {
            action: "read",
            path: "/x".into(),
            source: io::Error::other("boom"),
        };
        assert_eq!(CliError::from(io_err).code(), IO);
        let pipe = CliError::Output(io::Error::from(io::ErrorKind::BrokenPipe));
        assert_eq!(pipe.code(), OK);
        assert_eq!(CliError::Usage("x".into()).code(), USAGE);
    }
}
