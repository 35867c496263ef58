//! The script file format of the scripted provider (YAML or JSON).
//!
//! ```yaml
//! agents:
//!   "*":                                # any agent without its own script
//!     - text: "I'll read the failing test first."
//!       tool_calls:
//!         - {name: ReadFile, input: {path: src/lib.rs}}
//!     - text: "Fixed."                  # no tool calls: the run ends
//!   alice:
//!     - when: {last_user_contains: "Summarize"}
//!       text: "summary …"
//! ```
//!
//! Parsing is strict (unknown keys are errors) because a typo in a script would
//! otherwise silently change a test. Selection and replay live in the parent module.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{LlmError, Result};
use crate::types::{StopReason, Usage};

/// A whole script: turns per agent name (`"*"` is the default script).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    pub agents: BTreeMap<String, Vec<ScriptTurn>>,
}

/// One scripted assistant turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptTurn {
    /// Only use this turn for requests that match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// Signature closing the thinking block (Anthropic); optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptToolCall>,
    /// `end_turn`, `tool_use`, `max_tokens`, `stop_sequence` or `refusal`; default
    /// `tool_use` if there are tool calls, else `end_turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Reported usage; estimated from sizes (~4 characters per token) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageSpec>,
    /// Latency before the first event, in milliseconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// This turn fails with a provider error carrying this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The HTTP status of that error (e.g. 400 for a refused request); without it the
    /// error is an in-stream error event (the mock server answers 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_status: Option<u16>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Conditions a request must meet for a turn to be chosen. All given ones must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// The last user message (its text and tool results) contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_user_contains: Option<String>,
    /// The system prompt contains this (e.g. an agent's name or role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_contains: Option<String>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    /// Fixed id; default `toolu_script_<n>`, counting per agent from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(default = "empty_object")]
    pub input: Value,
    /// The argument text to send verbatim instead of `input`, e.g. broken JSON or
    /// arguments cut off (with `stop_reason: max_tokens`), to test how a misbehaving
    /// model is handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_arguments: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// Usage as written in a script; missing counts are zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageSpec {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl From<UsageSpec> for Usage {
    fn from(u: UsageSpec) -> Self {
        Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
        }
    }
}

/// Parses a stop reason name as scripts and the Anthropic API write them.
pub(crate) fn parse_stop_reason(name: &str) -> Option<StopReason> {
    Some(match name {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        _ => return None,
    })
}

impl Script {
    /// Reads and checks a script file. `.json` files are JSON, anything else YAML.
    pub fn load(path: &Path) -> Result<Script> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            LlmError::Script(format!(
                "read script file {}: {e}; check --script / ROO_SCRIPT",
                path.display()
            ))
        })?;
        let is_json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        Script::parse(&text, is_json).map_err(|message| {
            LlmError::Script(format!("parse script file {}: {message}", path.display()))
        })
    }

    /// Parses and checks script text (YAML, or JSON when `json`).
    pub fn parse(text: &str, json: bool) -> std::result::Result<Script, String> {
        // A file may also be a bare list of turns, meaning `agents: {"*": [...]}`. Look
        // at the shape first, then parse into the right type so errors keep their
        // line and column.
        let script = if json {
            let bare = serde_json::from_str::<Value>(text)
                .map_err(|e| e.to_string())?
                .is_array();
            if bare {
                let turns = serde_json::from_str(text).map_err(|e| e.to_string())?;
                Script {
                    agents: BTreeMap::from([("*".to_owned(), turns)]),
                }
            } else {
                serde_json::from_str(text).map_err(|e| e.to_string())?
            }
        } else {
            let bare = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text)
                .map_err(|e| e.to_string())?
                .is_sequence();
            if bare {
                let turns = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
                Script {
                    agents: BTreeMap::from([("*".to_owned(), turns)]),
                }
            } else {
                serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?
            }
        };
        script.check()?;
        Ok(script)
    }

    fn check(&self) -> std::result::Result<(), String> {
        if self.agents.is_empty() {
            return Err("it has no agents; add `agents: {\"*\": [...]}`".to_owned());
        }
        for (agent, turns) in &self.agents {
            for (i, turn) in turns.iter().enumerate() {
                let at = format!("agent `{agent}`, turn {}", i + 1);
                if turn.text.is_none()
                    && turn.thinking.is_none()
                    && turn.tool_calls.is_empty()
                    && turn.error.is_none()
                {
                    return Err(format!(
                        "{at} is empty; give it text, thinking, tool_calls or error"
                    ));
                }
                if let Some(reason) = &turn.stop_reason
                    && parse_stop_reason(reason).is_none()
                {
                    return Err(format!(
                        "{at} has stop_reason `{reason}`; use end_turn, tool_use, max_tokens, stop_sequence or refusal"
                    ));
                }
                if let Some(when) = &turn.when
                    && when.last_user_contains.is_none()
                    && when.system_contains.is_none()
                {
                    return Err(format!("{at} has an empty `when`"));
                }
                for call in &turn.tool_calls {
                    if !call.input.is_object() {
                        return Err(format!(
                            "{at}: the input of tool call {} must be a mapping",
                            call.name
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let script = Script::parse(
            r#"
agents:
  "*":
    - text: "I'll read the failing test first."
      tool_calls:
        - {name: ReadFile, input: {path: src/lib.rs}}
    - text: "Fixed."
  alice:
    - when: {last_user_contains: "Summarize"}
      text: "summary"
    - thinking: "hmm"
      text: "ok"
      tool_calls: [{name: Bash, input: {command: ls}}]
      stop_reason: end_turn
      usage: {input_tokens: 1200, output_tokens: 40}
      delay_ms: 5
    - error: "overloaded"
"#,
            false,
        )
        .unwrap();
        assert_eq!(script.agents["*"].len(), 2);
        assert_eq!(script.agents["alice"][1].usage.unwrap().input_tokens, 1200);
        assert_eq!(
            script.agents["alice"][2].error.as_deref(),
            Some("overloaded")
        );
    }

    #[test]
    fn bare_list_and_json() {
        let script = Script::parse(r#"[{"text": "hi"}]"#, true).unwrap();
        assert_eq!(script.agents["*"][0].text.as_deref(), Some("hi"));
    }

    #[test]
    fn typos_and_empty_turns_are_errors() {
        let err = Script::parse("agents: {\"*\": [{txt: hi}]}", false).unwrap_err();
        assert!(err.contains("txt"), "{err}");
        let err = Script::parse("agents: {\"*\": [{delay_ms: 3}]}", false).unwrap_err();
        assert!(err.contains("is empty"), "{err}");
        let err =
            Script::parse("agents: {\"*\": [{text: a, stop_reason: done}]}", false).unwrap_err();
        assert!(err.contains("stop_reason"), "{err}");
    }
}
