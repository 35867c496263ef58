//! Removing what [`super::Hosts`] made — in its drop, and for a test process that died
//! before its drop ran — and checking afterwards that nothing is left.
//!
//! A process belongs to a host when its network namespace is that host's (the inode of
//! `/proc/<pid>/ns/net` equals that of `/run/netns/<name>`), whoever started it: this
//! finds the daemons the tests never see as children (the postmaster, an ssh session's
//! shell, which `sshd` puts in a session of its own). A namespace with no process, no
//! open handle and no mount left is destroyed by the kernel with its links.

use std::net::Ipv4Addr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// Tears down: stops the PostgreSQL clusters (an immediate shutdown, which releases their
/// shared memory, unlike a kill), kills every process inside the namespaces and the
/// spawned children's process groups, reaps the children, deletes the namespaces and
/// removes `dir`. Never panics (it runs while a test unwinds); says on stderr what it
/// could not do.
pub(super) fn tear_down(
    namespaces: &[String],
    clusters: &[PathBuf],
    mut children: Vec<Child>,
    blackhole: Option<&Blackhole>,
    dir: &Path,
) {
    for cluster in clusters {
        stop_cluster(cluster);
    }
    let inodes: Vec<u64> = namespaces.iter().filter_map(|n| netns_inode(n)).collect();
    for child in &mut children {
        kill_group(child);
    }
    kill_all_in(&inodes);
    for child in &mut children {
        let _ = child.wait();
    }
    for netns in namespaces {
        delete_netns(netns);
    }
    if let Some(blackhole) = blackhole {
        blackhole.remove();
    }
    if dir.exists()
        && let Err(e) = std::fs::remove_dir_all(dir)
    {
        eprintln!("hosts teardown: could not remove {}: {e}", dir.display());
    }
}

/// The routing protocol number that marks the harness's routes in the machine's own
/// namespace (unassigned in iproute2's `rt_protos`), so a sweep removes only those.
const ROUTE_PROTO: &str = "82";

/// `unreachable <network>/24 proto 82 metric <pid>` in the machine's own namespace: a
/// connection to the hosts' network from outside their namespaces fails at once instead
/// of leaving through the default route. The metric names the test process that owns it,
/// so two test processes' routes for the same network are two routes and each removes
/// only its own; a crashed process's route is swept by [`sweep_leftovers`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blackhole {
    network: [u8; 4],
    pid: u32,
}

impl Blackhole {
    /// Adds it (`ip route replace`: a route an earlier process with the same pid left is
    /// taken over, not an error); panics if `ip` fails.
    pub(super) fn add(network: [u8; 4], pid: u32) -> Blackhole {
        let blackhole = Blackhole { network, pid };
        let args = blackhole.route_args("replace");
        let out = Command::new("ip")
            .args(&args)
            .output()
            .unwrap_or_else(|e| panic!("run ip {}: {e}", args.join(" ")));
        assert!(
            out.status.success(),
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        blackhole
    }

    /// The network it covers (`/24`).
    pub(super) fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.network)
    }

    fn prefix(&self) -> String {
        format!("{}/24", self.network())
    }

    fn route_args(&self, verb: &str) -> Vec<String> {
        [
            "-4",
            "route",
            verb,
            "unreachable",
            &self.prefix(),
            "proto",
            ROUTE_PROTO,
            "metric",
            &self.pid.to_string(),
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// Removes it; never panics, says on stderr what failed (a route already gone is
    /// no failure).
    fn remove(&self) {
        if !self.exists() {
            return;
        }
        match Command::new("ip").args(self.route_args("del")).output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "hosts teardown: ip route del unreachable {}: {}",
                self.prefix(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => eprintln!("hosts teardown: run ip: {e}"),
        }
    }

    fn exists(&self) -> bool {
        harness_routes().contains(self)
    }
}

/// The harness's `unreachable` routes in the machine's own namespace.
fn harness_routes() -> Vec<Blackhole> {
    let out = Command::new("ip")
        .args([
            "-4",
            "-o",
            "route",
            "show",
            "proto",
            ROUTE_PROTO,
            "type",
            "unreachable",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    // `unreachable 10.3.1.0/24 metric 1234 ` (the filtered type and protocol not shown).
    out.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let prefix = words.iter().find_map(|w| w.strip_suffix("/24"))?;
            let network: Ipv4Addr = prefix.parse().ok()?;
            let pid = words
                .iter()
                .position(|w| *w == "metric")
                .and_then(|i| words.get(i + 1)?.parse().ok())?;
            (network.octets()[0] == 10).then_some(Blackhole {
                network: network.octets(),
                pid,
            })
        })
        .collect()
}

/// Whether the machine's own namespace routes anything inside `network`/24 (its own
/// addresses included) other than the harness's `unreachable` routes: the hosts must not
/// take such a network, whose route ours would shadow.
pub(super) fn machine_routes(network: [u8; 4]) -> bool {
    let prefix = format!("{}/24", Ipv4Addr::from(network));
    let out = Command::new("ip")
        .args(["-4", "-o", "route", "show", "table", "all", "root", &prefix])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.lines()
        .any(|line| !line.contains(&format!("proto {ROUTE_PROTO} ")) && !line.trim().is_empty())
}

/// `scripts/pg-cluster stop` of the cluster in `dir`.
fn stop_cluster(dir: &Path) {
    let script = super::postgres::pg_cluster_script();
    match Command::new("timeout")
        .arg("30")
        .arg(&script)
        .arg("stop")
        .arg(dir)
        .output()
    {
        Ok(out) if out.status.success() => {}
        Ok(out) => eprintln!(
            "hosts teardown: {} stop {} failed: {}",
            script.display(),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => eprintln!("hosts teardown: run {}: {e}", script.display()),
    }
}

/// SIGKILL to the process group a spawned child leads, unless the child was reaped
/// already (its pid may then belong to someone else).
pub(super) fn kill_group(child: &mut Child) {
    if let (Ok(None), Ok(pid)) = (child.try_wait(), i32::try_from(child.id())) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// Kills every process in the namespaces `inodes` until none is left (a process may fork
/// while its siblings die), for at most 10 s.
fn kill_all_in(inodes: &[u64]) {
    if inodes.is_empty() {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids = pids_in(inodes);
        if pids.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            eprintln!("hosts teardown: processes {pids:?} survive SIGKILL");
            return;
        }
        for pid in pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `ip netns delete`, unless it is already gone.
fn delete_netns(netns: &str) {
    if !Path::new("/run/netns").join(netns).exists() {
        return;
    }
    match Command::new("ip").args(["netns", "delete", netns]).output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => eprintln!(
            "hosts teardown: ip netns delete {netns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => eprintln!("hosts teardown: run ip: {e}"),
    }
}

/// The inode of namespace `netns` (`/run/netns/<netns>`), which `/proc/<pid>/ns/net`
/// shows for its processes.
fn netns_inode(netns: &str) -> Option<u64> {
    std::fs::metadata(Path::new("/run/netns").join(netns))
        .ok()
        .map(|m| m.ino())
}

/// Pids of the live processes whose network namespace is one of `inodes` (a zombie has
/// none left; its parent reaps it).
fn pids_in(inodes: &[u64]) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|m| inodes.contains(&m.ino()))
        })
        .collect()
}

/// The command lines of the processes in namespace `netns`.
pub(super) fn processes_in(netns: &str) -> Vec<String> {
    let Some(inode) = netns_inode(netns) else {
        return Vec::new();
    };
    pids_in(&[inode])
        .into_iter()
        .filter_map(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
        .map(|c| {
            String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .trim_end()
                .to_owned()
        })
        .collect()
}

/// Removes what test processes that are gone left behind: namespaces
/// `roo-<pid>-<n>-<host>`, `unreachable` routes of metric `<pid>` ([`Blackhole`]) and
/// directories `$TMPDIR/roo-hosts-<pid>-<n>` whose `<pid>` no longer runs (a test killed by a timeout never runs its drop). Their processes are
/// killed first; a cluster's files go with the directory.
pub fn sweep_leftovers() {
    sweep(|pid| !Path::new(&format!("/proc/{pid}")).exists());
}

/// Before this process makes its first namespace: [`sweep_leftovers`], and also what an
/// earlier process with the same pid left (its names would collide with ours).
pub(super) fn sweep_before_first_use() {
    let me = std::process::id();
    sweep(|pid| pid == me || !Path::new(&format!("/proc/{pid}")).exists());
}

/// Removes the namespaces, routes and directories of the pids for which `stale` holds.
fn sweep(stale: impl Fn(u32) -> bool) {
    for blackhole in harness_routes() {
        if stale(blackhole.pid) {
            blackhole.remove();
        }
    }
    let stale_pid = |pid: &str| pid.parse::<u32>().is_ok_and(&stale);
    let namespaces: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|name| {
                    let parts: Vec<&str> = name.split('-').collect();
                    parts.len() == 4
                        && parts[0] == "roo"
                        && parts[2].parse::<u64>().is_ok()
                        && stale_pid(parts[1])
                })
                .collect()
        })
        .unwrap_or_default();
    if !namespaces.is_empty() {
        eprintln!("hosts: removing namespaces of finished test processes: {namespaces:?}");
        let inodes: Vec<u64> = namespaces.iter().filter_map(|n| netns_inode(n)).collect();
        kill_all_in(&inodes);
        for netns in &namespaces {
            delete_netns(netns);
        }
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("roo-hosts-") else {
            continue;
        };
        if let Some((pid, n)) = rest.split_once('-')
            && n.parse::<u64>().is_ok()
            && stale_pid(pid)
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// What a [`super::Hosts`] made, to check after its drop that all of it is gone:
/// the namespaces (and so their links), every process in them or naming the test's
/// files, and the files.
#[derive(Debug, Clone)]
pub struct Witness {
    tag: String,
    namespaces: Vec<String>,
    inodes: Vec<u64>,
    dir: PathBuf,
    blackhole: Option<Blackhole>,
}

impl Witness {
    pub(super) fn of(
        tag: &str,
        namespaces: &[String],
        dir: &Path,
        blackhole: Option<Blackhole>,
    ) -> Witness {
        Witness {
            blackhole,
            tag: tag.to_owned(),
            namespaces: namespaces.to_vec(),
            inodes: namespaces.iter().filter_map(|n| netns_inode(n)).collect(),
            dir: dir.to_owned(),
        }
    }

    /// The namespaces it saw.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// Whatever is left, one line each; empty when the teardown was complete.
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        let listed = Command::new("ip")
            .args(["netns", "list"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for netns in &self.namespaces {
            if listed
                .lines()
                .any(|l| l.split_whitespace().next() == Some(netns))
                || Path::new("/run/netns").join(netns).exists()
            {
                left.push(format!("namespace {netns}"));
            }
        }
        // Links: none of ours may show in the machine's own namespace (ours only ever
        // live inside the test's namespaces, which the kernel destroys with them).
        let links = Command::new("ip")
            .args(["-o", "link", "show"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let prefix = format!("{}-", self.tag);
        for line in links.lines().filter(|l| l.contains(&prefix)) {
            left.push(format!("link {line}"));
        }
        let dir = self.dir.to_string_lossy().into_owned();
        let below_dir = format!("{dir}/");
        for pid in all_pids() {
            let in_ours = std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|m| self.inodes.contains(&m.ino()));
            // An open handle on a namespace keeps it (and its links) alive.
            let holds_ours = std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|target| {
                        self.inodes
                            .iter()
                            .any(|ino| target.to_string_lossy() == format!("net:[{ino}]"))
                    })
                })
            });
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            let names_ours = cmdline.contains(&below_dir) || cmdline.contains(&prefix);
            if in_ours || holds_ours || names_ours {
                left.push(format!("process {pid}: {cmdline}"));
            }
        }
        if let Some(blackhole) = self.blackhole.as_ref().filter(|b| b.exists()) {
            left.push(format!(
                "route unreachable {} metric {}",
                blackhole.prefix(),
                blackhole.pid
            ));
        }
        if self.dir.exists() {
            left.push(format!("directory {dir}"));
        }
        left
    }
}

fn all_pids() -> Vec<i32> {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| *pid != me)
                .collect()
        })
        .unwrap_or_default()
}
