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
//! agent leaks processes; the description tells the model how to start a server
//! that must outlive the call.

mod group;

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use super::head_tail::HeadTail;
use super::input::opt_usize;
use super::{ToolError, parse_input};
use crate::tool::{PermissionTarget, Tool, ToolContext, ToolKind, ToolOutput};

use group::ProcessGroup;
pub use group::pid_is_running;

/// Timeout when the call gives none.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Longest timeout a call may ask for.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Bytes kept from the start of the output.
pub const OUTPUT_HEAD_BYTES: usize = 15_000;
/// Bytes kept from the end of the output.
pub const OUTPUT_TAIL_BYTES: usize = 15_000;
/// After the shell exits, how long to keep reading output that background
/// processes still write to the inherited pipes.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);

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
             - Processes still running when the command finishes are terminated. To start a \
             server that must keep running, detach it and redirect its output: \
             `setsid nohup CMD > /tmp/server.log 2>&1 &`.\n\
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
                Ok(outcome) => outcome.into_output(timeout_ms),
                Err(e) => e.into_output(),
            }
        }
        .boxed()
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The shell exited on its own.
    Exited(ExitStatus),
    /// The timeout fired first.
    TimedOut,
    /// `ctx.cancel` fired first.
    Cancelled,
}

/// The observable result of one run.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) ending: Ending,
    pub(crate) output: String,
    /// Processes of the group were still running after the shell exited and
    /// were terminated.
    pub(crate) reaped_background: bool,
}

impl Outcome {
    fn into_output(self, timeout_ms: u64) -> ToolOutput {
        use std::os::unix::process::ExitStatusExt;

        let mut text = self.output.trim_end().to_string();
        if text.is_empty() {
            text.push_str("(no output)");
        }
        text.push_str("\n\n");
        let is_error = match self.ending {
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
        if self.reaped_background {
            text.push_str(
                "\n[the command left background processes running; they were terminated. To \
                 keep a server running, start it with `setsid nohup CMD > LOG 2>&1 &`]",
            );
        }
        ToolOutput {
            content: text,
            is_error,
        }
    }
}

/// The shell to run commands with: bash if it is on PATH, else sh.
fn shell() -> &'static PathBuf {
    static SHELL: OnceLock<PathBuf> = OnceLock::new();
    SHELL.get_or_init(|| {
        std::env::var_os("PATH")
            .and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join("bash"))
                    .find(|candidate| candidate.is_file())
            })
            .unwrap_or_else(|| PathBuf::from("/bin/sh"))
    })
}

/// Runs `command` to its end, timeout or cancel, and always leaves no process of
/// its group behind.
pub(crate) async fn run(
    command: &str,
    timeout: Duration,
    ctx: &ToolContext,
) -> Result<Outcome, ToolError> {
    if !ctx.cwd.is_dir() {
        return Err(ToolError::Io {
            action: "run the command in",
            path: ctx.cwd.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the working directory does not exist",
            ),
        });
    }
    let mut cmd = Command::new(shell());
    cmd.arg("-c")
        .arg(command)
        .current_dir(&ctx.cwd)
        .env("GIT_TERMINAL_PROMPT", "0")
        .envs(ctx.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| ToolError::Io {
        action: "start",
        path: shell().clone(),
        source: e,
    })?;
    let group = child.id().and_then(ProcessGroup::new);
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let mut output = HeadTail::new(OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES);
    let (mut out_buf, mut err_buf) = (vec![0u8; 8192], vec![0u8; 8192]);
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let drain = tokio::time::sleep(Duration::MAX);
    tokio::pin!(drain);
    let mut status: Option<ExitStatus> = None;

    let ending = loop {
        if let Some(status) = status
            && stdout.is_none()
            && stderr.is_none()
        {
            break Ending::Exited(status);
        }
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => break Ending::Cancelled,
            _ = &mut deadline => break Ending::TimedOut,
            read = read_some(&mut stdout, &mut out_buf) => match read {
                Some(n) => output.push(&out_buf[..n]),
                None => stdout = None,
            },
            read = read_some(&mut stderr, &mut err_buf) => match read {
                Some(n) => output.push(&err_buf[..n]),
                None => stderr = None,
            },
            waited = child.wait(), if status.is_none() => match waited {
                Ok(s) => {
                    status = Some(s);
                    drain.as_mut().reset(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
                }
                Err(e) => {
                    return Err(ToolError::Io { action: "wait for", path: shell().clone(), source: e });
                }
            },
            _ = &mut drain, if status.is_some() => {
                // Something the command started still holds the pipes open.
                break Ending::Exited(status.unwrap_or_default());
            }
        }
    };

    let mut reaped_background = false;
    if let Some(group) = group {
        match ending {
            Ending::Exited(_) => {
                if group.is_alive() {
                    reaped_background = true;
                    group.terminate(&mut child).await;
                }
            }
            Ending::TimedOut | Ending::Cancelled => {
                group.terminate(&mut child).await;
            }
        }
    }
    Ok(Outcome {
        ending,
        output: output.render(),
        reaped_background,
    })
}

/// Reads one chunk from an optional pipe; `None` at EOF or error. A closed pipe
/// never resolves, so `select!` keeps waiting on the others.
async fn read_some<R: AsyncReadExt + Unpin>(pipe: &mut Option<R>, buf: &mut [u8]) -> Option<usize> {
    match pipe {
        Some(reader) => match reader.read(buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => Some(n),
        },
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
