//! The start-up all four binaries share: parse the command line (help and version exit
//! 0, a usage error exits 2), run, and end on an error with one line on stderr and the
//! exit code of the binary's table.
//!
//! It lives here, in the lowest crate that parses command lines, so that one
//! implementation serves both families: `roo-mail` and `roo-task` call it from their
//! `main` wrapper (after the relay checks), and `roo-app` calls it from the wrapper of
//! `roo-lead` and `roo-worker` (after the sandbox's helper mode and the sealing of
//! secrets, which need `roo-agent`, a crate this one must not depend on). `roo-app`
//! already builds on this crate through `roo-team`.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Command, FromArgMatches};

use crate::exit::{OK, USAGE};

/// How a binary ends on an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The exit code, from the binary's documented table.
    pub code: u8,
    /// The line printed on stderr after `<program>: `; `None` ends silently (a reader
    /// that closed the pipe early).
    pub message: Option<String>,
}

/// Parses `args` with `cmd` as `C`, runs it and turns the outcome into an exit code:
/// help and version print on stdout and exit 0, a usage error prints clap's message
/// and exits [`USAGE`], an error of `run` prints `<program>: <message>` and exits with
/// its code.
pub fn run<C, E>(
    program: &str,
    cmd: Command,
    args: impl IntoIterator<Item = OsString>,
    run: impl FnOnce(C) -> Result<ExitCode, E>,
) -> ExitCode
where
    C: FromArgMatches,
    E: Into<Failure>,
{
    let parsed = match parse(cmd, args) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    run(parsed).unwrap_or_else(|e| fail(program, e))
}

/// Ends `program` on `error`: prints `<program>: <message>` on stderr (unless silent)
/// and returns its exit code.
pub fn fail(program: &str, error: impl Into<Failure>) -> ExitCode {
    let Failure { code, message } = error.into();
    if let Some(message) = message {
        eprintln!("{program}: {message}");
    }
    ExitCode::from(code)
}

/// `args` parsed with `cmd` as `C`, or the exit code after clap printed why not.
fn parse<C: FromArgMatches>(
    mut cmd: Command,
    args: impl IntoIterator<Item = OsString>,
) -> Result<C, ExitCode> {
    cmd.try_get_matches_from_mut(args)
        .and_then(|mut matches| C::from_arg_matches_mut(&mut matches))
        .map_err(|e| {
            let e = e.format(&mut cmd);
            let _ = e.print();
            ExitCode::from(if e.use_stderr() { USAGE } else { OK })
        })
}
