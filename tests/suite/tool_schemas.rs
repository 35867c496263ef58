//! The tool definitions of `roo-lead -p`'s first request (issue 20, "say it once,
//! briefly"). The team tools' input schemas are derived from their input structs now;
//! they must accept exactly what the hand-written ones did (field names, types,
//! required fields, enums, unknown fields refused). Their texts changed on purpose, so
//! the comparison leaves `description` and `default` out.

use roo_tests::{MockLlm, TempHome};
use serde_json::{Map, Value, json};

/// The `tools` of the first request of a fresh `roo-lead -p --team` with the default tools.
fn first_request_tools() -> Vec<Value> {
    let home = TempHome::new();
    // In a team from the start (`--team`): every team tool is in the first request (a
    // lead in no team gets them once it creates one).
    home.team("crew", "lead", &[]);
    let mock = MockLlm::start("agents:\n  \"*\":\n    - text: ok\n");
    home.cmd("roo-lead")
        .env("ANTHROPIC_API_KEY", "test-key")
        .args(["-p", "hello", "--provider", "anthropic", "--team", "crew"])
        .args(["--base-url", &mock.base_url("anthropic")])
        .run()
        .assert_ok();
    let request = mock.requests().into_iter().next().expect("one request");
    request.body["tools"].as_array().expect("tools").clone()
}

/// `schema` without its annotations (`description`, `default`): what it accepts.
fn accepted(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        match key.as_str() {
            "description" | "default" => {}
            "properties" => {
                let properties = value.as_object().into_iter().flatten();
                let kept = properties.map(|(name, field)| (name.clone(), accepted(field)));
                out.insert(key.clone(), Value::Object(kept.collect()));
            }
            _ => {
                out.insert(key.clone(), accepted(value));
            }
        }
    }
    Value::Object(out)
}

/// The hand-written schemas of the team tools before they were derived, without their
/// texts (the lead's Agent: the sub-agent's fields and the teammate's, in one schema).
fn hand_written() -> Vec<(&'static str, Value)> {
    let string = json!({"type": "string"});
    let ids = json!({"type": "array", "items": {"type": "string"}});
    let status = json!({"type": "string", "enum": ["pending", "in_progress", "completed"]});
    vec![
        (
            "Agent",
            json!({
                "type": "object",
                "properties": {
                    "description": string,
                    "prompt": string,
                    "subagent_type": string,
                    "model": string,
                    "run_in_background": {"type": "boolean"},
                    "name": string,
                    // The hand-written merge kept a `null` here from the derived sub-agent
                    // schema; models omit the field instead.
                    "isolation": {"type": "string", "enum": ["worktree"]},
                    "plan_mode_required": {"type": "boolean"},
                    "permission_mode": {
                        "type": "string",
                        "enum": ["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"]
                    },
                    // Added since (issue 20): the spawn also makes the teammate's task.
                    "task": {"type": "boolean"},
                    // Added since (issue 32): the teammate's spending cap.
                    "budget": {
                        "type": "object",
                        "properties": {
                            "usd": {"type": "number"},
                            "requests": {"type": "integer", "minimum": 0}
                        },
                        "additionalProperties": false
                    }
                },
                "required": ["prompt"],
                "additionalProperties": false
            }),
        ),
        (
            "TaskStop",
            json!({
                "type": "object",
                "properties": {
                    "task_id": string,
                    // Added since (issue 32): rewind a stopped teammate's clone.
                    "rewind_to": {"type": "integer", "minimum": 0}
                },
                "required": ["task_id"],
                "additionalProperties": false
            }),
        ),
        (
            "TaskCreate",
            json!({
                "type": "object",
                "properties": {
                    "subject": string,
                    "description": string,
                    "active_form": string,
                    "blocked_by": ids,
                    "paths": ids,
                    "metadata": {"type": "object"},
                    "owner": string,
                    // Added since (issue 32): the task's spending caps.
                    "budget_usd": {"type": "number"},
                    "budget_requests": {"type": "integer", "minimum": 0}
                },
                "required": ["subject"],
                "additionalProperties": false
            }),
        ),
        (
            "TaskGet",
            json!({
                "type": "object",
                "properties": {"id": string},
                "required": ["id"],
                "additionalProperties": false
            }),
        ),
        (
            "TaskList",
            json!({
                "type": "object",
                "properties": {"status": status, "owner": string},
                "additionalProperties": false
            }),
        ),
        (
            "TaskUpdate",
            json!({
                "type": "object",
                "properties": {
                    "id": string,
                    "subject": string,
                    "description": string,
                    "active_form": string,
                    "status": status,
                    "owner": string,
                    "add_blocked_by": ids,
                    "remove_blocked_by": ids,
                    "paths": ids,
                    "metadata": {"type": "object"}
                },
                "required": ["id"],
                "additionalProperties": false
            }),
        ),
        (
            "SendMessage",
            json!({
                "type": "object",
                "properties": {
                    "to": string,
                    "message": string,
                    "summary": string,
                    "type": {"type": "string", "enum": ["text", "status_update", "shutdown_request"]}
                },
                "required": ["to", "message"],
                "additionalProperties": false
            }),
        ),
        (
            "TeamCreate",
            json!({
                "type": "object",
                "properties": {"team_name": string, "description": string},
                "required": ["team_name"],
                "additionalProperties": false
            }),
        ),
        (
            "TeamDelete",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ),
        (
            "TeamMerge",
            json!({
                "type": "object",
                // Issue 32: the verify command of a verified merge.
                "properties": {
                    "name": string,
                    "protected": {"type": "boolean"},
                    "verify": string,
                    "verify_timeout": {"type": "integer", "minimum": 0}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        ),
    ]
}

#[test]
fn team_tools_accept_what_their_hand_written_schemas_accepted() {
    let tools = first_request_tools();
    for (name, expected) in hand_written() {
        let tool = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not in the first request"));
        assert_eq!(accepted(&tool["input_schema"]), expected, "{name}");
    }
}

#[test]
fn every_tool_is_described_briefly_and_once() {
    for tool in first_request_tools() {
        let name = tool["name"].as_str().unwrap();
        let description = tool["description"].as_str().unwrap();
        // The Agent and LoadSkill descriptions list agent types and skills.
        let limit = if matches!(name, "Agent" | "LoadSkill") {
            1_300
        } else {
            600
        };
        let chars = description.chars().count();
        assert!((40..=limit).contains(&chars), "{name}: {chars} characters");
        // A schema's top level says nothing the description does not (the input
        // struct's doc comment is not sent).
        assert!(tool["input_schema"].get("description").is_none(), "{name}");
        // Each parameter is explained once: in the description or in its schema.
        let properties = tool["input_schema"]["properties"].as_object().unwrap();
        for (field, schema) in properties {
            if let Some(text) = schema["description"].as_str() {
                assert!(
                    !description.contains(text),
                    "{name}.{field}: its description repeats the tool's"
                );
            }
        }
    }
}
