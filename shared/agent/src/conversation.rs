//! Conversation history invariants.
//!
//! The function-calling protocol has one hard rule: every `tool_use` has exactly one
//! `tool_result`, in the user message right after it. Resume after a crash, compaction
//! and interrupts can all break it, so [`repair_chain`] runs after each of them and cuts
//! the history back to the last whole round. [`round_starts`] gives the places where the
//! history may be cut without breaking pairs.

use std::collections::HashSet;

use roo_llm::{ContentBlock, Message, Role};

/// Appends a user message, merging it into the last message if that is a user
/// message too (providers expect roles to alternate).
pub fn push_user(messages: &mut Vec<Message>, blocks: Vec<ContentBlock>) {
    if blocks.is_empty() {
        return;
    }
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.extend(blocks),
        _ => messages.push(Message {
            role: Role::User,
            content: blocks,
        }),
    }
}

/// Whether a user message carries tool results.
pub fn has_tool_results(message: &Message) -> bool {
    message
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
}

/// Indices where a new round starts: cutting the history just before such an index
/// leaves every `tool_use`/`tool_result` pair on one side. Index 0 is not included.
pub fn round_starts(messages: &[Message]) -> Vec<usize> {
    (1..messages.len())
        .filter(|&i| match messages[i].role {
            Role::Assistant => true,
            Role::User => !has_tool_results(&messages[i]),
        })
        .collect()
}

/// Checks the tool_use/tool_result pairing and cuts the history back to the last
/// whole round before the first violation. Also drops empty messages. Returns a
/// description of what was removed, or `None` if the history was intact.
pub fn repair_chain(messages: &mut Vec<Message>) -> Option<String> {
    let before = messages.len();
    messages.retain(|m| !m.content.is_empty());
    let dropped_empty = before - messages.len();

    let cut = first_violation(messages);
    let cut_count = cut.map(|at| {
        let removed = messages.len() - at;
        messages.truncate(at);
        removed
    });

    match (dropped_empty, cut_count) {
        (0, None) => None,
        (n, None) => Some(format!("dropped {n} empty message(s) from the history")),
        (n, Some(removed)) => Some(format!(
            "cut {removed} message(s) of an unfinished round from the history{}",
            if n > 0 {
                format!(" and dropped {n} empty message(s)")
            } else {
                String::new()
            }
        )),
    }
}

/// Index of the start of the round holding the first broken pair, if any.
fn first_violation(messages: &[Message]) -> Option<usize> {
    let mut i = 0;
    while i < messages.len() {
        let message = &messages[i];
        match message.role {
            Role::User => {
                // A tool result must answer the assistant message right before it.
                if has_tool_results(message) {
                    return Some(i);
                }
                i += 1;
            }
            Role::Assistant => {
                let ids: Vec<&str> = message.tool_uses().map(|(id, _, _)| id).collect();
                if ids.is_empty() {
                    i += 1;
                    continue;
                }
                let Some(next) = messages.get(i + 1) else {
                    return Some(i);
                };
                if next.role != Role::User || !results_match(&ids, next) {
                    return Some(i);
                }
                i += 2;
            }
        }
    }
    None
}

/// Whether `reply` holds exactly one result for each id and no others.
fn results_match(ids: &[&str], reply: &Message) -> bool {
    let wanted: HashSet<&str> = ids.iter().copied().collect();
    if wanted.len() != ids.len() {
        return false; // duplicate tool_use ids
    }
    let mut seen = HashSet::new();
    for block in &reply.content {
        if let ContentBlock::ToolResult { tool_use_id, .. } = block
            && (!wanted.contains(tool_use_id.as_str()) || !seen.insert(tool_use_id.as_str()))
        {
            return false;
        }
    }
    seen.len() == wanted.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: id.into(),
                name: "ReadFile".into(),
                input: json!({"path": "a"}),
            }],
        }
    }

    fn result(id: &str) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: id.into(),
                content: "ok".into(),
                is_error: false,
            }],
        }
    }

    #[test]
    fn intact_history_is_left_alone() {
        let mut m = vec![
            Message::user_text("fix it"),
            call("a"),
            result("a"),
            Message::assistant_text("done"),
        ];
        assert_eq!(repair_chain(&mut m), None);
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn trailing_call_without_result_is_cut() {
        let mut m = vec![
            Message::user_text("fix it"),
            call("a"),
            result("a"),
            call("b"),
        ];
        assert!(repair_chain(&mut m).is_some());
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn orphan_result_and_everything_after_is_cut() {
        let mut m = vec![
            Message::user_text("fix it"),
            result("zzz"),
            Message::assistant_text("hm"),
        ];
        repair_chain(&mut m);
        assert_eq!(m, vec![Message::user_text("fix it")]);
    }

    #[test]
    fn mismatched_and_duplicate_results_are_cut() {
        let mut m = vec![Message::user_text("x"), call("a"), result("b")];
        repair_chain(&mut m);
        assert_eq!(m.len(), 1);

        let mut dup = result("a");
        dup.content.extend(result("a").content);
        let mut m = vec![Message::user_text("x"), call("a"), dup];
        repair_chain(&mut m);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn round_starts_never_split_a_pair() {
        let m = vec![
            Message::user_text("x"),
            call("a"),
            result("a"),
            call("b"),
            result("b"),
            Message::assistant_text("done"),
            Message::user_text("more"),
        ];
        assert_eq!(round_starts(&m), vec![1, 3, 5, 6]);
        for cut in round_starts(&m) {
            let mut tail = m[cut..].to_vec();
            tail.insert(0, Message::user_text("summary"));
            let mut repaired = tail.clone();
            repair_chain(&mut repaired);
            assert_eq!(repaired, tail, "cut at {cut} broke a pair");
        }
    }

    #[test]
    fn push_user_merges_consecutive_user_turns() {
        let mut m = vec![Message::user_text("a")];
        push_user(&mut m, vec![ContentBlock::Text { text: "b".into() }]);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].content.len(), 2);
    }
}
