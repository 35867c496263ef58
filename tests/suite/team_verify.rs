//! Issue 32 item 3, verified merges, end to end: the real `roo-lead -p` (scripted
//! model) leads team `team` whose teammates' clones were made by `roo_team::worktree`
//! and hold their commits; its TeamMerge runs a verify command (the call's `verify`, or
//! the project's `verify:` once the project is trusted) on the merge commit in a
//! scratch checkout. A branch that breaks the project's check is refused with the
//! user's branch, index and working tree byte for byte as they were, the teammate told
//! with the command's tail and its task back in progress with it; a branch that passes
//! lands as a fast-forward of the user's branch to the verified merge commit, the
//! user's uncommitted changes untouched. A hostile verify command cannot move the
//! user's branch or write its tree or `.git`, leaves no process behind, and one that
//! hangs is ended at its timeout; the scratch tree is always removed.
//!
//! Every directory lives under Cargo's target tmp dir, not the system temp dir (which
//! the sandbox leaves writable); the lead's `TMPDIR` is a directory of the test's own,
//! so its scratch trees can be counted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_store::{Name, NewTask, RooHome, Task, TaskPatch, TaskStatus, Team};
use roo_team::worktree::{Git, Workspace, prepare};
use roo_tests::{TempDir, TestCommand, bin, git, wait_until};
use serde_json::Value;

/// The project's check: `value.txt` must read `good`.
const CHECK: &str = "v=$(cat value.txt); echo \"checking value: $v\"; \
                     if [ \"$v\" = good ]; then echo ok; else echo \"FAIL: value is $v\" >&2; exit 3; fi\n";

struct World {
    root: TempDir,
}

impl World {
    /// A project whose `check.sh` passes, team `team` (lead `lead`, members alice and
    /// bob, idle: the test plays them), and a private `TMPDIR`.
    fn new(config: &str) -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        for dir in ["home", "roo", "tmp"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        root.write("project/value.txt", "good\n");
        root.write("project/check.sh", CHECK);
        root.write("project/notes.txt", "the user's notes\n");
        root.write("project/staged.txt", "staged before\n");
        root.write("project/.roocode/config.yaml", config);
        roo_tests::git_repo_with_identity(&root.join("project"));
        let world = World { root };
        world.add_team("team", &["alice", "bob"]);
        world
    }

    /// Team `team` led by `lead` with `members`, joined and idle: the lead does not wait
    /// for them (the test plays them).
    fn add_team(&self, team: &str, members: &[&str]) {
        let mut create = TestCommand::new(bin("roo-mail"))
            .env("ROO_HOME", self.path("roo"))
            .args(["team", "create", "--team", team, "--lead", "lead"]);
        for member in members {
            create = create.args(["--member", member]);
        }
        create.run().assert_ok();
        for member in members {
            TestCommand::new(bin("roo-mail"))
                .env("ROO_HOME", self.path("roo"))
                .args(["team", "join", "--team", team, member])
                .run()
                .assert_ok();
            self.team_named(team).set_active(member, false).unwrap();
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn project(&self) -> PathBuf {
        self.path("project")
    }

    fn team(&self) -> Team {
        self.team_named("team")
    }

    fn team_named(&self, team: &str) -> Team {
        Team::open(
            &RooHome::new(self.path("roo")),
            Name::parse_as("team", team).unwrap(),
        )
        .unwrap()
    }

    /// `member`'s clone with one commit writing `value` into `value.txt` and a file of
    /// its own, and a task it completed.
    fn teammate_commits(&self, member: &str, value: &str) -> (PathBuf, Task) {
        self.teammate_of("team", member, value)
    }

    /// [`World::teammate_commits`] for a member of `team`.
    fn teammate_of(&self, team: &str, member: &str, value: &str) -> (PathBuf, Task) {
        let git_env = Git::new()
            .env("HOME", self.path("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1");
        let ws = prepare(
            &self.project(),
            &Name::parse(team).unwrap(),
            &Name::parse(member).unwrap(),
            &git_env,
        )
        .unwrap();
        let Workspace::Worktree(clone) = ws else {
            panic!("no clone: {ws:?}");
        };
        std::fs::write(clone.path.join("value.txt"), format!("{value}\n")).unwrap();
        std::fs::write(clone.path.join(format!("{member}.txt")), "work\n").unwrap();
        git(&clone.path, &["add", "-A"]);
        git(
            &clone.path,
            &["commit", "-q", "-m", &format!("{member}: value {value}")],
        );
        let tasks = self.team_named(team).tasks();
        let lead = Name::parse("lead").unwrap();
        let task = tasks
            .create(NewTask {
                subject: format!("{member}'s part"),
                owner: Some(Name::parse(member).unwrap()),
                by: Some(lead.clone()),
                ..NewTask::default()
            })
            .unwrap();
        let task = tasks
            .update(
                &task.id,
                TaskPatch {
                    status: Some(TaskStatus::Completed),
                    by: Some(lead),
                    ..TaskPatch::default()
                },
            )
            .unwrap();
        (clone.path, task)
    }

    /// The user's own uncommitted work: a changed tracked file, a staged change and an
    /// untracked file, none of which a merge touches.
    fn user_changes(&self) {
        let project = self.project();
        std::fs::write(project.join("notes.txt"), "the user's notes, edited\n").unwrap();
        std::fs::write(project.join("staged.txt"), "staged after\n").unwrap();
        git(&project, &["add", "staged.txt"]);
        std::fs::write(project.join("draft.txt"), "an untracked draft\n").unwrap();
    }

    /// `roo-lead -p` of team `team` in the project, the scripted lead making `calls`.
    fn lead(&self, calls: &[Value], trust: bool) -> roo_tests::RunOutput {
        self.lead_command("team", calls, trust).run()
    }

    /// The `roo-lead -p` of [`World::lead`] for `team`, not started.
    fn lead_command(&self, team: &str, calls: &[Value], trust: bool) -> TestCommand {
        let mut script = String::from("agents:\n  lead:\n");
        for call in calls {
            script.push_str(&format!("    - tool_calls:\n        - {call}\n"));
        }
        script.push_str("    - text: \"Done.\"\n");
        let script_path = self.root.write(format!("script-{team}.yaml"), script);
        let mut command = TestCommand::new(bin("roo-lead"))
            .env("ROO_HOME", self.path("roo"))
            .env("HOME", self.path("home"))
            .env("TMPDIR", self.path("tmp"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .current_dir(self.project())
            .args(["-p", "merge the work", "--team", team])
            .args(["--provider", "script", "--script"])
            .arg(script_path)
            .args(["--permission-mode", "bypassPermissions"]);
        if trust {
            command = command.arg("--trust-project");
        }
        command
    }

    /// The tool results of the latest session, in order.
    fn tool_results(&self) -> Vec<String> {
        let mut sessions = self.sessions();
        sessions.sort_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap());
        session_results(sessions.last().unwrap())
    }

    /// The lead sessions' transcripts.
    fn sessions(&self) -> Vec<PathBuf> {
        let mut sessions = Vec::new();
        for project in std::fs::read_dir(self.path("roo/projects")).unwrap() {
            for entry in std::fs::read_dir(project.unwrap().path()).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|x| x == "jsonl") {
                    sessions.push(path);
                }
            }
        }
        sessions
    }

    /// Everything of the user's repository a refused merge must leave alone.
    fn user_state(&self) -> UserState {
        let project = self.project();
        let read = |rel: &str| std::fs::read(project.join(rel)).unwrap_or_default();
        UserState {
            head: git(&project, &["rev-parse", "HEAD"]),
            // The teammates' branches are fetched into the user's repository (as on
            // every merge); the user's own refs must stay.
            refs: git(
                &project,
                &["for-each-ref", "--format=%(refname) %(objectname)"],
            )
            .lines()
            .filter(|line| !line.starts_with("refs/heads/roo/"))
            .collect::<Vec<_>>()
            .join("\n"),
            index: read(".git/index"),
            files: [
                "value.txt",
                "notes.txt",
                "staged.txt",
                "draft.txt",
                "check.sh",
            ]
            .iter()
            .map(|f| read(f))
            .collect(),
        }
    }

    /// The scratch trees left in the lead's `TMPDIR` or its git directory.
    fn scratch_left(&self) -> Vec<String> {
        [self.path("tmp"), self.project().join(".git/roo-verify")]
            .iter()
            .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("roo-verify-"))
            .collect()
    }

    /// alice's messages, read as her.
    fn inbox(&self, member: &str) -> Vec<Value> {
        TestCommand::new(bin("roo-mail"))
            .env("ROO_HOME", self.path("roo"))
            .args(["read", "--team", "team", "--as", member, "--json"])
            .run()
            .json()
            .as_array()
            .unwrap()
            .clone()
    }
}

#[derive(Debug, PartialEq)]
struct UserState {
    head: String,
    refs: String,
    index: Vec<u8>,
    files: Vec<Vec<u8>>,
}

fn team_merge(member: &str, verify: Option<&str>) -> Value {
    match verify {
        Some(verify) => {
            serde_json::json!({"name": "TeamMerge", "input": {"name": member, "verify": verify}})
        }
        None => serde_json::json!({"name": "TeamMerge", "input": {"name": member}}),
    }
}

/// The branch breaking the check is refused: nothing of the user's repository changes
/// (HEAD, every ref, the index byte for byte, the tracked, staged and untracked files),
/// alice gets the command's tail and her task back in progress; then bob's branch,
/// which passes, lands as a fast-forward to the verified merge commit (parents: the
/// user's HEAD and bob's commit), the user's uncommitted work still there.
#[test]
fn a_verified_merge_refuses_a_branch_that_breaks_the_check_and_lands_one_that_passes() {
    let world = World::new("permission_mode: default\n");
    let project = world.project();
    let (_, alice_task) = world.teammate_commits("alice", "bad");
    let (bob_clone, _) = world.teammate_commits("bob", "good");
    world.user_changes();
    let before = world.user_state();

    world
        .lead(&[team_merge("alice", Some("sh check.sh"))], false)
        .assert_ok();
    let results = world.tool_results();
    let refused = &results[0];
    assert!(
        refused.contains("the verify command `sh check.sh` exited with code 3")
            && refused.contains("nothing was merged")
            && refused.contains("FAIL: value is bad"),
        "{refused}"
    );
    assert!(
        refused.contains(&format!(
            "alice was told, and task #{} is back in progress with it",
            alice_task.id
        )),
        "{refused}"
    );
    assert_eq!(
        world.user_state(),
        before,
        "a refused merge changed nothing"
    );
    let task = world.team().tasks().get(&alice_task.id).unwrap();
    assert_eq!(task.status, TaskStatus::InProgress);
    assert_eq!(task.owner.as_ref().map(Name::as_str), Some("alice"));
    let inbox = world.inbox("alice");
    let told = inbox
        .iter()
        .find(|m| m["from"] == "lead")
        .unwrap_or_else(|| panic!("no message to alice: {inbox:#?}"));
    let text = told["text"].as_str().unwrap();
    assert!(
        text.contains("sh check.sh") && text.contains("FAIL: value is bad"),
        "{told:#}"
    );
    assert!(
        world.scratch_left().is_empty(),
        "{:?}",
        world.scratch_left()
    );

    world
        .lead(&[team_merge("bob", Some("sh check.sh"))], false)
        .assert_ok();
    let landed = &world.tool_results()[0];
    assert!(
        landed.contains("verify `sh check.sh` passed") && landed.contains("merged roo/team/bob"),
        "{landed}"
    );
    let bob_commit = git(&bob_clone, &["rev-parse", "HEAD"]);
    let parents = git(&project, &["rev-list", "--parents", "-n1", "HEAD"]);
    assert_eq!(
        parents.split_whitespace().skip(1).collect::<Vec<_>>(),
        [before.head.trim(), bob_commit.trim()],
        "HEAD is the verified merge commit on top of the user's HEAD"
    );
    assert_eq!(
        git(&project, &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/main"
    );
    assert!(project.join("bob.txt").is_file());
    // The user's uncommitted work is as it was: the edit, the staged change, the draft.
    let after = world.user_state();
    assert_eq!(after.files[1..4], before.files[1..4]);
    assert_eq!(
        git(&project, &["diff", "--cached", "--name-only"]),
        "staged.txt\n"
    );
    assert_eq!(git(&project, &["diff", "--name-only"]), "notes.txt\n");
    assert!(
        world.scratch_left().is_empty(),
        "{:?}",
        world.scratch_left()
    );
}

/// `verify:` in the project config runs on every TeamMerge once the project is trusted
/// (a plain TeamMerge of alice's breaking branch is refused); in an untrusted project it
/// is ignored like its hooks, and said so.
#[test]
fn the_projects_verify_runs_only_in_a_trusted_project() {
    let world = World::new("permission_mode: default\nverify: sh check.sh\n");
    let project = world.project();
    world.teammate_commits("alice", "bad");
    world.teammate_commits("bob", "bad");
    let before = git(&project, &["rev-parse", "HEAD"]);

    world.lead(&[team_merge("alice", None)], true).assert_ok();
    let refused = &world.tool_results()[0];
    assert!(
        refused.contains("the verify command `sh check.sh` exited with code 3")
            && refused.contains("nothing was merged"),
        "{refused}"
    );
    assert_eq!(git(&project, &["rev-parse", "HEAD"]), before);

    let out = world.lead(&[team_merge("bob", None)], false);
    out.assert_ok();
    assert!(out.stderr().contains("verify"), "{}", out.stderr());
    let merged = &world.tool_results()[0];
    assert!(
        merged.contains("merged roo/team/bob with --no-ff") && !merged.contains("verify"),
        "{merged}"
    );
}

/// A hostile verify command (the teammate's branch changed what it runs) tries to move
/// the user's branch, write the user's tree and its `.git`, and leave a process running;
/// none of it works, and the merge still lands only as the verified commit. A command
/// that hangs is ended at its timeout and nothing is merged.
#[test]
fn a_verify_command_cannot_reach_the_users_repository_or_outlive_the_merge() {
    if let Some(why) = roo_tests::confinement_untestable(Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        eprintln!("skipped: {why}");
        return;
    }
    let world = World::new("permission_mode: default\n");
    let project = world.project();
    let probe = world.lead(
        &[serde_json::json!({"name": "Bash", "input": {"command": "true"}})],
        false,
    );
    if probe.stderr().contains("sandbox is unavailable") {
        eprintln!("skipped: this machine has no OS sandbox");
        return;
    }
    let (alice_clone, _) = world.teammate_commits("alice", "good");
    world.teammate_commits("bob", "good");
    world.user_changes();
    let before = world.user_state();
    let config_before = std::fs::read(project.join(".git/config")).unwrap();
    let alice_commit = git(&alice_clone, &["rev-parse", "HEAD"]);
    // A name only this test's leftover process would have in its command line.
    let token = format!(
        "roo-verify-sleeper-{}",
        world.root.path().file_name().unwrap().to_string_lossy()
    );
    let hostile = format!(
        "git -C {p} update-ref refs/heads/main {alice} 2>&1; \
         echo pwned > {p}/pwned.txt 2>&1; echo '[core] hooksPath = /x' >> {p}/.git/config 2>&1; \
         echo pwned > {p}/notes.txt 2>&1; \
         setsid sh -c 'sleep 300; true' {token} > /dev/null 2>&1 & sh check.sh",
        p = project.display(),
        alice = alice_commit.trim(),
    );
    let out = world.lead(
        &[
            team_merge("alice", Some(&hostile)),
            serde_json::json!({"name": "TeamMerge", "input": {"name": "bob", "verify": "sleep 300", "verify_timeout": 2}}),
        ],
        false,
    );
    out.assert_ok();
    let results = world.tool_results();
    assert!(!project.join("pwned.txt").exists());
    assert_eq!(
        std::fs::read(project.join(".git/config")).unwrap(),
        config_before
    );
    assert_eq!(world.user_state().files[1], before.files[1], "notes.txt");
    // alice's merge landed as the verified commit: the command did not move main.
    assert!(
        results[0].contains("merged roo/team/alice"),
        "{}",
        results[0]
    );
    let head = git(&project, &["rev-parse", "HEAD"]);
    assert_eq!(
        git(&project, &["rev-parse", "HEAD^1"]),
        before.head,
        "one merge on the user's HEAD"
    );
    assert!(
        git(&project, &["log", "--format=%s", "-n1", head.trim()])
            .starts_with("Merge roo/team/alice")
    );
    // The process it left is gone.
    wait_until(
        "the verify command's background process to end",
        Duration::from_secs(10),
        || (!running(&token)).then_some(()),
        || format!("a process named {token} still runs"),
    );
    // bob's hanging command was ended at 2 s; nothing of his was merged.
    assert!(
        results[1].contains("did not finish within 2 s")
            && results[1].contains("nothing was merged"),
        "{}",
        results[1]
    );
    assert_eq!(git(&project, &["rev-parse", "HEAD"]), head);
    assert!(!project.join("bob.txt").exists());
    assert!(
        world.scratch_left().is_empty(),
        "{:?}",
        world.scratch_left()
    );
}

/// Every agent's commands, a teammate's included, may write the temp dirs: a scratch
/// tree there could be rewritten while it is verified. Another agent's sandboxed Bash
/// (the same write roots as a teammate's: its own directory and the temp dirs) looks
/// for the scratch tree in the shared `TMPDIR` and in the lead's git directory while
/// the verify command waits for it, and writes the value the check wants into it: it
/// finds nothing it may write, the check sees alice's bad value, and nothing is merged.
#[test]
fn a_teammates_command_cannot_rewrite_the_tree_being_verified() {
    if let Some(why) = roo_tests::confinement_untestable(Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        eprintln!("skipped: {why}");
        return;
    }
    let world = World::new("permission_mode: default\n");
    let project = world.project();
    let probe = world.lead(
        &[serde_json::json!({"name": "Bash", "input": {"command": "true"}})],
        false,
    );
    if probe.stderr().contains("sandbox is unavailable") {
        eprintln!("skipped: this machine has no OS sandbox");
        return;
    }
    world.teammate_commits("alice", "bad");
    let before = git(&project, &["rev-parse", "HEAD"]);
    // The attacker: an agent of its own (its own ROO_HOME and directory), sharing the
    // lead's TMPDIR as teammates do.
    let attack = format!(
        "for i in $(seq 200); do \
           for d in \"$TMPDIR\"/roo-verify-* {git}/roo-verify/roo-verify-*; do \
             if [ -f \"$d/check.sh\" ] && printf 'good\\n' > \"$d/value.txt\" \
                && touch \"$d/tampered\"; then echo TAMPERED \"$d\"; exit 0; fi; \
           done 2>/dev/null; sleep 0.05; done; echo NOT-TAMPERED",
        git = project.join(".git").display()
    );
    let script = format!(
        "agents:\n  lead:\n    - tool_calls:\n        - {}\n    - text: \"Done.\"\n",
        serde_json::json!({"name": "Bash", "input": {"command": attack, "timeout_ms": 60000}})
    );
    let script_path = world.root.write("attacker.yaml", script);
    std::fs::create_dir_all(world.path("attacker-roo")).unwrap();
    world.root.write("attacker/README.md", "# elsewhere\n");
    roo_tests::git_repo_with_identity(&world.path("attacker"));
    let attacker = TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", world.path("attacker-roo"))
        .env("HOME", world.path("home"))
        .env("TMPDIR", world.path("tmp"))
        .current_dir(world.path("attacker"))
        .args(["-p", "attack", "--provider", "script", "--script"])
        .arg(script_path)
        .args(["--permission-mode", "bypassPermissions"])
        .spawn();
    // The verify command gives the attacker up to 10 s, then runs the check.
    let verify = "i=0; while [ ! -e tampered ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; \
                  sh check.sh";
    world.lead(&[team_merge("alice", Some(verify))], false);
    let attacked = attacker.wait();
    let results = world.tool_results();
    assert!(
        results[0].contains("nothing was merged") && results[0].contains("FAIL: value is bad"),
        "the check must see alice's value: {}\nattacker: {}",
        results[0],
        attacked.stdout()
    );
    assert_eq!(git(&project, &["rev-parse", "HEAD"]), before);
    assert_eq!(
        std::fs::read_to_string(project.join("value.txt")).unwrap(),
        "good\n"
    );
    let attacker_results = session_results(&newest_session(&world.path("attacker-roo")));
    assert!(
        attacker_results.iter().any(|r| r.contains("NOT-TAMPERED")),
        "{attacker_results:?}"
    );
}

/// The newest session transcript under `roo_home`.
fn newest_session(roo_home: &Path) -> PathBuf {
    let mut sessions = Vec::new();
    for project in std::fs::read_dir(roo_home.join("projects")).unwrap() {
        for entry in std::fs::read_dir(project.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|x| x == "jsonl") {
                sessions.push(path);
            }
        }
    }
    sessions.sort_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap());
    sessions.pop().unwrap()
}

/// Two lead processes (two teams in one repository) merge at once: the second waits
/// for the first's verified merge to land (the merge queue), then verifies its own
/// merge on top of it — both land, one after the other. Without the queue the second
/// lands first and the first is refused (the user's branch moved under it).
#[test]
fn merges_of_one_repository_take_turns() {
    let world = World::new("permission_mode: default\n");
    let project = world.project();
    world.add_team("other", &["carol"]);
    world.teammate_commits("alice", "good");
    world.teammate_of("other", "carol", "good");
    let before = git(&project, &["rev-parse", "HEAD"]).trim().to_string();
    let slow = world
        .lead_command(
            "team",
            &[team_merge("alice", Some("sleep 3; sh check.sh"))],
            false,
        )
        .spawn();
    wait_until(
        "the first merge's scratch tree",
        Duration::from_secs(30),
        || (!world.scratch_left().is_empty()).then_some(()),
        || "no scratch tree yet".to_string(),
    );
    let quick = world
        .lead_command("other", &[team_merge("carol", Some("sh check.sh"))], false)
        .run();
    quick.assert_ok();
    slow.wait().assert_ok();
    let results: Vec<String> = world
        .sessions()
        .iter()
        .flat_map(|s| session_results(s))
        .collect();
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(
        results
            .iter()
            .all(|r| r.contains("passed") && r.contains("merged roo/")),
        "{results:#?}"
    );
    // alice's merge first (it held the queue), carol's on top of it.
    let subjects = git(
        &project,
        &[
            "log",
            "--first-parent",
            "--format=%s",
            &format!("{before}..HEAD"),
        ],
    );
    let subjects: Vec<&str> = subjects.lines().collect();
    assert!(
        subjects.len() == 2
            && subjects[0].starts_with("Merge roo/other/carol")
            && subjects[1].starts_with("Merge roo/team/alice"),
        "{subjects:?}"
    );
    assert!(project.join("alice.txt").is_file() && project.join("carol.txt").is_file());
}

/// Whether a process with `token` in its command line runs.
fn running(token: &str) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(token))
        })
}

/// The tool results of one session transcript, in order.
fn session_results(transcript: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(transcript).unwrap();
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
