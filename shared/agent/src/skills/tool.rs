//! The LoadSkill tool and the narrowing a loaded skill puts on a run.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::load::{Catalog, Mode, Skill};
use super::script_tool::{SkillTool, registered_name};
use crate::event::{EventSink, RunOutcome};
use crate::hooks::{AgentHook, PromptDecision};
use crate::tool::{
    ScopeError, ScopeId, ToolContext, ToolKind, ToolOutput, ToolRegistry, ToolScope, TypedTool,
    WeakToolRegistry,
};

/// Starts a fork-mode skill as a sub-agent with a fresh context: the agent's
/// sub-agent runtime, held so that it does not keep the runtime alive (the runtime
/// keeps these skills). Skills know no sub-agents; the runtime implements this.
pub trait SkillFork: Send + Sync {
    /// Runs `skill` with `arguments` as a sub-agent and returns its report; `None`
    /// when the runtime is gone.
    fn run<'a>(
        &'a self,
        skill: &'a Skill,
        arguments: &'a str,
        ctx: &'a ToolContext,
    ) -> Option<BoxFuture<'a, ToolOutput>>;

    /// Whether the runtime can still start a sub-agent.
    fn available(&self) -> bool;
}

/// The body of `skill` as the model reads it, with `$ARGUMENTS` replaced by
/// `arguments` (appended when the body does not use it and arguments were given).
pub fn expand(skill: &Skill, arguments: &str) -> String {
    let arguments = arguments.trim();
    let mut text = format!(
        "<skill name=\"{}\" source=\"{}\">\n",
        skill.name, skill.source
    );
    if skill.body.contains("$ARGUMENTS") {
        text.push_str(&skill.body.replace("$ARGUMENTS", arguments));
    } else {
        text.push_str(&skill.body);
        if !arguments.is_empty() {
            let _ = write!(text, "\n\nARGUMENTS: {arguments}");
        }
    }
    text.push_str("\n</skill>");
    if let Some(tools) = &skill.allowed_tools {
        let _ = write!(
            text,
            "\n\nFor the rest of this run only these tools can be called: {}, LoadSkill.",
            tools.join(", ")
        );
    }
    if !skill.tools.is_empty() {
        let names: Vec<String> = skill
            .tools
            .iter()
            .map(|t| registered_name(&skill.name, &t.name))
            .collect();
        let _ = write!(
            text,
            "\n\nThis skill brings its own tools, callable from now on: {}",
            names.join(", ")
        );
    }
    if !skill.references.is_empty() {
        let _ = write!(
            text,
            "\n\nThis skill has reference files; read one with LoadSkill {{\"name\": \"{}\", \"reference\": \"<file>\"}}: {}",
            skill.name,
            skill.references.join(", ")
        );
    }
    text
}

/// The scopes loaded skills put on one agent's registry. Each lasts until the run
/// ends (`stop`) — or, after a cancelled run, until the next prompt. A `/skill` typed
/// by the user queues its scope, applied when that prompt is submitted.
#[derive(Clone)]
pub struct SkillScopes {
    registry: WeakToolRegistry,
    state: Arc<Mutex<ScopeState>>,
    /// Runs fork-mode skills: the agent's sub-agent runtime, once it has one (weak:
    /// the runtime keeps these skills).
    fork: Arc<OnceLock<Box<dyn SkillFork>>>,
}

#[derive(Default)]
struct ScopeState {
    active: Vec<ScopeId>,
    queued: Vec<ToolScope>,
}

impl SkillScopes {
    /// The scopes of the agent whose tools are `registry`.
    pub fn new(registry: &ToolRegistry) -> Self {
        Self {
            registry: registry.downgrade(),
            state: Arc::default(),
            fork: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ScopeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The scope of `skill`, if it names its tools (LoadSkill stays callable).
    pub fn scope_of(skill: &Skill) -> Result<Option<ToolScope>, ScopeError> {
        skill
            .allowed_tools
            .as_ref()
            .map(|tools| {
                let mut names = tools.clone();
                names.push(LoadSkill::NAME.to_string());
                // A skill may always call the tools it brings.
                names.extend(
                    skill
                        .tools
                        .iter()
                        .map(|t| registered_name(&skill.name, &t.name)),
                );
                ToolScope::allow_only(format!("skill {}", skill.name), &names)
            })
            .transpose()
    }

    /// Registers the tools `skill` brings (its `tool.json`) in the registry, replacing
    /// an older version of them (the skill changed since it was last loaded).
    pub fn register_tools(&self, skill: &Skill) {
        if let Some(registry) = self.registry.upgrade() {
            for tool in SkillTool::of(skill) {
                registry.register(Arc::new(tool));
            }
        }
    }

    /// Narrows the registry now, until the run ends.
    pub fn apply(&self, scope: ToolScope) {
        if let Some(registry) = self.registry.upgrade() {
            let id = registry.narrow(scope);
            self.lock().active.push(id);
        }
    }

    /// Narrows the registry when the next prompt is submitted (a `/skill` command).
    pub fn queue(&self, scope: ToolScope) {
        self.lock().queued.push(scope);
    }

    /// Lifts every scope a skill put on the registry.
    pub fn lift_all(&self) {
        let active = std::mem::take(&mut self.lock().active);
        if let Some(registry) = self.registry.upgrade() {
            for id in active {
                registry.lift(id);
            }
        }
    }
}

impl AgentHook for SkillScopes {
    fn user_prompt_submit<'a>(
        &'a self,
        _prompt: &'a str,
        _cancel: &'a CancellationToken,
        _events: &'a EventSink,
    ) -> BoxFuture<'a, PromptDecision> {
        // Scopes left by a cancelled run end here; a queued `/skill` begins.
        self.lift_all();
        let queued = std::mem::take(&mut self.lock().queued);
        for scope in queued {
            self.apply(scope);
        }
        Box::pin(async { PromptDecision::default() })
    }

    fn stop<'a>(
        &'a self,
        _outcome: &'a RunOutcome,
        _final_text: &'a str,
        _cancel: &'a CancellationToken,
        _events: &'a EventSink,
    ) -> BoxFuture<'a, ()> {
        self.lift_all();
        Box::pin(async {})
    }
}

/// How much of LoadSkill's description may describe skills; the rest are named only.
pub const MAX_LISTING_CHARS: usize = 8 * 1024;

/// Input of LoadSkill.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadSkillInput {
    #[allow(
        missing_docs,
        reason = "a doc comment would become part of the tool's input schema, which the model reads; the schema stays as it is"
    )]
    pub name: String,
    /// The user's arguments for the skill.
    #[serde(default)]
    pub arguments: Option<String>,
    /// A file of its `references/` to read instead.
    #[serde(default)]
    pub reference: Option<String>,
}

/// Loads a skill's instructions into the conversation and narrows the run's tools.
pub struct LoadSkill {
    catalog: Catalog,
    scopes: SkillScopes,
}

impl LoadSkill {
    /// A LoadSkill over `catalog`, activating scopes in `scopes`.
    pub fn new(catalog: Catalog, scopes: SkillScopes) -> Self {
        Self { catalog, scopes }
    }
}

impl TypedTool for LoadSkill {
    type Input = LoadSkillInput;
    const NAME: &'static str = "LoadSkill";

    fn description(&self) -> String {
        let scan = self.catalog.scan();
        let mut text = String::from(
            "Loads a skill: instructions for a kind of task. When a request matches one, load \
             it first and follow it.\n\nSkills:",
        );
        if scan.skills.is_empty() {
            text.push_str("\n(none)");
        }
        let mut names_only = Vec::new();
        for skill in scan.skills.values() {
            let mut line = format!("\n- {}: {}", skill.name, skill.description);
            if let Some(when) = &skill.when_to_use {
                let _ = write!(line, " When to use: {when}");
            }
            if let Some(args) = &skill.arguments {
                let _ = write!(line, " Arguments: {args}");
            }
            // Many or long skills must not crowd the prompt: past the budget, names only.
            if names_only.is_empty() && text.len() + line.len() <= MAX_LISTING_CHARS {
                text.push_str(&line);
            } else {
                names_only.push(skill.name.as_str());
            }
        }
        if !names_only.is_empty() {
            let _ = write!(
                text,
                "\nMore skills (load one to see what it does): {}",
                names_only.join(", ")
            );
        }
        text
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        false
    }

    fn summarize(&self, input: &Value) -> Option<String> {
        let name = input.get("name").and_then(Value::as_str).unwrap_or("?");
        Some(format!("LoadSkill({name})"))
    }

    async fn run(&self, input: LoadSkillInput, ctx: &ToolContext) -> ToolOutput {
        let catalog = self.catalog.clone();
        // Scanning reads files: off the async threads.
        let scan = match tokio::task::spawn_blocking(move || catalog.scan()).await {
            Ok(scan) => scan,
            Err(e) => return ToolOutput::error(format!("failed to read the skills: {e}")),
        };
        for warning in &scan.warnings {
            tracing::warn!("{warning}");
        }
        let Some(skill) = scan.get(&input.name) else {
            let names: Vec<&str> = scan.skills.keys().map(String::as_str).collect();
            return ToolOutput::error(format!(
                "failed to load skill \"{}\": there is no such skill. Available skills: {}",
                input.name,
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ));
        };
        if let Some(reference) = &input.reference {
            let skill = skill.clone();
            let reference = reference.clone();
            return match tokio::task::spawn_blocking(move || skill.read_reference(&reference)).await
            {
                Ok(Ok(text)) => ToolOutput::ok(text),
                Ok(Err(e)) => ToolOutput::error(format!("failed to read a reference: {e}")),
                Err(e) => ToolOutput::error(format!("failed to read a reference: {e}")),
            };
        }
        if skill.mode == Mode::Fork {
            // A sub-agent with a fresh context runs it; only its report comes back.
            let arguments = input.arguments.as_deref().unwrap_or("");
            let Some(report) = self
                .scopes
                .fork
                .get()
                .and_then(|fork| fork.run(skill, arguments, ctx))
            else {
                return ToolOutput::error(format!(
                    "failed to load skill \"{}\": it runs in fork mode (a sub-agent with a \
                     fresh context), and this agent cannot start sub-agents (none are \
                     configured, or the nesting depth limit agents.max_depth is reached). Tell \
                     the user; do not try to follow the skill inline.",
                    skill.name
                ));
            };
            return report.await;
        }
        match SkillScopes::scope_of(skill) {
            Ok(Some(scope)) => self.scopes.apply(scope),
            Ok(None) => {}
            Err(e) => return ToolOutput::error(format!("failed to load skill: {e}")),
        }
        self.scopes.register_tools(skill);
        ToolOutput::ok(expand(skill, input.arguments.as_deref().unwrap_or("")))
    }
}

/// An agent's skills, for a UI: the catalog and the scopes hook of its LoadSkill.
#[derive(Clone)]
pub struct Skills {
    /// The skills the agent can load.
    pub catalog: Catalog,
    /// The scopes hook of its LoadSkill (which skill's tools are active).
    pub scopes: SkillScopes,
}

/// What a `/name args` line typed by the user turns into.
#[derive(Debug, PartialEq, Eq)]
pub enum SkillCommand {
    /// No skill of that name: not a skill command.
    NotASkill,
    /// Send this prompt; the skill's tool scope is queued for its run.
    Prompt(String),
    /// The skill cannot run; tell the user.
    Refused(String),
}

impl Skills {
    /// Registers LoadSkill over `catalog` in `tools`; the returned handle's `scopes`
    /// must be added to the agent as a hook (it lifts them after each run).
    pub fn install(catalog: Catalog, tools: &ToolRegistry) -> Self {
        let scopes = SkillScopes::new(tools);
        tools.register(Arc::new(LoadSkill::new(catalog.clone(), scopes.clone())));
        Self { catalog, scopes }
    }

    /// Lets fork-mode skills run as sub-agents of `runtime` (the agent's own, held
    /// weakly: `SubagentRuntime::downgrade`).
    pub fn set_fork_runtime(&self, runtime: Box<dyn SkillFork>) {
        let _ = self.scopes.fork.set(runtime);
    }

    /// The same catalog bound to `registry` — a sub-agent's [`ToolRegistry::detached`]
    /// copy, whose LoadSkill would otherwise narrow the parent's registry. Add the
    /// returned `scopes` to the sub-agent as a hook.
    pub fn for_registry(&self, registry: &ToolRegistry) -> Self {
        Self::install(self.catalog.clone(), registry)
    }

    /// `/name args` typed by the user (without the slash): the skill's expanded body
    /// as the prompt, its scope queued for that run — as if the model had loaded it.
    pub fn command(&self, name: &str, arguments: &str) -> SkillCommand {
        let scan = self.catalog.scan();
        for warning in &scan.warnings {
            tracing::warn!("{warning}");
        }
        let Some(skill) = scan.get(name) else {
            return SkillCommand::NotASkill;
        };
        if skill.mode == Mode::Fork {
            // One path for fork skills: the model loads it, LoadSkill starts the sub-agent.
            if !self.scopes.fork.get().is_some_and(|fork| fork.available()) {
                return SkillCommand::Refused(format!(
                    "skill {} runs in fork mode (a sub-agent with a fresh context), and this \
                     session cannot start sub-agents",
                    skill.name
                ));
            }
            let arguments = arguments.trim();
            return SkillCommand::Prompt(format!(
                "Run the skill {name} now: call LoadSkill with {{\"name\": \"{name}\", \
                 \"arguments\": {args}}}. It runs as a sub-agent with a fresh context; when it \
                 returns, give me its report.",
                name = skill.name,
                args = serde_json::Value::String(arguments.to_string()),
            ));
        }
        match SkillScopes::scope_of(skill) {
            Ok(Some(scope)) => self.scopes.queue(scope),
            Ok(None) => {}
            Err(e) => return SkillCommand::Refused(e.to_string()),
        }
        self.scopes.register_tools(skill);
        SkillCommand::Prompt(expand(skill, arguments))
    }
}
