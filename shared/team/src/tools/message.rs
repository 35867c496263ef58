//! SendMessage: a message to one member, or `*` for every member but the sender.
//!
//! A model may send `text` (the default; needs a summary), `status_update` (FYI news
//! the recipients must not treat as instructions) and, from the lead only,
//! `shutdown_request`. It sends the request without a request id, so the teammate's
//! answer (`shutdown_response`) reaches the lead's conversation as a message instead of
//! waiting for a runtime waiter (TeamDelete, which must know the outcome, opens its own
//! requests with secret ids).
//!
//! Responses — `shutdown_response`, `plan_approval_response`, `permission_response` —
//! are refused: they answer a request the member received, whose random id is never
//! shown to a model. The lead's UI answers permission and plan requests; a teammate
//! answers its lead's shutdown request with the ShutdownResponse tool, which the runtime
//! binds to the open request. A model that could send them could forge a permission
//! answer, approve a plan nobody showed it, or answer a request nobody made.
//! `task_assignment` goes through TaskUpdate (which sets the owner first) and
//! `idle_notification` is the runtime's.
//!
//! An unknown recipient is an error and writes no file (the store resolves names against
//! the team config before it touches an inbox).

use roo_agent::tool::{Delegation, ToolContext, ToolKind, ToolOutput, TypedTool};
use roo_store::{MAX_SUMMARY_CHARS, MessageBody, MessageType, Outgoing};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::event::one_line;

use super::{TeamToolError, TeamTools, bounded, parse_name, run_blocking};

const NAME: &str = "SendMessage";

/// What a model's `type` becomes: the body it sends, or why it may not send it. The one
/// place the team's rule stands; [`model_types`] offers the types it accepts.
fn model_body(kind: MessageType) -> Result<MessageBody, ModelRefusal> {
    match kind {
        MessageType::Text => Ok(MessageBody::Text),
        MessageType::StatusUpdate => Ok(MessageBody::StatusUpdate),
        MessageType::ShutdownRequest => Ok(MessageBody::ShutdownRequest { request_id: None }),
        MessageType::ShutdownResponse
        | MessageType::PlanApprovalResponse
        | MessageType::PermissionResponse => Err(ModelRefusal::Answer),
        MessageType::TaskAssignment
        | MessageType::IdleNotification
        | MessageType::PlanApprovalRequest
        | MessageType::PermissionRequest => Err(ModelRefusal::NotOffered),
    }
}

/// Why a model may not send a type.
enum ModelRefusal {
    /// It answers a request whose id the model never sees: the runtime's to send.
    Answer,
    /// Another tool or the runtime sends it.
    NotOffered,
}

/// The message types a model may send, in protocol order.
fn model_types() -> Vec<&'static str> {
    MessageType::ALL
        .into_iter()
        .filter(|&kind| model_body(kind).is_ok())
        .map(MessageType::name)
        .collect()
}

/// Sends a message to a teammate, or to all.
#[derive(Debug, Clone)]
pub struct SendMessage {
    team: TeamTools,
}

impl SendMessage {
    pub fn new(team: TeamTools) -> SendMessage {
        SendMessage { team }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// A member's name, or "*" for all (costly).
    to: String,
    message: String,
    #[serde(default)]
    #[schemars(extend("description" = format!("One-line preview (at most {MAX_SUMMARY_CHARS} characters), required for `text`.")))]
    summary: Option<String>,
    /// Default `text`; `status_update`: news that wakes no one; `shutdown_request` (lead only): asks a teammate to finish and exit.
    #[serde(default, rename = "type")]
    #[schemars(extend("enum" = model_types()))]
    kind: Option<String>,
}

impl TypedTool for SendMessage {
    fn delegation(&self) -> Delegation {
        Delegation::BuiltInAgents
    }

    type Input = Input;
    const NAME: &'static str = NAME;

    fn description(&self) -> String {
        "Messages your team; nothing else you write reaches them (but a teammate's final \
         answer reaches the lead)."
            .to_string()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    fn summarize(&self, input: &Value) -> Option<String> {
        let text = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default();
        let kind = match text("type") {
            "" | "text" => String::new(),
            other => format!(" [{}]", one_line(other, 32)),
        };
        Some(format!(
            "{NAME}(to {}{kind}: {})",
            one_line(text("to"), 64),
            one_line(text("summary"), 80)
        ))
    }

    async fn run(&self, input: Input, ctx: &ToolContext) -> ToolOutput {
        match self.send(input, ctx).await {
            Ok(text) => ToolOutput::ok(bounded(text)),
            Err(e) => e.into_output(),
        }
    }
}

impl SendMessage {
    async fn send(&self, input: Input, ctx: &ToolContext) -> Result<String, TeamToolError> {
        let invalid = |message: String| TeamToolError::InvalidInput {
            tool: NAME,
            message,
        };
        let to = input.to.trim().to_string();
        let recipient = if to == "*" {
            None
        } else {
            Some(parse_name(NAME, "to", &to)?)
        };
        let kind = input.kind.as_deref().map_or("text", str::trim);
        let named = if kind.is_empty() { "text" } else { kind };
        let body = match MessageType::from_name(named).map(model_body) {
            Some(Ok(body)) => body,
            Some(Err(ModelRefusal::Answer)) => {
                return Err(TeamToolError::Refused(format!(
                    "send a {kind}: the runtime answers requests (the user decides \
                     permissions and plans at the lead's terminal; a teammate answers its \
                     lead's shutdown request with the ShutdownResponse tool); send a text \
                     message to explain instead"
                )));
            }
            Some(Err(ModelRefusal::NotOffered)) | None => {
                return Err(invalid(format!(
                    "`type` {kind:?} cannot be sent with SendMessage; use one of {}",
                    model_types().join(", ")
                )));
            }
        };
        let summary = input
            .summary
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        if matches!(body, MessageBody::Text) && summary.is_none() {
            return Err(invalid(format!(
                "`summary` is missing: a text message needs a short preview (at most \
                     {MAX_SUMMARY_CHARS} characters)"
            )));
        }
        if let Some(summary) = &summary
            && summary.chars().count() > MAX_SUMMARY_CHARS
        {
            return Err(invalid(format!(
                "`summary` has {} characters; the limit is {MAX_SUMMARY_CHARS}",
                summary.chars().count()
            )));
        }
        if input.message.trim().is_empty() {
            return Err(invalid("`message` is empty".into()));
        }
        let binding = self.team.binding()?;
        if matches!(body, MessageBody::ShutdownRequest { .. }) && !binding.is_lead() {
            return Err(TeamToolError::LeadOnly {
                action: "send a shutdown_request".into(),
                lead: binding.lead.clone(),
            });
        }
        if recipient.as_ref() == Some(&binding.me) {
            return Err(invalid(format!(
                "`to` is yourself ({}); send to another member",
                binding.me
            )));
        }
        let mut outgoing = Outgoing::new(body, input.message);
        if let Some(summary) = summary {
            outgoing = outgoing.with_summary(summary);
        }
        let team = self.team.clone();
        run_blocking(NAME, &ctx.cancel, move || {
            let report = binding
                .team
                .mailbox()
                .send_keyed(&binding.me, &to, outgoing, None)?;
            let delivered: Vec<String> = report
                .delivered
                .iter()
                .map(|(name, _)| {
                    team.notify_sent(name);
                    name.to_string()
                })
                .collect();
            if report.failed.is_empty() {
                return Ok(if to == "*" {
                    format!(
                        "broadcast to {} member(s): {}",
                        delivered.len(),
                        delivered.join(", ")
                    )
                } else {
                    format!("sent to {to}")
                });
            }
            let failed: Vec<String> = report
                .failed
                .iter()
                .map(|(name, e)| format!("{name}: {e}"))
                .collect();
            Err(TeamToolError::Refused(format!(
                "deliver to every recipient: delivered to {} ({}), not delivered to {}",
                delivered.len(),
                delivered.join(", "),
                failed.join("; ")
            )))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The types offered to a model are the store's list filtered by [`model_body`], and
    /// the schema the model reads offers exactly those.
    #[test]
    fn the_types_a_model_may_send_come_from_the_stores_list() {
        assert_eq!(model_types(), ["text", "status_update", "shutdown_request"]);
        for kind in MessageType::ALL {
            if let Ok(body) = model_body(kind) {
                assert_eq!(body.message_type(), kind);
            }
        }
        let schema = schemars::schema_for!(Input);
        assert_eq!(
            schema.as_value()["properties"]["type"]["enum"],
            serde_json::json!(model_types())
        );
    }
}
