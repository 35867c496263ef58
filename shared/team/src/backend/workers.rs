//! The worker table every `roo-worker` backend keeps: the workers one executor started,
//! by member name, with the count of its spawns (which picks the next colour), and the
//! periodic watch that checks on them. The pane executor (tmux, iTerm2) and the ssh
//! executor differ only in what they record per worker (a pane and pid; a session
//! there) and in what a watch round does; the table, its locking and the watch loop are
//! here once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;
use roo_store::Name;
use tokio_util::sync::CancellationToken;

use super::executor::Launch;
use super::pane;

/// The workers of one executor; `W` is what it records per worker.
pub(crate) struct WorkerTable<W> {
    state: Mutex<State<W>>,
}

struct State<W> {
    workers: HashMap<Name, W>,
    /// Spawns so far (picks the next colour).
    spawned: usize,
}

impl<W: Clone> WorkerTable<W> {
    pub(crate) fn new() -> WorkerTable<W> {
        WorkerTable {
            state: Mutex::new(State {
                workers: HashMap::new(),
                spawned: 0,
            }),
        }
    }

    /// Counts a spawn and returns the colour of `launch`'s worker (its own, else the
    /// next of the palette).
    pub(crate) fn next_color(&self, launch: &Launch) -> String {
        let mut state = lock(&self.state);
        state.spawned += 1;
        pane::color_for(launch, state.spawned - 1)
    }

    /// Records `worker` for `name` (replacing what was recorded).
    pub(crate) fn insert(&self, name: Name, worker: W) {
        lock(&self.state).workers.insert(name, worker);
    }

    /// Forgets `name`'s worker and returns it.
    pub(crate) fn remove(&self, name: &Name) -> Option<W> {
        lock(&self.state).workers.remove(name)
    }

    /// A copy of `name`'s worker.
    pub(crate) fn get(&self, name: &Name) -> Option<W> {
        lock(&self.state).workers.get(name).cloned()
    }

    /// Applies `change` to `name`'s worker, under the table's lock.
    pub(crate) fn update<R>(&self, name: &Name, change: impl FnOnce(&mut W) -> R) -> Option<R> {
        lock(&self.state).workers.get_mut(name).map(change)
    }

    /// Forgets `name`'s worker if `still` holds for it, under the table's lock.
    pub(crate) fn remove_if(&self, name: &Name, still: impl FnOnce(&W) -> bool) {
        let mut state = lock(&self.state);
        if state.workers.get(name).is_some_and(still) {
            state.workers.remove(name);
        }
    }

    /// Every worker, with its name (a copy).
    pub(crate) fn snapshot(&self) -> Vec<(Name, W)> {
        lock(&self.state)
            .workers
            .iter()
            .map(|(n, w)| (n.clone(), w.clone()))
            .collect()
    }

    /// Forgets every worker and returns them (a shutdown, a drop).
    pub(crate) fn drain(&self) -> Vec<W> {
        lock(&self.state).workers.drain().map(|(_, w)| w).collect()
    }
}

/// Starts a task that, every `interval` until `cancel` or until `owner` is gone, runs
/// `round` on it (a watch of the workers an executor started). The task holds `owner`
/// only during a round.
pub(crate) fn watch<T: Send + Sync + 'static>(
    owner: Weak<T>,
    interval: Duration,
    cancel: CancellationToken,
    round: fn(Arc<T>) -> BoxFuture<'static, ()>,
) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = cancel.cancelled() => return,
            }
            let Some(owner) = owner.upgrade() else { return };
            round(owner).await;
        }
    });
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
