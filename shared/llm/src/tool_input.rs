//! Parsing a tool call's streamed arguments.
//!
//! Models sometimes send arguments that are not a JSON object: broken JSON, or output
//! cut off at `max_tokens` in the middle of a call. That is the model's mistake, not a
//! broken stream, so both wire parsers report it as [`StreamEvent::ToolCallInvalid`]
//! (crate::StreamEvent) with a short description instead of failing the response; the
//! agent loop turns it into an error result the model can correct. The description
//! never carries the whole raw text (a cut-off `WriteFile` can be megabytes), only its
//! length, where parsing failed, and a short excerpt of its start.

use serde_json::Value;

/// Characters of the raw arguments quoted in an error description.
pub const EXCERPT_CHARS: usize = 60;

/// Parses a call's complete argument text. Empty (or blank) text is `{}`. Anything
/// else must be one JSON object; otherwise the error says why, in bounded size.
pub fn parse_tool_input(raw: &str) -> Result<Value, String> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(format!(
            "the arguments are a JSON {}, not an object ({})",
            kind(&other),
            size_and_start(raw)
        )),
        Err(e) => Err(format!(
            "the arguments are not valid JSON: {e} ({})",
            size_and_start(raw)
        )),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `N characters, starting with `…``, with the start cut at [`EXCERPT_CHARS`].
fn size_and_start(raw: &str) -> String {
    let count = raw.chars().count();
    let start: String = roo_term::clip(raw, EXCERPT_CHARS)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("{count} characters, starting with `{start}`")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn objects_parse_and_blank_is_empty() {
        assert_eq!(parse_tool_input(" {\"a\": 1} "), Ok(json!({"a": 1})));
        assert_eq!(parse_tool_input("  "), Ok(json!({})));
    }

    #[test]
    fn errors_are_bounded_and_say_where() {
        let raw = format!(
            "{{\"path\": \"big.txt\", \"content\": \"{}END-MARKER",
            "x".repeat(100_000)
        );
        let err = parse_tool_input(&raw).unwrap_err();
        assert!(err.contains("not valid JSON"), "{err}");
        assert!(err.contains("EOF"), "{err}");
        assert!(err.contains(&format!("{} characters", raw.len())), "{err}");
        assert!(err.contains("{\"path\": \"big.txt\""), "{err}");
        assert!(!err.contains("END-MARKER"), "{err}");
        assert!(err.len() < 300, "{} chars: {err}", err.len());

        let err = parse_tool_input("[1, 2]").unwrap_err();
        assert!(err.contains("JSON array, not an object"), "{err}");
        assert!(parse_tool_input("{\"a\": 1} trailing").is_err());
    }
}
