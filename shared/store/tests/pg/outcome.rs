//! Changes whose link is cut at their `COMMIT` (issue 21): right after it reached the
//! server (the outcome is unknown to the store, and committed) or right before (rolled
//! back). Whatever the store reports is what the document holds, and nothing is written
//! twice, and a fenced change run again after its member was declared dead is refused.
//! The store talks to the server through a proxy that makes the cuts; the other
//! participants and the checks connect directly.
use roo_store::{
    ClaimOptions, ClaimOutcome, Error, Member, Message, NewTask, Outgoing, ReadFilter, RooHome,
    TaskFilter, TaskStatus, Team,
};

use super::common::{dsn, fresh_schema_url, home_at, name, team_named};
use crate::pg_proxy::PgProxy;

/// A team `t` (lead `lead`, `members`) whose store reaches the server through a proxy,
/// and a direct home on the same schema for checks and other participants.
struct Cut {
    proxy: PgProxy,
    team: Team,
    url: String,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    direct: RooHome,
}

fn cut_team(members: &[&str]) -> Option<Cut> {
    let dsn = dsn()?;
    let url = fresh_schema_url(&dsn);
    let proxy = PgProxy::for_dsn(&dsn);
    let (dir, home) = home_at(&proxy.url_for(&url));
    let team = team_named(&home, "t", members);
    let (direct_dir, direct) = home_at(&url);
    Some(Cut {
        proxy,
        team,
        url,
        _dirs: (dir, direct_dir),
        direct,
    })
}

impl Cut {
    fn direct_team(&self) -> Team {
        Team::open(&self.direct, name("t")).unwrap()
    }

    /// `member`'s messages, read directly.
    fn inbox(&self, member: &str) -> Vec<Message> {
        self.direct_team()
            .mailbox()
            .read(&name(member), &ReadFilter::default())
            .unwrap()
    }

    /// The cut happened once, and the store connected again.
    fn assert_cut_once(&self) {
        assert_eq!(self.proxy.cuts(), 1, "the cut did not happen");
        assert_eq!(
            self.proxy.connections(),
            2,
            "the store did not connect again"
        );
    }
}

#[test]
fn a_send_whose_commit_answer_was_lost_is_reported_and_stored_once() {
    let Some(cut) = cut_team(&["alice"]) else {
        return;
    };
    cut.proxy.cut_after_commit(1);
    let sent = cut
        .team
        .mailbox()
        .send(
            &name("lead"),
            "alice",
            Outgoing::text("once", "one message"),
        )
        .expect("the send committed: it is reported as sent");
    cut.assert_cut_once();
    let inbox = cut.inbox("alice");
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert_eq!(inbox[0].id, sent[0].id);
    assert_eq!(inbox[0].text, "once");
}

#[test]
fn a_send_cut_before_its_commit_is_written_once_by_running_again() {
    let Some(cut) = cut_team(&["alice"]) else {
        return;
    };
    cut.proxy.cut_before_commit(1);
    let sent = cut
        .team
        .mailbox()
        .send(
            &name("lead"),
            "alice",
            Outgoing::text("again", "one message"),
        )
        .unwrap();
    cut.assert_cut_once();
    let inbox = cut.inbox("alice");
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert_eq!(inbox[0].id, sent[0].id);
}

#[test]
fn a_claim_whose_commit_answer_was_lost_reports_the_claim_the_list_holds() {
    let Some(cut) = cut_team(&["alice", "bob"]) else {
        return;
    };
    let list = cut.team.tasks();
    let task = list
        .create(NewTask {
            subject: "contested".into(),
            ..Default::default()
        })
        .unwrap();
    cut.proxy.cut_after_commit(1);
    let outcome = list
        .claim(&task.id, &name("alice"), &ClaimOptions::default())
        .unwrap();
    cut.assert_cut_once();
    let ClaimOutcome::Claimed(claimed) = outcome else {
        panic!("the claim committed but was reported as {outcome:?}");
    };
    let held = cut.direct_team().tasks().get(&task.id).unwrap();
    assert_eq!(held.status, TaskStatus::InProgress);
    assert_eq!(held.owner, Some(name("alice")));
    assert_eq!(held.lease, claimed.lease, "not the lease this claim wrote");
}

/// The claim's `COMMIT` never reached the server, and while its store was away bob
/// claimed the task: the claim runs again and reports bob's claim, as the list holds it.
#[test]
fn a_claim_cut_before_its_commit_reports_what_the_list_holds() {
    let Some(cut) = cut_team(&["alice", "bob"]) else {
        return;
    };
    let list = cut.team.tasks();
    let task = list
        .create(NewTask {
            subject: "contested".into(),
            ..Default::default()
        })
        .unwrap();
    let (bob_dir, bob_home) = home_at(&cut.url);
    let bob_list = Team::open(&bob_home, name("t")).unwrap().tasks();
    let id = task.id.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    cut.proxy.cut_at_commit_then(1, false, move || {
        tx.send(bob_list.claim(&id, &name("bob"), &ClaimOptions::default()))
            .unwrap();
    });
    let outcome = list
        .claim(&task.id, &name("alice"), &ClaimOptions::default())
        .unwrap();
    cut.assert_cut_once();
    let bob = rx.recv().unwrap().unwrap();
    assert!(matches!(bob, ClaimOutcome::Claimed(_)), "{bob:?}");
    assert!(
        matches!(&outcome, ClaimOutcome::AlreadyOwned { owner, .. } if owner.as_str() == "bob"),
        "{outcome:?}"
    );
    let held = cut.direct_team().tasks().get(&task.id).unwrap();
    assert_eq!(held.owner, Some(name("bob")));
    drop(bob_dir);
}

#[test]
fn a_create_whose_commit_answer_was_lost_is_stored_once() {
    let Some(cut) = cut_team(&["alice"]) else {
        return;
    };
    let list = cut.team.tasks();
    cut.proxy.cut_after_commit(1);
    let created = list
        .create(NewTask {
            subject: "only once".into(),
            ..Default::default()
        })
        .unwrap();
    cut.assert_cut_once();
    let tasks = cut
        .direct_team()
        .tasks()
        .list(&TaskFilter::default())
        .unwrap();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0].id, created.id);
    assert_eq!(tasks[0].subject, "only once");
    let next = list
        .create(NewTask {
            subject: "next".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(next.id.number(), created.id.number() + 1);
}

#[test]
fn a_team_config_change_whose_commit_answer_was_lost_is_reported_as_done() {
    let Some(cut) = cut_team(&["alice"]) else {
        return;
    };
    cut.proxy.cut_after_commit(1);
    let carol = Member::new(name("carol"), cut.team.name());
    let added = cut.team.add_member(carol).unwrap();
    cut.assert_cut_once();
    assert_eq!(added.name, name("carol"));
    let config = cut.direct_team().config().unwrap();
    let carols = config
        .members
        .iter()
        .filter(|m| m.name == added.name)
        .count();
    assert_eq!(carols, 1);
}

/// A keyed broadcast whose second recipient's commit answer is lost reaches every
/// recipient once and says so; the caller's retry with the key (cut again, this time
/// before a commit) finds every copy there and writes nothing.
#[test]
fn a_keyed_broadcast_retried_after_a_cut_reaches_every_recipient_once() {
    let members = ["alice", "bob", "carol", "dave"];
    let Some(cut) = cut_team(&members) else {
        return;
    };
    let mb = cut.team.mailbox();
    let broadcast = || Outgoing::text("to all", "a broadcast");
    cut.proxy.cut_after_commit(2);
    let first = mb
        .send_keyed(&name("lead"), "*", broadcast(), Some("k1"))
        .unwrap();
    assert_eq!(cut.proxy.cuts(), 1, "the cut did not happen");
    assert!(first.failed.is_empty(), "{:?}", first.failed);
    assert_eq!(first.delivered.len(), members.len(), "{first:?}");
    cut.proxy.cut_before_commit(1);
    let retry = mb
        .send_keyed(&name("lead"), "*", broadcast(), Some("k1"))
        .unwrap();
    assert!(retry.failed.is_empty(), "{:?}", retry.failed);
    assert!(retry.delivered.is_empty(), "{retry:?}");
    assert_eq!(retry.already.len(), members.len());
    for member in members {
        let copies: Vec<_> = cut
            .inbox(member)
            .into_iter()
            .filter(|m| m.id.as_str() == format!("k1:{member}"))
            .collect();
        assert_eq!(copies.len(), 1, "{member}: {copies:?}");
    }
}

/// Without a key, a broadcast's copies get their ids before the first attempt too: a
/// cut after the third recipient's commit still leaves one copy in each inbox.
#[test]
fn an_unkeyed_broadcast_cut_after_a_commit_reaches_every_recipient_once() {
    let members = ["alice", "bob", "carol"];
    let Some(cut) = cut_team(&members) else {
        return;
    };
    cut.proxy.cut_after_commit(3);
    let sent = cut
        .team
        .mailbox()
        .send(
            &name("lead"),
            "*",
            Outgoing::text("hello all", "a broadcast"),
        )
        .unwrap();
    assert_eq!(cut.proxy.cuts(), 1, "the cut did not happen");
    assert_eq!(sent.len(), members.len());
    for member in members {
        let inbox = cut.inbox(member);
        assert_eq!(inbox.len(), 1, "{member}: {inbox:?}");
    }
}

/// The link is cut before the send's `COMMIT` and the server does not notice: its
/// session stays idle in the transaction, holding the inbox's row. The store, connected
/// again, ends that session (it still runs the lost transaction) instead of waiting for
/// the row until its lock wait gives up, and the send runs again: one copy.
#[test]
fn a_send_whose_old_session_still_holds_the_row_ends_it_and_is_written_once() {
    let Some(cut) = cut_team(&["alice"]) else {
        return;
    };
    cut.proxy.partition_before_commit(1);
    let sent = cut
        .team
        .mailbox()
        .send(
            &name("lead"),
            "alice",
            Outgoing::text("through", "one message"),
        )
        .expect("the lost session is ended and the send runs again");
    cut.assert_cut_once();
    let inbox = cut.inbox("alice");
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert_eq!(inbox[0].id, sent[0].id);
}

/// A fenced send whose `COMMIT` never reached the server runs again after the store
/// connects again; if its member was declared dead while the store was away, the run
/// again is refused (`Error::Fenced`) and nothing is written (PROTOCOL.md §8).
#[test]
fn a_fenced_send_cut_before_its_commit_is_refused_when_declared_dead_meanwhile() {
    let Some(cut) = cut_team(&["alice", "carol"]) else {
        return;
    };
    let carol = cut.team.hold_presence(&name("carol")).unwrap();
    let lead_team = cut.direct_team();
    let (tx, rx) = std::sync::mpsc::channel();
    cut.proxy.cut_at_commit_then(1, false, move || {
        tx.send(lead_team.declare_dead("carol", Some(&name("lead")), "cut off"))
            .unwrap();
    });
    let err = carol
        .team()
        .mailbox()
        .send(&name("carol"), "alice", Outgoing::text("late", "late"))
        .unwrap_err();
    rx.recv().unwrap().unwrap();
    assert!(matches!(err, Error::Fenced { .. }), "{err}");
    let inbox = cut.inbox("alice");
    assert!(inbox.is_empty(), "a fenced send wrote: {inbox:?}");
}
