//! What a server sends, checked and turned into what the agent uses.
//!
//! A server is not trusted: its tool names must fit the provider's rules once
//! qualified (`mcp__<server>__<tool>`), descriptions are cut, schemas must be JSON
//! objects of `type: object`, and results become text — images, audio and binary
//! resources as a one-line description, never raw base64 in the conversation. The
//! conversion works on the JSON the server sent, so a change in the SDK's types
//! cannot change what the model sees.

use roo_term::clip;
use serde_json::{Map, Value};

use crate::tool::ToolOutput;

/// Longest qualified tool name: the strictest provider (OpenAI) allows 64 chars.
pub const MAX_TOOL_NAME: usize = 64;
/// Longest description kept; the rest is cut with a marker.
pub const MAX_DESCRIPTION_CHARS: usize = 2048;
/// Largest input schema accepted, serialized.
pub const MAX_SCHEMA_BYTES: usize = 32 * 1024;
/// Most tools taken from one server; the rest are skipped with a warning.
pub const MAX_TOOLS_PER_SERVER: usize = 500;
/// Most text of one result kept before the agent's own spill (which keeps the
/// whole result on disk) — bounds memory and disk for a hostile server.
pub const MAX_RESULT_BYTES: usize = 4 * 1024 * 1024;

/// The name the model calls a server's tool (or prompt) by.
pub fn qualified_name(server: &str, name: &str) -> String {
    format!("mcp__{server}__{name}")
}

/// Why `name` (a tool or prompt name a server sent) cannot be used, or `None`.
pub fn name_problem(server: &str, name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("has an empty name".to_string());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Some(format!(
            "has a name with characters other than letters, digits, `_` and `-`: {:?}",
            clip(name, 80)
        ));
    }
    let qualified = qualified_name(server, name);
    if qualified.len() > MAX_TOOL_NAME {
        return Some(format!(
            "has a name too long once qualified ({qualified}: {} > {MAX_TOOL_NAME} characters)",
            qualified.len()
        ));
    }
    None
}

/// A server's tool, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolListing {
    /// The name on the server.
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// The server says the tool only reads (a claim, shown to the model only).
    pub read_only_hint: bool,
}

/// Checks one entry of a server's `tools/list`; the error says why it is skipped.
pub fn tool_listing(server: &str, tool: &Value) -> Result<ToolListing, String> {
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| "a tool without a name".to_string())?;
    if let Some(problem) = name_problem(server, name) {
        return Err(format!("tool {:?} {problem}", clip(name, 80)));
    }
    let schema = tool.get("inputSchema").cloned().unwrap_or(Value::Null);
    if !schema.is_object() || schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(format!(
            "tool {name} has an input schema that is not a JSON object schema (`type: object`)"
        ));
    }
    let size = serde_json::to_string(&schema).map_or(usize::MAX, |s| s.len());
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "tool {name} has an input schema of {size} bytes (more than {MAX_SCHEMA_BYTES})"
        ));
    }
    let title = tool.get("title").and_then(Value::as_str);
    let mut description = tool
        .get("description")
        .and_then(Value::as_str)
        .or(title)
        .unwrap_or("")
        .trim()
        .to_string();
    if description.is_empty() {
        description = format!("The {name} tool of the MCP server {server}.");
    }
    let read_only_hint = tool
        .pointer("/annotations/readOnlyHint")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(ToolListing {
        name: name.to_string(),
        description: clip(&description, MAX_DESCRIPTION_CHARS),
        input_schema: schema,
        read_only_hint,
    })
}

/// A `tools/call` result (its JSON) as the model reads it; `isError` makes an error.
pub fn call_result(result: &Value) -> ToolOutput {
    let mut text = String::new();
    let mut push = |part: String| {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&part);
    };
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for block in blocks {
        push(content_text(block));
    }
    if blocks.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        push(serde_json::to_string_pretty(structured).unwrap_or_default());
    }
    if text.len() > MAX_RESULT_BYTES {
        let mut end = MAX_RESULT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n[result cut: the server sent more than 4 MiB]");
    }
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        if text.is_empty() {
            text.push_str("the tool reported an error without a message");
        }
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    }
}

/// One content block as text.
pub fn content_text(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
    let base64_bytes = |name: &str| field(name).len() / 4 * 3;
    match field("type") {
        "text" => field("text").to_string(),
        "image" => format!(
            "[image ({}, about {} bytes) — not shown]",
            mime_or(field("mimeType")),
            base64_bytes("data")
        ),
        "audio" => format!(
            "[audio ({}, about {} bytes) — not shown]",
            mime_or(field("mimeType")),
            base64_bytes("data")
        ),
        "resource_link" => {
            let mut line = format!("[resource link: {}", clip(field("uri"), 500));
            if !field("name").is_empty() {
                line.push_str(&format!(" ({})", clip(field("name"), 200)));
            }
            if !field("description").is_empty() {
                line.push_str(&format!(" — {}", clip(field("description"), 500)));
            }
            line.push(']');
            line
        }
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            let get = |name: &str| resource.get(name).and_then(Value::as_str).unwrap_or("");
            if let Some(text) = resource.get("text").and_then(Value::as_str) {
                format!("[resource {}]\n{text}", clip(get("uri"), 500))
            } else {
                format!(
                    "[binary resource {} ({}, about {} bytes) — not shown]",
                    clip(get("uri"), 500),
                    mime_or(get("mimeType")),
                    get("blob").len() / 4 * 3
                )
            }
        }
        other => format!("[content of type {:?} — not shown]", clip(other, 40)),
    }
}

fn mime_or(mime: &str) -> String {
    if mime.is_empty() {
        "unknown type".to_string()
    } else {
        clip(mime, 100)
    }
}

/// A prompt a server offers, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptListing {
    pub name: String,
    pub description: String,
    pub arguments: Vec<PromptArgument>,
}

/// One declared argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArgument {
    pub name: String,
    pub description: String,
    pub required: bool,
}

/// Checks one entry of a server's `prompts/list`; the error says why it is skipped.
pub fn prompt_listing(server: &str, prompt: &Value) -> Result<PromptListing, String> {
    let name = prompt
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| "a prompt without a name".to_string())?;
    if let Some(problem) = name_problem(server, name) {
        return Err(format!("prompt {:?} {problem}", clip(name, 80)));
    }
    let mut arguments = Vec::new();
    for arg in prompt
        .get("arguments")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let Some(arg_name) = arg.get("name").and_then(Value::as_str) else {
            return Err(format!("prompt {name} has an argument without a name"));
        };
        if arg_name.is_empty()
            || arg_name.len() > 64
            || !arg_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "prompt {name} has an argument with an unusable name {:?}",
                clip(arg_name, 80)
            ));
        }
        arguments.push(PromptArgument {
            name: arg_name.to_string(),
            description: clip(
                arg.get("description").and_then(Value::as_str).unwrap_or(""),
                300,
            ),
            required: arg.get("required").and_then(Value::as_bool) == Some(true),
        });
    }
    Ok(PromptListing {
        name: name.to_string(),
        description: clip(
            prompt
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or(""),
            MAX_DESCRIPTION_CHARS,
        ),
        arguments,
    })
}

/// Maps a slash command's argument text onto a prompt's declared arguments:
/// `key=value` words set the argument `key` (when it is declared); the other
/// words, joined by spaces, go to the first declared argument not set by name.
pub fn prompt_arguments(prompt: &PromptListing, text: &str) -> Result<Map<String, Value>, String> {
    let mut named = Map::new();
    let mut rest = Vec::new();
    for word in text.split_whitespace() {
        match word.split_once('=') {
            Some((key, value)) if prompt.arguments.iter().any(|a| a.name == key) => {
                named.insert(key.to_string(), Value::String(value.to_string()));
            }
            _ => rest.push(word),
        }
    }
    if !rest.is_empty() {
        let Some(first) = prompt
            .arguments
            .iter()
            .find(|a| !named.contains_key(&a.name))
        else {
            return Err(format!(
                "{} takes no more arguments; got {:?}",
                prompt.name,
                rest.join(" ")
            ));
        };
        named.insert(first.name.clone(), Value::String(rest.join(" ")));
    }
    let missing: Vec<&str> = prompt
        .arguments
        .iter()
        .filter(|a| a.required && !named.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} needs the argument(s) {} (give `name=value`, or the text of the first)",
            prompt.name,
            missing.join(", ")
        ));
    }
    Ok(named)
}

/// A `prompts/get` result (its JSON) as the user input it becomes: the messages'
/// text, a message of another role than the user's marked with its role.
pub fn prompt_text(result: &Value) -> String {
    let mut parts = Vec::new();
    for message in result
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user");
        let text = match message.get("content") {
            Some(Value::Array(blocks)) => blocks
                .iter()
                .map(content_text)
                .collect::<Vec<_>>()
                .join("\n"),
            Some(block) => content_text(block),
            None => String::new(),
        };
        if role == "user" {
            parts.push(text);
        } else {
            parts.push(format!("[{}]\n{text}", clip(role, 20)));
        }
    }
    let text = parts.join("\n\n");
    if text.len() > MAX_RESULT_BYTES {
        clip(&text, MAX_RESULT_BYTES)
    } else {
        text
    }
}

#[cfg(test)]
mod tests;
