//! Several hosts on one machine, for the tests of teams that span machines (issue 21):
//! each host is a Linux network namespace made by the test, with an address only inside
//! it, cabled to a switch (a bridge in a namespace of its own), so nothing is added to
//! the machine's own network. A test runs commands and long-lived processes in a host
//! (`ip netns exec`), pulls a host's cable ([`Hosts::cut_link`]) and plugs it back, and
//! starts real servers there: PostgreSQL ([`Hosts::postgres`], `scripts/pg-cluster` with a
//! TCP listener and password authentication) and `sshd` ([`Hosts::sshd`], per-test keys,
//! host keys always checked).
//!
//! While the hosts exist, the machine's own namespace has an `unreachable` route for
//! their network (`10.<p>.<q>.0/24`, below): a client started there by mistake (with a
//! host's address but without `ip netns exec`) fails at once with "network is
//! unreachable" instead of sending to that address through the machine's default route.
//! The hosts themselves never use the machine's routing table (their links join their
//! own namespaces only), so the route changes nothing for them.
//!
//! Dropping [`Hosts`] tears everything down, also when the test panics: it stops the
//! PostgreSQL clusters, kills every process inside the namespaces (whatever started them:
//! a daemon, an ssh session's shell) and every process the test spawned, deletes the
//! namespaces (which destroys their links), removes the `unreachable` route and the
//! test's files. A test process killed outright cannot run its drop; the next
//! [`Hosts::new`] sweeps namespaces, routes and files whose creating process is gone
//! ([`sweep_leftovers`]).
//!
//! These tests need root (`CAP_NET_ADMIN` and `CAP_SYS_ADMIN`), iproute2's `ip netns`,
//! and for the servers the Debian `openssh-server` and `postgresql` packages; without
//! them [`Hosts::new`] prints `skipped: …` and returns `None` (`.ci/run` installs the
//! packages and CI runs as root, so they run there).
//!
//! Names: the namespaces are `roo-<pid>-<n>-<host>` plus `roo-<pid>-<n>-sw` for the
//! switch; inside each host the interface is `eth0` with `10.<p>.<q>.<i>/24`, `<p>.<q>`
//! picked per test (the networks are isolated from each other anyway) among the
//! prefixes the machine's own routing table has nothing in. The machine's namespace gets
//! `unreachable 10.<p>.<q>.0/24 proto 82 metric <pid>` (protocol 82 marks the harness's
//! routes, the metric names the test process that owns it). The test's files
//! (keys, configs, logs, the database cluster) live in `$TMPDIR/roo-hosts-<pid>-<n>`.

mod postgres;
mod ssh;
mod teardown;

pub use postgres::Postgres;
pub use ssh::{Sshd, check_ssh_destination};
use teardown::Blackhole;
pub use teardown::{Witness, sweep_leftovers};

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use crate::{RunOutput, TestCommand, wait_until};

/// What a test needs besides namespaces; [`Hosts::new`] skips the test without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// `initdb`, `pg_ctl` and `psql` (Debian `postgresql`), and the `postgres` user when
    /// running as root.
    Postgres,
    /// `sshd`, `ssh` and `ssh-keygen` (Debian `openssh-server`, `openssh-client`).
    Sshd,
}

/// One host: a network namespace with one interface, `eth0`, on the switch.
#[derive(Debug, Clone)]
pub struct Host {
    /// The name the test gave it (`a`, `b`, …).
    pub name: String,
    /// Its namespace, `roo-<pid>-<n>-<name>`.
    pub netns: String,
    /// Its address on the switch.
    pub addr: Ipv4Addr,
}

/// Hosts in network namespaces joined by a switch; everything is removed on drop.
pub struct Hosts {
    tag: String,
    hosts: Vec<Host>,
    /// Every namespace made so far (hosts and switch), for the teardown.
    namespaces: Vec<String>,
    switch: String,
    dir: PathBuf,
    /// The `unreachable` route for the hosts' network in the machine's own namespace.
    blackhole: Option<Blackhole>,
    /// Children spawned in the namespaces, killed (by process group) and reaped on drop.
    children: Mutex<Vec<Child>>,
    /// Data directories of the PostgreSQL clusters started, stopped first on drop.
    clusters: Mutex<Vec<PathBuf>>,
    serial: AtomicU64,
}

/// Variables a process in a host keeps from the test's environment (besides `PATH`);
/// everything else is dropped, so the developer's `ROO_*`, `PG*`, `SSH_AUTH_SOCK`… never
/// leak in.
const KEPT_ENV: [&str; 3] = ["LANG", "LC_ALL", "TZ"];

/// How long [`NsCommand::run`] lets a command take before killing it (the command's
/// failure report then shows exit code 124, from `timeout`).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

impl Hosts {
    /// Makes the hosts `names` (short lowercase names: `a`, `b`, …) on one switch, or
    /// returns `None` after printing `skipped: <test>: <why>` when this machine cannot
    /// (not root, no `ip netns`, or something in `needs` is missing).
    ///
    /// Panics if a step fails after the first namespace could be made (the drop removes
    /// what was made).
    pub fn new(names: &[&str], needs: &[Need]) -> Option<Hosts> {
        if let Some(why) = missing(needs) {
            skip(&why);
            return None;
        }
        for name in names {
            assert!(
                valid_host_name(name) && names.iter().filter(|n| *n == name).count() == 1,
                "host names are distinct, 1-10 lowercase letters and digits, not `sw`: {name:?}"
            );
        }
        static FIRST: Once = Once::new();
        FIRST.call_once(teardown::sweep_before_first_use);
        sweep_leftovers();
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let tag = format!("roo-{pid}-{n}");
        let dir = std::env::temp_dir().join(format!("roo-hosts-{pid}-{n}"));
        std::fs::create_dir_all(dir.join("home")).unwrap();
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let mut hosts = Hosts {
            switch: format!("{tag}-sw"),
            tag,
            hosts: Vec::new(),
            namespaces: Vec::new(),
            dir,
            blackhole: None,
            children: Mutex::new(Vec::new()),
            clusters: Mutex::new(Vec::new()),
            serial: AtomicU64::new(0),
        };
        // The first namespace tells whether this machine lets us make them at all.
        let switch = hosts.switch.clone();
        let out = Command::new("ip").args(["netns", "add", &switch]).output();
        match out {
            Ok(out) if out.status.success() => hosts.namespaces.push(switch.clone()),
            Ok(out) => {
                skip(&format!(
                    "`ip netns add` failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
                return None;
            }
            Err(e) => {
                skip(&format!("cannot run `ip`: {e}"));
                return None;
            }
        }
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &switch, "link", "set", "dev", "br0", "up"]);
        // 10.<p>.<q>.0/24: per process and test, so two tests' logs never show the same
        // addresses (their networks are disjoint namespaces in any case), and none the
        // machine itself routes.
        let p = 1 + (pid % 250) as u8;
        let q = (0..250)
            .map(|k| 1 + ((n + k) % 250) as u8)
            .find(|q| !teardown::machine_routes([10, p, *q, 0]))
            .unwrap_or_else(|| panic!("every 10.{p}.*.0/24 is routed by this machine"));
        hosts.blackhole = Some(Blackhole::add([10, p, q, 0], pid));
        for (i, name) in names.iter().enumerate() {
            let netns = format!("{}-{name}", hosts.tag);
            ip(&["netns", "add", &netns]);
            hosts.namespaces.push(netns.clone());
            let port = format!("p-{name}");
            let addr = Ipv4Addr::new(10, p, q, 1 + i as u8);
            let cidr = format!("{addr}/24");
            ip(&["-n", &netns, "link", "set", "dev", "lo", "up"]);
            ip(&[
                "-n", &netns, "link", "add", "eth0", "type", "veth", "peer", "name", &port,
                "netns", &switch,
            ]);
            ip(&["-n", &switch, "link", "set", "dev", &port, "master", "br0"]);
            ip(&["-n", &switch, "link", "set", "dev", &port, "up"]);
            ip(&["-n", &netns, "addr", "add", &cidr, "dev", "eth0"]);
            ip(&["-n", &netns, "link", "set", "dev", "eth0", "up"]);
            hosts.hosts.push(Host {
                name: (*name).to_owned(),
                netns,
                addr,
            });
        }
        Some(hosts)
    }

    /// The host named `name`; panics if there is none.
    pub fn host(&self, name: &str) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .unwrap_or_else(|| panic!("no host {name:?} among {:?}", self.names()))
    }

    /// The address of host `name`.
    pub fn addr(&self, name: &str) -> Ipv4Addr {
        self.host(name).addr
    }

    /// The hosts' network, `10.<p>.<q>.0/24`, which the machine's own namespace routes to
    /// `unreachable` while they exist.
    pub fn network(&self) -> Ipv4Addr {
        self.blackhole
            .as_ref()
            .map_or(Ipv4Addr::UNSPECIFIED, Blackhole::network)
    }

    /// The namespace of host `name`.
    pub fn netns(&self, name: &str) -> &str {
        &self.host(name).netns
    }

    fn names(&self) -> Vec<&str> {
        self.hosts.iter().map(|h| h.name.as_str()).collect()
    }

    /// The directory of this test's files (removed on drop).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `program` to run in host `name`'s namespace, with a clean environment (`LANG`,
    /// `LC_ALL`, `TZ` kept; `PATH` kept, with `/usr/sbin` and `/sbin` added, where the
    /// system's tools live; `HOME` a directory of the test's, so nothing of the user's
    /// home is read).
    pub fn cmd(&self, name: &str, program: impl AsRef<OsStr>) -> NsCommand<'_> {
        let mut path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        path.push(":/usr/sbin:/sbin");
        NsCommand {
            hosts: self,
            netns: self.netns(name).to_owned(),
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            envs: vec![
                (
                    OsString::from("HOME"),
                    self.dir.join("home").into_os_string(),
                ),
                (OsString::from("PATH"), path),
            ],
            stdin: None,
            timeout: RUN_TIMEOUT,
        }
    }

    /// Pulls host `name`'s cable out of the switch: its switch port goes down, so every
    /// packet to or from it is dropped — no reset, no ICMP error — while the host keeps
    /// its address and sees its carrier go (as with a real pulled cable). Connections
    /// through it die only by the peers' timeouts.
    pub fn cut_link(&self, name: &str) {
        let port = format!("p-{}", self.host(name).name);
        ip(&["-n", &self.switch, "link", "set", "dev", &port, "down"]);
    }

    /// Plugs host `name`'s cable back and returns once its interface has carrier. Also
    /// flushes every host's neighbour (ARP) cache: an entry that failed during the cut
    /// would otherwise refuse the first connection at once with "No route to host",
    /// which a real host's cache forgets on its own after a few seconds.
    pub fn restore_link(&self, name: &str) {
        let host = self.host(name);
        let port = format!("p-{}", host.name);
        ip(&["-n", &self.switch, "link", "set", "dev", &port, "up"]);
        for h in &self.hosts {
            ip(&["-n", &h.netns, "neigh", "flush", "all"]);
        }
        let link = || ip(&["-n", &host.netns, "-br", "link", "show", "dev", "eth0"]);
        wait_until(
            &format!("carrier on {}'s eth0", host.name),
            Duration::from_secs(10),
            || link().contains("LOWER_UP").then_some(()),
            link,
        );
    }

    /// A [`Witness`] of what this set-up made, to check after the drop that nothing is
    /// left.
    pub fn witness(&self) -> Witness {
        Witness::of(
            &self.tag,
            &self.namespaces,
            &self.dir,
            self.blackhole.clone(),
        )
    }

    /// The status of a process started with [`NsCommand::spawn`] if it has exited.
    pub fn exit_status(&self, process: &Spawned) -> Option<ExitStatus> {
        let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        children
            .iter_mut()
            .find(|c| c.id() == process.pid)
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Kills a process started with [`NsCommand::spawn`], and its process group, and
    /// reaps it.
    pub fn kill(&self, process: &Spawned) {
        let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = children.iter().position(|c| c.id() == process.pid) {
            let mut child = children.swap_remove(i);
            teardown::kill_group(&mut child);
            let _ = child.wait();
        }
    }

    /// The command lines of the processes running in host `name` now, whoever started
    /// them (an ssh session's commands, daemons).
    pub fn processes(&self, name: &str) -> Vec<String> {
        teardown::processes_in(self.netns(name))
    }

    fn next_serial(&self) -> u64 {
        self.serial.fetch_add(1, Ordering::Relaxed)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let clusters = std::mem::take(self.clusters.get_mut().unwrap_or_else(|e| e.into_inner()));
        let children = std::mem::take(self.children.get_mut().unwrap_or_else(|e| e.into_inner()));
        teardown::tear_down(
            &self.namespaces,
            &clusters,
            children,
            self.blackhole.as_ref(),
            &self.dir,
        );
    }
}

/// A command to run in a host: built like [`TestCommand`], then run to completion
/// ([`NsCommand::run`], under a timeout) or started ([`NsCommand::spawn`]).
pub struct NsCommand<'h> {
    hosts: &'h Hosts,
    netns: String,
    program: OsString,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
}

impl NsCommand<'_> {
    /// Adds an argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.envs
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Feeds `input` on stdin ([`NsCommand::run`] only).
    pub fn stdin(mut self, input: impl AsRef<[u8]>) -> Self {
        self.stdin = Some(input.as_ref().to_owned());
        self
    }

    /// How long [`NsCommand::run`] waits before killing the command (default
    /// [`RUN_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The whole command line: `ip netns exec <netns> <program> <args…>`.
    pub fn argv(&self) -> Vec<OsString> {
        let mut argv: Vec<OsString> = ["ip", "netns", "exec", &self.netns]
            .iter()
            .map(OsString::from)
            .collect();
        argv.push(self.program.clone());
        argv.extend(self.args.iter().cloned());
        argv
    }

    /// Runs to completion and returns its output; after the timeout `timeout` kills its
    /// whole process group (exit code 124). Like any captured command, it also waits for
    /// whatever it left running with its stdout or stderr: a daemon it starts must
    /// redirect them.
    pub fn run(&self) -> RunOutput {
        let secs = format!("{}", self.timeout.as_secs().max(1));
        let mut cmd = TestCommand::new("timeout")
            .args(["--kill-after=5", &secs])
            .args(self.argv());
        for (key, _) in std::env::vars_os() {
            if !KEPT_ENV.iter().any(|k| OsStr::new(k) == key) {
                cmd = cmd.env_remove(key);
            }
        }
        for (key, value) in &self.envs {
            cmd = cmd.env(key, value);
        }
        if let Some(input) = &self.stdin {
            cmd = cmd.stdin(input);
        }
        cmd.run()
    }

    /// Starts the command in a process group of its own, its stdout and stderr going to a
    /// log file ([`Spawned::log`]) and its stdin a pipe the test holds. It runs until the
    /// test kills it ([`Hosts::kill`]) or the [`Hosts`] drops.
    pub fn spawn(&self) -> Spawned {
        let serial = self.hosts.next_serial();
        let program = Path::new(&self.program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let log = self
            .hosts
            .dir
            .join("logs")
            .join(format!("{serial}-{program}.log"));
        let out = File::create(&log).unwrap();
        let err = out.try_clone().unwrap();
        let argv = self.argv();
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env_clear()
            .envs(
                std::env::vars_os()
                    .filter(|(k, _)| KEPT_ENV.iter().any(|kept| OsStr::new(kept) == k)),
            )
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.display()));
        let spawned = Spawned {
            pid: child.id(),
            stdin: child.stdin.take(),
            log,
            command: self.display(),
        };
        self.hosts
            .children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child);
        spawned
    }

    /// The command line, for messages.
    pub fn display(&self) -> String {
        self.argv()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A process started in a host with [`NsCommand::spawn`].
#[derive(Debug)]
pub struct Spawned {
    pid: u32,
    stdin: Option<ChildStdin>,
    log: PathBuf,
    command: String,
}

impl Spawned {
    /// Its pid (also its process group).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Its stdin (a pipe; [`Spawned::close_stdin`] gives it end of file).
    pub fn stdin(&mut self) -> &mut ChildStdin {
        self.stdin.as_mut().expect("stdin already closed")
    }

    /// Closes its stdin.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// What it printed so far (stdout and stderr, interleaved).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The command line and what it printed, for failure messages.
    pub fn describe(&self) -> String {
        format!("{}\n--- output ---\n{}", self.command, self.log())
    }
}

/// Runs `ip <args>` in the test's own namespace; panics if it fails. Returns stdout.
fn ip(args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run ip {}: {e}", args.join(" ")));
    assert!(
        out.status.success(),
        "ip {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn valid_host_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 10
        && name != "sw"
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// Says why a test is skipped; with `ROO_TEST_HOSTS=require` (CI sets it), fails it
/// instead, so a machine that cannot run these tests never passes them silently.
fn skip(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_owned();
    assert!(
        std::env::var("ROO_TEST_HOSTS").as_deref() != Ok("require"),
        "{test}: ROO_TEST_HOSTS=require, but this machine cannot run it: {why}"
    );
    eprintln!("skipped: {test}: {why}");
}

/// What this machine lacks for hosts with `needs`, if anything.
fn missing(needs: &[Need]) -> Option<String> {
    // CAP_NET_ADMIN (bit 12) for links and addresses, CAP_SYS_ADMIN (bit 21) for the
    // namespaces' mounts.
    let caps = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .unwrap_or(0);
    if caps & (1 << 12) == 0 || caps & (1 << 21) == 0 {
        return Some(
            "network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN); CI runs as root"
                .into(),
        );
    }
    if find_program("ip").is_none() {
        return Some("`ip` (iproute2) is not installed".into());
    }
    if needs.contains(&Need::Sshd) {
        for program in ["sshd", "ssh", "ssh-keygen"] {
            if find_program(program).is_none() {
                return Some(format!(
                    "{program} is not installed (Debian packages openssh-server and \
                     openssh-client; .ci/run installs them)"
                ));
            }
        }
    }
    if needs.contains(&Need::Postgres) {
        for program in ["initdb", "pg_ctl", "psql"] {
            if find_program(program).is_none() {
                return Some(format!(
                    "PostgreSQL's {program} is not installed (Debian package postgresql; \
                     .ci/run installs it)"
                ));
            }
        }
        if nix::unistd::geteuid().is_root()
            && nix::unistd::User::from_name("postgres")
                .ok()
                .flatten()
                .is_none()
        {
            return Some("there is no `postgres` user to run the server as root".into());
        }
    }
    None
}

/// The absolute path of `program`: on `PATH`, in `/usr/sbin` (where `sshd` lives, off a
/// user's `PATH`), or for PostgreSQL's server programs in `/usr/lib/postgresql/*/bin`
/// (the newest).
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    dirs.push(PathBuf::from("/usr/sbin"));
    if let Some(found) = dirs.iter().map(|d| d.join(program)).find(|p| p.is_file()) {
        return Some(found);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let p = e.path().join("bin").join(program);
            p.is_file().then_some((version, p))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, p)| p)
}
