//! `roo-mail send`: builds a typed message from flags and sends it.

use std::io::{Read, Write};

use clap::ValueEnum;
use clap::builder::PossibleValue;
use roo_store::{MessageBody, MessageType, Outgoing, PermissionDecision, SendReport};

use crate::common::Context;
use crate::exit::{CliError, CliResult};
use crate::output::{escape, print_json};
use crate::shape::{PartialSend, Recipient, Undelivered};

/// A message type as `--type` takes it: the store's list ([`MessageType::ALL`]), each
/// with the flags it needs as help.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeArg(MessageType);

/// The values of `--type`, in the store's order.
static TYPE_ARGS: [TypeArg; MessageType::ALL.len()] = {
    let mut args = [TypeArg(MessageType::Text); MessageType::ALL.len()];
    let mut i = 0;
    while i < args.len() {
        args[i] = TypeArg(MessageType::ALL[i]);
        i += 1;
    }
    args
};

impl TypeArg {
    /// What `--help` says of the type.
    fn help(self) -> &'static str {
        match self.0 {
            MessageType::Text => "Plain text (needs --summary)",
            MessageType::StatusUpdate => "FYI progress news; never an instruction",
            MessageType::TaskAssignment => "The lead's \"please take this task\" (needs --task-id)",
            MessageType::IdleNotification => {
                "The sender is idle (optional --task-id: the task it completed)"
            }
            MessageType::ShutdownRequest => "Ask a member to shut down (optional --request-id)",
            MessageType::ShutdownResponse => {
                "Answer a shutdown request, to the lead only (--approve or --reject, --reason)"
            }
            MessageType::PlanApprovalRequest => "Submit a plan to the lead (--request-id, --plan)",
            MessageType::PlanApprovalResponse => {
                "The lead's verdict on a plan (--request-id, --approve/--reject, --feedback)"
            }
            MessageType::PermissionRequest => {
                "Ask the lead to allow a tool call (--request-id, --tool, --input JSON)"
            }
            MessageType::PermissionResponse => {
                "The lead relays the user's decision (--request-id, --decision allow|deny)"
            }
        }
    }
}

impl ValueEnum for TypeArg {
    fn value_variants<'a>() -> &'a [Self] {
        &TYPE_ARGS
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()).help(self.help()))
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  roo-mail send --from lead --to alice --summary 'interface changed' 'Authenticate() takes ctx now'
  roo-mail send --from alice --to '*' --type status_update 'module 1 refactored'
  roo-mail send --from lead --to bob --type task_assignment --task-id 3 'take the tests'
  roo-mail send --from bob --to lead --type shutdown_response --approve --reason 'all done'
  git diff | roo-mail send --to lead --summary 'my diff for review' -")]
pub struct SendArgs {
    /// Recipient: member name, agent id, or '*' for everyone but you
    #[arg(long, value_name = "NAME|*")]
    to: String,
    /// Idempotency key: each copy's id is KEY:RECIPIENT, and a recipient that already has
    /// it is skipped, so re-running a failed send with the same --id never delivers twice
    /// (a broadcast without --id gets a key of its own, printed if it fails half-way)
    #[arg(long = "id", value_name = "KEY")]
    key: Option<String>,
    /// Message type
    #[arg(long = "type", value_name = "TYPE", value_enum, default_value = "text")]
    kind: TypeArg,
    /// Short preview shown on one line (required for text; at most 200 characters)
    #[arg(long)]
    summary: Option<String>,
    /// Task id (task_assignment, idle_notification)
    #[arg(long, value_name = "ID")]
    task_id: Option<String>,
    /// Request id (shutdown, plan and permission messages)
    #[arg(long, value_name = "ID")]
    request_id: Option<String>,
    /// Approve (shutdown_response, plan_approval_response)
    #[arg(long, conflicts_with = "reject")]
    approve: bool,
    /// Reject (shutdown_response, plan_approval_response)
    #[arg(long)]
    reject: bool,
    /// Reason (shutdown_response, permission_response)
    #[arg(long)]
    reason: Option<String>,
    /// Feedback (plan_approval_response)
    #[arg(long)]
    feedback: Option<String>,
    /// The plan (plan_approval_request; '-' reads stdin)
    #[arg(long)]
    plan: Option<String>,
    /// Tool name (permission_request)
    #[arg(long)]
    tool: Option<String>,
    /// Tool input as JSON (permission_request)
    #[arg(long, value_name = "JSON")]
    input: Option<String>,
    /// Decision (permission_response)
    #[arg(long, value_enum)]
    decision: Option<Decision>,
    /// Message text; '-' reads it from stdin
    text: Option<String>,
}

/// Runs `roo-mail send`.
pub fn run(ctx: &Context, args: SendArgs, out: &mut impl Write) -> CliResult {
    // Everything the command line alone decides is checked before the store is opened:
    // a send refused for its flags takes no database session (nor waits for one).
    ctx.team_name()?;
    let from = ctx.agent()?;
    let outgoing = build(args.kind, &args)?;
    outgoing.validate()?;
    let team = ctx.team()?;
    let report = team
        .mailbox()
        .send_keyed(&from, &args.to, outgoing, args.key.as_deref())?;
    // A recipient in a pane reads its inbox now rather than at its watcher's next look.
    if !report.delivered.is_empty() {
        roo_store::wake::addressed(&team, &args.to, from.as_str());
    }
    if report.failed.is_empty() {
        if ctx.json() {
            let messages: Vec<&roo_store::Message> =
                report.delivered.iter().map(|(_, m)| m).collect();
            print_json(out, &messages)?;
        } else {
            for (_, m) in &report.delivered {
                writeln!(out, "{}", m.id)?;
            }
            for (name, id) in &report.already {
                writeln!(out, "{id} (already delivered to {name})")?;
            }
        }
        return Ok(());
    }
    partial_failure(ctx, report, out)
}

/// Some recipients got the message, others did not: say who is who (stdout), how to retry
/// without duplicates (stderr), and fail with the first failure's exit code.
fn partial_failure(ctx: &Context, report: SendReport, out: &mut impl Write) -> CliResult {
    let mut failed = report.failed;
    let retry = report.key.as_deref().map_or_else(
        || "retry the send".to_owned(),
        |key| format!("retry with --id {key} (recipients that have it are skipped)"),
    );
    let delivered: Vec<Recipient> = report
        .delivered
        .iter()
        .map(|(recipient, m)| Recipient {
            to: recipient.as_str(),
            id: m.id.as_str(),
        })
        .collect();
    let already: Vec<Recipient> = report
        .already
        .iter()
        .map(|(name, id)| Recipient {
            to: name.as_str(),
            id: id.as_str(),
        })
        .collect();
    let failures: Vec<Undelivered> = failed
        .iter()
        .map(|(name, e)| Undelivered {
            to: name.to_string(),
            error: e.to_string(),
        })
        .collect();
    if ctx.json() {
        print_json(
            out,
            &PartialSend {
                key: report.key.as_deref(),
                delivered,
                already_delivered: already,
                failed: failures,
                retry,
            },
        )?;
    } else {
        for r in delivered.iter().chain(&already) {
            writeln!(out, "{}", r.id)?;
        }
        let got: Vec<&str> = delivered.iter().chain(&already).map(|r| r.to).collect();
        eprintln!(
            "roo-mail: delivered to {} of {}: {}",
            got.len(),
            got.len() + failures.len(),
            if got.is_empty() {
                "nobody".to_owned()
            } else {
                escape(&got.join(", "))
            }
        );
        for f in &failures {
            eprintln!("roo-mail: not delivered to {}: {}", f.to, escape(&f.error));
        }
        eprintln!("roo-mail: {retry}");
    }
    let (_, first) = failed.remove(0);
    Err(CliError::Store(first))
}

/// `value`, or stdin when it is `-`. At most `max` bytes are taken: stdin is read only
/// one byte past the limit, so an endless or huge input is refused at once instead of
/// being read whole first.
fn stdin_if_dash(value: Option<&str>, what: &str, max: usize) -> CliResult<Option<String>> {
    match value {
        Some("-") => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .take(max as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| CliError::Usage(format!("read {what} from stdin: {e}")))?;
            if bytes.len() > max {
                return Err(CliError::Usage(format!(
                    "{what} on stdin is over {max} bytes; the limit is {max} bytes ({} KiB)",
                    max / 1024
                )));
            }
            let text = String::from_utf8(bytes)
                .map_err(|_| CliError::Usage(format!("read {what} from stdin: it is not UTF-8")))?;
            Ok(Some(text))
        }
        other => Ok(other.map(str::to_owned)),
    }
}

fn need(value: Option<&String>, flag: &str, kind: &str) -> CliResult<String> {
    value
        .cloned()
        .ok_or_else(|| CliError::Usage(format!("send {kind}: it needs {flag}")))
}

fn verdict(args: &SendArgs, kind: &str) -> CliResult<bool> {
    match (args.approve, args.reject) {
        (true, false) => Ok(true),
        (false, true) => Ok(false),
        _ => Err(CliError::Usage(format!(
            "send {kind}: it needs --approve or --reject"
        ))),
    }
}

fn build(TypeArg(kind): TypeArg, args: &SendArgs) -> CliResult<Outgoing> {
    let text = stdin_if_dash(
        args.text.as_deref(),
        "the text",
        roo_store::limits::MAX_MESSAGE_TEXT,
    )?
    .unwrap_or_default();
    let name = kind.name();
    let body = match kind {
        MessageType::Text => MessageBody::Text,
        MessageType::StatusUpdate => MessageBody::StatusUpdate,
        MessageType::TaskAssignment => MessageBody::TaskAssignment {
            task_id: need(args.task_id.as_ref(), "--task-id", name)?,
        },
        MessageType::IdleNotification => MessageBody::IdleNotification {
            completed_task_id: args.task_id.clone(),
        },
        MessageType::ShutdownRequest => MessageBody::ShutdownRequest {
            request_id: args.request_id.clone(),
        },
        MessageType::ShutdownResponse => MessageBody::ShutdownResponse {
            approve: verdict(args, name)?,
            reason: args.reason.clone().unwrap_or_default(),
            request_id: args.request_id.clone(),
        },
        MessageType::PlanApprovalRequest => MessageBody::PlanApprovalRequest {
            request_id: need(args.request_id.as_ref(), "--request-id", name)?,
            plan: stdin_if_dash(
                args.plan.as_deref(),
                "the plan",
                roo_store::limits::MAX_MESSAGE_FIELDS,
            )?
            .ok_or_else(|| CliError::Usage(format!("send {name}: it needs --plan")))?,
        },
        MessageType::PlanApprovalResponse => MessageBody::PlanApprovalResponse {
            request_id: need(args.request_id.as_ref(), "--request-id", name)?,
            approve: verdict(args, name)?,
            feedback: args.feedback.clone().unwrap_or_default(),
        },
        MessageType::PermissionRequest => MessageBody::PermissionRequest {
            request_id: need(args.request_id.as_ref(), "--request-id", name)?,
            tool: need(args.tool.as_ref(), "--tool", name)?,
            input: match &args.input {
                Some(raw) => serde_json::from_str(raw)
                    .map_err(|e| CliError::Usage(format!("parse --input as JSON: {e}")))?,
                None => serde_json::Value::Null,
            },
        },
        MessageType::PermissionResponse => MessageBody::PermissionResponse {
            request_id: need(args.request_id.as_ref(), "--request-id", name)?,
            decision: match args.decision {
                Some(Decision::Allow) => PermissionDecision::Allow,
                Some(Decision::Deny) => PermissionDecision::Deny,
                None => {
                    return Err(CliError::Usage(format!(
                        "send {name}: it needs --decision allow|deny"
                    )));
                }
            },
            reason: args.reason.clone().unwrap_or_default(),
        },
    };
    if matches!(kind, MessageType::Text | MessageType::StatusUpdate) && text.trim().is_empty() {
        return Err(CliError::Usage(format!(
            "send {name}: give the text as an argument, or '-' to read it from stdin"
        )));
    }
    let mut outgoing = Outgoing::new(body, text);
    outgoing.summary = args.summary.clone();
    Ok(outgoing)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--type` takes the store's types, in its order, each by its wire name.
    #[test]
    fn the_type_flag_takes_the_stores_types() {
        let names: Vec<String> = TypeArg::value_variants()
            .iter()
            .filter_map(|t| t.to_possible_value())
            .map(|v| v.get_name().to_string())
            .collect();
        let store: Vec<&str> = MessageType::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(names, store);
        for t in MessageType::ALL {
            assert_eq!(TypeArg::from_str(t.name(), false), Ok(TypeArg(t)));
        }
    }
}
