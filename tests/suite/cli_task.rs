//! `roo-task` through the built binary.

use roo_tests::TempHome;

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
    let one = env
        .task()
        .args(["get", "1", "--team", "t", "--json"])
        .run()
        .json();
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
    let three = env
        .task()
        .args(["get", "3", "--team", "t", "--json"])
        .run()
        .json();
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
        .args(["update", "1", "--team", "t", "--status", "completed"])
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
    let a = env
        .task()
        .args(["get", "1", "--team", "t", "--json"])
        .run()
        .json();
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
    let before = env
        .task()
        .args(["get", "1", "--team", "t", "--json"])
        .run()
        .json();
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
