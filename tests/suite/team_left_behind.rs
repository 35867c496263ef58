//! Issue 32 item 4, runs that end with nothing hidden: a `roo-lead -p` team run whose
//! model forgets TeamDelete says on stderr that its team is left and what it holds (the
//! teammate's unmerged commit, its uncommitted and git-ignored files, where, and the
//! commands that merge or delete them); the same command run again refuses the leftover
//! team — its TeamCreate and named Agent call fail — and exits 1 saying so, with the
//! same inventory. The teammate is hostile: its commit subject holds a terminal escape
//! sequence, and its clone's config names an fsmonitor program that must never run.
//!
//! Real processes, real git, the scripted model; every directory lives under Cargo's
//! target tmp dir (the command sandbox leaves the system temp dir writable).

use std::path::{Path, PathBuf};

use roo_tests::{TempDir, TestCommand, Tmux, bin, git, wait_until};

struct World {
    root: TempDir,
}

impl World {
    fn new() -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("roo")).unwrap();
        root.write("project/README.md", "# demo\n");
        root.write("project/.gitignore", "*.log\n");
        roo_tests::git_repo_with_identity(&root.join("project"));
        World { root }
    }

    fn project(&self) -> PathBuf {
        self.root.join("project")
    }

    fn canary(&self) -> PathBuf {
        self.root.join("fsmonitor-ran")
    }

    /// The script of both runs: TeamCreate crew, spawn alice, wait for her, end
    /// without TeamDelete.
    fn script(&self) -> PathBuf {
        let script = format!(
            r#"agents:
  lead:
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew}}}}
    - tool_calls:
        - {{name: Agent, input: {{name: alice, description: "works", prompt: "Commit work.txt."}}}}
    - text: "Waiting for alice."
    - text: "Done."
    - text: "Done."
    - text: "Done."
  alice:
    - tool_calls:
        - {{name: Bash, input: {{command: "echo work > work.txt && git add work.txt && git commit -q -m \"$(printf 'alice: add work.txt \\033[2J')\" && echo draft > draft.txt && echo secret > notes.log && printf '#!/bin/sh\\ntouch {canary}\\n' > fsm.sh && chmod +x fsm.sh && git config core.fsmonitor \"$PWD/fsm.sh\" && echo ready"}}}}
    - text: "Committed work.txt; draft.txt and notes.log are not committed."
"#,
            canary = self.canary().display()
        );
        self.root.write("script.yaml", script)
    }

    /// The same `roo-lead -p` each time.
    fn lead(&self) -> TestCommand {
        let script = self.script();
        TestCommand::new(bin("roo-lead"))
            .env("ROO_HOME", self.root.join("roo"))
            .env("HOME", self.root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .current_dir(self.project())
            .args(["-p", "Have alice do the work."])
            .args(["--provider", "script", "--script"])
            .arg(script)
            .args(["--permission-mode", "bypassPermissions"])
            .args(["--team-timeout", "60"])
    }
}

/// What both runs say of the leftover team: alice, her commit (its escape sequence
/// shown, not sent), her uncommitted and ignored files in her clone, and the commands.
fn assert_inventory(stderr: &str, project: &Path) {
    let clone = project.join(".roocode/worktrees/crew+alice");
    for needle in [
        "alice (".to_string(),
        "1 unmerged commit(s) on branch roo/crew/alice (".to_string(),
        "alice: add work.txt \\u{1b}[2J".to_string(),
        format!("in clone {}: ", clone.display()),
        "draft.txt".to_string(),
        "git-ignored files (notes.log)".to_string(),
        format!("`git -C {} merge roo/crew/alice`", project.display()),
        "`roo-lead --team crew -p 'Merge the branches of alice with TeamMerge".to_string(),
        "`roo-mail team delete --team crew`".to_string(),
        format!("`rm -rf {}`", clone.display()),
        format!("`git -C {} branch -D roo/crew/alice`", project.display()),
    ] {
        assert!(stderr.contains(&needle), "{needle:?} in stderr:\n{stderr}");
    }
    assert!(!stderr.contains('\u{1b}'), "no raw escape:\n{stderr}");
}

#[test]
fn a_run_that_leaves_its_team_says_what_is_left_and_a_rerun_refuses_it_with_exit_1() {
    let world = World::new();
    let project = world.project();

    let first = world.lead().run();
    first.assert_code(0);
    let stderr = first.stderr();
    assert!(
        stderr
            .contains("team crew is left behind: the lead ended without deleting it (TeamDelete)"),
        "{stderr}"
    );
    assert_inventory(&stderr, &project);
    // The report fetched alice's commit onto the lead's branch, and ran nothing of hers.
    assert!(
        git(&project, &["log", "--format=%s", "HEAD..roo/crew/alice"])
            .starts_with("alice: add work.txt"),
    );
    assert!(!world.canary().exists(), "alice's fsmonitor ran");

    // The same command again: the leftover team is refused, not half used.
    let second = world.lead().run();
    second.assert_code(1);
    let stderr = second.stderr();
    for needle in [
        "the team was not formed as asked, so the run did not finish: TeamCreate of team crew \
         failed (failed to create team crew: a team of that name exists, left by an earlier run",
        "Agent of teammate alice failed (",
        "team crew was left by an earlier run, so this run could not create it",
    ] {
        assert!(stderr.contains(needle), "{needle:?} in stderr:\n{stderr}");
    }
    assert_inventory(&stderr, &project);
    assert!(!world.canary().exists(), "alice's fsmonitor ran");
    // Alice's work is where it was.
    let clone = project.join(".roocode/worktrees/crew+alice");
    assert_eq!(
        std::fs::read_to_string(clone.join("notes.log")).unwrap(),
        "secret\n"
    );
    assert_eq!(
        std::fs::read_to_string(clone.join("draft.txt")).unwrap(),
        "draft\n"
    );
}

/// The interactive lead the person leaves with its team says the same when it exits.
#[test]
fn the_interactive_lead_left_with_its_team_says_what_is_left_at_exit() {
    let world = World::new();
    let project = world.project();
    let command = format!(
        "{} --provider script --script {} --trust-project --teammate-mode in-process \
         --permission-mode bypassPermissions",
        bin("roo-lead").display(),
        world.script().display()
    );
    let env = [
        ("ROO_HOME", world.root.join("roo").display().to_string()),
        ("HOME", world.root.join("home").display().to_string()),
        ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
    ];
    let tmux = Tmux::start(&project, &env, &command);
    tmux.wait_for("the prompt", |s| s.contains('›'));
    tmux.type_text("Have alice do the work.");
    tmux.keys(&["Enter"]);
    // Alice's last file is written and her clone's config set: she is done.
    let clone = project.join(".roocode/worktrees/crew+alice");
    wait_until(
        "alice's work",
        std::time::Duration::from_secs(30),
        || {
            std::fs::read_to_string(clone.join(".git/config"))
                .ok()
                .filter(|c| c.contains("fsmonitor"))
        },
        || tmux.screen(),
    );
    tmux.type_text("/exit");
    tmux.keys(&["Enter"]);
    assert_eq!(tmux.wait_exit(), 0);
    let screen = tmux.joined_screen();
    assert!(
        screen
            .contains("team crew is left behind: the lead ended without deleting it (TeamDelete)"),
        "{screen}"
    );
    assert_inventory(&screen, &project);
    assert!(!world.canary().exists(), "alice's fsmonitor ran");
}

/// A named Agent call that fails — here with no team to spawn into — is a run that did
/// not finish, even though the model then answered: exit 1, said on stderr and in the
/// json result; no team is left, so there is no notice.
#[test]
fn a_failed_named_agent_call_exits_1_and_says_so() {
    let world = World::new();
    let script = world.root.write(
        "alone.yaml",
        r#"agents:
  lead:
    - tool_calls:
        - {name: Agent, input: {name: bob, description: "helps", prompt: "Help."}}
    - text: "Done without bob."
"#,
    );
    let out = TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", world.root.join("roo"))
        .env("HOME", world.root.join("home"))
        .current_dir(world.project())
        .args(["-p", "Get bob to help.", "--output-format", "json"])
        .args(["--provider", "script", "--script"])
        .arg(script)
        .run();
    out.assert_code(1);
    out.assert_stderr_contains(
        "the team was not formed as asked, so the run did not finish: Agent of teammate bob \
         failed (failed to spawn a teammate: you lead no team)",
    );
    assert!(!out.stderr().contains("left behind"), "{}", out.stderr());
    let result: serde_json::Value = serde_json::from_str(out.stdout().trim()).unwrap();
    assert_eq!(result["is_error"], true, "{result}");
    assert_eq!(result["result"], "Done without bob.", "{result}");
    assert!(
        result["team_calls_failed"]
            .as_str()
            .unwrap_or_default()
            .contains("Agent of teammate bob failed"),
        "{result}"
    );
}

/// The report of a left team runs git in the teammate's clone, which reads the config
/// the teammate wrote: a clean filter that never ends (`sleep`) on a file whose stat
/// changed would hang `git status`, and with it the lead's exit, for ever. Each of
/// those git runs is bounded: the run ends, saying alice's work could not be read.
#[test]
fn a_clone_whose_git_never_ends_does_not_hang_the_run_at_exit() {
    let world = World::new();
    let token = format!(
        "roo-left-sleeper-{}",
        world.root.path().file_name().unwrap().to_string_lossy()
    );
    let alice = serde_json::json!({"name": "Bash", "input": {"command": format!(
        "echo work > work.txt && git add work.txt && git commit -q -m 'alice: add work.txt' \
         && git config filter.slow.clean \"sh -c 'sleep 600' {token}\" \
         && echo 'work.txt filter=slow' > .gitattributes \
         && touch -m -d @1000000000 work.txt && echo ready"
    )}});
    let script = format!(
        r#"agents:
  lead:
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew}}}}
    - tool_calls:
        - {{name: Agent, input: {{name: alice, description: "works", prompt: "Commit work.txt."}}}}
    - text: "Waiting for alice."
    - text: "Done."
    - text: "Done."
    - text: "Done."
  alice:
    - tool_calls:
        - {alice}
    - text: "Committed work.txt."
"#
    );
    let script = world.root.write("script-slow.yaml", script);
    let mut run = TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", world.root.join("roo"))
        .env("HOME", world.root.join("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .current_dir(world.project())
        .args(["-p", "Have alice do the work."])
        .args(["--provider", "script", "--script"])
        .arg(script)
        .args(["--permission-mode", "bypassPermissions"])
        .args(["--team-timeout", "60"])
        .spawn();
    wait_until(
        "the run to end",
        std::time::Duration::from_secs(150),
        || run.child().try_wait().unwrap().map(|_| ()),
        || "roo-lead still runs: the report of the left team hangs".to_string(),
    );
    let out = run.wait();
    let stderr = out.stderr();
    assert!(
        stderr.contains("team crew is left behind") && stderr.contains("took longer than 15 s"),
        "{stderr}"
    );
    wait_until(
        "the filter to be ended",
        std::time::Duration::from_secs(10),
        || {
            let ps = std::process::Command::new("pgrep")
                .args(["-f", &token])
                .output()
                .unwrap();
            (!ps.status.success()).then_some(())
        },
        || format!("a process named {token} still runs"),
    );
}
