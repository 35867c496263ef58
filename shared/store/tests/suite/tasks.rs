//! Task list.
use std::time::Duration;

use roo_store::{
    ClaimOptions, ClaimOutcome, Error, Member, Name, NewTask, RooHome, TaskFilter, TaskId,
    TaskList, TaskPatch, TaskStatus, Team,
};

use super::common::{name, team};

fn id(s: &str) -> TaskId {
    TaskId::parse(s).unwrap()
}

fn new(subject: &str) -> NewTask {
    NewTask {
        subject: subject.into(),
        ..Default::default()
    }
}

fn create(list: &TaskList, subject: &str, blocked_by: &[&str], paths: &[&str]) -> TaskId {
    list.create(NewTask {
        blocked_by: blocked_by.iter().map(|b| id(b)).collect(),
        paths: paths.iter().map(|p| (*p).to_owned()).collect(),
        ..new(subject)
    })
    .unwrap()
    .id
}

#[test]
fn ids_are_sequential_and_never_reused() {
    let f = team();
    let list = f.team.tasks();
    assert_eq!(create(&list, "a", &[], &[]).as_str(), "1");
    assert_eq!(create(&list, "b", &[], &[]).as_str(), "2");
    list.delete(&id("2"), None, false).unwrap();
    assert_eq!(create(&list, "c", &[], &[]).as_str(), "3");
}

#[test]
fn dependencies_are_symmetric_and_cycles_refused() {
    let f = team();
    let list = f.team.tasks();
    let a = create(&list, "data layer", &[], &[]);
    let b = create(&list, "tests", &["1"], &[]);
    let c = create(&list, "verify", &[], &[]);
    list.update(
        &c,
        TaskPatch {
            add_blocked_by: vec![b.clone()],
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(list.get(&a).unwrap().blocks, vec![b.clone()]);
    assert_eq!(list.get(&b).unwrap().blocks, vec![c.clone()]);
    assert_eq!(list.get(&c).unwrap().blocked_by, vec![b.clone()]);
    let before = f.home.read_raw(&list.path()).unwrap().unwrap();
    let err = list
        .update(
            &a,
            TaskPatch {
                add_blocked_by: vec![c.clone()],
                ..Default::default()
            },
        )
        .unwrap_err();
    let Error::DependencyCycle { cycle, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(cycle, &["1", "3", "2", "1"]);
    assert_eq!(
        f.home.read_raw(&list.path()).unwrap().unwrap(),
        before,
        "nothing written"
    );
    let err = list
        .update(
            &a,
            TaskPatch {
                add_blocks: vec![a.clone()],
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("cannot block itself"), "{err}");
    let err = list
        .update(
            &a,
            TaskPatch {
                add_blocks: vec![id("99")],
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(matches!(err, Error::TaskNotFound { .. }), "{err}");
    list.delete(&b, None, false).unwrap();
    assert!(list.get(&a).unwrap().blocks.is_empty());
    assert!(list.get(&c).unwrap().blocked_by.is_empty());
}

/// A member does not delete a task others wait on, even its own (deleting it would
/// unblock them): the lead first drops the dependency, or deletes it.
#[test]
fn a_member_does_not_delete_a_task_others_wait_on() {
    let f = team();
    let list = f.team.tasks();
    let mine = list
        .create(NewTask {
            owner: Some(name("alice")),
            by: Some(name("alice")),
            ..new("mine")
        })
        .unwrap()
        .id;
    let waiter = list
        .create(NewTask {
            blocked_by: vec![mine.clone()],
            by: Some(name("lead")),
            ..new("deploy")
        })
        .unwrap()
        .id;
    let before = f.home.read_raw(&list.path()).unwrap().unwrap();
    let err = list.delete(&mine, Some(&name("alice")), false).unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "delete task {mine}: tasks {waiter} wait on it; only the lead may delete"
        )),
        "{err}"
    );
    assert_eq!(f.home.read_raw(&list.path()).unwrap().unwrap(), before);
    list.update(
        &waiter,
        TaskPatch {
            remove_blocked_by: vec![mine.clone()],
            by: Some(name("lead")),
            ..TaskPatch::default()
        },
    )
    .unwrap();
    list.delete(&mine, Some(&name("alice")), false).unwrap();
}

/// What `Agent` with `task: true` relies on: the task made for a teammate is claimed for
/// it only while it is still pending and hers, and removed after a failed spawn only
/// while still pending; whatever the teammate did first stands.
#[test]
fn claim_assigned_and_delete_pending_leave_a_members_own_change_alone() {
    let f = team();
    let list = f.team.tasks();
    let opts = ClaimOptions::default();
    let preassigned = |subject: &str| {
        list.create(NewTask {
            owner: Some(name("alice")),
            ..new(subject)
        })
        .unwrap()
        .id
    };
    // Still pending and hers: claimed, in progress.
    let a = preassigned("a");
    let Some(ClaimOutcome::Claimed(task)) = list.claim_assigned(&a, &name("alice"), &opts).unwrap()
    else {
        panic!("not claimed")
    };
    assert_eq!(task.status, TaskStatus::InProgress);
    // Released by her first: left unowned and pending.
    let b = preassigned("b");
    list.update(
        &b,
        TaskPatch {
            owner: Some(None),
            by: Some(name("alice")),
            ..TaskPatch::default()
        },
    )
    .unwrap();
    assert_eq!(
        list.claim_assigned(&b, &name("alice"), &opts).unwrap(),
        None
    );
    assert_eq!(list.get(&b).unwrap().owner, None);
    // Completed by her first: stays completed.
    let c = preassigned("c");
    list.update(
        &c,
        TaskPatch {
            status: Some(TaskStatus::Completed),
            by: Some(name("alice")),
            ..TaskPatch::default()
        },
    )
    .unwrap();
    assert_eq!(
        list.claim_assigned(&c, &name("alice"), &opts).unwrap(),
        None
    );
    assert_eq!(list.get(&c).unwrap().status, TaskStatus::Completed);
    // Not hers: untouched.
    assert_eq!(list.claim_assigned(&a, &name("bob"), &opts).unwrap(), None);

    // delete_pending: an in-progress task stays (even for the lead), a pending one goes.
    assert_eq!(list.delete_pending(&a, Some(&name("lead"))).unwrap(), None);
    assert!(list.get(&a).is_ok());
    let d = preassigned("d");
    assert!(
        list.delete_pending(&d, Some(&name("lead")))
            .unwrap()
            .is_some()
    );
    assert!(list.get(&d).is_err());
}

#[test]
fn claim_outcomes() {
    let f = team();
    let list = f.team.tasks();
    let opts = ClaimOptions::default();
    let a = create(&list, "a", &[], &[]);
    let b = create(&list, "b", &["1"], &[]);
    assert_eq!(
        list.claim(&id("42"), &name("alice"), &opts).unwrap(),
        ClaimOutcome::NotFound
    );
    assert_eq!(
        list.claim(&b, &name("alice"), &opts).unwrap(),
        ClaimOutcome::Blocked {
            by: vec![a.clone()]
        }
    );
    let ClaimOutcome::Claimed(task) = list.claim(&a, &name("alice"), &opts).unwrap() else {
        panic!()
    };
    assert_eq!(task.status, TaskStatus::InProgress);
    assert_eq!(task.owner, Some(name("alice")));
    assert!(task.lease.is_some());
    assert_eq!(
        list.claim(&a, &name("bob"), &opts).unwrap(),
        ClaimOutcome::AlreadyOwned {
            owner: name("alice"),
            status: TaskStatus::InProgress
        }
    );
    assert!(matches!(
        list.claim(&a, &name("alice"), &opts).unwrap(),
        ClaimOutcome::Claimed(_)
    ));
    list.update(
        &a,
        TaskPatch {
            status: Some(TaskStatus::Completed),
            by: Some(name("alice")),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(list.get(&a).unwrap().lease.is_none());
    assert!(matches!(
        list.claim(&b, &name("bob"), &opts).unwrap(),
        ClaimOutcome::Claimed(_)
    ));
    let c = create(&list, "c", &[], &[]);
    list.update(
        &c,
        TaskPatch {
            status: Some(TaskStatus::Completed),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        list.claim(&c, &name("bob"), &opts).unwrap(),
        ClaimOutcome::NotPending {
            status: TaskStatus::Completed
        }
    );
}

#[test]
fn update_refuses_in_progress_without_owner_or_with_open_blockers() {
    let f = team();
    let list = f.team.tasks();
    create(&list, "a", &[], &[]);
    let b = create(&list, "b", &["1"], &[]);
    let err = list
        .update(
            &id("1"),
            TaskPatch {
                status: Some(TaskStatus::InProgress),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("needs an owner"), "{err}");
    let err = list
        .update(
            &b,
            TaskPatch {
                status: Some(TaskStatus::InProgress),
                owner: Some(Some(name("bob"))),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("blocked by unfinished tasks 1"),
        "{err}"
    );
}

#[test]
fn ready_is_pending_unowned_unblocked_and_scope_aware() {
    let f = team();
    let list = f.team.tasks();
    create(&list, "auth data", &[], &["src/auth/"]);
    create(&list, "auth service", &[], &["src/auth/service.rs"]);
    create(&list, "docs", &[], &["docs/**"]);
    create(&list, "after docs", &["3"], &[]);
    create(&list, "anything", &[], &[]);
    let ids = |tasks: Vec<roo_store::Task>| -> Vec<String> {
        tasks.into_iter().map(|t| t.id.to_string()).collect()
    };
    assert_eq!(ids(list.ready().unwrap()), ["1", "2", "3", "5"]);
    let opts = ClaimOptions::default();
    assert!(matches!(
        list.claim(&id("1"), &name("alice"), &opts).unwrap(),
        ClaimOutcome::Claimed(_)
    ));
    let report = list.ready_report().unwrap();
    assert_eq!(ids(report.ready), ["3", "5"]);
    assert_eq!(report.held_back.len(), 1);
    assert_eq!(report.held_back[0].1, id("1"));
    assert_eq!(
        list.claim(&id("2"), &name("bob"), &opts).unwrap(),
        ClaimOutcome::ScopeConflict {
            with: id("1"),
            owner: Some(name("alice"))
        }
    );
    let forced = ClaimOptions {
        ignore_scope: true,
        ..ClaimOptions::default()
    };
    assert!(matches!(
        list.claim(&id("2"), &name("bob"), &forced).unwrap(),
        ClaimOutcome::Claimed(_)
    ));
    let next = list.claim_next(&name("lead"), &opts).unwrap().unwrap();
    assert_eq!(next.id, id("3"));
    let mine = list
        .list(&TaskFilter {
            owner: Some(name("lead")),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(ids(mine), ["3"]);
}

#[test]
fn leases_renew_and_gone_owners_are_reclaimed_with_a_note() {
    let f = team();
    let list = f.team.tasks();
    create(&list, "a", &[], &[]);
    create(&list, "b", &[], &[]);
    let short = ClaimOptions {
        lease: Duration::ZERO,
        ..ClaimOptions::default()
    };
    list.claim(&id("1"), &name("alice"), &ClaimOptions::default())
        .unwrap();
    list.claim(&id("2"), &name("bob"), &short).unwrap();
    let renewed = list
        .renew(&id("1"), &name("alice"), Duration::from_secs(60))
        .unwrap();
    assert!(renewed.lease.unwrap().expires_at > roo_store::Timestamp::now());
    let err = list
        .renew(&id("1"), &name("bob"), Duration::from_secs(60))
        .unwrap_err();
    assert!(matches!(err, Error::NotPermitted { .. }), "{err}");
    // Let bob's zero-length lease lapse.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while roo_store::Timestamp::now() <= list.get(&id("2")).unwrap().lease.unwrap().expires_at {
        assert!(std::time::Instant::now() < deadline);
        std::thread::yield_now();
    }
    let live = [name("alice"), name("bob"), name("lead")];
    let reclaimed = list.reclaim(Some(&name("lead")), &live).unwrap();
    assert_eq!(reclaimed.len(), 1);
    assert_eq!(reclaimed[0].previous_owner, name("bob"));
    let b = list.get(&id("2")).unwrap();
    assert_eq!(b.status, TaskStatus::Pending);
    assert_eq!(b.owner, None);
    assert!(
        b.notes[0]
            .text
            .starts_with("reclaimed from bob: the lease of bob expired")
    );
    // alice left the team.
    let reclaimed = list.reclaim(None, &[name("lead")]).unwrap();
    assert_eq!(reclaimed[0].task.id, id("1"));
    assert!(reclaimed[0].reason.contains("no longer a live member"));
    assert_eq!(list.ready().unwrap().len(), 2);
}

#[test]
fn a_team_that_does_not_exist_gets_no_stray_task_list() {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let ghost = name("ghost");
    // A handle can only be had for an existing team; make one and delete it.
    let team = Team::create(
        &home,
        ghost.clone(),
        "",
        Member::new(name("l"), &ghost),
        vec![],
    )
    .unwrap();
    team.delete(true).unwrap();
    let err = team.tasks().create(new("x")).unwrap_err();
    assert!(matches!(err, Error::TeamNotFound { .. }), "{err}");
    assert!(!home.tasks_dir(&ghost).exists());
    let _ = Name::parse("x");
}

#[test]
fn corrupt_task_list_is_moved_aside_by_a_change_and_ids_are_not_reused() {
    if super::common::not_files() {
        return; // It looks at the files themselves.
    }
    let f = team();
    let list = f.team.tasks();
    for s in ["a", "b", "c"] {
        create(&list, s, &[], &[]);
    }
    std::fs::write(list.path(), "{\"tasks\": [{\"id\": \"3\"}").unwrap();
    // A read reports it and moves nothing.
    let err = list.list(&TaskFilter::default()).unwrap_err();
    assert!(matches!(err, Error::Damaged { .. }), "{err}");
    assert!(list.path().exists());
    // A change moves it aside ...
    let err = list.create(new("d")).unwrap_err();
    assert!(err.to_string().contains("tasks.json.corrupt-"), "{err}");
    assert!(!list.path().exists());
    // ... and the next id is above every id the damaged file mentions.
    assert_eq!(list.create(new("e")).unwrap().id, id("4"));
}

/// Rewrites the task list's JSON with `edit`.
fn edit_tasks(list: &TaskList, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(list.path()).unwrap()).unwrap();
    edit(&mut doc);
    std::fs::write(list.path(), serde_json::to_vec(&doc).unwrap()).unwrap();
}

fn corrupt_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".corrupt-"))
        .collect()
}

#[test]
fn one_bad_task_is_quarantined_alone_and_its_id_is_not_reused() {
    if super::common::not_files() {
        return; // It looks at the files themselves.
    }
    let f = team();
    let list = f.team.tasks();
    for s in ["a", "b", "c"] {
        create(&list, s, &[], &[]);
    }
    edit_tasks(&list, |doc| {
        doc["tasks"][2]["status"] = "done".into();
        doc["next_id"] = 3.into();
    });
    let ids = |list: &TaskList| -> Vec<String> {
        list.list(&TaskFilter::default())
            .unwrap()
            .iter()
            .map(|t| t.id.to_string())
            .collect()
    };
    // Readers keep the valid tasks and move nothing.
    assert_eq!(ids(&list), ["1", "2"]);
    let dir = list.path().parent().unwrap().to_owned();
    assert!(corrupt_files(&dir).is_empty());
    // A change quarantines only the bad task, and never reissues its id.
    assert_eq!(list.create(new("d")).unwrap().id, id("4"));
    assert_eq!(ids(&list), ["1", "2", "4"]);
    let quarantined = corrupt_files(&dir);
    assert_eq!(quarantined.len(), 1, "{quarantined:?}");
    let bad: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&quarantined[0]).unwrap()).unwrap();
    assert_eq!(bad["tasks"][0]["id"], "3");
    assert_eq!(bad["tasks"][0]["status"], "done");
    // Even with the quarantined file acknowledged and the mark lowered, 3 stays used.
    roo_store::quarantine::acknowledge(&f.home, f.team.name()).unwrap();
    edit_tasks(&list, |doc| doc["next_id"] = 1.into());
    assert_eq!(list.create(new("e")).unwrap().id, id("5"));
}

#[test]
fn concurrent_threads_claim_each_task_exactly_once() {
    let f = team();
    let list = f.team.tasks();
    for w in 0..6 {
        f.team
            .add_member(Member::new(name(&format!("w{w}")), f.team.name()))
            .unwrap();
    }
    for i in 0..20 {
        create(&list, &format!("t{i}"), &[], &[]);
    }
    let claimed: Vec<Vec<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|w| {
                let list = list.clone();
                s.spawn(move || {
                    let me = name(&format!("w{w}"));
                    let mut mine = Vec::new();
                    for i in 1..=20 {
                        if let ClaimOutcome::Claimed(t) = list
                            .claim(&id(&i.to_string()), &me, &ClaimOptions::default())
                            .unwrap()
                        {
                            mine.push(t.id.to_string());
                        }
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<String> = claimed.into_iter().flatten().collect();
    all.sort_by_key(|s| s.parse::<u32>().unwrap());
    assert_eq!(all, (1..=20).map(|i| i.to_string()).collect::<Vec<_>>());
}

#[test]
fn members_of_a_newer_minor_version_survive_a_rewrite() {
    if super::common::not_files() {
        return; // It looks at the files themselves.
    }
    let f = team();
    let list = f.team.tasks();
    let path = list.path();
    std::fs::write(
        &path,
        r#"{"version": "1.3", "next_id": 2, "future_list_field": [1, 2],
            "tasks": [{"id": "1", "subject": "a", "status": "pending",
                       "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
                       "future_task_field": {"x": true}}]}"#,
    )
    .unwrap();
    create(&list, "b", &[], &[]);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(doc["future_list_field"], serde_json::json!([1, 2]));
    assert_eq!(doc["tasks"][0]["future_task_field"]["x"], true);
    assert_eq!(doc["tasks"][1]["id"], "2");
}

#[test]
fn a_refused_change_still_quarantines_a_bad_task_exactly_once() {
    if super::common::not_files() {
        return; // It looks at the files themselves.
    }
    let f = team();
    let list = f.team.tasks();
    for s in ["a", "b"] {
        create(&list, s, &[], &[]);
    }
    edit_tasks(&list, |doc| doc["tasks"][1]["status"] = "done".into());
    // A claim that is refused writes nothing of its own, but the bad record is moved once.
    for _ in 0..2 {
        assert_eq!(
            list.claim(&id("9"), &name("alice"), &ClaimOptions::default())
                .unwrap(),
            ClaimOutcome::NotFound
        );
    }
    let dir = list.path().parent().unwrap().to_owned();
    assert_eq!(corrupt_files(&dir).len(), 1);
}

/// PROTOCOL.md §6.3, authority: a member changes only its own tasks, gives none away,
/// creates none for another and leases at most an hour; the lead may do all of it; a
/// refused change writes nothing. The same on every store (this suite also runs on
/// PostgreSQL).
#[test]
fn a_member_changes_only_its_own_tasks_and_the_lead_any() {
    let f = team();
    let list = f.team.tasks();
    let (alice, bob, lead) = (name("alice"), name("bob"), name("lead"));
    let leads = list
        .create(NewTask {
            owner: Some(lead.clone()),
            by: Some(lead.clone()),
            ..new("the lead's")
        })
        .unwrap();
    create(&list, "ready", &[], &[]);
    list.claim(&id("2"), &bob, &ClaimOptions::default())
        .unwrap();
    let before = list.list(&TaskFilter::default()).unwrap();
    let as_alice = |patch: TaskPatch| TaskPatch {
        by: Some(alice.clone()),
        ..patch
    };
    let refused = [
        list.update(
            &leads.id,
            as_alice(TaskPatch {
                subject: Some("Delete the production database".into()),
                ..Default::default()
            }),
        ),
        list.update(
            &id("2"),
            as_alice(TaskPatch {
                status: Some(TaskStatus::Completed),
                ..Default::default()
            }),
        ),
        list.update(
            &id("2"),
            as_alice(TaskPatch {
                note: Some("fyi".into()),
                ..Default::default()
            }),
        ),
        list.assign(&leads.id, &bob, &alice, false),
        list.delete(&leads.id, Some(&alice), false),
    ];
    for result in refused {
        let err = result.unwrap_err();
        assert!(matches!(err, Error::NotPermitted { .. }), "{err}");
        assert!(
            err.to_string().contains("or the lead may change it"),
            "{err}"
        );
    }
    let err = list
        .create(NewTask {
            owner: Some(lead.clone()),
            by: Some(alice.clone()),
            ..new("for the lead")
        })
        .unwrap_err();
    assert!(matches!(err, Error::NotPermitted { .. }), "{err}");
    let err = list
        .create(NewTask {
            blocks: vec![leads.id.clone()],
            by: Some(alice.clone()),
            ..new("blocks the lead's")
        })
        .unwrap_err();
    assert!(err.to_string().contains("owned by lead"), "{err}");
    let week = ClaimOptions {
        lease: Duration::from_secs(7 * 24 * 3600),
        ..ClaimOptions::default()
    };
    assert!(matches!(
        list.claim_next(&alice, &week),
        Err(Error::NotPermitted { .. })
    ));
    assert_eq!(list.list(&TaskFilter::default()).unwrap(), before);

    // Its own task: edit, renew within the cap, but not give away; the lead may.
    let mine = list
        .create(NewTask {
            by: Some(alice.clone()),
            ..new("mine")
        })
        .unwrap();
    list.claim(&mine.id, &alice, &ClaimOptions::default())
        .unwrap();
    list.update(
        &mine.id,
        as_alice(TaskPatch {
            subject: Some("still mine".into()),
            ..Default::default()
        }),
    )
    .unwrap();
    list.renew(&mine.id, &alice, Duration::from_secs(3600))
        .unwrap();
    assert!(
        list.renew(&mine.id, &alice, Duration::from_secs(3601))
            .is_err()
    );
    let err = list
        .update(
            &mine.id,
            as_alice(TaskPatch {
                owner: Some(Some(bob.clone())),
                ..Default::default()
            }),
        )
        .unwrap_err();
    assert!(err.to_string().contains("give task 3 to bob"), "{err}");
    list.assign(&mine.id, &bob, &lead, false).unwrap();
    list.update(
        &leads.id,
        TaskPatch {
            subject: Some("renamed by the lead".into()),
            by: Some(lead.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    list.claim(&id("1"), &lead, &week).unwrap();
}
