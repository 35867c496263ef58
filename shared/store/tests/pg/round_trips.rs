//! Round trips per operation of the PostgreSQL store after connect, counted at a proxy
//! between the store and the server (issue 21: at most two per mutation, one per read),
//! and the task ids' high-water mark, which a task-list change now reads in its first
//! round trip, still counting quarantined ids (PROTOCOL.md §6.1).
use roo_store::{
    ABSENCE_RECHECK_EVERY, ABSENCE_WINDOW, ClaimOptions, ClaimOutcome, Member, NewTask, Outgoing,
    ReadFilter, TaskFilter, TaskId, TaskPatch,
};

use super::common::{dsn, fresh_schema_url, home_at, name, pg_home, psql, team_named};
use crate::pg_proxy::PgProxy;

/// The fewest round trips `op` took over three runs, each after its own `setup` (not
/// counted). Why the fewest: a client may write one pipeline in pieces (its connection
/// thread woke before all requests were queued); the proxy holds answers back until
/// the client has been quiet for a while, so the pieces arrive before any answer, but a
/// client thread descheduled for longer still counts a turn it never waited for. An
/// operation's own round trips are in every run.
fn fewest<S>(proxy: &PgProxy, mut setup: impl FnMut(usize) -> S, mut op: impl FnMut(S)) -> u64 {
    (0..3)
        .map(|run| {
            let ready = setup(run);
            let before = proxy.round_trips();
            op(ready);
            proxy.round_trips() - before
        })
        .min()
        .unwrap_or(u64::MAX)
}

#[test]
fn a_mutation_after_connect_is_at_most_two_round_trips_and_a_read_one() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let proxy = PgProxy::for_dsn(&dsn);
    proxy.hold_answers(std::time::Duration::from_millis(3));
    let (_dir, home) = home_at(&proxy.url_for(&url));
    let team = team_named(&home, "t", &["alice", "bob"]);
    let (mb, list) = (team.mailbox(), team.tasks());
    let (lead, alice) = (name("lead"), name("alice"));
    let task = |subject: String| {
        list.create(NewTask {
            subject,
            ..Default::default()
        })
        .unwrap()
    };
    let mut counted: Vec<(&str, u64)> = Vec::new();
    counted.push((
        "send",
        fewest(
            &proxy,
            |_| (),
            |()| {
                mb.send(&lead, "alice", Outgoing::text("hi", "a greeting"))
                    .unwrap();
            },
        ),
    ));
    counted.push((
        "claim",
        fewest(
            &proxy,
            |run| task(format!("claim {run}")).id,
            |id| {
                let outcome = list.claim(&id, &alice, &ClaimOptions::default()).unwrap();
                assert!(matches!(outcome, ClaimOutcome::Claimed(_)), "{outcome:?}");
            },
        ),
    ));
    counted.push((
        "claim_next",
        fewest(
            &proxy,
            |run| task(format!("next {run}")),
            |_| {
                let claimed = list
                    .claim_next(&name("bob"), &ClaimOptions::default())
                    .unwrap();
                assert!(claimed.is_some());
            },
        ),
    ));
    counted.push((
        "task create",
        fewest(
            &proxy,
            |run| run,
            |run| {
                task(format!("created {run}"));
            },
        ),
    ));
    counted.push((
        "task update",
        fewest(
            &proxy,
            |run| task(format!("to update {run}")).id,
            |id| {
                let patch = TaskPatch {
                    description: Some("more detail".into()),
                    by: Some(lead.clone()),
                    ..Default::default()
                };
                list.update(&id, patch).unwrap();
            },
        ),
    ));
    counted.push((
        "team config change",
        fewest(
            &proxy,
            |run| format!("carol{run}"),
            |member| {
                team.add_member(Member::new(name(&member), team.name()))
                    .unwrap();
            },
        ),
    ));
    counted.push((
        "take unread",
        fewest(
            &proxy,
            |run| {
                mb.send(&lead, "alice", Outgoing::text(format!("m{run}"), "mail"))
                    .unwrap();
            },
            |()| {
                assert!(!mb.take_unread(&alice).unwrap().is_empty());
            },
        ),
    ));
    // Changes that judge liveness inside (PostgreSQL: the presence locks held) read the
    // locks in their first round trip: a join over an entry whose presence epoch's lock
    // is free, and the reclaim of tasks whose owners hold their presence.
    // The member's own process: its own connections, not counted.
    let (_member_dir, member_home) = home_at(&url);
    let member_team = roo_store::Team::open(&member_home, name("t")).unwrap();
    let gone_member = |run: usize| {
        let member = name(&format!("gone{run}"));
        member_team
            .join(Member::new(member.clone(), team.name()))
            .unwrap();
        // Held and dropped: an epoch whose lock is free.
        drop(member_team.detached().hold_presence(&member).unwrap());
        member
    };
    counted.push((
        "join over an entry with an epoch",
        fewest(&proxy, gone_member, |member| {
            team.join(Member::new(member, team.name())).unwrap();
        }),
    ));
    // The common path of a reclaim: every owner's presence held (read in the first
    // round trip), nothing released.
    let present = name("present");
    member_team
        .join(Member::new(present.clone(), team.name()))
        .unwrap();
    let _present = member_team.detached().hold_presence(&present).unwrap();
    let held = task("held".into()).id;
    list.claim(&held, &present, &ClaimOptions::default())
        .unwrap();
    counted.push((
        "reclaim, every owner present",
        fewest(
            &proxy,
            |_| (),
            |()| {
                assert!(list.reclaim_gone(None).unwrap().is_empty());
            },
        ),
    ));
    // An owner whose presence lock is free is a suspect: its absence is confirmed by the
    // looks again over the absence window (as `detect_dead` confirms it) before a second
    // change releases its task. Reason for the separate bound: those looks are the rule
    // against false deaths (DISTRIBUTED.md "No false deaths"), taken only when some
    // owner's lock is free; the two changes around them keep the budget of two each.
    let looks = ABSENCE_WINDOW
        .as_millis()
        .div_ceil(ABSENCE_RECHECK_EVERY.as_millis()) as u64;
    let confirmed = fewest(
        &proxy,
        |run| {
            let member = gone_member(run + 100);
            let id = task(format!("owned {run}")).id;
            list.claim(&id, &member, &ClaimOptions::default()).unwrap();
            id
        },
        |id| {
            let reclaimed = list.reclaim_gone(None).unwrap();
            assert!(reclaimed.iter().any(|r| r.task.id == id), "{reclaimed:?}");
        },
    );
    eprintln!("reclaim a gone owner's task: {confirmed} round trips ({looks} looks allowed)");
    assert!(
        confirmed <= 2 + looks + 2,
        "reclaim a gone owner's task: {confirmed} round trips, more than 2 + {looks} + 2"
    );
    let mut reads: Vec<(&str, u64)> = Vec::new();
    reads.push((
        "task list",
        fewest(
            &proxy,
            |_| (),
            |()| {
                list.list(&TaskFilter::default()).unwrap();
            },
        ),
    ));
    reads.push((
        "task get",
        fewest(
            &proxy,
            |_| (),
            |()| {
                list.get(&TaskId::parse("1").unwrap()).unwrap();
            },
        ),
    ));
    reads.push((
        "inbox read",
        fewest(
            &proxy,
            |_| (),
            |()| {
                mb.read(&alice, &ReadFilter::default()).unwrap();
            },
        ),
    ));
    reads.push((
        "team config",
        fewest(
            &proxy,
            |_| (),
            |()| {
                team.config().unwrap();
            },
        ),
    ));
    eprintln!("round trips after connect: {counted:?}; reads: {reads:?}");
    let over: Vec<_> = counted.iter().filter(|(_, n)| *n > 2).collect();
    assert!(over.is_empty(), "more than 2 round trips: {over:?}");
    let over: Vec<_> = reads.iter().filter(|(_, n)| *n != 1).collect();
    assert!(over.is_empty(), "a read that is not 1 round trip: {over:?}");
    // The counting itself works: one connection, the changes above all made.
    assert_eq!(proxy.connections(), 1);
    assert!(counted.iter().all(|(_, n)| *n >= 1), "{counted:?}");
}

/// A task list whose row is damaged as a whole (its tasks not an array) is quarantined
/// whole and its row deleted;
/// the next change starts a new list, whose ids still start above every id the
/// quarantined text mentions — acknowledged or not.
#[test]
fn ids_stay_above_a_whole_quarantined_task_list_even_acknowledged() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    let list = team.tasks();
    for s in ["a", "b", "c"] {
        list.create(NewTask {
            subject: s.into(),
            ..Default::default()
        })
        .unwrap();
    }
    psql(
        &url,
        r#"UPDATE roo_doc SET doc = '{"version": "1.0", "tasks": {"id": "7"}}' WHERE key = 'tasks/t/tasks.json'"#,
    );
    let err = list
        .create(NewTask {
            subject: "d".into(),
            ..Default::default()
        })
        .unwrap_err();
    assert!(err.to_string().contains("roo_quarantine"), "{err}");
    roo_store::quarantine::acknowledge(&home, team.name()).unwrap();
    let next = list
        .create(NewTask {
            subject: "e".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(next.id, TaskId::parse("8").unwrap());
}

/// One damaged task is quarantined alone; with the mark in the list lowered by hand
/// afterwards, its id is still never handed out again.
#[test]
fn a_quarantined_tasks_id_is_not_reused_when_the_mark_is_lowered() {
    let Some((_dir, home, url)) = pg_home() else {
        return;
    };
    let team = team_named(&home, "t", &["alice"]);
    let list = team.tasks();
    for s in ["a", "b", "c"] {
        list.create(NewTask {
            subject: s.into(),
            ..Default::default()
        })
        .unwrap();
    }
    psql(
        &url,
        "UPDATE roo_doc SET doc = jsonb_set(jsonb_set(doc::jsonb, '{tasks,2,status}', '\"done\"'), \
         '{next_id}', '3')::json WHERE key = 'tasks/t/tasks.json'",
    );
    // A change that creates nothing quarantines the damaged task and raises the mark.
    let patch = TaskPatch {
        description: Some("x".into()),
        ..Default::default()
    };
    list.update(&TaskId::parse("1").unwrap(), patch).unwrap();
    assert_eq!(
        psql(
            &url,
            "SELECT count(*) FROM roo_quarantine WHERE key = 'tasks/t/tasks.json'"
        ),
        "1"
    );
    psql(
        &url,
        "UPDATE roo_doc SET doc = jsonb_set(doc::jsonb, '{next_id}', '1')::json \
         WHERE key = 'tasks/t/tasks.json'",
    );
    let created = list
        .create(NewTask {
            subject: "d".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(created.id, TaskId::parse("4").unwrap());
}

/// Changes made as a member holding its presence (`Presence::team`) are fenced — the
/// member's entry is checked in the config read of the first round trip — and stamped by
/// the server's clock, read in the same round trip: still two round trips each.
#[test]
fn a_fenced_change_is_still_two_round_trips() {
    let Some(dsn) = dsn() else { return };
    let url = fresh_schema_url(&dsn);
    let proxy = PgProxy::for_dsn(&dsn);
    proxy.hold_answers(std::time::Duration::from_millis(3));
    let (_dir, home) = home_at(&proxy.url_for(&url));
    let team = team_named(&home, "t", &["alice", "bob"]);
    let alice = name("alice");
    let presence = team.hold_presence(&alice).unwrap();
    let fenced = presence.team();
    let (mb, list) = (fenced.mailbox(), fenced.tasks());
    let mut counted: Vec<(&str, u64)> = Vec::new();
    counted.push((
        "fenced send",
        fewest(
            &proxy,
            |_| (),
            |()| {
                mb.send(&alice, "bob", Outgoing::text("hi", "a greeting"))
                    .unwrap();
            },
        ),
    ));
    counted.push((
        "fenced claim",
        fewest(
            &proxy,
            |run| {
                team.tasks()
                    .create(NewTask {
                        subject: format!("claim {run}"),
                        ..Default::default()
                    })
                    .unwrap()
                    .id
            },
            |id| {
                let outcome = list.claim(&id, &alice, &ClaimOptions::default()).unwrap();
                assert!(matches!(outcome, ClaimOutcome::Claimed(_)), "{outcome:?}");
            },
        ),
    ));
    counted.push((
        "fenced take unread",
        fewest(
            &proxy,
            |run| {
                team.mailbox()
                    .send(
                        &name("bob"),
                        "alice",
                        Outgoing::text(format!("m{run}"), "mail"),
                    )
                    .unwrap();
            },
            |()| {
                assert!(!mb.take_unread(&alice).unwrap().is_empty());
            },
        ),
    ));
    eprintln!("fenced round trips after connect: {counted:?}");
    let over: Vec<_> = counted.iter().filter(|(_, n)| *n > 2).collect();
    assert!(over.is_empty(), "more than 2 round trips: {over:?}");
    assert!(counted.iter().all(|(_, n)| *n >= 1), "{counted:?}");
    // The fence is really checked: declared dead, the same handle writes nothing.
    team.detached().declare_dead("alice", None, "test").unwrap();
    let err = mb
        .send(&alice, "bob", Outgoing::text("late", "after death"))
        .unwrap_err();
    assert!(
        err.to_string().contains("must join the team again"),
        "{err}"
    );
}
