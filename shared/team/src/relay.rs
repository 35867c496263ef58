//! The agent's side of the CLI relay ([`roo_store::relay`]): `roo-mail` and
//! `roo-task` run inside this agent's commands reach the team through here.
//!
//! Each agent (the lead, every teammate) serves its own relay on a thread of its
//! own. A request is checked against the agent's identity ([`roo_cli::relay::check`])
//! and then run as the real CLI, unconfined but with the agent's `ROO_HOME`,
//! `ROO_TEAM` and `ROO_AGENT_NAME` and the command's own stdin, stdout and stderr:
//! what it writes is indistinguishable from the team tools' writes, and it always
//! carries the agent's real name. The CLI starts through the agent crate's one
//! [`Launcher`] (unconfined). When the command goes away (its Bash call timed
//! out or was cancelled) the CLI it asked for is ended too.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use roo_agent::exec::{Confine, EnvSource, Launcher, ServiceFd};
use roo_cli::relay::{Member, check};
use roo_store::relay::{self, Incoming, Reply};

/// Requests one agent runs at once; more are refused (a flood from a command).
const MAX_IN_FLIGHT: usize = 16;

/// The agent's variables when a request arrives: fixed ones and a source.
#[derive(Clone)]
pub struct RelayEnv {
    pub fixed: Vec<(String, String)>,
    pub source: Option<EnvSource>,
    /// The agent's `ROO_STORE` (`None`: the process's, sealed with the API keys): its
    /// commands never see it, the CLI run for them must reach the same store.
    pub store: Option<String>,
}

impl RelayEnv {
    fn vars(&self) -> Vec<(String, String)> {
        let mut vars = self.fixed.clone();
        if let Some(source) = &self.source {
            vars.extend(source.vars());
        }
        let store = self
            .store
            .clone()
            .or_else(|| roo_agent::exec::sandbox::secret_env(roo_store::ROO_STORE_ENV));
        if let Some(store) = store {
            vars.push((roo_store::ROO_STORE_ENV.to_string(), store));
        }
        if let Some(password) = roo_agent::exec::sandbox::secret_env("PGPASSWORD") {
            vars.push(("PGPASSWORD".to_string(), password));
        }
        vars
    }
}

/// Starts serving a relay for an agent with `env` (`lead`: it leads its team);
/// returns the end its commands get. The thread ends when every copy of that end
/// is closed.
pub fn serve(env: RelayEnv, lead: bool) -> std::io::Result<ServiceFd> {
    let (agent_end, command_end) = relay::pair()?;
    let in_flight = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("roo-relay".to_string())
        .spawn(move || {
            while let Ok(Some(incoming)) = relay::receive(&agent_end) {
                if in_flight.fetch_add(1, Ordering::SeqCst) >= MAX_IN_FLIGHT {
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    incoming.reply(&Reply::Refused(format!(
                        "more than {MAX_IN_FLIGHT} team commands are running in this agent's \
                         shell; wait for some to finish"
                    )));
                    continue;
                }
                let (env, in_flight) = (env.clone(), in_flight.clone());
                let spawned = std::thread::Builder::new()
                    .name("roo-relay-run".to_string())
                    .spawn(move || {
                        handle(&incoming, &env, lead);
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    // The closure (and the request with it) is dropped: the
                    // command reads that its agent could not run it.
                }
            }
        })?;
    Ok(ServiceFd(Arc::new(command_end)))
}

fn value<'a>(vars: &'a [(String, String)], key: &str) -> Option<&'a str> {
    vars.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// Runs one request: the CLI it asks for, if the agent may run it, with the
/// command's stdio; the reply says how it ended or why it did not run.
fn handle(incoming: &Incoming, env: &RelayEnv, lead: bool) {
    match start_cli(incoming, env, lead) {
        Ok(child) => reply_on_exit(incoming, child),
        Err(why) => incoming.reply(&Reply::Refused(why)),
    }
}

/// Checks the request against the agent's identity and starts the real CLI for it.
fn start_cli(incoming: &Incoming, env: &RelayEnv, lead: bool) -> Result<Child, String> {
    let vars = env.vars();
    let me = Member {
        team: value(&vars, "ROO_TEAM").map(str::to_string),
        name: value(&vars, "ROO_AGENT_NAME").map(str::to_string),
        lead,
    };
    let request = &incoming.request;
    check(request, &me)?;
    let program = cli_path(&request.program).ok_or_else(|| {
        format!(
            "{} is not installed next to the agent nor on PATH",
            request.program
        )
    })?;
    let (stdin, stdout, stderr) = command_stdio(incoming)?;
    let cwd = if request.cwd.is_dir() {
        request.cwd.clone()
    } else {
        PathBuf::from("/")
    };
    let mut command = cli_launcher(vars).command(
        &program,
        &request.args.iter().map(OsString::from).collect::<Vec<_>>(),
        &cwd,
        Confine::No,
    );
    command.stdin(stdin).stdout(stdout).stderr(stderr);
    command
        .spawn()
        .map_err(|e| format!("could not start {}: {e}", program.display()))
}

/// Copies of the command's stdin, stdout and stderr for the CLI. A relay socket as
/// stdio would keep a reply end open for ever (the command handing the agent both
/// ends of one pair): no CLI's stdio is one.
fn command_stdio(incoming: &Incoming) -> Result<(Stdio, Stdio, Stdio), String> {
    let relay_socket = |fd: &OwnedFd| {
        nix::sys::socket::getsockopt(fd, nix::sys::socket::sockopt::SockType)
            .is_ok_and(|t| t == nix::sys::socket::SockType::SeqPacket)
    };
    if [&incoming.stdin, &incoming.stdout, &incoming.stderr]
        .into_iter()
        .any(relay_socket)
    {
        return Err("a team command's stdin, stdout and stderr cannot be relay sockets".into());
    }
    let stdio = |fd: &OwnedFd| fd.try_clone().map(Stdio::from);
    match (
        stdio(&incoming.stdin),
        stdio(&incoming.stdout),
        stdio(&incoming.stderr),
    ) {
        (Ok(stdin), Ok(stdout), Ok(stderr)) => Ok((stdin, stdout, stderr)),
        _ => Err("could not take over the command's stdio".into()),
    }
}

/// Replies with the CLI's exit code the moment it exits; ends it (without a reply)
/// if the command goes away first, which is checked between waits.
fn reply_on_exit(incoming: &Incoming, mut child: Child) {
    // The pid stays the child's until it is reaped.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::Builder::new()
        .name("roo-relay-wait".to_string())
        .spawn(move || {
            let _ = tx.send(child.wait());
        });
    if waiter.is_err() {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        incoming.reply(&Reply::Refused("could not wait for the command".into()));
        return;
    }
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(Ok(status)) => {
                use std::os::unix::process::ExitStatusExt;
                let code = status
                    .code()
                    .or_else(|| status.signal().map(|s| 128 + s))
                    .unwrap_or(1);
                incoming.reply(&Reply::Exited(code));
                return;
            }
            Ok(Err(_)) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                incoming.reply(&Reply::Refused("lost track of the command".into()));
                return;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if command_gone(&incoming.reply_to, Duration::ZERO) {
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                    let _ = rx.recv();
                    return;
                }
            }
        }
    }
}

/// How the CLI is started for a request: unconfined, with the agent's variables
/// (`vars`, which name the team and the agent) and never the command's own
/// `ROO_TEAM`/`ROO_AGENT_NAME`, the relay's descriptor or [`roo_agent::exec::ESCAPE_ENV`];
/// [`relay::ENV_RELAYED_BY`] tells it which agent relayed it.
fn cli_launcher(vars: Vec<(String, String)>) -> Launcher {
    let mut env = vec![(
        relay::ENV_RELAYED_BY.to_string(),
        std::process::id().to_string(),
    )];
    env.extend(vars);
    Launcher {
        env_remove: vec!["ROO_TEAM".to_string(), "ROO_AGENT_NAME".to_string()],
        env,
        ..Launcher::new(None)
    }
}

/// Whether the command's reply end closed (it never writes, so readable means
/// end of file), waiting at most `wait`.
fn command_gone(reply_to: &OwnedFd, wait: Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(reply_to.as_fd(), PollFlags::POLLIN)];
    let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(0) => false,
        Ok(_) => fds[0].revents().is_some_and(|r| {
            r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
        }),
        Err(_) => false,
    }
}

/// `roo-mail`/`roo-task` next to the running executable, else on `PATH`.
fn cli_path(program: &str) -> Option<PathBuf> {
    if !matches!(program, "roo-mail" | "roo-task") {
        return None;
    }
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(program)))
        .filter(|p| p.is_file());
    sibling.or_else(|| {
        which::which(program)
            .ok()
            .filter(|p: &PathBuf| Path::new(p).is_file())
    })
}
