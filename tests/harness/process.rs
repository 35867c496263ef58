//! Checks on processes a test started indirectly (a tool's child, a background sleep).

use std::path::Path;

/// Whether `pid` is gone, or a zombie nobody has reaped yet (in a container without an
/// init that reaps, an orphan killed by its group stays a zombie).
pub fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// A pid written to `path` by the process under test, once the file is complete.
pub fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The pid of the child of `parent` whose command line holds `needle`.
pub fn child_of(parent: u32, needle: &str) -> Option<i32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_string_lossy().parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid …`: the ppid is the second field after the `)`.
            let ppid: u32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (ppid == parent && cmdline.contains(needle)).then_some(pid)
        })
}
