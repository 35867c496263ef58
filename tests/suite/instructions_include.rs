//! `@include` in `ROOCODE.md` end to end: what the real `roo-lead` sends to the model
//! server never contains a file from outside the project (or outside `ROO_HOME` for
//! the user's file), nor one the `ReadFile` deny rules deny.

use std::os::unix::fs::symlink;

use roo_tests::{MockLlm, TempDir, TempHome, git_init_commit};

const SECRETS: [&str; 6] = [
    "PRIVATE-KEY-1",
    "OUTSIDE-SECRET-2",
    "ABS-SECRET-3",
    "LINK-SECRET-4",
    "ENV-SECRET-5",
    "USER-HOME-SECRET-6",
];

fn mock() -> MockLlm {
    MockLlm::start("agents:\n  \"*\":\n    - text: \"ok\"\n    - text: \"ok\"\n")
}

/// Everything the server received, as one string.
fn sent(mock: &MockLlm) -> String {
    let requests = mock.requests();
    assert!(!requests.is_empty(), "the model was called");
    requests
        .iter()
        .map(|r| r.body.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn regression_includes_cannot_read_outside_the_project_or_denied_files() {
    let home = TempHome::new();
    let fake_home = TempDir::new();
    fake_home.write(".ssh/id_rsa", SECRETS[0]);
    fake_home.write("notes.txt", SECRETS[5]);
    let elsewhere = TempDir::new();
    let absolute = elsewhere.write("abs-secret.txt", SECRETS[2]);
    home.cwd.write("outside/secret.txt", SECRETS[1]);
    let link_target = home.cwd.write("outside/link-secret.txt", SECRETS[3]);
    let project = home.cwd.join("project");
    std::fs::create_dir_all(project.join("docs")).unwrap();
    symlink(&link_target, project.join("docs/notes.md")).unwrap();
    std::fs::write(project.join(".env"), SECRETS[4]).unwrap();
    std::fs::write(project.join("docs/style.md"), "STYLE-OK").unwrap();
    std::fs::write(
        project.join("ROOCODE.md"),
        format!(
            "Project rules.\n@include ~/.ssh/id_rsa\n@include ../outside/secret.txt\n@include {}\n@include docs/notes.md\n@include .env\n@include docs/style.md\n",
            absolute.display()
        ),
    )
    .unwrap();
    git_init_commit(&project);
    home.home.write(
        "config.yaml",
        "permissions:\n  deny: [\"ReadFile(.env)\"]\n",
    );
    home.home.write(
        "ROOCODE.md",
        "User rules.\n@include ~/.ssh/id_rsa\n@include ~/notes.txt\n",
    );

    let server = mock();
    let out = home
        .cmd("roo-lead")
        .current_dir(&project)
        .env("HOME", fake_home.path())
        .env("ANTHROPIC_API_KEY", "k")
        .args(["-p", "hi", "--provider", "anthropic"])
        .args(["--base-url", &server.base_url("anthropic")])
        .run();
    let body = sent(&server);
    for secret in SECRETS {
        assert!(
            !body.contains(secret),
            "{secret} was sent to the model:\n{body}"
        );
    }
    out.assert_ok();
    assert!(
        body.contains("STYLE-OK"),
        "an include inside the project works"
    );
    assert!(body.contains("Project rules.") && body.contains("User rules."));
    assert_eq!(body.matches("refused:").count(), 7, "{body}");
    let stderr = out.stderr();
    assert_eq!(stderr.matches("was not read").count(), 7, "{stderr}");
    assert!(stderr.contains("ReadFile(.env)"), "{stderr}");
}

#[test]
fn regression_an_agent_cannot_turn_a_denied_read_into_an_include() {
    let home = TempHome::new();
    home.cwd.write("outside/secret.txt", SECRETS[1]);
    let project = home.cwd.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("README.md"), "demo").unwrap();
    git_init_commit(&project);
    // Session 1: reading the file is denied (outside the project), so the model
    // plants an include for the next session; acceptEdits lets it write ROOCODE.md.
    let script = home.home.write(
        "s.yaml",
        r#"
agents:
  "*":
    - tool_calls:
        - {name: ReadFile, input: {path: ../outside/secret.txt}}
    - tool_calls:
        - {name: WriteFile, input: {path: ROOCODE.md, content: "@include ../outside/secret.txt\n"}}
    - text: "planted"
"#,
    );
    let out = home
        .cmd("roo-lead")
        .current_dir(&project)
        .args(["-p", "go", "--permission-mode", "acceptEdits", "--script"])
        .arg(&script)
        .run();
    out.assert_ok();
    assert!(project.join("ROOCODE.md").exists());

    // Session 2: the include is refused, the secret never reaches the model.
    let server = mock();
    let out = home
        .cmd("roo-lead")
        .current_dir(&project)
        .env("ANTHROPIC_API_KEY", "k")
        .args(["-p", "hi", "--provider", "anthropic"])
        .args(["--base-url", &server.base_url("anthropic")])
        .run();
    out.assert_ok();
    let body = sent(&server);
    assert!(!body.contains(SECRETS[1]), "{body}");
    assert!(
        body.contains("[@include ../outside/secret.txt refused:"),
        "{body}"
    );
}
