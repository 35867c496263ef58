//! Anthropic Messages SSE → normalized events.
//!
//! Anthropic streams hierarchical blocks: `message_start`, then for each content block
//! `content_block_start`, deltas and `content_block_stop`, then `message_delta` (stop
//! reason, cumulative usage) and `message_stop`. Blocks are keyed by `index`; a tool
//! call's input arrives as `input_json_delta` fragments and is parsed at its stop;
//! input that does not parse (e.g. cut off at `max_tokens`) ends the call as
//! `ToolCallInvalid` rather than failing the response.
//! Unknown event and block types are ignored, as the API's versioning policy asks.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use crate::sse::SseEvent;
use crate::tool_input::parse_tool_input;
use crate::transport::{WireError, WireParser};
use crate::types::{StopReason, StreamEvent, Usage};

#[derive(Debug)]
enum Block {
    Text,
    Thinking,
    Tool {
        id: String,
        name: String,
        json: String,
        initial: Value,
    },
    Other,
}

/// Parser state for one Anthropic response.
#[derive(Debug, Default)]
pub(crate) struct AnthropicParser {
    blocks: HashMap<u64, Block>,
    usage: Usage,
    stop_reason: Option<StopReason>,
    started: bool,
    saw_tool: bool,
    done: bool,
}

impl WireParser for AnthropicParser {
    fn event(&mut self, sse: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<(), WireError> {
        let data: Value = serde_json::from_str(&sse.data).map_err(|e| {
            WireError::Protocol(format!(
                "event `{}` is not JSON ({e}): {}",
                sse.event, sse.data
            ))
        })?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(sse.event.as_str());
        match kind {
            "message_start" => {
                self.started = true;
                if let Some(usage) = data.pointer("/message/usage") {
                    read_usage(usage, &mut self.usage);
                }
            }
            "content_block_start" => self.block_start(&data, out)?,
            "content_block_delta" => self.block_delta(&data, out)?,
            "content_block_stop" => self.block_stop(&data, out)?,
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(stop_reason(reason));
                }
                if let Some(usage) = data.get("usage") {
                    read_usage(usage, &mut self.usage);
                }
            }
            "message_stop" => {
                if let Some(index) = self.blocks.iter().find_map(|(i, b)| match b {
                    Block::Tool { .. } => Some(*i),
                    _ => None,
                }) {
                    return Err(WireError::Protocol(format!(
                        "message_stop arrived while tool block {index} was still open"
                    )));
                }
                let stop_reason = self.stop_reason.take().unwrap_or(if self.saw_tool {
                    StopReason::ToolUse
                } else {
                    StopReason::EndTurn
                });
                out.push_back(StreamEvent::MessageStop {
                    stop_reason,
                    usage: self.usage,
                });
                self.done = true;
            }
            "error" => {
                let kind = data
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                let message = data
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                return Err(WireError::Remote {
                    message: format!("{kind}: {message}"),
                    retryable: matches!(kind, "overloaded_error" | "api_error"),
                });
            }
            // `ping` and event types added after this was written.
            _ => {}
        }
        Ok(())
    }

    fn end(&mut self, _out: &mut VecDeque<StreamEvent>) -> Result<(), WireError> {
        if self.done {
            return Ok(());
        }
        Err(WireError::Truncated(if self.started {
            "the connection closed before message_stop".to_owned()
        } else {
            "the response body was empty".to_owned()
        }))
    }

    fn done(&self) -> bool {
        self.done
    }
}

impl AnthropicParser {
    fn block_start(
        &mut self,
        data: &Value,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), WireError> {
        let index = index_of(data)?;
        let block = data.get("content_block").unwrap_or(&Value::Null);
        let text_field = |name: &str| {
            block
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let state = match block.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => {
                let text = text_field("text");
                if !text.is_empty() {
                    out.push_back(StreamEvent::TextDelta { text });
                }
                Block::Text
            }
            "thinking" => {
                let text = text_field("thinking");
                if !text.is_empty() {
                    out.push_back(StreamEvent::ThinkingDelta { text });
                }
                Block::Thinking
            }
            "redacted_thinking" => {
                out.push_back(StreamEvent::RedactedThinking {
                    data: text_field("data"),
                });
                Block::Other
            }
            "tool_use" => {
                let id = text_field("id");
                let name = text_field("name");
                if id.is_empty() || name.is_empty() {
                    return Err(WireError::Protocol(format!(
                        "tool_use block {index} has no id or name"
                    )));
                }
                self.saw_tool = true;
                out.push_back(StreamEvent::ToolCallStart {
                    id: id.clone(),
                    name: name.clone(),
                });
                Block::Tool {
                    id,
                    name,
                    json: String::new(),
                    initial: block.get("input").cloned().unwrap_or(Value::Null),
                }
            }
            _ => Block::Other,
        };
        self.blocks.insert(index, state);
        Ok(())
    }

    fn block_delta(
        &mut self,
        data: &Value,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), WireError> {
        let index = index_of(data)?;
        let delta = data.get("delta").unwrap_or(&Value::Null);
        let field = |name: &str| delta.get(name).and_then(Value::as_str).unwrap_or("");
        let Some(block) = self.blocks.get_mut(&index) else {
            return Err(WireError::Protocol(format!(
                "content_block_delta for block {index} that never started"
            )));
        };
        match (
            delta.get("type").and_then(Value::as_str).unwrap_or(""),
            block,
        ) {
            ("text_delta", _) => {
                let text = field("text");
                if !text.is_empty() {
                    out.push_back(StreamEvent::TextDelta {
                        text: text.to_owned(),
                    });
                }
            }
            ("thinking_delta", _) => {
                let text = field("thinking");
                if !text.is_empty() {
                    out.push_back(StreamEvent::ThinkingDelta {
                        text: text.to_owned(),
                    });
                }
            }
            ("signature_delta", _) => out.push_back(StreamEvent::ThinkingSignature {
                signature: field("signature").to_owned(),
            }),
            ("input_json_delta", Block::Tool { id, json, .. }) => {
                let partial = field("partial_json");
                if !partial.is_empty() {
                    json.push_str(partial);
                    out.push_back(StreamEvent::ToolInputDelta {
                        id: id.clone(),
                        partial_json: partial.to_owned(),
                    });
                }
            }
            // citations_delta and future delta types carry nothing we model.
            _ => {}
        }
        Ok(())
    }

    fn block_stop(
        &mut self,
        data: &Value,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), WireError> {
        let index = index_of(data)?;
        if let Some(Block::Tool {
            id,
            name,
            json,
            initial,
        }) = self.blocks.remove(&index)
        {
            if json.trim().is_empty() {
                let input = match initial {
                    Value::Object(_) => initial,
                    _ => Value::Object(Default::default()),
                };
                out.push_back(StreamEvent::ToolCallEnd { id, name, input });
            } else {
                // Broken arguments are the model's mistake, not a broken stream: the
                // call ends as invalid and the response goes on.
                out.push_back(match parse_tool_input(&json) {
                    Ok(input) => StreamEvent::ToolCallEnd { id, name, input },
                    Err(error) => StreamEvent::ToolCallInvalid { id, name, error },
                });
            }
        }
        Ok(())
    }
}

fn index_of(data: &Value) -> Result<u64, WireError> {
    data.get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| WireError::Protocol(format!("content block event without index: {data}")))
}

/// Reads Anthropic usage fields present in `v` (absent ones keep their value: the
/// counts in `message_delta` are cumulative and may omit the input side).
pub(crate) fn read_usage(v: &Value, usage: &mut Usage) {
    let set = |key: &str, slot: &mut u64| {
        if let Some(n) = v.get(key).and_then(Value::as_u64) {
            *slot = n;
        }
    };
    set("input_tokens", &mut usage.input_tokens);
    set("output_tokens", &mut usage.output_tokens);
    set("cache_read_input_tokens", &mut usage.cache_read_tokens);
    set("cache_creation_input_tokens", &mut usage.cache_write_tokens);
}

/// Maps an Anthropic `stop_reason`.
pub(crate) fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        other => StopReason::Other(other.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sse::SseDecoder;

    fn parse(wire: &str) -> Result<Vec<StreamEvent>, WireError> {
        let mut events = Vec::new();
        SseDecoder::new().push(wire.as_bytes(), &mut events);
        let mut parser = AnthropicParser::default();
        let mut out = VecDeque::new();
        for event in events {
            parser.event(event, &mut out)?;
        }
        parser.end(&mut out)?;
        Ok(out.into_iter().collect())
    }

    /// The tool-use example from Anthropic's "Streaming Messages" documentation,
    /// shortened (fewer text deltas), with its exact event shapes.
    const DOC_TOOL_USE: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-opus-4-1-20250805","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", let's check:"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisco, CA\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;

    #[test]
    fn documented_tool_use_stream() {
        let id = "toolu_01T1x1fJ34qAmk2tNTrN7Up6".to_owned();
        assert_eq!(
            parse(DOC_TOOL_USE).unwrap(),
            vec![
                StreamEvent::TextDelta {
                    text: "Okay".into()
                },
                StreamEvent::TextDelta {
                    text: ", let's check:".into()
                },
                StreamEvent::ToolCallStart {
                    id: id.clone(),
                    name: "get_weather".into()
                },
                StreamEvent::ToolInputDelta {
                    id: id.clone(),
                    partial_json: "{\"location\":".into()
                },
                StreamEvent::ToolInputDelta {
                    id: id.clone(),
                    partial_json: " \"San Francisco, CA\"}".into()
                },
                StreamEvent::ToolCallEnd {
                    id,
                    name: "get_weather".into(),
                    input: json!({"location": "San Francisco, CA"})
                },
                StreamEvent::MessageStop {
                    stop_reason: StopReason::ToolUse,
                    usage: Usage {
                        input_tokens: 472,
                        output_tokens: 89,
                        ..Usage::default()
                    }
                },
            ]
        );
    }

    #[test]
    fn thinking_with_signature_and_redacted() {
        let wire = r#"event: message_start
data: {"type": "message_start", "message": {"id": "msg_01", "type": "message", "role": "assistant", "content": [], "model": "m", "stop_reason": null, "stop_sequence": null}}

event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "27 * 453"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: content_block_start
data: {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "ENCRYPTED"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 1}

event: message_delta
data: {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5, "cache_read_input_tokens": 7}}

event: message_stop
data: {"type": "message_stop"}

"#;
        let events = parse(wire).unwrap();
        assert_eq!(
            events[..3],
            [
                StreamEvent::ThinkingDelta {
                    text: "27 * 453".into()
                },
                StreamEvent::ThinkingSignature {
                    signature: "EqQBCgIYAhIM".into()
                },
                StreamEvent::RedactedThinking {
                    data: "ENCRYPTED".into()
                },
            ]
        );
        assert_eq!(
            events[3],
            StreamEvent::MessageStop {
                stop_reason: StopReason::EndTurn,
                usage: Usage {
                    output_tokens: 5,
                    cache_read_tokens: 7,
                    ..Usage::default()
                }
            }
        );
    }

    #[test]
    fn tool_input_cut_at_max_tokens_is_an_invalid_call_not_an_error() {
        let wire = DOC_TOOL_USE
            .replace(" \\\"San Francisco, CA\\\"}", " \\\"San Fran")
            .replace(
                "\"stop_reason\":\"tool_use\"",
                "\"stop_reason\":\"max_tokens\"",
            );
        let events = parse(&wire).unwrap();
        let n = events.len();
        match &events[n - 2] {
            StreamEvent::ToolCallInvalid { id, name, error } => {
                assert_eq!(id, "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
                assert_eq!(name, "get_weather");
                assert!(error.contains("EOF"), "{error}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &events[n - 1],
            StreamEvent::MessageStop {
                stop_reason: StopReason::MaxTokens,
                ..
            }
        ));
    }

    #[test]
    fn error_event_and_truncation() {
        let overloaded = "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";
        match parse(overloaded) {
            Err(WireError::Remote { message, retryable }) => {
                assert!(retryable);
                assert_eq!(message, "overloaded_error: Overloaded");
            }
            other => panic!("{other:?}"),
        }
        let cut = &DOC_TOOL_USE[..DOC_TOOL_USE.find("event: message_delta").unwrap()];
        assert!(matches!(parse(cut), Err(WireError::Truncated(_))));
        assert!(matches!(parse(""), Err(WireError::Truncated(_))));
    }
}
