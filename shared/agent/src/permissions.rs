//! Permissions: five layers between the model's wish and a tool call.
//!
//! Every call passes, in order (docs/PERMISSIONS.md):
//! 1. **dangerous commands** ([`dangerous`]) — Bash commands that are never run;
//! 2. **path confinement** ([`confinement`]) — file tools stay inside the project (and the
//!    extra allowed roots), judged after resolving symlinks;
//! 3. **rules** ([`rules`]) — `allow`/`ask`/`deny` lists from the user, project
//!    and local config files, local > project > user;
//! 4. **mode** ([`mode`]) — default, acceptEdits, plan, bypassPermissions, dontAsk;
//! 5. **the human** — the policy answers [`PermissionDecision::Ask`] and the loop
//!    asks an [`Approver`].
//!
//! The first layer that decides wins, and a deny is never overturned by a later
//! layer. [`PermissionPolicy::check`] runs layers 1–4; a denial (or a refusal by
//! the human) becomes an error result for the model and the loop goes on.

pub(crate) mod approvable;
pub mod confinement;
pub mod dangerous;
mod decision;
pub mod mode;
pub mod policy;
pub mod protected_undo;
pub mod rules;
pub(crate) mod shell;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

pub use decision::{PermissionDecision, PermissionRequest};
pub use mode::{ParseModeError, PermissionMode};
pub use policy::PermissionPolicy;
pub use rules::{CODE_TOOLS, Rule, RuleError, RuleHit, RuleKind, RuleSet, SourceRules};

/// The human's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "approval", rename_all = "snake_case")]
pub enum Approval {
    /// Run this call.
    AllowOnce,
    /// Run this call and save the suggested rule to the local config.
    AllowAlways,
    /// Do not run it; optional feedback for the model ("use the staging DB").
    Deny {
        /// What the human told the model, if anything.
        feedback: Option<String>,
    },
}

/// Whoever answers permission prompts: a terminal prompt, the lead answering a
/// teammate's request, or nobody.
pub trait Approver: Send + Sync {
    /// Asks about one call. Dropping the future abandons the question.
    fn ask<'a>(&'a self, request: &'a PermissionRequest) -> BoxFuture<'a, Approval>;
}

/// An approver for runs where nobody can answer (headless `-p`, background
/// agents): every question is answered "no", so a run never hangs on a prompt.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyApprover;

impl Approver for DenyApprover {
    fn ask<'a>(&'a self, request: &'a PermissionRequest) -> BoxFuture<'a, Approval> {
        let feedback = format!(
            "{} needs approval ({}), but nobody can approve it in this run. Do the task without \
             it, or tell the user which permission rule would allow it (for example `{}` under \
             permissions.allow in .roocode/config.local.yaml, or a more permissive \
             --permission-mode).",
            request.summary, request.reason, request.suggested_rule
        );
        async move {
            Approval::Deny {
                feedback: Some(feedback),
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[tokio::test]
    async fn deny_approver_explains_how_to_allow() {
        let request = PermissionRequest {
            tool: "Bash".into(),
            summary: "Bash(cargo test)".into(),
            input: serde_json::json!({"command": "cargo test"}),
            reason: "commands need approval in default mode".into(),
            suggested_rule: "Bash(cargo test *)".into(),
            offer_always: true,
        };
        let Approval::Deny {
            feedback: Some(text),
        } = DenyApprover.ask(&request).await
        else {
            panic!("DenyApprover must deny with feedback");
        };
        assert!(text.contains("nobody can approve"));
        assert!(text.contains("Bash(cargo test *)"));
    }

    #[test]
    fn decisions_serialize_with_a_tag() {
        let decision: PermissionDecision = PermissionDecision::Deny { reason: "x".into() };
        let json = serde_json::to_value(decision).unwrap();
        assert_eq!(json, serde_json::json!({"decision": "deny", "reason": "x"}));
    }
}
