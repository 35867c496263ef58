//! A `roo-worker`'s presence on the PostgreSQL store, with the mock model: declared
//! dead as its turn ends, it joins again and goes idle; removed from the roster, it
//! stops instead of adding itself back. Skipped without `ROO_TEST_PG_DSN`.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use roo_store::{Member, Name, PgStore, RooHome, Team, Timestamp};
use roo_tests::{ChildGuard, MockLlm, TempDir, TestCommand, bin, wait_until};

const WAIT: Duration = Duration::from_secs(60);

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

/// A root under the build's temp dir with `home`, `roo` and `work`, and team `t` (lead
/// `lead`, no members) on the store at `url`, opened from `root/roo`.
fn team_t(url: &str) -> (TempDir, Team) {
    let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    root.make_dirs(&["home", "roo", "work"]);
    let home = RooHome::new(root.join("roo")).with_store(PgStore::connect(url).unwrap());
    let t = name("t");
    let team = Team::create(&home, t.clone(), "", Member::new(name("lead"), &t), vec![]).unwrap();
    (root, team)
}

/// `roo-worker` as `carol` of team `t`, prompted `work`, in `root/work`, on the store at
/// `url` and the model of `mock`, every permission granted.
fn carol(root: &TempDir, url: &str, mock: &MockLlm) -> ChildGuard {
    TestCommand::new(bin("roo-worker"))
        .env("ROO_HOME", root.join("roo"))
        .env("HOME", root.join("home"))
        .env("ROO_STORE", url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .current_dir(root.join("work"))
        .args(["--team", "t", "--name", "carol", "--prompt", "work"])
        .args(["--provider", "anthropic", "--model", "claude-sonnet-4-5"])
        .args(["--base-url", &mock.base_url("anthropic")])
        .args(["--permission-mode", "bypassPermissions"])
        .spawn()
}

/// A worker whose turn ends just as it is declared dead (its idle notification's change
/// waits for the config row the declaration holds, so the refusal of its write comes
/// before its presence keeper sees the death): the keeper must still join it again —
/// the write retried afterwards then succeeds — rather than wait for the loop's retries
/// to give up and end the teammate with "failed to record its state".
#[test]
fn a_worker_declared_dead_as_its_turn_ends_joins_again_and_goes_idle() {
    let Some(url) = roo_tests::pg::store_url() else {
        return;
    };
    let schema = url.rsplit("search_path%3D").next().unwrap().to_string();
    let (root, team) = team_t(&url);
    // The turn's Bash waits for the file `go`, which the test writes once the config row
    // is locked.
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - when: {last_user_contains: "work"}
      tool_calls:
        - {name: Bash, input: {command: "touch started; while [ ! -f go ]; do sleep 0.05; done"}}
    - text: "Done."
"#,
    );
    let mut worker = carol(&root, &url, &mock);
    let pid = worker.pid();
    wait_until(
        "carol's turn to start its command",
        WAIT,
        || root.join("work/started").is_file().then_some(()),
        || format!("{:#?}", team.config().map(|c| c.members)),
    );
    let first_epoch = team.config().unwrap().member("carol").unwrap().epoch;
    assert!(first_epoch.is_some(), "carol holds a presence");

    // Declare carol dead by hand, in a change that holds the config row until carol's
    // idle notification waits for it.
    let (locked_tx, locked) = mpsc::channel::<()>();
    let (release, release_rx) = mpsc::channel::<()>();
    let declaring = std::thread::spawn({
        let team = team.clone();
        move || {
            let mut first = true;
            team.update_member("carol", |m| {
                if std::mem::take(&mut first) {
                    let _ = locked_tx.send(());
                    let _ = release_rx.recv();
                }
                m.dead_at = Some(Timestamp::now());
                m.dead_reason = Some("declared dead by the test".into());
                m.is_active = Some(false);
            })
            .unwrap();
        }
    });
    locked.recv().unwrap();
    root.write("work/go", "");
    // Carol's turn ended and one of its changes waits for the config row: a tuple lock
    // on `roo_doc` of this test's schema is held only by a waiter.
    let waiting = format!(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE l.locktype = 'tuple' AND c.relname = 'roo_doc' AND n.nspname = '{schema}'"
    );
    wait_until(
        "carol's idle notification to wait for the config row",
        WAIT,
        || (roo_tests::pg::psql(&url, &waiting) != "0").then_some(()),
        || "nobody waits".to_string(),
    );
    release.send(()).unwrap();
    declaring.join().unwrap();

    // Carol joins again (a new epoch), goes idle with her notification, and runs on.
    wait_until(
        "carol to join again and go idle",
        WAIT,
        || {
            if let Some(status) = worker.child().try_wait().unwrap() {
                panic!("roo-worker ended ({status}) instead of joining again");
            }
            let config = team.config().ok()?;
            let carol = config.member("carol")?;
            (carol.dead_at.is_none()
                && carol.pid == Some(pid)
                && carol.epoch.is_some()
                && carol.epoch != first_epoch
                && !carol.is_active())
            .then_some(())
        },
        || format!("{:#?}", team.config().map(|c| c.members)),
    );
    let config = team.config().unwrap();
    let carol = config.member("carol").unwrap();
    assert_eq!(
        team.liveness(&config).unwrap().evidence(carol),
        Some(true),
        "its new presence is held"
    );
}

/// A running worker removed from the roster (`roo-mail team remove`) sees its presence
/// lost; its keeper must stop it, not join again — which would add it back.
#[test]
fn a_running_worker_removed_from_the_roster_stops_instead_of_adding_itself_back() {
    let Some(url) = roo_tests::pg::store_url() else {
        return;
    };
    let (root, team) = team_t(&url);
    let mock = MockLlm::start("agents:\n  \"*\":\n    - text: \"Done.\"\n");
    let mut worker = carol(&root, &url, &mock);
    let pid = worker.pid();
    wait_until(
        "carol to hold her presence and go idle",
        WAIT,
        || {
            let config = team.config().ok()?;
            let carol = config.member("carol")?;
            (carol.pid == Some(pid) && carol.epoch.is_some() && !carol.is_active()).then_some(())
        },
        || format!("{:#?}", team.config().map(|c| c.members)),
    );
    team.remove_member("carol").unwrap();
    wait_until(
        "roo-worker to stop",
        WAIT,
        || {
            if let Some(carol) = team.config().unwrap().member("carol") {
                panic!("carol added herself back to the roster: {carol:#?}");
            }
            worker.child().try_wait().unwrap().map(|_| ())
        },
        || format!("{:#?}", team.config().map(|c| c.members)),
    );
    let out = worker.wait();
    assert_eq!(out.code(), 1, "{}", out.stderr());
    assert!(
        out.stderr().contains("removed from the team"),
        "{}",
        out.stderr()
    );
    assert!(team.config().unwrap().member("carol").is_none());
}
