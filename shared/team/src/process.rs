//! What `/proc` says about another process of this machine: its command line. A pid
//! recorded in the team config may have been reused since; the lead's check of a
//! teammate (`spawner`) and a teammate's check of its lead (`teammate::lead_watch`)
//! read it to tell whether the pid still runs the program that recorded it. A leaf:
//! it knows nothing of teams.

/// The command line of process `pid` (`/proc/<pid>/cmdline`, one entry an argument);
/// `None` where `/proc` cannot tell.
pub(crate) fn argv(pid: u32) -> Option<Vec<Vec<u8>>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(<[u8]>::to_vec)
            .collect(),
    )
}
