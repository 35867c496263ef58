//! Where a teammate on this machine works: a new git worktree of the lead's repository,
//! checked out while the teammate starts (its tool calls wait for the checkout) or made
//! first, or the lead's directory outside a repository. A refused or failed start removes
//! the clone it made. Apart from the spawner's face because it is the only part that
//! touches the lead's repository.

use std::path::PathBuf;

use roo_agent::Environment;
use roo_agent::tool::WorkspaceGate;
use roo_store::{BackendType, Name};

use crate::backend::clone_gate;
use crate::binding::TeamBinding;
use crate::settings::PendingWorkspace;
use crate::worktree::{self, Discovered, LeadRepo, Workspace};

use super::running::{Recipe, Running};
use super::{SpawnError, SpawnRequest, Spawner};

/// Runs blocking worktree work off the runtime; its failure is the spawn's.
pub(super) async fn blocking<T: Send + 'static>(
    name: &Name,
    work: impl FnOnce() -> worktree::Result<T> + Send + 'static,
) -> Result<T, SpawnError> {
    let failed = |message: String| SpawnError::Worktree {
        name: name.clone(),
        message,
    };
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| failed(e.to_string()))?
        .map_err(|e| failed(e.to_string()))
}

/// Removes the clone (and branch) a refused spawn just made; a failure is only
/// logged, the spawn's own error is what the lead hears.
async fn discard(name: &Name, repo: LeadRepo, worktree: worktree::Worktree) {
    if let Err(e) = blocking(name, move || repo.discard_new(&worktree)).await {
        tracing::warn!("could not remove the clone of refused teammate {name}: {e}");
    }
}

impl Spawner {
    /// Starts `recipe`'s teammate in a new worktree at `path` (branch `branch`) of
    /// `repo` while git checks it out: it sends its first model request meanwhile, and
    /// its tool calls wait for the checkout — in process on a [`WorkspaceGate`], in a
    /// pane on the gate file the lead writes when the clone is complete
    /// ([`crate::backend::clone_gate`]; the pane opens in the lead's repository). A failed
    /// checkout fails the spawn before any call ran and stops the teammate; a failed start
    /// removes the checkout.
    pub(super) async fn start_during_checkout(
        &self,
        binding: &TeamBinding,
        request: &SpawnRequest,
        mut recipe: Recipe,
        repo: LeadRepo,
        path: PathBuf,
        branch: String,
    ) -> Result<(Running, Recipe, Workspace), SpawnError> {
        let (name, team) = (request.name.clone(), binding.team.name().clone());
        let worktree_error = |message: String| SpawnError::Worktree {
            name: name.clone(),
            message,
        };
        recipe.settings.cwd = Some(path.clone());
        recipe.settings.project_root = Some(path.clone());
        recipe.settings.config_root = Some(repo.root().to_path_buf());
        recipe.work_dir = path.clone();
        recipe.clone_dir = Some(path.clone());
        let mut first = recipe.clone();
        let (opener, gate) = WorkspaceGate::new();
        let gate_file = if self.inner.backend == BackendType::InProcess {
            first.settings.pending_workspace = Some(PendingWorkspace {
                environment: Environment::for_new_checkout(&path, &branch),
                // The clone's git directory is inside it: nothing of the lead's to grant.
                git_dirs: Vec::new(),
                gate,
                instructions_root: repo.root().to_path_buf(),
            });
            None
        } else {
            // A worker: its environment is the new clone's (`--new-clone`), and its
            // calls wait for the gate file.
            let file = clone_gate::gate_path(&recipe.settings.roo_home, &team, &name)
                .map_err(|e| worktree_error(format!("make the clone gate: {e}")))?;
            first.settings.fresh_checkout = Some(branch.clone());
            first.settings.clone_gate = Some(file.clone());
            Some(file)
        };
        let lead_repo = repo.clone();
        let checkout = {
            let (member, gate_file) = (name.clone(), gate_file.clone());
            tokio::task::spawn_blocking(move || {
                let made = repo.add_worktree(&team, &member);
                let mut outcome = made.as_ref().map(|_| ()).map_err(ToString::to_string);
                // A gate the worker never sees would hold it for good: the spawn fails.
                let unwritten = gate_file
                    .as_ref()
                    .and_then(|file| clone_gate::open_gate(file, &outcome).err());
                if let Some(why) = &unwritten {
                    outcome = Err(why.clone());
                }
                opener.open(outcome);
                (made, unwritten)
            })
        };
        let started = self
            .start(binding, &name, first, request.prompt.clone())
            .await;
        let (made, unwritten) = match checkout.await {
            Ok((made, unwritten)) => (made.map_err(|e| worktree_error(e.to_string())), unwritten),
            Err(e) => (Err(worktree_error(e.to_string())), None),
        };
        // A clone made, but its gate not written: failed as if the clone had failed.
        let made = match (made, unwritten) {
            (Ok(worktree), Some(why)) => {
                discard(&name, lead_repo.clone(), worktree).await;
                Err(worktree_error(why))
            }
            (made, _) => made,
        };
        if (started.is_err() || made.is_err())
            && let Some(file) = &gate_file
        {
            clone_gate::discard_gate(file);
        }
        match (started, made) {
            (Ok(handle), Ok(worktree)) => Ok((handle, recipe, Workspace::Worktree(worktree))),
            (Err(e), made) => {
                if let Ok(worktree) = made {
                    discard(&name, lead_repo, worktree).await;
                }
                Err(e)
            }
            (Ok(handle), Err(e)) => {
                // Stopped before any tool call: its calls wait for the checkout.
                handle.stop(&self.inner.runtime);
                Err(e)
            }
        }
    }

    /// Starts `recipe`'s teammate in what `discovered` offers: a worktree made first
    /// (removed again if the start fails), or the lead's directory outside a repository.
    pub(super) async fn start_in_workspace(
        &self,
        binding: &TeamBinding,
        request: &SpawnRequest,
        mut recipe: Recipe,
        discovered: Discovered,
    ) -> Result<(Running, Recipe, Workspace), SpawnError> {
        let (name, team) = (request.name.clone(), binding.team.name().clone());
        let mut lead_repo = None;
        let workspace = match discovered {
            Discovered::Repo(repo) => {
                let member = name.clone();
                lead_repo = Some(repo.clone());
                Workspace::Worktree(
                    blocking(&name, move || repo.add_worktree(&team, &member)).await?,
                )
            }
            Discovered::Shared { dir, why } => Workspace::Shared { dir, why },
        };
        let (work_dir, config_root) = match &workspace {
            Workspace::Worktree(w) => (w.path.clone(), Some(w.repo_root.clone())),
            Workspace::Shared { dir, .. } => (dir.clone(), None),
        };
        recipe.settings.cwd = Some(work_dir.clone());
        recipe.settings.project_root = Some(work_dir.clone());
        // The lead's config (its uncommitted local rules too) and trust apply to it.
        recipe.settings.config_root = config_root;
        recipe.clone_dir = matches!(workspace, Workspace::Worktree(_)).then(|| work_dir.clone());
        recipe.work_dir = work_dir;
        let mut first = recipe.clone();
        // A clone made just now: its state is known (a restart detects it again).
        if let Workspace::Worktree(w) = &workspace
            && !w.reused
        {
            first.settings.fresh_checkout = Some(w.branch.clone());
        }
        match self
            .start(binding, &name, first, request.prompt.clone())
            .await
        {
            Ok(handle) => Ok((handle, recipe, workspace)),
            Err(e) => {
                if let (Some(repo), Workspace::Worktree(worktree)) = (lead_repo, workspace) {
                    discard(&name, repo, worktree).await;
                }
                Err(e)
            }
        }
    }
}
