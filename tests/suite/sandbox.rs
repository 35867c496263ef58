//! The OS sandbox and supervisor of commands, through the real `roo-lead -p` with
//! a scripted model: what a command may not touch (checked on disk), the
//! `--no-sandbox` switch, the trust rule for its settings, API keys kept out of
//! commands, and no process outliving a command or the agent.
//!
//! Every directory lives under Cargo's target tmp dir, not the system temp dir,
//! which the sandbox leaves writable.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use roo_tests::{
    RunOutput, TempDir, TestCommand, bin, git_init_commit, process_gone, read_pid, wait_until,
};
use serde_json::Value;

const SSH_KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nfake-test-key\n";

/// A fake HOME with an SSH key and a file to protect, a git project, a sibling
/// directory next to it, and a `ROO_HOME`.
struct World {
    root: TempDir,
}

impl World {
    fn new() -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        root.write("home/.ssh/id_rsa", SSH_KEY);
        root.write("home/keep.txt", "precious\n");
        root.write("sibling/existing.txt", "existing\n");
        root.write("project/README.md", "# demo\n");
        std::fs::create_dir_all(root.join("roo")).unwrap();
        git_init_commit(&root.join("project"));
        World { root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// `roo-lead -p` in the project with the scripted model running `commands`
    /// as one Bash call each, in bypass mode.
    fn lead(&self, commands: &[&str]) -> TestCommand {
        self.lead_with_timeout(commands, 600_000)
    }

    /// [`World::lead`] with each call's `timeout_ms`.
    fn lead_with_timeout(&self, commands: &[&str], timeout_ms: u64) -> TestCommand {
        let mut script = String::from("agents:\n  \"*\":\n");
        for command in commands {
            let input = serde_json::json!({"command": command, "timeout_ms": timeout_ms});
            script.push_str(&format!(
                "    - tool_calls:\n        - {{name: Bash, input: {input}}}\n"
            ));
        }
        script.push_str("    - text: \"Done.\"\n");
        let script_path = self.root.write("script.yaml", script);
        TestCommand::new(bin("roo-lead"))
            .env("ROO_HOME", self.path("roo"))
            .env("HOME", self.path("home"))
            .current_dir(self.path("project"))
            .args(["-p", "do it", "--provider", "script", "--script"])
            .arg(script_path)
            .args(["--permission-mode", "bypassPermissions"])
    }

    /// The tool results of the run's transcript, in order.
    fn tool_results(&self) -> Vec<String> {
        let projects = self.path("roo/projects");
        let project = std::fs::read_dir(&projects)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut sessions: Vec<PathBuf> = std::fs::read_dir(project)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
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

/// Whether this kernel enforces the sandbox: `roo-lead` says when it cannot.
fn landlock_available() -> bool {
    let world = World::new();
    let out = world.lead(&["true"]).run();
    !out.stderr().contains("sandbox is unavailable")
}

fn assert_no_key(results: &[String]) {
    for result in results {
        assert!(
            !result.contains("fake-test-key"),
            "the key leaked: {result}"
        );
    }
}

#[test]
fn bypass_mode_cannot_write_outside_the_project_delete_in_home_or_read_ssh_keys() {
    if let Some(why) = roo_tests::confinement_untestable(Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        eprintln!("skipped: {why}");
        return;
    }
    if !landlock_available() {
        eprintln!("skipped: this kernel has no Landlock");
        return;
    }
    let world = World::new();
    let out = world
        .lead(&[
            "echo pwned > ../sibling/pwned.txt",
            "rm -f ../sibling/existing.txt",
            "rm -f \"$HOME/keep.txt\"",
            "cat ~/.ssh/id_rsa > stolen.txt; cat ~/.ssh/id_rsa",
            "echo fine > inside.txt && mkdir -p build && echo ok > build/out && cat build/out",
        ])
        .run();
    out.assert_ok();
    // Checked on disk.
    assert!(!world.path("sibling/pwned.txt").exists());
    assert!(world.path("sibling/existing.txt").exists());
    assert_eq!(
        std::fs::read_to_string(world.path("home/keep.txt")).unwrap(),
        "precious\n"
    );
    let stolen = std::fs::read_to_string(world.path("project/stolen.txt")).unwrap_or_default();
    assert!(!stolen.contains("fake-test-key"), "{stolen}");
    assert_eq!(
        std::fs::read_to_string(world.path("project/inside.txt")).unwrap(),
        "fine\n"
    );
    let results = world.tool_results();
    assert_eq!(results.len(), 5, "{results:#?}");
    assert_no_key(&results);
    for result in &results[..4] {
        assert!(roo_tests::sandbox_refused(result), "{result}");
    }
    assert!(results[4].contains("ok\n") && results[4].contains("[exit code 0]"));
    assert!(
        results[0].contains("OS sandbox"),
        "the hint: {}",
        results[0]
    );
}

#[test]
fn no_sandbox_lets_the_same_command_through_and_says_so() {
    let world = World::new();
    let out = world
        .lead(&["echo written > ../sibling/written.txt"])
        .arg("--no-sandbox")
        .run();
    out.assert_ok();
    out.assert_stderr_contains("the OS sandbox is off (--no-sandbox)");
    assert_eq!(
        std::fs::read_to_string(world.path("sibling/written.txt")).unwrap(),
        "written\n"
    );
}

#[test]
fn a_projects_config_cannot_switch_the_sandbox_off_but_the_users_can_widen_it() {
    if let Some(why) = roo_tests::confinement_untestable(Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        eprintln!("skipped: {why}");
        return;
    }
    if !landlock_available() {
        eprintln!("skipped: this kernel has no Landlock");
        return;
    }
    let world = World::new();
    let sibling = world.path("sibling");
    world.root.write(
        "project/.roocode/config.yaml",
        format!(
            "sandbox: {{enabled: false, allow_write: [\"{}\"]}}\n",
            sibling.display()
        ),
    );
    let out = world.lead(&["echo pwned > ../sibling/pwned.txt"]).run();
    out.assert_ok();
    out.assert_stderr_contains("ignored sandbox settings");
    out.assert_stderr_contains("sandbox.enabled");
    assert!(!world.path("sibling/pwned.txt").exists());

    // The user's own config may add a writable path.
    world.root.write(
        "roo/config.yaml",
        format!("sandbox: {{allow_write: [\"{}\"]}}\n", sibling.display()),
    );
    world
        .lead(&["echo allowed > ../sibling/allowed.txt"])
        .run()
        .assert_ok();
    assert_eq!(
        std::fs::read_to_string(world.path("sibling/allowed.txt")).unwrap(),
        "allowed\n"
    );
}

#[test]
fn api_keys_are_not_in_the_environment_of_commands() {
    let world = World::new();
    let run = |world: &World| -> RunOutput {
        world
            .lead(
                &["env > env.txt; lead=$(awk '{print $4}' /proc/$PPID/stat); \
                 tr '\\0' '\\n' < /proc/$lead/environ > lead-env.txt"],
            )
            .env("ANTHROPIC_API_KEY", "sk-ant-test-secret")
            .env("EXTRA_SERVICE_API_KEY", "sk-extra-secret")
            .env("ROO_VISIBLE_MARKER", "visible")
            .run()
    };
    run(&world).assert_ok();
    let env = std::fs::read_to_string(world.path("project/env.txt")).unwrap();
    assert!(env.contains("ROO_VISIBLE_MARKER=visible"), "{env}");
    assert!(!env.contains("sk-ant-test-secret"), "{env}");
    assert!(!env.contains("sk-extra-secret"), "{env}");
    assert!(!env.contains("ANTHROPIC_API_KEY"), "{env}");
    // Nor in the environment block the agent itself was started with, which a
    // command can read from /proc (the agent re-executes itself without them).
    // Under the namespace layer the agent's `/proc` entries cannot be read at all.
    let lead_env = std::fs::read_to_string(world.path("project/lead-env.txt")).unwrap_or_default();
    assert!(
        lead_env.is_empty() || lead_env.contains("ROO_VISIBLE_MARKER=visible"),
        "{lead_env}"
    );
    assert!(!lead_env.contains("sk-ant-test-secret"), "{lead_env}");
    assert!(!lead_env.contains("sk-extra-secret"), "{lead_env}");

    // The user may pass one through.
    world.root.write(
        "roo/config.yaml",
        "sandbox: {pass_env: [EXTRA_SERVICE_API_KEY]}\n",
    );
    run(&world).assert_ok();
    let env = std::fs::read_to_string(world.path("project/env.txt")).unwrap();
    assert!(
        env.contains("EXTRA_SERVICE_API_KEY=sk-extra-secret"),
        "{env}"
    );
    assert!(!env.contains("sk-ant-test-secret"), "{env}");
}

/// Starts a double-forked daemon (new session) and a job-control job (new
/// process group), writing their pids into the project.
const ESCAPING: &str = "(setsid sleep 300 > /dev/null 2>&1 & echo $! > daemon.pid); \
                        set -m; sleep 301 & echo $! > job.pid; set +m; echo $$ > shell.pid";

fn pids(world: &World) -> Vec<i32> {
    ["daemon.pid", "job.pid", "shell.pid"]
        .iter()
        .filter_map(|f| read_pid(&world.path("project").join(f)))
        .collect()
}

fn kill_all(pids: &[i32]) {
    for &pid in pids {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

#[test]
fn leftover_background_processes_are_ended_and_reported() {
    let world = World::new();
    let out = world.lead(&[&format!("{ESCAPING}; echo started")]).run();
    let pids = pids(&world);
    let alive: Vec<i32> = pids.iter().copied().filter(|&p| !process_gone(p)).collect();
    kill_all(&alive);
    out.assert_ok();
    assert_eq!(pids.len(), 3, "all pid files written");
    assert!(alive.is_empty(), "still running after the call: {alive:?}");
    let results = world.tool_results();
    assert!(
        results[0].contains("ended 2 leftover background process(es)"),
        "{}",
        results[0]
    );
}

#[test]
fn killing_the_lead_ends_daemons_and_jobs_of_the_running_command() {
    let world = World::new();
    let mut child = world.lead(&[&format!("{ESCAPING}; sleep 600")]).spawn();
    let started = wait_until(
        "the command to start its processes",
        Duration::from_secs(30),
        || {
            let pids = pids(&world);
            (pids.len() == 3).then_some(pids)
        },
        || format!("pids so far: {:?}", pids(&world)),
    );
    kill(Pid::from_raw(child.pid() as i32), Signal::SIGKILL).unwrap();
    let _ = child.child().wait();
    let gone = std::panic::catch_unwind(|| {
        wait_until(
            "every process of the command to end with the agent",
            Duration::from_secs(15),
            || started.iter().all(|&p| process_gone(p)).then_some(()),
            || {
                let alive: Vec<i32> = started
                    .iter()
                    .copied()
                    .filter(|&p| !process_gone(p))
                    .collect();
                format!("still running: {alive:?}")
            },
        )
    });
    kill_all(&started);
    gone.unwrap();
}

#[test]
fn a_timed_out_command_ends_its_daemons_and_jobs_too() {
    let world = World::new();
    let out = world
        .lead_with_timeout(&[&format!("{ESCAPING}; sleep 600")], 1500)
        .run();
    let pids = pids(&world);
    let alive: Vec<i32> = pids.iter().copied().filter(|&p| !process_gone(p)).collect();
    kill_all(&alive);
    out.assert_ok();
    assert_eq!(pids.len(), 3, "all pid files written");
    assert!(
        alive.is_empty(),
        "still running after the timeout: {alive:?}"
    );
    let results = world.tool_results();
    assert!(
        results[0].contains("[timed out after 1500 ms"),
        "{}",
        results[0]
    );
}

/// In a team, teammates can write the repository's shared git directory, so its config
/// can name an fsmonitor or a filter that `git status` starts. The status and log the
/// agent reads for its system prompt at start-up therefore run in its sandbox too.
#[test]
fn a_planted_fsmonitor_runs_confined_when_the_agent_reads_git_status_at_start() {
    if let Some(why) = roo_tests::confinement_untestable(Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        eprintln!("skipped: {why}");
        return;
    }
    if !landlock_available() {
        eprintln!("skipped: this kernel has no Landlock");
        return;
    }
    let world = World::new();
    let escaped = world.path("home/fsmonitor-ran.txt");
    let inside = world.path("project/fsmonitor-ran.txt");
    let hook = world.root.write(
        "sibling/fsmonitor.sh",
        format!(
            "#!/bin/sh\necho ran >> '{}'\necho ran >> '{}'\n",
            inside.display(),
            escaped.display()
        ),
    );
    let mut perms = std::fs::metadata(&hook).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&hook, perms).unwrap();
    roo_tests::git(
        &world.path("project"),
        &["config", "core.fsmonitor", &hook.display().to_string()],
    );
    world.lead(&["true"]).run().assert_ok();
    // It ran (git status called it), and could only write inside the project.
    assert!(inside.exists(), "the fsmonitor never ran");
    assert!(!escaped.exists(), "the fsmonitor wrote outside the project");
}

/// Issue 29 item 11 (review): the sealed document (API keys, a worker's prompt) is
/// handed to the re-executed image even when another process of the same user has used
/// up the per-user pipe buffers (pipes grown to 1 MiB past
/// `/proc/sys/fs/pipe-user-pages-soft`), where a pipe can no longer be grown past 16 KiB.
/// As root the agent runs without capabilities (`setpriv --bounding-set=-all`), as any
/// user's agent does, so the kernel's limit applies to it.
// Linux only: it uses a Linux system call (renameat2, F_SETPIPE_SZ).
#[cfg(target_os = "linux")]
#[test]
fn a_large_sealed_document_survives_a_user_whose_pipe_buffers_are_used_up() {
    use nix::fcntl::{FcntlArg, fcntl};
    let soft: usize = std::fs::read_to_string("/proc/sys/fs/pipe-user-pages-soft")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // A key over 16 KiB: the sealed document needs more than a default pipe.
    let key = format!("sk-ant-{}", "k".repeat(40 * 1024));
    let mut cmd = if nix::unistd::geteuid().is_root() {
        TestCommand::new("setpriv")
            .args(["--bounding-set=-all", "--"])
            .arg(bin("roo-lead"))
    } else {
        TestCommand::new(bin("roo-lead"))
    };
    cmd = cmd.arg("--help").env("ANTHROPIC_API_KEY", &key);
    // The hog: pipes of 1 MiB past the soft limit (held only while the agent starts).
    let mut hog = Vec::new();
    for _ in 0..soft * 4096 / (1 << 20) + 2 {
        let (reader, writer) = nix::unistd::pipe().unwrap();
        if fcntl(&writer, FcntlArg::F_SETPIPE_SZ(1 << 20)).is_err() {
            break;
        }
        hog.push((reader, writer));
    }
    let out = cmd.run();
    drop(hog);
    out.assert_ok();
    assert!(!out.stderr().contains("warning"), "{out:?}");
    assert!(out.stdout().contains("Usage"), "{out:?}");
}
