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

mod group;

use std::ffi::OsString;
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
use crate::sandbox::HelperReport;
use crate::tool::{EnvSource, PermissionTarget, Tool, ToolContext, ToolKind, ToolOutput};

use group::ProcessGroup;

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
    /// How many processes were still running after the shell exited and were
    /// ended (at least 1 when only the fact is known).
    pub(crate) leftovers: usize,
    /// The command ran in the OS sandbox.
    pub(crate) sandboxed: bool,
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
        if self.leftovers > 0 {
            text.push_str(&format!(
                "\n[ended {} leftover background process(es): nothing a command starts outlives \
                 it, so start a server and use it within the same command]",
                self.leftovers
            ));
        }
        if self.sandboxed && is_error && looks_like_sandbox_denial(&text) {
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

/// What [`run_piped`] came to: how the command ended, its stdout (capped) and its
/// stderr (head and tail, like a Bash call's output).
#[derive(Debug)]
pub(crate) struct PipedOutcome {
    pub(crate) ending: Ending,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `command` like [`run`], with `input` on its stdin and its stdout kept apart
/// from stderr (at most `max_stdout` bytes of it): for commands that answer in a
/// format (hooks, skill tools). Both go through private temp files, so a command
/// that never reads its stdin or floods its stdout cannot block the agent.
pub(crate) async fn run_piped(
    command: &str,
    input: &str,
    timeout: Duration,
    ctx: &ToolContext,
    max_stdout: u64,
) -> Result<PipedOutcome, String> {
    use std::io::{Read, Write};
    let files = (|| -> std::io::Result<_> {
        let mut input_file = tempfile::Builder::new().prefix("roo-input-").tempfile()?;
        input_file.write_all(input.as_bytes())?;
        input_file.flush()?;
        let stdout = tempfile::Builder::new().prefix("roo-stdout-").tempfile()?;
        Ok((input_file, stdout))
    })()
    .map_err(|e| format!("failed to create its input file: {e}"))?;
    let mut context = ctx.clone();
    context.env.push((
        "ROO_PIPED_INPUT".to_string(),
        files.0.path().to_string_lossy().into_owned(),
    ));
    context.env.push((
        "ROO_PIPED_STDOUT".to_string(),
        files.1.path().to_string_lossy().into_owned(),
    ));
    // The shell takes stdin from the input file and sends stdout to the other file,
    // so what the run captures is stderr alone.
    let script = format!(
        "exec <\"$ROO_PIPED_INPUT\" >\"$ROO_PIPED_STDOUT\" || exit {}\n{command}",
        crate::sandbox::HELPER_FAILED,
    );
    let outcome = run(&script, timeout, &context)
        .await
        .map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    if let Ok(file) = std::fs::File::open(files.1.path()) {
        let _ = file.take(max_stdout).read_to_end(&mut bytes);
    }
    Ok(PipedOutcome {
        ending: outcome.ending,
        stdout: String::from_utf8_lossy(&bytes).into_owned(),
        stderr: outcome.output,
    })
}

/// Runs `command` to its end, timeout or cancel, and always leaves no process of
/// its group behind. With `ctx.sandbox` the shell runs under the sandbox helper,
/// which also ends processes that left the group (`set -m` jobs, daemons).
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
    let shell_args = [OsString::from("-c"), OsString::from(command)];
    let (program, args) = match ctx.sandbox.as_deref() {
        Some(sandbox) => sandbox.wrap(shell(), &shell_args),
        None => (shell().clone(), shell_args.to_vec()),
    };
    let start_error = |source| ToolError::Io {
        action: "start",
        path: program.clone(),
        source,
    };
    // The helper reports how the command ended on its stdin: a pipe to us.
    let report_pipe = match ctx.sandbox {
        Some(_) => Some(cloexec_pipe().map_err(|e| start_error(std::io::Error::from(e)))?),
        None => None,
    };
    let mut cmd = Command::new(&program);
    cmd.args(&args)
        .current_dir(&ctx.cwd)
        .env("GIT_TERMINAL_PROMPT", "0")
        .envs(ctx.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(ctx.env_source.iter().flat_map(EnvSource::vars))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for name in &ctx.env_remove {
        cmd.env_remove(name);
    }
    let report_reader = match report_pipe {
        Some((reader, writer)) => {
            cmd.stdin(Stdio::from(writer));
            Some(reader)
        }
        None => {
            cmd.stdin(Stdio::null());
            None
        }
    };
    let spawned = cmd.spawn();
    // Drops our copy of the report pipe's write end.
    drop(cmd);
    let mut child = spawned.map_err(start_error)?;
    let group = child.id().and_then(ProcessGroup::new);
    let supervised = ctx.sandbox.is_some();
    let mut guard = EndOnDrop { group, supervised };
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
                    return Err(ToolError::Io { action: "wait for", path: program.clone(), source: e });
                }
            },
            _ = &mut drain, if status.is_some() => {
                // Something the command started still holds the pipes open.
                break Ending::Exited(status.unwrap_or_default());
            }
        }
    };

    // The supervisor needs time to end what left the group before it exits.
    let grace = if supervised {
        group::TERM_GRACE + helper_grace()
    } else {
        group::TERM_GRACE
    };
    let mut leftovers = 0;
    if let Some(group) = group {
        match ending {
            Ending::Exited(_) => {
                if group.is_alive() {
                    leftovers += 1;
                    group.terminate(&mut child, grace).await;
                }
            }
            Ending::TimedOut | Ending::Cancelled => {
                group.terminate(&mut child, grace).await;
            }
        }
    }
    guard.group = None;
    if matches!(ending, Ending::TimedOut | Ending::Cancelled) {
        // What the command wrote before it was ended is still in the pipes; its group is
        // gone, so they reach their end at once (bounded, in case something escaped it).
        let drained = async {
            while stdout.is_some() || stderr.is_some() {
                tokio::select! {
                    read = read_some(&mut stdout, &mut out_buf) => match read {
                        Some(n) => output.push(&out_buf[..n]),
                        None => stdout = None,
                    },
                    read = read_some(&mut stderr, &mut err_buf) => match read {
                        Some(n) => output.push(&err_buf[..n]),
                        None => stderr = None,
                    },
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, drained).await;
    }
    let report = report_reader.and_then(read_report);
    let ending = match (ending, &report) {
        (Ending::Exited(_), Some(report)) => Ending::Exited(report_status(report)),
        (ending, _) => ending,
    };
    if let Some(report) = &report {
        leftovers = leftovers.max(report.leftovers);
    }
    Ok(Outcome {
        ending,
        output: output.render(),
        leftovers,
        sandboxed: ctx.sandbox.as_deref().is_some_and(|s| s.policy.is_some()),
    })
}

/// A pipe whose ends are not inherited by other children.
#[cfg(target_os = "linux")]
fn cloexec_pipe() -> nix::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
}

/// A pipe whose ends are not inherited by other children (no `pipe2` here).
#[cfg(not(target_os = "linux"))]
fn cloexec_pipe() -> nix::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    let (reader, writer) = nix::unistd::pipe()?;
    for fd in [&reader, &writer] {
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    }
    Ok((reader, writer))
}

/// How long the helper may take to end leftovers (TERM, grace, KILL, reap).
fn helper_grace() -> Duration {
    crate::sandbox::LEFTOVER_GRACE * 4
}

/// Ends the command's group if the call is dropped before it finished (the
/// future was cancelled from outside): SIGTERM to a supervised group, so the
/// helper ends the whole tree; SIGKILL to an unsupervised one.
struct EndOnDrop {
    group: Option<ProcessGroup>,
    supervised: bool,
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            group.signal(if self.supervised {
                nix::sys::signal::Signal::SIGTERM
            } else {
                nix::sys::signal::Signal::SIGKILL
            });
        }
    }
}

/// The helper's report, if it wrote one (it has exited, so this never blocks
/// for long; the read end is non-blocking anyway).
fn read_report(reader: std::os::fd::OwnedFd) -> Option<HelperReport> {
    use std::io::Read;
    use std::os::fd::AsFd;

    let flags = nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(reader.as_fd(), nix::fcntl::FcntlArg::F_SETFL(flags)).ok()?;
    let mut text = Vec::new();
    let _ = std::fs::File::from(reader)
        .take(64 * 1024)
        .read_to_end(&mut text);
    let line = text.split(|&b| b == b'\n').next()?;
    serde_json::from_slice(line).ok()
}

/// The command's own exit status from the helper's report.
fn report_status(report: &HelperReport) -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    match (report.code, report.signal) {
        (Some(code), _) => ExitStatus::from_raw((code & 0xff) << 8),
        (None, Some(signal)) => ExitStatus::from_raw(signal & 0x7f),
        (None, None) => ExitStatus::from_raw(1 << 8),
    }
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
