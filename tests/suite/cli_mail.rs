//! `roo-mail` through the built binary: sending (a broadcast that fails half-way and its
//! retry), reading, acknowledging, watching and the team roster.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use roo_tests::{TempHome, wait_until};

fn send(env: &TempHome, from: &str, to: &str, summary: &str, text: &str) -> String {
    let out = env
        .mail()
        .args([
            "send",
            "--team",
            "t",
            "--from",
            from,
            "--to",
            to,
            "--summary",
            summary,
            text,
        ])
        .run();
    out.assert_ok();
    out.stdout().trim().to_owned()
}

#[test]
fn help_has_examples_and_the_exit_code_table() {
    let env = TempHome::new();
    for bin in ["roo-mail", "roo-task"] {
        let out = env.cmd(bin).arg("--help").run();
        out.assert_ok()
            .assert_stdout_contains("Examples:")
            .assert_stdout_contains("Exit codes:")
            .assert_stdout_contains("1  operation refused");
    }
    env.mail()
        .args(["send", "--help"])
        .run()
        .assert_ok()
        .assert_stdout_contains("--type <TYPE>")
        .assert_stdout_contains("status_update");
    env.mail().arg("--bogus").run().assert_code(2);
}

/// Issue 33: ids were `msg-<ms>-<pid>-<counter>`, unique per host only: processes on two
/// hosts with the same pid (every container's first process is 1) in the same millisecond
/// made the same id, and the store took the second message for a resend. What is left of
/// two processes' ids without the clock and the pid must still differ.
#[test]
fn message_ids_differ_beyond_the_clock_and_the_pid() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    let rest = |id: &str| -> String {
        let parts: Vec<&str> = id.splitn(4, '-').collect();
        assert_eq!(parts[0], "msg", "{id}");
        parts[3].to_owned()
    };
    let a = send(&env, "lead", "alice", "one", "first");
    let b = send(&env, "lead", "alice", "two", "second");
    assert_ne!(rest(&a), rest(&b), "{a} / {b}");
}

#[test]
fn send_read_mark_read_and_json_shape() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob"]);
    let id = send(
        &env,
        "lead",
        "alice",
        "start on the parser",
        "Please take task 1.",
    );
    assert!(id.starts_with("msg-"), "{id}");
    let out = env
        .mail()
        .args([
            "read",
            "--team",
            "t",
            "--as",
            "alice",
            "--json",
            "--unread",
            "--mark-read",
        ])
        .run();
    out.assert_ok();
    let messages = out.json();
    let m = &messages.as_array().unwrap()[0];
    for key in [
        "id",
        "from",
        "to",
        "type",
        "text",
        "summary",
        "timestamp",
        "read",
    ] {
        assert!(m.get(key).is_some(), "{key} missing in {m}");
    }
    assert_eq!(m["id"], id.as_str());
    assert_eq!(m["from"], "lead");
    assert_eq!(m["type"], "text");
    assert_eq!(m["summary"], "start on the parser");
    let again = env
        .mail()
        .args(["read", "--team", "t", "--as", "alice", "--json", "--unread"])
        .run();
    assert_eq!(again.json(), serde_json::json!([]));
    env.mail()
        .args(["read", "--team", "t", "--as", "alice"])
        .run()
        .assert_ok()
        .assert_stdout_contains("lead -> alice [text]")
        .assert_stdout_contains("  Please take task 1.");
}

#[test]
fn environment_supplies_team_and_name_and_stdin_supplies_text() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    env.mail()
        .env("ROO_TEAM", "t")
        .env("ROO_AGENT_NAME", "alice")
        .args(["send", "--to", "lead", "--type", "status_update", "-"])
        .stdin("line one\nline two\n")
        .run()
        .assert_ok();
    let out = env
        .mail()
        .env("ROO_TEAM", "t")
        .env("ROO_AGENT_NAME", "lead")
        .args(["read", "--json"])
        .run();
    let m = &out.json()[0];
    assert_eq!(m["type"], "status_update");
    assert_eq!(m["text"], "line one\nline two\n");
    assert_eq!(m["from"], "alice");
    env.mail()
        .args(["send", "--to", "lead", "--summary", "x y", "hi"])
        .run()
        .assert_code(2)
        .assert_stderr_contains("--team TEAM or set ROO_TEAM");
}

#[test]
fn broadcast_typed_messages_and_protocol_rules() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob"]);
    let out = env
        .mail()
        .args([
            "send",
            "--team",
            "t",
            "--from",
            "alice",
            "--to",
            "*",
            "--type",
            "status_update",
        ])
        .args(["module 1 is done", "--json"])
        .run();
    out.assert_ok();
    assert_eq!(out.json().as_array().unwrap().len(), 2);
    env.mail()
        .args(["send", "--team", "t", "--from", "lead", "--to", "bob"])
        .args(["--type", "task_assignment", "take it"])
        .run()
        .assert_code(2)
        .assert_stderr_contains("needs --task-id");
    env.mail()
        .args(["send", "--team", "t", "--from", "alice", "--to", "bob"])
        .args([
            "--type",
            "plan_approval_response",
            "--request-id",
            "r1",
            "--approve",
        ])
        .run()
        .assert_code(1)
        .assert_stderr_contains("only the team's lead");
    env.mail()
        .args(["send", "--team", "t", "--from", "bob", "--to", "lead"])
        .args([
            "--type",
            "permission_request",
            "--request-id",
            "p1",
            "--tool",
            "Bash",
        ])
        .args(["--input", "{\"command\": \"rm -rf build\"}"])
        .run()
        .assert_ok();
    let read = env
        .mail()
        .args(["read", "--team", "t", "--as", "lead", "--json"])
        .run();
    let last = read.json().as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["type"], "permission_request");
    assert_eq!(last["tool"], "Bash");
    assert_eq!(last["input"]["command"], "rm -rf build");
    env.mail()
        .args([
            "send",
            "--team",
            "t",
            "--from",
            "lead",
            "--to",
            "nobody",
            "--summary",
            "x y",
            "hi",
        ])
        .run()
        .assert_code(2)
        .assert_stderr_contains("no member has that name");
}

#[test]
fn list_status_and_ack() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    let id = send(&env, "lead", "alice", "a message to track", "track me");
    let list = env.mail().args(["list", "--team", "t", "--json"]).run();
    let rows = list.json();
    let alice = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "alice")
        .unwrap()
        .clone();
    assert_eq!(alice["unread"], 1);
    let status = |env: &TempHome| {
        env.mail()
            .args(["status", "--team", "t", "--json", &id])
            .run()
            .json()
    };
    assert_eq!(status(&env)["state"], "unread");
    env.mail()
        .args(["ack", "--team", "t", "--as", "alice", &id])
        .run()
        .assert_ok();
    let s = status(&env);
    assert_eq!(s["state"], "acknowledged");
    assert!(s["acknowledged_at"].is_string());
    env.mail()
        .args(["status", "--team", "t", "msg-0-0-0"])
        .run()
        .assert_code(2);
}

#[test]
fn watch_prints_messages_as_they_arrive() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    send(&env, "lead", "alice", "sent before watching", "old");
    let mut watch = env
        .mail()
        .args([
            "watch", "--team", "t", "--as", "alice", "--json", "--count", "2",
        ])
        .args(["--timeout", "60"])
        .spawn();
    // The watcher announces on stderr once it is subscribed and has looked at the inbox.
    let stderr = watch.child().stderr.take().unwrap();
    let mut stderr = BufReader::new(stderr).lines();
    let ready = stderr.next().unwrap().unwrap();
    assert!(ready.contains("watching the inbox of alice"), "{ready}");
    send(&env, "lead", "alice", "first live message", "new 1");
    send(&env, "lead", "alice", "second live message", "new 2");
    let stdout = watch.child().stdout.take().unwrap();
    let lines: Vec<serde_json::Value> = BufReader::new(stdout)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let out = watch.wait();
    out.assert_ok();
    let texts: Vec<&str> = lines.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["new 1", "new 2"]);
}

#[test]
fn watch_existing_mark_read_marks_delivered() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    let id = send(&env, "lead", "alice", "waiting in the inbox", "hello");
    env.mail()
        .args([
            "watch",
            "--team",
            "t",
            "--as",
            "alice",
            "--existing",
            "--mark-read",
        ])
        .args(["--count", "1", "--timeout", "30"])
        .run()
        .assert_ok()
        .assert_stdout_contains("hello");
    let state = wait_until(
        "the delivery receipt",
        Duration::from_secs(10),
        || {
            let s = env
                .mail()
                .args(["status", "--team", "t", "--json", &id])
                .run()
                .json();
            (s["state"] == "delivered").then_some(s)
        },
        || "not delivered".into(),
    );
    assert!(state["delivered_at"].is_string());
}

/// Issue 18: a team named `x.lock` was accepted, and every spawn in a repository then
/// failed (its branches would be `roo/x.lock/<name>`).
#[test]
fn a_team_name_git_cannot_use_in_a_branch_is_refused_and_nothing_is_written() {
    let env = TempHome::new();
    let out = env
        .mail()
        .args(["team", "create", "--team", "x.lock", "--lead", "lead"])
        .run();
    assert_ne!(out.code(), 0);
    out.assert_stderr_contains("ends in `.lock`");
    assert!(!env.path().join("teams/x.lock").exists());
    assert!(!env.path().join("tasks/x.lock").exists());
}

#[test]
fn team_setup_without_the_lead() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    env.mail()
        .args(["team", "create", "--team", "t", "--lead", "x"])
        .run()
        .assert_code(1)
        .assert_stderr_contains("already exists");
    env.mail()
        .args([
            "team",
            "add",
            "--team",
            "t",
            "carol",
            "--agent-type",
            "Explore",
        ])
        .run()
        .assert_ok();
    let show = env
        .mail()
        .args(["team", "show", "--team", "t", "--json"])
        .run();
    let config = show.json();
    assert_eq!(config["version"], "1.0");
    assert_eq!(config["lead_agent_id"], "lead@t");
    let names: Vec<&str> = config["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lead", "alice", "carol"]);
    // Alice joins (a script plays her): a busy member holds the delete up; carol, whom
    // no process ever joined, does not (issue 31: `not started`).
    env.mail()
        .args(["team", "join", "--team", "t", "alice"])
        .run()
        .assert_ok();
    let refused = env.mail().args(["team", "delete", "--team", "t"]).run();
    refused
        .assert_code(1)
        .assert_stderr_contains("still active");
    assert!(
        refused.stderr().contains("alice") && !refused.stderr().contains("carol"),
        "{}",
        refused.stderr()
    );
    env.mail()
        .args(["team", "delete", "--team", "t", "--force"])
        .run()
        .assert_ok();
    assert!(!env.home.join("teams/t").exists());
    assert!(!env.home.join("tasks/t").exists());
}

#[test]
fn no_colour_without_a_terminal_and_broken_pipe_is_not_an_error() {
    use std::io::Read;
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    // More output than a pipe buffer holds, so the writer must hit the closed pipe.
    let long = "x".repeat(4000);
    for _ in 0..40 {
        send(&env, "lead", "alice", "filling the inbox", &long);
    }
    let out = env
        .mail()
        .args(["read", "--team", "t", "--as", "alice"])
        .run();
    assert!(!out.stdout().contains('\x1b'), "escape codes without a TTY");
    // Like `roo-mail read | head -c 100`: the reader goes away early.
    let mut reader = env
        .mail()
        .args(["read", "--team", "t", "--as", "alice"])
        .spawn();
    let mut first = [0u8; 100];
    reader
        .child()
        .stdout
        .take()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    let out = reader.wait();
    out.assert_ok();
    assert_eq!(out.stderr(), "", "a closed pipe is not an error");
}

#[test]
fn deeply_nested_input_does_not_corrupt_the_leads_inbox() {
    let env = TempHome::new();
    env.team("t", "lead", &["bob"]);
    send(&env, "bob", "lead", "first one", "keep me");
    let deep = format!("{}{}", "[".repeat(127), "]".repeat(127));
    env.mail()
        .args(["send", "--team", "t", "--from", "bob", "--to", "lead"])
        .args(["--type", "permission_request", "--request-id", "p1"])
        .args(["--tool", "Bash", "--input", &deep])
        .run()
        .assert_code(2)
        .assert_stderr_contains("the limit is 32");
    let read = env
        .mail()
        .args(["read", "--team", "t", "--as", "lead", "--json"])
        .run();
    read.assert_ok();
    assert_eq!(read.json()[0]["text"], "keep me");
    let files = env.home.files();
    assert!(files.iter().all(|f| !f.contains(".corrupt-")), "{files:?}");
}

#[test]
fn oversized_message_text_is_refused_with_the_limit() {
    let env = TempHome::new();
    env.team("t", "lead", &["bob"]);
    let big = "x".repeat(64 * 1024 + 1);
    env.mail()
        .args(["send", "--team", "t", "--from", "bob", "--to", "lead"])
        .args(["--summary", "too big", &big])
        .run()
        .assert_code(2)
        .assert_stderr_contains("the limit is 65536 bytes");
    let plan = "p".repeat(64 * 1024 + 1);
    env.mail()
        .args(["send", "--team", "t", "--from", "bob", "--to", "lead"])
        .args(["--type", "plan_approval_request", "--request-id", "r1"])
        .args(["--plan", &plan])
        .run()
        .assert_code(2)
        .assert_stderr_contains("the limit is 65536 bytes");
}

/// `roo-mail send -` reads stdin only up to the limit: a huge (here: endless) input is
/// refused as soon as it passes 64 KiB, not read whole first.
#[test]
fn text_on_stdin_past_the_limit_is_refused_without_reading_the_rest() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let env = TempHome::new();
    env.team("t", "lead", &["bob"]);
    let mut child = Command::new(roo_tests::bin("roo-mail"))
        .env("ROO_HOME", env.path())
        .args(["send", "--team", "t", "--from", "bob", "--to", "lead"])
        .args(["--summary", "endless", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Written until the reader goes away; 256 MiB at most, which the old reader took
    // whole before it looked at the length.
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 64 * 1024];
        let mut written = 0usize;
        while written < 256 * 1024 * 1024 {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
            written += chunk.len();
        }
        written
    });
    let out = child.wait_with_output().unwrap();
    let written = writer.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the limit is 65536 bytes"), "{stderr}");
    assert!(
        written < 8 * 1024 * 1024,
        "stdin was read on: {written} bytes"
    );
    let read = env
        .mail()
        .args(["read", "--team", "t", "--as", "lead", "--json"])
        .run();
    assert_eq!(read.json(), serde_json::json!([]), "nothing was sent");
}

/// A child process killed when the test ends, passed or not.
struct Listener(std::process::Child);

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A stand-in for a pane worker: appends a line to `marker` whenever SIGURG arrives.
fn wake_listener(env: &TempHome, name: &str) -> (Listener, std::path::PathBuf) {
    let marker = env.home.join(format!("{name}-woken"));
    let ready = env.home.join(format!("{name}-ready"));
    let child = std::process::Command::new("bash")
        .args([
            "-c",
            &format!(
                "trap 'echo woken >> \"{}\"' URG; touch \"{}\"; while :; do sleep 0.02; done",
                marker.display(),
                ready.display()
            ),
        ])
        .spawn()
        .unwrap();
    let child = Listener(child);
    wait_until(
        "the listener to trap SIGURG",
        Duration::from_secs(10),
        || ready.exists().then_some(()),
        || format!("{name} not ready"),
    );
    (child, marker)
}

fn wakes(marker: &std::path::Path) -> usize {
    std::fs::read_to_string(marker)
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn send_wakes_recipients_running_in_panes_and_only_them() {
    // A pane worker is woken with SIGURG right after its inbox is written, whoever
    // writes it: here a person with `roo-mail send`. An in-process member is not
    // signalled (its pid is the lead's process), nor the sender itself.
    use roo_store::{BackendType, Member, Name, RooHome, Team};
    let env = TempHome::new();
    let (bob, bob_marker) = wake_listener(&env, "bob");
    let (carol, carol_marker) = wake_listener(&env, "carol");
    let t = Name::parse("t").unwrap();
    let member = |name: &str, backend: BackendType, pid: u32| {
        let mut m = Member::new(Name::parse(name).unwrap(), &t);
        m.backend_type = Some(backend);
        m.pid = Some(pid);
        m
    };
    Team::create(
        &RooHome::new(env.path()),
        t.clone(),
        "",
        Member::new(Name::parse("lead").unwrap(), &t),
        vec![
            member("bob", BackendType::Tmux, bob.0.id()),
            member("carol", BackendType::InProcess, carol.0.id()),
        ],
    )
    .unwrap();
    send(&env, "lead", "bob", "one", "for bob");
    wait_until(
        "bob's wake",
        Duration::from_secs(10),
        || (wakes(&bob_marker) == 1).then_some(()),
        || format!("{} wakes", wakes(&bob_marker)),
    );
    send(&env, "lead", "*", "all", "for everyone");
    wait_until(
        "bob's second wake",
        Duration::from_secs(10),
        || (wakes(&bob_marker) == 2).then_some(()),
        || format!("{} wakes", wakes(&bob_marker)),
    );
    send(&env, "lead", "carol", "two", "for carol");
    // Anything for carol would have been sent before bob's second wake was.
    send(&env, "carol", "bob", "three", "from carol");
    wait_until(
        "bob's third wake",
        Duration::from_secs(10),
        || (wakes(&bob_marker) == 3).then_some(()),
        || format!("{} wakes", wakes(&bob_marker)),
    );
    assert_eq!(
        wakes(&carol_marker),
        0,
        "an in-process member was signalled"
    );
}

/// Inside an agent's command (the relayed CLI), `status` shows a member only its own
/// messages: a peer's question, with its request id, is not for it to read.
#[test]
fn a_relayed_status_shows_only_the_members_own_messages() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob"]);
    let to_bob = send(&env, "lead", "bob", "bob's task", "Bob, take task 2.");
    let to_alice = send(&env, "lead", "alice", "alice's task", "Alice, take task 1.");
    let relayed = |as_member: &str, id: &str| {
        env.mail()
            .env(
                roo_store::relay::ENV_RELAYED_BY,
                std::process::id().to_string(),
            )
            .env("ROO_TEAM", "t")
            .env("ROO_AGENT_NAME", as_member)
            .args(["status", id, "--json"])
            .run()
    };
    let out = relayed("alice", &to_bob);
    out.assert_code(1);
    assert!(
        out.stderr()
            .contains("an agent's command reads only its own messages"),
        "{}",
        out.stderr()
    );
    assert!(
        !out.stdout().contains("Bob, take task 2."),
        "{}",
        out.stdout()
    );
    relayed("alice", &to_alice).assert_ok();
    // The sender may follow what it sent; a person's shell (not relayed) sees all.
    relayed("lead", &to_bob).assert_ok();
    env.mail()
        .args(["status", &to_bob, "--team", "t", "--json"])
        .run()
        .assert_ok();
}

/// How many messages `name` of team `t` has, read and unread.
fn inbox_len(env: &TempHome, name: &str) -> usize {
    let out = env
        .mail()
        .args(["read", "--team", "t", "--as", name, "--archived", "--json"])
        .run();
    out.assert_ok();
    out.json().as_array().map_or(0, Vec::len)
}

#[test]
fn broadcast_failing_half_way_reports_who_got_it_and_retry_does_not_duplicate() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob", "carol"]);
    // bob's inbox cannot be written: a directory where the file should be (permission
    // bits would not stop root).
    let bob_inbox = env.path().join("teams/t/inboxes/bob.json");
    std::fs::create_dir_all(&bob_inbox).unwrap();
    let broadcast = |extra: &[&str]| {
        env.mail()
            .args([
                "send",
                "--team",
                "t",
                "--from",
                "lead",
                "--to",
                "*",
                "--type",
                "status_update",
                "--json",
            ])
            .args(extra)
            .arg("module 1 refactored")
            .run()
    };
    let out = broadcast(&[]);
    out.assert_code(3);
    let report = out.json();
    let names = |key: &str| -> Vec<String> {
        report[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["to"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names("delivered"), ["alice", "carol"], "{report}");
    assert_eq!(names("failed"), ["bob"], "{report}");
    let key = report["key"].as_str().unwrap().to_owned();
    assert!(report["retry"].as_str().unwrap().contains(&key), "{report}");
    // The human form says the same on stderr.
    std::fs::remove_dir(&bob_inbox).unwrap();
    std::fs::create_dir_all(&bob_inbox).unwrap();
    let human = env
        .mail()
        .args(["send", "--team", "t", "--from", "lead", "--to", "*"])
        .args(["--type", "status_update", "--id", "human-try", "again"])
        .run();
    human
        .assert_code(3)
        .assert_stderr_contains("delivered to 2 of 3: alice, carol")
        .assert_stderr_contains("not delivered to bob")
        .assert_stderr_contains("--id human-try");
    // Repaired, the retry with the key delivers to bob only.
    std::fs::remove_dir(&bob_inbox).unwrap();
    let retry = broadcast(&["--id", &key]);
    retry.assert_ok();
    let sent = retry.json();
    assert_eq!(sent.as_array().unwrap().len(), 1, "{sent}");
    assert_eq!(sent[0]["id"], format!("{key}:bob"));
    assert_eq!(inbox_len(&env, "alice"), 2, "alice got a duplicate");
    assert_eq!(inbox_len(&env, "carol"), 2, "carol got a duplicate");
    assert_eq!(inbox_len(&env, "bob"), 1);
    // Retrying once more delivers nothing new.
    broadcast(&["--id", &key]).assert_ok();
    assert_eq!(inbox_len(&env, "bob"), 1, "bob got a duplicate");
}

#[test]
fn ack_with_a_duplicate_id_exits_0_and_an_unknown_id_exits_2() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    let out = env
        .mail()
        .args(["send", "--team", "t", "--from", "lead", "--to", "alice"])
        .args(["--summary", "track", "track me"])
        .run();
    out.assert_ok();
    let id = out.stdout().trim().to_owned();
    env.mail()
        .args(["ack", "--team", "t", "--as", "alice", &id, &id])
        .run()
        .assert_ok()
        .assert_stdout_contains("acknowledged 1");
    // Issue 19: the error names the unknown ids and says what was acknowledged anyway.
    let ack = |ids: &[&str]| {
        let out = env
            .mail()
            .args(["ack", "--team", "t", "--as", "alice"])
            .args(ids)
            .run();
        out.assert_code(2);
        out.stderr()
    };
    assert_eq!(
        ack(&[&id, "msg-0-0-0"]),
        "roo-mail: failed to acknowledge message msg-0-0-0: it is not in alice's inbox or \
         archive; the other one is acknowledged\n"
    );
    assert_eq!(
        ack(&["x", &id, "y", "x"]),
        "roo-mail: failed to acknowledge 2 messages (x, y): they are not in alice's inbox or \
         archive; the other one is acknowledged\n"
    );
    assert_eq!(
        ack(&["x"]),
        "roo-mail: failed to acknowledge message x: it is not in alice's inbox or archive; \
         no message was acknowledged\n"
    );
}

#[test]
fn watch_timeout_inf_nan_negative_or_huge_is_a_usage_error_not_a_panic() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    for bad in ["inf", "NaN", "-1", "1e300"] {
        env.mail()
            .args(["watch", "--team", "t", "--as", "alice"])
            .arg(format!("--timeout={bad}"))
            .run()
            .assert_code(2)
            .assert_stderr_contains("--timeout");
    }
    env.mail()
        .args(["watch", "--team", "t", "--as", "alice", "--timeout", "0.1"])
        .run()
        .assert_ok();
}

#[test]
fn member_names_differing_only_in_case_are_refused() {
    let env = TempHome::new();
    env.mail()
        .args(["team", "create", "--team", "t", "--lead", "lead"])
        .args(["--member", "alice", "--member", "Alice"])
        .run()
        .assert_code(1);
    env.mail()
        .args([
            "team", "create", "--team", "t", "--lead", "lead", "--member", "LEAD",
        ])
        .run()
        .assert_code(1);
    env.team("t", "lead", &["alice"]);
    env.mail()
        .args(["team", "add", "--team", "t", "ALICE"])
        .run()
        .assert_code(1);
    assert!(!env.path().join("teams/t/inboxes/ALICE.json").exists());
}

/// Issue 33 (connection budget): what the command line alone decides is checked before
/// the store is opened, so a refused command takes no database session. The store here is
/// a PostgreSQL URL whose port refuses connections: a command that connected first would
/// wait for the server (10 s) and fail with exit 3; these fail with exit 2 at once.
#[test]
fn a_command_refused_for_its_flags_opens_no_store_session() {
    let env = TempHome::new();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("postgresql://roo@127.0.0.1:{port}/roo?sslmode=disable");
    // A text message without its summary.
    env.mail()
        .env("ROO_STORE", &url)
        .args([
            "send", "--team", "t", "--from", "lead", "--to", "alice", "hi",
        ])
        .run()
        .assert_code(2)
        .assert_stderr_contains("summary");
    // No member to read as.
    env.mail()
        .env("ROO_STORE", &url)
        .env_remove("ROO_AGENT_NAME")
        .args(["read", "--team", "t"])
        .run()
        .assert_code(2);
}
