//! The start-up of the two agent binaries, `roo-lead` and `roo-worker`: what must
//! happen while the process still has one thread, before its flags are read.
//!
//! Both run commands in the sandbox, so both are the sandbox's helper executable and
//! both take API keys out of their environment block. Parsing the command line and
//! ending on an error are the start-up all four binaries share
//! ([`roo_cli::entry::run`]); what is here needs `roo-agent`, which `roo-mail` and
//! `roo-task` do not link. [`block_on`] is the runtime both (and `roo-lead demo`) run
//! their async work on, which ends by shutting down the process's MCP servers.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use crate::exit::AppError;

/// An agent binary, as its start-up differs.
pub struct Program {
    /// `roo-lead` or `roo-worker`: the prefix of its error and warning lines.
    pub name: &'static str,
    /// Takes the environment a lead handed over (`roo-worker` in a pane, where nothing
    /// secret may appear on the command line).
    pub takes_handoff: bool,
}

/// Runs `program`: the sandbox's helper mode if it was started as the helper, else the
/// handoff (if it takes one), the sealing of secrets, then `run` with the parsed flags.
pub fn main<C: CommandFactory + FromArgMatches>(
    program: Program,
    run: impl FnOnce(C) -> Result<ExitCode, AppError>,
) -> ExitCode {
    let name = program.name;
    if let Some(code) = roo_agent::exec::sandbox::run_helper_if_requested() {
        return code;
    }
    // Started by a lead in a pane: take the environment it handed over (never on argv).
    let handoff = program
        .takes_handoff
        .then(roo_agent::exec::sandbox::handoff::enter_handoff)
        .flatten();
    if let Some(error) = handoff {
        return roo_cli::entry::fail(name, AppError::Usage(error));
    }
    match roo_agent::exec::sandbox::seal_secret_env() {
        roo_agent::exec::sandbox::Sealing::Done => {}
        roo_agent::exec::sandbox::Sealing::Warning(warning) => {
            eprintln!("{name}: warning: {warning}; commands may read API keys from /proc");
        }
        // Never run without what was handed over (a remote worker's project config).
        roo_agent::exec::sandbox::Sealing::Failed(error) => {
            return roo_cli::entry::fail(name, AppError::Usage(error));
        }
    }
    roo_cli::entry::run(name, C::command(), std::env::args_os(), run)
}

/// Runs `work` to its end on a current-thread runtime, then shuts down the MCP servers
/// the process started (their stdin closed, then their process groups ended).
pub fn block_on<T>(work: impl Future<Output = T>) -> Result<T, AppError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| AppError::Io(format!("failed to start the async runtime: {e}")))?;
    let result = runtime.block_on(async move {
        let result = work.await;
        roo_agent::McpServers::shutdown_all().await;
        result
    });
    // A tool call abandoned on cancel may still sit in a blocking read on a worker
    // thread; do not wait for it (dropping the runtime would).
    runtime.shutdown_background();
    Ok(result)
}
