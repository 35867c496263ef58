//! One interface over where teammates run (docs/BACKENDS.md): [`TeammateExecutor`].
//!
//! The spawner decides *what* a teammate is (name, prompt, work directory, mode, model)
//! and hands it to an executor as a [`Launch`]; the executor decides *where* it runs —
//! a task of the lead's process ([`super::in_process::InProcessExecutor`]) or a
//! `roo-worker` in a terminal pane ([`super::tmux::TmuxExecutor`], [`super::iterm2::ITerm2Executor`]) — and keeps
//! what it needs to reach, stop and check it, keyed by member name. The verbs every
//! backend has are required methods; optional capabilities (the pane's screen, a
//! pane's wake-up) are default methods that answer [`ExecError::Unsupported`] naming
//! the backend, so a caller can tell "cannot here" from "failed".

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use roo_agent::permissions::PermissionMode;
use roo_agent::tool::Tool;
use roo_store::{BackendType, Message, MessageBody, Name, Outgoing, Team};

use crate::settings::AgentSettings;

/// Everything an executor needs to start one teammate.
#[derive(Clone)]
pub struct Launch {
    /// Its team (store handle).
    pub team: Team,
    /// Its member name.
    pub name: Name,
    /// The team's lead.
    pub lead: Name,
    /// The first run's input; empty: resume the transcript and take up waiting messages.
    pub prompt: String,
    /// Its agent settings: provider (shared with the lead in-process; a pane teammate
    /// gets the provider flags), mode, trust, sandbox, max turns, cwd and roots.
    pub settings: AgentSettings,
    /// Send a plan for approval before any write.
    pub plan_mode_required: bool,
    /// The mode once a plan is approved (the lead's).
    pub mode_after_plan: PermissionMode,
    /// Recorded as the member's agent type.
    pub agent_type: Option<String>,
    /// A model other than the lead's.
    pub model: Option<String>,
    /// Its working directory (worktree or the shared directory).
    pub work_dir: PathBuf,
    /// Its display colour (a pane's border; the roster's `color`).
    pub color: Option<String>,
    /// More tools for an in-process teammate (its team tools with the lead's restart
    /// hook); a `roo-worker` builds its own.
    pub tools: Vec<Arc<dyn Tool>>,
    /// The lead's public key (hex), pinned by the teammate from its start: it takes
    /// answers to its questions only with this key's signature.
    pub lead_key: Option<String>,
    /// The member role the lead made for this teammate's process on the PostgreSQL
    /// store (docs/DISTRIBUTED.md "Authority in the database"): its handoff carries that
    /// role's URL and password in place of the lead's login. `None`: the lead's login
    /// (files, `member_roles: off`, a server that refuses them, in-process).
    pub member_login: Option<Arc<roo_store::MemberLogin>>,
}

impl Launch {
    /// Where a worker's pane or process starts: its working directory, or, while the lead
    /// still makes its clone there ([`AgentSettings::clone_gate`]), the lead's repository
    /// (the directory its config comes from), which exists.
    pub fn start_dir(&self) -> &std::path::Path {
        match (&self.settings.clone_gate, &self.settings.config_root) {
            (Some(_), Some(root)) => root,
            _ => &self.work_dir,
        }
    }
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("team", self.team.name())
            .field("name", &self.name)
            .field("work_dir", &self.work_dir)
            .finish_non_exhaustive()
    }
}

/// Why an executor could not do something. Read after "failed to ".
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{what}: not supported by the {backend} backend")]
    Unsupported {
        backend: &'static str,
        what: &'static str,
    },
    #[error("reach {name}: no teammate of that name was started by this {backend} backend")]
    Unknown { backend: &'static str, name: Name },
    #[error("start {name}: {message}")]
    Start { name: Name, message: String },
    #[error("stop {name}: {message}")]
    Stop { name: Name, message: String },
    #[error("send to {to}: {source}")]
    Send {
        to: Name,
        source: Box<roo_store::Error>,
    },
    /// A pane backend's own failure (tmux, `it2`), whatever the backend.
    #[error("{source}")]
    Backend {
        backend: &'static str,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("run a store operation: {0}")]
    Task(String),
}

/// Where teammates run. See the module documentation.
pub trait TeammateExecutor: Send + Sync {
    /// The backend recorded in the roster for its teammates.
    fn backend(&self) -> BackendType;

    /// The backend's name in messages (`in-process`, `tmux`, `iTerm2`).
    fn label(&self) -> &'static str;

    /// Starts `launch`'s teammate; returns once it runs (for a process: once it has
    /// joined the team, so a start that fails is an error here, not a death later), with
    /// notices for the lead (e.g. how to attach to a detached session).
    fn spawn(&self, launch: Launch) -> BoxFuture<'_, Result<Vec<String>, ExecError>>;

    /// Whether the teammate `name` this executor started is still running.
    fn is_active(&self, name: &Name) -> bool;

    /// Stops `name` now, without asking: an in-process loop is cancelled (its commands
    /// end, it is recorded idle); a pane's worker gets SIGTERM (then SIGKILL) and its
    /// pane is closed. Its transcript stays, so a later message can start it again.
    fn kill(&self, name: &Name) -> BoxFuture<'_, Result<(), ExecError>>;

    /// Stops every teammate this executor started and releases what it created (panes,
    /// a session): what happens when the lead exits. With `keep`, pane teammates are
    /// left running where the backend can leave them.
    fn shutdown_all(&self, keep: bool) -> BoxFuture<'_, ()>;

    /// Writes `message` to `to`'s inbox and wakes `to` ([`TeammateExecutor::wake`]).
    fn send_message(
        &self,
        team: &Team,
        from: &Name,
        to: &Name,
        message: Outgoing,
    ) -> BoxFuture<'_, Result<Vec<Message>, ExecError>> {
        let (team, from, to) = (team.clone(), from.clone(), to.clone());
        Box::pin(async move {
            let target = to.clone();
            let sent = tokio::task::spawn_blocking(move || {
                team.mailbox().send(&from, target.as_str(), message)
            })
            .await
            .map_err(|e| ExecError::Task(e.to_string()))?
            .map_err(|source| ExecError::Send {
                to: to.clone(),
                source: Box::new(source),
            })?;
            match self.wake(&to) {
                Ok(()) | Err(ExecError::Unsupported { .. }) => {}
                Err(e) => tracing::debug!(member = %to, error = %e, "failed to wake"),
            }
            Ok(sent)
        })
    }

    /// Asks `to` to shut down gracefully: a `shutdown_request` from `from` (the lead),
    /// which an idle teammate approves at once and a busy one decides on. Returns once
    /// the request is written; the teammate answers in its own time.
    fn terminate(
        &self,
        team: &Team,
        from: &Name,
        to: &Name,
        reason: &str,
    ) -> BoxFuture<'_, Result<(), ExecError>> {
        let message = Outgoing::new(MessageBody::ShutdownRequest { request_id: None }, reason);
        let sent = self.send_message(team, from, to, message);
        Box::pin(async move { sent.await.map(|_| ()) })
    }

    /// Makes `name` read its inbox now (after an inbox write). Optional: an in-process
    /// teammate watches its inbox itself.
    fn wake(&self, name: &Name) -> Result<(), ExecError> {
        let _ = name;
        Err(ExecError::Unsupported {
            backend: self.label(),
            what: "waking a teammate",
        })
    }

    /// The visible text of `name`'s pane (why a worker failed to start). Optional.
    fn capture(&self, name: &Name) -> BoxFuture<'_, Result<String, ExecError>> {
        let _ = name;
        let label = self.label();
        Box::pin(async move {
            Err(ExecError::Unsupported {
                backend: label,
                what: "reading a teammate's screen",
            })
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    struct Bare;

    impl TeammateExecutor for Bare {
        fn backend(&self) -> BackendType {
            BackendType::InProcess
        }
        fn label(&self) -> &'static str {
            "bare"
        }
        fn spawn(&self, _: Launch) -> BoxFuture<'_, Result<Vec<String>, ExecError>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn is_active(&self, _: &Name) -> bool {
            false
        }
        fn kill(&self, _: &Name) -> BoxFuture<'_, Result<(), ExecError>> {
            Box::pin(async { Ok(()) })
        }
        fn shutdown_all(&self, _: bool) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
    }

    #[tokio::test]
    async fn optional_capabilities_say_which_backend_lacks_them() {
        let name = Name::parse("alice").unwrap();
        let err = Bare.wake(&name).unwrap_err().to_string();
        assert_eq!(err, "waking a teammate: not supported by the bare backend");
        let err = Bare.capture(&name).await.unwrap_err().to_string();
        assert_eq!(
            err,
            "reading a teammate's screen: not supported by the bare backend"
        );
    }

    #[tokio::test]
    async fn terminate_writes_a_shutdown_request_to_the_inbox() {
        let dir = tempfile::tempdir().unwrap();
        let home = roo_store::RooHome::new(dir.path());
        let t = Name::parse("t").unwrap();
        let (lead, alice) = (Name::parse("lead").unwrap(), name("alice"));
        let team = Team::create(
            &home,
            t.clone(),
            "",
            roo_store::Member::new(lead.clone(), &t),
            vec![roo_store::Member::new(alice.clone(), &t)],
        )
        .unwrap();
        Bare.terminate(&team, &lead, &alice, "wrap up")
            .await
            .unwrap();
        let inbox = team
            .mailbox()
            .read(&alice, &roo_store::ReadFilter::default())
            .unwrap();
        assert_eq!(inbox.len(), 1);
        assert!(matches!(
            inbox[0].body,
            MessageBody::ShutdownRequest { request_id: None }
        ));
        assert_eq!(inbox[0].text, "wrap up");
    }

    fn name(s: &str) -> Name {
        Name::parse(s).unwrap()
    }
}
