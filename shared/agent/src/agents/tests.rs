use std::fs;

use super::*;

fn parse(text: &str) -> Result<AgentDefinition, DefinitionError> {
    parse_definition(
        text,
        Path::new("x/scout.md"),
        "scout",
        DefinitionSource::User,
    )
}

fn write(dir: &Path, file: &str, text: &str) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join(file), text).unwrap();
}

fn file_text(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\nYou are {name}.\n")
}

#[test]
fn every_builtin_definition_parses() {
    for (stem, text, _) in BUILTIN {
        let path = PathBuf::from(format!("agents/{stem}.md"));
        let definition = parse_definition(text, &path, stem, DefinitionSource::BuiltIn)
            .unwrap_or_else(|e| panic!("built-in agent {stem} is broken: {e}"));
        assert!(definition.prompt.len() > 200, "{stem} has a thin prompt");
        // Built-ins run on every provider: an alias might not map everywhere.
        assert_eq!(definition.model, None, "{stem} must inherit the model");
    }
    let names = |v: bool| -> Vec<String> { builtin(v).into_iter().map(|d| d.name).collect() };
    assert_eq!(names(false), ["Explore", "Plan", "general-purpose"]);
    assert_eq!(
        names(true),
        ["Explore", "Plan", "general-purpose", "Verification"]
    );
}

#[test]
fn read_only_builtins_cannot_write_or_recurse() {
    for definition in builtin(true) {
        let scope = definition.tool_scope().unwrap();
        let admits = |tool: &str| scope.as_ref().is_none_or(|s| s.admits(tool));
        let read_only = definition.name != "general-purpose";
        for tool in ["WriteFile", "EditFile", "Agent"] {
            assert_eq!(admits(tool), !read_only, "{} {tool}", definition.name);
        }
        for tool in ["ReadFile", "Grep", "Glob", "Bash", "mcp__x__y"] {
            assert!(admits(tool), "{} {tool}", definition.name);
        }
    }
}

#[test]
fn parses_every_field_in_both_spellings() {
    let text = "\u{feff}---\r\nname: Scout\r\ndescription: >\r\n  Looks\r\n  around.\r\ntools: Read, Grep, Bash, mcp__gh__*\r\ndisallowedTools: [Edit]\r\nmodel: claude-haiku-4-5\r\nmaxTurns: 12\r\npermissionMode: plan\r\nbackground: true\r\nisolation: worktree\r\ncolor: blue\r\n---\r\nYou scout.\r\n";
    let definition = parse(text).unwrap();
    assert_eq!(
        definition,
        AgentDefinition {
            name: "Scout".to_string(),
            description: "Looks around.".to_string(),
            tools: Some(
                ["ReadFile", "Grep", "Bash", "mcp__gh__*"]
                    .map(String::from)
                    .to_vec()
            ),
            disallowed_tools: vec!["EditFile".to_string()],
            model: Some("claude-haiku-4-5".to_string()),
            max_turns: Some(12),
            permission_mode: Some(PermissionMode::Plan),
            background: true,
            isolation: Some(Isolation::Worktree),
            budget: None,
            prompt: "You scout.".to_string(),
            source: DefinitionSource::User,
            path: None,
        }
    );
    let scope = definition.tool_scope().unwrap().unwrap();
    assert!(scope.admits("mcp__gh__issues") && scope.admits("ReadFile"));
    assert!(!scope.admits("EditFile") && !scope.admits("WriteFile"));
    assert_eq!(scope.label(), "agent type Scout");

    let plain = parse(&file_text("scout", "d")).unwrap();
    assert_eq!(
        plain.tool_scope().unwrap().map(|s| s.label().to_string()),
        None
    );
    assert_eq!(
        (plain.model, plain.max_turns, plain.background),
        (None, None, false)
    );
    let inherit = parse("---\nname: scout\ndescription: d\nmodel: inherit\n---\nb").unwrap();
    assert_eq!(inherit.model, None);
}

#[test]
fn bad_files_are_refused_with_the_reason_and_the_file() {
    let cases = [
        ("You are nobody.", "does not start with YAML front matter"),
        ("---\nname: scout\n---\nb", "bad front matter"),
        (
            "---\nname: scout\ndescription: d\nskills: [x]\n---\nb",
            "unknown field",
        ),
        ("---\nname: sc out\ndescription: d\n---\nb", "is not valid"),
        ("---\nname: -scout\ndescription: d\n---\nb", "is not valid"),
        (
            "---\nname: other\ndescription: d\n---\nb",
            "differs from the file name",
        ),
        (
            "---\nname: scout\ndescription: \"  \"\n---\nb",
            "description is empty",
        ),
        ("---\nname: scout\ndescription: d\n---\n \n", "body"),
        (
            "---\nname: scout\ndescription: d\nmodel: \"gpt 4; rm\"\n---\nb",
            "not a model name",
        ),
        (
            "---\nname: scout\ndescription: d\nmax_turns: 0\n---\nb",
            "out of range",
        ),
        (
            "---\nname: scout\ndescription: d\nmax_turns: 100000\n---\nb",
            "out of range",
        ),
        (
            "---\nname: scout\ndescription: d\npermission_mode: yolo\n---\nb",
            "permission_mode",
        ),
        (
            "---\nname: scout\ndescription: d\nisolation: vm\n---\nb",
            "isolation `vm`",
        ),
        (
            "---\nname: scout\ndescription: d\ntools: [\"Bash(rm *)\"]\n---\nb",
            "tools:",
        ),
        (
            "---\nname: scout\ndescription: d\ndisallowed_tools: \"a b\"\n---\nb",
            "tools:",
        ),
    ];
    for (text, want) in cases {
        let err = parse(text).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains(want), "{text:?}: {err:?} lacks {want:?}");
        assert!(err.contains("x/scout.md"), "{err}");
    }
    let long = format!(
        "---\nname: scout\ndescription: {}\n---\nb",
        "d".repeat(1025)
    );
    assert!(
        parse(&long)
            .unwrap_err()
            .to_string()
            .contains("longer than")
    );
}

#[test]
fn project_overrides_user_overrides_builtin_whole_and_case_insensitively() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let user_dir = home.path().join("agents");
    let project_dir = project.path().join(".roocode/agents");
    write(
        &user_dir,
        "explore.md",
        "---\nname: explore\ndescription: mine\nmodel: haiku\n---\nUser explore.",
    );
    write(&user_dir, "scout.md", &file_text("scout", "user scout"));
    write(
        &project_dir,
        "Scout.md",
        "---\nname: Scout\ndescription: project scout\ntools: [ReadFile]\n---\nProject scout.",
    );

    let trusted = AgentCatalog::new(home.path(), project.path(), true, false).scan();
    assert!(trusted.warnings.is_empty(), "{:?}", trusted.warnings);
    assert_eq!(
        trusted.names(),
        ["explore", "general-purpose", "Plan", "Scout"]
    );
    let explore = trusted.get("EXPLORE").unwrap();
    // Whole-file override: nothing of the built-in's filter survives.
    assert_eq!(
        (explore.source, explore.prompt.as_str()),
        (DefinitionSource::User, "User explore.")
    );
    assert!(explore.disallowed_tools.is_empty());
    assert_eq!(explore.model.as_deref(), Some("haiku"));
    assert_eq!(
        explore.path.as_deref(),
        Some(user_dir.join("explore.md").as_path())
    );
    let scout = trusted.get("scout").unwrap();
    assert_eq!(
        (scout.source, scout.description.as_str()),
        (DefinitionSource::Project, "project scout")
    );

    // An untrusted project's definitions are not read at all.
    let untrusted = AgentCatalog::new(home.path(), project.path(), false, false).scan();
    assert_eq!(
        untrusted.get("scout").unwrap().source,
        DefinitionSource::User
    );
    assert!(untrusted.get("verification").is_none());
    assert_eq!(
        AgentCatalog::new(home.path(), project.path(), false, true)
            .scan()
            .get("verification")
            .unwrap()
            .source,
        DefinitionSource::BuiltIn
    );
}

#[test]
fn a_bad_user_file_is_skipped_with_a_warning_and_the_rest_load() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("agents");
    write(&dir, "good.md", &file_text("good", "fine"));
    write(&dir, "broken.md", "---\nname: broken\n---\nno description");
    write(
        &dir,
        "huge.md",
        &"x".repeat(MAX_DEFINITION_BYTES as usize + 1),
    );
    write(&dir, "notes.txt", "not a definition");
    write(&dir, "GOOD2.md", &file_text("GOOD2", "a"));
    write(&dir, "good2.md", &file_text("good2", "b"));
    std::os::unix::fs::symlink(dir.join("good.md"), dir.join("linked.md")).unwrap();
    // Shadowing a built-in with a broken file leaves the built-in in place.
    write(
        &dir,
        "plan.md",
        "---\nname: plan\ndescription: d\nrogue: 1\n---\nb",
    );

    let scan = AgentCatalog::new(home.path(), home.path(), false, false).scan();
    let warnings = scan.warnings.join("\n");
    for file in ["broken.md", "huge.md", "linked.md", "plan.md", "good2.md"] {
        assert!(
            warnings.contains(file),
            "no warning names {file}: {warnings}"
        );
    }
    assert_eq!(scan.warnings.len(), 5, "{warnings}");
    assert!(warnings.contains("a symlink"), "{warnings}");
    assert!(warnings.contains("case-insensitive"), "{warnings}");
    assert_eq!(scan.get("good").unwrap().source, DefinitionSource::User);
    assert_eq!(scan.get("good2").unwrap().description, "a");
    assert_eq!(scan.get("plan").unwrap().source, DefinitionSource::BuiltIn);
    assert!(scan.get("notes").is_none());
}

#[test]
fn a_new_or_changed_file_is_seen_by_the_next_scan() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("agents");
    let catalog = AgentCatalog::from_dirs(Some(dir.clone()), None);
    assert!(catalog.scan().agents.is_empty());
    write(&dir, "scout.md", &file_text("scout", "first"));
    assert_eq!(catalog.scan().get("scout").unwrap().description, "first");
    write(&dir, "scout.md", &file_text("scout", "second"));
    assert_eq!(catalog.scan().get("scout").unwrap().description, "second");
    fs::remove_file(dir.join("scout.md")).unwrap();
    assert!(catalog.scan().get("scout").is_none());
}

#[test]
fn names_are_validated() {
    for good in ["Explore", "general-purpose", "a", "my_agent-2"] {
        assert!(valid_name(good), "{good}");
    }
    for bad in ["", "-x", "_x", "a/b", "..", "a b", "é", &"x".repeat(65)] {
        assert!(!valid_name(bad), "{bad}");
    }
}
