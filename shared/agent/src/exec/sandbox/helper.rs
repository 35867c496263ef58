//! The helper mode: confine, start the command, supervise it, report.
//!
//! `<agent binary> __roo-command-helper SPEC PROGRAM ARGS...` applies the
//! sandbox of `SPEC` (JSON [`HelperSpec`]) to itself, starts `PROGRAM ARGS`
//! with stdin closed (inherited for a server, [`super::CommandSandbox::wrap_server`])
//! and stdout/stderr inherited, and when it ends (or when
//! the helper gets SIGTERM, SIGINT, SIGHUP or SIGQUIT, as it does when the
//! agent dies) ends every process left below it. It then writes one JSON
//! [`HelperReport`] line to its stdin (not for a server, whose stdin is its
//! protocol), which the caller opened as the write end of a pipe, and exits with the command's exit code (128 + signal if it was
//! killed). If the helper cannot confine itself it runs nothing: it prints why
//! and exits with [`HELPER_FAILED`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{HELPER_ARG, HelperSpec};

/// Exit code of a helper that could not run the command at all.
pub const HELPER_FAILED: u8 = 125;
/// How long leftover processes get between SIGTERM and SIGKILL.
pub const LEFTOVER_GRACE: Duration = Duration::from_millis(1000);

/// How far the OS sandbox confined a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Enforcement {
    /// No sandbox was asked for.
    Off,
    /// Everything the policy says is enforced.
    Full,
    /// Enforced in part; says what is missing.
    Partial(String),
    /// The kernel enforces nothing; says why.
    Unsupported(String),
}

/// What the helper tells its caller when the command is over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelperReport {
    /// Exit code of the command, if it exited.
    pub code: Option<i32>,
    /// Signal that killed the command, if one did.
    pub signal: Option<i32>,
    /// Processes still running after the command ended (or when the helper was
    /// stopped) that the helper had to end.
    pub leftovers: usize,
    /// Which confinement was in force for the command.
    pub enforcement: Enforcement,
}

/// Runs the helper mode if this process was started in it; returns the exit
/// code to exit with, or `None` for a normal start. Call first thing in `main`.
pub fn run_helper_if_requested() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    let first = args.next()?;
    if first == super::PROBE_ARG {
        return Some(super::run_probe());
    }
    if first == STAGE2_ARG {
        return Some(stage2(args.collect()));
    }
    if first != HELPER_ARG {
        return None;
    }
    let args: Vec<OsString> = args.collect();
    Some(match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("roo: cannot run the command: {e}");
            ExitCode::from(HELPER_FAILED)
        }
    })
}

/// First argument of the helper's second stage: the confined command's own process.
const STAGE2_ARG: &str = "__roo-command-stage2";

/// The second stage, between the helper and a confined command (Linux): a new
/// session without a controlling terminal (no `TIOCSTI` into the user's terminal,
/// no `/dev/tty`), then a Landlock domain nested in the helper's, so the command
/// cannot signal, trace or take descriptors from its supervisor; then `exec`.
fn stage2(args: Vec<OsString>) -> ExitCode {
    let mut args = args.into_iter();
    let Some(program) = args.next() else {
        eprintln!("roo: the command's second stage was started without a program (internal error)");
        return ExitCode::from(HELPER_FAILED);
    };
    if let Err(e) = nix::unistd::setsid() {
        eprintln!("roo: the command could not get a session of its own: {e}");
        return ExitCode::from(HELPER_FAILED);
    }
    #[cfg(target_os = "linux")]
    if let Err(e) = super::landlock::nest() {
        eprintln!("roo: the command's nested sandbox could not be applied: {e}");
        return ExitCode::from(HELPER_FAILED);
    }
    use std::os::unix::process::CommandExt;
    let e = std::process::Command::new(&program).args(args).exec();
    eprintln!(
        "roo: failed to start {}: {e}",
        PathBuf::from(program).display()
    );
    ExitCode::from(HELPER_FAILED)
}

/// Why the helper could not run the command.
#[derive(Debug, thiserror::Error)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) enum HelperError {
    #[error("the command helper was started without its arguments (internal error)")]
    Usage,
    #[error("the command helper got an invalid sandbox spec (internal error): {0}")]
    Spec(String),
    #[error("the OS sandbox could not be applied, so the command was not run: {0}")]
    Sandbox(String),
    #[error("failed to start {program}: {source}")]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the command helper could not {action}: {errno}")]
    Sys {
        action: &'static str,
        errno: nix::errno::Errno,
    },
}

fn run(args: Vec<OsString>) -> Result<ExitCode, HelperError> {
    let mut args = args.into_iter();
    let spec = args.next().ok_or(HelperError::Usage)?;
    let spec: HelperSpec = serde_json::from_str(&spec.to_string_lossy())
        .map_err(|e| HelperError::Spec(e.to_string()))?;
    let program = PathBuf::from(args.next().ok_or(HelperError::Usage)?);
    let rest: Vec<OsString> = args.collect();
    close_inherited_descriptors();
    let report = supervise(&spec, &program, &rest)?;
    if let Some(report) = report {
        // In stdio mode stdin belongs to the command's protocol.
        if !spec.stdio {
            send_report(&report);
        }
        let code = match (report.code, report.signal) {
            (Some(code), _) => u8::try_from(code).unwrap_or(1),
            (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(HELPER_FAILED),
            (None, None) => HELPER_FAILED,
        };
        return Ok(ExitCode::from(code));
    }
    Ok(ExitCode::from(HELPER_FAILED))
}

/// The agent's relay descriptor, when the spec says one comes on stdin: received
/// and left open across `exec` for the command alone (this process is
/// single-threaded and starts nothing else).
fn take_relay(spec: &HelperSpec) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::AsFd;
    if !spec.relay {
        return None;
    }
    let stdin = std::io::stdin();
    let fd = roo_store::relay::receive_fd(stdin.as_fd()).ok().flatten()?;
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    fcntl(&fd, FcntlArg::F_SETFD(FdFlag::empty())).ok()?;
    Some(fd)
}

/// Closes every descriptor above stderr this process was started with: whatever
/// the agent's own parent left open without close-on-exec must not reach a
/// command. Called before the helper opens anything of its own.
fn close_inherited_descriptors() {
    let dir = if cfg!(target_os = "linux") {
        "/proc/self/fd"
    } else {
        "/dev/fd"
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let numbers: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .filter(|&fd| fd > 2)
        .collect();
    // The listing's own descriptor is among them and already closed: EBADF.
    for fd in numbers {
        let _ = nix::unistd::close(fd);
    }
}

/// Writes the report line to stdin (the caller's pipe). A helper started by
/// hand has no pipe there; the report is then simply lost.
fn send_report(report: &HelperReport) {
    if let Ok(mut line) = serde_json::to_vec(report) {
        line.push(b'\n');
        let stdin = std::io::stdin();
        let _ = nix::unistd::write(&stdin, &line);
    }
}

#[cfg(target_os = "linux")]
use linux::supervise;

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeSet;
    use std::ffi::OsString;
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    use nix::errno::Errno;
    use nix::sys::prctl;
    use nix::sys::signal::{Signal, kill};
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    use nix::unistd::{Pid, getppid};
    use tokio::signal::unix::{SignalKind, signal};

    use super::{Enforcement, HelperError, HelperReport, LEFTOVER_GRACE};
    use crate::exec::sandbox::proc_stat;
    use crate::exec::sandbox::{HelperSpec, landlock, namespace};

    fn sys(action: &'static str) -> impl FnOnce(Errno) -> HelperError {
        move |errno| HelperError::Sys { action, errno }
    }

    /// Applies the sandbox, runs the command and ends what it leaves behind.
    /// `Ok(None)`: the agent was already gone, nothing was started.
    pub(super) fn supervise(
        spec: &HelperSpec,
        program: &Path,
        args: &[OsString],
    ) -> Result<Option<HelperReport>, HelperError> {
        // Signals arrive through handlers (tokio's), not a blocked mask: a
        // blocked mask would be inherited by the command, handlers are reset
        // by exec. A current-thread runtime keeps this process one thread, so
        // the Landlock domain of this thread is the whole process's.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|e| HelperError::Sys {
                action: "start its event loop",
                errno: Errno::from_raw(e.raw_os_error().unwrap_or(0)),
            })?;
        runtime.block_on(async {
            let listen = |kind: SignalKind| {
                signal(kind).map_err(|e| HelperError::Sys {
                    action: "listen for signals",
                    errno: Errno::from_raw(e.raw_os_error().unwrap_or(0)),
                })
            };
            let mut child_exits = listen(SignalKind::child())?;
            let mut term = listen(SignalKind::terminate())?;
            let mut int = listen(SignalKind::interrupt())?;
            let mut hup = listen(SignalKind::hangup())?;
            let mut quit = listen(SignalKind::quit())?;
            prctl::set_child_subreaper(true).map_err(sys("become a child subreaper"))?;
            prctl::set_pdeathsig(Signal::SIGTERM).map_err(sys("set a parent-death signal"))?;
            // The agent may have died before the parent-death signal was armed.
            if i64::from(getppid().as_raw()) != i64::from(spec.parent) {
                return Ok(None);
            }
            let relay = super::take_relay(spec);
            let enforcement = match &spec.policy {
                None => Enforcement::Off,
                Some(policy) => {
                    if policy.namespaces {
                        namespace::apply(policy).map_err(|e| {
                            HelperError::Sandbox(format!("its namespace layer: {e}"))
                        })?;
                    }
                    landlock::apply(policy).map_err(|e| HelperError::Sandbox(e.to_string()))?
                }
            };
            // A confined command starts through the second stage.
            let mut command = match &spec.policy {
                Some(_) => {
                    let mut command = Command::new(std::env::current_exe().map_err(|source| {
                        HelperError::Spawn {
                            program: program.to_path_buf(),
                            source,
                        }
                    })?);
                    command.arg(super::STAGE2_ARG).arg(program);
                    command
                }
                None => Command::new(program),
            };
            command.env(crate::exec::sandbox::IN_COMMAND_ENV, "1");
            if let Some(fd) = &relay {
                use std::os::fd::AsRawFd;
                command.env(roo_store::relay::ENV_FD, fd.as_raw_fd().to_string());
            }
            let child = command
                .args(args)
                .stdin(if spec.stdio {
                    Stdio::inherit()
                } else {
                    Stdio::null()
                })
                .spawn()
                .map_err(|source| HelperError::Spawn {
                    program: program.to_path_buf(),
                    source,
                })?;
            let shell = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
            drop(child);

            let mut status = None;
            // A child may have exited before the first SIGCHLD was awaited.
            reap(shell, &mut status);
            while status.is_none() {
                tokio::select! {
                    _ = child_exits.recv() => reap(shell, &mut status),
                    _ = term.recv() => break,
                    _ = int.recv() => break,
                    _ = hup.recv() => break,
                    _ = quit.recv() => break,
                }
            }
            let shell_done = status.is_some();
            let mut ended = end_descendants(shell, &mut status);
            if !shell_done {
                // Stopped by the agent: the command itself is not a leftover.
                ended = ended.saturating_sub(1);
            }
            let (code, signal) = match status {
                Some(WaitStatus::Exited(_, code)) => (Some(code), None),
                Some(WaitStatus::Signaled(_, signal, _)) => (None, Some(signal as i32)),
                _ => (None, Some(Signal::SIGKILL as i32)),
            };
            Ok(Some(HelperReport {
                code,
                signal,
                leftovers: ended,
                enforcement,
            }))
        })
    }

    /// Reaps every exited child (orphans reparented to this subreaper
    /// included), recording the command's status.
    fn reap(shell: Pid, status: &mut Option<WaitStatus>) {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return,
                Ok(ws @ (WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _)))
                    if pid == shell =>
                {
                    *status = Some(ws);
                }
                Ok(_) | Err(Errno::EINTR) => {}
                Err(_) => return,
            }
        }
    }

    /// Ends every live process below this one: SIGTERM and SIGCONT, then
    /// SIGKILL after [`LEFTOVER_GRACE`]. Returns how many were signalled. Done
    /// only when several searches in a row find nothing live: a process that
    /// forks and exits in a loop is between parent and reaper for an instant.
    fn end_descendants(shell: Pid, status: &mut Option<WaitStatus>) -> usize {
        const QUIET_SEARCHES: u32 = 3;
        let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        let mut signalled = BTreeSet::new();
        let start = Instant::now();
        let mut quiet = 0;
        loop {
            reap(shell, status);
            let (live, any) = descendants(me);
            // Nothing at all below: done. Only zombies: one may have just handed a
            // child to this reaper, so look again before believing it.
            if !any {
                break;
            }
            if live.is_empty() {
                quiet += 1;
            } else {
                quiet = 0;
            }
            if quiet >= QUIET_SEARCHES || start.elapsed() > LEFTOVER_GRACE * 4 {
                break;
            }
            let force = start.elapsed() >= LEFTOVER_GRACE;
            for pid in live {
                let pid = Pid::from_raw(pid);
                if force {
                    let _ = kill(pid, Signal::SIGKILL);
                    signalled.insert(pid);
                } else if signalled.insert(pid) {
                    let _ = kill(pid, Signal::SIGTERM);
                    let _ = kill(pid, Signal::SIGCONT);
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        signalled.len()
    }

    /// Live processes whose parent chain leads to `root` (see [`dead`]), and
    /// whether there was any process below it at all, zombies included: read
    /// from each process's `/proc/<pid>/task/*/children`, which costs a few
    /// reads per descendant; where the kernel lacks those files, from a scan
    /// of every process's `stat`.
    fn descendants(root: i32) -> (Vec<i32>, bool) {
        if !Path::new(&format!("/proc/{root}/task/{root}/children")).exists() {
            return descendants_by_scan(root);
        }
        let mut found = vec![root];
        let mut live = Vec::new();
        let mut i = 0;
        while i < found.len() {
            let parent = found[i];
            i += 1;
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
                continue;
            };
            for task in tasks.flatten() {
                let Some(text) = read_small(&task.path().join("children")) else {
                    continue;
                };
                for pid in text
                    .split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok())
                {
                    if found.contains(&pid) {
                        continue;
                    }
                    found.push(pid);
                    if !dead(pid) {
                        live.push(pid);
                    }
                }
            }
        }
        let any = found.len() > 1;
        (live, any)
    }

    /// Whether `pid` is over: a zombie whose threads are gone too (a process whose
    /// first thread exited while others run shows as a zombie and is very much
    /// alive; signalling it ends them all).
    fn dead(pid: i32) -> bool {
        let zombie = read_small(Path::new(&format!("/proc/{pid}/stat")))
            .and_then(|stat| proc_stat(&stat))
            .is_some_and(|stat| stat.state == 'Z' || stat.state == 'X');
        zombie
            && std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |tasks| tasks.count()) <= 1
    }

    /// [`descendants`] from every process's parent pid.
    fn descendants_by_scan(root: i32) -> (Vec<i32>, bool) {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return (Vec::new(), false);
        };
        let mut table = Vec::new();
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            if let Some(stat) = read_small(Path::new(&format!("/proc/{pid}/stat")))
                && let Some(stat) = proc_stat(&stat)
            {
                table.push((pid, stat));
            }
        }
        let mut found = vec![root];
        let mut live = Vec::new();
        let mut i = 0;
        while i < found.len() {
            let parent = found[i];
            for (pid, stat) in &table {
                if stat.ppid == parent && !found.contains(pid) {
                    found.push(*pid);
                    if !dead(*pid) {
                        live.push(*pid);
                    }
                }
            }
            i += 1;
        }
        let any = found.len() > 1;
        (live, any)
    }

    /// A small `/proc` file in as few reads as possible (no size query).
    fn read_small(path: &Path) -> Option<String> {
        use std::io::Read;
        let mut file = std::fs::File::open(path).ok()?;
        let mut text = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => text.extend_from_slice(&buf[..n]),
                Err(_) => return None,
            }
        }
        String::from_utf8(text).ok()
    }
}

#[cfg(not(target_os = "linux"))]
fn supervise(
    spec: &HelperSpec,
    program: &std::path::Path,
    args: &[OsString],
) -> Result<Option<HelperReport>, HelperError> {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};

    let (program, args, enforcement) = match &spec.policy {
        #[cfg(target_os = "macos")]
        Some(policy) => {
            let (p, a) = super::seatbelt_command(policy, program, args);
            (p, a, Enforcement::Full)
        }
        #[cfg(not(target_os = "macos"))]
        Some(_) => (
            program.to_path_buf(),
            args.to_vec(),
            Enforcement::Unsupported("no OS sandbox on this platform".to_string()),
        ),
        None => (program.to_path_buf(), args.to_vec(), Enforcement::Off),
    };
    let relay = take_relay(spec);
    let mut command = Command::new(&program);
    if let Some(fd) = &relay {
        use std::os::fd::AsRawFd;
        command.env(roo_store::relay::ENV_FD, fd.as_raw_fd().to_string());
    }
    let status = command
        .args(&args)
        .stdin(if spec.stdio {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .status()
        .map_err(|source| HelperError::Spawn { program, source })?;
    // Without a subreaper, leftovers in the command's process group are ended
    // by the caller.
    Ok(Some(HelperReport {
        code: status.code(),
        signal: status.signal(),
        leftovers: 0,
        enforcement,
    }))
}
