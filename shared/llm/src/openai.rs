//! The OpenAI-compatible Chat Completions provider (`POST {base}/chat/completions`,
//! streamed). Works with OpenAI, Ollama, vLLM, llama.cpp server, DeepSeek, GLM and
//! OpenRouter, whose base URLs all end in `/v1` (or their own version path).
//!
//! Owns the translation of a [`Request`] into Chat Completions messages: the system
//! parts joined into one system message, tool results as `role: tool` messages, tool
//! calls as `tool_calls` with JSON-string arguments, and reasoning sent back as
//! `reasoning_content` (DeepSeek requires it on assistant turns with tool calls; the
//! official OpenAI endpoint rejects unknown fields, so it never gets it). The stream
//! side is in [`parse`].

mod parse;

use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};

use crate::error::{LlmError, Result};
use crate::models;
use crate::provider::{EventStream, Provider};
use crate::server_context::{self, ServerContext};
use crate::settings::LlmSettings;
use crate::transport::{self, HttpTarget};
use crate::types::{ContentBlock, Message, Request, Role};

pub(crate) use parse::OpenAiParser;

/// Streams from an OpenAI-compatible Chat Completions endpoint.
pub struct OpenAiProvider {
    target: Arc<HttpTarget>,
    model: String,
    max_tokens: u32,
    context_window: u64,
    official: bool,
    /// The configured base URL, for the local-server probe.
    base_url: String,
}

impl OpenAiProvider {
    /// A provider for `settings` (base URL up to and including `/v1`, key, model, …).
    pub fn new(settings: &LlmSettings) -> Result<Self> {
        let base = settings.base_url.trim_end_matches('/');
        let url = format!("{base}/chat/completions");
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("accept", HeaderValue::from_static("text/event-stream"));
        if let Some(key) = &settings.api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                LlmError::Config(
                    "use the OpenAI API key: it contains characters not allowed in an HTTP header; check OPENAI_API_KEY".to_owned(),
                )
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let client = transport::http_client(&settings.timeouts, &url)?;
        Ok(Self {
            official: is_official(base),
            base_url: base.to_owned(),
            target: Arc::new(HttpTarget {
                provider: "openai",
                client,
                url,
                headers,
                policy: settings.retry,
                timeouts: settings.timeouts,
                model: settings.model.clone(),
                key_env: "OPENAI_API_KEY",
            }),
            model: settings.model.clone(),
            max_tokens: settings.max_tokens,
            context_window: settings
                .context_window
                .unwrap_or_else(|| models::context_window(&settings.model)),
        })
    }
}

/// Whether `base` is OpenAI's own API, which wants `max_completion_tokens` and rejects
/// fields other servers need (`reasoning_content`).
fn is_official(base: &str) -> bool {
    crate::transport::url_host(base).as_deref() == Some("api.openai.com")
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn context_window(&self) -> u64 {
        self.context_window
    }

    fn stream(&self, request: Request) -> EventStream {
        let (model, max_tokens) = request.model_and_max_tokens(&self.model, self.max_tokens);
        let body = request_body(&request, model, max_tokens, self.official);
        let body = Bytes::from(body.to_string());
        transport::stream(self.target.clone(), body, OpenAiParser::default)
    }

    fn server_context(&self) -> BoxFuture<'_, Option<ServerContext>> {
        Box::pin(async move {
            let auth = self.target.auth_headers();
            server_context::probe(&self.target.client, &self.base_url, &auth, &self.model).await
        })
    }
}

/// The JSON body of a streamed Chat Completions request. `official` selects OpenAI's
/// own dialect (`max_completion_tokens`, no `reasoning_content`).
pub fn request_body(request: &Request, model: &str, max_tokens: u32, official: bool) -> Value {
    let mut messages = Vec::new();
    let system: Vec<&str> = request
        .system
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system.join("\n\n")}));
    }
    for message in &request.messages {
        match message.role {
            Role::User => user_messages(message, &mut messages),
            Role::Assistant => messages.extend(assistant_message(message, official)),
        }
    }
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let max_key = if official {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body[max_key] = json!(max_tokens);
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                }})
            })
            .collect();
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    body
}

/// Tool results first (they must directly follow the assistant's `tool_calls`), then
/// the user's text, if any.
fn user_messages(message: &Message, out: &mut Vec<Value>) {
    let mut texts = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                // Chat Completions has no error flag on tool results; say it in words.
                let content = if *is_error {
                    format!("Error: {content}")
                } else {
                    content.clone()
                };
                out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
            }
            ContentBlock::Text { text } if !text.is_empty() => texts.push(text.as_str()),
            _ => {}
        }
    }
    if !texts.is_empty() {
        out.push(json!({"role": "user", "content": texts.join("\n\n")}));
    }
}

fn assistant_message(message: &Message, official: bool) -> Option<Value> {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text { text: t } => text.push_str(t),
            ContentBlock::Thinking { thinking, .. } => reasoning.push_str(thinking),
            ContentBlock::ToolUse { id, name, input } => calls.push(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": input.to_string()},
            })),
            ContentBlock::RedactedThinking { .. } | ContentBlock::ToolResult { .. } => {}
        }
    }
    if text.is_empty() && calls.is_empty() {
        return None;
    }
    let mut wire = json!({
        "role": "assistant",
        "content": if text.is_empty() { Value::Null } else { json!(text) },
    });
    if !calls.is_empty() {
        wire["tool_calls"] = Value::Array(calls);
    }
    if !official && !reasoning.is_empty() {
        wire["reasoning_content"] = json!(reasoning);
    }
    Some(wire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolSpec;

    #[test]
    fn body_maps_tools_results_and_reasoning() {
        let request = Request {
            system: vec!["a".into(), "b".into()],
            messages: vec![
                Message::user_text("go"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::Thinking {
                            thinking: "plan".into(),
                            signature: None,
                        },
                        ContentBlock::ToolUse {
                            id: "c1".into(),
                            name: "Bash".into(),
                            input: json!({"command": "ls"}),
                        },
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::Text {
                            text: "also this".into(),
                        },
                        ContentBlock::ToolResult {
                            tool_use_id: "c1".into(),
                            content: "denied".into(),
                            is_error: true,
                        },
                    ],
                },
            ],
            tools: vec![ToolSpec {
                name: "Bash".into(),
                description: "runs".into(),
                input_schema: json!({"type": "object"}),
            }],
            ..Request::default()
        };
        let body = request_body(&request, "deepseek-chat", 100, false);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "a\n\nb"},
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": null, "reasoning_content": "plan",
                 "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "Bash", "arguments": "{\"command\":\"ls\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "Error: denied"},
                {"role": "user", "content": "also this"},
            ])
        );
        assert_eq!(body["max_tokens"], json!(100));
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(
            body["tools"][0]["function"]["parameters"],
            json!({"type": "object"})
        );

        let official = request_body(&request, "gpt-4.1", 100, true);
        assert_eq!(official["max_completion_tokens"], json!(100));
        assert_eq!(official.get("max_tokens"), None);
        assert_eq!(official["messages"][2].get("reasoning_content"), None);
    }

    #[test]
    fn official_detection() {
        assert!(is_official("https://api.openai.com/v1"));
        assert!(!is_official("http://localhost:11434/v1"));
        assert!(!is_official("https://api.deepseek.com/v1"));
    }

    #[test]
    fn a_lookalike_host_is_not_the_official_api() {
        assert!(!is_official("https://api.openai.com.evil/v1"));
        assert!(!is_official("https://api.openai.com.evil.example/v1"));
        assert!(!is_official("https://api.openai.com@evil.example/v1"));
        assert!(is_official("https://API.openai.com./v1"));
    }
}
