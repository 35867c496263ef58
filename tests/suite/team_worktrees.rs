//! Teammates' worktrees under the real OS sandbox and path sandbox: the real
//! `roo-lead -p` started in a worktree made by `roo_team::worktree` (as a
//! teammate would be) runs scripted Bash and WriteFile calls in bypass mode.
//! A `git commit` there must succeed — it writes the repository's shared git
//! directory — while writes to a sibling's worktree, the lead's tree and its
//! `.roocode/config.yaml` fail on disk; a hook planted in the shared git directory
//! runs confined when the runtime merges with a sandboxed `Git`.
//!
//! Every directory lives under Cargo's target tmp dir, not the system temp dir,
//! which the sandbox leaves writable.

use std::path::{Path, PathBuf};

use roo_store::Name;
use roo_team::worktree::{Git, Workspace, prepare};
use roo_tests::{TempDir, TestCommand, bin, git};
use serde_json::Value;

struct World {
    root: TempDir,
}

impl World {
    fn new() -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("roo")).unwrap();
        root.write("project/README.md", "# demo\n");
        root.write("project/.roocode/config.yaml", "permission_mode: default\n");
        let project = root.join("project");
        roo_tests::git_repo_with_identity(&project);
        World { root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn git(&self) -> Git {
        Git::new()
            .env("HOME", self.path("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
    }

    fn worktree(&self, member: &str) -> PathBuf {
        let ws = prepare(
            &self.path("project"),
            &Name::parse("team").unwrap(),
            &Name::parse(member).unwrap(),
            &self.git(),
        )
        .unwrap();
        match ws {
            Workspace::Worktree(w) => w.path,
            other => panic!("no worktree: {other:?}"),
        }
    }

    /// `roo-lead -p` in `cwd`, bypass mode, the scripted model making `calls`.
    fn lead_in(&self, cwd: &Path, calls: &[Value]) -> TestCommand {
        let mut script = String::from("agents:\n  \"*\":\n");
        for call in calls {
            script.push_str(&format!("    - tool_calls:\n        - {call}\n"));
        }
        script.push_str("    - text: \"Done.\"\n");
        let script_path = self.root.write("script.yaml", script);
        TestCommand::new(bin("roo-lead"))
            .env("ROO_HOME", self.path("roo"))
            .env("HOME", self.path("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .current_dir(cwd)
            .args(["-p", "do it", "--provider", "script", "--script"])
            .arg(script_path)
            .args(["--permission-mode", "bypassPermissions"])
    }

    /// The tool results of the latest session, in order.
    fn tool_results(&self) -> Vec<String> {
        let mut sessions = Vec::new();
        for project in std::fs::read_dir(self.path("roo/projects")).unwrap() {
            for entry in std::fs::read_dir(project.unwrap().path()).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|x| x == "jsonl") {
                    sessions.push(path);
                }
            }
        }
        sessions.sort_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap());
        let text = std::fs::read_to_string(sessions.last().unwrap()).unwrap();
        let mut results = Vec::new();
        for line in text.lines() {
            let record: Value = serde_json::from_str(line).unwrap();
            if record["type"] != "message" {
                continue;
            }
            for block in record["message"]["content"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if block["type"] == "tool_result" {
                    results.push(block["content"].as_str().unwrap_or_default().to_string());
                }
            }
        }
        results
    }
}

fn bash(command: &str) -> Value {
    serde_json::json!({"name": "Bash", "input": {"command": command}})
}

fn write_file(path: &Path) -> Value {
    serde_json::json!({"name": "WriteFile", "input": {"path": path, "content": "pwned\n"}})
}

fn landlock_available(world: &World) -> bool {
    let out = world.lead_in(&world.path("project"), &[bash("true")]).run();
    !out.stderr().contains("sandbox is unavailable")
}

#[test]
fn a_sandboxed_git_commit_in_a_teammate_worktree_succeeds_and_writes_elsewhere_fail() {
    if let Some(why) = roo_tests::confinement_untestable(Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        eprintln!("skipped: {why}");
        return;
    }
    let world = World::new();
    if !landlock_available(&world) {
        eprintln!("skipped: this kernel has no Landlock");
        return;
    }
    let alice = world.worktree("alice");
    let bob = world.worktree("bob");
    let project = world.path("project");
    let out = world
        .lead_in(
            &alice,
            &[
                bash(
                    "echo work > work.txt && git add work.txt && git commit -q -m 'alice: work' \
                     && git log -1 --format=%s",
                ),
                // Everyday git in a worktree: stash, scratch branches, rebase.
                bash(
                    "echo more >> work.txt && git stash -q && git stash pop -q \
                     && git checkout -q -b scratch && git checkout -q roo/team/alice \
                     && git branch -q -D scratch && git commit -q -a -m 'alice: more' \
                     && git rebase -q main && git stash list | wc -l",
                ),
                bash(&format!("echo pwned > {}/pwned.txt", bob.display())),
                bash(&format!("echo pwned > {}/pwned.txt", project.display())),
                bash(&format!(
                    "echo pwned > {}",
                    project.join(".roocode/config.yaml").display()
                )),
                bash(&format!(
                    "echo pwned > {}/pwned.txt",
                    world.path("home").display()
                )),
            ],
        )
        .run();
    out.assert_ok();
    let results = world.tool_results();
    assert_eq!(results.len(), 6, "{results:#?}");
    // git may leave its detached auto-maintenance running, which the
    // supervisor ends with a note after the exit code.
    assert!(
        results[0].starts_with("alice: work\n\n[exit code 0]"),
        "the commit: {}",
        results[0]
    );
    assert!(
        results[1].starts_with("0\n\n[exit code 0]"),
        "no git errors: {}",
        results[1]
    );
    for result in &results[2..] {
        assert!(roo_tests::sandbox_refused(result), "{result}");
    }
    // Checked on disk, from the lead's repository.
    assert_eq!(
        git(&project, &["log", "--format=%s", "main..roo/team/alice"]),
        "alice: more\nalice: work\n"
    );
    assert!(!bob.join("pwned.txt").exists());
    assert!(!project.join("pwned.txt").exists());
    assert!(!world.path("home/pwned.txt").exists());
    assert_eq!(
        std::fs::read_to_string(project.join(".roocode/config.yaml")).unwrap(),
        "permission_mode: default\n"
    );
}

#[test]
fn a_teammates_file_tools_cannot_write_a_sibling_worktree_or_the_lead_config() {
    let world = World::new();
    let alice = world.worktree("alice");
    let bob = world.worktree("bob");
    let project = world.path("project");
    let out = world
        .lead_in(
            &alice,
            &[
                write_file(Path::new("own.txt")),
                write_file(&bob.join("README.md")),
                write_file(Path::new("../team+bob/new.txt")),
                write_file(&project.join(".roocode/config.yaml")),
                write_file(&project.join(".roocode/config.local.yaml")),
            ],
        )
        .run();
    out.assert_ok();
    let results = world.tool_results();
    assert_eq!(results.len(), 5, "{results:#?}");
    assert!(!results[0].contains("denied"), "{}", results[0]);
    for result in &results[1..] {
        assert!(
            result.contains("Permission denied") && result.contains("outside the project"),
            "{result}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(alice.join("own.txt")).unwrap(),
        "pwned\n"
    );
    assert_eq!(
        std::fs::read_to_string(bob.join("README.md")).unwrap(),
        "# demo\n"
    );
    assert!(!bob.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(project.join(".roocode/config.yaml")).unwrap(),
        "permission_mode: default\n"
    );
    assert!(!project.join(".roocode/config.local.yaml").exists());
}

/// A teammate can write the shared git directory (its commits go there), so it can plant
/// a hook there. When the runtime merges for the lead, that hook must run no freer than
/// the lead's own commands: `Git::sandboxed` confines it.
#[test]
fn a_hook_planted_by_a_teammate_runs_confined_when_the_runtime_merges() {
    use roo_agent::sandbox::{CommandSandbox, PolicyEnv, SandboxSettings};
    use roo_team::worktree::{Discovered, LeadRepo, MergeOutcome};
    if let Some(why) = roo_tests::confinement_untestable(Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        eprintln!("skipped: {why}");
        return;
    }
    let world = World::new();
    if !landlock_available(&world) {
        eprintln!("skipped: this kernel has no Landlock");
        return;
    }
    let project = world.path("project");
    let alice = world.worktree("alice");
    let escaped = world.path("home/hooked.txt");
    let hook = project.join(".git/hooks/post-merge");
    // The teammate commits its work and plants the hook, inside its own sandbox.
    world
        .lead_in(
            &alice,
            &[
                bash("echo work > work.txt && git add work.txt && git commit -q -m work"),
                bash(&format!(
                    "printf '#!/bin/sh\\necho pwned > {}\\n' > {} && chmod +x {}",
                    escaped.display(),
                    hook.display(),
                    hook.display()
                )),
            ],
        )
        .run()
        .assert_ok();
    assert!(hook.exists(), "the teammate could not plant the hook");
    let env = PolicyEnv {
        home: Some(world.path("home")),
        roo_home: world.path("roo"),
        temp_dirs: vec![PathBuf::from("/tmp"), PathBuf::from("/var/tmp")],
        sockets: Vec::new(),
    };
    let (sandbox, _) =
        CommandSandbox::for_agent(&project, &SandboxSettings::default(), &env, bin("roo-lead"));
    let sandboxed = world.git().sandboxed(sandbox);
    let Discovered::Repo(repo) = LeadRepo::discover(&project, &sandboxed).unwrap() else {
        panic!("not a repository");
    };
    let outcome = repo
        .merge(
            &Name::parse("team").unwrap(),
            &Name::parse("alice").unwrap(),
        )
        .unwrap();
    assert!(
        matches!(outcome, MergeOutcome::Merged { .. }),
        "{outcome:?}"
    );
    assert!(
        project.join("work.txt").exists(),
        "the merge did not happen"
    );
    assert!(
        !escaped.exists(),
        "the planted hook wrote outside the project during the runtime's merge"
    );
    // The hook did run (confined): without the sandbox it writes the file.
    git(&project, &["reset", "-q", "--hard", "HEAD~1"]);
    let Discovered::Repo(repo) = LeadRepo::discover(&project, &world.git()).unwrap() else {
        panic!("not a repository");
    };
    repo.merge(
        &Name::parse("team").unwrap(),
        &Name::parse("alice").unwrap(),
    )
    .unwrap();
    assert!(escaped.exists(), "control: the hook never ran at all");
}

/// The lead's Agent tool makes the teammate's worktree while the teammate starts, so the
/// sandbox cannot find the shared git directory in the checkout when it is built: the
/// runtime grants the one it verified. A commit there must work, and writes outside
/// must still fail.
#[test]
fn a_teammate_spawned_by_the_agent_tool_commits_in_its_sandboxed_worktree() {
    if let Some(why) = roo_tests::confinement_untestable(Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        eprintln!("skipped: {why}");
        return;
    }
    let world = World::new();
    if !landlock_available(&world) {
        eprintln!("skipped: this kernel has no Landlock");
        return;
    }
    let project = world.path("project");
    let script = format!(
        r#"agents:
  lead:
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew}}}}
    - tool_calls:
        - {{name: Agent, input: {{name: alice, description: "commits", prompt: "Commit your work."}}}}
    - text: "Waiting for alice."
    - text: "Done."
  alice:
    - tool_calls:
        - {{name: Bash, input: {{command: "echo work > work.txt && git add work.txt && git commit -q -m 'alice: work' && git log -1 --format=%s"}}}}
        - {{name: Bash, input: {{command: "echo pwned > {project}/pwned.txt"}}}}
    - text: "Committed."
"#,
        project = project.display()
    );
    let script_path = world.root.write("team-script.yaml", script);
    let out = TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", world.path("roo"))
        .env("HOME", world.path("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .current_dir(&project)
        .args(["-p", "do it", "--provider", "script", "--script"])
        .arg(script_path)
        .args(["--permission-mode", "bypassPermissions", "--trust-project"])
        .args(["--team-timeout", "60"])
        .run();
    out.assert_ok();
    let transcript =
        std::fs::read_to_string(world.path("roo/teams/crew/transcripts/alice.jsonl")).unwrap();
    assert!(
        transcript.contains("alice: work\\n\\n[exit code 0]"),
        "{transcript}"
    );
    assert!(
        transcript.contains("Read-only file system") || transcript.contains("Permission denied"),
        "{transcript}"
    );
    assert_eq!(
        git(&project, &["log", "--format=%s", "main..roo/crew/alice"]),
        "alice: work\n"
    );
    assert!(!project.join("pwned.txt").exists());
}
