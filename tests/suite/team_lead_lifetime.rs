//! One lead per team, and a team that survives its lead: a headless `roo-lead -p` runs in
//! a private tmux server and spawns alice as a `roo-worker` in a pane, then sits in a
//! long command while the test plays a second lead, or kills the first with SIGKILL.
//! Every model is the scripted provider. Directories live under Cargo's target tmp dir.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_store::{MemberState, Name, RooHome, Team};
use roo_tests::{TempDir, TestCommand, Tmux, bin, process_gone, read_pid, wait_until};

/// The lead spawns alice in a pane, then runs a long command (the test acts meanwhile).
const LEAD: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Say done."}}
    - tool_calls:
        - {name: Bash, input: {command: "sleep 300"}}
    - text: "Done."
  alice:
    - text: "Done."
"#;

struct World {
    root: TempDir,
}

impl World {
    fn new() -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("roo")).unwrap();
        root.write("project/README.md", "# demo\n");
        roo_tests::git_repo_with_identity(&root.join("project"));
        World { root }
    }

    fn project(&self) -> PathBuf {
        self.root.join("project")
    }

    fn team(&self) -> Option<Team> {
        Team::open(
            &RooHome::new(self.root.join("roo")),
            Name::parse_as("team", "crew").unwrap(),
        )
        .ok()
    }

    fn pid_of(&self, member: &str) -> Option<u32> {
        self.team()?.config().ok()?.member(member)?.pid
    }

    /// The first lead, in tmux, with `env` added; returns once alice is idle.
    fn start(&self, env: &[(&str, &str)]) -> Tmux {
        let script = self.root.write("lead.yaml", LEAD);
        let bins = bin("roo-mail").parent().unwrap().to_path_buf();
        let exports: String = env
            .iter()
            .map(|(k, v)| format!("{k}='{v}'\nexport {k}\n"))
            .collect();
        let run = self.root.write(
            "run-lead.sh",
            format!(
                "PATH='{bins}:{path}'\nexport PATH\n{exports}\
                 '{lead}' -p 'Work with alice.' --provider script --script '{script}' \
                 --permission-mode bypassPermissions --output-format stream-json \
                 --teammate-mode tmux --team-timeout 600 > '{out}' 2>&1\n",
                bins = bins.display(),
                path = std::env::var("PATH").unwrap_or_default(),
                lead = bin("roo-lead").display(),
                script = script.display(),
                out = self.root.join("lead.out").display(),
            ),
        );
        let tmux = Tmux::start(
            &self.project(),
            &[
                ("ROO_HOME", self.root.join("roo").display().to_string()),
                ("HOME", self.root.join("home").display().to_string()),
                ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
            ],
            &format!("sh '{}'", run.display()),
        );
        wait_until(
            "alice idle in her pane",
            Duration::from_secs(60),
            || {
                let config = self.team()?.config().ok()?;
                let alice = config.member("alice")?;
                (alice.state() == MemberState::Idle && alice.pid.is_some()).then_some(())
            },
            || format!("{}\n{}", tmux.all_screens(), self.lead_output()),
        );
        tmux
    }

    fn lead_output(&self) -> String {
        std::fs::read_to_string(self.root.join("lead.out")).unwrap_or_default()
    }

    /// A second `roo-lead -p` of team crew with `script`.
    fn second_lead(&self, script: &str) -> TestCommand {
        let script = self.root.write("second.yaml", script);
        TestCommand::new(bin("roo-lead"))
            .env("ROO_HOME", self.root.join("roo"))
            .env("HOME", self.root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .current_dir(self.project())
            .args(["-p", "Take the team.", "--team", "crew"])
            .args(["--provider", "script", "--script"])
            .arg(script)
            .args(["--permission-mode", "bypassPermissions"])
            .args(["--teammate-mode", "tmux"])
    }

    fn alice_screen(&self, tmux: &Tmux) -> String {
        tmux.panes()
            .into_iter()
            .find(|p| p.title == "alice")
            .map(|p| tmux.run(&["capture-pane", "-p", "-J", "-t", &p.id]))
            .unwrap_or_default()
    }
}

fn kill(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

#[test]
fn a_second_lead_is_refused_while_the_first_lives_and_a_take_over_is_told() {
    let world = World::new();
    let tmux = world.start(&[]);
    let first = world.pid_of("lead").unwrap();
    let out = world
        .second_lead("agents:\n  lead:\n    - text: \"Mine.\"\n    - text: \"Noted.\"\n    - text: \"Noted.\"\n    - text: \"Noted.\"\n")
        .run();
    assert_eq!(out.code(), 2, "{out:?}");
    assert!(
        out.stderr()
            .contains(&format!("is led by a running roo-lead (pid {first})")),
        "{out:?}"
    );
    assert_eq!(world.pid_of("lead"), Some(first));
    // Taking over explicitly: the first lead is told and stops leading.
    let out = world
        .second_lead("agents:\n  lead:\n    - text: \"Mine.\"\n    - text: \"Noted.\"\n    - text: \"Noted.\"\n    - text: \"Noted.\"\n")
        .arg("--take-over")
        .run();
    out.assert_ok();
    wait_until(
        "the first lead told",
        Duration::from_secs(20),
        || {
            world
                .lead_output()
                .contains("the team was taken over by another roo-lead")
                .then_some(())
        },
        || format!("{}\n{}", tmux.all_screens(), world.lead_output()),
    );
    kill(first);
}

#[test]
fn a_killed_leads_pane_teammate_notices_and_stops_when_no_lead_adopts_it() {
    let world = World::new();
    let tmux = world.start(&[("ROO_ORPHAN_TIMEOUT", "2")]);
    let alice = world.pid_of("alice").unwrap();
    kill(world.pid_of("lead").unwrap());
    wait_until(
        "alice to notice and stop",
        Duration::from_secs(30),
        || process_gone(alice as i32).then_some(()),
        || world.alice_screen(&tmux),
    );
    let screen = world.alice_screen(&tmux);
    assert!(screen.contains("is gone; waiting up to 2s"), "{screen}");
    assert!(
        screen.contains("no lead adopted the team within 2s"),
        "{screen}"
    );
    let config = world.team().unwrap().config().unwrap();
    assert_eq!(config.member("alice").unwrap().state(), MemberState::Idle);
}

#[test]
fn a_resumed_lead_adopts_a_killed_leads_pane_teammate_and_can_stop_it() {
    let world = World::new();
    let tmux = world.start(&[]);
    let alice = world.pid_of("alice").unwrap();
    kill(world.pid_of("lead").unwrap());
    wait_until(
        "alice to notice",
        Duration::from_secs(30),
        || {
            world
                .alice_screen(&tmux)
                .contains("is gone; waiting up to 300s")
                .then_some(())
        },
        || world.alice_screen(&tmux),
    );
    let out = world
        .second_lead(
            "agents:\n  lead:\n    - tool_calls:\n        - {name: TaskStop, input: {task_id: alice}}\n    - text: \"Stopped.\"\n    - text: \"Noted.\"\n    - text: \"Noted.\"\n",
        )
        .args(["--output-format", "stream-json"])
        .run();
    out.assert_ok();
    assert!(out.stdout().contains("stopped alice"), "{out:?}");
    wait_until(
        "alice to stop",
        Duration::from_secs(30),
        || process_gone(alice as i32).then_some(()),
        || world.alice_screen(&tmux),
    );
}

/// The interactive lead spawns alice in a pane; her command asks the lead's person.
const ASKING: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Write hi.txt."}}
    - text: "Alice is on it."
  alice:
    - tool_calls:
        - {name: Bash, input: {command: "echo hi > hi.txt"}}
    - text: "Done."
"#;

#[test]
fn a_question_open_when_the_lead_dies_is_denied_within_seconds() {
    let world = World::new();
    let script = world.root.write("asking.yaml", ASKING);
    let bins = bin("roo-mail").parent().unwrap().to_path_buf();
    let command = format!(
        "PATH='{}:{}' {} --provider script --script {} --trust-project --teammate-mode tmux",
        bins.display(),
        std::env::var("PATH").unwrap_or_default(),
        bin("roo-lead").display(),
        script.display()
    );
    let tmux = Tmux::start(
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
    tmux.wait_for("alice's question", |s| {
        s.contains("teammate alice: Bash(echo hi > hi.txt)") && s.contains("[y] yes")
    });
    kill(world.pid_of("lead").unwrap());
    wait_until(
        "alice idle after the denial",
        Duration::from_secs(20),
        || {
            let config = world.team()?.config().ok()?;
            (config.member("alice")?.state() == MemberState::Idle).then_some(())
        },
        || tmux.all_screens(),
    );
    let transcript =
        std::fs::read_to_string(world.root.join("roo/teams/crew/transcripts/alice.jsonl")).unwrap();
    assert!(
        transcript.contains("nobody can answer this question: the lead's process"),
        "{transcript}"
    );
    assert!(
        !world
            .project()
            .join(".roocode/worktrees/crew+alice/hi.txt")
            .exists()
    );
}

#[test]
fn a_config_corrupted_mid_run_ends_a_headless_lead_in_seconds_naming_it() {
    let world = World::new();
    // Alice is busy (a live process: this test's) while the lead waits for her.
    let home = RooHome::new(world.root.join("roo"));
    let crew = Name::parse("crew").unwrap();
    let mut alice = roo_store::Member::new(Name::parse("alice").unwrap(), &crew);
    alice.pid = Some(std::process::id());
    Team::create(
        &home,
        crew.clone(),
        "",
        roo_store::Member::new(Name::parse("lead").unwrap(), &crew),
        vec![alice],
    )
    .unwrap();
    let script = world.root.write(
        "waiting.yaml",
        "agents:\n  lead:\n    - text: \"Waiting for alice.\"\n    - text: \"Noted.\"\n    - text: \"Noted.\"\n",
    );
    let lead = TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", world.root.join("roo"))
        .env("HOME", world.root.join("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .current_dir(world.project())
        .args(["-p", "Wait for alice.", "--team", "crew"])
        .args(["--provider", "script", "--script"])
        .arg(&script)
        .args(["--permission-mode", "bypassPermissions"])
        .args(["--teammate-mode", "in-process", "--team-timeout", "600"])
        .spawn();
    // Its turn is over (in its transcript): it waits for alice now.
    let turn_done = || {
        let projects = world.root.join("roo/projects");
        std::fs::read_dir(projects).ok()?.flatten().find_map(|dir| {
            std::fs::read_dir(dir.path())
                .ok()?
                .flatten()
                .find_map(|file| {
                    std::fs::read_to_string(file.path())
                        .ok()?
                        .contains("Waiting for alice.")
                        .then_some(())
                })
        })
    };
    wait_until(
        "the lead waiting for alice",
        Duration::from_secs(30),
        || {
            (world.pid_of("lead") == Some(lead.pid()))
                .then_some(())
                .and(turn_done())
        },
        String::new,
    );
    let config = world.root.join("roo/teams/crew/config.json");
    std::fs::write(&config, "{\"version\": \"1.0\", \"name\": ").unwrap();
    let corrupted = std::time::Instant::now();
    let out = lead.wait();
    assert!(
        corrupted.elapsed() < Duration::from_secs(30),
        "the lead waited {:?}",
        corrupted.elapsed()
    );
    out.assert_code(3);
    assert!(
        out.stderr()
            .contains("the team could not be read, so the lead stopped waiting for it"),
        "{}",
        out.stderr()
    );
    assert!(out.stderr().contains("config.json"), "{}", out.stderr());
}

/// The lead spawns alice in-process; she runs a long command; the lead waits for her.
const BUSY_ALICE: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Run the long job."}}
    - text: "Waiting for alice."
    - text: "Noted."
    - text: "Noted."
  alice:
    - tool_calls:
        - {name: Bash, input: {command: "echo $$ > sleeper.pid; exec sleep 300"}}
    - text: "Done."
"#;

/// Issue 18: a config corrupted while an in-process teammate runs a long command ends
/// the lead within seconds, and the teammate's command with it.
#[test]
fn a_config_corrupted_while_an_in_process_teammate_works_ends_the_lead_and_her_command() {
    let world = World::new();
    let script = world.root.write("busy.yaml", BUSY_ALICE);
    let lead = TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", world.root.join("roo"))
        .env("HOME", world.root.join("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .current_dir(world.project())
        .args(["-p", "Work with alice."])
        .args(["--provider", "script", "--script"])
        .arg(&script)
        .args(["--permission-mode", "bypassPermissions"])
        .args(["--teammate-mode", "in-process", "--team-timeout", "600"])
        .spawn();
    let pid_file = world
        .project()
        .join(".roocode/worktrees/crew+alice/sleeper.pid");
    let sleeper = wait_until(
        "alice's command to start",
        Duration::from_secs(60),
        || read_pid(&pid_file),
        || format!("{} exists: {}", pid_file.display(), pid_file.exists()),
    );
    let config = world.root.join("roo/teams/crew/config.json");
    std::fs::write(&config, "{not json").unwrap();
    let corrupted = std::time::Instant::now();
    let out = lead.wait();
    let waited = corrupted.elapsed();
    assert!(
        waited < Duration::from_secs(15),
        "the lead waited {waited:?}"
    );
    out.assert_code(3);
    assert!(
        out.stderr()
            .contains("the team could not be read, so the lead stopped waiting for it"),
        "{}",
        out.stderr()
    );
    wait_until(
        "alice's command to end with the lead",
        Duration::from_secs(10),
        || process_gone(sleeper).then_some(()),
        || format!("process {sleeper} still runs"),
    );
}

#[test]
fn continue_on_a_session_that_led_a_team_leads_it_again() {
    let world = World::new();
    let lead = |script: &str, file: &str, extra: &[&str]| {
        let script = world.root.write(file, script);
        TestCommand::new(bin("roo-lead"))
            .env("ROO_HOME", world.root.join("roo"))
            .env("HOME", world.root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .current_dir(world.project())
            .args(["-p", "Plan the work.", "--provider", "script", "--script"])
            .arg(script)
            .args(["--permission-mode", "bypassPermissions"])
            .args(["--teammate-mode", "in-process"])
            .args(extra)
            .run()
    };
    lead(
        "agents:\n  lead:\n    - tool_calls:\n        - {name: TeamCreate, input: {team_name: crew}}\n    - text: \"Made.\"\n",
        "first.yaml",
        &[],
    )
    .assert_ok();
    let out = lead(
        "agents:\n  lead:\n    - tool_calls:\n        - {name: TaskCreate, input: {subject: \"Write the parser\"}}\n    - text: \"Planned.\"\n",
        "second.yaml",
        &["--continue"],
    );
    out.assert_ok();
    assert!(
        out.stderr().contains("leading team crew again"),
        "{}",
        out.stderr()
    );
    let tasks = world
        .team()
        .unwrap()
        .tasks()
        .list(&roo_store::TaskFilter::default())
        .unwrap();
    assert_eq!(tasks.len(), 1, "{tasks:#?}");
    assert_eq!(tasks[0].subject, "Write the parser");
}

/// A teammate whose idle state cannot be recorded (every write of the config fails, as
/// on a full disk) stops within seconds instead of staying "busy" in the roster for ever.
#[test]
fn a_teammate_that_cannot_record_its_state_stops_instead_of_staying_busy() {
    let world = World::new();
    let home = RooHome::new(world.root.join("roo"));
    let crew = Name::parse("crew").unwrap();
    Team::create(
        &home,
        crew.clone(),
        "",
        roo_store::Member::new(Name::parse("lead").unwrap(), &crew),
        Vec::new(),
    )
    .unwrap();
    let script = world.root.write(
        "carol.yaml",
        "agents:\n  carol:\n    - tool_calls:\n        - {name: Bash, input: {command: \"touch started && sleep 3\"}}\n    - text: \"Done.\"\n",
    );
    let worker = TestCommand::new(bin("roo-worker"))
        .env("ROO_HOME", world.root.join("roo"))
        .env("HOME", world.root.join("home"))
        .current_dir(world.project())
        .args(["--team", "crew", "--name", "carol", "--prompt", "go"])
        .args(["--provider", "script", "--script"])
        .arg(&script)
        .args(["--permission-mode", "bypassPermissions"])
        .spawn();
    let pid = worker.pid();
    wait_until(
        "carol busy",
        Duration::from_secs(30),
        || {
            let config = world.team()?.config().ok()?;
            // Busy is written as she joins; her command running means she is past
            // joining (the join reads the config again) and inside her turn.
            (config.member("carol")?.state() == MemberState::Busy
                && world.project().join("started").exists())
            .then_some(())
        },
        String::new,
    );
    // Every write of the config fails from now on (a lock expires after 10 s, so a
    // jammed lock would not do: the file itself is not one the store can write).
    let config = world.root.join("roo/teams/crew/config.json");
    std::fs::rename(&config, world.root.join("config.json.saved")).unwrap();
    std::fs::create_dir(&config).unwrap();
    wait_until(
        "carol to stop",
        Duration::from_secs(60),
        || process_gone(pid as i32).then_some(()),
        String::new,
    );
    let out = worker.wait();
    std::fs::remove_dir(&config).unwrap();
    out.assert_code(3);
    assert!(
        out.stderr().contains("could not record that it is idle"),
        "{}",
        out.stderr()
    );
}

/// Issue 29 item 10 (review): a worker re-executed with a sealed document (what its
/// lead handed over: secrets, its prompt, a remote teammate's project config with the
/// lead's deny rules) that cannot be read or parsed stops with exit 2 and says why; it
/// never runs without it (with no project config and no deny rules), never joins the
/// team and runs nothing.
#[test]
fn a_worker_whose_sealed_document_cannot_be_read_stops_and_never_joins() {
    let world = World::new();
    let home = RooHome::new(world.root.join("roo"));
    let crew = Name::parse("crew").unwrap();
    Team::create(
        &home,
        crew.clone(),
        "",
        roo_store::Member::new(Name::parse("lead").unwrap(), &crew),
        Vec::new(),
    )
    .unwrap();
    let canary = world.root.join("ran-without-its-config");
    let script = world.root.write(
        "carol.yaml",
        format!(
            "agents:\n  carol:\n    - tool_calls:\n        - {{name: Bash, input: {{command: \"touch '{}'\"}}}}\n    - text: \"Done.\"\n",
            canary.display()
        ),
    );
    // A truncated document: the re-executed image reads it on descriptor 0.
    let sealed = world.root.write(
        "sealed.json",
        r#"{"secrets":{},"launch":{"prompt":"go","proj"#,
    );
    let mut worker = TestCommand::new("sh")
        .arg("-c")
        .arg(r#"exec "$@" 0<"$SEALED""#)
        .arg("sh")
        .arg(bin("roo-worker"))
        .args(["--team", "crew", "--name", "carol", "--prompt", "go"])
        .args(["--provider", "script", "--script"])
        .arg(&script)
        .args(["--permission-mode", "bypassPermissions"])
        .env("SEALED", &sealed)
        .env("ROO_SEALED_ENV_FD", "0")
        .env("ROO_HOME", world.root.join("roo"))
        .env("HOME", world.root.join("home"))
        .current_dir(world.project())
        .spawn();
    wait_until(
        "the worker to stop",
        Duration::from_secs(30),
        || worker.child().try_wait().ok().flatten(),
        || format!("carol ran: {}", canary.exists()),
    );
    let out = worker.wait();
    out.assert_code(2);
    out.assert_stderr_contains(
        "roo-worker: failed to read the sealed document (ROO_SEALED_ENV_FD=0)",
    );
    assert!(!canary.exists(), "{out:?}");
    let config = world.team().unwrap().config().unwrap();
    assert!(config.member("carol").is_none(), "{config:#?}");
}
