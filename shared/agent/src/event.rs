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
    MaxTurns { limit: u32 },
    /// The user (or the owner of the loop) cancelled the run.
    Cancelled,
    /// The model kept calling tools that do not exist.
    UnknownTools { names: Vec<String> },
    /// The model kept sending tool calls whose arguments were not a JSON object
    /// (broken, or cut off at the output limit), `turns` turns in a row.
    MalformedToolCalls { turns: u32 },
    /// The model call failed (after retries) or the session could not be written.
    Error { message: String },
    /// A turn hook ended the run between turns (e.g. a teammate approved a shutdown
    /// request); `reason` says why.
    Stopped { reason: String },
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
    TurnStart { turn: u32 },
    /// Streamed answer text.
    TextDelta { text: String },
    /// Streamed reasoning text.
    ThinkingDelta { text: String },
    /// The complete assistant message of a turn.
    AssistantMessage { message: Message },
    /// A tool call starts (after its permission check passed).
    ToolStart {
        id: String,
        name: String,
        summary: String,
        input: Value,
    },
    /// A tool call ended; `preview` is the first lines of the result.
    ToolEnd {
        id: String,
        name: String,
        summary: String,
        is_error: bool,
        preview: String,
        duration_ms: u64,
    },
    /// The loop is waiting for a human decision on a call.
    PermissionRequest { request: PermissionRequest },
    /// A call was denied (by policy or by the human); the model gets an error result.
    PermissionDenied {
        id: String,
        summary: String,
        reason: String,
    },
    /// Usage of one model response and the running total of this agent.
    Usage {
        turn: Usage,
        total: Usage,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    /// The conversation was compacted to fit the context window.
    Compaction {
        method: CompactionMethod,
        messages_before: usize,
        messages_after: usize,
        tokens_before: u64,
    },
    /// Something the user should know that is not an error (repaired transcript,
    /// injected teammate messages, mode change).
    Notice { text: String },
    /// Something failed beside the run, which goes on (an MCP server that failed
    /// to start or exited): shown even in a quiet `-p` run, unlike a notice.
    Warning { text: String },
    /// A recoverable error (e.g. a model call that will be retried by the user).
    Error { message: String },
    /// A sub-agent started for an Agent call of this run (`background`: the call
    /// returns at once).
    SubagentStart {
        id: String,
        agent_type: String,
        description: String,
        background: bool,
    },
    /// A foreground sub-agent of this run started a tool call: how many so far and
    /// the newest (one event per child tool call, none for its text).
    SubagentProgress {
        id: String,
        tool_count: u32,
        last_tool: String,
    },
    /// A background task ended (`status`: completed, failed or killed); sent to the
    /// session's task listener, whatever run is going on.
    TaskEnded {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        status: String,
        summary: String,
    },
    /// The run ended.
    Done {
        outcome: RunOutcome,
        /// Text of the last assistant message.
        final_text: String,
        turns: u32,
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
