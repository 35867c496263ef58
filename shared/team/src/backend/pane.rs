//! What every pane backend (tmux, iTerm2) does the same way for its `roo-worker`s, one
//! implementation each: the worker binary, its colour, the credentials handoff, waiting
//! for it to join, waking it and ending it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use roo_store::{Name, pid_alive};

use crate::backend::executor::{ExecError, Launch};
use crate::backend::worker_launch::WorkerLaunch;

/// How long a worker may take to join its team after its pane started it.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a worker has to end after SIGTERM before it gets SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// The colours teammates get in spawn order (tmux colour names; the roster's `color`).
pub const PALETTE: &[&str] = &[
    "blue",
    "green",
    "yellow",
    "magenta",
    "cyan",
    "red",
    "colour208",
    "colour205",
];

/// The `roo-worker` command line for `launch` ([`WorkerLaunch`]: who it is — team,
/// name, agent id and type, colour, lead and the lead's public key — its directory,
/// mode, plan mode, trust, sandbox choice and provider flags).
/// No credential and no prompt is ever on it: those come through the handoff
/// ([`write_handoff`]).
pub fn worker_argv(worker: &Path, launch: &Launch, color: &str) -> Vec<String> {
    let mut argv = vec![worker.display().to_string()];
    argv.extend(WorkerLaunch::of(launch, color).to_args());
    argv
}

/// The colour of the `spawned`-th teammate: the launch's own, else the palette's.
pub fn color_for(launch: &Launch, spawned: usize) -> String {
    launch
        .color
        .clone()
        .unwrap_or_else(|| PALETTE[spawned % PALETTE.len()].to_string())
}

/// The `roo-worker` next to the running executable.
pub fn sibling_worker() -> Result<PathBuf, ExecError> {
    let exe = std::env::current_exe().map_err(|e| ExecError::Task(e.to_string()))?;
    let worker = exe.with_file_name("roo-worker");
    if worker.is_file() {
        Ok(worker)
    } else {
        Err(ExecError::Task(format!(
            "find roo-worker next to {}: install roo-worker beside roo-lead",
            exe.display()
        )))
    }
}

/// Where a lead under `roo_home` writes credential handoffs (`run/handoff`, mode 0700).
pub fn handoff_dir(roo_home: &Path) -> PathBuf {
    roo_home.join("run").join("handoff")
}

/// Offers the lead's environment (API keys included), `launch`'s `ROO_HOME` and store, and
/// its prompt ([`WorkerLaunch::handoff`]) on a private socket under `dir` for `launch`'s
/// worker, for [`START_TIMEOUT`]
/// (`roo_agent::exec::sandbox::handoff`); returns the socket (to remove if the start fails)
/// and the value of `ROO_ENV_HANDOFF`, the only thing a pane's command line or
/// launcher may name.
pub async fn write_handoff(dir: &Path, launch: &Launch) -> Result<(PathBuf, String), ExecError> {
    let name = launch.name.clone();
    let start = |message: String| ExecError::Start {
        name: name.clone(),
        message,
    };
    let mut env = roo_agent::exec::sandbox::handoff::current_env_for_handoff();
    env.insert(
        "ROO_HOME".to_string(),
        launch.settings.roo_home.display().to_string(),
    );
    // The lead's store, whatever the environment says (`roo-lead demo` runs on files).
    if let Some(store) = &launch.settings.store_setting {
        env.insert(roo_store::ROO_STORE_ENV.to_string(), store.clone());
    }
    hand_member_login(launch, &mut env).map_err(|e| start(format!("failed to {e}")))?;
    let (dir, label) = (
        dir.to_path_buf(),
        format!("{}+{}", launch.team.name(), launch.name),
    );
    // The colour is on the command line; the handoff's part does not depend on it.
    let handed = WorkerLaunch::of(launch, "").handoff().to_json();
    let offer = tokio::task::spawn_blocking(move || {
        roo_agent::exec::sandbox::handoff::offer_handoff(
            &dir,
            &label,
            &env,
            Some(&handed),
            START_TIMEOUT,
        )
    })
    .await
    .map_err(|e| start(e.to_string()))?
    .map_err(|e| start(format!("failed to {e}")))?;
    Ok((offer.socket, offer.env_value))
}

/// `env`, the handoff of `launch`'s worker (a pane's or another host's), with the
/// member role the lead made for it in place of the lead's login, if it has one
/// ([`Launch::member_login`]): `ROO_STORE` is the lead's URL (`env`'s) with the role as
/// its user and no password, `PGPASSWORD` the role's password, and no variable holds
/// the lead's password (`PgStore::hand_member_login`). The error reads after "failed to".
pub fn hand_member_login(
    launch: &Launch,
    env: &mut std::collections::BTreeMap<String, String>,
) -> Result<(), String> {
    let Some(login) = &launch.member_login else {
        return Ok(());
    };
    let refused = |why: &str| format!("hand over the member role {}: {why}", login.role());
    let pg = launch
        .team
        .home()
        .pg()
        .ok_or_else(|| refused("the team is not on the PostgreSQL store"))?;
    let lead_url = env
        .get(roo_store::ROO_STORE_ENV)
        .filter(|url| url.starts_with("postgres"))
        .cloned()
        .ok_or_else(|| refused("the lead's store URL is not known"))?;
    pg.hand_member_login(login, &lead_url, env)
        .map_err(|e| refused(&e.to_string()))
}

/// Waits until `launch`'s teammate has joined its team with `pid`, or its process ended,
/// or [`START_TIMEOUT`] passed (the error says which).
pub async fn wait_joined(launch: &Launch, pid: u32) -> Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut pause = Duration::from_millis(2);
    loop {
        let (team, name) = (launch.team.clone(), launch.name.clone());
        let joined = tokio::task::spawn_blocking(move || {
            team.config().map(|c| {
                c.members
                    .iter()
                    .any(|m| m.name == name && m.pid == Some(pid) && m.dead_at.is_none())
            })
        })
        .await;
        if matches!(joined, Ok(Ok(true))) {
            return Ok(());
        }
        if !pid_alive(pid) {
            return Err("roo-worker exited before joining the team".to_string());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "roo-worker did not join the team within {} s",
                START_TIMEOUT.as_secs()
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Sends `pid`, the worker of `name` on `backend`, [`roo_store::wake::WAKE_SIGNAL`] if it lives.
pub fn wake(backend: &'static str, name: &Name, pid: Option<u32>) -> Result<(), ExecError> {
    let pid = pid.ok_or(ExecError::Unknown {
        backend,
        name: name.clone(),
    })?;
    if pid_alive(pid) {
        roo_store::wake::send(pid);
    }
    Ok(())
}

/// Removes a worker's credentials handoff file, if it still has one (the worker
/// deletes it when it reads it; a worker that never started leaves it behind).
pub fn discard_handoff(path: Option<&std::path::Path>) {
    if let Some(path) = path {
        let _ = std::fs::remove_file(path);
    }
}

/// SIGTERM, up to [`STOP_GRACE`] for the process to end, then SIGKILL.
pub async fn end_process(pid: u32) {
    if !pid_alive(pid) {
        return;
    }
    signal(pid, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + STOP_GRACE;
    while pid_alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if pid_alive(pid) {
        signal(pid, nix::sys::signal::Signal::SIGKILL);
    }
}

/// Sends `signal` to `pid` (never to pid 0 or 1, or a group).
pub fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    if let Ok(raw) = i32::try_from(pid)
        && raw > 1
    {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), signal);
    }
}
