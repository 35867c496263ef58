//! The builder's attachment steps: what is registered on or hooked into the agent — the
//! tool registry with skills and plan mode, MCP servers, the config's command hooks, the
//! project's instructions, sub-agents and the Agent tool, and the hooks on its loop. They
//! read the settled [`Workspace`] and change nothing of where or how commands run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use roo_agent::config::SubagentLimits;
use roo_agent::exec::sandbox::CommandSetup;
use roo_agent::permissions::{PermissionMode, PermissionPolicy};
use roo_agent::skills::{Catalog, Skills};
use roo_agent::subagent::{ParentParts, SubagentRuntime};
use roo_agent::tool::{ReadFilter, ToolContext, ToolRegistry};
use roo_agent::tools::builtin_tools;
use roo_agent::{
    Agent, AgentCatalog, AgentHook, CommandHooks, HookSetup, Instructions, McpHook, McpLaunch,
    McpServers, McpSettings, PlanApprover, SharedPolicy, instruction_parts, join_instructions,
    load_instructions, plan_mode_tools,
};
use roo_llm::LlmSettings;

use super::confinement::sandboxed_launcher;
use super::workspace::{Definitions, Workspace};
use super::{AgentParts, BuildError};
use crate::settings::{Identity, McpPlan, PendingWorkspace, SpawnTools, ToolSet};
use crate::worktree::subagents::{SubagentWorktrees, WorktreeSettings};

/// The agent's tools before MCP's and the Agent tool: the work tools with the skills
/// (an untrusted project's skills are not read), plan mode's, the extra ones, then the
/// deferred ones.
pub(super) fn tool_registry(
    ws: &Workspace,
    set: &mut ToolSet,
    policy: &SharedPolicy,
    plan_file: &Path,
    plan_approver: PlanApprover,
) -> (ToolRegistry, Option<Skills>) {
    let tools = ToolRegistry::new();
    let skills = set.work.then(|| {
        for tool in builtin_tools() {
            tools.register(tool);
        }
        Skills::install(
            match ws.definitions.tree() {
                Some(root) => Catalog::new(&ws.roo_home, root, ws.trusted),
                None => Catalog::new(&ws.roo_home, &ws.project_root, false),
            },
            &tools,
        )
    });
    // Nobody can approve a plan in a headless run, so EnterPlanMode would only be
    // refused there: the tools go only where a plan can be approved, or where the run
    // starts in plan mode (the model is told to finish with ExitPlanMode). A run that
    // starts in plan mode gets them even without `set.plan_mode`: its mode may come
    // from the config (a `roo-worker` started by hand without `--permission-mode`),
    // and without ExitPlanMode it could never leave plan mode.
    let starts_in_plan = policy
        .read()
        .is_ok_and(|p| p.mode() == roo_agent::permissions::PermissionMode::Plan);
    let plan_possible = plan_approver == PlanApprover::Present || starts_in_plan;
    if (set.plan_mode && plan_possible) || starts_in_plan {
        for tool in plan_mode_tools(policy.clone(), plan_file.to_path_buf(), plan_approver) {
            tools.register(tool);
        }
    }
    for tool in std::mem::take(&mut set.extra) {
        tools.register(tool);
    }
    for tool in std::mem::take(&mut set.deferred) {
        tools.register_deferred(tool);
    }
    (tools, skills)
}

/// The agent's MCP servers, their tools attached: started now, so they connect while
/// the rest is built (the first prompt waits for them, bounded); or the process's,
/// shared; or none. An untrusted project's servers were filtered out with its config.
pub(super) fn mcp_servers(
    plan: McpPlan,
    ws: &Workspace,
    commands: &CommandSetup,
    tools: &ToolRegistry,
) -> Result<Option<McpServers>, BuildError> {
    let mcp = match plan {
        McpPlan::Start if !ws.config.mcp_servers().is_empty() => Some(McpServers::start(
            ws.config.mcp_servers(),
            McpSettings::from_config(&ws.config)?,
            McpLaunch {
                project_root: ws.project_root.clone(),
                log_dir: ws.roo_home.join("logs"),
                launcher: sandboxed_launcher(commands),
            },
        )),
        McpPlan::Start | McpPlan::Off => None,
        McpPlan::Shared(servers) => Some(servers),
    };
    if let Some(mcp) = &mcp {
        mcp.attach(tools);
    }
    Ok(mcp)
}

/// The config's command hooks, with their notices. They run for every agent built
/// here: the lead, `roo-worker` and in-process teammates (an untrusted project's hooks
/// were filtered out).
pub(super) fn command_hooks(
    ws: &Workspace,
    identity: &Identity,
    session_id: &str,
    context: &ToolContext,
) -> (Arc<CommandHooks>, Vec<String>) {
    let (hooks, notices) = CommandHooks::new(
        ws.config.hooks(),
        HookSetup {
            agent_name: identity.name.to_string(),
            team: identity.team.as_ref().map(|t| t.to_string()),
            session_id: Some(session_id.to_string()),
            project_root: ws.project_root.clone(),
            context: context.clone(),
        },
    );
    (Arc::new(hooks), notices)
}

/// The project's instructions (`ROOCODE.md`), with the notices of what was refused.
/// `@include` honours the same ReadFile deny rules as the tools. They are read where
/// [`Workspace::definitions`] says: a teammate in a clone reads the lead's tree (also
/// while its checkout is still being made), under the same rules rooted there, never
/// the clone it can write; a teammate on another host gets those its lead handed over
/// (and its own user's on that host).
pub(super) async fn instructions(
    ws: &Workspace,
    pending: Option<&PendingWorkspace>,
    mode: PermissionMode,
    read_filter: ReadFilter,
) -> (Option<String>, Vec<String>) {
    let root = match (pending, &ws.definitions) {
        (Some(pending), _) => Some(pending.instructions_root.clone()),
        (None, Definitions::Tree(root)) => Some(root.clone()),
        (None, Definitions::Handed { .. }) => None,
    };
    let read_filter = match &root {
        Some(root) if *root != ws.project_root => {
            PermissionPolicy::new(root.clone(), mode, ws.config.rules()).read_filter()
        }
        _ => read_filter,
    };
    let handed = match &ws.definitions {
        Definitions::Handed { instructions } if root.is_none() => instructions.clone(),
        _ => Vec::new(),
    };
    let home = ws.roo_home.clone();
    let loaded = tokio::task::spawn_blocking(move || {
        let denied = |path: &Path| read_filter.denied(path);
        match root {
            Some(root) => load_instructions(&root, &home, &denied),
            None => {
                let own = instruction_parts(None, Some(&home), &denied);
                let parts: Vec<String> = handed.into_iter().chain(own.parts).collect();
                Instructions {
                    text: join_instructions(&parts),
                    notices: own.notices,
                }
            }
        }
    })
    .await
    .unwrap_or_default();
    (loaded.text, loaded.notices)
}

/// The agent's sub-agents and background tasks (limits from the config's `agents:`).
/// They get the parent's parts — the Agent tool never learns whose they are — and
/// worktrees made by the agent's own git, in its sandbox. Fork-mode skills run on it.
pub(super) fn subagent_runtime(
    ws: &Workspace,
    parts: &AgentParts,
    llm: &LlmSettings,
    no_sandbox: bool,
    helper: PathBuf,
    session: String,
    tools: &ToolRegistry,
) -> SubagentRuntime {
    let section = ws.config.agents();
    let parent = ParentParts {
        provider: parts.provider.clone(),
        policy: parts.policy.clone(),
        approver: parts.approver.clone(),
        context: parts.context.clone(),
        options: parts.options.clone(),
        environment: parts.environment.clone(),
        instructions: parts.instructions.clone(),
        lifecycle: if parts.command_hooks.is_empty() {
            Vec::new()
        } else {
            vec![parts.command_hooks.clone() as Arc<dyn AgentHook>]
        },
        skills: parts.skills.clone(),
        plan_file: parts.plan_file.clone(),
        catalog: AgentCatalog::new(
            &ws.roo_home,
            ws.definitions.tree().unwrap_or(&ws.project_root),
            ws.trusted && ws.definitions.tree().is_some(),
            section.verification.unwrap_or(false),
        ),
        worktrees: Some(Arc::new(SubagentWorktrees::new(WorktreeSettings {
            project_root: ws.project_root.clone(),
            git: crate::worktree::Git::new().in_launcher_of(&parts.context.launcher),
            config: ws.config.clone(),
            roo_home: ws.roo_home.clone(),
            api_key: llm.api_key.clone(),
            no_sandbox,
            helper,
            session_dir: parts.context.session_dir.clone(),
            session,
        }))),
    };
    let runtime = SubagentRuntime::new(parent, SubagentLimits::from_section(section), tools);
    if let Some(skills) = &parts.skills {
        skills.set_fork_runtime(Box::new(runtime.downgrade()));
    }
    runtime
}

/// The Agent and TaskStop tools: the sub-agents', or those of `spawn_tools` (the lead's
/// teammate spawner's, which take the sub-agents' over where there are some).
pub(super) fn register_agent_tools(
    tools: &ToolRegistry,
    subagents: Option<&SubagentRuntime>,
    spawn_tools: Option<&SpawnTools>,
) {
    match (spawn_tools, subagents) {
        (Some(spawn_tools), subagents) => {
            for tool in spawn_tools(subagents) {
                tools.register(tool);
            }
        }
        (None, Some(runtime)) => {
            let (agent_tool, stop_tool) = runtime.tools();
            tools.register(agent_tool);
            tools.register(stop_tool);
        }
        (None, None) => {}
    }
}

/// Hooks the agent's loop: the settings' turn hooks, the config's command hooks, the
/// MCP servers', the skills' scopes and the sub-agents' notifications. Returns the
/// notices of the skills and agent definitions skipped (bad ones are reported at start).
pub(super) async fn attach_hooks(
    agent: &mut Agent,
    ws: &Workspace,
    hooks: Vec<Arc<dyn AgentHook>>,
    command_hooks: &Arc<CommandHooks>,
    mcp: Option<&McpServers>,
    skills: Option<&Skills>,
    subagents: Option<&SubagentRuntime>,
) -> Vec<String> {
    let mut notices = Vec::new();
    for hook in hooks {
        agent.add_hook(hook);
    }
    if !command_hooks.is_empty() {
        agent.add_hook(command_hooks.clone());
    }
    if let Some(mcp) = mcp {
        agent.add_hook(Arc::new(McpHook::new(mcp.clone())));
    }
    if let Some(skills) = skills {
        agent.add_hook(Arc::new(skills.scopes.clone()));
        notices.extend(skill_notices(skills, ws).await);
    }
    if let Some(runtime) = subagents {
        agent.add_hook(runtime.notifications());
        let catalog = runtime.catalog().clone();
        notices.extend(
            tokio::task::spawn_blocking(move || catalog.scan().warnings)
                .await
                .unwrap_or_default(),
        );
    }
    notices
}

/// Skills skipped at start, and an untrusted project's skills (or a clone's on another
/// host) left unread.
async fn skill_notices(skills: &Skills, ws: &Workspace) -> Vec<String> {
    let catalog = skills.catalog.clone();
    let mut notices = tokio::task::spawn_blocking(move || catalog.scan().warnings)
        .await
        .unwrap_or_default();
    match ws.definitions.tree() {
        Some(root) => {
            let dir = root.join(".roocode").join("skills");
            if !ws.trusted && dir.is_dir() {
                notices.push(format!(
                    "the skills in {} are ignored: the project is not trusted",
                    dir.display()
                ));
            }
        }
        None => {
            let dir = ws.project_root.join(".roocode").join("skills");
            if dir.is_dir() {
                notices.push(format!(
                    "the skills in {} are ignored: a teammate on another host takes its \
                     project's instructions and config from its lead, never from its clone",
                    dir.display()
                ));
            }
        }
    }
    notices
}
