//! Wiring one agent from flags, environment and config files.
//!
//! Everything the lead needs is built here once: project root, config, provider,
//! session (new or resumed), permission policy, tools and system prompt. The REPL
//! and the headless runner only drive the result.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use futures_util::future::BoxFuture;
use roo_agent::agent_loop::{Agent, AgentOptions, SharedPolicy};
use roo_agent::config::{ConfigFiles, ProjectTrust};
use roo_agent::permissions::{
    Approval, Approver, DenyApprover, PermissionMode, PermissionPolicy, PermissionRequest,
};
use roo_agent::plan_mode::{PlanApprover, plan_mode_tools};
use roo_agent::prompt::{Environment, Persona, load_instructions, system_prompt};
use roo_agent::sandbox::CommandSetup;
use roo_agent::session::{
    Session, latest_session, new_session_id, project_sessions_dir, session_path,
};
use roo_agent::tool::{ToolContext, ToolRegistry};
use roo_agent::tools::builtin_tools;
use roo_llm::{LlmFlags, LlmSettings};
use tokio::sync::{mpsc, oneshot};

use crate::exit::AppError;
use crate::lead::LeadArgs;
use crate::trust::TrustDecision;

/// Tool results longer than this spill to a file with a preview.
pub const MAX_RESULT_CHARS: usize = 40_000;

/// A question for the human, with the channel for the answer.
pub struct PendingApproval {
    pub request: PermissionRequest,
    pub reply: oneshot::Sender<Approval>,
}

/// Asks through the terminal UI: sends the request to the REPL and waits.
struct ChannelApprover {
    tx: mpsc::Sender<PendingApproval>,
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
}

/// Builds the lead agent. `interactive` selects the approver: the terminal, or a
/// denial (nobody can answer a headless run).
pub async fn build(args: &LeadArgs, interactive: bool) -> Result<Built, AppError> {
    let cwd = match &args.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| AppError::Io(format!("failed to read the current directory: {e}")))?,
    };
    let cwd = std::fs::canonicalize(&cwd).map_err(|e| {
        AppError::Usage(format!(
            "failed to open working directory {}: {e}",
            cwd.display()
        ))
    })?;
    let roo_home = roo_home()?;
    crate::logging::init(&roo_home, "roo-lead");
    let (project_root, environment) = {
        let cwd = cwd.clone();
        tokio::task::spawn_blocking(move || (project_root(&cwd), Environment::detect(&cwd)))
            .await
            .map_err(|e| AppError::Io(format!("failed to inspect the working directory: {e}")))?
    };

    // Loaded untrusted first: what that leaves out is what trust would enable.
    let config = ConfigFiles::load(&roo_home, &project_root, ProjectTrust::Untrusted)
        .map_err(|e| AppError::Config(e.to_string()))?;
    let TrustDecision {
        config,
        notices: trust_notices,
    } = crate::trust::decide(
        config,
        &project_root,
        &roo_home,
        args.trust_project,
        interactive,
    )
    .await?;
    let settings = resolve_llm(args, &config)?;
    let provider =
        roo_llm::build_provider(&settings).map_err(|e| AppError::Config(e.to_string()))?;

    // Session: new, or resumed with its history repaired.
    let sessions = project_sessions_dir(&roo_home, &project_root);
    let resume_path = match (&args.resume, args.continue_latest) {
        (Some(id), _) => {
            Some(session_path(&sessions, id).map_err(|e| AppError::Usage(e.to_string()))?)
        }
        (None, true) => {
            Some(latest_session(&sessions).map_err(|e| AppError::Usage(e.to_string()))?)
        }
        (None, false) => None,
    };
    let (session, messages, mut notices) = match resume_path {
        Some(path) => {
            let restored = Session::open(&path).map_err(|e| AppError::Io(e.to_string()))?;
            (restored.session, restored.messages, restored.notices)
        }
        None => {
            let id = new_session_id();
            let path = sessions.join(format!("{id}.jsonl"));
            let session =
                Session::create(path, id, &cwd, "lead").map_err(|e| AppError::Io(e.to_string()))?;
            (session, Vec::new(), Vec::new())
        }
    };
    notices.splice(0..0, trust_notices);
    let resumed = !messages.is_empty();
    let session_dir = session.dir();
    let plan_file = session_dir.join("plan.md");

    let mode = match &args.permission_mode {
        Some(m) => m
            .parse::<PermissionMode>()
            .map_err(|e| AppError::Usage(e.to_string()))?,
        None => config
            .permission_mode()
            .map_err(|e| AppError::Config(e.to_string()))?
            .unwrap_or(PermissionMode::Default),
    };
    let mut policy = PermissionPolicy::new(project_root.clone(), mode, config.rules());
    policy.add_allowed_root(session_dir.clone());
    if mode == PermissionMode::Plan {
        policy.set_plan_file(Some(plan_file.clone()));
    }
    let read_filter = policy.read_filter();
    let policy: SharedPolicy = Arc::new(RwLock::new(policy));

    let (approver, approvals): (Arc<dyn Approver>, _) = if interactive {
        let (tx, rx) = mpsc::channel(1);
        (Arc::new(ChannelApprover { tx }), Some(rx))
    } else {
        (Arc::new(DenyApprover), None)
    };

    let mut tools = ToolRegistry::new();
    for tool in builtin_tools() {
        tools.register(tool);
    }
    let plan_approver = if interactive {
        PlanApprover::Present
    } else {
        PlanApprover::Absent
    };
    for tool in plan_mode_tools(policy.clone(), plan_file.clone(), plan_approver) {
        tools.register(tool);
    }

    let helper = std::env::current_exe().map_err(|e| {
        AppError::Io(format!(
            "failed to locate the running executable, which runs commands in the sandbox: {e}"
        ))
    })?;
    let commands = CommandSetup::for_agent(
        &config,
        &project_root,
        &roo_home,
        settings.api_key.as_deref(),
        args.no_sandbox,
        helper,
    )
    .map_err(|e| AppError::Config(e.to_string()))?;
    notices.extend(commands.notices);
    let mut env = vec![(
        "ROO_HOME".to_string(),
        roo_home.to_string_lossy().into_owned(),
    )];
    env.extend(commands.env_add);
    let context = ToolContext {
        env,
        max_result_chars: MAX_RESULT_CHARS,
        read_filter: read_filter.clone(),
        sandbox: Some(Arc::new(commands.sandbox)),
        env_remove: commands.env_remove,
        ..ToolContext::new(cwd.clone(), session_dir)
    };
    let options = AgentOptions {
        agent_name: "lead".to_string(),
        max_turns: args.max_turns,
        max_tokens: settings.max_tokens,
        prices: settings.prices.clone(),
        text_tool_calls: settings.text_tool_calls_enabled(),
        ..AgentOptions::default()
    };
    let system = system_prompt(&Persona::default(), &environment);
    let mut agent = Agent::new(
        provider, tools, policy, approver, system, context, options, plan_file,
    )
    .with_session(session, messages);
    if !resumed {
        let (root, home) = (project_root.clone(), roo_home.clone());
        // `@include` honours the same ReadFile deny rules as the tools.
        let instructions = tokio::task::spawn_blocking(move || {
            load_instructions(&root, &home, &|path: &Path| read_filter.denied(path))
        })
        .await
        .unwrap_or_default();
        notices.extend(instructions.notices);
        agent.set_instructions(instructions.text);
    }

    Ok(Built {
        agent,
        project_root,
        roo_home,
        notices,
        approvals,
        settings,
    })
}

fn resolve_llm(args: &LeadArgs, config: &ConfigFiles) -> Result<LlmSettings, AppError> {
    let flags = LlmFlags {
        provider: args.provider.provider.clone(),
        model: args.provider.model.clone(),
        base_url: args.provider.base_url.clone(),
        script: args.provider.script.clone(),
        ..LlmFlags::default()
    };
    // In increasing priority (project, local, user), after the trust filter.
    let files = config
        .llm_settings()
        .map_err(|e| AppError::Config(e.to_string()))?;
    LlmSettings::resolve(&flags, &roo_agent::sandbox::secret_env, &files)
        .map_err(|e| AppError::Config(e.to_string()))
}

/// `ROO_HOME`, or `~/.roocode`.
pub fn roo_home() -> Result<PathBuf, AppError> {
    roo_store::root_from_env().map_err(|e| AppError::Config(e.to_string()))
}

/// The git top-level of `cwd`, or `cwd` itself outside a repository.
pub fn project_root(cwd: &Path) -> PathBuf {
    std::process::Command::new("git")
        .args(["rev-parse", "--show-toplevel"])
        .current_dir(cwd)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        .filter(|p| p.is_dir())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .unwrap_or_else(|| cwd.to_path_buf())
}
