//! What a teammate's tools may reach.
//!
//! A teammate in a clone works with the clone as its project root: its permission
//! policy (layer 2, the path confinement of the file tools, and the `allowed_roots` the
//! loop hands the tools) and its command sandbox (`CommandSetup::for_agent` with the
//! clone as root) are rooted there. So its file tools and commands cannot write into
//! another teammate's clone or the lead's tree and git directory —
//! `.roocode/config.yaml` of the main repository included — while the `.roocode/`
//! protection, judged relative to the project root, only concerns the clone's own
//! `.roocode/`, not the `.roocode/worktrees/…` it lives in. The clone's `.git` is a
//! directory inside it: the sandbox grants nothing outside.
//!
//! The project's configuration and trust belong to the lead's repository, not
//! to the checkout in the clone: [`TeammateRoots::project_root`] is where
//! the runtime loads `.roocode/config.yaml` (and `config.local.yaml`, which is
//! not committed and so not in the clone) and checks `trusted_projects`.

use std::path::{Path, PathBuf};

use roo_agent::config::{ConfigError, ConfigFiles};
use roo_agent::permissions::{PermissionMode, PermissionPolicy};

use super::Workspace;

/// The directories that decide what a teammate may touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeammateRoots {
    /// Its working directory, and the project root of its permission policy
    /// and command sandbox: its clone, or the shared directory.
    pub work_root: PathBuf,
    /// The lead's project root: where the project config is loaded from and
    /// whose trust applies.
    pub project_root: PathBuf,
}

impl TeammateRoots {
    /// The roots of a teammate working in `workspace`.
    pub fn of(workspace: &Workspace) -> Self {
        match workspace {
            Workspace::Worktree(w) => Self {
                work_root: w.path.clone(),
                project_root: w.repo_root.clone(),
            },
            Workspace::Shared { dir, .. } => Self {
                work_root: dir.clone(),
                project_root: dir.clone(),
            },
        }
    }
}

/// The permission policy of a teammate: rooted at its work root, with the
/// rules and mode of `config` (loaded from [`TeammateRoots::project_root`];
/// `mode` overrides the configured one) and its session directory as an extra
/// root (large results spill there).
pub fn teammate_policy(
    roots: &TeammateRoots,
    config: &ConfigFiles,
    mode: Option<PermissionMode>,
    session_dir: &Path,
) -> Result<PermissionPolicy, ConfigError> {
    let mut policy = PermissionPolicy::from_config(config, roots.work_root.clone(), mode)?;
    policy.add_allowed_root(session_dir.to_path_buf());
    Ok(policy)
}
