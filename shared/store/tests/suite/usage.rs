//! Per-task usage and cost, per member.
use roo_store::budget::{CapScope, Reserve, SpendRecord};
use roo_store::{Error, NewTask, TaskId, TaskUsage};

use super::common::{name, team};

fn spend(input: u64, output: u64, cost: Option<f64>) -> TaskUsage {
    TaskUsage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: 7,
        cache_write_tokens: 1,
        requests: 1,
        cost_usd: cost,
    }
}

fn task(f: &super::common::Fixture) -> TaskId {
    f.team
        .tasks()
        .create(NewTask {
            subject: "data layer".into(),
            ..Default::default()
        })
        .unwrap()
        .id
}

#[test]
fn usage_accumulates_per_member_and_survives_other_changes() {
    let f = team();
    let id = task(&f);
    let tasks = f.team.tasks();
    tasks
        .claim(&id, &name("alice"), &Default::default())
        .unwrap();
    tasks
        .add_usage(&id, &name("alice"), &spend(100, 20, Some(0.5)))
        .unwrap();
    tasks
        .add_usage(&id, &name("alice"), &spend(50, 5, None))
        .unwrap();
    tasks
        .add_usage(&id, &name("bob"), &spend(1, 1, None))
        .unwrap();
    // A reclaim and an update rewrite the task: the usage stays.
    tasks
        .release_owner(&name("alice"), Some(&name("lead")), "test")
        .unwrap();
    let t = tasks.get(&id).unwrap();
    let alice = t.usage[&name("alice")];
    assert_eq!(
        (
            alice.input_tokens,
            alice.output_tokens,
            alice.cache_read_tokens
        ),
        (150, 25, 14)
    );
    assert_eq!((alice.requests, alice.cost_usd), (2, Some(0.5)));
    assert_eq!(t.usage[&name("bob")].cost_usd, None);
    let total = t.usage_total();
    assert_eq!((total.input_tokens, total.requests), (151, 3));
    // The wire shape: an object keyed by member name.
    let raw: serde_json::Value =
        serde_json::from_slice(&f.home.read_raw(&tasks.path()).unwrap().unwrap()).unwrap();
    assert_eq!(raw["tasks"][0]["usage"]["alice"]["output_tokens"], 25);
    assert_eq!(raw["tasks"][0]["usage"]["alice"]["cost_usd"], 0.5);
    assert!(raw["tasks"][0]["usage"]["bob"].get("cost_usd").is_none());
}

#[test]
fn concurrent_adds_lose_nothing() {
    let f = team();
    let id = task(&f);
    std::thread::scope(|s| {
        for who in ["alice", "bob", "alice", "bob"] {
            let tasks = f.team.tasks();
            let id = id.clone();
            s.spawn(move || {
                for _ in 0..25 {
                    tasks
                        .add_usage(&id, &name(who), &spend(3, 2, Some(0.25)))
                        .unwrap();
                }
            });
        }
    });
    let t = f.team.tasks().get(&id).unwrap();
    for who in ["alice", "bob"] {
        let u = t.usage[&name(who)];
        assert_eq!(
            (u.input_tokens, u.requests, u.cost_usd),
            (150, 50, Some(12.5))
        );
    }
}

#[test]
fn usage_a_reader_could_not_hold_is_refused_and_nothing_is_written() {
    let f = team();
    let id = task(&f);
    let tasks = f.team.tasks();
    tasks
        .add_usage(&id, &name("alice"), &spend(1, 1, Some(1.0)))
        .unwrap();
    let before = f.home.read_raw(&tasks.path()).unwrap().unwrap();
    // NaN and infinity would be written as JSON null and silently lose the cost.
    for cost in [f64::NAN, f64::INFINITY, -1.0, 2e9] {
        let err = tasks
            .add_usage(&id, &name("alice"), &spend(1, 1, Some(cost)))
            .unwrap_err();
        assert!(matches!(err, Error::InvalidTask { .. }), "{err}");
        assert!(err.to_string().contains("out of range"), "{err}");
    }
    // Beyond 2^53 − 1 a JSON reader that parses doubles loses precision.
    let huge = TaskUsage {
        input_tokens: 1 << 53,
        ..Default::default()
    };
    let err = tasks.add_usage(&id, &name("alice"), &huge).unwrap_err();
    assert!(err.to_string().contains("9007199254740991"), "{err}");
    let near = TaskUsage {
        input_tokens: (1 << 53) - 1,
        ..Default::default()
    };
    let err = tasks.add_usage(&id, &name("alice"), &near).unwrap_err();
    assert!(err.to_string().contains("the total"), "{err}");
    assert_eq!(f.home.read_raw(&tasks.path()).unwrap().unwrap(), before);
    if super::common::not_files() {
        return; // The rest looks at the file itself.
    }
    // Nothing to add: no write at all (the file is not even replaced).
    let inode =
        |p: &std::path::Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before_inode = inode(&tasks.path());
    tasks
        .add_usage(&id, &name("alice"), &TaskUsage::default())
        .unwrap();
    assert_eq!(inode(&tasks.path()), before_inode);
    let missing = tasks
        .add_usage(
            &TaskId::parse("99").unwrap(),
            &name("alice"),
            &spend(1, 1, None),
        )
        .unwrap_err();
    assert!(matches!(missing, Error::TaskNotFound { .. }), "{missing}");
}

#[test]
fn a_task_list_without_usage_reads_and_one_with_it_is_kept_by_rewrites() {
    if super::common::not_files() {
        return; // It looks at the files themselves.
    }
    let f = team();
    let tasks = f.team.tasks();
    std::fs::write(
        tasks.path(),
        r#"{"version":"1.0","next_id":2,"tasks":[{"id":"1","subject":"old","status":"pending",
        "created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}]}"#,
    )
    .unwrap();
    let id = TaskId::parse("1").unwrap();
    assert!(tasks.get(&id).unwrap().usage.is_empty());
    tasks
        .add_usage(&id, &name("bob"), &spend(2, 2, None))
        .unwrap();
    tasks
        .update(
            &id,
            roo_store::TaskPatch {
                note: Some("touched".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(tasks.get(&id).unwrap().usage[&name("bob")].input_tokens, 2);
}

/// A spend value no writer writes (a negative or out-of-range cost, put there by another
/// program) must not disable a cap: the team's total with it, and the member's own, count
/// as over every cap, never as less spent.
#[test]
fn a_corrupt_spend_in_the_list_stops_rather_than_lifts_the_caps() {
    if super::common::not_files() {
        return; // It writes the file itself.
    }
    let f = team();
    let tasks = f.team.tasks();
    std::fs::write(
        tasks.path(),
        r#"{"version":"1.0","next_id":1,"tasks":[],
        "spend":{"alice":{"requests":1,"cost_usd":-1000.0},"bob":{"requests":1,"cost_usd":5.0}},
        "caps":{"team":{"usd":1.0},"member_default":{"usd":1.0}}}"#,
    )
    .unwrap();
    let state = tasks.spend_state(&name("alice"), None).unwrap();
    let team_cap = state.team_cap.unwrap();
    assert!(
        team_cap.reached(&state.team),
        "the team's 1 USD cap is not reached with {:?} spent (bob alone spent 5 USD)",
        state.team
    );
    let member_cap = state.member_cap.unwrap();
    assert!(
        member_cap.reached(&state.member),
        "alice's cap is not reached with {:?}",
        state.member
    );
}

fn cap(usd: Option<f64>, requests: Option<u64>) -> roo_store::budget::SpendCap {
    roo_store::budget::SpendCap { usd, requests }
}

/// Members starting requests at once, as their spend gates do: the first request of each
/// reserved alone, every next one with the previous response (`settle_spend`), used with
/// a locked read. The check and the reservation are one write, so exactly as many start
/// as the team's request cap allows.
#[test]
fn concurrent_requests_never_pass_a_request_cap() {
    let f = team();
    let tasks = f.team.tasks();
    tasks
        .set_caps(None, |caps| caps.team = Some(cap(None, Some(10))))
        .unwrap();
    let started = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for who in ["alice", "bob", "lead", "alice"] {
            let (tasks, started) = (f.team.tasks(), &started);
            s.spawn(move || {
                let mut held = false;
                for _ in 0..6 {
                    let how = if held { Reserve::Held } else { Reserve::More };
                    let slot = tasks
                        .reserve_request(&name(who), &TaskUsage::default(), who == "lead", how)
                        .unwrap();
                    if slot.refused_by.is_some() {
                        held = false;
                        continue;
                    }
                    started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let record = SpendRecord {
                        spent: spend(1, 1, None),
                        consumed: slot.counted,
                        next: true,
                        ..Default::default()
                    };
                    held = tasks
                        .settle_spend(&name(who), &record)
                        .unwrap()
                        .reserved_next;
                }
                if held {
                    tasks.release_request(&name(who), 1).unwrap();
                }
            });
        }
    });
    assert_eq!(started.into_inner(), 10);
    let (spend, _) = tasks.spend().unwrap();
    assert_eq!(roo_store::budget::team_total(&spend).requests, 10);
    assert_eq!(
        tasks.spend_state(&name("bob"), None).unwrap().team.requests,
        10
    );
}

/// A reservation counts toward the member's in-progress task, and the pending spend goes
/// in with it; the task's own request cap then refuses the next request until the first
/// is answered and given back; the response counts the request on the task.
#[test]
fn a_request_is_counted_to_the_held_task_and_its_cap_refuses_the_next() {
    let f = team();
    let tasks = f.team.tasks();
    let id = tasks
        .create(NewTask {
            subject: "capped".into(),
            budget: Some(cap(None, Some(1))),
            ..Default::default()
        })
        .unwrap()
        .id;
    tasks
        .claim(&id, &name("alice"), &Default::default())
        .unwrap();
    let pending = spend(5, 5, Some(0.5));
    let slot = tasks
        .reserve_request(&name("alice"), &pending, false, Reserve::Fresh)
        .unwrap();
    assert_eq!(
        (slot.refused_by, slot.task.clone()),
        (None, Some(id.clone()))
    );
    let state = tasks.spend_state(&name("alice"), None).unwrap();
    assert_eq!(state.task.unwrap().1.requests, 1, "the reservation counts");
    let slot = tasks
        .reserve_request(&name("alice"), &TaskUsage::default(), false, Reserve::More)
        .unwrap();
    assert_eq!(
        slot.refused_by,
        Some(roo_store::budget::CapScope::Task),
        "{slot:?}"
    );
    let record = SpendRecord {
        spent: spend(1, 1, Some(0.25)),
        task_spent: Some(spend(1, 1, Some(0.25))),
        consumed: true,
        next: true,
        ..Default::default()
    };
    let settled = tasks.settle_spend(&name("alice"), &record).unwrap();
    // The task's cap is reached: no next request is reserved.
    assert!(!settled.reserved_next, "{settled:?}");
    assert_eq!(tasks.get(&id).unwrap().usage[&name("alice")].requests, 1);
    let (spend, _) = tasks.spend().unwrap();
    // The pending request and the one answered; the refused one is not counted.
    assert_eq!(spend[&name("alice")].requests, 2);
    assert_eq!(spend[&name("alice")].cost_usd, Some(0.75));
}

/// Under a cap in requests, the response's write reserves the next request: using that
/// reservation writes nothing (the list's bytes stay as they were), and the run's end
/// gives an unused one back.
#[test]
fn a_request_after_a_response_uses_its_reservation_without_a_write() {
    let f = team();
    let tasks = f.team.tasks();
    tasks
        .set_caps(None, |caps| caps.team = Some(cap(None, Some(3))))
        .unwrap();
    let alice = name("alice");
    let slot = tasks
        .reserve_request(&alice, &TaskUsage::default(), false, Reserve::Fresh)
        .unwrap();
    assert!(slot.counted);
    let record = SpendRecord {
        spent: spend(1, 1, None),
        consumed: true,
        next: true,
        ..Default::default()
    };
    assert!(tasks.settle_spend(&alice, &record).unwrap().reserved_next);
    // The file store's list (the PostgreSQL store has no file: the counts are checked).
    let bytes = std::fs::read(tasks.path()).ok();
    let slot = tasks
        .reserve_request(&alice, &TaskUsage::default(), false, Reserve::Held)
        .unwrap();
    assert_eq!((slot.refused_by, slot.counted), (None, true));
    assert_eq!(
        slot.state.team.requests, 1,
        "its own reservation is left out"
    );
    assert_eq!(
        std::fs::read(tasks.path()).ok(),
        bytes,
        "a used reservation wrote"
    );
    assert!(tasks.settle_spend(&alice, &record).unwrap().reserved_next);
    // The run ends: the reservation goes back, and 3 − 2 answered leaves one to bob.
    tasks.release_request(&alice, 1).unwrap();
    for (how, refused) in [
        (Reserve::Fresh, None),
        (Reserve::More, Some(CapScope::Team)),
    ] {
        let slot = tasks
            .reserve_request(&name("bob"), &TaskUsage::default(), false, how)
            .unwrap();
        assert_eq!(slot.refused_by, refused, "{slot:?}");
    }
}

/// A member that dies holding a reservation (its process gone before the response): the
/// reservation counts until the member is declared dead, then no longer; and a new
/// process of the same member replaces what an earlier one left.
#[test]
fn a_dead_members_reservation_stops_counting() {
    let f = team();
    let tasks = f.team.tasks();
    tasks
        .set_caps(None, |caps| caps.team = Some(cap(None, Some(2))))
        .unwrap();
    for who in ["alice", "bob"] {
        let slot = tasks
            .reserve_request(&name(who), &TaskUsage::default(), false, Reserve::Fresh)
            .unwrap();
        assert_eq!(slot.refused_by, None);
    }
    let refused = tasks
        .reserve_request(&name("lead"), &TaskUsage::default(), true, Reserve::Fresh)
        .unwrap();
    assert_eq!(refused.refused_by, Some(roo_store::budget::CapScope::Team));
    // bob's process is gone; its next process starts with a fresh reservation, which
    // replaces the one left behind.
    let again = tasks
        .reserve_request(&name("bob"), &TaskUsage::default(), false, Reserve::Fresh)
        .unwrap();
    assert_eq!(again.refused_by, None, "{again:?}");
    // alice dies: her reservation stops counting.
    tasks
        .release_owner(&name("alice"), Some(&name("lead")), "died")
        .unwrap();
    let slot = tasks
        .reserve_request(&name("lead"), &TaskUsage::default(), true, Reserve::Fresh)
        .unwrap();
    assert_eq!(slot.refused_by, None, "{slot:?}");
}

/// A task's own cap may lower the team's default, never raise it: the lower holds, part
/// by part.
#[test]
fn a_tasks_own_cap_only_lowers_the_default() {
    let f = team();
    let tasks = f.team.tasks();
    tasks
        .set_caps(None, |caps| caps.task_default = Some(cap(Some(0.05), None)))
        .unwrap();
    let id = tasks
        .create(NewTask {
            subject: "generous".into(),
            budget: Some(cap(Some(1.0), Some(5))),
            ..Default::default()
        })
        .unwrap()
        .id;
    let state = tasks.spend_state(&name("alice"), Some(&id)).unwrap();
    assert_eq!(state.task.unwrap().2, Some(cap(Some(0.05), Some(5))));
}

/// A member over its own cap claims nothing (by id or the next ready task); a task over
/// its cap is not claimed, by id or as the next one (another ready task is).
#[test]
fn claims_are_refused_to_a_member_or_a_task_over_its_cap() {
    let f = team();
    let tasks = f.team.tasks();
    let new = |subject: &str, budget| {
        tasks
            .create(NewTask {
                subject: subject.into(),
                budget,
                ..Default::default()
            })
            .unwrap()
            .id
    };
    let spent_task = new("spent", Some(cap(None, Some(1))));
    let other = new("other", None);
    tasks
        .set_caps(None, |caps| {
            caps.members.insert(name("alice"), cap(None, Some(1)));
        })
        .unwrap();
    tasks
        .add_spend(&name("alice"), &spend(1, 1, None), None)
        .unwrap();
    for claim in [
        tasks
            .claim(&other, &name("alice"), &Default::default())
            .map(|_| ()),
        tasks
            .claim_next(&name("alice"), &Default::default())
            .map(|_| ()),
    ] {
        let error = claim.unwrap_err().to_string();
        assert!(
            error.contains("alice reached its budget of 1 requests"),
            "{error}"
        );
    }
    tasks
        .add_usage(&spent_task, &name("bob"), &spend(1, 1, None))
        .unwrap();
    let error = tasks
        .claim(&spent_task, &name("bob"), &Default::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains("the task reached its budget"), "{error}");
    let next = tasks
        .claim_next(&name("bob"), &Default::default())
        .unwrap()
        .unwrap();
    assert_eq!(next.id, other, "the task over its cap is left");
    let error = tasks
        .claim_next(&name("lead"), &Default::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains("the task reached its budget"), "{error}");
}

/// Under caps in USD only, a request is not counted as it starts (its response adds it):
/// the reservation writes nothing, and the cap still refuses once reached.
#[test]
fn under_a_usd_cap_only_a_reservation_writes_nothing() {
    let f = team();
    let tasks = f.team.tasks();
    tasks
        .set_caps(None, |caps| caps.team = Some(cap(Some(1.0), None)))
        .unwrap();
    let slot = tasks
        .reserve_request(&name("alice"), &TaskUsage::default(), false, Reserve::Fresh)
        .unwrap();
    assert_eq!((slot.refused_by, slot.counted), (None, false));
    assert!(tasks.spend().unwrap().0.is_empty());
    tasks
        .add_spend(&name("bob"), &spend(1, 1, Some(1.0)), None)
        .unwrap();
    let slot = tasks
        .reserve_request(&name("alice"), &TaskUsage::default(), false, Reserve::More)
        .unwrap();
    assert_eq!(slot.refused_by, Some(roo_store::budget::CapScope::Team));
}
