//! The three YAML config files and their typed views.
//!
//! Configuration is layered like git's: `~/.roocode/config.yaml` (user, under
//! `ROO_HOME`), `<project>/.roocode/config.yaml` (project, committed) and
//! `<project>/.roocode/config.local.yaml` (local, personal, not committed) —
//! in increasing priority. [`ConfigFiles::load`] reads all three once (a missing
//! file is simply absent; a broken one is an error naming the file and line),
//! keeps each parsed document, filters the two project files by [`ProjectTrust`]
//! (an untrusted project may only narrow; see [`trust`]), and checks the sections
//! this crate owns:
//! `permission_mode`, `permissions` (rules, per source — their priority is
//! applied by the rule layer), `hooks` (added up across files) and `mcp_servers`
//! (merged by name, higher priority wins). Provider settings are handed to
//! `roo_llm` by [`ConfigFiles::llm_settings`], after the same filter and with the
//! user's file last (it outranks the project's).
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

mod budget;
mod hook_condition;
pub mod hosts;
mod local;
mod sections;
mod source;
pub mod trust;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use crate::permissions::PermissionMode;
use crate::permissions::RuleSet;

pub use budget::BudgetConfig;
pub use hook_condition::{HookCondition, HookFacts};
pub use hosts::{HostConfig, Hosts, user_hosts};
pub use local::append_local_allow;
pub(crate) use sections::sandbox as sandbox_section;
pub use sections::{
    AgentsSection, CheckpointsSection, Hook, HookAction, HookEvent, MAX_VERIFY_TIMEOUT_SECS,
    McpServerConfig, McpTransport, SandboxSection, SubagentLimits, VerifySetting,
};
pub use source::Source;
pub use trust::{IgnoredSetting, ProjectTrust, TRUST_LIST_KEY, strictness, trust_project};

/// Why configuration could not be loaded or saved.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A config file being changed cannot be locked against other writers.
    #[error("lock config file {path}: {source}; nothing was written, try again")]
    Lock {
        /// The config file.
        path: PathBuf,
        #[source]
        /// Why the lock was not taken.
        source: Box<roo_store::Error>,
    },
    /// A config file exists but cannot be read.
    #[error("read config file {path}: {source}; check its permissions")]
    Read {
        /// The config file.
        path: PathBuf,
        #[source]
        /// Why reading failed.
        source: std::io::Error,
    },
    /// A config file is not valid YAML.
    #[error("parse config file {path}: {message}; fix the YAML syntax")]
    Syntax {
        /// The config file.
        path: PathBuf,
        /// 1-based line of the error, when known (the message names it too).
        line: Option<usize>,
        /// What the YAML parser said.
        message: String,
    },
    /// A known key has a value of the wrong shape.
    #[error("load config file {path}: `{key}` {message}")]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// The key whose value is wrong.
        key: String,
        /// What is wrong with the value.
        message: String,
    },
    /// A permission rule does not parse.
    #[error("load permission rule `{rule}` from {path}: {message}")]
    InvalidRule {
        /// The config file.
        path: PathBuf,
        /// The rule as written.
        rule: String,
        /// Why it does not parse.
        message: String,
    },
    /// The provider settings of a config file do not have the expected shape.
    #[error("load config file {path}: {message}; see docs/LLM.md for the keys")]
    Settings {
        /// The config file.
        path: PathBuf,
        /// What is wrong with the settings.
        message: String,
    },
    /// A config file could not be written.
    #[error("write config file {path}: {source}")]
    Write {
        /// The config file.
        path: PathBuf,
        #[source]
        /// Why writing failed.
        source: std::io::Error,
    },
}

/// Path of the user config file.
pub fn user_config_path(roo_home: &Path) -> PathBuf {
    roo_store::user_config_file(roo_home)
}

/// Path of the project config file.
pub fn project_config_path(project_root: &Path) -> PathBuf {
    project_root.join(".roocode").join("config.yaml")
}

/// Path of the local (personal, highest-priority) config file.
pub fn local_config_path(project_root: &Path) -> PathBuf {
    project_root.join(".roocode").join("config.local.yaml")
}

/// A project's config files as a lead read them from its own tree, handed to a teammate
/// on another host (through the handoff, never argv or a file): that teammate's clone,
/// which it can write, is never read for project config ([`ConfigFiles::load_handed`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HandedProjectConfig {
    /// The lead's project root, where the files were read (named in messages).
    pub root: PathBuf,
    /// The text of `.roocode/config.yaml` there (`None`: no such file).
    pub project: Option<String>,
    /// The text of `.roocode/config.local.yaml` there.
    pub local: Option<String>,
    /// Whether the lead honours them in full (its `--trust-project` or trust list).
    pub trusted: bool,
    /// The project's `ROOCODE.md` instructions as the lead read them there (one part
    /// per file, see `prompt::instruction_parts`): the clone's are never read.
    #[serde(default)]
    pub instructions: Vec<String>,
}

impl HandedProjectConfig {
    /// Reads the project and local files of `project_root` (each checked as
    /// [`ConfigFiles::load`] would); `trusted` is the lead's decision on it.
    pub fn read(project_root: &Path, trusted: bool) -> Result<Self, ConfigError> {
        let read = |path: PathBuf| -> Result<Option<String>, ConfigError> {
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    parse_yaml(&text, &path)?;
                    Ok(Some(text))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(source) => Err(ConfigError::Read { path, source }),
            }
        };
        Ok(Self {
            root: project_root.to_path_buf(),
            project: read(project_config_path(project_root))?,
            local: read(local_config_path(project_root))?,
            trusted,
            instructions: Vec::new(),
        })
    }
}

/// One config file as loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigFile {
    /// Which of the config files this is.
    pub source: Source,
    /// Where it was read from.
    pub path: PathBuf,
    /// The parsed document; `None` when the file does not exist. An empty file is
    /// an empty mapping.
    pub value: Option<Value>,
}

/// The three config files of a project, parsed, filtered by trust and checked.
#[derive(Debug, Clone)]
pub struct ConfigFiles {
    /// As read from disk.
    raw: [ConfigFile; 3],
    /// What counts: the user file as read; the project files whole when
    /// trusted, else only their narrowing part.
    files: [ConfigFile; 3],
    trust: ProjectTrust,
    ignored: Vec<IgnoredSetting>,
    trusted_projects: Vec<PathBuf>,
    rules: RuleSet,
    hooks: Vec<Hook>,
    mcp_servers: BTreeMap<String, McpServerConfig>,
    agents: AgentsSection,
    team_turns: bool,
    verify: Option<VerifySetting>,
    checkpoints: CheckpointsSection,
    budget: BudgetConfig,
    hosts: Hosts,
    user_only: Vec<String>,
    member_roles: roo_store::MemberRoles,
}

impl ConfigFiles {
    /// Loads the user file under `roo_home` and the project and local files
    /// under `project_root`, honouring the project files as far as `trust`
    /// allows (see [`ProjectTrust`]).
    pub fn load(
        roo_home: &Path,
        project_root: &Path,
        trust: ProjectTrust,
    ) -> Result<Self, ConfigError> {
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
        Self::from_files(files, trust)
    }

    /// Like [`ConfigFiles::load`], with the project and local files those `handed` holds
    /// (read by the lead in its tree): nothing of a project directory here is read.
    pub fn load_handed(
        roo_home: &Path,
        handed: &HandedProjectConfig,
        trust: ProjectTrust,
    ) -> Result<Self, ConfigError> {
        let given = |source: Source, path: PathBuf, text: &Option<String>| {
            let value = text.as_deref().map(|t| parse_yaml(t, &path)).transpose()?;
            Ok::<_, ConfigError>(ConfigFile {
                source,
                path,
                value,
            })
        };
        let user = user_config_path(roo_home);
        let files = [
            ConfigFile {
                source: Source::User,
                value: read_yaml(&user)?,
                path: user,
            },
            given(
                Source::Project,
                project_config_path(&handed.root),
                &handed.project,
            )?,
            given(
                Source::Local,
                local_config_path(&handed.root),
                &handed.local,
            )?,
        ];
        Self::from_files(files, trust)
    }

    /// Builds the typed views from already-parsed files (in increasing priority).
    pub fn from_files(files: [ConfigFile; 3], trust: ProjectTrust) -> Result<Self, ConfigError> {
        let [user, _, _] = &files;
        let trusted_projects = trust::trust_list(user.value.as_ref(), &user.path)?;
        let hosts = match &user.value {
            Some(value) => hosts::hosts(value, &user.path)?,
            None => Hosts::new(),
        };
        // Settings only the user's own file may hold: a project's are never read.
        let user_only = files
            .iter()
            .filter(|f| f.source != Source::User)
            .filter(|f| {
                f.value
                    .as_ref()
                    .and_then(|v| v.get(hosts::HOSTS_KEY))
                    .is_some_and(|v| !v.is_null())
            })
            .map(|f| {
                format!(
                    "ignored {}: {} (hosts are read from your own config, {}, only)",
                    f.path.display(),
                    hosts::HOSTS_KEY,
                    user.path.display()
                )
            })
            .collect();
        let base = match &user.value {
            Some(value) => sections::check_mode(value, &user.path)?.unwrap_or_default(),
            None => PermissionMode::default(),
        };
        let mut ignored = Vec::new();
        let raw = files;
        let mut files = raw.clone();
        if trust == ProjectTrust::Untrusted {
            for file in files.iter_mut().filter(|f| f.source != Source::User) {
                if let Some(value) = &file.value {
                    file.value = Some(trust::narrow(
                        value,
                        &file.path,
                        file.source,
                        base,
                        &mut ignored,
                    )?);
                }
            }
        }
        let mut rules = RuleSet::new();
        rules.set_project_narrows_only(trust == ProjectTrust::Untrusted);
        let mut hooks = Vec::new();
        let mut mcp_servers = BTreeMap::new();
        let mut agents = AgentsSection::default();
        let mut team_turns = true;
        let mut verify = None;
        let mut checkpoints = CheckpointsSection::default();
        let mut budget = BudgetConfig::default();
        let mut member_roles = roo_store::MemberRoles::default();
        for file in &files {
            let Some(value) = &file.value else { continue };
            // The user's file and a trusted project's set it; an untrusted project's
            // only makes it stricter (never `off`).
            if let Some(setting) =
                roo_store::MemberRoles::of_yaml(value).map_err(|message| ConfigError::Invalid {
                    path: file.path.clone(),
                    key: roo_store::MemberRoles::KEY.to_string(),
                    message,
                })?
            {
                if file.source == Source::User
                    || trust == ProjectTrust::Trusted
                    || setting > member_roles
                {
                    member_roles = setting;
                } else if setting < member_roles {
                    ignored.push(IgnoredSetting {
                        path: file.path.clone(),
                        source: file.source,
                        key: roo_store::MemberRoles::KEY.to_string(),
                    });
                }
            }
            if let Some(section) = budget::budget(value, &file.path)? {
                if file.source == Source::User || trust == ProjectTrust::Trusted {
                    budget.override_with(&section);
                } else {
                    budget.lower_with(&section);
                }
            }
            if let Some(on) = sections::team_turns(value, &file.path)? {
                team_turns = on;
            }
            if let Some(setting) = sections::verify(value, &file.path)? {
                verify = Some(setting);
            }
            // An untrusted project cannot change where and how much is kept.
            if let Some(section) = sections::checkpoints(value, &file.path)?
                && (file.source == Source::User || trust == ProjectTrust::Trusted)
            {
                checkpoints.override_with(section);
            }
            if let Some(section) = sections::agents(value, &file.path)? {
                if file.source == Source::User || trust == ProjectTrust::Trusted {
                    agents.override_with(section);
                } else {
                    for key in agents.narrow_with(section, &agents_defaults()) {
                        ignored.push(IgnoredSetting {
                            path: file.path.clone(),
                            source: file.source,
                            key: key.to_string(),
                        });
                    }
                }
            }
            sections::check_mode(value, &file.path)?;
            sections::sandbox(value, &file.path)?;
            sections::rules_into(value, file.source, &file.path, &mut rules)?;
            hooks.extend(sections::hooks(value, file.source, &file.path)?);
            for (name, server) in sections::mcp_servers(value, file.source, &file.path)? {
                mcp_servers.insert(name, server);
            }
        }
        Ok(Self {
            raw,
            files,
            trust,
            ignored,
            trusted_projects,
            rules,
            hooks,
            mcp_servers,
            agents,
            team_turns,
            verify,
            checkpoints,
            budget,
            hosts,
            user_only,
            member_roles,
        })
    }

    /// `member_roles` (default `auto`): whether a lead on the PostgreSQL store gives each
    /// teammate in a process of its own a database role of its own (docs/DISTRIBUTED.md).
    pub fn member_roles(&self) -> roo_store::MemberRoles {
        self.member_roles
    }

    /// The same files filtered for another trust decision (no second read, so
    /// what the user was shown is what gets honoured).
    pub fn with_trust(self, trust: ProjectTrust) -> Result<Self, ConfigError> {
        if trust == self.trust {
            return Ok(self);
        }
        Self::from_files(self.raw, trust)
    }

    /// The trust these files were filtered with.
    pub fn trust(&self) -> ProjectTrust {
        self.trust
    }

    /// `hosts:` of the user's own file (docs/BACKENDS.md "The ssh backend").
    pub fn hosts(&self) -> &Hosts {
        &self.hosts
    }

    /// Notices about settings only the user's own file may hold that a project file
    /// sets (`hosts:`): they are ignored.
    pub fn user_only_notices(&self) -> &[String] {
        &self.user_only
    }

    /// Whether the user file lists `project_root` in `trusted_projects`.
    pub fn lists_as_trusted(&self, project_root: &Path) -> bool {
        trust::listed(&self.trusted_projects, project_root)
    }

    /// What the trust filter left out of the project files (empty when
    /// trusted). Computed for [`ProjectTrust::Untrusted`], this is also what
    /// trusting the project would enable.
    pub fn ignored(&self) -> &[IgnoredSetting] {
        &self.ignored
    }

    /// The three files as they count (after the trust filter), in increasing
    /// priority.
    pub fn files(&self) -> &[ConfigFile; 3] {
        &self.files
    }

    /// The document of one source as it counts (after the trust filter), if
    /// that file exists.
    pub fn value(&self, source: Source) -> Option<&Value> {
        self.files
            .iter()
            .find(|f| f.source == source)
            .and_then(|f| f.value.as_ref())
    }

    /// The provider settings for `roo_llm`, in increasing priority: project,
    /// local, then the user file, so the user's own settings outrank the
    /// project's. An untrusted project contributes none.
    pub fn llm_settings(&self) -> Result<Vec<roo_llm::FileSettings>, ConfigError> {
        let mut layers = Vec::new();
        for source in [Source::Project, Source::Local, Source::User] {
            let Some(file) = self.files.iter().find(|f| f.source == source) else {
                continue;
            };
            let Some(value) = &file.value else { continue };
            let settings =
                roo_llm::FileSettings::from_value(value.clone(), &file.path).map_err(|e| {
                    ConfigError::Settings {
                        path: file.path.clone(),
                        message: e.to_string(),
                    }
                })?;
            layers.push(settings);
        }
        Ok(layers)
    }

    /// The permission rules of all sources (after the trust filter).
    pub fn rules(&self) -> RuleSet {
        self.rules.clone()
    }

    /// The configured default permission mode (`permission_mode:`).
    ///
    /// The user file's mode counts first. A project file's mode (the local
    /// file's over the project file's) replaces it when it is stricter (see
    /// [`strictness`]), and — only in a trusted project — also when the user
    /// file sets none. `--permission-mode` outranks all of this (the app).
    pub fn permission_mode(&self) -> Result<Option<PermissionMode>, ConfigError> {
        let mut modes = Vec::new();
        for file in &self.files {
            let mode = match &file.value {
                Some(value) => sections::check_mode(value, &file.path)?,
                None => None,
            };
            modes.push(mode);
        }
        let (user, project, local) = (modes[0], modes[1], modes[2]);
        let base = user.unwrap_or_default();
        let project_side = match self.trust {
            ProjectTrust::Trusted => local.or(project),
            // Only modes stricter than the user's survive the filter.
            ProjectTrust::Untrusted => [project, local]
                .into_iter()
                .flatten()
                .max_by_key(|m| strictness(*m)),
        };
        Ok(match project_side {
            Some(mode) if strictness(mode) > strictness(base) => Some(mode),
            Some(mode) if user.is_none() && self.trust == ProjectTrust::Trusted => Some(mode),
            _ => user,
        })
    }

    /// Hooks of all files, user first (hooks add up; none overrides another).
    /// An untrusted project has none.
    pub fn hooks(&self) -> &[Hook] {
        &self.hooks
    }

    /// The `agents:` section merged: the user file, then the project files (a
    /// trusted project's values replace the user's; an untrusted one's only narrow).
    pub fn agents(&self) -> &AgentsSection {
        &self.agents
    }

    /// The `checkpoints:` section merged: the user file, then a trusted project's files.
    pub fn checkpoints(&self) -> &CheckpointsSection {
        &self.checkpoints
    }

    /// `team_turns` (default `true`): whether the idle interactive lead takes its
    /// teammates' messages as a turn of its own; the highest-priority file that sets it
    /// wins (an untrusted project can only turn it off).
    pub fn team_turns(&self) -> bool {
        self.team_turns
    }

    /// `verify:`, the command a verified merge runs (docs/TEAM.md "Verified merges"):
    /// the highest-priority file that sets it wins. An untrusted project's is left out
    /// (and listed among the ignored settings), as its hooks are.
    pub fn verify(&self) -> Option<&VerifySetting> {
        self.verify.as_ref()
    }

    /// `budget:` (spending caps): a trusted file's values replace those of the files
    /// before it; an untrusted project's only lower them.
    pub fn budget(&self) -> BudgetConfig {
        self.budget
    }

    /// MCP servers by name; a server defined in several files takes the
    /// highest-priority definition whole. An untrusted project has none.
    pub fn mcp_servers(&self) -> &BTreeMap<String, McpServerConfig> {
        &self.mcp_servers
    }
}

/// The values an unset `agents:` key has, for judging what narrows them (the same
/// as [`SubagentLimits::default`]).
fn agents_defaults() -> AgentsSection {
    let limits = SubagentLimits::default();
    AgentsSection {
        max_depth: Some(limits.max_depth),
        max_concurrent: Some(limits.max_concurrent as u32),
        max_per_session: Some(limits.max_per_session),
        max_result_chars: Some(limits.max_result_chars as u32),
        auto_background_secs: limits.auto_background.map(|d| d.as_secs()),
        background: Some(limits.background),
        verification: Some(false),
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
