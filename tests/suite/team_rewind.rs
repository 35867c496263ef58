//! A teammate checkpoints in its own clone, and its lead rewinds that clone after stopping
//! it (`TaskStop` with `rewind_to`): the files the teammate changed go back, what it
//! created goes, the clone's other files and the lead's tree stay. The real `roo-lead -p`
//! with an in-process teammate, every model scripted.
//!
//! Directories live under Cargo's target tmp dir (the command sandbox leaves the system
//! temp dir writable, so a test there would prove less).

use std::path::{Path, PathBuf};

use roo_tests::{TempDir, TestCommand, bin};

/// The lead spawns alice, and once she reports, stops her and rewinds her clone.
const SCRIPT: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew, description: "one teammate"}}
    - tool_calls:
        - {name: Agent, input: {name: alice, description: "edits", prompt: "Change README.md and make b.txt."}}
    - text: "Waiting for alice."
    - when: {last_user_contains: "alice is done"}
      tool_calls:
        - {name: TaskStop, input: {task_id: alice, rewind_to: 0}}
        - {name: TaskStop, input: {task_id: alice, rewind_to: 1}}
    - text: "Rewound alice."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
  alice:
    - tool_calls:
        - {name: WriteFile, input: {path: README.md, content: "alice was here\n"}}
        - {name: Bash, input: {command: "echo b > b.txt"}}
        - {name: SendMessage, input: {to: lead, summary: "done", message: "alice is done"}}
    - text: "Done."
"#;

fn path_with_bins() -> String {
    let bins: PathBuf = bin("roo-mail").parent().unwrap().to_path_buf();
    format!(
        "{}:{}",
        bins.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn the_lead_rewinds_a_stopped_teammates_clone() {
    let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    std::fs::create_dir_all(root.join("home")).unwrap();
    std::fs::create_dir_all(root.join("roo")).unwrap();
    root.write("project/README.md", "# demo\n");
    let project = root.join("project");
    roo_tests::git_repo_with_identity(&project);
    let script = root.write("script.yaml", SCRIPT);
    let out = TestCommand::new(bin("roo-lead"))
        .env("PATH", path_with_bins())
        .env("ROO_HOME", root.join("roo"))
        .env("HOME", root.join("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .current_dir(&project)
        .args(["-p", "Have alice change the README, then undo it."])
        .args(["--provider", "script", "--script"])
        .arg(script)
        .args(["--permission-mode", "bypassPermissions"])
        .args(["--output-format", "stream-json", "--team-timeout", "60"])
        .run();
    let stdout = out.stdout();
    let clone = project.join(".roocode/worktrees/crew+alice");
    assert!(clone.join(".git").exists(), "no clone:\n{stdout}");
    // The listing, then the rewind, as the lead's tool results.
    assert!(
        stdout.contains("alice's checkpoints in") && stdout.contains("~README.md"),
        "{stdout}"
    );
    assert!(stdout.contains("+b.txt"), "{stdout}");
    assert!(
        stdout.contains("rewound alice's clone") && stdout.contains("restored README.md"),
        "{stdout}"
    );
    assert!(stdout.contains("removed b.txt"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(clone.join("README.md")).unwrap(),
        "# demo\n"
    );
    assert!(!clone.join("b.txt").exists());
    assert_eq!(
        std::fs::read_to_string(project.join("README.md")).unwrap(),
        "# demo\n"
    );
}
