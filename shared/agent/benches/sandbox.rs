//! Benchmark: what the OS sandbox and the supervisor add to one Bash call (run
//! with `scripts/bench-sandbox`, which builds the release binaries first).
//!
//! The Bash tool runs `true` N times in each of four set-ups, interleaved so
//! machine load hits all four alike:
//! - direct: the shell is started by the agent itself (no helper);
//! - supervised: through the helper (`roo-lead` in helper mode) without a
//!   policy, as with `--no-sandbox`;
//! - sandboxed: through the helper with the default policy for a project whose
//!   fake home holds `~/.ssh`, `~/.aws`, `~/.roocode/config.yaml` and 50 other
//!   entries (the Landlock ruleset is built and applied for every call), with
//!   the namespace layer off: Landlock alone;
//! - namespaces: the same policy with the namespace layer on (Linux): the helper
//!   also enters a user and mount namespace, remounts the mount table read-only
//!   and covers the hidden sockets and secrets `for_root` lists (no home search);
//! - home search: the same, with the agent's search for sockets under a second fake
//!   home of 10,000 files in 111 directories (3 sockets among them, last modified an
//!   hour ago as in a real home): what each command's start pays for it once the
//!   search's cache is warm. The first, cold search is timed on its own.
//!
//! Prints median and p90 per call, the ratios to the direct run, what the
//! namespace layer adds to Landlock alone, and what the home search adds to it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use roo_agent::exec::Launcher;
use roo_agent::exec::sandbox::{CommandSandbox, PolicyEnv, SandboxPolicy, SandboxSettings};
use roo_agent::tool::{Tool, ToolContext};
use roo_agent::tools::Bash;
use serde_json::json;

fn helper() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join("roo-lead");
    assert!(
        path.is_file(),
        "build roo-lead first (scripts/bench-sandbox does): {}",
        path.display()
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
        .unwrap_or(300);
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    // A home with secrets to deny and 50 other entries, so the read rules are
    // decomposed as on a real machine (and the user config exists).
    let home = dir.path().join("home");
    for rel in [".ssh/id_rsa", ".aws/credentials", ".roocode/config.yaml"] {
        std::fs::create_dir_all(home.join(rel).parent().unwrap()).unwrap();
        std::fs::write(home.join(rel), "secret").unwrap();
    }
    for i in 0..50 {
        std::fs::create_dir_all(home.join(format!("dir{i}"))).unwrap();
    }
    let env = PolicyEnv {
        home: Some(home.clone()),
        ..PolicyEnv::from_env(&home.join(".roocode"))
    };
    let landlock_only = SandboxPolicy {
        namespaces: false,
        ..SandboxPolicy::for_root(&project, &SandboxSettings::default(), &env)
    };
    let landlock_only = SandboxPolicy {
        search: Vec::new(),
        ..landlock_only
    };
    let with_namespaces = SandboxPolicy {
        namespaces: true,
        ..landlock_only.clone()
    };
    // A home of 10,000 files: 10 × 10 directories of 100 files, three sockets.
    let big_home = dir.path().join("big-home");
    for a in 0..10 {
        for b in 0..10 {
            let sub = big_home.join(format!("d{a}/e{b}"));
            std::fs::create_dir_all(&sub).unwrap();
            for f in 0..100 {
                std::fs::write(sub.join(format!("f{f}")), "").unwrap();
            }
        }
    }
    let sockets: Vec<_> = [
        ".docker/desktop/docker.sock",
        ".1password/agent.sock",
        ".tmux.sock",
    ]
    .iter()
    .map(|rel| {
        let path = big_home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::net::UnixListener::bind(path).unwrap()
    })
    .collect();
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    let mut dirs = vec![big_home.clone()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            }
        }
        std::fs::File::open(&d)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
    }
    let home_search = SandboxPolicy {
        search: vec![big_home.clone()],
        ..with_namespaces.clone()
    };
    let cold = Instant::now();
    let found = roo_agent::exec::sandbox::home_sockets::search(
        &home_search.search,
        &home_search.hide,
        &home_search.write,
    );
    let cold = cold.elapsed();
    assert_eq!(found.sockets.len(), 3, "{found:?}");
    let hidden = with_namespaces.hide.len();
    let present = with_namespaces.hide.iter().filter(|p| p.exists()).count();
    let context = |sandbox: Option<CommandSandbox>| ToolContext {
        launcher: Launcher::new(sandbox.map(Arc::new)),
        ..ToolContext::new(project.clone(), dir.path().join("session"))
    };
    let setups = [
        ("direct", context(None)),
        (
            "supervised",
            context(Some(CommandSandbox {
                helper: helper(),
                policy: None,
            })),
        ),
        (
            "sandboxed",
            context(Some(CommandSandbox {
                helper: helper(),
                policy: Some(landlock_only),
            })),
        ),
        (
            "namespaces",
            context(Some(CommandSandbox {
                helper: helper(),
                policy: Some(with_namespaces),
            })),
        ),
        (
            "home search",
            context(Some(CommandSandbox {
                helper: helper(),
                policy: Some(home_search),
            })),
        ),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); setups.len()];
    runtime.block_on(async {
        for i in 0..runs + 10 {
            for (k, (name, ctx)) in setups.iter().enumerate() {
                let start = Instant::now();
                let out = Bash.call(json!({"command": "true"}), ctx).await;
                let elapsed = start.elapsed();
                assert!(!out.is_error, "{name}: {}", out.content);
                if i >= 10 {
                    times[k].push(elapsed);
                }
            }
        }
    });
    println!("Bash tool, `true`, {runs} calls per set-up (interleaved, 10 warm-up calls)");
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut medians = Vec::new();
    let mut p90s = Vec::new();
    for (k, (name, _)) in setups.iter().enumerate() {
        let mut sorted = times[k].clone();
        sorted.sort();
        let (median, p90) = (percentile(&sorted, 0.5), percentile(&sorted, 0.9));
        medians.push(median);
        p90s.push(p90);
        println!(
            "  {name:<11}  median {:>7.2} ms   p90 {:>7.2} ms   ×{:.2} of direct   (+{:.2} ms)",
            ms(median),
            ms(p90),
            ms(median) / ms(medians[0]),
            ms(median) - ms(medians[0]),
        );
    }
    let (landlock, namespaces) = (2, 3);
    println!(
        "namespace layer over Landlock alone ({hidden} hidden paths, {present} present): \
         +{:.2} ms at p50, +{:.2} ms at p90 (target: < 5 ms at p50)",
        ms(medians[namespaces]) - ms(medians[landlock]),
        ms(p90s[namespaces]) - ms(p90s[landlock]),
    );
    let search = 4;
    println!(
        "home search (10,000 files, {} directories, 3 sockets hidden) over the namespace layer: \
         +{:.2} ms at p50, +{:.2} ms at p90 (target: < 5 ms at p50); cold search {:.2} ms",
        found.dirs,
        ms(medians[search]) - ms(medians[namespaces]),
        ms(p90s[search]) - ms(p90s[namespaces]),
        ms(cold),
    );
    drop(sockets);
}
