//! `isolation: worktree`: a sub-agent that works in its own git worktree. The agent
//! crate only defines what it needs ([`WorktreeIsolation`]); the builder implements it
//! with the team crate's worktrees, so a child's worktree is made and cleaned up like
//! a teammate's and its tools are confined to it like a teammate's.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::exec::sandbox::CommandSandbox;
use crate::permissions::PermissionPolicy;

/// A new worktree for one child, and what confines it there.
pub struct IsolatedWorkspace {
    /// The worktree: the child's working directory and project root.
    pub dir: PathBuf,
    /// The worktree's branch.
    pub branch: String,
    /// A permission policy rooted at the worktree (the parent's rules; the runtime
    /// sets the child's mode).
    pub policy: PermissionPolicy,
    /// The command sandbox rooted at the worktree; `None`: the parent's.
    pub sandbox: Option<Arc<CommandSandbox>>,
    /// Identifies the worktree for [`WorktreeIsolation::finish`].
    pub key: String,
}

/// Makes and removes sub-agents' worktrees.
pub trait WorktreeIsolation: Send + Sync {
    /// A new worktree of the project for the child `id`; the error says why not
    /// (e.g. not a git repository) and reads after "failed to".
    fn create<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<IsolatedWorkspace, String>>;

    /// After the child ended: removes the worktree if it left no changes (`None`), or
    /// keeps it and says where the changes are (path and branch).
    fn finish<'a>(&'a self, workspace: &'a IsolatedWorkspace) -> BoxFuture<'a, Option<String>>;
}
