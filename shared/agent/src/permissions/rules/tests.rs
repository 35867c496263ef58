//! Tests of rule parsing, matching and source priority.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use super::*;

fn decide_command(rules: &RuleSet, command: &str) -> Option<(RuleKind, Option<Source>)> {
    let parsed = ParsedCommand::parse(command);
    let root = Path::new("/project");
    let scope = crate::permissions::approvable::Scope {
        cwd: root,
        project_root: root,
    };
    let blockers: Vec<_> = parsed
        .segments
        .iter()
        .map(|s| crate::permissions::approvable::blocker(s, &scope))
        .collect();
    rules
        .decide(
            "Bash",
            &RuleTarget::Command {
                line: command,
                parsed: &parsed,
                blockers: &blockers,
            },
        )
        .map(|hit| (hit.kind, hit.source))
}

fn decide_path(rules: &RuleSet, tool: &str, relative: &str) -> Option<RuleKind> {
    let absolute = Path::new("/project").join(relative);
    let target = RuleTarget::Path(PathTarget {
        absolute: &absolute,
        relative: Some(Path::new(relative)),
    });
    rules.decide(tool, &target).map(|hit| hit.kind)
}

fn set(rules: &[(Source, RuleKind, &str)]) -> RuleSet {
    let mut set = RuleSet::new();
    for (source, kind, rule) in rules {
        set.add(*source, *kind, rule).unwrap();
    }
    set
}

use RuleKind::{Allow, Ask, Deny};
use Source::{Local, Project, User};

#[test]
fn parses_tool_and_pattern() {
    let rule = Rule::parse("  Bash(git *)  ").unwrap();
    assert_eq!(rule.as_str(), "Bash(git *)");
    assert!(Rule::parse("WriteFile").unwrap().content.is_none());
    assert!(Rule::parse("mcp__github__*").is_ok());
    for bad in ["", "Bash(", "Bash()", "(git *)", "Ba sh", "Bash(git *"] {
        let err = Rule::parse(bad).unwrap_err();
        assert!(
            err.to_string().starts_with("parse permission rule"),
            "{err}"
        );
    }
    // Parentheses inside the pattern are fine.
    let rule = Rule::parse("Bash((cd x && make))").unwrap();
    assert!(rule.matches_text("(cd x && make)"));
}

#[test]
fn command_patterns_glob_over_the_command_line() {
    let git = Rule::parse("Bash(git *)").unwrap();
    assert!(git.matches_text("git status"));
    assert!(
        git.matches_text("git"),
        "a single trailing ` *` is optional"
    );
    assert!(!git.matches_text("gitk"));
    assert!(!git.matches_text("legit status"));

    let legacy = Rule::parse("Bash(npm run test:*)").unwrap();
    assert!(legacy.matches_text("npm run test"));
    assert!(legacy.matches_text("npm run test --watch"));
    assert!(!legacy.matches_text("npm run testx"));

    let middle = Rule::parse("Bash(git * main)").unwrap();
    assert!(middle.matches_text("git push origin main"));
    assert!(!middle.matches_text("git push origin main2"));

    let exact = Rule::parse("Bash(npm install)").unwrap();
    assert!(exact.matches_text("npm install"));
    assert!(!exact.matches_text("npm install left-pad"));

    let regex_chars = Rule::parse("Bash(echo a.b+c?)").unwrap();
    assert!(regex_chars.matches_text("echo a.b+c?"));
    assert!(!regex_chars.matches_text("echo aXb+c?"));
}

#[test]
fn path_patterns_are_globs_relative_to_the_project() {
    let rules = set(&[
        (User, Allow, "ReadFile(src/**)"),
        (User, Allow, "EditFile(*.md)"),
        (User, Deny, "ReadFile(.env)"),
        (User, Allow, "WriteFile(docs/*)"),
    ]);
    assert_eq!(decide_path(&rules, "ReadFile", "src/a/b.rs"), Some(Allow));
    assert_eq!(
        decide_path(&rules, "ReadFile", "src"),
        Some(Allow),
        "dir/** covers dir"
    );
    assert_eq!(decide_path(&rules, "ReadFile", "lib/a.rs"), None);
    assert_eq!(decide_path(&rules, "EditFile", "README.md"), Some(Allow));
    assert_eq!(
        decide_path(&rules, "EditFile", "docs/deep/x.md"),
        Some(Allow),
        "no `/`: any depth"
    );
    assert_eq!(decide_path(&rules, "EditFile", "x.mdx"), None);
    assert_eq!(decide_path(&rules, "ReadFile", "config/.env"), Some(Deny));
    assert_eq!(decide_path(&rules, "WriteFile", "docs/a.txt"), Some(Allow));
    assert_eq!(
        decide_path(&rules, "WriteFile", "docs/sub/a.txt"),
        None,
        "`*` stays in one directory"
    );
    // The tool must match too.
    assert_eq!(decide_path(&rules, "WriteFile", "src/a.rs"), None);
}

#[test]
fn root_anchored_path_patterns_match_only_at_the_root() {
    let rules = set(&[
        (User, Allow, "WriteFile(:/config)"),
        (User, Allow, "EditFile(:/src/**)"),
        (User, Allow, "EditFile(./notes.md)"),
    ]);
    assert_eq!(decide_path(&rules, "WriteFile", "config"), Some(Allow));
    assert_eq!(decide_path(&rules, "WriteFile", ".git/config"), None);
    assert_eq!(decide_path(&rules, "WriteFile", "sub/config"), None);
    assert_eq!(decide_path(&rules, "EditFile", "src/a/b.rs"), Some(Allow));
    assert_eq!(decide_path(&rules, "EditFile", "lib/src/b.rs"), None);
    // Existing spellings keep their meaning: `./name` still matches at any depth.
    assert_eq!(
        decide_path(&rules, "EditFile", "docs/notes.md"),
        Some(Allow)
    );
}

#[test]
fn literal_path_patterns_match_exactly_their_path() {
    for (path, pattern) in [
        ("config", ":/config"),
        ("a[1]*.txt", ":/a\\[1\\]\\*.txt"),
        ("{x,y}?", ":/\\{x,y\\}\\?"),
        ("~", ":/\\~"),
        ("src/main.rs", "src/main.rs"),
    ] {
        assert_eq!(literal_path_pattern(Path::new(path)), pattern);
        let rules = set(&[(User, Allow, &format!("WriteFile({pattern})"))]);
        assert_eq!(
            decide_path(&rules, "WriteFile", path),
            Some(Allow),
            "{path}"
        );
    }
    let rules = set(&[(User, Allow, "WriteFile(:/a\\[1\\]\\*.txt)")]);
    assert_eq!(decide_path(&rules, "WriteFile", "a1-b.txt"), None);
    assert_eq!(decide_path(&rules, "WriteFile", "sub/a[1]*.txt"), None);
    assert_eq!(escape_glob(Path::new(":x/**")), "\\:x/\\*\\*");
}

#[test]
fn absolute_path_patterns_match_outside_the_project() {
    let rules = set(&[(User, Allow, "ReadFile(/tmp/shared/**)")]);
    let absolute = Path::new("/tmp/shared/x/y.txt");
    let target = RuleTarget::Path(PathTarget {
        absolute,
        relative: None,
    });
    assert_eq!(
        rules.decide("ReadFile", &target).map(|h| h.kind),
        Some(Allow)
    );
    let absolute = Path::new("/tmp/other.txt");
    let target = RuleTarget::Path(PathTarget {
        absolute,
        relative: None,
    });
    assert_eq!(rules.decide("ReadFile", &target), None);
}

#[test]
fn tool_names_may_use_wildcards_and_bare_rules_match_any_target() {
    let rules = set(&[(User, Allow, "mcp__github__*"), (User, Deny, "WriteFile")]);
    assert_eq!(
        rules
            .decide("mcp__github__create_issue", &RuleTarget::None)
            .map(|h| h.kind),
        Some(Allow)
    );
    assert_eq!(rules.decide("mcp__gitlab__x", &RuleTarget::None), None);
    assert_eq!(
        decide_path(&rules, "WriteFile", "anything/at/all"),
        Some(Deny)
    );
    // A pattern rule never matches a call without a target.
    let rules = set(&[(User, Allow, "Agent(explore)")]);
    assert_eq!(rules.decide("Agent", &RuleTarget::None), None);
}

#[test]
fn regression_local_deny_beats_project_allow() {
    // A known failure of rule merging: a project allow overturning a local deny.
    let rules = set(&[
        (Project, Allow, "Bash(git *)"),
        (Local, Deny, "Bash(git push *)"),
    ]);
    assert_eq!(
        decide_command(&rules, "git push origin feature"),
        Some((Deny, Some(Local)))
    );
    assert_eq!(
        decide_command(&rules, "git status"),
        Some((Allow, Some(Project)))
    );
}

#[test]
fn regression_local_allow_beats_project_deny() {
    let rules = set(&[
        (Project, Deny, "Bash(git push *)"),
        (Local, Allow, "Bash(git push origin feature)"),
    ]);
    assert_eq!(
        decide_command(&rules, "git push origin feature"),
        Some((Allow, Some(Local)))
    );
    assert_eq!(
        decide_command(&rules, "git push origin other"),
        Some((Deny, Some(Project)))
    );
}

#[test]
fn project_beats_user_and_paths_follow_the_same_priority() {
    let rules = set(&[
        (User, Deny, "EditFile(src/**)"),
        (Project, Allow, "EditFile(src/**)"),
    ]);
    assert_eq!(decide_path(&rules, "EditFile", "src/a.rs"), Some(Allow));
    let rules = set(&[
        (User, Allow, "EditFile(src/**)"),
        (Project, Ask, "EditFile(src/**)"),
    ]);
    assert_eq!(decide_path(&rules, "EditFile", "src/a.rs"), Some(Ask));
}

#[test]
fn within_one_source_deny_beats_ask_beats_allow() {
    let rules = set(&[
        (Project, Allow, "Bash(cargo *)"),
        (Project, Ask, "Bash(cargo publish *)"),
        (Project, Deny, "Bash(cargo publish --allow-dirty *)"),
    ]);
    assert_eq!(
        decide_command(&rules, "cargo test").map(|d| d.0),
        Some(Allow)
    );
    assert_eq!(
        decide_command(&rules, "cargo publish").map(|d| d.0),
        Some(Ask)
    );
    assert_eq!(
        decide_command(&rules, "cargo publish --allow-dirty").map(|d| d.0),
        Some(Deny)
    );
}

#[test]
fn allow_needs_every_part_of_a_compound_command() {
    let rules = set(&[(Project, Allow, "Bash(git *)")]);
    assert_eq!(
        decide_command(&rules, "git add . && git commit -m 'x'").map(|d| d.0),
        Some(Allow)
    );
    assert_eq!(decide_command(&rules, "git status && curl -s x | sh"), None);
    assert_eq!(decide_command(&rules, "git status; rm -rf build"), None);
    assert_eq!(
        decide_command(&rules, "git log $(rm -rf build)"),
        None,
        "substitution is never allowed by a pattern"
    );
    assert_eq!(decide_command(&rules, "git log `whoami`"), None);
}

#[test]
fn exact_rules_approve_exactly_that_compound_command() {
    let rules = set(&[(Local, Allow, "Bash(cd web && npm ci)")]);
    assert_eq!(
        decide_command(&rules, "cd web  &&  npm ci").map(|d| d.0),
        Some(Allow)
    );
    assert_eq!(decide_command(&rules, "cd web && npm ci && rm -rf x"), None);
}

#[test]
fn allows_from_several_sources_can_cover_the_parts_together() {
    let rules = set(&[
        (User, Allow, "Bash(git *)"),
        (Project, Allow, "Bash(cargo *)"),
    ]);
    assert_eq!(
        decide_command(&rules, "cargo fmt && git diff"),
        Some((Allow, None))
    );
    // But never past a deny or ask anywhere.
    let rules = set(&[
        (User, Allow, "Bash(git *)"),
        (Project, Allow, "Bash(cargo *)"),
        (User, Ask, "Bash(git push *)"),
    ]);
    assert_eq!(
        decide_command(&rules, "cargo fmt && git push"),
        Some((Ask, Some(User)))
    );
}

#[test]
fn deny_and_ask_see_through_chains_quotes_and_wrappers() {
    let rules = set(&[(User, Deny, "Bash(rm *)"), (User, Allow, "Bash(echo *)")]);
    for command in [
        "rm x",
        "echo hi && rm x",
        "echo hi; \"rm\" x",
        "sudo rm x",
        "env FOO=1 rm x",
        "nohup rm x &",
        "echo $(rm x)",
        "bash -c 'rm x'",
        "FOO=bar rm x",
    ] {
        assert_eq!(
            decide_command(&rules, command).map(|d| d.0),
            Some(Deny),
            "{command}"
        );
    }
    assert_eq!(
        decide_command(&rules, "echo rm x").map(|d| d.0),
        Some(Allow)
    );
}

#[test]
fn allow_does_not_see_through_wrappers() {
    let rules = set(&[(User, Allow, "Bash(cargo test *)")]);
    assert_eq!(
        decide_command(&rules, "cargo test --all").map(|d| d.0),
        Some(Allow)
    );
    assert_eq!(decide_command(&rules, "LD_PRELOAD=x.so cargo test"), None);
    assert_eq!(decide_command(&rules, "sudo cargo test"), None);
}

#[test]
fn duplicate_rules_are_kept_once() {
    let mut rules = RuleSet::new();
    rules.add(Local, Allow, "Bash(ls *)").unwrap();
    rules.add(Local, Allow, "Bash(ls *)").unwrap();
    assert_eq!(rules.source(Local).allow.len(), 1);
    assert!(!rules.is_empty());
    assert!(RuleSet::new().is_empty());
}

#[test]
fn regression_misspelt_tool_names_and_odd_spacing_are_errors() {
    for bad in [
        "bash(git *)",
        "BASH",
        "readfile(.env)",
        "Bsah(git *)",
        "ReadFlie(.env)",
        "Bash (git *)",
        "Bash( git *)",
        "Bash(git * )",
    ] {
        let err = Rule::parse(bad).unwrap_err();
        assert!(
            err.message.contains("did you mean") || err.message.contains("remove the space"),
            "{bad}: {err}"
        );
    }
    assert!(
        Rule::parse("bash(git *)")
            .unwrap_err()
            .message
            .contains("`Bash`")
    );
    for good in [
        "Bash",
        "mcp__github__*",
        "TaskCreate",
        "SendMessage",
        "Bash(git  status)",
    ] {
        assert!(Rule::parse(good).is_ok(), "{good}");
    }
    // Runs of spaces in a command pattern mean one space, as in a command.
    assert!(
        Rule::parse("Bash(git  status)")
            .unwrap()
            .matches_text("git status")
    );
}

#[test]
fn regression_an_untrusted_projects_ask_rule_does_not_lift_a_user_deny() {
    let mut rules = set(&[
        (User, Deny, "Bash(curl *)"),
        (User, Deny, "ReadFile(.env)"),
        (Project, Ask, "Bash(curl *)"),
        (Local, Ask, "ReadFile(.env)"),
    ]);
    // Trusted: the project's rules outrank the user's, as documented.
    assert_eq!(
        decide_command(&rules, "curl -s example.org"),
        Some((Ask, Some(Project)))
    );
    rules.set_project_narrows_only(true);
    assert_eq!(
        decide_command(&rules, "curl -s example.org"),
        Some((Deny, Some(User)))
    );
    assert_eq!(decide_path(&rules, "ReadFile", ".env"), Some(Deny));
    // An ask with no deny below it still narrows an allow.
    let mut rules = set(&[
        (User, Allow, "Bash(git *)"),
        (Project, Ask, "Bash(git push *)"),
    ]);
    rules.set_project_narrows_only(true);
    assert_eq!(
        decide_command(&rules, "git push origin x"),
        Some((Ask, Some(Project)))
    );
}
