//! TeamMerge: the lead merges a teammate's branch into its own.
//!
//! The runtime fetches `roo/<team>/<name>` from the teammate's clone into the lead's
//! repository (fast-forward only) and merges it with `git merge --no-ff`
//! ([`LeadRepo::merge`]), with hooks off; a conflict is aborted at once and the
//! conflicted files are returned, leaving the lead's tree as it was. The lead's model
//! uses this instead of `git merge` in Bash, whose hooks and config are the
//! repository's. It writes the project, so the permission layers judge it as a write
//! of the project root (asked in `default`, refused in `plan`).
//!
//! With a verify command (the config's `verify:`, the call's `verify`, or both) the
//! merge is verified ([`verified`]): the merge commit is checked out in a scratch tree,
//! the command runs there in the sandbox, and only on success does the lead's branch
//! fast-forward to it; on failure the teammate is told with the command's tail and its
//! task goes back to it. Every merge of a repository takes its turn in the merge queue
//! ([`crate::worktree::MergeTurn`]).

use roo_agent::tool::{Delegation, PermissionTarget, ToolContext, ToolKind, ToolOutput, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::verified_merge::{self as verified, refused};
use super::{LeadTools, TeamToolError, TeamTools, bounded, parse_name, run_blocking};
use crate::worktree::{Discovered, LeadRepo, MergeOutcome, MergeTurn};

/// Merges a teammate's branch into the lead's current branch.
pub struct TeamMerge {
    team: TeamTools,
    lead: LeadTools,
}

impl TeamMerge {
    pub(crate) fn new(team: TeamTools, lead: LeadTools) -> TeamMerge {
        TeamMerge { team, lead }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MergeInput {
    name: String,
    /// Also merge changes to .roocode/, .git*, ROOCODE.md or files it includes, once reviewed (the user is asked).
    #[serde(default)]
    protected: bool,
    /// A command that must pass on the merged tree before your branch moves (e.g. `cargo test`); it runs sandboxed in a scratch checkout, after the config's verify: if set. On failure nothing is merged and the teammate gets the task back.
    #[serde(default)]
    verify: Option<String>,
    /// Seconds the verify command may run (default 600).
    #[serde(default)]
    verify_timeout: Option<u64>,
}

const MERGE: &str = "TeamMerge";

impl TypedTool for TeamMerge {
    fn delegation(&self) -> Delegation {
        Delegation::NoSubAgent
    }

    type Input = MergeInput;
    const NAME: &'static str = MERGE;

    fn description(&self) -> String {
        "Merges a teammate's branch roo/<team>/<name> into yours (--no-ff); use it, not `git \
         merge`. A conflict aborts it and lists the files. With verify (or the config's \
         verify:), your branch moves only if the command passes on the merged tree."
            .to_string()
    }

    /// A merge writes the project's files: judged like an edit of the project (asked in
    /// `default`, refused in `plan`), not as coordination.
    fn kind(&self) -> ToolKind {
        ToolKind::Write
    }

    /// With `protected`, a write of `.roocode/`: the person is asked even in
    /// `acceptEdits`. With `verify`, the command the model chose: judged as a command
    /// line (dangerous commands denied, asked in every mode but `bypassPermissions`).
    fn permission_target(&self, input: &Value) -> PermissionTarget {
        if let Some(command) = input.get("verify").and_then(Value::as_str) {
            return PermissionTarget::Command(command.to_string());
        }
        let protected = input.get("protected").and_then(Value::as_bool) == Some(true);
        PermissionTarget::Path(std::path::PathBuf::from(if protected {
            ".roocode"
        } else {
            "."
        }))
    }

    async fn run(&self, input: MergeInput, ctx: &ToolContext) -> ToolOutput {
        match self.merge(input, ctx).await {
            Ok(text) => ToolOutput::ok(bounded(text)),
            Err(e) => e.into_output(),
        }
    }
}

impl TeamMerge {
    async fn merge(&self, input: MergeInput, ctx: &ToolContext) -> Result<String, TeamToolError> {
        let member = parse_name(MERGE, "name", &input.name)?;
        let binding = self.team.binding()?;
        if !binding.is_lead() {
            return Err(TeamToolError::LeadOnly {
                action: format!("merge {member}'s branch"),
                lead: binding.lead.clone(),
            });
        }
        let Some(git) = self.lead.worktrees.clone() else {
            return Err(TeamToolError::Refused(format!(
                "merge {member}'s branch: this lead does not manage teammates' clones"
            )));
        };
        let git = git.in_launcher_of(&ctx.launcher);
        let checks = verified::commands(&self.lead, input.verify.as_deref(), input.verify_timeout)?;
        let (cwd, team, protected) = (
            ctx.cwd.clone(),
            binding.team.name().clone(),
            input.protected,
        );
        let (lead, store) = (self.lead.clone(), binding.team.clone());
        let repo = run_blocking(MERGE, &ctx.cancel, {
            let (cwd, member) = (cwd.clone(), member.clone());
            move || match LeadRepo::discover(&cwd, &git).map_err(|e| refused(&member, e))? {
                Discovered::Repo(repo) => {
                    Ok(lead.with_remotes(repo.with_project_root(cwd.clone()), &store))
                }
                Discovered::Shared { dir, .. } => Err(TeamToolError::Refused(format!(
                    "merge {member}'s branch: {} is not a git repository with a commit: \
                     teammates work in it directly",
                    dir.display()
                ))),
            }
        })
        .await?;
        let lock = MergeTurn::path(&self.lead.roo_home.root().join("run"), repo.root());
        let Some(turn) = verified::take_turn(&lock, &ctx.cancel).await? else {
            return Err(TeamToolError::Cancelled { tool: MERGE });
        };
        let outcome = if checks.is_empty() {
            let (repo, member) = (repo.clone(), member.clone());
            // The turn goes with the work: a call given up on still holds it until
            // its merge has ended.
            run_blocking(MERGE, &ctx.cancel, move || {
                let _turn = turn;
                repo.merge_checked(&team, &member, protected)
                    .map_err(|e| refused(&member, e))
            })
            .await?
        } else {
            let merge = verified::Merge {
                repo,
                team: binding.clone(),
                tools: self.team.clone(),
                member: member.clone(),
                protected,
                cwd,
            };
            match merge.run(turn, &checks, ctx).await? {
                verified::Verified::Landed(outcome, passed) => {
                    return Ok(self.landed(&binding, &member, &outcome, Some(passed)).await);
                }
                verified::Verified::Other(outcome) => outcome,
            }
        };
        Ok(self.landed(&binding, &member, &outcome, None).await)
    }

    /// The summary of a merge that ended with `outcome`, after a verification's
    /// `passed` line; a merge commit is recorded in the team's event log (it changes no
    /// document of the store; the merge stands if that fails).
    async fn landed(
        &self,
        binding: &std::sync::Arc<crate::binding::TeamBinding>,
        member: &roo_store::Name,
        outcome: &MergeOutcome,
        passed: Option<String>,
    ) -> String {
        let mut summary = match passed {
            Some(passed) => format!("{passed}\n{}", outcome.summary()),
            None => outcome.summary(),
        };
        if let MergeOutcome::Merged { commit, .. } = outcome {
            let event = roo_store::EventKind::Merge {
                commit: commit.clone(),
                member: Some(member.to_string()),
            };
            let (store, lead) = (binding.team.clone(), binding.lead.clone());
            let recorded =
                tokio::task::spawn_blocking(move || store.record_event(lead.as_str(), event)).await;
            let failed = match recorded {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(e) => Some(e.to_string()),
            };
            if let Some(e) = failed {
                summary.push_str(&format!(
                    "\n(the merge was not recorded in the team's event log: {e})"
                ));
            }
        }
        summary
    }
}
