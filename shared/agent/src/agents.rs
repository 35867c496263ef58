//! THROWAWAY STAND-IN for the coordinator's `roo_agent::agents` (agent definitions).
//! Same public API; deleted when main's "Agent definitions" commit is merged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::permissions::PermissionMode;
use crate::tool::{ScopeError, ToolScope};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Builtin,
    User,
    Project,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    Worktree,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDefinition {
    pub name: String,
    pub description: String,
    pub tools: Option<Vec<String>>,
    pub disallowed_tools: Vec<String>,
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub permission_mode: Option<PermissionMode>,
    pub background: bool,
    pub isolation: Option<Isolation>,
    pub prompt: String,
    pub source: Source,
    pub path: Option<PathBuf>,
}

impl AgentDefinition {
    pub fn tool_scope(&self) -> Result<Option<ToolScope>, ScopeError> {
        let label = format!("agent type {}", self.name);
        match (&self.tools, self.disallowed_tools.is_empty()) {
            (None, true) => Ok(None),
            (None, false) => ToolScope::deny(label, &self.disallowed_tools).map(Some),
            (Some(tools), _) => {
                let keep: Vec<&String> = tools
                    .iter()
                    .filter(|t| !self.disallowed_tools.contains(t))
                    .collect();
                ToolScope::allow_only(label, &keep).map(Some)
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct AgentCatalog {
    user: PathBuf,
    project: Option<PathBuf>,
    verification: bool,
}

impl AgentCatalog {
    pub fn new(roo_home: &Path, project_root: &Path, trusted: bool, verification: bool) -> Self {
        Self {
            user: roo_home.join("agents"),
            project: trusted.then(|| project_root.join(".roocode").join("agents")),
            verification,
        }
    }

    pub fn scan(&self) -> AgentScan {
        let mut agents = BTreeMap::new();
        let mut warnings = Vec::new();
        for (name, description, tools, prompt) in [
            (
                "general-purpose",
                "General-purpose agent for multi-step tasks.",
                None,
                "You are a general-purpose sub-agent. Do the task and report.",
            ),
            (
                "Explore",
                "Read-only agent for searching and reading code.",
                Some(vec![
                    "ReadFile".to_string(),
                    "Glob".to_string(),
                    "Grep".to_string(),
                ]),
                "You are Explore, a read-only code explorer.",
            ),
        ] {
            agents.insert(
                name.to_lowercase(),
                AgentDefinition {
                    name: name.to_string(),
                    description: description.to_string(),
                    tools,
                    disallowed_tools: Vec::new(),
                    model: None,
                    max_turns: None,
                    permission_mode: None,
                    background: false,
                    isolation: None,
                    prompt: prompt.to_string(),
                    source: Source::Builtin,
                    path: None,
                },
            );
        }
        let _ = self.verification;
        for (dir, source) in [
            (Some(&self.user), Source::User),
            (self.project.as_ref(), Source::Project),
        ] {
            let Some(dir) = dir else { continue };
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            paths.sort();
            for path in paths {
                if path.extension().and_then(|e| e.to_str()) != Some("md") {
                    continue;
                }
                match parse(&path, source) {
                    Ok(def) => {
                        agents.insert(def.name.to_lowercase(), def);
                    }
                    Err(e) => warnings.push(format!("skipped agent file {}: {e}", path.display())),
                }
            }
        }
        AgentScan { agents, warnings }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Front {
    name: String,
    description: String,
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default)]
    disallowed_tools: Vec<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    max_turns: Option<u32>,
    #[serde(default)]
    permission_mode: Option<String>,
    #[serde(default)]
    background: bool,
    #[serde(default)]
    isolation: Option<String>,
}

fn parse(path: &Path, source: Source) -> Result<AgentDefinition, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let rest = text.strip_prefix("---\n").ok_or("no front matter")?;
    let end = rest.find("\n---").ok_or("no end of front matter")?;
    let front: Front = serde_yaml_ng::from_str(&rest[..end]).map_err(|e| e.to_string())?;
    let body = rest[end + 4..].trim_start_matches('\n').to_string();
    let permission_mode = front
        .permission_mode
        .map(|m| m.parse::<PermissionMode>().map_err(|e| e.to_string()))
        .transpose()?;
    let isolation = match front.isolation.as_deref() {
        None => None,
        Some("worktree") => Some(Isolation::Worktree),
        Some(other) => return Err(format!("bad isolation {other}")),
    };
    Ok(AgentDefinition {
        name: front.name,
        description: front.description,
        tools: front.tools,
        disallowed_tools: front.disallowed_tools,
        model: front.model,
        max_turns: front.max_turns,
        permission_mode,
        background: front.background,
        isolation,
        prompt: body,
        source,
        path: Some(path.to_path_buf()),
    })
}

#[derive(Debug, Clone, Default)]
pub struct AgentScan {
    pub agents: BTreeMap<String, AgentDefinition>,
    pub warnings: Vec<String>,
}

impl AgentScan {
    pub fn get(&self, name: &str) -> Option<&AgentDefinition> {
        self.agents.get(&name.to_lowercase())
    }
}
