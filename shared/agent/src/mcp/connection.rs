//! One connection to one MCP server: started, watched and stopped.
//!
//! A stdio server runs below the sandbox helper in its own process group, so the
//! helper's supervision applies (its whole tree ends with it, and with the agent
//! through the parent-death signal). Its stderr is relayed to a log file and the
//! last lines are kept for error reports: never inherited, where it would paint
//! over the terminal or a pane. When the process exits, the connection is marked
//! down with its exit status; calls then fail with that reason.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, ServiceExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use crate::config::McpTransport;
use crate::exec::Launcher;

/// Lines of a server's stderr kept for error reports.
const STDERR_TAIL_LINES: usize = 10;
/// Longest stderr line kept (the rest is cut).
const MAX_STDERR_LINE: usize = 1000;
/// How long a stopping server gets after its stdin closed, and again after SIGTERM.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// Where and how servers are started.
#[derive(Debug, Clone)]
pub struct McpLaunch {
    /// Relative `cwd:`s are resolved against it, and it is the default.
    pub project_root: PathBuf,
    /// Server stderr goes to `logs/mcp-<server>.log` below it.
    pub log_dir: PathBuf,
    /// Starts stdio servers under the helper's supervision (not confined: servers
    /// started by `npx` and the like write caches under the home directory); its
    /// scrubbed variables (API keys) are removed unless `env:` sets them.
    pub launcher: Launcher,
}

/// The last lines a server wrote to stderr.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// `; its last stderr lines: …` or nothing.
    pub fn suffix(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.is_empty() {
            String::new()
        } else {
            format!(
                "; its last stderr lines:\n  {}",
                lines.iter().cloned().collect::<Vec<_>>().join("\n  ")
            )
        }
    }
}

/// A live connection.
pub struct Connection {
    pub peer: Peer<RoleClient>,
    service: RunningService<RoleClient, ()>,
    /// Why the server is gone (`exited (status 1)`), once it is.
    pub down: watch::Receiver<Option<String>>,
    /// The helper's process group, for a stdio server.
    group: Option<Pid>,
}

/// A server that is still being started: what is needed to stop it if it never
/// answers.
pub struct Starting {
    pub down: watch::Receiver<Option<String>>,
    pub group: Option<Pid>,
    pub stderr: StderrTail,
}

impl Connection {
    /// Starts the server `name` and runs the MCP handshake. `starting` is called
    /// once the process exists, so a caller that gives up waiting can stop it.
    pub async fn open(
        name: &str,
        transport: &McpTransport,
        launch: &McpLaunch,
        starting: impl FnOnce(&Starting),
    ) -> Result<Connection, String> {
        match transport {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let stderr = StderrTail::default();
                let (child, group) = spawn(command, args, env, cwd.as_deref(), launch)?;
                let mut child = child;
                let (Some(stdin), Some(stdout), Some(err)) =
                    (child.stdin.take(), child.stdout.take(), child.stderr.take())
                else {
                    return Err("its standard streams could not be opened".to_string());
                };
                let log = log_path(&launch.log_dir, name);
                let relay = tokio::spawn(relay_stderr(err, log, stderr.clone()));
                let (down_tx, down) = watch::channel(None);
                let tail = stderr.clone();
                tokio::spawn(async move {
                    let status = child.wait().await;
                    // The last lines may still be in the pipe.
                    let _ = tokio::time::timeout(Duration::from_secs(1), relay).await;
                    let why = match status {
                        Ok(status) => format!("exited ({}){}", describe(status), tail.suffix()),
                        Err(e) => format!("could not be waited for: {e}"),
                    };
                    down_tx.send_replace(Some(why));
                });
                starting(&Starting {
                    down: down.clone(),
                    group: Some(group),
                    stderr: stderr.clone(),
                });
                let mut watch_down = down.clone();
                let service = tokio::select! {
                    service = ().serve((stdout, stdin)) => service.map_err(|e| e.to_string()),
                    // A server that exits before answering: report the exit, not a
                    // closed pipe.
                    Ok(why) = watch_down.wait_for(Option::is_some) => {
                        Err(why.clone().unwrap_or_default())
                    }
                };
                match service {
                    Ok(service) => Ok(Connection {
                        peer: service.peer().clone(),
                        service,
                        down,
                        group: Some(group),
                    }),
                    Err(why) => {
                        stop_group(group, &mut down.clone()).await;
                        // Give the exit watcher a moment to say how it ended.
                        let mut down = down.clone();
                        let _ = tokio::time::timeout(
                            Duration::from_millis(500),
                            down.wait_for(Option::is_some),
                        )
                        .await;
                        let exit = down.borrow().clone();
                        Err(match exit {
                            Some(exit) if !why.starts_with("exited") => {
                                format!("the MCP handshake failed ({why}); the server {exit}")
                            }
                            Some(exit) => format!("the server {exit}"),
                            None => format!("the MCP handshake failed ({why}){}", stderr.suffix()),
                        })
                    }
                }
            }
            McpTransport::Http { url, headers } => {
                let (_down_tx, down) = watch::channel(None);
                starting(&Starting {
                    down: down.clone(),
                    group: None,
                    stderr: StderrTail::default(),
                });
                let transport = http_transport(url, headers)?;
                let service = ()
                    .serve(transport)
                    .await
                    .map_err(|e| format!("the MCP handshake with {url} failed: {e}"))?;
                Ok(Connection {
                    peer: service.peer().clone(),
                    service,
                    down,
                    group: None,
                })
            }
        }
    }

    /// Closes the connection (a stdio server's stdin), then ends the server's
    /// process group if it has not exited within [`STOP_GRACE`].
    pub async fn close(mut self) {
        let _ = self.service.close_with_timeout(STOP_GRACE).await;
        if let Some(group) = self.group {
            let mut down = self.down.clone();
            let exited = tokio::time::timeout(STOP_GRACE, down.wait_for(Option::is_some))
                .await
                .is_ok();
            if !exited {
                stop_group(group, &mut down).await;
            }
        }
    }
}

impl Starting {
    /// Ends a server that never finished starting.
    pub async fn abandon(&self) {
        if let Some(group) = self.group {
            stop_group(group, &mut self.down.clone()).await;
        }
    }
}

/// SIGTERM to the group (the helper then ends the whole tree), SIGKILL if it is
/// still there after [`STOP_GRACE`].
async fn stop_group(group: Pid, down: &mut watch::Receiver<Option<String>>) {
    if down.borrow().is_some() {
        return;
    }
    let _ = killpg(group, Signal::SIGTERM);
    let _ = killpg(group, Signal::SIGCONT);
    if tokio::time::timeout(STOP_GRACE, down.wait_for(Option::is_some))
        .await
        .is_err()
    {
        let _ = killpg(group, Signal::SIGKILL);
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        // The helper exits 128 + n when the server was killed by signal n.
        (Some(code), _) if code > 128 && code < 160 => format!("killed by signal {}", code - 128),
        (Some(code), _) => format!("status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "unknown status".to_string(),
    }
}

fn spawn(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&Path>,
    launch: &McpLaunch,
) -> Result<(tokio::process::Child, Pid), String> {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    let dir = match cwd {
        Some(dir) => launch.project_root.join(dir),
        None => launch.project_root.clone(),
    };
    let mut cmd = launch
        .launcher
        .server_command(Path::new(command), &args, &dir, env);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    let child = cmd
        .spawn()
        .map_err(|e| format!("failed to start in {}: {e}", dir.display()))?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| "it exited at once".to_string())?;
    Ok((child, Pid::from_raw(pid)))
}

fn http_transport(
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("its url {url:?} is invalid: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("its url {url:?} is not http or https"));
    }
    let mut map = std::collections::HashMap::new();
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| format!("its header name {name:?} is invalid: {e}"))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|e| format!("the value of its header {name} is invalid: {e}"))?;
        map.insert(name, value);
    }
    // No TLS provider is compiled in by default; the agent uses ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("failed to build an HTTP client: {e}"))?;
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(map);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// Path of the log of server `name`'s stderr.
pub fn log_path(log_dir: &Path, name: &str) -> PathBuf {
    log_dir.join(format!("mcp-{name}.log"))
}

/// Copies the server's stderr to its log file, line by line (cut when long), and
/// keeps the last lines.
async fn relay_stderr(mut stderr: impl AsyncRead + Unpin, log: PathBuf, tail: StderrTail) {
    let file = log
        .parent()
        .map(|dir| {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
        })
        .transpose()
        .and_then(|_| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&log)
        });
    let mut file = match file {
        Ok(file) => Some(tokio::fs::File::from_std(file)),
        Err(e) => {
            tracing::warn!(
                "failed to open {} for an MCP server's stderr: {e}",
                log.display()
            );
            None
        }
    };
    let pid = std::process::id();
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => 0,
            Ok(n) => n,
        };
        if n == 0 {
            if !pending.is_empty() {
                let line = String::from_utf8_lossy(&pending).into_owned();
                emit_line(&line, pid, &mut file, &tail).await;
            }
            return;
        }
        for &byte in &buf[..n] {
            if byte == b'\n' {
                let line = String::from_utf8_lossy(&pending).into_owned();
                pending.clear();
                emit_line(&line, pid, &mut file, &tail).await;
            } else if pending.len() < MAX_STDERR_LINE * 4 {
                pending.push(byte);
            }
        }
    }
}

async fn emit_line(line: &str, pid: u32, file: &mut Option<tokio::fs::File>, tail: &StderrTail) {
    // A server's output is not ours to paint the terminal with: no control characters.
    let line: String = line
        .trim_end_matches('\r')
        .chars()
        .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
        .collect();
    let line = roo_term::clip(&line, MAX_STDERR_LINE);
    tracing::debug!(target: "roo_agent::mcp::stderr", "{line}");
    if let Some(f) = file {
        let text = format!("[roo pid {pid}] {line}\n");
        if f.write_all(text.as_bytes()).await.is_err() {
            *file = None;
        }
    }
    tail.push(line);
}
