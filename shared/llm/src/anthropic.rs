//! The Anthropic Messages API provider (`POST {base}/v1/messages`, streamed).
//!
//! Owns the translation of a [`Request`] into the Messages wire format: system prompt
//! as blocks, tools, tool results in user turns, thinking blocks (with signatures)
//! sent back unchanged, and prompt caching breakpoints (see [`request_body`]). The
//! stream side is in [`parse`].

mod parse;

use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use crate::error::{LlmError, Result};
use crate::models;
use crate::provider::{EventStream, Provider};
use crate::server_context::{self, ServerContext};
use crate::settings::LlmSettings;
use crate::transport::{self, HttpTarget};
use crate::types::{ContentBlock, Message, Request, Role};

pub(crate) use parse::AnthropicParser;

/// API version header value (the stable Messages API version).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Streams from the Anthropic Messages API.
pub struct AnthropicProvider {
    target: Arc<HttpTarget>,
    model: String,
    max_tokens: u32,
    context_window: u64,
    thinking_budget: Option<u32>,
    /// The configured base URL, for the local-server probe.
    base_url: String,
}

impl AnthropicProvider {
    /// A provider for `settings` (base URL root, key, model, timeouts, retries).
    pub fn new(settings: &LlmSettings) -> Result<Self> {
        let base = settings.base_url.trim_end_matches('/');
        let url = format!("{base}/v1/messages");
        let mut headers = HeaderMap::new();
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("accept", HeaderValue::from_static("text/event-stream"));
        if let Some(key) = &settings.api_key {
            let mut value = HeaderValue::from_str(key).map_err(|_| {
                LlmError::Config(
                    "use the Anthropic API key: it contains characters not allowed in an HTTP header; check ANTHROPIC_API_KEY".to_owned(),
                )
            })?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static("x-api-key"), value);
        }
        let client = transport::http_client(&settings.timeouts, &url)?;
        Ok(Self {
            target: Arc::new(HttpTarget {
                provider: "anthropic",
                client,
                url,
                headers,
                policy: settings.retry,
                timeouts: settings.timeouts,
                model: settings.model.clone(),
                key_env: "ANTHROPIC_API_KEY",
            }),
            model: settings.model.clone(),
            max_tokens: settings.max_tokens,
            context_window: settings
                .context_window
                .unwrap_or_else(|| models::context_window(&settings.model)),
            thinking_budget: settings.thinking_budget,
            base_url: base.to_owned(),
        })
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn context_window(&self) -> u64 {
        self.context_window
    }

    fn stream(&self, request: Request) -> EventStream {
        let (model, max_tokens) = request.model_and_max_tokens(&self.model, self.max_tokens);
        let body = request_body(&request, model, max_tokens, self.thinking_budget);
        let body = Bytes::from(body.to_string());
        transport::stream(self.target.clone(), body, AnthropicParser::default)
    }

    fn server_context(&self) -> BoxFuture<'_, Option<ServerContext>> {
        Box::pin(async move {
            let auth = self.target.auth_headers();
            server_context::probe(&self.target.client, &self.base_url, &auth, &self.model).await
        })
    }
}

/// The JSON body of a streamed Messages request.
///
/// Prompt caching: `cache_control: {type: ephemeral}` on the four blocks the API
/// allows, each ending a prefix (tools → system → messages) that a later request can
/// read:
///
/// - the last tool: agents with the same tool list (teammates of one team, sub-agents
///   of one type) share it even where their system prompts differ, and it survives a
///   change of the system prompt;
/// - the first system block, the stable anchor (role, guidelines, environment): what
///   follows it (the plan-mode rules) can change without losing it;
/// - the last block of the latest user message, which caches the conversation;
/// - the last block of the user message before it, where the previous request put its
///   conversation breakpoint: that prefix is read even when the newest turn added more
///   blocks than the API looks back over (20; many parallel tool calls).
///
/// Thinking blocks without a signature (e.g. reasoning recorded from an
/// OpenAI-compatible model) are dropped, because the API rejects them; empty text
/// blocks likewise.
pub fn request_body(
    request: &Request,
    model: &str,
    max_tokens: u32,
    thinking_budget: Option<u32>,
) -> Value {
    let cache = json!({"type": "ephemeral"});
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "stream": true,
    });
    let system: Vec<Value> = request
        .system
        .iter()
        .filter(|part| !part.is_empty())
        .map(|part| json!({"type": "text", "text": part}))
        .collect();
    if !system.is_empty() {
        let mut system = system;
        if let Some(anchor) = system.first_mut() {
            anchor["cache_control"] = cache.clone();
        }
        body["system"] = Value::Array(system);
    }
    let mut messages: Vec<Value> = request.messages.iter().filter_map(wire_message).collect();
    let last_user_blocks = messages
        .iter_mut()
        .rev()
        .filter(|m| m["role"] == "user")
        .take(2)
        .filter_map(|m| m["content"].as_array_mut())
        .filter_map(|blocks| blocks.last_mut());
    for block in last_user_blocks {
        block["cache_control"] = cache.clone();
    }
    body["messages"] = Value::Array(messages);
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.input_schema,
                })
            })
            .collect();
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = cache;
        }
        body["tools"] = Value::Array(tools);
    }
    match thinking_budget {
        Some(budget) if budget > 0 => {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
            // The API requires max_tokens > budget_tokens and no custom temperature.
            if max_tokens <= budget {
                body["max_tokens"] = json!(budget.saturating_add(4096));
            }
        }
        _ => {
            if let Some(t) = request.temperature {
                body["temperature"] = json!(t);
            }
        }
    }
    body
}

fn wire_message(message: &Message) -> Option<Value> {
    let content: Vec<Value> = message.content.iter().filter_map(wire_block).collect();
    if content.is_empty() {
        return None;
    }
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    Some(json!({"role": role, "content": content}))
}

fn wire_block(block: &ContentBlock) -> Option<Value> {
    Some(match block {
        ContentBlock::Text { text } if text.is_empty() => return None,
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Thinking {
            thinking,
            signature: Some(signature),
        } => json!({"type": "thinking", "thinking": thinking, "signature": signature}),
        ContentBlock::Thinking {
            signature: None, ..
        } => return None,
        ContentBlock::RedactedThinking { data } => {
            json!({"type": "redacted_thinking", "data": data})
        }
        ContentBlock::ToolUse { id, name, input } => {
            let input = if input.is_object() {
                input.clone()
            } else {
                json!({})
            };
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let mut v =
                json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content});
            if *is_error {
                v["is_error"] = json!(true);
            }
            v
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolSpec;

    #[test]
    fn body_has_cache_breakpoints_and_thinking_round_trip() {
        let request = Request {
            system: vec!["stable".into(), "volatile".into()],
            messages: vec![
                Message::user_text("hi"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::Thinking {
                            thinking: "hmm".into(),
                            signature: Some("sig".into()),
                        },
                        ContentBlock::Thinking {
                            thinking: "unsigned".into(),
                            signature: None,
                        },
                        ContentBlock::ToolUse {
                            id: "t1".into(),
                            name: "ReadFile".into(),
                            input: json!({"path": "a"}),
                        },
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult {
                        tool_use_id: "t1".into(),
                        content: "data".into(),
                        is_error: true,
                    }],
                },
            ],
            tools: vec![ToolSpec {
                name: "ReadFile".into(),
                description: "reads".into(),
                input_schema: json!({"type": "object"}),
            }],
            temperature: Some(0.5),
            ..Request::default()
        };
        let body = request_body(&request, "claude-x", 1000, None);
        assert_eq!(body["tools"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(body["system"][1].get("cache_control"), None);
        // The user message before the latest one keeps the previous request's breakpoint.
        assert_eq!(
            body["messages"][0]["content"][0]["cache_control"]["type"],
            "ephemeral"
        );
        assert_eq!(
            body["messages"][1]["content"],
            json!([
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "ReadFile", "input": {"path": "a"}},
            ])
        );
        assert_eq!(
            body["messages"][2]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "t1", "content": "data",
                   "is_error": true, "cache_control": {"type": "ephemeral"}})
        );
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
        assert_eq!(body.to_string().matches("cache_control").count(), 4);
        assert_eq!(body["temperature"], json!(0.5));
        assert_eq!(body["stream"], json!(true));

        let thinking = request_body(&request, "claude-x", 1000, Some(2000));
        assert_eq!(thinking["thinking"]["budget_tokens"], json!(2000));
        assert_eq!(thinking["max_tokens"], json!(6096));
        assert_eq!(thinking.get("temperature"), None);
    }
}
