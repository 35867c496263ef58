//! The store side of the team runtime through the built `roo-task` and `roo-mail`: usage
//! per task, joining by hand, dead members and their tasks, task assignment.

use std::process::{Command, Stdio};

use roo_tests::{TempHome, bin};

fn task_json(env: &TempHome, id: &str) -> serde_json::Value {
    env.task()
        .args(["get", id, "--team", "t", "--json"])
        .run()
        .json()
}

#[test]
fn usage_added_by_concurrent_processes_is_counted_exactly_and_shown() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob"]);
    env.task()
        .args(["create", "--team", "t", "--subject", "parser"])
        .run()
        .assert_ok();
    let mut children = Vec::new();
    for who in ["alice", "bob", "alice", "bob"] {
        let script = "for i in 1 2 3 4 5 6 7 8 9 10; do \
             \"$TASK\" add-usage 1 --team t --as \"$WHO\" --input 100 --output 10 \
               --cache-read 1000 --requests 1 --cost 0.125 >/dev/null || exit 1; done";
        children.push(
            Command::new("sh")
                .args(["-c", script])
                .env("TASK", bin("roo-task"))
                .env("WHO", who)
                .env("ROO_HOME", env.path())
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
    }
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let task = task_json(&env, "1");
    for who in ["alice", "bob"] {
        let u = &task["usage"][who];
        assert_eq!(u["input_tokens"], 2000, "{task}");
        assert_eq!(u["output_tokens"], 200);
        assert_eq!(u["cache_read_tokens"], 20000);
        assert_eq!(u["requests"], 20);
        assert_eq!(u["cost_usd"], 2.5);
    }
    let human = env.task().args(["get", "1", "--team", "t"]).run();
    human
        .assert_ok()
        .assert_stdout_contains(
            "usage alice: 2000 in, 200 out, 20000 cache read, 0 cache write, 20 requests, $2.5000",
        )
        .assert_stdout_contains(
            "usage total: 4000 in, 400 out, 40000 cache read, 0 cache write, 40 requests, $5.0000",
        );
}

#[test]
fn usage_out_of_range_is_a_usage_error_and_writes_nothing() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    env.task()
        .args(["create", "--team", "t", "--subject", "x"])
        .run()
        .assert_ok();
    let file = env.path().join("tasks/t/tasks.json");
    let before = std::fs::read(&file).unwrap();
    for cost in ["--cost=inf", "--cost=NaN", "--cost=-1"] {
        env.task()
            .args(["add-usage", "1", "--team", "t", "--as", "alice", cost])
            .run()
            .assert_code(2)
            .assert_stderr_contains("out of range");
    }
    env.task()
        .args(["add-usage", "1", "--team", "t", "--as", "alice"])
        .args(["--output", "9007199254740992"])
        .run()
        .assert_code(2)
        .assert_stderr_contains("the limit is 9007199254740991");
    assert_eq!(std::fs::read(&file).unwrap(), before);
}

#[test]
fn a_name_held_by_a_live_process_cannot_be_joined_until_that_process_dies() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    let mut holder = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = holder.id().to_string();
    env.mail()
        .args(["team", "join", "--team", "t", "carol", "--pid", &pid])
        .args(["--backend", "tmux", "--pane-id", "%3"])
        .run()
        .assert_ok()
        .assert_stdout("joined as carol\n");
    env.task()
        .args(["create", "--team", "t", "--subject", "carol's work"])
        .run()
        .assert_ok();
    env.task()
        .args(["claim", "1", "--team", "t", "--as", "carol"])
        .run()
        .assert_ok();
    let me = std::process::id().to_string();
    env.mail()
        .args(["team", "join", "--team", "t", "carol", "--pid", &me])
        .run()
        .assert_code(1)
        .assert_stderr_contains(&format!(
            "a live process (pid {pid}) already is member carol"
        ));
    env.mail()
        .args(["team", "join", "--team", "t", "Carol"])
        .run()
        .assert_code(1)
        .assert_stderr_contains("in any letter case");

    holder.kill().unwrap();
    holder.wait().unwrap();
    let list = env
        .mail()
        .args(["list", "--team", "t", "--json"])
        .run()
        .json();
    let carol = list
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "carol")
        .unwrap();
    assert_eq!(carol["state"], "dead", "{list}");
    // The dead holder's claim goes back to the ready set with a note.
    env.task()
        .args(["reclaim", "--team", "t", "--as", "lead"])
        .run()
        .assert_ok()
        .assert_stdout_contains("reclaimed 1 from carol");
    assert_eq!(task_json(&env, "1")["status"], "pending");
    let joined = env
        .mail()
        .args([
            "team", "join", "--team", "t", "carol", "--pid", &me, "--json",
        ])
        .run()
        .json();
    assert_eq!(joined["member"]["pid"], std::process::id());
    assert_eq!(joined["replaced"]["pid"], holder.id());
    assert_eq!(joined["member"]["agent_id"], "carol@t");
}

#[test]
fn mark_dead_releases_the_members_tasks_and_refuses_its_claims() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob"]);
    for subject in ["one", "two"] {
        env.task()
            .args(["create", "--team", "t", "--subject", subject])
            .run()
            .assert_ok();
    }
    env.task()
        .args(["claim", "1", "--team", "t", "--as", "bob"])
        .run()
        .assert_ok();
    env.mail()
        .args(["team", "mark-dead", "--team", "t", "bob", "--as", "lead"])
        .args(["--reason", "its pane was closed"])
        .run()
        .assert_ok()
        .assert_stdout("marked bob dead\nreleased task 1 to pending\n");
    let task = task_json(&env, "1");
    assert_eq!(task["status"], "pending");
    let note = task["notes"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(note["by"], "lead");
    assert_eq!(
        note["text"],
        "reclaimed from bob: bob died: its pane was closed"
    );
    env.task()
        .args(["claim", "2", "--team", "t", "--as", "bob"])
        .run()
        .assert_code(1)
        .assert_stderr_contains("bob is marked dead");
    env.mail()
        .args(["team", "show", "--team", "t"])
        .run()
        .assert_ok()
        .assert_stdout_contains("bob  bob@t  dead");
}

#[test]
fn assign_sets_the_owner_and_delivers_a_task_assignment() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob"]);
    env.task()
        .args(["create", "--team", "t", "--subject", "write the tests"])
        .run()
        .assert_ok();
    let out = env
        .task()
        .args([
            "assign", "1", "bob", "--team", "t", "--as", "lead", "--json",
        ])
        .run()
        .json();
    assert_eq!(out["task"]["owner"], "bob");
    assert_eq!(out["task"]["status"], "pending");
    let inbox = env
        .mail()
        .args(["read", "--team", "t", "--as", "bob", "--json"])
        .run()
        .json();
    let messages = inbox.as_array().unwrap();
    assert_eq!(messages.len(), 1, "{inbox}");
    assert_eq!(messages[0]["type"], "task_assignment");
    assert_eq!(messages[0]["task_id"], "1");
    assert_eq!(messages[0]["from"], "lead");
    assert_eq!(messages[0]["summary"], "task 1: \"write the tests\"");
    // Only bob may now claim it; assigning to yourself is a claim, not an assignment.
    env.task()
        .args(["claim", "1", "--team", "t", "--as", "alice"])
        .run()
        .assert_code(1);
    env.task()
        .args(["assign", "1", "alice", "--team", "t", "--as", "alice"])
        .run()
        .assert_code(1)
        .assert_stderr_contains("claim the task instead");
    env.task()
        .args(["assign", "1", "zed", "--team", "t", "--as", "lead"])
        .run()
        .assert_code(2);
}
