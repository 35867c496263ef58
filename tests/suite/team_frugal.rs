//! A team that costs few model requests (issue 20, "cache what repeats" and the token
//! targets of the two-teammate job): the lead gives a teammate its task when it spawns it
//! (`Agent` with `task: true`), the teammate's final answer reaches the lead in its idle
//! notification (no SendMessage needed to report), a headless lead takes reports that
//! arrive together in one turn, and tools nobody can use yet are not sent: a teammate's
//! ShutdownResponse comes with the lead's request, the plan tools only where a plan can
//! be approved. Every model is the mock server (Anthropic wire format), which records
//! each request; requests are told apart by their system prompt.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_store::{Name, RooHome, TaskId, TaskStatus, Team};
use roo_tests::{MockLlm, TempDir, TestCommand, bin, wait_until};
use serde_json::Value;

struct World {
    root: TempDir,
}

impl World {
    fn new() -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("roo")).unwrap();
        root.write("project/a.txt", "The word is quokka.\n");
        roo_tests::git_repo_with_identity(&root.join("project"));
        World { root }
    }

    fn project(&self) -> PathBuf {
        self.root.join("project")
    }

    /// `roo-lead -p` in the project against `mock`, in-process teammates, bypass mode.
    fn lead(&self, mock: &MockLlm) -> TestCommand {
        TestCommand::new(bin("roo-lead"))
            .env("ROO_HOME", self.root.join("roo"))
            .env("HOME", self.root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("ANTHROPIC_API_KEY", "test-key")
            .current_dir(self.project())
            .args(["-p", "Have the team do it."])
            .args(["--provider", "anthropic", "--base-url"])
            .arg(mock.base_url("anthropic"))
            .args(["--teammate-mode", "in-process"])
            .args(["--permission-mode", "bypassPermissions"])
    }

    fn team(&self) -> Team {
        Team::open(
            &RooHome::new(self.root.join("roo")),
            Name::parse_as("team", "crew").unwrap(),
        )
        .unwrap()
    }
}

/// The bodies of the requests `who` sent (`None`: the lead's).
fn requests_of(mock: &MockLlm, who: Option<&str>) -> Vec<Value> {
    mock.requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|body| {
            let system = body["system"].to_string();
            match who {
                Some(name) => system.contains(&format!("You are {name}, a RooCode teammate")),
                None => !system.contains("a RooCode teammate"),
            }
        })
        .collect()
}

/// The headless lead's final answer (`--output-format json`); the run must succeed.
fn final_answer(world: &World, mock: &MockLlm) -> String {
    let out = world.lead(mock).args(["--output-format", "json"]).run();
    out.assert_ok();
    let result = out.json()["result"].as_str().map(str::to_owned);
    result.unwrap_or_else(|| panic!("no result: {}", out.stderr()))
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The text of a request's last user message (its text blocks and tool results).
fn last_user_text(body: &Value) -> String {
    let messages = body["messages"].as_array().unwrap();
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    last["content"].to_string()
}

#[test]
fn a_teammate_given_its_task_at_spawn_reports_in_its_idle_notification() {
    let world = World::new();
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - when: {system_contains: "You are alice, a RooCode teammate"}
      tool_calls: [{name: ReadFile, input: {path: a.txt}}]
    - when: {system_contains: "You are alice, a RooCode teammate"}
      tool_calls:
        - {name: WriteFile, input: {path: a.summary, content: "quokka\n"}}
        - {name: TaskUpdate, input: {id: "1", status: completed}}
    - when: {system_contains: "You are alice, a RooCode teammate"}
      text: "Task 1 is done: the word in a.txt is quokka."
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, description: "find the word", task: true, prompt: "Read a.txt and write the word in it to a.summary."}}
    - text: "alice is on it."
    - text: "Done: the word is quokka."
    - text: "Noted."
    - text: "Noted."
"#,
    );
    let out = world.lead(&mock).run();
    out.assert_ok();

    // The task was made by the spawn, owned by alice, and she completed it without
    // claiming it first.
    let task = world
        .team()
        .tasks()
        .get(&TaskId::parse("1").unwrap())
        .unwrap();
    assert_eq!(task.subject, "find the word");
    assert_eq!(task.owner.as_ref().map(Name::as_str), Some("alice"));
    assert_eq!(task.status, TaskStatus::Completed);
    assert!(
        task.description.contains("Read a.txt"),
        "{}",
        task.description
    );

    let alice = requests_of(&mock, Some("alice"));
    assert_eq!(alice.len(), 3, "alice's requests: {alice:#?}");
    let first = last_user_text(&alice[0]);
    assert!(
        first.contains("Read a.txt and write the word")
            && first.contains("Task #1 on the task list is yours"),
        "{first}"
    );
    for body in &alice {
        let tools = tool_names(body);
        // Not asked to shut down, not planning first: neither tool is sent.
        for absent in ["ShutdownResponse", "EnterPlanMode", "ExitPlanMode"] {
            assert!(!tools.iter().any(|t| t == absent), "{absent} in {tools:?}");
        }
        assert!(tools.iter().any(|t| t == "TaskUpdate"), "{tools:?}");
    }

    // Her final answer reached the lead's model in her idle notification.
    let lead = requests_of(&mock, None);
    let wake = lead
        .iter()
        .map(last_user_text)
        .find(|text| text.contains("idle_notification"))
        .unwrap_or_else(|| panic!("no wake-up in the lead's requests: {lead:#?}"));
    assert!(
        wake.contains("Its final answer:\\nTask 1 is done: the word in a.txt is quokka."),
        "{wake}"
    );
    // Nobody can approve a plan in a headless lead: no plan tools in its requests.
    let tools = tool_names(&lead[0]);
    assert!(!tools.iter().any(|t| t.ends_with("PlanMode")), "{tools:?}");
    assert!(
        world
            .project()
            .join(".roocode/worktrees/crew+alice/a.summary")
            .is_file()
    );
}

#[test]
fn a_headless_lead_takes_reports_arriving_together_in_one_turn() {
    let world = World::new();
    // Both teammates wait for a file the test writes once the lead's turn has ended;
    // bob reports 100 ms after alice. Without the quiet period the lead would take
    // alice's report alone and bob's in a second turn.
    let go = world.root.join("go");
    let wait = |then: &str| {
        format!(
            // Bounded (30 s), so a test that fails before writing the file leaves no
            // command running.
            "i=0; while [ ! -e '{}' ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done; {then}",
            go.display()
        )
    };
    let mock = MockLlm::start(&format!(
        r#"
agents:
  "*":
    - when: {{system_contains: "You are alice, a RooCode teammate"}}
      tool_calls: [{{name: Bash, input: {{command: "{alice}"}}}}]
    - when: {{system_contains: "You are alice, a RooCode teammate"}}
      text: "alice: nothing to change."
    - when: {{system_contains: "You are bob, a RooCode teammate"}}
      tool_calls: [{{name: Bash, input: {{command: "{bob}"}}}}]
    - when: {{system_contains: "You are bob, a RooCode teammate"}}
      text: "bob: nothing to change."
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew}}}}
        - {{name: Agent, input: {{name: alice, prompt: "Look at a.txt."}}}}
        - {{name: Agent, input: {{name: bob, prompt: "Look at a.txt too."}}}}
    - text: "Both are looking."
    - text: "Both reported."
    - text: "Noted."
    - text: "Noted."
"#,
        alice = wait("true"),
        bob = wait("sleep 0.1"),
    ));
    let lead = world.lead(&mock).spawn();
    wait_until(
        "the lead's turn to end with both teammates at work",
        Duration::from_secs(60),
        || {
            let ended = requests_of(&mock, None).len() >= 2;
            let working = ["alice", "bob"]
                .iter()
                .all(|who| !requests_of(&mock, Some(who)).is_empty());
            (ended && working).then_some(())
        },
        || format!("{} requests so far", mock.requests().len()),
    );
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&go, "").unwrap();
    lead.wait().assert_ok();
    let lead = requests_of(&mock, None);
    let wakes: Vec<String> = lead
        .iter()
        .map(last_user_text)
        .filter(|text| text.contains("idle_notification"))
        .collect();
    assert_eq!(wakes.len(), 1, "the lead's wake-ups: {wakes:#?}");
    assert!(
        wakes[0].contains("alice: nothing to change.")
            && wakes[0].contains("bob: nothing to change."),
        "{}",
        wakes[0]
    );
    assert_eq!(lead.len(), 3, "the lead's requests: {lead:#?}");
}

#[test]
fn a_teammate_gets_the_shutdown_tool_with_the_leads_request() {
    let world = World::new();
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - when: {system_contains: "You are alice, a RooCode teammate"}
      tool_calls: [{name: Bash, input: {command: "sleep 4"}}]
    - when: {system_contains: "You are alice, a RooCode teammate"}
      tool_calls: [{name: ShutdownResponse, input: {approve: true}}]
    - when: {system_contains: "You are alice, a RooCode teammate"}
      text: "Stopping."
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Take your time."}}
    - tool_calls:
        - {name: SendMessage, input: {to: alice, type: shutdown_request, message: "Stop, please."}}
    - text: "Asked alice to stop."
    - text: "Noted."
    - text: "Noted."
    - text: "Noted."
"#,
    );
    world.lead(&mock).run().assert_ok();
    let alice = requests_of(&mock, Some("alice"));
    assert!(alice.len() >= 2, "alice's requests: {alice:#?}");
    let first = tool_names(&alice[0]);
    assert!(
        !first.iter().any(|t| t == "ShutdownResponse"),
        "ShutdownResponse before any request: {first:?}"
    );
    let asked = alice
        .iter()
        .find(|body| last_user_text(body).contains("Shutdown request"))
        .unwrap_or_else(|| panic!("the request never reached alice's model: {alice:#?}"));
    let tools = tool_names(asked);
    assert!(tools.iter().any(|t| t == "ShutdownResponse"), "{tools:?}");
    // She approved with the tool: her run stopped, and she is recorded as shut down.
    let config = world.team().config().unwrap();
    let member = config.member("alice").unwrap();
    assert!(member.shut_down(), "{member:?}");
}

/// Hostile review of the frugal team: a `roo-worker` started by hand without
/// `--permission-mode` takes the config's mode. Configured to `plan`, it starts in plan
/// mode, so it must get ExitPlanMode (the only way out of plan mode) — the TEAM.md rule
/// "a teammate gets EnterPlanMode and ExitPlanMode when it starts in plan mode".
#[test]
fn a_worker_started_in_plan_mode_by_its_config_gets_the_plan_tools() {
    let home = roo_tests::TempHome::new();
    home.team("t", "lead", &[]);
    std::fs::write(home.path().join("config.yaml"), "permission_mode: plan\n").unwrap();
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - text: "Planning."
"#,
    );
    let _worker = home
        .cmd("roo-worker")
        .env("ANTHROPIC_API_KEY", "test-key")
        .args(["--team", "t", "--name", "carol"])
        .args(["--provider", "anthropic", "--model", "claude-sonnet-4-5"])
        .args(["--base-url", &mock.base_url("anthropic")])
        .args(["--prompt", "Plan the change."])
        .spawn();
    let first = wait_until(
        "carol's first model request",
        Duration::from_secs(60),
        || requests_of(&mock, Some("carol")).into_iter().next(),
        || format!("{} requests so far", mock.requests().len()),
    );
    // Its system prompt tells it to finish with ExitPlanMode: it is in plan mode.
    assert!(
        first["system"].to_string().contains("Call ExitPlanMode"),
        "{}",
        first["system"]
    );
    let tools = tool_names(&first);
    assert!(
        tools.iter().any(|t| t == "ExitPlanMode"),
        "carol starts in plan mode but cannot leave it: {tools:?}"
    );
}

/// Hostile review of the frugal team: a lead that thanks every report and a teammate that
/// answers each thanks in other words. Every new answer is a report, but at most
/// `MAX_ANSWER_ONLY_NOTICES` (2) notifications in a row may differ only by their answer:
/// the first report and two answers wake the lead at most, then the ping-pong stops.
#[test]
fn a_teammate_that_only_answers_thanks_does_not_wake_the_lead_again() {
    let world = World::new();
    let mut script = String::from(
        r#"
agents:
  "*":
    - when: {system_contains: "You are alice, a RooCode teammate"}
      text: "Hi, the word is quokka."
      delay_ms: 1500
"#,
    );
    for n in 1..=6 {
        script.push_str(&format!(
            r#"    - when: {{system_contains: "You are alice, a RooCode teammate"}}
      text: "You're welcome ({n})."
"#
        ));
    }
    // The lead thanks every report it is shown; otherwise it just says "ok".
    for _ in 1..=6 {
        script.push_str(
            r#"    - when: {last_user_contains: "Its final answer"}
      tool_calls:
        - {name: SendMessage, input: {to: alice, message: "Thanks!", summary: "thanks"}}
"#,
        );
    }
    script.push_str(
        r#"    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Say hi."}}
"#,
    );
    for _ in 0..12 {
        script.push_str("    - text: \"ok\"\n");
    }
    let mock = MockLlm::start(&script);
    let out = world.lead(&mock).args(["--team-timeout", "60"]).run();
    let wakes: Vec<String> = requests_of(&mock, None)
        .iter()
        .map(last_user_text)
        .filter(|text| text.contains("idle_notification"))
        .collect();
    assert!(
        wakes.len() <= 3,
        "the lead was woken {} times by alice's thanks ping-pong (exit: {:?}): {wakes:#?}",
        wakes.len(),
        out.stderr()
    );
}

/// A headless lead that ends its turn right after messaging an idle teammate must not
/// take the team for settled before the teammate has woken: the answer reaches it.
#[test]
fn a_headless_lead_waits_for_the_answer_to_its_last_message() {
    let world = World::new();
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - when: {system_contains: "You are alice, a RooCode teammate", last_user_contains: "What is the word"}
      text: "The word is quokka."
    - when: {system_contains: "You are alice, a RooCode teammate"}
      text: "Hi."
      delay_ms: 1000
    - when: {last_user_contains: "The word is quokka."}
      text: "alice says the word is quokka."
    - when: {last_user_contains: "Hi."}
      tool_calls:
        - {name: SendMessage, input: {to: alice, message: "What is the word in a.txt?", summary: "the word?"}}
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Say hi."}}
    - text: "waiting"
    - text: "asked"
    - text: "ok"
    - text: "ok"
"#,
    );
    assert_eq!(
        final_answer(&world, &mock),
        "alice says the word is quokka."
    );
}

/// Review finding: the ping-pong cap also holds back real answers. A lead that asks its
/// teammate three questions in a row (no task changes): the third answer would be the
/// third notification that differs only by its answer, and is not forwarded. The
/// teammate is told so when the third question wakes it, and sends that answer with
/// SendMessage, which reaches the lead.
#[test]
fn a_lead_that_asks_three_questions_gets_the_third_answer() {
    let world = World::new();
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - when: {system_contains: "You are alice, a RooCode teammate", last_user_contains: "will not reach the lead"}
      tool_calls:
        - {name: SendMessage, input: {to: lead, message: "answer-three: quokka.", summary: "a3"}}
    - when: {system_contains: "You are alice, a RooCode teammate", last_user_contains: "question-three"}
      text: "Sent."
    - when: {system_contains: "You are alice, a RooCode teammate", last_user_contains: "question-two"}
      text: "answer-two."
    - when: {system_contains: "You are alice, a RooCode teammate", last_user_contains: "question-one"}
      text: "answer-one."
    - when: {system_contains: "You are alice, a RooCode teammate"}
      text: "Hi."
    - when: {last_user_contains: "answer-three"}
      text: "alice's third answer: quokka."
    - when: {last_user_contains: "answer-two"}
      tool_calls:
        - {name: SendMessage, input: {to: alice, message: "question-three?", summary: "q3"}}
    - when: {last_user_contains: "answer-one"}
      tool_calls:
        - {name: SendMessage, input: {to: alice, message: "question-two?", summary: "q2"}}
    - when: {last_user_contains: "Hi."}
      tool_calls:
        - {name: SendMessage, input: {to: alice, message: "question-one?", summary: "q1"}}
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Say hi."}}
    - text: "waiting"
    - text: "asked"
    - text: "ok"
    - text: "ok"
    - text: "ok"
    - text: "ok"
"#,
    );
    assert_eq!(final_answer(&world, &mock), "alice's third answer: quokka.");
}
