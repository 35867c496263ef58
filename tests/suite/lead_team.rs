//! The lead's side of a team in a `roo-lead -p` run: it stays while teammates are busy,
//! takes their messages as new turns and ends when they are idle; the team timeout; the
//! stream-json teammate events; `--teammate-mode`; `--coordinator`. The teammate is
//! played by the test with `roo-mail` and the team config (no model behind it).

use std::path::PathBuf;
use std::time::Duration;

use roo_store::{Name, RooHome, Team};
use roo_tests::{MockLlm, TempHome, wait_until};
use serde_json::Value;

const TEAM: &str = "crew";

/// Team `crew` led by `lead`, with `alice` busy: joined by the test, which plays her (a
/// roster entry no process joined is `not started`, and nobody waits for it).
fn crew(home: &TempHome) {
    home.mail()
        .args([
            "team", "create", "--team", TEAM, "--lead", "lead", "--member", "alice",
        ])
        .run()
        .assert_ok();
    home.mail()
        .args(["team", "join", "--team", TEAM, "alice"])
        .run()
        .assert_ok();
}

fn team(home: &TempHome) -> Team {
    Team::open(
        &RooHome::new(home.path()),
        Name::parse_as("team", TEAM).unwrap(),
    )
    .unwrap()
}

/// The assistant messages in the lead's session transcripts so far.
fn lead_answers(home: &TempHome) -> usize {
    let projects = home.path().join("projects");
    let Ok(dirs) = std::fs::read_dir(&projects) else {
        return 0;
    };
    let mut count = 0;
    for dir in dirs.flatten() {
        for file in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let path: PathBuf = file.path();
            if path.extension().is_some_and(|x| x == "jsonl") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                count += text
                    .lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .filter(|r| r["type"] == "message" && r["message"]["role"] == "assistant")
                    .count();
            }
        }
    }
    count
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad json line {l}: {e}")))
        .collect()
}

const SCRIPT: &str = r#"
agents:
  lead:
    - text: "Alice is on it; I wait for her report."
    - when: {last_user_contains: "parser is done"}
      text: "Alice finished the parser. All done."
"#;

#[test]
fn a_headless_lead_waits_for_a_busy_teammate_takes_its_message_and_ends_when_it_is_idle() {
    let home = TempHome::new();
    crew(&home);
    let script = home.home.write("script.yaml", SCRIPT);
    let lead = home
        .cmd("roo-lead")
        .args(["-p", "Build the parser with alice.", "--team", TEAM])
        .args(["--provider", "script", "--script"])
        .arg(&script)
        .args(["--output-format", "stream-json"])
        .spawn();
    wait_until(
        "the lead's first turn",
        Duration::from_secs(20),
        || (lead_answers(&home) >= 1).then_some(()),
        || format!("{} answers", lead_answers(&home)),
    );
    // Alice is busy: the lead must still be there to take her message.
    home.mail()
        .args(["send", "--team", TEAM, "--as", "alice", "--to", "lead"])
        .args(["--summary", "parser done", "the parser is done, tests pass"])
        .run()
        .assert_ok();
    wait_until(
        "the lead's turn on alice's message",
        Duration::from_secs(20),
        || (lead_answers(&home) >= 2).then_some(()),
        || format!("{} answers", lead_answers(&home)),
    );
    // bob joins and dies while alice works: spawned and dead lines; dead is gone, not busy.
    home.mail()
        .args(["team", "add", "--team", TEAM, "bob"])
        .run()
        .assert_ok();
    home.mail()
        .args([
            "team",
            "mark-dead",
            "--team",
            TEAM,
            "bob",
            "--reason",
            "killed by the test",
        ])
        .run()
        .assert_ok();
    team(&home).set_active("alice", false).unwrap();
    let out = lead.wait();
    out.assert_ok();
    let lines = json_lines(&out.stdout());
    let position = |pred: &dyn Fn(&Value) -> bool| lines.iter().position(pred);
    let message = position(&|l| {
        l["type"] == "teammate_message" && l["from"] == "alice" && l["preview"] == "parser done"
    })
    .unwrap_or_else(|| panic!("a teammate_message line: {lines:#?}"));
    let idle = position(&|l| l["type"] == "teammate_idle" && l["name"] == "alice")
        .unwrap_or_else(|| panic!("a teammate_idle line: {lines:#?}"));
    assert!(
        position(&|l| l["type"] == "teammate_busy" && l["name"] == "alice").is_some(),
        "{lines:#?}"
    );
    assert!(
        position(&|l| l["type"] == "teammate_spawned" && l["name"] == "bob").is_some(),
        "{lines:#?}"
    );
    assert!(
        position(&|l| l["type"] == "teammate_dead" && l["name"] == "bob").is_some(),
        "{lines:#?}"
    );
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result");
    assert!(message < idle && idle < lines.len() - 1, "{lines:#?}");
    assert_eq!(result["result"], "Alice finished the parser. All done.");
    assert_eq!(result["team"]["lead_runs"], 2);
    // The message was delivered into the lead's context, not just read.
    let inbox = home
        .mail()
        .args(["read", "--team", TEAM, "--as", "lead", "--json"])
        .run();
    let delivered = inbox.json();
    assert!(
        delivered
            .as_array()
            .unwrap()
            .iter()
            .all(|m| !m["delivered_at"].is_null()),
        "{delivered:#}"
    );
}

/// Issue 19: stream-json's last teammate state could be stale. Team events reach the
/// printer through a bounded channel that drops what it has no room for, and the lead's
/// catch-up before exiting only waited for the monitor to *see* the final states. A team
/// of 300 teammates reports more states at once than the channel holds; still, each
/// teammate's last `teammate_*` state line is the state its config holds at the end.
#[test]
fn stream_json_ends_each_teammates_lines_on_its_state_in_the_config() {
    let home = TempHome::new();
    let names: Vec<String> = (1..=300).map(|n| format!("mate{n:03}")).collect();
    let mut create = home
        .mail()
        .args(["team", "create", "--team", TEAM, "--lead", "lead"]);
    for name in &names {
        create = create.args(["--member", name]);
    }
    create.run().assert_ok();
    let team = team(&home);
    for (i, name) in names.iter().enumerate() {
        if i % 60 == 59 {
            team.mark_dead(name, "killed by the test").unwrap();
        } else {
            team.set_active(name, false).unwrap();
        }
    }
    let script = home.home.write(
        "script.yaml",
        "agents:\n  lead:\n    - text: \"The team is idle.\"\n",
    );
    let out = home
        .cmd("roo-lead")
        .args(["-p", "Check on the team.", "--team", TEAM])
        .args(["--provider", "script", "--script"])
        .arg(&script)
        .args(["--output-format", "stream-json"])
        .run();
    out.assert_ok();
    let lines = json_lines(&out.stdout());
    let config = team.config().unwrap();
    let teammates: Vec<_> = config
        .members
        .iter()
        .filter(|m| !config.is_lead(m.name.as_str()))
        .collect();
    assert_eq!(teammates.len(), 300);
    for member in teammates {
        let last = lines
            .iter()
            .rev()
            .find(|l| {
                l["name"] == member.name.as_str()
                    && l["type"].as_str().is_some_and(|t| {
                        ["teammate_busy", "teammate_idle", "teammate_dead"].contains(&t)
                    })
            })
            .and_then(|l| l["type"].as_str());
        let expected = format!("teammate_{}", member.observed_state().as_str());
        assert_eq!(
            last,
            Some(expected.as_str()),
            "{}'s last state line (stdout has {} lines)",
            member.name,
            lines.len()
        );
    }
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result");
}

#[test]
fn a_headless_lead_whose_teammate_never_goes_idle_stops_at_the_team_timeout() {
    let home = TempHome::new();
    crew(&home);
    let script = home.home.write(
        "script.yaml",
        "agents:\n  lead:\n    - text: \"Waiting for alice.\"\n",
    );
    let out = home
        .cmd("roo-lead")
        .args([
            "-p",
            "Work with alice.",
            "--team",
            TEAM,
            "--team-timeout",
            "1",
        ])
        .args(["--provider", "script", "--script"])
        .arg(&script)
        .run();
    out.assert_code(1);
    out.assert_stderr_contains(
        "teammates still busy after the team timeout of 1 s (--team-timeout): alice",
    );
    out.assert_stdout_contains("Waiting for alice.");
}

#[test]
fn a_lead_without_a_team_ends_with_its_turn_as_before() {
    let home = TempHome::new();
    let script = home.home.write(
        "script.yaml",
        "agents:\n  lead:\n    - text: \"Solo answer.\"\n",
    );
    home.cmd("roo-lead")
        .args(["-p", "hi", "--provider", "script", "--script"])
        .arg(&script)
        .run()
        .assert_ok()
        .assert_stdout("Solo answer.\n");
}

#[test]
fn an_unknown_team_is_a_usage_error() {
    let home = TempHome::new();
    let script = home.home.write("script.yaml", "- text: x\n");
    let out = home
        .cmd("roo-lead")
        .args([
            "-p",
            "hi",
            "--team",
            "nosuch",
            "--provider",
            "script",
            "--script",
        ])
        .arg(&script)
        .run();
    out.assert_code(2);
    out.assert_stderr_contains("nosuch");
}

#[test]
fn a_forced_teammate_mode_that_cannot_work_is_a_usage_error_not_a_silent_fallback() {
    let home = TempHome::new();
    let script = home.home.write("script.yaml", "- text: x\n");
    // No tmux and no it2 on PATH; not inside iTerm2.
    let empty_path = home.home.join("empty-bin");
    std::fs::create_dir_all(&empty_path).unwrap();
    for (how, mode, expected) in [
        (
            "flag",
            "tmux",
            "--teammate-mode tmux needs tmux, which is not on PATH",
        ),
        (
            "env",
            "iterm2",
            "--teammate-mode iterm2 needs to run inside iTerm2",
        ),
    ] {
        let mut cmd = home
            .cmd("roo-lead")
            .args(["-p", "hi", "--provider", "script", "--script"])
            .arg(&script)
            .env("PATH", &empty_path);
        cmd = if how == "flag" {
            cmd.args(["--teammate-mode", mode])
        } else {
            cmd.env("ROO_TEAMMATE_MODE", mode)
        };
        let out = cmd.run();
        out.assert_code(2);
        out.assert_stderr_contains(&format!("roo-lead: teammates: {expected}"));
    }
    home.cmd("roo-lead")
        .args(["-p", "hi", "--provider", "script", "--script"])
        .arg(&script)
        .env("ROO_TEAMMATE_MODE", "in-process")
        .run()
        .assert_ok();
}

#[test]
fn coordinator_mode_sends_the_model_no_code_tools() {
    let home = TempHome::new();
    let tool_names = |coordinator: bool| -> Vec<String> {
        let mock = MockLlm::start("agents:\n  \"*\":\n    - text: \"ok\"\n");
        let mut cmd = home
            .cmd("roo-lead")
            .env("ANTHROPIC_API_KEY", "test-key")
            .args([
                "-p",
                "hi",
                "--provider",
                "anthropic",
                "--model",
                "claude-sonnet-4-5",
            ])
            .args(["--base-url", &mock.base_url("anthropic")]);
        if coordinator {
            cmd = cmd.arg("--coordinator");
        }
        cmd.run().assert_ok();
        let requests = mock.requests();
        requests[0].body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .map(|t| t["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let normal = tool_names(false);
    assert!(normal.iter().any(|t| t == "Bash"), "{normal:?}");
    let coordinator = tool_names(true);
    for code_tool in [
        "ReadFile",
        "WriteFile",
        "EditFile",
        "Bash",
        "Glob",
        "Grep",
        "EnterPlanMode",
        "ExitPlanMode",
    ] {
        assert!(
            !coordinator.iter().any(|t| t == code_tool),
            "{code_tool} in {coordinator:?}"
        );
    }
    // It keeps what a coordinator needs before its team exists: creating it, spawning,
    // stopping (the rest come with the team, see below).
    for team_tool in ["TeamCreate", "Agent", "TaskStop"] {
        assert!(
            coordinator.iter().any(|t| t == team_tool) && normal.iter().any(|t| t == team_tool),
            "{team_tool} missing: {coordinator:?}"
        );
    }
}

/// The lead's team tools but TeamCreate that a session in no team never uses.
const WAITING_FOR_A_TEAM: [&str; 7] = [
    "TaskCreate",
    "TaskGet",
    "TaskList",
    "TaskUpdate",
    "SendMessage",
    "TeamMerge",
    "TeamDelete",
];

/// The tool names of each request the mock saw.
fn tools_per_request(mock: &MockLlm) -> Vec<Vec<String>> {
    mock.requests()
        .iter()
        .map(|r| {
            r.body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

fn anthropic_lead(home: &TempHome, mock: &MockLlm) -> roo_tests::TestCommand {
    home.cmd("roo-lead")
        .env("ANTHROPIC_API_KEY", "test-key")
        .args(["--provider", "anthropic", "--model", "claude-sonnet-4-5"])
        .args(["--base-url", &mock.base_url("anthropic")])
}

#[test]
fn a_lead_sends_its_team_tools_only_once_it_has_a_team() {
    let home = TempHome::new();
    // Before the team: the model calls a deferred tool by name (it is loaded and the
    // model told to call again), then creates the team; the request after TeamCreate's
    // result carries every team tool.
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - tool_calls:
        - {name: SendMessage, input: {to: alice, message: "hi"}}
    - tool_calls:
        - {name: TeamCreate, input: {team_name: frugal}}
    - text: "ok"
"#,
    );
    anthropic_lead(&home, &mock)
        .args(["-p", "form a team", "--team-timeout", "20"])
        .run()
        .assert_ok();
    let tools = tools_per_request(&mock);
    assert_eq!(tools.len(), 3, "{tools:?}");
    assert!(tools[0].iter().any(|t| t == "TeamCreate"), "{:?}", tools[0]);
    for name in WAITING_FOR_A_TEAM {
        assert!(
            !tools[0].iter().any(|t| t == name),
            "{name} in the first request"
        );
    }
    let result = &mock.requests()[1].body["messages"];
    assert!(
        result
            .to_string()
            .contains("The schema of SendMessage had not been loaded"),
        "a deferred tool called by name is loaded, and the model told: {result}"
    );
    assert!(
        tools[1].iter().any(|t| t == "SendMessage"),
        "{:?}",
        tools[1]
    );
    assert!(
        !tools[1].iter().any(|t| t == "TaskCreate"),
        "{:?}",
        tools[1]
    );
    for name in WAITING_FOR_A_TEAM {
        assert!(
            tools[2].iter().any(|t| t == name),
            "{name} after TeamCreate"
        );
    }
    // Revealed tools go after those sent before, which stay a prefix of the list: the
    // prompt cache of the tools sent before still holds.
    for pair in tools.windows(2) {
        assert_eq!(pair[1][..pair[0].len()], pair[0][..], "{tools:?}");
    }
    home.mail()
        .args(["team", "delete", "--team", "frugal", "--force"])
        .run()
        .assert_ok();

    // A lead started on an existing team has them from its first request.
    home.team("crew", "lead", &[]);
    let mock = MockLlm::start("agents:\n  \"*\":\n    - text: \"ok\"\n");
    anthropic_lead(&home, &mock)
        .args(["-p", "hi", "--team", "crew", "--team-timeout", "20"])
        .run()
        .assert_ok();
    let tools = tools_per_request(&mock);
    for name in WAITING_FOR_A_TEAM {
        assert!(tools[0].iter().any(|t| t == name), "{name} with --team");
    }
}

/// alice's inbox, as JSON messages.
fn inbox(home: &TempHome, member: &str) -> Vec<Value> {
    home.mail()
        .args(["read", "--team", TEAM, "--as", member, "--json"])
        .run()
        .json()
        .as_array()
        .unwrap()
        .clone()
}

fn answer<'a>(messages: &'a [Value], request_id: &str) -> Option<&'a Value> {
    messages.iter().find(|m| m["request_id"] == request_id)
}

#[test]
fn a_headless_lead_answers_teammates_requests_by_its_own_policy_and_never_leaves_them_waiting() {
    let home = TempHome::new();
    crew(&home);
    let script = home.home.write(
        "script.yaml",
        "agents:\n  lead:\n    - text: \"Waiting for alice.\"\n",
    );
    let lead = home
        .cmd("roo-lead")
        .args(["-p", "Work with alice.", "--team", TEAM])
        .args(["--provider", "script", "--script"])
        .arg(&script)
        .spawn();
    let ask = |id: &str, args: &[&str]| {
        home.mail()
            .args([
                "send",
                "--team",
                TEAM,
                "--as",
                "alice",
                "--to",
                "lead",
                "--request-id",
                id,
            ])
            .args(args)
            .run()
            .assert_ok();
        // A teammate asks one question at a time: a newer one withdraws the one still
        // being decided (lead::answer_requests), so alice waits for each answer.
        wait_until(
            &format!("the lead's answer to {id}"),
            Duration::from_secs(20),
            || answer(&inbox(&home, "alice"), id).map(|_| ()),
            || format!("{:#?}", inbox(&home, "alice")),
        );
    };
    // A read inside the project: the lead's default mode runs reads without asking.
    ask(
        "req-read",
        &[
            "--type",
            "permission_request",
            "--tool",
            "ReadFile",
            "--input",
            r#"{"path": "notes.txt"}"#,
        ],
    );
    // A command: the lead would have to ask, and nobody is there.
    ask(
        "req-bash",
        &[
            "--type",
            "permission_request",
            "--tool",
            "Bash",
            "--input",
            r#"{"command": "touch x"}"#,
        ],
    );
    ask(
        "req-plan",
        &[
            "--type",
            "plan_approval_request",
            "--plan",
            "1. edit the parser",
        ],
    );
    let answers = wait_until(
        "the lead's answers in alice's inbox",
        Duration::from_secs(20),
        || {
            let messages = inbox(&home, "alice");
            ["req-read", "req-bash", "req-plan"]
                .iter()
                .all(|id| answer(&messages, id).is_some())
                .then_some(messages)
        },
        || format!("{:#?}", inbox(&home, "alice")),
    );
    let read = answer(&answers, "req-read").unwrap();
    assert_eq!(read["type"], "permission_response");
    assert_eq!(read["decision"], "allow", "{read:#}");
    let bash = answer(&answers, "req-bash").unwrap();
    assert_eq!(bash["decision"], "deny", "{bash:#}");
    let reason = bash["reason"].as_str().unwrap();
    assert!(
        reason.contains("headless") && reason.contains("nobody can approve"),
        "{reason}"
    );
    let plan = answer(&answers, "req-plan").unwrap();
    assert_eq!(plan["type"], "plan_approval_response");
    assert_eq!(plan["approve"], false, "{plan:#}");
    // The requests are acknowledged once answered (right after the answers are sent),
    // not left unread for the lead's model.
    wait_until(
        "the lead's inbox acknowledged",
        Duration::from_secs(20),
        || {
            inbox(&home, "lead")
                .iter()
                .all(|m| m["read"] == true && !m["acknowledged_at"].is_null())
                .then_some(())
        },
        || format!("{:#?}", inbox(&home, "lead")),
    );
    team(&home).set_active("alice", false).unwrap();
    lead.wait()
        .assert_ok()
        .assert_stdout_contains("Waiting for alice.");
}

#[test]
fn the_team_state_is_restored_to_the_lead_after_a_compaction() {
    let home = TempHome::new();
    crew(&home);
    team(&home).set_active("alice", false).unwrap();
    home.task()
        .args([
            "create",
            "--team",
            TEAM,
            "--as",
            "lead",
            "--subject",
            "Write the parser",
            "--owner",
            "alice",
        ])
        .run()
        .assert_ok();
    home.home.write("config.yaml", "context_window: 10000\n");
    // Three rounds of 5,000 characters each, the last reporting a prompt over 80 % of
    // the window: the fourth turn compacts first.
    let pad = "x".repeat(5000);
    let round = |tokens: u64| {
        format!(
            "    - text: \"{pad}\"\n      tool_calls:\n        - {{name: Glob, input: {{pattern: \"*.none\"}}}}\n      usage: {{input_tokens: {tokens}, output_tokens: 10}}\n"
        )
    };
    let script = format!(
        "agents:\n  lead:\n{}{}{}    - when: {{last_user_contains: \"Summarize the conversation\"}}\n      text: \"SUMMARY of the rounds\"\n      usage: {{input_tokens: 500, output_tokens: 10}}\n    - text: \"Done after compaction.\"\n",
        round(3000),
        round(6000),
        round(9000),
    );
    let script = home.home.write("script.yaml", &script);
    home.cmd("roo-lead")
        .args(["-p", "Coordinate the parser work.", "--team", TEAM])
        .args(["--provider", "script", "--script"])
        .arg(&script)
        .run()
        .assert_ok()
        .assert_stdout_contains("Done after compaction.");
    // The transcript's compaction record: the kept conversation starts with the team
    // state.
    let projects = home.path().join("projects");
    let project = std::fs::read_dir(&projects)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let session = std::fs::read_dir(&project)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .unwrap();
    let records: Vec<Value> = std::fs::read_to_string(session)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let compaction = records
        .iter()
        .find(|r| r["type"] == "replace")
        .unwrap_or_else(|| panic!("a compaction record: {records:#?}"));
    let first = compaction["messages"][0].to_string();
    assert!(first.contains("SUMMARY of the rounds"), "{first}");
    assert!(
        first.contains("you lead team crew") && first.contains("alice (idle)"),
        "{first}"
    );
    assert!(
        first.contains("#1 [pending, alice] Write the parser"),
        "{first}"
    );
}

#[test]
fn the_interactive_lead_shows_teammates_answers_their_questions_and_lists_team_and_tasks() {
    let home = TempHome::new();
    crew(&home);
    home.task()
        .args([
            "create",
            "--team",
            TEAM,
            "--as",
            "lead",
            "--subject",
            "Write the parser",
            "--owner",
            "alice",
        ])
        .run()
        .assert_ok();
    let script = home.home.write(
        "session.yaml",
        r#"
agents:
  lead:
    - when: {last_user_contains: "the parser is done"}
      text: "Alice reported the parser done."
"#,
    );
    let command = format!(
        "{} --provider script --script {} --trust-project --team {TEAM}",
        roo_tests::bin("roo-lead").display(),
        script.display()
    );
    let tmux = roo_tests::Tmux::start(
        home.cwd.path(),
        &[("ROO_HOME", home.path().display().to_string())],
        &command,
    );
    tmux.wait_for("the banner and the team's status line", |s| {
        s.contains("RooCode") && s.contains("team crew · alice busy")
    });
    // /team opens the live team view (issue 31); q comes back to the prompt.
    tmux.type_text("/team");
    tmux.keys(&["Enter"]);
    tmux.wait_for("/team", |s| {
        s.contains("team crew: ")
            && s.lines()
                .any(|l| l.trim_start().starts_with("alice") && l.contains("busy"))
            && s.contains("q quit")
    });
    tmux.keys(&["q"]);
    tmux.wait_for("the prompt again", |s| {
        s.contains("RooCode") && !s.contains("q quit")
    });
    tmux.type_text("/tasks");
    tmux.keys(&["Enter"]);
    tmux.wait_for("/tasks", |s| {
        s.contains("#1    pending     alice                Write the parser")
            && s.contains("0 of 1 completed")
    });
    // While the user types: a message preview, then a question.
    tmux.type_text("half-typed");
    home.mail()
        .args(["send", "--team", TEAM, "--as", "alice", "--to", "lead"])
        .args(["--summary", "parser done", "the parser is done, tests pass"])
        .run()
        .assert_ok();
    tmux.wait_for("the preview", |s| s.contains("✉ alice: parser done"));
    // A question from a non-member is never shown (sent first, it would otherwise be
    // asked first): roo-mail refuses to send it (exit 1), and the lead ignores one
    // written into its inbox by other means.
    let ask = |from: &str, id: &str, command: &str, code: i32| {
        home.mail()
            .args(["send", "--team", TEAM, "--as", from, "--to", "lead"])
            .args([
                "--request-id",
                id,
                "--type",
                "permission_request",
                "--tool",
                "Bash",
            ])
            .args(["--input", &format!(r#"{{"command": "{command}"}}"#)])
            .args(["--summary", &format!("Bash({command})")])
            .run()
            .assert_code(code);
    };
    ask("mallory", "req-0", "curl evil", 1);
    ask("alice", "req-1", "make", 0);
    tmux.wait_for("the teammate's question", |s| {
        s.contains("teammate alice: Bash(make)") && s.contains("[y] yes")
    });
    assert!(
        !tmux.screen().contains("teammate mallory"),
        "{}",
        tmux.screen()
    );
    tmux.keys(&["y"]);
    let answered = wait_until(
        "the answer in alice's inbox",
        Duration::from_secs(20),
        || {
            let messages = inbox(&home, "alice");
            answer(&messages, "req-1").cloned()
        },
        || format!("{:#?}\n{}", inbox(&home, "alice"), tmux.screen()),
    );
    assert_eq!(answered["decision"], "allow", "{answered:#}");
    team(&home).set_active("alice", false).unwrap();
    tmux.wait_for("the refreshed status line", |s| {
        s.contains("team crew · alice idle")
    });
    // The unfinished input survived; the message enters the next turn.
    tmux.keys(&["C-u"]);
    tmux.type_text("what did alice say?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the turn with alice's message", |s| {
        s.contains("Alice reported the parser done.")
    });
}

/// The tool results in the lead's session transcripts.
fn lead_tool_results(home: &TempHome) -> Vec<String> {
    let mut results = Vec::new();
    for dir in std::fs::read_dir(home.path().join("projects"))
        .unwrap()
        .flatten()
    {
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let text = std::fs::read_to_string(file.path()).unwrap_or_default();
            for record in text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            {
                for block in record["message"]["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    if block["type"] == "tool_result" {
                        results.push(block["content"].as_str().unwrap_or_default().to_string());
                    }
                }
            }
        }
    }
    results
}

#[test]
fn the_leads_commands_know_the_team_it_created_during_the_run() {
    let home = TempHome::new();
    let script = home.home.write(
        "script.yaml",
        r#"agents:
  lead:
    - tool_calls:
        - {name: Bash, input: {command: "echo before=${ROO_TEAM:-none}"}}
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
    - tool_calls:
        - {name: Bash, input: {command: "echo after=$ROO_TEAM/$ROO_AGENT_NAME"}}
    - text: "Done."
"#,
    );
    home.cmd("roo-lead")
        .args(["-p", "go", "--provider", "script", "--script"])
        .arg(&script)
        .args(["--permission-mode", "bypassPermissions"])
        .run()
        .assert_ok();
    let results = lead_tool_results(&home);
    assert!(
        results.iter().any(|r| r.starts_with("before=none")),
        "{results:#?}"
    );
    assert!(
        results.iter().any(|r| r.starts_with("after=crew/lead")),
        "{results:#?}"
    );
}
