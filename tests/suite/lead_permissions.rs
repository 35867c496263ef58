//! Permission layers through the real `roo-lead`: the layer-1 corpus against a
//! fake `bash` that only logs, and deny rules that hold across tools.

use std::path::{Path, PathBuf};

use roo_tests::{TempDir, TempHome, bugfix_repo};
use serde_json::{Value, json};

/// The corpus of destructive variants kept next to layer 1.
const CORPUS: &str = include_str!("../../shared/agent/src/permissions/dangerous/corpus.txt");

/// `(verdict, command)` for every corpus line.
fn corpus() -> Vec<(String, String)> {
    CORPUS
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (verdict, cmd) = l.split_once(' ').unwrap();
            (verdict.to_string(), cmd.replace('⏎', "\n"))
        })
        .collect()
}

/// A directory holding a fake `bash` that appends its `-c` command to `log`
/// (NUL-separated) and runs nothing.
fn fake_bash(dir: &TempDir, log: &Path) -> PathBuf {
    let bin = dir.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nprintf '%s\\0' \"$2\" >> '{}'\nexit 0\n",
        log.display()
    );
    let bash = bin.join("bash");
    std::fs::write(&bash, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bash, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// Runs `roo-lead -p` in bypassPermissions with the scripted model calling Bash
/// once for each of `commands`, with `bin` first on PATH and HOME in a temp dir.
fn run_bash_calls(home: &TempHome, bin: &Path, fake_home: &Path, commands: &[String]) -> Value {
    let calls: Vec<Value> = commands
        .iter()
        .map(|c| json!({"name": "Bash", "input": {"command": c}}))
        .collect();
    // JSON is YAML: no quoting surprises for the corpus.
    let script = json!({"agents": {"*": [
        {"text": "Running the commands.", "tool_calls": calls},
        {"text": "Done."}
    ]}});
    let script = home.home.write("script.yaml", script.to_string());
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = home
        .cmd("roo-lead")
        .args(["-p", "run them", "--provider", "script", "--script"])
        .arg(&script)
        .args([
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "stream-json",
        ])
        .env("PATH", path)
        .env("HOME", fake_home)
        .run();
    out.assert_ok();
    Value::Array(
        out.stdout()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    )
}

fn logged(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn layer1_corpus_runs_only_the_documented_gaps() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let scratch = TempDir::new();
    let fake_home = scratch.join("home");
    std::fs::create_dir_all(&fake_home).unwrap();
    let log = scratch.join("bash.log");
    let bin = fake_bash(&scratch, &log);

    // Guard: prove the Bash tool runs the fake shell before handing it anything
    // destructive. If it ever stops finding `bash` on PATH, this fails first.
    run_bash_calls(&home, &bin, &fake_home, &["echo canary".to_string()]);
    assert_eq!(logged(&log), ["echo canary"], "the fake bash was not used");
    std::fs::remove_file(&log).unwrap();

    let corpus = corpus();
    let commands: Vec<String> = corpus.iter().map(|(_, c)| c.clone()).collect();
    let events = run_bash_calls(&home, &bin, &fake_home, &commands);
    let expected: Vec<String> = corpus
        .iter()
        .filter(|(v, _)| v == "sandbox")
        .map(|(_, c)| c.clone())
        .collect();
    assert_eq!(
        logged(&log),
        expected,
        "only the documented gaps reach the shell, in order"
    );
    let denied = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "permission_denied")
        .count();
    assert_eq!(denied, corpus.len() - expected.len());
    assert!(home.cwd.path().join("calc.py").is_file());
}

#[test]
fn regression_grep_and_glob_do_not_reveal_a_file_denied_to_readfile() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    home.cwd.write(".env", "API_KEY=hunter2\n");
    home.home.write(
        "config.yaml",
        "permissions:\n  deny: [\"ReadFile(.env)\"]\n",
    );
    let script = json!({"agents": {"*": [
        {"tool_calls": [
            {"name": "Grep", "input": {"pattern": "API_KEY", "output_mode": "content"}},
            {"name": "Glob", "input": {"pattern": ".env*"}},
            {"name": "Grep", "input": {"pattern": "API_KEY", "path": ".env"}},
            {"name": "ReadFile", "input": {"path": ".env"}}
        ]},
        {"text": "Done."}
    ]}});
    let script = home.home.write("script.yaml", script.to_string());
    let out = home
        .cmd("roo-lead")
        .args(["-p", "find the key", "--provider", "script", "--script"])
        .arg(&script)
        .args([
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "stream-json",
        ])
        .run();
    out.assert_ok();
    let stdout = out.stdout();
    assert!(!stdout.contains("hunter2"), "{stdout}");
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let denied = events
        .iter()
        .filter(|e| e["type"] == "permission_denied")
        .count();
    assert_eq!(denied, 2, "Grep on .env and ReadFile of .env: {stdout}");
    assert!(stdout.contains("1 file skipped"), "{stdout}");
    assert!(stdout.contains("1 file omitted"), "{stdout}");
}
