//! The tool interface and registry.
//!
//! A tool does not know whether it runs for a lead, a teammate or a sub-agent: all it
//! gets is its input and a [`ToolContext`]. Permission checks happen before `call`, in
//! the loop, using [`Tool::permission_target`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use futures_util::future::BoxFuture;
use roo_llm::ToolSpec;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::event::EventSink;
use crate::exec::Launcher;
use crate::permissions::Rule;

mod error;
mod kind;
mod typed;

pub use error::ToolError;
pub use kind::ToolKind;
pub use typed::{TypedTool, input_schema};

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
    /// How the call starts processes: sandbox, environment, team service.
    pub launcher: Launcher,
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
    /// The working directory is still being prepared (a teammate's worktree is checked
    /// out while its first model request is already on the way): the loop waits for
    /// this before it runs any call. `None`: ready.
    pub workspace: Option<WorkspaceGate>,
    /// What the model saw when it made this call, set by the loop for tools that
    /// ask for it ([`Tool::needs_conversation`]); `None` otherwise.
    pub conversation: Option<Arc<ConversationSnapshot>>,
    /// Where the call may report progress: the events of the run it belongs to, set
    /// by the loop. The default discards them.
    pub events: EventSink,
}

/// The request that led to a call, as the model saw it: the agent's system prompt
/// parts (without per-request additions such as the plan-mode reminder), the tool
/// list sent, and the messages up to and including the assistant message that made
/// the call. A tool that starts work from the same context (a fork) reads it here.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationSnapshot {
    /// The system prompt parts.
    pub system: Vec<String>,
    /// The tool list sent.
    pub tools: Vec<ToolSpec>,
    /// The messages up to the call.
    pub messages: Vec<roo_llm::Message>,
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
            launcher: Launcher::new(None),
            max_result_chars: Self::DEFAULT_MAX_RESULT_CHARS,
            allowed_roots: Vec::new(),
            read_filter: ReadFilter::default(),
            workspace: None,
            conversation: None,
            events: EventSink::discard(),
        }
    }
}

/// The result of one call, as returned to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text the model gets.
    pub content: String,
    /// The call failed; the model sees an error result.
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

/// Which sub-agents may call a tool: a property each tool declares (the default is
/// every sub-agent), read by the sub-agent tool filter instead of a list of names, so the
/// filter names no tool it does not own and a new tool is never silently missing from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delegation {
    /// Every sub-agent may call it.
    #[default]
    AnyAgent,
    /// Sub-agents of built-in definitions only: one defined in a user or project file
    /// (which may come from a cloned repository) must not speak for the lead to its
    /// team, rewrite the shared task list, stop work or fan out into more agents.
    BuiltInAgents,
    /// No sub-agent: team management (a child that created or deleted a team would
    /// change the lead's team under it), plan mode (bound to the parent's policy and
    /// plan file) and a teammate's answer to its lead's shutdown request.
    NoSubAgent,
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

    /// Whether a call needs the conversation that led to it
    /// ([`ToolContext::conversation`]); the loop copies it only for such tools.
    fn needs_conversation(&self) -> bool {
        false
    }

    /// A tool that acts on the registry it is registered in (ToolSearch reveals
    /// there) returns a copy bound to `registry` — the [detached](ToolRegistry::detached)
    /// copy of its registry, which gets that copy instead of this tool. `None`: the
    /// tool does not depend on its registry and is shared as it is.
    fn rebind(&self, _registry: &ToolRegistry) -> Option<Arc<dyn Tool>> {
        None
    }

    /// Whether the tool only makes sense with a human (or an interactive parent) at
    /// hand: plan mode, questions to the user. Agents nobody can answer (background
    /// sub-agents) are refused such tools — a property of the tool, so a new tool is
    /// never silently missing from or added to that list.
    fn requires_interaction(&self) -> bool {
        false
    }

    /// Which sub-agents may call it.
    fn delegation(&self) -> Delegation {
        Delegation::AnyAgent
    }

    /// Whether it starts or stops sub-agents (`Agent`, `TaskStop`): refused to a
    /// sub-agent once the nesting depth limit is reached.
    fn manages_sub_agents(&self) -> bool {
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

/// A narrowing of the tools a run may call: one layer of a sub-agent's tool
/// filter, a skill's `allowed_tools`. Names are written like permission rules
/// without a pattern (`ReadFile`, `mcp__github__*`). The registry enforces every
/// scope when a call executes, not only in the tool list sent to the model.
#[derive(Debug, Clone)]
pub struct ToolScope {
    /// Who narrowed, for the refusal the model reads (`skill review`).
    label: String,
    /// `Some`: only these tools; `None`: every tool not denied.
    allow: Option<Vec<Rule>>,
    deny: Vec<Rule>,
    /// Refuses every tool whose properties it holds for (judged when a call executes,
    /// so a tool registered later is judged too).
    refuses: Option<fn(&dyn Tool) -> bool>,
}

/// A tool filter names something that is not a tool name.
#[derive(Debug, thiserror::Error)]
#[error("tool filter of {label}: `{name}` {message}")]
pub struct ScopeError {
    /// What the filter belongs to.
    pub label: String,
    /// The name that is not a tool.
    pub name: String,
    /// What is wrong with it.
    pub message: String,
}

impl ToolScope {
    /// Only the tools named in `allow` (and not denied by another scope).
    pub fn allow_only<S: AsRef<str>>(
        label: impl Into<String>,
        allow: &[S],
    ) -> Result<Self, ScopeError> {
        let label = label.into();
        let allow = Some(parse_names(&label, allow)?);
        Ok(Self {
            label,
            allow,
            deny: Vec::new(),
            refuses: None,
        })
    }

    /// Every tool except those named in `deny`.
    pub fn deny<S: AsRef<str>>(label: impl Into<String>, deny: &[S]) -> Result<Self, ScopeError> {
        let label = label.into();
        let deny = parse_names(&label, deny)?;
        Ok(Self {
            label,
            allow: None,
            deny,
            refuses: None,
        })
    }

    /// Every tool except those for which `refuses` holds: a narrowing by the tools'
    /// own properties ([`Tool::delegation`], [`Tool::manages_sub_agents`]).
    pub fn deny_where(label: impl Into<String>, refuses: fn(&dyn Tool) -> bool) -> Self {
        Self {
            label: label.into(),
            allow: None,
            deny: Vec::new(),
            refuses: Some(refuses),
        }
    }

    /// This scope, also refusing the tools named in `deny` (an agent type's
    /// `tools` with its `disallowed_tools`).
    pub fn denying<S: AsRef<str>>(mut self, deny: &[S]) -> Result<Self, ScopeError> {
        self.deny.extend(parse_names(&self.label, deny)?);
        Ok(self)
    }

    /// Who narrowed.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Whether this scope lets `name` be called.
    pub fn admits(&self, name: &str) -> bool {
        let allowed = self
            .allow
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|r| r.names_tool(name)));
        allowed && !self.deny.iter().any(|r| r.names_tool(name))
    }

    /// Whether this scope lets `tool`, registered as `name`, be called: by its name
    /// and by its properties.
    pub fn admits_tool(&self, name: &str, tool: &dyn Tool) -> bool {
        self.admits(name) && !self.refuses.is_some_and(|refuses| refuses(tool))
    }
}

fn parse_names<S: AsRef<str>>(label: &str, names: &[S]) -> Result<Vec<Rule>, ScopeError> {
    names
        .iter()
        .map(|name| {
            let name = name.as_ref();
            let fail = |message: String| ScopeError {
                label: label.to_string(),
                name: name.to_string(),
                message,
            };
            let rule = Rule::parse(name).map_err(|e| fail(e.message))?;
            if rule.has_pattern() {
                return Err(fail(
                    "has a pattern in parentheses; a tool filter names whole tools (`Bash`, \
                     `mcp__github__*`), narrow what a tool may do with permission rules"
                        .to_string(),
                ));
            }
            Ok(rule)
        })
        .collect()
}

/// Identifies a scope added with [`ToolRegistry::narrow`], to lift it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScopeId(u64);

/// What a name refers to when the model calls it.
#[derive(Clone)]
pub enum Lookup {
    /// A tool the model has the schema of.
    Ready(Arc<dyn Tool>),
    /// A deferred tool whose schema has not been sent yet.
    Deferred(Arc<dyn Tool>),
    /// A registered tool that a scope keeps this run from calling; says which.
    Refused {
        /// The scope that refuses it.
        scope: String,
    },
    /// No tool of that name.
    Unknown,
}

/// The tools an agent has. A handle: clones share one set, so a tool registered
/// while a run is under way (by ToolSearch, an MCP server that connected late)
/// is in the next request's tool list, and the UI and the loop see the same set.
///
/// A tool is *loaded* (its schema goes with every request) or *deferred* (only
/// its name is known until it is [revealed](ToolRegistry::reveal); then its
/// schema goes with every request). [Scopes](ToolScope) narrow what may be
/// called; a call outside them is refused when it executes, whatever the model
/// saw. Order is stable (by name) so the tools part of the prompt stays cacheable.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    inner: Arc<RwLock<Catalog>>,
}

#[derive(Clone, Default)]
struct Catalog {
    tools: BTreeMap<String, Entry>,
    scopes: Vec<(ScopeId, ToolScope)>,
    next_scope: u64,
    /// Called with every detached copy (and copies of copies): what keeps adding
    /// tools to this registry after it was copied (MCP servers that connect late)
    /// follows it to the copies.
    on_detach: Vec<DetachHook>,
}

/// See [`ToolRegistry::on_detach`].
type DetachHook = Arc<dyn Fn(&ToolRegistry) + Send + Sync>;

#[derive(Clone)]
struct Entry {
    tool: Arc<dyn Tool>,
    /// Its schema goes with requests: loaded, or deferred and revealed.
    shown: bool,
}

impl Catalog {
    /// The scope that refuses `name`, if any.
    fn refusing(&self, name: &str) -> Option<&ToolScope> {
        let tool = self.tools.get(name).map(|entry| entry.tool.as_ref());
        self.scopes
            .iter()
            .map(|(_, scope)| scope)
            .find(|scope| match tool {
                Some(tool) => !scope.admits_tool(name, tool),
                None => !scope.admits(name),
            })
    }

    fn admitted(&self) -> impl Iterator<Item = (&String, &Entry)> {
        self.tools
            .iter()
            .filter(|(name, _)| self.refusing(name).is_none())
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Catalog> {
        // Nothing panics while holding the lock; a poisoned one is still consistent.
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Catalog> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds or replaces a tool whose schema goes with every request.
    pub fn register(&self, tool: Arc<dyn Tool>) {
        let entry = Entry { tool, shown: true };
        self.write()
            .tools
            .insert(entry.tool.name().to_string(), entry);
    }

    /// Adds or replaces a deferred tool: only its name is known to the model (see
    /// [`ToolRegistry::deferred_names`]) until [`ToolRegistry::reveal`] sends its
    /// schema from the next request on.
    pub fn register_deferred(&self, tool: Arc<dyn Tool>) {
        let entry = Entry { tool, shown: false };
        self.write()
            .tools
            .insert(entry.tool.name().to_string(), entry);
    }

    /// Sends the schemas of these deferred tools from the next request on. Returns
    /// the names that were deferred and are now revealed (unknown, refused and
    /// already shown names are left out).
    pub fn reveal<S: AsRef<str>>(&self, names: &[S]) -> Vec<String> {
        let mut catalog = self.write();
        let mut revealed = Vec::new();
        for name in names {
            let name = name.as_ref();
            if catalog.refusing(name).is_some() {
                continue;
            }
            if let Some(entry) = catalog.tools.get_mut(name)
                && !entry.shown
            {
                entry.shown = true;
                revealed.push(name.to_string());
            }
        }
        revealed
    }

    /// Removes a tool by name; returns whether it was there.
    pub fn remove(&self, name: &str) -> bool {
        self.write().tools.remove(name).is_some()
    }

    /// What the model calls when it calls `name`.
    pub fn lookup(&self, name: &str) -> Lookup {
        let catalog = self.read();
        let Some(entry) = catalog.tools.get(name) else {
            return Lookup::Unknown;
        };
        if let Some(scope) = catalog.refusing(name) {
            return Lookup::Refused {
                scope: scope.label().to_string(),
            };
        }
        if entry.shown {
            Lookup::Ready(entry.tool.clone())
        } else {
            Lookup::Deferred(entry.tool.clone())
        }
    }

    /// A tool this run may call (loaded or deferred), by name.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        match self.lookup(name) {
            Lookup::Ready(tool) | Lookup::Deferred(tool) => Some(tool),
            Lookup::Refused { .. } | Lookup::Unknown => None,
        }
    }

    /// Names of the tools this run may call, deferred ones included.
    pub fn names(&self) -> Vec<String> {
        self.read().admitted().map(|(n, _)| n.clone()).collect()
    }

    /// Names of the deferred tools this run may call whose schemas have not been
    /// sent: what a prompt lists and ToolSearch searches.
    pub fn deferred_names(&self) -> Vec<String> {
        self.read()
            .admitted()
            .filter(|(_, e)| !e.shown)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The deferred tools not revealed yet, for a search over their descriptions.
    pub fn deferred_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.read()
            .admitted()
            .filter(|(_, e)| !e.shown)
            .map(|(_, e)| e.tool.clone())
            .collect()
    }

    /// Specs for the request: every tool this run may call whose schema is shown.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.read()
            .admitted()
            .filter(|(_, e)| e.shown)
            .map(|(_, e)| e.tool.spec())
            .collect()
    }

    /// Keeps only the tools for which `keep` returns true.
    pub fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        self.write().tools.retain(|name, _| keep(name));
    }

    /// Narrows what may be called until the scope is [lifted](ToolRegistry::lift).
    /// Scopes add up: a call must pass every one, so a narrowing never widens.
    pub fn narrow(&self, scope: ToolScope) -> ScopeId {
        let mut catalog = self.write();
        let id = ScopeId(catalog.next_scope);
        catalog.next_scope += 1;
        catalog.scopes.push((id, scope));
        id
    }

    /// Removes a scope; returns whether it was in force.
    pub fn lift(&self, id: ScopeId) -> bool {
        let mut catalog = self.write();
        let before = catalog.scopes.len();
        catalog.scopes.retain(|(scope, _)| *scope != id);
        catalog.scopes.len() != before
    }

    /// A handle that does not keep the registry alive: what a tool registered in
    /// this registry keeps of it (ToolSearch), so the two do not keep each other.
    pub fn downgrade(&self) -> WeakToolRegistry {
        WeakToolRegistry(Arc::downgrade(&self.inner))
    }

    /// An independent registry with the same tools, revealed set and scopes (a
    /// sub-agent's, which it may narrow without touching its parent's). Tools bound
    /// to this registry are [rebound](Tool::rebind) to the copy, and the
    /// [`ToolRegistry::on_detach`] hooks are called with it.
    pub fn detached(&self) -> ToolRegistry {
        let catalog = self.read().clone();
        let hooks = catalog.on_detach.clone();
        let copy = ToolRegistry {
            inner: Arc::new(RwLock::new(catalog)),
        };
        let rebound: Vec<(String, Arc<dyn Tool>)> = copy
            .read()
            .tools
            .iter()
            .filter_map(|(name, entry)| entry.tool.rebind(&copy).map(|t| (name.clone(), t)))
            .collect();
        {
            let mut catalog = copy.write();
            for (name, tool) in rebound {
                if let Some(entry) = catalog.tools.get_mut(&name) {
                    entry.tool = tool;
                }
            }
        }
        for hook in hooks {
            hook(&copy);
        }
        copy
    }

    /// Calls `hook` with every detached copy of this registry from now on (and with
    /// copies of those): for a source of tools that must reach sub-agents' registries
    /// too. The hook must not keep the copy alive (hold a [`WeakToolRegistry`]).
    pub fn on_detach(&self, hook: impl Fn(&ToolRegistry) + Send + Sync + 'static) {
        self.write().on_detach.push(Arc::new(hook));
    }
}

/// A [`ToolRegistry`] handle that does not keep it alive.
#[derive(Clone, Default)]
pub struct WeakToolRegistry(std::sync::Weak<RwLock<Catalog>>);

impl WeakToolRegistry {
    /// The registry, if it still exists.
    pub fn upgrade(&self) -> Option<ToolRegistry> {
        self.0.upgrade().map(|inner| ToolRegistry { inner })
    }
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let catalog = self.read();
        f.debug_struct("ToolRegistry")
            .field("tools", &catalog.tools.keys().collect::<Vec<_>>())
            .field(
                "scopes",
                &catalog
                    .scopes
                    .iter()
                    .map(|(_, s)| s.label())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}
