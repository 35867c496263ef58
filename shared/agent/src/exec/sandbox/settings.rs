//! The sandbox's settings, as a value: merged from the config files' `sandbox:`
//! sections (read by [`crate::config::ConfigFiles::sandbox_settings`]) and flags.
//!
//! Only the user's own config (`~/.roocode/config.yaml`) and flags may widen
//! the sandbox: turn it off, add writable paths, allow the network or pass API
//! keys through. A project's files (`.roocode/config.yaml` and
//! `.roocode/config.local.yaml`, both of which arrive with a cloned repository)
//! may only narrow it: more unreadable paths, network off. What they try to
//! widen is ignored and listed in [`SandboxSettings::ignored`] for the user.

use std::path::{Path, PathBuf};

use crate::config::{ConfigError, ConfigFiles, SandboxSection, Source};

/// The resolved sandbox settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    /// Whether commands are confined at all.
    pub enabled: bool,
    /// Extra writable paths, absolute.
    pub allow_write: Vec<PathBuf>,
    /// Extra unreadable paths, absolute.
    pub deny_read: Vec<PathBuf>,
    /// Whether TCP is allowed.
    pub network: bool,
    /// Whether the namespace layer is wanted (Linux; used where the kernel has it).
    pub namespaces: bool,
    /// Variables kept in commands' environment although they look like keys.
    pub pass_env: Vec<String>,
    /// Widening settings a project file tried and that were ignored, as
    /// `<file>: <key>` lines for a notice.
    pub ignored: Vec<String>,
    /// Why the sandbox is off, when it is (`--no-sandbox`, the user config).
    pub disabled_by: Option<String>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            allow_write: Vec::new(),
            deny_read: Vec::new(),
            network: true,
            namespaces: true,
            pass_env: Vec::new(),
            ignored: Vec::new(),
            disabled_by: None,
        }
    }
}

impl SandboxSettings {
    /// Merges sections in increasing priority; only [`Source::User`] widens.
    pub fn merge(
        sections: &[(Source, PathBuf, SandboxSection)],
        project_root: &Path,
        home: Option<&Path>,
    ) -> Self {
        let mut settings = Self::default();
        let path_of = |text: &str| expand(text, project_root, home);
        for (source, file, section) in sections {
            let widen_ok = *source == Source::User;
            let ignore = |key: &str| format!("{}: sandbox.{key}", file.display());
            let mut ignored = Vec::new();
            match section.enabled {
                Some(false) if widen_ok => {
                    settings.enabled = false;
                    settings.disabled_by = Some(format!(
                        "`sandbox: {{enabled: false}}` in {}",
                        file.display()
                    ));
                }
                Some(false) => ignored.push(ignore("enabled")),
                // Turning it on only narrows: any file may.
                Some(true) => {
                    settings.enabled = true;
                    settings.disabled_by = None;
                }
                _ => {}
            }
            if !section.allow_write.is_empty() {
                if widen_ok {
                    settings
                        .allow_write
                        .extend(section.allow_write.iter().map(|p| path_of(p)));
                } else {
                    ignored.push(ignore("allow_write"));
                }
            }
            settings
                .deny_read
                .extend(section.deny_read.iter().map(|p| path_of(p)));
            match section.network {
                Some(false) => settings.network = false,
                Some(true) if widen_ok => settings.network = true,
                Some(true) if !settings.network => ignored.push(ignore("network")),
                _ => {}
            }
            match section.namespaces {
                Some(false) if widen_ok => settings.namespaces = false,
                Some(false) => ignored.push(ignore("namespaces")),
                Some(true) => settings.namespaces = true,
                None => {}
            }
            if !section.pass_env.is_empty() {
                if widen_ok {
                    settings.pass_env.extend(section.pass_env.iter().cloned());
                } else {
                    ignored.push(ignore("pass_env"));
                }
            }
            settings.ignored.extend(ignored);
        }
        settings
    }
}

/// `~/x` under `home`, absolute paths as they are, others under `base`.
fn expand(text: &str, base: &Path, home: Option<&Path>) -> PathBuf {
    if let Some(home) = home {
        if text == "~" {
            return home.to_path_buf();
        }
        if let Some(rest) = text.strip_prefix("~/") {
            return home.join(rest);
        }
    }
    let path = Path::new(text);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

/// Secrets commands may not read by default: SSH, cloud and registry
/// credentials under `home`, and RooCode's own user config (it may hold API
/// keys and is where the sandbox is configured).
pub fn default_deny_read(home: Option<&Path>, roo_home: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if let Some(home) = home {
        for rel in [
            ".ssh",
            ".aws",
            ".gnupg",
            ".config/gcloud",
            ".azure",
            ".netrc",
            ".docker/config.json",
            ".kube",
            ".git-credentials",
            ".config/gh/hosts.yml",
            ".npmrc",
            ".pypirc",
            ".cargo/credentials.toml",
            ".cargo/credentials",
            ".Xauthority",
            ".pgpass",
            ".vault-token",
            ".terraformrc",
            ".terraform.d/credentials.tfrc.json",
            ".config/hub",
            ".config/op",
        ] {
            paths.push(home.join(rel));
        }
    }
    paths.push(crate::config::user_config_path(roo_home));
    paths
}

/// Read here rather than in the config module, which stays plain data and parsing
/// (the config does not know the sandbox; the sandbox reads its section).
impl ConfigFiles {
    /// The sandbox's settings: the `sandbox:` sections of these files merged (paths
    /// relative to `project_root`, `~/` from `home`; only the user's file widens)
    /// and the `--no-sandbox` flag.
    pub fn sandbox_settings(
        &self,
        project_root: &Path,
        home: Option<&Path>,
        no_sandbox_flag: bool,
    ) -> Result<SandboxSettings, ConfigError> {
        let mut sections = Vec::new();
        for file in self.files() {
            let Some(value) = &file.value else { continue };
            if let Some(section) = crate::config::sandbox_section(value, &file.path)? {
                sections.push((file.source, file.path.clone(), section));
            }
        }
        let mut settings = SandboxSettings::merge(&sections, project_root, home);
        if no_sandbox_flag {
            settings.enabled = false;
            settings.disabled_by = Some("--no-sandbox".to_string());
        }
        Ok(settings)
    }
}
