//! Tests of loading, checking and merging the three config files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;

use super::*;

struct Dirs {
    _dir: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

fn dirs() -> Dirs {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("roo-home");
    let project = dir.path().join("project");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(project.join(".roocode")).unwrap();
    Dirs {
        _dir: dir,
        home,
        project,
    }
}

fn write(d: &Dirs, source: Source, text: &str) {
    let path = match source {
        Source::User => user_config_path(&d.home),
        Source::Project => project_config_path(&d.project),
        Source::Local => local_config_path(&d.project),
    };
    fs::write(path, text).unwrap();
}

#[test]
fn missing_files_are_absent() {
    let d = dirs();
    let config = ConfigFiles::load(&d.home, &d.project).unwrap();
    assert!(config.files().iter().all(|f| f.value.is_none()));
    assert!(config.rules().is_empty());
    assert_eq!(config.permission_mode().unwrap(), None);
    assert!(config.hooks().is_empty());
    assert!(config.mcp_servers().is_empty());
    let paths = config.paths();
    assert_eq!(paths[0], (Source::User, d.home.join("config.yaml")));
    assert_eq!(
        paths[1],
        (Source::Project, d.project.join(".roocode/config.yaml"))
    );
    assert_eq!(
        paths[2],
        (Source::Local, d.project.join(".roocode/config.local.yaml"))
    );
}

#[test]
fn merges_the_three_files() {
    let d = dirs();
    write(
        &d,
        Source::User,
        r#"
permission_mode: acceptEdits
provider: anthropic            # read by roo-llm, ignored here
permissions:
  allow: ["Bash(git *)"]
hooks:
  - event: session_start
    action: {type: command, command: "echo user"}
mcp_servers:
  everything:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-everything", 3]
    env: {LOG_LEVEL: warn, PORT: 8080}
  remote:
    url: http://127.0.0.1:1/mcp
"#,
    );
    write(
        &d,
        Source::Project,
        r#"
permissions:
  deny: ["Bash(git push *)"]
  ask: ["EditFile(.github/**)"]
hooks:
  - event: post_tool_use
    if: tool == "WriteFile"
    action:
      type: command
      command: "lint $FILE_PATH"
mcp_servers:
  remote:
    url: http://127.0.0.1:2/mcp
    headers: {Authorization: "Bearer t"}
"#,
    );
    write(
        &d,
        Source::Local,
        "permission_mode: plan\nunknown_key: [1, 2]\n",
    );
    let config = ConfigFiles::load(&d.home, &d.project).unwrap();

    assert_eq!(
        config.permission_mode().unwrap(),
        Some(PermissionMode::Plan)
    );
    let rules = config.rules();
    assert_eq!(rules.source(Source::User).allow[0].as_str(), "Bash(git *)");
    assert_eq!(
        rules.source(Source::Project).deny[0].as_str(),
        "Bash(git push *)"
    );
    assert_eq!(
        rules.source(Source::Project).ask[0].as_str(),
        "EditFile(.github/**)"
    );
    assert!(rules.source(Source::Local).allow.is_empty());

    let hooks = config.hooks();
    assert_eq!(hooks.len(), 2, "hooks add up");
    assert_eq!(hooks[0].event, HookEvent::SessionStart);
    assert_eq!(hooks[0].source, Source::User);
    assert_eq!(hooks[1].event, HookEvent::PostToolUse);
    assert_eq!(hooks[1].condition.as_deref(), Some("tool == \"WriteFile\""));
    assert_eq!(
        hooks[1].action,
        HookAction::Command {
            command: "lint $FILE_PATH".into(),
            timeout_ms: None
        }
    );

    let servers = config.mcp_servers();
    assert_eq!(servers.len(), 2);
    let McpTransport::Stdio {
        command, args, env, ..
    } = &servers["everything"].transport
    else {
        panic!("everything is a stdio server");
    };
    assert_eq!(command, "npx");
    assert_eq!(args[2], "3");
    assert_eq!(env["PORT"], "8080");
    let remote = &servers["remote"];
    assert_eq!(remote.source, Source::Project, "the later file wins whole");
    let McpTransport::Http { url, headers } = &remote.transport else {
        panic!("remote is an HTTP server");
    };
    assert_eq!(url, "http://127.0.0.1:2/mcp");
    assert_eq!(headers["Authorization"], "Bearer t");
    assert!(
        config
            .value(Source::Local)
            .unwrap()
            .get("unknown_key")
            .is_some()
    );
}

#[test]
fn the_highest_file_that_sets_a_mode_wins() {
    let d = dirs();
    write(&d, Source::User, "permission_mode: bypassPermissions\n");
    write(&d, Source::Project, "permission_mode: default\n");
    let config = ConfigFiles::load(&d.home, &d.project).unwrap();
    assert_eq!(
        config.permission_mode().unwrap(),
        Some(PermissionMode::Default)
    );
}

#[test]
fn empty_files_are_empty_mappings() {
    let d = dirs();
    write(&d, Source::Project, "");
    write(&d, Source::Local, "# only a comment\n");
    let config = ConfigFiles::load(&d.home, &d.project).unwrap();
    assert!(config.value(Source::Project).unwrap().is_mapping());
    assert!(config.value(Source::Local).unwrap().is_mapping());
}

#[test]
fn syntax_errors_name_the_file_and_line() {
    let d = dirs();
    write(
        &d,
        Source::Project,
        "permissions:\n  allow: [\"Bash(git *)\"\n  deny: []\n",
    );
    let err = ConfigFiles::load(&d.home, &d.project)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("parse config file"), "{err}");
    assert!(err.contains(".roocode/config.yaml"), "{err}");
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn wrong_shapes_are_clear_errors() {
    let cases = [
        (
            "permission_mode: yolo\n",
            "`permission_mode` parse permission mode `yolo`",
        ),
        ("permission_mode: 3\n", "`permission_mode` must be one of"),
        ("permissions: [a]\n", "`permissions` must be a mapping"),
        (
            "permissions: {allow: \"Bash\"}\n",
            "`permissions.allow` must be a list",
        ),
        (
            "permissions: {deny: [3]}\n",
            "`permissions.deny` must contain only strings",
        ),
        (
            "permissions: {allow: [\"Bash(\"]}\n",
            "load permission rule `Bash(`",
        ),
        ("hooks: {a: 1}\n", "`hooks` must be a list"),
        (
            "hooks: [{event: on_save, action: {type: command, command: x}}]\n",
            "`hooks[0]` unknown variant `on_save`",
        ),
        (
            "hooks: [{event: stop, action: {type: http}}]\n",
            "`hooks[0]`",
        ),
        (
            "mcp_servers: {s: {args: []}}\n",
            "`mcp_servers.s` needs `command`",
        ),
        (
            "mcp_servers: {s: {command: x, url: y}}\n",
            "`mcp_servers.s` has both",
        ),
        (
            "mcp_servers: {\"a b\": {command: x}}\n",
            "is not a valid server name",
        ),
        ("- just\n- a list\n", "must be a mapping"),
    ];
    for (text, expected) in cases {
        let d = dirs();
        write(&d, Source::Local, text);
        let err = ConfigFiles::load(&d.home, &d.project)
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{text:?}: {err}");
        assert!(err.contains("config.local.yaml"), "{text:?}: {err}");
    }
}

#[test]
fn append_local_allow_creates_the_file_and_a_gitignore() {
    let d = dirs();
    fs::remove_dir_all(d.project.join(".roocode")).unwrap();
    append_local_allow(&d.project, "Bash(cargo test *)").unwrap();
    let text = fs::read_to_string(local_config_path(&d.project)).unwrap();
    assert!(text.starts_with("# Personal RooCode settings"), "{text}");
    assert_eq!(
        fs::read_to_string(d.project.join(".roocode/.gitignore")).unwrap(),
        "config.local.yaml\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(local_config_path(&d.project))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let config = ConfigFiles::load(&d.home, &d.project).unwrap();
    let rules = config.rules();
    assert_eq!(
        rules.source(Source::Local).allow[0].as_str(),
        "Bash(cargo test *)"
    );
}

#[test]
fn append_local_allow_keeps_other_keys_and_refuses_to_clobber() {
    let d = dirs();
    write(
        &d,
        Source::Local,
        "model: m\npermissions:\n  allow: null\n  ask: [\"Bash(git push *)\"]\n",
    );
    append_local_allow(&d.project, "WriteFile").unwrap();
    let config = ConfigFiles::load(&d.home, &d.project).unwrap();
    let local = config.value(Source::Local).unwrap();
    assert_eq!(local["model"], Value::from("m"));
    let rules = config.rules();
    assert_eq!(rules.source(Source::Local).allow[0].as_str(), "WriteFile");
    assert_eq!(
        rules.source(Source::Local).ask[0].as_str(),
        "Bash(git push *)"
    );

    write(&d, Source::Local, "permissions: 5\n");
    let err = append_local_allow(&d.project, "WriteFile")
        .unwrap_err()
        .to_string();
    assert!(err.contains("`permissions` is not a mapping"), "{err}");
    assert_eq!(
        fs::read_to_string(local_config_path(&d.project)).unwrap(),
        "permissions: 5\n",
        "an unexpected file is left alone"
    );
    write(&d, Source::Local, "permissions: {allow: [\n");
    assert!(append_local_allow(&d.project, "WriteFile").is_err());
}

#[test]
fn concurrent_appends_lose_no_rule() {
    let d = dirs();
    let project = d.project.clone();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let project = project.clone();
            std::thread::spawn(move || append_local_allow(&project, &format!("Bash(tool{i} *)")))
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    let config = ConfigFiles::load(&d.home, &d.project).unwrap();
    let rules = config.rules();
    assert_eq!(rules.source(Source::Local).allow.len(), 8);
}
