//! `roo-worker`'s command line, the contract between a lead and a pane teammate
//! (docs/TEAM.md "roo-worker"), in one place: the lead builds a [`WorkerLaunch`] and renders it as arguments
//! ([`WorkerLaunch::to_args`]); `roo-worker` parses the same struct with clap (its
//! `WorkerArgs` flattens it). A round-trip test in `roo-app` keeps the two sides equal.
//! Credentials are never here: they come through the handoff, and so do the prompt and a
//! remote teammate's project config ([`WorkerHandoff`]): a command line is readable by
//! every process of the machine (`/proc/<pid>/cmdline`), peers included.

use std::path::PathBuf;

use roo_agent::config::HandedProjectConfig;

use crate::backend::executor::Launch;

/// Who the teammate is and how it runs: every flag of `roo-worker`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct WorkerLaunch {
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
    /// Name of the team's lead (default: the lead the team config names; a different
    /// name is refused).
    #[arg(long)]
    pub lead: Option<String>,
    /// Permission mode: default, acceptEdits, plan, bypassPermissions or dontAsk.
    #[arg(long)]
    pub permission_mode: Option<String>,
    /// The lead's public key (hex): answers to this teammate's questions are taken only
    /// with its signature (default: the key the team config names at start).
    #[arg(long, value_name = "HEX")]
    pub lead_key: Option<String>,
    /// Send a plan for the lead's approval before any write.
    #[arg(long)]
    pub plan_mode_required: bool,
    /// The model provider flags, as `roo-lead` takes them.
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Run commands without the OS sandbox (passed on from the lead's --no-sandbox).
    #[arg(long)]
    pub no_sandbox: bool,
    /// Honour the project's config in full (passed on from a lead that trusts the
    /// project); without it, as for roo-lead -p, only if trusted_projects lists it.
    #[arg(long)]
    pub trust_project: bool,
    /// The first task; without it the teammate waits for messages (a restarted teammate
    /// resumes its transcript either way). A lead hands it over privately instead.
    #[arg(long, value_name = "TEXT")]
    pub prompt: Option<String>,
    /// Working directory (the teammate's worktree); default: the current directory.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Where the project's config files are read and whose trust applies (a lead passes
    /// its repository, so its uncommitted local rules apply in the worktree too);
    /// default: the project root of --cwd.
    #[arg(long, value_name = "DIR")]
    pub config_root: Option<PathBuf>,
    /// The lead made --cwd just now, a clone on this branch: the worker's project root is
    /// --cwd and its environment is taken from that, without git, once the clone's `HEAD`
    /// file agrees (else it is detected, as without the flag).
    #[arg(long, value_name = "BRANCH")]
    pub new_clone: Option<String>,
    /// Maximum model turns per run (a lead passes its own).
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// Once the lead's process is gone, how long an idle teammate waits for a lead to
    /// adopt the team (`roo-lead --team`) before it stops; and while no lead runs, how
    /// long a permission question waits for one before it is denied; 0 waits forever
    /// [default: 300]. With --host, busy or idle, it stops once the lead's presence has
    /// been gone for the shorter of this and 30 s, releasing its tasks.
    #[arg(long, value_name = "SECS", env = "ROO_ORPHAN_TIMEOUT")]
    pub orphan_timeout: Option<u64>,
    /// The host of the lead's `hosts:` this worker runs on (a lead passes it to a teammate
    /// it starts over ssh): recorded in the roster, and no pid of another host is judged
    /// here (docs/BACKENDS.md "The ssh backend").
    #[arg(long, value_name = "NAME", hide = true)]
    pub host: Option<String>,
    /// The project config the lead read in its own tree, for a teammate on another host
    /// (never a flag: it comes through the handoff, [`WorkerHandoff`]).
    #[arg(skip)]
    pub project_config: Option<HandedProjectConfig>,
    /// The gate file the lead writes once the clone `--new-clone` names is complete: the
    /// worker starts before it is and waits on it before any tool call
    /// ([`crate::backend::clone_gate`]; never a flag: it comes through the handoff).
    #[arg(skip)]
    pub clone_gate: Option<PathBuf>,
}

/// The model provider flags of `roo-lead` and `roo-worker`: one struct both flatten, so
/// what a lead passes its pane teammate is what it takes itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct ProviderArgs {
    /// Model provider: anthropic, openai (any OpenAI-compatible server) or script.
    #[arg(long, env = "ROO_PROVIDER", value_name = "NAME")]
    pub provider: Option<String>,
    /// Model name, e.g. claude-sonnet-4-5, gpt-4.1, qwen2.5-coder.
    #[arg(long, env = "ROO_MODEL", value_name = "MODEL")]
    pub model: Option<String>,
    /// API base URL (OpenAI-compatible: up to and including /v1; Anthropic: the root).
    #[arg(long, env = "ROO_BASE_URL", value_name = "URL")]
    pub base_url: Option<String>,
    /// Script file for --provider script (replayed turns; see docs/LLM.md).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
}

/// What a lead hands its pane or ssh worker with its environment, never on the command
/// line: the first task and, for a teammate on another host, the project config.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkerHandoff {
    pub prompt: Option<String>,
    pub project_config: Option<HandedProjectConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_gate: Option<PathBuf>,
}

impl WorkerHandoff {
    /// As the handoff carries it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// From what the handoff carried; a document of another shape is an error.
    pub fn from_json(value: serde_json::Value) -> Result<Self, String> {
        serde_json::from_value(value).map_err(|e| format!("the handed launch: {e}"))
    }
}

/// How long an idle teammate waits for a new lead by default, in seconds.
pub const ORPHAN_TIMEOUT_SECS: u64 = 300;

impl WorkerLaunch {
    /// What a lead starts for `launch` with display colour `color`.
    pub fn of(launch: &Launch, color: &str) -> WorkerLaunch {
        let settings = &launch.settings;
        let llm = &settings.llm;
        WorkerLaunch {
            team: launch.team.name().to_string(),
            name: launch.name.to_string(),
            agent_id: Some(format!("{}@{}", launch.name, launch.team.name())),
            agent_type: launch
                .agent_type
                .clone()
                .unwrap_or_else(|| "general-purpose".to_string()),
            color: Some(color.to_string()),
            lead: Some(launch.lead.to_string()),
            lead_key: launch.lead_key.clone(),
            permission_mode: settings.permission_mode.map(|m| m.to_string()),
            plan_mode_required: launch.plan_mode_required,
            provider: ProviderArgs {
                provider: llm.provider.clone(),
                model: launch.model.clone().or_else(|| llm.model.clone()),
                base_url: llm.base_url.clone(),
                // The pane starts elsewhere: a relative script path is the lead's.
                script: llm.script.as_ref().map(|script| {
                    if script.is_absolute() {
                        script.clone()
                    } else {
                        std::env::current_dir()
                            .map(|d| d.join(script))
                            .unwrap_or_else(|_| script.clone())
                    }
                }),
            },
            no_sandbox: settings.no_sandbox,
            trust_project: matches!(settings.trust, crate::trust::Trust::Granted),
            prompt: Some(launch.prompt.clone()).filter(|p| !p.is_empty()),
            cwd: Some(launch.work_dir.clone()),
            config_root: settings.config_root.clone(),
            new_clone: settings.fresh_checkout.clone(),
            max_turns: Some(settings.max_turns),
            // The worker's default, or the environment the lead hands over.
            orphan_timeout: None,
            host: None,
            project_config: settings.project_config.clone(),
            clone_gate: settings.clone_gate.clone(),
        }
    }

    /// What goes through the handoff rather than the command line.
    pub fn handoff(&self) -> WorkerHandoff {
        WorkerHandoff {
            prompt: self.prompt.clone(),
            project_config: self.project_config.clone(),
            clone_gate: self.clone_gate.clone(),
        }
    }

    /// Takes what the lead handed over: its prompt and project config replace any
    /// given on the command line.
    pub fn take(&mut self, handed: WorkerHandoff) {
        if handed.prompt.is_some() {
            self.prompt = handed.prompt;
        }
        if handed.project_config.is_some() {
            self.project_config = handed.project_config;
        }
        if handed.clone_gate.is_some() {
            self.clone_gate = handed.clone_gate;
        }
    }

    /// The flags, in a fixed order, that parse back to `self` without what goes
    /// through the handoff ([`WorkerLaunch::handoff`]: the prompt, the project config).
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            "--team".to_string(),
            self.team.clone(),
            "--name".to_string(),
            self.name.clone(),
        ];
        // `--flag=value`: a value that starts with "-" stays a value.
        let mut value = |flag: &str, value: Option<String>| {
            if let Some(value) = value {
                args.push(format!("{flag}={value}"));
            }
        };
        value("--agent-id", self.agent_id.clone());
        value("--agent-type", Some(self.agent_type.clone()));
        value("--color", self.color.clone());
        value("--lead", self.lead.clone());
        value("--lead-key", self.lead_key.clone());
        value("--permission-mode", self.permission_mode.clone());
        let provider = &self.provider;
        value("--provider", provider.provider.clone());
        value("--model", provider.model.clone());
        value("--base-url", provider.base_url.clone());
        value(
            "--script",
            provider.script.as_ref().map(|p| p.display().to_string()),
        );
        value("--cwd", self.cwd.as_ref().map(|p| p.display().to_string()));
        value(
            "--config-root",
            self.config_root.as_ref().map(|p| p.display().to_string()),
        );
        value("--new-clone", self.new_clone.clone());
        value("--max-turns", self.max_turns.map(|n| n.to_string()));
        value(
            "--orphan-timeout",
            self.orphan_timeout.map(|s| s.to_string()),
        );
        value("--host", self.host.clone());
        for (flag, on) in [
            ("--plan-mode-required", self.plan_mode_required),
            ("--no-sandbox", self.no_sandbox),
            ("--trust-project", self.trust_project),
        ] {
            if on {
                args.push(flag.to_string());
            }
        }
        args
    }
}
