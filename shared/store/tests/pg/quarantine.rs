//! Quarantine on the PostgreSQL store (docs/PROTOCOL.md §2.4, doc.rs): damaged records
//! are moved aside by the next change "whatever the change does next"; a whole damaged
//! document is moved aside and the change fails with `Error::Corrupt`, committed — the
//! next change starts afresh, as with a file — and a deleted team's quarantine goes with
//! it. The `_on_files` twins show each rule on files.
use roo_store::{Error, Member, RooHome, TaskId, Team};

use super::common::{Raw, home_at, name, new_task, pause, pg_home, psql, team_named};

/// Team `t` led by `lead`, with no members, created at `home` (again, after a refusal).
fn create_team_t(home: &RooHome) -> roo_store::Result<Team> {
    let t = name("t");
    Team::create(
        home,
        t.clone(),
        "again",
        Member::new(name("lead"), &t),
        vec![],
    )
}

/// The same lost write through the store's own quarantine (§2.4): a task list that cannot
/// be read is moved to `roo_quarantine` and its row deleted by the first change; a second
/// `create` queued behind it gets `Ok(task)` for a task that was never stored (on files
/// the next change starts from an empty list and writes it).
#[test]
fn a_task_created_behind_a_quarantine_of_its_list_is_stored() {
    let Some((_d, home, url)) = pg_home() else {
        return;
    };
    team_named(&home, "t", &["alice"]);
    let (_d2, other) = home_at(&url);
    psql(
        &url,
        "UPDATE roo_doc SET doc = '{\"version\": \"1.0\", \"tasks\": 7}' \
         WHERE key = 'tasks/t/tasks.json'",
    );
    let raw = Raw::connect(&url);
    raw.exec("BEGIN; SELECT 1 FROM roo_doc WHERE key = 'tasks/t/tasks.json' FOR UPDATE");
    let (first, second) = std::thread::scope(|s| {
        let first = s.spawn(|| {
            Team::open(&home, name("t"))
                .unwrap()
                .tasks()
                .create(new_task("a"))
        });
        pause();
        let second = s.spawn(|| {
            Team::open(&other, name("t"))
                .unwrap()
                .tasks()
                .create(new_task("b"))
        });
        pause();
        raw.exec("COMMIT");
        (first.join().unwrap(), second.join().unwrap())
    });
    assert!(matches!(first, Err(Error::Corrupt { .. })), "{first:?}");
    let task = second.expect("the second create starts from an empty list");
    let team = Team::open(&home, name("t")).unwrap();
    let got = team.tasks().get(&task.id);
    assert!(
        got.is_ok(),
        "create returned task {} but it is not stored: {:?}",
        task.id,
        got.err()
    );
}

/// §2.4/§4: deleting a team removes everything of it (on files its `.corrupt-` files go
/// with its directories). On PostgreSQL its `roo_quarantine` rows stay, so a new team of
/// the same name is reported as having quarantined records from its first command on.
#[test]
fn a_new_team_does_not_inherit_the_quarantine_of_a_deleted_one() {
    let Some((_d, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    let list = team.tasks();
    for subject in ["one", "two"] {
        list.create(new_task(subject)).unwrap();
    }
    psql(
        &url,
        "UPDATE roo_doc SET doc = jsonb_set(doc::jsonb, '{tasks,1}', (doc::jsonb->'tasks'->1) - 'subject')::json \
         WHERE key = 'tasks/t/tasks.json'",
    );
    list.create(new_task("three")).unwrap();
    assert_eq!(
        roo_store::quarantine::quarantined(&home, &name("t"))
            .unwrap()
            .len(),
        1
    );
    team.delete(true).unwrap();
    team_named(&home, "t", &["alice"]);
    let inherited = roo_store::quarantine::quarantined(&home, &name("t")).unwrap();
    assert!(inherited.is_empty(), "{inherited:?}");
}

/// A task list with one damaged record; a change that fails after loading it (deleting
/// a task that does not exist). Files: the damaged record is in a `.corrupt-` file and the
/// warning says so. PostgreSQL: the warning says "moved … to roo_quarantine", yet nothing
/// is there and the record is still in the row.
#[test]
fn damaged_records_are_quarantined_even_when_the_change_then_fails() {
    let Some((_d, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    let list = team.tasks();
    list.create(new_task("one")).unwrap();
    list.create(new_task("two")).unwrap();
    psql(
        &url,
        "UPDATE roo_doc SET doc = jsonb_set(doc::jsonb, '{tasks,1}', \
         (doc::jsonb->'tasks'->1) - 'subject')::json WHERE key = 'tasks/t/tasks.json'",
    );
    let _ = roo_store::quarantine::take_warnings();
    let err = list
        .delete(&TaskId::parse("99").unwrap(), None, false)
        .unwrap_err();
    assert!(matches!(err, Error::TaskNotFound { .. }), "{err}");
    let warnings = roo_store::quarantine::take_warnings();
    let found = roo_store::quarantine::quarantined(&home, &name("t")).unwrap();
    assert_eq!(
        found.len(),
        1,
        "warned {warnings:?}, but roo_quarantine holds {found:?}; the row still has {} tasks",
        psql(
            &url,
            "SELECT json_array_length(doc->'tasks') FROM roo_doc WHERE key = 'tasks/t/tasks.json'"
        )
    );
}

/// The same rule on files (passes): the quarantine outlives the failed change.
#[test]
fn damaged_records_are_quarantined_even_when_the_change_then_fails_on_files() {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let team = team_named(&home, "t", &["alice"]);
    let list = team.tasks();
    list.create(new_task("one")).unwrap();
    list.create(new_task("two")).unwrap();
    let path = home.task_list(&name("t"));
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["tasks"][1].as_object_mut().unwrap().remove("subject");
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let err = list
        .delete(&TaskId::parse("99").unwrap(), None, false)
        .unwrap_err();
    assert!(matches!(err, Error::TaskNotFound { .. }), "{err}");
    assert_eq!(
        roo_store::quarantine::quarantined(&home, &name("t"))
            .unwrap()
            .len(),
        1
    );
}

/// A task list row that cannot be read, left from an earlier team of that name (its
/// config quarantined and acknowledged — what Team::create's own refusal tells the user
/// to do — or damaged by hand). Files: the first `team create` moves the list aside and
/// fails with Error::Corrupt; the second creates the team. PostgreSQL: the move is a
/// savepoint of the config's change, which the Corrupt error rolls back — every attempt
/// fails the same way, reporting a move that never happened; the name is unusable.
#[test]
fn a_team_can_be_created_over_an_unreadable_task_list_as_on_files() {
    let Some((_d, home, url)) = pg_home() else {
        return;
    };
    team_named(&home, "other", &[]); // the schema exists
    psql(
        &url,
        "INSERT INTO roo_doc (key, doc) VALUES ('tasks/t/tasks.json', \
         '{\"version\": \"1.0\", \"tasks\": 7}')",
    );
    let create = || create_team_t(&home);
    let first = create();
    assert!(matches!(first, Err(Error::Corrupt { .. })), "{first:?}");
    let second = create();
    assert!(
        second.is_ok(),
        "second create: {:?}; roo_quarantine rows: {}",
        second.err(),
        psql(&url, "SELECT count(*) FROM roo_quarantine")
    );
}

/// The same on files (passes).
#[test]
fn a_team_can_be_created_over_an_unreadable_task_list_on_files() {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let path = home.task_list(&name("t"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, br#"{"version": "1.0", "tasks": 7}"#).unwrap();
    let create = || create_team_t(&home);
    let first = create();
    assert!(matches!(first, Err(Error::Corrupt { .. })), "{first:?}");
    assert!(create().is_ok());
}

/// Issue 33: a task list deleted outside roo (its row deleted) while the team exists is
/// damage, not an empty list: reads and changes fail with `TaskListMissing` and write
/// nothing (no new list whose ids would start again at 1); `restore_missing` (what
/// `doctor --acknowledge` does) starts an empty one. A list moved to quarantine whole is
/// not missing (its quarantined copy explains it): see
/// `ids_stay_above_a_whole_quarantined_task_list_even_acknowledged`.
#[test]
fn a_deleted_task_list_is_damage_not_an_empty_list() {
    let Some((_d, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    missing_task_list_is_damage(&team, || {
        psql(&url, "DELETE FROM roo_doc WHERE key = 'tasks/t/tasks.json'");
    });
    assert_eq!(
        psql(
            &url,
            "SELECT count(*) FROM roo_doc WHERE key = 'tasks/t/tasks.json'"
        ),
        "1"
    );
}

#[test]
fn a_deleted_task_list_is_damage_not_an_empty_list_on_files() {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let team = team_named(&home, "t", &["alice"]);
    let path = home.task_list(&name("t"));
    missing_task_list_is_damage(&team, || std::fs::remove_file(&path).unwrap());
    assert!(path.exists());
}

fn missing_task_list_is_damage(team: &Team, delete: impl FnOnce()) {
    let list = team.tasks();
    list.create(new_task("one")).unwrap();
    assert!(!list.is_missing().unwrap());
    delete();
    let missing = |err: Error| {
        assert!(matches!(err, Error::TaskListMissing { .. }), "{err}");
        assert!(
            err.to_string().contains("doctor --team t --acknowledge"),
            "{err}"
        );
    };
    missing(list.list(&Default::default()).unwrap_err());
    missing(list.get(&TaskId::parse("1").unwrap()).unwrap_err());
    missing(list.create(new_task("two")).unwrap_err());
    missing(
        list.claim_next(&name("alice"), &Default::default())
            .unwrap_err(),
    );
    assert!(list.is_missing().unwrap());
    // The owner's acceptance: an empty list, once.
    assert!(list.restore_missing().unwrap());
    assert!(!list.restore_missing().unwrap());
    assert!(!list.is_missing().unwrap());
    assert!(list.list(&Default::default()).unwrap().is_empty());
    list.create(new_task("three")).unwrap();
}
