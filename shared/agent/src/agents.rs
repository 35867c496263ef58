//! Agent definitions: the roles a sub-agent can be started with (`subagent_type`).
//!
//! A definition is a Markdown file `<name>.md` with YAML front matter (name,
//! description, tools, disallowed_tools, model, max_turns, permission_mode,
//! background, isolation, budget) and a body that is the role's system prompt. Built-in ones
//! (`agents/` at the repository's top level: Explore, Plan, general-purpose, and the
//! opt-in Verification) are embedded in the binary; more come from
//! `<ROO_HOME>/agents/` and, for a trusted project only, `<project>/.roocode/agents/`.
//! A project file replaces a user file of the same name, which replaces a built-in one
//! — the whole definition, no field merging. Names are looked up case-insensitively.
//!
//! User and project files are untrusted input: sizes and counts are bounded, names,
//! tool names and models are validated, symlinks are not followed, and a bad file is
//! skipped with a warning naming it. A definition only describes a role; the
//! sub-agent runtime decides what it may do (a definition's permission mode can only
//! make its parent's stricter). The folders are read again on every scan, so a new or
//! changed file is picked up without a restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use crate::front_matter::DefinitionSource;
use crate::front_matter::{self, one_line};
use crate::permissions::PermissionMode;
use crate::tool::{ScopeError, ToolScope};

/// Longest definition file read, in bytes.
pub const MAX_DEFINITION_BYTES: u64 = 64 * 1024;
/// Most definition files loaded from one folder.
pub const MAX_DEFINITIONS_PER_DIR: usize = 200;
/// Longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Most turns a definition may ask for.
pub const MAX_TURNS_LIMIT: u32 = 500;
/// Longest name and longest model name.
const MAX_NAME_CHARS: usize = 64;
const MAX_MODEL_CHARS: usize = 128;

/// The built-in definitions, embedded in the binary: (file stem, text, opt-in).
const BUILTIN: &[(&str, &str, bool)] = &[
    ("explore", include_str!("../../../agents/explore.md"), false),
    ("plan", include_str!("../../../agents/plan.md"), false),
    (
        "general-purpose",
        include_str!("../../../agents/general-purpose.md"),
        false,
    ),
    (
        "verification",
        include_str!("../../../agents/verification.md"),
        true,
    ),
];

/// Where a sub-agent works: in a definition's `isolation:` and in an Agent call's
/// `isolation` (so it is part of the Agent tool's input schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(
    missing_docs,
    reason = "variant doc comments would turn the schema's `enum` into a `oneOf`"
)]
pub enum Isolation {
    // In a new git worktree of the project, on its own branch.
    Worktree,
}

/// One parsed agent definition.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDefinition {
    /// As written (`Explore`); lookups are case-insensitive.
    pub name: String,
    /// When to use it: shown to the model with the Agent tool.
    pub description: String,
    /// `Some`: only these tools (tool-filter names, `mcp__github__*`); `None`: every tool.
    pub tools: Option<Vec<String>>,
    /// Tools it may never call.
    pub disallowed_tools: Vec<String>,
    /// `None`: the parent's model; otherwise a model name or an alias (`haiku`).
    pub model: Option<String>,
    /// Most turns a run of it may take, if it sets a limit.
    pub max_turns: Option<u32>,
    /// The permission mode its runs use, if it sets one.
    pub permission_mode: Option<PermissionMode>,
    /// It always runs in the background.
    pub background: bool,
    /// Where it works, if not in the parent's working directory.
    pub isolation: Option<Isolation>,
    /// Its spending cap per run (`budget: {usd, requests}`); its spend counts toward its
    /// parent's caps as well.
    pub budget: Option<DefinitionBudget>,
    /// The body: the role's system prompt.
    pub prompt: String,
    /// Where the definition came from.
    pub source: DefinitionSource,
    /// The file it was read from; `None` for a built-in one.
    pub path: Option<PathBuf>,
}

/// A definition's spending cap (`budget:` in its front matter).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefinitionBudget {
    /// Most USD a run of it spends.
    #[serde(default)]
    pub usd: Option<f64>,
    /// Most model requests a run of it makes.
    #[serde(default)]
    pub requests: Option<u64>,
}

impl AgentDefinition {
    /// Layer 4 of a sub-agent's tool filter: `tools` and `disallowed_tools` as one
    /// scope, or `None` when the definition names neither.
    pub fn tool_scope(&self) -> Result<Option<ToolScope>, ScopeError> {
        let label = format!("agent type {}", self.name);
        match &self.tools {
            Some(tools) => Ok(Some(
                ToolScope::allow_only(label, tools)?.denying(&self.disallowed_tools)?,
            )),
            None if self.disallowed_tools.is_empty() => Ok(None),
            None => ToolScope::deny(label, &self.disallowed_tools).map(Some),
        }
    }
}

/// Why a definition was not loaded. Names the file.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionError {
    #[error("agent file {}: {message}", path.display())]
    /// The file does not parse or breaks a rule; `message` says which.
    Invalid {
        /// The definition file.
        path: PathBuf,
        /// What is wrong, in words a user can act on.
        message: String,
    },
    #[error("failed to read agent file {}: {source}", path.display())]
    /// The file could not be read.
    Io {
        /// The definition file.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
}

fn invalid(path: &Path, message: impl Into<String>) -> DefinitionError {
    DefinitionError::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    name: String,
    description: String,
    #[serde(default)]
    tools: Option<ToolList>,
    #[serde(default, alias = "disallowedTools", alias = "disallowed-tools")]
    disallowed_tools: Option<ToolList>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default, alias = "maxTurns", alias = "max-turns")]
    max_turns: Option<u32>,
    #[serde(default, alias = "permissionMode", alias = "permission-mode")]
    permission_mode: Option<String>,
    #[serde(default)]
    background: bool,
    #[serde(default)]
    isolation: Option<String>,
    #[serde(default)]
    budget: Option<DefinitionBudget>,
    /// Accepted for files written for other agents; the UI picks colours itself.
    #[serde(default)]
    #[expect(dead_code, reason = "accepted and ignored")]
    color: Option<String>,
}

/// A tool list as a YAML list or a comma-separated string (`ReadFile, Grep`).
#[derive(Deserialize)]
#[serde(untagged)]
enum ToolList {
    Text(String),
    Names(Vec<String>),
}

impl ToolList {
    fn names(self) -> Vec<String> {
        let names = match self {
            ToolList::Text(text) => text
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect(),
            ToolList::Names(names) => names,
        };
        names.into_iter().map(|n| canonical_tool(&n)).collect()
    }
}

/// Our name for a tool named the way other agents' definition files name it, so such
/// a file works here unchanged (`Read` → `ReadFile`). Other names pass through.
fn canonical_tool(name: &str) -> String {
    let name = name.trim();
    match name {
        "Read" => "ReadFile",
        "Write" => "WriteFile",
        "Edit" | "MultiEdit" => "EditFile",
        "Task" => "Agent",
        other => other,
    }
    .to_string()
}

/// Whether `name` may name an agent type: ASCII letters, digits, `-` and `_`, starting
/// with a letter or digit, at most 64 characters.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && name.as_bytes()[0].is_ascii_alphanumeric()
}

/// Whether `model` looks like a model name (`claude-haiku-4-5`, `gpt-4.1`,
/// `openai/gpt-4o`, `llama3:8b`): no spaces or control characters, bounded.
fn valid_model(model: &str) -> bool {
    !model.is_empty()
        && model.len() <= MAX_MODEL_CHARS
        && model
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:/@".contains(&b))
}

/// Parses an agent file's text. `path` names the file in errors; `stem` is the file
/// name without `.md`, which must equal the name up to case.
pub fn parse_definition(
    text: &str,
    path: &Path,
    stem: &str,
    source: DefinitionSource,
) -> Result<AgentDefinition, DefinitionError> {
    let (front, body) =
        front_matter::parse::<FrontMatter>(text).map_err(|message| invalid(path, message))?;
    if !valid_name(&front.name) {
        return Err(invalid(
            path,
            format!(
                "name `{}` is not valid: use letters, digits, `-` and `_` (at most {MAX_NAME_CHARS})",
                front.name
            ),
        ));
    }
    if !front.name.eq_ignore_ascii_case(stem) {
        return Err(invalid(
            path,
            format!(
                "name `{}` differs from the file name `{stem}.md`; make them equal",
                front.name
            ),
        ));
    }
    let description = one_line(&front.description);
    if description.is_empty() {
        return Err(invalid(path, "description is empty"));
    }
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(invalid(
            path,
            format!("description is longer than {MAX_DESCRIPTION_CHARS} characters"),
        ));
    }
    let model = match front.model.map(|m| m.trim().to_string()) {
        None => None,
        Some(m) if m.eq_ignore_ascii_case("inherit") => None,
        Some(m) if valid_model(&m) => Some(m),
        Some(m) => {
            return Err(invalid(
                path,
                format!(
                    "model `{m}` is not a model name (letters, digits and `-_.:/@`, at most {MAX_MODEL_CHARS}); write `inherit` for the parent's"
                ),
            ));
        }
    };
    if let Some(turns) = front.max_turns
        && !(1..=MAX_TURNS_LIMIT).contains(&turns)
    {
        return Err(invalid(
            path,
            format!("max_turns {turns} is out of range 1..={MAX_TURNS_LIMIT}"),
        ));
    }
    let permission_mode = front
        .permission_mode
        .as_deref()
        .map(str::parse::<PermissionMode>)
        .transpose()
        .map_err(|e| invalid(path, format!("permission_mode: {e}")))?;
    let isolation = match front.isolation.as_deref().map(str::trim) {
        None | Some("" | "none") => None,
        Some("worktree") => Some(Isolation::Worktree),
        Some(other) => {
            return Err(invalid(
                path,
                format!("isolation `{other}` is not known: write `worktree` or leave it out"),
            ));
        }
    };
    if let Some(usd) = front.budget.and_then(|b| b.usd)
        && !(usd.is_finite() && usd >= 0.0)
    {
        return Err(invalid(
            path,
            format!("budget.usd must be an amount of USD of 0 or more, not {usd}"),
        ));
    }
    if body.is_empty() {
        return Err(invalid(
            path,
            "the body (the role's system prompt after the front matter) is empty",
        ));
    }
    let definition = AgentDefinition {
        name: front.name,
        description,
        tools: front.tools.map(ToolList::names),
        disallowed_tools: front
            .disallowed_tools
            .map(ToolList::names)
            .unwrap_or_default(),
        model,
        max_turns: front.max_turns,
        permission_mode,
        background: front.background,
        isolation,
        budget: front.budget,
        prompt: body,
        source,
        path: None,
    };
    // The same validation the registry applies when the scope narrows a run.
    definition
        .tool_scope()
        .map_err(|e| invalid(path, format!("tools: {e}")))?;
    Ok(definition)
}

/// The built-in definitions; `verification` adds the opt-in Verification agent. Each
/// is checked by a test, so this never fails in a release.
pub fn builtin(verification: bool) -> Vec<AgentDefinition> {
    BUILTIN
        .iter()
        .filter(|(_, _, opt_in)| verification || !opt_in)
        .filter_map(|(stem, text, _)| {
            let path = PathBuf::from(format!("<built-in>/agents/{stem}.md"));
            parse_definition(text, &path, stem, DefinitionSource::BuiltIn)
                .inspect_err(|e| tracing::error!("{e}"))
                .ok()
        })
        .collect()
}

/// The result of one scan: the definitions by lowercase name and what was skipped.
#[derive(Debug, Clone, Default)]
pub struct AgentScan {
    /// The definitions by lowercase name.
    pub agents: BTreeMap<String, AgentDefinition>,
    /// One line per skipped file or folder, naming it.
    pub warnings: Vec<String>,
}

impl AgentScan {
    /// The definition called `name`, case-insensitively (`explore` finds `Explore`).
    pub fn get(&self, name: &str) -> Option<&AgentDefinition> {
        self.agents.get(&name.trim().to_ascii_lowercase())
    }

    /// The definitions in name order.
    pub fn iter(&self) -> impl Iterator<Item = &AgentDefinition> {
        self.agents.values()
    }

    /// The names as written, in order (for "unknown agent type; known: …").
    pub fn names(&self) -> Vec<&str> {
        self.agents.values().map(|d| d.name.as_str()).collect()
    }
}

/// Where agent definitions are found. Cheap to clone; [`AgentCatalog::scan`] reads
/// the folders again.
#[derive(Debug, Clone)]
pub struct AgentCatalog {
    user_dir: Option<PathBuf>,
    /// `None` when the project is not trusted (its definitions are ignored).
    project_dir: Option<PathBuf>,
    /// Which built-in definitions are offered: `None` none, `Some(v)` the standard
    /// ones, plus Verification when `v`.
    builtin: Option<bool>,
}

impl AgentCatalog {
    /// Definitions of `<roo_home>/agents/` and, only when `trusted`, of
    /// `<project_root>/.roocode/agents/`, over the built-in ones; `verification` adds
    /// the opt-in built-in Verification agent.
    pub fn new(roo_home: &Path, project_root: &Path, trusted: bool, verification: bool) -> Self {
        Self {
            user_dir: Some(roo_home.join("agents")),
            project_dir: trusted.then(|| project_root.join(".roocode").join("agents")),
            builtin: Some(verification),
        }
    }

    /// A catalog of exactly these folders and no built-in definitions (tests).
    pub fn from_dirs(user_dir: Option<PathBuf>, project_dir: Option<PathBuf>) -> Self {
        Self {
            user_dir,
            project_dir,
            builtin: None,
        }
    }

    /// Reads every definition now: built-in, then user, then project, a later one
    /// replacing an earlier one of the same name (up to case).
    pub fn scan(&self) -> AgentScan {
        let mut scan = AgentScan::default();
        if let Some(verification) = self.builtin {
            for definition in builtin(verification) {
                scan.agents
                    .insert(definition.name.to_ascii_lowercase(), definition);
            }
        }
        for (dir, source) in [
            (&self.user_dir, DefinitionSource::User),
            (&self.project_dir, DefinitionSource::Project),
        ] {
            if let Some(dir) = dir {
                scan_dir(dir, source, &mut scan);
            }
        }
        scan
    }
}

fn scan_dir(dir: &Path, source: DefinitionSource, scan: &mut AgentScan) {
    let files = front_matter::list_dir(
        dir,
        front_matter::Entries::MarkdownFiles,
        &format!("{source} agent files"),
        MAX_DEFINITIONS_PER_DIR,
        &mut scan.warnings,
    );
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (stem, path) in files {
        match load_file(&path, &stem, source) {
            Ok(definition) => {
                let key = definition.name.to_ascii_lowercase();
                if let Some(first) = seen.get(&key) {
                    scan.warnings.push(format!(
                        "skipped {}: it defines `{}` again after {} (names are case-insensitive)",
                        path.display(),
                        definition.name,
                        first.display()
                    ));
                    continue;
                }
                seen.insert(key.clone(), path);
                scan.agents.insert(key, definition);
            }
            Err(e) => scan
                .warnings
                .push(format!("skipped a {source} agent definition: {e}")),
        }
    }
}

fn load_file(
    path: &Path,
    stem: &str,
    source: DefinitionSource,
) -> Result<AgentDefinition, DefinitionError> {
    let text = front_matter::read_bounded(path, MAX_DEFINITION_BYTES).map_err(|e| match e {
        front_matter::ReadError::Invalid(message) => invalid(path, message),
        front_matter::ReadError::Io(source) => DefinitionError::Io {
            path: path.to_path_buf(),
            source,
        },
    })?;
    let mut definition = parse_definition(&text, path, stem, source)?;
    definition.path = Some(path.to_path_buf());
    Ok(definition)
}

#[cfg(test)]
mod tests;
