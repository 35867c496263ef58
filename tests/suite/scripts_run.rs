//! `scripts/run`, the README's first command, with the built binaries (`ROO_BIN_DIR`, so
//! nothing is rebuilt): with a prompt it runs the agent in the directory it was called
//! from, never in the RooCode checkout it builds in; with no key it runs the demo team.

use std::path::{Path, PathBuf};

use roo_tests::{TempDir, TestCommand, bin};

/// The directory of the built binaries.
fn bins() -> PathBuf {
    bin("roo-lead").parent().unwrap().to_path_buf()
}

/// The checkout this test was built from.
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A scripted model that writes `here.txt` where the agent works, then answers.
const WRITE_HERE: &str = r#"
agents:
  "*":
    - tool_calls:
        - {name: WriteFile, input: {path: here.txt, content: "written here\n"}}
    - text: "Wrote here.txt."
"#;

#[test]
fn scripts_run_with_a_prompt_works_in_the_directory_it_was_called_from() {
    let root = TempDir::new();
    let project = root.join("my-project");
    std::fs::create_dir_all(&project).unwrap();
    let script = root.write("script.yaml", WRITE_HERE);
    let out = TestCommand::new(checkout().join("scripts/run"))
        .env("ROO_BIN_DIR", bins())
        .env("ROO_HOME", root.join("roo"))
        .env("HOME", root.join("home"))
        .env("ROO_PROVIDER", "script")
        .env("ROO_SCRIPT", &script)
        .current_dir(&project)
        .args(["-p", "write here.txt", "--permission-mode", "acceptEdits"])
        .run();
    // What the agent wrote in the checkout is removed before any check fails.
    let in_checkout = checkout().join("here.txt");
    let wrote_in_checkout = in_checkout.exists();
    let _ = std::fs::remove_file(&in_checkout);
    out.assert_ok();
    assert!(
        !wrote_in_checkout,
        "the agent worked in the RooCode checkout"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("here.txt")).unwrap_or_default(),
        "written here\n",
        "the agent did not work in the caller's directory: {}",
        out.stderr()
    );
}

#[test]
fn scripts_run_without_a_key_runs_the_demo_team() {
    let root = TempDir::new();
    for dir in ["home", "tmp"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    let out = TestCommand::new(checkout().join("scripts/run"))
        .env("ROO_BIN_DIR", bins())
        .env("HOME", root.join("home"))
        .env("TMPDIR", root.join("tmp"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TMUX")
        .env_remove("TMUX_PANE")
        .current_dir(root.path())
        .args(["--pace-ms", "0"])
        .run();
    out.assert_ok();
    out.assert_stdout_contains("running the scripted demo (roo-lead demo)");
    out.assert_stdout_contains("3/3 completed");
}

/// `path` (absolute) written relative to `from` (absolute): `../` up to `/`, then the path.
fn relative_to(path: &Path, from: &Path) -> PathBuf {
    let mut rel = PathBuf::new();
    for _ in from.components().skip(1) {
        rel.push("..");
    }
    rel.join(path.strip_prefix("/").unwrap())
}

#[test]
fn scripts_run_puts_a_relative_roo_bin_dir_on_path_as_an_absolute_directory() {
    let root = TempDir::new();
    let project = root.join("my-project");
    std::fs::create_dir_all(&project).unwrap();
    let script = root.write(
        "script.yaml",
        r#"
agents:
  "*":
    - tool_calls:
        - {name: Bash, input: {command: "printf '%s' \"$PATH\" > path.txt"}}
    - text: "Wrote path.txt."
"#,
    );
    let project = std::fs::canonicalize(&project).unwrap();
    let relative = relative_to(&bins(), &project);
    let out = TestCommand::new(checkout().join("scripts/run"))
        .env("ROO_BIN_DIR", &relative)
        .env("ROO_HOME", root.join("roo"))
        .env("HOME", root.join("home"))
        .env("ROO_PROVIDER", "script")
        .env("ROO_SCRIPT", &script)
        .current_dir(&project)
        .args([
            "-p",
            "write path.txt",
            "--permission-mode",
            "bypassPermissions",
        ])
        .run();
    out.assert_ok();
    let path = std::fs::read_to_string(project.join("path.txt")).unwrap_or_default();
    assert!(!path.is_empty(), "no PATH written: {}", out.stderr());
    let relative_entries: Vec<&str> = path.split(':').filter(|e| !e.starts_with('/')).collect();
    assert!(
        relative_entries.is_empty(),
        "relative PATH entries {relative_entries:?} in {path}"
    );

    // A ROO_BIN_DIR that is no directory: a clear error, exit 2.
    let out = TestCommand::new(checkout().join("scripts/run"))
        .env("ROO_BIN_DIR", "no-such-bins")
        .env("HOME", root.join("home"))
        .current_dir(&project)
        .args(["-p", "hi"])
        .run();
    assert_eq!(out.code(), 2, "{}", out.stderr());
    out.assert_stderr_contains("ROO_BIN_DIR no-such-bins is not a directory");
}
