//! The scripted provider: replays assistant turns from a file, so every layer above
//! and the demo run deterministically without a key or a network.
//!
//! Turns are chosen per agent (`Request::agent`, falling back to the `"*"` script):
//! a not-yet-used turn whose `when` matches the request wins; otherwise the first
//! unused turn without a `when`. Each turn is used once. Cursors are per agent name and
//! optionally persisted (see [`cursor`]). The same selection and the same resolved
//! [`ScriptedReply`] feed the mock server, which encodes it in the real wire formats —
//! that is what makes "scripted provider and real protocols yield identical events"
//! testable.

pub mod cursor;
pub mod format;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, stream};
use serde_json::Value;

use crate::error::{LlmError, Result};
use crate::provider::{EventStream, Provider};
use crate::settings::LlmSettings;
use crate::tool_input::parse_tool_input;
use crate::types::{ContentBlock, Request, Role, StopReason, StreamEvent, Usage};

pub use cursor::{AgentCursor, Cursors};
pub use format::{Script, ScriptToolCall, ScriptTurn, UsageSpec, When};

/// What a script selection looks at in a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptQuery {
    /// Agent name; empty means `"*"`.
    pub agent: String,
    /// Text of the last user message (text blocks and tool results).
    pub last_user: String,
    /// The system prompt, joined.
    pub system: String,
    /// Size of the whole prompt in characters (for usage estimates).
    pub prompt_chars: usize,
}

impl ScriptQuery {
    /// The query for a provider-neutral request.
    pub fn from_request(request: &Request) -> Self {
        let last_user = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| {
                let mut text = String::new();
                for block in &m.content {
                    match block {
                        ContentBlock::Text { text: t } => text.push_str(t),
                        ContentBlock::ToolResult { content, .. } => text.push_str(content),
                        _ => {}
                    }
                    text.push('\n');
                }
                text
            })
            .unwrap_or_default();
        let prompt_chars = request.system.iter().map(String::len).sum::<usize>()
            + request
                .messages
                .iter()
                .flat_map(|m| &m.content)
                .map(block_chars)
                .sum::<usize>()
            + request
                .tools
                .iter()
                .map(|t| t.name.len() + t.description.len() + t.input_schema.to_string().len())
                .sum::<usize>();
        Self {
            agent: request.agent.clone(),
            last_user,
            system: request.system.join("\n\n"),
            prompt_chars,
        }
    }
}

fn block_chars(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text { text } => text.len(),
        ContentBlock::Thinking { thinking, .. } => thinking.len(),
        ContentBlock::RedactedThinking { data } => data.len(),
        ContentBlock::ToolUse { name, input, .. } => name.len() + input.to_string().len(),
        ContentBlock::ToolResult { content, .. } => content.len(),
    }
}

/// A tool call of a [`ScriptedReply`].
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedCall {
    pub id: String,
    pub name: String,
    pub input: Value,
    /// Argument text sent verbatim instead of `input` (may be broken JSON).
    pub raw_arguments: Option<String>,
}

impl ScriptedCall {
    /// A well-formed call.
    pub fn new(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            input,
            raw_arguments: None,
        }
    }

    /// The argument text as it goes on the wire.
    pub fn arguments(&self) -> String {
        self.raw_arguments
            .clone()
            .unwrap_or_else(|| self.input.to_string())
    }
}

/// A selected turn with everything decided: ids, stop reason, usage.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedReply {
    pub thinking: Option<String>,
    pub signature: Option<String>,
    pub text: Option<String>,
    pub tool_calls: Vec<ScriptedCall>,
    pub stop_reason: StopReason,
    pub usage: Usage,
    /// Whether `usage` is the estimate from sizes (the turn gives none), which the
    /// mock server may split into prompt-cache reads and writes.
    pub estimated_usage: bool,
    pub delay: Duration,
    /// The turn fails with this provider error.
    pub error: Option<String>,
    /// The HTTP status of that error, if the script gave one.
    pub error_status: Option<u16>,
}

impl ScriptedReply {
    /// The normalized events of this reply (what every provider yields for it). Tool
    /// input arrives as one delta holding the whole JSON text.
    pub fn events(&self) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        if let Some(thinking) = self.thinking.as_ref().filter(|t| !t.is_empty()) {
            events.push(StreamEvent::ThinkingDelta {
                text: thinking.clone(),
            });
        }
        if let Some(signature) = &self.signature {
            events.push(StreamEvent::ThinkingSignature {
                signature: signature.clone(),
            });
        }
        if let Some(text) = self.text.as_ref().filter(|t| !t.is_empty()) {
            events.push(StreamEvent::TextDelta { text: text.clone() });
        }
        for call in &self.tool_calls {
            let (id, name) = (call.id.clone(), call.name.clone());
            events.push(StreamEvent::ToolCallStart {
                id: id.clone(),
                name: name.clone(),
            });
            let arguments = call.arguments();
            events.push(StreamEvent::ToolInputDelta {
                id: id.clone(),
                partial_json: arguments.clone(),
            });
            // Raw arguments go through the same parse as the wire parsers' ones.
            events.push(match &call.raw_arguments {
                None => StreamEvent::ToolCallEnd {
                    id,
                    name,
                    input: call.input.clone(),
                },
                Some(_) => match parse_tool_input(&arguments) {
                    Ok(input) => StreamEvent::ToolCallEnd { id, name, input },
                    Err(error) => StreamEvent::ToolCallInvalid { id, name, error },
                },
            });
        }
        events.push(StreamEvent::MessageStop {
            stop_reason: self.stop_reason.clone(),
            usage: self.usage,
        });
        events
    }
}

/// A loaded script plus its cursors: selection shared by the provider and the mock
/// server.
#[derive(Debug)]
pub struct ScriptPlayer {
    script: Script,
    name: String,
    cursors: Cursors,
}

impl ScriptPlayer {
    /// A player for `script`; `name` (usually the file path) appears in errors.
    pub fn new(script: Script, name: impl Into<String>, cursors: Cursors) -> Self {
        Self {
            script,
            name: name.into(),
            cursors,
        }
    }

    /// Loads a script file, with cursors persisted in `state` if given.
    pub fn load(path: &Path, state: Option<PathBuf>) -> Result<Self> {
        let script = Script::load(path)?;
        let cursors = match state {
            Some(state) => Cursors::persisted(state),
            None => Cursors::in_memory(),
        };
        Ok(Self::new(script, path.display().to_string(), cursors))
    }

    /// Whether selecting touches the disk (run it on a blocking thread then).
    pub fn is_persisted(&self) -> bool {
        self.cursors.is_persisted()
    }

    /// Chooses, marks used and resolves the next turn for `query`. Blocking when the
    /// cursors are persisted.
    pub fn next_reply(&self, query: &ScriptQuery) -> Result<ScriptedReply> {
        let agent = if query.agent.is_empty() {
            "*"
        } else {
            query.agent.as_str()
        };
        let turns = self
            .script
            .agents
            .get(agent)
            .or_else(|| self.script.agents.get("*"))
            .ok_or_else(|| {
                LlmError::Script(format!(
                    "answer agent `{agent}` from script {}: it has no turns for `{agent}` and no \"*\" default",
                    self.name
                ))
            })?;
        self.cursors.update(agent, |cursor| {
            // One pass: the first unused matching `when` turn wins; else the first
            // unused plain turn.
            let mut matching = None;
            let mut plain = None;
            for (i, turn) in turns.iter().enumerate() {
                match &turn.when {
                    Some(when) if matches(when, query) && !cursor.used.contains(&i) => {
                        matching = Some(i);
                        break;
                    }
                    None if plain.is_none() && !cursor.used.contains(&i) => plain = Some(i),
                    _ => {}
                }
            }
            let index = matching
                .or(plain)
                .ok_or_else(|| {
                    LlmError::Script(format!(
                        "answer agent `{agent}`: the script for agent {agent} has no turn left after {} (script {})",
                        cursor.used.len(),
                        self.name
                    ))
                })?;
            cursor.used.insert(index);
            Ok(resolve(&turns[index], query, &mut cursor.tool_ids))
        })
    }
}

fn matches(when: &When, query: &ScriptQuery) -> bool {
    when.last_user_contains
        .as_ref()
        .is_none_or(|s| query.last_user.contains(s.as_str()))
        && when
            .system_contains
            .as_ref()
            .is_none_or(|s| query.system.contains(s.as_str()))
}

fn resolve(turn: &ScriptTurn, query: &ScriptQuery, tool_ids: &mut u64) -> ScriptedReply {
    let tool_calls: Vec<ScriptedCall> = turn
        .tool_calls
        .iter()
        .map(|call| {
            let id = call.id.clone().unwrap_or_else(|| {
                *tool_ids += 1;
                format!("toolu_script_{tool_ids}")
            });
            ScriptedCall {
                id,
                name: call.name.clone(),
                input: call.input.clone(),
                raw_arguments: call.raw_arguments.clone(),
            }
        })
        .collect();
    let stop_reason = turn
        .stop_reason
        .as_deref()
        .and_then(format::parse_stop_reason)
        .unwrap_or(if tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        });
    let usage = turn.usage.map(Usage::from).unwrap_or_else(|| {
        let output_chars = turn.text.as_ref().map_or(0, String::len)
            + turn.thinking.as_ref().map_or(0, String::len)
            + tool_calls
                .iter()
                .map(|call| call.name.len() + call.arguments().len())
                .sum::<usize>();
        Usage {
            input_tokens: estimate_tokens(query.prompt_chars),
            output_tokens: estimate_tokens(output_chars),
            ..Usage::default()
        }
    });
    ScriptedReply {
        thinking: turn.thinking.clone(),
        signature: turn.signature.clone(),
        text: turn.text.clone(),
        tool_calls,
        stop_reason,
        usage,
        estimated_usage: turn.usage.is_none(),
        delay: Duration::from_millis(turn.delay_ms),
        error: turn.error.clone(),
        error_status: turn.error_status,
    }
}

/// ~4 characters per token, at least 1.
fn estimate_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4).max(1)
}

/// The scripted [`Provider`] (`--provider script --script FILE`).
pub struct ScriptProvider {
    player: Arc<ScriptPlayer>,
    model: String,
    context_window: u64,
}

impl ScriptProvider {
    /// A provider replaying `player`, reporting `model` and `context_window`.
    pub fn new(player: ScriptPlayer, model: impl Into<String>, context_window: u64) -> Self {
        Self {
            player: Arc::new(player),
            model: model.into(),
            context_window,
        }
    }

    /// The provider `settings` describe (script path, state file, model, window).
    pub fn from_settings(settings: &LlmSettings) -> Result<Self> {
        let path = settings.script.as_deref().ok_or_else(|| {
            LlmError::Config(
                "use the script provider: no script file given; pass --script FILE or set ROO_SCRIPT"
                    .to_owned(),
            )
        })?;
        let player = ScriptPlayer::load(path, settings.script_state.clone())?;
        Ok(Self::new(
            player,
            settings.model.clone(),
            settings.context_window.unwrap_or(200_000),
        ))
    }
}

impl Provider for ScriptProvider {
    fn name(&self) -> &str {
        "script"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn context_window(&self) -> u64 {
        self.context_window
    }

    fn stream(&self, request: Request) -> EventStream {
        let player = self.player.clone();
        let query = ScriptQuery::from_request(&request);
        let reply = async move {
            let reply = if player.is_persisted() {
                tokio::task::spawn_blocking(move || player.next_reply(&query))
                    .await
                    .map_err(|e| LlmError::Script(format!("select a scripted turn: {e}")))??
            } else {
                player.next_reply(&query)?
            };
            if !reply.delay.is_zero() {
                tokio::time::sleep(reply.delay).await;
            }
            if let Some(message) = &reply.error {
                return Err(match reply.error_status {
                    Some(status) => LlmError::Http {
                        provider: "script".to_owned(),
                        status,
                        message: message.clone(),
                    },
                    None => LlmError::Provider {
                        provider: "script".to_owned(),
                        message: message.clone(),
                    },
                });
            }
            Ok(reply.events())
        };
        Box::pin(stream::once(reply).flat_map(|result| {
            let items: Vec<Result<StreamEvent>> = match result {
                Ok(events) => events.into_iter().map(Ok).collect(),
                Err(error) => vec![Err(error)],
            };
            stream::iter(items)
        }))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::collect::collect;
    use crate::types::Message;

    fn provider(yaml: &str) -> ScriptProvider {
        let script = Script::parse(yaml, false).unwrap();
        ScriptProvider::new(
            ScriptPlayer::new(script, "test", Cursors::in_memory()),
            "script",
            1000,
        )
    }

    fn request(agent: &str, user: &str) -> Request {
        Request {
            agent: agent.into(),
            system: vec!["You are a helper.".into()],
            messages: vec![Message::user_text(user)],
            ..Request::default()
        }
    }

    #[tokio::test]
    async fn per_agent_turns_matchers_and_exhaustion() {
        let p = provider(
            r#"
agents:
  "*":
    - text: default one
  alice:
    - when: {last_user_contains: Summarize}
      text: summary
    - text: first
      tool_calls: [{name: ReadFile, input: {path: a}}, {name: Grep}]
"#,
        );
        let r = collect(p.stream(request("alice", "go")), |_| {})
            .await
            .unwrap();
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        let ids: Vec<_> = r
            .message
            .tool_uses()
            .map(|(id, _, _)| id.to_owned())
            .collect();
        assert_eq!(ids, ["toolu_script_1", "toolu_script_2"]);
        assert_eq!(r.message.tool_uses().nth(1).unwrap().2, &json!({}));
        // Estimated usage: non-zero, from sizes.
        assert!(r.usage.input_tokens >= 4 && r.usage.output_tokens >= 1);

        let r = collect(p.stream(request("alice", "Summarize it")), |_| {})
            .await
            .unwrap();
        assert_eq!(r.message.text(), "summary");

        let err = collect(p.stream(request("alice", "more")), |_| {})
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("the script for agent alice has no turn left after 2"),
            "{err}"
        );
        // Other agents fall back to "*" with their own cursor.
        for agent in ["bob", "carol"] {
            let r = collect(p.stream(request(agent, "x")), |_| {})
                .await
                .unwrap();
            assert_eq!(r.message.text(), "default one");
        }
    }

    #[tokio::test]
    async fn error_turn_and_thinking() {
        let p = provider(
            r#"
- error: "overloaded_error: Overloaded"
- thinking: "let me see"
  signature: "sig"
  text: "done"
  usage: {input_tokens: 10, output_tokens: 2, cache_read_tokens: 5}
"#,
        );
        let err = collect(p.stream(request("", "x")), |_| {})
            .await
            .unwrap_err();
        assert!(err.is_transient(), "{err}");
        let r = collect(p.stream(request("", "x")), |_| {}).await.unwrap();
        assert_eq!(
            r.message.content[0],
            ContentBlock::Thinking {
                thinking: "let me see".into(),
                signature: Some("sig".into())
            }
        );
        assert_eq!(r.usage.cache_read_tokens, 5);
    }
}
