//! The flags of `roo-lead`: its clap structs, apart from what runs them so they can be
//! unit-tested and shared ([`LeadArgs`] with the demo, which re-parses a lead's command
//! line; the provider flags are [`ProviderArgs`], flattened by `roo-worker` too). `lead`
//! runs them; `setup` turns them into agent settings.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use roo_team::backend::worker_launch::ProviderArgs;

/// Output of a headless run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// The final answer as plain text.
    Text,
    /// One JSON object with the answer, outcome, usage and cost.
    Json,
    /// Every agent event as a JSON line while it happens, then the result object.
    StreamJson,
}

/// roo-lead — the RooCode Teams lead agent.
#[derive(Debug, Parser)]
#[command(
    name = "roo-lead",
    version,
    about = "RooCode Teams: an AI coding agent for your terminal",
    after_help = "Examples:\n  roo-lead                                  interactive session in this directory\n  roo-lead -p \"why does test_parse fail?\"   one-shot, prints the answer\n  roo-lead -p - < task.md                   prompt from stdin\n  roo-lead --continue                       resume the latest session of this project\n  roo-lead -p \"fix the bug\" --permission-mode acceptEdits --output-format json\n  roo-lead --provider openai --base-url http://localhost:11434/v1 --model qwen2.5-coder\n  roo-lead demo                             a scripted team at work, no API key needed\n\nExit codes: 0 done, 1 the run did not finish (max turns, cancelled, denied), 2 usage or\nconfiguration error, 3 file or session I/O error, 4 the model could not be reached or refused."
)]
pub struct LeadArgs {
    /// Run once with this prompt and print the result ("-" reads it from stdin).
    #[arg(short = 'p', long = "print", value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// Output format of a -p run.
    #[arg(long, value_enum, default_value = "text")]
    pub output_format: OutputFormat,

    /// Permission mode: default, acceptEdits, plan, bypassPermissions, or dontAsk (what
    /// would be asked is denied; only allow rules grant more than reading). In a -p run a
    /// question nobody can answer is denied.
    #[arg(long, value_name = "MODE")]
    pub permission_mode: Option<String>,

    /// Maximum model turns per prompt.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub max_turns: u32,

    /// Spending cap of the session in USD (and, once it leads a team, of the whole team):
    /// once reached, no new model request starts; a -p run then exits 5.
    #[arg(long, value_name = "USD")]
    pub max_cost_usd: Option<f64>,

    /// Cap on the model requests of the session (and of its whole team), as
    /// --max-cost-usd.
    #[arg(long, value_name = "N")]
    pub max_requests: Option<u64>,

    /// Resume a session by id.
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    pub resume: Option<String>,

    /// Resume the most recent session of this project.
    #[arg(short = 'c', long = "continue")]
    pub continue_latest: bool,

    /// List the checkpoints of this project's latest session (or of --resume ID): its
    /// prompts, newest first, with the files each changed; then exit. Resume the session
    /// and `/rewind N code|conversation|both` to go back to before one.
    #[arg(long)]
    pub rewind: bool,

    /// Work in this directory instead of the current one.
    #[arg(short = 'C', long = "cwd", value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    #[command(flatten)]
    pub provider: ProviderArgs,

    /// Honour this project's .roocode/config.yaml and config.local.yaml in full for this
    /// run (not saved). Without it, a project not in trusted_projects of
    /// ~/.roocode/config.yaml may only add deny/ask rules and a stricter mode.
    #[arg(long)]
    pub trust_project: bool,
    /// Run commands without the OS sandbox (they can then write anywhere you can).
    #[arg(long)]
    pub no_sandbox: bool,

    /// Where teammates run: auto, in-process, tmux or iterm2 (see docs/BACKENDS.md). A
    /// forced backend that cannot work here is an error (exit 2).
    #[arg(
        long,
        value_enum,
        env = "ROO_TEAMMATE_MODE",
        default_value = "auto",
        value_name = "MODE"
    )]
    pub teammate_mode: roo_team::backend::detect::Mode,

    /// Leave pane teammates (tmux) running in their panes when the lead exits; without
    /// it they are shut down and their panes closed.
    #[arg(long)]
    pub keep_panes: bool,

    /// Coordinate only: the lead gets no code tools (no file, search, shell or plan-mode
    /// tools), only the team tools; teammates do the work.
    #[arg(long)]
    pub coordinator: bool,

    /// Lead the existing team NAME (created earlier, e.g. with `roo-mail team create`),
    /// as if this lead had created it.
    #[arg(long, value_name = "NAME")]
    pub team: Option<String>,

    /// With --team: lead the team even though another roo-lead leads it now; that lead
    /// is told and stops leading. Without it, a team led by a running roo-lead is refused.
    #[arg(long, requires = "team")]
    pub take_over: bool,

    /// In a -p run with a team: the longest the lead waits, in all, for busy teammates
    /// after its first turn, in seconds; then it exits 1 naming them.
    #[arg(long, default_value_t = 1800, value_name = "SECS")]
    pub team_timeout: u64,

    /// Print where teammates would run (with --teammate-mode / ROO_TEAMMATE_MODE) and
    /// why, then exit: 0, or 2 if the backend asked for cannot work here.
    #[arg(long)]
    pub print_backend: bool,

    /// Print the command sandbox's layers in force here (and why others are not), its
    /// write roots and what it hides, then exit
    #[arg(long)]
    pub print_sandbox: bool,

    /// Print progress (tool calls) to stderr in -p runs.
    #[arg(short, long)]
    pub verbose: bool,

    #[command(subcommand)]
    pub command: Option<LeadCommand>,
}

/// `roo-lead` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum LeadCommand {
    /// Watch a scripted lead and two teammates fix a small repository: no API key, no
    /// network. Runs in a temporary directory that is removed at the end.
    Demo(DemoArgs),
}

/// `roo-lead demo` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Keep the temporary directory and the team (the lead does not delete it), to
    /// inspect the repository, the tasks and the inboxes afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Pause before each scripted model answer, in milliseconds (0: full speed).
    #[arg(long, default_value_t = 400, value_name = "MS")]
    pub pace_ms: u64,
    /// Where teammates run: auto, in-process, tmux or iterm2 (default: roo-lead's
    /// --teammate-mode, i.e. ROO_TEAMMATE_MODE or auto).
    #[arg(long, value_enum, value_name = "MODE")]
    pub teammate_mode: Option<roo_team::backend::detect::Mode>,
    /// The longest the demo waits for the team in each step, in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECS")]
    pub timeout: u64,
}
