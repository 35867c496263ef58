//! The `mcp_*` settings of the config files: how long to wait for servers, for a
//! call, and when their tools are deferred.

use std::time::Duration;

use serde_yaml_ng::Value;

use crate::config::{ConfigError, ConfigFiles};

/// When MCP tools are registered deferred (names only until ToolSearch reveals them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeferMode {
    /// Deferred once they are many (see [`McpSettings::defer_over_tools`] and
    /// [`McpSettings::defer_over_bytes`]).
    Auto,
    Always,
    Never,
}

/// How MCP servers are waited for and their tools offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpSettings {
    /// How long the first model request waits for servers still starting
    /// (`mcp_startup_timeout_secs`, default 10). A server that connects later
    /// registers its tools then.
    pub startup_timeout: Duration,
    /// How long a server may take to connect at all before it is given up
    /// (six times the startup timeout, at least a minute).
    pub connect_timeout: Duration,
    /// How long one tool call may take (`mcp_tool_timeout_secs`, default 300).
    pub tool_timeout: Duration,
    /// `mcp_defer: auto | always | never` (default auto).
    pub defer: DeferMode,
    /// In auto mode, MCP tools are deferred when there are more than this many…
    pub defer_over_tools: usize,
    /// …or their specs (name, description, schema) exceed this many bytes.
    pub defer_over_bytes: usize,
}

impl Default for McpSettings {
    fn default() -> Self {
        Self {
            startup_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(60),
            tool_timeout: Duration::from_secs(300),
            defer: DeferMode::Auto,
            defer_over_tools: 30,
            defer_over_bytes: 40 * 1024,
        }
    }
}

/// Longest accepted timeout, so a typo cannot make a wait endless.
const MAX_TIMEOUT_SECS: u64 = 24 * 60 * 60;

impl McpSettings {
    /// The settings of `config` (later files win; an untrusted project's are left
    /// out by the trust filter like its servers).
    pub fn from_config(config: &ConfigFiles) -> Result<Self, ConfigError> {
        let mut settings = Self::default();
        for file in config.files() {
            let Some(value) = &file.value else { continue };
            let invalid = |key: &str, message: &str| ConfigError::Invalid {
                path: file.path.clone(),
                key: key.to_string(),
                message: message.to_string(),
            };
            let secs = |key: &str| -> Result<Option<Duration>, ConfigError> {
                match value.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => match v.as_u64() {
                        Some(n) if (1..=MAX_TIMEOUT_SECS).contains(&n) => {
                            Ok(Some(Duration::from_secs(n)))
                        }
                        _ => Err(invalid(
                            key,
                            &format!(
                                "must be a whole number of seconds from 1 to {MAX_TIMEOUT_SECS}"
                            ),
                        )),
                    },
                }
            };
            if let Some(t) = secs("mcp_startup_timeout_secs")? {
                settings.startup_timeout = t;
            }
            if let Some(t) = secs("mcp_tool_timeout_secs")? {
                settings.tool_timeout = t;
            }
            match value.get("mcp_defer") {
                None | Some(Value::Null) => {}
                Some(v) => {
                    settings.defer = match v.as_str() {
                        Some("auto") => DeferMode::Auto,
                        Some("always") => DeferMode::Always,
                        Some("never") => DeferMode::Never,
                        _ => return Err(invalid("mcp_defer", "must be auto, always or never")),
                    }
                }
            }
        }
        settings.connect_timeout = (settings.startup_timeout * 6).max(Duration::from_secs(60));
        Ok(settings)
    }

    /// Whether tools totalling `count` specs of `bytes` bytes are deferred.
    pub fn defers(&self, count: usize, bytes: usize) -> bool {
        match self.defer {
            DeferMode::Always => true,
            DeferMode::Never => false,
            DeferMode::Auto => count > self.defer_over_tools || bytes > self.defer_over_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigFile, ProjectTrust, Source};

    fn config(user: &str, project: &str, trust: ProjectTrust) -> Result<McpSettings, ConfigError> {
        let file = |source, text: &str| ConfigFile {
            source,
            path: std::path::PathBuf::from(format!("/{source:?}.yaml")),
            value: Some(serde_yaml_ng::from_str(text).unwrap()),
        };
        let files = [
            file(Source::User, user),
            file(Source::Project, project),
            file(Source::Local, "{}"),
        ];
        McpSettings::from_config(&ConfigFiles::from_files(files, trust)?)
    }

    #[test]
    fn settings_come_from_the_files_later_wins_and_bad_values_are_errors() {
        let defaults = config("{}", "{}", ProjectTrust::Trusted).unwrap();
        assert_eq!(defaults, McpSettings::default());
        let user = "mcp_startup_timeout_secs: 3\nmcp_tool_timeout_secs: 7\nmcp_defer: never\n";
        let set = config(user, "mcp_defer: always", ProjectTrust::Trusted).unwrap();
        assert_eq!(set.startup_timeout, Duration::from_secs(3));
        assert_eq!(set.tool_timeout, Duration::from_secs(7));
        assert_eq!(set.defer, DeferMode::Always);
        assert_eq!(set.connect_timeout, Duration::from_secs(60));
        let untrusted = config(user, "mcp_defer: always", ProjectTrust::Untrusted).unwrap();
        assert_eq!(
            untrusted.defer,
            DeferMode::Never,
            "an untrusted project sets nothing"
        );
        for bad in [
            "mcp_startup_timeout_secs: 0",
            "mcp_tool_timeout_secs: -1",
            "mcp_tool_timeout_secs: 1.5",
            "mcp_startup_timeout_secs: 100000000",
            "mcp_defer: sometimes",
        ] {
            let e = config(bad, "{}", ProjectTrust::Trusted)
                .unwrap_err()
                .to_string();
            assert!(e.contains(bad.split(':').next().unwrap()), "{bad}: {e}");
        }
    }

    #[test]
    fn deferral_decision_follows_the_mode_and_thresholds() {
        let auto = McpSettings::default();
        assert!(!auto.defers(0, 0));
        assert!(!auto.defers(30, 1000));
        assert!(auto.defers(31, 1000));
        assert!(auto.defers(2, 40 * 1024 + 1));
        let always = McpSettings {
            defer: DeferMode::Always,
            ..McpSettings::default()
        };
        assert!(always.defers(1, 10));
        let never = McpSettings {
            defer: DeferMode::Never,
            ..McpSettings::default()
        };
        assert!(!never.defers(1000, 1 << 30));
    }
}
