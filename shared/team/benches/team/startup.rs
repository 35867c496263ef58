//! Section 8 of the team benchmark (issue 31, item 7): the start-up and spawn spans, side by
//! side, in one child process (`--startup-child N`) whose environment holds the model's key as
//! a lead's does, with a private tmux server (`tmux -L roo-bench-<pid> -f /dev/null`):
//!
//! - the lead's Agent call → the teammate's first request, in process and in a tmux pane, in a
//!   git repository (the teammate gets its clone) and outside one — the span runs from the
//!   arrival of the lead's request answered with the Agent call (the mock's clock) to the
//!   arrival of the teammate's first request;
//! - one agent's start-up: `roo-lead -p` in a git repository, from `Command::spawn` to its
//!   first model request (wall), and the CPU time (user + system) of the whole run — a
//!   one-turn run answered at once, so nearly all of it is start-up: its process and every
//!   process it started and waited for (the sandbox's helpers and `git`), from
//!   `/proc/self/stat`'s `cutime` and `cstime` before and after; and the same CPU time
//!   for each whole in-process team run above (the lead and its teammate are one process),
//!   which other load bends less than the wall clock.
//!
//! The four kinds alternate within each round, so load hits them alike.

use std::process::Stdio;
use std::time::{Duration, Instant};

use roo_llm::mock_server::{MockServer, Protocol};
use roo_llm::script::Script;

use super::panes::PrivateTmux;
use super::{Stats, agent_spawn_once, git_repo, lead_run, load_average};

/// Runs the section in a child process that holds the key (see the module docs).
pub(crate) async fn startup_section(n: usize) {
    let status = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--startup-child", &n.to_string()])
        .env("ANTHROPIC_API_KEY", "bench-key")
        .stdin(Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.success(), "the --startup-child run failed");
}

/// User + system CPU time of the waited-for children of this process, in clock ticks.
fn children_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    // Fields from 3 (state) on; cutime and cstime are fields 16 and 17.
    after
        .split(' ')
        .skip(13)
        .take(2)
        .map(|f| f.parse::<u64>().unwrap())
        .sum()
}

/// One `roo-lead -p` in a fresh one-commit repository answered "ok" at once: spawn → its
/// first request, and the run's CPU time in clock ticks.
async fn single_agent_once() -> (Duration, u64) {
    let server = MockServer::with_script(
        Script::parse("agents:\n  \"*\":\n    - text: ok\n", false).unwrap(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("project");
    git_repo(&cwd, &[("README.md", "# bench\n".into())]);
    let ticks = children_ticks();
    let t0 = Instant::now();
    lead_run(
        &dir.path().join("home"),
        &cwd,
        &server.base_url(Protocol::Anthropic),
        &[],
        "Say ok.",
        &[],
    )
    .await;
    let cpu = children_ticks() - ticks;
    let first = server.requests()[0].received_at;
    (first - t0, cpu)
}

/// The `--startup-child N` process.
pub(crate) async fn startup_child(n: usize) {
    let tmux = PrivateTmux::start();
    let env = tmux.env();
    // [in-process, pane] × [no repository, git repository]
    let mut spawn: [[Vec<Duration>; 2]; 2] = Default::default();
    // CPU ticks of the in-process runs (lead and teammate: one process), by git.
    let mut team_cpu = [0u64; 2];
    let (mut start, mut cpu) = (Vec::new(), 0u64);
    for i in 0..=n {
        for git in [i % 2 == 0, i % 2 != 0] {
            for pane in [false, true] {
                let ticks = children_ticks();
                let [first, _, _] = agent_spawn_once(git, pane.then_some(&env[..])).await;
                if i > 0 {
                    spawn[usize::from(pane)][usize::from(git)].push(first);
                    if !pane {
                        team_cpu[usize::from(git)] += children_ticks() - ticks;
                    }
                }
            }
        }
        let (first, ticks) = single_agent_once().await;
        if i > 0 {
            start.push(first);
            cpu += ticks;
        }
    }
    let tick_ms = 1000.0 / super::clock_ticks_per_second();
    println!(
        "## Start-up and spawn (issue 31): load average {}",
        load_average()
    );
    for (pane, kind) in [(0, "in process"), (1, "tmux pane")] {
        for (git, place) in [(1, "git repository (clone)"), (0, "no repository")] {
            let spans = std::mem::take(&mut spawn[pane][git]);
            println!(
                "Agent call → first request, {kind}, {place:<23} {}",
                Stats(spans).line()
            );
        }
    }
    for (git, place) in [(1, "git repository (clone)"), (0, "no repository")] {
        println!(
            "in-process team run (lead + teammate, whole run), CPU, {place}: mean {:.1} ms",
            team_cpu[git] as f64 * tick_ms / n as f64
        );
    }
    println!(
        "roo-lead -p start → first request, git repository   {}",
        Stats(start.clone()).line()
    );
    println!(
        "roo-lead -p one-turn run, CPU (user + sys, with children): mean {:.1} ms (n={})",
        cpu as f64 * tick_ms / start.len() as f64,
        start.len()
    );
}
