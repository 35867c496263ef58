//! One home for starting processes.
//!
//! Every process the agent starts for someone else's code — a Bash call, a hook, a
//! skill script, an MCP server, the agent's own `git`, a teammate's worktree git, a
//! `roo-mail` a command asked its agent's relay for — starts through a
//! [`Launcher`]: the one value that knows the OS sandbox ([`sandbox`]), which
//! variables are scrubbed from the environment and which are added, and (for
//! commands) the agent's team-service descriptor. What a command may
//! reach is therefore decided here and in [`sandbox`] alone; callers only say what
//! to run and where.
//!
//! - [`Launcher::command`] builds a [`std::process::Command`] for short programs
//!   (git), confined or merely supervised.
//! - [`Launcher::server_command`] builds one for long-running stdio servers.
//! - [`run()`] and [`run_piped`] run a shell command line to its end, timeout or
//!   cancel in its own process group and capture its output (Bash, hooks, skill
//!   scripts).
//! - [`output_within`] runs a prepared program to its end or a time limit, in its
//!   own process group, from blocking code (the runtime's git and ssh).
//! - `head_tail` keeps the start and the end of a long output: what [`run()`]
//!   captures, and the preview of a spilled tool result.

mod bounded;
mod group;
pub(crate) mod head_tail;
mod run;
pub mod sandbox;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

pub use bounded::{BoundedOutput, output_within};
pub use run::{
    CommandOutcome, Ending, OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES, PipedOutcome, RunError, run,
    run_piped,
};
pub use sandbox::CommandSandbox;

/// Variables that point a command at a terminal multiplexer, a session bus or a
/// key agent: a confined command that reaches one of them can run code or use
/// keys outside the sandbox, so they never reach a command (the agent's own pane
/// keeps them).
pub const ESCAPE_ENV: &[&str] = &[
    "TMUX",
    "TMUX_PANE",
    "STY",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "ITERM_SESSION_ID",
    "TERM_SESSION_ID",
    "KITTY_LISTEN_ON",
    "WAYLAND_DISPLAY",
    "DISPLAY",
    "XAUTHORITY",
];

/// Variables computed when a command starts.
#[derive(Clone)]
pub struct EnvSource(Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>);

impl EnvSource {
    /// A source answering with `vars()` at each command's start.
    pub fn new(vars: impl Fn() -> Vec<(String, String)> + Send + Sync + 'static) -> Self {
        Self(Arc::new(vars))
    }

    /// The variables now.
    pub fn vars(&self) -> Vec<(String, String)> {
        (self.0)()
    }
}

impl fmt::Debug for EnvSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EnvSource")
    }
}

/// The agent's end of its team service: commands get a copy of it (never a path)
/// and `roo-mail`/`roo-task` inside them talk to the agent through it.
#[derive(Debug, Clone)]
pub struct ServiceFd(pub Arc<OwnedFd>);

/// How an agent starts processes. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Launcher {
    /// The sandbox helper and policy. `None` starts processes directly, unconfined
    /// and unsupervised (unit tests).
    pub sandbox: Option<Arc<CommandSandbox>>,
    /// Variables removed from every process's environment (API keys,
    /// [`ESCAPE_ENV`]).
    pub env_remove: Vec<String>,
    /// Variables added (`ROO_HOME`, `ROO_TEAM`, `ROO_AGENT_NAME`, passed keys).
    pub env: Vec<(String, String)>,
    /// Variables read when each process starts, after [`Launcher::env`]: values
    /// that change during a session (the team a lead created).
    pub env_source: Option<EnvSource>,
    /// Handed to every command (not to servers or git): the agent's team service.
    pub service: Option<ServiceFd>,
}

/// Whether [`Launcher::command`] confines the program or only supervises it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confine {
    /// Through the helper, under the sandbox policy.
    Yes,
    /// Started directly: for read-only programs whose start-up cost matters
    /// (`git rev-parse`).
    No,
}

impl Launcher {
    /// A launcher that runs everything through `sandbox` and changes no variable
    /// but [`ESCAPE_ENV`].
    pub fn new(sandbox: Option<Arc<CommandSandbox>>) -> Self {
        Self {
            sandbox,
            env_remove: ESCAPE_ENV.iter().map(|s| s.to_string()).collect(),
            ..Self::default()
        }
    }

    /// Whether commands run under an OS sandbox policy.
    pub fn confines(&self) -> bool {
        self.sandbox.as_deref().is_some_and(|s| s.policy.is_some())
    }

    /// The variables no process gets from the agent's environment:
    /// [`Launcher::env_remove`], [`ESCAPE_ENV`] and the relay's descriptor (a
    /// command gets its own from the helper).
    pub fn removed(&self) -> impl Iterator<Item = &str> {
        self.env_remove
            .iter()
            .map(String::as_str)
            .chain(ESCAPE_ENV.iter().copied())
            .chain([roo_store::relay::ENV_FD])
    }

    /// The variables to set for a process, [`Launcher::env`] then the source.
    pub fn vars(&self) -> Vec<(String, String)> {
        let mut vars = self.env.clone();
        if let Some(source) = &self.env_source {
            vars.extend(source.vars());
        }
        vars
    }

    /// Applies the environment: removes [`Launcher::env_remove`] and
    /// [`ESCAPE_ENV`], then sets [`Launcher::vars`].
    fn apply_env(&self, command: &mut std::process::Command) {
        for name in self.removed() {
            command.env_remove(name);
        }
        for (key, value) in self.vars() {
            command.env(key, value);
        }
    }

    /// `program args` in `cwd` with stdin closed: through the sandbox helper
    /// (supervised, and confined by its policy) when `confine` is [`Confine::Yes`]
    /// and there is a sandbox, directly otherwise. The helper writes its report to
    /// its stdin, which is `/dev/null` here, so the report is dropped.
    pub fn command(
        &self,
        program: &Path,
        args: &[OsString],
        cwd: &Path,
        confine: Confine,
    ) -> std::process::Command {
        let (program, argv) = match self.sandbox.as_deref().filter(|_| confine == Confine::Yes) {
            Some(sandbox) => sandbox.wrap(program, args),
            None => (program.to_path_buf(), args.to_vec()),
        };
        let mut command = std::process::Command::new(program);
        command.args(argv).current_dir(cwd).stdin(Stdio::null());
        self.apply_env(&mut command);
        command
    }

    /// A long-running server `program args` that talks on stdin and stdout (an MCP
    /// server): supervised by the helper (its tree ends with it), in its own
    /// process group, with the launcher's environment and then `env` (which may
    /// set a variable the launcher would remove).
    pub fn server_command<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        &self,
        program: &Path,
        args: &[OsString],
        cwd: &Path,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> tokio::process::Command {
        use std::os::unix::process::CommandExt;
        let (program, argv) = match self.sandbox.as_deref() {
            Some(sandbox) => sandbox.wrap_server(program, args),
            None => (program.to_path_buf(), args.to_vec()),
        };
        let mut command = std::process::Command::new(program);
        command.args(argv).current_dir(cwd).process_group(0);
        self.apply_env(&mut command);
        command.envs(env);
        tokio::process::Command::from(command)
    }
}
