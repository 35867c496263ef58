//! Running a short program to its end within a time limit, from blocking code (the
//! runtime's own git and ssh). Like [`super::run()`], the program starts as the leader
//! of a process group of its own, so a timeout ends it and everything it started
//! (git's upload-pack, ssh's proxy) at once; unlike it, the program is any prepared
//! [`std::process::Command`] and its stdout and stderr are kept apart and whole.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;

use super::Ending;
use super::group::ProcessGroup;

/// What [`output_within`] came to. After a timeout the output is empty: what a
/// program wrote before it was killed is dropped.
#[derive(Debug)]
pub struct BoundedOutput {
    /// [`Ending::Exited`] or [`Ending::TimedOut`].
    pub ending: Ending,
    /// The captured standard output, capped.
    pub stdout: Vec<u8>,
    /// The captured standard error, capped.
    pub stderr: Vec<u8>,
}

/// Runs `command` in a process group of its own with stdout and stderr captured and
/// `input` (if any) written to its stdin by a thread of its own (the caller pipes
/// stdin), so a program that reads none of it cannot block past `limit`. Past `limit`
/// the whole group is ended (SIGTERM, then SIGKILL after a grace). `Err` only if it could not be started or waited for.
pub fn output_within(
    command: &mut Command,
    input: Option<Vec<u8>>,
    limit: Duration,
) -> std::io::Result<BoundedOutput> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        std::thread::spawn(move || {
            // A program that stops reading (or is killed) only ends this write.
            let _ = stdin.write_all(&input);
        });
    }
    let group = ProcessGroup::new(child.id());
    let (done, waited) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match waited.recv_timeout(limit) {
        Ok(out) => out.map(|out| BoundedOutput {
            ending: Ending::Exited(out.status),
            stdout: out.stdout,
            stderr: out.stderr,
        }),
        Err(_) => {
            if let Some(group) = group {
                // A command sandbox's helper (the leader of a launched command) ends the
                // whole tree it supervises on SIGTERM — what it confines runs in
                // sessions of their own, out of this group's reach, and would outlive a
                // SIGKILL of the helper. SIGKILL after its grace.
                group.signal(Signal::SIGTERM);
                group.signal(Signal::SIGCONT);
                if waited
                    .recv_timeout(super::sandbox::LEFTOVER_GRACE * 4)
                    .is_err()
                {
                    group.signal(Signal::SIGKILL);
                }
            }
            Ok(BoundedOutput {
                ending: Ending::TimedOut,
                stdout: Vec::new(),
                stderr: Vec::new(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn input_reaches_the_program_and_its_outputs_stay_apart() {
        let mut command = Command::new("/bin/sh");
        command
            .args(["-c", "cat; echo oops >&2; exit 3"])
            .stdin(Stdio::piped());
        let out = output_within(
            &mut command,
            Some(b"hello".to_vec()),
            Duration::from_secs(30),
        )
        .unwrap();
        let Ending::Exited(status) = out.ending else {
            panic!("{:?}", out.ending);
        };
        assert_eq!(status.code(), Some(3));
        assert_eq!(out.stdout, b"hello");
        assert_eq!(out.stderr, b"oops\n");
    }

    #[test]
    fn past_the_limit_the_whole_group_is_killed() {
        let dir = tempfile::TempDir::new().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 300 & echo $! > '{}'; wait", pid_file.display());
        let mut command = Command::new("/bin/sh");
        command.args(["-c", &script]).stdin(Stdio::null());
        let began = Instant::now();
        let out = output_within(&mut command, None, Duration::from_millis(500)).unwrap();
        assert_eq!(out.ending, Ending::TimedOut);
        assert!(began.elapsed() < Duration::from_secs(10));
        assert!(out.stdout.is_empty() && out.stderr.is_empty());
        // The background sleep was in the group: it is killed with the shell.
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let stat = format!("/proc/{}/stat", pid.trim());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let running = std::fs::read_to_string(&stat)
                .ok()
                .and_then(|s| crate::exec::sandbox::proc_stat(&s).map(|s| s.state))
                .is_some_and(|state| state != 'Z' && state != 'X');
            if !running {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the group's sleep {pid} still runs"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
