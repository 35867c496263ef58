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

/// Whether process `pid` is gone (or a zombie nobody reaped yet: it runs nothing).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Issue 33 (zombie work): a worker declared dead while its command runs — its task
/// released, then taken and completed by the lead — stops: the command's processes are
/// killed well before the command would end, the marker it would write never appears,
/// its model is told plainly that the task was released and not to continue it, the task
/// is completed once (by the lead), and the worker tells the lead it does not go on.
#[test]
fn a_worker_declared_dead_mid_command_stops_it_and_its_task_is_completed_once() {
    use roo_store::{NewTask, ReadFilter, TaskId, TaskPatch, TaskStatus};
    let Some(url) = roo_tests::pg::store_url() else {
        return;
    };
    let (root, team) = team_t(&url);
    let (lead, carol_name) = (name("lead"), name("carol"));
    let task = team
        .tasks()
        .create(NewTask {
            subject: "carol's long job".into(),
            description: String::new(),
            active_form: None,
            blocked_by: Vec::new(),
            blocks: Vec::new(),
            paths: Vec::new(),
            metadata: Default::default(),
            owner: None,
            by: None,
            budget: None,
        })
        .unwrap();
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - when: {last_user_contains: "team-fence"}
      text: "Understood: I stopped and take work only through the task list."
    - when: {last_user_contains: "work"}
      tool_calls:
        - {name: Bash, input: {command: "echo $$ > sh.pid; sleep 30 & echo $! > sleep.pid; wait; touch done-marker"}}
    - text: "Done."
"#,
    );
    let mut worker = carol(&root, &url, &mock);
    let pids = |file: &str| std::fs::read_to_string(root.join("work").join(file)).ok();
    let (shell, sleep) = wait_until(
        "carol's command to start",
        WAIT,
        || {
            Some((
                pids("sh.pid")?,
                pids("sleep.pid").filter(|p| !p.trim().is_empty())?,
            ))
        },
        || format!("{:#?}", team.config().map(|c| c.members)),
    );
    // Carol owns the task while her command runs.
    team.tasks()
        .update(
            &task.id,
            TaskPatch {
                status: Some(TaskStatus::InProgress),
                owner: Some(Some(carol_name.clone())),
                by: Some(lead.clone()),
                ..TaskPatch::default()
            },
        )
        .unwrap();
    let first_epoch = team.config().unwrap().member("carol").unwrap().epoch;
    assert!(!gone(&shell) && !gone(&sleep), "carol's command runs");

    // The lead declares her dead (as after a cut link), takes her task and completes it.
    let death = team
        .declare_dead("carol", Some(&lead), "declared dead by the test")
        .unwrap();
    assert_eq!(death.released.len(), 1);
    team.tasks()
        .update(
            &task.id,
            TaskPatch {
                status: Some(TaskStatus::Completed),
                owner: Some(Some(lead.clone())),
                by: Some(lead.clone()),
                ..TaskPatch::default()
            },
        )
        .unwrap();

    // Her command is killed (it would run 30 s), and it never writes its marker.
    wait_until(
        "carol's command to be killed",
        Duration::from_secs(15),
        || (gone(&shell) && gone(&sleep)).then_some(()),
        || format!("shell {shell}, sleep {sleep} still run"),
    );
    assert!(!root.join("work/done-marker").exists());

    // She joins again as a new epoch and tells the lead she does not go on.
    let told = wait_until(
        "carol to join again and tell the lead",
        WAIT,
        || {
            if let Some(status) = worker.child().try_wait().unwrap() {
                panic!("roo-worker ended ({status}) instead of joining again");
            }
            let config = team.config().ok()?;
            let carol = config.member("carol")?;
            if carol.dead_at.is_some() || carol.epoch == first_epoch {
                return None;
            }
            let inbox = team.mailbox().read(&lead, &ReadFilter::default()).ok()?;
            inbox
                .into_iter()
                .find(|m| m.from == carol_name && m.text.contains("declared dead"))
                .map(|m| m.text)
        },
        || format!("{:#?}", team.config().map(|c| c.members)),
    );
    assert!(!told.contains("goes on"), "{told}");
    assert!(told.contains("does not continue"), "{told}");
    // Her model was told, plainly, in a request of its own.
    wait_until(
        "carol's model to be told it was declared dead",
        WAIT,
        || {
            mock.requests()
                .iter()
                .any(|r| {
                    let body = r.body.to_string();
                    body.contains("team-fence")
                        && body.contains("declared dead")
                        && body.contains("Do not continue that work")
                        && body.contains(&format!("#{}", task.id))
                })
                .then_some(())
        },
        || format!("{} requests", mock.requests().len()),
    );
    // The task was completed once, by the lead; the marker still never appears.
    std::thread::sleep(Duration::from_secs(2));
    let done = team
        .tasks()
        .get(&TaskId::parse(task.id.as_str()).unwrap())
        .unwrap();
    assert_eq!(
        (done.status, done.owner),
        (TaskStatus::Completed, Some(lead))
    );
    assert!(!root.join("work/done-marker").exists());
    drop(worker);
}
