//! The executor table: the one place that says which [`TeammateExecutor`] runs a
//! teammate, given where it runs ([`Location`]), and the one place that makes each
//! backend's executor ([`ExecutorTable::fill`]).
//!
//! A lead has one executor per location: its own process (always, the in-process
//! executor), the team's worker backend (the tmux or iTerm2 panes chosen at start, if
//! any) and each host of the user's `hosts:` (ssh). The spawner asks
//! [`ExecutorTable::executor_for`] and speaks to what it gets only through the trait.
//! Which backend runs the worker location is one `match` over the teammate mode
//! ([`BackendType`]) in `worker_executor`, matched nowhere else: a new backend is one
//! module under `backend/` implementing [`TeammateExecutor`] and one arm there that makes
//! its executor (and starts its watcher); nothing in the spawner or the lead's set-up
//! names a backend.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use roo_agent::config::Hosts;
use roo_store::{BackendType, Name};
use tokio_util::sync::CancellationToken;

use super::executor::{ExecError, TeammateExecutor};
use super::iterm2::{ITerm2Executor, It2Error};
use super::pane;
use super::ssh::SshExecutor;
use super::tmux::TmuxExecutor;

/// Where a teammate runs: the key of the [`ExecutorTable`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Location {
    /// A task of the lead's process.
    InProcess,
    /// A `roo-worker` on this machine, on the team's worker backend (a tmux or iTerm2
    /// pane).
    Worker,
    /// A `roo-worker` on host `name` of the user's `hosts:`.
    Host(Name),
}

/// The lead's executors by [`Location`]. Cheap to share behind an `Arc`.
pub struct ExecutorTable {
    in_process: Arc<dyn TeammateExecutor>,
    others: RwLock<BTreeMap<Location, Arc<dyn TeammateExecutor>>>,
}

impl ExecutorTable {
    /// A table whose in-process location is `in_process`; the others are set later.
    pub fn new(in_process: Arc<dyn TeammateExecutor>) -> ExecutorTable {
        ExecutorTable {
            in_process,
            others: RwLock::new(BTreeMap::new()),
        }
    }

    /// Runs the teammates of `location` on `executor`; the first call for a location
    /// wins (the in-process one is fixed at [`ExecutorTable::new`]).
    pub fn set(&self, location: Location, executor: Arc<dyn TeammateExecutor>) {
        if location == Location::InProcess {
            return;
        }
        write(&self.others).entry(location).or_insert(executor);
    }

    /// Makes the executors of the lead's backends and sets them at their locations: the
    /// team's worker backend `worker` (`worker_executor`) and one ssh executor per host
    /// of `backends.hosts`, each with its watcher running until `backends.lifetime`.
    /// Nothing is set if one cannot be made.
    pub fn fill(&self, worker: BackendType, backends: &LeadBackends) -> Result<(), BackendError> {
        let worker = worker_executor(worker, backends)?;
        let mut hosts = Vec::new();
        for (name, host) in backends.hosts {
            let executor = SshExecutor::new(host.clone()).map_err(|why| BackendError::Host {
                name: name.clone(),
                why,
            })?;
            executor.watch(backends.lifetime.clone());
            hosts.push((Location::Host(name.clone()), Arc::new(executor)));
        }
        if let Some(worker) = worker {
            self.set(Location::Worker, worker);
        }
        for (location, executor) in hosts {
            self.set(location, executor);
        }
        Ok(())
    }

    /// The executor of `location`, if one is set there.
    pub fn executor_for(&self, location: &Location) -> Option<Arc<dyn TeammateExecutor>> {
        match location {
            Location::InProcess => Some(self.in_process.clone()),
            Location::Worker | Location::Host(_) => read(&self.others).get(location).cloned(),
        }
    }

    /// The hosts that have an executor, sorted.
    pub fn hosts(&self) -> Vec<Name> {
        read(&self.others)
            .keys()
            .filter_map(|l| match l {
                Location::Host(name) => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    /// Stops what every executor started (the lead's exit): in-process teammates always;
    /// workers unless `keep`, where their backend can leave them running.
    pub async fn shutdown_all(&self, keep: bool) {
        // In-process teammates end with the lead whatever `keep` says.
        self.in_process.shutdown_all(false).await;
        let others: Vec<Arc<dyn TeammateExecutor>> = read(&self.others).values().cloned().collect();
        futures_util::future::join_all(others.iter().map(|e| e.shutdown_all(keep))).await;
    }
}

/// What the lead's executors are made from, known at its start.
pub struct LeadBackends<'a> {
    /// The tmux or `it2` binary detection found for the worker backend, if any.
    pub binary: Option<PathBuf>,
    /// The hosts of the user's `hosts:` (an ssh executor each).
    pub hosts: &'a Hosts,
    /// Where credential handoffs (and iTerm2's launchers) are written.
    pub roo_home: &'a Path,
    /// The lifetime of the executors' watchers (the team's tasks).
    pub lifetime: &'a CancellationToken,
}

/// Why an executor could not be made. Its text is the whole message.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The worker backend's executor cannot be made (no `roo-worker` beside the running
    /// executable).
    #[error(transparent)]
    Worker(#[from] ExecError),
    /// The lead's iTerm2 session cannot be reached.
    #[error("teammates: failed to {0}")]
    ITerm2(#[from] It2Error),
    /// A host of the user's `hosts:` cannot be used.
    #[error("hosts: host {name}: {why}")]
    Host { name: Name, why: String },
}

impl BackendError {
    /// Whether the user's `hosts:` config is at fault (else the install or the teammate
    /// mode).
    pub fn in_hosts_config(&self) -> bool {
        matches!(self, BackendError::Host { .. })
    }
}

/// The executor of the team's worker backend `worker` with its watcher started: the one
/// match over backends (`None`: teammates run in-process, or iTerm2 was expected but no
/// `it2` was found, and a spawn says so).
fn worker_executor(
    worker: BackendType,
    backends: &LeadBackends,
) -> Result<Option<Arc<dyn TeammateExecutor>>, BackendError> {
    let lifetime = backends.lifetime.clone();
    let executor: Arc<dyn TeammateExecutor> = match (worker, backends.binary.clone()) {
        (BackendType::InProcess, _) | (BackendType::Iterm2, None) => return Ok(None),
        // `roo-worker`s in tmux panes: the lead's window, or a detached session
        // `roo-<team>`.
        (BackendType::Tmux, binary) => {
            let worker = pane::sibling_worker()?;
            let tmux = binary.unwrap_or_else(|| PathBuf::from("tmux"));
            let panes = TmuxExecutor::from_env(tmux, worker, backends.roo_home);
            panes.watch_panes(lifetime);
            Arc::new(panes)
        }
        // `roo-worker`s in iTerm2 panes split from the lead's session, through `it2`.
        (BackendType::Iterm2, Some(it2)) => {
            let worker = pane::sibling_worker()?;
            let panes = ITerm2Executor::from_env(it2, worker, backends.roo_home)?;
            panes.watch_sessions(lifetime);
            Arc::new(panes)
        }
    };
    Ok(Some(executor))
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::backend::InProcessExecutor;

    fn host(name: &str, ssh: &str) -> roo_agent::config::HostConfig {
        roo_agent::config::HostConfig {
            name: Name::parse_as("host", name).unwrap(),
            ssh: ssh.to_string(),
            repo: PathBuf::from("/srv/app"),
            roo_worker: "roo-worker".into(),
            ssh_config: None,
            tmux_socket: None,
        }
    }

    /// A host whose ssh destination is refused makes `fill` fail with the lead's
    /// config error text (`hosts: host <name>: …`) and set nothing, not even the good
    /// host before it; in-process teammates need no executor but the fixed one.
    #[tokio::test]
    async fn a_bad_host_fills_nothing_and_says_which_host() {
        let table = ExecutorTable::new(Arc::new(InProcessExecutor::new(None)));
        let hosts: Hosts = [host("a", "alice@a.example"), host("b", "-oProxyCommand=x")]
            .into_iter()
            .map(|h| (h.name.clone(), h))
            .collect();
        let lifetime = CancellationToken::new();
        let backends = LeadBackends {
            binary: None,
            hosts: &hosts,
            roo_home: Path::new("/nonexistent"),
            lifetime: &lifetime,
        };
        let error = table.fill(BackendType::InProcess, &backends).unwrap_err();
        assert!(error.in_hosts_config());
        assert!(
            error
                .to_string()
                .starts_with("hosts: host b: ssh destination "),
            "{error}"
        );
        assert!(table.hosts().is_empty());
        assert!(table.executor_for(&Location::Worker).is_none());

        let good: Hosts = [host("a", "alice@a.example")]
            .into_iter()
            .map(|h| (h.name.clone(), h))
            .collect();
        let backends = LeadBackends {
            hosts: &good,
            ..backends
        };
        table.fill(BackendType::InProcess, &backends).unwrap();
        assert_eq!(table.hosts(), vec![Name::parse_as("host", "a").unwrap()]);
        assert!(table.executor_for(&Location::Worker).is_none());
        lifetime.cancel();
    }
}
