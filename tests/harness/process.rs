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
