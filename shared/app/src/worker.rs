//! `roo-worker`: one teammate process.
//!
//! The flags are the contract between the lead and a pane teammate (DESIGN.md §3);
//! the team runtime that runs a teammate's loop comes with the team issue.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use roo_agent::permissions::PermissionMode;
use roo_store::Name;
use roo_team::{AgentSettings, Identity, SessionPlan, Trust};

use crate::exit::{self, AppError};
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
    /// Honour the project's config in full (passed on from a lead that trusts the
    /// project); without it, as for roo-lead -p, only if trusted_projects lists it.
    #[arg(long)]
    pub trust_project: bool,
}

impl WorkerArgs {
    /// The teammate's settings for the one agent builder (`roo_team::build_agent`):
    /// who it is, its provider, mode and trust, its transcript under the team. It never
    /// asks about trust (it may have no terminal); its permission questions are denied
    /// until the team runtime sets an approver that asks the lead.
    pub fn settings(&self, roo_home: PathBuf) -> Result<AgentSettings, AppError> {
        let parse = |what: &'static str, value: &str| {
            Name::parse_as(what, value).map_err(|e| AppError::Usage(e.to_string()))
        };
        let (team, name, lead) = (
            parse("team name", &self.team)?,
            parse("member name", &self.name)?,
            parse("lead name", &self.lead)?,
        );
        let session = SessionPlan::member(&roo_home, &team, &name);
        let mut settings = AgentSettings::new(Identity::teammate(name, team, lead), roo_home);
        settings.llm = crate::setup::llm_flags(&self.provider);
        settings.permission_mode = self
            .permission_mode
            .as_deref()
            .map(str::parse::<PermissionMode>)
            .transpose()
            .map_err(|e| AppError::Usage(e.to_string()))?;
        settings.no_sandbox = self.no_sandbox;
        settings.trust = if self.trust_project {
            Trust::Granted
        } else {
            Trust::AsListed
        };
        settings.session = session;
        Ok(settings)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use roo_team::Role;

    #[test]
    fn worker_flags_become_a_teammates_settings() {
        let args = WorkerArgs::try_parse_from([
            "roo-worker",
            "--team",
            "t",
            "--name",
            "alice",
            "--lead",
            "boss",
            "--permission-mode",
            "acceptEdits",
            "--script",
            "s.yaml",
            "--trust-project",
        ])
        .unwrap();
        let settings = args.settings(PathBuf::from("/h")).unwrap();
        assert_eq!(settings.identity.name.as_str(), "alice");
        assert_eq!(settings.identity.team.as_ref().unwrap().as_str(), "t");
        assert!(
            matches!(&settings.identity.role, Role::Teammate { lead } if lead.as_str() == "boss")
        );
        assert_eq!(settings.permission_mode, Some(PermissionMode::AcceptEdits));
        assert_eq!(
            settings.session,
            SessionPlan::Transcript(PathBuf::from("/h/teams/t/transcripts/alice.jsonl"))
        );
        assert_eq!(settings.llm.script, Some(PathBuf::from("s.yaml")));
        assert!(matches!(settings.trust, Trust::Granted));
    }

    #[test]
    fn a_worker_name_that_could_escape_its_directory_is_refused() {
        let args =
            WorkerArgs::try_parse_from(["roo-worker", "--team", "t", "--name", "../x"]).unwrap();
        let err = args.settings(PathBuf::from("/h")).unwrap_err();
        assert!(err.to_string().contains("member name"), "{err}");
    }
}
