//! Turning `roo-lead`'s flags into [`AgentSettings`] and building the lead with the one
//! agent builder (`roo_team::build_agent`), which `roo-worker` and in-process teammates
//! share. What is the lead's alone lives here: its approver is the terminal (a question
//! channel the REPL answers) or nobody (a `-p` run), and its trust question is asked on
//! the terminal.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use roo_agent::agent_loop::Agent;
use roo_agent::permissions::{Approval, Approver, DenyApprover, PermissionMode, PermissionRequest};
use roo_agent::plan_mode::PlanApprover;
use roo_llm::{LlmFlags, LlmSettings};
use roo_store::Name;
use roo_team::{
    AgentSettings, BuildError, BuildErrorKind, Identity, SessionPlan, TeamEvent, TeamEventSender,
    Trust, team_events,
};
use tokio::sync::{mpsc, oneshot};

use crate::exit::AppError;
use crate::lead::{LeadArgs, ProviderArgs};

/// A question for the human, with the channel for the answer.
pub struct PendingApproval {
    pub request: PermissionRequest,
    pub reply: oneshot::Sender<Approval>,
}

/// Asks through the terminal UI: sends the request to the REPL and waits.
pub struct ChannelApprover {
    tx: mpsc::Sender<PendingApproval>,
}

impl ChannelApprover {
    /// An approver and the receiving end the UI answers from.
    pub fn new() -> (ChannelApprover, mpsc::Receiver<PendingApproval>) {
        let (tx, rx) = mpsc::channel(1);
        (ChannelApprover { tx }, rx)
    }
}

impl Approver for ChannelApprover {
    fn ask<'a>(&'a self, request: &'a PermissionRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let pending = PendingApproval {
                request: request.clone(),
                reply,
            };
            if self.tx.send(pending).await.is_err() {
                return Approval::Deny {
                    feedback: Some("nobody is there to answer".to_string()),
                };
            }
            answer.await.unwrap_or(Approval::Deny {
                feedback: Some("the question was dismissed".to_string()),
            })
        })
    }
}

/// An agent ready to run, and what the UI needs around it.
pub struct Built {
    pub agent: Agent,
    pub project_root: PathBuf,
    pub roo_home: PathBuf,
    /// Things to tell the user at start (resume repairs).
    pub notices: Vec<String>,
    /// Permission questions for the interactive UI.
    pub approvals: Option<mpsc::Receiver<PendingApproval>>,
    pub settings: LlmSettings,
    /// Where the team runtime reports teammates' messages and states…
    pub team_sender: TeamEventSender,
    /// …and where the UI reads them (the REPL shows them even while the user types).
    pub team_events: mpsc::Receiver<TeamEvent>,
}

/// The lead's settings from its flags. `interactive` selects the approver (the terminal,
/// or a denial: nobody can answer a headless run) and whether trust is asked.
pub fn lead_settings(
    args: &LeadArgs,
    interactive: bool,
    roo_home: PathBuf,
) -> Result<(AgentSettings, Option<mpsc::Receiver<PendingApproval>>), AppError> {
    let name =
        Name::parse(roo_team::DEFAULT_LEAD_NAME).map_err(|e| AppError::Usage(e.to_string()))?;
    let mut settings = AgentSettings::new(Identity::solo(name), roo_home);
    settings.cwd = args.cwd.clone();
    settings.llm = llm_flags(&args.provider);
    settings.permission_mode = args
        .permission_mode
        .as_deref()
        .map(|m| m.parse::<PermissionMode>())
        .transpose()
        .map_err(|e| AppError::Usage(e.to_string()))?;
    settings.trust = if args.trust_project {
        Trust::Granted
    } else if interactive {
        Trust::Ask(Arc::new(crate::trust::TerminalQuestion))
    } else {
        Trust::AsListed
    };
    settings.no_sandbox = args.no_sandbox;
    settings.session = match (&args.resume, args.continue_latest) {
        (Some(id), _) => SessionPlan::Resume(id.clone()),
        (None, true) => SessionPlan::Latest,
        (None, false) => SessionPlan::New,
    };
    settings.max_turns = args.max_turns;
    let approvals = if interactive {
        let (approver, approvals) = ChannelApprover::new();
        settings.approver = Arc::new(approver);
        settings.plan_approver = PlanApprover::Present;
        Some(approvals)
    } else {
        settings.approver = Arc::new(DenyApprover);
        settings.plan_approver = PlanApprover::Absent;
        None
    };
    Ok((settings, approvals))
}

/// Builds the lead agent from its flags.
pub async fn build(args: &LeadArgs, interactive: bool) -> Result<Built, AppError> {
    let roo_home = roo_home()?;
    crate::logging::init(&roo_home, "roo-lead");
    let (settings, approvals) = lead_settings(args, interactive, roo_home)?;
    let built = roo_team::build_agent(settings).await.map_err(app_error)?;
    let (team_sender, team_events) = team_events();
    Ok(Built {
        team_sender,
        team_events,
        agent: built.agent,
        project_root: built.project_root,
        roo_home: built.roo_home,
        notices: built.notices,
        approvals,
        settings: built.llm,
    })
}

/// The provider flags as the builder takes them.
pub fn llm_flags(provider: &ProviderArgs) -> LlmFlags {
    LlmFlags {
        provider: provider.provider.clone(),
        model: provider.model.clone(),
        base_url: provider.base_url.clone(),
        script: provider.script.clone(),
        ..LlmFlags::default()
    }
}

/// The app error (and so the exit code) of a build failure.
pub fn app_error(error: BuildError) -> AppError {
    let message = error.to_string();
    match error.kind() {
        BuildErrorKind::Usage => AppError::Usage(message),
        BuildErrorKind::Config => AppError::Config(message),
        BuildErrorKind::Io => AppError::Io(message),
    }
}

/// `ROO_HOME`, or `~/.roocode`.
pub fn roo_home() -> Result<PathBuf, AppError> {
    roo_store::root_from_env().map_err(|e| AppError::Config(e.to_string()))
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use roo_team::Role;

    use super::*;

    fn settings(argv: &[&str], interactive: bool) -> (AgentSettings, bool) {
        let args =
            LeadArgs::try_parse_from(std::iter::once("roo-lead").chain(argv.iter().copied()))
                .unwrap();
        let (settings, approvals) = lead_settings(&args, interactive, PathBuf::from("/h")).unwrap();
        (settings, approvals.is_some())
    }

    #[test]
    fn a_headless_lead_asks_nobody() {
        let (s, approvals) = settings(&["-p", "hi", "--continue", "--max-turns", "7"], false);
        assert_eq!(s.identity.name.as_str(), roo_team::DEFAULT_LEAD_NAME);
        assert_eq!(s.identity.role, Role::Lead);
        assert!(s.identity.team.is_none());
        assert!(matches!(s.trust, Trust::AsListed));
        assert_eq!(s.plan_approver, PlanApprover::Absent);
        assert!(!approvals);
        assert_eq!(s.session, SessionPlan::Latest);
        assert_eq!(s.max_turns, 7);
    }

    #[test]
    fn an_interactive_lead_asks_on_the_terminal() {
        let (s, approvals) = settings(&["--resume", "abc", "--permission-mode", "plan"], true);
        assert!(matches!(s.trust, Trust::Ask(_)));
        assert_eq!(s.plan_approver, PlanApprover::Present);
        assert!(approvals);
        assert_eq!(s.session, SessionPlan::Resume("abc".to_string()));
        assert_eq!(s.permission_mode, Some(PermissionMode::Plan));
        let (s, _) = settings(&["--trust-project"], true);
        assert!(matches!(s.trust, Trust::Granted));
    }

    #[test]
    fn a_bad_mode_is_a_usage_error_before_anything_is_built() {
        let args = LeadArgs::try_parse_from(["roo-lead", "--permission-mode", "yolo"]).unwrap();
        let err = lead_settings(&args, false, PathBuf::from("/h")).unwrap_err();
        assert!(matches!(err, AppError::Usage(_)), "{err}");
    }
}
