//! The Agent call's side of a started child: return at once for a background one,
//! else wait for its end, the parent's cancel, the auto-background threshold or the
//! user's key, and turn what came first into the tool result.

use tokio::sync::oneshot;

use super::SubagentRuntime;
use super::start::Running;
use crate::subagent::filter;
use crate::subagent::tasks::{Started, TaskEnd, TaskStatus};
use crate::tool::{ToolContext, ToolOutput};

/// Why a foreground wait ended before the child did: it moves to the background.
type Moved = &'static str;

impl SubagentRuntime {
    /// Waits for a foreground child, moves it to the background after the
    /// threshold, or returns at once for a background one.
    pub(super) async fn wait(&self, running: Running, ctx: &ToolContext) -> ToolOutput {
        let Running {
            mut started,
            registry,
            agent_type,
            background,
            notes,
            name,
        } = running;
        let tasks = &self.inner.shared.tasks;
        let id = started.id.clone();
        let moved = |how: &str| moved_text(how, &id, name.as_deref(), &agent_type, &notes);
        if background {
            return moved("Started");
        }
        let end = match self.first_end(&mut started, ctx).await {
            Err(end) => end,
            Ok(how) => {
                if tasks.move_to_background(started.number) {
                    // Nobody can answer it now: its interactive tools go too.
                    if let Ok(Some(scope)) = filter::background_deny(&registry) {
                        registry.narrow(scope);
                    }
                    return moved(how);
                }
                (&mut started.done).await
            }
        };
        let Ok(end) = end else {
            return ToolOutput::error(format!(
                "failed to run sub-agent {id}: it ended without a result"
            ));
        };
        ended_text(end, &notes)
    }

    /// Waits for what comes first: the child's end (or the parent's cancel, which
    /// cancels the child and waits for its end) as `Err`, or a reason to move it to
    /// the background as `Ok`.
    async fn first_end(
        &self,
        started: &mut Started,
        ctx: &ToolContext,
    ) -> Result<Moved, Result<TaskEnd, oneshot::error::RecvError>> {
        let tasks = &self.inner.shared.tasks;
        let limits = &self.inner.shared.limits;
        let threshold = limits.auto_background.filter(|_| limits.background);
        let after_threshold = async {
            match threshold {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending().await,
            }
        };
        // The user's key moves foreground children to the background, unless
        // background runs are switched off.
        let detach = async {
            if limits.background {
                tasks.detach_requested().await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            end = &mut started.done => Err(end),
            () = ctx.cancel.cancelled() => {
                started.cancel.cancel();
                Err((&mut started.done).await)
            }
            () = after_threshold => Ok("Still running after the auto-background threshold \
                                        (agents.auto_background_secs); it continues with its \
                                        progress as"),
            () = detach => Ok("The user moved it to the background; it continues with its \
                               progress as"),
        }
    }
}

/// The result of a call whose child runs on in the background: `how` it got there
/// and how its result arrives.
fn moved_text(
    how: &str,
    id: &str,
    name: Option<&str>,
    agent_type: &str,
    notes: &[String],
) -> ToolOutput {
    let name_part = name.map(|n| format!(" ({n})")).unwrap_or_default();
    let stop = format!("{{\"task_id\": \"{id}\"}}");
    let mut text = format!(
        "{how} background task {id}{name_part} ({agent_type}). Its result arrives as a \
         <task-notification> at the top of a later turn; do not wait or poll for it. \
         Stop it with TaskStop {stop}."
    );
    for note in notes {
        text.push_str(&format!("\nnote: {note}"));
    }
    ToolOutput::ok(text)
}

/// The result of a call whose child ended while it waited: its text and the notes,
/// an error unless it completed.
fn ended_text(end: TaskEnd, notes: &[String]) -> ToolOutput {
    let mut text = end.result;
    for note in notes {
        text.push_str(&format!("\nnote: {note}"));
    }
    match end.status {
        TaskStatus::Completed => ToolOutput::ok(text),
        _ => ToolOutput::error(text),
    }
}
