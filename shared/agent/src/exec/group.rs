//! The process group a Bash call runs in, and how it is ended.
//!
//! Each command starts as the leader of a fresh process group, so everything it
//! starts — pipelines, `make -j` workers, a forgotten `sleep 100 &` — can be
//! signalled at once. Ending a group is polite first (SIGTERM, and SIGCONT so a
//! stopped member can act on it), then firm (SIGKILL) after a short grace. A group
//! counts as gone when no member is left that is not a zombie: zombies are dead
//! and only wait for their parent (possibly a PID 1 that never reaps) to collect
//! them.

use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Child;
use tokio::time::Instant;

/// How long members get to exit after SIGTERM before SIGKILL.
pub(crate) const TERM_GRACE: Duration = Duration::from_millis(1500);
/// How often the group is checked while waiting for it to empty.
const POLL: Duration = Duration::from_millis(20);

/// A process group, identified by its leader's pid.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProcessGroup(Pid);

impl ProcessGroup {
    /// The group whose id is `pgid` (the pid of the shell started with
    /// `process_group(0)`).
    pub(crate) fn new(pgid: u32) -> Option<Self> {
        i32::try_from(pgid)
            .ok()
            .filter(|&p| p > 1)
            .map(|p| Self(Pid::from_raw(p)))
    }

    /// Whether any member of the group is still running.
    pub(crate) fn is_alive(self) -> bool {
        match killpg(self.0, None) {
            Err(Errno::ESRCH) => false,
            // EPERM means a member exists but we may not signal it: treat as alive.
            Ok(()) | Err(_) => has_running_member(self.0.as_raw()),
        }
    }

    /// Sends `signal` to every member, without waiting.
    pub(crate) fn signal(self, signal: Signal) {
        let _ = killpg(self.0, signal);
    }

    /// Ends every member: SIGTERM (+SIGCONT), then SIGKILL after `grace`.
    /// Reaps `leader` along the way so its zombie does not keep the group alive.
    /// Returns whether SIGKILL was needed.
    pub(crate) async fn terminate(self, leader: &mut Child, grace: Duration) -> bool {
        let _ = killpg(self.0, Signal::SIGTERM);
        let _ = killpg(self.0, Signal::SIGCONT);
        let deadline = Instant::now() + grace;
        loop {
            let _ = leader.try_wait();
            if !self.is_alive() {
                return false;
            }
            if Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        let _ = killpg(self.0, Signal::SIGKILL);
        // SIGKILL cannot be ignored; give the kernel a moment to reap the leader.
        let _ = tokio::time::timeout(Duration::from_secs(2), leader.wait()).await;
        true
    }
}

/// Scans `/proc` for a member of group `pgid` that is not a zombie. Without a
/// readable `/proc`, assumes there is one (the caller then escalates to SIGKILL,
/// which is always safe).
fn has_running_member(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some((state, group)) = parse_stat(&stat)
            && group == pgid
            && state != 'Z'
            && state != 'X'
        {
            return true;
        }
    }
    false
}

/// `(state, pgrp)` from a `/proc/<pid>/stat` line. The command name may contain
/// spaces and parentheses, so fields are counted from the last `)`.
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    crate::exec::sandbox::proc_stat(stat).map(|s| (s.state, s.pgrp))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let line = "4242 (my (odd) cmd) S 1 4240 4240 0 -1 4194560 0 0";
        assert_eq!(parse_stat(line), Some(('S', 4240)));
        assert_eq!(parse_stat("1 (z) Z 0 7 7"), Some(('Z', 7)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn refuses_group_ids_that_would_signal_everything() {
        assert!(ProcessGroup::new(0).is_none());
        assert!(ProcessGroup::new(1).is_none());
        assert!(ProcessGroup::new(1234).is_some());
    }
}
