//! OpenAI-compatible Chat Completions SSE → normalized events.
//!
//! Chat Completions streams flat `chat.completion.chunk`s. Several tool calls' argument
//! fragments may arrive interleaved, keyed only by `index` (later fragments carry no
//! id), so each index gets its own accumulator. Because the protocol never says when a
//! call is complete, a call is closed as soon as that is certain: when the stream moves
//! on to another index and the call's arguments already form a complete JSON object (a
//! complete object cannot be extended into a longer valid one), otherwise at
//! `finish_reason`. For the usual sequential servers this yields exactly the
//! start-deltas-end grouping of Anthropic streams; for interleaving servers calls
//! overlap, which the event contract allows.
//!
//! Usage arrives in a final chunk with empty (or null) `choices` when
//! `stream_options.include_usage` is set; `[DONE]` ends the stream. Reasoning deltas
//! (`reasoning_content` from DeepSeek, vLLM, llama.cpp; `reasoning` from Ollama and
//! OpenRouter) become thinking deltas.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::sse::SseEvent;
use crate::tool_input::parse_tool_input;
use crate::transport::{WireError, WireParser, error_message};
use crate::types::{StopReason, StreamEvent, Usage};

#[derive(Debug, Default)]
struct ToolCall {
    id: String,
    name: String,
    args: String,
    started: bool,
    ended: bool,
}

/// Parser state for one Chat Completions response.
#[derive(Debug, Default)]
pub(crate) struct OpenAiParser {
    tools: BTreeMap<u64, ToolCall>,
    /// The index the last tool fragment was for.
    current: Option<u64>,
    finish: Option<String>,
    usage: Usage,
    started: bool,
    done: bool,
}

impl WireParser for OpenAiParser {
    fn event(&mut self, sse: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<(), WireError> {
        let data = sse.data.trim();
        if data == "[DONE]" {
            return self.finish(out);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| WireError::Protocol(format!("chunk is not JSON ({e}): {data}")))?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = error_message(&chunk.to_string());
            let text = format!("{message} {error}").to_lowercase();
            return Err(WireError::Remote {
                retryable: text.contains("overloaded") || text.contains("server_error"),
                message,
            });
        }
        self.started = true;
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = read_usage(usage);
        }
        let choice = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|choices| {
                choices
                    .iter()
                    .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            });
        let Some(choice) = choice else {
            return Ok(());
        };
        if let Some(delta) = choice.get("delta") {
            for key in ["reasoning_content", "reasoning"] {
                if let Some(text) = delta.get(key).and_then(Value::as_str) {
                    if !text.is_empty() {
                        out.push_back(StreamEvent::ThinkingDelta {
                            text: text.to_owned(),
                        });
                    }
                    break;
                }
            }
            if let Some(text) = delta.get("content").and_then(Value::as_str)
                && !text.is_empty()
            {
                out.push_back(StreamEvent::TextDelta {
                    text: text.to_owned(),
                });
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for (position, call) in calls.iter().enumerate() {
                    self.tool_fragment(position as u64, call, out)?;
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(reason.to_owned());
            self.close_all(out)?;
        }
        Ok(())
    }

    fn end(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<(), WireError> {
        if self.done {
            return Ok(());
        }
        // Some servers end the body without `[DONE]`; the message is complete if its
        // finish_reason arrived.
        if self.finish.is_some() {
            return self.finish(out);
        }
        Err(WireError::Truncated(if self.started {
            "the connection closed before finish_reason".to_owned()
        } else {
            "the response body was empty".to_owned()
        }))
    }

    fn done(&self) -> bool {
        self.done
    }
}

impl OpenAiParser {
    fn tool_fragment(
        &mut self,
        position: u64,
        call: &Value,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), WireError> {
        let index = call
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position);
        let id = call.get("id").and_then(Value::as_str).unwrap_or("");
        let name = call
            .pointer("/function/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        // Arguments are a JSON string; some local servers send the object itself.
        let arguments = match call.pointer("/function/arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(object @ Value::Object(_)) => object.to_string(),
            _ => String::new(),
        };
        let args = arguments.as_str();

        if let Some(previous) = self.current.filter(|&p| p != index) {
            self.close_if_complete(previous, out)?;
        }
        self.current = Some(index);

        let tool = self.tools.entry(index).or_default();
        if tool.ended {
            if args.trim().is_empty() && id.is_empty() && name.is_empty() {
                return Ok(());
            }
            return Err(WireError::Protocol(format!(
                "tool call {} continued after its arguments formed a complete JSON object",
                tool.id
            )));
        }
        if !id.is_empty() && tool.id.is_empty() {
            id.clone_into(&mut tool.id);
        }
        if !name.is_empty() && !tool.started {
            tool.name.push_str(name);
        }
        tool.args.push_str(args);
        if !tool.started && !tool.name.is_empty() {
            tool.started = true;
            if tool.id.is_empty() {
                tool.id = generated_id(index);
            }
            out.push_back(StreamEvent::ToolCallStart {
                id: tool.id.clone(),
                name: tool.name.clone(),
            });
            if !tool.args.is_empty() {
                out.push_back(StreamEvent::ToolInputDelta {
                    id: tool.id.clone(),
                    partial_json: tool.args.clone(),
                });
            }
        } else if tool.started && !args.is_empty() {
            out.push_back(StreamEvent::ToolInputDelta {
                id: tool.id.clone(),
                partial_json: args.to_owned(),
            });
        }
        Ok(())
    }

    /// Ends the call at `index` if its arguments are already a complete JSON object.
    fn close_if_complete(
        &mut self,
        index: u64,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), WireError> {
        let Some(tool) = self.tools.get_mut(&index) else {
            return Ok(());
        };
        if !tool.started || tool.ended {
            return Ok(());
        }
        if let Ok(input @ Value::Object(_)) = serde_json::from_str::<Value>(&tool.args) {
            tool.ended = true;
            out.push_back(StreamEvent::ToolCallEnd {
                id: tool.id.clone(),
                name: tool.name.clone(),
                input,
            });
        }
        Ok(())
    }

    /// Ends every open call, in index order.
    fn close_all(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<(), WireError> {
        for (index, tool) in &mut self.tools {
            if tool.ended {
                continue;
            }
            if !tool.started {
                return Err(WireError::Protocol(format!(
                    "tool call at index {index} never received a function name"
                )));
            }
            tool.ended = true;
            let (id, name) = (tool.id.clone(), tool.name.clone());
            // Broken arguments (e.g. cut off by `finish_reason: length`) are the
            // model's mistake, not a broken stream: the call ends as invalid.
            out.push_back(match parse_tool_input(&tool.args) {
                Ok(input) => StreamEvent::ToolCallEnd { id, name, input },
                Err(error) => StreamEvent::ToolCallInvalid { id, name, error },
            });
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<(), WireError> {
        let Some(reason) = self.finish.take() else {
            return Err(WireError::Truncated(
                "[DONE] arrived before any finish_reason".to_owned(),
            ));
        };
        self.close_all(out)?;
        let stop_reason = match reason.as_str() {
            "tool_calls" | "function_call" => StopReason::ToolUse,
            // Some servers (older Ollama) say "stop" even when they called tools.
            "stop" if !self.tools.is_empty() => StopReason::ToolUse,
            "stop" => StopReason::EndTurn,
            "length" => StopReason::MaxTokens,
            "content_filter" => StopReason::Refusal,
            other => StopReason::Other(other.to_owned()),
        };
        out.push_back(StreamEvent::MessageStop {
            stop_reason,
            usage: self.usage,
        });
        self.done = true;
        Ok(())
    }
}

/// Maps Chat Completions usage. Cached prompt tokens (`prompt_tokens_details.
/// cached_tokens`, or DeepSeek's `prompt_cache_hit_tokens`) become cache reads and are
/// subtracted from input, so `input + cache_read` is the prompt size as with Anthropic.
pub(crate) fn read_usage(v: &Value) -> Usage {
    let n = |ptr: &str| v.pointer(ptr).and_then(Value::as_u64);
    let prompt = n("/prompt_tokens").unwrap_or(0);
    let cached = n("/prompt_tokens_details/cached_tokens")
        .or_else(|| n("/prompt_cache_hit_tokens"))
        .unwrap_or(0)
        .min(prompt);
    Usage {
        input_tokens: prompt - cached,
        output_tokens: n("/completion_tokens").unwrap_or(0),
        cache_read_tokens: cached,
        cache_write_tokens: 0,
    }
}

/// An id for servers that send tool calls without one (some local servers do).
fn generated_id(index: u64) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "call_roo_{}_{index}",
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sse::SseDecoder;

    fn parse(wire: &str) -> Result<Vec<StreamEvent>, WireError> {
        let mut events = Vec::new();
        SseDecoder::new().push(wire.as_bytes(), &mut events);
        let mut parser = OpenAiParser::default();
        let mut out = VecDeque::new();
        for event in events {
            parser.event(event, &mut out)?;
            if parser.done() {
                break;
            }
        }
        parser.end(&mut out)?;
        Ok(out.into_iter().collect())
    }

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        let c = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4.1", "choices": [{"index": 0, "delta": delta,
            "finish_reason": finish}], "usage": null});
        format!("data: {c}\n\n")
    }

    fn tc(index: u64, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
        let mut f = json!({"arguments": args});
        if let Some(name) = name {
            f["name"] = json!(name);
        }
        let mut call = json!({"index": index, "function": f});
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        json!({"tool_calls": [call]})
    }

    #[test]
    fn interleaved_tool_calls_are_routed_by_index() {
        let wire = [
            chunk(json!({"role": "assistant", "content": null}), None),
            chunk(tc(0, Some("call_a"), Some("ReadFile"), ""), None),
            chunk(tc(1, Some("call_b"), Some("Grep"), ""), None),
            chunk(tc(0, None, None, "{\"path\":"), None),
            chunk(tc(1, None, None, "{\"pattern\":\"fn\"}"), None),
            chunk(tc(0, None, None, "\"src/lib.rs\"}"), None),
            chunk(json!({}), Some("tool_calls")),
            "data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,\"prompt_tokens_details\":{\"cached_tokens\":60}}}\n\n".to_owned(),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat();
        let events = parse(&wire).unwrap();
        assert_eq!(
            events,
            vec![
                StreamEvent::ToolCallStart {
                    id: "call_a".into(),
                    name: "ReadFile".into()
                },
                StreamEvent::ToolCallStart {
                    id: "call_b".into(),
                    name: "Grep".into()
                },
                StreamEvent::ToolInputDelta {
                    id: "call_a".into(),
                    partial_json: "{\"path\":".into()
                },
                StreamEvent::ToolInputDelta {
                    id: "call_b".into(),
                    partial_json: "{\"pattern\":\"fn\"}".into()
                },
                // Leaving index 1 with complete arguments closes it.
                StreamEvent::ToolCallEnd {
                    id: "call_b".into(),
                    name: "Grep".into(),
                    input: json!({"pattern": "fn"})
                },
                StreamEvent::ToolInputDelta {
                    id: "call_a".into(),
                    partial_json: "\"src/lib.rs\"}".into()
                },
                StreamEvent::ToolCallEnd {
                    id: "call_a".into(),
                    name: "ReadFile".into(),
                    input: json!({"path": "src/lib.rs"})
                },
                StreamEvent::MessageStop {
                    stop_reason: StopReason::ToolUse,
                    usage: Usage {
                        input_tokens: 40,
                        output_tokens: 20,
                        cache_read_tokens: 60,
                        cache_write_tokens: 0
                    }
                },
            ]
        );
    }

    #[test]
    fn text_reasoning_and_usage_with_null_choices() {
        let wire = [
            chunk(
                json!({"role": "assistant", "reasoning_content": "think"}),
                None,
            ),
            chunk(json!({"content": "Hel"}), None),
            chunk(json!({"content": "lo"}), None),
            chunk(json!({}), Some("stop")),
            "data: {\"choices\":null,\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n"
                .to_owned(),
        ]
        .concat();
        // No [DONE]: the body just ends after the usage chunk.
        let events = parse(&wire).unwrap();
        assert_eq!(
            events,
            vec![
                StreamEvent::ThinkingDelta {
                    text: "think".into()
                },
                StreamEvent::TextDelta { text: "Hel".into() },
                StreamEvent::TextDelta { text: "lo".into() },
                StreamEvent::MessageStop {
                    stop_reason: StopReason::EndTurn,
                    usage: Usage {
                        input_tokens: 5,
                        output_tokens: 2,
                        ..Usage::default()
                    }
                },
            ]
        );
    }

    #[test]
    fn truncation_and_errors() {
        let cut = chunk(json!({"content": "Hel"}), None);
        assert!(matches!(parse(&cut), Err(WireError::Truncated(_))));
        let error = "data: {\"error\":{\"message\":\"Provider returned error\",\"code\":502}}\n\n";
        assert!(matches!(parse(error), Err(WireError::Remote { .. })));
    }

    #[test]
    fn broken_or_cut_arguments_are_an_invalid_call_not_an_error() {
        let bad_args = [
            chunk(tc(0, Some("c"), Some("X"), "{not json"), None),
            chunk(json!({}), Some("tool_calls")),
        ]
        .concat();
        let events = parse(&bad_args).unwrap();
        assert!(
            matches!(&events[2], StreamEvent::ToolCallInvalid { id, error, .. }
                if id == "c" && error.contains("not valid JSON")),
            "{events:?}"
        );
        let cut = [
            chunk(tc(0, Some("c"), Some("X"), "{\"path\": \"a"), None),
            chunk(json!({}), Some("length")),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat();
        let events = parse(&cut).unwrap();
        assert!(
            matches!(&events[2], StreamEvent::ToolCallInvalid { error, .. } if error.contains("EOF")),
            "{events:?}"
        );
        assert!(matches!(
            events[3],
            StreamEvent::MessageStop {
                stop_reason: StopReason::MaxTokens,
                ..
            }
        ));
    }

    #[test]
    fn arguments_sent_as_an_object_are_taken_as_is() {
        let call = json!({"tool_calls": [{"index": 0, "id": "c", "type": "function",
            "function": {"name": "ReadFile", "arguments": {"path": "a.rs"}}}]});
        let wire = [chunk(call, None), chunk(json!({}), Some("tool_calls"))].concat();
        let events = parse(&wire).unwrap();
        assert!(
            matches!(&events[2], StreamEvent::ToolCallEnd { input, .. } if input == &json!({"path": "a.rs"})),
            "{events:?}"
        );
    }

    #[test]
    fn missing_ids_are_generated_and_empty_args_are_an_empty_object() {
        let wire = [
            chunk(tc(0, None, Some("Now"), ""), None),
            chunk(json!({}), Some("stop")),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat();
        let events = parse(&wire).unwrap();
        let StreamEvent::ToolCallEnd { id, input, .. } = &events[1] else {
            panic!("{events:?}");
        };
        assert!(id.starts_with("call_roo_"));
        assert_eq!(input, &json!({}));
        assert!(matches!(
            events[2],
            StreamEvent::MessageStop {
                stop_reason: StopReason::ToolUse,
                ..
            }
        ));
    }
}
