//! Issue 31, "no phantom members": the README's own `roo-mail team create --team demo
//! --lead lead --member alice --member bob` made members that never ran, and they counted
//! as busy — `roo-lead -p hi --team demo` waited in silence for the whole team timeout
//! and exited 1, `team delete` refused, `list` showed them busy. A roster member no
//! process ever joined is `not started` now: the lead says at once who and how to start
//! them and does not wait; deleting needs no `--force` for them. The real binaries, on
//! files and (with `ROO_TEST_PG_DSN`) on the PostgreSQL store.

use std::time::{Duration, Instant};

use roo_tests::{RunOutput, TempHome, TestCommand};
use serde_json::Value;

const SCRIPT: &str = r#"
agents:
  lead:
    - text: "Hello from the lead."
"#;

/// A home on one store: files, or a fresh schema of the test server.
struct Store {
    home: TempHome,
    /// `ROO_STORE` for the PostgreSQL store; `None`: files.
    url: Option<String>,
}

impl Store {
    fn files() -> Store {
        Store {
            home: TempHome::new(),
            url: None,
        }
    }

    /// `None` (the test says it skips) without `ROO_TEST_PG_DSN`.
    fn postgres() -> Option<Store> {
        Some(Store {
            home: TempHome::new(),
            url: Some(roo_tests::pg::store_url()?),
        })
    }

    fn cmd(&self, name: &str) -> TestCommand {
        let cmd = self.home.cmd(name);
        match &self.url {
            Some(url) => cmd.env("ROO_STORE", url),
            None => cmd,
        }
    }

    fn mail(&self, args: &[&str]) -> RunOutput {
        self.cmd("roo-mail").args(args).run()
    }

    /// `roo-lead -p hi --team demo` with a long team timeout: a lead that waited for the
    /// team would be killed by the test's own limit long before it.
    fn lead(&self, extra: &[&str]) -> (RunOutput, Duration) {
        let script = self.home.home.write("script.yaml", SCRIPT);
        let started = Instant::now();
        let out = self
            .cmd("roo-lead")
            .args(["-p", "hi", "--team", "demo", "--team-timeout", "3600"])
            .args(["--provider", "script", "--script"])
            .arg(&script)
            .args(extra)
            .run();
        (out, started.elapsed())
    }

    /// Each member's `state` in `roo-mail list --json`.
    fn states(&self, team: &str) -> Vec<(String, String)> {
        let out = self.mail(&["list", "--team", team, "--json"]);
        out.assert_ok();
        out.json()
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap().to_owned(),
                    m["state"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }
}

fn state_of(states: &[(String, String)], name: &str) -> String {
    states
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| panic!("{name} in {states:?}"))
}

/// The README's example, then a headless lead on it.
fn the_readme_team_is_not_started_and_the_lead_does_not_wait_for_it(store: &Store) {
    store
        .mail(&[
            "team", "create", "--team", "demo", "--lead", "lead", "--member", "alice", "--member",
            "bob",
        ])
        .assert_ok();
    // `list`, human and json.
    let list = store.mail(&["list", "--team", "demo"]);
    list.assert_ok();
    for name in ["alice", "bob"] {
        assert!(
            list.stdout()
                .lines()
                .any(|l| l.starts_with(name) && l.contains("  not started  ")),
            "{}",
            list.stdout()
        );
    }
    assert!(!list.stdout().contains("busy"), "{}", list.stdout());
    let states = store.states("demo");
    assert_eq!(state_of(&states, "alice"), "not_started");
    assert_eq!(state_of(&states, "bob"), "not_started");

    // The lead says at once who never ran and how to start them, and does not wait.
    let (out, took) = store.lead(&[]);
    assert!(
        took < Duration::from_secs(10),
        "the lead took {took:?}: {}",
        out.stderr()
    );
    out.assert_code(1);
    assert!(
        out.stdout().contains("Hello from the lead."),
        "{}",
        out.stdout()
    );
    let stderr = out.stderr();
    let note = stderr
        .lines()
        .find(|l| l.starts_with("note: team demo: teammates alice and bob never started"))
        .unwrap_or_else(|| panic!("the note at start: {stderr}"));
    for how in [
        "`roo-worker --team demo --name alice`",
        "`roo-worker --team demo --name bob`",
        "or ask the lead to spawn them",
        "the lead does not wait for them",
    ] {
        assert!(note.contains(how), "{how}: {note}");
    }
    // The verdict comes last, and says it again with how to delete the team.
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(
            "roo-lead: team demo did not finish: teammates alice and bob never started"
        ) && last.contains("`roo-worker --team demo --name alice`")
            && last.contains("delete it with `roo-mail team delete --team demo`"),
        "{stderr}"
    );
    assert!(!stderr.contains("busy"), "{stderr}");

    // The same in stream-json: the states on the wire, the verdict in the result.
    let (out, took) = store.lead(&["--output-format", "stream-json"]);
    assert!(took < Duration::from_secs(10), "{took:?}");
    out.assert_code(1);
    let lines: Vec<Value> = out
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for name in ["alice", "bob"] {
        assert!(
            lines
                .iter()
                .any(|l| l["type"] == "teammate_not_started" && l["name"] == name),
            "{lines:#?}"
        );
    }
    assert!(
        !lines.iter().any(|l| l["type"] == "teammate_busy"),
        "{lines:#?}"
    );
    let result = lines.iter().find(|l| l["type"] == "result").unwrap();
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["team_not_started"]
            .as_str()
            .is_some_and(|t| t.contains("teammates alice and bob never started")),
        "{result}"
    );

    // Nobody runs: the delete needs no --force.
    store
        .mail(&["team", "delete", "--team", "demo"])
        .assert_ok()
        .assert_stdout_contains("deleted team demo");
}

/// A member that joined and then died is dead, not "not started"; a member that really
/// runs still holds the delete up without --force.
fn a_member_that_ran_is_never_not_started(store: &Store) {
    store
        .mail(&[
            "team", "create", "--team", "crew", "--lead", "lead", "--member", "alice",
        ])
        .assert_ok();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id().to_string();
    gone.wait().unwrap();
    store
        .mail(&[
            "team", "join", "--team", "crew", "carol", "--pid", &gone_pid,
        ])
        .assert_ok();
    let mut live = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let live_pid = live.id().to_string();
    store
        .mail(&["team", "join", "--team", "crew", "dave", "--pid", &live_pid])
        .assert_ok();
    let states = store.states("crew");
    assert_eq!(state_of(&states, "alice"), "not_started");
    assert_eq!(state_of(&states, "carol"), "dead");
    assert_eq!(state_of(&states, "dave"), "busy");
    let refused = store.mail(&["team", "delete", "--team", "crew"]);
    refused.assert_code(1);
    assert!(
        refused.stderr().contains("dave") && !refused.stderr().contains("alice"),
        "{}",
        refused.stderr()
    );
    let _ = live.kill();
    let _ = live.wait();
    // Its process gone, dave is dead, and nobody holds the team up. A join takes alice's
    // roster entry over and says it had never started.
    assert_eq!(state_of(&store.states("crew"), "dave"), "dead");
    store
        .mail(&[
            "team", "join", "--team", "crew", "alice", "--pid", &gone_pid,
        ])
        .assert_ok()
        .assert_stdout_contains("joined as alice (its roster entry, which had never started)");
    assert_eq!(state_of(&store.states("crew"), "alice"), "dead");
    store
        .mail(&["team", "delete", "--team", "crew"])
        .assert_ok();
}

#[test]
fn members_that_never_ran_are_not_started_and_nobody_waits_for_them_on_files() {
    let store = Store::files();
    the_readme_team_is_not_started_and_the_lead_does_not_wait_for_it(&store);
    a_member_that_ran_is_never_not_started(&store);
}

#[test]
fn members_that_never_ran_are_not_started_and_nobody_waits_for_them_on_postgresql() {
    let Some(store) = Store::postgres() else {
        return;
    };
    the_readme_team_is_not_started_and_the_lead_does_not_wait_for_it(&store);
    a_member_that_ran_is_never_not_started(&store);
}
