//! A lock holder killed with SIGKILL: the next writer proceeds at once and the file is
//! intact. The holder is this test binary re-executed in a helper mode, so it takes the
//! lock through the real store code.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use roo_store::{FileLock, LockInfo, LockPolicy};
use roo_tests::TempHome;

const HOLD_ENV: &str = "ROO_TEST_HOLD_LOCK";
const HOLD_MODE_ENV: &str = "ROO_TEST_HOLD_MODE";

/// Helper mode: when `ROO_TEST_HOLD_LOCK` names a file, take its lock, say so, and block.
#[test]
#[ignore = "helper process for lock_holder_killed_with_sigkill_*"]
fn lock_holder_helper() {
    let Some(target) = std::env::var_os(HOLD_ENV) else {
        return;
    };
    let policy = match std::env::var(HOLD_MODE_ENV).as_deref() {
        Ok("protocol") => LockPolicy::protocol(),
        _ => LockPolicy::default(),
    };
    let _lock = FileLock::acquire(std::path::Path::new(&target), &policy).unwrap();
    println!("locked");
    loop {
        std::thread::park();
    }
}

fn killed_holder_does_not_block(mode: Option<&str>) {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    for i in 0..3 {
        env.mail()
            .args(["send", "--team", "t", "--from", "lead", "--to", "alice"])
            .args(["--summary", "before the crash", &format!("m{i}")])
            .run()
            .assert_ok();
    }
    let inbox = env.path().join("teams/t/inboxes/alice.json");
    let before = std::fs::read(&inbox).unwrap();

    let mut holder = Command::new(std::env::current_exe().unwrap());
    holder
        .args([
            "--exact",
            "suite::store_crash::lock_holder_helper",
            "--ignored",
            "--nocapture",
        ])
        .env(HOLD_ENV, &inbox)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(mode) = mode {
        holder.env(HOLD_MODE_ENV, mode);
    }
    let mut holder = holder.spawn().unwrap();
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    let locked = lines.any(|l| l.is_ok_and(|l| l.trim() == "locked"));
    assert!(locked, "the helper did not take the lock");
    let lock_path = env.path().join("teams/t/inboxes/alice.json.lock");
    let info: LockInfo = serde_json::from_slice(&std::fs::read(&lock_path).unwrap()).unwrap();
    assert_eq!(info.pid, holder.id(), "the lock names its holder's pid");

    kill(Pid::from_raw(holder.id() as i32), Signal::SIGKILL).unwrap();
    holder.wait().unwrap();
    assert!(lock_path.exists(), "SIGKILL leaves the lock file behind");
    assert_eq!(std::fs::read(&inbox).unwrap(), before, "the file is intact");

    let started = Instant::now();
    let mut send = env
        .mail()
        .args(["send", "--team", "t", "--from", "lead", "--to", "alice"])
        .args(["--summary", "after the crash", "m3"]);
    if let Some(mode) = mode {
        send = send.env("ROO_LOCK_MODE", mode);
    }
    send.run().assert_ok();
    // The dead holder is detected from its pid, not by waiting out the 10 s staleness.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "took {:?}",
        started.elapsed()
    );
    let read = env
        .mail()
        .args(["read", "--team", "t", "--as", "alice", "--json"])
        .run();
    let texts: Vec<String> = read
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, ["m0", "m1", "m2", "m3"]);
}

#[test]
fn lock_holder_killed_with_sigkill_does_not_block_the_next_writer() {
    killed_holder_does_not_block(None);
}

#[test]
fn lock_holder_killed_with_sigkill_does_not_block_the_original_protocol() {
    killed_holder_does_not_block(Some("protocol"));
}
