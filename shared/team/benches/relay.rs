//! Benchmark: what the relay adds to a `roo-mail send` run inside an agent's command
//! (run with `scripts/bench-relay`, which builds the release binaries first).
//!
//! Interleaved, N times each, from this process standing in for the agent:
//! - direct: `roo-mail send` with `ROO_TEAM`/`ROO_AGENT_NAME`, writing the store
//!   itself (what a command did before the team's files were hidden from it);
//! - relayed: the same command with only `ROO_AGENT_FD`: it hands its arguments and
//!   stdio to this process's relay ([`roo_team::relay::serve`]), which checks them
//!   and runs the real `roo-mail` as the member.
//!
//! Prints median and p90 per send and the relay's added cost.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use roo_team::relay::{RelayEnv, serve};

fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join(name);
    assert!(
        path.is_file(),
        "build {name} first: scripts/bench-relay builds the release binaries"
    );
    path
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("roo");
    let mail = bin("roo-mail");
    let created = Command::new(&mail)
        .env("ROO_HOME", &home)
        .args([
            "team", "create", "--team", "t", "--lead", "lead", "--member", "alice",
        ])
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let vars = vec![
        ("ROO_HOME".to_string(), home.display().to_string()),
        ("ROO_TEAM".to_string(), "t".to_string()),
        ("ROO_AGENT_NAME".to_string(), "alice".to_string()),
    ];
    let relay = serve(
        RelayEnv {
            fixed: vars.clone(),
            source: None,
            store: None,
        },
        false,
    )
    .unwrap();
    // The command end, inherited by the relayed sends (this process starts nothing else).
    nix::fcntl::fcntl(
        relay.0.as_ref(),
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .unwrap();
    let fd = relay.0.as_raw_fd().to_string();
    let send = |relayed: bool| {
        let mut cmd = Command::new(&mail);
        cmd.args([
            "send",
            "--to",
            "lead",
            "--summary",
            "a short benchmark message",
        ])
        .arg("hello")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        if relayed {
            cmd.env("ROO_AGENT_FD", &fd)
                .env_remove("ROO_HOME")
                .env_remove("ROO_TEAM")
                .env_remove("ROO_AGENT_NAME");
        } else {
            cmd.envs(vars.iter().map(|(k, v)| (k, v)));
        }
        let start = Instant::now();
        let out = cmd.output().unwrap();
        let took = start.elapsed();
        assert!(out.status.success(), "{out:?}");
        took
    };
    for _ in 0..5 {
        send(false);
        send(true);
    }
    let (mut direct, mut relayed) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        direct.push(send(false));
        relayed.push(send(true));
    }
    direct.sort();
    relayed.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (name, times) in [("direct", &direct), ("relayed", &relayed)] {
        println!(
            "{name:>8}: median {:.2} ms, p90 {:.2} ms ({runs} sends)",
            ms(percentile(times, 0.5)),
            ms(percentile(times, 0.9))
        );
    }
    println!(
        "relay adds {:.2} ms at p50, {:.2} ms at p90",
        ms(percentile(&relayed, 0.5)) - ms(percentile(&direct, 0.5)),
        ms(percentile(&relayed, 0.9)) - ms(percentile(&direct, 0.9))
    );
}
