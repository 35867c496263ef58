//! Draining a normalized event stream into a complete assistant message.
//!
//! The agent loop wants both: live events for the UI and the finished [`Response`] for
//! the conversation. [`collect`] gives both in one pass and is the single place where the
//! "no truncated answers" rule is enforced for callers: a stream that errors or ends
//! without `MessageStop` yields an error, never a partial message.

use futures_util::StreamExt;
use serde_json::Value;

use crate::error::{LlmError, Result};
use crate::provider::EventStream;
use crate::types::{ContentBlock, InvalidToolCall, Message, Response, Role, StreamEvent};

/// Drains `stream` into a complete assistant [`Response`], calling `on_event` for each
/// event as it arrives (the loop forwards text deltas to the UI from there).
///
/// Content blocks keep the order the model produced them in: text, thinking (with its
/// signature), redacted thinking and tool calls (placed where each call started). An
/// error mid-stream, or a stream that ends before `MessageStop`, is an error.
pub async fn collect(
    mut stream: EventStream,
    mut on_event: impl FnMut(&StreamEvent),
) -> Result<Response> {
    let mut builder = MessageBuilder::default();
    while let Some(item) = stream.next().await {
        let event = item?;
        on_event(&event);
        if let Some(response) = builder.apply(event)? {
            return Ok(response);
        }
    }
    Err(LlmError::Truncated {
        provider: "model".to_owned(),
        message: "the stream ended without a stop event".to_owned(),
    })
}

/// Assembles a [`Message`] from events. Public so that callers that consume events
/// themselves (e.g. a UI that also wants the final message) can reuse it.
#[derive(Debug, Default)]
pub struct MessageBuilder {
    content: Vec<ContentBlock>,
    /// Index into `content` of the block text/thinking deltas currently extend.
    open: Option<usize>,
    /// Tool calls started but not ended: id → index of their placeholder block.
    pending_tools: Vec<(String, usize)>,
    invalid_tools: Vec<InvalidToolCall>,
}

impl MessageBuilder {
    /// Applies one event. Returns the finished response on `MessageStop`.
    pub fn apply(&mut self, event: StreamEvent) -> Result<Option<Response>> {
        match event {
            StreamEvent::TextDelta { text } => match self.open_block() {
                Some(ContentBlock::Text { text: acc }) => acc.push_str(&text),
                _ => self.push_open(ContentBlock::Text { text }),
            },
            StreamEvent::ThinkingDelta { text } => match self.open_block() {
                Some(ContentBlock::Thinking {
                    thinking,
                    signature: None,
                }) => thinking.push_str(&text),
                _ => self.push_open(ContentBlock::Thinking {
                    thinking: text,
                    signature: None,
                }),
            },
            StreamEvent::ThinkingSignature { signature } => {
                match self.open_block() {
                    Some(ContentBlock::Thinking { signature: sig, .. }) => {
                        *sig = Some(signature);
                    }
                    // A signature without visible thinking (e.g. omitted thinking text).
                    _ => self.content.push(ContentBlock::Thinking {
                        thinking: String::new(),
                        signature: Some(signature),
                    }),
                }
                self.open = None;
            }
            StreamEvent::RedactedThinking { data } => {
                self.content.push(ContentBlock::RedactedThinking { data });
                self.open = None;
            }
            StreamEvent::ToolCallStart { id, name } => {
                self.pending_tools.push((id.clone(), self.content.len()));
                self.content.push(ContentBlock::ToolUse {
                    id,
                    name,
                    input: Value::Null,
                });
                self.open = None;
            }
            StreamEvent::ToolInputDelta { .. } => {}
            StreamEvent::ToolCallEnd { id, name, input } => {
                let at = self.end_tool(&id, &name)?;
                self.content[at] = ContentBlock::ToolUse { id, name, input };
            }
            StreamEvent::ToolCallInvalid { id, name, error } => {
                let at = self.end_tool(&id, &name)?;
                self.content[at] = ContentBlock::ToolUse {
                    id: id.clone(),
                    name: name.clone(),
                    input: Value::Object(Default::default()),
                };
                self.invalid_tools.push(InvalidToolCall { id, name, error });
            }
            StreamEvent::MessageStop { stop_reason, usage } => {
                if let Some((id, _)) = self.pending_tools.first() {
                    return Err(protocol(format!(
                        "tool call {id} never ended before the message stopped"
                    )));
                }
                let content = std::mem::take(&mut self.content);
                return Ok(Some(Response {
                    message: Message {
                        role: Role::Assistant,
                        content,
                    },
                    stop_reason,
                    usage,
                    invalid_tool_calls: std::mem::take(&mut self.invalid_tools),
                }));
            }
        }
        Ok(None)
    }

    /// Marks the pending call `id` ended; returns the index of its block.
    fn end_tool(&mut self, id: &str, name: &str) -> Result<usize> {
        let Some(pos) = self.pending_tools.iter().position(|(p, _)| p == id) else {
            return Err(protocol(format!(
                "tool call {id} ({name}) ended without starting"
            )));
        };
        Ok(self.pending_tools.remove(pos).1)
    }

    fn open_block(&mut self) -> Option<&mut ContentBlock> {
        self.open.and_then(|i| self.content.get_mut(i))
    }

    fn push_open(&mut self, block: ContentBlock) {
        self.open = Some(self.content.len());
        self.content.push(block);
    }
}

fn protocol(message: String) -> LlmError {
    LlmError::Provider {
        provider: "the model".to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use futures_util::stream;
    use serde_json::json;

    use super::*;
    use crate::types::{StopReason, Usage};

    fn events(list: Vec<StreamEvent>) -> EventStream {
        Box::pin(stream::iter(list.into_iter().map(Ok)))
    }

    #[tokio::test]
    async fn builds_blocks_in_order() {
        let usage = Usage {
            input_tokens: 3,
            output_tokens: 4,
            ..Usage::default()
        };
        let list = vec![
            StreamEvent::ThinkingDelta { text: "hm".into() },
            StreamEvent::ThinkingDelta { text: "m".into() },
            StreamEvent::ThinkingSignature {
                signature: "sig".into(),
            },
            StreamEvent::TextDelta { text: "a".into() },
            StreamEvent::TextDelta { text: "b".into() },
            StreamEvent::ToolCallStart {
                id: "t1".into(),
                name: "A".into(),
            },
            StreamEvent::ToolCallStart {
                id: "t2".into(),
                name: "B".into(),
            },
            StreamEvent::ToolCallEnd {
                id: "t2".into(),
                name: "B".into(),
                input: json!({"b": 2}),
            },
            StreamEvent::ToolCallEnd {
                id: "t1".into(),
                name: "A".into(),
                input: json!({}),
            },
            StreamEvent::MessageStop {
                stop_reason: StopReason::ToolUse,
                usage,
            },
        ];
        let mut seen = 0;
        let response = collect(events(list), |_| seen += 1).await.unwrap();
        assert_eq!(seen, 10);
        assert_eq!(response.usage, usage);
        assert_eq!(
            response.message.content,
            vec![
                ContentBlock::Thinking {
                    thinking: "hmm".into(),
                    signature: Some("sig".into())
                },
                ContentBlock::Text { text: "ab".into() },
                ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "A".into(),
                    input: json!({})
                },
                ContentBlock::ToolUse {
                    id: "t2".into(),
                    name: "B".into(),
                    input: json!({"b": 2})
                },
            ]
        );
    }

    #[tokio::test]
    async fn stream_without_stop_is_an_error() {
        let list = vec![StreamEvent::TextDelta {
            text: "half an ans".into(),
        }];
        let err = collect(events(list), |_| {}).await.unwrap_err();
        assert!(matches!(err, LlmError::Truncated { .. }), "{err}");
    }

    #[tokio::test]
    async fn error_mid_stream_is_an_error() {
        let list: Vec<Result<StreamEvent>> = vec![
            Ok(StreamEvent::TextDelta { text: "x".into() }),
            Err(LlmError::Provider {
                provider: "p".into(),
                message: "boom".into(),
            }),
        ];
        let err = collect(Box::pin(stream::iter(list)), |_| {})
            .await
            .unwrap_err();
        assert!(err.to_string().contains("boom"));
    }

    #[tokio::test]
    async fn invalid_tool_input_keeps_the_call_with_an_empty_input() {
        let list = vec![
            StreamEvent::ToolCallStart {
                id: "t".into(),
                name: "A".into(),
            },
            StreamEvent::ToolCallInvalid {
                id: "t".into(),
                name: "A".into(),
                error: "not valid JSON".into(),
            },
            StreamEvent::MessageStop {
                stop_reason: StopReason::MaxTokens,
                usage: Usage::default(),
            },
        ];
        let response = collect(events(list), |_| {}).await.unwrap();
        assert_eq!(
            response.message.content,
            vec![ContentBlock::ToolUse {
                id: "t".into(),
                name: "A".into(),
                input: json!({})
            }]
        );
        assert_eq!(
            response.invalid_tool_calls,
            vec![InvalidToolCall {
                id: "t".into(),
                name: "A".into(),
                error: "not valid JSON".into()
            }]
        );
    }

    #[tokio::test]
    async fn unfinished_tool_call_is_an_error() {
        let list = vec![
            StreamEvent::ToolCallStart {
                id: "t".into(),
                name: "A".into(),
            },
            StreamEvent::MessageStop {
                stop_reason: StopReason::ToolUse,
                usage: Usage::default(),
            },
        ];
        assert!(collect(events(list), |_| {}).await.is_err());
    }
}
