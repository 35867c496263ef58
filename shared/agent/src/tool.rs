//! The tool interface and registry.
//!
//! A tool does not know whether it runs for a lead, a teammate or a sub-agent: all it
//! gets is its input and a [`ToolContext`]. Permission checks happen before `call`, in
//! the loop, using [`Tool::permission_target`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use roo_llm::ToolSpec;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::sandbox::CommandSandbox;

/// What kind of effect a call has; the permission mode decides on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// Reads files or state only (ReadFile, Glob, Grep).
    Read,
    /// Writes files (WriteFile, EditFile).
    Write,
    /// Runs commands (Bash).
    Execute,
    /// Touches no files and runs nothing outside the agent (plan mode, task and
    /// message tools). Always allowed by the mode layer.
    Internal,
}

/// What a call will touch, for the dangerous-command, sandbox and rule layers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionTarget {
    /// Nothing outside the agent.
    None,
    /// A path as the model gave it (relative paths are resolved against the cwd).
    Path(PathBuf),
    /// A shell command line.
    Command(String),
}

/// Everything a tool call may use besides its input.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Working directory; relative paths are resolved against it.
    pub cwd: PathBuf,
    /// Directory of the current session, where large outputs spill.
    pub session_dir: PathBuf,
    /// Cancelled when the user stops the loop; tools must stop promptly and kill
    /// any child processes.
    pub cancel: CancellationToken,
    /// Extra environment for child processes (`ROO_HOME`, `ROO_TEAM`, `ROO_AGENT_NAME`).
    pub env: Vec<(String, String)>,
    /// Environment read when each command starts, after [`ToolContext::env`]: values
    /// that change during a session (the team a lead created).
    pub env_source: Option<EnvSource>,
    /// Outputs longer than this many characters spill to a file with a preview.
    pub max_result_chars: usize,
    /// Directories the file tools may open paths under (resolved): the
    /// permission policy's allowed roots, set by the loop for each call. The
    /// tools open files relative to a handle on one of them, so a symlink
    /// changed after the permission check cannot lead them outside. Empty
    /// means the working directory alone.
    pub allowed_roots: Vec<PathBuf>,
    /// Files the user's rules deny to reading; tools that read (Grep, Glob) skip
    /// them. The default skips nothing.
    pub read_filter: ReadFilter,
    /// How commands are started: through the sandbox helper, confined or not.
    /// `None` starts them directly, unconfined and unsupervised (unit tests).
    pub sandbox: Option<Arc<CommandSandbox>>,
    /// Variables removed from child processes' environment (API keys).
    pub env_remove: Vec<String>,
    /// The working directory is still being prepared (a teammate's worktree is checked
    /// out while its first model request is already on the way): the loop waits for
    /// this before it runs any call. `None`: ready.
    pub workspace: Option<WorkspaceGate>,
}

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

/// Opens a [`WorkspaceGate`]: once with the outcome of preparing the working
/// directory. Dropped without opening, the gate reports the preparation abandoned.
#[derive(Debug)]
pub struct WorkspaceOpener(tokio::sync::watch::Sender<Option<Result<(), String>>>);

/// What tool calls wait for while their working directory is being prepared.
/// Cheap to clone; every clone sees the one outcome.
#[derive(Debug, Clone)]
pub struct WorkspaceGate(tokio::sync::watch::Receiver<Option<Result<(), String>>>);

impl WorkspaceGate {
    /// A closed gate and the opener that opens it.
    pub fn new() -> (WorkspaceOpener, WorkspaceGate) {
        let (tx, rx) = tokio::sync::watch::channel(None);
        (WorkspaceOpener(tx), WorkspaceGate(rx))
    }

    /// Waits until the working directory is ready; the error says why it never will be.
    pub async fn ready(&self) -> Result<(), String> {
        let mut rx = self.0.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(outcome) => outcome.clone().unwrap_or(Ok(())),
            Err(_) => Err("its preparation was abandoned".to_string()),
        }
    }
}

impl WorkspaceOpener {
    /// Opens the gate: `Ok` lets calls run, `Err(why)` fails each of them with `why`.
    pub fn open(self, outcome: Result<(), String>) {
        self.0.send_replace(Some(outcome));
    }
}

/// Which files tools must not read or list: the paths a permission rule denies
/// to ReadFile (`ReadFile(.env)`), so a search does not reveal what a read may
/// not. Built by the permission policy; tools only ask it about paths.
#[derive(Clone, Default)]
pub struct ReadFilter(Option<Arc<DeniedFn>>);

/// Why reading a path is denied, or `None`.
type DeniedFn = dyn Fn(&Path) -> Option<String> + Send + Sync;

impl ReadFilter {
    /// A filter answering with `denied`: why reading a path is denied, or `None`.
    pub fn new(denied: impl Fn(&Path) -> Option<String> + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(denied)))
    }

    /// Why reading `path` is denied (e.g. "denied by the permission rule
    /// `ReadFile(.env)` …"), or `None`.
    pub fn denied(&self, path: &Path) -> Option<String> {
        self.0.as_ref().and_then(|f| f(path))
    }
}

impl fmt::Debug for ReadFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "ReadFilter(active)"
        } else {
            "ReadFilter(none)"
        })
    }
}

impl ToolContext {
    /// Default [`ToolContext::max_result_chars`].
    pub const DEFAULT_MAX_RESULT_CHARS: usize = 100_000;

    /// A context for `cwd` with no extra environment, a fresh cancellation token and
    /// the default result cap. Callers override fields with struct-update syntax, so
    /// adding a field does not touch every construction site.
    pub fn new(cwd: PathBuf, session_dir: PathBuf) -> Self {
        Self {
            cwd,
            session_dir,
            cancel: CancellationToken::new(),
            env: Vec::new(),
            env_source: None,
            max_result_chars: Self::DEFAULT_MAX_RESULT_CHARS,
            allowed_roots: Vec::new(),
            read_filter: ReadFilter::default(),
            sandbox: None,
            env_remove: Vec::new(),
            workspace: None,
        }
    }
}

/// The result of one call, as returned to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
        }
    }

    /// An error result; the loop continues and the model sees the message.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
        }
    }
}

/// A capability offered to the model.
pub trait Tool: Send + Sync {
    /// Name the model calls it by (`ReadFile`, `mcp__server__tool`).
    fn name(&self) -> &str;

    /// Description sent to the model. Precise: it decides how well the model uses it.
    fn description(&self) -> String;

    /// JSON Schema of the input object.
    fn input_schema(&self) -> Value;

    /// Effect class for the permission mode layer.
    fn kind(&self) -> ToolKind;

    /// Whether this call may run at the same time as other concurrency-safe calls.
    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        false
    }

    /// What this call touches, for permission checks.
    fn permission_target(&self, _input: &Value) -> PermissionTarget {
        PermissionTarget::None
    }

    /// One-line human summary of a call, e.g. `Bash(cargo test)`, for UIs.
    fn summarize(&self, input: &Value) -> String {
        match self.permission_target(input) {
            PermissionTarget::None => self.name().to_string(),
            PermissionTarget::Path(p) => format!("{}({})", self.name(), p.display()),
            PermissionTarget::Command(c) => format!("{}({})", self.name(), c),
        }
    }

    /// Runs the call. Invalid input is an error result, not a panic.
    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput>;

    /// The spec offered to the model.
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_string(),
            description: self.description(),
            input_schema: self.input_schema(),
        }
    }
}

/// The set of tools an agent has. Order is stable (by name) so the tools part of the
/// prompt stays cacheable.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.name().to_string(), tool);
    }

    /// Removes a tool by name; returns whether it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        self.tools.remove(name).is_some()
    }

    /// Looks a tool up by name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Names of all tools.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// Specs of all tools, for the request.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec()).collect()
    }

    /// Keeps only the tools for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.tools.retain(|name, _| keep(name));
    }
}
