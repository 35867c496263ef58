//! The lead's own writes into a project's `.roocode/` never go through a symlink (issue
//! 29, item 11): a hostile repository commits `.roocode/.gitignore` as a dangling link to
//! `~/.bash_profile`; the user answers "always" once in the interactive `roo-lead` (a
//! real terminal: a private tmux server), the rule is saved, and the link's target is
//! never created. The target lives under Cargo's target tmp dir, not the system temp dir.

use std::path::Path;

use roo_tests::{TempDir, TempHome, Tmux, bin, bugfix_repo};

#[test]
fn always_allow_in_a_repository_with_a_dangling_roocode_gitignore_link_creates_nothing_outside() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let victim = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let target = victim.join(".bash_profile");
    std::os::unix::fs::symlink(&target, home.cwd.join(".roocode/.gitignore")).unwrap();
    roo_tests::git(home.cwd.path(), &["add", "-A"]);
    roo_tests::git(home.cwd.path(), &["commit", "-qm", "a link in .roocode"]);
    let script = home.home.write(
        "session.yaml",
        r#"
agents:
  "*":
    - text: "Fixing the loop."
      tool_calls:
        - {name: EditFile, input: {path: calc.py, old_string: "    for v in values[1:]:", new_string: "    for v in values:"}}
    - text: "Fixed the loop in average()."
"#,
    );
    let command = format!(
        "{} --provider script --script {} --trust-project",
        bin("roo-lead").display(),
        script.display()
    );
    let tmux = Tmux::start(
        home.cwd.path(),
        &[("ROO_HOME", home.path().display().to_string())],
        &command,
    );
    tmux.wait_for("the banner and prompt", |s| {
        s.contains("RooCode") && s.contains('›')
    });
    tmux.type_text("fix the bug in calc.py");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the permission question for the edit", |s| {
        s.contains("[y] yes") && s.contains("EditFile(calc.py)")
    });
    tmux.keys(&["a"]);
    tmux.wait_for("the answer after the edit", |s| {
        s.contains("Fixed the loop in average().")
    });
    let local = home.cwd.read(".roocode/config.local.yaml");
    assert!(local.contains("EditFile"), "rule saved:\n{local}");
    assert!(
        !target.exists() && std::fs::symlink_metadata(&target).is_err(),
        "the link's target was created"
    );
    assert!(
        std::fs::symlink_metadata(home.cwd.join(".roocode/.gitignore"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was left as it was"
    );
    tmux.keys(&["C-c"]);
    tmux.wait_for("the exit hint", |s| {
        s.contains("press Ctrl+C again to exit")
    });
    tmux.keys(&["C-c"]);
    assert_eq!(tmux.wait_exit(), 0);
}

/// The same write path, every component: `.roocode` itself a link (to a directory
/// outside), `config.local.yaml` a link, and the teammates' `.roocode/worktrees/.gitignore`
/// a dangling link: each is refused or left alone, and nothing appears outside.
#[test]
fn links_at_any_component_of_a_roocode_write_are_never_followed() {
    let outside = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let project = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    // `.roocode` a link to a directory outside the project.
    std::os::unix::fs::symlink(outside.path(), project.join(".roocode")).unwrap();
    let err = roo_agent::config::append_local_allow(project.path(), "ReadFile").unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(outside.files().is_empty(), "{:?}", outside.files());
    std::fs::remove_file(project.join(".roocode")).unwrap();
    // `config.local.yaml` a link to a file outside.
    std::fs::create_dir(project.join(".roocode")).unwrap();
    let file = outside.write("notes.yaml", "keep: me\n");
    std::os::unix::fs::symlink(&file, project.join(".roocode/config.local.yaml")).unwrap();
    let err = roo_agent::config::append_local_allow(project.path(), "ReadFile").unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep: me\n");
    std::fs::remove_file(project.join(".roocode/config.local.yaml")).unwrap();
    // The worktrees' `.gitignore`, a dangling link: a teammate's clone is still made and
    // the link's target is not.
    let target = outside.join(".profile");
    std::fs::create_dir_all(project.join(".roocode/worktrees")).unwrap();
    std::os::unix::fs::symlink(&target, project.join(".roocode/worktrees/.gitignore")).unwrap();
    project.write("README.md", "# demo\n");
    roo_tests::git_repo_with_identity(project.path());
    let git = roo_team::worktree::Git::new().env("GIT_CONFIG_NOSYSTEM", "1");
    let ws = roo_team::worktree::prepare(
        project.path(),
        &roo_store::Name::parse("team").unwrap(),
        &roo_store::Name::parse("alice").unwrap(),
        &git,
    )
    .unwrap();
    assert!(
        matches!(ws, roo_team::worktree::Workspace::Worktree(_)),
        "{ws:?}"
    );
    assert!(
        std::fs::symlink_metadata(&target).is_err(),
        "target created"
    );
}
