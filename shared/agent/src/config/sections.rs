//! Typed readers for the config sections this crate owns.
//!
//! Each reader takes one file's parsed document and either returns the typed
//! section or an error that names the file, the key and what shape was expected,
//! so a typo is reported at start-up instead of being silently ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use serde_yaml_ng::Value;

use super::{ConfigError, Source};
use crate::permissions::PermissionMode;
use crate::permissions::rules::{Rule, RuleKind, RuleSet};

/// When a hook runs. Only events the agent fires are accepted, so a hook on an
/// event nothing fires is a config error rather than a hook that never runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// An agent's first run begins (a new or a resumed session); stdout is context.
    SessionStart,
    /// A prompt was submitted, before the model sees it; a failing hook blocks it.
    UserPromptSubmit,
    /// Before a tool call runs; a failing hook blocks the call.
    PreToolUse,
    /// After a tool call ran.
    PostToolUse,
    /// A run ended (the agent finished its turn, or stopped).
    Stop,
    /// Before the conversation is compacted.
    PreCompact,
    /// A teammate became idle.
    TeammateIdle,
    /// A teammate's run completed a task.
    TaskCompleted,
}

/// What a hook does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum HookAction {
    /// Runs a shell command; context variables such as `$FILE_PATH` and
    /// `$TOOL_NAME` are provided in its environment.
    Command {
        /// The command line, run by the shell.
        command: String,
        /// Optional limit; the hook runner picks a default.
        #[serde(default)]
        timeout_ms: Option<u64>,
    },
}

/// One configured hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// When the hook runs.
    pub event: HookEvent,
    /// The optional `if:` condition, as written (e.g. `tool == "WriteFile"`).
    pub condition: Option<String>,
    /// What it does then.
    pub action: HookAction,
    /// The file it was configured in.
    pub source: Source,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHook {
    event: HookEvent,
    #[serde(rename = "if", default)]
    condition: Option<String>,
    action: HookAction,
}

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking MCP over stdio.
    Stdio {
        /// The program to start.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to its environment.
        env: BTreeMap<String, String>,
        /// Working directory; the project root when absent.
        cwd: Option<PathBuf>,
    },
    /// A streamable-HTTP server.
    Http {
        /// The server's endpoint.
        url: String,
        /// Headers sent with every request (e.g. authorization).
        headers: BTreeMap<String, String>,
    },
}

/// One configured MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// How the server is reached.
    pub transport: McpTransport,
    /// The file whose definition won.
    pub source: Source,
}

#[derive(Debug, Deserialize)]
struct RawServer {
    #[serde(default)]
    command: Option<String>,
    #[serde(default, deserialize_with = "string_list")]
    args: Vec<String>,
    #[serde(default, deserialize_with = "string_map")]
    env: BTreeMap<String, String>,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default, deserialize_with = "string_map")]
    headers: BTreeMap<String, String>,
}

/// Scalars (`8080`, `true`) as their text.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn string_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let values = Vec::<Value>::deserialize(d)?;
    values
        .iter()
        .map(|v| {
            scalar_text(v).ok_or_else(|| serde::de::Error::custom("expected a list of strings"))
        })
        .collect()
}

fn string_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let values = BTreeMap::<String, Value>::deserialize(d)?;
    values
        .into_iter()
        .map(|(k, v)| {
            scalar_text(&v)
                .map(|v| (k.clone(), v))
                .ok_or_else(|| serde::de::Error::custom(format!("`{k}` must be a string")))
        })
        .collect()
}

fn invalid(path: &Path, key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        path: path.to_path_buf(),
        key: key.to_string(),
        message: message.into(),
    }
}

/// `permission_mode:`, checked.
pub(crate) fn check_mode(
    value: &Value,
    path: &Path,
) -> Result<Option<PermissionMode>, ConfigError> {
    match value.get("permission_mode") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => s
            .parse::<PermissionMode>()
            .map(Some)
            .map_err(|e| invalid(path, "permission_mode", e.to_string())),
        Some(_) => Err(invalid(
            path,
            "permission_mode",
            "must be one of default, acceptEdits, plan, bypassPermissions, dontAsk",
        )),
    }
}

/// `permissions: {allow, ask, deny}` into `rules` under `source`.
pub(crate) fn rules_into(
    value: &Value,
    source: Source,
    path: &Path,
    rules: &mut RuleSet,
) -> Result<(), ConfigError> {
    let section = match value.get("permissions") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Mapping(m)) => m,
        Some(_) => {
            return Err(invalid(
                path,
                "permissions",
                "must be a mapping with allow, ask and deny lists",
            ));
        }
    };
    for kind in [RuleKind::Allow, RuleKind::Ask, RuleKind::Deny] {
        let key = format!("permissions.{}", kind.key());
        let list = match section.get(kind.key()) {
            None | Some(Value::Null) => continue,
            Some(Value::Sequence(list)) => list,
            Some(_) => {
                return Err(invalid(
                    path,
                    &key,
                    "must be a list of rules such as \"Bash(git *)\"",
                ));
            }
        };
        for item in list {
            let Value::String(text) = item else {
                return Err(invalid(
                    path,
                    &key,
                    "must contain only strings such as \"Bash(git *)\"",
                ));
            };
            let rule = Rule::parse(text).map_err(|e| ConfigError::InvalidRule {
                path: path.to_path_buf(),
                message: match rule_line(path, text) {
                    Some(line) => format!("line {line}: {}", e.message),
                    None => e.message,
                },
                rule: e.rule,
            })?;
            rules.push(source, kind, rule);
        }
    }
    Ok(())
}

/// The 1-based line of `path` where the rule `text` is written, for error
/// messages (parsed YAML values carry no positions). Read again only when a rule
/// is wrong; `None` if the file cannot be read or the text is not found verbatim.
fn rule_line(path: &Path, text: &str) -> Option<usize> {
    let file = std::fs::read_to_string(path).ok()?;
    file.lines()
        .position(|line| {
            let code = line.trim_start();
            !code.starts_with('#') && line.contains(text)
        })
        .map(|i| i + 1)
}

/// `hooks:` as a list of hooks.
pub(crate) fn hooks(value: &Value, source: Source, path: &Path) -> Result<Vec<Hook>, ConfigError> {
    let list = match value.get("hooks") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Sequence(list)) => list,
        Some(_) => {
            return Err(invalid(
                path,
                "hooks",
                "must be a list of {event, if, action} entries",
            ));
        }
    };
    list.iter()
        .enumerate()
        .map(|(i, item)| {
            let raw: RawHook = serde_yaml_ng::from_value(item.clone())
                .map_err(|e| invalid(path, &format!("hooks[{i}]"), e.to_string()))?;
            if let Some(condition) = &raw.condition {
                super::HookCondition::parse(condition)
                    .map_err(|e| invalid(path, &format!("hooks[{i}].if"), e))?;
            }
            let HookAction::Command { command, .. } = &raw.action;
            if command.trim().is_empty() {
                return Err(invalid(
                    path,
                    &format!("hooks[{i}].action.command"),
                    "is empty; give the shell command to run",
                ));
            }
            Ok(Hook {
                event: raw.event,
                condition: raw.condition,
                action: raw.action,
                source,
            })
        })
        .collect()
}

/// `mcp_servers:` by name.
pub(crate) fn mcp_servers(
    value: &Value,
    source: Source,
    path: &Path,
) -> Result<Vec<(String, McpServerConfig)>, ConfigError> {
    let map = match value.get("mcp_servers") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Mapping(map)) => map,
        Some(_) => {
            return Err(invalid(
                path,
                "mcp_servers",
                "must be a mapping of server names to servers",
            ));
        }
    };
    let mut servers = Vec::new();
    for (name, server) in map {
        let Some(name) = name.as_str() else {
            return Err(invalid(path, "mcp_servers", "server names must be strings"));
        };
        let key = format!("mcp_servers.{name}");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(invalid(
                path,
                &key,
                "is not a valid server name: use letters, digits, `-` and `_` (tools appear as mcp__<server>__<tool>)",
            ));
        }
        let raw: RawServer = serde_yaml_ng::from_value(server.clone())
            .map_err(|e| invalid(path, &key, e.to_string()))?;
        let transport = match (raw.command, raw.url) {
            (Some(command), None) => McpTransport::Stdio {
                command,
                args: raw.args,
                env: raw.env,
                cwd: raw.cwd,
            },
            (None, Some(url)) => McpTransport::Http {
                url,
                headers: raw.headers,
            },
            (Some(_), Some(_)) => {
                return Err(invalid(
                    path,
                    &key,
                    "has both `command` and `url`; give one of them",
                ));
            }
            (None, None) => {
                return Err(invalid(
                    path,
                    &key,
                    "needs `command` (a stdio server) or `url` (a streamable HTTP server)",
                ));
            }
        };
        servers.push((name.to_string(), McpServerConfig { transport, source }));
    }
    Ok(servers)
}

/// One file's `sandbox:` section as written; [`crate::exec::sandbox::SandboxSettings`]
/// merges the files and decides what each source may change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// `false` runs commands unconfined.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Extra writable paths (`~/` allowed).
    #[serde(default, deserialize_with = "string_list")]
    pub allow_write: Vec<String>,
    /// Extra paths whose contents commands may not read.
    #[serde(default, deserialize_with = "string_list")]
    pub deny_read: Vec<String>,
    /// `false` blocks TCP bind/connect where the kernel supports it.
    #[serde(default)]
    pub network: Option<bool>,
    /// Environment variables commands keep although they look like API keys.
    #[serde(default, deserialize_with = "string_list")]
    pub pass_env: Vec<String>,
    /// `false` skips the namespace layer (Landlock alone, which leaves sockets and
    /// metadata uncontained).
    #[serde(default)]
    pub namespaces: Option<bool>,
}

/// `sandbox:`, checked.
pub(crate) fn sandbox(value: &Value, path: &Path) -> Result<Option<SandboxSection>, ConfigError> {
    match value.get("sandbox") {
        None | Some(Value::Null) => Ok(None),
        Some(section @ Value::Mapping(_)) => serde_yaml_ng::from_value(section.clone())
            .map(Some)
            .map_err(|e| invalid(path, "sandbox", e.to_string())),
        Some(_) => Err(invalid(
            path,
            "sandbox",
            "must be a mapping such as {enabled: true, allow_write: [\"~/.cargo\"], network: true}",
        )),
    }
}

/// `agents:` — the limits of sub-agents ([`SubagentLimits`]). Every
/// key is optional; a file sets only what it names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentsSection {
    /// Nesting depth, 0 to 3 (0: no sub-agents; 1: sub-agents cannot start more).
    pub max_depth: Option<u32>,
    /// Sub-agents running at once, at least 1.
    pub max_concurrent: Option<u32>,
    /// Sub-agents started per session.
    pub max_per_session: Option<u32>,
    /// Characters of a result returned to the parent, at least 1000.
    pub max_result_chars: Option<u32>,
    /// Seconds before a foreground sub-agent moves to the background; 0 never.
    pub auto_background_secs: Option<u64>,
    /// `false`: no background sub-agents (nor auto-background).
    pub background: Option<bool>,
    /// `true`: the built-in Verification agent is available.
    pub verification: Option<bool>,
}

impl AgentsSection {
    /// `other` over `self`: a trusted file's values replace what it names.
    pub(crate) fn override_with(&mut self, other: AgentsSection) {
        let AgentsSection {
            max_depth,
            max_concurrent,
            max_per_session,
            max_result_chars,
            auto_background_secs,
            background,
            verification,
        } = other;
        self.max_depth = max_depth.or(self.max_depth);
        self.max_concurrent = max_concurrent.or(self.max_concurrent);
        self.max_per_session = max_per_session.or(self.max_per_session);
        self.max_result_chars = max_result_chars.or(self.max_result_chars);
        self.auto_background_secs = auto_background_secs.or(self.auto_background_secs);
        self.background = background.or(self.background);
        self.verification = verification.or(self.verification);
    }

    /// `other` over `self` where it narrows only (an untrusted project): smaller
    /// limits, background and Verification off. `defaults` fills what `self` leaves
    /// unset, so a narrowing is judged against the value in force.
    /// Returns the keys of `other` that were not applied because they would widen
    /// (for the notice listing an untrusted project's ignored settings).
    pub(crate) fn narrow_with(
        &mut self,
        other: AgentsSection,
        defaults: &AgentsSection,
    ) -> Vec<&'static str> {
        let mut ignored = Vec::new();
        let mut min = |key: &'static str, current: Option<u32>, default: Option<u32>, new| match (
            current.or(default),
            new,
        ) {
            (Some(c), Some(n)) => {
                if n > c {
                    ignored.push(key);
                }
                Some(c.min(n))
            }
            (c, n) => n.or(c),
        };
        self.max_depth = min(
            "agents.max_depth",
            self.max_depth,
            defaults.max_depth,
            other.max_depth,
        );
        self.max_concurrent = min(
            "agents.max_concurrent",
            self.max_concurrent,
            defaults.max_concurrent,
            other.max_concurrent,
        );
        self.max_per_session = min(
            "agents.max_per_session",
            self.max_per_session,
            defaults.max_per_session,
            other.max_per_session,
        );
        self.max_result_chars = min(
            "agents.max_result_chars",
            self.max_result_chars,
            defaults.max_result_chars,
            other.max_result_chars,
        );
        // Sooner to the background, never later; 0 (never) is not a narrowing.
        let current = self
            .auto_background_secs
            .or(defaults.auto_background_secs)
            .filter(|c| *c > 0);
        match other.auto_background_secs {
            Some(n) if n > 0 && current.is_none_or(|c| n <= c) => {
                self.auto_background_secs = Some(n);
            }
            Some(_) => ignored.push("agents.auto_background_secs"),
            None => {}
        }
        match other.background {
            Some(false) => self.background = Some(false),
            Some(true) if self.background.or(defaults.background) == Some(false) => {
                ignored.push("agents.background");
            }
            _ => {}
        }
        match other.verification {
            Some(false) => self.verification = Some(false),
            Some(true) if self.verification.or(defaults.verification) != Some(true) => {
                ignored.push("agents.verification");
            }
            _ => {}
        }
        ignored
    }
}

/// How far sub-agents may go: the merged `agents:` section with its defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentLimits {
    /// Nesting depth: 1 means the lead's sub-agents cannot start sub-agents.
    pub max_depth: u32,
    /// Sub-agents running at once (all depths together); more calls wait.
    pub max_concurrent: usize,
    /// Sub-agents started in one session (all depths together).
    pub max_per_session: u32,
    /// Characters of a result returned to the parent; the full text spills to a file.
    pub max_result_chars: usize,
    /// A foreground sub-agent still running after this moves to the background;
    /// `None` never.
    pub auto_background: Option<Duration>,
    /// Whether sub-agents may run in the background at all.
    pub background: bool,
}

impl SubagentLimits {
    /// The most `max_depth` may be.
    pub const MAX_DEPTH: u32 = 3;

    /// The limits a merged `agents:` section sets (unset keys keep their defaults).
    pub fn from_section(section: &AgentsSection) -> Self {
        let default = Self::default();
        Self {
            max_depth: section
                .max_depth
                .unwrap_or(default.max_depth)
                .min(Self::MAX_DEPTH),
            max_concurrent: section
                .max_concurrent
                .map_or(default.max_concurrent, |n| n.max(1) as usize),
            max_per_session: section.max_per_session.unwrap_or(default.max_per_session),
            max_result_chars: section
                .max_result_chars
                .map_or(default.max_result_chars, |n| n as usize),
            auto_background: match section.auto_background_secs {
                Some(0) => None,
                Some(secs) => Some(Duration::from_secs(secs)),
                None => default.auto_background,
            },
            background: section.background.unwrap_or(default.background),
        }
    }
}

impl Default for SubagentLimits {
    fn default() -> Self {
        Self {
            max_depth: 1,
            max_concurrent: 4,
            max_per_session: 50,
            max_result_chars: 10_000,
            auto_background: Some(Duration::from_secs(120)),
            background: true,
        }
    }
}

/// `agents:` of one file, checked.
pub(crate) fn agents(value: &Value, path: &Path) -> Result<Option<AgentsSection>, ConfigError> {
    let item = match value.get("agents") {
        None | Some(Value::Null) => return Ok(None),
        Some(item) => item,
    };
    let section: AgentsSection = serde_yaml_ng::from_value(item.clone())
        .map_err(|e| invalid(path, "agents", e.to_string()))?;
    if section.max_depth.is_some_and(|d| d > 3) {
        return Err(invalid(path, "agents.max_depth", "must be 0 to 3"));
    }
    if section.max_concurrent == Some(0) {
        return Err(invalid(path, "agents.max_concurrent", "must be at least 1"));
    }
    if section.max_result_chars.is_some_and(|n| n < 1000) {
        return Err(invalid(
            path,
            "agents.max_result_chars",
            "must be at least 1000",
        ));
    }
    Ok(Some(section))
}

/// `checkpoints:` of a config file: the limits of the checkpoints every agent records
/// before changing files (docs/AGENT.md "Checkpoints"). Each key is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointsSection {
    /// `false`: no checkpoints (and no rewind).
    pub enabled: Option<bool>,
    /// Sessions' checkpoints older than this many days are pruned.
    pub max_age_days: Option<u64>,
    /// All projects' checkpoints together are pruned to this many MiB.
    pub max_total_mb: Option<u64>,
    /// Files larger than this many KiB are not kept.
    pub max_file_kb: Option<u64>,
    /// A project with more files than this is not checkpointed before commands.
    pub max_files: Option<u64>,
    /// A look through the project's files before or after a command that takes longer
    /// than this many milliseconds is cut short (commands are then not checkpointed).
    pub max_walk_ms: Option<u64>,
}

impl CheckpointsSection {
    /// `other` over `self`: what `other` names replaces.
    pub(crate) fn override_with(&mut self, other: CheckpointsSection) {
        self.enabled = other.enabled.or(self.enabled);
        self.max_age_days = other.max_age_days.or(self.max_age_days);
        self.max_total_mb = other.max_total_mb.or(self.max_total_mb);
        self.max_file_kb = other.max_file_kb.or(self.max_file_kb);
        self.max_files = other.max_files.or(self.max_files);
        self.max_walk_ms = other.max_walk_ms.or(self.max_walk_ms);
    }
}

/// `checkpoints:` of one file, checked.
pub(crate) fn checkpoints(
    value: &Value,
    path: &Path,
) -> Result<Option<CheckpointsSection>, ConfigError> {
    match value.get("checkpoints") {
        None | Some(Value::Null) => Ok(None),
        Some(item) => {
            let section: CheckpointsSection = serde_yaml_ng::from_value(item.clone())
                .map_err(|e| invalid(path, "checkpoints", e.to_string()))?;
            if section.max_files == Some(0) {
                return Err(invalid(
                    path,
                    "checkpoints",
                    "max_files must be at least 1 (set enabled: false to record no checkpoints)",
                ));
            }
            Ok(Some(section))
        }
    }
}

/// The `team_turns` key: whether the idle interactive lead takes its teammates'
/// messages as a turn of its own (`true`, the default) or leaves them for the person's
/// next prompt (`false`).
pub(crate) fn team_turns(value: &Value, path: &Path) -> Result<Option<bool>, ConfigError> {
    match value.get("team_turns") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(on)) => Ok(Some(*on)),
        Some(_) => Err(invalid(path, "team_turns", "must be true or false")),
    }
}

/// The `verify:` key: the command a verified merge runs on the merged tree before the
/// user's branch moves (docs/TEAM.md "Verified merges"), as `verify: cargo test` or
/// `verify: {command: cargo test, timeout: 900}` (seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifySetting {
    /// The shell command line.
    pub command: String,
    /// How long it may run, in seconds (`None`: the default).
    pub timeout_secs: Option<u64>,
}

/// Longest `verify:` command accepted, in bytes.
const MAX_VERIFY_COMMAND: usize = 4096;
/// Longest `verify:` timeout, in seconds (a day).
pub const MAX_VERIFY_TIMEOUT_SECS: u64 = 86_400;

/// Reads `verify:` (see [`VerifySetting`]).
pub(crate) fn verify(value: &Value, path: &Path) -> Result<Option<VerifySetting>, ConfigError> {
    let shape =
        "must be a command (`verify: cargo test`) or a mapping `{command: ..., timeout: SECONDS}`";
    let (command, timeout) = match value.get("verify") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(command)) => (command.clone(), None),
        Some(Value::Mapping(map)) => {
            if let Some(key) = map
                .keys()
                .find(|k| !matches!(k.as_str(), Some("command" | "timeout")))
            {
                return Err(invalid(
                    path,
                    "verify",
                    format!("has an unknown key {key:?}; {shape}"),
                ));
            }
            let Some(command) = map.get("command").and_then(Value::as_str) else {
                return Err(invalid(path, "verify.command", shape));
            };
            let timeout = match map.get("timeout") {
                None | Some(Value::Null) => None,
                Some(t) => match t.as_u64() {
                    Some(secs) if (1..=MAX_VERIFY_TIMEOUT_SECS).contains(&secs) => Some(secs),
                    _ => {
                        return Err(invalid(
                            path,
                            "verify.timeout",
                            format!(
                                "must be a number of seconds from 1 to {MAX_VERIFY_TIMEOUT_SECS}"
                            ),
                        ));
                    }
                },
            };
            (command.to_string(), timeout)
        }
        Some(_) => return Err(invalid(path, "verify", shape)),
    };
    if command.trim().is_empty() || command.len() > MAX_VERIFY_COMMAND || command.contains('\0') {
        return Err(invalid(
            path,
            "verify",
            format!("must be a non-empty command of at most {MAX_VERIFY_COMMAND} bytes"),
        ));
    }
    Ok(Some(VerifySetting {
        command,
        timeout_secs: timeout,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_checkpoint_file_limit_of_zero_is_refused_with_its_key() {
        let value: Value = serde_yaml_ng::from_str("checkpoints: {max_files: 0}").unwrap();
        let err = checkpoints(&value, Path::new("config.yaml")).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("max_files must be at least 1"), "{text}");
        let value: Value = serde_yaml_ng::from_str("checkpoints: {max_files: 1}").unwrap();
        let section = checkpoints(&value, Path::new("config.yaml"))
            .unwrap()
            .unwrap();
        assert_eq!(section.max_files, Some(1));
    }
}
