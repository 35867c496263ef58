//! Benchmark: what a checkpoint costs per file-changing call in a 10,000-file git
//! project (issue 32), through the public API the agent loop calls around each call.
//!
//! The project: 10,000 files of about 1 KiB in 100 directories, a `.git`, and a
//! `.gitignore`d `target/` of 5,000 more files that a walk must not enter. Timed:
//! - the first command checkpoint, which walks the tree and keeps every file;
//! - each later command checkpoint: before it, one walk that finds what the previous
//!   command changed and keeps what this one may change (stamps compared, the one file
//!   the previous command changed kept); after it, only the time it returned is noted;
//! - the end of a run after a command (one walk that finds what the command changed);
//! - a file tool's checkpoint (one path) before and after its write.
//!
//! `scripts/bench-checkpoints` (release build; `ROO_BENCH_N`, default 200). Results:
//! docs/BENCHMARKS.md ("Checkpoints").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use roo_agent::{CallScope, CheckpointLimits, Checkpoints, ConversationMark};

const FILES: usize = 10_000;
const DIRS: usize = 100;
const IGNORED: usize = 5_000;

fn project(root: &Path) {
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    let body = "fn line() -> u32 { 42 }\n".repeat(40);
    for i in 0..FILES {
        let dir = root.join(format!("src/m{:03}", i % DIRS));
        if i < DIRS {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(dir.join(format!("f{i:05}.rs")), format!("// {i}\n{body}")).unwrap();
    }
    std::fs::create_dir_all(root.join("target/debug")).unwrap();
    for i in 0..IGNORED {
        std::fs::write(root.join(format!("target/debug/o{i:05}")), "obj").unwrap();
    }
}

/// The floor: listing every directory and `lstat`ing every file (what `find -printf '%s %T@'`
/// does), without the ignore rules, on the same tree and load.
fn lstat_all(dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        n += if meta.is_dir() {
            lstat_all(&entry.path())
        } else {
            1
        };
    }
    n
}

/// CPU time of the whole process (every thread) so far, from `/proc/self/stat` (10 ms
/// ticks: read over a loop of calls, not one). Less moved by other processes' load than
/// wall time.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(") ").map_or("", |(_, a)| a);
    let fields: Vec<u64> = after.split(' ').map(|f| f.parse().unwrap_or(0)).collect();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn per_call(total: Duration, calls: usize) -> String {
    ms(total / u32::try_from(calls.max(1)).unwrap_or(u32::MAX))
}

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort();
    times[((times.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn row(name: &str, times: &mut [Duration]) {
    let p50 = percentile(times, 0.5);
    let p90 = percentile(times, 0.9);
    println!("| {name} | {} | {} |", ms(p50), ms(p90));
}

fn main() {
    let runs: usize = std::env::var("ROO_BENCH_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("project");
    let home = base.join("home");
    project(&root);
    let mark = ConversationMark {
        messages: 0,
        tail_blocks: 0,
    };
    let checkpoints =
        Checkpoints::open(&home, &root, "bench", CheckpointLimits::default()).unwrap();
    checkpoints.begin_prompt("benchmark", mark).unwrap();

    let started = Instant::now();
    let pending = checkpoints
        .before_call(&CallScope::Tree, &root)
        .unwrap()
        .expect("a git project's command is checkpointed");
    let first = started.elapsed();
    checkpoints.after_call(pending).unwrap();

    let mut before = Vec::with_capacity(runs);
    let mut after = Vec::with_capacity(runs);
    let cpu_started = cpu();
    for i in 0..runs {
        let started = Instant::now();
        let pending = checkpoints
            .before_call(&CallScope::Tree, &root)
            .unwrap()
            .unwrap();
        before.push(started.elapsed());
        // The "command": one file changed.
        let file = root.join(format!("src/m{:03}/f{:05}.rs", i % DIRS, i % FILES));
        std::fs::write(&file, format!("// changed {i}\n")).unwrap();
        let started = Instant::now();
        checkpoints.after_call(pending).unwrap();
        after.push(started.elapsed());
    }
    let command_cpu = cpu() - cpu_started;

    // A run that ends after its command: the walk that finds what the command changed.
    let mut settle = Vec::with_capacity(runs);
    let mut settle_cpu = Duration::ZERO;
    for i in 0..runs {
        let pending = checkpoints
            .before_call(&CallScope::Tree, &root)
            .unwrap()
            .unwrap();
        let file = root.join(format!(
            "src/m{:03}/f{:05}.rs",
            (i + 3) % DIRS,
            (i + 5000) % FILES
        ));
        std::fs::write(&file, format!("// run {i}\n")).unwrap();
        checkpoints.after_call(pending).unwrap();
        let started = Instant::now();
        let cpu_started = cpu();
        checkpoints.settle().unwrap();
        settle_cpu += cpu() - cpu_started;
        settle.push(started.elapsed());
    }

    let mut write_before = Vec::with_capacity(runs);
    let mut write_after = Vec::with_capacity(runs);
    for i in 0..runs {
        // A new prompt each time, so every write records its file's earlier state.
        checkpoints.begin_prompt("write", mark).unwrap();
        let file = root.join(format!(
            "src/m{:03}/f{:05}.rs",
            (i + 7) % DIRS,
            (i * 37) % FILES
        ));
        let started = Instant::now();
        let pending = checkpoints
            .before_call(&CallScope::Path(file.clone()), &root)
            .unwrap()
            .unwrap();
        write_before.push(started.elapsed());
        std::fs::write(&file, format!("// written {i}\n")).unwrap();
        let started = Instant::now();
        checkpoints.after_call(pending).unwrap();
        write_after.push(started.elapsed());
    }

    let mut floor = Vec::with_capacity(runs);
    for _ in 0..runs.min(50) {
        let started = Instant::now();
        lstat_all(&root.join("src"));
        floor.push(started.elapsed());
    }

    println!(
        "checkpoints: {FILES} files (+{IGNORED} ignored) in {DIRS} directories, {runs} calls each"
    );
    println!("first command checkpoint (keeps every file): {}", ms(first));
    println!("| step | p50 | p90 |");
    println!("|---|---|---|");
    row("floor: read every directory, lstat every file", &mut floor);
    row(
        "before a command (one walk: what the last command changed, keep what changed)",
        &mut before,
    );
    row("after a command (its end noted, no walk)", &mut after);
    let mut command: Vec<Duration> = before.iter().zip(&after).map(|(a, b)| *a + *b).collect();
    row("a command in all (before + after)", &mut command);
    row(
        "the end of a run after a command (one walk: what it changed)",
        &mut settle,
    );
    row("before a file tool's write (one path)", &mut write_before);
    println!(
        "CPU per command, every thread, mean (before + after + the one-file write): {}",
        per_call(command_cpu, runs)
    );
    println!(
        "CPU per end of a run, every thread, mean: {}",
        per_call(settle_cpu, runs)
    );
    row("after a file tool's write (one path)", &mut write_after);
}
