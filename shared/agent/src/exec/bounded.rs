//! Running a short program to its end within a time limit, from blocking code (the
//! runtime's own git and ssh). Like [`super::run`], the program starts as the leader
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
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs `command` in a process group of its own with stdout and stderr captured and
/// `input` (if any) written to its stdin by a thread of its own (the caller pipes
/// stdin), so a program that reads none of it cannot block past `limit`. Past `limit`
/// the whole group is killed. `Err` only if it could not be started or waited for.
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
                group.signal(Signal::SIGKILL);
            }
            Ok(BoundedOutput {
                ending: Ending::TimedOut,
                stdout: Vec::new(),
                stderr: Vec::new(),
            })
        }
    }
}
