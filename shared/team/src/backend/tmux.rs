//! The tmux backend: each teammate is a `roo-worker` process in its own tmux pane.
//!
//! [`Tmux`] runs the `tmux` CLI against one server, always named explicitly (`-S` the
//! socket of `$TMUX`, or `-L` a socket name — tests use a private `-L roo-test-…`
//! server with `-f /dev/null`), and the command lines it issues are built by plain
//! functions ([`commands`]) that are unit-tested. [`TmuxHost`] is its
//! [`PaneHost`]; [`TmuxExecutor`] is the [`PaneExecutor`] on it, which does what pane
//! backends share (handoff, worker command line, join wait, wake-up, watch, cleanup):
//!
//! - **Where**: [`Placement::Window`] splits panes from the lead's window (the lead runs
//!   inside tmux); [`Placement::Session`] puts them in a detached session `roo-<team>`
//!   (its first pane is the first teammate's), and the spawn's notice says how to attach.
//!   The window's layout is `tiled` after every split and close.
//! - **Start**: a pane is created running a placeholder (`split-window -d -P -F
//!   '#{pane_id}' … sleep`), titled with the teammate's name (`select-pane -T`, shown on
//!   the pane's border in the teammate's colour: a pane user option the border format
//!   reads, since border styles are window-wide in tmux), set to stay
//!   open if the worker fails (`remain-on-exit failed`: its error stays readable), then
//!   `respawn-pane -k` replaces the placeholder with the `roo-worker` command, run
//!   directly (no shell; nothing is typed into a shell). The spawn returns once the
//!   worker has joined the team with the pane's pid, so the roster records its pid,
//!   `pane_id` and `backend_type: tmux` (the worker reads `TMUX_PANE`); a worker that
//!   exits first is an error carrying the pane's last lines.
//! - **Credentials**: nothing secret is on tmux's argv. The lead's environment, API
//!   keys included, goes through a private one-time socket named with its token by
//!   `ROO_ENV_HANDOFF` (`roo_agent::exec::sandbox::handoff`); the worker takes it at start.
//! - **Wake**: after an inbox write the worker's pid gets `SIGURG` ([`super::nudge`]).
//! - **Liveness**: the worker's pid is in the roster, so the lead's monitor (the one
//!   liveness check) declares a worker whose process is gone dead within its 200 ms
//!   poll and releases its tasks. A closed pane hangs up its worker (SIGHUP ends it);
//!   the executor's own pane watch ends a worker whose pane is gone or dead but whose
//!   process somehow lives, so the monitor sees that too.
//! - **Cleanup**: only panes this executor created are ever closed (never the lead's
//!   or the user's); at the lead's exit every worker gets SIGTERM (it marks itself idle
//!   and ends its commands) and its pane is closed, unless the user asked to keep them
//!   (`--keep-panes`).

pub mod commands;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use futures_util::future::BoxFuture;
use roo_store::{BackendType, Name};
use tokio::process::Command;

use crate::backend::executor::{ExecError, Launch};
use crate::backend::pane_executor::{Opened, PaneExecutor, PaneHost};

/// How often the executor checks that its panes still exist.
pub const PANE_WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// Why a tmux command failed. Read after "failed to ".
#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    #[error("run {bin} {args}: {source}; is tmux installed (tmux 3.3 or later)?")]
    Spawn {
        bin: String,
        args: String,
        source: std::io::Error,
    },
    #[error("run tmux {args}: {stderr}")]
    Failed { args: String, stderr: String },
    #[error("read tmux's answer to {args}: {answer:?}")]
    Answer { args: String, answer: String },
}

impl From<TmuxError> for ExecError {
    fn from(source: TmuxError) -> ExecError {
        ExecError::Backend {
            backend: "tmux",
            source: Box::new(source),
        }
    }
}

/// Which tmux server to talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Socket {
    /// `-L NAME`: a named server (`tmux -L NAME attach` reaches it).
    Name(String),
    /// `-S PATH`: the server at this socket path (the one of `$TMUX`).
    Path(PathBuf),
}

impl Socket {
    /// The server the process runs in: the socket path of `$TMUX`
    /// (`/tmp/tmux-1000/default,1234,0`), if set.
    pub fn of_tmux_env(tmux: &str) -> Option<Socket> {
        let path = tmux.split(',').next().filter(|p| !p.is_empty())?;
        Some(Socket::Path(PathBuf::from(path)))
    }
}

/// The `tmux` CLI for one server.
#[derive(Debug, Clone)]
pub struct Tmux {
    bin: PathBuf,
    socket: Option<Socket>,
    config: Option<PathBuf>,
}

impl Tmux {
    /// `bin` (e.g. `tmux`, or its path from `which`) talking to `socket` (`None`: the
    /// default server).
    pub fn new(bin: impl Into<PathBuf>, socket: Option<Socket>) -> Tmux {
        Tmux {
            bin: bin.into(),
            socket,
            config: None,
        }
    }

    /// Starts a server it creates with this config file (`/dev/null` in tests).
    pub fn with_config(mut self, config: impl Into<PathBuf>) -> Tmux {
        self.config = Some(config.into());
        self
    }

    /// The arguments that select the server, before the command.
    pub fn server_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        match &self.socket {
            Some(Socket::Name(name)) => args.extend(["-L".to_string(), name.clone()]),
            Some(Socket::Path(path)) => args.extend(["-S".to_string(), path.display().to_string()]),
            None => {}
        }
        if let Some(config) = &self.config {
            args.extend(["-f".to_string(), config.display().to_string()]);
        }
        args
    }

    /// Runs one tmux command; returns its stdout.
    pub async fn run(&self, args: &[String]) -> Result<String, TmuxError> {
        let shown = args.join(" ");
        let out = Command::new(&self.bin)
            .args(self.server_args())
            .args(args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|source| TmuxError::Spawn {
                bin: self.bin.display().to_string(),
                args: shown.clone(),
                source,
            })?;
        if !out.status.success() {
            return Err(TmuxError::Failed {
                args: shown,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The same, blocking (for `Drop`).
    fn run_blocking(&self, args: &[String]) {
        let _ = std::process::Command::new(&self.bin)
            .args(self.server_args())
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }

    /// How a person attaches to session `session` of this server.
    pub fn attach_command(&self, session: &str) -> String {
        let mut line = vec!["tmux".to_string()];
        match &self.socket {
            Some(Socket::Name(name)) => line.extend(["-L".to_string(), name.clone()]),
            Some(Socket::Path(path)) => line.extend(["-S".to_string(), path.display().to_string()]),
            None => {}
        }
        line.extend(["attach".to_string(), "-t".to_string(), session.to_string()]);
        line.join(" ")
    }
}

/// Where an executor's panes go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Split from the window of this pane (the lead's `$TMUX_PANE`).
    Window { lead_pane: String },
    /// A detached session, created on first use: this name, or `roo-<team>` of the
    /// first teammate's team.
    Session { name: Option<String> },
}

/// The detached session of `team`: `roo-<team>`.
pub fn session_name(team: &Name) -> String {
    format!("roo-{team}")
}

#[derive(Default)]
struct HostState {
    /// Panes opened so far (the first split shows titles on the lead's window).
    opened: usize,
    /// The window's `pane-border-status` before this executor set it, to put back.
    border_before: Option<String>,
    /// The detached session's name, once chosen.
    session: Option<String>,
}

/// tmux as a [`PaneHost`]: panes per [`Placement`] on one server.
#[derive(Debug)]
pub struct TmuxHost {
    tmux: Tmux,
    placement: Placement,
    state: Mutex<HostState>,
}

impl std::fmt::Debug for HostState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostState")
            .field("opened", &self.opened)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

/// Pane teammates in tmux ([`PaneExecutor`] on [`TmuxHost`]).
pub type TmuxExecutor = PaneExecutor<TmuxHost>;

impl PaneExecutor<TmuxHost> {
    /// An executor placing panes per `placement` on `tmux`'s server, running `worker`
    /// (the `roo-worker` binary, an absolute path: a pane's `PATH` is the server's), and
    /// offering credential handoffs under `roo_home` (`run/handoff`, mode 0700).
    pub fn new(tmux: Tmux, placement: Placement, worker: PathBuf, roo_home: &Path) -> TmuxExecutor {
        PaneExecutor::with_host(
            TmuxHost {
                tmux,
                placement,
                state: Mutex::new(HostState::default()),
            },
            worker,
            roo_home,
        )
    }

    /// The executor a lead gets from its environment: inside tmux (`$TMUX` and
    /// `$TMUX_PANE` set) panes split from the lead's window on that server; with `$TMUX`
    /// but no pane, a detached session `roo-<team>` on that server; else a detached
    /// session on the default server. `tmux` is the binary.
    pub fn from_env(tmux: PathBuf, worker: PathBuf, roo_home: &Path) -> TmuxExecutor {
        let socket = std::env::var("TMUX")
            .ok()
            .and_then(|t| Socket::of_tmux_env(&t));
        let pane = std::env::var("TMUX_PANE")
            .ok()
            .filter(|p| p.starts_with('%'));
        let placement = match (&socket, pane) {
            (Some(_), Some(lead_pane)) => Placement::Window { lead_pane },
            _ => Placement::Session { name: None },
        };
        TmuxExecutor::new(Tmux::new(tmux, socket), placement, worker, roo_home)
    }

    /// The tmux CLI it uses.
    pub fn tmux(&self) -> &Tmux {
        &self.host().tmux
    }

    /// Ends the worker of a pane that was closed or died while its process lives on,
    /// every [`PANE_WATCH_INTERVAL`] until `cancel` ([`PaneExecutor::watch`]).
    pub fn watch_panes(&self, cancel: tokio_util::sync::CancellationToken) {
        self.watch(cancel);
    }
}

impl TmuxHost {
    /// The pane a new teammate starts in: the session's unused first pane, or a new
    /// split. Returns its id, the notices, and the lead's pane when it is the first split
    /// of the lead's window (whose borders then get titles: [`TmuxHost::show_titles`]).
    async fn new_pane(
        &self,
        team: &Name,
        work_dir: &Path,
    ) -> Result<(String, Vec<String>, Option<String>), ExecError> {
        let tmux = &self.tmux;
        let mut notices = Vec::new();
        match &self.placement {
            Placement::Window { lead_pane } => {
                let out = match tmux.run(&commands::split_window(lead_pane, work_dir)).await {
                    Ok(out) => out,
                    Err(TmuxError::Failed { stderr, .. }) if stderr.contains("no space") => {
                        // The lead's window is full: a window of its own, beside it.
                        let window = tmux.run(&commands::window_of(lead_pane)).await?;
                        let out = tmux
                            .run(&commands::new_window_after(window.trim(), work_dir))
                            .await?;
                        let pane = commands::pane_id(&out, "new-window")?;
                        for (option, value) in [
                            ("pane-border-status", "top"),
                            ("pane-border-format", commands::BORDER_FORMAT),
                        ] {
                            let _ = tmux
                                .run(&commands::set_window_option(&pane, option, value))
                                .await;
                        }
                        notices.push(
                            "the lead's tmux window has no room for another pane; this \
                             teammate got a window of its own in the same session"
                                .to_string(),
                        );
                        return Ok((pane, notices, None));
                    }
                    Err(e) => return Err(e.into()),
                };
                let first = lock(&self.state).opened == 0;
                let titles = first.then(|| lead_pane.clone());
                Ok((commands::pane_id(&out, "split-window")?, notices, titles))
            }
            Placement::Session { name } => {
                let name = lock(&self.state)
                    .session
                    .get_or_insert_with(|| name.clone().unwrap_or_else(|| session_name(team)))
                    .clone();
                let name = &name;
                let exists = tmux.run(&commands::has_session(name)).await.is_ok();
                if !exists {
                    let out = tmux.run(&commands::new_session(name, work_dir)).await?;
                    let pane = commands::pane_id(&out, "new-session")?;
                    let _ = tmux
                        .run(&commands::set_window_option(
                            &pane,
                            "pane-border-status",
                            "top",
                        ))
                        .await;
                    let _ = tmux
                        .run(&commands::set_window_option(
                            &pane,
                            "pane-border-format",
                            commands::BORDER_FORMAT,
                        ))
                        .await;
                    notices.push(format!(
                        "teammates run in the detached tmux session {name}; watch them with: {}",
                        tmux.attach_command(name)
                    ));
                    return Ok((pane, notices, None));
                }
                let out = tmux
                    .run(&commands::split_window(&format!("={name}:"), work_dir))
                    .await?;
                Ok((commands::pane_id(&out, "split-window")?, notices, None))
            }
        }
    }

    /// Shows pane titles on the borders of the lead's window if they are not shown,
    /// remembering the window's own setting (empty: inherited) to put back.
    async fn show_titles(&self, lead_pane: &str) {
        let tmux = &self.tmux;
        let shown = tmux
            .run(&commands::effective_option(lead_pane, "pane-border-status"))
            .await
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        if shown != "off" {
            return;
        }
        let local = tmux
            .run(&commands::show_window_option(
                lead_pane,
                "pane-border-status",
            ))
            .await
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let set = tmux
            .run(&commands::set_window_option(
                lead_pane,
                "pane-border-status",
                "top",
            ))
            .await;
        if set.is_ok() {
            let _ = tmux
                .run(&commands::set_window_option(
                    lead_pane,
                    "pane-border-format",
                    commands::BORDER_FORMAT,
                ))
                .await;
            lock(&self.state).border_before = Some(local);
        }
    }

    async fn tile(&self, pane: &str) {
        let _ = self.tmux.run(&commands::tiled(pane)).await;
    }

    /// Re-tiles the window the teammates' panes are in.
    async fn retile(&self, pane: &str) {
        let session = lock(&self.state).session.clone();
        match (&self.placement, session) {
            (Placement::Window { lead_pane }, _) => self.tile(lead_pane).await,
            (Placement::Session { .. }, Some(name)) => self.tile(&format!("={name}:")).await,
            (Placement::Session { .. }, None) => self.tile(pane).await,
        }
    }

    /// Dresses `pane` (its failures only logged: an older tmux lacks some options), then
    /// starts `argv` in it and returns the worker's pid; meanwhile shows the titles on the
    /// borders of `titles`, the lead's pane (see [`TmuxHost::new_pane`]). Each tmux run is
    /// a process of its own, so the ones that do not depend on each other run together.
    async fn start_in(
        &self,
        pane: &str,
        launch: &Launch,
        color: &str,
        argv: &[String],
        (handoff, titles): (&str, Option<String>),
    ) -> Result<u32, ExecError> {
        let tmux = &self.tmux;
        let titles = async {
            if let Some(lead_pane) = titles {
                self.show_titles(&lead_pane).await;
            }
        };
        let start = async {
            let dress = commands::dress_pane(pane, launch.name.as_str(), color);
            for (args, done) in dress
                .iter()
                .zip(futures_util::future::join_all(dress.iter().map(|a| tmux.run(a))).await)
            {
                if let Err(e) = done {
                    tracing::debug!(pane = %pane, args = ?args, error = %e, "failed to dress a pane");
                }
            }
            let out = tmux
                .run(&commands::respawn_pane_and_pid(
                    pane,
                    launch.start_dir(),
                    handoff,
                    argv,
                ))
                .await?;
            out.trim().parse::<u32>().map_err(|_| {
                ExecError::from(TmuxError::Answer {
                    args: "respawn-pane ; display-message #{pane_pid}".into(),
                    answer: out.clone(),
                })
            })
        };
        futures_util::future::join(titles, start).await.1
    }
}

impl PaneHost for TmuxHost {
    type Id = String;

    fn backend(&self) -> BackendType {
        BackendType::Tmux
    }

    fn label(&self) -> &'static str {
        "tmux"
    }

    fn watch_interval(&self) -> Duration {
        PANE_WATCH_INTERVAL
    }

    fn open<'a>(
        &'a self,
        launch: &'a Launch,
        color: &'a str,
        argv: Vec<String>,
        env: (String, String),
    ) -> BoxFuture<'a, Result<Opened<String>, ExecError>> {
        Box::pin(async move {
            let (pane, notices, titles) = self
                .new_pane(launch.team.name(), launch.start_dir())
                .await?;
            let started = self
                .start_in(&pane, launch, color, &argv, (&env.1, titles))
                .await;
            let pid = match started {
                Ok(pid) => pid,
                Err(e) => {
                    self.close(&pane).await;
                    return Err(e);
                }
            };
            lock(&self.state).opened += 1;
            self.retile(&pane).await;
            Ok(Opened {
                id: pane,
                pid,
                notices,
            })
        })
    }

    fn close<'a>(&'a self, id: &'a String) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let _ = self.tmux.run(&commands::kill_pane(id)).await;
            self.retile(id).await;
        })
    }

    fn live_ids(&self) -> BoxFuture<'_, Result<Vec<String>, ExecError>> {
        Box::pin(async move {
            let listing = self.tmux.run(&commands::list_panes()).await?;
            Ok(commands::parse_pane_list(&listing)
                .into_iter()
                .filter(|p| !p.dead)
                .map(|p| p.id)
                .collect())
        })
    }

    fn finish<'a>(&'a self, ids: Vec<String>, keep: bool) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if keep {
                return;
            }
            for id in &ids {
                let _ = self.tmux.run(&commands::kill_pane(id)).await;
            }
            let border = lock(&self.state).border_before.take();
            if let (Some(before), Placement::Window { lead_pane }) = (border, &self.placement) {
                for args in commands::restore_border(lead_pane, &before) {
                    let _ = self.tmux.run(&args).await;
                }
                self.tile(lead_pane).await;
            }
        })
    }

    fn finish_now(&self, ids: &[String]) {
        for id in ids {
            self.tmux.run_blocking(&commands::kill_pane(id));
        }
    }

    fn capture<'a>(&'a self, id: &'a String) -> BoxFuture<'a, Result<String, ExecError>> {
        Box::pin(async move { Ok(self.tmux.run(&commands::capture(id)).await?) })
    }

    fn last_lines<'a>(&'a self, id: &'a String) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move {
            let screen = self
                .tmux
                .run(&commands::capture_history(id))
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
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_server_is_always_named_and_the_attach_command_names_it_too() {
        assert_eq!(
            Socket::of_tmux_env("/tmp/tmux-1000/default,4242,0"),
            Some(Socket::Path(PathBuf::from("/tmp/tmux-1000/default")))
        );
        assert_eq!(Socket::of_tmux_env(",1,0"), None);
        let private =
            Tmux::new("tmux", Some(Socket::Name("roo-test-1".into()))).with_config("/dev/null");
        assert_eq!(
            private.server_args(),
            ["-L", "roo-test-1", "-f", "/dev/null"]
        );
        assert_eq!(
            private.attach_command("roo-crew"),
            "tmux -L roo-test-1 attach -t roo-crew"
        );
        let inside = Tmux::new("tmux", Socket::of_tmux_env("/tmp/s,1,0"));
        assert_eq!(inside.server_args(), ["-S", "/tmp/s"]);
        assert_eq!(
            Tmux::new("tmux", None).attach_command("roo-crew"),
            "tmux attach -t roo-crew"
        );
        assert_eq!(session_name(&Name::parse("crew").unwrap()), "roo-crew");
    }
}
