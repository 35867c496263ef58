//! [`PaneExecutor`]: pane teammates, whatever the terminal. A pane backend only says how
//! to open, list, read and close its panes ([`PaneHost`]: tmux, iTerm2); everything else
//! — the credentials handoff, the worker's command line and colour, waiting for it to
//! join, the wake-up, ending a worker, the pane watch, cleanup — happens here once, over
//! the worker table the ssh backend shares ([`super::workers`]).
//!
//! - **Start**: the handoff is offered first (nothing is left behind if that fails),
//!   then the host opens a pane running the worker's command line
//!   ([`super::worker_launch::WorkerLaunch`]) and says the worker's pid; the spawn
//!   returns once the worker has joined the team with that pid. A worker that exits
//!   first is an error carrying the pane's last lines where the host can read them, and
//!   its pane is closed. A teammate started again first loses its old pane.
//! - **Liveness**: the roster has the worker's pid, so the lead's monitor declares a
//!   dead worker dead; [`PaneExecutor::watch`] also ends a worker whose pane the host no
//!   longer lists while its process lives on.
//! - **Cleanup**: only panes this executor opened are ever closed; at the lead's exit
//!   every worker gets SIGTERM and its pane is closed, unless kept. A worker's handoff and
//!   clone gate go with it (a kept worker keeps its gate).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use roo_store::{BackendType, Name, pid_alive};

use crate::backend::executor::{ExecError, Launch, TeammateExecutor};
use crate::backend::pane::{self, end_process, signal};
use crate::backend::workers::{self, WorkerTable};

/// A pane the host opened, with the worker running in it.
#[derive(Debug)]
pub struct Opened<Id> {
    pub id: Id,
    /// The worker's pid.
    pub pid: u32,
    /// For the lead (e.g. how to attach to a detached session).
    pub notices: Vec<String>,
}

/// What a terminal offers pane teammates. Optional capabilities have defaults.
pub trait PaneHost: Send + Sync + 'static {
    /// A pane's id (tmux `%3`, an iTerm2 session GUID).
    type Id: Clone + std::fmt::Display + PartialEq + Send + Sync + 'static;

    /// The backend recorded in the roster.
    fn backend(&self) -> BackendType;

    /// The backend's name in messages.
    fn label(&self) -> &'static str;

    /// How often [`PaneExecutor::watch`] lists the panes.
    fn watch_interval(&self) -> Duration;

    /// Opens a pane for `launch`, titled and coloured `color`, running `argv` in
    /// `launch.work_dir` with `env` added; returns once the worker's pid is known.
    fn open<'a>(
        &'a self,
        launch: &'a Launch,
        color: &'a str,
        argv: Vec<String>,
        env: (String, String),
    ) -> BoxFuture<'a, Result<Opened<Self::Id>, ExecError>>;

    /// Closes pane `id` (one this executor opened), if it still exists.
    fn close<'a>(&'a self, id: &'a Self::Id) -> BoxFuture<'a, ()>;

    /// The panes that exist and run something now. An error says nothing about them.
    fn live_ids(&self) -> BoxFuture<'_, Result<Vec<Self::Id>, ExecError>>;

    /// Closes `ids` (their workers ended) and what else this executor made, at the lead's
    /// exit; with `keep`, leaves them and only forgets them.
    fn finish<'a>(&'a self, ids: Vec<Self::Id>, keep: bool) -> BoxFuture<'a, ()>;

    /// The same without waiting (the executor is dropped without a shutdown).
    fn finish_now(&self, ids: &[Self::Id]);

    /// The visible text of pane `id`.
    fn capture<'a>(&'a self, id: &'a Self::Id) -> BoxFuture<'a, Result<String, ExecError>> {
        let _ = id;
        let backend = self.label();
        Box::pin(async move {
            Err(ExecError::Unsupported {
                backend,
                what: "reading a teammate's screen",
            })
        })
    }

    /// The last lines pane `id` showed, for an error (empty where unreadable).
    fn last_lines<'a>(&'a self, id: &'a Self::Id) -> BoxFuture<'a, Vec<String>> {
        let _ = id;
        Box::pin(async { Vec::new() })
    }
}

/// One worker this executor started.
#[derive(Debug, Clone)]
struct Worker<Id> {
    pane: Id,
    pid: u32,
    handoff: Option<PathBuf>,
    /// The clone gate it was handed ([`crate::backend::clone_gate`]): removed when it is
    /// ended (a worker that died before reading it leaves nothing behind).
    clone_gate: Option<PathBuf>,
}

impl<Id> Worker<Id> {
    /// Removes what the lead left for the worker: its handoff and its clone gate.
    fn discard_files(&self) {
        pane::discard_handoff(self.handoff.as_deref());
        pane::discard_handoff(self.clone_gate.as_deref());
    }
}

struct Inner<H: PaneHost> {
    host: H,
    worker: PathBuf,
    handoff_dir: PathBuf,
    workers: WorkerTable<Worker<H::Id>>,
}

/// Pane teammates on `H`. Cheap to clone; clones share the panes.
pub struct PaneExecutor<H: PaneHost> {
    inner: Arc<Inner<H>>,
}

impl<H: PaneHost> Clone for PaneExecutor<H> {
    fn clone(&self) -> Self {
        PaneExecutor {
            inner: self.inner.clone(),
        }
    }
}

impl<H: PaneHost + std::fmt::Debug> std::fmt::Debug for PaneExecutor<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PaneExecutor")
            .field("host", &self.inner.host)
            .finish_non_exhaustive()
    }
}

impl<H: PaneHost> PaneExecutor<H> {
    /// An executor opening panes on `host`, running `worker` (the `roo-worker` binary, an
    /// absolute path) and offering credential handoffs under `roo_home`'s `run/handoff`.
    pub fn with_host(host: H, worker: PathBuf, roo_home: &Path) -> PaneExecutor<H> {
        PaneExecutor {
            inner: Arc::new(Inner {
                host,
                worker,
                handoff_dir: pane::handoff_dir(roo_home),
                workers: WorkerTable::new(),
            }),
        }
    }

    /// The host it opens panes on.
    pub fn host(&self) -> &H {
        &self.inner.host
    }

    /// The pane of teammate `name`, if this executor started it.
    pub fn pane_of(&self, name: &Name) -> Option<H::Id> {
        self.inner.workers.get(name).map(|w| w.pane)
    }

    /// Starts a task that, every [`PaneHost::watch_interval`] until `cancel`, ends the
    /// worker of a pane the host no longer lists while its process lives on (so the
    /// lead's monitor sees the death).
    pub fn watch(&self, cancel: tokio_util::sync::CancellationToken) {
        let interval = self.inner.host.watch_interval();
        workers::watch(Arc::downgrade(&self.inner), interval, cancel, |inner| {
            Box::pin(async move { PaneExecutor { inner }.end_orphans().await })
        });
    }

    /// One round of [`PaneExecutor::watch`].
    pub(crate) async fn end_orphans(&self) {
        let workers: Vec<(Name, Worker<H::Id>)> = self
            .inner
            .workers
            .snapshot()
            .into_iter()
            .filter(|(_, w)| pid_alive(w.pid))
            .collect();
        if workers.is_empty() {
            return;
        }
        // A host that cannot list says nothing about the panes: try again next round.
        let Ok(live) = self.inner.host.live_ids().await else {
            return;
        };
        for (name, worker) in workers {
            if !live.contains(&worker.pane) {
                tracing::warn!(member = %name, pane = %worker.pane, backend = self.inner.host.label(), "pane closed; ending its worker");
                end_process(worker.pid).await;
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn insert_worker(
        &self,
        name: Name,
        pane: H::Id,
        pid: u32,
        clone_gate: Option<PathBuf>,
    ) {
        self.inner.workers.insert(
            name,
            Worker {
                pane,
                pid,
                handoff: None,
                clone_gate,
            },
        );
    }
}

impl<H: PaneHost> TeammateExecutor for PaneExecutor<H> {
    fn backend(&self) -> BackendType {
        self.inner.host.backend()
    }

    fn label(&self) -> &'static str {
        self.inner.host.label()
    }

    fn spawn(&self, launch: Launch) -> BoxFuture<'_, Result<Vec<String>, ExecError>> {
        Box::pin(async move {
            let host = &self.inner.host;
            let name = launch.name.clone();
            // Started again (its worker ended): its old pane goes first.
            let old = self.inner.workers.remove(&name);
            if let Some(old) = old {
                old.discard_files();
                host.close(&old.pane).await;
            }
            let color = self.inner.workers.next_color(&launch);
            // The environment first: nothing is left behind if it cannot be offered.
            let (handoff, handoff_env) =
                pane::write_handoff(&self.inner.handoff_dir, &launch).await?;
            let argv = pane::worker_argv(&self.inner.worker, &launch, &color);
            let env = (
                roo_agent::exec::sandbox::handoff::HANDOFF_ENV.to_string(),
                handoff_env,
            );
            let opened = match host.open(&launch, &color, argv, env).await {
                Ok(opened) => opened,
                Err(e) => {
                    let _ = std::fs::remove_file(&handoff);
                    return Err(e);
                }
            };
            self.inner.workers.insert(
                name.clone(),
                Worker {
                    pane: opened.id.clone(),
                    pid: opened.pid,
                    handoff: Some(handoff.clone()),
                    clone_gate: launch.settings.clone_gate.clone(),
                },
            );
            let joined = pane::wait_joined(&launch, opened.pid).await;
            // The worker takes it when it starts; one that never did leaves nothing.
            let _ = std::fs::remove_file(&handoff);
            self.inner.workers.update(&name, |w| w.handoff = None);
            if let Err(why) = joined {
                let last = host.last_lines(&opened.id).await;
                end_process(opened.pid).await;
                host.close(&opened.id).await;
                self.inner.workers.remove(&name);
                return Err(ExecError::Start {
                    name,
                    message: if last.is_empty() {
                        why
                    } else {
                        format!("{why}; its pane showed:\n{}", last.join("\n"))
                    },
                });
            }
            Ok(opened.notices)
        })
    }

    fn is_active(&self, name: &Name) -> bool {
        self.inner
            .workers
            .get(name)
            .is_some_and(|w| pid_alive(w.pid))
    }

    fn kill(&self, name: &Name) -> BoxFuture<'_, Result<(), ExecError>> {
        let worker = self.inner.workers.remove(name);
        let name = name.clone();
        Box::pin(async move {
            let worker = worker.ok_or(ExecError::Unknown {
                backend: self.inner.host.label(),
                name,
            })?;
            end_process(worker.pid).await;
            worker.discard_files();
            self.inner.host.close(&worker.pane).await;
            Ok(())
        })
    }

    fn shutdown_all(&self, keep: bool) -> BoxFuture<'_, ()> {
        let workers = self.inner.workers.drain();
        Box::pin(async move {
            for worker in &workers {
                pane::discard_handoff(worker.handoff.as_deref());
            }
            // A kept worker may not have read its clone gate yet: it stays.
            if !keep {
                futures_util::future::join_all(workers.iter().map(|w| end_process(w.pid))).await;
                for worker in &workers {
                    worker.discard_files();
                }
            }
            let ids = workers.into_iter().map(|w| w.pane).collect();
            self.inner.host.finish(ids, keep).await;
        })
    }

    /// Sends the worker's pid [`roo_store::wake::WAKE_SIGNAL`].
    fn wake(&self, name: &Name) -> Result<(), ExecError> {
        let pid = self.inner.workers.get(name).map(|w| w.pid);
        pane::wake(self.inner.host.label(), name, pid)
    }

    fn capture(&self, name: &Name) -> BoxFuture<'_, Result<String, ExecError>> {
        let pane = self.pane_of(name);
        let name = name.clone();
        Box::pin(async move {
            let pane = pane.ok_or(ExecError::Unknown {
                backend: self.inner.host.label(),
                name,
            })?;
            self.inner.host.capture(&pane).await
        })
    }
}

impl<H: PaneHost> Drop for Inner<H> {
    /// The last handle is gone without `shutdown_all` (a panic, an early exit): end the
    /// workers and close the panes this executor opened, without waiting long.
    fn drop(&mut self) {
        let workers = self.workers.drain();
        let mut ids = Vec::with_capacity(workers.len());
        for worker in workers {
            worker.discard_files();
            signal(worker.pid, nix::sys::signal::Signal::SIGTERM);
            ids.push(worker.pane);
        }
        self.host.finish_now(&ids);
    }
}
