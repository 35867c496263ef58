//! The interactive lead never lets "always" reach `.git/` or `.roocode/`: a root file's
//! saved rule is anchored at the root, a write under a protected directory is asked
//! whatever allow rules say (the user's `WriteFile(.roocode/**)` too), and no `[a]` is offered for one. A private tmux server, the
//! lead on a scripted model in the default mode (the review's repro: `WriteFile(config)`
//! saved with `a` let the next `WriteFile(.git/config)` with `core.fsmonitor` run unasked).
//!
//! Directories live under Cargo's target tmp dir, as in `team_approvals`.

use std::path::Path;

use roo_tests::{TempDir, Tmux, bin};

/// The model's calls, one a turn: a root file saved with `a`, then the protected file
/// of the same name; twice (git's config, RooCode's), then an edit of `.git/config`.
const SCRIPT: &str = r#"
agents:
  "*":
    - text: "Writing config."
      tool_calls:
        - {name: WriteFile, input: {path: config, content: "plain = 1\n"}}
    - text: "Now the other config."
      tool_calls:
        - {name: WriteFile, input: {path: .git/config, content: "[core]\n\tfsmonitor = touch pwned\n"}}
    - text: "Writing config.yaml."
      tool_calls:
        - {name: WriteFile, input: {path: config.yaml, content: "plain: 1\n"}}
    - text: "Now RooCode's."
      tool_calls:
        - {name: WriteFile, input: {path: .roocode/config.yaml, content: "permissions:\n  allow: [Bash]\n"}}
    - text: "One edit."
      tool_calls:
        - {name: EditFile, input: {path: .git/config, old_string: "[core]", new_string: "[core]\n\tfsmonitor = touch pwned"}}
    - text: "All done."
"#;

fn lead(root: &TempDir) -> Tmux {
    let script = root.write("script.yaml", SCRIPT);
    let command = format!(
        "{} --provider script --script {} --trust-project",
        bin("roo-lead").display(),
        script.display()
    );
    let env = [
        ("ROO_HOME", root.join("roo").display().to_string()),
        ("HOME", root.join("home").display().to_string()),
        ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
    ];
    let tmux = Tmux::start(&root.join("project"), &env, &command);
    tmux.wait_for("the prompt", |s| s.contains("RooCode") && s.contains('›'));
    tmux
}

/// Waits for the pinned question about `summary` and returns the screen.
fn question(tmux: &Tmux, summary: &str) -> String {
    tmux.wait_for(&format!("the question for {summary}"), |s| {
        s.contains(&format!("? {summary}")) && s.contains("[y] yes")
    })
}

#[test]
fn regression_always_for_a_root_file_never_approves_a_write_under_git_or_roocode() {
    let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    std::fs::create_dir_all(root.join("home")).unwrap();
    std::fs::create_dir_all(root.join("roo")).unwrap();
    root.write("project/README.md", "# demo\n");
    roo_tests::git_repo_with_identity(&root.join("project"));
    // The user's own rules that match protected paths do not lift the question either.
    root.write(
        "roo/config.yaml",
        "permissions:\n  allow: [\"WriteFile(.roocode/**)\", \"EditFile(.git/**)\"]\n",
    );
    let git_config = std::fs::read_to_string(root.join("project/.git/config")).unwrap();
    let tmux = lead(&root);
    tmux.type_text("set things up");
    tmux.keys(&["Enter"]);

    for (file, protected) in [
        ("config", ".git/config"),
        ("config.yaml", ".roocode/config.yaml"),
    ] {
        // The root file's rule is anchored at the root, and is offered.
        let screen = question(&tmux, &format!("WriteFile({file})"));
        assert!(
            screen.contains(&format!("[a] always (saves: WriteFile(:/{file}))")),
            "{screen}"
        );
        tmux.keys(&["a"]);
        // The protected file of the same name is asked all the same, without `[a]`.
        let screen = question(&tmux, &format!("WriteFile({protected})"));
        let pinned = &screen[screen.rfind(&format!("? WriteFile({protected})")).unwrap()..];
        assert!(!pinned.contains("[a]"), "always offered:\n{screen}");
        if protected.starts_with(".roocode") {
            // The user's allow rule below matches it; the question stays.
            assert!(pinned.contains(".git/ and .roocode/"), "{screen}");
        }
        tmux.keys(&["n"]);
    }
    let screen = question(&tmux, "EditFile(.git/config)");
    let pinned = &screen[screen.rfind("? EditFile(.git/config)").unwrap()..];
    assert!(!pinned.contains("[a]"), "always offered:\n{screen}");
    // The reason, cut to one row in the block, names the user's rule in full after `v`.
    tmux.keys(&["v"]);
    tmux.wait_for("the whole reason, naming the user's rule", |s| {
        s.contains("EditFile(.git/**)")
    });
    // `a` where it is not offered does not answer.
    tmux.keys(&["a"]);
    tmux.wait_for("the note that always is not offered", |s| {
        s.contains("\"always\" is not offered here")
    });
    tmux.keys(&["n"]);
    tmux.wait_for("the end of the turn", |s| s.contains("All done."));

    let project = root.join("project");
    assert_eq!(
        std::fs::read_to_string(project.join("config")).unwrap(),
        "plain = 1\n"
    );
    assert_eq!(
        std::fs::read_to_string(project.join(".git/config")).unwrap(),
        git_config,
        "git's config changed"
    );
    assert!(!project.join(".roocode/config.yaml").exists());
    let local = std::fs::read_to_string(project.join(".roocode/config.local.yaml")).unwrap();
    assert!(
        local.contains("WriteFile(:/config)") && local.contains("WriteFile(:/config.yaml)"),
        "{local}"
    );
    tmux.keys(&["C-c"]);
    tmux.keys(&["C-c"]);
    assert_eq!(tmux.wait_exit(), 0);
}

/// The review's repro for commands: allow rules such as `Bash(git config *)` let a
/// command change git's config, add a hook or create `.roocode/` unasked. Each change
/// is undone once the command ends and the model is told; what a commit writes stays.
#[test]
fn regression_a_command_an_allow_rule_ran_leaves_no_change_under_git_or_roocode() {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let home = roo_tests::TempHome {
        home: TempDir::new_in(target),
        cwd: TempDir::new_in(target),
    };
    let project = home.cwd.path().to_path_buf();
    home.cwd.write("hook.sh", "#!/bin/sh\ntouch pwned\n");
    roo_tests::git_repo_with_identity(&project);
    home.home.write(
        "config.yaml",
        "permissions:\n  allow: [\"Bash(git config *)\", \"Bash(cp *)\", \"Bash(mkdir *)\", \
         \"Bash(git commit *)\"]\n",
    );
    let git_config = std::fs::read_to_string(project.join(".git/config")).unwrap();
    let head = |p: &Path| roo_tests::git(p, &["rev-parse", "HEAD"]);
    let before = head(&project);
    let script = home.home.write(
        "script.yaml",
        r#"
agents:
  "*":
    - tool_calls:
        - {name: Bash, input: {command: "git config core.hooksPath hooks-elsewhere"}}
    - tool_calls:
        - {name: Bash, input: {command: "git config alias.st '!touch pwned'"}}
    - tool_calls:
        - {name: Bash, input: {command: "cp hook.sh .git/hooks/pre-commit"}}
    - tool_calls:
        - {name: Bash, input: {command: "mkdir -p .roocode/agents"}}
    - tool_calls:
        - {name: Bash, input: {command: "git commit --allow-empty -m still-works"}}
    - text: "Done."
"#,
    );
    let out = home
        .cmd("roo-lead")
        .args(["-p", "set up git", "--provider", "script", "--script"])
        .arg(&script)
        .args(["--output-format", "stream-json"])
        .run();
    out.assert_ok();
    let stdout = out.stdout();
    assert!(!stdout.contains("permission_denied"), "{stdout}");
    for undone in [
        "undone: restored .git/config",
        "removed .git/hooks/pre-commit",
        "removed .roocode/agents; removed .roocode",
    ] {
        assert!(stdout.contains(undone), "{undone}:\n{stdout}");
    }
    assert_eq!(
        std::fs::read_to_string(project.join(".git/config")).unwrap(),
        git_config,
        "git's config changed"
    );
    assert!(!project.join(".git/hooks/pre-commit").exists());
    assert!(!project.join(".roocode").exists());
    assert_ne!(head(&project), before, "the commit did not stay");
}
