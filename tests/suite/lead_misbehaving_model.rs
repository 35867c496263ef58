//! `roo-lead -p` with a misbehaving model, over both wire formats through the mock
//! server: broken or cut-off tool-call JSON does not end the run (the model gets an
//! error result and corrects itself; endless garbage ends it as "not finished", exit
//! 1), and a tool call written as text by a small local model is run.

use roo_tests::{MockLlm, TempHome, TestCommand};
use serde_json::Value;

const PROTOCOLS: [&str; 2] = ["anthropic", "openai"];

/// `roo-lead -p PROMPT` against `mock` in `protocol`'s wire format, in acceptEdits.
fn lead(home: &TempHome, mock: &MockLlm, protocol: &str, prompt: &str) -> TestCommand {
    let (key_var, model) = match protocol {
        "anthropic" => ("ANTHROPIC_API_KEY", "claude-sonnet-4-5"),
        _ => ("OPENAI_API_KEY", "gpt-4.1"),
    };
    home.cmd("roo-lead")
        .env(key_var, "test-key")
        .args(["-p", prompt, "--provider", protocol, "--model", model])
        .args(["--base-url", &mock.base_url(protocol)])
        .args(["--permission-mode", "acceptEdits"])
}

#[test]
fn broken_tool_call_json_is_corrected_by_the_model_and_the_session_resumes() {
    for protocol in PROTOCOLS {
        let home = TempHome::new();
        let mock = MockLlm::start(
            r#"
- tool_calls:
    - {name: WriteFile, raw_arguments: '{"path": "notes.txt", "content": "first" "second"}'}
- when: {last_user_contains: "not valid JSON"}
  tool_calls:
    - {name: WriteFile, input: {path: notes.txt, content: "first\nsecond\n"}}
- text: "Wrote notes.txt."
- when: {last_user_contains: "anything else"}
  text: "Nothing else."
"#,
        );
        let out = lead(&home, &mock, protocol, "write the notes")
            .args(["--output-format", "json"])
            .run();
        out.assert_ok();
        assert_eq!(out.json()["outcome"]["kind"], "completed", "{protocol}");
        assert_eq!(home.cwd.read("notes.txt"), "first\nsecond\n", "{protocol}");

        // The transcript holds the broken call with a valid placeholder input, so a
        // resumed session sends a history the provider accepts.
        let out = lead(&home, &mock, protocol, "anything else?")
            .arg("--continue")
            .run();
        out.assert_ok();
        let requests = mock.requests();
        assert_eq!(requests.len(), 4, "{protocol}");
        let history = requests[3].body["messages"].to_string();
        assert!(history.contains("not valid JSON"), "{protocol}: {history}");
        let messages = requests[3].body["messages"].as_array().unwrap();
        let placeholder = match protocol {
            "anthropic" => messages[1]["content"][0]["input"].clone(),
            _ => {
                let args = messages
                    .iter()
                    .find_map(|m| m.pointer("/tool_calls/0/function/arguments"))
                    .and_then(Value::as_str)
                    .unwrap();
                serde_json::from_str(args).unwrap()
            }
        };
        assert_eq!(placeholder, serde_json::json!({}), "{protocol}");
    }
}

#[test]
fn tool_calls_cut_at_max_tokens_again_and_again_end_the_run_with_exit_1() {
    let marker = "END-OF-RAW-INPUT-91c2";
    let big = format!(
        r#"{{"path": "huge.txt", "content": "{}{marker}"#,
        "x".repeat(50_000)
    );
    for protocol in PROTOCOLS {
        let home = TempHome::new();
        let turn = format!(
            "- tool_calls: [{{name: WriteFile, raw_arguments: '{big}'}}]\n  stop_reason: max_tokens\n"
        );
        let mock = MockLlm::start(&format!("{turn}{turn}{turn}- text: never\n"));
        let out = lead(&home, &mock, protocol, "write a huge file").run();
        out.assert_code(1);
        let stderr = out.stderr();
        assert!(
            stderr.contains("invalid arguments 3 turns in a row"),
            "{protocol}: {stderr}"
        );
        assert!(!stderr.contains("could not be reached"), "{protocol}");
        let requests = mock.requests();
        assert_eq!(requests.len(), 3, "{protocol}");
        // Each retry was told it was cut off; no request carried the raw input back.
        for request in &requests[1..] {
            let body = request.body.to_string();
            assert!(body.contains("output limit"), "{protocol}");
            assert!(!body.contains(marker), "{protocol}: raw input echoed");
        }
        // Nor did the tool results reach the output.
        assert!(!out.stdout().contains(marker), "{protocol}");
        assert!(!home.cwd.join("huge.txt").exists());
    }
}

const TEXT_CALL: &str = r#"<tool_call>
{"name": "WriteFile", "arguments": "{\"path\": \"hello.txt\", \"content\": \"hello\\n\"}"}
</tool_call>"#;

fn text_call_script() -> String {
    serde_json::to_string(&serde_json::json!([
        {"text": TEXT_CALL},
        {"when": {"last_user_contains": "Created"}, "text": "Created hello.txt."}
    ]))
    .unwrap()
}

#[test]
fn a_tool_call_written_as_text_by_a_local_model_is_run() {
    for protocol in PROTOCOLS {
        let home = TempHome::new();
        let mock = MockLlm::start(&text_call_script());
        let out = lead(&home, &mock, protocol, "say hello in a file").run();
        out.assert_ok();
        assert_eq!(out.stdout().trim(), "Created hello.txt.", "{protocol}");
        assert_eq!(home.cwd.read("hello.txt"), "hello\n", "{protocol}");
        assert_eq!(mock.requests().len(), 2, "{protocol}");
    }
}

#[test]
fn text_tool_calls_off_in_the_user_config_leaves_the_text_alone() {
    for protocol in PROTOCOLS {
        let home = TempHome::new();
        home.home.write("config.yaml", "text_tool_calls: off\n");
        let mock = MockLlm::start(&text_call_script());
        let out = lead(&home, &mock, protocol, "say hello in a file").run();
        out.assert_ok();
        assert!(out.stdout().contains("<tool_call>"), "{protocol}");
        assert!(!home.cwd.join("hello.txt").exists(), "{protocol}");
        assert_eq!(mock.requests().len(), 1, "{protocol}");
    }
}
