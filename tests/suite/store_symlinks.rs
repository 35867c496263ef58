//! Symlinks planted in ROO_HOME, through the built binaries (issue 8 item 6).

use roo_tests::{TempDir, TempHome};

#[test]
fn roo_mail_read_does_not_print_a_symlinked_inbox_target() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    let outside = TempDir::new();
    let secret = outside.write(
        "secret.json",
        r#"{"version":"1.0","messages":[{"id":"m1","from":"lead","to":"alice","type":"text","text":"SECRET-FILE-CONTENT","timestamp":"2026-01-01T00:00:00.000Z","read":false}]}"#,
    );
    let inbox = env.path().join("teams/t/inboxes/alice.json");
    std::fs::create_dir_all(inbox.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&secret, &inbox).unwrap();
    let out = env
        .mail()
        .args(["read", "--team", "t", "--as", "alice"])
        .run();
    out.assert_code(3)
        .assert_stderr_contains("symbolic link, not a regular file");
    assert!(
        !out.stdout().contains("SECRET-FILE-CONTENT"),
        "{}",
        out.stdout()
    );
    // A send writes nothing through the link either.
    env.mail()
        .args(["send", "--team", "t", "--from", "lead", "--to", "alice"])
        .args(["--summary", "s", "attacker chosen text"])
        .run()
        .assert_code(3);
    assert!(!outside.read("secret.json").contains("attacker chosen text"));
}
