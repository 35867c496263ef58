//! Running a started child to its end in a tokio task of its own: its progress goes
//! to the task table, it waits for a free slot (or its cancel), its result (or panic)
//! becomes the [`TaskEnd`] the parent reads, and its worktree is finished.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Weak};
use std::time::Instant;

use futures_util::FutureExt;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use super::{Shared, SubagentRuntime};
use crate::agent_loop::{Agent, RunResult};
use crate::event::{AgentEvent, EventSink, RunOutcome};
use crate::subagent::tasks::clip;
use crate::subagent::tasks::{BackgroundTasks, Started, TaskEnd, TaskStatus};
use crate::subagent::{IsolatedWorkspace, WorktreeIsolation};
use crate::tool::{ToolContext, ToolOutput};
use crate::tools::spill_if_large;

/// A child's worktree and where it came from.
type ChildWorktree = (Arc<dyn WorktreeIsolation>, IsolatedWorkspace);

impl SubagentRuntime {
    /// Runs the child in its own task; its end (or panic) goes to the task table.
    pub(super) fn spawn(
        &self,
        mut agent: Agent,
        input: String,
        started: &Started,
        agent_type: String,
        isolation: Option<ChildWorktree>,
    ) {
        let shared = self.inner.shared.clone();
        let number = started.number;
        let id = started.id.clone();
        let cancel = started.cancel.clone();
        let sink = progress_sink(shared.tasks.clone(), number);
        let limit = shared.limits.max_result_chars;
        // Only where to spill: the parent's events and conversation are not kept
        // alive by a child that outlives the call.
        let spill = ToolContext {
            max_result_chars: limit,
            conversation: None,
            events: EventSink::discard(),
            ..self.inner.parts.context.clone()
        };
        let waiting_events = started.progress.clone();
        let weak: Weak<Shared> = Arc::downgrade(&shared);
        tokio::spawn(async move {
            let permit = slot(&shared, &id, &cancel, waiting_events).await;
            let begun = Instant::now();
            let mut end = match &permit {
                None => TaskEnd {
                    status: TaskStatus::Killed,
                    result: format!("sub-agent {id} was stopped before it started"),
                    turns: 0,
                },
                Some(_) => {
                    let run = AssertUnwindSafe(agent.run(&input, &sink, cancel.clone()))
                        .catch_unwind()
                        .await;
                    drop(sink);
                    match run {
                        Ok(result) => report(&id, &agent_type, &result, begun, &spill),
                        Err(panic) => panicked(&id, &agent_type, panic.as_ref()),
                    }
                }
            };
            drop(permit);
            drop(agent);
            if let Some((worktrees, workspace)) = isolation {
                end.result
                    .push_str(&finish_worktree(&*worktrees, &workspace).await);
            }
            if let Some(shared) = weak.upgrade() {
                shared.tasks.finish(number, end);
            }
        });
    }
}

/// The child's event sink: its tool starts and usage go to its row of the task table.
fn progress_sink(tasks: BackgroundTasks, number: u64) -> EventSink {
    let (sink, mut rx) = EventSink::channel();
    tokio::spawn(async move {
        while let Some(event) = rx.recv().await {
            match event {
                AgentEvent::ToolStart { summary, .. } => tasks.tool_started(number, summary),
                AgentEvent::Usage { turn, .. } => tasks.add_usage(number, &turn),
                _ => {}
            }
        }
    });
    sink
}

/// One of the session's concurrent slots, waiting (and saying so on `waiting_events`)
/// while all are taken; `None` if the child was cancelled first.
async fn slot(
    shared: &Shared,
    id: &str,
    cancel: &CancellationToken,
    waiting_events: EventSink,
) -> Option<OwnedSemaphorePermit> {
    let slots = shared.slots.clone();
    match slots.clone().try_acquire_owned() {
        Ok(permit) => Some(permit),
        Err(_) => {
            waiting_events.emit(AgentEvent::Notice {
                text: format!(
                    "sub-agent {id} waits for a free slot ({} running, agents.max_concurrent)",
                    shared.limits.max_concurrent
                ),
            });
            tokio::select! {
                permit = slots.acquire_owned() => permit.ok(),
                () = cancel.cancelled() => None,
            }
        }
    }
}

/// Removes the child's worktree if it left no changes; the line the parent reads
/// about it either way.
async fn finish_worktree(
    worktrees: &dyn WorktreeIsolation,
    workspace: &IsolatedWorkspace,
) -> String {
    match worktrees.finish(workspace).await {
        None => format!(
            "\n(worked in worktree {} on branch {}; it left no changes, so the \
             worktree was removed)",
            workspace.dir.display(),
            workspace.branch
        ),
        Some(kept) => format!("\n{kept}"),
    }
}

/// The end of a child that panicked: the parent goes on.
fn panicked(id: &str, agent_type: &str, panic: &(dyn std::any::Any + Send)) -> TaskEnd {
    TaskEnd {
        status: TaskStatus::Failed,
        result: format!(
            "sub-agent {id} ({agent_type}) failed: it panicked ({}); the parent goes on",
            panic_message(panic)
        ),
        turns: 0,
    }
}

/// The parent's view of how a child ended: its final text, capped, with a footer.
fn report(
    id: &str,
    agent_type: &str,
    result: &RunResult,
    begun: Instant,
    spill: &ToolContext,
) -> TaskEnd {
    let status = match result.outcome {
        RunOutcome::Completed => TaskStatus::Completed,
        RunOutcome::Cancelled => TaskStatus::Killed,
        _ => TaskStatus::Failed,
    };
    let mut text = match &result.outcome {
        RunOutcome::Completed if result.final_text.trim().is_empty() => {
            "(the sub-agent finished without a final message)".to_string()
        }
        RunOutcome::Completed => result.final_text.clone(),
        other => {
            let mut text = format!("sub-agent {id} ({agent_type}) {}", other.describe());
            if !result.final_text.trim().is_empty() {
                text.push_str(&format!("; its last message:\n{}", result.final_text));
            }
            text
        }
    };
    // The hard cap: the full text spills to the session directory, named in the result.
    text = spill_if_large(ToolOutput::ok(text), &format!("subagent-{id}"), spill).content;
    let tokens = result.usage.context_tokens() + result.usage.output_tokens;
    text.push_str(&format!(
        "\n\n[sub-agent {id} · {agent_type} · {turns} turn(s) · {tokens} tokens · {secs:.1} s]",
        turns = result.turns,
        secs = begun.elapsed().as_secs_f64()
    ));
    TaskEnd {
        status,
        result: text,
        turns: result.turns,
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        clip(text, 200)
    } else if let Some(text) = panic.downcast_ref::<String>() {
        clip(text, 200)
    } else {
        "no message".to_string()
    }
}
