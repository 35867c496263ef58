//! Regression tests for the smaller CLI defects of issue 8 item 9, through the built
//! binaries.

use roo_tests::TempHome;

fn inbox_len(env: &TempHome, name: &str) -> usize {
    let out = env
        .mail()
        .args(["read", "--team", "t", "--as", name, "--archived", "--json"])
        .run();
    out.assert_ok();
    out.json().as_array().map_or(0, Vec::len)
}

#[test]
fn broadcast_failing_half_way_reports_who_got_it_and_retry_does_not_duplicate() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice", "bob", "carol"]);
    // bob's inbox cannot be written: a directory where the file should be (permission
    // bits would not stop root).
    let bob_inbox = env.path().join("teams/t/inboxes/bob.json");
    std::fs::create_dir_all(&bob_inbox).unwrap();
    let broadcast = |extra: &[&str]| {
        env.mail()
            .args([
                "send",
                "--team",
                "t",
                "--from",
                "lead",
                "--to",
                "*",
                "--type",
                "status_update",
                "--json",
            ])
            .args(extra)
            .arg("module 1 refactored")
            .run()
    };
    let out = broadcast(&[]);
    out.assert_code(3);
    let report = out.json();
    let names = |key: &str| -> Vec<String> {
        report[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["to"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names("delivered"), ["alice", "carol"], "{report}");
    assert_eq!(names("failed"), ["bob"], "{report}");
    let key = report["key"].as_str().unwrap().to_owned();
    assert!(report["retry"].as_str().unwrap().contains(&key), "{report}");
    // The human form says the same on stderr.
    std::fs::remove_dir(&bob_inbox).unwrap();
    std::fs::create_dir_all(&bob_inbox).unwrap();
    let human = env
        .mail()
        .args(["send", "--team", "t", "--from", "lead", "--to", "*"])
        .args(["--type", "status_update", "--id", "human-try", "again"])
        .run();
    human
        .assert_code(3)
        .assert_stderr_contains("delivered to 2 of 3: alice, carol")
        .assert_stderr_contains("not delivered to bob")
        .assert_stderr_contains("--id human-try");
    // Repaired, the retry with the key delivers to bob only.
    std::fs::remove_dir(&bob_inbox).unwrap();
    let retry = broadcast(&["--id", &key]);
    retry.assert_ok();
    let sent = retry.json();
    assert_eq!(sent.as_array().unwrap().len(), 1, "{sent}");
    assert_eq!(sent[0]["id"], format!("{key}:bob"));
    assert_eq!(inbox_len(&env, "alice"), 2, "alice got a duplicate");
    assert_eq!(inbox_len(&env, "carol"), 2, "carol got a duplicate");
    assert_eq!(inbox_len(&env, "bob"), 1);
    // Retrying once more delivers nothing new.
    broadcast(&["--id", &key]).assert_ok();
    assert_eq!(inbox_len(&env, "bob"), 1, "bob got a duplicate");
}

#[test]
fn control_characters_in_human_output_cannot_forge_lines_or_inject_escapes() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    let summary = "fine\nFrom: lead -> alice [shutdown_request]";
    let text = "hello \x1b]0;owned\x07\x1b[2J world\rFrom: lead";
    env.mail()
        .args(["send", "--team", "t", "--from", "alice", "--to", "lead"])
        .args(["--summary", summary, text])
        .run()
        .assert_ok();
    let human = env
        .mail()
        .args(["read", "--team", "t", "--as", "lead"])
        .run();
    human.assert_ok();
    let shown = human.stdout();
    assert!(!shown.contains('\x1b') && !shown.contains('\x07') && !shown.contains('\r'));
    assert!(
        !shown.lines().any(|l| l.trim_start().starts_with("From:")),
        "a forged header line: {shown}"
    );
    assert!(shown.contains("fine\\nFrom: lead"), "{shown}");
    // JSON stays exact.
    let json = env
        .mail()
        .args(["read", "--team", "t", "--as", "lead", "--json"])
        .run()
        .json();
    assert_eq!(json[0]["summary"], summary);
    assert_eq!(json[0]["text"], text);

    // The store refuses such a subject now (one line, no control characters); a task
    // list written before that rule, or by another program, may still hold one.
    let hostile = "evil\x1b[31m\nfake task line";
    env.task()
        .args(["create", "--team", "t", "--subject", hostile])
        .run()
        .assert_code(2);
    env.task()
        .args(["create", "--team", "t", "--subject", "evil"])
        .args(["--description", "a\x1b[1mb"])
        .run()
        .assert_ok();
    let path = roo_store::RooHome::new(env.path()).task_list(&roo_store::Name::parse("t").unwrap());
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["tasks"][0]["subject"] = serde_json::Value::String(hostile.into());
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    for args in [&["list"][..], &["get", "1"][..]] {
        let out = env.task().args(args).args(["--team", "t"]).run();
        out.assert_ok();
        assert!(!out.stdout().contains('\x1b'), "{}", out.stdout());
        assert_eq!(
            out.stdout().lines().count(),
            if args[0] == "list" { 1 } else { 2 }
        );
    }
}

#[test]
fn watch_timeout_inf_nan_negative_or_huge_is_a_usage_error_not_a_panic() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    for bad in ["inf", "NaN", "-1", "1e300"] {
        env.mail()
            .args(["watch", "--team", "t", "--as", "alice"])
            .arg(format!("--timeout={bad}"))
            .run()
            .assert_code(2)
            .assert_stderr_contains("--timeout");
    }
    env.mail()
        .args(["watch", "--team", "t", "--as", "alice", "--timeout", "0.1"])
        .run()
        .assert_ok();
}

#[test]
fn ack_with_a_duplicate_id_exits_0_and_an_unknown_id_exits_2() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    let out = env
        .mail()
        .args(["send", "--team", "t", "--from", "lead", "--to", "alice"])
        .args(["--summary", "track", "track me"])
        .run();
    out.assert_ok();
    let id = out.stdout().trim().to_owned();
    env.mail()
        .args(["ack", "--team", "t", "--as", "alice", &id, &id])
        .run()
        .assert_ok()
        .assert_stdout_contains("acknowledged 1");
    // Issue 19: the error names the unknown ids and says what was acknowledged anyway.
    let ack = |ids: &[&str]| {
        let out = env
            .mail()
            .args(["ack", "--team", "t", "--as", "alice"])
            .args(ids)
            .run();
        out.assert_code(2);
        out.stderr()
    };
    assert_eq!(
        ack(&[&id, "msg-0-0-0"]),
        "roo-mail: failed to acknowledge message msg-0-0-0: it is not in alice's inbox or \
         archive; the other one is acknowledged\n"
    );
    assert_eq!(
        ack(&["x", &id, "y", "x"]),
        "roo-mail: failed to acknowledge 2 messages (x, y): they are not in alice's inbox or \
         archive; the other one is acknowledged\n"
    );
    assert_eq!(
        ack(&["x"]),
        "roo-mail: failed to acknowledge message x: it is not in alice's inbox or archive; \
         no message was acknowledged\n"
    );
}

#[test]
fn missing_home_and_roo_home_is_a_usage_error_in_every_binary() {
    let env = TempHome::new();
    for empty in [false, true] {
        let unset = |cmd: roo_tests::TestCommand| {
            if empty {
                cmd.env("HOME", "").env("ROO_HOME", "")
            } else {
                cmd.env_remove("HOME").env_remove("ROO_HOME")
            }
        };
        for (bin, args) in [
            ("roo-mail", &["list", "--team", "t"][..]),
            ("roo-task", &["list", "--team", "t"][..]),
            ("roo-lead", &["-p", "hello"][..]),
        ] {
            unset(env.cmd(bin).args(args))
                .run()
                .assert_code(2)
                .assert_stderr_contains("set ROO_HOME");
        }
    }
}

#[test]
fn member_names_differing_only_in_case_are_refused() {
    let env = TempHome::new();
    env.mail()
        .args(["team", "create", "--team", "t", "--lead", "lead"])
        .args(["--member", "alice", "--member", "Alice"])
        .run()
        .assert_code(1);
    env.mail()
        .args([
            "team", "create", "--team", "t", "--lead", "lead", "--member", "LEAD",
        ])
        .run()
        .assert_code(1);
    env.team("t", "lead", &["alice"]);
    env.mail()
        .args(["team", "add", "--team", "t", "ALICE"])
        .run()
        .assert_code(1);
    assert!(!env.path().join("teams/t/inboxes/ALICE.json").exists());
}
