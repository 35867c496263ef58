//! Corrupt files, newer formats and hostile names, through the built binaries.

use roo_tests::TempHome;

#[test]
fn corrupt_inbox_is_left_by_readers_and_moved_aside_by_the_next_send() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    let inbox = env
        .home
        .write("teams/t/inboxes/alice.json", "[{\"id\": \"torn");
    // A reader reports the damage and moves nothing.
    env.mail()
        .args(["read", "--team", "t", "--as", "alice"])
        .run()
        .assert_code(3)
        .assert_stderr_contains("left untouched");
    assert!(inbox.exists());
    // The next change moves it aside and names where.
    let send = || {
        env.mail()
            .args(["send", "--team", "t", "--from", "lead", "--to", "alice"])
            .args(["--summary", "after the corruption", "hello"])
            .run()
    };
    send()
        .assert_code(3)
        .assert_stderr_contains("alice.json.corrupt-");
    assert!(!inbox.exists());
    let aside: Vec<String> = env
        .home
        .files()
        .into_iter()
        .filter(|f| f.contains("alice.json.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(env.home.read(&aside[0]), "[{\"id\": \"torn");
    // The send after that starts a fresh inbox, and says quarantined data exists.
    send()
        .assert_ok()
        .assert_stderr_contains("alice.json.corrupt-");
    assert_eq!(env.home.read(&aside[0]), "[{\"id\": \"torn");
}

#[test]
fn corrupt_task_list_fails_every_command_until_inspected() {
    let env = TempHome::new();
    env.team("t", "lead", &[]);
    env.home
        .write("tasks/t/tasks.json", "{\"version\": \"1.0\", \"tasks\": [");
    env.task()
        .args(["create", "--team", "t", "--subject", "x"])
        .run()
        .assert_code(3)
        .assert_stderr_contains("tasks.json.corrupt-")
        .assert_stderr_contains("moved aside");
}

#[test]
fn newer_major_version_is_refused_and_left_untouched() {
    let env = TempHome::new();
    env.team("t", "lead", &[]);
    let body = r#"{"version": "2.0", "next_id": 5, "tasks": {"reshaped": true}}"#;
    env.home.write("tasks/t/tasks.json", body);
    env.task()
        .args(["list", "--team", "t"])
        .run()
        .assert_code(3)
        .assert_stderr_contains("format version 2.0");
    assert_eq!(env.home.read("tasks/t/tasks.json"), body);
}

#[test]
fn path_traversal_names_are_refused_before_any_path_is_built() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    let before = env.home.files();
    let attempts: Vec<Vec<&str>> = vec![
        vec!["team", "create", "--team", "../escape", "--lead", "x"],
        vec!["team", "create", "--team", "ok", "--lead", "../../x"],
        vec!["team", "create", "--team", "a/b", "--lead", "x"],
        vec!["team", "create", "--team", "", "--lead", "x"],
        vec!["team", "add", "--team", "t", ".."],
        vec!["team", "add", "--team", "t", "evil/../../x"],
        vec!["read", "--team", "t", "--as", "../alice"],
        vec![
            "send",
            "--team",
            "t",
            "--from",
            "lead",
            "--to",
            "../../etc/passwd",
            "--summary",
            "s s",
            "x",
        ],
        vec![
            "send",
            "--team",
            "..",
            "--from",
            "lead",
            "--to",
            "alice",
            "--summary",
            "s s",
            "x",
        ],
    ];
    for args in attempts {
        let out = env.mail().args(&args).run();
        out.assert_code(2);
        assert!(
            out.stderr().contains("roo-mail: failed to"),
            "{}",
            out.stderr()
        );
    }
    env.task()
        .args(["list", "--team", "../t"])
        .run()
        .assert_code(2)
        .assert_stderr_contains("names match");
    assert_eq!(env.home.files(), before, "nothing was created");
    let parent_entries = std::fs::read_dir(env.path().parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name() == "escape" || e.file_name() == "etc")
        .count();
    assert_eq!(parent_entries, 0);
}

#[test]
fn files_and_directories_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    env.mail()
        .args(["send", "--team", "t", "--from", "lead", "--to", "alice"])
        .args(["--summary", "checking file modes", "x"])
        .run()
        .assert_ok();
    for rel in [
        "teams/t/config.json",
        "teams/t/inboxes/alice.json",
        "tasks/t/tasks.json",
    ] {
        let mode = std::fs::metadata(env.home.join(rel))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{rel}");
    }
    for rel in ["teams", "teams/t", "teams/t/inboxes", "tasks/t"] {
        let mode = std::fs::metadata(env.home.join(rel))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{rel}");
    }
}
