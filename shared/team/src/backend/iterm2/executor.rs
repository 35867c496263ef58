//! [`ITerm2Executor`]: the iTerm2 backend as a [`TeammateExecutor`], on
//! [`ITerm2Panes`]. What it shares with the tmux backend (the worker's argv and colour,
//! the credentials handoff, the join wait, the wake-up, ending a worker) is
//! [`crate::backend::pane`]'s.
//!
//! - **Start**: the handoff file is written (the lead's environment, keys included, in a
//!   private file; only its path goes into the launcher), a pane is split and titled
//!   and its shell runs the launcher ([`ITerm2Panes::spawn`]), which first writes its
//!   pid to a private file and then `exec`s `roo-worker`, so that pid is the worker's.
//!   The spawn returns once the worker has joined the team with that pid; the worker
//!   records `backend_type: iterm2` and its session (`$ITERM_SESSION_ID`'s GUID) as
//!   `pane_id`. A worker that exits first, or a pane closed first, is an error, and its
//!   pane is closed.
//! - **Wake**: SIGURG to the worker's pid, as for tmux.
//! - **Liveness**: the worker's pid is in the roster, so the lead's monitor declares it
//!   dead when it ends (closing a pane hangs up its worker). [`ITerm2Executor::
//!   watch_sessions`] also ends a worker whose session is no longer listed by `it2`
//!   while its process lives on.
//! - **Cleanup**: only sessions this lead created are closed: a teammate's when it is
//!   killed or started again, all of them at the lead's exit unless kept. A worker that
//!   ended on its own leaves its pane (its shell and last output) until then.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use roo_agent::sandbox::handoff::HANDOFF_ENV;
use roo_store::{BackendType, Name, pid_alive};

use super::{ITerm2Panes, It2, It2Error, PaneLaunch, SessionId, commands, lock};
use crate::backend::executor::{ExecError, Launch, TeammateExecutor};
use crate::backend::pane::{self, START_TIMEOUT, end_process, signal};

/// How often [`ITerm2Executor::watch_sessions`] lists iTerm2's sessions (each time runs
/// `it2`, which connects to iTerm2's API).
pub const SESSION_WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// How often a starting pane is checked for its session while its pid is awaited.
const SESSION_CHECK: Duration = Duration::from_secs(1);

/// One worker this executor started.
#[derive(Debug, Clone)]
struct Worker {
    session: SessionId,
    pid: u32,
    handoff: Option<PathBuf>,
}

#[derive(Default)]
struct State {
    workers: HashMap<Name, Worker>,
    /// Spawns so far (picks the next colour).
    spawned: usize,
}

struct Inner {
    panes: ITerm2Panes,
    worker: PathBuf,
    handoff_dir: PathBuf,
    state: Mutex<State>,
}

/// Pane teammates in iTerm2. Cheap to clone; clones share the panes.
#[derive(Clone)]
pub struct ITerm2Executor {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ITerm2Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ITerm2Executor")
            .field("panes", &self.inner.panes)
            .finish_non_exhaustive()
    }
}

impl ITerm2Executor {
    /// An executor splitting panes from the lead's session `lead` through `it2`, running
    /// `worker` (the `roo-worker` binary, an absolute path), writing launchers under
    /// `roo_home`'s `run/iterm2` and credential handoffs under its `run/handoff` (both
    /// mode 0700).
    pub fn new(it2: It2, lead: SessionId, worker: PathBuf, roo_home: &Path) -> ITerm2Executor {
        ITerm2Executor {
            inner: Arc::new(Inner {
                panes: ITerm2Panes::new(it2, lead, roo_home.join("run").join("iterm2")),
                worker,
                handoff_dir: pane::handoff_dir(roo_home),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// The executor a lead inside iTerm2 gets: panes split from its session
    /// (`$ITERM_SESSION_ID`), through the `it2` at `it2`.
    pub fn from_env(
        it2: PathBuf,
        worker: PathBuf,
        roo_home: &Path,
    ) -> Result<ITerm2Executor, It2Error> {
        let lead = std::env::var("ITERM_SESSION_ID").ok();
        let lead = SessionId::parse(lead.as_deref().ok_or(It2Error::NoLeadSession)?)?;
        Ok(ITerm2Executor::new(It2::new(it2), lead, worker, roo_home))
    }

    /// The panes it drives.
    pub fn panes(&self) -> &ITerm2Panes {
        &self.inner.panes
    }

    /// The session of teammate `name`, if this executor started it.
    pub fn session_of(&self, name: &Name) -> Option<SessionId> {
        lock(&self.inner.state)
            .workers
            .get(name)
            .map(|w| w.session.clone())
    }

    /// Starts a task that, every [`SESSION_WATCH_INTERVAL`] until `cancel`, ends the
    /// worker of a session iTerm2 no longer lists while its process lives on (so the
    /// lead's monitor sees the death).
    pub fn watch_sessions(&self, cancel: tokio_util::sync::CancellationToken) {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(SESSION_WATCH_INTERVAL) => {}
                    () = cancel.cancelled() => return,
                }
                let Some(inner) = weak.upgrade() else { return };
                ITerm2Executor { inner }.end_orphans().await;
            }
        });
    }

    /// One round of [`ITerm2Executor::watch_sessions`].
    async fn end_orphans(&self) {
        let workers: Vec<(Name, Worker)> = lock(&self.inner.state)
            .workers
            .iter()
            .filter(|(_, w)| pid_alive(w.pid))
            .map(|(n, w)| (n.clone(), w.clone()))
            .collect();
        if workers.is_empty() {
            return;
        }
        // An it2 that fails says nothing about the sessions: try again next round.
        let Ok(listed) = self.inner.panes.listed().await else {
            return;
        };
        for (name, worker) in workers {
            if !listed.iter().any(|s| s.id == worker.session.as_str()) {
                tracing::warn!(member = %name, session = %worker.session, "iTerm2 session closed; ending its worker");
                end_process(worker.pid).await;
            }
        }
    }

    /// Waits for the launcher in `session` to write its pid to `pid_file`.
    async fn wait_pid(&self, session: &SessionId, pid_file: &Path) -> Result<u32, String> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut next_check = Instant::now() + SESSION_CHECK;
        let mut pause = Duration::from_millis(2);
        loop {
            if let Ok(text) = std::fs::read_to_string(pid_file)
                && let Some(line) = text.strip_suffix('\n')
                && let Ok(pid) = line.trim().parse::<u32>()
            {
                return Ok(pid);
            }
            if Instant::now() >= next_check {
                next_check = Instant::now() + SESSION_CHECK;
                if let Ok(false) = self.inner.panes.is_alive(session).await {
                    return Err(format!(
                        "its iTerm2 session {session} closed before roo-worker started"
                    ));
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the shell of iTerm2 session {session} did not run the launcher within \
                     {} s (typed: {:?}); is the profile's shell interactive and \
                     sh-compatible?",
                    START_TIMEOUT.as_secs(),
                    " /bin/sh '<launcher>'"
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// Closes `session` (ours), logging a failure.
    async fn close(&self, session: &SessionId) {
        if let Err(e) = self.inner.panes.close(session).await {
            tracing::debug!(session = %session, error = %e, "failed to close an iTerm2 pane");
        }
    }
}

impl TeammateExecutor for ITerm2Executor {
    fn backend(&self) -> BackendType {
        BackendType::Iterm2
    }

    fn label(&self) -> &'static str {
        "iTerm2"
    }

    fn spawn(&self, launch: Launch) -> BoxFuture<'_, Result<Vec<String>, ExecError>> {
        Box::pin(async move {
            let name = launch.name.clone();
            let start = |message: String| ExecError::Start {
                name: name.clone(),
                message,
            };
            // Started again (its worker ended): its old pane goes first.
            let old = lock(&self.inner.state).workers.remove(&name);
            if let Some(old) = old {
                pane::discard_handoff(old.handoff.as_deref());
                self.close(&old.session).await;
            }
            let (color, seq) = {
                let mut state = lock(&self.inner.state);
                state.spawned += 1;
                (
                    pane::color_for(&launch, state.spawned - 1),
                    state.spawned - 1,
                )
            };
            // The environment first: nothing is left behind if it cannot be written.
            let (handoff, handoff_env) =
                pane::write_handoff(&self.inner.handoff_dir, &launch).await?;
            let pid_file = self.inner.panes.launchers().join(format!(
                "{}+{name}-{}-{seq}.pid",
                launch.team.name(),
                std::process::id()
            ));
            let _ = std::fs::remove_file(&pid_file);
            let pane_launch = PaneLaunch {
                cwd: launch.work_dir.clone(),
                env: vec![(HANDOFF_ENV.to_string(), handoff_env)],
                argv: pane::worker_argv(&self.inner.worker, &launch, &color),
                pid_file: Some(pid_file.clone()),
            };
            let session = match self.inner.panes.spawn(&name, &pane_launch).await {
                Ok(session) => session,
                Err(e) => {
                    let _ = std::fs::remove_file(&handoff);
                    return Err(e.into());
                }
            };
            let pid = self.wait_pid(&session, &pid_file).await;
            let _ = std::fs::remove_file(&pid_file);
            let pid = match pid {
                Ok(pid) => pid,
                Err(why) => {
                    let _ = std::fs::remove_file(&handoff);
                    self.close(&session).await;
                    return Err(start(why));
                }
            };
            lock(&self.inner.state).workers.insert(
                name.clone(),
                Worker {
                    session: session.clone(),
                    pid,
                    handoff: Some(handoff.clone()),
                },
            );
            let joined = pane::wait_joined(&launch, pid).await;
            // The worker deletes it when it starts; a worker that never did must not
            // leave the keys behind.
            let _ = std::fs::remove_file(&handoff);
            if let Some(w) = lock(&self.inner.state).workers.get_mut(&name) {
                w.handoff = None;
            }
            if let Err(why) = joined {
                end_process(pid).await;
                self.close(&session).await;
                lock(&self.inner.state).workers.remove(&name);
                return Err(start(why));
            }
            Ok(Vec::new())
        })
    }

    fn is_active(&self, name: &Name) -> bool {
        lock(&self.inner.state)
            .workers
            .get(name)
            .is_some_and(|w| pid_alive(w.pid))
    }

    fn kill(&self, name: &Name) -> BoxFuture<'_, Result<(), ExecError>> {
        let worker = lock(&self.inner.state).workers.remove(name);
        let name = name.clone();
        Box::pin(async move {
            let worker = worker.ok_or(ExecError::Unknown {
                backend: "iTerm2",
                name,
            })?;
            end_process(worker.pid).await;
            pane::discard_handoff(worker.handoff.as_deref());
            self.close(&worker.session).await;
            Ok(())
        })
    }

    fn shutdown_all(&self, keep: bool) -> BoxFuture<'_, ()> {
        let workers: Vec<Worker> = lock(&self.inner.state)
            .workers
            .drain()
            .map(|(_, w)| w)
            .collect();
        Box::pin(async move {
            for worker in &workers {
                pane::discard_handoff(worker.handoff.as_deref());
            }
            if keep {
                self.inner.panes.forget_all();
                return;
            }
            futures_util::future::join_all(workers.iter().map(|w| end_process(w.pid))).await;
            // Every pane this lead opened, also those whose worker ended on its own.
            for e in self.inner.panes.close_all().await {
                tracing::warn!(error = %e, "failed to close an iTerm2 pane");
            }
        })
    }

    /// Sends the worker's pid [`crate::backend::nudge::NUDGE_SIGNAL`].
    fn wake(&self, name: &Name) -> Result<(), ExecError> {
        let pid = lock(&self.inner.state).workers.get(name).map(|w| w.pid);
        pane::wake("iTerm2", name, pid)
    }
}

impl Drop for Inner {
    /// The last handle is gone without `shutdown_all` (a panic, an early exit): end the
    /// workers and ask `it2` to close the panes this executor created, without waiting.
    fn drop(&mut self) {
        let state = std::mem::take(
            &mut *self
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for worker in state.workers.values() {
            pane::discard_handoff(worker.handoff.as_deref());
            signal(worker.pid, nix::sys::signal::Signal::SIGTERM);
        }
        for (_, session) in self.panes.panes() {
            let _ = std::process::Command::new(self.panes.it2.bin())
                .args(commands::close(&session))
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const LEAD: &str = "2A3B1C4D-0000-4000-8000-00000000ABCD";
    const ALICE: &str = "11111111-2222-4333-8444-555555555555";

    /// An executor on a fake `it2` that answers every command with `list.json`.
    fn executor(dir: &Path) -> ITerm2Executor {
        let bin = dir.join("it2");
        std::fs::write(
            &bin,
            format!("#!/bin/sh\ncat '{}'\n", dir.join("list.json").display()),
        )
        .unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        ITerm2Executor::new(
            It2::new(bin),
            SessionId::parse(LEAD).unwrap(),
            dir.join("roo-worker"),
            dir,
        )
    }

    #[tokio::test]
    async fn the_session_watch_ends_a_worker_whose_session_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let executor = executor(dir.path());
        let mut child = std::process::Command::new("sleep")
            .arg("300")
            .spawn()
            .unwrap();
        let alice = Name::parse("alice").unwrap();
        lock(&executor.inner.state).workers.insert(
            alice.clone(),
            Worker {
                session: SessionId::parse(ALICE).unwrap(),
                pid: child.id(),
                handoff: None,
            },
        );
        let list = |text: String| std::fs::write(dir.path().join("list.json"), text).unwrap();
        // Listed: it stays.
        list(format!(r#"[{{"id": "{LEAD}"}}, {{"id": "{ALICE}"}}]"#));
        executor.end_orphans().await;
        assert!(
            child.try_wait().unwrap().is_none(),
            "a listed session's worker was ended"
        );
        assert!(executor.is_active(&alice));
        // An answer that is not a listing says nothing: it stays.
        list("Error".to_string());
        executor.end_orphans().await;
        assert!(child.try_wait().unwrap().is_none());
        // Gone from the listing: its worker is ended.
        list(format!(r#"[{{"id": "{LEAD}"}}]"#));
        executor.end_orphans().await;
        let ended = child.try_wait().unwrap();
        if ended.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert!(ended.is_some_and(|s| !s.success()), "{ended:?}");
    }

    #[test]
    fn waking_a_stranger_names_the_backend() {
        let dir = tempfile::tempdir().unwrap();
        let executor = executor(dir.path());
        let bob = Name::parse("bob").unwrap();
        let err = executor.wake(&bob).unwrap_err().to_string();
        assert!(err.contains("iTerm2 backend"), "{err}");
        assert!(!executor.is_active(&bob));
    }
}
