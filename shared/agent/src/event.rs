//! Events the agent loop emits.
//!
//! The loop is a producer; UIs (the terminal REPL, headless text/json/stream-json
//! output, a teammate's log) are consumers. Events are serializable so
//! `--output-format stream-json` can print them as they come.

use roo_llm::{Message, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::permissions::PermissionRequest;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunOutcome {
    /// The model ended its turn without calling tools.
    Completed,
    /// The turn limit was reached while the model still wanted tools.
    MaxTurns {
        /// The turn limit in force.
        limit: u32,
    },
    /// The user (or the owner of the loop) cancelled the run.
    Cancelled,
    /// The model kept calling tools that do not exist.
    UnknownTools {
        /// The tool names the model asked for.
        names: Vec<String>,
    },
    /// The model kept sending tool calls whose arguments were not a JSON object
    /// (broken, or cut off at the output limit), `turns` turns in a row.
    MalformedToolCalls {
        /// How many turns in a row had malformed calls.
        turns: u32,
    },
    /// The model call failed (after retries) or the session could not be written.
    Error {
        /// What failed.
        message: String,
    },
    /// A turn hook ended the run between turns (e.g. a teammate approved a shutdown
    /// request); `reason` says why.
    Stopped {
        /// Why the hook stopped the run.
        reason: String,
    },
    /// A spending cap was reached: no new model request was started
    /// ([`crate::hooks::SpendGate`]); `reason` says which cap and what was spent.
    OverBudget {
        /// Which cap, and what was spent.
        reason: String,
    },
}

impl RunOutcome {
    /// Whether the run did what it was asked.
    pub fn is_success(&self) -> bool {
        matches!(self, RunOutcome::Completed)
    }

    /// A one-line human description.
    pub fn describe(&self) -> String {
        match self {
            RunOutcome::Completed => "completed".to_string(),
            RunOutcome::MaxTurns { limit } => {
                format!("stopped after {limit} turns without finishing (raise it with --max-turns)")
            }
            RunOutcome::Cancelled => "cancelled".to_string(),
            RunOutcome::UnknownTools { names } => format!(
                "stopped: the model kept calling tools that do not exist ({})",
                names.join(", ")
            ),
            RunOutcome::MalformedToolCalls { turns } => format!(
                "stopped: the model sent only tool calls with invalid arguments {turns} turns in a row \
                 (not valid JSON, or cut off at the output limit); raise max_tokens or use a model \
                 that handles tool calls better"
            ),
            RunOutcome::Error { message } => format!("failed: {message}"),
            RunOutcome::Stopped { reason } => format!("stopped: {reason}"),
            RunOutcome::OverBudget { reason } => format!("stopped by a budget: {reason}"),
        }
    }
}

/// How context was compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionMethod {
    /// An LLM summary replaced the oldest whole rounds.
    Summary,
    /// The oldest whole rounds were dropped (the summary request would not fit).
    DropOldest,
}

/// One thing that happened in the loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A model request is about to be sent.
    TurnStart {
        /// The turn's number, from 1.
        turn: u32,
    },
    /// Streamed answer text.
    TextDelta {
        /// The new piece of text.
        text: String,
    },
    /// Streamed reasoning text.
    ThinkingDelta {
        /// The new piece of reasoning.
        text: String,
    },
    /// The complete assistant message of a turn.
    AssistantMessage {
        /// The message as it joins the conversation.
        message: Message,
    },
    /// A tool call starts (after its permission check passed).
    ToolStart {
        /// The call's id, as the model gave it.
        id: String,
        /// The tool's name.
        name: String,
        /// One line for the UI.
        summary: String,
        /// The call's input.
        input: Value,
    },
    /// A tool call ended; `preview` is the first lines of the result.
    ToolEnd {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
        /// One line for the UI.
        summary: String,
        /// The result is an error.
        is_error: bool,
        /// The first lines of the result.
        preview: String,
        /// How long the call took.
        duration_ms: u64,
    },
    /// The loop is waiting for a human decision on a call.
    PermissionRequest {
        /// What the call wants to do and why it needs approval.
        request: PermissionRequest,
    },
    /// A call was denied (by policy or by the human); the model gets an error result.
    PermissionDenied {
        /// The call's id.
        id: String,
        /// One line for the UI.
        summary: String,
        /// Why it was denied (the model's error result says it too).
        reason: String,
    },
    /// Usage of one model response and the running total of this agent.
    Usage {
        /// Usage of this response.
        turn: Usage,
        /// Usage of the agent so far.
        total: Usage,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        /// Cost of the agent so far, when the model's prices are known.
        cost_usd: Option<f64>,
    },
    /// The conversation was compacted to fit the context window.
    Compaction {
        /// How the history was shortened.
        method: CompactionMethod,
        /// Messages before compaction.
        messages_before: usize,
        /// Messages after compaction.
        messages_after: usize,
        /// Estimated tokens before compaction.
        tokens_before: u64,
    },
    /// Something the user should know that is not an error (repaired transcript,
    /// injected teammate messages, mode change).
    Notice {
        /// What to show.
        text: String,
    },
    /// Something failed beside the run, which goes on (an MCP server that failed
    /// to start or exited): shown even in a quiet `-p` run, unlike a notice.
    Warning {
        /// What to show.
        text: String,
    },
    /// A recoverable error (e.g. a model call that will be retried by the user).
    Error {
        /// What failed.
        message: String,
    },
    /// A sub-agent started for an Agent call of this run (`background`: the call
    /// returns at once).
    SubagentStart {
        /// The task id (`a1`).
        id: String,
        /// The definition's name, or `fork`.
        agent_type: String,
        /// The call's short description.
        description: String,
        /// The call returned at once.
        background: bool,
    },
    /// A foreground sub-agent of this run started a tool call: how many so far and
    /// the newest (one event per child tool call, none for its text).
    SubagentProgress {
        /// The task id.
        id: String,
        /// Tool calls the child made so far.
        tool_count: u32,
        /// The newest one, as one line.
        last_tool: String,
    },
    /// A background task ended (`status`: completed, failed or killed); sent to the
    /// session's task listener, whatever run is going on.
    TaskEnded {
        /// The task id.
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        /// The name the call gave the task, if any.
        name: Option<String>,
        /// `completed`, `failed` or `killed`.
        status: String,
        /// A short summary of the result.
        summary: String,
    },
    /// The run ended.
    Done {
        /// How the run ended.
        outcome: RunOutcome,
        /// Text of the last assistant message.
        final_text: String,
        /// Model requests made in this run.
        turns: u32,
        /// Usage of the whole run.
        usage: Usage,
    },
}

/// Where the loop sends its events. Cheap to clone; sending never blocks and never
/// fails the loop (a consumer that went away just stops receiving).
///
/// The channel is unbounded on purpose: the loop must neither wait on a slow UI in
/// the middle of a model stream nor drop a delta, and what it can queue is bounded
/// by the size of one run's output.
#[derive(Debug, Clone)]
pub struct EventSink {
    tx: Option<mpsc::UnboundedSender<AgentEvent>>,
}

impl EventSink {
    /// A sink feeding a channel; returns the receiving end.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<AgentEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx: Some(tx) }, rx)
    }

    /// A sink that drops every event (sub-agents whose output is only the result).
    pub fn discard() -> Self {
        Self { tx: None }
    }

    /// Sends one event.
    pub fn emit(&self, event: AgentEvent) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(event);
        }
    }
}
