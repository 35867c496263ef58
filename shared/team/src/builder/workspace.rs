//! The first steps of the builder: where the agent works (its directories), under which
//! configuration and trust decision, and with which model. What they settle, [`Workspace`],
//! is read by every later step; it lives apart so the steps that only read it need not
//! see how it was decided.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use roo_agent::config::{ConfigFiles, HandedProjectConfig, ProjectTrust};
use roo_llm::{LlmFlags, LlmSettings, Provider};

use super::{BuildError, detect_project_root};
use crate::settings::AgentSettings;
use crate::trust::{Trust, TrustDecision, decide};

/// The first steps of [`build_agent`](super::build_agent): where the agent works
/// (`pending`: its directory is still being made), under which configuration (with the
/// trust notices), with which model. Takes what it settles out of `settings`.
pub(super) async fn settle(
    settings: &mut AgentSettings,
    pending: bool,
) -> Result<(Workspace, Vec<String>, LlmSettings, Arc<dyn Provider>), BuildError> {
    let (cwd, project_root) =
        directories(settings.cwd.take(), settings.project_root.take(), pending).await?;
    let (mut ws, trust_notices) = configuration(
        cwd,
        project_root,
        settings.config_root.take(),
        settings.project_config.take(),
        std::mem::take(&mut settings.roo_home),
        &settings.trust,
    )
    .await?;
    ws.store_setting = settings.store_setting.take();
    let (llm, provider) = model(&settings.llm, &ws.config, settings.provider.take())?;
    Ok((ws, trust_notices, llm, provider))
}

/// Where an agent works and the configuration in force there: what the first steps of
/// [`build_agent`](super::build_agent) settle and every later one reads.
pub(super) struct Workspace {
    /// The canonical working directory.
    pub(super) cwd: PathBuf,
    pub(super) project_root: PathBuf,
    /// Where the config files were read and whose trust applies.
    pub(super) config_root: PathBuf,
    pub(super) roo_home: PathBuf,
    /// [`AgentSettings::store_setting`].
    pub(super) store_setting: Option<String>,
    /// The config files, after the trust decision.
    pub(super) config: ConfigFiles,
    /// Whether the project's config is honoured in full.
    pub(super) trusted: bool,
    /// Where the project's instructions, agent definitions and skills come from.
    pub(super) definitions: Definitions,
}

/// Where an agent's project instructions (`ROOCODE.md`), agent definitions
/// (`.roocode/agents/`) and skills (`.roocode/skills/`) come from: never a tree its
/// teammate-self can write and a later start would obey.
pub(super) enum Definitions {
    /// This tree: the project root, or, for a teammate in a clone, the lead's tree its
    /// config comes from (`config_root`).
    Tree(PathBuf),
    /// A teammate on another host: the instructions its lead read in its own tree
    /// (one part per file) were handed over; no project agents or skills are read (the
    /// clone's are the teammate's to write).
    Handed { instructions: Vec<String> },
}

impl Definitions {
    /// The tree agents and skills are read from, if any.
    pub(super) fn tree(&self) -> Option<&Path> {
        match self {
            Definitions::Tree(root) => Some(root),
            Definitions::Handed { .. } => None,
        }
    }
}

/// The working directory (`None`: the process's) and project root, resolved. A pending
/// workspace's are given resolved: there is nothing to inspect yet.
async fn directories(
    cwd: Option<PathBuf>,
    project_root: Option<PathBuf>,
    pending: bool,
) -> Result<(PathBuf, PathBuf), BuildError> {
    let cwd = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(BuildError::CurrentDir)?,
    };
    if pending {
        let root = project_root.unwrap_or_else(|| cwd.clone());
        return Ok((cwd, root));
    }
    existing_workspace(cwd, project_root).await
}

/// The config files of `config_root` (default: the project root), or those `handed`
/// holds (then no project file here is read, and the lead's trust decision on them
/// is final: this host's trust list is not consulted), and the trust decision on them,
/// with its notices. They are loaded untrusted first: what that leaves out is what
/// trust would enable.
async fn configuration(
    cwd: PathBuf,
    project_root: PathBuf,
    config_root: Option<PathBuf>,
    handed: Option<HandedProjectConfig>,
    roo_home: PathBuf,
    trust: &Trust,
) -> Result<(Workspace, Vec<String>), BuildError> {
    let config_root = match config_root {
        Some(root) if handed.is_none() => {
            std::fs::canonicalize(&root).map_err(|source| BuildError::ProjectRoot {
                path: root.clone(),
                source,
            })?
        }
        _ => project_root.clone(),
    };
    let TrustDecision {
        config,
        mut notices,
    } = match &handed {
        // The lead's decision is final: this host's trust list (which could name the
        // lead's path for a project of its own) is never consulted for it.
        Some(handed) => {
            let config = ConfigFiles::load_handed(&roo_home, handed, ProjectTrust::Untrusted)?;
            if handed.trusted {
                TrustDecision {
                    config: config.with_trust(ProjectTrust::Trusted)?,
                    notices: Vec::new(),
                }
            } else {
                let notices = config
                    .ignored()
                    .iter()
                    .map(|ignored| {
                        format!("ignored {ignored} (the lead does not trust this project)")
                    })
                    .collect();
                TrustDecision { config, notices }
            }
        }
        None => {
            let config = ConfigFiles::load(&roo_home, &config_root, ProjectTrust::Untrusted)?;
            decide(config, &config_root, &roo_home, trust).await?
        }
    };
    notices.extend(config.user_only_notices().iter().cloned());
    let trusted = config.trust() == ProjectTrust::Trusted;
    let definitions = match handed {
        Some(handed) => Definitions::Handed {
            instructions: handed.instructions,
        },
        None => Definitions::Tree(config_root.clone()),
    };
    let workspace = Workspace {
        cwd,
        project_root,
        config_root,
        roo_home,
        store_setting: None,
        config,
        trusted,
        definitions,
    };
    Ok((workspace, notices))
}

/// The resolved working directory and project root of a directory that exists.
async fn existing_workspace(
    cwd: PathBuf,
    project_root: Option<PathBuf>,
) -> Result<(PathBuf, PathBuf), BuildError> {
    let cwd = std::fs::canonicalize(&cwd).map_err(|source| BuildError::WorkingDir {
        path: cwd.clone(),
        source,
    })?;
    let inspect = cwd.clone();
    let root = tokio::task::spawn_blocking(move || {
        Ok::<_, BuildError>(match project_root {
            Some(root) => {
                std::fs::canonicalize(&root).map_err(|source| BuildError::ProjectRoot {
                    path: root.clone(),
                    source,
                })?
            }
            None => detect_project_root(&inspect)?,
        })
    })
    .await
    .map_err(|e| BuildError::Inspect(e.to_string()))??;
    Ok((cwd, root))
}

/// The model settings (flags, then the environment, then the config files after the
/// trust filter: user over local over project) and the provider: the one given, or one
/// built from the settings.
fn model(
    flags: &LlmFlags,
    config: &ConfigFiles,
    provider: Option<Arc<dyn Provider>>,
) -> Result<(LlmSettings, Arc<dyn Provider>), BuildError> {
    let files = config.llm_settings()?;
    let llm = LlmSettings::resolve(flags, &roo_agent::exec::sandbox::secret_env, &files)?;
    let provider = match provider {
        Some(provider) => provider,
        None => roo_llm::build_provider(&llm)?,
    };
    Ok((llm, provider))
}
