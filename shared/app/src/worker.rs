//! `roo-worker`: one teammate process.
//!
//! The flags are the contract between the lead and a pane teammate (DESIGN.md §3);
//! the team runtime that runs a teammate's loop comes with the team issue.

use std::process::ExitCode;

use clap::Parser;

use crate::exit;
use crate::lead::ProviderArgs;

/// roo-worker — one RooCode Teams teammate.
#[derive(Debug, Parser)]
#[command(
    name = "roo-worker",
    version,
    about = "One RooCode Teams teammate: an agent loop with work and coordination tools",
    after_help = "Normally started by roo-lead in a tmux or iTerm2 pane. Example:\n  roo-worker --team auth-refactor --name alice --agent-id alice@auth-refactor --lead lead"
)]
pub struct WorkerArgs {
    /// Team name.
    #[arg(long, env = "ROO_TEAM")]
    pub team: String,
    /// This teammate's name.
    #[arg(long, env = "ROO_AGENT_NAME")]
    pub name: String,
    /// This teammate's agent id.
    #[arg(long)]
    pub agent_id: Option<String>,
    /// Agent definition to run.
    #[arg(long, default_value = "general-purpose")]
    pub agent_type: String,
    /// Display colour.
    #[arg(long)]
    pub color: Option<String>,
    /// Name of the lead.
    #[arg(long, default_value = roo_team::DEFAULT_LEAD_NAME)]
    pub lead: String,
    /// Permission mode.
    #[arg(long)]
    pub permission_mode: Option<String>,
    /// Send a plan for the lead's approval before any write.
    #[arg(long)]
    pub plan_mode_required: bool,
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Run commands without the OS sandbox (passed on from the lead's --no-sandbox).
    #[arg(long)]
    pub no_sandbox: bool,
}

/// Entry point of the `roo-worker` binary.
pub fn main() -> ExitCode {
    if let Some(code) = roo_agent::sandbox::run_helper_if_requested() {
        return code;
    }
    if let Some(warning) = roo_agent::sandbox::seal_secret_env() {
        eprintln!("roo-worker: warning: {warning}; commands may read API keys from /proc");
    }
    match WorkerArgs::try_parse() {
        Ok(args) => {
            eprintln!(
                "roo-worker: teammate {} of team {}: the team runtime is not part of this build yet; run roo-lead for a single agent",
                args.name, args.team
            );
            ExitCode::from(exit::USAGE)
        }
        Err(e) => {
            let _ = e.print();
            if e.use_stderr() {
                ExitCode::from(exit::USAGE)
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}
