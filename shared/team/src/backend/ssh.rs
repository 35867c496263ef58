//! The ssh backend: a teammate on another host (`hosts:` in the user's config), a
//! `roo-worker` in a detached tmux session there, started over ssh (docs/BACKENDS.md
//! "The ssh backend").
//!
//! Every ssh run is `ssh -o BatchMode=yes -o StrictHostKeyChecking=yes [-F config] --
//! <destination> <command>`, the command quoted argument by argument ([`command`]). A
//! spawn (the spawner has made the teammate's clone there first, see
//! `worktree::remote`):
//!
//! 1. **The environment** — the lead's secrets (API keys, `ROO_STORE`, `PGPASSWORD`) —
//!    is written to the stdin of one ssh running `roo-worker --serve-handoff <label>`
//!    there, which offers it on a private one-time socket of that host (the same handoff
//!    as for a local pane, `roo_agent::exec::sandbox::handoff`, merged over that host's own
//!    environment) and prints the `ROO_ENV_HANDOFF` value; it serves until the worker
//!    took it or [`START_TIMEOUT`] passed. No secret is ever on a command line.
//! 2. **The session**: a second ssh runs `tmux [-L socket] new-session -d -s
//!    roo-<team>-<name>` whose pane then runs `roo-worker` directly (no shell) with the
//!    flags a pane worker gets (`worker_launch`), `--host <name>` and only the handoff
//!    value added to its environment.
//! 3. **Joined**: the spawn returns once the roster shows the member joined from that
//!    host anew (its pid and join time changed); a worker that never took its
//!    environment, or did not join in time, is an error carrying its pane's last lines,
//!    and its session is stopped.
//!
//! **Liveness** is the roster's: a teammate counts as running while its entry is not
//! marked dead ([`SshExecutor::watch`] reads it every second). No pid of that host is
//! ever checked here (PROTOCOL.md §4.1). **Stopping** (TaskStop, the lead's exit): over
//! ssh, the session's pane process gets SIGTERM and up to 3 s, then the session is
//! killed. **Waking** is not needed: a worker on the PostgreSQL store hears its inbox's
//! notifications.

pub mod command;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use roo_agent::config::HostConfig;
use roo_agent::exec::sandbox::handoff::HANDOFF_ENV;
use roo_store::{BackendType, Name, Team};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::backend::executor::{ExecError, Launch, TeammateExecutor};
use crate::backend::pane::START_TIMEOUT;
use crate::backend::worker_launch::{WorkerHandoff, WorkerLaunch};
use crate::backend::workers::{self, WorkerTable};

use command::{QuoteError, RemoteTmux, Ssh, sh_join, ssh_hint};

/// How long one short ssh command (start a session, stop one, read a pane) may take.
pub const SSH_TIMEOUT: Duration = Duration::from_secs(30);

/// How often [`SshExecutor::watch`] reads the roster.
pub const ROSTER_WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// Why an ssh operation failed. Read after "failed to ".
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    #[error("run {program}: {source}; install OpenSSH's client (ssh)")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{what} on host {host} ({destination}): {detail}")]
    Failed {
        what: String,
        host: Name,
        destination: String,
        detail: String,
    },
    #[error("{0}")]
    Quote(#[from] QuoteError),
}

/// One teammate this executor started.
#[derive(Debug, Clone)]
struct Worker {
    session: String,
    team: Team,
    /// Not marked dead in the roster, as last read.
    active: bool,
    /// Being stopped ([`TeammateExecutor::kill`]): not running, whatever the roster says.
    stopping: bool,
}

struct Inner {
    host: HostConfig,
    ssh: Ssh,
    tmux: RemoteTmux,
    workers: WorkerTable<Worker>,
}

/// Teammates on one host over ssh. Cheap to clone; clones share the teammates.
#[derive(Clone)]
pub struct SshExecutor {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SshExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshExecutor")
            .field("host", &self.inner.host.name)
            .field("ssh", &self.inner.host.ssh)
            .finish_non_exhaustive()
    }
}

impl SshExecutor {
    /// An executor for `host` (its destination is checked again here).
    pub fn new(host: HostConfig) -> Result<SshExecutor, String> {
        let ssh = Ssh::new(&host)?;
        Ok(SshExecutor::with_ssh(host, ssh))
    }

    /// The same with another ssh (tests: a program of their own).
    pub fn with_ssh(host: HostConfig, ssh: Ssh) -> SshExecutor {
        let tmux = RemoteTmux::new(host.tmux_socket.as_ref().map(|s| s.to_string()));
        SshExecutor {
            inner: Arc::new(Inner {
                host,
                ssh,
                tmux,
                workers: WorkerTable::new(),
            }),
        }
    }

    /// The host's configuration.
    pub fn host(&self) -> &HostConfig {
        &self.inner.host
    }

    /// How it reaches the host.
    pub fn ssh(&self) -> &Ssh {
        &self.inner.ssh
    }

    /// How a person watches teammate `name` of `team` there.
    pub fn attach_hint(&self, team: &Name, name: &Name) -> String {
        self.inner.ssh.attach_hint(
            &self.inner.tmux,
            &command::session_name(team.as_str(), name.as_str()),
        )
    }

    /// Starts a task that, every [`ROSTER_WATCH_INTERVAL`] until `cancel`, reads whether
    /// each teammate it started is still unmarked in the roster ([`TeammateExecutor::is_active`]).
    pub fn watch(&self, cancel: tokio_util::sync::CancellationToken) {
        workers::watch(
            Arc::downgrade(&self.inner),
            ROSTER_WATCH_INTERVAL,
            cancel,
            |inner| Box::pin(async move { SshExecutor { inner }.read_roster().await }),
        );
    }

    /// One round of [`SshExecutor::watch`].
    async fn read_roster(&self) {
        let workers: Vec<(Name, Team)> = self
            .inner
            .workers
            .snapshot()
            .into_iter()
            .map(|(n, w)| (n, w.team))
            .collect();
        for (name, team) in workers {
            let host = self.inner.host.name.to_string();
            let who = name.clone();
            let active = tokio::task::spawn_blocking(move || {
                team.config().map(|c| {
                    c.member(who.as_str()).is_some_and(|m| {
                        m.dead_at.is_none() && m.host.as_deref() == Some(host.as_str())
                    })
                })
            })
            .await;
            // A roster that cannot be read says nothing: keep what was known.
            if let Ok(Ok(active)) = active {
                self.inner.workers.update(&name, |w| w.active = active);
            }
        }
    }

    /// Runs `remote` (a quoted command line) there, stdin closed, for at most `limit`.
    async fn run(&self, what: &str, remote: &str, limit: Duration) -> Result<String, SshError> {
        let ssh = &self.inner.ssh;
        let child = Command::new(ssh.program())
            .args(ssh.argv(remote))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output();
        let out = match tokio::time::timeout(limit, child).await {
            Ok(out) => out.map_err(|source| SshError::Spawn {
                program: ssh.program().display().to_string(),
                source,
            })?,
            Err(_) => {
                return Err(self.failed(what, format!("no answer within {} s", limit.as_secs())));
            }
        };
        if !out.status.success() {
            return Err(self.failed(what, ssh_failure(&out.stderr, out.status)));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn failed(&self, what: &str, detail: String) -> SshError {
        SshError::Failed {
            what: what.to_string(),
            host: self.inner.host.name.clone(),
            destination: self.inner.ssh.destination().to_string(),
            detail,
        }
    }

    /// The last lines session `session` showed (empty where unreadable).
    async fn last_lines(&self, session: &str) -> Vec<String> {
        let Ok(line) = sh_join(&self.inner.tmux.capture(session)) else {
            return Vec::new();
        };
        let screen = self
            .run("read the pane", &line, SSH_TIMEOUT)
            .await
            .unwrap_or_default();
        let mut last: Vec<String> = screen
            .lines()
            .filter(|l| !l.trim().is_empty())
            .rev()
            .take(8)
            .map(str::to_string)
            .collect();
        last.reverse();
        last
    }

    /// Stops session `session` there (see [`RemoteTmux::stop_script`]).
    async fn stop_session(&self, session: &str) -> Result<(), SshError> {
        let script = self.inner.tmux.stop_script(session)?;
        self.run("stop the session", &script, SSH_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// Step 1 of a spawn: the handoff server there, fed the environment and `handed`
    /// (the worker's prompt and the lead's project config); returns it (still serving)
    /// and the `ROO_ENV_HANDOFF` value it printed.
    async fn offer_env(
        &self,
        launch: &Launch,
        env: &BTreeMap<String, String>,
        handed: &WorkerHandoff,
    ) -> Result<(Handoff, String), SshError> {
        let ssh = &self.inner.ssh;
        let label = format!("{}+{}", launch.team.name(), launch.name);
        let line = sh_join(&command::serve_handoff(&self.inner.host.roo_worker, &label))?;
        let mut child = Command::new(ssh.program())
            .args(ssh.argv(&line))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| SshError::Spawn {
                program: ssh.program().display().to_string(),
                source,
            })?;
        let what = "hand the environment over";
        let stderr = child.stderr.take().map(|mut err| {
            tokio::spawn(async move {
                let mut text = Vec::new();
                let _ = (&mut err).take(64 * 1024).read_to_end(&mut text).await;
                String::from_utf8_lossy(&text).into_owned()
            })
        });
        let text = serde_json::to_vec(&serde_json::json!({
            "env": env,
            "launch": handed.to_json(),
        }))
        .map_err(|e| self.failed(what, e.to_string()))?;
        if let Some(mut stdin) = child.stdin.take() {
            // The secrets, prompt and config go through ssh's stdin, never a command
            // line; then EOF.
            let written = stdin.write_all(&text).await;
            drop(stdin);
            if let Err(e) = written {
                let detail = describe(e.to_string(), stderr).await;
                return Err(self.failed(what, detail));
            }
        }
        let mut first = String::new();
        let read = match child.stdout.take() {
            Some(out) => {
                let mut out = tokio::io::BufReader::new(out);
                tokio::time::timeout(START_TIMEOUT, out.read_line(&mut first)).await
            }
            None => Ok(Ok(0)),
        };
        let value = first.trim().to_string();
        let valid = value.starts_with('/') && value.contains('#') && !value.contains('\0');
        if !matches!(read, Ok(Ok(n)) if n > 0) || !valid {
            let _ = child.start_kill();
            let status = child.wait().await.ok();
            let mut detail = describe(String::new(), stderr).await;
            if detail.is_empty() {
                detail = match status {
                    Some(status) => format!("ssh ended ({status}) without an answer"),
                    None => "no answer".to_string(),
                };
            }
            return Err(self.failed(
                what,
                format!(
                    "{detail}; is {} there a roo-worker of this version (it needs \
                     --serve-handoff)?",
                    self.inner.host.roo_worker
                ),
            ));
        }
        Ok((Handoff { child }, value))
    }

    /// Waits until `launch`'s teammate joined from this host anew (an entry other than
    /// `before`), the handoff server ended without handing the environment over, or
    /// [`START_TIMEOUT`] passed (the error says which).
    async fn wait_joined(
        &self,
        launch: &Launch,
        before: Option<(Option<u32>, String)>,
        handoff: &mut Handoff,
    ) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        let host = self.inner.host.name.to_string();
        let mut pause = Duration::from_millis(20);
        loop {
            let (team, name, host, before) = (
                launch.team.clone(),
                launch.name.clone(),
                host.clone(),
                before.clone(),
            );
            let joined = tokio::task::spawn_blocking(move || {
                team.config().map(|c| {
                    c.member(name.as_str()).is_some_and(|m| {
                        m.host.as_deref() == Some(host.as_str())
                            && m.dead_at.is_none()
                            && m.pid.is_some()
                            && before.as_ref() != Some(&(m.pid, m.joined_at.to_string()))
                    })
                })
            })
            .await;
            if matches!(joined, Ok(Ok(true))) {
                return Ok(());
            }
            if let Ok(Some(status)) = handoff.child.try_wait()
                && !status.success()
            {
                return Err(format!(
                    "roo-worker never took the environment handed over ({status})"
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "roo-worker did not join the team within {} s",
                    START_TIMEOUT.as_secs()
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }
}

/// The handoff server's ssh, kept running until the worker joined (dropping it ends it).
struct Handoff {
    child: tokio::process::Child,
}

/// `detail`, or what ssh wrote on stderr.
async fn describe(detail: String, stderr: Option<tokio::task::JoinHandle<String>>) -> String {
    let said = match stderr {
        Some(task) => match tokio::time::timeout(Duration::from_secs(2), task).await {
            Ok(Ok(text)) => text.trim().to_string(),
            _ => String::new(),
        },
        None => String::new(),
    };
    match (detail.is_empty(), said.is_empty()) {
        (_, true) => detail,
        (true, false) => said,
        (false, false) => format!("{detail}: {said}"),
    }
}

/// ssh's failure: its stderr, with a hint for the usual causes.
fn ssh_failure(stderr: &[u8], status: std::process::ExitStatus) -> String {
    let text = String::from_utf8_lossy(stderr).trim().to_string();
    let hint = ssh_hint(&text);
    if text.is_empty() {
        format!("ssh ended with {status}")
    } else {
        format!("{text}{hint}")
    }
}

/// The environment handed to a teammate on another host: only the lead's secrets — the
/// API keys, `ROO_STORE` (the store this lead uses, `settings.store_setting`, also when
/// it comes from `store:` in the user's config) and `PGPASSWORD` — merged over that
/// host's own environment by the handoff server there. A teammate given a member role
/// gets that role's URL and password in place of the lead's
/// ([`crate::backend::pane::hand_member_login`], applied by the spawn).
pub fn handoff_env(settings: &crate::settings::AgentSettings) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> =
        roo_agent::exec::sandbox::handoff::current_env_for_handoff()
            .into_iter()
            .filter(|(name, _)| roo_agent::exec::sandbox::is_secret_env_name(name))
            .collect();
    if let Some(store) = &settings.store_setting {
        env.insert(roo_store::ROO_STORE_ENV.to_string(), store.clone());
    } else if !env.contains_key(roo_store::ROO_STORE_ENV)
        && let Ok(roo_store::StoreChoice::Postgres { url, .. }) =
            roo_store::StoreChoice::resolve_in(&settings.roo_home, &|name: &str| {
                roo_agent::exec::sandbox::secret_env(name)
            })
    {
        env.insert(roo_store::ROO_STORE_ENV.to_string(), url);
    }
    env
}

/// The `roo-worker` command line on `host` for `launch` — the flags a pane worker gets,
/// with `--host`, its clone there as `--cwd` and no `--config-root` (the lead's
/// repository is not there) — and what goes through the handoff instead: the prompt and
/// the project config the lead read in its own tree (`launch.settings.project_config`).
/// The clone, which the teammate can write, is never read for project config.
pub fn remote_worker_launch(
    host: &HostConfig,
    launch: &Launch,
    color: &str,
) -> (Vec<String>, WorkerHandoff) {
    let mut worker = WorkerLaunch::of(launch, color);
    worker.host = Some(host.name.to_string());
    worker.config_root = None;
    let mut argv = vec![host.roo_worker.clone()];
    argv.extend(worker.to_args());
    (argv, worker.handoff())
}

impl TeammateExecutor for SshExecutor {
    fn backend(&self) -> BackendType {
        BackendType::Tmux
    }

    fn label(&self) -> &'static str {
        "ssh"
    }

    fn spawn(&self, launch: Launch) -> BoxFuture<'_, Result<Vec<String>, ExecError>> {
        Box::pin(async move {
            let name = launch.name.clone();
            let start_error = |message: String| ExecError::Start {
                name: name.clone(),
                message,
            };
            let session = command::session_name(launch.team.name().as_str(), name.as_str());
            // Started again: its old session goes first. A session of that name this lead
            // did not start may hold a live teammate: refused.
            let old = self.inner.workers.remove(&name);
            if old.is_some() {
                self.stop_session(&session)
                    .await
                    .map_err(|e| start_error(format!("failed to {e}")))?;
            } else {
                let probe = sh_join(&self.inner.tmux.has_session(&session))
                    .map_err(|e| start_error(e.to_string()))?;
                if self
                    .run("look for the session", &probe, SSH_TIMEOUT)
                    .await
                    .is_ok()
                {
                    return Err(start_error(format!(
                        "tmux session {session} already exists on host {} and may run a \
                         teammate; stop it ({}) or pick another name",
                        self.inner.host.name,
                        self.inner.ssh.attach_hint(&self.inner.tmux, &session)
                    )));
                }
            }
            let color = self.inner.workers.next_color(&launch);
            let before = {
                let (team, who) = (launch.team.clone(), name.clone());
                tokio::task::spawn_blocking(move || {
                    team.config().ok().and_then(|c| {
                        c.member(who.as_str())
                            .map(|m| (m.pid, m.joined_at.to_string()))
                    })
                })
                .await
                .ok()
                .flatten()
            };
            let mut env = handoff_env(&launch.settings);
            crate::backend::pane::hand_member_login(&launch, &mut env)
                .map_err(|e| start_error(format!("failed to {e}")))?;
            let (argv, handed) = remote_worker_launch(&self.inner.host, &launch, &color);
            let (mut handoff, value) = self
                .offer_env(&launch, &env, &handed)
                .await
                .map_err(|e| start_error(format!("failed to {e}")))?;
            let start = self
                .inner
                .tmux
                .start(&session, (HANDOFF_ENV, &value), &argv);
            let line = sh_join(&start).map_err(|e| start_error(e.to_string()))?;
            if let Err(e) = self.run("start the tmux session", &line, SSH_TIMEOUT).await {
                return Err(start_error(format!("failed to {e}")));
            }
            self.inner.workers.insert(
                name.clone(),
                Worker {
                    session: session.clone(),
                    team: launch.team.clone(),
                    active: true,
                    stopping: false,
                },
            );
            let joined = self.wait_joined(&launch, before, &mut handoff).await;
            drop(handoff);
            if let Err(why) = joined {
                let last = self.last_lines(&session).await;
                let _ = self.stop_session(&session).await;
                self.inner.workers.remove(&name);
                return Err(start_error(if last.is_empty() {
                    why
                } else {
                    format!("{why}; its pane showed:\n{}", last.join("\n"))
                }));
            }
            Ok(vec![format!(
                "{name} runs on host {} in the tmux session {session}; watch it with: {}",
                self.inner.host.name,
                self.inner.ssh.attach_hint(&self.inner.tmux, &session)
            )])
        })
    }

    fn is_active(&self, name: &Name) -> bool {
        self.inner
            .workers
            .get(name)
            .is_some_and(|w| w.active && !w.stopping)
    }

    fn kill(&self, name: &Name) -> BoxFuture<'_, Result<(), ExecError>> {
        // Not running from now on, but kept until its session is stopped: a stop cut
        // short (the lead exiting) is then still done by `shutdown_all` or the drop.
        let session = self.inner.workers.update(name, |w| {
            w.stopping = true;
            w.session.clone()
        });
        let name = name.clone();
        Box::pin(async move {
            let session = session.ok_or(ExecError::Unknown {
                backend: "ssh",
                name: name.clone(),
            })?;
            let stopped = self.stop_session(&session).await;
            self.inner
                .workers
                .remove_if(&name, |w| w.stopping && w.session == session);
            stopped.map_err(|e| ExecError::Stop {
                name,
                message: format!("failed to {e}"),
            })
        })
    }

    fn shutdown_all(&self, keep: bool) -> BoxFuture<'_, ()> {
        let workers = self.inner.workers.drain();
        Box::pin(async move {
            if keep {
                return;
            }
            let stops = workers.iter().map(|w| self.stop_session(&w.session));
            for stopped in futures_util::future::join_all(stops).await {
                if let Err(e) = stopped {
                    tracing::warn!(error = %e, "failed to stop a teammate on another host");
                }
            }
        })
    }

    fn capture(&self, name: &Name) -> BoxFuture<'_, Result<String, ExecError>> {
        let session = self.inner.workers.get(name).map(|w| w.session);
        let name = name.clone();
        Box::pin(async move {
            let session = session.ok_or(ExecError::Unknown {
                backend: "ssh",
                name,
            })?;
            let line =
                sh_join(&self.inner.tmux.capture(&session)).map_err(|e| ExecError::Backend {
                    backend: "ssh",
                    source: Box::new(e),
                })?;
            self.run("read the pane", &line, SSH_TIMEOUT)
                .await
                .map_err(|e| ExecError::Backend {
                    backend: "ssh",
                    source: Box::new(e),
                })
        })
    }
}

impl Drop for Inner {
    /// The last handle is gone without `shutdown_all` (a panic, an early exit): each
    /// session gets its stop over ssh, started and not waited for.
    fn drop(&mut self) {
        for worker in self.workers.drain() {
            if let Ok(script) = self.tmux.stop_script(&worker.session) {
                let _ = std::process::Command::new(self.ssh.program())
                    .args(self.ssh.argv(&script))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::PathBuf;

    use super::*;

    fn host() -> HostConfig {
        HostConfig {
            name: Name::parse("b").unwrap(),
            ssh: "alice@b".into(),
            repo: PathBuf::from("/srv/app"),
            roo_worker: "/opt/roo/roo-worker".into(),
            ssh_config: None,
            tmux_socket: Some(Name::parse("roo").unwrap()),
        }
    }

    fn launch(dir: &std::path::Path) -> Launch {
        let home = roo_store::RooHome::new(dir);
        let t = Name::parse("crew").unwrap();
        let team = Team::create(
            &home,
            t.clone(),
            "",
            roo_store::Member::new(Name::parse("lead").unwrap(), &t),
            vec![],
        )
        .unwrap();
        let mut settings = crate::settings::AgentSettings::new(
            crate::settings::Identity::teammate(
                Name::parse("alice").unwrap(),
                t.clone(),
                Name::parse("lead").unwrap(),
            ),
            dir.to_path_buf(),
        );
        settings.config_root = Some(PathBuf::from("/lead/repo"));
        settings.project_config = Some(roo_agent::config::HandedProjectConfig {
            root: PathBuf::from("/lead/repo"),
            project: Some("rules: {deny: [\"Bash(rm *)\"]}\n".into()),
            local: None,
            trusted: true,
            instructions: Vec::new(),
        });
        Launch {
            team,
            name: Name::parse("alice").unwrap(),
            lead: Name::parse("lead").unwrap(),
            prompt: "it's $(done);".into(),
            settings,
            plan_mode_required: false,
            mode_after_plan: roo_agent::permissions::PermissionMode::Default,
            agent_type: None,
            model: None,
            work_dir: PathBuf::from("/srv/app/.roocode/worktrees/crew+alice"),
            color: None,
            tools: Vec::new(),
            lead_key: None,
            member_login: None,
        }
    }

    #[test]
    fn the_remote_worker_gets_the_pane_flags_its_host_and_no_secret() {
        let host = host();
        let dir = tempfile::tempdir().unwrap();
        let launch = launch(dir.path());
        let (argv, handed) = remote_worker_launch(&host, &launch, "blue");
        assert_eq!(argv[0], "/opt/roo/roo-worker");
        assert!(argv.contains(&"--host=b".to_string()), "{argv:?}");
        assert!(
            argv.contains(&"--cwd=/srv/app/.roocode/worktrees/crew+alice".to_string()),
            "{argv:?}"
        );
        assert!(
            !argv.iter().any(|a| a.starts_with("--config-root")),
            "{argv:?}"
        );
        // The prompt and the lead's project config go through the handoff, not argv.
        assert!(
            !argv
                .iter()
                .any(|a| a.contains("$(done)") || a.contains("rules")),
            "{argv:?}"
        );
        assert_eq!(handed.prompt.as_deref(), Some("it's $(done);"));
        assert_eq!(handed.project_config, launch.settings.project_config);
        // The whole ssh command line of the start: no secret of the environment on it.
        let tmux = RemoteTmux::new(Some("roo".into()));
        let start = tmux.start(
            "roo-crew-alice",
            (HANDOFF_ENV, "/r/run/handoff/crew_alice-1.sock#00ff"),
            &argv,
        );
        let ssh = Ssh::new(&host).unwrap();
        let line: Vec<String> = ssh
            .argv(&sh_join(&start).unwrap())
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let all = line.join(" ");
        for secret in ["sk-", "ROO_STORE", "PGPASSWORD", "postgresql://", "API_KEY"] {
            assert!(!all.contains(secret), "{secret} on {all}");
        }
        assert!(all.contains("ROO_ENV_HANDOFF=/r/run/handoff/crew_alice-1.sock#00ff"));
    }

    /// The secrets reach the handoff server through ssh's stdin, never its argv: a fake
    /// `ssh` records both.
    #[tokio::test]
    async fn the_environment_goes_to_ssh_stdin_and_never_on_its_command_line() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("record");
        let fake = dir.path().join("ssh");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{r}.argv'\n\
                 cat > '{r}.stdin'\necho '/r/run/handoff/crew_alice-1.sock#00ff'\n",
                r = record.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let host = host();
        let ssh = Ssh::new(&host).unwrap().with_program(&fake);
        let executor = SshExecutor::with_ssh(host, ssh);
        let launch = launch(dir.path());
        let env: BTreeMap<String, String> = [
            ("OPENAI_API_KEY", "sk-canary-5521"),
            ("ROO_STORE", "postgresql://roo:pw-canary@db/roo"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let handed = WorkerHandoff {
            prompt: Some("prompt-canary-7730".into()),
            project_config: launch.settings.project_config.clone(),
            clone_gate: None,
        };
        let (handoff, value) = executor.offer_env(&launch, &env, &handed).await.unwrap();
        drop(handoff);
        assert_eq!(value, "/r/run/handoff/crew_alice-1.sock#00ff");
        let argv = std::fs::read_to_string(format!("{}.argv", record.display())).unwrap();
        let stdin = std::fs::read_to_string(format!("{}.stdin", record.display())).unwrap();
        assert_eq!(
            argv.lines().collect::<Vec<_>>(),
            [
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=yes",
                "--",
                "alice@b",
                "'/opt/roo/roo-worker' '--serve-handoff' 'crew+alice'"
            ]
        );
        for secret in [
            "sk-canary-5521",
            "pw-canary",
            "prompt-canary-7730",
            "Bash(rm *)",
        ] {
            assert!(!argv.contains(secret), "{secret} on the command line");
            assert!(stdin.contains(secret), "{secret} not handed over: {stdin}");
        }
        // A server that answers nothing usable is an error saying what to check.
        std::fs::write(
            &fake,
            "#!/bin/sh\ncat > /dev/null\necho 'roo-worker: command not found' >&2\nexit 127\n",
        )
        .unwrap();
        let err = executor
            .offer_env(&launch, &env, &handed)
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("command not found") && err.contains("--serve-handoff"),
            "{err}"
        );
    }
}
