//! Scripted replies in the providers' real SSE wire formats, and the reverse: reading
//! what a script selection needs (agent, last user text, system prompt) out of a wire
//! request body.
//!
//! The encodings follow the providers' published streaming examples event for event
//! (Anthropic: `message_start`, `ping`, block start/delta/stop with an initial empty
//! `input_json_delta`, `message_delta` with cumulative usage, `message_stop`; OpenAI:
//! a role chunk, content and `tool_calls` fragments keyed by index, a `finish_reason`
//! chunk, a usage-only chunk with empty `choices`, `[DONE]`).

use serde_json::{Value, json};

use crate::script::{ScriptQuery, ScriptedReply};
use crate::sse::encode_event;
use crate::types::StopReason;

/// The Anthropic SSE events of `reply`, one string per event.
pub fn anthropic_sse(reply: &ScriptedReply, model: &str, message_id: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |data: Value| {
        let kind = data["type"].as_str().unwrap_or("message").to_owned();
        out.push(encode_event(Some(&kind), &data.to_string()));
    };
    let usage = reply.usage;
    push(json!({"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": usage.input_tokens,
                  "cache_creation_input_tokens": usage.cache_write_tokens,
                  "cache_read_input_tokens": usage.cache_read_tokens,
                  "output_tokens": 1}}}));
    push(json!({"type": "ping"}));
    if let Some(message) = &reply.error {
        let kind = if message.contains("overloaded") {
            "overloaded_error"
        } else {
            "invalid_request_error"
        };
        push(json!({"type": "error", "error": {"type": kind, "message": message}}));
        return out;
    }
    let mut index = 0;
    let thinking = reply.thinking.as_deref().unwrap_or("");
    if !thinking.is_empty() || reply.signature.is_some() {
        push(json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "thinking", "thinking": ""}}));
        if !thinking.is_empty() {
            push(json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "thinking_delta", "thinking": thinking}}));
        }
        if let Some(signature) = &reply.signature {
            push(json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "signature_delta", "signature": signature}}));
        }
        push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    if let Some(text) = reply.text.as_deref().filter(|t| !t.is_empty()) {
        push(json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "text", "text": ""}}));
        push(json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": text}}));
        push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    for call in &reply.tool_calls {
        push(json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}));
        push(json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": ""}}));
        push(json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": call.arguments()}}));
        push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    let stop = match &reply.stop_reason {
        StopReason::EndTurn => "end_turn".to_owned(),
        StopReason::ToolUse => "tool_use".to_owned(),
        StopReason::MaxTokens => "max_tokens".to_owned(),
        StopReason::StopSequence => "stop_sequence".to_owned(),
        StopReason::Refusal => "refusal".to_owned(),
        StopReason::Other(other) => other.clone(),
    };
    push(json!({"type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": usage.output_tokens}}));
    push(json!({"type": "message_stop"}));
    out
}

/// The OpenAI Chat Completions SSE events of `reply`, one string per chunk.
pub fn openai_sse(reply: &ScriptedReply, model: &str, completion_id: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chunk = |delta: Value, finish: Option<&str>| {
        let data = json!({"id": completion_id, "object": "chat.completion.chunk",
            "created": 1_700_000_000u64, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            "usage": null});
        out.push(encode_event(None, &data.to_string()));
    };
    chunk(json!({"role": "assistant", "content": ""}), None);
    if let Some(message) = &reply.error {
        let kind = if message.contains("overloaded") {
            "server_error"
        } else {
            "invalid_request_error"
        };
        out.push(encode_event(
            None,
            &json!({"error": {"message": message, "type": kind}}).to_string(),
        ));
        return out;
    }
    if let Some(thinking) = reply.thinking.as_deref().filter(|t| !t.is_empty()) {
        chunk(json!({"reasoning_content": thinking}), None);
    }
    if let Some(text) = reply.text.as_deref().filter(|t| !t.is_empty()) {
        chunk(json!({"content": text}), None);
    }
    for (index, call) in reply.tool_calls.iter().enumerate() {
        chunk(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                   "function": {"name": call.name, "arguments": ""}}]}),
            None,
        );
        chunk(
            json!({"tool_calls": [{"index": index,
                                   "function": {"arguments": call.arguments()}}]}),
            None,
        );
    }
    let finish = match &reply.stop_reason {
        StopReason::EndTurn | StopReason::StopSequence => "stop",
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::Refusal => "content_filter",
        StopReason::Other(other) => other.as_str(),
    };
    chunk(json!({}), Some(finish));
    let usage = reply.usage;
    let prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
    let data = json!({"id": completion_id, "object": "chat.completion.chunk",
        "created": 1_700_000_000u64, "model": model, "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": usage.output_tokens,
                  "total_tokens": prompt + usage.output_tokens,
                  "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens}}});
    out.push(encode_event(None, &data.to_string()));
    out.push(encode_event(None, "[DONE]"));
    out
}

/// What script selection needs, read from an Anthropic Messages request body.
pub fn anthropic_query(body: &Value, agent: &str, raw_len: usize) -> ScriptQuery {
    let system = match body.get("system") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    };
    let last_user = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| content_text(&m["content"]))
        .unwrap_or_default();
    ScriptQuery {
        agent: agent.to_owned(),
        last_user,
        system,
        prompt_chars: raw_len,
    }
}

/// What script selection needs, read from a Chat Completions request body. The "last
/// user message" is the trailing run of `user` and `tool` messages, which is what one
/// provider-neutral user message becomes on this wire.
pub fn openai_query(body: &Value, agent: &str, raw_len: usize) -> ScriptQuery {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let system = messages
        .iter()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .map(|m| content_text(&m["content"]))
        .collect::<Vec<_>>()
        .join("\n\n");
    let tail: Vec<&Value> = messages
        .iter()
        .rev()
        .take_while(|m| m["role"] == "user" || m["role"] == "tool")
        .collect();
    let last_user = tail
        .iter()
        .rev()
        .map(|m| content_text(&m["content"]))
        .collect::<Vec<_>>()
        .join("\n");
    ScriptQuery {
        agent: agent.to_owned(),
        last_user,
        system,
        prompt_chars: raw_len,
    }
}

/// Text of a message `content`: a string, or blocks with `text` / tool result
/// `content`.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b.get("text").and_then(Value::as_str) {
                Some(text) => text.to_owned(),
                None => content_text(b.get("content").unwrap_or(&Value::Null)),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
