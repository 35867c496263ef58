//! Tool calls that a model wrote as text.
//!
//! Small local models (e.g. Qwen2.5-Coder behind llama.cpp) often answer with the call
//! as plain text — `{"name": "WriteFile", "arguments": {…}}`, bare, in a Markdown
//! fence or in `<tool_call>` tags — instead of using the API's tool calling, and the
//! run would end "completed" having done nothing. When the whole text of a turn without
//! structured calls is exactly one such object naming a registered tool, the loop runs
//! it like any other call (same permission layers). Anything else stays text.

use serde_json::Value;

/// The `(name, input)` of the one tool call `text` consists of, if it is one.
/// `is_tool` says whether a name is a registered tool.
///
/// Accepted: a single JSON object with a string `name` and `arguments` (or
/// `parameters`) that is an object or a string holding a JSON object, and no other
/// keys; optionally wrapped in ```` ``` ````/```` ```json ```` fences and/or
/// `<tool_call>…</tool_call>` tags; surrounding whitespace ignored.
pub fn parse_text_tool_call(text: &str, is_tool: impl Fn(&str) -> bool) -> Option<(String, Value)> {
    let mut body = text.trim();
    // Unwrap at most one fence and one tag pair, in either order.
    for _ in 0..2 {
        body = unwrap_tag(body)
            .or_else(|| unwrap_fence(body))
            .unwrap_or(body);
    }
    let Value::Object(mut object) = serde_json::from_str::<Value>(body).ok()? else {
        return None;
    };
    let Some(Value::String(name)) = object.remove("name") else {
        return None;
    };
    let arguments = match (object.remove("arguments"), object.remove("parameters")) {
        (Some(a), None) | (None, Some(a)) => a,
        _ => return None,
    };
    if !object.is_empty() || !is_tool(&name) {
        return None;
    }
    let input = match arguments {
        Value::Object(map) => map,
        Value::String(s) => match serde_json::from_str::<Value>(&s).ok()? {
            Value::Object(map) => map,
            _ => return None,
        },
        _ => return None,
    };
    Some((name, Value::Object(input)))
}

fn unwrap_tag(body: &str) -> Option<&str> {
    let inner = body
        .strip_prefix("<tool_call>")?
        .strip_suffix("</tool_call>")?;
    Some(inner.trim())
}

fn unwrap_fence(body: &str) -> Option<&str> {
    let rest = body.strip_prefix("```")?.strip_suffix("```")?;
    let (info, inner) = rest.split_once('\n')?;
    let info = info.trim();
    if !(info.is_empty() || info.eq_ignore_ascii_case("json") || info == "tool_call") {
        return None;
    }
    Some(inner.trim())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(text: &str) -> Option<(String, Value)> {
        parse_text_tool_call(text, |n| n == "WriteFile" || n == "Glob")
    }

    #[test]
    fn bare_fenced_tagged_and_string_arguments() {
        let want = Some((
            "WriteFile".to_string(),
            json!({"path": "a.txt", "content": "hi"}),
        ));
        for text in [
            r#"{"name": "WriteFile", "arguments": {"path": "a.txt", "content": "hi"}}"#,
            "\n  {\"name\": \"WriteFile\", \"parameters\": {\"path\": \"a.txt\", \"content\": \"hi\"}}  \n",
            "```json\n{\"name\": \"WriteFile\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"hi\"}}\n```",
            "```\n{\"name\": \"WriteFile\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"hi\"}}\n```",
            "<tool_call>\n{\"name\": \"WriteFile\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"hi\"}}\n</tool_call>",
            "```\n<tool_call>\n{\"name\": \"WriteFile\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"hi\"}}\n</tool_call>\n```",
            r#"{"name": "WriteFile", "arguments": "{\"path\": \"a.txt\", \"content\": \"hi\"}"}"#,
        ] {
            assert_eq!(parse(text), want, "{text}");
        }
    }

    #[test]
    fn anything_else_stays_text() {
        for text in [
            // Unregistered tool.
            r#"{"name": "Teleport", "arguments": {}}"#,
            // Prose around the object.
            r#"Sure: {"name": "Glob", "arguments": {"pattern": "*"}}"#,
            r#"{"name": "Glob", "arguments": {"pattern": "*"}} Done."#,
            // Two calls, extra keys, missing or odd arguments.
            r#"{"name": "Glob", "arguments": {}}{"name": "Glob", "arguments": {}}"#,
            r#"{"name": "Glob", "arguments": {}, "id": 3}"#,
            r#"{"name": "Glob"}"#,
            r#"{"name": "Glob", "arguments": [1]}"#,
            r#"{"name": "Glob", "arguments": "not json"}"#,
            r#"{"name": "Glob", "arguments": {}, "parameters": {}}"#,
            "```python\n{\"name\": \"Glob\", \"arguments\": {}}\n```",
            r#"{"name": "Glob", "arguments": {"#,
            "just an answer",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }
}
