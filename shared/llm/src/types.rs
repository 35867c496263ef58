//! Provider-neutral conversation and stream types.
//!
//! Everything above the LLM client (agent loop, sessions, UI) speaks only these types;
//! each provider module translates them to and from its wire format. They are also the
//! on-disk transcript format (serde), so changes here are format changes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said a message. Tool results travel in `User` messages, as in the Anthropic API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// An assistant message holding one text block.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// Tool calls in this message, in order.
    pub fn tool_uses(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }

    /// Concatenated text blocks of this message.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }
}

/// One block of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    /// Model reasoning. Anthropic requires it (with its signature) to be sent back
    /// unchanged in the same assistant turn when tools are used.
    Thinking {
        thinking: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Encrypted reasoning (Anthropic `redacted_thinking`), round-tripped opaquely.
    RedactedThinking {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: Value,
}

/// One model request. Providers translate it into their wire format.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Request {
    /// Model name; empty means the provider's configured model.
    pub model: String,
    /// System prompt parts, sent in order. The first part is the stable one (role,
    /// environment) and is the prompt-cache anchor.
    pub system: Vec<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Who is asking (agent name). The scripted provider keys its replies on it;
    /// real providers ignore it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent: String,
}

impl Request {
    /// The model and output budget to send: the request's own, or the provider's
    /// defaults where the request leaves them empty (zero).
    pub fn model_and_max_tokens<'a>(&'a self, model: &'a str, max_tokens: u32) -> (&'a str, u32) {
        let model = if self.model.is_empty() {
            model
        } else {
            &self.model
        };
        let max_tokens = if self.max_tokens == 0 {
            max_tokens
        } else {
            self.max_tokens
        };
        (model, max_tokens)
    }
}

/// Token usage of one response. Missing counts are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Sum of two usages.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }

    /// Tokens the prompt of this request occupied in the context window.
    pub fn context_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Finished its turn (Anthropic `end_turn`, OpenAI `stop`).
    EndTurn,
    /// Wants tools run (Anthropic `tool_use`, OpenAI `tool_calls`).
    ToolUse,
    /// Hit `max_tokens` (Anthropic `max_tokens`, OpenAI `length`).
    MaxTokens,
    StopSequence,
    /// Declined to answer (Anthropic `refusal`, OpenAI `content_filter`).
    Refusal,
    Other(String),
}

/// The normalized stream every provider produces.
///
/// Order guarantees: for each tool call, `ToolCallStart` comes before its
/// `ToolInputDelta`s, which come before its `ToolCallEnd` (or `ToolCallInvalid`);
/// `MessageStop` is last.
/// Text and thinking deltas of one block are contiguous.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        text: String,
    },
    /// Signature that closes a thinking block (Anthropic).
    ThinkingSignature {
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    ToolCallStart {
        id: String,
        name: String,
    },
    ToolInputDelta {
        id: String,
        partial_json: String,
    },
    /// The call's complete input, parsed. An empty argument string parses as `{}`.
    ToolCallEnd {
        id: String,
        name: String,
        input: Value,
    },
    /// The call is complete but its arguments are unusable: not valid JSON (e.g. cut
    /// off at `max_tokens`) or not a JSON object. Ends the call instead of
    /// `ToolCallEnd`. `error` says why in bounded size (never the whole raw text);
    /// the raw fragments were in the `ToolInputDelta`s.
    ToolCallInvalid {
        id: String,
        name: String,
        error: String,
    },
    MessageStop {
        stop_reason: StopReason,
        usage: Usage,
    },
}

/// A complete assistant response, assembled from a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub message: Message,
    pub stop_reason: StopReason,
    pub usage: Usage,
    /// Tool calls of `message` whose arguments were unusable
    /// ([`StreamEvent::ToolCallInvalid`]). Their `ToolUse` blocks carry `{}` as input,
    /// so the message stays valid for every provider and for the transcript; the
    /// caller must not run them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_tool_calls: Vec<InvalidToolCall>,
}

/// A tool call whose arguments could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidToolCall {
    pub id: String,
    pub name: String,
    /// Why, in bounded size (see [`crate::tool_input`]).
    pub error: String,
}
