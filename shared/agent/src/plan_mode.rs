//! Plan mode tools: `EnterPlanMode` and `ExitPlanMode`.
//!
//! Plan mode ("think, do not act") is enforced by the prompt: the permission
//! matrix stays as in default mode, only the plan file is auto-allowed. Leaving plan
//! mode is a write-class call, so in plan mode it always goes through the permission
//! layer and the human (or, for a teammate, the lead) approves the plan.
//!
//! A run nobody can answer (headless `-p`, a background agent) could never
//! leave plan mode once in it: every write and command would be refused for
//! the rest of the run, bypassPermissions included. So there `EnterPlanMode` is
//! refused with a result telling the model to carry on in its current mode; a
//! run *started* in plan mode stays there (the user asked for a plan only).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use crate::agent_loop::SharedPolicy;
use crate::permissions::PermissionMode;
use crate::permissions::confinement::resolve_root;
use crate::prompt::plan_mode_reminder;
use crate::tool::{Delegation, Tool, ToolContext, ToolKind, ToolOutput};
use crate::tools::confined::{Parents, locate};

/// Whether anyone can approve a plan in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanApprover {
    /// A human (or the lead, for a teammate) answers permission requests.
    Present,
    /// Nobody does: requests are denied (headless and background runs).
    Absent,
}

/// State shared by the two plan-mode tools.
struct PlanState {
    policy: SharedPolicy,
    plan_file: PathBuf,
    approver: PlanApprover,
    /// Mode to return to when the plan is approved.
    previous: Mutex<Option<PermissionMode>>,
}

/// Builds the `EnterPlanMode` and `ExitPlanMode` tools over one policy.
pub fn plan_mode_tools(
    policy: SharedPolicy,
    plan_file: PathBuf,
    approver: PlanApprover,
) -> Vec<Arc<dyn Tool>> {
    let state = Arc::new(PlanState {
        policy,
        plan_file,
        approver,
        previous: Mutex::new(None),
    });
    vec![
        Arc::new(EnterPlanMode(state.clone())),
        Arc::new(ExitPlanMode(state)),
    ]
}

/// Switches the agent into plan mode.
struct EnterPlanMode(Arc<PlanState>);

/// Presents the plan for approval and leaves plan mode when it is approved.
struct ExitPlanMode(Arc<PlanState>);

impl PlanState {
    fn mode(&self) -> Option<PermissionMode> {
        self.policy.read().ok().map(|p| p.mode())
    }

    fn set_mode(&self, mode: PermissionMode) -> bool {
        match self.policy.write() {
            Ok(mut policy) => {
                policy.set_mode(mode);
                policy
                    .set_plan_file((mode == PermissionMode::Plan).then(|| self.plan_file.clone()));
                true
            }
            Err(_) => false,
        }
    }
}

impl Tool for EnterPlanMode {
    fn delegation(&self) -> Delegation {
        Delegation::NoSubAgent
    }

    fn requires_interaction(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "EnterPlanMode"
    }

    fn description(&self) -> String {
        "Enters plan mode for a large or unclear change: explore read-only, write the plan to \
         the plan file, then ask for approval with ExitPlanMode."
            .to_string()
    }

    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    fn call<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let state = &self.0;
            match state.mode() {
                Some(PermissionMode::Plan) => {
                    return ToolOutput::ok(format!(
                        "Plan mode is already active.\n\n{}",
                        plan_mode_reminder(&state.plan_file)
                    ));
                }
                Some(PermissionMode::DontAsk) => {
                    return ToolOutput::error(
                        "Plan mode is not available to this agent: nobody could approve the plan.",
                    );
                }
                Some(current) if state.approver == PlanApprover::Absent => {
                    return ToolOutput::error(format!(
                        "Plan mode is not available in this run: nobody is there to approve a \
                         plan, so you could never leave plan mode. Carry on with the task \
                         directly; the permission mode stays {current}."
                    ));
                }
                Some(current) => {
                    if let Ok(mut previous) = state.previous.lock() {
                        *previous = Some(current);
                    }
                }
                None => {}
            }
            if !state.set_mode(PermissionMode::Plan) {
                return ToolOutput::error("The permission policy is unavailable.");
            }
            ToolOutput::ok(format!(
                "Entered plan mode.\n\n{}",
                plan_mode_reminder(&state.plan_file)
            ))
        })
    }
}

impl Tool for ExitPlanMode {
    fn delegation(&self) -> Delegation {
        Delegation::NoSubAgent
    }

    fn requires_interaction(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "ExitPlanMode"
    }

    fn description(&self) -> String {
        "Asks the user to approve your plan: approved, plan mode ends and you carry it out; \
         otherwise revise it with their feedback."
            .to_string()
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "plan": {"type": "string", "description": "The whole plan in Markdown: steps, files, how to verify."}
            },
            "required": ["plan"],
            "additionalProperties": false
        })
    }

    /// Write-class: in plan mode the permission layer asks the human to approve.
    fn kind(&self) -> ToolKind {
        ToolKind::Write
    }

    fn summarize(&self, input: &Value) -> String {
        let plan = input.get("plan").and_then(Value::as_str).unwrap_or("");
        format!("ExitPlanMode: approve this plan?\n\n{}", plan.trim())
    }

    fn call<'a>(&'a self, input: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let state = &self.0;
            if state.mode() != Some(PermissionMode::Plan) {
                return ToolOutput::error("Plan mode is not active; there is nothing to exit.");
            }
            let Some(plan) = input.get("plan").and_then(Value::as_str) else {
                return ToolOutput::error("Missing required string field \"plan\".");
            };
            let plan_file = state.plan_file.clone();
            let text = plan.to_string();
            // Written like WriteFile writes (atomically, through a directory handle),
            // so a FIFO or symlink planted at the plan file's name cannot block or
            // redirect it.
            let saved = tokio::task::spawn_blocking(move || {
                let dir = plan_file.parent().map(resolve_root).unwrap_or_default();
                locate(&plan_file, &[dir], Parents::Create)?.write_atomic(text.as_bytes(), None)
            })
            .await;
            let note = match saved {
                Ok(Ok(())) => format!("The plan is saved in {}.", state.plan_file.display()),
                Ok(Err(e)) => format!("(The plan could not be saved: failed to {e}.)"),
                Err(e) => format!("(The plan could not be saved: {e}.)"),
            };
            let back_to = state
                .previous
                .lock()
                .ok()
                .and_then(|mut p| p.take())
                .unwrap_or(PermissionMode::Default);
            if !state.set_mode(back_to) {
                return ToolOutput::error("The permission policy is unavailable.");
            }
            ToolOutput::ok(format!(
                "The user approved the plan. Plan mode is off (permission mode: {back_to}). {note} Carry out the plan now."
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::permissions::{PermissionPolicy, RuleSet};
    use std::sync::RwLock;
    use std::time::Duration;

    fn tools(
        dir: &std::path::Path,
        mode: PermissionMode,
        approver: PlanApprover,
    ) -> Vec<Arc<dyn Tool>> {
        let policy = PermissionPolicy::new(dir.join("project"), mode, RuleSet::new());
        plan_mode_tools(
            Arc::new(RwLock::new(policy)),
            dir.join("session/plan.md"),
            approver,
        )
    }

    fn ctx(dir: &std::path::Path) -> ToolContext {
        ToolContext::new(dir.to_path_buf(), dir.join("session"))
    }

    #[tokio::test]
    async fn without_an_approver_plan_mode_is_refused_and_the_mode_kept() {
        let dir = tempfile::tempdir().unwrap();
        let tools = tools(
            dir.path(),
            PermissionMode::BypassPermissions,
            PlanApprover::Absent,
        );
        let out = tools[0].call(json!({}), &ctx(dir.path())).await;
        assert!(out.is_error, "{}", out.content);
        assert!(
            out.content
                .contains("the permission mode stays bypassPermissions"),
            "{}",
            out.content
        );
        let out = tools[1].call(json!({"plan": "x"}), &ctx(dir.path())).await;
        assert!(out.content.contains("not active"), "{}", out.content);
    }

    #[tokio::test]
    async fn a_fifo_at_the_plan_file_does_not_block_exit_plan_mode() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("session")).unwrap();
        let plan = dir.path().join("session/plan.md");
        nix::unistd::mkfifo(&plan, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let tools = tools(dir.path(), PermissionMode::Default, PlanApprover::Present);
        let ctx = ctx(dir.path());
        assert!(!tools[0].call(json!({}), &ctx).await.is_error);
        let exit = tools[1].call(json!({"plan": "1. fix it"}), &ctx);
        let out = tokio::time::timeout(Duration::from_secs(20), exit).await;
        // Release a writer blocked on the FIFO before failing, so the test ends.
        if out.is_err() {
            let _ = std::fs::File::open(&plan);
        }
        let out = out.expect("ExitPlanMode blocked on a FIFO at the plan file");
        assert!(out.content.contains("The plan is saved"), "{}", out.content);
        assert_eq!(std::fs::read_to_string(&plan).unwrap(), "1. fix it");
    }
}
