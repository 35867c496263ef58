//! How messages read to a model: the `<teammate-message>` form of one message, the
//! reminder form, and a turn's delivery within its budget — a digest of what waits
//! and one collapsed line per flooding sender. Part of the protocol
//! (`docs/PROTOCOL.md`); kept apart from the wire types in the parent module.

use super::*;
impl Message {
    /// The `<teammate-message …>…</teammate-message>` form injected into a model's context.
    ///
    /// Attribute values are XML-escaped and the content goes through [`crate::model_safe`]
    /// (every `<` escaped, terminal escapes shown), so code samples stay readable but a
    /// message cannot forge another message or break out of its own.
    pub fn render(&self) -> String {
        self.render_within(usize::MAX)
    }

    /// [`Message::render`] with the content cut to at most `max_content` bytes: a cut
    /// content ends with a note naming the message id and how to read it in full, so a
    /// message larger than one turn's delivery budget still reaches the model, bounded.
    pub fn render_within(&self, max_content: usize) -> String {
        let mut attrs = vec![
            ("from", self.from.to_string()),
            ("type", self.body.type_name().to_owned()),
        ];
        if let Some(summary) = self.summary.as_deref().filter(|s| !s.is_empty()) {
            attrs.push(("summary", summary.to_owned()));
        }
        let mut content = vec![self.text.clone()];
        match &self.body {
            MessageBody::Text | MessageBody::StatusUpdate => {}
            MessageBody::TaskAssignment { task_id } => attrs.push(("task_id", task_id.clone())),
            MessageBody::IdleNotification { completed_task_id } => {
                if let Some(id) = completed_task_id {
                    attrs.push(("completed_task_id", id.clone()));
                }
            }
            MessageBody::ShutdownRequest { request_id } => {
                if let Some(id) = request_id {
                    attrs.push(("request_id", id.clone()));
                }
            }
            MessageBody::ShutdownResponse {
                approve,
                reason,
                request_id,
            } => {
                if let Some(id) = request_id {
                    attrs.push(("request_id", id.clone()));
                }
                attrs.push(("approve", approve.to_string()));
                content.push(reason.clone());
            }
            MessageBody::PlanApprovalRequest { request_id, plan } => {
                attrs.push(("request_id", request_id.clone()));
                content.push(plan.clone());
            }
            MessageBody::PlanApprovalResponse {
                request_id,
                approve,
                feedback,
            } => {
                attrs.push(("request_id", request_id.clone()));
                attrs.push(("approve", approve.to_string()));
                content.push(feedback.clone());
            }
            MessageBody::PermissionRequest {
                request_id,
                tool,
                input,
            } => {
                attrs.push(("request_id", request_id.clone()));
                attrs.push(("tool", tool.clone()));
                if !input.is_null() {
                    content.push(input.to_string());
                }
            }
            MessageBody::PermissionResponse {
                request_id,
                decision,
                reason,
            } => {
                attrs.push(("request_id", request_id.clone()));
                let decision = match decision {
                    PermissionDecision::Allow => "allow",
                    PermissionDecision::Deny => "deny",
                };
                attrs.push(("decision", decision.to_owned()));
                content.push(reason.clone());
            }
        }
        let mut out = String::from("<teammate-message");
        for (key, value) in attrs {
            out.push(' ');
            out.push_str(key);
            out.push_str("=\"");
            escape_attr(&value, &mut out);
            out.push('"');
        }
        out.push('>');
        let content: Vec<String> = content.into_iter().filter(|c| !c.is_empty()).collect();
        let content = crate::model_safe(&content.join("\n\n"));
        if content.len() > max_content {
            let mut cut = max_content;
            while !content.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push_str(&content[..cut]);
            out.push_str(&format!(
                "\n[cut here: the content is {} bytes, more than one turn delivers; read it in \
                 full with `roo-mail status {} --json`]",
                content.len(),
                crate::model_safe(self.id.as_str())
            ));
        } else {
            out.push_str(&content);
        }
        out.push_str("</teammate-message>");
        out
    }
}

/// The system reminder an agent injects at the top of a turn: the standing notice, then
/// each message rendered. Empty when there are no messages.
pub fn render_reminder(messages: &[Message]) -> String {
    if messages.is_empty() {
        return String::new();
    }
    let mut out = String::from(TEAMMATE_MESSAGE_NOTICE);
    for message in messages {
        out.push_str("\n\n");
        out.push_str(&message.render());
    }
    out
}

fn escape_attr(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '>' => out.push_str("&gt;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c => crate::untrusted::push_safe(c, out),
        }
    }
}

/// Rendered bytes of teammate messages one turn injects (about 6,000 tokens): a flood
/// of messages reaches the model over several turns, oldest first, instead of as one
/// request no provider accepts.
pub const DELIVERY_BUDGET: usize = 24 * 1024;

/// Senders a delivery's digest of waiting messages names before it says "others".
const DIGEST_SENDERS: usize = 6;

/// One turn's delivery: the reminder text and how many of the queued messages it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    /// The system reminder: the standing notice, the messages, a digest of what waits.
    pub text: String,
    /// How many messages from the front of the queue it holds (at least one).
    pub taken: usize,
}

/// What one turn injects from `queue` (oldest first): the standing notice, then as many
/// messages as fit in `budget` rendered bytes — at least one; a first message larger than
/// the budget alone is cut ([`Message::render_within`]) — then, if some still wait, their
/// count and a short digest by sender and type. `None` for an empty queue.
pub fn render_delivery(queue: &[Message], budget: usize) -> Option<Delivery> {
    queue.first()?;
    let mut text = String::from(TEAMMATE_MESSAGE_NOTICE);
    let mut used = 0;
    let mut taken = 0;
    for message in queue {
        let rendered = message.render();
        if taken > 0 && used + rendered.len() > budget {
            break;
        }
        let rendered = if rendered.len() > budget {
            let wrapper = rendered.len() - rendered_content_len(message);
            message.render_within(budget.saturating_sub(wrapper).max(1024))
        } else {
            rendered
        };
        used += rendered.len();
        text.push_str("\n\n");
        text.push_str(&rendered);
        taken += 1;
    }
    let waiting = &queue[taken..];
    if !waiting.is_empty() {
        text.push_str("\n\n");
        text.push_str(&digest(waiting));
    }
    Some(Delivery { text, taken })
}

/// Messages of one sender a turn shows in full when more of its messages wait: the rest
/// of that sender's backlog is collapsed into one [digest entry](render_collapsed), so a
/// flood costs its recipient a few model calls, not one per budget's worth.
pub const FLOOD_SHOWN: usize = 5;

/// Distinct summaries a collapsed backlog's digest entry quotes.
const COLLAPSED_SUMMARIES: usize = 5;

/// Senders whose collapsed backlogs get a digest entry of their own in one turn (each at
/// most about 1.5 kB); the others are counted in one closing line.
const COLLAPSED_SENDERS: usize = 6;

/// The digest entries of `collapsed` (the backlogs beyond [`FLOOD_SHOWN`] messages of
/// each sender, oldest first): one `<teammate-digest from=… count=… bytes=…>` per sender,
/// saying that those messages are not shown, quoting their most frequent summaries
/// ([made safe](crate::model_safe)) and how to read the rest (`read_with`, a command);
/// beyond [`COLLAPSED_SENDERS`] senders, one line counts the rest. Empty when nothing was
/// collapsed.
pub fn render_collapsed(collapsed: &[Message], read_with: &str) -> String {
    let mut senders: Vec<(&Name, Vec<&Message>)> = Vec::new();
    for message in collapsed {
        match senders.iter_mut().find(|(from, _)| **from == message.from) {
            Some((_, list)) => list.push(message),
            None => senders.push((&message.from, vec![message])),
        }
    }
    let mut out = String::new();
    let others: Vec<(&Name, Vec<&Message>)> =
        senders.split_off(senders.len().min(COLLAPSED_SENDERS));
    for (from, messages) in senders {
        let bytes: usize = messages.iter().map(|m| m.text.len()).sum();
        let mut summaries: Vec<(&str, usize)> = Vec::new();
        for m in &messages {
            let summary = m.summary.as_deref().unwrap_or(m.body.type_name());
            match summaries.iter_mut().find(|(s, _)| *s == summary) {
                Some((_, n)) => *n += 1,
                None => summaries.push((summary, 1)),
            }
        }
        summaries.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
        let mut quoted: Vec<String> = summaries
            .iter()
            .take(COLLAPSED_SUMMARIES)
            .map(|(s, n)| format!("\"{}\" ×{n}", quoted_summary(s)))
            .collect();
        if summaries.len() > COLLAPSED_SUMMARIES {
            quoted.push(format!(
                "{} other summaries",
                summaries.len() - COLLAPSED_SUMMARIES
            ));
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&format!(
            "<teammate-digest from=\"{from}\" count=\"{}\" bytes=\"{bytes}\">{from} sent {} more \
             messages ({bytes} bytes) at once, beyond the {FLOOD_SHOWN} shown in full: they are \
             collapsed into this entry and marked read, their text not shown. Their summaries: \
             {}. If they matter, read them with `{}`.</teammate-digest>",
            messages.len(),
            messages.len(),
            quoted.join(", "),
            crate::model_safe(read_with)
        ));
    }
    if !others.is_empty() {
        let count: usize = others.iter().map(|(_, m)| m.len()).sum();
        out.push_str(&format!(
            "\n\n{count} more messages from {} other senders are collapsed the same way and \
             marked read; read them with `{}`.",
            others.len(),
            crate::model_safe(read_with)
        ));
    }
    out
}

/// Bytes of a summary quoted in a digest entry, escaped, before it is cut.
const QUOTED_SUMMARY_BYTES: usize = 80;

/// `summary` as a digest entry quotes it between `"`: escaped as an attribute value (no
/// `"`, newline or `<` of its own, so it can neither close its quote nor forge another
/// entry) and cut, after escaping, to [`QUOTED_SUMMARY_BYTES`] and an ellipsis.
fn quoted_summary(summary: &str) -> String {
    let mut out = String::new();
    let mut one = String::new();
    for c in summary.chars() {
        one.clear();
        escape_attr(c.encode_utf8(&mut [0; 4]), &mut one);
        if out.len() + one.len() > QUOTED_SUMMARY_BYTES {
            out.push('…');
            break;
        }
        out.push_str(&one);
    }
    out
}

/// Bytes of `message`'s rendered content (what [`Message::render_within`] may cut).
fn rendered_content_len(message: &Message) -> usize {
    let open = message.render();
    // The wrapper: everything up to the first `>` and the closing tag.
    let head = open.find('>').map_or(0, |i| i + 1);
    open.len() - head - "</teammate-message>".len()
}

/// "12 more messages wait and come in your next turns (from bob ×10, alice ×2; types:
/// text ×11, status_update ×1)."
fn digest(waiting: &[Message]) -> String {
    fn counted<'a>(items: impl Iterator<Item = &'a str>) -> Vec<(&'a str, usize)> {
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for item in items {
            match counts.iter_mut().find(|(k, _)| *k == item) {
                Some((_, n)) => *n += 1,
                None => counts.push((item, 1)),
            }
        }
        // Most first; ties in order of first appearance (the sort is stable).
        counts.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
        counts
    }
    let list = |counts: &[(&str, usize)]| {
        counts
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let senders = counted(waiting.iter().map(|m| m.from.as_str()));
    let types = counted(waiting.iter().map(|m| m.body.type_name()));
    let shown = senders.len().min(DIGEST_SENDERS);
    let mut from = list(&senders[..shown]);
    if senders.len() > shown {
        let rest: usize = senders[shown..].iter().map(|(_, n)| n).sum();
        from.push_str(&format!(
            ", {} other senders ×{rest}",
            senders.len() - shown
        ));
    }
    let n = waiting.len();
    let wait = if n == 1 {
        "message waits and comes in your next turn"
    } else {
        "messages wait and come in your next turns"
    };
    format!("{n} more {wait} (from {from}; types: {}).", list(&types))
}
