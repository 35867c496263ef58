//! The builder's confinement steps: the permission mode and policy with its read filter,
//! the sandbox its commands and servers run in (the helper, the command setup, the
//! sandboxed launcher), the environment detected in that sandbox, and the tool context
//! every tool call runs with. One place decides what the agent may touch, so a reader
//! auditing confinement reads one file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use roo_agent::exec::sandbox::CommandSetup;
use roo_agent::exec::{EnvSource, Launcher};
use roo_agent::permissions::{PermissionMode, PermissionPolicy};
use roo_agent::tool::{ReadFilter, ToolContext};
use roo_agent::{Environment, SharedPolicy};
use roo_llm::LlmSettings;

use super::workspace::Workspace;
use super::{BuildError, MAX_RESULT_CHARS, tool_env};
use crate::settings::{Identity, PendingWorkspace, Role};

/// The permission mode (the settings', else the config's, else `default`) and the
/// policy over the config's rules, which lets the agent write its session directory
/// (the plan file) and hides the team state; with its read filter, which the tools and
/// `@include` honour. The policy is shared: plan mode switches its mode.
pub(super) fn permissions(
    ws: &Workspace,
    mode: Option<PermissionMode>,
    session_dir: &Path,
    plan_file: &Path,
) -> Result<(PermissionMode, SharedPolicy, ReadFilter), BuildError> {
    let mode = match mode {
        Some(mode) => mode,
        None => ws
            .config
            .permission_mode()?
            .unwrap_or(PermissionMode::Default),
    };
    let mut policy = PermissionPolicy::new(ws.project_root.clone(), mode, ws.config.rules());
    policy.add_allowed_root(session_dir.to_path_buf());
    policy.hide_team_state(&ws.roo_home);
    if mode == PermissionMode::Plan {
        policy.set_plan_file(Some(plan_file.to_path_buf()));
    }
    let read_filter = policy.read_filter();
    Ok((mode, Arc::new(RwLock::new(policy)), read_filter))
}

/// The executable that runs commands in the sandbox: `helper`, else the running one.
pub(super) fn sandbox_helper(helper: Option<PathBuf>) -> Result<PathBuf, BuildError> {
    match helper {
        Some(helper) => Ok(helper),
        None => std::env::current_exe().map_err(BuildError::Helper),
    }
}

/// How the agent's commands run: the config's sandbox (off with `no_sandbox`) around
/// the project root, plus the git directories of a checkout still being made, with the
/// provider's key scrubbed from their environment.
pub(super) fn command_setup(
    ws: &Workspace,
    identity: &Identity,
    llm: &LlmSettings,
    no_sandbox: bool,
    helper: PathBuf,
    pending: Option<&PendingWorkspace>,
) -> Result<CommandSetup, BuildError> {
    let sandbox_settings = ws.config.sandbox_settings(
        &ws.project_root,
        roo_store::user_home().as_deref(),
        no_sandbox,
    )?;
    let mut commands = CommandSetup::for_agent(
        &sandbox_settings,
        &ws.project_root,
        &ws.roo_home,
        llm.api_key.as_deref(),
        helper,
    );
    if let (Some(pending), Some(policy)) = (pending, commands.sandbox.policy.as_mut()) {
        policy.write.extend(pending.git_dirs.iter().cloned());
    }
    if let Some(policy) = commands.sandbox.policy.as_mut() {
        // A command holding the spawn lock would stall every spawn of the team. The
        // lead's git adds worktrees beside it, so only a teammate's Landlock denies it.
        policy.conceal(
            crate::worktree::worktrees_lock_path(&ws.config_root),
            matches!(identity.role, Role::Teammate { .. }),
        );
    }
    Ok(commands)
}

/// A launcher of processes in the agent's sandbox, without the variables its commands
/// lose (for MCP servers and the git that inspects the workspace).
pub(super) fn sandboxed_launcher(commands: &CommandSetup) -> Launcher {
    Launcher {
        env_remove: commands.env_remove.clone(),
        ..Launcher::new(Some(Arc::new(commands.sandbox.clone())))
    }
}

/// What the system prompt says about where the agent works: given for a checkout still
/// being made, or for one made just now on `fresh_checkout` when its `HEAD` file agrees,
/// else detected, its git run in the agent's sandbox (see `Environment::detect`).
pub(super) async fn environment(
    pending: Option<&PendingWorkspace>,
    fresh_checkout: Option<String>,
    cwd: &Path,
    commands: &CommandSetup,
) -> Result<Environment, BuildError> {
    if let Some(pending) = pending {
        return Ok(pending.environment.clone());
    }
    let cwd = cwd.to_path_buf();
    let launcher = sandboxed_launcher(commands);
    tokio::task::spawn_blocking(move || {
        fresh_checkout
            .and_then(|branch| Environment::for_fresh_checkout(&cwd, &branch))
            .unwrap_or_else(|| Environment::detect(&cwd, &launcher))
    })
    .await
    .map_err(|e| BuildError::Inspect(e.to_string()))
}

/// What every tool call runs with: the directories, the read filter, a pending
/// checkout's gate, and the launcher of commands — the sandbox, the variables they get
/// ([`tool_env`], the ones passed on) and lose, and the relay through which `roo-mail`
/// and `roo-task` in them reach the team through this agent.
pub(super) fn tool_context(
    identity: &Identity,
    ws: &Workspace,
    commands: CommandSetup,
    env_source: Option<EnvSource>,
    read_filter: ReadFilter,
    pending: Option<&PendingWorkspace>,
    session_dir: PathBuf,
) -> Result<ToolContext, BuildError> {
    let mut env = tool_env(identity, &ws.roo_home);
    env.extend(commands.env_add);
    let mut env_remove = commands.env_remove;
    env_remove.extend(roo_agent::exec::ESCAPE_ENV.iter().map(|s| s.to_string()));
    let service = crate::relay::serve(
        crate::relay::RelayEnv {
            fixed: env.clone(),
            source: env_source.clone(),
            store: ws.store_setting.clone(),
        },
        matches!(identity.role, Role::Lead),
    )
    .map_err(|e| BuildError::Inspect(format!("could not start the team-command relay: {e}")))?;
    Ok(ToolContext {
        max_result_chars: MAX_RESULT_CHARS,
        read_filter,
        launcher: Launcher {
            sandbox: Some(Arc::new(commands.sandbox)),
            env_remove,
            env,
            env_source,
            service: Some(service),
        },
        workspace: pending.map(|p| p.gate.clone()),
        ..ToolContext::new(ws.cwd.clone(), session_dir)
    })
}
