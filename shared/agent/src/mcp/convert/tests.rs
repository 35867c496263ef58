use serde_json::json;

use super::*;

#[test]
fn tool_names_must_fit_the_charset_and_length_once_qualified() {
    assert_eq!(name_problem("gh", "create_issue-2"), None);
    for bad in ["", "has space", "dot.ted", "slash/ed", "émoji", "a\nb"] {
        assert!(name_problem("gh", bad).is_some(), "{bad:?} accepted");
    }
    let longest = "x".repeat(MAX_TOOL_NAME - "mcp__gh__".len());
    assert_eq!(name_problem("gh", &longest), None);
    let problem = name_problem("gh", &format!("{longest}y")).unwrap();
    assert!(problem.contains("too long"), "{problem}");
}

#[test]
fn listings_are_checked_and_descriptions_cut() {
    let ok = tool_listing(
        "s",
        &json!({"name": "echo", "description": "d".repeat(5000),
                "inputSchema": {"type": "object", "properties": {}},
                "annotations": {"readOnlyHint": true}}),
    )
    .unwrap();
    assert_eq!(ok.description.chars().count(), MAX_DESCRIPTION_CHARS + 1);
    assert!(ok.description.ends_with('…'));
    assert!(ok.read_only_hint);
    for bad in [
        json!({"description": "no name", "inputSchema": {"type": "object"}}),
        json!({"name": "x y", "inputSchema": {"type": "object"}}),
        json!({"name": "x"}),
        json!({"name": "x", "inputSchema": "object"}),
        json!({"name": "x", "inputSchema": {"type": "string"}}),
        json!({"name": "x", "inputSchema": {"type": "object", "description": "z".repeat(MAX_SCHEMA_BYTES)}}),
    ] {
        assert!(tool_listing("s", &bad).is_err(), "{bad} accepted");
    }
    let untitled = tool_listing(
        "s",
        &json!({"name": "t", "inputSchema": {"type": "object"}}),
    )
    .unwrap();
    assert_eq!(untitled.description, "The t tool of the MCP server s.");
}

#[test]
fn results_become_text_without_raw_binary() {
    let image = "A".repeat(4000);
    let out = call_result(&json!({"content": [
        {"type": "text", "text": "hello"},
        {"type": "image", "data": image, "mimeType": "image/png"},
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///a", "name": "a"},
        {"type": "resource", "resource": {"uri": "test://t", "text": "inner"}},
        {"type": "resource", "resource": {"uri": "test://b", "blob": "AAAAAAAA", "mimeType": "application/zip"}},
        {"type": "hologram"}
    ]}));
    assert!(!out.is_error);
    assert!(!out.content.contains(&image[..100]), "raw base64 leaked");
    assert_eq!(
        out.content,
        "hello\n[image (image/png, about 3000 bytes) — not shown]\n\
         [audio (audio/wav, about 3 bytes) — not shown]\n\
         [resource link: file:///a (a)]\n[resource test://t]\ninner\n\
         [binary resource test://b (application/zip, about 6 bytes) — not shown]\n\
         [content of type \"hologram\" — not shown]"
    );
}

#[test]
fn is_error_and_structured_content_and_huge_results() {
    let err =
        call_result(&json!({"content": [{"type": "text", "text": "bad input"}], "isError": true}));
    assert_eq!(err, ToolOutput::error("bad input"));
    let silent = call_result(&json!({"content": [], "isError": true}));
    assert!(silent.is_error && !silent.content.is_empty());
    let structured = call_result(&json!({"content": [], "structuredContent": {"sum": 3}}));
    assert_eq!(structured, ToolOutput::ok("{\n  \"sum\": 3\n}"));
    let huge =
        call_result(&json!({"content": [{"type": "text", "text": "é".repeat(MAX_RESULT_BYTES)}]}));
    assert!(huge.content.len() < MAX_RESULT_BYTES + 100);
    assert!(huge.content.ends_with("more than 4 MiB]"));
}

fn prompt() -> PromptListing {
    prompt_listing(
        "s",
        &json!({"name": "review", "arguments": [
            {"name": "path", "required": true},
            {"name": "style", "description": "tone"}
        ]}),
    )
    .unwrap()
}

#[test]
fn prompt_arguments_by_name_or_position() {
    let p = prompt();
    let args = prompt_arguments(&p, "src/main.rs extra words").unwrap();
    assert_eq!(json!(args), json!({"path": "src/main.rs extra words"}));
    let args = prompt_arguments(&p, "style=terse src/lib.rs").unwrap();
    assert_eq!(json!(args), json!({"path": "src/lib.rs", "style": "terse"}));
    let args = prompt_arguments(&p, "path=a b").unwrap();
    assert_eq!(json!(args), json!({"path": "a", "style": "b"}));
    let missing = prompt_arguments(&p, "style=x").unwrap_err();
    assert!(missing.contains("path"), "{missing}");
    let none = prompt_listing("s", &json!({"name": "simple"})).unwrap();
    assert!(prompt_arguments(&none, "").unwrap().is_empty());
    assert!(prompt_arguments(&none, "stray").is_err());
    assert!(prompt_listing("s", &json!({"name": "p", "arguments": [{"name": "a b"}]})).is_err());
}

#[test]
fn prompt_messages_become_the_user_input() {
    let text = prompt_text(&json!({"messages": [
        {"role": "user", "content": {"type": "text", "text": "first"}},
        {"role": "assistant", "content": {"type": "text", "text": "second"}},
        {"role": "user", "content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}
    ]}));
    assert_eq!(
        text,
        "first\n\n[assistant]\nsecond\n\n[image (image/png, about 3 bytes) — not shown]"
    );
}
