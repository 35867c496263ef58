//! The fork path: the child's history is the parent's, byte for byte, up to the
//! assistant message that made the call, then placeholder results and a directive.

use roo_llm::{ContentBlock, Message, Role};

/// The tag that marks a fork's directive. A conversation containing it is a fork's:
/// it may not fork again (checked at execution, next to the runtime's own flag).
pub const FORK_TAG: &str = "<fork-directive>";

/// The result given to every call of the assistant message that started the fork
/// (the Agent call itself and its siblings), so the history stays valid for both
/// wire formats without touching the parent's messages.
pub const PLACEHOLDER: &str =
    "[not run in this fork: the parent agent runs this call; you work on the directive below]";

/// The rules a fork follows, before the task.
const RULES: &str = "You are a fork of the agent whose conversation is above, started to do one \
task and report. You are not that agent. Rules:\n\
1. You cannot start further forks or agents; calls to the Agent tool are refused.\n\
2. Do not ask questions or wait for confirmation: nobody will answer. Use the tools directly.\n\
3. Stay strictly within the task below; do not change unrelated files.\n\
4. End with a short report that starts with \"Scope:\" (what you were asked), then what you \
found or changed, with file paths. Keep it under 500 words: it is returned to the parent.";

/// The directive text of a fork: the rules and the task, tagged.
pub fn directive(prompt: &str) -> String {
    format!(
        "{FORK_TAG}\n{RULES}\n\nTask:\n{}\n</fork-directive>",
        prompt.trim()
    )
}

/// The fork's history before its directive: `messages` (the parent's, ending with
/// the assistant message that made the call) plus one user message answering every
/// tool call of that message with [`PLACEHOLDER`]. `None` when the history does not
/// end with an assistant message (nothing to fork from).
pub fn fork_history(messages: &[Message]) -> Option<Vec<Message>> {
    let last = messages.last().filter(|m| m.role == Role::Assistant)?;
    let placeholders: Vec<ContentBlock> = last
        .tool_uses()
        .map(|(id, _, _)| ContentBlock::ToolResult {
            tool_use_id: id.to_string(),
            content: PLACEHOLDER.to_string(),
            is_error: true,
        })
        .collect();
    let mut history = messages.to_vec();
    if !placeholders.is_empty() {
        history.push(Message {
            role: Role::User,
            content: placeholders,
        });
    }
    Some(history)
}

/// Whether `messages` belong to a fork: the placeholder results of the call that
/// started it, followed by a user message with the directive. A fallback next to the
/// runtime's flag, so a fork is recognised even
/// when the flag did not reach the call. The structure, not the tag alone, decides: a
/// user who types the tag into a prompt does not turn the conversation into a fork's.
pub fn is_fork_context(messages: &[Message]) -> bool {
    let is_placeholder = |block: &ContentBlock| matches!(block, ContentBlock::ToolResult { content, .. } if content == PLACEHOLDER);
    let has_directive = |m: &Message| {
        m.role == Role::User
            && m.content.iter().any(|block| match block {
                ContentBlock::Text { text } => text.contains(FORK_TAG),
                _ => false,
            })
    };
    // The loop merges the directive into the placeholders' message; a transcript
    // may keep them apart.
    messages.iter().enumerate().any(|(i, m)| {
        m.role == Role::User
            && m.content.iter().any(is_placeholder)
            && (has_directive(m) || messages.get(i + 1).is_some_and(has_directive))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn assistant_with_calls() -> Message {
        Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Text {
                    text: "forking".into(),
                },
                ContentBlock::ToolUse {
                    id: "c1".into(),
                    name: "Agent".into(),
                    input: json!({"prompt": "x"}),
                },
                ContentBlock::ToolUse {
                    id: "c2".into(),
                    name: "ReadFile".into(),
                    input: json!({"path": "a"}),
                },
            ],
        }
    }

    #[test]
    fn every_call_of_the_last_turn_gets_a_placeholder_and_the_prefix_is_untouched() {
        let user = Message::user_text("hello");
        let messages = vec![user.clone(), assistant_with_calls()];
        let history = fork_history(&messages).unwrap();
        assert_eq!(&history[..2], &messages[..]);
        let ids: Vec<String> = history[2]
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::ToolResult {
                    tool_use_id,
                    is_error,
                    ..
                } => {
                    assert!(is_error);
                    tool_use_id.clone()
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ids, ["c1", "c2"]);
        assert!(fork_history(&[user]).is_none());
    }

    #[test]
    fn the_placeholders_and_the_directive_mark_the_history_as_a_fork() {
        let messages = vec![Message::user_text("hello"), assistant_with_calls()];
        assert!(!is_fork_context(&messages));
        let mut fork = fork_history(&messages).unwrap();
        fork.push(Message::user_text(directive("do it")));
        assert!(is_fork_context(&fork));
        // As the loop has it: the directive merged into the placeholders' message.
        let mut merged = fork_history(&messages).unwrap();
        if let Some(ContentBlock::Text { text }) =
            Message::user_text(directive("do it")).content.first()
        {
            merged[2]
                .content
                .push(ContentBlock::Text { text: text.clone() });
        }
        assert_eq!(merged.len(), 3);
        assert!(is_fork_context(&merged));
        // The tag typed by the user, or in a tool result (a file the agent read), does
        // not count: the parent may still fork.
        let mut typed = messages.clone();
        typed.push(Message::user_text(format!("what does {FORK_TAG} mean?")));
        assert!(!is_fork_context(&typed));
        let read = vec![
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "c".into(),
                    content: FORK_TAG.into(),
                    is_error: false,
                }],
            },
            Message::user_text(FORK_TAG),
        ];
        assert!(!is_fork_context(&read));
    }
}
