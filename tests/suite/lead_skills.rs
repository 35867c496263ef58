//! Skills through `roo-lead -p` with the scripted provider: `/commit args` runs the
//! built-in skill with its arguments and its tool allow-list enforced, and a
//! project's skills are used only when the project is trusted.

use std::path::PathBuf;

use roo_tests::{TempHome, TestCommand, git_init_commit};

/// The text of every session transcript of the run.
fn transcripts(home: &TempHome) -> String {
    let mut text = String::new();
    let projects = home.path().join("projects");
    for project in std::fs::read_dir(&projects).unwrap() {
        for file in std::fs::read_dir(project.unwrap().path()).unwrap() {
            let path: PathBuf = file.unwrap().path();
            if path.extension().is_some_and(|x| x == "jsonl") {
                text.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    text
}

fn lead(home: &TempHome, prompt: &str, yaml: &str) -> TestCommand {
    let script = home.home.write("script.yaml", yaml);
    home.cmd("roo-lead")
        .args(["-p", prompt, "--provider", "script", "--script"])
        .arg(script)
}

#[test]
fn slash_commit_runs_the_built_in_skill_with_its_tools_enforced() {
    let home = TempHome::new();
    home.cwd.write("a.txt", "a\n");
    git_init_commit(home.cwd.path());
    let out = lead(
        &home,
        "/commit mention issue 42",
        r#"
agents:
  "*":
    - tool_calls:
        - {name: WriteFile, input: {path: pwned.txt, content: "x"}}
    - text: "done"
"#,
    )
    .args(["--permission-mode", "bypassPermissions"])
    .run();
    out.assert_ok();
    assert!(
        !home.cwd.join("pwned.txt").exists(),
        "WriteFile must be refused"
    );
    let text = transcripts(&home);
    assert!(text.contains("# Commit the current changes"), "{text}");
    assert!(
        text.contains("Extra guidance from the user: mention issue 42"),
        "{text}"
    );
    assert!(
        text.contains("not available in this run (narrowed by skill commit)"),
        "{text}"
    );
}

#[test]
fn a_projects_skill_runs_only_when_the_project_is_trusted() {
    let home = TempHome::new();
    home.cwd.write(
        ".roocode/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: ship it\n---\nDEPLOY-PROCEDURE for $ARGUMENTS\n",
    );
    git_init_commit(home.cwd.path());
    let script = r#"
agents:
  "*":
    - text: "ok"
"#;
    let out = lead(&home, "/deploy staging", script).run();
    out.assert_ok();
    out.assert_stderr_contains("are ignored: the project is not trusted");
    assert!(!transcripts(&home).contains("DEPLOY-PROCEDURE"));

    let home2 = TempHome::new();
    home2.cwd.write(
        ".roocode/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: ship it\n---\nDEPLOY-PROCEDURE for $ARGUMENTS\n",
    );
    git_init_commit(home2.cwd.path());
    let out = lead(&home2, "/deploy staging", script)
        .arg("--trust-project")
        .run();
    out.assert_ok();
    assert!(transcripts(&home2).contains("DEPLOY-PROCEDURE for staging"));
}

#[test]
fn a_fork_skill_runs_as_a_sub_agent_with_its_tools_enforced() {
    let home = TempHome::new();
    home.cwd.write("x", "");
    git_init_commit(home.cwd.path());
    let out = lead(
        &home,
        "/review check the auth module",
        r#"
agents:
  "*":
    - when: {last_user_contains: "REVIEW-REPORT"}
      text: "lead relays the review"
    - text: "loading"
      tool_calls:
        - {name: LoadSkill, input: {name: review, arguments: "check the auth module"}}
  general-purpose:
    - tool_calls:
        - {name: WriteFile, input: {path: pwned.txt, content: "x"}}
    - text: "REVIEW-REPORT: no findings"
"#,
    )
    .args(["--permission-mode", "bypassPermissions"])
    .run();
    out.assert_ok();
    assert_eq!(out.stdout().trim(), "lead relays the review");
    assert!(
        !home.cwd.join("pwned.txt").exists(),
        "WriteFile must be refused"
    );
    let text = transcripts_all(&home);
    // The sub-agent got the skill's body with the arguments, and only its tools.
    assert!(text.contains("<skill name=\\\"review\\\""), "{text}");
    assert!(text.contains("check the auth module"), "{text}");
    assert!(text.contains("narrowed by skill review"), "{text}");
}

/// Every transcript under the home, sub-agents' included.
fn transcripts_all(home: &TempHome) -> String {
    fn walk(dir: &std::path::Path, text: &mut String) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, text);
            } else if path.extension().is_some_and(|x| x == "jsonl") {
                text.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut text = String::new();
    walk(&home.path().join("projects"), &mut text);
    text
}
