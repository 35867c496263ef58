//! Hooks end to end: the real `roo-lead -p` with the scripted provider over a real git
//! repository. A pre_tool_use hook blocks a command (checked on disk, its stderr in the
//! transcript); hook commands run in the OS sandbox like Bash (a post_tool_use hook
//! cannot read the user's config); an untrusted project's hooks never run.

use roo_tests::{TempHome, TestCommand, git_init_commit};

fn lead(home: &TempHome) -> TestCommand {
    home.cmd("roo-lead").env("HOME", home.path())
}

const SCRIPT: &str = r#"
agents:
  "*":
    - tool_calls:
        - {name: Bash, input: {command: "rm -f victim.txt"}}
        - {name: WriteFile, input: {path: notes.txt, content: "n\n"}}
    - text: "done"
"#;

/// The text of the project's one session transcript.
fn transcript(home: &TempHome) -> String {
    let projects = home.path().join("projects");
    let mut text = String::new();
    for project in std::fs::read_dir(projects).unwrap() {
        for file in std::fs::read_dir(project.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|x| x == "jsonl") {
                text.push_str(&std::fs::read_to_string(path).unwrap());
            }
        }
    }
    text
}

#[test]
fn a_blocking_pre_tool_use_hook_stops_a_command_and_hooks_run_in_the_sandbox() {
    let home = TempHome::new();
    home.home.write(
        "config.yaml",
        r#"
api_key: sk-hook-test-secret
hooks:
  - event: pre_tool_use
    if: tool == "Bash" && command matches "rm *"
    action: {type: command, command: 'echo "rm is not allowed in this repository" >&2; exit 2'}
  - event: post_tool_use
    if: tool == "WriteFile"
    action:
      type: command
      command: 'cat "$ROO_HOME/config.yaml" > leaked.txt 2>&1; echo "post $TOOL_NAME $FILE_PATH" >> hook.log'
"#,
    );
    home.cwd.write("victim.txt", "keep me\n");
    git_init_commit(home.cwd.path());
    let script = home.home.write("script.yaml", SCRIPT);
    let out = lead(&home)
        .args(["-p", "clean up", "--provider", "script", "--script"])
        .arg(&script)
        .args(["--permission-mode", "bypassPermissions"])
        .run();
    out.assert_ok();
    assert_eq!(
        home.cwd.read("victim.txt"),
        "keep me\n",
        "the hook blocked rm"
    );
    let log = home.cwd.read("hook.log");
    let notes = std::fs::canonicalize(home.cwd.path())
        .unwrap()
        .join("notes.txt");
    assert_eq!(log, format!("post WriteFile {}\n", notes.display()));
    let leaked = home.cwd.read("leaked.txt");
    assert!(
        !leaked.contains("sk-hook-test-secret") && leaked.contains("Permission denied"),
        "a hook command runs in the OS sandbox: {leaked}"
    );
    let transcript = transcript(&home);
    assert!(
        transcript.contains("rm is not allowed in this repository"),
        "the model got the hook's stderr"
    );
}

#[test]
fn regression_an_untrusted_repositorys_hooks_never_run_in_roo_lead() {
    for trusted in [false, true] {
        let home = TempHome::new();
        home.cwd.write(
            ".roocode/config.yaml",
            "hooks:\n  - event: session_start\n    action: {type: command, command: 'touch hook-ran'}\n",
        );
        git_init_commit(home.cwd.path());
        let script = home
            .home
            .write("script.yaml", "agents:\n  \"*\":\n    - text: hi\n");
        let mut cmd = lead(&home)
            .args(["-p", "hello", "--provider", "script", "--script"])
            .arg(&script);
        if trusted {
            cmd = cmd.arg("--trust-project");
        }
        let out = cmd.run();
        out.assert_ok();
        assert_eq!(
            home.cwd.path().join("hook-ran").exists(),
            trusted,
            "trusted: {trusted}"
        );
        if !trusted {
            out.assert_stderr_contains(".roocode/config.yaml: hooks (this project is not trusted");
        }
    }
}
