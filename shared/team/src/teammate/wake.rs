//! How an idle teammate wakes: which messages wake it ([`wakes_teammate`]), the wait on
//! its router (a shutdown request from the lead, requests it does not answer, a lead
//! whose process is gone), and the prompt of the run a wake starts. Kept apart from the
//! loop so the rule for what wakes a teammate is read in one place.

use roo_agent::event::{AgentEvent, EventSink};
use roo_store::{Mailbox, Message, MessageBody, Name};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::router::{InboxRouter, RouterError};
use crate::shutdown::approve_shutdown;

use super::idle::OwnEntry;
use super::lead_watch;
use super::{TeammateError, TeammateExit};

/// Added to the wake prompt when the teammate's next final answer will not be forwarded
/// unless its run changes the task list ([`MAX_ANSWER_ONLY_NOTICES`](super::idle::MAX_ANSWER_ONLY_NOTICES)).
pub const ANSWER_WITHHELD: &str = "Your last answers changed nothing on the task list, so your \
     next final answer will not reach the lead unless this run changes it (answers must not go \
     back and forth without end). Send what the lead must read with SendMessage.";

/// The input of a run that an inbox message started; the messages themselves follow as
/// a system reminder injected by the delivery hook (and are marked delivered only then).
pub const WAKE_PROMPT: &str = "New messages from your team arrived while you were idle; they follow. \
     Act on them if they concern your work, then end your turn.";

pub(super) enum Wake {
    Conversation,
    ShutDown,
    Cancelled,
    LeadGone(String),
}

/// Whether a message wakes an idle teammate. `status_update` (progress news) and
/// `idle_notification` are FYI: they wait for the next run a real message (text, a task
/// assignment, a request) starts, and are delivered with it; a busy teammate gets them
/// between tool calls like any message.
pub fn wakes_teammate(message: &Message) -> bool {
    !matches!(
        message.body,
        MessageBody::StatusUpdate | MessageBody::IdleNotification { .. }
    )
}

/// Whether messages that wake a teammate wait in its inbox now (read first).
pub(super) async fn messages_wait(router: &InboxRouter, me: &Name) -> bool {
    if let Err(e) = router.poll().await {
        tracing::warn!(member = %me, error = %e, "failed to read the inbox");
    }
    router.has_input_where(wakes_teammate)
}

/// Waits while idle until a message that [wakes](wakes_teammate) it arrives, the lead
/// asks for a shutdown (approved here: idle, it has nothing to finish), or `cancel`.
/// Requests not from the lead, and requests a teammate does not answer (permission and
/// plan requests), are acknowledged and ignored.
pub(super) async fn wait_for_input(
    router: &InboxRouter,
    mailbox: &Mailbox,
    me: &Name,
    lead: &Name,
    cancel: &CancellationToken,
    router_task: &mut JoinHandle<Result<(), RouterError>>,
    orphan: Option<(std::time::Duration, &EventSink)>,
) -> Result<Wake, TeammateError> {
    // While idle: a lead whose process is gone for the whole orphan timeout ends the
    // wait; its going and a new lead's adoption are told on the way.
    let orphaned = async {
        let Some((timeout, output)) = orphan else {
            return std::future::pending().await;
        };
        let team = mailbox.team();
        lead_watch::orphaned(
            team,
            timeout,
            |pid| {
                let text = format!(
                    "the lead's process {pid} is gone; waiting up to {}s for a lead to adopt team {} (roo-lead --team {})",
                    timeout.as_secs(),
                    team.name(),
                    team.name()
                );
                tracing::warn!(member = %me, "{text}");
                output.emit(AgentEvent::Notice { text });
            },
            |pid| {
                let text = format!("adopted by the lead's process {pid}");
                tracing::info!(member = %me, "{text}");
                output.emit(AgentEvent::Notice { text });
            },
        )
        .await
    };
    tokio::pin!(orphaned);
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Ok(Wake::Cancelled),
            why = &mut orphaned => return Ok(Wake::LeadGone(why)),
            ended = &mut *router_task => {
                let source = match ended {
                    Ok(Ok(())) => RouterError::Task("the inbox task stopped".to_string()),
                    Ok(Err(e)) => e,
                    Err(e) => RouterError::Task(e.to_string()),
                };
                return Err(TeammateError::Router { name: me.clone(), source });
            }
            _ = router.input_where(wakes_teammate) => {}
        }
        let requests = router.take_requests();
        let mut shut_down = false;
        for request in &requests {
            match &request.body {
                MessageBody::ShutdownRequest { .. } if &request.from == lead => {
                    approve_shutdown(mailbox, me, request, "idle; shutting down").await;
                    shut_down = true;
                }
                _ => {
                    tracing::warn!(member = %me, from = %request.from, kind = request.body.type_name(), "ignored a request a teammate does not answer")
                }
            }
        }
        let ids = requests.iter().map(|m| m.id.clone()).collect();
        if let Err(e) = router.handled(ids).await {
            tracing::warn!(member = %me, error = %e, "failed to acknowledge requests");
        }
        if shut_down {
            return Ok(Wake::ShutDown);
        }
        if router.has_input_where(wakes_teammate) {
            return Ok(Wake::Conversation);
        }
    }
}

/// What an idle teammate does on `wake`: the next run's input, or how its loop ends.
pub(super) async fn wake_input(
    wake: Wake,
    member: &OwnEntry,
    output: &EventSink,
) -> Result<String, TeammateExit> {
    match wake {
        Wake::Conversation => {
            // The streak of answer-only notifications is spent: the next answer reaches
            // the lead only if the run changes the task list. The model must know, or it
            // would take that answer for a report.
            let withheld = member.answers.lock().is_ok_and(|s| s.next_withheld());
            Ok(if withheld {
                format!("{WAKE_PROMPT}\n\n{ANSWER_WITHHELD}")
            } else {
                WAKE_PROMPT.to_string()
            })
        }
        Wake::ShutDown => Err(member.shut_down().await),
        Wake::Cancelled => Err(TeammateExit::Cancelled),
        Wake::LeadGone(why) => {
            tracing::warn!(member = %member.me, "{why}; stopping");
            output.emit(AgentEvent::Notice {
                text: format!("{why}; stopping (restart it with roo-worker once a lead runs)"),
            });
            Err(TeammateExit::LeadGone(why))
        }
    }
}
