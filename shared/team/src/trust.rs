//! Whether an agent honours its project's config files in full.
//!
//! A project is trusted when the user's `trusted_projects` lists it or the run says so
//! (`--trust-project`, or a teammate of a lead that trusts it). Otherwise its
//! `.roocode/config.yaml` and `.roocode/config.local.yaml` may only narrow (see
//! `roo_agent::config::trust`). Only an interactive agent asks — and only when the
//! project's files hold something trust would enable; how it asks is the UI's business
//! ([`TrustQuestion`]). A "yes" is saved to the trust list.

use std::path::Path;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use roo_agent::config::{ConfigError, ConfigFiles, IgnoredSetting, ProjectTrust, trust_project};

/// How the builder decides trust.
#[derive(Clone)]
pub enum Trust {
    /// Trusted for this run, not saved (`--trust-project`; a teammate of a lead that
    /// trusts the project).
    Granted,
    /// Trusted only if the user's `trusted_projects` lists the project; otherwise each
    /// ignored setting becomes a notice.
    AsListed,
    /// As listed, else ask this question (the interactive lead).
    Ask(Arc<dyn TrustQuestion>),
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Trust::Granted => "Granted",
            Trust::AsListed => "AsListed",
            Trust::Ask(_) => "Ask",
        })
    }
}

/// Asks a person whether to trust a project.
pub trait TrustQuestion: Send + Sync {
    /// Whether to trust `project_root`, whose config files hold `ignored`: the settings
    /// trust would enable. `true` trusts it and saves that in the user's trust list.
    fn ask<'a>(
        &'a self,
        project_root: &'a Path,
        ignored: &'a [IgnoredSetting],
    ) -> BoxFuture<'a, bool>;
}

/// The config to use, and notices about what was ignored (one per setting).
pub struct TrustDecision {
    pub config: ConfigFiles,
    pub notices: Vec<String>,
}

/// Decides the trust of `project_root`. `config` must have been loaded untrusted: its
/// `ignored()` is what trust would enable.
pub async fn decide(
    config: ConfigFiles,
    project_root: &Path,
    roo_home: &Path,
    trust: &Trust,
) -> Result<TrustDecision, ConfigError> {
    if matches!(trust, Trust::Granted) || config.lists_as_trusted(project_root) {
        return Ok(TrustDecision {
            config: config.with_trust(ProjectTrust::Trusted)?,
            notices: Vec::new(),
        });
    }
    // Nothing to widen: no question, nothing ignored.
    if config.ignored().is_empty() {
        return Ok(TrustDecision {
            config,
            notices: Vec::new(),
        });
    }
    if let Trust::Ask(question) = trust
        && question.ask(project_root, config.ignored()).await
    {
        let saved = match trust_project(roo_home, project_root) {
            Ok(()) => format!(
                "trusted {} (saved in {}; delete it from trusted_projects there to undo)",
                project_root.display(),
                roo_agent::config::user_config_path(roo_home).display()
            ),
            // The answer still holds for this session.
            Err(e) => format!(
                "trusted {} for this session only: {e}",
                project_root.display()
            ),
        };
        return Ok(TrustDecision {
            config: config.with_trust(ProjectTrust::Trusted)?,
            notices: vec![saved],
        });
    }

    let hint = if matches!(trust, Trust::Ask(_)) {
        "this project is not trusted"
    } else {
        "this project is not trusted; pass --trust-project to honour it"
    };
    let notices = config
        .ignored()
        .iter()
        .map(|ignored| format!("ignored {ignored} ({hint})"))
        .collect();
    Ok(TrustDecision { config, notices })
}
