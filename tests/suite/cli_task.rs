//! `roo-task` through the built binary.

use roo_tests::TempHome;

/// `roo-task get ID --team t --json`, parsed.
fn get_json(env: &TempHome, id: &str) -> serde_json::Value {
    env.task()
        .args(["get", id, "--team", "t", "--json"])
        .run()
        .json()
}

fn create(env: &TempHome, args: &[&str]) -> String {
    let out = env.task().args(["create", "--team", "t"]).args(args).run();
    out.assert_ok();
    out.stdout().trim().to_owned()
}

#[test]
fn refuses_a_team_that_does_not_exist_and_creates_nothing() {
    let env = TempHome::new();
    env.task()
        .args(["create", "--team", "ghost", "--subject", "x"])
        .run()
        .assert_code(2)
        .assert_stderr_contains("roo-mail team create --team ghost");
    assert!(env.home.files().is_empty(), "{:?}", env.home.files());
}

#[test]
fn create_list_get_update_delete() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob"]);
    assert_eq!(
        create(&env, &["--subject", "data layer", "--path", "src/db/"]),
        "1"
    );
    assert_eq!(create(&env, &["--subject", "service layer"]), "2");
    let out = env
        .task()
        .args([
            "create",
            "--team",
            "t",
            "--subject",
            "tests",
            "--blocked-by",
            "1",
            "--json",
        ])
        .run();
    let task = out.json();
    assert_eq!(task["id"], "3");
    assert_eq!(task["status"], "pending");
    assert_eq!(task["blocked_by"], serde_json::json!(["1"]));
    let one = get_json(&env, "1");
    assert_eq!(one["blocks"], serde_json::json!(["3"]));
    env.task()
        .args([
            "update",
            "3",
            "--team",
            "t",
            "--add-blocked-by",
            "2",
            "--note",
            "needs both",
        ])
        .run()
        .assert_ok();
    env.task()
        .args(["update", "1", "--team", "t", "--add-blocked-by", "3"])
        .run()
        .assert_code(1)
        .assert_stderr_contains("cycle 1 -> 3 -> 1");
    let list = env.task().args(["list", "--team", "t"]).run();
    list.assert_ok().assert_stdout(
        "   1  pending  data layer\n   2  pending  service layer\n   3  pending  tests (depends on 1, 2)\n",
    );
    env.task()
        .args(["delete", "2", "--team", "t"])
        .run()
        .assert_ok();
    let three = get_json(&env, "3");
    assert_eq!(three["blocked_by"], serde_json::json!(["1"]));
    assert_eq!(create(&env, &["--subject", "after delete"]), "4");
    env.task()
        .args(["get", "2", "--team", "t"])
        .run()
        .assert_code(2);
    env.task()
        .args(["get", "x", "--team", "t"])
        .run()
        .assert_code(2);
}

#[test]
fn claim_ready_and_exit_codes() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob"]);
    create(&env, &["--subject", "a", "--path", "src/auth/"]);
    create(&env, &["--subject", "b", "--path", "src/auth/login.rs"]);
    create(&env, &["--subject", "c", "--blocked-by", "1"]);
    let ready = env
        .task()
        .args(["ready", "--team", "t", "--json"])
        .run()
        .json();
    let ids: Vec<&str> = ready
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["1", "2"]);
    let claimed = env
        .task()
        .args(["claim", "1", "--team", "t", "--as", "alice", "--json"])
        .run();
    claimed.assert_ok();
    assert_eq!(claimed.json()["owner"], "alice");
    assert_eq!(claimed.json()["lease"]["owner"], "alice");
    let lost = env
        .task()
        .args(["claim", "1", "--team", "t", "--as", "bob", "--json"])
        .run();
    lost.assert_code(1).assert_stderr_contains("owned by alice");
    assert_eq!(lost.json()["reason"], "already_owned");
    env.task()
        .args(["claim", "3", "--team", "t", "--as", "bob"])
        .run()
        .assert_code(1)
        .assert_stderr_contains("blocked by unfinished tasks 1");
    // Scope-aware: task 2 overlaps task 1's paths while 1 is in progress.
    let ready = env
        .task()
        .args(["ready", "--team", "t", "--json"])
        .run()
        .json();
    assert_eq!(ready, serde_json::json!([]));
    env.task()
        .args(["ready", "--team", "t"])
        .run()
        .assert_stdout_contains("held back: task 2 overlaps the paths of in-progress task 1");
    env.task()
        .args(["claim", "2", "--team", "t", "--as", "bob"])
        .run()
        .assert_code(1)
        .assert_stderr_contains("--ignore-scope");
    env.task()
        .args(["claim", "--next", "--team", "t", "--as", "bob"])
        .run()
        .assert_code(1)
        .assert_stderr_contains("none is ready");
    env.task()
        .args([
            "update",
            "1",
            "--team",
            "t",
            "--status",
            "completed",
            "--as",
            "alice",
        ])
        .run()
        .assert_ok();
    let next = env
        .task()
        .args(["claim", "--next", "--team", "t", "--as", "bob", "--json"])
        .run();
    next.assert_ok();
    assert_eq!(next.json()["id"], "2");
    env.task()
        .args(["claim", "1", "--team", "t"])
        .run()
        .assert_code(2)
        .assert_stderr_contains("--as NAME");
    env.task()
        .args([
            "list",
            "--team",
            "t",
            "--status",
            "in_progress",
            "--owner",
            "bob",
            "--json",
        ])
        .run()
        .assert_ok();
    env.task()
        .args(["list", "--team", "t", "--status", "busy"])
        .run()
        .assert_code(2);
}

#[test]
fn reclaim_returns_tasks_of_gone_owners_with_a_note() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob"]);
    create(&env, &["--subject", "a"]);
    create(&env, &["--subject", "b"]);
    env.task()
        .args(["claim", "1", "--team", "t", "--as", "alice"])
        .run()
        .assert_ok();
    env.task()
        .args(["claim", "2", "--team", "t", "--as", "bob", "--lease", "0"])
        .run()
        .assert_ok();
    env.mail()
        .args(["team", "remove", "--team", "t", "alice"])
        .run()
        .assert_ok();
    let out = env
        .task()
        .args(["reclaim", "--team", "t", "--as", "lead", "--json"])
        .run();
    out.assert_ok();
    let rows = out.json();
    let mut reasons: Vec<(String, String)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["previous_owner"].as_str().unwrap().to_owned(),
                r["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    reasons.sort();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[0].1.contains("no longer a live member"),
        "{reasons:?}"
    );
    assert!(reasons[1].1.contains("lease of bob expired"), "{reasons:?}");
    let a = get_json(&env, "1");
    assert_eq!(a["status"], "pending");
    assert!(a["owner"].is_null());
    assert!(
        a["notes"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("reclaimed from alice")
    );
    assert_eq!(a["notes"][0]["by"], "lead");
    let ready = env
        .task()
        .args(["ready", "--team", "t", "--json"])
        .run()
        .json();
    assert_eq!(ready.as_array().unwrap().len(), 2);
}

#[test]
fn renew_extends_only_your_own_lease() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob"]);
    create(&env, &["--subject", "a"]);
    env.task()
        .args(["claim", "1", "--team", "t", "--as", "alice", "--lease", "5"])
        .run()
        .assert_ok();
    let before = get_json(&env, "1");
    let renewed = env
        .task()
        .args([
            "renew", "1", "--team", "t", "--as", "alice", "--lease", "3600", "--json",
        ])
        .run();
    renewed.assert_ok();
    assert!(
        renewed.json()["lease"]["expires_at"].as_str().unwrap()
            > before["lease"]["expires_at"].as_str().unwrap()
    );
    env.task()
        .args(["renew", "1", "--team", "t", "--as", "bob"])
        .run()
        .assert_code(1)
        .assert_stderr_contains("owned by alice");
}

/// JSON nested `depth` levels: `[[[...]]]`.
fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// After a refused write the list still reads, and the next id follows the last one.
fn assert_list_intact_and_next_id(env: &TempHome, next: &str) {
    env.task()
        .args(["list", "--team", "t", "--json"])
        .run()
        .assert_ok();
    let files = env.home.files();
    assert!(files.iter().all(|f| !f.contains(".corrupt-")), "{files:?}");
    assert_eq!(create(env, &["--subject", "after"]), next);
}

#[test]
fn a_ten_thousand_year_lease_does_not_corrupt_the_task_list() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    create(&env, &["--subject", "a"]);
    create(&env, &["--subject", "b"]);
    env.task()
        .args(["claim", "2", "--team", "t", "--as", "alice"])
        .args(["--lease", "300000000000"])
        .run()
        .assert_code(2)
        .assert_stderr_contains("604800 s");
    env.task()
        .args([
            "claim", "2", "--team", "t", "--as", "alice", "--lease", "60",
        ])
        .run()
        .assert_ok();
    env.task()
        .args(["renew", "2", "--team", "t", "--as", "alice"])
        .args(["--lease", "18446744073709551615"])
        .run()
        .assert_code(2);
    assert_list_intact_and_next_id(&env, "3");
}

#[test]
fn deeply_nested_meta_does_not_corrupt_the_task_list() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    create(&env, &["--subject", "a"]);
    for depth in [33, 127] {
        env.task()
            .args(["create", "--team", "t", "--subject", "deep"])
            .args(["--meta", &format!("x={}", nested(depth))])
            .run()
            .assert_code(2)
            .assert_stderr_contains("the limit is 32");
        env.task()
            .args(["update", "1", "--team", "t"])
            .args(["--meta", &format!("x={}", nested(depth))])
            .run()
            .assert_code(2);
    }
    // At the limit it is stored and read back.
    env.task()
        .args(["update", "1", "--team", "t"])
        .args(["--meta", &format!("x={}", nested(31))])
        .run()
        .assert_ok();
    assert_list_intact_and_next_id(&env, "2");
}

#[test]
fn oversized_task_fields_are_refused_with_the_limit() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    let long_line = "s".repeat(1025);
    env.task()
        .args(["create", "--team", "t", "--subject", &long_line])
        .run()
        .assert_code(2)
        .assert_stderr_contains("the limit is 1024 bytes");
    create(&env, &["--subject", "a"]);
    let big = "d".repeat(64 * 1024 + 1);
    env.task()
        .args(["update", "1", "--team", "t", "--description", &big])
        .run()
        .assert_code(2)
        .assert_stderr_contains("the limit is 65536 bytes");
    env.task()
        .args([
            "update",
            "1",
            "--team",
            "t",
            "--meta",
            &format!("k=\"{big}\""),
        ])
        .run()
        .assert_code(2)
        .assert_stderr_contains("metadata");
    let task = get_json(&env, "1");
    assert_eq!(task["description"], "");
}

#[test]
fn another_members_claim_cannot_be_taken_over_completed_or_deleted() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob"]);
    create(&env, &["--subject", "a"]);
    env.task()
        .args(["claim", "1", "--team", "t", "--as", "alice"])
        .run()
        .assert_ok();
    for (args, refusal) in [
        (
            &["update", "1", "--owner", "bob", "--as", "bob"][..],
            "owned by alice; only its owner or the lead may change it",
        ),
        (
            &["update", "1", "--status", "completed", "--as", "bob"],
            "owned by alice",
        ),
        (
            &[
                "update",
                "1",
                "--status",
                "pending",
                "--no-owner",
                "--as",
                "bob",
            ],
            "owned by alice",
        ),
        (
            &["update", "1", "--status", "completed"],
            "claimed by alice",
        ),
        (&["delete", "1", "--as", "bob"], "owned by alice"),
        // Nor may bob edit its text (PROTOCOL.md §6.3, authority).
        (
            &["update", "1", "--as", "bob", "--note", "fyi"],
            "only its owner or the lead",
        ),
    ] {
        env.task()
            .args(args)
            .args(["--team", "t"])
            .run()
            .assert_code(1)
            .assert_stderr_contains(refusal);
    }
    let task = get_json(&env, "1");
    assert_eq!(task["owner"], "alice");
    assert_eq!(task["status"], "in_progress");
    // The owner and the lead may change it.
    env.task()
        .args([
            "update", "1", "--team", "t", "--as", "alice", "--note", "fyi",
        ])
        .run()
        .assert_ok();
    env.task()
        .args([
            "update", "1", "--team", "t", "--as", "lead", "--status", "pending",
        ])
        .args(["--no-owner"])
        .run()
        .assert_ok();
}

#[test]
fn forcing_over_a_claim_is_recorded_in_the_notes() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob"]);
    create(&env, &["--subject", "a"]);
    create(&env, &["--subject", "b"]);
    for id in ["1", "2"] {
        env.task()
            .args(["claim", id, "--team", "t", "--as", "alice"])
            .run()
            .assert_ok();
    }
    let task = env
        .task()
        .args([
            "update", "1", "--team", "t", "--as", "bob", "--owner", "bob",
        ])
        .args(["--force", "--json"])
        .run()
        .json();
    assert_eq!(task["owner"], "bob");
    // Forcing needs a name to record.
    env.task()
        .args([
            "update", "2", "--team", "t", "--status", "pending", "--force",
        ])
        .env_remove("ROO_AGENT_NAME")
        .run()
        .assert_code(2)
        .assert_stderr_contains("--as NAME");
    let note = &task["notes"][0];
    assert_eq!(note["by"], "bob");
    assert!(note["at"].is_string(), "{note}");
    let text = note["text"].as_str().unwrap();
    assert!(text.contains("forced by bob over alice's claim"), "{text}");
    assert!(text.contains("owner alice -> bob"), "{text}");
    let deleted = env
        .task()
        .args([
            "delete", "2", "--team", "t", "--as", "bob", "--force", "--json",
        ])
        .run()
        .json();
    let text = deleted["notes"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("forced by bob over alice's claim: deleted"),
        "{text}"
    );
}

#[test]
fn non_members_cannot_claim() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    create(&env, &["--subject", "a"]);
    env.task()
        .args(["claim", "1", "--team", "t", "--as", "mallory"])
        .run()
        .assert_code(1)
        .assert_stderr_contains("not a member");
    env.task()
        .args(["claim", "--next", "--team", "t", "--as", "mallory"])
        .run()
        .assert_code(1)
        .assert_stderr_contains("not a member");
    env.task()
        .args(["update", "1", "--team", "t", "--owner", "mallory"])
        .args(["--status", "in_progress"])
        .run()
        .assert_code(1)
        .assert_stderr_contains("not a member");
    let task = get_json(&env, "1");
    assert_eq!(task["status"], "pending");
}

#[test]
fn quarantined_data_is_reported_until_the_doctor_acknowledges_it() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    for s in ["a", "b"] {
        create(&env, &["--subject", s]);
    }
    let path = env.path().join("tasks/t/tasks.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["tasks"][1]["status"] = "done".into();
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    // A read shows the valid task, warns, and moves nothing.
    let list = env.task().args(["list", "--team", "t", "--json"]).run();
    list.assert_ok().assert_stderr_contains("damaged record");
    assert_eq!(list.json().as_array().unwrap().len(), 1);
    assert!(env.home.files().iter().all(|f| !f.contains(".corrupt-")));
    // A change quarantines task 2 and continues with id 3.
    assert_eq!(create(&env, &["--subject", "c"]), "3");
    // Every later command reports the quarantined file, in both CLIs.
    env.task()
        .args(["get", "1", "--team", "t"])
        .run()
        .assert_ok()
        .assert_stderr_contains("tasks.json.corrupt-");
    env.mail()
        .args(["list", "--team", "t"])
        .run()
        .assert_ok()
        .assert_stderr_contains("run `roo-mail doctor --team t --acknowledge`");
    // With --json, stdout keeps its shape and stderr carries one JSON line naming the file.
    let listed = env.task().args(["list", "--team", "t", "--json"]).run();
    listed.assert_ok();
    assert_eq!(listed.json().as_array().unwrap().len(), 2);
    let warning: serde_json::Value = serde_json::from_str(listed.stderr().trim())
        .unwrap_or_else(|e| panic!("stderr is not one JSON line ({e}): {}", listed.stderr()));
    let quarantined = warning["quarantined"].as_array().unwrap();
    assert_eq!(quarantined.len(), 1, "{warning}");
    assert!(
        quarantined[0]
            .as_str()
            .unwrap()
            .contains("tasks.json.corrupt-"),
        "{warning}"
    );
    env.task()
        .args(["doctor", "--team", "t"])
        .run()
        .assert_ok()
        .assert_stdout_contains("tasks.json.corrupt-");
    env.mail()
        .args(["doctor", "--team", "t", "--acknowledge"])
        .run()
        .assert_ok()
        .assert_stdout_contains(".acknowledged");
    let quiet = env.task().args(["get", "1", "--team", "t"]).run();
    quiet.assert_ok();
    assert!(!quiet.stderr().contains("corrupt"), "{}", quiet.stderr());
    assert_eq!(create(&env, &["--subject", "d"]), "4");
}

/// Issue 33: a task list deleted outside roo while the team exists is damage, not an
/// empty list: `roo-task list` fails with exit 3 and says what to do; `doctor` says so;
/// `doctor --acknowledge` starts an empty list.
#[test]
fn a_deleted_task_list_is_reported_as_damage_not_an_empty_list() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    create(&env, &["--subject", "a"]);
    std::fs::remove_file(env.home.join("tasks/t/tasks.json")).unwrap();
    env.task()
        .args(["list", "--team", "t"])
        .run()
        .assert_code(3)
        .assert_stderr_contains("missing though the team exists");
    env.task()
        .args(["doctor", "--team", "t"])
        .run()
        .assert_ok()
        .assert_stdout_contains("the task list of team t is missing");
    env.task()
        .args(["doctor", "--team", "t", "--acknowledge"])
        .run()
        .assert_ok()
        .assert_stdout_contains("started an empty task list");
    let out = env.task().args(["list", "--team", "t", "--json"]).run();
    out.assert_ok();
    assert_eq!(out.json(), serde_json::json!([]));
}
