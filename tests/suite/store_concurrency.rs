//! Real OS processes racing on one inbox and one task list.

use std::collections::{BTreeMap, HashSet};
use std::process::{Command, Stdio};

use roo_tests::{TempHome, bin};

/// `writers` shell processes each run `roo-mail send` `per_writer` times, concurrently.
/// Returns the texts whose send failed; every failure must be a reported lock timeout
/// (exit 3), never anything else.
fn concurrent_sends(
    env: &TempHome,
    writers: usize,
    per_writer: usize,
    lock_mode: Option<&str>,
) -> HashSet<String> {
    let mail = bin("roo-mail");
    let mut children = Vec::new();
    for w in 0..writers {
        let script = format!(
            "for i in $(seq 1 {per_writer}); do \
               \"$MAIL\" send --team t --from w{w} --to sink --summary \"seq $i\" \"w{w}-$i\" \
                 >/dev/null 2>\"$ERRDIR/err-w{w}\"; rc=$?; \
               if [ $rc -ne 0 ]; then \
                 if [ $rc -eq 3 ] && grep -q 'acquire lock' \"$ERRDIR/err-w{w}\"; then \
                   echo \"w{w}-$i\"; \
                 else cat \"$ERRDIR/err-w{w}\" >&2; rm -f \"$ERRDIR/err-w{w}\"; exit 1; fi; \
               fi; \
             done; rm -f \"$ERRDIR/err-w{w}\""
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .env("MAIL", &mail)
            .env("ERRDIR", env.cwd.path())
            .env("ROO_HOME", env.path())
            .env_remove("ROO_TEAM")
            .env_remove("ROO_AGENT_NAME")
            .env_remove("ROO_LOCK_MODE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(mode) = lock_mode {
            cmd.env("ROO_LOCK_MODE", mode);
        }
        children.push(cmd.spawn().unwrap());
    }
    let mut failed = HashSet::new();
    for (w, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "writer w{w} failed unexpectedly: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        failed.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_owned),
        );
    }
    failed
}

fn team_with_writers(env: &TempHome, writers: usize) {
    let names: Vec<String> = (0..writers).map(|w| format!("w{w}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut members = vec!["sink"];
    members.extend(refs);
    env.team("t", "lead", &members);
}

/// Every message whose send succeeded is in the inbox exactly once; no failed one is.
fn assert_inbox_complete(
    env: &TempHome,
    writers: usize,
    per_writer: usize,
    failed: &HashSet<String>,
) {
    let out = env
        .mail()
        .args([
            "read",
            "--team",
            "t",
            "--as",
            "sink",
            "--json",
            "--archived",
        ])
        .run();
    out.assert_ok();
    let messages = out.json();
    let messages = messages.as_array().unwrap();
    let ids: HashSet<&str> = messages.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), messages.len(), "duplicate ids");
    let mut texts: BTreeMap<String, usize> = BTreeMap::new();
    for m in messages {
        *texts
            .entry(m["text"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    for w in 0..writers {
        for i in 1..=per_writer {
            let key = format!("w{w}-{i}");
            let expected = if failed.contains(&key) {
                None
            } else {
                Some(&1)
            };
            assert_eq!(
                texts.get(&key),
                expected,
                "message {key} lost or duplicated"
            );
        }
    }
    assert_eq!(messages.len(), writers * per_writer - failed.len());
}

#[test]
fn sixteen_writer_processes_lose_and_duplicate_nothing() {
    let env = TempHome::new();
    team_with_writers(&env, 16);
    let failed = concurrent_sends(&env, 16, 15, None);
    assert!(
        failed.is_empty(),
        "lock timeouts with the queue layer: {failed:?}"
    );
    assert_inbox_complete(&env, 16, 15, &failed);
}

#[test]
fn the_original_protocol_under_contention_reports_every_failure_and_loses_nothing() {
    // Without the queue layer a send may exhaust its 10 retries (that is what the queue
    // fixes, see docs/BENCHMARKS.md); it must then fail loudly and write nothing.
    let env = TempHome::new();
    team_with_writers(&env, 8);
    let failed = concurrent_sends(&env, 8, 10, Some("protocol"));
    assert_inbox_complete(&env, 8, 10, &failed);
}

#[test]
fn racing_claimers_claim_each_task_exactly_once() {
    let env = TempHome::new();
    let claimers = 8;
    let names: Vec<String> = (0..claimers).map(|c| format!("c{c}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    env.team("t", "lead", &refs);
    let tasks = 12;
    for i in 0..tasks {
        env.task()
            .args(["create", "--team", "t", "--subject", &format!("task {i}")])
            .run()
            .assert_ok();
    }
    let task_bin = bin("roo-task");
    let children: Vec<_> = (0..claimers)
        .map(|c| {
            // Each claimer walks the ids from a different starting point.
            let script = format!(
                "for k in $(seq 0 {last}); do \
                   id=$(( (k + {c}) % {tasks} + 1 )); \
                   if \"$TASK\" claim $id --team t --as c{c} >/dev/null 2>&1; then echo $id; \
                   else rc=$?; [ $rc -eq 1 ] || {{ echo \"claim exit $rc\" >&2; exit 1; }}; fi; \
                 done",
                last = tasks - 1
            );
            Command::new("sh")
                .arg("-c")
                .arg(script)
                .env("TASK", &task_bin)
                .env("ROO_HOME", env.path())
                .env_remove("ROO_TEAM")
                .env_remove("ROO_AGENT_NAME")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut winners: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (c, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            winners.entry(line.parse().unwrap()).or_default().push(c);
        }
    }
    assert_eq!(winners.len(), tasks, "every task claimed: {winners:?}");
    for (id, who) in &winners {
        assert_eq!(who.len(), 1, "task {id} claimed by {who:?}");
    }
    // The file agrees with what the processes were told.
    let list = env.task().args(["list", "--team", "t", "--json"]).run();
    for task in list.json().as_array().unwrap() {
        let id: u32 = task["id"].as_str().unwrap().parse().unwrap();
        let owner = task["owner"].as_str().unwrap();
        assert_eq!(owner, format!("c{}", winners[&id][0]));
        assert_eq!(task["status"], "in_progress");
    }
}
