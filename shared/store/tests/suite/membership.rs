//! Joining by hand, liveness, idle notifications and task assignment.
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command};

use roo_store::{
    BackendType, ClaimOptions, ClaimOutcome, Error, Member, MemberState, MessageBody, NewTask,
    Outgoing, ReadFilter, TaskId, TaskPatch, TaskStatus,
};

use super::common::{Fixture, live_member, name, team};

/// A live process to stand for a member; killed and reaped on drop.
struct Holder(Child);

impl Holder {
    fn start() -> Holder {
        Holder(Command::new("sleep").arg("60").spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.kill();
    }
}

fn carol(f: &Fixture, pid: Option<u32>) -> Member {
    let mut m = Member::new(name("carol"), f.team.name());
    m.pid = pid;
    m.backend_type = Some(BackendType::Tmux);
    m.pane_id = Some("%7".into());
    m
}

fn create(f: &Fixture, subject: &str) -> TaskId {
    f.team
        .tasks()
        .create(NewTask {
            subject: subject.into(),
            ..Default::default()
        })
        .unwrap()
        .id
}

#[test]
fn join_adds_a_new_member_active_and_repeats_idempotently_for_the_same_process() {
    let f = team();
    let me = std::process::id();
    let joined = f.team.join(carol(&f, Some(me))).unwrap();
    assert!(joined.replaced.is_none());
    assert_eq!(joined.member.state(), MemberState::Busy);
    assert_eq!(joined.member.agent_id, "carol@t");
    // The same process joining again (a retry) takes its own entry over.
    let again = f.team.join(carol(&f, Some(me))).unwrap();
    assert_eq!(again.replaced.unwrap().pid, Some(me));
    let config = f.team.config().unwrap();
    assert_eq!(
        config.members.iter().filter(|m| m.name == "carol").count(),
        1
    );
}

/// Live by the store's own test: on files its pid, on PostgreSQL its presence.
#[test]
fn join_refuses_a_name_a_live_process_holds() {
    let f = team();
    let _holder = live_member(&f, carol(&f, None));
    let before = f.team.config().unwrap();
    let err = f
        .team
        .join(carol(&f, Some(std::process::id())))
        .unwrap_err();
    assert!(matches!(err, Error::NotPermitted { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("a live process"), "{text}");
    assert_eq!(f.team.config().unwrap(), before);
}

#[test]
fn join_takes_over_the_name_of_a_dead_process_and_clears_its_death() {
    let f = team();
    let mut holder = Holder::start();
    let old_pid = holder.pid();
    let mut first = carol(&f, Some(old_pid));
    first.agent_type = Some("Explore".into());
    f.team.join(first).unwrap();
    holder.kill();
    f.team.mark_dead("carol", "test killed it").unwrap();
    let mut next = carol(&f, Some(std::process::id()));
    next.pane_id = None;
    next.backend_type = None;
    let joined = f.team.join(next).unwrap();
    let old = joined.replaced.unwrap();
    assert_eq!((old.pid, old.state()), (Some(old_pid), MemberState::Dead));
    let m = joined.member;
    assert_eq!(m.state(), MemberState::Busy);
    assert_eq!((m.dead_at, m.dead_reason), (None, None));
    // Liveness fields are the joiner's; descriptive ones fall back to the old entry's.
    assert_eq!(
        (m.pid, m.pane_id, m.backend_type),
        (Some(std::process::id()), None, None)
    );
    assert_eq!(m.agent_type.as_deref(), Some("Explore"));
}

/// A member joining again after it was declared dead (its runtime's presence keeper)
/// takes its entry back — but not one removed from the team or recorded as shut down at
/// the lead's request, refused in the join's own locked write: what others decided is
/// not undone by joining again, and nothing is written.
#[test]
fn join_again_takes_a_dead_entry_back_but_never_a_removed_or_shut_down_one() {
    let f = team();
    let me = std::process::id();
    f.team.join(carol(&f, Some(me))).unwrap();
    f.team.mark_dead("carol", "its link was cut").unwrap();
    let back = f.team.join_again(carol(&f, Some(me))).unwrap();
    assert_eq!(back.member.state(), MemberState::Busy);
    f.team.record_shut_down(&name("carol")).unwrap();
    let before = f.team.config().unwrap();
    let err = f.team.join_again(carol(&f, Some(me))).unwrap_err();
    assert!(err.to_string().contains("shut down"), "{err}");
    assert_eq!(f.team.config().unwrap(), before);
    f.team.remove_member("carol").unwrap();
    let before = f.team.config().unwrap();
    let err = f.team.join_again(carol(&f, Some(me))).unwrap_err();
    assert!(err.to_string().contains("removed from the team"), "{err}");
    assert_eq!(f.team.config().unwrap(), before);
    // A plain join (a new process by hand) may add the name anew.
    f.team.join(carol(&f, Some(me))).unwrap();
}

#[test]
fn join_takes_over_a_dead_pid_even_before_anyone_marked_it() {
    let f = team();
    let mut holder = Holder::start();
    f.team.join(carol(&f, Some(holder.pid()))).unwrap();
    holder.kill();
    f.team.join(carol(&f, Some(std::process::id()))).unwrap();
}

/// Issue 21: a member on another host (`host` set) has a pid of that host. Unless its
/// presence vouches for it (PostgreSQL, an epoch: `pg/presence.rs`), no pid check of this
/// host judges it: not `detect_dead`, not the observed state, not a join (its name stays
/// held until it is marked dead).
#[test]
fn a_member_on_another_host_is_never_judged_by_a_pid_of_this_host() {
    let f = team();
    let mut holder = Holder::start();
    let dead_here = holder.pid();
    holder.kill();
    let mut remote = carol(&f, Some(dead_here));
    remote.host = Some("b".into());
    f.team.join(remote.clone()).unwrap();
    assert!(f.team.detect_dead(None).unwrap().is_empty());
    let config = f.team.config().unwrap();
    let entry = config.member("carol").unwrap();
    assert_eq!(entry.host.as_deref(), Some("b"));
    assert_eq!(entry.local_pid(), None);
    assert_eq!(entry.observed_state(), MemberState::Busy);
    // A process of this host cannot take the name over: it cannot tell whether it lives.
    let err = f
        .team
        .join(carol(&f, Some(std::process::id())))
        .unwrap_err();
    assert!(
        matches!(err, Error::NotPermitted { .. }) && err.to_string().contains("host b"),
        "{err}"
    );
    // The same process (same pid, same host) joins again; once marked dead, anyone may.
    f.team.join(remote).unwrap();
    f.team.mark_dead("carol", "gone").unwrap();
    let joined = f.team.join(carol(&f, Some(std::process::id()))).unwrap();
    assert_eq!(
        joined.member.host, None,
        "the joiner's host replaces the old one"
    );
    // A host that is not a name is never written.
    let mut bad = carol(&f, Some(std::process::id()));
    bad.host = Some("-oProxyCommand=x".into());
    assert!(f.team.join(bad).is_err());
}

#[test]
fn join_keeps_names_unique_in_any_case_and_never_takes_the_leads_name() {
    let f = team();
    let err = f
        .team
        .join(Member::new(name("Alice"), f.team.name()))
        .unwrap_err();
    assert!(matches!(err, Error::MemberExists { .. }), "{err}");
    let err = f
        .team
        .join(Member::new(name("lead"), f.team.name()))
        .unwrap_err();
    assert!(err.to_string().contains("team's lead"), "{err}");
    // A roster entry without a process (made by `team create --member alice`) is joinable.
    let joined = f
        .team
        .join(Member::new(name("alice"), f.team.name()))
        .unwrap();
    assert!(joined.replaced.is_some());
}

/// A member that stops on its own (its lead gone) releases its unfinished tasks with a
/// note saying why, written as itself, then is marked stopped with that reason; its entry
/// stays in the roster; a second call changes nothing.
#[test]
fn record_stop_releases_with_a_note_then_marks_the_member_stopped() {
    let f = team();
    let tasks = f.team.tasks();
    let working = create(&f, "working");
    tasks
        .claim(&working, &name("alice"), &ClaimOptions::default())
        .unwrap();
    let death = f
        .team
        .record_stop(&name("alice"), "its lead is gone (test)")
        .unwrap();
    assert!(death.newly_dead);
    assert_eq!(death.released.len(), 1);
    let task = tasks.get(&working).unwrap();
    assert_eq!((task.owner, task.status), (None, TaskStatus::Pending));
    assert!(
        task.notes.iter().any(|n| n.text
            == "reclaimed from alice: alice stopped: its lead is gone (test)"
            && n.by.as_ref() == Some(&name("alice"))),
        "{:?}",
        task.notes
    );
    let entry = f.team.config().unwrap().member("alice").unwrap().clone();
    assert_eq!(entry.state(), MemberState::Dead);
    assert_eq!(
        entry.dead_reason.as_deref(),
        Some("stopped: its lead is gone (test)")
    );
    let again = f
        .team
        .record_stop(&name("alice"), "its lead is gone (test)")
        .unwrap();
    assert!(!again.newly_dead && again.released.is_empty());
}

#[test]
fn declare_dead_releases_unfinished_tasks_with_who_and_why() {
    let f = team();
    let tasks = f.team.tasks();
    let working = create(&f, "working");
    let assigned = create(&f, "pre-assigned");
    let done = create(&f, "done");
    let bobs = create(&f, "bob's");
    tasks
        .claim(&working, &name("alice"), &ClaimOptions::default())
        .unwrap();
    tasks
        .claim(&done, &name("alice"), &ClaimOptions::default())
        .unwrap();
    tasks
        .update(
            &done,
            TaskPatch {
                status: Some(TaskStatus::Completed),
                by: Some(name("alice")),
                ..Default::default()
            },
        )
        .unwrap();
    tasks
        .update(
            &assigned,
            TaskPatch {
                owner: Some(Some(name("alice"))),
                ..Default::default()
            },
        )
        .unwrap();
    tasks
        .claim(&bobs, &name("bob"), &ClaimOptions::default())
        .unwrap();

    let death = f
        .team
        .declare_dead("alice", Some(&name("lead")), "its pane was closed")
        .unwrap();
    assert!(death.newly_dead);
    assert_eq!(death.member.state(), MemberState::Dead);
    assert_eq!(
        death.member.dead_reason.as_deref(),
        Some("its pane was closed")
    );
    let released: Vec<&str> = death.released.iter().map(|r| r.task.id.as_str()).collect();
    assert_eq!(released, ["1", "2"]);
    let t = tasks.get(&working).unwrap();
    assert_eq!(
        (t.status, t.owner.clone(), t.lease.clone()),
        (TaskStatus::Pending, None, None)
    );
    let note = t.notes.last().unwrap();
    assert_eq!(note.by.as_ref().unwrap(), "lead");
    assert_eq!(
        note.text,
        "reclaimed from alice: alice died: its pane was closed"
    );
    assert_eq!(tasks.get(&done).unwrap().status, TaskStatus::Completed);
    assert_eq!(tasks.get(&bobs).unwrap().owner.unwrap(), "bob");
    // Idempotent: a second call marks and releases nothing more.
    let again = f.team.declare_dead("alice", None, "again").unwrap();
    assert!(!again.newly_dead && again.released.is_empty());
    assert_eq!(
        again.member.dead_reason.as_deref(),
        Some("its pane was closed")
    );
    // The lead is never dead.
    assert!(f.team.declare_dead("lead", None, "x").is_err());
}

#[test]
fn a_dead_member_cannot_claim_until_it_joins_again() {
    let f = team();
    let id = create(&f, "t");
    f.team.mark_dead("bob", "gone").unwrap();
    let err = f
        .team
        .tasks()
        .claim(&id, &name("bob"), &ClaimOptions::default())
        .unwrap_err();
    assert!(err.to_string().contains("marked dead"), "{err}");
    assert!(
        f.team
            .tasks()
            .claim_next(&name("bob"), &Default::default())
            .is_err()
    );
    f.team
        .join(Member::new(name("bob"), f.team.name()))
        .unwrap();
    let outcome = f
        .team
        .tasks()
        .claim(&id, &name("bob"), &ClaimOptions::default())
        .unwrap();
    assert!(matches!(outcome, ClaimOutcome::Claimed(_)));
}

#[test]
fn detect_dead_finds_a_killed_process_once_and_releases_its_task() {
    let f = team();
    let mut dying = live_member(&f, carol(&f, None));
    let _living = live_member(&f, Member::new(name("dave"), f.team.name()));
    let id = create(&f, "carol's");
    f.team
        .tasks()
        .claim(&id, &name("carol"), &ClaimOptions::default())
        .unwrap();
    assert!(f.team.detect_dead(Some(&name("lead"))).unwrap().is_empty());
    dying.kill();
    let config = f.team.config().unwrap();
    let liveness = f.team.liveness(&config).unwrap();
    assert_eq!(
        liveness.observed_state(config.member("carol").unwrap()),
        MemberState::Dead
    );
    assert!(!liveness.live_member_names(&config).contains(&name("carol")));
    let deaths = f.team.detect_dead(Some(&name("lead"))).unwrap();
    assert_eq!(deaths.len(), 1);
    assert_eq!(deaths[0].member.name, "carol");
    assert!(deaths[0].newly_dead);
    assert_eq!(deaths[0].released[0].task.id, id);
    let t = f.team.tasks().get(&id).unwrap();
    assert_eq!(t.status, TaskStatus::Pending);
    let note = &t.notes.last().unwrap().text;
    assert!(
        note.contains("is no longer running") || note.contains("is gone"),
        "{note}"
    );
    // Reported once, never again; the living member is untouched.
    assert!(f.team.detect_dead(Some(&name("lead"))).unwrap().is_empty());
    let config = f.team.config().unwrap();
    assert_eq!(config.member("dave").unwrap().state(), MemberState::Busy);
}

#[test]
fn reclaim_gone_counts_a_member_marked_dead_as_gone() {
    let f = team();
    let id = create(&f, "t");
    f.team
        .tasks()
        .claim(&id, &name("bob"), &ClaimOptions::default())
        .unwrap();
    assert!(f.team.tasks().reclaim_gone(None).unwrap().is_empty());
    // Marked dead by hand (no pid: an in-process teammate whose task panicked).
    f.team.mark_dead("bob", "panicked").unwrap();
    let reclaimed = f.team.tasks().reclaim_gone(None).unwrap();
    assert_eq!(reclaimed.len(), 1);
}

fn idle_notice() -> Outgoing {
    Outgoing::new(
        MessageBody::IdleNotification {
            completed_task_id: Some("1".into()),
        },
        "finished task 1",
    )
}

fn lead_inbox(f: &Fixture) -> Vec<roo_store::Message> {
    f.team
        .mailbox()
        .read(&name("lead"), &ReadFilter::default())
        .unwrap()
}

#[test]
fn idle_notification_is_sent_once_per_fingerprint_across_restarts() {
    let f = team();
    let first = f
        .team
        .become_idle(&name("alice"), "fp-1", idle_notice())
        .unwrap();
    assert!(first.sent.is_some());
    assert_eq!(first.member.state(), MemberState::Idle);
    // Woken, worked on nothing new, idle again: no repeat.
    f.team.set_active("alice", true).unwrap();
    let again = f
        .team
        .become_idle(&name("alice"), "fp-1", idle_notice())
        .unwrap();
    assert!(again.sent.is_none());
    assert_eq!(again.member.state(), MemberState::Idle);
    // A restarted process opens the team anew: the fingerprint is in the config.
    let reopened = roo_store::Team::open(&f.home, name("t")).unwrap();
    assert!(
        reopened
            .become_idle(&name("alice"), "fp-1", idle_notice())
            .unwrap()
            .sent
            .is_none()
    );
    assert!(
        reopened
            .become_idle(&name("alice"), "fp-2", idle_notice())
            .unwrap()
            .sent
            .is_some()
    );
    let idles = lead_inbox(&f);
    assert_eq!(idles.len(), 2);
    assert!(
        idles
            .iter()
            .all(|m| m.body.type_name() == "idle_notification")
    );
    let wrong = Outgoing::text("hi", "a text message");
    assert!(f.team.become_idle(&name("alice"), "fp-3", wrong).is_err());
    let long = "x".repeat(257);
    assert!(
        f.team
            .become_idle(&name("alice"), &long, idle_notice())
            .is_err()
    );
}

/// A failed send writes nothing: the member stays busy with its old fingerprint, so
/// nobody reads it idle without the notification it owes (a headless lead reading the
/// states, then its inbox, would take the team for settled), and the next attempt
/// notifies.
#[test]
fn an_idle_notification_that_cannot_be_sent_is_retried_not_suppressed() {
    if super::common::not_files() {
        return; // It looks at the files themselves.
    }
    let f = team();
    f.team.set_active("alice", true).unwrap();
    let inbox = f.team.mailbox().inbox_path(&name("lead"));
    std::fs::create_dir_all(&inbox).unwrap();
    let err = f
        .team
        .become_idle(&name("alice"), "fp-1", idle_notice())
        .unwrap_err();
    assert!(matches!(err, Error::NotRegularFile { .. }), "{err}");
    let alice = f.team.config().unwrap().member("alice").unwrap().clone();
    assert_eq!(alice.idle_fingerprint, None);
    assert_eq!(
        alice.state(),
        MemberState::Busy,
        "recorded idle without its notification"
    );
    std::fs::remove_dir(&inbox).unwrap();
    let idle = f
        .team
        .become_idle(&name("alice"), "fp-1", idle_notice())
        .unwrap();
    assert!(idle.sent.is_some());
}

#[test]
fn assign_task_sets_the_owner_then_sends_a_keyed_task_assignment() {
    let f = team();
    let id = create(&f, "write the parser");
    let a = f
        .team
        .assign_task(&id, "alice@t", &name("lead"), false)
        .unwrap();
    assert_eq!(a.task.owner.as_ref().unwrap(), "alice");
    assert_eq!(a.task.status, TaskStatus::Pending);
    assert_eq!(
        a.task.notes.last().unwrap().text,
        "assigned to alice by lead"
    );
    assert_eq!(a.message.to, "alice");
    assert!(matches!(&a.message.body, MessageBody::TaskAssignment { task_id } if task_id == "1"));
    assert_eq!(
        a.message.summary.as_deref(),
        Some("task 1: \"write the parser\"")
    );
    assert!(a.message.id.as_str().starts_with("assign-1-"));
    // A retry of the same assignment writes nothing and delivers nothing twice.
    let before = f.home.read_raw(&f.team.tasks().path()).unwrap().unwrap();
    let again = f
        .team
        .assign_task(&id, "alice", &name("lead"), false)
        .unwrap();
    assert_eq!(again.message.id, a.message.id);
    assert_eq!(
        f.home.read_raw(&f.team.tasks().path()).unwrap().unwrap(),
        before
    );
    let inbox = f
        .team
        .mailbox()
        .read(&name("alice"), &ReadFilter::default())
        .unwrap();
    assert_eq!(inbox.len(), 1);
    // Pre-assigned: only alice can claim it.
    let bob = f
        .team
        .tasks()
        .claim(&id, &name("bob"), &ClaimOptions::default())
        .unwrap();
    assert!(matches!(bob, ClaimOutcome::AlreadyOwned { .. }));
}

#[test]
fn assign_task_refuses_yourself_the_dead_a_completed_task_and_another_claim() {
    let f = team();
    let id = create(&f, "t");
    let me = f
        .team
        .assign_task(&id, "bob", &name("bob"), false)
        .unwrap_err();
    assert!(me.to_string().contains("claim the task instead"), "{me}");
    let nobody = f
        .team
        .assign_task(&id, "zed", &name("lead"), false)
        .unwrap_err();
    assert!(matches!(nobody, Error::MemberNotFound { .. }), "{nobody}");
    f.team.mark_dead("bob", "gone").unwrap();
    let dead = f
        .team
        .assign_task(&id, "bob", &name("lead"), false)
        .unwrap_err();
    assert!(dead.to_string().contains("bob is dead"), "{dead}");
    // Alice's claim: bob (a peer) cannot move it; the lead can, with a new lease.
    f.team
        .join(Member::new(name("bob"), f.team.name()))
        .unwrap();
    f.team
        .tasks()
        .claim(&id, &name("alice"), &ClaimOptions::default())
        .unwrap();
    let peer = f
        .team
        .assign_task(&id, "lead", &name("bob"), false)
        .unwrap_err();
    assert!(matches!(peer, Error::NotPermitted { .. }), "{peer}");
    let a = f
        .team
        .assign_task(&id, "bob", &name("lead"), false)
        .unwrap();
    assert_eq!(a.task.status, TaskStatus::InProgress);
    assert_eq!(a.task.lease.unwrap().owner, "bob");
    f.team
        .tasks()
        .update(
            &id,
            TaskPatch {
                status: Some(TaskStatus::Completed),
                by: Some(name("bob")),
                ..Default::default()
            },
        )
        .unwrap();
    let done = f
        .team
        .assign_task(&id, "alice", &name("lead"), false)
        .unwrap_err();
    assert!(done.to_string().contains("it is completed"), "{done}");
    // Nobody got a message for a refused assignment.
    assert_eq!(
        f.team
            .mailbox()
            .read(&name("alice"), &ReadFilter::default())
            .unwrap()
            .len(),
        0
    );
}

#[test]
fn an_undelivered_assignment_keeps_the_task_and_names_the_retry_key() {
    if super::common::not_files() {
        return; // It looks at the files themselves.
    }
    let f = team();
    let id = create(&f, "t");
    let inbox = f.team.mailbox().inbox_path(&name("alice"));
    std::fs::create_dir_all(&inbox).unwrap();
    let err = f
        .team
        .assign_task(&id, "alice", &name("lead"), false)
        .unwrap_err();
    let Error::AssignmentUndelivered { key, source, .. } = &err else {
        panic!("{err}");
    };
    assert!(matches!(**source, Error::NotRegularFile { .. }), "{source}");
    assert!(err.to_string().contains(&format!("--id {key}")), "{err}");
    assert_eq!(f.team.tasks().get(&id).unwrap().owner.unwrap(), "alice");
    std::fs::remove_dir(&inbox).unwrap();
    let a = f
        .team
        .assign_task(&id, "alice", &name("lead"), false)
        .unwrap();
    assert_eq!(a.message.to, "alice");
}

#[test]
fn member_files_are_private_appendable_and_never_follow_links() {
    if super::common::not_files() {
        return; // It looks at the files themselves.
    }
    let f = team();
    let alice = name("alice");
    let mut transcript = f.team.open_transcript(&alice).unwrap();
    std::io::Write::write_all(&mut transcript, b"{\"turn\":1}\n").unwrap();
    let mut again = f.team.open_transcript(&alice).unwrap();
    std::io::Write::write_all(&mut again, b"{\"turn\":2}\n").unwrap();
    assert_eq!(
        f.team.read_transcript(&alice).unwrap().unwrap(),
        b"{\"turn\":1}\n{\"turn\":2}\n"
    );
    f.team.open_log(&alice).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let t = name("t");
    assert_eq!(mode(&f.home.transcripts_dir(&t)), 0o700);
    assert_eq!(mode(&f.home.logs_dir(&t)), 0o700);
    assert_eq!(mode(&f.team.transcript_path(&alice)), 0o600);
    assert_eq!(mode(&f.team.log_path(&alice)), 0o600);
    assert_eq!(f.team.read_transcript(&name("bob")).unwrap(), None);
    // A planted link must not redirect the log outside ROO_HOME.
    let outside = f.home.root().join("outside.txt");
    std::os::unix::fs::symlink(&outside, f.team.log_path(&name("bob"))).unwrap();
    let err = f.team.open_log(&name("bob")).unwrap_err();
    assert!(matches!(err, Error::NotRegularFile { .. }), "{err}");
    assert!(!outside.exists());
    // Nor may a planted link in place of the logs directory.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::remove_dir_all(f.home.logs_dir(&t)).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), f.home.logs_dir(&t)).unwrap();
    let err = f.team.open_log(&alice).unwrap_err();
    assert!(matches!(err, Error::NotRegularFile { .. }), "{err}");
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    // No stray team directory for a team that does not exist.
    let ghost = roo_store::Team::open(&f.home, name("t")).unwrap();
    ghost.delete(true).unwrap();
    assert!(ghost.open_log(&alice).is_err());
    assert!(!f.home.team_dir(&t).exists());
}

#[test]
fn a_killed_member_does_not_hold_up_deleting_the_team() {
    let f = team();
    let mut holder = live_member(&f, carol(&f, None));
    for m in ["alice", "bob"] {
        f.team.set_active(m, false).unwrap();
    }
    let err = f.team.delete(false).unwrap_err();
    assert!(matches!(err, Error::TeamActive { .. }), "{err}");
    holder.kill();
    f.team.delete(false).unwrap();
}

/// Issue 31: roster entries that no process ever joined (`team create --member`, `team
/// add`) counted as busy, so a lead waited for them and `team delete` refused without
/// `--force`. They are `not started`; a member that joined and then died is `dead`.
#[test]
fn a_member_no_process_joined_is_not_started_and_holds_nothing_up() {
    let f = team();
    f.team
        .add_member(Member::new(name("dave"), f.team.name()))
        .unwrap();
    let config = f.team.config().unwrap();
    let liveness = f.team.liveness(&config).unwrap();
    for m in ["alice", "bob", "dave"] {
        let entry = config.member(m).unwrap();
        assert_eq!(entry.state(), MemberState::NotStarted, "{m}");
        assert_eq!(
            liveness.observed_state(entry),
            MemberState::NotStarted,
            "{m}"
        );
    }
    assert_eq!(
        serde_json::to_value(MemberState::NotStarted).unwrap(),
        "not_started"
    );
    assert_eq!(MemberState::NotStarted.to_string(), "not started");
    // Not dead: a task may still be assigned to it, and is not reclaimed from it.
    assert_eq!(liveness.live_member_names(&config).len(), 4);
    // A process that really runs as a member still holds the delete up.
    let mut holder = live_member(&f, carol(&f, None));
    let err = f.team.delete(false).unwrap_err();
    let Error::TeamActive { active, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(active, &vec!["carol".to_owned()]);
    // Joined, then gone: dead, never "not started" again — observed, then declared.
    holder.kill();
    let dead = || {
        let config = f.team.config().unwrap();
        let liveness = f.team.liveness(&config).unwrap();
        liveness.observed_state(config.member("carol").unwrap())
    };
    assert_eq!(dead(), MemberState::Dead);
    f.team
        .declare_dead("carol", None, "killed by the test")
        .unwrap();
    assert_eq!(dead(), MemberState::Dead);
    // A member that ran and stopped at its lead's request is dead (shut down) too, and a
    // pid-less join (a script playing the member) is busy, then idle.
    f.team
        .join(Member::new(name("alice"), f.team.name()))
        .unwrap();
    assert_eq!(
        f.team.config().unwrap().member("alice").unwrap().state(),
        MemberState::Busy
    );
    f.team.set_active("alice", false).unwrap();
    assert_eq!(
        f.team.config().unwrap().member("alice").unwrap().state(),
        MemberState::Idle
    );
    f.team.record_shut_down(&name("alice")).unwrap();
    assert_eq!(
        f.team.config().unwrap().member("alice").unwrap().state(),
        MemberState::Dead
    );
    // Nobody runs: the delete needs no force for bob and dave, who never started.
    f.team.delete(false).unwrap();
}
