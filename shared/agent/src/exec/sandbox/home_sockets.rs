//! The UNIX sockets under the user's home (and under a runtime dir the namespace layer
//! could not cover whole), found when each command starts so the namespace layer can
//! cover them: Docker Desktop's `~/.docker/desktop/docker.sock`, the 1Password agent's
//! `~/.1password/agent.sock`, a `tmux -S ~/.tmux-work.sock` server — whatever a list of
//! known paths would miss.
//!
//! The search is breadth-first and bounded: [`SEARCH_DEPTH`] levels below each root,
//! [`SEARCH_ENTRIES`] directory entries read and [`SEARCH_TIME`] per search. Cut short
//! by a bound, it fails closed: the directories it had not searched yet are returned
//! ([`SocketSearch::unsearched`], up to [`UNSEARCHED_COVERS`]) to be covered whole. It
//! does not follow links to directories, descends into other local file systems mounted
//! in the home (a btrfs subvolume, a tmpfs, a mounted disk) but not into network or FUSE
//! ones ([`remote_fs`]: NFS, SMB/CIFS, FUSE, whose server may be slow or gone), skips package stores
//! and caches ([`SKIPPED_NAMES`], [`SKIPPED_BELOW_ROOT`]), and does not descend
//! into what is already covered whole (`~/.ssh`, the runtime dirs) nor into the write
//! roots (the project, a teammate's worktree: the command may create sockets there
//! anyway, and a server the user runs in the project stays reachable) unless the root
//! itself lies in one (a project that is the home). A socket found is covered alone
//! (its directory may hold what the command needs); a link to a socket is covered where
//! it leads.
//!
//! A directory's listing is cached in the agent by its modification time: a later
//! search only reads the directories that changed since (creating, removing or
//! renaming an entry changes its directory's time), so the cost of a command's start
//! is one `stat` per directory. A directory changed within the last
//! [`RACY_WINDOW`] is read again every time, since a change in the same clock tick
//! leaves its time unchanged.

use std::collections::{HashMap, VecDeque};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// Levels searched below each root (`~/.docker/desktop/docker.sock` is at level 3).
pub const SEARCH_DEPTH: usize = 6;
/// Directory entries read (fresh, not from the cache) per search.
pub const SEARCH_ENTRIES: usize = 200_000;
/// Time one search may take; what it did not reach is reported.
pub const SEARCH_TIME: Duration = Duration::from_millis(100);
/// Directories not descended into wherever they are: package stores and caches that
/// hold many directories and no server's socket.
pub const SKIPPED_NAMES: &[&str] = &[
    "node_modules",
    ".git",
    "__pycache__",
    "site-packages",
    ".rustup",
    ".npm",
    ".m2",
    ".gradle",
];
/// Directories below a search root not descended into, for the same reason.
pub const SKIPPED_BELOW_ROOT: &[&str] = &[
    ".cargo/registry",
    ".cargo/git",
    "go/pkg/mod",
    ".cache/go-build",
    ".cache/pip",
    ".local/share/Trash",
];
/// Unsearched directories returned at most when a search is cut short (each is one
/// cover); beyond, the rest stay reachable and the search says how many.
pub const UNSEARCHED_COVERS: usize = 4096;
/// A directory modified more recently than this is not trusted from the cache.
const RACY_WINDOW: Duration = Duration::from_secs(2);
/// Cached directories kept at most (the cache is dropped beyond).
const CACHE_LIMIT: usize = 500_000;

/// What one search found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SocketSearch {
    /// The sockets (and links to sockets) found, sorted.
    pub sockets: Vec<PathBuf>,
    /// Directories visited.
    pub dirs: usize,
    /// Why the search stopped before visiting everything within its depth, if it did.
    pub cut_short: Option<String>,
    /// When cut short: the directories it had not searched (nor lie in or above a
    /// write root), to cover whole; sorted.
    pub unsearched: Vec<PathBuf>,
    /// When cut short: unsearched directories left reachable (beyond
    /// [`UNSEARCHED_COVERS`], or in or above a write root).
    pub left_reachable: usize,
}

#[derive(Debug, Clone)]
struct Listing {
    ino: u64,
    mtime: (i64, i64),
    trusted: bool,
    sockets: Vec<PathBuf>,
    subdirs: Vec<PathBuf>,
}

static CACHE: Mutex<Option<HashMap<PathBuf, Listing>>> = Mutex::new(None);

/// Searches `roots` for sockets, skipping the paths in `covered` (and everything below
/// them) and the `write` roots a root does not lie in. Uses and updates the cache.
pub fn search(roots: &[PathBuf], covered: &[PathBuf], write: &[PathBuf]) -> SocketSearch {
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(HashMap::new);
    if cache.len() > CACHE_LIMIT {
        cache.clear();
    }
    search_with(roots, covered, write, cache, SEARCH_TIME)
}

fn search_with(
    roots: &[PathBuf],
    covered: &[PathBuf],
    write: &[PathBuf],
    cache: &mut HashMap<PathBuf, Listing>,
    time: Duration,
) -> SocketSearch {
    let started = Instant::now();
    let mut result = SocketSearch::default();
    let mut budget = SEARCH_ENTRIES;
    let mut pending: Vec<PathBuf> = Vec::new();
    for (index, root) in roots.iter().enumerate() {
        let Ok(meta) = std::fs::metadata(root) else {
            continue;
        };
        if !meta.is_dir() || covered.iter().any(|c| root.starts_with(c)) {
            continue;
        }
        let root_dev = meta.dev();
        // Write roots the search stays out of: those the root does not lie in.
        let outside: Vec<&PathBuf> = write.iter().filter(|w| !root.starts_with(w)).collect();
        let skipped: Vec<PathBuf> = SKIPPED_BELOW_ROOT.iter().map(|r| root.join(r)).collect();
        // Each directory with its parent's device: a mount point is checked once.
        let mut queue = VecDeque::from([(root.clone(), 0usize, root_dev)]);
        while let Some((dir, depth, parent_dev)) = queue.pop_front() {
            let why = if started.elapsed() > time {
                Some(format!(
                    "the {} ms budget ran out after {} directories",
                    time.as_millis(),
                    result.dirs
                ))
            } else if budget == 0 {
                Some(format!(
                    "{SEARCH_ENTRIES} entries were read, after {} directories",
                    result.dirs
                ))
            } else {
                None
            };
            if let Some(why) = why {
                result.cut_short = Some(why);
                pending.push(dir);
                pending.extend(queue.drain(..).map(|(d, ..)| d));
                pending.extend(roots[index + 1..].iter().cloned());
                break;
            }
            let Ok(meta) = std::fs::symlink_metadata(&dir) else {
                continue;
            };
            if !meta.is_dir() || (meta.dev() != parent_dev && remote_fs(&dir)) {
                continue;
            }
            result.dirs += 1;
            let mtime = (meta.mtime(), meta.mtime_nsec());
            let fresh = match cache.get(&dir) {
                Some(l) if l.trusted && l.ino == meta.ino() && l.mtime == mtime => None,
                _ => Some(read_listing(&dir, &meta, &mut budget)),
            };
            if let Some(listing) = fresh {
                cache.insert(dir.clone(), listing);
            }
            let Some(listing) = cache.get(&dir) else {
                continue;
            };
            result.sockets.extend(listing.sockets.iter().cloned());
            if depth + 1 >= SEARCH_DEPTH {
                continue;
            }
            for sub in &listing.subdirs {
                if covered.iter().any(|c| sub.starts_with(c))
                    || outside.iter().any(|w| sub.starts_with(w))
                    || skipped.contains(sub)
                    || sub
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| SKIPPED_NAMES.contains(&n))
                {
                    continue;
                }
                queue.push_back((sub.clone(), depth + 1, meta.dev()));
            }
        }
        if result.cut_short.is_some() {
            break;
        }
    }
    // Fail closed: what was not searched is covered whole, except what holds or lies in
    // a write root (the command needs those).
    for dir in pending {
        if write
            .iter()
            .any(|w| w.starts_with(&dir) || dir.starts_with(w))
            || covered.iter().any(|c| dir.starts_with(c))
            || result.unsearched.len() >= UNSEARCHED_COVERS
        {
            result.left_reachable += 1;
        } else {
            result.unsearched.push(dir);
        }
    }
    result.unsearched.sort();
    result.sockets.sort();
    result.sockets.dedup();
    result
}

/// Whether `dir` is on a network or FUSE file system (NFS, SMB/CIFS, FUSE), which the
/// search does not descend into: its server may be slow or gone, and a socket there
/// is rarely a local server's. A directory whose file system cannot be told is searched.
fn remote_fs(dir: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        // NFS, SMB, CIFS, SMB2, FUSE (`statfs(2)`'s magic numbers).
        const REMOTE: [i64; 5] = [0x6969, 0x517B, 0xFF53_4D42, 0xFE53_4D42, 0x6573_5546];
        nix::sys::statfs::statfs(dir).is_ok_and(|fs| {
            #[allow(clippy::useless_conversion)]
            let kind = i64::from(fs.filesystem_type().0) & 0xFFFF_FFFF;
            REMOTE.contains(&kind)
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        false
    }
}

/// Reads `dir`: its sockets (and links to sockets) and its subdirectories (links to
/// directories are not followed).
fn read_listing(dir: &Path, meta: &std::fs::Metadata, budget: &mut usize) -> Listing {
    let mut listing = Listing {
        ino: meta.ino(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        trusted: false,
        sockets: Vec::new(),
        subdirs: Vec::new(),
    };
    let read_at = SystemTime::now();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return listing;
    };
    let mut complete = true;
    for entry in entries.flatten() {
        if *budget == 0 {
            complete = false;
            break;
        }
        *budget -= 1;
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_socket()
            || (kind.is_symlink()
                && std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_socket()))
        {
            listing.sockets.push(path);
        } else if kind.is_dir() {
            listing.subdirs.push(path);
        }
    }
    let modified = meta.modified().ok();
    listing.trusted = complete
        && modified.is_some_and(|m| read_at.duration_since(m).is_ok_and(|age| age > RACY_WINDOW));
    listing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen(path: &Path) -> std::os::unix::net::UnixListener {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::net::UnixListener::bind(path).unwrap()
    }

    #[test]
    fn sockets_are_found_within_the_depth_outside_covered_and_write_roots() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let docker = home.join(".docker/desktop/docker.sock");
        let tmux = home.join(".tmux-work.sock");
        let deep = home.join("a/b/c/d/e/f/g/deep.sock");
        let in_project = home.join("src/proj/run/app.sock");
        let in_covered = home.join(".ssh/agent.sock");
        let in_packages = home.join("lib/node_modules/x/s.sock");
        let _l: Vec<_> = [
            &docker,
            &tmux,
            &deep,
            &in_project,
            &in_covered,
            &in_packages,
        ]
        .into_iter()
        .map(|p| listen(p))
        .collect();
        std::os::unix::fs::symlink(&docker, home.join("link.sock")).unwrap();
        let mut cache = HashMap::new();
        let found = search_with(
            std::slice::from_ref(&home),
            &[home.join(".ssh")],
            &[home.join("src/proj")],
            &mut cache,
            Duration::from_secs(10),
        );
        assert_eq!(
            found.sockets,
            vec![docker.clone(), tmux.clone(), home.join("link.sock")]
                .into_iter()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        );
        assert_eq!(found.cut_short, None);
        // A home inside a write root (the project is the home) is searched all the same.
        let found = search_with(
            std::slice::from_ref(&home),
            &[],
            std::slice::from_ref(&home),
            &mut cache,
            Duration::from_secs(10),
        );
        assert!(found.sockets.contains(&in_project), "{found:?}");
    }

    #[test]
    fn a_socket_created_after_a_search_is_found_by_the_next_despite_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let agent = home.join(".1password");
        std::fs::create_dir_all(&agent).unwrap();
        // Listings old enough to be trusted from the cache.
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        for d in [&home, &agent] {
            std::fs::File::open(d)
                .unwrap()
                .set_modified(hour_ago)
                .unwrap();
        }
        let mut cache = HashMap::new();
        let search = |cache: &mut HashMap<PathBuf, Listing>| {
            search_with(
                std::slice::from_ref(&home),
                &[],
                &[],
                cache,
                Duration::from_secs(10),
            )
        };
        assert!(search(&mut cache).sockets.is_empty());
        assert!(cache.values().all(|l| l.trusted), "{cache:?}");
        let socket = agent.join("agent.sock");
        let _l = listen(&socket);
        assert_eq!(search(&mut cache).sockets, vec![socket]);
    }

    #[test]
    fn a_search_over_its_budget_says_it_was_cut_short() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        for i in 0..50 {
            std::fs::create_dir_all(home.join(format!("d{i}/e"))).unwrap();
        }
        let found = search_with(
            std::slice::from_ref(&home),
            &[],
            &[],
            &mut HashMap::new(),
            Duration::ZERO,
        );
        assert!(found.cut_short.is_some(), "{found:?}");
    }

    #[test]
    fn a_search_cut_short_returns_what_it_did_not_search_to_be_covered() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let runtime = dir.path().join("runtime");
        let project = home.join("src/proj");
        for d in [&home.join("d/e"), &runtime, &project] {
            std::fs::create_dir_all(d).unwrap();
        }
        let roots = [home.clone(), runtime.clone()];
        // Cut short at once: both roots are unsearched, and covered whole.
        let found = search_with(&roots, &[], &[], &mut HashMap::new(), Duration::ZERO);
        assert!(found.cut_short.is_some(), "{found:?}");
        assert_eq!(found.unsearched, vec![home.clone(), runtime.clone()]);
        assert_eq!(found.left_reachable, 0);
        // A directory holding a write root is not covered (the command needs it).
        let found = search_with(
            &roots,
            &[],
            std::slice::from_ref(&project),
            &mut HashMap::new(),
            Duration::ZERO,
        );
        assert_eq!(found.unsearched, vec![runtime.clone()]);
        assert_eq!(found.left_reachable, 1);
        // A search that finishes leaves nothing to cover.
        let found = search_with(
            &roots,
            &[],
            &[],
            &mut HashMap::new(),
            Duration::from_secs(10),
        );
        assert_eq!(found.cut_short, None);
        assert!(found.unsearched.is_empty(), "{found:?}");
    }
}
