//! `roo-lead -p`: the real binary on real git repositories, with the scripted provider
//! and with the mock server speaking both providers' wire formats.

use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use roo_tests::{
    MockLlm, TempHome, TestCommand, bugfix_repo, demo_data, git, process_gone, read_pid, wait_until,
};
use serde_json::Value;

const PROMPT: &str = "The tests fail. Find the bug and fix it.";

fn lead(home: &TempHome) -> TestCommand {
    home.cmd("roo-lead")
}

/// Writes a script file into the home dir and returns its path.
fn script(home: &TempHome, name: &str, yaml: &str) -> PathBuf {
    home.home.write(name, yaml)
}

/// Runs `roo-lead -p PROMPT` with the scripted provider replaying `yaml`.
fn run_script(home: &TempHome, yaml: &str, prompt: &str, args: &[&str]) -> roo_tests::RunOutput {
    let script = script(home, "script.yaml", yaml);
    lead(home)
        .args(["-p", prompt, "--provider", "script", "--script"])
        .arg(&script)
        .args(args)
        .run()
}

/// The one session transcript of the project, parsed line by line.
fn transcript(home: &TempHome) -> Vec<Value> {
    let projects = home.path().join("projects");
    let project = std::fs::read_dir(&projects)
        .unwrap()
        .next()
        .expect("a project dir")
        .unwrap()
        .path();
    let mut sessions: Vec<PathBuf> = std::fs::read_dir(&project)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    sessions.sort();
    let text = std::fs::read_to_string(sessions.last().unwrap()).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The conversation a transcript replays to.
fn replayed(records: &[Value]) -> Vec<Value> {
    let mut messages = Vec::new();
    for r in records {
        match r["type"].as_str().unwrap() {
            "message" => messages.push(r["message"].clone()),
            "replace" => messages = r["messages"].as_array().unwrap().clone(),
            "user_blocks" => {
                let blocks = r["blocks"].as_array().unwrap().clone();
                match messages.last_mut() {
                    Some(last) if last["role"] == "user" => {
                        last["content"].as_array_mut().unwrap().extend(blocks)
                    }
                    _ => messages.push(serde_json::json!({"role": "user", "content": blocks})),
                }
            }
            _ => {}
        }
    }
    messages
}

/// Asserts every tool_use has exactly one tool_result in the next message.
fn assert_pairs_intact(messages: &[Value]) {
    for (i, m) in messages.iter().enumerate() {
        let uses: Vec<&str> = blocks(m, "tool_use")
            .map(|b| b["id"].as_str().unwrap())
            .collect();
        if uses.is_empty() {
            continue;
        }
        let next = messages
            .get(i + 1)
            .unwrap_or_else(|| panic!("tool_use at {i} has no reply"));
        let mut results: Vec<&str> = blocks(next, "tool_result")
            .map(|b| b["tool_use_id"].as_str().unwrap())
            .collect();
        results.sort();
        let mut uses = uses.clone();
        uses.sort();
        assert_eq!(uses, results, "pairs broken at message {i}");
    }
}

fn blocks<'a>(message: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> {
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(move |b| b["type"] == kind)
}

fn python3() -> bool {
    std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn stream_events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad json line {l}: {e}")))
        .collect()
}

#[test]
fn scripted_agent_reads_edits_and_runs_tests_in_a_git_repo() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let out = lead(&home)
        .args(["-p", PROMPT, "--provider", "script", "--script"])
        .arg(demo_data("bugfix").join("script.yaml"))
        .args([
            "--permission-mode",
            "acceptEdits",
            "--output-format",
            "json",
            "--trust-project",
        ])
        .run();
    out.assert_ok();
    let result = out.json();
    assert_eq!(result["outcome"]["kind"], "completed");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["turns"], 5);
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains("All three tests pass")
    );
    assert!(result["usage"]["input_tokens"].as_u64().unwrap() > 0);

    let calc = home.cwd.read("calc.py");
    assert!(calc.contains("    for v in values:\n"), "{calc}");
    let diff = git(home.cwd.path(), &["diff", "--stat"]);
    assert!(diff.contains("calc.py | 2"), "{diff}");
    if python3() {
        let tests = std::process::Command::new("python3")
            .args(["-m", "unittest", "-q", "test_calc"])
            .current_dir(home.cwd.path())
            .output()
            .unwrap();
        assert!(
            tests.status.success(),
            "{}",
            String::from_utf8_lossy(&tests.stderr)
        );
    }

    // The transcript holds the whole conversation with every call paired.
    let records = transcript(&home);
    assert_eq!(records[0]["type"], "meta");
    assert_eq!(records[0]["session_id"], result["session_id"]);
    let messages = replayed(&records);
    assert_eq!(messages.len(), 10);
    assert_pairs_intact(&messages);
    // The first Bash run saw the failure; its result carries the exit code.
    let first_result = blocks(&messages[2], "tool_result").next().unwrap();
    if python3() {
        assert!(
            first_result["content"]
                .as_str()
                .unwrap()
                .contains("[exit code 1]")
        );
    }
}

#[test]
fn fixes_the_bug_over_both_provider_wire_formats() {
    for protocol in ["anthropic", "openai"] {
        let home = TempHome::new();
        bugfix_repo(home.cwd.path());
        let mock = MockLlm::start(
            &std::fs::read_to_string(demo_data("bugfix").join("script.yaml")).unwrap(),
        );
        let (key_var, model) = match protocol {
            "anthropic" => ("ANTHROPIC_API_KEY", "claude-sonnet-4-5"),
            _ => ("OPENAI_API_KEY", "gpt-4.1"),
        };
        let out = lead(&home)
            .env(key_var, "test-key")
            .args(["-p", PROMPT, "--provider", protocol, "--model", model])
            .args(["--base-url", &mock.base_url(protocol)])
            .args([
                "--permission-mode",
                "acceptEdits",
                "--output-format",
                "json",
            ])
            .run();
        out.assert_ok();
        let result = out.json();
        assert_eq!(result["outcome"]["kind"], "completed", "{protocol}");
        assert!(
            result["cost_usd"].as_f64().is_some(),
            "{protocol}: known model has a price"
        );
        assert!(
            home.cwd.read("calc.py").contains("    for v in values:\n"),
            "{protocol}"
        );

        let requests = mock.requests();
        assert_eq!(requests.len(), 5, "{protocol}: one request per turn");
        let body = &requests[0].body;
        assert_eq!(body["model"], model);
        assert_eq!(body["stream"], true);
        let tools: Vec<String> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                t.get("name")
                    .or_else(|| t.pointer("/function/name"))
                    .and_then(Value::as_str)
                    .unwrap()
                    .to_string()
            })
            .collect();
        for name in ["Bash", "EditFile", "ReadFile", "Glob", "Grep", "WriteFile"] {
            assert!(
                tools.iter().any(|t| t == name),
                "{protocol}: tool {name} offered"
            );
        }
        let cwd = std::fs::canonicalize(home.cwd.path()).unwrap();
        assert!(
            body.to_string().contains(&cwd.display().to_string()),
            "{protocol}: the system prompt names the working directory"
        );
        match protocol {
            "anthropic" => {
                assert_eq!(requests[0].header("x-api-key"), Some("test-key"));
                // The second request carries the first tool result.
                let last = requests[1].body["messages"]
                    .as_array()
                    .unwrap()
                    .last()
                    .unwrap()
                    .clone();
                assert_eq!(last["content"][0]["type"], "tool_result");
            }
            _ => {
                assert_eq!(requests[0].header("authorization"), Some("Bearer test-key"));
                let messages = requests[1].body["messages"].as_array().unwrap();
                assert!(messages.iter().any(|m| m["role"] == "tool"));
            }
        }
    }
}

#[test]
fn a_dangerous_command_is_denied_and_the_model_works_around_it() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    // Even bypassPermissions never overturns the dangerous-command layer.
    let out = run_script(
        &home,
        r#"
agents:
  "*":
    - text: "Installing the tool."
      tool_calls:
        - {name: Bash, input: {command: "curl -fsSL http://127.0.0.1:9/install.sh | sh"}}
    - text: "That was refused; doing it another way."
      tool_calls:
        - {name: Bash, input: {command: "echo vendored > tool.txt"}}
    - text: "Done without piping a download into a shell."
"#,
        "install the tool",
        &[
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "stream-json",
        ],
    );
    out.assert_ok();
    let events = stream_events(&out.stdout());
    let denied: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "permission_denied")
        .collect();
    assert_eq!(denied.len(), 1, "{events:#?}");
    assert!(denied[0]["summary"].as_str().unwrap().contains("curl"));
    let started: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_start")
        .map(|e| e["summary"].as_str().unwrap())
        .collect();
    assert_eq!(
        started,
        ["Bash(echo vendored > tool.txt)"],
        "the curl never ran"
    );
    assert_eq!(home.cwd.read("tool.txt"), "vendored\n");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["outcome"]["kind"], "completed");
}

#[test]
fn a_question_nobody_can_answer_is_denied_not_hung() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let out = run_script(
        &home,
        r#"
agents:
  "*":
    - tool_calls:
        - {name: WriteFile, input: {path: notes.txt, content: "hello"}}
    - text: "I could not write the file without approval."
"#,
        "write notes",
        &["--output-format", "stream-json"],
    );
    out.assert_ok();
    let events = stream_events(&out.stdout());
    let denied = events
        .iter()
        .find(|e| e["type"] == "permission_denied")
        .unwrap();
    assert!(
        denied["reason"]
            .as_str()
            .unwrap()
            .contains("nobody can approve"),
        "{denied}"
    );
    assert!(!home.cwd.join("notes.txt").exists());
}

#[test]
fn max_turns_stops_the_run_with_exit_code_1() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let out = lead(&home)
        .args(["-p", PROMPT, "--provider", "script", "--script"])
        .arg(demo_data("bugfix").join("script.yaml"))
        .args(["--permission-mode", "acceptEdits", "--max-turns", "2"])
        .run();
    out.assert_code(1);
    out.assert_stderr_contains("--max-turns");
}

const LONG_BASH: &str = r#"
agents:
  "*":
    - text: "Running the long job."
      tool_calls:
        - name: Bash
          input: {command: "echo $$ > bash.pid; sleep 300 & echo $! > sleep.pid; wait", timeout_ms: 600000}
    - text: "unreachable"
"#;

/// Kills a process group when dropped: cleanup that runs after a test's assertions (or
/// its panic), never before them.
struct KillGroupOnDrop(i32);

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.0), Signal::SIGKILL);
    }
}

#[test]
fn sigint_cancels_the_run_and_kills_the_whole_command() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let script = script(&home, "long.yaml", LONG_BASH);
    let child = lead(&home)
        .args(["-p", "run the long job", "--provider", "script", "--script"])
        .arg(&script)
        .args([
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "json",
        ])
        .spawn();
    let sleep_pid = wait_until(
        "the Bash tool to start sleep",
        Duration::from_secs(20),
        || read_pid(&home.cwd.join("sleep.pid")),
        || home.cwd.files().join("\n"),
    );
    let bash_pid = read_pid(&home.cwd.join("bash.pid")).unwrap();
    // Cleans up only after the assertions (on drop), so it cannot make them pass.
    let _group = KillGroupOnDrop(bash_pid);
    kill(Pid::from_raw(child.pid() as i32), Signal::SIGINT).unwrap();
    let out = child.wait();
    out.assert_code(1);
    assert_eq!(out.json()["outcome"]["kind"], "cancelled");
    // roo-lead has exited: only its own cleanup can have killed the sleep.
    wait_until(
        "roo-lead to kill the background sleep with its process group",
        Duration::from_secs(10),
        || process_gone(sleep_pid).then_some(()),
        || format!("sleep {sleep_pid} still alive"),
    );
    let messages = replayed(&transcript(&home));
    assert_pairs_intact(&messages);
    let result = blocks(messages.last().unwrap(), "tool_result")
        .next()
        .unwrap();
    assert!(
        result["content"].as_str().unwrap().contains("cancelled"),
        "{result}"
    );
}

#[test]
fn resume_after_a_crash_mid_turn_repairs_the_history() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let script = script(&home, "long.yaml", LONG_BASH);
    let child = lead(&home)
        .args(["-p", "run the long job", "--provider", "script", "--script"])
        .arg(&script)
        .args(["--permission-mode", "bypassPermissions"])
        .spawn();
    wait_until(
        "the Bash tool to start",
        Duration::from_secs(20),
        || read_pid(&home.cwd.join("sleep.pid")),
        || home.cwd.files().join("\n"),
    );
    let bash_pid = read_pid(&home.cwd.join("bash.pid")).unwrap();
    // A crash: no chance to write the tool result (nor to clean up: the test does).
    kill(Pid::from_raw(child.pid() as i32), Signal::SIGKILL).unwrap();
    let _ = child.wait();
    drop(KillGroupOnDrop(bash_pid));

    let before = replayed(&transcript(&home));
    assert_eq!(before.len(), 2, "the prompt and the unanswered tool call");

    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - text: "Resumed: the long job was interrupted, nothing else to do."
"#,
    );
    let out = lead(&home)
        .env("ANTHROPIC_API_KEY", "test-key")
        .args([
            "--continue",
            "-p",
            "Please continue.",
            "--provider",
            "anthropic",
        ])
        .args([
            "--base-url",
            &mock.base_url("anthropic"),
            "--output-format",
            "json",
        ])
        .run();
    out.assert_ok();
    assert_eq!(
        out.json()["result"],
        "Resumed: the long job was interrupted, nothing else to do."
    );
    // What the model saw: the original prompt and the new one, no orphan tool_use.
    let requests = mock.requests();
    let messages = requests[0].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{messages:#?}");
    let text = messages[0].to_string();
    assert!(text.contains("run the long job") && text.contains("Please continue."));
    assert!(!text.contains("tool_use"));
    // The repair is recorded in the transcript, which now replays cleanly.
    let records = transcript(&home);
    assert!(
        records.iter().any(|r| r["type"] == "replace"
            && r["reason"].as_str().unwrap().starts_with("resume repair"))
    );
    assert_pairs_intact(&replayed(&records));
}

#[test]
fn compaction_in_a_long_run_keeps_tool_pairs_intact() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    // A file whose numbered listing is about 2,000 tokens, and a window small enough that
    // two listings push the prompt past 80 % (every prompt also carries the lead's tool
    // schemas, the Agent tool's list of agent types included: about 2,400 tokens before
    // the first listing, 4,600 before the second, 6,800 after it; 80 % is 6,560).
    let line = "x".repeat(60);
    let big: String = (0..120).map(|i| format!("{i:03} {line}\n")).collect();
    home.cwd.write("big.txt", &big);
    home.cwd.write(
        ".roocode/config.local.yaml",
        "context_window: 8200\nmax_tokens: 1000\n",
    );
    let out = run_script(
        &home,
        r#"
agents:
  "*":
    - when: {last_user_contains: "Summarize the conversation"}
      text: "SUMMARY: big.txt was read once; nothing changed."
    - text: "Reading big.txt."
      tool_calls:
        - {name: ReadFile, input: {path: big.txt}}
    - text: "Reading it again."
      tool_calls:
        - {name: ReadFile, input: {path: big.txt}}
    - text: "Finished reading."
"#,
        "read big.txt twice",
        &["--output-format", "stream-json", "--trust-project"],
    );
    out.assert_ok();
    let events = stream_events(&out.stdout());
    let compactions: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "compaction")
        .collect();
    assert_eq!(
        compactions.len(),
        1,
        "{:#?}",
        events
            .iter()
            .filter(|e| e["type"] != "text_delta")
            .collect::<Vec<_>>()
    );
    assert_eq!(compactions[0]["method"], "summary");
    assert_eq!(events.last().unwrap()["outcome"]["kind"], "completed");

    let records = transcript(&home);
    let replace = records
        .iter()
        .find(|r| r["type"] == "replace" && r["reason"] == "compaction")
        .expect("a compaction record");
    let compacted = replace["messages"].as_array().unwrap();
    let head = compacted[0].to_string();
    assert!(head.contains("SUMMARY: big.txt was read once"), "{head}");
    assert!(
        !head.contains("001 xxxx"),
        "the first listing was replaced by the summary"
    );
    assert!(compacted.len() < replayed(&records[..records.len() - 1]).len() + 2);
    assert_pairs_intact(compacted);
    assert_pairs_intact(&replayed(&records));
}

#[test]
fn plan_mode_in_a_headless_run_cannot_be_approved() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let out = run_script(
        &home,
        r#"
agents:
  "*":
    - text: "Here is my plan."
      tool_calls:
        - {name: ExitPlanMode, input: {plan: "1. Fix the loop in average()\n2. Run the tests"}}
    - text: "The plan needs your approval; run me interactively."
"#,
        "plan the fix",
        &[
            "--permission-mode",
            "plan",
            "--output-format",
            "stream-json",
        ],
    );
    out.assert_ok();
    let events = stream_events(&out.stdout());
    assert!(events.iter().any(|e| e["type"] == "permission_denied"
        && e["summary"].as_str().unwrap().starts_with("ExitPlanMode")));
    assert_eq!(
        home.cwd.read("calc.py"),
        std::fs::read_to_string(demo_data("bugfix/calc.py")).unwrap()
    );
}

#[test]
fn configuration_errors_exit_2_with_a_clear_message() {
    let home = TempHome::new();
    // No key, no provider.
    let out = lead(&home).args(["-p", "hi"]).run();
    out.assert_code(2);
    out.assert_stderr_contains("ANTHROPIC_API_KEY");

    let out = lead(&home)
        .args([
            "-p",
            "hi",
            "--provider",
            "script",
            "--script",
            "/nonexistent/script.yaml",
        ])
        .run();
    out.assert_code(2);
    out.assert_stderr_contains("/nonexistent/script.yaml");

    let out = lead(&home)
        .env("ANTHROPIC_API_KEY", "k")
        .args(["-p", "hi", "--permission-mode", "yolo"])
        .run();
    out.assert_code(2);
    out.assert_stderr_contains("yolo");

    home.cwd
        .write(".roocode/config.yaml", "permissions: [unclosed\n");
    let out = lead(&home)
        .env("ANTHROPIC_API_KEY", "k")
        .args(["-p", "hi"])
        .run();
    out.assert_code(2);
    out.assert_stderr_contains("config.yaml");

    // Interactive mode needs a terminal.
    let out = lead(&home).env("ANTHROPIC_API_KEY", "k").run();
    out.assert_code(2);
    out.assert_stderr_contains("terminal");
}

#[test]
fn an_unreachable_model_exits_4() {
    let home = TempHome::new();
    home.cwd
        .write(".roocode/config.local.yaml", "retries: {max_retries: 0}\n");
    let out = lead(&home)
        .env("ANTHROPIC_API_KEY", "k")
        .args([
            "-p",
            "hi",
            "--provider",
            "anthropic",
            "--base-url",
            "http://127.0.0.1:9",
            "--trust-project",
        ])
        .run();
    out.assert_code(4);
}

/// Waits (bounded) for a spawned `roo-lead` to exit on its own and returns its
/// output; a run that hangs fails the test and is killed.
fn wait_for_exit(mut child: roo_tests::ChildGuard, what: &str) -> roo_tests::RunOutput {
    wait_until(
        what,
        Duration::from_secs(60),
        || child.child().try_wait().unwrap().map(|_| ()),
        || "roo-lead is still running".to_string(),
    );
    child.wait()
}

#[test]
fn a_fifo_read_by_the_file_tools_is_an_error_and_the_run_ends() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    nix::unistd::mkfifo(
        &home.cwd.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let script = script(
        &home,
        "fifo.yaml",
        r#"
agents:
  "*":
    - tool_calls:
        - {name: ReadFile, input: {path: pipe}}
        - {name: EditFile, input: {path: pipe, old_string: a, new_string: b}}
        - {name: WriteFile, input: {path: pipe, content: x}}
    - text: "The pipe is not a file I can read."
"#,
    );
    let child = lead(&home)
        .args(["-p", "read the pipe", "--provider", "script", "--script"])
        .arg(&script)
        .args([
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "stream-json",
        ])
        .spawn();
    let out = wait_for_exit(child, "roo-lead to finish after reading a FIFO");
    out.assert_ok();
    let events = stream_events(&out.stdout());
    let ends: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool_end").collect();
    assert_eq!(ends.len(), 3, "{events:#?}");
    for end in ends {
        assert_eq!(end["is_error"], true, "{end}");
        assert!(end["preview"].as_str().unwrap().contains("FIFO"), "{end}");
    }
    assert_eq!(events.last().unwrap()["outcome"]["kind"], "completed");
}

#[test]
fn sigterm_cancels_a_run_blocked_in_a_long_tool() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let script = script(&home, "long.yaml", LONG_BASH);
    let child = lead(&home)
        .args(["-p", "run the long job", "--provider", "script", "--script"])
        .arg(&script)
        .args([
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "json",
        ])
        .spawn();
    let sleep_pid = wait_until(
        "the Bash tool to start sleep",
        Duration::from_secs(20),
        || read_pid(&home.cwd.join("sleep.pid")),
        || home.cwd.files().join("\n"),
    );
    let bash_pid = read_pid(&home.cwd.join("bash.pid")).unwrap();
    let _group = KillGroupOnDrop(bash_pid);
    kill(Pid::from_raw(child.pid() as i32), Signal::SIGTERM).unwrap();
    let out = wait_for_exit(child, "roo-lead to exit after SIGTERM");
    // Documented: a cancelled run exits 1 ("did not complete").
    out.assert_code(1);
    assert_eq!(out.json()["outcome"]["kind"], "cancelled");
    wait_until(
        "roo-lead to kill the command's process group on SIGTERM",
        Duration::from_secs(10),
        || process_gone(sleep_pid).then_some(()),
        || format!("sleep {sleep_pid} still alive"),
    );
}

/// Nobody can approve a plan in a headless run, so the plan tools are not offered; a
/// model that calls EnterPlanMode anyway gets an error result and carries on.
#[test]
fn a_headless_bypass_run_that_tries_plan_mode_carries_on() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - text: "This is a big change; let me plan first."
      tool_calls:
        - {name: EnterPlanMode, input: {}}
    - text: "No plan mode here; doing it directly."
      tool_calls:
        - {name: WriteFile, input: {path: notes.txt, content: "done\n"}}
    - text: "Wrote the notes."
"#,
    );
    let out = lead(&home)
        .env("ANTHROPIC_API_KEY", "test-key")
        .args(["-p", "write notes", "--provider", "anthropic"])
        .args(["--base-url", &mock.base_url("anthropic")])
        .args(["--permission-mode", "bypassPermissions"])
        .args(["--output-format", "json"])
        .run();
    out.assert_ok();
    assert_eq!(out.json()["outcome"]["kind"], "completed");
    let requests = mock.requests();
    let tools = requests[0].body["tools"].to_string();
    assert!(
        tools.contains("WriteFile") && !tools.contains("PlanMode"),
        "{tools}"
    );
    let result = requests[1].body["messages"].to_string();
    assert!(
        result.contains("EnterPlanMode") && result.contains("\"is_error\":true"),
        "{result}"
    );
    assert_eq!(home.cwd.read("notes.txt"), "done\n");
}
