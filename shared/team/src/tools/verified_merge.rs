//! TeamMerge's verified path (docs/TEAM.md "Verified merges"): which commands verify a
//! merge (the config's `verify:`, then the call's `verify`), the wait for the
//! repository's merge queue, the commands run in the scratch checkout of the merge
//! commit ([`LeadRepo::prepare_verified`]) under the lead's sandbox cut to that tree,
//! with a timeout that ends everything they started, and the two endings: the lead's
//! branch fast-forwarded to the verified commit, or — nothing merged — the teammate
//! told with the command's tail and its task back in progress with it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use roo_agent::exec::Ending;
use roo_agent::tool::ToolContext;
use roo_store::{MessageBody, Name, Outgoing, TaskFilter, TaskPatch, TaskStatus};
use tokio_util::sync::CancellationToken;

use super::{LeadTools, TeamToolError, TeamTools, run_blocking};
use crate::binding::TeamBinding;
use crate::worktree::{LeadRepo, MergeOutcome, MergeTurn, PreparedMerge, Verification};

const MERGE: &str = "TeamMerge";

/// How long a verify command may run unless the config or the call says otherwise.
pub(super) const DEFAULT_VERIFY_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a merge waits for its turn in the repository's merge queue (another merge,
/// perhaps verified, runs meanwhile) before it gives up.
const QUEUE_WAIT: Duration = Duration::from_secs(2 * 3600);

/// How often a waiting merge tries the queue's lock again.
const QUEUE_POLL: Duration = Duration::from_millis(50);

/// Bytes of a failed command's output the lead and the teammate read: its end.
const TAIL_BYTES: usize = 4000;

/// A merge refused by the worktree layer, as the model reads it.
pub(super) fn refused(member: &Name, e: impl std::fmt::Display) -> TeamToolError {
    TeamToolError::Refused(format!("merge {member}'s branch: {e}"))
}

/// One command a merge must pass.
#[derive(Debug, Clone)]
pub(super) struct Check {
    command: String,
    timeout: Duration,
}

/// The commands that verify this merge, in order: the config's `verify:`, then the
/// call's `verify`; `timeout` (seconds, the call's `verify_timeout`) for each.
pub(super) fn commands(
    lead: &LeadTools,
    verify: Option<&str>,
    timeout: Option<u64>,
) -> Result<Vec<Check>, TeamToolError> {
    let invalid = |message: String| TeamToolError::InvalidInput {
        tool: MERGE,
        message,
    };
    let max = roo_agent::config::MAX_VERIFY_TIMEOUT_SECS;
    let timeout = match timeout {
        Some(secs) if (1..=max).contains(&secs) => Some(Duration::from_secs(secs)),
        Some(_) => {
            return Err(invalid(format!(
                "`verify_timeout` must be a number of seconds from 1 to {max}"
            )));
        }
        None => None,
    };
    let mut checks = Vec::new();
    if let Some(setting) = lead.verify.get() {
        checks.push(Check {
            command: setting.command.clone(),
            timeout: timeout
                .or(setting.timeout_secs.map(Duration::from_secs))
                .unwrap_or(DEFAULT_VERIFY_TIMEOUT),
        });
    }
    if let Some(command) = verify {
        if command.trim().is_empty() {
            return Err(invalid(
                "`verify` is empty; give a command such as `cargo test`, or leave it out".into(),
            ));
        }
        checks.push(Check {
            command: command.to_string(),
            timeout: timeout.unwrap_or(DEFAULT_VERIFY_TIMEOUT),
        });
    }
    Ok(checks)
}

/// Waits for the turn of the merge queue at `path`; `None` when `cancel` fired first.
pub(super) async fn take_turn(
    path: &Path,
    cancel: &CancellationToken,
) -> Result<Option<MergeTurn>, TeamToolError> {
    let deadline = Instant::now() + QUEUE_WAIT;
    loop {
        let attempt = {
            let path = path.to_path_buf();
            tokio::task::spawn_blocking(move || MergeTurn::try_take(&path))
                .await
                .map_err(|e| TeamToolError::Worker {
                    tool: MERGE,
                    message: e.to_string(),
                })?
        };
        match attempt {
            Ok(Some(turn)) => return Ok(Some(turn)),
            Ok(None) => {}
            Err(e) => return Err(TeamToolError::Refused(format!("merge: {e}"))),
        }
        if Instant::now() >= deadline {
            return Err(TeamToolError::Refused(format!(
                "merge: another merge of this repository has held the merge queue for {} s \
                 ({}); wait for it to end, or end the roo process holding it (`fuser {}`)",
                QUEUE_WAIT.as_secs(),
                path.display(),
                path.display()
            )));
        }
        tokio::select! {
            () = tokio::time::sleep(QUEUE_POLL) => {}
            () = cancel.cancelled() => return Ok(None),
        }
    }
}

/// One verified merge of `member`'s branch.
pub(super) struct Merge {
    pub(super) repo: LeadRepo,
    pub(super) team: Arc<TeamBinding>,
    pub(super) tools: TeamTools,
    pub(super) member: Name,
    pub(super) protected: bool,
    /// The agent's working directory (the command runs at the same place).
    pub(super) cwd: PathBuf,
}

/// How a verified merge ended without an error.
pub(super) enum Verified {
    /// The branch moved to the verified merge commit; what passed.
    Landed(MergeOutcome, String),
    /// Nothing to verify: already merged, or a conflict (nothing merged).
    Other(MergeOutcome),
}

impl Merge {
    /// Prepares the merge commit and its scratch tree, runs `checks` there, and lands it
    /// or sends the work back, holding the merge queue's `turn` until the end (the
    /// landing keeps it even if the call is given up on). The scratch tree is removed
    /// whatever happens.
    pub(super) async fn run(
        self,
        turn: MergeTurn,
        checks: &[Check],
        ctx: &ToolContext,
    ) -> Result<Verified, TeamToolError> {
        let prepared = {
            let (repo, member) = (self.repo.clone(), self.member.clone());
            let (team, protected, cwd) = (
                self.team.team.name().clone(),
                self.protected,
                self.cwd.clone(),
            );
            run_blocking(MERGE, &ctx.cancel, move || {
                repo.prepare_verified(&team, &member, protected, &cwd)
                    .map_err(|e| refused(&member, e))
            })
            .await?
        };
        let prepared = match prepared {
            Verification::Done(outcome) => return Ok(Verified::Other(outcome)),
            Verification::Ready(prepared) => prepared,
        };
        let launcher = self
            .repo
            .verify_launcher(&ctx.launcher, prepared.scratch.path());
        let short = crate::worktree::short(&prepared.merge_commit).to_string();
        let mut passed = Vec::new();
        for check in checks {
            let started = Instant::now();
            let run = roo_agent::exec::run(
                &check.command,
                check.timeout,
                &launcher,
                &prepared.workdir,
                &ctx.cancel,
            )
            .await;
            let outcome = match run {
                Ok(outcome) => outcome,
                Err(e) => {
                    discard(prepared).await;
                    return Err(refused(
                        &self.member,
                        format!(
                            "run the verify command `{}`: {e}; nothing was merged",
                            check.command
                        ),
                    ));
                }
            };
            let mut confined = if outcome.sandboxed {
                String::new()
            } else {
                " (unconfined: the OS sandbox is off or unavailable)".to_string()
            };
            if outcome.leftovers > 0 && matches!(outcome.ending, Ending::Exited(_)) {
                confined.push_str(&format!(
                    " (it left {} process(es) running, which were ended)",
                    outcome.leftovers
                ));
            }
            let why = match outcome.ending {
                Ending::Exited(status) if status.success() => {
                    passed.push(format!(
                        "verify `{}` passed in {:.1} s on the merge commit {short}{confined}",
                        check.command,
                        started.elapsed().as_secs_f64()
                    ));
                    continue;
                }
                Ending::Cancelled => {
                    discard(prepared).await;
                    return Err(TeamToolError::Cancelled { tool: MERGE });
                }
                Ending::Exited(status) => exit_reason(status),
                Ending::TimedOut => format!(
                    "did not finish within {} s and was ended with everything it started",
                    check.timeout.as_secs()
                ),
            };
            let error = self
                .send_back(&prepared, check, &why, &tail(&outcome.output))
                .await;
            discard(prepared).await;
            return Err(error);
        }
        let repo = self.repo.clone();
        let member = self.member.clone();
        let landed = run_blocking(MERGE, &CancellationToken::new(), move || {
            let _turn = turn;
            let landed = repo.finish_verified(&prepared);
            drop(prepared);
            landed.map_err(|e| refused(&member, e))
        })
        .await?;
        Ok(Verified::Landed(landed, passed.join("\n")))
    }

    /// Tells the teammate the merge of its branch failed `check` (`why`, with the
    /// output's `tail`) and gives its latest completed task back to it, in progress; the
    /// error the lead reads.
    async fn send_back(
        &self,
        prepared: &PreparedMerge,
        check: &Check,
        why: &str,
        tail: &str,
    ) -> TeamToolError {
        let note = format!(
            "the lead's verify command `{}` {why} on the merge of {} into the lead's branch; \
             nothing was merged",
            check.command, prepared.branch
        );
        let (team, tools, member) = (self.team.clone(), self.tools.clone(), self.member.clone());
        let text = format!(
            "{note}. Fix it on your branch, commit, and mark the task completed again. The \
             command's output ended with:\n{}",
            roo_store::model_safe(tail)
        );
        let told = run_blocking(MERGE, &CancellationToken::new(), move || {
            Ok(send_back(&team, &tools, &member, note, text))
        })
        .await
        .unwrap_or_else(|e| format!("{} was not told: {e}", self.member));
        refused(
            &self.member,
            format!(
                "the verify command `{}` {why} on the merge commit (checked out in a scratch \
                 tree); nothing was merged, and your branch, index and working tree are as \
                 they were. {told}. The command's output ended with:\n{tail}",
                check.command
            ),
        )
    }
}

/// The store side of [`Merge::send_back`]: the member's latest completed task back in
/// progress with it (noted), and a message — a task assignment when a task went back.
/// Says what was done.
fn send_back(
    team: &TeamBinding,
    tools: &TeamTools,
    member: &Name,
    note: String,
    text: String,
) -> String {
    let tasks = team.team.tasks();
    let filter = TaskFilter {
        status: Some(TaskStatus::Completed),
        owner: Some(member.clone()),
    };
    let reopened = tasks
        .list(&filter)
        .map(|list| list.into_iter().max_by_key(|t| t.completed_at))
        .and_then(|latest| match latest {
            Some(task) => tasks
                .update(
                    &task.id,
                    TaskPatch {
                        status: Some(TaskStatus::InProgress),
                        owner: Some(Some(member.clone())),
                        note: Some(note),
                        by: Some(team.lead.clone()),
                        ..TaskPatch::default()
                    },
                )
                .map(Some),
            None => Ok(None),
        });
    let outgoing = match &reopened {
        Ok(Some(task)) => Outgoing::new(
            MessageBody::TaskAssignment {
                task_id: task.id.to_string(),
            },
            text,
        ),
        _ => Outgoing::text(text, "verify failed: your branch was not merged"),
    };
    let sent = team
        .team
        .mailbox()
        .send_keyed(&team.lead, member.as_str(), outgoing, None);
    let told = match sent {
        Ok(report) if report.failed.is_empty() => {
            tools.notify_sent(member);
            format!("{member} was told")
        }
        Ok(report) => format!(
            "{member} was not told: {}",
            report
                .failed
                .iter()
                .map(|(_, e)| e.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        ),
        Err(e) => format!("{member} was not told: {e}"),
    };
    match reopened {
        Ok(Some(task)) => format!("{told}, and task #{} is back in progress with it", task.id),
        Ok(None) => format!("{told} (it holds no completed task to give back)"),
        Err(e) => format!("{told}; its task was not given back: {e}"),
    }
}

/// Removes the scratch tree off the async runtime (it may be big).
async fn discard(prepared: PreparedMerge) {
    let _ = tokio::task::spawn_blocking(move || drop(prepared)).await;
}

/// `exited with code 3`, or the signal that ended it.
fn exit_reason(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was ended by signal {signal}"),
        (None, None) => "failed".to_string(),
    }
}

/// The last [`TAIL_BYTES`] of `output` (at a character boundary), marked when cut.
fn tail(output: &str) -> String {
    let output = output.trim_end();
    if output.is_empty() {
        return "(no output)".to_string();
    }
    if output.len() <= TAIL_BYTES {
        return output.to_string();
    }
    let mut start = output.len() - TAIL_BYTES;
    while !output.is_char_boundary(start) {
        start += 1;
    }
    format!("… ({start} bytes before)\n{}", &output[start..])
}
