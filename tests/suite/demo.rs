//! `roo-lead demo` from the real binary with no terminal (so in-process teammates): it
//! runs to completion, shows the teammates' lines prefixed with their names, leaves no
//! process and no directory behind, and its summary matches what the store holds (with
//! `--keep`, which leaves the team to inspect). Also the shell examples of
//! `scripts/examples/`, run against a scripted team.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use roo_store::{Name, ReadFilter, RooHome, TaskFilter, TaskStatus, Team};
use roo_tests::{TempDir, TestCommand, bin};

/// A `roo-lead demo` whose temporary directory goes into a directory of the test.
fn demo(tmp: &Path, home: &Path) -> TestCommand {
    TestCommand::new(bin("roo-lead"))
        .env("TMPDIR", tmp)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("PATH", path_with_bins())
        .args(["demo", "--pace-ms", "0", "--timeout", "120"])
}

fn path_with_bins() -> String {
    let bins: PathBuf = bin("roo-mail").parent().unwrap().to_path_buf();
    format!(
        "{}:{}",
        bins.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn world() -> (TempDir, PathBuf, PathBuf) {
    let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let (tmp, home) = (root.join("tmp"), root.join("home"));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    (root, tmp, home)
}

/// Processes (not zombies) whose command line or working directory is under `dir`.
fn processes_under(dir: &Path) -> Vec<String> {
    let dir = dir.to_string_lossy().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().to_string();
        if !pid.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let cwd = std::fs::read_link(entry.path().join("cwd"))
            .map(|p| p.to_string_lossy().to_string())
            .unwrap_or_default();
        if (cmdline.contains(&dir) || cwd.starts_with(&dir))
            && !roo_tests::process_gone(pid.parse().unwrap())
        {
            found.push(format!("{pid}: {cmdline} (cwd {cwd})"));
        }
    }
    found
}

/// The value after `label` on the summary line that starts with it.
fn summary_line<'a>(stdout: &'a str, label: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no summary line {label:?} in:\n{stdout}"))
}

#[test]
fn the_demo_without_a_terminal_runs_in_process_to_the_end_and_leaves_nothing_behind() {
    let (_root, tmp, home) = world();
    let out = demo(&tmp, &home).run();
    out.assert_ok();
    let stdout = out.stdout();
    // The three steps, the teammates' work interleaved with the lead's and prefixed.
    for needle in [
        "── 1. The lead forms a team",
        "↳ sub-agent a1 (Explore) survey the failures",
        "── 2. The lead merges",
        "── 3. The lead cleans up",
        "alice  │ ● Bash(sh tests/test_slug.sh)",
        "bob    │ ● Bash(sh tests/test_stats.sh)",
        "alice  │ ● SendMessage(to bob",
        "bob    │ ● SendMessage(to alice",
        "Both branches are merged and all tests pass",
        "deleted team demo; shut down:",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing in:\n{stdout}");
    }
    // Not a terminal: no colours.
    assert!(!stdout.contains('\x1b'), "{stdout}");
    assert_eq!(summary_line(&stdout, "tasks"), "3/3 completed");
    // Nothing left: no directory, no process (a teammate's command, a roo-worker).
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(
        processes_under(&tmp).is_empty(),
        "{:?}",
        processes_under(&tmp)
    );
}

#[test]
fn the_demos_summary_matches_the_kept_team_on_disk() {
    let (_root, tmp, home) = world();
    let out = demo(&tmp, &home).arg("--keep").run();
    out.assert_ok();
    let stdout = out.stdout();
    let kept: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let kept = &kept[0];
    assert!(
        stdout.contains(&format!("Kept {}", kept.display())),
        "{stdout}"
    );
    assert!(
        processes_under(&tmp).is_empty(),
        "{:?}",
        processes_under(&tmp)
    );

    let team = Team::open(
        &RooHome::new(kept.join("roo-home")),
        Name::parse_as("team", "demo").unwrap(),
    )
    .unwrap();
    // Tasks.
    let tasks = team.tasks().list(&TaskFilter::default()).unwrap();
    let done = tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Completed)
        .count();
    assert_eq!(
        summary_line(&stdout, "tasks"),
        format!("{done}/{} completed", tasks.len())
    );
    assert_eq!((done, tasks.len()), (3, 3));
    // Messages, by type, in every inbox.
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let everything = ReadFilter {
        include_archived: true,
        ..ReadFilter::default()
    };
    for member in team.config().unwrap().members {
        for m in team.mailbox().read(&member.name, &everything).unwrap() {
            *kinds.entry(m.body.type_name()).or_default() += 1;
        }
    }
    let total: usize = kinds.values().sum();
    let listed: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    assert_eq!(
        summary_line(&stdout, "messages"),
        format!("{total} ({})", listed.join(", "))
    );
    assert!(kinds["text"] >= 4, "{kinds:?}");
    // Tokens and requests: each teammate's part is what its runtime charged to tasks;
    // the lead's requests are its assistant messages in its transcript.
    let tokens = summary_line(&stdout, "tokens");
    let requests = summary_line(&stdout, "requests");
    let (mut sum_in, mut sum_out, mut sum_requests) = (0u64, 0u64, 0u64);
    for name in ["alice", "bob"] {
        let usage = tasks
            .iter()
            .filter_map(|t| t.usage.get(&Name::parse(name).unwrap()))
            .fold(roo_store::TaskUsage::default(), |a, u| {
                a.checked_add(u).unwrap()
            });
        let tokens_in = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
        assert!(usage.requests >= 4, "{name}: {usage:?}");
        assert!(
            tokens.contains(&format!("{name} {tokens_in}/{}", usage.output_tokens)),
            "{name}: {usage:?} vs {tokens}"
        );
        assert!(
            requests.contains(&format!("{name} {}", usage.requests)),
            "{name}: {usage:?} vs {requests}"
        );
        sum_in += tokens_in;
        sum_out += usage.output_tokens;
        sum_requests += usage.requests;
    }
    let lead_requests = lead_assistant_messages(&kept.join("roo-home"));
    assert!(
        requests.contains(&format!("lead {lead_requests}")),
        "{lead_requests} vs {requests}"
    );
    // The lead's Explore sub-agent is counted apart, from its own transcript.
    let explore_requests = subagent_assistant_messages(&kept.join("roo-home"), "a1");
    assert_eq!(explore_requests, 2, "{requests}");
    assert!(
        requests.contains(&format!("a1 Explore {explore_requests}")),
        "{requests}"
    );
    let explore_part = tokens
        .split("a1 Explore ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap();
    let (explore_in, explore_out) = explore_part.split_once('/').unwrap();
    sum_in += explore_in.parse::<u64>().unwrap();
    sum_out += explore_out.parse::<u64>().unwrap();
    sum_requests += explore_requests;
    let lead_part = tokens
        .split("(lead ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap();
    let (lead_in, lead_out) = lead_part.split_once('/').unwrap();
    let (lead_in, lead_out): (u64, u64) = (lead_in.parse().unwrap(), lead_out.parse().unwrap());
    assert!(lead_in > 0 && lead_out > 0, "{tokens}");
    assert!(
        tokens.starts_with(&format!(
            "{} in / {} out",
            sum_in + lead_in,
            sum_out + lead_out
        )),
        "{tokens}"
    );
    assert!(requests.starts_with(&format!("{} (", sum_requests + lead_requests)));
    // The work itself: both branches merged into the repository with --no-ff.
    let log = std::process::Command::new("git")
        .args(["log", "--merges", "--format=%s"])
        .current_dir(kept.join("textkit"))
        .output()
        .unwrap();
    let merges = String::from_utf8(log.stdout).unwrap();
    assert!(
        merges.contains("roo/demo/alice") && merges.contains("roo/demo/bob"),
        "{merges}"
    );
    // The team's event log (issue 31): the spawns, joins, the three completions and the
    // two merges with the commits git holds, in seq order.
    let log = team.events(None, usize::MAX).unwrap();
    assert_eq!(log.skipped, 0);
    assert!(log.events.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    let count = |kind: &str| log.events.iter().filter(|e| e.kind.name() == kind).count();
    assert_eq!((count("spawn"), count("task_completed")), (2, 3));
    assert!(count("join") >= 2, "{:#?}", log.events);
    let heads = std::process::Command::new("git")
        .args(["log", "--merges", "--format=%H"])
        .current_dir(kept.join("textkit"))
        .output()
        .unwrap();
    let heads = String::from_utf8(heads.stdout).unwrap();
    let merged: Vec<&roo_store::Event> = log
        .events
        .iter()
        .filter(|e| e.kind.name() == "merge")
        .collect();
    assert_eq!(merged.len(), 2, "{:#?}", log.events);
    for event in merged {
        let roo_store::EventKind::Merge { commit, .. } = &event.kind else {
            unreachable!()
        };
        assert!(heads.contains(commit.as_str()), "{commit} not in {heads}");
        assert_eq!(event.actor, "lead");
    }
}

/// The lead's model requests: the assistant messages in its session transcript
/// (`<session>.jsonl`; its sub-agents' are under `<session>/subagents/`).
fn lead_assistant_messages(roo_home: &Path) -> u64 {
    transcripts_in(&roo_home.join("projects"), 2)
        .iter()
        .filter(|f| !f.to_string_lossy().contains("/subagents/"))
        .map(|f| assistant_messages(f))
        .sum()
}

/// Sub-agent `id`'s model requests: the assistant messages of its transcript.
fn subagent_assistant_messages(roo_home: &Path, id: &str) -> u64 {
    transcripts_in(&roo_home.join("projects"), 4)
        .iter()
        .filter(|f| f.ends_with(format!("subagents/{id}.jsonl")))
        .map(|f| assistant_messages(f))
        .sum()
}

/// The `.jsonl` files under `dir`, at most `depth` levels down.
fn transcripts_in(dir: &Path, depth: usize) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() && depth > 1 {
            found.extend(transcripts_in(&path, depth - 1));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            found.push(path);
        }
    }
    found
}

fn assistant_messages(file: &Path) -> u64 {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|r| r["type"] == "message" && r["message"]["role"] == "assistant")
        .count() as u64
}

#[test]
fn a_demo_whose_team_times_out_exits_1_and_still_leaves_nothing_behind() {
    let (_root, tmp, home) = world();
    let out = TestCommand::new(bin("roo-lead"))
        .env("TMPDIR", &tmp)
        .env("HOME", &home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["demo", "--pace-ms", "200", "--timeout", "0"])
        .run();
    out.assert_code(1);
    out.assert_stderr_contains("still busy after the timeout (--timeout)");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(
        processes_under(&tmp).is_empty(),
        "{:?}",
        processes_under(&tmp)
    );
}

#[test]
fn the_demo_refuses_flags_of_a_normal_run() {
    let (_root, tmp, home) = world();
    let out = TestCommand::new(bin("roo-lead"))
        .env("TMPDIR", &tmp)
        .env("HOME", &home)
        .args(["-p", "hello", "demo"])
        .run();
    out.assert_code(2);
    out.assert_stderr_contains("roo-lead demo makes its own repository");
}

/// `scripts/examples/<name>` of this checkout.
fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts/examples")
        .join(name)
}

/// Runs an example with the built binaries on `PATH` and its scratch team in `tmp`.
fn run_example(name: &str) -> (roo_tests::RunOutput, TempDir, PathBuf) {
    let (root, tmp, home) = world();
    let out = TestCommand::new("bash")
        .arg(example(name))
        .env("TMPDIR", &tmp)
        .env("HOME", &home)
        .env("PATH", path_with_bins())
        .env("TIMEOUT", "60")
        .run();
    (out, root, tmp)
}

#[test]
fn the_task_pipeline_example_completes_every_task_in_dependency_order() {
    let (out, _root, tmp) = run_example("task-pipeline");
    out.assert_ok();
    let stdout = out.stdout();
    assert!(stdout.contains("== created tasks 1 2 3 4"), "{stdout}");
    assert!(stdout.contains("== all tasks completed"), "{stdout}");
    // The final list: every task completed by alice or bob.
    let last = stdout.rsplit("== all tasks completed").next().unwrap();
    assert_eq!(last.matches("completed @").count(), 4, "{last}");
    // Dependencies held: the docs (4) were claimed only after 2 and 3 were completed,
    // and 2 and 3 only after 1. A loop prints "completes" before its update and
    // "claimed" after its claim, so the order of the lines is the order of the changes.
    let claimed = |id: &str| {
        ["alice", "bob"]
            .iter()
            .filter_map(|m| stdout.find(&format!("{m} claimed #{id}")))
            .min()
            .unwrap_or_else(|| panic!("#{id} never claimed:\n{stdout}"))
    };
    let completed = |id: &str| {
        ["alice", "bob"]
            .iter()
            .filter_map(|m| stdout.find(&format!("{m} completes #{id}")))
            .min()
            .unwrap_or_else(|| panic!("#{id} never completed:\n{stdout}"))
    };
    assert!(completed("1") < claimed("2") && completed("1") < claimed("3"));
    assert!(completed("2") < claimed("4") && completed("3") < claimed("4"));
    assert!(
        std::fs::read_dir(&tmp).unwrap().next().is_none(),
        "scratch left"
    );
    assert!(
        processes_under(&tmp).is_empty(),
        "{:?}",
        processes_under(&tmp)
    );
}

#[test]
fn the_send_message_example_wakes_an_idle_worker_that_answers_and_shuts_down() {
    let (out, _root, tmp) = run_example("send-message");
    out.assert_ok();
    let stdout = out.stdout();
    for needle in [
        "alice -> lead [text]",
        "Done: hello.txt is in my working directory.",
        "== hello.txt: hello from alice",
        "== alice shut down (exit 0)",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing in:\n{stdout}");
    }
    assert!(
        std::fs::read_dir(&tmp).unwrap().next().is_none(),
        "scratch left"
    );
    assert!(
        processes_under(&tmp).is_empty(),
        "{:?}",
        processes_under(&tmp)
    );
}

/// Copies the demo's project (`shared/app/demo/project`) into `dir` as a git repository.
fn demo_project(dir: &Path) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/app/demo/project");
    let status = std::process::Command::new("cp")
        .arg("-R")
        .arg(&source)
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success());
    roo_tests::git(dir, &["init", "-q"]);
    roo_tests::git(dir, &["config", "user.name", "Roo Test"]);
    roo_tests::git(dir, &["config", "user.email", "roo@example.invalid"]);
    roo_tests::git(dir, &["add", "-A"]);
    roo_tests::git(dir, &["commit", "-qm", "textkit"]);
}

#[test]
fn a_verbose_headless_lead_shows_its_in_process_teammates_work_prefixed_on_stderr() {
    let (root, _tmp, home) = world();
    let project = root.join("textkit");
    demo_project(&project);
    std::fs::create_dir_all(root.join("roo")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/app/demo/script.yaml");
    let out = TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", root.join("roo"))
        .env("HOME", &home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("PATH", path_with_bins())
        .current_dir(&project)
        .args([
            "-p",
            "Fix the failing tests with two teammates.",
            "--verbose",
        ])
        .args(["--provider", "script", "--script"])
        .arg(&script)
        .args([
            "--permission-mode",
            "bypassPermissions",
            "--team-timeout",
            "60",
        ])
        .run();
    out.assert_ok();
    let stderr = out.stderr();
    for needle in [
        "alice  │ ● Bash(sh tests/test_slug.sh)",
        "bob    │ ● Bash(sh tests/test_stats.sh)",
        "alice  │ The slug tests pass.",
        "bob    │   ⎿ ok",
    ] {
        assert!(stderr.contains(needle), "{needle:?} missing in:\n{stderr}");
    }
    assert!(!stderr.contains('\x1b'), "{stderr}");
    // Each teammate's `joined` comes before its state and its messages (a teammate done
    // within one monitor interval had its idle notification printed first).
    for who in ["alice", "bob"] {
        let joined = stderr
            .find(&format!("+ {who} joined the team"))
            .unwrap_or_else(|| panic!("{who} never joined in:\n{stderr}"));
        let first = [format!("✉ {who}"), format!("● {who} is")]
            .iter()
            .filter_map(|needle| stderr.find(needle.as_str()))
            .min()
            .unwrap_or_else(|| panic!("no line of {who} in:\n{stderr}"));
        assert!(joined < first, "{who}'s lines before its join:\n{stderr}");
    }
}
