//! Bash: run a shell command in the working directory.
//!
//! Every call is a fresh `bash -c` (or `sh -c` where there is no bash) with stdin
//! closed, in its own process group so a timeout or a cancel ends the command and
//! everything it started, however deep. stdout and stderr are read as they come
//! and kept interleaved, the way a terminal shows them; a command that prints
//! megabytes keeps only its first and last [`OUTPUT_HEAD_BYTES`](crate::exec::OUTPUT_HEAD_BYTES) /
//! [`OUTPUT_TAIL_BYTES`](crate::exec::OUTPUT_TAIL_BYTES) bytes in memory. The result always ends with how the
//! command ended: its exit code, the signal that killed it, a timeout or a cancel.
//! Background processes left behind when the shell exits are ended too, so no
//! agent leaks processes. With a [`crate::exec::sandbox::CommandSandbox`] in the
//! context the shell runs under the sandbox helper, which confines it and also
//! ends processes that left the group (`set -m` jobs, double-forked daemons),
//! reporting how many; API keys named in `ctx.env_remove` are not passed on.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::input::opt_usize;
use crate::exec::{CommandOutcome, Ending, RunError};
use crate::exec::{OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES};
use crate::tool::ToolError;
use crate::tool::{PermissionTarget, ToolContext, ToolKind, ToolOutput, TypedTool};

/// Timeout when the call gives none.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Longest timeout a call may ask for.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

const NAME: &str = "Bash";

/// Runs a shell command.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bash;

#[derive(Debug, Deserialize, JsonSchema)]
/// Input of Bash.
pub struct BashInput {
    command: String,
    #[serde(default, deserialize_with = "opt_usize")]
    #[schemars(
        range(min = 1, max = MAX_TIMEOUT_MS),
        extend("description" = format!("Milliseconds (default {DEFAULT_TIMEOUT_MS}).")),
    )]
    timeout_ms: Option<usize>,
    /// What the command does in 5-10 words, shown to the user ("Run the unit tests").
    // UIs read it from the raw input; the run does not need it.
    #[serde(default, rename = "description")]
    _description: Option<String>,
}

impl TypedTool for Bash {
    type Input = BashInput;
    const NAME: &'static str = NAME;

    // What the runtime reports when it happens (a timeout, a sandbox denial, a killed
    // background process, a refused command) is not repeated here.
    fn description(&self) -> String {
        format!(
            "Runs a command with `bash -c` in the working directory; returns its output and exit \
             code. For builds, tests, git and other programs; read, \
             search and edit files with ReadFile, Grep, Glob and EditFile instead.\n\
             - Each call is a fresh shell: `cd` and variables do not carry over.\n\
             - stdin is closed: use non-interactive flags (`-y`, `--no-edit`, `-m`).\n\
             - Output keeps its first {OUTPUT_HEAD_BYTES} and last {OUTPUT_TAIL_BYTES} bytes: filter \
             noisy commands (`| tail -50`).\n\
             - Processes it started end with it, background ones too: start a server and use \
             it in the same command."
        )
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    fn permission_target(&self, input: &Value) -> PermissionTarget {
        match input.get("command").and_then(Value::as_str) {
            Some(c) => PermissionTarget::Command(c.to_string()),
            None => PermissionTarget::None,
        }
    }

    fn summarize(&self, input: &Value) -> Option<String> {
        let command = input.get("command").and_then(Value::as_str).unwrap_or("");
        let mut lines = command.trim().lines();
        let first = lines.next().unwrap_or("");
        let mut shown: String = first.chars().take(200).collect();
        if shown.len() < first.len() || lines.next().is_some() {
            shown.push_str(" …");
        }
        Some(format!("{NAME}({shown})"))
    }

    async fn run(&self, input: BashInput, ctx: &ToolContext) -> ToolOutput {
        let timeout_ms = input
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT_MS, |t| t as u64)
            .clamp(1, MAX_TIMEOUT_MS);
        match run(&input.command, Duration::from_millis(timeout_ms), ctx).await {
            Ok(outcome) => into_output(outcome, timeout_ms),
            Err(e) => e.into_output(),
        }
    }
}

/// Runs `command` with the context's launcher, in its working directory.
pub(crate) async fn run(
    command: &str,
    timeout: Duration,
    ctx: &ToolContext,
) -> Result<CommandOutcome, ToolError> {
    crate::exec::run(command, timeout, &ctx.launcher, &ctx.cwd, &ctx.cancel)
        .await
        .map_err(
            |RunError {
                 action,
                 path,
                 source,
             }| ToolError::Io {
                action,
                path,
                source,
            },
        )
}

/// The tool result for how a command ended.
fn into_output(outcome: CommandOutcome, timeout_ms: u64) -> ToolOutput {
    {
        use std::os::unix::process::ExitStatusExt;
        let this = outcome;

        let mut text = this.output.trim_end().to_string();
        if text.is_empty() {
            text.push_str("(no output)");
        }
        text.push_str("\n\n");
        let is_error = match this.ending {
            Ending::Exited(status) => match (status.code(), status.signal()) {
                (Some(code), _) => {
                    text.push_str(&format!("[exit code {code}]"));
                    code != 0
                }
                (None, Some(signal)) => {
                    let name = nix::sys::signal::Signal::try_from(signal)
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_else(|_| "unknown".to_string());
                    text.push_str(&format!("[killed by signal {signal} ({name})]"));
                    true
                }
                (None, None) => {
                    text.push_str("[ended without an exit code]");
                    true
                }
            },
            Ending::TimedOut => {
                text.push_str(&format!(
                    "[timed out after {timeout_ms} ms: the command and every process it started \
                     were killed. Pass a larger timeout_ms (max {MAX_TIMEOUT_MS}) or run less at \
                     once]"
                ));
                true
            }
            Ending::Cancelled => {
                text.push_str(
                    "[cancelled by the user: the command and every process it started were killed]",
                );
                true
            }
        };
        if this.leftovers > 0 {
            text.push_str(&format!(
                "\n[ended {} leftover background process(es): nothing a command starts outlives \
                 it, so start a server and use it within the same command]",
                this.leftovers
            ));
        }
        if this.sandboxed && is_error && looks_like_sandbox_denial(&text) {
            text.push_str(
                "\n[note: commands run in an OS sandbox: writes are allowed only in the project, \
                 the temp dir and the paths the user lists in `sandbox.allow_write` of their \
                 ~/.roocode/config.yaml; credentials such as ~/.ssh cannot be read. Do not try to \
                 get around it: work inside the project, or ask the user to allow the path]",
            );
        }
        ToolOutput {
            content: text,
            is_error,
        }
    }
}

/// Whether output looks like a file access the sandbox refused.
fn looks_like_sandbox_denial(text: &str) -> bool {
    [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

#[cfg(test)]
mod tests;
