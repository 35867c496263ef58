//! Tests of the Bash tool against real processes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::tool::Tool;

fn ctx(dir: &Path) -> ToolContext {
    let mut ctx = ToolContext::new(dir.to_path_buf(), dir.join("session"));
    ctx.launcher
        .env
        .push(("ROO_TEST_VALUE".to_string(), "forty-two".to_string()));
    ctx
}

/// Waits until `cond` holds, failing the test after 10 s.
async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Pids printed by a command as `NAME=PID` lines.
fn pid_of(output: &str, name: &str) -> u32 {
    output
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= line in {output:?}"))
        .trim()
        .parse()
        .unwrap()
}

/// A command whose shell ignores SIGTERM, with a grandchild `sleep` and a child
/// shell that also ignores SIGTERM; prints their pids and then waits forever.
const STUBBORN: &str = r#"
trap '' TERM
sleep 1000 &
echo "grandchild=$!"
bash -c 'trap "" TERM; while :; do sleep 0.05; done' &
echo "child=$!"
echo "shell=$$"
touch started
while :; do sleep 0.05; done
"#;

#[tokio::test]
async fn reports_exit_codes_and_output() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let out = Bash.call(json!({"command": "echo hello"}), &ctx).await;
    assert!(!out.is_error);
    assert_eq!(out.content, "hello\n\n[exit code 0]");

    let out = Bash
        .call(json!({"command": "echo out; echo err >&2; exit 3"}), &ctx)
        .await;
    assert!(out.is_error);
    assert!(out.content.contains("out") && out.content.contains("err"));
    assert!(out.content.ends_with("[exit code 3]"), "{}", out.content);

    let out = Bash.call(json!({"command": "true"}), &ctx).await;
    assert_eq!(out.content, "(no output)\n\n[exit code 0]");
}

#[tokio::test]
async fn runs_in_cwd_with_extra_env() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let out = Bash
        .call(json!({"command": "pwd; echo $ROO_TEST_VALUE"}), &ctx)
        .await;
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        out.content,
        format!("{}\nforty-two\n\n[exit code 0]", cwd.display())
    );
}

#[tokio::test]
async fn reports_death_by_signal() {
    let dir = tempfile::tempdir().unwrap();
    let out = Bash
        .call(json!({"command": "kill -9 $$"}), &ctx(dir.path()))
        .await;
    assert!(out.is_error);
    assert!(
        out.content.contains("[killed by signal 9 (SIGKILL)]"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn caps_large_output_keeping_head_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let out = Bash
        .call(
            json!({"command": "echo START; head -c 200000 /dev/zero | tr '\\0' a; echo; echo END"}),
            &ctx(dir.path()),
        )
        .await;
    assert!(!out.is_error, "{}", &out.content[..200]);
    assert!(out.content.starts_with("START\n"));
    assert!(out.content.contains("bytes of output omitted"));
    assert!(out.content.ends_with("END\n\n[exit code 0]"));
    assert!(out.content.len() < OUTPUT_HEAD_BYTES + OUTPUT_TAIL_BYTES + 200);
}

#[tokio::test]
async fn timeout_kills_the_whole_group_even_processes_ignoring_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let started = Instant::now();
    let out = Bash
        .call(json!({"command": STUBBORN, "timeout_ms": 1000}), &ctx)
        .await;
    assert!(out.is_error);
    assert!(
        out.content.contains("[timed out after 1000 ms"),
        "{}",
        out.content
    );
    for name in ["shell", "child", "grandchild"] {
        let pid = pid_of(&out.content, name);
        wait_until(&format!("{name} {pid} to be gone"), || {
            !roo_store::pid_alive(pid)
        })
        .await;
    }
    // Timeout + grace + SIGKILL, not the 1000 s the processes wanted.
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn cancel_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let cancel = ctx.cancel.clone();
    let marker = dir.path().join("started");
    let canceller = tokio::spawn(async move {
        wait_until("the command to start", || marker.exists()).await;
        cancel.cancel();
    });
    let out = Bash.call(json!({"command": STUBBORN}), &ctx).await;
    canceller.await.unwrap();
    assert!(out.is_error);
    assert!(
        out.content.contains("[cancelled by the user"),
        "{}",
        out.content
    );
    for name in ["shell", "child", "grandchild"] {
        let pid = pid_of(&out.content, name);
        wait_until(&format!("{name} {pid} to be gone"), || {
            !roo_store::pid_alive(pid)
        })
        .await;
    }
}

#[tokio::test]
async fn background_processes_do_not_outlive_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let out = Bash
        .call(
            json!({"command": "sleep 1000 & echo \"bg=$!\""}),
            &ctx(dir.path()),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("[exit code 0]"));
    assert!(
        out.content.contains("leftover background process(es)"),
        "{}",
        out.content
    );
    let pid = pid_of(&out.content, "bg");
    wait_until("the background sleep to be gone", || {
        !roo_store::pid_alive(pid)
    })
    .await;
}

#[tokio::test]
async fn missing_working_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = ctx(dir.path());
    ctx.cwd = dir.path().join("gone");
    let out = Bash.call(json!({"command": "true"}), &ctx).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("working directory does not exist"),
        "{}",
        out.content
    );
}

#[test]
fn summary_shows_the_command_first_line() {
    let summary = Tool::summarize(&Bash, &json!({"command": "cargo test\necho done"}));
    assert_eq!(summary, "Bash(cargo test …)");
    assert_eq!(
        Tool::summarize(&Bash, &json!({"command": "ls -la"})),
        "Bash(ls -la)"
    );
}
