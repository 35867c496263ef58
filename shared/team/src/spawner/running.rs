//! The lead's table of running teammates: each one's handle (where it runs and the
//! executor that runs it) and the recipe to start it again, registering a started one,
//! stopping one (also a `roo-worker` of the team this lead did not start, through its
//! process), and restarting a stopped one when a message is sent to it. Apart from the
//! spawning because every later operation on a teammate goes through this table.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use roo_agent::permissions::PermissionMode;
use roo_store::{Name, Team};

use crate::backend::{Location, TeammateExecutor};
use crate::binding::TeamBinding;
use crate::event::TeamEvent;
use crate::settings::AgentSettings;

use super::{SpawnError, Spawner};

/// A started teammate: where it runs and the executor that runs it.
pub(super) struct Running {
    pub(super) location: Location,
    pub(super) executor: Arc<dyn TeammateExecutor>,
    pub(super) name: Name,
    /// What the executor said at the start (how to attach), for the spawn result.
    pub(super) notices: Vec<String>,
    /// The team whose member role this process was given, and that role's name (`None`:
    /// the lead's login). Dropped by that name: a later start's role is never hit.
    pub(super) role_of: Option<(Team, String)>,
}

impl Running {
    /// Whether its loop (in-process) or process (a worker) is running.
    pub(super) fn running(&self) -> bool {
        self.executor.is_active(&self.name)
    }

    /// Stops it now, on `runtime`: an in-process loop is cancelled; a worker is ended
    /// and its pane or session closed, then its start's member role (if it got one) is
    /// dropped, by that role's name (a message starting it again gets a new role, which
    /// this drop never touches).
    pub(super) fn stop(&self, runtime: &tokio::runtime::Handle) {
        if self.location == Location::InProcess {
            // Cancelled at once, in this call (the future only reports an unknown name),
            // so a message sent right after a stop finds the teammate stopped.
            drop(self.executor.kill(&self.name));
            return;
        }
        let (executor, name) = (self.executor.clone(), self.name.clone());
        let role_of = self.role_of.clone();
        runtime.spawn(async move {
            if let Err(e) = executor.kill(&name).await {
                tracing::debug!(member = %name, error = %e, "failed to stop a teammate");
            }
            // Its process ended (its last writes done): its login goes.
            if let Some((team, role)) = role_of {
                drop_member_role(team, name, role).await;
            }
        });
    }
}

/// Drops `role`, the member role one start of `name` in `team`'s store was given, off
/// the runtime; a failure is logged (the role lost its login first, or nothing was done).
pub(super) async fn drop_member_role(team: Team, name: Name, role: String) {
    let Some(pg) = team.home().pg().cloned() else {
        return;
    };
    let member = name.clone();
    let dropped =
        tokio::task::spawn_blocking(move || pg.drop_member_role_named(team.name(), &member, &role))
            .await;
    match dropped {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(member = %name, error = %e, "failed to drop a member role"),
        Err(e) => tracing::warn!(member = %name, error = %e, "failed to drop a member role"),
    }
}

/// One teammate this lead spawned.
pub(super) struct Entry {
    pub(super) team: Name,
    pub(super) handle: Running,
    /// The spec's parts needed to start it again (an empty prompt: it resumes from its
    /// transcript and takes up the waiting messages).
    pub(super) recipe: Recipe,
    pub(super) restarting: bool,
}

#[derive(Clone)]
pub(super) struct Recipe {
    /// The host it runs on (`None`: this machine).
    pub(super) host: Option<Name>,
    /// Each start gives its process a member role of its own ([`Spawner::spawn`]).
    pub(super) member_role: bool,
    pub(super) settings: AgentSettings,
    pub(super) plan_mode_required: bool,
    pub(super) mode_after_plan: PermissionMode,
    pub(super) agent_type: Option<String>,
    pub(super) model: Option<String>,
    pub(super) work_dir: PathBuf,
    /// Its clone on this machine, as the lead made it (`None`: it works in the lead's
    /// directory, or on another host). A rewind trusts this, never the roster's
    /// `worktree_path`, which the teammate itself can rewrite.
    pub(super) clone_dir: Option<PathBuf>,
}

/// Whether process `pid` is `roo-worker` for `name` of `team`: its command line is
/// read from `/proc` (where there is none, nothing is signalled).
fn is_worker_of(pid: u32, team: &Name, name: &Name) -> bool {
    let Some(args) = crate::process::argv(pid) else {
        return false;
    };
    let is_worker = args.first().is_some_and(|exe| exe.ends_with(b"roo-worker"));
    let has = |flag: &str, value: &str| {
        args.windows(2)
            .any(|w| w[0] == flag.as_bytes() && w[1] == value.as_bytes())
            || args
                .iter()
                .any(|a| *a == format!("{flag}={value}").as_bytes())
    };
    is_worker && has("--team", team.as_str()) && has("--name", name.as_str())
}

/// The registry's lock; a panic while it was held leaves the map usable.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Spawner {
    /// Keeps a started teammate's handle and recipe; refused (and stopped) when another
    /// call spawned it meanwhile.
    pub(super) fn register(
        &self,
        binding: &TeamBinding,
        name: &Name,
        handle: Running,
        recipe: Recipe,
    ) -> Result<(), SpawnError> {
        let name = name.clone();
        let mut running = lock(&self.inner.running);
        // Spawned meanwhile by another call. (An in-process entry names the executor's
        // current handle, which is the one just started: nothing to compare.)
        if running
            .get(&name)
            .is_some_and(|e| e.handle.location != Location::InProcess && e.handle.running())
        {
            drop(running);
            handle.stop(&self.inner.runtime);
            drop(handle);
            return Err(SpawnError::AlreadyRunning { name });
        }
        running.insert(
            name.clone(),
            Entry {
                team: binding.team.name().clone(),
                handle,
                recipe,
                restarting: false,
            },
        );
        drop(running);
        // The team's event log records the spawn (it changes no document of the store),
        // off this task: a failure to record it leaves the teammate running.
        let (team, lead) = (binding.team.clone(), binding.lead.clone());
        let backend = serde_json::to_value(self.inner.backend)
            .ok()
            .and_then(|b| b.as_str().map(str::to_owned));
        self.inner.runtime.spawn_blocking(move || {
            let spawned = roo_store::EventKind::Spawn {
                member: name.to_string(),
                backend,
            };
            if let Err(e) = team.record_event(lead.as_str(), spawned) {
                tracing::warn!(member = %name, error = %e, "failed to log a spawn");
            }
        });
        Ok(())
    }

    /// Stops a spawned teammate's loop now: its run is cancelled (its commands are
    /// ended), it is recorded idle, and its transcript stays: a later message starts it
    /// again with its history. Returns whether it was running.
    ///
    /// A `roo-worker` of the team this lead did not start (started by an earlier lead it
    /// adopted, or by hand) is stopped through its process: SIGTERM, which cancels its
    /// run and leaves it idle, once its command line shows it is that member's
    /// `roo-worker` (so a reused pid is never signalled).
    pub fn stop(&self, name: &Name) -> Result<bool, SpawnError> {
        let binding = self.lead_binding()?;
        {
            let running = lock(&self.inner.running);
            if let Some(entry) = running.get(name)
                && &entry.team == binding.team.name()
            {
                let was = entry.handle.running();
                entry.handle.stop(&self.inner.runtime);
                return Ok(was);
            }
        }
        let not_spawned = || SpawnError::NotSpawned {
            name: name.clone(),
            team: binding.team.name().clone(),
        };
        let config = binding.team.config().map_err(|_| not_spawned())?;
        let member = config.member(name.as_str()).ok_or_else(not_spawned)?;
        // A worker on another host is not signalled here: its pid is not a process here.
        match member.local_pid() {
            Some(pid) if pid != std::process::id() && roo_store::pid_alive(pid) => {
                if !is_worker_of(pid, binding.team.name(), name) {
                    return Err(not_spawned());
                }
                let signalled = i32::try_from(pid).is_ok_and(|raw| {
                    nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(raw),
                        nix::sys::signal::Signal::SIGTERM,
                    )
                    .is_ok()
                });
                if signalled {
                    Ok(true)
                } else {
                    Err(not_spawned())
                }
            }
            Some(pid) if pid != std::process::id() => Ok(false),
            _ => Err(not_spawned()),
        }
    }

    /// This lead's record of where `name` of `team` works: its host (`None`: here) and
    /// its clone here (`None`: the lead's directory). `None`: this lead did not start it.
    pub(super) fn recorded_clone(
        &self,
        team: &Name,
        name: &Name,
    ) -> Option<(Option<Name>, Option<PathBuf>)> {
        lock(&self.inner.running)
            .get(name)
            .filter(|e| &e.team == team)
            .map(|e| (e.recipe.host.clone(), e.recipe.clone_dir.clone()))
    }

    pub(super) fn is_running(&self, name: &Name) -> bool {
        lock(&self.inner.running)
            .get(name)
            .is_some_and(|e| e.handle.running() || e.restarting)
    }

    pub(super) fn restart_if_stopped(&self, to: &Name) {
        let Some(binding) = self.inner.slot.get().filter(|b| b.is_lead()) else {
            return;
        };
        let recipe = {
            let mut running = lock(&self.inner.running);
            match running.get_mut(to) {
                // A running teammate is nudged to read its inbox now (an in-process one
                // watches its inbox itself).
                Some(entry) if &entry.team == binding.team.name() && entry.handle.running() => {
                    if let Err(e) = entry.handle.executor.wake(&entry.handle.name) {
                        tracing::debug!(member = %to, error = %e, "failed to wake a teammate");
                    }
                    return;
                }
                Some(entry) if &entry.team == binding.team.name() && !entry.restarting => {
                    entry.restarting = true;
                    entry.recipe.clone()
                }
                _ => return,
            }
        };
        let this = self.clone();
        let to = to.clone();
        self.inner.runtime.spawn(async move {
            let started = this.start(&binding, &to, recipe, String::new()).await;
            let mut running = lock(&this.inner.running);
            let Some(entry) = running.get_mut(&to) else {
                return;
            };
            entry.restarting = false;
            match started {
                Ok(handle) if &entry.team == binding.team.name() => {
                    tracing::info!(member = %to, "restarted a stopped teammate for a message");
                    entry.handle = handle;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(member = %to, error = %e, "failed to restart a teammate");
                    if let Some(events) = &this.inner.events {
                        events.send(TeamEvent::Notice {
                            text: format!("failed to restart {to} for a message: {e}"),
                        });
                    }
                }
            }
        });
    }
}
