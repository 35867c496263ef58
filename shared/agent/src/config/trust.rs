//! Project trust: a cloned repository's config files are the repository's, not
//! the user's, until the user says otherwise.
//!
//! Both project files — `.roocode/config.yaml` and `.roocode/config.local.yaml`
//! (a repository can commit the latter too) — are read through [`narrow`] while
//! the project is not trusted: only settings that make the agent *more* careful
//! survive (`permissions.deny`, `permissions.ask`, and a `permission_mode`
//! stricter than the user's). Everything else — provider, model, base URL, key,
//! script, model-side limits, allow rules, a permissive mode, hooks, MCP servers,
//! unknown keys — is left out and listed as an [`IgnoredSetting`], so the app can
//! say what it ignored.
//!
//! The trust list is `trusted_projects:` in the user file
//! (`$ROO_HOME/config.yaml`): canonical project roots. Trust is per project root
//! and does not extend to subdirectories or to other repositories cloned below a
//! trusted directory, whose config the user never saw.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_yaml_ng::{Mapping, Value};

use super::local::update_yaml;
use super::{ConfigError, Source, sections, user_config_path};
use crate::permissions::PermissionMode;

/// The key of the trust list in the user config file.
pub const TRUST_LIST_KEY: &str = "trusted_projects";

/// Keys of `permissions` an untrusted project may set: they only narrow.
const NARROWING_PERMISSION_KEYS: [&str; 2] = ["deny", "ask"];

/// Whether the project's config files are honoured in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectTrust {
    /// The user trusts the project (trust list or `--trust-project`): its files
    /// count in full, below the user's own settings for widening keys.
    Trusted,
    /// Only the narrowing settings of the project's files count.
    Untrusted,
}

/// One setting of a project file that the trust filter left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredSetting {
    /// The file it is in.
    pub path: PathBuf,
    /// `project` or `local`.
    pub source: Source,
    /// The key, e.g. `base_url`, `permissions.allow`, `hooks`.
    pub key: String,
}

impl fmt::Display for IgnoredSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.key)
    }
}

/// How strict a mode is, for deciding whether an untrusted project's mode
/// narrows: `bypassPermissions` < `acceptEdits` < `default` < `plan` <
/// `dontAsk`. `plan` asks for everything `default` asks for (except the plan
/// file in the session directory) and keeps the model to planning; `dontAsk`
/// denies whatever would be asked.
pub fn strictness(mode: PermissionMode) -> u8 {
    match mode {
        PermissionMode::BypassPermissions => 0,
        PermissionMode::AcceptEdits => 1,
        PermissionMode::Default => 2,
        PermissionMode::Plan => 3,
        PermissionMode::DontAsk => 4,
    }
}

/// The narrowing part of an untrusted project file: `permissions.deny`,
/// `permissions.ask`, `permission_mode` if it is stricter than `base` (the
/// user's mode, or default), `sandbox` (whose reader keeps only narrowing keys
/// from project files), `text_tool_calls: off` and `team_turns: false`. Every other
/// key is added to `ignored`. Values of the kept keys are not checked here; the
/// section readers check them, so a malformed narrowing setting is still an error.
pub(crate) fn narrow(
    value: &Value,
    path: &Path,
    source: Source,
    base: PermissionMode,
    ignored: &mut Vec<IgnoredSetting>,
) -> Result<Value, ConfigError> {
    // Keys come from the repository and are shown on the terminal: control
    // characters are escaped so they cannot rewrite the screen.
    let mut ignore = |key: String| {
        ignored.push(IgnoredSetting {
            path: path.to_path_buf(),
            source,
            key: key.escape_debug().to_string(),
        })
    };
    let mut kept = Mapping::new();
    let Some(map) = value.as_mapping() else {
        return Ok(value.clone());
    };
    for (key, item) in map {
        let name = key.as_str().unwrap_or("(non-string key)");
        match name {
            "permissions" => match item {
                Value::Mapping(section) => {
                    let mut narrowed = Mapping::new();
                    for (sub, list) in section {
                        let sub_name = sub.as_str().unwrap_or("(non-string key)");
                        if NARROWING_PERMISSION_KEYS.contains(&sub_name) {
                            narrowed.insert(sub.clone(), list.clone());
                        } else if !list.is_null() {
                            ignore(format!("permissions.{sub_name}"));
                        }
                    }
                    kept.insert(key.clone(), Value::Mapping(narrowed));
                }
                // A wrong shape is kept so that the rule reader reports it.
                other => {
                    kept.insert(key.clone(), other.clone());
                }
            },
            "permission_mode" => match sections::check_mode(value, path)? {
                Some(mode) if strictness(mode) > strictness(base) => {
                    kept.insert(key.clone(), item.clone());
                }
                Some(_) => ignore(name.to_string()),
                None => {}
            },
            // The sandbox reader takes only narrowing keys (more deny-read paths,
            // network off) from project files and reports the rest itself.
            "sandbox" => {
                kept.insert(key.clone(), item.clone());
            }
            // The sub-agent limits reader takes only narrowing values from an
            // untrusted project (see `ConfigFiles::agents`).
            "agents" => {
                kept.insert(key.clone(), item.clone());
            }
            // The budget reader takes an untrusted project's caps only where they
            // are lower (`ConfigFiles::budget`).
            "budget" => {
                kept.insert(key.clone(), item.clone());
            }
            // The member roles reader takes only a stricter value from an untrusted
            // project (`ConfigFiles::member_roles`).
            roo_store::MemberRoles::KEY => {
                kept.insert(key.clone(), item.clone());
            }
            // Teammates' messages waiting for the person's prompt only narrows.
            "team_turns" if item.as_bool() == Some(false) => {
                kept.insert(key.clone(), item.clone());
            }
            // Turning text tool calls off only narrows what a model can do.
            "text_tool_calls"
                if item.as_bool() == Some(false)
                    || item
                        .as_str()
                        .is_some_and(|v| v.trim().eq_ignore_ascii_case("off")) =>
            {
                kept.insert(key.clone(), item.clone());
            }
            _ if item.is_null() => {}
            // Read from the user's own file only, trusted or not (a notice of its own
            // says so): trusting the project would not enable it.
            super::hosts::HOSTS_KEY => {}
            _ => ignore(name.to_string()),
        }
    }
    Ok(Value::Mapping(kept))
}

/// The trust list of the user file's document (`None`: no user file).
pub(crate) fn trust_list(user: Option<&Value>, path: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let invalid = |message: &str| ConfigError::Invalid {
        path: path.to_path_buf(),
        key: TRUST_LIST_KEY.to_string(),
        message: message.to_string(),
    };
    let list = match user.and_then(|v| v.get(TRUST_LIST_KEY)) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Sequence(list)) => list,
        Some(_) => {
            return Err(invalid(
                "must be a list of absolute project paths; fix or remove it",
            ));
        }
    };
    list.iter()
        .map(|item| match item {
            Value::String(s) if Path::new(s).is_absolute() => Ok(PathBuf::from(s)),
            Value::String(s) => Err(invalid(&format!(
                "contains `{s}`, which is not an absolute path; write the project root in full"
            ))),
            _ => Err(invalid(
                "must contain only strings (absolute project paths); fix or remove the entry",
            )),
        })
        .collect()
}

/// Whether `project_root` is on `list`. Both sides are compared canonicalized
/// (an entry that no longer exists is compared as written), and only equal
/// paths match: trust of `/a` does not cover `/a/b`.
pub(crate) fn listed(list: &[PathBuf], project_root: &Path) -> bool {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let root = canonical(project_root);
    list.iter().any(|entry| canonical(entry) == root)
}

/// Adds `project_root` (canonicalized) to the trust list in the user file under
/// `roo_home`, keeping every other key; written atomically under a lock.
pub fn trust_project(roo_home: &Path, project_root: &Path) -> Result<(), ConfigError> {
    let path = user_config_path(roo_home);
    let root = std::fs::canonicalize(project_root).map_err(|source| ConfigError::Read {
        path: project_root.to_path_buf(),
        source,
    })?;
    let entry = Value::from(root.to_string_lossy().into_owned());
    let header = "# RooCode user settings (see docs/PERMISSIONS.md and docs/LLM.md).\n";
    update_yaml(&path, header, |top, invalid| {
        // A malformed list is reported, not repaired behind the user's back.
        trust_list(Some(&Value::Mapping(top.clone())), &path)?;
        let list = top
            .entry(Value::from(TRUST_LIST_KEY))
            .or_insert_with(|| Value::Sequence(Vec::new()));
        if list.is_null() {
            *list = Value::Sequence(Vec::new());
        }
        let Some(list) = list.as_sequence_mut() else {
            return Err(invalid(TRUST_LIST_KEY, "is not a list"));
        };
        if list.contains(&entry) {
            return Ok(false);
        }
        list.push(entry.clone());
        Ok(true)
    })?;
    Ok(())
}
