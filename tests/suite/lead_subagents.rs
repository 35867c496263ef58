//! Sub-agents through the real binaries: `roo-lead -p` with the scripted provider
//! (a definition-based child with the project instructions, a background child whose
//! notification gets one more turn before the run ends), and a sub-agent inside a
//! `roo-worker` talking to the mock model server.

use std::path::PathBuf;
use std::time::Duration;

use roo_store::{Name, RooHome, Team};
use roo_tests::{MockLlm, TempHome, TestCommand, bin, git_init_commit, wait_until};

/// Every `.jsonl` under the home's projects directory (sessions and sub-agents).
fn transcripts(home: &TempHome) -> Vec<(PathBuf, String)> {
    fn walk(dir: &std::path::Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "jsonl") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&home.path().join("projects"), &mut out);
    out
}

fn lead(home: &TempHome, prompt: &str, yaml: &str) -> TestCommand {
    let script = home.home.write("script.yaml", yaml);
    home.cmd("roo-lead")
        .args(["-p", prompt, "--provider", "script", "--script"])
        .arg(script)
}

#[test]
fn roo_lead_runs_a_definition_based_sub_agent_with_the_project_instructions() {
    let home = TempHome::new();
    home.cwd
        .write("ROOCODE.md", "PROJECT-RULE: tabs, never spaces.\n");
    git_init_commit(home.cwd.path());
    home.home.write(
        "agents/tester.md",
        "---\nname: Tester\ndescription: tests things\n---\nYou are Tester.\n",
    );
    let out = lead(
        &home,
        "check it",
        r#"
agents:
  "*":
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {description: "check", prompt: "CHILD-TASK: check the thing", subagent_type: "tester"}}
    - when: {last_user_contains: "CHILD-REPORT-42"}
      text: "lead saw the report"
  Tester:
    - text: "CHILD-REPORT-42"
"#,
    )
    .run();
    out.assert_ok();
    assert_eq!(out.stdout().trim(), "lead saw the report");
    let all = transcripts(&home);
    let (path, child) = all
        .iter()
        .find(|(p, _)| p.ends_with("subagents/a1.jsonl"))
        .unwrap_or_else(|| panic!("no sub-agent transcript in {all:#?}"));
    assert!(child.contains("PROJECT-RULE"), "{path:?}: {child}");
    assert!(child.contains("CHILD-TASK"), "{child}");
    assert!(child.contains("CHILD-REPORT-42"), "{child}");
}

#[test]
fn a_headless_run_waits_for_its_background_task_and_takes_one_more_turn() {
    let home = TempHome::new();
    home.cwd.write("a.txt", "a\n");
    git_init_commit(home.cwd.path());
    let out = lead(
        &home,
        "start it",
        r#"
agents:
  "*":
    - text: "starting"
      tool_calls:
        - {name: Agent, input: {description: "bg", prompt: "BG-TASK", subagent_type: "general-purpose", run_in_background: true}}
    - when: {last_user_contains: "Started background task a1"}
      text: "started, ending my turn"
    - when: {last_user_contains: "BG-RESULT-7"}
      text: "final answer with BG-RESULT-7"
  general-purpose:
    - delay_ms: 200
      text: "BG-RESULT-7"
"#,
    )
    .args(["--output-format", "json"])
    .run();
    out.assert_ok();
    let json = out.json();
    assert_eq!(json["result"], "final answer with BG-RESULT-7", "{json}");
    assert_eq!(json["team"], serde_json::Value::Null);
}

#[test]
fn a_worker_runs_a_sub_agent() {
    let home = TempHome::new();
    home.team("t", "lead", &[]);
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - when: {system_contains: "You are Explore"}
      text: "EXPLORE-FOUND-IT"
    - text: "exploring"
      tool_calls:
        - {name: Agent, input: {description: "look", prompt: "find main", subagent_type: "Explore"}}
    - when: {last_user_contains: "EXPLORE-FOUND-IT"}
      text: "worker done"
"#,
    );
    let bins: PathBuf = bin("roo-task").parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = home
        .cmd("roo-worker")
        .env("PATH", path)
        .env("ANTHROPIC_API_KEY", "test-key")
        .args(["--team", "t", "--name", "carol"])
        .args(["--provider", "anthropic", "--model", "claude-sonnet-4-5"])
        .args(["--base-url", &mock.base_url("anthropic")])
        .args(["--prompt", "look around"])
        .spawn();
    let team = Team::open(&RooHome::new(home.path()), Name::parse("t").unwrap()).unwrap();
    wait_until(
        "the worker's run to end",
        Duration::from_secs(30),
        || {
            mock.requests()
                .iter()
                .any(|r| r.body["messages"].to_string().contains("EXPLORE-FOUND-IT"))
                .then_some(())
        },
        || format!("{:#?}", team.config().map(|c| c.members)),
    );
    let requests = mock.requests();
    let explore = requests
        .iter()
        .find(|r| r.body["system"].to_string().contains("You are Explore"))
        .expect("the Explore child asked the model");
    // Layer 4 and layer 1 are in its tool list: no WriteFile, no Agent.
    let tools: Vec<String> = explore.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(tools.contains(&"ReadFile".to_string()), "{tools:?}");
    assert!(!tools.contains(&"WriteFile".to_string()), "{tools:?}");
    assert!(!tools.contains(&"Agent".to_string()), "{tools:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let _ = child.child().wait();
}

#[test]
fn a_sub_agent_in_a_worktree_keeps_its_changes_there_and_an_idle_one_leaves_none() {
    let home = TempHome::new();
    home.cwd.write("a.txt", "a\n");
    git_init_commit(home.cwd.path());
    let out = lead(
        &home,
        "isolate",
        r#"
agents:
  "*":
    - text: "isolating"
      tool_calls:
        - {name: Agent, input: {description: "write", prompt: "WRITER", subagent_type: "general-purpose", isolation: worktree}}
        - {name: Agent, input: {description: "look", prompt: "LOOKER", subagent_type: "Explore", isolation: worktree}}
    - when: {last_user_contains: "kept in worktree"}
      text: "lead saw both"
  general-purpose:
    - tool_calls:
        - {name: WriteFile, input: {path: "new.txt", content: "from the child\n"}}
    - text: "wrote new.txt"
  Explore:
    - text: "looked, changed nothing"
"#,
    )
    .args(["--permission-mode", "bypassPermissions"])
    .run();
    out.assert_ok();
    assert_eq!(out.stdout().trim(), "lead saw both");
    // The change is in the writer's worktree, not in the project.
    assert!(!home.cwd.join("new.txt").exists());
    let worktrees = home.cwd.join(".roocode/worktrees");
    let kept: Vec<PathBuf> = std::fs::read_dir(&worktrees)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(kept.len(), 1, "only the writer's worktree stays: {kept:?}");
    let name = kept[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("subagents+"), "{name}");
    assert_eq!(
        std::fs::read_to_string(kept[0].join("new.txt")).unwrap(),
        "from the child\n"
    );
    let lead_log: String = transcripts(&home)
        .into_iter()
        .filter(|(p, _)| !p.to_string_lossy().contains("subagents/"))
        .map(|(_, t)| t)
        .collect();
    assert!(lead_log.contains("on branch roo/subagents/"), "{lead_log}");
    assert!(
        lead_log.contains("it left no changes, so the worktree was removed"),
        "{lead_log}"
    );
}

#[test]
fn the_configured_auto_background_threshold_moves_a_slow_child_and_hooks_run_inside_it() {
    let home = TempHome::new();
    home.cwd.write("a.txt", "a\n");
    git_init_commit(home.cwd.path());
    // The user's config: a short threshold, and a guard that blocks every WriteFile.
    home.home.write(
        "config.yaml",
        "agents:\n  auto_background_secs: 1\nhooks:\n  - event: pre_tool_use\n    if: tool == \"WriteFile\"\n    action: {type: command, command: 'echo \"HOOK-BLOCKED writes\" >&2; exit 1'}\n",
    );
    let out = lead(
        &home,
        "slow job",
        r#"
agents:
  "*":
    - text: "delegating"
      tool_calls:
        - {name: Agent, input: {description: "slow", prompt: "SLOW-TASK", subagent_type: "general-purpose"}}
    - when: {last_user_contains: "auto-background threshold"}
      text: "it moved to the background"
    - when: {last_user_contains: "SLOW-RESULT"}
      text: "final: SLOW-RESULT arrived"
  general-purpose:
    - tool_calls:
        - {name: WriteFile, input: {path: "guarded.txt", content: "x"}}
    - delay_ms: 1500
      text: "SLOW-RESULT after the hook said no"
"#,
    )
    .args(["--permission-mode", "bypassPermissions", "--output-format", "json"])
    .run();
    out.assert_ok();
    assert_eq!(out.json()["result"], "final: SLOW-RESULT arrived");
    assert!(!home.cwd.join("guarded.txt").exists());
    let all = transcripts(&home);
    let child = &all
        .iter()
        .find(|(p, _)| p.ends_with("subagents/a1.jsonl"))
        .unwrap()
        .1;
    assert!(child.contains("HOOK-BLOCKED writes"), "{child}");
    let lead: String = all
        .iter()
        .filter(|(p, _)| !p.to_string_lossy().contains("subagents/"))
        .map(|(_, t)| t.as_str())
        .collect();
    let moved = lead.find("auto-background threshold").unwrap();
    let notified = lead.find("<task-notification>").unwrap();
    assert!(
        moved < notified,
        "the call returned before the result arrived"
    );
}
