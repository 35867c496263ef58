//! A whole team from one `roo-lead -p`: the lead creates the team and two tasks, spawns
//! two in-process teammates with its Agent tool, each claims a task, commits a file in
//! its own worktree and completes it, alice tells bob, bob tells the lead, and the lead
//! merges both branches with TeamMerge (`--no-ff`). Everything is checked on
//! disk: the files on the lead's branch, two merge commits, the tasks, the receipts, no
//! teammate left running. Every model is the scripted provider, picked by agent name.
//!
//! Directories live under Cargo's target tmp dir (the command sandbox leaves the system
//! temp dir writable, so a test there would prove less).

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_store::{MemberState, Name, ReadFilter, RooHome, TaskId, TaskStatus, Team};
use roo_tests::{TempDir, TestCommand, bin, git, process_gone, read_pid, wait_until};
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
        let project = root.join("project");
        roo_tests::git_repo_with_identity(&project);
        World { root }
    }

    fn project(&self) -> PathBuf {
        self.root.join("project")
    }

    /// `roo-lead -p` in the project, bypass mode, stream-json, with `script`.
    fn lead(&self, script: &str) -> TestCommand {
        self.lead_in_mode(script, "bypassPermissions")
    }

    /// The same in permission mode `mode`.
    fn lead_in_mode(&self, script: &str, mode: &str) -> TestCommand {
        let script = self.root.write("script.yaml", script);
        TestCommand::new(bin("roo-lead"))
            .env("PATH", path_with_bins())
            .env("ROO_HOME", self.root.join("roo"))
            .env("HOME", self.root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .current_dir(self.project())
            .args(["-p", "Ship a.txt and b.txt with two teammates."])
            .args(["--provider", "script", "--script"])
            .arg(script)
            .args(["--permission-mode", mode])
            .args(["--output-format", "stream-json"])
    }

    fn team(&self) -> Team {
        Team::open(
            &RooHome::new(self.root.join("roo")),
            Name::parse_as("team", "crew").unwrap(),
        )
        .unwrap()
    }

    fn git_out(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(self.project())
            .env("HOME", self.root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }
}

/// The lead: TeamCreate and two tasks; spawn bob, then alice (bob's first model request
/// comes before alice can message him); wait; merge both branches once bob reports
/// "both done". Spare "Waiting." turns answer the idle notifications, however they are
/// batched. Bob stays busy (his Bash waits for alice's message with `roo-mail`) until he
/// has told the lead, so the lead never sees everyone idle before that.
const SPAWNING_LEAD: &str = r#"
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew, description: "two files"}}
        - {name: TaskCreate, input: {subject: "Write a.txt"}}
        - {name: TaskCreate, input: {subject: "Write b.txt"}}
    - tool_calls:
        - {name: Agent, input: {name: bob, description: "writes b", prompt: "Claim task 2, commit b.txt, complete it."}}
        - {name: Agent, input: {name: alice, description: "writes a", prompt: "Claim task 1, commit a.txt, complete it, tell bob."}}
    - text: "Waiting for my teammates."
    - when: {last_user_contains: "both done"}
      tool_calls:
        - {name: TeamMerge, input: {name: alice}}
        - {name: TeamMerge, input: {name: bob}}
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
"#;

/// Alice and bob, in-process or as `roo-worker`s.
const TEAMMATES: &str = r#"
  alice:
    - tool_calls:
        - {name: TaskUpdate, input: {id: "1", owner: alice}}
        - {name: Bash, input: {command: "echo a > a.txt && git add a.txt && git commit -qm 'alice: add a.txt'"}}
        - {name: TaskUpdate, input: {id: "1", status: completed}}
        - {name: SendMessage, input: {to: bob, summary: "a.txt committed", message: "a.txt is committed on my branch"}}
    - text: "Task 1 done."
  bob:
    - tool_calls:
        - {name: TaskUpdate, input: {id: "2", owner: bob}}
        - {name: Bash, input: {command: "echo b > b.txt && git add b.txt && git commit -qm 'bob: add b.txt'"}}
        - {name: TaskUpdate, input: {id: "2", status: completed}}
        - {name: Bash, input: {command: "until roo-mail read --unread | grep -q 'a.txt is committed'; do sleep 0.05; done; echo alice wrote"}}
    - when: {last_user_contains: "a.txt is committed"}
      tool_calls:
        - {name: SendMessage, input: {to: lead, summary: "both done", message: "alice says a.txt is committed; b.txt is committed too"}}
    - text: "Told the lead."
"#;

/// A script with `lead` as the lead's turns and [`TEAMMATES`].
fn script(lead: &str) -> String {
    format!(
        "agents:\n  lead:\n{}{}",
        lead.trim_start_matches('\n'),
        TEAMMATES.trim_start_matches('\n')
    )
}

/// `PATH` with this build's binaries first (`roo-mail` in teammates' Bash).
fn path_with_bins() -> String {
    let bins: PathBuf = bin("roo-mail").parent().unwrap().to_path_buf();
    format!(
        "{}:{}",
        bins.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad json line {l}: {e}")))
        .collect()
}

/// What the two-teammate job leaves on disk: both files on the lead's branch through two
/// `--no-ff` merge commits, each teammate's commit on its branch, both tasks completed
/// by their owners, alice's note to bob and bob's report to the lead delivered.
fn assert_team_job_done(world: &World) {
    // Both files on the lead's branch, each through a --no-ff merge commit.
    assert_eq!(
        std::fs::read_to_string(world.project().join("a.txt")).unwrap(),
        "a\n"
    );
    assert_eq!(
        std::fs::read_to_string(world.project().join("b.txt")).unwrap(),
        "b\n"
    );
    assert_eq!(
        world.git_out(&["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "main"
    );
    let merges = world.git_out(&["log", "--merges", "--format=%s", "main"]);
    assert_eq!(merges.lines().count(), 2, "{merges}");
    assert!(
        merges.contains("roo/crew/alice") && merges.contains("roo/crew/bob"),
        "{merges}"
    );
    // Each commit was made in the teammate's worktree, on its branch.
    let alice_log = world.git_out(&["log", "--format=%s", "roo/crew/alice"]);
    assert!(alice_log.starts_with("alice: add a.txt"), "{alice_log}");
    let bob_log = world.git_out(&["log", "--format=%s", "roo/crew/bob"]);
    assert!(bob_log.starts_with("bob: add b.txt"), "{bob_log}");

    let team = world.team();
    let tasks = team.tasks();
    for (id, owner) in [("1", "alice"), ("2", "bob")] {
        let task = tasks.get(&TaskId::parse(id).unwrap()).unwrap();
        assert_eq!(task.status, TaskStatus::Completed, "task {id}");
        assert_eq!(
            task.owner.as_ref().map(Name::as_str),
            Some(owner),
            "task {id}"
        );
    }
    // Messages were delivered into the recipients' conversations.
    let mailbox = team.mailbox();
    let everything = ReadFilter {
        include_archived: true,
        ..ReadFilter::default()
    };
    let to_bob = mailbox
        .read(&Name::parse("bob").unwrap(), &everything)
        .unwrap();
    let note = to_bob
        .iter()
        .find(|m| m.from.as_str() == "alice")
        .unwrap_or_else(|| panic!("alice's note to bob: {to_bob:#?}"));
    assert!(note.delivered_at.is_some(), "{note:#?}");
    let to_lead = mailbox
        .read(&Name::parse("lead").unwrap(), &everything)
        .unwrap();
    let report = to_lead
        .iter()
        .find(|m| m.from.as_str() == "bob" && m.text.contains("b.txt is committed"))
        .unwrap_or_else(|| panic!("bob's report: {to_lead:#?}"));
    assert!(report.delivered_at.is_some(), "{report:#?}");
}

#[test]
fn a_headless_lead_spawns_two_teammates_that_work_in_worktrees_and_merges_both() {
    let world = World::new();
    let out = world
        .lead(&script(SPAWNING_LEAD))
        .args(["--team-timeout", "60"])
        .run();
    out.assert_ok();
    let lines = json_lines(&out.stdout());

    assert_team_job_done(&world);
    let team = world.team();

    // Each worked in its own worktree; they ended with the lead: nobody is busy.
    assert!(
        world
            .project()
            .join(".roocode/worktrees/crew+alice/a.txt")
            .is_file()
    );
    let config = team.config().unwrap();
    for name in ["alice", "bob"] {
        let member = config.member(name).unwrap();
        assert_ne!(member.observed_state(), MemberState::Busy, "{member:#?}");
        assert_eq!(
            member.worktree_path.as_deref(),
            Some(
                world
                    .project()
                    .join(format!(".roocode/worktrees/crew+{name}"))
                    .canonicalize()
                    .unwrap()
                    .as_path()
            )
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "teammate_message" && l["from"] == "bob"),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "teammate_idle" && l["name"] == "alice"),
        "{lines:#?}"
    );
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result", "{result}");
}

/// The lead's finished tool calls of a stream-json run, in order: the line, and whether
/// the result was an error.
fn tool_results(lines: &[Value]) -> Vec<(String, bool)> {
    lines
        .iter()
        .filter(|l| l["type"] == "tool_end")
        .map(|l| (l.to_string(), l["is_error"] == true))
        .collect()
}

const UNKNOWN: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: SendMessage, input: {to: nobody, summary: "hello", message: "are you there?"}}
    - text: "Nobody is there."
"#;

#[test]
fn a_message_to_an_unknown_teammate_is_an_error_and_writes_no_inbox() {
    let world = World::new();
    let out = world.lead(UNKNOWN).run();
    out.assert_ok();
    let lines = json_lines(&out.stdout());
    let results = tool_results(&lines);
    let send = results
        .iter()
        .find(|(text, _)| text.contains("nobody"))
        .unwrap_or_else(|| panic!("the SendMessage result: {lines:#?}"));
    assert!(send.1, "not an error: {}", send.0);
    assert!(send.0.contains("no member has that name"), "{}", send.0);
    let inboxes = world.root.join("roo/teams/crew/inboxes");
    assert!(!inboxes.join("nobody.json").exists());
}

/// Alice's Bash runs `sleep` for five minutes; the lead gives up after its team timeout.
const HANGING: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Run the long job."}}
    - text: "Waiting for alice."
  alice:
    - tool_calls:
        - {name: Bash, input: {command: "echo $$ > sleeper.pid; exec sleep 300"}}
    - text: "Never reached."
"#;

#[test]
fn a_lead_that_exits_leaves_no_teammate_or_teammate_command_running() {
    let world = World::new();
    let lead = world.lead(HANGING).args(["--team-timeout", "1"]).spawn();
    let pid_file = world
        .project()
        .join(".roocode/worktrees/crew+alice/sleeper.pid");
    let sleeper = wait_until(
        "alice's command to start",
        Duration::from_secs(20),
        || read_pid(&pid_file),
        || format!("{} exists: {}", pid_file.display(), pid_file.exists()),
    );
    let out = lead.wait();
    out.assert_code(1);
    assert!(out.stderr().contains("alice"), "{}", out.stderr());
    // The lead is gone, and so is everything its teammate started.
    wait_until(
        "alice's sleep to end with the lead",
        Duration::from_secs(10),
        || process_gone(sleeper).then_some(()),
        || format!("process {sleeper} still runs"),
    );
}

/// The lead of a team that a person set up: the team, two tasks and two git worktrees
/// made by hand; it only waits and merges.
const WAITING_LEAD: &str = r#"
    - text: "Waiting for my teammates."
    - when: {last_user_contains: "both done"}
      tool_calls:
        - {name: TeamMerge, input: {name: alice}}
        - {name: TeamMerge, input: {name: bob}}
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
"#;

#[test]
fn a_headless_lead_merges_the_work_of_two_roo_workers_started_by_hand() {
    let world = World::new();
    let roo = world.root.join("roo");
    let home = world.root.join("home");
    let cli = |name: &str| {
        TestCommand::new(bin(name))
            .env("ROO_HOME", &roo)
            .env("HOME", &home)
    };
    cli("roo-mail")
        .args(["team", "create", "--team", "crew", "--lead", "lead"])
        .run()
        .assert_ok();
    for subject in ["Write a.txt", "Write b.txt"] {
        cli("roo-task")
            .args([
                "create",
                "--team",
                "crew",
                "--as",
                "lead",
                "--subject",
                subject,
            ])
            .run()
            .assert_ok();
    }
    let scripted = world.root.write("workers.yaml", script(WAITING_LEAD));
    let worker = |name: &str| {
        let tree = world.root.join(name);
        git(
            &world.project(),
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                &format!("roo/crew/{name}"),
                tree.to_str().unwrap(),
            ],
        );
        cli("roo-worker")
            .env("PATH", path_with_bins())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(["--team", "crew", "--name", name, "--cwd"])
            .arg(&tree)
            .args(["--prompt", "Take your task."])
            .args(["--provider", "script", "--script"])
            .arg(&scripted)
            .args(["--permission-mode", "bypassPermissions"])
            .spawn()
    };
    let team = world.team();
    let task_done = |id: &str| {
        team.tasks()
            .get(&TaskId::parse(id).unwrap())
            .unwrap()
            .status
            == TaskStatus::Completed
    };
    // Bob first: he has committed and waits for alice's message (busy) before she starts.
    let bob = worker("bob");
    wait_until(
        "bob to complete task 2",
        Duration::from_secs(30),
        || task_done("2").then_some(()),
        || format!("{:#?}", team.tasks().list(&Default::default())),
    );
    let lead = world
        .lead(&script(WAITING_LEAD))
        .args(["--team", "crew", "--team-timeout", "60"])
        .spawn();
    let alice = worker("alice");
    let out = lead.wait();
    out.assert_ok();
    assert_team_job_done(&world);
    // The workers are a person's processes: the lead left them running, idle.
    let config = team.config().unwrap();
    for (name, guard) in [("alice", &alice), ("bob", &bob)] {
        let member = config.member(name).unwrap();
        assert_eq!(member.pid, Some(guard.pid()), "{member:#?}");
        assert_eq!(member.backend_type, None, "{member:#?}");
        assert!(!process_gone(guard.pid() as i32), "{name} exited");
    }
}

/// A worker that claims task 1 and then runs a long command.
const CAROL: &str = r#"
agents:
  lead:
    - text: "Waiting for carol."
    - text: "Noted."
    - text: "Noted."
    - text: "Noted."
  carol:
    - tool_calls:
        - {name: TaskUpdate, input: {id: "1", owner: carol}}
        - {name: Bash, input: {command: "echo $$ > sleeper.pid; exec sleep 300"}}
    - text: "Never reached."
"#;

#[test]
fn a_killed_roo_worker_is_found_dead_by_the_lead_and_its_task_returns_to_pending() {
    let world = World::new();
    let roo = world.root.join("roo");
    let cli = |name: &str| {
        TestCommand::new(bin(name))
            .env("ROO_HOME", &roo)
            .env("HOME", world.root.join("home"))
    };
    cli("roo-mail")
        .args(["team", "create", "--team", "crew", "--lead", "lead"])
        .run()
        .assert_ok();
    cli("roo-task")
        .args([
            "create",
            "--team",
            "crew",
            "--as",
            "lead",
            "--subject",
            "long job",
        ])
        .run()
        .assert_ok();
    let scripted = world.root.write("carol.yaml", CAROL);
    let dir = world.root.join("carol");
    std::fs::create_dir_all(&dir).unwrap();
    let mut carol = cli("roo-worker")
        .args(["--team", "crew", "--name", "carol", "--cwd"])
        .arg(&dir)
        .args(["--prompt", "Take task 1."])
        .args(["--provider", "script", "--script"])
        .arg(&scripted)
        .args(["--permission-mode", "bypassPermissions"])
        .spawn();
    let sleeper = wait_until(
        "carol's long command",
        Duration::from_secs(30),
        || read_pid(&dir.join("sleeper.pid")),
        || "no pid file yet".to_string(),
    );
    let lead = world
        .lead(CAROL)
        .args(["--team", "crew", "--team-timeout", "60"])
        .spawn();
    let team = world.team();
    let task = TaskId::parse("1").unwrap();
    assert_eq!(
        team.tasks().get(&task).unwrap().status,
        TaskStatus::InProgress
    );
    // Wait for the lead to be watching (its first turn is over), then kill carol.
    wait_until(
        "the lead's team monitor",
        Duration::from_secs(30),
        || {
            std::fs::read_dir(roo.join("projects"))
                .ok()
                .and_then(|mut d| d.next())
                .map(|_| ())
        },
        || "no lead session yet".to_string(),
    );
    carol.child().kill().unwrap();
    let killed = std::time::Instant::now();
    let released = wait_until(
        "the lead to release carol's task",
        Duration::from_secs(20),
        || {
            let t = team.tasks().get(&task).unwrap();
            (t.status == TaskStatus::Pending && t.owner.is_none()).then_some(t)
        },
        || format!("{:#?}", team.tasks().get(&task)),
    );
    eprintln!(
        "carol's death handled by the lead after {:?}",
        killed.elapsed()
    );
    assert!(
        released
            .notes
            .iter()
            .any(|n| n.text.contains("reclaimed from carol")),
        "{released:#?}"
    );
    // Her task was never finished: the lead's model was told, and the run is no success.
    let out = lead.wait();
    out.assert_code(1);
    assert!(
        out.stderr()
            .contains("work was lost: a teammate died and these tasks were not finished: #1"),
        "{}",
        out.stderr()
    );
    let lines = json_lines(&out.stdout());
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "teammate_dead" && l["name"] == "carol"),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "teammate_message" && l["preview"] == "teammate carol died"),
        "{lines:#?}"
    );
    let member = team.config().unwrap().member("carol").unwrap().clone();
    assert_eq!(member.observed_state(), MemberState::Dead, "{member:#?}");
    // SIGKILL gives carol no chance to end her command; the test does.
    if !process_gone(sleeper) {
        let _ = std::process::Command::new("kill")
            .arg("-9")
            .arg(sleeper.to_string())
            .status();
    }
}

/// Alice commits on her branch and goes idle; the lead deletes the team.
const DELETING: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Commit a.txt."}}
    - text: "Waiting for alice."
    - when: {last_user_contains: "alice is idle"}
      tool_calls:
        - {name: TeamDelete, input: {}}
    - text: "Team deleted."
    - text: "Noted."
    - text: "Noted."
  alice:
    - tool_calls:
        - {name: Bash, input: {command: "echo a > a.txt && git add a.txt && git commit -qm 'alice: add a.txt'"}}
    - text: "Committed."
"#;

#[test]
fn team_delete_shuts_down_spawned_teammates_and_keeps_an_unmerged_worktree() {
    let world = World::new();
    let out = world.lead(DELETING).args(["--team-timeout", "60"]).run();
    out.assert_ok();
    let lines = json_lines(&out.stdout());
    let delete = tool_results(&lines)
        .into_iter()
        .find(|(line, _)| line.contains("TeamDelete"))
        .unwrap_or_else(|| panic!("a TeamDelete result: {lines:#?}"));
    assert!(!delete.1, "{}", delete.0);
    assert!(delete.0.contains("deleted team crew"), "{}", delete.0);
    assert!(delete.0.contains("shut down: alice"), "{}", delete.0);
    assert!(
        delete.0.contains("roo/crew/alice") && delete.0.contains("unmerged"),
        "{}",
        delete.0
    );
    assert!(!world.root.join("roo/teams/crew").exists());
    // The worktree with alice's commit is kept for the lead to merge.
    let kept = world.project().join(".roocode/worktrees/crew+alice/a.txt");
    assert!(kept.is_file());
    let log = world.git_out(&["log", "--format=%s", "roo/crew/alice"]);
    assert!(log.starts_with("alice: add a.txt"), "{log}");
}

/// Alice tries a write the user's uncommitted local config denies, then another.
const DENIED: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Write the files."}}
    - text: "Waiting for alice."
    - text: "Noted."
    - text: "Noted."
  alice:
    - tool_calls:
        - {name: WriteFile, input: {path: secret.txt, content: "leaked\n"}}
        - {name: WriteFile, input: {path: ok.txt, content: "fine\n"}}
    - text: "Done."
"#;

#[test]
fn a_spawned_teammate_obeys_the_leads_uncommitted_local_deny_rules() {
    let world = World::new();
    // Not committed, so not in the teammate's worktree: it applies only if the teammate
    // reads the lead's config.
    world.root.write(
        "project/.roocode/config.local.yaml",
        "permissions:\n  deny:\n    - \"WriteFile(secret.txt)\"\n",
    );
    let out = world.lead(DENIED).args(["--team-timeout", "60"]).run();
    out.assert_ok();
    let tree = world.project().join(".roocode/worktrees/crew+alice");
    assert_eq!(
        std::fs::read_to_string(tree.join("ok.txt")).unwrap(),
        "fine\n"
    );
    assert!(
        !tree.join("secret.txt").exists(),
        "the deny rule was not applied"
    );
}

/// The interactive lead spawns alice; she says hello and asks to run a command.
const INTERACTIVE: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Say hello, then write hi.txt."}}
    - text: "Alice is on it."
    - text: "Noted."
    - text: "Noted."
  alice:
    - tool_calls:
        - {name: SendMessage, input: {to: lead, summary: "hello lead", message: "hello from alice"}}
        - {name: Bash, input: {command: "echo hi > hi.txt"}}
    - text: "Done."
"#;

#[test]
fn the_interactive_lead_shows_a_spawned_teammates_preview_question_and_state() {
    let world = World::new();
    let script = world.root.write("interactive.yaml", INTERACTIVE);
    let command = format!(
        "{} --provider script --script {} --trust-project --teammate-mode in-process",
        bin("roo-lead").display(),
        script.display()
    );
    let tmux = roo_tests::Tmux::start(
        &world.project(),
        &[
            ("ROO_HOME", world.root.join("roo").display().to_string()),
            ("HOME", world.root.join("home").display().to_string()),
            ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
        ],
        &command,
    );
    tmux.wait_for("the prompt", |s| s.contains("RooCode") && s.contains('›'));
    tmux.type_text("Build it with alice.");
    tmux.keys(&["Enter"]);
    tmux.wait_for("alice's preview", |s| s.contains("✉ alice: hello lead"));
    // Her command asks the person at the lead's terminal.
    tmux.wait_for("alice's question", |s| {
        s.contains("teammate alice: Bash(echo hi > hi.txt)") && s.contains("[y] yes")
    });
    tmux.keys(&["y"]);
    let hi = world.project().join(".roocode/worktrees/crew+alice/hi.txt");
    wait_until(
        "alice's command",
        Duration::from_secs(20),
        || hi.is_file().then_some(()),
        || tmux.screen(),
    );
    tmux.wait_for("alice idle in the status line", |s| {
        s.contains("team crew · alice idle")
    });
    // /team opens the live team view (issue 31): alice (second, after the lead) followed
    // shows where she runs; q comes back to the prompt.
    tmux.type_text("/team");
    tmux.keys(&["Enter"]);
    tmux.wait_for("/team", |s| {
        s.contains("in-process") && s.contains("q quit")
    });
    tmux.keys(&["j", "Enter"]);
    tmux.wait_for("alice followed", |s| {
        s.contains("FOLLOWING alice") && s.contains("crew+alice")
    });
    tmux.keys(&["q"]);
    tmux.wait_for("the prompt again", |s| !s.contains("FOLLOWING"));
    tmux.type_text("/exit");
    tmux.keys(&["Enter"]);
    assert_eq!(tmux.wait_exit(), 0, "{}", tmux.screen());
}

/// Alice runs a command the project's (committed) config allows.
const ALLOWED: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Touch hi.txt."}}
    - text: "Waiting for alice."
    - text: "Noted."
    - text: "Noted."
    - text: "Noted."
  alice:
    - tool_calls:
        - {name: Bash, input: {command: "touch hi.txt"}}
    - text: "Done."
"#;

#[test]
fn a_spawned_teammate_inherits_the_leads_trust_in_the_project() {
    let run = |trusted: bool| {
        let world = World::new();
        world.root.write(
            "project/.roocode/config.yaml",
            "permissions:\n  allow:\n    - \"Bash(touch *)\"\n",
        );
        git(&world.project(), &["add", "-A"]);
        git(&world.project(), &["commit", "-q", "-m", "config"]);
        let mut lead = world
            .lead_in_mode(ALLOWED, "default")
            .args(["--team-timeout", "60"]);
        if trusted {
            lead = lead.arg("--trust-project");
        }
        lead.run().assert_ok();
        let touched = world
            .project()
            .join(".roocode/worktrees/crew+alice/hi.txt")
            .is_file();
        let asked = world
            .team()
            .mailbox()
            .read(
                &Name::parse("lead").unwrap(),
                &ReadFilter {
                    include_archived: true,
                    ..ReadFilter::default()
                },
            )
            .unwrap()
            .iter()
            .any(|m| m.body.type_name() == "permission_request");
        (touched, asked)
    };
    // Trusted: alice's own policy honours the project's allow rule; she asks nobody.
    assert_eq!(run(true), (true, false));
    // Untrusted: the allow rule is ignored for both; she asks, and a headless lead whose
    // own policy would ask too denies.
    assert_eq!(run(false), (false, true));
}
