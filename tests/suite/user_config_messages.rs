//! Messages that point at the user's own config file name it where `ROO_HOME` really
//! is: the whole path outside `HOME`, `~/…` only under it, never a literal
//! `~/.roocode/config.yaml` when the file is elsewhere.

use std::path::Path;

use roo_tests::{TempDir, TestCommand, bin};

/// A scripted model that writes `here.txt` where the agent works, then answers.
const WRITE_HERE: &str = r#"
agents:
  "*":
    - tool_calls:
        - {name: WriteFile, input: {path: here.txt, content: "written here\n"}}
    - text: "Wrote here.txt."
"#;

/// `roo-lead -p hi` with no provider, `ROO_HOME` at `roo_home` and `HOME` at `home`.
fn no_provider(root: &TempDir, roo_home: &Path, home: &Path) -> roo_tests::RunOutput {
    TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", roo_home)
        .env("HOME", home)
        .current_dir(root.path())
        .args(["-p", "hi"])
        .run()
}

#[test]
fn messages_name_the_user_config_where_roo_home_really_is() {
    let root = TempDir::new();
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    // ROO_HOME outside HOME: the whole path.
    let elsewhere = root.join("state");
    let out = no_provider(&root, &elsewhere, &home);
    out.assert_code(2);
    out.assert_stderr_contains(&format!("`api_key` in {}/config.yaml", elsewhere.display()));
    assert!(!out.stderr().contains("~/.roocode"), "{}", out.stderr());
    // ROO_HOME under HOME: shortened with `~`.
    let out = no_provider(&root, &home.join("roo"), &home);
    out.assert_code(2);
    out.assert_stderr_contains("`api_key` in ~/roo/config.yaml");

    // A rule of the user's own config names that file when it denies a call.
    let roo_home = root.join("state2");
    std::fs::create_dir_all(&roo_home).unwrap();
    std::fs::write(
        roo_home.join("config.yaml"),
        "permissions:\n  deny: [\"WriteFile(here.txt)\"]\n",
    )
    .unwrap();
    let script = root.write("script.yaml", WRITE_HERE);
    let project = root.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let out = TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", &roo_home)
        .env("HOME", &home)
        .current_dir(&project)
        .args(["-p", "write here.txt", "--provider", "script", "--script"])
        .arg(&script)
        .args(["--permission-mode", "acceptEdits"])
        .args(["--output-format", "stream-json"])
        .run();
    out.assert_ok();
    let expected = format!("in the user config ({}/config.yaml)", roo_home.display());
    assert!(out.stdout().contains(&expected), "{}", out.stdout());
    assert!(!out.stdout().contains("~/.roocode"), "{}", out.stdout());
    assert!(!project.join("here.txt").exists());
}
