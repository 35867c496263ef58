//! Pane teammates in a real tmux: a headless `roo-lead -p --teammate-mode tmux` runs
//! inside a private tmux server (`tmux -L roo-test-… -f /dev/null`, killed on drop) and
//! spawns `roo-worker`s in panes of its window. Every model is the scripted provider,
//! picked by agent name (each worker replays the same script file for its own name).
//!
//! The lead reaches tmux through a `tmux` wrapper first on its `PATH` that logs every
//! command line it issues, so the tests can check what went on tmux's argv; a sampler
//! reads every process's command line while the team runs. Directories live under
//! Cargo's target tmp dir, like the other team tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use roo_store::{BackendType, MemberState, Name, RooHome, TaskId, TaskStatus, Team};
use roo_tests::{TempDir, TestCommand, Tmux, bin, process_gone, read_pid, wait_until};

/// A secret the lead has in its environment; it must reach the workers and never be on
/// a command line.
pub(super) const CANARY: &str = "sk-canary-7c1e9a0b5d3f46e8";

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
        // Commands may see this key (the user passes it on); the model's keys never.
        root.write(
            "roo/config.yaml",
            "sandbox: {pass_env: [EXTRA_SERVICE_API_KEY]}\n",
        );
        // A tmux that logs its command lines, then runs the real one.
        let real = String::from_utf8(
            std::process::Command::new("sh")
                .args(["-c", "command -v tmux"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let wrapper = root.write(
            "wrap/tmux",
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec {} \"$@\"\n",
                root.join("tmux.log").display(),
                real.trim()
            ),
        );
        make_executable(&wrapper);
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

    /// Starts `roo-lead -p` with `script` in a private tmux server. The lead gets the
    /// canary through its environment only (a script file exports it).
    fn start_lead(&self, script: &str) -> (Tmux, String) {
        self.start_lead_with(script, "")
    }

    /// The same with more flags for `roo-lead`.
    fn start_lead_with(&self, script: &str, flags: &str) -> (Tmux, String) {
        let script = self.root.write("script.yaml", script);
        self.root.write("key", CANARY);
        let run = self.root.write(
            "run-lead.sh",
            format!(
                "PATH='{path}'\nexport PATH\n\
                 EXTRA_SERVICE_API_KEY=\"$(cat '{key}')\"\nexport EXTRA_SERVICE_API_KEY\n\
                 '{lead}' -p 'Ship a.txt and b.txt with two pane teammates.' \
                 --provider script --script '{script}' --permission-mode bypassPermissions \
                 --output-format stream-json --teammate-mode tmux --team-timeout 120 {flags} \
                 > '{out}' 2> '{err}'\necho $? > '{code}.part' && mv '{code}.part' '{code}'\n",
                // tmux sets a pane's PATH itself: the script sets the test's.
                path = path_with_bins(&self.root.join("wrap")),
                key = self.root.join("key").display(),
                lead = bin("roo-lead").display(),
                script = script.display(),
                out = self.root.join("lead.out").display(),
                err = self.root.join("lead.err").display(),
                code = self.root.join("lead.code").display(),
            ),
        );
        let env = [
            ("ROO_HOME", self.root.join("roo").display().to_string()),
            ("HOME", self.root.join("home").display().to_string()),
            ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
        ];
        let tmux = Tmux::start(&self.project(), &env, &format!("sh '{}'", run.display()));
        let lead_pane = tmux.panes()[0].id.clone();
        (tmux, lead_pane)
    }

    fn lead_output(&self) -> String {
        format!(
            "root {:?}: {:?}\nstdout:\n{}\nstderr:\n{}\ntmux commands:\n{}",
            self.root.path(),
            std::fs::read_dir(self.root.path())
                .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>()),
            std::fs::read_to_string(self.root.join("lead.out")).unwrap_or_default(),
            std::fs::read_to_string(self.root.join("lead.err")).unwrap_or_default(),
            std::fs::read_to_string(self.root.join("tmux.log")).unwrap_or_default()
        )
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

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `PATH` with the tmux wrapper, then this build's binaries (`roo-mail` in Bash).
fn path_with_bins(wrap: &Path) -> String {
    let bins: PathBuf = bin("roo-mail").parent().unwrap().to_path_buf();
    format!(
        "{}:{}:{}",
        wrap.display(),
        bins.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// After a failed spawn of alice: her worker ended, and no clone or branch of hers is left.
fn assert_alice_left_nothing(world: &World) {
    wait_until(
        "alice's worker to end",
        Duration::from_secs(10),
        || workers_under(world.root.path()).is_empty().then_some(()),
        || format!("{:?}", workers_under(world.root.path())),
    );
    assert!(
        !world
            .project()
            .join(".roocode/worktrees/crew+alice")
            .exists(),
        "a clone was left"
    );
    assert!(
        world
            .git_out(&["branch", "--list", "roo/crew/alice"])
            .trim()
            .is_empty(),
        "the teammate's branch was left"
    );
}

/// Waits for the lead to exit (its script writes the status to a file).
fn lead_exit(tmux: &Tmux, world: &World) -> i32 {
    wait_until(
        "the lead to exit",
        Duration::from_secs(120),
        || {
            std::fs::read_to_string(world.root.join("lead.code"))
                .ok()?
                .trim()
                .parse()
                .ok()
        },
        || format!("{}\n{}", tmux.all_screens(), world.lead_output()),
    )
}

/// Reads every process's command line until stopped; collects those holding `needle`.
pub(super) struct ArgvSampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(Vec<String>, usize)>>,
}

impl ArgvSampler {
    pub(super) fn start(needle: &'static str) -> ArgvSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let stop = stop.clone();
            move || {
                let mut hits = Vec::new();
                let mut rounds = 0;
                while !stop.load(Ordering::Relaxed) {
                    rounds += 1;
                    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                            continue;
                        };
                        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                        if text.contains(needle) {
                            hits.push(format!("{:?}: {text}", entry.file_name()));
                        }
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                (hits, rounds)
            }
        });
        ArgvSampler {
            stop,
            thread: Some(thread),
        }
    }

    pub(super) fn finish(mut self) -> (Vec<String>, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// Pids of live `roo-worker`s working under `root`.
pub(super) fn workers_under(root: &Path) -> Vec<String> {
    let root = root.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains("roo-worker") && text.contains(&root) && !process_gone(pid) {
            found.push(format!("{pid}: {text}"));
        }
    }
    found
}

/// The lead: TeamCreate and two tasks; spawn bob, then alice; merge once bob reports;
/// then wait (in its Bash) until neither teammate is busy and delete the team.
pub(super) const LEAD: &str = r#"
  lead:
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
    - when: {last_user_contains: "merged roo/crew/bob with --no-ff"}
      tool_calls:
        - {name: Bash, input: {command: "until [ \"$(roo-mail team show | grep -c '@crew  busy')\" = 1 ]; do sleep 0.05; done; echo settled"}}
        - {name: TeamDelete, input: {}}
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
"#;

/// Alice writes the key her environment handed her (passed on by the user's config) to
/// `KEYFILE`, commits a.txt and tells bob; bob commits b.txt, goes idle, and is woken by
/// alice's message to report to the lead.
pub(super) const TEAMMATES: &str = r#"
  alice:
    - tool_calls:
        - {name: TaskUpdate, input: {id: "1", owner: alice}}
        - {name: Bash, input: {command: "printf %s \"$EXTRA_SERVICE_API_KEY\" > KEYFILE && echo a > a.txt && git add a.txt && git commit -qm 'alice: add a.txt'"}}
        - {name: TaskUpdate, input: {id: "1", status: completed}}
        - {name: SendMessage, input: {to: bob, summary: "a.txt committed", message: "a.txt is committed on my branch"}}
    - text: "Task 1 done."
  bob:
    - tool_calls:
        - {name: TaskUpdate, input: {id: "2", owner: bob}}
        - {name: Bash, input: {command: "echo b > b.txt && git add b.txt && git commit -qm 'bob: add b.txt'"}}
        - {name: TaskUpdate, input: {id: "2", status: completed}}
    - when: {last_user_contains: "a.txt is committed"}
      tool_calls:
        - {name: SendMessage, input: {to: lead, summary: "both done", message: "alice says a.txt is committed; b.txt is committed too"}}
    - text: "Task 2 done."
    - text: "Told the lead."
"#;

#[test]
fn pane_teammates_do_a_team_job_in_real_tmux_panes_and_leave_nothing_behind() {
    let world = World::new();
    // The sandbox leaves the system temp dir writable: the worker writes the key there.
    let keyfile = std::env::temp_dir().join(format!(
        "roo-pane-key-{}-{}",
        std::process::id(),
        world.root.path().file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&keyfile);
    let script = format!(
        "agents:\n{}{}",
        LEAD.trim_start_matches('\n'),
        TEAMMATES
            .trim_start_matches('\n')
            .replace("KEYFILE", &keyfile.display().to_string())
    );
    let sampler = ArgvSampler::start(CANARY);
    let (tmux, lead_pane) = world.start_lead(&script);
    // A pane of the user's in the lead's window: the team must never close it.
    let user_pane = tmux
        .run(&[
            "split-window",
            "-d",
            "-P",
            "-F",
            "#{pane_id}",
            "-t",
            &lead_pane,
            "sleep 100000",
        ])
        .trim()
        .to_string();

    // Both panes appear, titled with the teammates' names, and their workers join.
    let (panes, config) = wait_until(
        "panes titled alice and bob whose workers joined",
        Duration::from_secs(60),
        || {
            let panes = tmux.panes();
            let titled = |t: &str| panes.iter().find(|p| p.title == t).cloned();
            let both = titled("alice").zip(titled("bob"))?;
            let config = world.team()?.config().ok()?;
            let joined = |p: &roo_tests::Pane| {
                config
                    .member(&p.title)
                    .is_some_and(|m| m.pid == Some(p.pid))
            };
            (joined(&both.0) && joined(&both.1)).then_some((both, config))
        },
        || format!("{}\n{}", tmux.all_screens(), world.lead_output()),
    );
    for pane in [&panes.0, &panes.1] {
        let member = config.member(&pane.title).unwrap();
        assert_eq!(member.backend_type, Some(BackendType::Tmux), "{member:#?}");
        assert_eq!(
            member.pane_id.as_deref(),
            Some(pane.id.as_str()),
            "{member:#?}"
        );
        assert_eq!(
            member.pid,
            Some(pane.pid),
            "the pane runs the worker itself"
        );
        assert!(member.color.is_some(), "{member:#?}");
    }

    let code = lead_exit(&tmux, &world);
    let (hits, rounds) = sampler.finish();
    assert_eq!(code, 0, "{}", world.lead_output());

    // The job: both files merged with --no-ff, each committed in its worktree.
    assert_eq!(
        std::fs::read_to_string(world.project().join("a.txt")).unwrap(),
        "a\n"
    );
    assert_eq!(
        std::fs::read_to_string(world.project().join("b.txt")).unwrap(),
        "b\n"
    );
    let merges = world.git_out(&["log", "--merges", "--format=%s", "main"]);
    assert_eq!(merges.lines().count(), 2, "{merges}");
    // Each committed on its own branch, merged in; TeamDelete removed the merged
    // worktrees and branches.
    let log = world.git_out(&["log", "--format=%s", "main"]);
    assert!(
        log.contains("alice: add a.txt") && log.contains("bob: add b.txt"),
        "{log}"
    );
    assert!(
        merges.contains("roo/crew/alice") && merges.contains("roo/crew/bob"),
        "{merges}"
    );
    assert!(
        !world
            .project()
            .join(".roocode/worktrees/crew+alice")
            .exists()
    );
    let out = std::fs::read_to_string(world.root.join("lead.out")).unwrap();
    assert!(
        out.contains(r#""from":"bob""#) && out.contains("both done"),
        "bob's report reached the lead (after alice's message woke him): {out}"
    );
    assert!(
        world.team().is_none(),
        "the lead deleted the team: {}",
        world.lead_output()
    );

    // Nothing left: only the lead's pane and the user's, no worker process.
    let left: Vec<String> = tmux.panes().into_iter().map(|p| p.id).collect();
    assert_eq!(left, [lead_pane.clone(), user_pane]);
    // The window's border titles, shown for the team, are put back.
    let own = tmux.run(&[
        "show-options",
        "-w",
        "-v",
        "-t",
        &lead_pane,
        "pane-border-status",
    ]);
    assert_eq!(
        own.trim(),
        "",
        "the window inherits its border setting again"
    );
    assert_eq!(workers_under(world.root.path()), Vec::<String>::new());

    // The key reached the worker through its environment, never through a command line.
    let seen = std::fs::read_to_string(&keyfile).unwrap_or_default();
    let _ = std::fs::remove_file(&keyfile);
    assert_eq!(seen, CANARY, "the worker got the lead's key");
    assert!(rounds > 10, "the sampler ran");
    assert!(hits.is_empty(), "the key was on a command line: {hits:#?}");
    let log = std::fs::read_to_string(world.root.join("tmux.log")).unwrap();
    assert!(log.contains("respawn-pane"), "{log}");
    assert!(!log.contains(CANARY), "the key was on tmux's argv: {log}");
    assert!(
        !log.contains("send-keys"),
        "nothing is typed into a pane: {log}"
    );
    let handoffs = world.root.join("roo/run/handoff");
    let files: Vec<_> = std::fs::read_dir(&handoffs)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(files.is_empty(), "handoff files left: {files:?}");
}

/// The lead holds its first run open (its Bash waits for a file the test creates) while
/// alice idles; the test wakes her with `roo-mail send`, she claims the task and runs a
/// long command; the test closes her pane with `kill-pane`. Then the lead messages her
/// (she starts again in a new pane) and stops her with TaskStop.
pub(super) const KILLED: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: TaskCreate, input: {subject: "Long job"}}
    - tool_calls:
        - {name: Agent, input: {name: alice, prompt: "Wait for instructions."}}
    - tool_calls:
        - {name: Bash, input: {command: "until [ -f release-lead ]; do sleep 0.05; done; echo released"}}
    - tool_calls:
        - {name: SendMessage, input: {to: alice, summary: "come back", message: "come back: your pane was closed"}}
        - {name: Bash, input: {command: "until roo-mail team show | grep -q 'alice@crew  idle'; do sleep 0.05; done; echo back"}}
    - tool_calls:
        - {name: TaskStop, input: {task_id: alice}}
        - {name: Bash, input: {command: "until roo-mail team show | grep -q 'alice@crew  dead'; do sleep 0.05; done; echo stopped"}}
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
  alice:
    - when: {last_user_contains: "come back"}
      text: "Back, and idle."
    - text: "Ready for instructions."
    - when: {last_user_contains: "ping from the test"}
      tool_calls:
        - {name: TaskUpdate, input: {id: "1", owner: alice}}
        - {name: Bash, input: {command: "echo $$ > sleeper.pid; exec sleep 300"}}
    - text: "Never reached."
"#;

#[test]
fn a_pane_teammate_wakes_for_roo_mail_and_a_killed_pane_releases_its_task() {
    let world = World::new();
    let (tmux, _lead_pane) = world.start_lead(KILLED);
    let alice = wait_until(
        "alice's pane",
        Duration::from_secs(60),
        || tmux.panes().into_iter().find(|p| p.title == "alice"),
        || format!("{}\n{}", tmux.all_screens(), world.lead_output()),
    );
    let team = world.team().unwrap();
    let state = |team: &Team| {
        team.config()
            .ok()
            .and_then(|c| c.member("alice").map(|m| m.observed_state()))
    };
    wait_until(
        "alice to be idle",
        Duration::from_secs(30),
        || (state(&team) == Some(MemberState::Idle)).then_some(()),
        || tmux.all_screens(),
    );

    // A human message from outside the team's processes reaches the idle pane teammate.
    TestCommand::new(bin("roo-mail"))
        .env("ROO_HOME", world.root.join("roo"))
        .args(["send", "--team", "crew", "--as", "lead", "--to", "alice"])
        .args(["--summary", "ping", "ping from the test: claim task 1"])
        .run()
        .assert_ok();
    let one = TaskId::parse("1").unwrap();
    wait_until(
        "alice to claim task 1",
        Duration::from_secs(30),
        || {
            let task = team.tasks().get(&one).ok()?;
            (task.status == TaskStatus::InProgress
                && task.owner.as_ref().map(Name::as_str) == Some("alice"))
            .then_some(())
        },
        || tmux.all_screens(),
    );
    let pid_file = world
        .project()
        .join(".roocode/worktrees/crew+alice/sleeper.pid");
    let sleeper = wait_until(
        "alice's command to start",
        Duration::from_secs(30),
        || read_pid(&pid_file),
        || tmux.all_screens(),
    );

    // The user closes her pane: she is found dead and her task goes back to pending.
    let killed = Instant::now();
    tmux.run(&["kill-pane", "-t", &alice.id]);
    wait_until(
        "task 1 to be released",
        Duration::from_secs(10),
        || {
            let task = team.tasks().get(&one).ok()?;
            (task.status == TaskStatus::Pending && task.owner.is_none()).then_some(())
        },
        || format!("{:#?}", team.tasks().get(&one)),
    );
    eprintln!(
        "killed pane → task released in {:.0} ms",
        killed.elapsed().as_secs_f64() * 1000.0
    );
    assert_eq!(state(&team), Some(MemberState::Dead));
    wait_until(
        "alice's command to end with her",
        Duration::from_secs(10),
        || process_gone(sleeper).then_some(()),
        || format!("pid {sleeper}"),
    );

    // The lead messages the stopped teammate: she starts again in a new pane, from her
    // transcript, and goes idle; the lead then exits and closes it.
    world.root.write("project/release-lead", "");
    let code = lead_exit(&tmux, &world);
    // Task 1 was never finished: the lead's model heard of the death, and the run is no
    // success.
    assert_eq!(code, 1, "{}", world.lead_output());
    assert!(
        world.lead_output().contains(
            "work was lost: a teammate died and these tasks were not finished: #1 Long job"
        ),
        "{}",
        world.lead_output()
    );
    assert!(
        world
            .lead_output()
            .contains("\"preview\":\"teammate alice died\""),
        "{}",
        world.lead_output()
    );
    let log = std::fs::read_to_string(world.root.join("tmux.log")).unwrap();
    let starts: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("respawn-pane") && l.contains("--name alice"))
        .collect();
    assert_eq!(starts.len(), 2, "{log}");
    assert!(
        !starts[1].contains("--prompt"),
        "a restart resumes: {}",
        starts[1]
    );
    let out = std::fs::read_to_string(world.root.join("lead.out")).unwrap();
    assert!(out.contains("back\\n"), "alice came back idle: {out}");
    // TaskStop ended her worker (and closed her pane) while the lead ran.
    assert!(out.contains("stopped\\n"), "TaskStop ended alice: {out}");
    let second = starts[1]
        .split_whitespace()
        .skip_while(|w| *w != "-t")
        .nth(1)
        .unwrap();
    assert!(
        log.contains(&format!("kill-pane -t {second}")),
        "her second pane {second} was closed: {log}"
    );
    let left = tmux.panes();
    assert_eq!(left.len(), 1, "{left:#?}");
    assert_eq!(workers_under(world.root.path()), Vec::<String>::new());
}

const KEPT: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
    - tool_calls:
        - {name: Agent, input: {name: alice, prompt: "Say you are ready."}}
    - text: "Waiting."
    - text: "Done."
    - text: "Done."
    - text: "Done."
  alice:
    - text: "Ready."
    - text: "Still here."
"#;

#[test]
fn with_keep_panes_a_pane_teammate_outlives_the_lead_and_still_takes_messages() {
    let world = World::new();
    let (tmux, _lead_pane) = world.start_lead_with(KEPT, "--keep-panes");
    let code = lead_exit(&tmux, &world);
    assert_eq!(code, 0, "{}", world.lead_output());
    let alice = tmux
        .panes()
        .into_iter()
        .find(|p| p.title == "alice")
        .unwrap_or_else(|| panic!("alice's pane was kept: {}", tmux.all_screens()));
    assert!(!alice.dead && !process_gone(alice.pid as i32), "{alice:#?}");
    // Still a working teammate: a message wakes it.
    TestCommand::new(bin("roo-mail"))
        .env("ROO_HOME", world.root.join("roo"))
        .args(["send", "--team", "crew", "--as", "lead", "--to", "alice"])
        .args(["--summary", "still there?", "are you still there?"])
        .run()
        .assert_ok();
    wait_until(
        "alice to answer in her pane",
        Duration::from_secs(30),
        || {
            let screen = tmux.run(&["capture-pane", "-p", "-t", &alice.id]);
            screen.contains("Still here.").then_some(())
        },
        || tmux.all_screens(),
    );
    drop(tmux);
    wait_until(
        "the kept worker to end with its tmux server",
        Duration::from_secs(10),
        || process_gone(alice.pid as i32).then_some(()),
        || workers_under(world.root.path()).join("\n"),
    );
}

/// Kills a private tmux server on drop, and removes its socket file.
struct Server(String);

impl Drop for Server {
    fn drop(&mut self) {
        roo_tests::end_tmux_server(&self.0);
    }
}

#[test]
fn outside_tmux_pane_teammates_get_a_detached_session_that_goes_away_with_them() {
    use roo_team::backend::{Launch, Placement, Socket, TeammateExecutor, Tmux, TmuxExecutor};

    let world = World::new();
    let server = Server(format!("roo-test-{}-detached", std::process::id()));
    let script = world
        .root
        .write("script.yaml", "agents:\n  alice:\n    - text: \"Ready.\"\n");
    let home = RooHome::new(world.root.join("roo"));
    let crew = Name::parse("crew").unwrap();
    let team = Team::create(
        &home,
        crew.clone(),
        "",
        roo_store::Member::new(Name::parse("lead").unwrap(), &crew),
        Vec::new(),
    )
    .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(["-L", &server.0, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap()
    };
    runtime.block_on(async {
        let executor = TmuxExecutor::new(
            Tmux::new("tmux", Some(Socket::Name(server.0.clone()))).with_config("/dev/null"),
            Placement::Session { name: None },
            bin("roo-worker"),
            &world.root.join("roo"),
        );
        let alice = Name::parse("alice").unwrap();
        let mut settings = roo_team::AgentSettings::new(
            roo_team::Identity::teammate(alice.clone(), crew.clone(), Name::parse("lead").unwrap()),
            world.root.join("roo"),
        );
        settings.llm.provider = Some("script".into());
        settings.llm.script = Some(script.clone());
        settings.trust = roo_team::Trust::Granted;
        let notices = executor
            .spawn(Launch {
                team: team.clone(),
                name: alice.clone(),
                lead: Name::parse("lead").unwrap(),
                prompt: "Say you are ready.".into(),
                settings,
                plan_mode_required: false,
                mode_after_plan: roo_agent::permissions::PermissionMode::Default,
                agent_type: None,
                model: None,
                work_dir: world.project(),
                color: Some("magenta".into()),
                tools: Vec::new(),
                lead_key: None,
                member_login: None,
            })
            .await
            .unwrap();
        assert!(
            notices
                .iter()
                .any(|n| n.contains(&format!("tmux -L {} attach -t roo-crew", server.0))),
            "{notices:?}"
        );
        let listing = String::from_utf8(
            tmux(&[
                "list-panes",
                "-a",
                "-F",
                "#{session_name} #{pane_id} #{pane_title}",
            ])
            .stdout,
        )
        .unwrap();
        let pane = executor.pane_of(&alice).unwrap();
        assert_eq!(listing.trim(), format!("roo-crew {pane} alice"));
        let member = team.config().unwrap().member("alice").cloned().unwrap();
        assert_eq!(member.pane_id.as_deref(), Some(pane.as_str()));
        assert_eq!(member.color.as_deref(), Some("magenta"));
        assert!(executor.is_active(&alice));
        let pid = member.pid.unwrap();

        executor.shutdown_all(false).await;
        assert!(process_gone(pid as i32), "the worker ended");
        assert!(
            !tmux(&["has-session", "-t", "=roo-crew"]).status.success(),
            "the session went away with its last pane"
        );
    });
}

#[test]
fn a_pane_worker_that_cannot_start_is_a_spawn_error_showing_why_and_leaves_no_pane() {
    use roo_team::backend::{Launch, Placement, Socket, TeammateExecutor, Tmux, TmuxExecutor};

    let world = World::new();
    let server = Server(format!("roo-test-{}-failing", std::process::id()));
    let home = RooHome::new(world.root.join("roo"));
    let crew = Name::parse("crew").unwrap();
    let team = Team::create(
        &home,
        crew.clone(),
        "",
        roo_store::Member::new(Name::parse("lead").unwrap(), &crew),
        Vec::new(),
    )
    .unwrap();
    // The team is gone before the worker starts: it refuses to join (exit 2).
    team.delete(true).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let executor = TmuxExecutor::new(
            Tmux::new("tmux", Some(Socket::Name(server.0.clone()))).with_config("/dev/null"),
            Placement::Session { name: None },
            bin("roo-worker"),
            &world.root.join("roo"),
        );
        let alice = Name::parse("alice").unwrap();
        let mut settings = roo_team::AgentSettings::new(
            roo_team::Identity::teammate(alice.clone(), crew.clone(), Name::parse("lead").unwrap()),
            world.root.join("roo"),
        );
        settings.llm.provider = Some("script".into());
        settings.llm.script = Some(world.root.write("script.yaml", "- text: x\n"));
        eprintln!("(the spawn below is expected to fail)");
        let err = executor
            .spawn(Launch {
                team: team.clone(),
                name: alice.clone(),
                lead: Name::parse("lead").unwrap(),
                prompt: "hi".into(),
                settings,
                plan_mode_required: false,
                mode_after_plan: roo_agent::permissions::PermissionMode::Default,
                agent_type: None,
                model: None,
                work_dir: world.project(),
                color: None,
                tools: Vec::new(),
                lead_key: None,
                member_login: None,
            })
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("start alice: roo-worker exited before joining the team")
                && err.contains("its pane showed:")
                && err.contains("roo-worker: "),
            "{err}"
        );
        assert!(!executor.is_active(&alice));
        let sessions = std::process::Command::new("tmux")
            .args(["-L", &server.0, "-f", "/dev/null", "list-panes", "-a"])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&sessions.stdout).trim().is_empty(),
            "no pane left: {sessions:?}"
        );
        let handoffs = world.root.join("roo/run/handoff");
        let left: Vec<_> = std::fs::read_dir(&handoffs)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "handoff files left: {left:?}");
    });
}

#[test]
fn when_the_leads_window_is_full_a_teammate_gets_a_window_of_its_own_and_all_are_closed() {
    use roo_team::backend::{Launch, Placement, Socket, TeammateExecutor, Tmux, TmuxExecutor};

    let world = World::new();
    let server = Server(format!("roo-test-{}-full", std::process::id()));
    let tmux = |args: &[&str]| {
        let out = std::process::Command::new("tmux")
            .args(["-L", &server.0, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    // A lead's window with room for only a few panes.
    tmux(&[
        "new-session",
        "-d",
        "-s",
        "lead",
        "-x",
        "30",
        "-y",
        "8",
        "--",
        "sleep",
        "100000",
    ]);
    let lead_pane = tmux(&["display-message", "-p", "-t", "lead", "#{pane_id}"])
        .trim()
        .to_string();
    let script = world
        .root
        .write("script.yaml", "agents:\n  \"*\":\n    - text: \"Ready.\"\n");
    let home = RooHome::new(world.root.join("roo"));
    let crew = Name::parse("crew").unwrap();
    let lead = Name::parse("lead").unwrap();
    let team = Team::create(
        &home,
        crew.clone(),
        "",
        roo_store::Member::new(lead.clone(), &crew),
        Vec::new(),
    )
    .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let executor = TmuxExecutor::new(
            Tmux::new("tmux", Some(Socket::Name(server.0.clone()))).with_config("/dev/null"),
            Placement::Window {
                lead_pane: lead_pane.clone(),
            },
            bin("roo-worker"),
            &world.root.join("roo"),
        );
        let mut notices = Vec::new();
        for who in ["t1", "t2", "t3", "t4", "t5", "t6"] {
            let me = Name::parse(who).unwrap();
            let mut settings = roo_team::AgentSettings::new(
                roo_team::Identity::teammate(me.clone(), crew.clone(), lead.clone()),
                world.root.join("roo"),
            );
            settings.llm.provider = Some("script".into());
            settings.llm.script = Some(script.clone());
            let said = executor
                .spawn(Launch {
                    team: team.clone(),
                    name: me.clone(),
                    lead: lead.clone(),
                    prompt: "Say you are ready.".into(),
                    settings,
                    plan_mode_required: false,
                    mode_after_plan: roo_agent::permissions::PermissionMode::Default,
                    agent_type: None,
                    model: None,
                    work_dir: world.project(),
                    color: None,
                    tools: Vec::new(),
                    lead_key: None,
                    member_login: None,
                })
                .await
                .unwrap_or_else(|e| panic!("spawn {who}: {e}"));
            notices.extend(said);
            assert!(executor.is_active(&me), "{who}");
        }
        assert!(
            notices.iter().any(|n| n.contains("a window of its own")),
            "{notices:?}"
        );
        let windows = tmux(&["list-windows", "-a", "-F", "#{window_id}"]);
        assert!(windows.lines().count() > 1, "{windows}");
        executor.shutdown_all(false).await;
        let left = tmux(&["list-panes", "-a", "-F", "#{pane_id}"]);
        assert_eq!(left.trim(), lead_pane, "only the lead's pane is left");
    });
}

/// A pane teammate (its pane has `TMUX` and the server's socket is in the standard
/// place) cannot have the lead's tmux server run a command for it, neither through
/// `$TMUX` nor through any socket it finds: the window would run outside the sandbox.
#[test]
fn a_pane_teammates_commands_cannot_drive_the_tmux_server_it_runs_in() {
    if let Some(why) = roo_tests::confinement_untestable(Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        eprintln!("skipped: {why}");
        return;
    }
    let world = World::new();
    std::fs::create_dir_all(world.root.join("outside")).unwrap();
    let outside = world.root.join("outside");
    // The command reports in the temp dir (its worktree is removed with the team).
    let signals = TempDir::new();
    let attack = format!(
        "echo \"TMUX=${{TMUX:-unset}}\" > {g}/tmux-env.txt; \
         tmux new-window -d 'touch {o}/pwned-env'; \
         for s in /tmp/tmux-*/* \"${{TMUX_TMPDIR:-/tmp}}\"/tmux-*/*; do \
         tmux -S \"$s\" new-window -d 'touch {o}/pwned-sock'; done; \
         echo done > {g}/attacked.txt",
        g = signals.path().display(),
        o = outside.display()
    );
    let script = format!(
        r#"agents:
  lead:
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew}}}}
    - tool_calls:
        - {{name: Agent, input: {{name: alice, prompt: "Do the job."}}}}
    - text: "Waiting."
    - text: "Done."
    - text: "Done."
    - text: "Done."
  alice:
    - tool_calls:
        - {{name: Bash, input: {{command: {attack}}}}}
    - text: "Job done."
"#,
        attack = serde_json::to_string(&attack).unwrap()
    );
    let (tmux, _lead_pane) = world.start_lead(&script);
    let code = lead_exit(&tmux, &world);
    assert_eq!(code, 0, "{}", world.lead_output());
    assert!(
        signals.join("attacked.txt").exists(),
        "alice's command did not run: {}\n{}",
        world.lead_output(),
        tmux.all_screens()
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!outside.join("pwned-env").exists(), "escaped through $TMUX");
    assert!(
        !outside.join("pwned-sock").exists(),
        "escaped through the socket"
    );
    assert_eq!(
        std::fs::read_to_string(signals.join("tmux-env.txt"))
            .unwrap()
            .trim(),
        "TMUX=unset"
    );
}

/// A pane teammate's prompt from the lead is on no process's command line (a peer reads
/// every `/proc/<pid>/cmdline`; tmux's argv is logged too): it goes through the handoff,
/// and the worker still acts on it — a prompt of 96 KiB too.
#[test]
fn a_pane_teammates_prompt_is_on_no_command_line_and_still_reaches_it() {
    const PROMPT_CANARY: &str = "prompt-canary-4f1d2b7e9a";
    let world = World::new();
    // The command reports in the temp dir (its worktree is removed with the team).
    let signals = TempDir::new();
    let script = format!(
        r#"agents:
  lead:
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew}}}}
    - tool_calls:
        - {{name: Agent, input: {{name: alice, prompt: "Do the job {PROMPT_CANARY}. {notes}"}}}}
    - text: "Waiting."
    - text: "Done."
    - text: "Done."
    - text: "Done."
  alice:
    - when: {{last_user_contains: "{PROMPT_CANARY}"}}
      tool_calls:
        - {{name: Bash, input: {{command: "echo got > '{got}'"}}}}
    - text: "Job done."
    - text: "Job done."
"#,
        got = signals.join("got-prompt.txt").display(),
        // A long prompt (more than a pipe holds by default) still goes through.
        notes = "Some notes. ".repeat(8 * 1024),
    );
    let sampler = ArgvSampler::start(PROMPT_CANARY);
    let (tmux, _lead_pane) = world.start_lead(&script);
    let code = lead_exit(&tmux, &world);
    let (hits, rounds) = sampler.finish();
    assert_eq!(code, 0, "{}", world.lead_output());
    assert!(
        signals.join("got-prompt.txt").exists(),
        "alice did not act on her prompt: {}\n{}",
        world.lead_output(),
        tmux.all_screens()
    );
    assert!(rounds > 10, "the sampler ran");
    // The lead's own command line holds its script's path, never the script's text.
    assert!(
        hits.is_empty(),
        "the prompt was on a command line: {hits:#?}"
    );
    let log = std::fs::read_to_string(world.root.join("tmux.log")).unwrap();
    assert!(log.contains("respawn-pane"), "{log}");
    assert!(
        !log.contains(PROMPT_CANARY),
        "the prompt was on tmux's argv: {log}"
    );
}

/// Puts a `git` first on the lead's `PATH` that runs `action` (a shell snippet) before
/// every `git clone` and then the real git: the lead's clone of a teammate is held back
/// (or fails) while everything else runs as usual.
fn hold_clones(world: &World, action: &str) {
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let wrapper = world.root.write(
        "wrap/git",
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do if [ \"$a\" = clone ]; then {action}; break; fi; done\n\
             exec {} \"$@\"\n",
            real.trim()
        ),
    );
    make_executable(&wrapper);
}

/// Watches, while the lead runs, whether alice's `roo-worker` ran before her clone was
/// there (its `.git/HEAD`).
fn worker_before_clone(world: &World) -> (Arc<AtomicBool>, Arc<AtomicBool>) {
    let (stop, seen) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let head = world
        .project()
        .join(".roocode/worktrees/crew+alice/.git/HEAD");
    let root = world.root.path().to_path_buf();
    std::thread::spawn({
        let (stop, seen) = (stop.clone(), seen.clone());
        move || {
            while !stop.load(Ordering::Relaxed) {
                if !head.exists() && !workers_under(&root).is_empty() && !head.exists() {
                    seen.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    });
    (stop, seen)
}

/// Issue 31 item 7: a pane teammate's worker starts while the lead makes its clone (here held
/// back 1.5 s), and its first turn — a tool call — runs only once the clone is complete:
/// it sees the clone's branch and files. With the gate removed (the worker's workspace
/// opened at once) the call ran in a directory that was not there yet and this fails.
#[test]
fn a_pane_teammate_starts_while_its_clone_is_made_and_its_first_tool_call_sees_it_complete() {
    let world = World::new();
    hold_clones(&world, "sleep 1.5");
    let signals = TempDir::new();
    let seen = signals.join("seen.txt");
    let script = format!(
        r#"agents:
  lead:
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew}}}}
    - tool_calls:
        - {{name: Agent, input: {{name: alice, prompt: "Look around."}}}}
    - text: "Waiting."
    - text: "Done."
    - text: "Done."
    - text: "Done."
  alice:
    - tool_calls:
        - {{name: Bash, input: {{command: "git symbolic-ref HEAD > '{seen}' 2>&1; cat README.md >> '{seen}' 2>&1"}}}}
    - text: "Looked."
    - text: "Looked."
"#,
        seen = seen.display(),
    );
    let (stop, early) = worker_before_clone(&world);
    let (tmux, _lead_pane) = world.start_lead(&script);
    let code = lead_exit(&tmux, &world);
    stop.store(true, Ordering::Relaxed);
    assert_eq!(code, 0, "{}\n{}", world.lead_output(), tmux.all_screens());
    let seen = std::fs::read_to_string(&seen).unwrap_or_default();
    assert!(
        seen.contains("refs/heads/roo/crew/alice") && seen.contains("# demo"),
        "alice's first tool call did not see her finished clone: {seen:?}\n{}\n{}",
        world.lead_output(),
        tmux.all_screens()
    );
    assert!(
        early.load(Ordering::Relaxed),
        "alice's worker did not start before her clone was made"
    );
    let gates: Vec<_> = std::fs::read_dir(world.root.join("roo/run/handoff"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        gates
            .iter()
            .all(|p| p.extension().is_none_or(|e| e != "clone")),
        "clone gates left: {gates:?}"
    );
}

/// A clone that fails while the pane teammate starts: the spawn fails saying why, the
/// teammate ran no tool call and is stopped, and no worker, clone, branch or gate is left.
#[test]
fn a_failed_clone_stops_the_started_pane_teammate_and_fails_the_spawn_leaving_nothing() {
    let world = World::new();
    hold_clones(
        &world,
        "sleep 0.5; echo 'fatal: clone refused by the test' >&2; exit 1",
    );
    let signals = TempDir::new();
    let ran = signals.join("ran.txt");
    let script = format!(
        r#"agents:
  lead:
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew}}}}
    - tool_calls:
        - {{name: Agent, input: {{name: alice, prompt: "Look around."}}}}
    - text: "Alice could not start."
    - text: "Done."
  alice:
    - tool_calls:
        - {{name: Bash, input: {{command: "echo ran > '{ran}'"}}}}
    - text: "Looked."
"#,
        ran = ran.display(),
    );
    let (tmux, _lead_pane) = world.start_lead(&script);
    let code = lead_exit(&tmux, &world);
    // The team was not formed as asked: `-p` says so and exits 1.
    assert_eq!(code, 1, "{}", world.lead_output());
    let out = world.lead_output();
    assert!(
        out.contains("failed to prepare the worktree of alice")
            && out.contains("clone refused by the test"),
        "the lead was not told why: {out}"
    );
    assert!(!ran.exists(), "alice ran a tool call without her clone");
    assert_alice_left_nothing(&world);
    let gates: Vec<_> = std::fs::read_dir(world.root.join("roo/run/handoff"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        gates
            .iter()
            .all(|p| p.extension().is_none_or(|e| e != "clone")),
        "clone gates left: {gates:?}"
    );
}

/// A clone made, but its gate not written (here the lead's handoff directory is replaced by
/// a file while the clone is held back, once alice's worker took its handoff): the spawn
/// fails as for a failed clone — the worker is stopped before any tool call and the clone and
/// branch are removed. When the lead only logged the failed write, the spawn succeeded and
/// alice waited on a gate that never opened.
#[test]
fn a_clone_gate_the_lead_cannot_write_fails_the_spawn_leaving_nothing() {
    let world = World::new();
    let handoff = world.root.join("roo/run/handoff");
    // The clone runs confined (it cannot reach ROO_HOME): the test itself spoils the
    // directory, once the lead removed alice's handoff socket (she joined).
    hold_clones(&world, "sleep 3");
    let spoiler = std::thread::spawn({
        let handoff = handoff.clone();
        move || {
            let socks = || {
                std::fs::read_dir(&handoff)
                    .map(|d| {
                        d.flatten()
                            .filter(|e| e.path().extension().is_some_and(|x| x == "sock"))
                            .count()
                    })
                    .unwrap_or(0)
            };
            let start = std::time::Instant::now();
            while socks() == 0 && start.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(5));
            }
            while socks() > 0 && start.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(5));
            }
            std::fs::rename(&handoff, handoff.with_extension("away")).unwrap();
            std::fs::write(&handoff, "in the way\n").unwrap();
        }
    });
    let signals = TempDir::new();
    let ran = signals.join("ran.txt");
    let script = format!(
        r#"agents:
  lead:
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew}}}}
    - tool_calls:
        - {{name: Agent, input: {{name: alice, prompt: "Look around."}}}}
    - text: "Alice could not start."
    - text: "Done."
  alice:
    - tool_calls:
        - {{name: Bash, input: {{command: "echo ran > '{ran}'"}}}}
    - text: "Looked."
"#,
        ran = ran.display(),
    );
    let (tmux, _lead_pane) = world.start_lead(&script);
    let code = lead_exit(&tmux, &world);
    spoiler.join().unwrap();
    assert_eq!(code, 1, "{}", world.lead_output());
    let out = world.lead_output();
    assert!(
        out.contains("failed to prepare the worktree of alice")
            && out.contains(&*handoff.to_string_lossy()),
        "the lead was not told why: {out}"
    );
    assert!(!ran.exists(), "alice ran a tool call without her gate");
    assert_alice_left_nothing(&world);
}
