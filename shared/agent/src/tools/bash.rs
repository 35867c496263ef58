//! Bash: run a shell command in the working directory.
//!
//! Every call is a fresh `bash -c` (or `sh -c` where there is no bash) with stdin
//! closed, in its own process group so a timeout or a cancel ends the command and
//! everything it started, however deep. stdout and stderr are read as they come
//! and kept interleaved, the way a terminal shows them; a command that prints
//! megabytes keeps only its first and last [`OUTPUT_HEAD_BYTES`] /
//! [`OUTPUT_TAIL_BYTES`] bytes in memory. The result always ends with how the
//! command ended: its exit code, the signal that killed it, a timeout or a cancel.
//! Background processes left behind when the shell exits are ended too, so no
//! agent leaks processes. With a [`crate::sandbox::CommandSandbox`] in the
//! context the shell runs under the sandbox helper, which confines it and also
//! ends processes that left the group (`set -m` jobs, double-forked daemons),
//! reporting how many; API keys named in `ctx.env_remove` are not passed on.

use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::input::opt_usize;
use super::{ToolError, parse_input};
use crate::exec::{Ending, Outcome, RunError};
pub use crate::exec::{OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES};
use crate::tool::{PermissionTarget, Tool, ToolContext, ToolKind, ToolOutput};

/// Timeout when the call gives none.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Longest timeout a call may ask for.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

const NAME: &str = "Bash";

/// Runs a shell command.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bash;

#[derive(Debug, Deserialize)]
struct Input {
    command: String,
    #[serde(default, deserialize_with = "opt_usize")]
    timeout_ms: Option<usize>,
    // `description` is for UIs, which read it from the raw input.
}

impl Tool for Bash {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> String {
        format!(
            "Runs a shell command with bash (`bash -c`) in the working directory and returns its \
             combined stdout and stderr and its exit code.\n\n\
             When to use it: builds, tests, linters, git, package managers, and other programs. \
             Do not use it to read, search or edit files: ReadFile, Grep, Glob and EditFile are \
             faster, need no quoting and are easier for the user to review. Never use `cat`, \
             `head`, `tail`, `sed -i`, `grep`, `find` or `echo >` for those jobs.\n\n\
             Usage:\n\
             - Each call starts a fresh shell in the working directory: `cd` and variables do not \
             carry over to the next call. Prefer absolute or project-relative paths over `cd`.\n\
             - Quote paths that contain spaces (\"path with spaces/file.txt\").\n\
             - Chain dependent steps with `&&`; make independent commands separate calls.\n\
             - stdin is closed: interactive programs (editors, pagers, prompts, `git rebase -i`, \
             `git add -p`) cannot work. Use non-interactive flags (`-y`, `--no-edit`, \
             `-m \"message\"`).\n\
             - `timeout_ms` defaults to {DEFAULT_TIMEOUT_MS} ms (2 minutes) and may be at most \
             {MAX_TIMEOUT_MS} ms (10 minutes). On timeout the command and every process it \
             started are killed.\n\
             - Output is capped: about the first {OUTPUT_HEAD_BYTES} and last {OUTPUT_TAIL_BYTES} \
             bytes are kept with a marker in between, so filter noisy commands (`| tail -50`, \
             `--quiet`) when only the end matters.\n\
             - Every process the command started is ended when it finishes, background jobs and \
             detached daemons (`nohup`, `setsid`, `&`) included. To try a server, start it and \
             use it in the same command: `./server > /tmp/server.log 2>&1 & sleep 1; curl -s \
             localhost:8080/health`.\n\
             - Commands normally run in an OS sandbox: they may write only inside the project and the \
             temp dir (/tmp), cannot read credentials (~/.ssh, cloud and registry tokens) and \
             do not see the provider's API keys. A `Permission denied` outside the project \
             is the sandbox: do not try to get around it.\n\
             - Destructive commands (`rm -rf /`, `sudo`, force-pushing main, piping downloads \
             into a shell, ...) are refused by the permission system; find a safer way.\n\
             - `description`: a short (5-10 words) active-voice summary of what the command \
             does, shown to the user, e.g. \"Run the unit tests\"."
        )
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "The command line to run."
                },
                "timeout_ms": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_TIMEOUT_MS,
                    "description": format!("Timeout in milliseconds (default {DEFAULT_TIMEOUT_MS}, max {MAX_TIMEOUT_MS}).")
                },
                "description": {
                    "type": "string",
                    "description": "Short summary of what the command does, for the user."
                }
            },
            "required": ["command"],
            "additionalProperties": false
        })
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

    fn summarize(&self, input: &Value) -> String {
        let command = input.get("command").and_then(Value::as_str).unwrap_or("");
        let mut lines = command.trim().lines();
        let first = lines.next().unwrap_or("");
        let mut shown: String = first.chars().take(200).collect();
        if shown.len() < first.len() || lines.next().is_some() {
            shown.push_str(" …");
        }
        format!("{NAME}({shown})")
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        async move {
            let input: Input = match parse_input(NAME, input) {
                Ok(input) => input,
                Err(e) => return e.into_output(),
            };
            let timeout_ms = input
                .timeout_ms
                .map_or(DEFAULT_TIMEOUT_MS, |t| t as u64)
                .clamp(1, MAX_TIMEOUT_MS);
            match run(&input.command, Duration::from_millis(timeout_ms), ctx).await {
                Ok(outcome) => into_output(outcome, timeout_ms),
                Err(e) => e.into_output(),
            }
        }
        .boxed()
    }
}

/// Runs `command` with the context's launcher, in its working directory.
pub(crate) async fn run(
    command: &str,
    timeout: Duration,
    ctx: &ToolContext,
) -> Result<Outcome, ToolError> {
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
fn into_output(outcome: Outcome, timeout_ms: u64) -> ToolOutput {
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
