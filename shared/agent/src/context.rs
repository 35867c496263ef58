//! Context-window budget: estimating prompt size and compacting old rounds.
//!
//! Two cheap-to-expensive layers: large tool results already
//! spill to disk when they are produced (`tools::spill`); when the prompt nears the
//! window anyway, an LLM summary replaces the oldest whole rounds. If even the
//! summary request would not fit, the oldest rounds are dropped instead. Cuts happen
//! only at [`round_starts`], so tool_use/tool_result pairs are never split.

use futures_util::FutureExt;
use roo_llm::{ContentBlock, Message, Provider, Request, Role, Usage};
use tokio_util::sync::CancellationToken;

use crate::conversation::{push_user, repair_chain, round_starts};
use crate::event::CompactionMethod;

/// When and how much to compact.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionOptions {
    /// Compact when the next prompt is estimated above this fraction of the window.
    pub threshold: f64,
    /// Recent rounds kept verbatim, as a fraction of the window.
    pub keep_fraction: f64,
    /// Output budget of the summary request.
    pub summary_max_tokens: u32,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        Self {
            threshold: 0.8,
            keep_fraction: 0.3,
            summary_max_tokens: 4096,
        }
    }
}

/// The instruction appended to the history for the summary request.
pub const SUMMARY_INSTRUCTION: &str = "Summarize the conversation so far so that it can replace the history above. \
Do not call any tools; answer with the summary text only. Include, in this order:\n\
1. The user's requests and intent, quoting the key instructions verbatim.\n\
2. Key technical facts learned (architecture, conventions, commands that work).\n\
3. Files read, created or changed, with what changed and why.\n\
4. Errors met and how they were fixed.\n\
5. Work still pending, and exactly what was being done last and the next step.";

/// Rough token count of messages: about four bytes of JSON per token. Used only
/// between real usage figures from the provider.
pub fn estimate_tokens(messages: &[Message]) -> u64 {
    messages.iter().map(estimate_message).sum()
}

/// Rough token count of a whole request: system prompt, tool definitions (name,
/// description, input schema as JSON) and messages, at about four bytes per token.
pub fn estimate_request(request: &roo_llm::Request) -> u64 {
    let system: u64 = request.system.iter().map(|s| estimate_text(s)).sum();
    let tools: u64 = request
        .tools
        .iter()
        .map(|t| {
            let bytes = t.name.len() + t.description.len() + t.input_schema.to_string().len();
            (bytes as u64).div_ceil(4)
        })
        .sum();
    system + tools + estimate_tokens(&request.messages)
}

/// Rough token count of one string.
pub fn estimate_text(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

fn estimate_message(message: &Message) -> u64 {
    let bytes: usize = message
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::Thinking { thinking, .. } => thinking.len(),
            ContentBlock::RedactedThinking { data } => data.len(),
            ContentBlock::ToolUse { name, input, .. } => name.len() + input.to_string().len(),
            ContentBlock::ToolResult { content, .. } => content.len(),
        })
        .sum();
    (bytes as u64).div_ceil(4) + 4
}

/// The result of a compaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Compacted {
    pub messages: Vec<Message>,
    pub method: CompactionMethod,
    /// Usage of the summary request (zero for drop-oldest).
    pub usage: Usage,
    /// Why the summary was not used, when it was not.
    pub fallback_reason: Option<String>,
}

/// Where to cut: the earliest round start whose suffix fits `keep_budget`, or the
/// last round start if none does. `None` when the history has a single round.
pub fn choose_cut(messages: &[Message], keep_budget: u64) -> Option<usize> {
    let starts = round_starts(messages);
    let last = *starts.last()?;
    let cut = starts
        .into_iter()
        .find(|&i| estimate_tokens(&messages[i..]) <= keep_budget)
        .unwrap_or(last);
    Some(cut)
}

/// Compacts `messages` for a model with a `window`-token context. `base` carries the
/// model, system prompt, tools and agent name of the normal requests, so the summary
/// request shares their cache prefix. Returns `None` if there is nothing to cut.
pub async fn compact(
    provider: &dyn Provider,
    base: &Request,
    messages: &[Message],
    window: u64,
    options: &CompactionOptions,
    cancel: &CancellationToken,
) -> Option<Compacted> {
    let keep_budget = (window as f64 * options.keep_fraction) as u64;
    // A summary longer than a tenth of the window would defeat the purpose (and not
    // fit small local models).
    let options = &CompactionOptions {
        summary_max_tokens: options
            .summary_max_tokens
            .min(u32::try_from(window / 10).unwrap_or(u32::MAX))
            .max(256),
        ..options.clone()
    };
    let cut = choose_cut(messages, keep_budget)?;
    let (old, recent) = messages.split_at(cut);

    let fixed = base.system.iter().map(|s| estimate_text(s)).sum::<u64>()
        + base
            .tools
            .iter()
            .map(|t| estimate_text(&t.description) + estimate_text(&t.input_schema.to_string()))
            .sum::<u64>();
    let summary_request_tokens = fixed
        + estimate_tokens(old)
        + estimate_text(SUMMARY_INSTRUCTION)
        + u64::from(options.summary_max_tokens);
    let fits = summary_request_tokens <= window * 95 / 100;

    let summary = if fits {
        summarize(provider, base, old, options, cancel).await
    } else {
        Err(format!(
            "the summary request would need about {summary_request_tokens} tokens of a {window}-token window"
        ))
    };
    let (head, method, usage, fallback_reason) = match summary {
        Ok((text, usage)) => (
            format!(
                "<conversation-summary>\nThis session continues an earlier conversation that was compacted to fit the context window; this summary replaces {} earlier messages.\n\n{}\n</conversation-summary>",
                old.len(),
                // The model wrote it from text others control (a teammate's message, a
                // web page, a file): it may close the wrapper or open a reminder.
                roo_store::model_safe(text.trim())
            ),
            CompactionMethod::Summary,
            usage,
            None,
        ),
        Err(reason) => (
            drop_note(old),
            CompactionMethod::DropOldest,
            Usage::default(),
            Some(reason),
        ),
    };

    let mut compacted = vec![Message::user_text(head)];
    for message in recent {
        match message.role {
            Role::User => push_user(&mut compacted, message.content.clone()),
            Role::Assistant => compacted.push(message.clone()),
        }
    }
    repair_chain(&mut compacted);
    Some(Compacted {
        messages: compacted,
        method,
        usage,
        fallback_reason,
    })
}

/// Asks the model for a summary of `old`. Errors are reasons to fall back.
async fn summarize(
    provider: &dyn Provider,
    base: &Request,
    old: &[Message],
    options: &CompactionOptions,
    cancel: &CancellationToken,
) -> Result<(String, Usage), String> {
    let mut history = old.to_vec();
    push_user(
        &mut history,
        vec![ContentBlock::Text {
            text: SUMMARY_INSTRUCTION.to_string(),
        }],
    );
    let request = Request {
        messages: history,
        max_tokens: options.summary_max_tokens,
        ..base.clone()
    };
    let call = roo_llm::collect(provider.stream(request), |_| {}).fuse();
    let response = tokio::select! {
        r = call => r.map_err(|e| format!("the summary request failed: {e}"))?,
        _ = cancel.cancelled() => return Err("cancelled".to_string()),
    };
    let text = response.message.text();
    if text.trim().is_empty() {
        return Err("the model returned an empty summary".to_string());
    }
    Ok((text, response.usage))
}

/// The note that replaces dropped rounds: keeps the user's first request.
fn drop_note(old: &[Message]) -> String {
    let first_request = old
        .iter()
        .find(|m| m.role == Role::User)
        .map(|m| m.text())
        .unwrap_or_default();
    let request = roo_term::clip_with(&first_request, 2000, " …");
    format!(
        "<conversation-summary>\n{} earlier messages were dropped to fit the context window; no summary is available. The conversation began with this request:\n\n{}\n</conversation-summary>",
        old.len(),
        request
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round(id: &str, size: usize) -> Vec<Message> {
        vec![
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: id.into(),
                    name: "ReadFile".into(),
                    input: json!({"path": "f"}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: id.into(),
                    content: "x".repeat(size),
                    is_error: false,
                }],
            },
        ]
    }

    #[test]
    fn cut_keeps_the_newest_rounds_that_fit() {
        let mut m = vec![Message::user_text("task")];
        for i in 0..10 {
            m.extend(round(&format!("t{i}"), 4000));
        }
        // Each round is ~1000 tokens; keep about 3.
        let cut = choose_cut(&m, 3100).unwrap();
        assert_eq!(m[cut].role, Role::Assistant);
        let kept = m.len() - cut;
        assert_eq!(kept, 6, "three whole rounds kept");
    }

    #[test]
    fn single_round_history_cannot_be_cut() {
        assert_eq!(choose_cut(&[Message::user_text("task")], 10), None);
    }

    #[test]
    fn drop_note_keeps_first_request() {
        let note = drop_note(&[
            Message::user_text("fix the parser"),
            Message::assistant_text("ok"),
        ]);
        assert!(note.contains("fix the parser"));
        assert!(note.contains("2 earlier messages"));
    }
}
