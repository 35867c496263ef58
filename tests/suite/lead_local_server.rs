//! Issue 20 item 4, "local models are a first-class target", through the real
//! `roo-lead`: before its first request it asks a local model server for its context
//! window (`GET /props`, as llama.cpp's llama-server answers it) and warns once, with
//! both numbers and how to fix it, when the request does not fit. Its sub-agents do not
//! ask again; a server with room gets no warning; whatever a server answers instead —
//! broken JSON, a huge body, nonsense numbers, no answer at all — the run goes on
//! silently and without a long wait.

use std::time::{Duration, Instant};

use roo_llm::mock_server::{RawEnd, RawReply, llama_props};
use roo_tests::{MockLlm, RunOutput, TempHome, git_init_commit};
use serde_json::json;

/// The lead reads README.md through an Explore sub-agent, then answers.
const SCRIPT: &str = r#"
agents:
  "*":
    - when: {system_contains: "You are Explore"}
      text: "README.md says quokka"
    - tool_calls:
        - {name: Agent, input: {description: "look", prompt: "read README.md", subagent_type: "Explore"}}
    - text: "The word is quokka."
"#;

/// A fresh repository with the file of the issue's solo run.
fn repo() -> TempHome {
    let home = TempHome::new();
    home.cwd
        .write("README.md", "This README holds one word: quokka.\n");
    git_init_commit(home.cwd.path());
    home
}

fn lead(home: &TempHome, mock: &MockLlm, protocol: &str) -> RunOutput {
    home.cmd("roo-lead")
        .args(["-p", "read README.md and tell me the word in it"])
        .args(["--provider", protocol, "--model", "qwen2.5-coder-0.5b"])
        .args(["--base-url", &mock.base_url(protocol)])
        .run()
}

/// A `200 application/json` reply with exactly `bytes` as its body.
fn body(bytes: Vec<u8>) -> RawReply {
    RawReply {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        chunks: vec![(Duration::ZERO, bytes)],
        end: RawEnd::Complete,
    }
}

/// The number after `text` in `haystack` (`"gives a request 512 tokens"` → 512).
fn number_after(haystack: &str, text: &str) -> u64 {
    let at = haystack
        .find(text)
        .unwrap_or_else(|| panic!("`{text}` in {haystack}"));
    haystack[at + text.len()..]
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

#[test]
fn a_llama_server_smaller_than_the_first_request_gets_one_warning_with_both_numbers_and_the_fix() {
    for protocol in ["openai", "anthropic"] {
        let home = repo();
        let mock = MockLlm::start(SCRIPT);
        mock.serve_props(RawReply::json(200, &llama_props(512, 2)));
        let out = lead(&home, &mock, protocol);
        out.assert_ok();
        out.assert_stdout_contains("quokka");
        let stderr = out.stderr();
        assert_eq!(
            stderr.matches("warning:").count(),
            1,
            "{protocol}: one warning:\n{stderr}"
        );
        out.assert_stderr_contains("llama-server, 2 slots");
        out.assert_stderr_contains("gives a request 512 tokens");
        let first = number_after(&stderr, "first request is about");
        assert!(first > 512, "{protocol}: {first}:\n{stderr}");
        out.assert_stderr_contains("-c is divided among the --parallel slots");
        out.assert_stderr_contains("--parallel 1` for one agent");
        // Asked once, by the lead, before its first request; the run went on: the
        // lead's two requests and its sub-agent's one.
        let probes = mock.probes();
        assert_eq!(probes.len(), 1, "{protocol}: {probes:#?}");
        assert_eq!(
            (probes[0].method.as_str(), probes[0].path.as_str()),
            ("GET", "/props")
        );
        let requests = mock.requests();
        assert_eq!(requests.len(), 3, "{protocol}");
        assert!(probes[0].received_at < requests[0].received_at);
    }
}

#[test]
fn a_llama_server_with_room_gets_no_warning() {
    let home = repo();
    let mock = MockLlm::start(SCRIPT);
    mock.serve_props(RawReply::json(200, &llama_props(131_072, 1)));
    let out = lead(&home, &mock, "openai");
    out.assert_ok();
    assert!(!out.stderr().contains("warning"), "{}", out.stderr());
    assert_eq!(mock.probes().len(), 1);
}

/// A server that is not llama-server (here: every probe path is a 404) is asked the
/// llama-server way and the Ollama ways, once each, and then left alone.
#[test]
fn a_server_that_reports_no_window_is_asked_once_and_not_warned_about() {
    let home = repo();
    let mock = MockLlm::start(SCRIPT);
    let out = lead(&home, &mock, "openai");
    out.assert_ok();
    assert!(!out.stderr().contains("warning"), "{}", out.stderr());
    let paths: Vec<(String, String)> = mock
        .probes()
        .iter()
        .map(|p| (p.method.clone(), p.path.clone()))
        .collect();
    let expected = [("GET", "/props"), ("GET", "/api/ps"), ("POST", "/api/show")]
        .map(|(m, p)| (m.to_string(), p.to_string()));
    assert_eq!(paths, expected);
    assert_eq!(
        mock.probes()[2].body,
        json!({"model": "qwen2.5-coder-0.5b"})
    );
}

#[test]
fn hostile_props_are_ignored_silently_and_quickly() {
    let huge = format!(
        r#"{{"default_generation_settings": {{"n_ctx": 16}}, "pad": "{}"}}"#,
        "x".repeat(2 * 1024 * 1024)
    );
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let cases: Vec<(&str, RawReply)> = vec![
        (
            "broken JSON",
            body(b"{\"default_generation_settings\": {\"n_ctx\": 16".to_vec()),
        ),
        ("a body over the limit", body(huge.into_bytes())),
        ("nesting too deep", body(deep.into_bytes())),
        (
            "a negative window",
            RawReply::json(200, &json!({"default_generation_settings": {"n_ctx": -16}})),
        ),
        (
            "a window as text",
            RawReply::json(
                200,
                &json!({"default_generation_settings": {"n_ctx": "16"}}),
            ),
        ),
        (
            "an error status",
            RawReply::json(500, &json!({"default_generation_settings": {"n_ctx": 16}})),
        ),
        (
            "no answer at all",
            body(b"{}".to_vec())
                .ending(RawEnd::Hold)
                .with_delay(Duration::from_secs(3600)),
        ),
    ];
    for (case, reply) in cases {
        let home = repo();
        let mock = MockLlm::start(SCRIPT);
        mock.serve_props(reply);
        let started = Instant::now();
        let out = lead(&home, &mock, "openai");
        let elapsed = started.elapsed();
        out.assert_ok();
        out.assert_stdout_contains("quokka");
        assert!(
            !out.stderr().contains("warning"),
            "{case}: {}",
            out.stderr()
        );
        // The probe gives up after 1.5 s; the run itself takes well under a second.
        assert!(
            elapsed < Duration::from_secs(6),
            "{case}: {elapsed:?}:\n{}",
            out.stderr()
        );
        assert_eq!(mock.probes()[0].path, "/props", "{case}: the lead asked");
        assert_eq!(mock.requests().len(), 3, "{case}");
    }
}

/// `roo-mockllm --llama-ctx N` is the same server as a process, for trying the
/// warning by hand.
#[test]
fn the_mock_server_process_answers_props_like_llama_server() {
    use std::io::{BufRead, BufReader};
    let home = repo();
    let script = home.home.write("script.yaml", SCRIPT);
    let mut mock = roo_tests::TestCommand::new(roo_tests::bin("roo-mockllm"))
        .args([
            "--protocol",
            "openai",
            "--llama-ctx",
            "1024",
            "--llama-slots",
            "4",
            "--script",
        ])
        .arg(&script)
        .spawn();
    let stdout = mock.child().stdout.take().unwrap();
    let mut url = String::new();
    BufReader::new(stdout).read_line(&mut url).unwrap();
    let out = home
        .cmd("roo-lead")
        .args(["-p", "read README.md and tell me the word in it"])
        .args(["--provider", "openai", "--model", "qwen2.5-coder-0.5b"])
        .args(["--base-url", url.trim()])
        .run();
    out.assert_ok();
    out.assert_stderr_contains("llama-server, 4 slots");
    out.assert_stderr_contains("gives a request 1024 tokens");
}

/// Compaction keeps the prompt inside the window the local server reported, not the
/// model's nominal one (unknown models get a large default): a run whose prompt grows
/// past 80 % of a 6,000-token slot is compacted before llama-server would refuse it.
#[test]
fn compaction_keeps_the_prompt_inside_the_window_a_local_server_reported() {
    let home = repo();
    // A numbered listing of about 2,000 tokens: two of them on top of the first
    // request's ~2,400 pass 80 % of the slot (in this crate's estimate, a fifth below
    // the server's count).
    let line = "x".repeat(60);
    let big: String = (0..120).map(|i| format!("{i:03} {line}\n")).collect();
    home.cwd.write("big.txt", &big);
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - when: {last_user_contains: "Summarize the conversation"}
      text: "SUMMARY: big.txt was read; nothing changed."
    - tool_calls: [{name: ReadFile, input: {path: big.txt}}]
    - tool_calls: [{name: ReadFile, input: {path: big.txt}}]
    - text: "Finished reading."
"#,
    );
    mock.serve_props(RawReply::json(200, &llama_props(6_000, 1)));
    let out = home
        .cmd("roo-lead")
        .args(["-p", "read big.txt twice", "--output-format", "stream-json"])
        .args(["--provider", "openai", "--model", "qwen2.5-coder-0.5b"])
        .args(["--base-url", &mock.base_url("openai")])
        .run();
    out.assert_ok();
    let compactions = out
        .stdout()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["type"] == "compaction")
        .count();
    assert!(compactions >= 1, "no compaction:\n{}", out.stdout());
    assert!(!out.stderr().contains("warning:"), "{}", out.stderr());
}
