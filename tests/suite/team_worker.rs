//! `roo-worker` started by hand, as a person would in a spare terminal: it joins the
//! team, works (its Bash finds `roo-task` with no arguments), charges its model spend to
//! the task it owns, logs, goes idle with one notification, refuses a second process
//! under its name, stops on SIGTERM, resumes its transcript when restarted; killed with
//! SIGKILL, the lead's liveness check finds it dead and returns its task to pending.

use std::path::PathBuf;
use std::time::Duration;

use roo_store::{Name, ReadFilter, RooHome, Team};
use roo_tests::{ChildGuard, MockLlm, TempHome, TestCommand, bin, wait_until};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

const SCRIPT: &str = r#"
agents:
  "*":
    - when: {last_user_contains: "what did you do"}
      text: "I claimed task 1 and wrote notes.txt."
      usage: {input_tokens: 3000, output_tokens: 30}
    - text: "Claiming task 1."
      usage: {input_tokens: 1000, output_tokens: 100}
      tool_calls:
        - {name: Bash, input: {command: "roo-task claim 1 && echo \"$ROO_AGENT_NAME of $ROO_TEAM, key ${ANTHROPIC_API_KEY:-hidden}\" > notes.txt"}}
    - text: "First job done."
      usage: {input_tokens: 2000, output_tokens: 20}
"#;

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

/// A team `t` led by `lead` with task 1, and the mock model.
fn setup() -> (TempHome, MockLlm) {
    let home = TempHome::new();
    home.team("t", "lead", &[]);
    home.task()
        .args([
            "create",
            "--team",
            "t",
            "--as",
            "lead",
            "--subject",
            "write the notes",
        ])
        .run()
        .assert_ok();
    (home, MockLlm::start(SCRIPT))
}

/// `roo-worker --team t --name carol …` against the mock, with the key in the
/// environment and the workspace's binaries on PATH.
fn worker(home: &TempHome, mock: &MockLlm, prompt: Option<&str>) -> TestCommand {
    let bins: PathBuf = bin("roo-task").parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = home
        .cmd("roo-worker")
        .env("PATH", path)
        .env("ANTHROPIC_API_KEY", "test-key")
        .args(["--team", "t", "--name", "carol"])
        .args(["--provider", "anthropic", "--model", "claude-sonnet-4-5"])
        .args(["--base-url", &mock.base_url("anthropic")])
        .args(["--permission-mode", "bypassPermissions"]);
    if let Some(prompt) = prompt {
        cmd = cmd.args(["--prompt", prompt]);
    }
    cmd
}

fn team(home: &TempHome) -> Team {
    Team::open(&RooHome::new(home.path()), name("t")).unwrap()
}

fn idle_notifications(team: &Team) -> usize {
    team.mailbox()
        .read(&name("lead"), &ReadFilter::default())
        .unwrap()
        .iter()
        .filter(|m| m.body.type_name() == "idle_notification")
        .count()
}

/// Waits until carol is idle in the config with `pid`.
fn wait_idle(team: &Team, pid: u32, also: impl Fn() -> bool) {
    wait_until(
        "carol to go idle",
        WAIT,
        || {
            let config = team.config().ok()?;
            let carol = config.member("carol")?;
            (carol.pid == Some(pid) && !carol.is_active() && also()).then_some(())
        },
        || format!("{:#?}", team.config().map(|c| c.members)),
    );
}

/// Waits (bounded) for `child` to exit and returns its output.
fn exited(mut child: ChildGuard) -> roo_tests::RunOutput {
    wait_until(
        "roo-worker to exit",
        WAIT,
        || child.child().try_wait().unwrap().map(|_| ()),
        || "still running".to_string(),
    );
    child.wait()
}

fn terminate(child: ChildGuard) -> roo_tests::RunOutput {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    exited(child)
}

fn task_json(home: &TempHome) -> Value {
    home.task()
        .args(["get", "1", "--team", "t", "--json"])
        .run()
        .assert_ok()
        .json()
}

/// `value` without its prompt-cache markers.
fn without_markers(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(key, _)| *key != "cache_control")
                .map(|(key, v)| (key.clone(), without_markers(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_markers).collect()),
        other => other.clone(),
    }
}

/// The worker's two requests carry prompt-cache breakpoints (the last tool, the system
/// prompt's stable part, the latest user message), and the second one's prefix is the
/// first request: same tools, same system prompt, its messages continued.
fn assert_cacheable(mock: &MockLlm) {
    let requests = mock.requests();
    let [first, second] = &requests[..] else {
        panic!("{} requests", requests.len());
    };
    for request in [first, second] {
        let body = &request.body;
        let tools = body["tools"].as_array().unwrap();
        assert_eq!(tools.last().unwrap()["cache_control"]["type"], "ephemeral");
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        let messages = body["messages"].as_array().unwrap();
        let last = messages.last().unwrap()["content"].as_array().unwrap();
        assert_eq!(last.last().unwrap()["cache_control"]["type"], "ephemeral");
    }
    for part in ["tools", "system"] {
        assert_eq!(
            without_markers(&first.body[part]),
            without_markers(&second.body[part]),
            "{part}"
        );
    }
    let before = without_markers(&first.body["messages"]);
    let after = without_markers(&second.body["messages"]);
    let before = before.as_array().unwrap();
    assert_eq!(before[..], after.as_array().unwrap()[..before.len()]);
}

#[test]
fn a_worker_started_by_hand_joins_works_logs_and_resumes_its_transcript() {
    let (home, mock) = setup();
    let team = team(&home);
    let first = worker(&home, &mock, Some("take task 1")).spawn();
    let pid = first.pid();
    wait_idle(&team, pid, || idle_notifications(&team) == 1);

    // It joined with its pid, claimed the task from its sandboxed Bash (ROO_* exported,
    // the model's key, which it got from the environment, not).
    assert_eq!(home.cwd.read("notes.txt").trim(), "carol of t, key hidden");
    let task = task_json(&home);
    assert_eq!(task["status"], "in_progress");
    assert_eq!(task["owner"], "carol");
    // Both model requests are charged to the task it owns.
    let usage = &task["usage"]["carol"];
    assert_eq!(usage["input_tokens"], 3000, "{task:#}");
    assert_eq!(usage["output_tokens"], 120, "{task:#}");
    assert_eq!(usage["requests"], 2, "{task:#}");
    let log = std::fs::read_to_string(home.path().join("teams/t/logs/carol.log")).unwrap();
    assert!(log.contains("teammate started"), "{log}");
    assert_cacheable(&mock);

    // A second process under the same name is refused while carol lives: exit 1, as
    // `roo-mail team join` is refused (issue 19).
    let twin = worker(&home, &mock, Some("me too")).run();
    twin.assert_code(1);
    twin.assert_stderr_contains(&format!(
        "a live process (pid {pid}) already is member carol"
    ));

    // SIGTERM: it ends gracefully, idle; its output was rendered on its terminal.
    let out = terminate(first);
    out.assert_code(1);
    out.assert_stdout_contains("First job done.");
    out.assert_stdout_contains("Bash(roo-task claim 1");
    assert!(!team.config().unwrap().member("carol").unwrap().is_active());

    // Restarted, it resumes its transcript: the new request carries the first run.
    let second = worker(&home, &mock, Some("what did you do?")).spawn();
    let pid2 = second.pid();
    wait_idle(&team, pid2, || mock.requests().len() == 3);
    let last = mock.requests().pop().unwrap().body["messages"].to_string();
    assert!(
        last.contains("take task 1") && last.contains("First job done."),
        "{last}"
    );
    // Same outcome, same task states, but a new answer: the lead gets it in a second
    // notification (the answer is the report).
    assert_eq!(idle_notifications(&team), 2);
    assert_eq!(task_json(&home)["usage"]["carol"]["requests"], 3);
    // The lead shuts it down: it answers and exits 0.
    home.mail()
        .args(["send", "--team", "t", "--as", "lead", "--to", "carol"])
        .args(["--type", "shutdown_request", "--request-id", "r-done"])
        .run()
        .assert_ok();
    let out = exited(second);
    out.assert_code(0);
    out.assert_stdout_contains("I claimed task 1 and wrote notes.txt.");
    let answered = team
        .mailbox()
        .read(&name("lead"), &ReadFilter::default())
        .unwrap()
        .into_iter()
        .any(|m| matches!(&m.body, roo_store::MessageBody::ShutdownResponse { approve: true, request_id: Some(id), .. } if id == "r-done"));
    assert!(answered);
}

#[test]
fn a_killed_worker_is_found_dead_by_its_pid_and_its_task_returns_to_pending() {
    let (home, mock) = setup();
    let team = team(&home);
    let mut child = worker(&home, &mock, Some("take task 1")).spawn();
    let pid = child.pid();
    wait_idle(&team, pid, || idle_notifications(&team) == 1);
    assert_eq!(task_json(&home)["owner"], "carol");

    child.child().kill().unwrap();
    let _ = child.wait();
    let deaths = team.detect_dead(Some(&name("lead"))).unwrap();
    assert_eq!(deaths.len(), 1, "{deaths:?}");
    assert_eq!(deaths[0].member.name, name("carol"));
    let task = task_json(&home);
    assert_eq!(task["status"], "pending", "{task:#}");
    assert_eq!(task["owner"], Value::Null, "{task:#}");
    let notes = task["notes"].to_string();
    assert!(
        notes.contains("reclaimed from carol") && notes.contains(&pid.to_string()),
        "{notes}"
    );
    let list = home
        .mail()
        .args(["list", "--team", "t", "--json"])
        .run()
        .assert_ok()
        .json();
    let carol = list
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "carol")
        .unwrap();
    assert_eq!(carol["state"], "dead");
}

#[test]
fn sigterm_ends_a_busy_worker_without_orphans_and_leaves_it_idle() {
    let home = TempHome::new();
    home.team("t", "lead", &[]);
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - text: "Waiting on a slow job."
      tool_calls:
        - {name: Bash, input: {command: "sleep 300 & echo $! > bg.pid; sleep 301"}}
    - text: "Never reached."
"#,
    );
    let team = team(&home);
    let child = worker(&home, &mock, Some("run the slow job")).spawn();
    let bg = wait_until(
        "the background job to start",
        WAIT,
        || roo_tests::read_pid(&home.cwd.join("bg.pid")),
        || home.cwd.files().join("\n"),
    );
    assert!(!roo_tests::process_gone(bg));
    let out = terminate(child);
    out.assert_code(1);
    out.assert_stderr_contains("stopped by a signal");
    wait_until(
        "the background job to end with the worker",
        WAIT,
        || roo_tests::process_gone(bg).then_some(()),
        || format!("pid {bg} still runs"),
    );
    let carol = team.config().unwrap().member("carol").unwrap().clone();
    assert!(!carol.is_active(), "{carol:?}");
}

#[test]
fn a_worker_that_cannot_start_is_a_usage_error_and_leaves_no_roster_entry() {
    let (home, mock) = setup();
    let out = worker(&home, &mock, Some("go"))
        .args(["--cwd", "/nonexistent/dir"])
        .run();
    out.assert_code(2);
    out.assert_stderr_contains("--cwd /nonexistent/dir: not a directory");
    assert!(team(&home).config().unwrap().member("carol").is_none());

    let out = home
        .cmd("roo-worker")
        .args(["--team", "nope", "--name", "carol", "--script", "x.yaml"])
        .run();
    out.assert_code(2);
    out.assert_stderr_contains("roo-mail team create --team nope");

    let out = worker(&home, &mock, None).args(["--lead", "boss"]).run();
    out.assert_code(2);
    out.assert_stderr_contains("the lead of team t is lead");
    assert!(mock.requests().is_empty());
}
