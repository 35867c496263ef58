//! The three YAML config files and their typed views.
//!
//! Configuration is layered like git's: `~/.roocode/config.yaml` (user, under
//! `ROO_HOME`), `<project>/.roocode/config.yaml` (project, committed) and
//! `<project>/.roocode/config.local.yaml` (local, personal, not committed) —
//! in increasing priority. [`ConfigFiles::load`] reads all three once (a missing
//! file is simply absent; a broken one is an error naming the file and line),
//! keeps each parsed document, and checks the sections this crate owns:
//! `permission_mode`, `permissions` (rules, per source — their priority is
//! applied by the rule layer), `hooks` (added up across files) and `mcp_servers`
//! (merged by name, higher priority wins). Other keys — provider settings, which
//! `roo_llm::FileSettings` reads from the same files via [`ConfigFiles::paths`] —
//! are ignored here.
//!
//! ```yaml
//! permission_mode: acceptEdits
//! permissions:
//!   allow: ["Bash(cargo test *)", "EditFile(src/**)"]
//!   ask:   ["Bash(git push *)"]
//!   deny:  ["ReadFile(.env)", "Bash(curl *)"]
//! hooks:
//!   - event: post_tool_use
//!     if: tool == "WriteFile"
//!     action: {type: command, command: "cargo fmt"}
//! mcp_servers:
//!   everything: {command: npx, args: ["-y", "@modelcontextprotocol/server-everything"]}
//!   remote: {url: "http://127.0.0.1:8000/mcp", headers: {Authorization: "Bearer x"}}
//! ```

mod local;
mod sections;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use crate::permissions::{PermissionMode, RuleSet};

pub use local::append_local_allow;
pub(crate) use sections::sandbox as sandbox_section;
pub use sections::{Hook, HookAction, HookEvent, McpServerConfig, McpTransport, SandboxSection};

/// Where a config value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// `~/.roocode/config.yaml` (under `ROO_HOME`): personal, every project.
    User,
    /// `<project>/.roocode/config.yaml`: shared with the team through git.
    Project,
    /// `<project>/.roocode/config.local.yaml`: personal, this project; highest
    /// priority; where "always allow" writes.
    Local,
}

impl Source {
    /// All sources in increasing priority (the order files are loaded and merged).
    pub const ALL: [Source; 3] = [Source::User, Source::Project, Source::Local];
    /// All sources in decreasing priority (the order rules are consulted).
    pub const BY_PRIORITY: [Source; 3] = [Source::Local, Source::Project, Source::User];

    /// `user`, `project` or `local`.
    pub fn label(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Project => "project",
            Self::Local => "local",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Why configuration could not be loaded or saved.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A config file exists but cannot be read.
    #[error("read config file {path}: {source}; check its permissions")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A config file is not valid YAML.
    #[error("parse config file {path}: {message}; fix the YAML syntax")]
    Syntax {
        path: PathBuf,
        /// 1-based line of the error, when known (the message names it too).
        line: Option<usize>,
        message: String,
    },
    /// A known key has a value of the wrong shape.
    #[error("load config file {path}: `{key}` {message}")]
    Invalid {
        path: PathBuf,
        key: String,
        message: String,
    },
    /// A permission rule does not parse.
    #[error("load permission rule `{rule}` from {path}: {message}")]
    InvalidRule {
        path: PathBuf,
        rule: String,
        message: String,
    },
    /// A config file could not be written.
    #[error("write config file {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Path of the user config file.
pub fn user_config_path(roo_home: &Path) -> PathBuf {
    roo_home.join("config.yaml")
}

/// Path of the project config file.
pub fn project_config_path(project_root: &Path) -> PathBuf {
    project_root.join(".roocode").join("config.yaml")
}

/// Path of the local (personal, highest-priority) config file.
pub fn local_config_path(project_root: &Path) -> PathBuf {
    project_root.join(".roocode").join("config.local.yaml")
}

/// One config file as loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigFile {
    pub source: Source,
    pub path: PathBuf,
    /// The parsed document; `None` when the file does not exist. An empty file is
    /// an empty mapping.
    pub value: Option<Value>,
}

/// The three config files of a project, parsed and checked.
#[derive(Debug, Clone)]
pub struct ConfigFiles {
    files: [ConfigFile; 3],
    rules: RuleSet,
    hooks: Vec<Hook>,
    mcp_servers: BTreeMap<String, McpServerConfig>,
}

impl ConfigFiles {
    /// Loads the user file under `roo_home` and the project and local files
    /// under `project_root`.
    pub fn load(roo_home: &Path, project_root: &Path) -> Result<Self, ConfigError> {
        let load = |source: Source, path: PathBuf| -> Result<ConfigFile, ConfigError> {
            let value = read_yaml(&path)?;
            Ok(ConfigFile {
                source,
                path,
                value,
            })
        };
        let files = [
            load(Source::User, user_config_path(roo_home))?,
            load(Source::Project, project_config_path(project_root))?,
            load(Source::Local, local_config_path(project_root))?,
        ];
        Self::from_files(files)
    }

    /// Builds the typed views from already-parsed files (in increasing priority).
    pub fn from_files(files: [ConfigFile; 3]) -> Result<Self, ConfigError> {
        let mut rules = RuleSet::new();
        let mut hooks = Vec::new();
        let mut mcp_servers = BTreeMap::new();
        for file in &files {
            let Some(value) = &file.value else { continue };
            sections::check_mode(value, &file.path)?;
            sections::sandbox(value, &file.path)?;
            sections::rules_into(value, file.source, &file.path, &mut rules)?;
            hooks.extend(sections::hooks(value, file.source, &file.path)?);
            for (name, server) in sections::mcp_servers(value, file.source, &file.path)? {
                mcp_servers.insert(name, server);
            }
        }
        Ok(Self {
            files,
            rules,
            hooks,
            mcp_servers,
        })
    }

    /// The three file paths in increasing priority (user, project, local), for
    /// readers of other sections such as `roo_llm::FileSettings`.
    pub fn paths(&self) -> [(Source, PathBuf); 3] {
        self.files.clone().map(|f| (f.source, f.path))
    }

    /// The three files in increasing priority.
    pub fn files(&self) -> &[ConfigFile; 3] {
        &self.files
    }

    /// The parsed document of one source, if that file exists.
    pub fn value(&self, source: Source) -> Option<&Value> {
        self.files
            .iter()
            .find(|f| f.source == source)
            .and_then(|f| f.value.as_ref())
    }

    /// The permission rules of all sources.
    pub fn rules(&self) -> RuleSet {
        self.rules.clone()
    }

    /// The configured default permission mode (`permission_mode:`), from the
    /// highest-priority file that sets one.
    pub fn permission_mode(&self) -> Result<Option<PermissionMode>, ConfigError> {
        for file in self.files.iter().rev() {
            if let Some(value) = &file.value
                && let Some(mode) = sections::check_mode(value, &file.path)?
            {
                return Ok(Some(mode));
            }
        }
        Ok(None)
    }

    /// Hooks of all files, user first (hooks add up; none overrides another).
    pub fn hooks(&self) -> &[Hook] {
        &self.hooks
    }

    /// MCP servers by name; a server defined in several files takes the
    /// highest-priority definition whole.
    pub fn mcp_servers(&self) -> &BTreeMap<String, McpServerConfig> {
        &self.mcp_servers
    }
}

/// Reads and parses one YAML file; `Ok(None)` if it does not exist.
fn read_yaml(path: &Path) -> Result<Option<Value>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source: e,
            });
        }
    };
    parse_yaml(&text, path).map(Some)
}

/// Parses YAML text; an empty document is an empty mapping.
pub(crate) fn parse_yaml(text: &str, path: &Path) -> Result<Value, ConfigError> {
    if text.trim().is_empty() {
        return Ok(Value::Mapping(Default::default()));
    }
    let value: Value = serde_yaml_ng::from_str(text).map_err(|e| ConfigError::Syntax {
        path: path.to_path_buf(),
        line: e.location().map(|l| l.line()),
        message: e.to_string(),
    })?;
    match value {
        Value::Null => Ok(Value::Mapping(Default::default())),
        Value::Mapping(_) => Ok(value),
        _ => Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            key: "(top level)".to_string(),
            message: "must be a mapping of keys to values".to_string(),
        }),
    }
}

#[cfg(test)]
mod tests;
