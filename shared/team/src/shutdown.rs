//! A busy member's answer to its lead's `shutdown_request`: approve or reject, decided
//! by its model.
//!
//! [`ShutdownOnRequest`] is a turn hook. At the top of every turn it takes the
//! `shutdown_request`s the [`InboxRouter`] queued. One from anybody but the member's
//! lead is acknowledged, logged and otherwise ignored: only the lead may end a teammate
//! (and a `shutdown_response` may only go to the lead). One from the lead is put before
//! the model as a system reminder naming the request and the lead's text, and stays
//! open: the model answers it with the [`ShutdownResponse`] tool
//! ([`ShutdownOnRequest::response_tool`]), whose call the runtime binds to the open
//! request — the request id is never shown to the model, and with no open request the
//! tool is an error that sends nothing, so a model cannot forge an answer.
//!
//! - approve: the `shutdown_response` (approve, reason, the request's id) goes to the
//!   lead and the run stops before the next model call ([`TurnAction::Stop`], so
//!   `RunOutcome::Stopped`);
//! - reject: the `shutdown_response` with `approve: false` and the model's reason goes
//!   to the lead and the member keeps working;
//! - no answer by the end of the run: the request is approved then
//!   ([`ShutdownOnRequest::after_run`]), since the member is idle and has nothing left
//!   to finish. A request is never left unanswered.
//!
//! A request to an idle member (no run in progress) never reaches this hook: the
//! teammate loop approves it at once ([`approve_shutdown`]). A request stays unread in
//! the inbox until it is answered, so a member that dies with one open answers it when
//! it starts again (idle, it approves).

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use futures_util::future::BoxFuture;
use roo_agent::tool::{
    Delegation, Tool, ToolContext, ToolKind, ToolOutput, ToolRegistry, TypedTool, WeakToolRegistry,
};
use roo_agent::{AgentHook, TurnAction};
use roo_store::{Mailbox, Message, MessageBody, Name, Outgoing};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::event::one_line;
use crate::router::InboxRouter;

/// The tool a teammate's model answers its lead's shutdown request with.
pub const SHUTDOWN_RESPONSE: &str = "ShutdownResponse";

/// The longest reason a model may give, in characters.
pub const MAX_REASON_CHARS: usize = 2_000;

/// How much of the lead's request text the reminder shows, in characters.
const REQUEST_TEXT_CHARS: usize = 1_000;

/// The turn hook that puts the lead's shutdown requests before a busy member's model
/// and stops the run once the model approves (see the module documentation).
pub struct ShutdownOnRequest {
    shared: Arc<Shared>,
}

struct Shared {
    router: InboxRouter,
    mailbox: Mailbox,
    lead: Name,
    state: Mutex<State>,
    /// The agent's tools, where [`ShutdownResponse`] waits deferred until a request
    /// comes (see [`ShutdownOnRequest::bind`]). Weak: the registry holds the tool,
    /// which holds this.
    registry: OnceLock<WeakToolRegistry>,
}

#[derive(Default)]
struct State {
    /// The lead's requests put before the model and not answered yet, oldest first.
    open: Vec<Message>,
    /// The model approved: the run stops at the top of the next turn.
    approved: bool,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn me(&self) -> &Name {
        self.router.member()
    }

    /// Answers every open request with `approve` and `reason`. Returns how many were
    /// answered; `Err` (the requests stay open) if no answer could be sent.
    async fn answer_open(&self, approve: bool, reason: &str) -> Result<usize, String> {
        let open = std::mem::take(&mut self.state().open);
        if open.is_empty() {
            return Ok(0);
        }
        let mut answered = Vec::new();
        let mut failed = Vec::new();
        let mut errors = Vec::new();
        for request in open {
            match answer_shutdown(&self.mailbox, self.me(), &request, approve, reason).await {
                Ok(()) => answered.push(request),
                Err(e) => {
                    errors.push(e);
                    failed.push(request);
                }
            }
        }
        let count = answered.len();
        let ids = answered.iter().map(|m| m.id.clone()).collect();
        if let Err(e) = self.router.handled(ids).await {
            tracing::warn!(member = %self.me(), error = %e, "failed to acknowledge answered shutdown requests");
        }
        if failed.is_empty() {
            return Ok(count);
        }
        self.state().open.splice(0..0, failed);
        if count > 0 {
            return Ok(count);
        }
        Err(errors.join("; "))
    }
}

impl ShutdownOnRequest {
    /// Puts `lead`'s shutdown requests to the router's member before its model.
    pub fn new(router: InboxRouter, mailbox: Mailbox, lead: Name) -> ShutdownOnRequest {
        ShutdownOnRequest {
            shared: Arc::new(Shared {
                router,
                mailbox,
                lead,
                state: Mutex::new(State::default()),
                registry: OnceLock::new(),
            }),
        }
    }

    /// The [`ShutdownResponse`] tool that answers this hook's open requests; give it to
    /// the same agent.
    pub fn response_tool(&self) -> Arc<dyn Tool> {
        Arc::new(ShutdownResponse {
            shared: self.shared.clone(),
        })
    }

    /// The agent's registry, holding [`Self::response_tool`] deferred: its schema is
    /// sent from the turn a shutdown request is put before the model on, not with every
    /// request of a teammate that is never asked to stop.
    pub fn bind(&self, registry: &ToolRegistry) {
        let _ = self.shared.registry.set(registry.downgrade());
    }

    /// Whether a request of the lead waits for the model's answer.
    pub fn has_open(&self) -> bool {
        !self.shared.state().open.is_empty()
    }

    /// Whether the model approved a shutdown (the member must stop).
    pub fn approved(&self) -> bool {
        self.shared.state().approved
    }

    /// Call when a run has ended: approves the requests the model left unanswered (the
    /// member is idle now, with nothing to finish). Returns whether the member must
    /// stop: the model approved, or an open request was approved now. If sending the
    /// answer fails the member stops anyway (the lead asked) and the failure is logged.
    pub async fn after_run(&self) -> bool {
        if !self.has_open() {
            return self.approved();
        }
        if let Err(e) = self
            .shared
            .answer_open(
                true,
                "my run ended without deciding; idle now, shutting down",
            )
            .await
        {
            tracing::warn!(member = %self.shared.me(), error = %e, "failed to answer a shutdown request");
        }
        self.shared.state().approved = true;
        true
    }

    fn stop_reason(&self) -> String {
        format!(
            "{} approved the lead {}'s request to shut down",
            self.shared.me(),
            self.shared.lead
        )
    }
}

impl AgentHook for ShutdownOnRequest {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async move {
            if self.approved() {
                return TurnAction::Stop(self.stop_reason());
            }
            let shared = &self.shared;
            if let Err(e) = shared.router.poll().await {
                tracing::warn!(member = %shared.me(), error = %e, "failed to read the inbox");
            }
            let requests = shared
                .router
                .take_requests_where(|m| matches!(m.body, MessageBody::ShutdownRequest { .. }));
            if requests.is_empty() {
                return TurnAction::Continue;
            }
            let (honoured, ignored): (Vec<_>, Vec<_>) =
                requests.into_iter().partition(|m| m.from == shared.lead);
            for request in &ignored {
                tracing::warn!(member = %shared.me(), from = %request.from, "ignored a shutdown request not from the lead");
            }
            let ids = ignored.iter().map(|m| m.id.clone()).collect();
            if let Err(e) = shared.router.handled(ids).await {
                tracing::warn!(member = %shared.me(), error = %e, "failed to acknowledge shutdown requests");
            }
            if honoured.is_empty() {
                return TurnAction::Continue;
            }
            let reminder = reminder(&shared.lead, &honoured);
            shared.state().open.extend(honoured);
            if let Some(registry) = shared.registry.get().and_then(WeakToolRegistry::upgrade) {
                registry.reveal(&[SHUTDOWN_RESPONSE]);
            }
            TurnAction::Inject(vec![reminder])
        })
    }
}

/// What the model reads when the lead asks it to shut down. Shows the lead's text, never
/// the request id.
fn reminder(lead: &Name, requests: &[Message]) -> String {
    let texts: Vec<String> = requests
        .iter()
        .map(|m| one_line(&roo_store::model_safe(&m.text), REQUEST_TEXT_CHARS))
        .filter(|t| !t.is_empty())
        .map(|t| format!("\"{t}\""))
        .collect();
    let said = if texts.is_empty() {
        ".".to_string()
    } else {
        format!(": {}.", texts.join(" "))
    };
    format!(
        "Shutdown request: the lead {lead} asks you to shut down{said} Answer it with the \
         {SHUTDOWN_RESPONSE} tool: `approve: true` stops your run before your next step (the \
         lead is told), so approve when your work is in a safe state to leave; `approve: false` \
         with a `reason` keeps you working and tells the lead why (e.g. what you must finish \
         first). If you have not answered when your run ends, you are shut down then."
    )
}

/// Answers `request` (a `shutdown_request`) with a `shutdown_response` from `me` to its
/// sender, carrying its request id, `approve` and `reason`.
pub(crate) async fn answer_shutdown(
    mailbox: &Mailbox,
    me: &Name,
    request: &Message,
    approve: bool,
    reason: &str,
) -> Result<(), String> {
    let MessageBody::ShutdownRequest { request_id } = &request.body else {
        return Err(format!("message {} is not a shutdown request", request.id));
    };
    let summary = if approve {
        format!("{me} agrees to shut down")
    } else {
        one_line(&format!("{me} refuses to shut down: {reason}"), 120)
    };
    let answer = Outgoing::new(
        MessageBody::ShutdownResponse {
            approve,
            reason: reason.to_string(),
            request_id: request_id.clone(),
        },
        "",
    )
    .with_summary(summary);
    let (mailbox, from, to) = (mailbox.clone(), me.clone(), request.from.to_string());
    match tokio::task::spawn_blocking(move || mailbox.send(&from, &to, answer)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "failed to send the shutdown response to {}: {e}",
            request.from
        )),
        Err(e) => Err(format!(
            "failed to send the shutdown response to {}: {e}",
            request.from
        )),
    }
}

/// Approves `request` at once (an idle member, or a run that ended). A failure to send
/// is logged: the member stops anyway (the request was the lead's wish).
pub(crate) async fn approve_shutdown(
    mailbox: &Mailbox,
    me: &Name,
    request: &Message,
    reason: &str,
) {
    if let Err(e) = answer_shutdown(mailbox, me, request, true, reason).await {
        tracing::warn!(member = %me, to = %request.from, error = %e, "failed to answer a shutdown request");
    }
}

// ---------------------------------------------------------------- the tool

/// The model's answer to the lead's open shutdown request.
pub struct ShutdownResponse {
    shared: Arc<Shared>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// true: stop before your next step; false: keep working.
    approve: bool,
    #[schemars(extend("description" = format!("Why, for the lead; at most {MAX_REASON_CHARS} characters.")))]
    reason: String,
}

impl TypedTool for ShutdownResponse {
    fn delegation(&self) -> Delegation {
        Delegation::NoSubAgent
    }

    type Input = Input;
    const NAME: &'static str = SHUTDOWN_RESPONSE;

    fn description(&self) -> String {
        "Answers your lead's open shutdown request (a system reminder \"Shutdown request: …\")."
            .to_string()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    fn is_concurrency_safe(&self, _: &Value) -> bool {
        false
    }

    fn summarize(&self, input: &Value) -> Option<String> {
        let verdict = match input.get("approve").and_then(Value::as_bool) {
            Some(true) => "approve",
            Some(false) => "reject",
            None => "?",
        };
        let reason = input.get("reason").and_then(Value::as_str).unwrap_or("");
        Some(format!(
            "{SHUTDOWN_RESPONSE}({verdict}: {})",
            one_line(reason, 80)
        ))
    }

    async fn run(&self, input: Input, _: &ToolContext) -> ToolOutput {
        match self.answer(input).await {
            Ok(text) => ToolOutput::ok(crate::tools::bounded(text)),
            Err(e) => ToolOutput::error(crate::tools::bounded(format!(
                "failed to answer the shutdown request: {e}"
            ))),
        }
    }
}

impl ShutdownResponse {
    async fn answer(&self, input: Input) -> Result<String, String> {
        let reason = input.reason.trim();
        if reason.is_empty() {
            return Err("`reason` is empty; say why".to_string());
        }
        let chars = reason.chars().count();
        if chars > MAX_REASON_CHARS {
            return Err(format!(
                "`reason` has {chars} characters; the limit is {MAX_REASON_CHARS}"
            ));
        }
        let shared = &self.shared;
        if shared.state().open.is_empty() {
            return Err(format!(
                "no shutdown request is open: the lead {} has not asked you to shut down, or \
                 you already answered; nothing was sent. Keep working",
                shared.lead
            ));
        }
        shared.answer_open(input.approve, reason).await?;
        if input.approve {
            shared.state().approved = true;
            Ok(format!(
                "You agreed to shut down; the lead {} was told. Your run stops now.",
                shared.lead
            ))
        } else {
            Ok(format!(
                "You refused to shut down; the lead {} was told your reason. Keep working.",
                shared.lead
            ))
        }
    }
}
