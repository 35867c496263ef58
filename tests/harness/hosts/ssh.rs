//! `sshd` inside a host, and the `ssh` command line that reaches it from another host.
//!
//! Everything is per test, in its directory: the server's host key and config file
//! (`sshd -f`, listening only on the host's address, public-key login only, no PAM), one
//! client key pair, and a `known_hosts` holding the host keys of the servers started.
//! The client never reads the user's `~/.ssh` (`-F /dev/null`, explicit identity and
//! known-hosts files, no agent) and always checks host keys (`StrictHostKeyChecking=yes`
//! under `BatchMode=yes`: an unknown or changed key fails at once, no prompt).

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{Hosts, NsCommand, Spawned, find_program};
use crate::wait_until;

/// `sshd` running in a host; it stops when the [`Hosts`] drops.
pub struct Sshd<'h> {
    hosts: &'h Hosts,
    host: String,
    addr: Ipv4Addr,
    user: String,
    dir: PathBuf,
    process: Spawned,
}

impl Hosts {
    /// Starts `sshd` in host `name` (port 22 on its address), admitting the test's client
    /// key for the current user, and records its host key in the test's `known_hosts`.
    /// Needs [`super::Need::Sshd`].
    pub fn sshd(&self, name: &str) -> Sshd<'_> {
        let host = self.host(name).clone();
        let client = self.ssh_client_dir();
        let dir = client.join(&host.name);
        assert!(!dir.exists(), "sshd already started in host {name}");
        std::fs::create_dir_all(&dir).unwrap();
        // sshd refuses to start without its privilege-separation directory, which the
        // package's service would create at boot.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let user = nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .map(|u| u.name)
            .expect("the current user has a name");
        std::fs::copy(client.join("id_ed25519.pub"), dir.join("authorized_keys")).unwrap();
        let config = format!(
            "# Written by the test harness (tests/harness/hosts/ssh.rs).\n\
             ListenAddress {addr}:22\n\
             HostKey {dir}/host_key\n\
             PidFile none\n\
             AuthorizedKeysFile {dir}/authorized_keys\n\
             AllowUsers {user}\n\
             AuthenticationMethods publickey\n\
             PermitRootLogin prohibit-password\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             UsePAM no\n\
             # The key files live below the world-writable temp dir, which the owner and\n\
             # mode checks would refuse; they are the test's own.\n\
             StrictModes no\n\
             UseDNS no\n\
             PrintMotd no\n\
             PrintLastLog no\n\
             X11Forwarding no\n\
             # A session whose peer vanished (a cut link) ends within about 6 s.\n\
             ClientAliveInterval 2\n\
             ClientAliveCountMax 3\n\
             # VERBOSE logs \"Server listening on\", which tells when it is ready.\n\
             LogLevel VERBOSE\n{tmux_tmpdir}",
            addr = host.addr,
            dir = dir.display(),
            // The test's own tmux directory (scripts/test's per-run one) on the host too, so
            // the test finds, ends and counts the private servers the sessions start.
            tmux_tmpdir = std::env::var("TMUX_TMPDIR")
                .ok()
                .filter(|d| !d.is_empty())
                .map(|d| format!("SetEnv TMUX_TMPDIR={d}\n"))
                .unwrap_or_default(),
        );
        std::fs::write(dir.join("sshd_config"), config).unwrap();
        let process = start_sshd(self, &host.name, host.addr, &dir);
        let sshd = Sshd {
            hosts: self,
            host: host.name,
            addr: host.addr,
            user,
            dir,
            process,
        };
        sshd.trust_host_key();
        sshd
    }

    /// The client's directory: `id_ed25519` (made on first use) and `known_hosts`.
    fn ssh_client_dir(&self) -> PathBuf {
        let client = self.dir().join("ssh");
        if !client.join("id_ed25519").exists() {
            std::fs::create_dir_all(&client).unwrap();
            keygen(&client.join("id_ed25519"), "roo-test-client");
            std::fs::write(client.join("known_hosts"), "").unwrap();
        }
        client
    }
}

/// Makes the host key if missing, starts `sshd -D -e -f <config>` and waits until it
/// listens.
fn start_sshd(hosts: &Hosts, name: &str, addr: Ipv4Addr, dir: &Path) -> Spawned {
    if !dir.join("host_key").exists() {
        keygen(&dir.join("host_key"), &format!("roo-test-host-{name}"));
    }
    let sshd = find_program("sshd").expect("sshd");
    let process = hosts
        .cmd(name, sshd)
        .arg("-D")
        .arg("-e")
        .arg("-f")
        .arg(dir.join("sshd_config"))
        .spawn();
    let ready = format!("Server listening on {addr} port 22");
    wait_until(
        &format!("sshd in host {name} to listen"),
        Duration::from_secs(20),
        || {
            if let Some(status) = hosts.exit_status(&process) {
                panic!("sshd exited ({status}): {}", process.describe());
            }
            process.log().contains(&ready).then_some(())
        },
        || process.describe(),
    );
    process
}

/// `ssh-keygen` of an ed25519 key pair without passphrase at `path` (and `path.pub`).
fn keygen(path: &Path, comment: &str) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .output()
        .expect("run ssh-keygen");
    assert!(
        out.status.success(),
        "ssh-keygen {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether `destination` may be handed to `ssh` as its destination: not empty, no
/// whitespace or control characters, and above all not starting with `-`, which `ssh`
/// would take as an option (`-oProxyCommand=…` runs a command on the *local* host).
/// Issue 21 makes this a product rule for `hosts:`; the harness applies it to itself.
pub fn check_ssh_destination(destination: &str) -> Result<(), String> {
    if destination.is_empty() {
        return Err("an ssh destination is empty".into());
    }
    if destination.starts_with('-') {
        return Err(format!(
            "ssh destination {destination:?} starts with '-', which ssh would read as an option"
        ));
    }
    if destination
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "ssh destination {destination:?} contains whitespace or control characters"
        ));
    }
    Ok(())
}

impl Sshd<'_> {
    /// `user@address` of this server.
    pub fn destination(&self) -> String {
        format!("{}@{}", self.user, self.addr)
    }

    /// The test's `known_hosts` file (every started server's key).
    pub fn known_hosts(&self) -> PathBuf {
        self.dir.parent().unwrap().join("known_hosts")
    }

    /// The test's client private key.
    pub fn identity(&self) -> PathBuf {
        self.dir.parent().unwrap().join("id_ed25519")
    }

    /// The options every `ssh` of the test uses (before the destination): the per-test
    /// identity and `known_hosts` only, host keys always checked, never a prompt, and a
    /// dead peer noticed within about 6 s.
    pub fn client_options(&self) -> Vec<OsString> {
        let mut options: Vec<OsString> = vec!["-F".into(), "/dev/null".into()];
        options.push("-i".into());
        options.push(self.identity().into_os_string());
        let mut known_hosts = OsString::from("UserKnownHostsFile=");
        known_hosts.push(self.known_hosts());
        for option in [
            known_hosts,
            "GlobalKnownHostsFile=/dev/null".into(),
            "StrictHostKeyChecking=yes".into(),
            "BatchMode=yes".into(),
            "IdentitiesOnly=yes".into(),
            "IdentityAgent=none".into(),
            "UpdateHostKeys=no".into(),
            "ControlMaster=no".into(),
            "ConnectTimeout=10".into(),
            "ServerAliveInterval=2".into(),
            "ServerAliveCountMax=3".into(),
        ] {
            options.push("-o".into());
            options.push(option);
        }
        options
    }

    /// `ssh` from host `from` running `remote_command` on `destination`, as an
    /// [`NsCommand`] to run or spawn: `ip netns exec <from> ssh <options> --
    /// <destination> <remote_command>`. `remote_command` is one line for the remote
    /// shell (quote it as such); `--` ends ssh's options, and a destination starting
    /// with `-` is refused before that (see [`check_ssh_destination`]).
    pub fn ssh_to(
        &self,
        from: &str,
        destination: &str,
        remote_command: &str,
    ) -> Result<NsCommand<'_>, String> {
        check_ssh_destination(destination)?;
        Ok(self
            .hosts
            .cmd(from, "ssh")
            .args(self.client_options())
            .arg("--")
            .arg(destination)
            .arg(remote_command))
    }

    /// The whole argument vector of [`Sshd::ssh_to`].
    pub fn ssh_argv_to(
        &self,
        from: &str,
        destination: &str,
        remote_command: &str,
    ) -> Result<Vec<OsString>, String> {
        self.ssh_to(from, destination, remote_command)
            .map(|cmd| cmd.argv())
    }

    /// [`Sshd::ssh_to`] this server.
    pub fn ssh(&self, from: &str, remote_command: &str) -> NsCommand<'_> {
        self.ssh_to(from, &self.destination(), remote_command)
            .expect("this server's destination is valid")
    }

    /// The whole argument vector of [`Sshd::ssh`].
    pub fn ssh_argv(&self, from: &str, remote_command: &str) -> Vec<OsString> {
        self.ssh(from, remote_command).argv()
    }

    /// Replaces the server's host key with a new one and restarts it, leaving
    /// `known_hosts` as it was: what a client sees when a host was reinstalled, or when
    /// someone sits in the middle.
    pub fn replace_host_key(&mut self) {
        self.hosts.kill(&self.process);
        std::fs::remove_file(self.dir.join("host_key")).unwrap();
        std::fs::remove_file(self.dir.join("host_key.pub")).unwrap();
        self.process = start_sshd(self.hosts, &self.host, self.addr, &self.dir);
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Adds this server's current host key to the test's `known_hosts`.
    fn trust_host_key(&self) {
        let key = std::fs::read_to_string(self.dir.join("host_key.pub")).unwrap();
        let mut fields = key.split_whitespace();
        let (Some(kind), Some(blob)) = (fields.next(), fields.next()) else {
            panic!("unexpected host key {key:?}");
        };
        let line = format!("{} {kind} {blob}\n", self.addr);
        let path = self.known_hosts();
        let mut known = std::fs::read_to_string(&path).unwrap_or_default();
        known.push_str(&line);
        std::fs::write(&path, known).unwrap();
    }
}
