//! Which model to talk to, and how: provider, model, base URL, key, limits, timeouts,
//! retries, prices and the script file — resolved from flags, environment and config
//! files with one precedence rule (flags > env > config layers in the order the
//! caller gives them > defaults); [`crate::build_provider`] turns the result into a
//! [`crate::Provider`]. The app passes the layers as project < local < user, so the user's
//! own file outranks a project's, and an untrusted project passes none (see
//! docs/PERMISSIONS.md, "Project trust").
//!
//! The config files (`~/.roocode/config.yaml`, `.roocode/config.yaml`,
//! `.roocode/config.local.yaml`) are shared with other layers (`permissions`, `hooks`,
//! `mcp_servers`), so [`FileSettings`] reads only its own top-level keys and ignores
//! the rest.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{LlmError, Result};
use crate::models::{PriceSpec, PriceTable};
use crate::retry::RetryPolicy;
use crate::types::Usage;

/// Which protocol to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI-compatible Chat Completions (OpenAI, Ollama, vLLM, llama.cpp, DeepSeek, …).
    #[serde(rename = "openai")]
    OpenAi,
    /// Replays a script file; no network, no key.
    Script,
}

impl ProviderKind {
    /// The name used in flags, env and config.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::Script => "script",
        }
    }

    /// Model used when none is configured.
    pub fn default_model(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "claude-sonnet-4-5",
            ProviderKind::OpenAi => "gpt-4.1",
            ProviderKind::Script => "script",
        }
    }

    /// Base URL used when none is configured.
    pub fn default_base_url(self) -> &'static str {
        match self {
            // The client appends `/v1/messages`.
            ProviderKind::Anthropic => "https://api.anthropic.com",
            // The client appends `/chat/completions`.
            ProviderKind::OpenAi => "https://api.openai.com/v1",
            ProviderKind::Script => "",
        }
    }

    fn key_env(self) -> Option<&'static str> {
        match self {
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::OpenAi => Some("OPENAI_API_KEY"),
            ProviderKind::Script => None,
        }
    }

    fn base_url_env(self) -> Option<&'static str> {
        match self {
            ProviderKind::Anthropic => Some("ANTHROPIC_BASE_URL"),
            ProviderKind::OpenAi => Some("OPENAI_BASE_URL"),
            ProviderKind::Script => None,
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProviderKind {
    type Err = LlmError;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "anthropic" | "claude" => Ok(ProviderKind::Anthropic),
            "openai" | "openai-compatible" | "openai_compatible" => Ok(ProviderKind::OpenAi),
            "script" | "scripted" => Ok(ProviderKind::Script),
            other => Err(LlmError::Config(format!(
                "select provider `{other}`: it is unknown; use anthropic, openai or script"
            ))),
        }
    }
}

/// Timeouts of one model request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing the TCP/TLS connection.
    pub connect: Duration,
    /// The whole request, from sending to the last event.
    pub request: Duration,
    /// Longest silence allowed between pieces of the response (including the wait for
    /// the response headers). Reasoning models can be silent for minutes.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            request: Duration::from_secs(1200),
            idle: Duration::from_secs(300),
        }
    }
}

/// Whether a tool call the model wrote as text (a lone `{"name": …, "arguments": …}`
/// object, bare, fenced or in `<tool_call>` tags) is run as a call. Small local
/// models often do that instead of using the API's tool calling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TextToolCalls {
    /// On unless the base URL is the vendor's own API (`api.anthropic.com`,
    /// `api.openai.com`), whose models use structured calls; off for `script`.
    #[default]
    Auto,
    On,
    Off,
}

impl FromStr for TextToolCalls {
    type Err = LlmError;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(TextToolCalls::Auto),
            "on" | "true" | "yes" => Ok(TextToolCalls::On),
            "off" | "false" | "no" => Ok(TextToolCalls::Off),
            other => Err(LlmError::Config(format!(
                "set text_tool_calls to `{other}`: it must be auto, on or off"
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for TextToolCalls {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bool(true) => Ok(TextToolCalls::On),
            Raw::Bool(false) => Ok(TextToolCalls::Off),
            Raw::Text(text) => text.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// Default `max_tokens` of a response.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// Everything needed to build a provider. Build one with [`LlmSettings::resolve`] or,
/// in tests, from [`LlmSettings::defaults`] with fields overridden.
#[derive(Clone, PartialEq)]
pub struct LlmSettings {
    pub provider: ProviderKind,
    pub model: String,
    /// Anthropic: the server root (`/v1/messages` is appended). OpenAI-compatible: up to
    /// and including `/v1` (`/chat/completions` is appended). Empty for `script`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub max_tokens: u32,
    pub timeouts: Timeouts,
    pub retry: RetryPolicy,
    /// Overrides the built-in context window of the model.
    pub context_window: Option<u64>,
    /// Anthropic extended thinking budget in tokens (`None`: thinking off).
    pub thinking_budget: Option<u32>,
    pub prices: PriceTable,
    /// Script file of the `script` provider.
    pub script: Option<PathBuf>,
    /// Where the `script` provider persists its per-agent cursors, so that a restarted
    /// process continues where it left off (`ROO_SCRIPT_STATE`).
    pub script_state: Option<PathBuf>,
    /// Whether tool calls written as text are run (see [`LlmSettings::text_tool_calls_enabled`]).
    pub text_tool_calls: TextToolCalls,
}

impl fmt::Debug for LlmSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmSettings")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("max_tokens", &self.max_tokens)
            .field("timeouts", &self.timeouts)
            .field("retry", &self.retry)
            .field("context_window", &self.context_window)
            .field("thinking_budget", &self.thinking_budget)
            .field("script", &self.script)
            .field("script_state", &self.script_state)
            .field("text_tool_calls", &self.text_tool_calls)
            .finish_non_exhaustive()
    }
}

/// Provider-related command-line flags, as the app parsed them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LlmFlags {
    /// `--provider anthropic|openai|script`
    pub provider: Option<String>,
    /// `--model`
    pub model: Option<String>,
    /// `--base-url`
    pub base_url: Option<String>,
    /// `--script FILE` (implies `--provider script` when no provider is given)
    pub script: Option<PathBuf>,
    /// `--max-tokens`
    pub max_tokens: Option<u32>,
}

/// Timeouts as written in config, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeoutsSpec {
    pub connect: Option<f64>,
    pub request: Option<f64>,
    pub idle: Option<f64>,
}

/// Retry policy as written in config (delays in seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RetrySpec {
    pub max_retries: Option<u32>,
    pub base_delay: Option<f64>,
    pub max_delay: Option<f64>,
    pub max_retry_after: Option<f64>,
}

/// The top-level keys of a config file this layer reads. Every field is optional and
/// unknown keys are ignored (other layers own them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileSettings {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub max_tokens: Option<u32>,
    pub timeouts: Option<TimeoutsSpec>,
    pub retries: Option<RetrySpec>,
    pub prices: Option<BTreeMap<String, PriceSpec>>,
    pub context_window: Option<u64>,
    pub thinking_budget: Option<u32>,
    /// Script file; a relative path is relative to the config file's directory.
    pub script: Option<PathBuf>,
    /// Script cursor state file; relative like `script`.
    pub script_state: Option<PathBuf>,
    /// `auto` (default), `on` or `off`.
    pub text_tool_calls: Option<TextToolCalls>,
    /// The file these settings came from (set by [`FileSettings::load`]).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

impl FileSettings {
    /// Reads one config file. A missing file is `Ok(None)`; an unreadable or
    /// unparsable one is an error naming the file.
    pub fn load(path: &Path) -> Result<Option<FileSettings>> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(LlmError::ConfigFile {
                    path: path.to_owned(),
                    message: e.to_string(),
                });
            }
        };
        if text.trim().is_empty() {
            return Ok(Some(FileSettings {
                source: Some(path.to_owned()),
                ..FileSettings::default()
            }));
        }
        let mut settings: FileSettings =
            serde_yaml_ng::from_str(&text).map_err(|e| LlmError::ConfigFile {
                path: path.to_owned(),
                message: format!("{e}; fix the YAML (see docs/LLM.md for the keys)"),
            })?;
        settings.source = Some(path.to_owned());
        Ok(Some(settings))
    }

    /// Reads the settings from an already-parsed config document that came from
    /// `source` (relative `script` paths are relative to its directory). Which
    /// files count, and in what order, is decided by the caller
    /// (`roo_agent::config::ConfigFiles::llm_settings` applies project trust and
    /// puts the user's file last, so it wins).
    pub fn from_value(value: serde_yaml_ng::Value, source: &Path) -> Result<FileSettings> {
        let value = if value.is_null() {
            serde_yaml_ng::Value::Mapping(Default::default())
        } else {
            value
        };
        let mut settings: FileSettings =
            serde_yaml_ng::from_value(value).map_err(|e| LlmError::ConfigFile {
                path: source.to_owned(),
                message: format!("{e}; fix the value (see docs/LLM.md for the keys)"),
            })?;
        settings.source = Some(source.to_owned());
        Ok(settings)
    }

    fn relative(&self, path: &Path) -> PathBuf {
        match self.source.as_deref().and_then(Path::parent) {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_owned(),
        }
    }
}

impl LlmSettings {
    /// Defaults of `provider`: its default model and base URL, no key, default limits.
    pub fn defaults(provider: ProviderKind) -> Self {
        Self {
            provider,
            model: provider.default_model().to_owned(),
            base_url: provider.default_base_url().to_owned(),
            api_key: None,
            max_tokens: DEFAULT_MAX_TOKENS,
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            context_window: None,
            thinking_budget: None,
            prices: PriceTable::default(),
            script: None,
            script_state: None,
            text_tool_calls: TextToolCalls::Auto,
        }
    }

    /// Whether tool calls the model writes as text are run as calls: `on`/`off` as
    /// configured; `auto` means on for every server except the vendor's own API
    /// (`api.anthropic.com`, `api.openai.com`) and off for `script`.
    pub fn text_tool_calls_enabled(&self) -> bool {
        match self.text_tool_calls {
            TextToolCalls::On => true,
            TextToolCalls::Off => false,
            TextToolCalls::Auto => match self.provider {
                ProviderKind::Script => false,
                ProviderKind::Anthropic | ProviderKind::OpenAi => !matches!(
                    crate::transport::url_host(&self.base_url).as_deref(),
                    Some("api.anthropic.com" | "api.openai.com")
                ),
            },
        }
    }

    /// Resolves settings with precedence flags > env > config files > defaults.
    ///
    /// `env` looks up environment variables (pass `|k| std::env::var(k).ok()`; tests
    /// pass a map). `files` are config layers in increasing priority: later files win
    /// (`roo_agent::config::ConfigFiles::llm_settings` gives project, local, user).
    /// Empty values count as unset.
    ///
    /// Without any provider setting, the provider is `script` if a script is given,
    /// else anthropic if `ANTHROPIC_API_KEY` is set, else openai if `OPENAI_API_KEY` is
    /// set, else an error that says how to configure one.
    pub fn resolve(
        flags: &LlmFlags,
        env: &dyn Fn(&str) -> Option<String>,
        files: &[FileSettings],
    ) -> Result<LlmSettings> {
        let env = |key: &str| env(key).filter(|v| !v.trim().is_empty());
        let file = |pick: &dyn Fn(&FileSettings) -> Option<String>| {
            files
                .iter()
                .rev()
                .find_map(|f| pick(f).filter(|v| !v.trim().is_empty()))
        };
        let script = flags
            .script
            .clone()
            .or_else(|| env("ROO_SCRIPT").map(PathBuf::from))
            .or_else(|| {
                files
                    .iter()
                    .rev()
                    .find_map(|f| f.script.as_deref().map(|p| f.relative(p)))
            });

        let provider_name = flags
            .provider
            .clone()
            .filter(|v| !v.trim().is_empty())
            .or_else(|| env("ROO_PROVIDER"))
            .or_else(|| file(&|f| f.provider.clone()));
        let provider = match provider_name {
            Some(name) => name.parse()?,
            None if script.is_some() => ProviderKind::Script,
            None if env("ANTHROPIC_API_KEY").is_some() => ProviderKind::Anthropic,
            None if env("OPENAI_API_KEY").is_some() => ProviderKind::OpenAi,
            None => {
                return Err(LlmError::Config(format!(
                    "choose a model provider: none is configured; set ANTHROPIC_API_KEY or \
                     OPENAI_API_KEY (or `provider` and `api_key` in {}), \
                     or pass --provider openai --base-url URL for a local server; \
                     to watch a team at work without a key, run `roo-lead demo`",
                    roo_store::user_config_shown()
                )));
            }
        };

        let mut settings = LlmSettings::defaults(provider);
        if let Some(model) = flags
            .model
            .clone()
            .filter(|v| !v.trim().is_empty())
            .or_else(|| env("ROO_MODEL"))
            .or_else(|| file(&|f| f.model.clone()))
        {
            settings.model = model;
        }
        if let Some(url) = flags
            .base_url
            .clone()
            .filter(|v| !v.trim().is_empty())
            .or_else(|| env("ROO_BASE_URL"))
            .or_else(|| provider.base_url_env().and_then(env))
            .or_else(|| file(&|f| f.base_url.clone()))
        {
            settings.base_url = url.trim().to_owned();
        }
        settings.api_key = provider
            .key_env()
            .and_then(env)
            .or_else(|| file(&|f| f.api_key.clone()))
            .map(|k| k.trim().to_owned());
        settings.max_tokens = flags
            .max_tokens
            .or_else(|| files.iter().rev().find_map(|f| f.max_tokens))
            .unwrap_or(DEFAULT_MAX_TOKENS);
        settings.context_window = files.iter().rev().find_map(|f| f.context_window);
        settings.thinking_budget = files.iter().rev().find_map(|f| f.thinking_budget);
        for layer in files {
            if let Some(t) = &layer.timeouts {
                apply_secs(
                    &mut settings.timeouts.connect,
                    t.connect,
                    "timeouts.connect",
                )?;
                apply_secs(
                    &mut settings.timeouts.request,
                    t.request,
                    "timeouts.request",
                )?;
                apply_secs(&mut settings.timeouts.idle, t.idle, "timeouts.idle")?;
            }
            if let Some(r) = &layer.retries {
                if let Some(n) = r.max_retries {
                    settings.retry.max_retries = n;
                }
                apply_secs(
                    &mut settings.retry.base_delay,
                    r.base_delay,
                    "retries.base_delay",
                )?;
                apply_secs(
                    &mut settings.retry.max_delay,
                    r.max_delay,
                    "retries.max_delay",
                )?;
                apply_secs(
                    &mut settings.retry.max_retry_after,
                    r.max_retry_after,
                    "retries.max_retry_after",
                )?;
            }
            if let Some(prices) = &layer.prices {
                settings
                    .prices
                    .merge(&PriceTable::with_overrides(prices.clone()));
            }
        }
        settings.text_tool_calls = files
            .iter()
            .rev()
            .find_map(|f| f.text_tool_calls)
            .unwrap_or_default();
        settings.script = script;
        settings.script_state = env("ROO_SCRIPT_STATE").map(PathBuf::from).or_else(|| {
            files
                .iter()
                .rev()
                .find_map(|f| f.script_state.as_deref().map(|p| f.relative(p)))
        });
        settings.validate()?;
        Ok(settings)
    }

    /// Checks that the settings can work: a script for `script`, an http(s) base URL,
    /// and a key for the providers' own endpoints (local servers need none).
    pub fn validate(&self) -> Result<()> {
        match self.provider {
            ProviderKind::Script => {
                if self.script.is_none() {
                    return Err(LlmError::Config(
                        "use the script provider: no script file given; pass --script FILE or set ROO_SCRIPT"
                            .to_owned(),
                    ));
                }
            }
            ProviderKind::Anthropic | ProviderKind::OpenAi => {
                if !(self.base_url.starts_with("http://") || self.base_url.starts_with("https://"))
                {
                    return Err(LlmError::Config(format!(
                        "use base URL `{}`: it must start with http:// or https://",
                        self.base_url
                    )));
                }
                let official = self.base_url.trim_end_matches('/')
                    == self.provider.default_base_url().trim_end_matches('/');
                if official && self.api_key.is_none() {
                    let key = self.provider.key_env().unwrap_or("the API key");
                    return Err(LlmError::Config(format!(
                        "use the {} provider: no API key; set {key} (or `api_key` in {}), \
                         or point --base-url at a local server",
                        self.provider,
                        roo_store::user_config_shown()
                    )));
                }
            }
        }
        if self.max_tokens == 0 {
            return Err(LlmError::Config(
                "use max_tokens 0: it must be at least 1".to_owned(),
            ));
        }
        Ok(())
    }

    /// Cost in USD of `usage` on `model` with the configured prices.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.prices.cost(model, usage)
    }
}

fn apply_secs(slot: &mut Duration, value: Option<f64>, key: &str) -> Result<()> {
    if let Some(secs) = value {
        if !(secs.is_finite() && secs > 0.0) {
            return Err(LlmError::Config(format!(
                "use {key} = {secs}: it must be a positive number of seconds"
            )));
        }
        *slot = Duration::from_secs_f64(secs);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn yaml(text: &str) -> FileSettings {
        serde_yaml_ng::from_str(text).unwrap()
    }

    #[test]
    fn precedence_flags_env_then_later_files() {
        let user = yaml(
            "provider: openai\nmodel: user-model\nbase_url: http://user/v1\nmax_tokens: 100\npermissions: {allow: [x]}\n",
        );
        let project = yaml("model: project-model\nhooks: []\ntimeouts: {idle: 5}\n");
        let env = env_of(&[("ROO_MODEL", "env-model"), ("OPENAI_API_KEY", "sk-env")]);
        let s = LlmSettings::resolve(&LlmFlags::default(), &env, &[user.clone(), project.clone()])
            .unwrap();
        assert_eq!(s.provider, ProviderKind::OpenAi);
        assert_eq!(s.model, "env-model");
        assert_eq!(s.base_url, "http://user/v1");
        assert_eq!(s.api_key.as_deref(), Some("sk-env"));
        assert_eq!(s.max_tokens, 100);
        assert_eq!(s.timeouts.idle, Duration::from_secs(5));

        let no_env = env_of(&[]);
        let s = LlmSettings::resolve(
            &LlmFlags::default(),
            &no_env,
            &[user.clone(), project.clone()],
        )
        .unwrap();
        assert_eq!(s.model, "project-model");

        let flags = LlmFlags {
            model: Some("flag-model".into()),
            base_url: Some("http://flag/v1".into()),
            ..LlmFlags::default()
        };
        let env = env_of(&[
            ("ROO_MODEL", "env-model"),
            ("OPENAI_BASE_URL", "http://env/v1"),
        ]);
        let s = LlmSettings::resolve(&flags, &env, &[user, project]).unwrap();
        assert_eq!(s.model, "flag-model");
        assert_eq!(s.base_url, "http://flag/v1");
    }

    #[test]
    fn default_provider_detection_and_errors() {
        let none = LlmSettings::resolve(&LlmFlags::default(), &env_of(&[]), &[]).unwrap_err();
        assert!(none.to_string().contains("ANTHROPIC_API_KEY"), "{none}");
        assert!(none.to_string().contains("`roo-lead demo`"), "{none}");

        let both = env_of(&[("ANTHROPIC_API_KEY", "a"), ("OPENAI_API_KEY", "o")]);
        let s = LlmSettings::resolve(&LlmFlags::default(), &both, &[]).unwrap();
        assert_eq!(s.provider, ProviderKind::Anthropic);
        assert_eq!(s.base_url, "https://api.anthropic.com");
        assert_eq!(s.model, "claude-sonnet-4-5");

        let openai = env_of(&[("OPENAI_API_KEY", "o"), ("ANTHROPIC_API_KEY", "")]);
        let s = LlmSettings::resolve(&LlmFlags::default(), &openai, &[]).unwrap();
        assert_eq!(s.provider, ProviderKind::OpenAi);

        let flags = LlmFlags {
            provider: Some("anthropic".into()),
            ..LlmFlags::default()
        };
        let err = LlmSettings::resolve(&flags, &env_of(&[]), &[]).unwrap_err();
        assert!(err.to_string().contains("set ANTHROPIC_API_KEY"), "{err}");

        // A local server needs no key.
        let flags = LlmFlags {
            provider: Some("openai".into()),
            base_url: Some("http://localhost:11434/v1".into()),
            ..LlmFlags::default()
        };
        let s = LlmSettings::resolve(&flags, &env_of(&[]), &[]).unwrap();
        assert_eq!(s.api_key, None);

        let bad = LlmFlags {
            provider: Some("gemini".into()),
            ..LlmFlags::default()
        };
        let err = LlmSettings::resolve(&bad, &env_of(&[]), &[]).unwrap_err();
        assert!(
            err.to_string().contains("anthropic, openai or script"),
            "{err}"
        );
    }

    #[test]
    fn script_flag_implies_script_provider() {
        let flags = LlmFlags {
            script: Some("demo.yaml".into()),
            ..LlmFlags::default()
        };
        let env = env_of(&[
            ("ANTHROPIC_API_KEY", "a"),
            ("ROO_SCRIPT_STATE", "/tmp/s.json"),
        ]);
        let s = LlmSettings::resolve(&flags, &env, &[]).unwrap();
        assert_eq!(s.provider, ProviderKind::Script);
        assert_eq!(s.script_state.as_deref(), Some(Path::new("/tmp/s.json")));
        let err = LlmSettings::resolve(
            &LlmFlags {
                provider: Some("script".into()),
                ..LlmFlags::default()
            },
            &env_of(&[]),
            &[],
        )
        .unwrap_err();
        assert!(err.to_string().contains("--script FILE"), "{err}");
    }

    #[test]
    fn file_loading() {
        let dir = std::env::temp_dir().join(format!("roo-llm-settings-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("p/.roocode")).unwrap();
        std::fs::write(
            dir.join("config.yaml"),
            "provider: script\nscript: demo.yaml\nmcp_servers: {x: {command: y}}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("p/.roocode/config.yaml"),
            "prices: {my-model: {input: 1, output: 2}}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("p/.roocode/config.local.yaml"),
            "model: [unclosed\n",
        )
        .unwrap();
        let err = FileSettings::load(&dir.join("p/.roocode/config.local.yaml")).unwrap_err();
        assert!(err.to_string().contains("config.local.yaml"), "{err}");
        let layers: Vec<FileSettings> =
            [dir.join("config.yaml"), dir.join("p/.roocode/config.yaml")]
                .iter()
                .map(|p| FileSettings::load(p).unwrap().unwrap())
                .collect();
        let from_value = FileSettings::from_value(
            serde_yaml_ng::from_str("max_tokens: [1]\n").unwrap(),
            &dir.join("x.yaml"),
        )
        .unwrap_err();
        assert!(from_value.to_string().contains("x.yaml"), "{from_value}");
        let s = LlmSettings::resolve(&LlmFlags::default(), &env_of(&[]), &layers).unwrap();
        assert_eq!(s.script.as_deref(), Some(dir.join("demo.yaml").as_path()));
        let usage = Usage {
            input_tokens: 1_000_000,
            ..Usage::default()
        };
        assert_eq!(s.cost("my-model", &usage), Some(1.0));
        assert_eq!(FileSettings::load(&dir.join("missing.yaml")).unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn text_tool_calls_are_on_for_local_servers_and_off_for_the_vendor_apis() {
        let with = |provider: ProviderKind, url: &str, mode: TextToolCalls| LlmSettings {
            base_url: url.to_owned(),
            text_tool_calls: mode,
            ..LlmSettings::defaults(provider)
        };
        use TextToolCalls::{Auto, Off, On};
        for (provider, url, mode, on) in [
            (
                ProviderKind::Anthropic,
                "https://api.anthropic.com",
                Auto,
                false,
            ),
            (
                ProviderKind::Anthropic,
                "https://API.anthropic.com:443/",
                Auto,
                false,
            ),
            (
                ProviderKind::OpenAi,
                "https://api.openai.com/v1",
                Auto,
                false,
            ),
            (ProviderKind::OpenAi, "http://127.0.0.1:8080/v1", Auto, true),
            (ProviderKind::Anthropic, "http://localhost:8080", Auto, true),
            // A look-alike host is not the vendor.
            (
                ProviderKind::OpenAi,
                "https://api.openai.com.evil.example/v1",
                Auto,
                true,
            ),
            (ProviderKind::OpenAi, "https://api.openai.com/v1", On, true),
            (ProviderKind::OpenAi, "http://127.0.0.1:8080/v1", Off, false),
            (ProviderKind::Script, "", Auto, false),
        ] {
            assert_eq!(
                with(provider, url, mode).text_tool_calls_enabled(),
                on,
                "{provider} {url} {mode:?}"
            );
        }

        let files = [
            yaml("text_tool_calls: off\n"),
            yaml("text_tool_calls: true\n"),
        ];
        let env = env_of(&[("OPENAI_API_KEY", "k")]);
        let flags = LlmFlags {
            provider: Some("openai".into()),
            ..LlmFlags::default()
        };
        let s = LlmSettings::resolve(&flags, &env, &files[..1]).unwrap();
        assert_eq!(s.text_tool_calls, Off);
        let s = LlmSettings::resolve(&flags, &env, &files).unwrap();
        assert_eq!(s.text_tool_calls, On);
        let s = LlmSettings::resolve(&flags, &env, &[]).unwrap();
        assert_eq!(s.text_tool_calls, Auto);
        let bad = serde_yaml_ng::from_str::<FileSettings>("text_tool_calls: sometimes\n")
            .unwrap_err()
            .to_string();
        assert!(bad.contains("auto, on or off"), "{bad}");
    }
}
