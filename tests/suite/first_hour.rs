//! Issue 31's smaller traps of a newcomer's first hour, through the real scripts and
//! binaries: `scripts/run -p` works in the directory it was called from, not in the
//! RooCode checkout, and with no key runs the demo team; messages name the user config where `ROO_HOME` really is (not
//! `~/.roocode/config.yaml` whatever it is); the harness's private tmux servers leave no
//! socket file behind, also when a test panics.

use std::path::{Path, PathBuf};

use roo_tests::{TempDir, TestCommand, Tmux, bin, tmux_socket_path};

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

#[test]
fn a_private_tmux_server_leaves_no_socket_file_when_it_ends() {
    let cwd = TempDir::new();
    let tmux = Tmux::start(cwd.path(), &[], "true");
    let socket = tmux_socket_path(tmux.socket());
    assert!(socket.exists(), "{} not made", socket.display());
    drop(tmux);
    assert!(!socket.exists(), "{} left behind", socket.display());

    // Also when the test holding it panics.
    let socket = std::panic::catch_unwind(|| {
        let tmux = Tmux::start(cwd.path(), &[], "true");
        let socket = tmux_socket_path(tmux.socket());
        assert!(socket.exists(), "{} not made", socket.display());
        std::panic::panic_any(socket);
    })
    .unwrap_err()
    .downcast::<PathBuf>()
    .unwrap();
    assert!(!socket.exists(), "{} left behind", socket.display());
}
