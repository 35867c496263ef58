//! The permission policy built from real config files.

use std::os::unix::fs::symlink;

use roo_agent::config::{ConfigFiles, ProjectTrust, Source};
use roo_agent::permissions::{
    Approval, Approver, DenyApprover, PermissionDecision, PermissionMode, PermissionPolicy,
};
use roo_agent::tool::Tool;
use roo_agent::tools::{Bash, EditFile, ReadFile};
use serde_json::{Value, json};

use super::common::{Workspace, write};

fn policy(ws: &Workspace, mode: Option<PermissionMode>) -> PermissionPolicy {
    let config = ConfigFiles::load(&ws.roo_home, &ws.project, ProjectTrust::Trusted).unwrap();
    PermissionPolicy::from_config(&config, ws.project.clone(), mode).unwrap()
}

fn check(
    policy: &PermissionPolicy,
    ws: &Workspace,
    tool: &dyn Tool,
    input: Value,
) -> PermissionDecision {
    policy.check(tool, &input, &ws.project)
}

fn kind(d: &PermissionDecision) -> &'static str {
    match d {
        PermissionDecision::Allow => "allow",
        PermissionDecision::Ask(_) => "ask",
        PermissionDecision::Deny { .. } => "deny",
    }
}

#[test]
fn three_config_files_drive_the_policy() {
    let ws = Workspace::new();
    write(
        &ws.roo_home.join("config.yaml"),
        "permissions:\n  allow: [\"Bash(git *)\"]\n",
    );
    ws.project_config(
        "config.yaml",
        "permission_mode: acceptEdits\npermissions:\n  allow: [\"Bash(cargo *)\"]\n",
    );
    ws.project_config(
        "config.local.yaml",
        "permissions:\n  deny: [\"Bash(cargo publish *)\"]\n",
    );
    let policy = policy(&ws, None);
    assert_eq!(policy.mode(), PermissionMode::AcceptEdits);
    let bash = |cmd: &str| check(&policy, &ws, &Bash, json!({"command": cmd}));
    assert_eq!(kind(&bash("cargo test")), "allow");
    assert_eq!(kind(&bash("git log --oneline")), "allow");
    assert_eq!(kind(&bash("cargo fmt && git diff")), "allow");
    // The rule-merging bug, end to end: the local deny must beat the project allow.
    assert_eq!(kind(&bash("cargo publish --dry-run")), "deny");
    assert_eq!(kind(&bash("make")), "ask");
    assert_eq!(kind(&bash("rm -rf ~")), "deny");
    let edit = check(&policy, &ws, &EditFile, json!({"path": "src/lib.rs"}));
    assert_eq!(kind(&edit), "allow");
    // The flag overrides the configured mode.
    let strict = self::policy(&ws, Some(PermissionMode::Default));
    assert_eq!(
        kind(&check(
            &strict,
            &ws,
            &EditFile,
            json!({"path": "src/lib.rs"})
        )),
        "ask"
    );
}

#[test]
fn a_local_allow_beats_a_project_deny() {
    let ws = Workspace::new();
    ws.project_config(
        "config.yaml",
        "permissions:\n  deny: [\"Bash(git push *)\"]\n",
    );
    ws.project_config(
        "config.local.yaml",
        "permissions:\n  allow: [\"Bash(git push origin my-branch)\"]\n",
    );
    let policy = policy(&ws, None);
    let push = |cmd: &str| kind(&check(&policy, &ws, &Bash, json!({"command": cmd})));
    assert_eq!(push("git push origin my-branch"), "allow");
    assert_eq!(push("git push origin other"), "deny");
}

#[test]
fn always_allow_persists_for_the_next_session() {
    let ws = Workspace::new();
    ws.project_config("config.local.yaml", "model: mine\n");
    let mut first = policy(&ws, None);
    let input = json!({"command": "cargo test --workspace"});
    let PermissionDecision::Ask(request) = check(&first, &ws, &Bash, input.clone()) else {
        panic!("a command asks in default mode");
    };
    assert_eq!(request.suggested_rule, "Bash(cargo test *)");
    first.allow_always(&request.suggested_rule).unwrap();
    assert_eq!(kind(&check(&first, &ws, &Bash, input.clone())), "allow");

    let config = ConfigFiles::load(&ws.roo_home, &ws.project, ProjectTrust::Trusted).unwrap();
    assert_eq!(
        config.value(Source::Local).unwrap()["model"],
        serde_yaml_ng::Value::from("mine")
    );
    let second = PermissionPolicy::from_config(&config, ws.project.clone(), None).unwrap();
    assert_eq!(
        kind(&check(
            &second,
            &ws,
            &Bash,
            json!({"command": "cargo test -p x"})
        )),
        "allow"
    );
    assert_eq!(
        kind(&check(
            &second,
            &ws,
            &Bash,
            json!({"command": "cargo build"})
        )),
        "ask"
    );
}

#[test]
fn a_symlink_out_of_the_project_is_denied() {
    let ws = Workspace::new();
    write(&ws.roo_home.join("credentials"), "token\n");
    symlink(
        ws.roo_home.join("credentials"),
        ws.project.join("src/notes.txt"),
    )
    .unwrap();
    let policy = policy(&ws, Some(PermissionMode::BypassPermissions));
    let d = check(&policy, &ws, &ReadFile, json!({"path": "src/notes.txt"}));
    let PermissionDecision::Deny { reason } = d else {
        panic!("expected a deny, got {d:?}");
    };
    assert!(reason.contains("symlink"), "{reason}");
}

#[tokio::test]
async fn nobody_approves_in_headless_runs() {
    let ws = Workspace::new();
    let policy = policy(&ws, None);
    let input = json!({"command": "make"});
    let request = policy.request(&Bash, &input, "commands need approval".to_string());
    let Approval::Deny {
        feedback: Some(feedback),
    } = DenyApprover.ask(&request).await
    else {
        panic!("DenyApprover denies");
    };
    assert!(feedback.contains("`Bash(make)`"), "{feedback}");
}

#[test]
fn regression_a_misspelt_rule_is_an_error_naming_the_file_and_line() {
    for (rule, hint) in [
        ("bash(git *)", "did you mean `Bash`"),
        ("Bash (git *)", "remove the space"),
        ("Bash( git *)", "remove the spaces"),
        ("Bsah(curl *)", "did you mean `Bash`"),
    ] {
        let ws = Workspace::new();
        ws.project_config(
            "config.yaml",
            &format!(
                "# team rules\npermissions:\n  allow:\n    - \"Bash(cargo test *)\"\n  deny:\n    - \"{rule}\"\n"
            ),
        );
        let err = ConfigFiles::load(&ws.roo_home, &ws.project, ProjectTrust::Untrusted)
            .unwrap_err()
            .to_string();
        assert!(err.contains(".roocode/config.yaml"), "{err}");
        assert!(err.contains("line 6"), "{err}");
        assert!(err.contains(hint), "{err}");
    }
}

/// A project with a secret denied to ReadFile, and the tools' context built
/// from the policy the way the app builds it.
fn secret_workspace() -> (Workspace, roo_agent::tool::ToolContext) {
    let ws = Workspace::new();
    write(&ws.project.join(".env"), "API_KEY=hunter2\n");
    write(&ws.project.join("config/.env"), "DB_PASSWORD=hunter3\n");
    write(
        &ws.project.join("src/lib.rs"),
        "// reads API_KEY from the env\n",
    );
    ws.project_config(
        "config.yaml",
        "permissions:\n  deny: [\"ReadFile(.env)\"]\n",
    );
    let policy = policy(&ws, Some(PermissionMode::BypassPermissions));
    let context = roo_agent::tool::ToolContext {
        read_filter: policy.read_filter(),
        ..ws.context(100_000)
    };
    (ws, context)
}

#[tokio::test]
async fn regression_grep_does_not_print_a_file_denied_to_readfile() {
    let (ws, ctx) = secret_workspace();
    let out = roo_agent::tools::Grep
        .call(
            json!({"pattern": "API_KEY|PASSWORD", "output_mode": "content"}),
            &ctx,
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(!out.content.contains("hunter"), "{}", out.content);
    assert!(out.content.contains("src/lib.rs"), "{}", out.content);
    assert!(
        out.content
            .contains("[2 files skipped: denied by the permission rule `ReadFile(.env)`"),
        "{}",
        out.content
    );
    // Pointed at the file itself: the policy denies the call, and the tool
    // refuses on its own too.
    let policy = policy(&ws, Some(PermissionMode::BypassPermissions));
    let input = json!({"pattern": "KEY", "path": ".env"});
    assert_eq!(
        kind(&check(&policy, &ws, &roo_agent::tools::Grep, input.clone())),
        "deny"
    );
    let out = roo_agent::tools::Grep.call(input, &ctx).await;
    assert!(out.is_error, "{}", out.content);
    assert!(!out.content.contains("hunter"), "{}", out.content);
}

#[tokio::test]
async fn regression_glob_does_not_list_a_file_denied_to_readfile() {
    let (_ws, ctx) = secret_workspace();
    let out = roo_agent::tools::Glob
        .call(json!({"pattern": "**/.env*"}), &ctx)
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(!out.content.contains(".env\n"), "{}", out.content);
    assert!(out.content.starts_with("No files match"), "{}", out.content);
    assert!(out.content.contains("2 files omitted"), "{}", out.content);
    let out = roo_agent::tools::Glob
        .call(json!({"pattern": "**/*"}), &ctx)
        .await;
    assert!(out.content.contains("src/lib.rs"), "{}", out.content);
    assert!(
        !out.content.lines().any(|l| l.ends_with(".env")),
        "{}",
        out.content
    );
}
