//! Running the tool calls of one response: batches (consecutive concurrency-safe
//! calls together, the others alone), each call past the registry's lookup, the hooks
//! (`pre_tool_use`, which may block it, and `post_tool_use`) and the permission policy,
//! its result spilled to a file when large. Results come back in call order.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use futures_util::{StreamExt, stream};
use roo_llm::ContentBlock;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Agent;
use crate::event::{AgentEvent, EventSink};
use crate::hooks::{ToolCallInfo, Verdict};
use crate::permissions::protected_undo::ProtectedSnapshot;
use crate::permissions::{Approval, PermissionDecision, PermissionMode};
use crate::tool::{
    ConversationSnapshot, Lookup, Tool, ToolContext, ToolKind, ToolOutput, ToolRegistry,
};
use crate::tools::spill_if_large;

/// One tool call of a model's answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Call {
    /// The provider's id of the call; its result answers to it.
    pub id: String,
    /// The tool's name as the model wrote it.
    pub name: String,
    /// The call's arguments.
    pub input: Value,
}

impl Agent {
    /// Runs the calls of one response: consecutive concurrency-safe calls together
    /// (at most `tool_concurrency` at once), the others one by one. Results come back
    /// in call order.
    pub(super) async fn execute(
        &self,
        calls: Vec<Call>,
        invalid: &HashMap<String, String>,
        snapshot: Option<Arc<ConversationSnapshot>>,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Vec<ContentBlock> {
        let mut context = self.context.clone();
        context.cancel = cancel.clone();
        context.conversation = snapshot;
        context.events = events.clone();
        if let Some(gate) = context.workspace.take() {
            let ready = tokio::select! {
                ready = gate.ready() => ready,
                () = cancel.cancelled() => Ok(()),
            };
            if let Err(why) = ready {
                let text = format!(
                    "The working directory {} could not be prepared ({why}); this call was not run.",
                    context.cwd.display()
                );
                return calls
                    .into_iter()
                    .map(|call| ContentBlock::ToolResult {
                        tool_use_id: call.id,
                        content: text.clone(),
                        is_error: true,
                    })
                    .collect();
            }
        }
        let mut results = Vec::with_capacity(calls.len());
        for batch in partition(calls, &self.tools) {
            if batch.concurrent {
                let outputs: Vec<ContentBlock> = stream::iter(
                    batch
                        .calls
                        .into_iter()
                        .map(|call| self.execute_one(call, invalid, &context, events)),
                )
                .buffered(self.options.tool_concurrency.max(1))
                .collect()
                .await;
                results.extend(outputs);
            } else {
                for call in batch.calls {
                    results.push(self.execute_one(call, invalid, &context, events).await);
                }
            }
        }
        results
    }

    async fn execute_one(
        &self,
        Call { id, name, input }: Call,
        invalid: &HashMap<String, String>,
        context: &ToolContext,
        events: &EventSink,
    ) -> ContentBlock {
        let output = if context.cancel.is_cancelled() {
            ToolOutput::error("Interrupted by the user before this call ran.")
        } else {
            match (self.tools.lookup(&name), invalid.get(&id)) {
                (Lookup::Unknown, _) => ToolOutput::error(format!(
                    "Unknown tool \"{name}\". Available tools: {}.",
                    self.tools.names().join(", ")
                )),
                // Enforced here, whatever tool list the model saw.
                (Lookup::Refused { scope }, _) => ToolOutput::error(format!(
                    "The tool \"{name}\" is not available in this run (narrowed by {scope}); \
                     this call was not run. Available tools: {}.",
                    self.tools.names().join(", ")
                )),
                (Lookup::Deferred(_), _) => {
                    self.tools.reveal(&[name.as_str()]);
                    ToolOutput::error(format!(
                        "The schema of {name} had not been loaded, so this call was not run. \
                         It is loaded now: call {name} again with arguments that match its schema."
                    ))
                }
                (Lookup::Ready(_), Some(why)) => ToolOutput::error(why.clone()),
                (Lookup::Ready(tool), None) if !input.is_object() => ToolOutput::error(format!(
                    "The input of {} must be a JSON object matching its schema; this call was not run.",
                    tool.name()
                )),
                (Lookup::Ready(tool), None) => {
                    self.call_hooked(tool.as_ref(), &id, input, context, events)
                        .await
                }
            }
        };
        let output = spill_if_large(output, &id, context);
        ContentBlock::ToolResult {
            tool_use_id: id,
            content: output.content,
            is_error: output.is_error,
        }
    }

    /// The one hook point around every call: `pre_tool_use` hooks (which may block
    /// it), the permission check and the call, then `post_tool_use` hooks.
    async fn call_hooked(
        &self,
        tool: &dyn Tool,
        id: &str,
        input: Value,
        context: &ToolContext,
        events: &EventSink,
    ) -> ToolOutput {
        if !self.hooks.is_empty() {
            let info = ToolCallInfo {
                id,
                tool,
                input: &input,
                context,
            };
            for hook in &self.hooks {
                if let Verdict::Block { reason } = hook.pre_tool_use(info, events).await {
                    return ToolOutput::error(reason);
                }
            }
        }
        let (mut output, ran) = self
            .call_permitted(tool, id, input.clone(), context, events)
            .await;
        if ran {
            let info = ToolCallInfo {
                id,
                tool,
                input: &input,
                context,
            };
            for hook in &self.hooks {
                hook.post_tool_use(info, &mut output, events).await;
            }
        }
        output
    }

    /// Checks the call's permission and runs it if allowed; the flag says whether
    /// the tool ran.
    async fn call_permitted(
        &self,
        tool: &dyn Tool,
        id: &str,
        input: Value,
        context: &ToolContext,
        events: &EventSink,
    ) -> (ToolOutput, bool) {
        let summary = tool.summarize(&input);
        // The roots the check judged against go with the call, so the file
        // tools open paths under the same roots (see `ToolContext::allowed_roots`).
        let mut context = context.clone();
        let decision = match self.policy.read() {
            Ok(policy) => {
                context.allowed_roots = policy
                    .allowed_roots()
                    .into_iter()
                    .map(Path::to_path_buf)
                    .collect();
                policy.check(tool, &input, &context.cwd)
            }
            Err(_) => PermissionDecision::Deny {
                reason: "the permission policy is unavailable".to_string(),
            },
        };
        // A command nobody answered leaves nothing changed under `.git/` or `.roocode/`.
        let mut guard = match (&decision, self.policy.read()) {
            (PermissionDecision::Allow, Ok(policy))
                if tool.kind() == ToolKind::Execute
                    && policy.mode() != PermissionMode::BypassPermissions =>
            {
                Some(policy.project_root().to_path_buf())
            }
            _ => None,
        };
        let context = &context;
        let denied = |reason: String| {
            events.emit(AgentEvent::PermissionDenied {
                id: id.to_string(),
                summary: summary.clone(),
                reason: reason.clone(),
            });
            (
                ToolOutput::error(format!("Permission denied for {summary}: {reason}")),
                false,
            )
        };
        match decision {
            PermissionDecision::Allow => {}
            PermissionDecision::Deny { reason } => return denied(reason),
            PermissionDecision::Ask(request) => {
                let _one_question_at_a_time = self.ask_lock.lock().await;
                events.emit(AgentEvent::PermissionRequest {
                    request: request.clone(),
                });
                let approval = tokio::select! {
                    a = self.approver.ask(&request) => a,
                    _ = context.cancel.cancelled() => Approval::Deny { feedback: Some("the run was cancelled".to_string()) },
                };
                guard = None;
                match approval {
                    // "Always" where it was not offered saves nothing: allowed once.
                    Approval::AllowOnce => {}
                    Approval::AllowAlways if !request.offer_always => {}
                    Approval::AllowAlways => {
                        let saved = match self.policy.write() {
                            Ok(mut policy) => policy.allow_always(&request.suggested_rule),
                            Err(_) => Ok(()),
                        };
                        if let Err(e) = saved {
                            events.emit(AgentEvent::Error {
                                message: format!(
                                    "could not save the rule {}: {e}",
                                    request.suggested_rule
                                ),
                            });
                        }
                    }
                    Approval::Deny { feedback } => {
                        // The approver words its own feedback (the user's note, the
                        // lead's answer, or why nobody could approve).
                        let reason = match feedback {
                            Some(f) if !f.trim().is_empty() => f.trim().to_string(),
                            _ => "the user refused this call".to_string(),
                        };
                        return denied(reason);
                    }
                }
            }
        }

        // The files it may change are checkpointed first (the tool never knows).
        let (checkpoint, told) = self.checkpoint_before(tool, &input, context, events).await;
        events.emit(AgentEvent::ToolStart {
            id: id.to_string(),
            name: tool.name().to_string(),
            summary: summary.clone(),
            input: input.clone(),
        });
        let started = Instant::now();
        let snapshot = guard.map(|root| ProtectedSnapshot::take(&root));
        let mut output = tool.call(input, context).await;
        if let Some(undone) = snapshot.map(|s| s.undo_changes())
            && !undone.is_empty()
        {
            let message = format!(
                "the command changed what configures git or RooCode, which only a call the \
                 user answers may change; undone: {}",
                undone.join("; ")
            );
            events.emit(AgentEvent::Error {
                message: format!("{summary}: {message}"),
            });
            output.content.push_str(&format!("\n[{message}]"));
            output.is_error = true;
        }
        // A checkpoint skipped or cut short is told to the agent with the result, once.
        let told_after = self.checkpoint_after(checkpoint, events).await;
        for text in [told, told_after].into_iter().flatten() {
            output.content.push_str(&format!("\n[{text}]"));
        }
        tracing::debug!(
            tool = tool.name(),
            id,
            is_error = output.is_error,
            ms = started.elapsed().as_millis() as u64,
            "tool call"
        );
        events.emit(AgentEvent::ToolEnd {
            id: id.to_string(),
            name: tool.name().to_string(),
            summary,
            is_error: output.is_error,
            preview: preview(&output.content),
            duration_ms: started.elapsed().as_millis() as u64,
        });
        (output, true)
    }
}

/// First lines of a result, for UIs.
fn preview(content: &str) -> String {
    const MAX_LINES: usize = 4;
    const MAX_CHARS: usize = 400;
    let mut out: String = content
        .lines()
        .take(MAX_LINES)
        .collect::<Vec<_>>()
        .join("\n");
    if out.chars().count() > MAX_CHARS {
        out = out.chars().take(MAX_CHARS).collect();
        out.push('…');
    } else if content.lines().count() > MAX_LINES {
        out.push_str("\n…");
    }
    out
}

/// Calls that run together or alone.
#[derive(Debug, PartialEq)]
struct Batch {
    concurrent: bool,
    calls: Vec<Call>,
}

/// Partitions calls into batches: consecutive concurrency-safe calls share one
/// batch; every other call gets a batch of its own. Unknown tools count as unsafe.
fn partition(calls: Vec<Call>, tools: &ToolRegistry) -> Vec<Batch> {
    let mut batches: Vec<Batch> = Vec::new();
    for call in calls {
        let safe = tools
            .get(&call.name)
            .is_some_and(|t| t.is_concurrency_safe(&call.input));
        match batches.last_mut() {
            Some(last) if safe && last.concurrent => last.calls.push(call),
            _ => batches.push(Batch {
                concurrent: safe,
                calls: vec![call],
            }),
        }
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{PermissionTarget, ToolKind};
    use futures_util::future::BoxFuture;
    use serde_json::json;

    struct Fake {
        name: &'static str,
        safe: bool,
    }

    impl Tool for Fake {
        fn name(&self) -> &str {
            self.name
        }
        fn description(&self) -> String {
            String::new()
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object"})
        }
        fn kind(&self) -> ToolKind {
            ToolKind::Read
        }
        fn is_concurrency_safe(&self, _: &Value) -> bool {
            self.safe
        }
        fn permission_target(&self, _: &Value) -> PermissionTarget {
            PermissionTarget::None
        }
        fn call<'a>(&'a self, _: Value, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
            Box::pin(async { ToolOutput::ok("") })
        }
    }

    #[test]
    fn partition_batches_consecutive_safe_calls_and_runs_the_others_alone() {
        let tools = ToolRegistry::new();
        tools.register(Arc::new(Fake {
            name: "Read",
            safe: true,
        }));
        tools.register(Arc::new(Fake {
            name: "Edit",
            safe: false,
        }));
        let names = ["Read", "Read", "Edit", "Read", "Read", "Nope", "Read"];
        let calls = names
            .iter()
            .enumerate()
            .map(|(i, n)| Call {
                id: i.to_string(),
                name: n.to_string(),
                input: json!({}),
            })
            .collect();
        let shape: Vec<(bool, usize)> = partition(calls, &tools)
            .iter()
            .map(|b| (b.concurrent, b.calls.len()))
            .collect();
        assert_eq!(
            shape,
            vec![(true, 2), (false, 1), (true, 2), (false, 1), (true, 1)]
        );
    }

    #[test]
    fn preview_is_short() {
        let long = (0..100)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let p = preview(&long);
        assert_eq!(p.lines().count(), 5);
        assert!(p.ends_with('…'));
    }
}
