//! A symlink planted at any store path must not redirect reads or writes outside
//! `ROO_HOME` (issue 8 item 6): every store file is opened with `O_NOFOLLOW` and anything
//! that is not a regular file is refused with a clear error.
use std::path::Path;

use roo_store::{Error, Mailbox, NewTask, Outgoing, ReadFilter, TaskFilter, Team};

use super::common::{Fixture, name, team};

/// A file outside the home that a symlink at `at` points to.
fn plant_link(fx: &Fixture, at: &Path, content: &str) -> std::path::PathBuf {
    let outside = fx._dir.path().join("outside-secret.txt");
    std::fs::write(&outside, content).unwrap();
    let _ = std::fs::remove_file(at);
    std::os::unix::fs::symlink(&outside, at).unwrap();
    outside
}

fn assert_refused<T: std::fmt::Debug>(result: Result<T, Error>) {
    let err = result.unwrap_err();
    assert!(matches!(err, Error::NotRegularFile { .. }), "{err}");
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

fn send(mailbox: &Mailbox, text: &str) -> Result<(), Error> {
    mailbox
        .send(&name("lead"), "alice", Outgoing::text(text, "s"))
        .map(|_| ())
}

#[test]
fn a_symlinked_inbox_is_neither_read_nor_written_through() {
    let fx = team();
    let mailbox = fx.team.mailbox();
    send(&mailbox, "first").unwrap();
    let inbox = mailbox.inbox_path(&name("alice"));
    let outside = plant_link(&fx, &inbox, r#"{"version":"1.0","messages":[]}"#);
    assert_refused(mailbox.read(&name("alice"), &ReadFilter::default()));
    assert_refused(send(&mailbox, "chosen by the sender"));
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        r#"{"version":"1.0","messages":[]}"#
    );
}

#[test]
fn the_archive_append_does_not_follow_a_symlink_outside_the_home() {
    let fx = team();
    let mailbox = fx.team.mailbox();
    let alice = name("alice");
    let archive = mailbox.archive_path(&alice);
    let outside = plant_link(&fx, &archive, "");
    // Enough read messages to make the next write archive the overflow.
    let total = roo_store::RETAINED_READ + roo_store::ARCHIVE_BATCH + 1;
    let mut last = Ok(());
    for i in 0..total {
        last = send(&mailbox, &format!("attacker text {i}"));
        if last.is_err() {
            break;
        }
        let ids: Vec<_> = mailbox
            .read(&alice, &ReadFilter::default())
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect();
        if let Err(e) = mailbox.mark_read(&alice, &ids) {
            last = Err(e);
            break;
        }
    }
    assert_refused(last);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "");
    assert_refused(mailbox.read(
        &alice,
        &ReadFilter {
            include_archived: true,
            ..ReadFilter::default()
        },
    ));
}

#[test]
fn a_symlinked_task_list_is_refused() {
    let fx = team();
    let tasks = fx.team.tasks();
    let outside = plant_link(&fx, &tasks.path(), r#"{"version":"1.0","tasks":[]}"#);
    assert_refused(tasks.list(&TaskFilter::default()));
    assert_refused(tasks.create(NewTask {
        subject: "x".into(),
        ..NewTask::default()
    }));
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        r#"{"version":"1.0","tasks":[]}"#
    );
}

#[test]
fn a_symlinked_team_config_is_refused() {
    let fx = team();
    let config = fx.team.config_path();
    let real = std::fs::read_to_string(&config).unwrap();
    let outside = plant_link(&fx, &config, &real);
    assert_refused(fx.team.config());
    assert_refused(Team::open(&fx.home, name("t")).and_then(|t| t.config()));
    assert_refused(fx.team.set_active("alice", false));
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), real);
}

#[test]
fn a_symlinked_lock_file_is_never_written_through() {
    let fx = team();
    let mailbox = fx.team.mailbox();
    let inbox = mailbox.inbox_path(&name("alice"));
    let mut lock = inbox.as_os_str().to_owned();
    lock.push(".lock");
    // A fresh symlink blocks like a live lock (judged by its own age), and its target is
    // neither created nor written.
    let outside = plant_link(&fx, Path::new(&lock), "precious");
    let home = fx.home.clone().with_lock_policy(roo_store::LockPolicy {
        retries: 2,
        max_delay: std::time::Duration::from_millis(5),
        ..roo_store::LockPolicy::protocol()
    });
    let team = Team::open(&home, name("t")).unwrap();
    let err = send(&team.mailbox(), "x").unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious");
}
