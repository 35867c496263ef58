//! TeamMerge: the lead merges a teammate's branch into its own.
//!
//! The runtime fetches `roo/<team>/<name>` from the teammate's clone into the lead's
//! repository (fast-forward only) and merges it with `git merge --no-ff`
//! ([`LeadRepo::merge`]), with hooks off; a conflict is aborted at once and the
//! conflicted files are returned, leaving the lead's tree as it was. The lead's model
//! uses this instead of `git merge` in Bash, whose hooks and config are the
//! repository's. It writes the project, so the permission layers judge it as a write
//! of the project root (asked in `default`, refused in `plan`).

use roo_agent::tool::{Delegation, PermissionTarget, ToolContext, ToolKind, ToolOutput, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{LeadTools, TeamToolError, TeamTools, bounded, parse_name, run_blocking};
use crate::worktree::{Discovered, LeadRepo, MergeOutcome};

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
         merge`. A conflict aborts it and lists the files."
            .to_string()
    }

    /// A merge writes the project's files: judged like an edit of the project (asked in
    /// `default`, refused in `plan`), not as coordination.
    fn kind(&self) -> ToolKind {
        ToolKind::Write
    }

    /// With `protected`, a write of `.roocode/`: the person is asked even in
    /// `acceptEdits`.
    fn permission_target(&self, input: &Value) -> PermissionTarget {
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
        let (cwd, team, protected) = (
            ctx.cwd.clone(),
            binding.team.name().clone(),
            input.protected,
        );
        let (lead, store) = (self.lead.clone(), binding.team.clone());
        let lead_name = binding.lead.clone();
        run_blocking(MERGE, &ctx.cancel, move || {
            let refused =
                |e: String| TeamToolError::Refused(format!("merge {member}'s branch: {e}"));
            match LeadRepo::discover(&cwd, &git).map_err(|e| refused(e.to_string()))? {
                Discovered::Repo(repo) => {
                    let outcome = lead
                        .with_remotes(repo.with_project_root(cwd.clone()), &store)
                        .merge_checked(&team, &member, protected)
                        .map_err(|e| refused(e.to_string()))?;
                    let mut summary = outcome.summary();
                    // The team's event log records the merge commit (it changes no
                    // document of the store); the merge stands if that fails.
                    if let MergeOutcome::Merged { commit, .. } = &outcome {
                        let event = roo_store::EventKind::Merge {
                            commit: commit.clone(),
                            member: Some(member.to_string()),
                        };
                        if let Err(e) = store.record_event(lead_name.as_str(), event) {
                            summary.push_str(&format!(
                                "\n(the merge was not recorded in the team's event log: {e})"
                            ));
                        }
                    }
                    Ok(summary)
                }
                Discovered::Shared { dir, .. } => Err(refused(format!(
                    "{} is not a git repository with a commit: teammates work in it directly",
                    dir.display()
                ))),
            }
        })
        .await
    }
}
