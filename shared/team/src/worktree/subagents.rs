//! Worktrees of sub-agents (`isolation: worktree`), made and cleaned up like a
//! teammate's: `.roocode/worktrees/subagents+<session>-<id>` on branch
//! `roo/subagents/<session>-<id>`, from the project's `HEAD`, with the child's
//! permission policy and command sandbox rooted there ([`super::roots`]).

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use roo_agent::config::ConfigFiles;
use roo_agent::exec::sandbox::CommandSetup;
use roo_agent::subagent::{IsolatedWorkspace, WorktreeIsolation};
use roo_store::Name;

use super::{Discovered, Git, LeadRepo, SharedWhy, TeammateRoots, teammate_policy};

/// The "team" sub-agent worktrees are filed under.
const TEAM: &str = "subagents";

/// Makes sub-agents' worktrees for one agent (cheap to clone).
#[derive(Clone)]
pub struct SubagentWorktrees(Arc<WorktreeSettings>);

impl SubagentWorktrees {
    pub fn new(settings: WorktreeSettings) -> Self {
        Self(Arc::new(settings))
    }
}

/// What a sub-agent's worktree and sandbox need from the agent that starts it.
pub struct WorktreeSettings {
    pub project_root: PathBuf,
    pub git: Git,
    pub config: ConfigFiles,
    pub roo_home: PathBuf,
    pub api_key: Option<String>,
    pub no_sandbox: bool,
    pub helper: PathBuf,
    pub session_dir: PathBuf,
    /// The session's id: branches of different sessions never collide.
    pub session: String,
}

impl WorktreeSettings {
    fn names(&self, id: &str) -> Result<(Name, Name), String> {
        let team = Name::parse(TEAM).map_err(|e| e.to_string())?;
        let member = Name::parse(&format!("{}-{id}", self.session))
            .map_err(|e| format!("name the worktree of {id}: {e}"))?;
        Ok((team, member))
    }

    fn repo(&self) -> Result<LeadRepo, String> {
        match LeadRepo::discover(&self.project_root, &self.git).map_err(|e| e.to_string())? {
            Discovered::Repo(repo) => Ok(repo),
            Discovered::Shared { why, .. } => {
                let why = match why {
                    SharedWhy::NotARepository => "it is not in a git repository".to_string(),
                    SharedWhy::NoCommits => "its repository has no commit yet".to_string(),
                    SharedWhy::NoWorkTree => "it has no working tree".to_string(),
                    SharedWhy::NoGit(e) => format!("git cannot be run ({e})"),
                };
                Err(format!(
                    "make a worktree of {}: {why}; `isolation: worktree` needs a git \
                     repository with a commit",
                    self.project_root.display()
                ))
            }
        }
    }

    fn create_blocking(&self, id: &str) -> Result<IsolatedWorkspace, String> {
        let (team, member) = self.names(id)?;
        let repo = self.repo()?;
        let worktree = repo
            .add_worktree(&team, &member)
            .map_err(|e| e.to_string())?;
        let roots = TeammateRoots {
            work_root: worktree.path.clone(),
            project_root: self.project_root.clone(),
        };
        let mut policy = teammate_policy(&roots, &self.config, None, &self.session_dir)
            .map_err(|e| e.to_string())?;
        policy.hide_team_state(&self.roo_home);
        let settings = self
            .config
            .sandbox_settings(
                &worktree.path,
                roo_store::user_home().as_deref(),
                self.no_sandbox,
            )
            .map_err(|e| e.to_string())?;
        let commands = CommandSetup::for_agent(
            &settings,
            &worktree.path,
            &self.roo_home,
            self.api_key.as_deref(),
            self.helper.clone(),
        );
        Ok(IsolatedWorkspace {
            dir: worktree.path,
            branch: worktree.branch,
            policy,
            sandbox: Some(Arc::new(commands.sandbox)),
            key: id.to_string(),
        })
    }

    fn finish_blocking(&self, workspace: &IsolatedWorkspace) -> Option<String> {
        let done = self.names(&workspace.key).and_then(|(team, member)| {
            self.repo()?
                .cleanup_member(&team, &member)
                .map_err(|e| e.to_string())
        });
        match done {
            Ok(report) if report.kept.is_empty() && !report.removed.is_empty() => None,
            Ok(report) => Some(format!(
                "its work is kept in worktree {} on branch {} (merge it with `git merge \
                 {}`): {}",
                workspace.dir.display(),
                workspace.branch,
                workspace.branch,
                report.lines().join("; ")
            )),
            Err(e) => Some(format!(
                "its worktree {} on branch {} was left as it is: failed to clean it up: {e}",
                workspace.dir.display(),
                workspace.branch
            )),
        }
    }
}

impl WorktreeIsolation for SubagentWorktrees {
    fn create<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<IsolatedWorkspace, String>> {
        Box::pin(async move {
            let this = self.0.clone();
            let id = id.to_string();
            tokio::task::spawn_blocking(move || this.create_blocking(&id))
                .await
                .map_err(|e| format!("make a worktree: {e}"))?
        })
    }

    fn finish<'a>(&'a self, workspace: &'a IsolatedWorkspace) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let this = self.0.clone();
            let (dir, branch, key) = (
                workspace.dir.clone(),
                workspace.branch.clone(),
                workspace.key.clone(),
            );
            let policy = workspace.policy.clone();
            tokio::task::spawn_blocking(move || {
                this.finish_blocking(&IsolatedWorkspace {
                    dir,
                    branch,
                    policy,
                    sandbox: None,
                    key,
                })
            })
            .await
            .unwrap_or_else(|e| Some(format!("failed to clean up the worktree: {e}")))
        })
    }
}
