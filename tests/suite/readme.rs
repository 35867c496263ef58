//! The README's commands, run as a newcomer runs them: every fenced `bash` block that follows
//! a `<!-- readme-test … -->` line of README.md runs with bash (`set -e`) in a fresh clone
//! of this repository whose `target/release` is the binaries this test drives (so nothing
//! is rebuilt), with a temp `HOME`, no `ROO_*` variable and no API key. Each block must
//! exit 0 and print what its comments promise; a command the README gets wrong fails it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use roo_tests::{TempDir, TestCommand, bin};

/// The marker line before each block the test runs.
const MARKER: &str = "<!-- readme-test";

/// The checkout this test was built from.
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The fenced `bash` blocks that follow a marker line, with the marker's text.
fn marked_blocks(readme: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let Some(label) = line.trim().strip_prefix(MARKER) else {
            continue;
        };
        let label = label.trim_end().trim_end_matches("-->");
        let label = label.trim().trim_start_matches(':').trim().to_string();
        let fence = lines.next().unwrap_or_default().trim();
        assert_eq!(
            fence, "```bash",
            "README: a `{MARKER}` line must be followed by a ```bash block ({label})"
        );
        let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        blocks.push((label, body.join("\n")));
    }
    blocks
}

/// A fresh clone of the checkout in `dir`, its `target/release` the built binaries.
fn fresh_clone(dir: &Path) -> PathBuf {
    let clone = dir.join("roocode");
    let out = TestCommand::new("git")
        .args(["clone", "--quiet"])
        .arg(checkout())
        .arg(&clone)
        .run();
    out.assert_ok();
    std::fs::create_dir_all(clone.join("target")).unwrap();
    let bins = bin("roo-lead").parent().unwrap().to_path_buf();
    std::os::unix::fs::symlink(bins, clone.join("target/release")).unwrap();
    clone
}

/// Runs one block with bash in `clone`, as a newcomer's shell would: `HOME` and `TMPDIR`
/// of the test, no API key, not inside tmux, a git identity (a developer's git has one).
fn run_block(root: &TempDir, clone: &Path, block: &str) -> roo_tests::RunOutput {
    let script =
        format!("set -e\ntrap 'echo \"readme-test: failed: $BASH_COMMAND\" >&2' ERR\n{block}\n");
    let mut cmd = TestCommand::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(clone)
        .env("HOME", root.join("home"))
        .env("TMPDIR", root.join("tmp"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "New Comer")
        .env("GIT_AUTHOR_EMAIL", "newcomer@example.invalid")
        .env("GIT_COMMITTER_NAME", "New Comer")
        .env("GIT_COMMITTER_EMAIL", "newcomer@example.invalid");
    for var in [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "TMUX",
        "TMUX_PANE",
        "TERM_PROGRAM",
        "ITERM_SESSION_ID",
    ] {
        cmd = cmd.env_remove(var);
    }
    cmd.run()
}

/// What the first-team walk-through's comments promise, in its output.
const FIRST_TEAM: &[&str] = &[
    // roo-lead demo: the whole team, ending with its summary.
    "── 1. The lead forms a team",
    "deleted team demo; shut down:",
    "3/3 completed",
    // -p --verbose: the teammates' work, prefixed by name.
    "alice  │ ● Bash(sh tests/test_slug.sh)",
    "bob    │ ● Bash(sh tests/test_stats.sh)",
    // roo-task list: alice and bob completed their tasks.
    "completed @alice  Fix slugify in src/slug.sh",
    "completed @bob  Fix mean in src/stats.sh",
    // The merge run and git log: both fixes merged with --no-ff.
    "Merge roo/demo/alice",
    "Merge roo/demo/bob",
    "slugify: lower-case, squeeze and trim dashes",
    "mean: do not truncate to an integer",
    // team delete.
    "deleted team demo\n",
];

#[test]
fn the_readmes_first_team_walk_through_runs_as_written_in_a_fresh_clone() {
    let readme = std::fs::read_to_string(checkout().join("README.md")).unwrap();
    let blocks = marked_blocks(&readme);
    assert!(
        blocks.iter().any(|(label, _)| label.contains("first team")),
        "README has no `{MARKER}: the first team -->` block: {blocks:?}"
    );
    let root = TempDir::new();
    for dir in ["home", "tmp"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    let clone = fresh_clone(root.path());
    // Twice in the same HOME: a newcomer runs it again, and it must work as written.
    for (round, (label, block)) in blocks.iter().chain(blocks.iter()).enumerate() {
        let label = format!("{label} (run {})", 1 + round / blocks.len());
        let started = Instant::now();
        let out = run_block(&root, &clone, block);
        let shown = format!(
            "README block {label:?} ({:.1} s):\n{block}\n--- stdout\n{}\n--- stderr\n{}",
            started.elapsed().as_secs_f64(),
            out.stdout(),
            out.stderr()
        );
        assert_eq!(out.code(), 0, "{shown}");
        if label.contains("first team") {
            let both = format!("{}\n{}", out.stdout(), out.stderr());
            for promise in FIRST_TEAM {
                assert!(both.contains(promise), "{promise:?} missing: {shown}");
            }
        }
    }
    // The demo removed its directory; nothing of the team is left running.
    let left: Vec<_> = std::fs::read_dir(root.join("tmp"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
    let running = processes_under(root.path());
    assert!(running.is_empty(), "still running: {running:?}");
}

/// Processes (not zombies) whose command line or working directory is under `dir`.
fn processes_under(dir: &Path) -> Vec<String> {
    let dir = dir.to_string_lossy().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().to_string();
        let Ok(pid_num) = pid.parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let cwd = std::fs::read_link(entry.path().join("cwd"))
            .map(|p| p.to_string_lossy().to_string())
            .unwrap_or_default();
        if (cmdline.contains(&dir) || cwd.starts_with(&dir)) && !roo_tests::process_gone(pid_num) {
            found.push(format!("{pid}: {cmdline} (cwd {cwd})"));
        }
    }
    found
}

#[test]
fn marked_blocks_are_the_bash_blocks_after_a_marker() {
    let readme = "intro\n```bash\nnot marked\n```\n<!-- readme-test: one -->\n```bash\na\nb\n```\n";
    assert_eq!(
        marked_blocks(readme),
        [("one".to_string(), "a\nb".to_string())]
    );
}
