//! The `roo-mockllm` binary: prints its base URL first, then serves a script in the
//! chosen protocol until killed.

use std::process::Stdio;
use std::time::Duration;

use roo_llm::{ProviderKind, build_provider, collect};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use super::support::{TempDir, ask};

#[tokio::test]
async fn binary_serves_a_script_over_both_protocols() {
    let dir = TempDir::new("bin");
    let script = dir.path().join("demo.yaml");
    std::fs::write(
        &script,
        "- text: \"first from the binary\"\n- text: \"second from the binary\"\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_roo-mockllm"))
        .args(["--protocol", "anthropic", "--script"])
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let url = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the base URL within 20 s")
        .unwrap()
        .expect("a first line");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(!url.ends_with("/v1"), "{url}");

    let mut settings = roo_llm::LlmSettings::defaults(ProviderKind::Anthropic);
    settings.base_url = url.clone();
    settings.api_key = Some("k".into());
    let anthropic = build_provider(&settings).unwrap();
    let r = collect(anthropic.stream(ask("hi")), |_| {}).await.unwrap();
    assert_eq!(r.message.text(), "first from the binary");

    // The same server speaks OpenAI under /v1.
    let mut settings = roo_llm::LlmSettings::defaults(ProviderKind::OpenAi);
    settings.base_url = format!("{url}/v1");
    let openai = build_provider(&settings).unwrap();
    let r = collect(openai.stream(ask("hi")), |_| {}).await.unwrap();
    assert_eq!(r.message.text(), "second from the binary");

    child.kill().await.unwrap();
}

#[tokio::test]
async fn binary_rejects_bad_arguments() {
    let out = Command::new(env!("CARGO_BIN_EXE_roo-mockllm"))
        .args(["--protocol", "grpc"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown protocol `grpc`"), "{stderr}");
    let help = Command::new(env!("CARGO_BIN_EXE_roo-mockllm"))
        .arg("--help")
        .output()
        .await
        .unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--script FILE"));
}

#[tokio::test]
async fn binary_records_each_request_body_as_a_line() {
    let dir = TempDir::new("bin-record");
    let script = dir.path().join("demo.yaml");
    std::fs::write(&script, "- text: \"one\"\n- text: \"two\"\n").unwrap();
    let record = dir.path().join("requests.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_roo-mockllm"))
        .args(["--protocol", "anthropic", "--script"])
        .arg(&script)
        .arg("--record")
        .arg(&record)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let url = tokio::time::timeout(
        Duration::from_secs(20),
        BufReader::new(stdout).lines().next_line(),
    )
    .await
    .expect("the base URL within 20 s")
    .unwrap()
    .expect("a first line");
    let mut settings = roo_llm::LlmSettings::defaults(ProviderKind::Anthropic);
    settings.base_url = url;
    settings.api_key = Some("k".into());
    let anthropic = build_provider(&settings).unwrap();
    for question in ["first question", "second question"] {
        collect(anthropic.stream(ask(question)), |_| {})
            .await
            .unwrap();
    }

    // The file is written after the reply: wait for both lines.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let lines = loop {
        let text = std::fs::read_to_string(&record).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if lines.len() == 2 || tokio::time::Instant::now() > deadline {
            break lines;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (line, question) in lines.iter().zip(["first question", "second question"]) {
        assert!(line["messages"].to_string().contains(question), "{line}");
    }
    child.kill().await.unwrap();
}
