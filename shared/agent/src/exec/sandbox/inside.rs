//! Whether this process runs inside an agent's command (or below an MCP server the
//! agent supervises): a lead started there must not claim a team, as a prompt-injected
//! teammate could otherwise take its own team over (`roo-lead --team t --take-over`).
//!
//! Three signs, any of which is enough:
//! - [`IN_COMMAND_ENV`], which the helper sets for every command: a command can unset
//!   it, so it only catches the careless;
//! - a cover of the namespace layer in this process's mount table (mounted with the
//!   source [`COVER_SOURCE`]): a process cannot leave the namespace a command runs in
//!   nor unmount its locked covers, so on Linux with the namespace layer this sign
//!   cannot be removed;
//! - an ancestor that is a command helper (its second argument is
//!   [`super::HELPER_ARG`]): every process a command starts stays below its helper (a
//!   child subreaper) while the helper lives. Under Landlock alone on a kernel without
//!   signal scoping (before 6.12) a command can kill its own helper and, having unset
//!   the variable, show none of the three signs.
//!
//! On Linux a process that cannot read its own `/proc` entries is treated as inside.

/// Variable the helper sets in every command's environment.
pub const IN_COMMAND_ENV: &str = "ROO_IN_AGENT_COMMAND";

/// The source of every directory cover the namespace layer mounts (shown in
/// `/proc/self/mountinfo`).
pub const COVER_SOURCE: &str = "roo-sandbox";

/// Why this process is taken to run inside an agent's command, or `None`.
pub fn inside_agent_command() -> Option<String> {
    if std::env::var_os(IN_COMMAND_ENV).is_some() {
        return Some(format!("{IN_COMMAND_ENV} is set"));
    }
    #[cfg(target_os = "linux")]
    {
        match std::fs::read_to_string("/proc/self/mountinfo") {
            Ok(text)
                if text
                    .lines()
                    .any(|line| mount_source(line) == Some(COVER_SOURCE)) =>
            {
                return Some("its mount table holds the command sandbox's covers".to_string());
            }
            Ok(_) => {}
            Err(e) => {
                return Some(format!(
                    "/proc/self/mountinfo is unreadable ({e}), so it cannot be told"
                ));
            }
        }
        let mut pid = std::process::id();
        // Bounded: pid 1 ends every chain, but a loop must not hang on a read race.
        for _ in 0..4096 {
            let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                Ok(stat) => stat,
                Err(_) if pid != std::process::id() => return None,
                Err(e) => {
                    return Some(format!(
                        "/proc/self/stat is unreadable ({e}), so it cannot be told"
                    ));
                }
            };
            let ppid = super::proc_stat(&stat).and_then(|s| u32::try_from(s.ppid).ok())?;
            if ppid == 0 {
                return None;
            }
            if is_helper(ppid) {
                return Some(format!(
                    "its ancestor process {ppid} is an agent's command helper"
                ));
            }
            pid = ppid;
        }
    }
    None
}

/// The source field of a `/proc/self/mountinfo` line (after the ` - ` separator and
/// the file system type).
#[cfg(target_os = "linux")]
fn mount_source(line: &str) -> Option<&str> {
    let (_, tail) = line.split_once(" - ")?;
    tail.split(' ').nth(1)
}

/// Whether process `pid` runs the command helper (or its second stage).
#[cfg(target_os = "linux")]
fn is_helper(pid: u32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    cmdline
        .split(|&b| b == 0)
        .nth(1)
        .is_some_and(|arg| arg == super::HELPER_ARG.as_bytes())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn the_mount_source_is_read_after_the_separator() {
        let line = "36 35 0:42 / /home/u/.roocode/teams ro,nosuid - tmpfs roo-sandbox ro,size=4k";
        assert_eq!(mount_source(line), Some(COVER_SOURCE));
        assert_eq!(
            mount_source("1 0 8:1 / / rw - ext4 /dev/sda1 rw"),
            Some("/dev/sda1")
        );
    }

    #[test]
    fn a_test_process_is_not_inside_a_command() {
        // Unless the suite itself runs in an agent's command.
        if std::env::var_os(IN_COMMAND_ENV).is_none() {
            assert_eq!(inside_agent_command(), None);
        }
    }
}
