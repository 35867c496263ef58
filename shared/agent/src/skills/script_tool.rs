//! A directory skill's own tools: `tool.json` declares them (name, description, input
//! schema, command), the command — usually a script in the skill's `references/` —
//! implements them. Loading the skill registers them as `skill__<skill>__<tool>`.
//!
//! A call runs the command like a Bash call (OS sandbox, own process group, timeout,
//! cancel, API keys scrubbed) with the call's input as JSON on stdin and
//! `$SKILL_DIR` set; its stdout is the result. It is an `Execute` call whose permission
//! target is the command line, so the dangerous-command layer, rules
//! (`skill__changelog__*`) and the mode decide on it like on any command.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::Value;

use super::load::Skill;
use crate::exec::{self, Ending};
use crate::front_matter::one_line;
use crate::tool::{PermissionTarget, Tool, ToolContext, ToolKind, ToolOutput};
use crate::tools::bash;

/// Most tools one `tool.json` may declare.
pub const MAX_TOOLS_PER_SKILL: usize = 8;
/// Timeout of a call when `tool.json` gives none, in milliseconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Stdout kept of a call, in bytes (longer results spill like any tool's).
const MAX_STDOUT_BYTES: u64 = 1024 * 1024;
/// Longest registered name (what providers accept for a tool name).
const MAX_TOOL_NAME_CHARS: usize = 64;
const MAX_DESCRIPTION_CHARS: usize = 1024;
const MAX_COMMAND_CHARS: usize = 4096;

/// One tool a skill declares in its `tool.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillToolSpec {
    /// The name in `tool.json` (`count_lines`).
    pub name: String,
    /// What the tool does, shown to the model.
    pub description: String,
    /// JSON Schema of the input: an object schema.
    pub input_schema: Value,
    /// The shell command line that implements it, run in the agent's working directory.
    pub command: String,
    /// How long a call may run before it is killed.
    pub timeout_ms: u64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ToolFile {
    One(RawTool),
    Many(Vec<RawTool>),
    Wrapped { tools: Vec<RawTool> },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: String,
    description: String,
    #[serde(default, alias = "inputSchema", alias = "parameters")]
    input_schema: Option<Value>,
    command: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// The name a skill's tool is registered under: `skill__<skill>__<tool>`.
pub fn registered_name(skill: &str, tool: &str) -> String {
    format!("skill__{skill}__{tool}")
}

/// Parses `tool.json` of skill `skill_name`: one tool object, a list of them, or
/// `{"tools": [...]}`. The error is a fragment naming the problem.
pub fn parse_tool_json(text: &str, skill_name: &str) -> Result<Vec<SkillToolSpec>, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("is not valid JSON: {e}"))?;
    let file: ToolFile = serde_json::from_value(value).map_err(|_| {
        "does not declare tools: write {\"name\", \"description\", \"input_schema\", \
         \"command\"} (optionally \"timeout_ms\"), a list of them, or {\"tools\": [...]}; \
         unknown fields are errors"
            .to_string()
    })?;
    let raw = match file {
        ToolFile::One(tool) => vec![tool],
        ToolFile::Many(tools) | ToolFile::Wrapped { tools } => tools,
    };
    if raw.len() > MAX_TOOLS_PER_SKILL {
        return Err(format!(
            "declares {} tools, more than the limit of {MAX_TOOLS_PER_SKILL}",
            raw.len()
        ));
    }
    let mut tools: Vec<SkillToolSpec> = Vec::new();
    for tool in raw {
        let name = tool.name.trim().to_string();
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        let full = registered_name(skill_name, &name);
        if !valid || full.len() > MAX_TOOL_NAME_CHARS {
            return Err(format!(
                "tool name `{name}` is not valid: use letters, digits, `_` and `-`, short \
                 enough that `{full}` has at most {MAX_TOOL_NAME_CHARS} characters"
            ));
        }
        if tools.iter().any(|t| t.name == name) {
            return Err(format!("declares tool `{name}` twice"));
        }
        let description = one_line(&tool.description);
        if description.is_empty() || description.chars().count() > MAX_DESCRIPTION_CHARS {
            return Err(format!(
                "tool `{name}`: the description must be 1 to {MAX_DESCRIPTION_CHARS} characters"
            ));
        }
        let input_schema = tool
            .input_schema
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
        if input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(format!(
                "tool `{name}`: input_schema must be a JSON Schema with \"type\": \"object\""
            ));
        }
        let command = tool.command.trim().to_string();
        if command.is_empty() || command.chars().count() > MAX_COMMAND_CHARS {
            return Err(format!(
                "tool `{name}`: the command must be 1 to {MAX_COMMAND_CHARS} characters"
            ));
        }
        let timeout_ms = tool.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        if !(1..=bash::MAX_TIMEOUT_MS).contains(&timeout_ms) {
            return Err(format!(
                "tool `{name}`: timeout_ms {timeout_ms} is out of range 1..={}",
                bash::MAX_TIMEOUT_MS
            ));
        }
        tools.push(SkillToolSpec {
            name,
            description,
            input_schema,
            command,
            timeout_ms,
        });
    }
    Ok(tools)
}

/// A skill's tool as registered in an agent's registry.
pub struct SkillTool {
    /// `skill__<skill>__<tool>`.
    name: String,
    skill: String,
    dir: PathBuf,
    spec: SkillToolSpec,
}

impl SkillTool {
    /// The tools of `skill` (none for a built-in skill, which has no folder).
    pub fn of(skill: &Skill) -> Vec<SkillTool> {
        let Some(dir) = &skill.dir else {
            return Vec::new();
        };
        skill
            .tools
            .iter()
            .map(|spec| SkillTool {
                name: registered_name(&skill.name, &spec.name),
                skill: skill.name.clone(),
                dir: dir.clone(),
                spec: spec.clone(),
            })
            .collect()
    }

    /// The skill folder the command sees as `$SKILL_DIR`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Tool for SkillTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        format!("{} (a tool of skill {})", self.spec.description, self.skill)
    }

    fn input_schema(&self) -> Value {
        self.spec.input_schema.clone()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    fn permission_target(&self, _input: &Value) -> PermissionTarget {
        PermissionTarget::Command(self.spec.command.clone())
    }

    fn summarize(&self, _input: &Value) -> String {
        self.name.clone()
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if !input.is_object() {
                return ToolOutput::error(format!(
                    "failed to run {}: the input must be a JSON object",
                    self.name
                ));
            }
            let mut launcher = ctx.launcher.clone();
            launcher.env.extend([
                (
                    "SKILL_DIR".to_string(),
                    self.dir.to_string_lossy().into_owned(),
                ),
                ("SKILL_NAME".to_string(), self.skill.clone()),
                ("SKILL_TOOL".to_string(), self.spec.name.clone()),
            ]);
            let timeout = Duration::from_millis(self.spec.timeout_ms);
            let outcome = match exec::run_piped(
                &self.spec.command,
                &input.to_string(),
                timeout,
                &launcher,
                &ctx.cwd,
                &ctx.cancel,
                MAX_STDOUT_BYTES,
            )
            .await
            {
                Ok(outcome) => outcome,
                Err(e) => return ToolOutput::error(format!("failed to run {}: {e}", self.name)),
            };
            let stderr = outcome.stderr.trim();
            let with_stderr = |head: String| {
                if stderr.is_empty() {
                    head
                } else {
                    format!("{head}\nstderr:\n{stderr}")
                }
            };
            match outcome.ending {
                Ending::Cancelled => ToolOutput::error(format!("{} was cancelled", self.name)),
                Ending::TimedOut => ToolOutput::error(with_stderr(format!(
                    "{} did not finish within {} ms and was killed with every process it started",
                    self.name, self.spec.timeout_ms
                ))),
                Ending::Exited(status) if status.success() => {
                    let stdout = outcome.stdout.trim_end();
                    ToolOutput::ok(if stdout.is_empty() {
                        "(no output)".to_string()
                    } else {
                        stdout.to_string()
                    })
                }
                Ending::Exited(status) => {
                    use std::os::unix::process::ExitStatusExt;
                    let how = match (status.code(), status.signal()) {
                        (Some(code), _) => format!("exited with code {code}"),
                        (None, Some(signal)) => format!("was killed by signal {signal}"),
                        (None, None) => "ended without an exit code".to_string(),
                    };
                    let mut text = format!("{} {how}", self.name);
                    let stdout = outcome.stdout.trim();
                    if !stdout.is_empty() {
                        text.push_str(&format!("\nstdout:\n{stdout}"));
                    }
                    ToolOutput::error(with_stderr(text))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_of_tool_json_parses_and_bad_ones_say_why() {
        let one = r#"{"name": "count", "description": "Counts.", "command": "wc -l"}"#;
        let tools = parse_tool_json(one, "stats").unwrap();
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(tools[0].input_schema["type"], "object");
        let many = r#"[{"name": "a", "description": "A.", "command": "x", "input_schema": {"type": "object", "properties": {"p": {"type": "string"}}}, "timeout_ms": 5}, {"name": "b", "description": "B.", "command": "y"}]"#;
        assert_eq!(parse_tool_json(many, "stats").unwrap().len(), 2);
        let wrapped = format!(r#"{{"tools": {many}}}"#);
        assert_eq!(parse_tool_json(&wrapped, "stats").unwrap()[0].timeout_ms, 5);
        let long = "x".repeat(60);
        for (text, want) in [
            ("nope", "not valid JSON"),
            (r#"{"name": "a"}"#, "does not declare tools"),
            (
                r#"{"name": "a", "description": "d", "command": "x", "rogue": 1}"#,
                "does not declare tools",
            ),
            (
                r#"{"name": "a b", "description": "d", "command": "x"}"#,
                "is not valid",
            ),
            (
                &format!(r#"{{"name": "{long}", "description": "d", "command": "x"}}"#),
                "at most 64",
            ),
            (
                r#"[{"name": "a", "description": "d", "command": "x"}, {"name": "a", "description": "d", "command": "y"}]"#,
                "twice",
            ),
            (
                r#"{"name": "a", "description": " ", "command": "x"}"#,
                "description",
            ),
            (
                r#"{"name": "a", "description": "d", "command": "x", "input_schema": {"type": "string"}}"#,
                "input_schema",
            ),
            (
                r#"{"name": "a", "description": "d", "command": "  "}"#,
                "command",
            ),
            (
                r#"{"name": "a", "description": "d", "command": "x", "timeout_ms": 0}"#,
                "out of range",
            ),
        ] {
            let err = parse_tool_json(text, "stats").unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
        let nine: Vec<String> = (0..9)
            .map(|i| format!(r#"{{"name": "t{i}", "description": "d", "command": "x"}}"#))
            .collect();
        let err = parse_tool_json(&format!("[{}]", nine.join(",")), "stats").unwrap_err();
        assert!(err.contains("more than the limit"), "{err}");
    }
}
