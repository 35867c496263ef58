//! In-process teammates: the teammate loop as a tokio task of the lead's process.
//!
//! [`spawn_in_process`] joins the team with the lead's pid (the protocol wants a pid for
//! every member, so nobody can join by hand over a running one) and `backend_type:
//! in-process`, holds its presence through a team handle of its own (the spec's: see
//! `InProcessExecutor`), then spawns the loop beside a supervisor. The supervisor owns the
//! loop's `JoinHandle`: a panic, or an error that ends the loop, is a death — the member
//! is declared dead ([`roo_store::Team::declare_dead`]: `dead_at`, and its unfinished
//! tasks back to pending with a note) and reported as [`TeamEvent::MemberState`] `Dead`
//! plus a notice; it is never mistaken for idle, which only the loop itself records.
//! Dropping the [`TeammateHandle`] cancels the teammate, so in-process teammates end
//! with the lead.

use roo_store::{BackendType, MemberState, Name};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::event::{TeamEvent, TeamEventSender};
use crate::teammate::presence::enter;
use crate::teammate::{TeammateError, TeammateExit, TeammateSpec, run_joined};

/// How an in-process teammate ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TeammateEnd {
    /// The loop returned normally (shut down by the lead, or cancelled).
    Exited(TeammateExit),
    /// The loop failed or panicked; the member was declared dead with this reason.
    Died { reason: String },
}

/// A running in-process teammate. Dropping it cancels the teammate.
#[derive(Debug)]
pub struct TeammateHandle {
    name: Name,
    cancel: CancellationToken,
    ended: watch::Receiver<Option<TeammateEnd>>,
    supervisor: Option<JoinHandle<()>>,
}

impl TeammateHandle {
    /// The teammate's member name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// Asks the teammate to stop now (not a shutdown request: no answer is sent; its
    /// state becomes idle). Use a `shutdown_request` for a graceful stop.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// How it ended, if it has.
    pub fn ended(&self) -> Option<TeammateEnd> {
        self.ended.borrow().clone()
    }

    /// A receiver that sees how it ended (`None` until then), for a lead that selects
    /// over many teammates.
    pub fn watch_end(&self) -> watch::Receiver<Option<TeammateEnd>> {
        self.ended.clone()
    }

    /// Waits until it has ended (and, if it died, until the death is recorded).
    pub async fn wait(mut self) -> TeammateEnd {
        if let Some(supervisor) = self.supervisor.take() {
            let _ = supervisor.await;
        }
        let mut ended = self.ended.clone();
        match ended.wait_for(Option::is_some).await {
            Ok(end) => end.clone().unwrap_or(TeammateEnd::Died {
                reason: "its supervisor stopped".to_string(),
            }),
            Err(_) => TeammateEnd::Died {
                reason: "its supervisor stopped".to_string(),
            },
        }
    }
}

impl Drop for TeammateHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Joins the team as the spec's member (the lead's pid, backend in-process) and starts
/// its loop in this process. Fails if it cannot join (a live `roo-worker` already is
/// that member, an unknown team).
pub async fn spawn_in_process(mut spec: TeammateSpec) -> Result<TeammateHandle, TeammateError> {
    spec.member.backend_type = Some(BackendType::InProcess);
    spec.member.pane_id = None;
    let (entry, presence) = enter(&mut spec, std::process::id()).await?;
    let name = spec.binding.me.clone();
    // Its death is recorded through a handle without its fence.
    let team = spec.binding.team.detached();
    let lead = spec.binding.lead.clone();
    let events = spec.events.clone();
    let cancel = CancellationToken::new();
    let (tell, ended) = watch::channel(None);
    let task = tokio::spawn(run_joined(spec, entry, presence, cancel.clone()));
    let supervisor = tokio::spawn({
        let name = name.clone();
        async move {
            let end = match task.await {
                Ok(Ok(exit)) => TeammateEnd::Exited(exit),
                Ok(Err(e)) => TeammateEnd::Died {
                    reason: format!("its loop failed: {e}"),
                },
                Err(e) if e.is_panic() => TeammateEnd::Died {
                    reason: format!("its task panicked: {}", panic_text(e.into_panic())),
                },
                Err(_) => TeammateEnd::Died {
                    reason: "its task was aborted".to_string(),
                },
            };
            if let TeammateEnd::Died { reason } = &end {
                declare_dead(&team, &name, &lead, reason, events.as_ref()).await;
            }
            let _ = tell.send(Some(end));
        }
    });
    Ok(TeammateHandle {
        name,
        cancel,
        ended,
        supervisor: Some(supervisor),
    })
}

async fn declare_dead(
    team: &roo_store::Team,
    name: &Name,
    lead: &Name,
    reason: &str,
    events: Option<&TeamEventSender>,
) {
    tracing::error!(member = %name, %reason, "in-process teammate died");
    let (store, who, by, why) = (team.clone(), name.clone(), lead.clone(), reason.to_string());
    let death =
        tokio::task::spawn_blocking(move || store.declare_dead(who.as_str(), Some(&by), &why))
            .await;
    let released = match death {
        Ok(Ok(death)) => {
            let (team, lead, name) = (team.clone(), lead.clone(), name.clone());
            let text = format!("teammate {name} died: {reason}");
            let count = death.released.len();
            let _ = tokio::task::spawn_blocking(move || {
                crate::lead::tell_lead_of_death(&team, &lead, &name, &text)
            })
            .await;
            count
        }
        Ok(Err(e)) => {
            tracing::error!(member = %name, error = %e, "failed to record the death");
            0
        }
        Err(_) => 0,
    };
    if let Some(events) = events {
        events.send(TeamEvent::MemberState {
            name: name.clone(),
            state: MemberState::Dead,
        });
        events.send(TeamEvent::Notice {
            text: format!(
                "teammate {name} died ({reason}); {released} task(s) returned to pending"
            ),
        });
    }
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "no message".to_string()
    }
}
