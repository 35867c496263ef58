//! Running a shell command line to its end: in its own process group, through the
//! sandbox helper when the launcher has one, stdout and stderr read as they come and
//! kept interleaved (head and tail of a flood), with a timeout and a cancel that end
//! the command and everything it started.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::Launcher;
use super::group::{self, ProcessGroup};
use super::head_tail::HeadTail;
use super::sandbox::HelperReport;

/// Bytes kept from the start of the output.
pub const OUTPUT_HEAD_BYTES: usize = 15_000;
/// Bytes kept from the end of the output.
pub const OUTPUT_TAIL_BYTES: usize = 15_000;
/// After the shell exits, how long to keep reading output that background
/// processes still write to the inherited pipes.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);

/// Why a command could not be started or waited for.
#[derive(Debug, thiserror::Error)]
#[error("failed to {action} {}: {source}", path.display())]
pub struct RunError {
    /// What was being done.
    pub action: &'static str,
    /// The path it was done on.
    pub path: PathBuf,
    #[source]
    /// Why it failed.
    pub source: std::io::Error,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The shell exited on its own.
    Exited(ExitStatus),
    /// The timeout fired first.
    TimedOut,
    /// The cancel token fired first.
    Cancelled,
}

/// The observable result of one shell command run.
#[derive(Debug)]
pub struct CommandOutcome {
    /// How the command ended.
    pub ending: Ending,
    /// What the command wrote, head and tail kept.
    pub output: String,
    /// How many processes were still running after the shell exited and were
    /// ended (at least 1 when only the fact is known).
    pub leftovers: usize,
    /// The command ran in the OS sandbox.
    pub sandboxed: bool,
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
pub struct PipedOutcome {
    /// How the command ended.
    pub ending: Ending,
    /// Its standard output, capped.
    pub stdout: String,
    /// Its standard error, head and tail kept.
    pub stderr: String,
}

/// Runs `command` like [`run`], with `input` on its stdin and its stdout kept apart
/// from stderr (at most `max_stdout` bytes of it): for commands that answer in a
/// format (hooks, skill tools). Both go through private temp files, so a command
/// that never reads its stdin or floods its stdout cannot block the agent.
pub async fn run_piped(
    command: &str,
    input: &str,
    timeout: Duration,
    launcher: &Launcher,
    cwd: &Path,
    cancel: &CancellationToken,
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
    let mut launcher = launcher.clone();
    launcher.env.push((
        "ROO_PIPED_INPUT".to_string(),
        files.0.path().to_string_lossy().into_owned(),
    ));
    launcher.env.push((
        "ROO_PIPED_STDOUT".to_string(),
        files.1.path().to_string_lossy().into_owned(),
    ));
    // The shell takes stdin from the input file and sends stdout to the other file,
    // so what the run captures is stderr alone.
    let script = format!(
        "exec <\"$ROO_PIPED_INPUT\" >\"$ROO_PIPED_STDOUT\" || exit {}\n{command}",
        super::sandbox::HELPER_FAILED,
    );
    let outcome = run(&script, timeout, &launcher, cwd, cancel)
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
/// its group behind. With a sandbox in `launcher` the shell runs under the sandbox helper,
/// which also ends processes that left the group (`set -m` jobs, daemons).
pub async fn run(
    command: &str,
    timeout: Duration,
    launcher: &Launcher,
    cwd: &Path,
    cancel: &CancellationToken,
) -> Result<CommandOutcome, RunError> {
    if !cwd.is_dir() {
        return Err(RunError {
            action: "run the command in",
            path: cwd.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the working directory does not exist",
            ),
        });
    }
    let Shell {
        mut child,
        program,
        report_reader,
    } = Shell::start(command, launcher, cwd)?;
    let group = child.id().and_then(ProcessGroup::new);
    let supervised = launcher.sandbox.is_some();
    let mut guard = EndOnDrop { group, supervised };
    let mut capture = Capture::new(&mut child);
    let ending = capture
        .until_end(&mut child, timeout, cancel)
        .await
        .map_err(|source| RunError {
            action: "wait for",
            path: program.clone(),
            source,
        })?;
    let mut leftovers = match group {
        Some(group) => end_group(group, ending, supervised, &mut child).await,
        None => 0,
    };
    guard.group = None;
    if matches!(ending, Ending::TimedOut | Ending::Cancelled) {
        // What the command wrote before it was ended is still in the pipes; its group is
        // gone, so they reach their end at once (bounded, in case something escaped it).
        let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, capture.rest()).await;
    }
    let report = report_reader.and_then(read_report);
    let ending = match (ending, &report) {
        (Ending::Exited(_), Some(report)) => Ending::Exited(report_status(report)),
        (ending, _) => ending,
    };
    if let Some(report) = &report {
        leftovers = leftovers.max(report.leftovers);
    }
    Ok(CommandOutcome {
        ending,
        output: capture.output.render(),
        leftovers,
        sandboxed: launcher.confines(),
    })
}

/// The shell of one [`run`], started in its own process group.
struct Shell {
    child: tokio::process::Child,
    /// What was started: the shell, or the sandbox helper running it.
    program: PathBuf,
    /// Where the sandbox helper reports how the command ended.
    report_reader: Option<std::os::fd::OwnedFd>,
}

impl Shell {
    /// Starts `command` under the shell in `cwd`: through the sandbox helper (with the
    /// agent's team service handed over before the command starts) when the launcher
    /// has one, directly otherwise; stdout and stderr piped.
    fn start(command: &str, launcher: &Launcher, cwd: &Path) -> Result<Self, RunError> {
        let shell_args = [OsString::from("-c"), OsString::from(command)];
        let relay = launcher
            .service
            .as_ref()
            .filter(|_| launcher.sandbox.is_some());
        let (program, args) = match launcher.sandbox.as_deref() {
            Some(sandbox) => sandbox.wrap_relayed(shell(), &shell_args, relay.is_some()),
            None => (shell().clone(), shell_args.to_vec()),
        };
        let start_error = |source| RunError {
            action: "start",
            path: program.clone(),
            source,
        };
        // The helper reports how the command ended on its stdin: a pipe to us.
        let report_pipe = match launcher.sandbox {
            // A socket, so the relay descriptor can travel over it too.
            Some(_) => Some(roo_store::relay::pair().map_err(start_error)?),
            None => None,
        };
        let mut cmd = Command::new(&program);
        cmd.args(&args)
            .current_dir(cwd)
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        for name in launcher.removed() {
            cmd.env_remove(name);
        }
        cmd.envs(launcher.vars());
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
        let child = spawned.map_err(start_error)?;
        if let (Some(relay), Some(channel)) = (relay, &report_reader) {
            // The helper waits for it before it starts the command; if this fails the
            // helper reads end-of-file and the command runs without a relay.
            let _ = roo_store::relay::send_fd(channel, &relay.0);
        }
        Ok(Self {
            child,
            program,
            report_reader,
        })
    }
}

/// A command's stdout and stderr, read as they come into one head-and-tail buffer.
struct Capture {
    stdout: Option<tokio::process::ChildStdout>,
    stderr: Option<tokio::process::ChildStderr>,
    out_buf: Vec<u8>,
    err_buf: Vec<u8>,
    output: HeadTail,
}

impl Capture {
    /// Takes over `child`'s pipes.
    fn new(child: &mut tokio::process::Child) -> Self {
        Self {
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            out_buf: vec![0u8; 8192],
            err_buf: vec![0u8; 8192],
            output: HeadTail::new(OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES),
        }
    }

    /// Reads until the shell exited and its pipes closed (or [`DRAIN_AFTER_EXIT`]
    /// after its exit, if something it started still holds them), the timeout or
    /// the cancel. `Err` only if the shell could not be waited for.
    async fn until_end(
        &mut self,
        child: &mut tokio::process::Child,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> std::io::Result<Ending> {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let drain = tokio::time::sleep(Duration::MAX);
        tokio::pin!(drain);
        let mut status: Option<ExitStatus> = None;
        Ok(loop {
            if let Some(status) = status
                && self.stdout.is_none()
                && self.stderr.is_none()
            {
                break Ending::Exited(status);
            }
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break Ending::Cancelled,
                _ = &mut deadline => break Ending::TimedOut,
                read = read_some(&mut self.stdout, &mut self.out_buf) => match read {
                    Some(n) => self.output.push(&self.out_buf[..n]),
                    None => self.stdout = None,
                },
                read = read_some(&mut self.stderr, &mut self.err_buf) => match read {
                    Some(n) => self.output.push(&self.err_buf[..n]),
                    None => self.stderr = None,
                },
                waited = child.wait(), if status.is_none() => {
                    status = Some(waited?);
                    drain.as_mut().reset(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
                },
                _ = &mut drain, if status.is_some() => {
                    // Something the command started still holds the pipes open.
                    break Ending::Exited(status.unwrap_or_default());
                }
            }
        })
    }

    /// Reads what is left in both pipes, to their end.
    async fn rest(&mut self) {
        while self.stdout.is_some() || self.stderr.is_some() {
            tokio::select! {
                read = read_some(&mut self.stdout, &mut self.out_buf) => match read {
                    Some(n) => self.output.push(&self.out_buf[..n]),
                    None => self.stdout = None,
                },
                read = read_some(&mut self.stderr, &mut self.err_buf) => match read {
                    Some(n) => self.output.push(&self.err_buf[..n]),
                    None => self.stderr = None,
                },
            }
        }
    }
}

/// Ends what is left of the command's group once the run `ending` came: always after
/// a timeout or cancel, and after an exit if something it started is still running.
/// Returns how many leftovers that was known to be (0 or 1).
async fn end_group(
    group: ProcessGroup,
    ending: Ending,
    supervised: bool,
    leader: &mut tokio::process::Child,
) -> usize {
    // The supervisor needs time to end what left the group before it exits.
    let grace = if supervised {
        group::TERM_GRACE + helper_grace()
    } else {
        group::TERM_GRACE
    };
    match ending {
        Ending::Exited(_) => {
            if group.is_alive() {
                group.terminate(leader, grace).await;
                return 1;
            }
            0
        }
        Ending::TimedOut | Ending::Cancelled => {
            group.terminate(leader, grace).await;
            0
        }
    }
}

/// How long the helper may take to end leftovers (TERM, grace, KILL, reap).
fn helper_grace() -> Duration {
    super::sandbox::LEFTOVER_GRACE * 4
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
    use std::os::fd::AsFd;

    let flags = nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(reader.as_fd(), nix::fcntl::FcntlArg::F_SETFL(flags)).ok()?;
    // One datagram, read whole (a short read would cut it).
    let mut text = vec![0u8; 64 * 1024];
    let n = nix::unistd::read(&reader, &mut text).ok()?;
    let line = text[..n].split(|&b| b == b'\n').next()?;
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
