//! [`ITerm2Executor`]: the iTerm2 backend, a [`PaneExecutor`] on [`ITerm2Host`], which
//! drives [`ITerm2Panes`]. Everything pane backends share (the worker's argv and colour,
//! the credentials handoff, the join wait, the wake-up, ending a worker, the pane watch)
//! is [`crate::backend::pane_executor`]'s.
//!
//! - **Start**: a pane is split and titled and its shell runs the launcher
//!   ([`ITerm2Panes::spawn`]), which first writes its pid to a private file and then
//!   `exec`s `roo-worker`, so that pid is the worker's; the worker records `backend_type:
//!   iterm2` and its session (`$ITERM_SESSION_ID`'s GUID) as `pane_id`.
//! - **Liveness**: closing a pane hangs up its worker; the pane watch also ends a worker
//!   whose session `it2` no longer lists while its process lives on.
//! - **Cleanup**: only sessions this lead created are closed: a teammate's when it is
//!   killed or started again, all of them at the lead's exit unless kept (also those
//!   whose worker ended on its own).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use roo_store::BackendType;

use super::{ITerm2Panes, It2, It2Error, PaneLaunch, SessionId, commands, lock};
use crate::backend::executor::{ExecError, Launch};
use crate::backend::pane::START_TIMEOUT;
use crate::backend::pane_executor::{Opened, PaneExecutor, PaneHost};

/// How often [`ITerm2Executor::watch_sessions`] lists iTerm2's sessions (each time runs
/// `it2`, which connects to iTerm2's API).
pub const SESSION_WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// How often a starting pane is checked for its session while its pid is awaited.
const SESSION_CHECK: Duration = Duration::from_secs(1);

/// iTerm2 as a [`PaneHost`]: panes split from the lead's session through `it2`.
#[derive(Debug)]
pub struct ITerm2Host {
    panes: ITerm2Panes,
    /// Spawns so far (names the pid files apart).
    started: Mutex<usize>,
}

/// Pane teammates in iTerm2 ([`PaneExecutor`] on [`ITerm2Host`]).
pub type ITerm2Executor = PaneExecutor<ITerm2Host>;

impl PaneExecutor<ITerm2Host> {
    /// An executor splitting panes from the lead's session `lead` through `it2`, running
    /// `worker` (the `roo-worker` binary, an absolute path), writing launchers under
    /// `roo_home`'s `run/iterm2` and credential handoffs under its `run/handoff` (both
    /// mode 0700).
    pub fn new(it2: It2, lead: SessionId, worker: PathBuf, roo_home: &Path) -> ITerm2Executor {
        PaneExecutor::with_host(
            ITerm2Host {
                panes: ITerm2Panes::new(it2, lead, roo_home.join("run").join("iterm2")),
                started: Mutex::new(0),
            },
            worker,
            roo_home,
        )
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
        &self.host().panes
    }

    /// The session of teammate `name`, if this executor started it.
    pub fn session_of(&self, name: &roo_store::Name) -> Option<SessionId> {
        self.pane_of(name)
    }

    /// Ends the worker of a session iTerm2 no longer lists while its process lives on,
    /// every [`SESSION_WATCH_INTERVAL`] until `cancel` ([`PaneExecutor::watch`]).
    pub fn watch_sessions(&self, cancel: tokio_util::sync::CancellationToken) {
        self.watch(cancel);
    }
}

impl ITerm2Host {
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
                if let Ok(false) = self.panes.is_alive(session).await {
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
}

impl PaneHost for ITerm2Host {
    type Id = SessionId;

    fn backend(&self) -> BackendType {
        BackendType::Iterm2
    }

    fn label(&self) -> &'static str {
        "iTerm2"
    }

    fn watch_interval(&self) -> Duration {
        SESSION_WATCH_INTERVAL
    }

    /// Splits a pane whose shell runs a launcher that writes its pid to a private file
    /// and then `exec`s the worker, so that pid is the worker's.
    fn open<'a>(
        &'a self,
        launch: &'a Launch,
        _color: &'a str,
        argv: Vec<String>,
        env: (String, String),
    ) -> BoxFuture<'a, Result<Opened<SessionId>, ExecError>> {
        Box::pin(async move {
            let name = &launch.name;
            let seq = {
                let mut started = lock(&self.started);
                *started += 1;
                *started - 1
            };
            let pid_file = self.panes.launchers().join(format!(
                "{}+{name}-{}-{seq}.pid",
                launch.team.name(),
                std::process::id()
            ));
            let _ = std::fs::remove_file(&pid_file);
            let pane_launch = PaneLaunch {
                cwd: launch.start_dir().to_path_buf(),
                env: vec![env],
                argv,
                pid_file: Some(pid_file.clone()),
            };
            let session = self.panes.spawn(name, &pane_launch).await?;
            let pid = self.wait_pid(&session, &pid_file).await;
            let _ = std::fs::remove_file(&pid_file);
            match pid {
                Ok(pid) => Ok(Opened {
                    id: session,
                    pid,
                    notices: Vec::new(),
                }),
                Err(why) => {
                    self.close(&session).await;
                    Err(ExecError::Start {
                        name: name.clone(),
                        message: why,
                    })
                }
            }
        })
    }

    fn close<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(e) = self.panes.close(id).await {
                tracing::debug!(session = %id, error = %e, "failed to close an iTerm2 pane");
            }
        })
    }

    fn live_ids(&self) -> BoxFuture<'_, Result<Vec<SessionId>, ExecError>> {
        Box::pin(async move {
            Ok(self
                .panes
                .listed()
                .await?
                .into_iter()
                .filter_map(|s| SessionId::parse(&s.id).ok())
                .collect())
        })
    }

    /// Every pane this lead opened, also those whose worker ended on its own.
    fn finish<'a>(&'a self, _ids: Vec<SessionId>, keep: bool) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if keep {
                self.panes.forget_all();
                return;
            }
            for e in self.panes.close_all().await {
                tracing::warn!(error = %e, "failed to close an iTerm2 pane");
            }
        })
    }

    /// Asks `it2` to close every pane this executor opened, without waiting.
    fn finish_now(&self, _ids: &[SessionId]) {
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

    use roo_store::Name;

    use super::*;
    use crate::backend::executor::TeammateExecutor;

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
        executor.insert_worker(
            alice.clone(),
            SessionId::parse(ALICE).unwrap(),
            child.id(),
            None,
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

    #[tokio::test]
    async fn ending_a_worker_removes_the_clone_gate_it_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let executor = executor(dir.path());
        std::fs::write(
            dir.path().join("list.json"),
            format!(r#"[{{"id": "{LEAD}"}}, {{"id": "{ALICE}"}}]"#),
        )
        .unwrap();
        let gates = crate::backend::pane::handoff_dir(dir.path());
        std::fs::create_dir_all(&gates).unwrap();
        let mut children = Vec::new();
        // alice is killed, bob ended at shutdown.
        for member in ["alice", "bob"] {
            let child = std::process::Command::new("sleep")
                .arg("300")
                .spawn()
                .unwrap();
            let gate = gates.join(format!("t+{member}-0123456789abcdef.clone"));
            std::fs::write(&gate, "ok\n").unwrap();
            executor.insert_worker(
                Name::parse(member).unwrap(),
                SessionId::parse(ALICE).unwrap(),
                child.id(),
                Some(gate.clone()),
            );
            children.push((child, gate));
        }
        executor.kill(&Name::parse("alice").unwrap()).await.unwrap();
        executor.shutdown_all(false).await;
        for (mut child, gate) in children {
            let _ = child.kill();
            let _ = child.wait();
            assert!(!gate.exists(), "{} left behind", gate.display());
        }
    }
}
