//! Issue 19 item 3, "Errors a newcomer meets", through the built binaries: no key names
//! `roo-lead demo`; a refused local port fails at once, with one error; a worker started
//! by hand with no lead says on its screen that it waits for an approval nobody can
//! give, then gives up; a team left by a timed-out run is named with how to resume or
//! delete it, and a named `Agent` call without a team is an error, not a sub-agent.
//! Neither `HOME` nor `ROO_HOME` set is a usage error naming `ROO_HOME`, in every binary.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use roo_store::{Name, RooHome, Team};
use roo_tests::{TempHome, Tmux, bin, wait_until};
use serde_json::Value;

/// Variables that would give the lead a provider.
const PROVIDER_ENV: [&str; 6] = [
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "ROO_PROVIDER",
    "ROO_SCRIPT",
    "ROO_BASE_URL",
    "ROO_MODEL",
];

#[test]
fn without_a_key_a_prompt_run_names_the_demo_and_how_to_set_a_key() {
    let home = TempHome::new();
    let out = home
        .cmd("roo-lead")
        .env("HOME", home.path())
        .args(["-p", "hi"])
        .run();
    out.assert_code(2);
    out.assert_stderr_contains("run `roo-lead demo`");
    out.assert_stderr_contains("set ANTHROPIC_API_KEY or OPENAI_API_KEY");
}

#[test]
fn without_a_key_the_interactive_lead_names_the_demo_and_how_to_set_a_key() {
    let home = TempHome::new();
    let unset: Vec<String> = PROVIDER_ENV.iter().map(|k| format!("-u {k}")).collect();
    let tmux = Tmux::start(
        home.cwd.path(),
        &[
            ("ROO_HOME", home.path().display().to_string()),
            ("HOME", home.path().display().to_string()),
        ],
        &format!("env {} {}", unset.join(" "), bin("roo-lead").display()),
    );
    let status = tmux.wait_exit();
    // The message wraps at the pane's width: joined again (-J). With its history (-S -):
    // tmux 3.3 scrolls the first line of a pane whose command exited off the visible
    // screen when it shows "Pane is dead".
    let screen = tmux.run(&["capture-pane", "-p", "-J", "-S", "-", "-t", "main"]);
    assert_eq!(status, 2, "{screen}");
    assert!(screen.contains("run `roo-lead demo`"), "{screen}");
    assert!(
        screen.contains("set ANTHROPIC_API_KEY or OPENAI_API_KEY"),
        "{screen}"
    );
}

/// Fail fast on a refused local port: the run used to retry for 23.6 s and then print
/// the error twice (as it happened and as the outcome).
#[test]
fn a_refused_local_port_ends_the_run_at_once_with_one_error() {
    let home = TempHome::new();
    // A port nobody listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let out = home
        .cmd("roo-lead")
        .args(["-p", "hi", "--provider", "openai", "--base-url"])
        .arg(format!("http://127.0.0.1:{port}/v1"))
        .run();
    let elapsed = started.elapsed();
    out.assert_code(4);
    let needle = format!("connection refused: nothing listens on 127.0.0.1:{port}");
    out.assert_stderr_contains(&needle);
    assert_eq!(
        out.stderr().matches(&needle).count(),
        1,
        "the error once:\n{}",
        out.stderr()
    );
    // Retrying takes 15 s at the least (1 + 2 + 4 + 8 s with the backoff's jitter down
    // to half); the run itself takes well under a second.
    assert!(
        elapsed < Duration::from_secs(5),
        "{elapsed:?}:\n{}",
        out.stderr()
    );
}

/// The interactive lead showed a failed model call twice too: as the error happened and
/// as the run's outcome.
#[test]
fn the_interactive_lead_shows_a_refused_local_port_once() {
    let home = TempHome::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let tmux = Tmux::start(
        home.cwd.path(),
        &[
            ("ROO_HOME", home.path().display().to_string()),
            ("HOME", home.path().display().to_string()),
        ],
        &format!(
            "{} --provider openai --base-url http://127.0.0.1:{port}/v1",
            bin("roo-lead").display()
        ),
    );
    tmux.wait_for("the banner and prompt", |s| {
        s.contains("RooCode") && s.contains('›')
    });
    tmux.type_text("hi");
    tmux.keys(&["Enter"]);
    let needle = format!("connection refused: nothing listens on 127.0.0.1:{port}");
    // The wrapped error joined again (-J); done once the prompt is back after it.
    let joined = || tmux.run(&["capture-pane", "-p", "-J", "-t", "main"]);
    let screen = wait_until(
        "the error and the prompt after it",
        Duration::from_secs(20),
        || {
            let screen = joined();
            let after = &screen[screen.find(needle.as_str())?..];
            after.lines().any(|l| l.trim() == "›").then_some(screen)
        },
        joined,
    );
    assert_eq!(screen.matches(&needle).count(), 1, "{screen}");
}

/// A worker started by hand in the default mode, in a team whose lead never started,
/// asks to write a file: its screen says it waits for the lead, that no lead runs and
/// what to do; after its orphan timeout the call is denied with the reason.
#[test]
fn a_hand_started_worker_without_a_lead_says_it_waits_then_denies_the_call() {
    let home = TempHome::new();
    home.team("crew", "lead", &[]);
    let script = home.home.write(
        "script.yaml",
        r#"
agents:
  alice:
    - when: {last_user_contains: "nobody can answer"}
      text: "Nobody approved the write; I stop here."
    - text: "Writing the notes."
      tool_calls:
        - {name: WriteFile, input: {path: notes.txt, content: "from alice\n"}}
"#,
    );
    let mut worker = home
        .cmd("roo-worker")
        .env("HOME", home.path())
        .args([
            "--team",
            "crew",
            "--name",
            "alice",
            "--prompt",
            "write the notes",
        ])
        .args(["--provider", "script", "--script"])
        .arg(&script)
        .args(["--orphan-timeout", "2"])
        .spawn();
    let pid = worker.pid();
    let team = Team::open(
        &RooHome::new(home.path()),
        Name::parse_as("team", "crew").unwrap(),
    )
    .unwrap();
    let started = Instant::now();
    wait_until(
        "alice to be denied and go idle",
        Duration::from_secs(30),
        || {
            let config = team.config().ok()?;
            let alice = config.member("alice")?;
            (alice.pid == Some(pid) && !alice.is_active()).then_some(())
        },
        || format!("{:#?}", team.config().map(|c| c.members)),
    );
    let waited = started.elapsed();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    wait_until(
        "roo-worker to exit",
        Duration::from_secs(30),
        || worker.child().try_wait().unwrap().map(|_| ()),
        || "still running".to_string(),
    );
    let screen = worker.wait().stdout();
    for needle in [
        "waiting for the lead's approval of WriteFile(notes.txt), but no lead is running for team crew",
        "start one with `roo-lead --team crew`",
        "--permission-mode acceptEdits",
        "unanswered, it is denied in 2s (--orphan-timeout)",
        "no lead ran for team crew within 2s (--orphan-timeout)",
        "Nobody approved the write; I stop here.",
    ] {
        assert!(
            screen.contains(needle),
            "{needle:?} on the screen:\n{screen}"
        );
    }
    assert!(!home.cwd.join("notes.txt").exists());
    assert!(waited >= Duration::from_secs(2), "{waited:?}");
}

/// Every session transcript file of the lead's project.
fn sessions(home: &TempHome) -> BTreeSet<PathBuf> {
    let mut files = BTreeSet::new();
    let mut dirs = vec![home.path().join("projects")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "jsonl") {
                files.insert(path);
            }
        }
    }
    files
}

/// The tool results of a transcript: tool name, whether an error, content.
fn tool_results(transcript: &PathBuf) -> Vec<(String, bool, String)> {
    let text = std::fs::read_to_string(transcript).unwrap();
    let records: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let blocks = || {
        records
            .iter()
            .flat_map(|r| r["message"]["content"].as_array().into_iter().flatten())
    };
    blocks()
        .filter(|b| b["type"] == "tool_result")
        .map(|result| {
            let name = blocks()
                .find(|b| b["type"] == "tool_use" && b["id"] == result["tool_use_id"])
                .map(|b| b["name"].as_str().unwrap().to_string())
                .unwrap_or_default();
            (
                name,
                result["is_error"] == true,
                result["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Issue 19: a `-p` run that hit `--team-timeout` left its team; the same run again
/// failed to create the team and its named `Agent` call silently started a sub-agent
/// instead of the teammate, and exited 0.
#[test]
fn a_team_left_by_a_timed_out_run_is_named_and_a_named_agent_without_a_team_fails() {
    let home = TempHome::new();
    let script = home.home.write(
        "script.yaml",
        r#"
agents:
  lead:
    - text: "Forming the team."
      tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
    - text: "Spawning alice."
      tool_calls:
        - {name: Agent, input: {name: alice, description: "alice", prompt: "ALICE-TASK"}}
    - when: {last_user_contains: "spawned teammate alice"}
      text: "Alice is on it."
    - text: "Done here."
  alice:
    - delay_ms: 60000
      text: "Finished."
  general-purpose:
    - text: "A SUB-AGENT DID ALICE'S WORK."
"#,
    );
    let run = || {
        home.cmd("roo-lead")
            .env("HOME", home.path())
            .args(["-p", "Build it with alice.", "--team-timeout", "1"])
            .args(["--provider", "script", "--script"])
            .arg(&script)
            .run()
    };
    let first = run();
    first.assert_code(1);
    first.assert_stderr_contains("(--team-timeout): alice");
    first.assert_stderr_contains(
        "team crew is kept: resume it with `roo-lead --team crew` (or `roo-lead --continue`",
    );
    first.assert_stderr_contains("delete it with `roo-mail team delete --team crew`");
    let before = sessions(&home);

    let second = run();
    let new: Vec<PathBuf> = sessions(&home).difference(&before).cloned().collect();
    assert!(
        new.iter()
            .all(|p| !p.to_string_lossy().contains("subagents")),
        "no sub-agent ran: {new:#?}"
    );
    let [session] = new.as_slice() else {
        panic!("one new session: {new:#?}");
    };
    let results = tool_results(session);
    let result = |tool: &str| {
        results
            .iter()
            .find(|(name, ..)| name == tool)
            .unwrap_or_else(|| panic!("a {tool} result: {results:#?}"))
    };
    let (_, create_failed, create) = result("TeamCreate");
    assert!(*create_failed, "{create}");
    for needle in [
        "create team crew: a team of that name exists, left by an earlier run (its lead's process",
        "resume it with `roo-lead --team crew` (or `roo-lead --continue`",
        "delete it with `roo-mail team delete --team crew`",
    ] {
        assert!(create.contains(needle), "{needle:?} in {create}");
        second.assert_stderr_contains(needle);
    }
    let (_, agent_failed, agent) = result("Agent");
    assert!(*agent_failed, "{agent}");
    assert!(agent.contains("you lead no team"), "{agent}");
    assert!(
        agent.contains("call Agent without `name`"),
        "how to start a sub-agent instead: {agent}"
    );
    assert!(
        !second.stdout().contains("SUB-AGENT"),
        "{}",
        second.stdout()
    );
    second.assert_stdout("Done here.\n");
    // Issue 32: a run whose TeamCreate and named Agent call failed did not finish.
    second.assert_code(1);
    second.assert_stderr_contains(
        "the team was not formed as asked, so the run did not finish: TeamCreate of team crew failed",
    );
}

#[test]
fn missing_home_and_roo_home_is_a_usage_error_in_every_binary() {
    let env = TempHome::new();
    for empty in [false, true] {
        let unset = |cmd: roo_tests::TestCommand| {
            if empty {
                cmd.env("HOME", "").env("ROO_HOME", "")
            } else {
                cmd.env_remove("HOME").env_remove("ROO_HOME")
            }
        };
        for (bin, args) in [
            ("roo-mail", &["list", "--team", "t"][..]),
            ("roo-task", &["list", "--team", "t"][..]),
            ("roo-lead", &["-p", "hello"][..]),
        ] {
            unset(env.cmd(bin).args(args))
                .run()
                .assert_code(2)
                .assert_stderr_contains("set ROO_HOME");
        }
    }
}
