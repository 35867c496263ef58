//! The executor table: the one place that says which [`TeammateExecutor`] runs a
//! teammate, given where it runs ([`Location`]).
//!
//! A lead has one executor per location: its own process (always, the in-process
//! executor), the team's worker backend (the tmux or iTerm2 panes chosen at start, if
//! any) and each host of the user's `hosts:` (ssh). The spawner asks
//! [`ExecutorTable::executor_for`] and speaks to what it gets only through the trait, so
//! a new backend is one module under `backend/` implementing [`TeammateExecutor`],
//! registered here under its location ([`ExecutorTable::set`]); nothing in the spawner
//! names a backend.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use roo_store::Name;

use super::executor::TeammateExecutor;

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
        self.in_process.shutdown_all(keep).await;
        let others: Vec<Arc<dyn TeammateExecutor>> = read(&self.others).values().cloned().collect();
        futures_util::future::join_all(others.iter().map(|e| e.shutdown_all(keep))).await;
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
