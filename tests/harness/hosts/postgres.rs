//! A throwaway PostgreSQL cluster inside a host: `scripts/pg-cluster start --listen`
//! run in the host's namespace, so the server listens on that host's address (and on a
//! unix socket in its directory for the owner), and admits over TCP one role, by
//! password (`scram-sha-256`), and nothing else.

use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use super::{Hosts, NsCommand, find_program};

/// The role (and its database) the tests connect as over TCP.
const ROLE: &str = "roo_test";

/// A PostgreSQL server running in a host, stopped when the [`Hosts`] drops.
#[derive(Debug, Clone)]
pub struct Postgres {
    host: String,
    dir: PathBuf,
    addr: Ipv4Addr,
    port: u16,
    password: String,
    admin_url: String,
    passfile: PathBuf,
}

/// `scripts/pg-cluster` of this checkout.
pub(super) fn pg_cluster_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pg-cluster")
}

impl Hosts {
    /// Starts a PostgreSQL cluster in host `name`, listening on its address, port 5432,
    /// with a role `roo_test` (a fresh random password) owning a database `roo_test`; only
    /// that role may connect over TCP, from the hosts' subnet, by password. Needs
    /// [`super::Need::Postgres`].
    pub fn postgres(&self, name: &str) -> Postgres {
        let host = self.host(name).clone();
        let password = random_hex(16);
        let out = self
            .cmd(name, pg_cluster_script())
            .args(["start", "--listen", &host.addr.to_string(), "--role", ROLE])
            .env("PG_CLUSTER_PASSWORD", &password)
            .env("TMPDIR", self.dir())
            .run();
        out.assert_ok();
        let stdout = out.stdout();
        let lines: Vec<&str> = stdout.lines().collect();
        let [dir, admin_url, _role_url] = lines[..] else {
            panic!("scripts/pg-cluster printed {stdout:?}, not a directory and two URLs");
        };
        let dir = PathBuf::from(dir);
        self.clusters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(dir.clone());
        let port = 5432;
        let passfile = self.dir().join(format!("{name}.pgpass"));
        std::fs::write(
            &passfile,
            format!("{}:{port}:{ROLE}:{ROLE}:{password}\n", host.addr),
        )
        .unwrap();
        set_mode(&passfile, 0o600);
        Postgres {
            host: host.name,
            dir,
            addr: host.addr,
            port,
            password,
            admin_url: admin_url.to_owned(),
            passfile,
        }
    }

    /// `pg_ctl restart` (fast shutdown, waits until it accepts connections again) of the
    /// server, inside its host so it listens there again.
    pub fn restart_postgres(&self, pg: &Postgres) {
        self.pg_ctl(pg, "restart");
    }

    /// `pg_ctl stop` (fast shutdown: every session ends), waiting until it is down.
    pub fn stop_postgres(&self, pg: &Postgres) {
        self.pg_ctl(pg, "stop");
    }

    /// `pg_ctl start` of a stopped server, inside its host, with the options it ran with
    /// before (`postmaster.opts`: its address, port and socket directory), waiting until
    /// it accepts connections.
    pub fn start_postgres(&self, pg: &Postgres) {
        let opts = std::fs::read_to_string(pg.dir.join("data/postmaster.opts"))
            .expect("postmaster.opts of the stopped server");
        // `<postgres binary> "-D" "<data>" "-c" …`: the options after the binary, as the
        // shell line pg_ctl's -o takes.
        let options = opts.trim().split_once(' ').map(|(_, rest)| rest.to_owned());
        self.pg_ctl_with(pg, "start", options.as_deref());
    }

    fn pg_ctl(&self, pg: &Postgres, action: &str) {
        self.pg_ctl_with(pg, action, None);
    }

    fn pg_ctl_with(&self, pg: &Postgres, action: &str, options: Option<&str>) {
        let pg_ctl = find_program("pg_ctl").expect("pg_ctl");
        let data = pg.dir.join("data");
        let log = pg.dir.join("server.log");
        let mut pg_ctl_args: Vec<&OsStr> = vec![
            pg_ctl.as_os_str(),
            "-D".as_ref(),
            data.as_os_str(),
            "-l".as_ref(),
            log.as_os_str(),
            "-w".as_ref(),
            "-t".as_ref(),
            "60".as_ref(),
        ];
        if action != "start" {
            pg_ctl_args.extend(["-m".as_ref(), "fast".as_ref()] as [&OsStr; 2]);
        }
        if let Some(options) = options {
            pg_ctl_args.extend(["-o".as_ref(), options.as_ref()] as [&OsStr; 2]);
        }
        pg_ctl_args.push(action.as_ref());
        let cmd = if nix::unistd::geteuid().is_root() {
            self.cmd(&pg.host, "runuser")
                .args(["-u", "postgres", "--"])
                .args(&pg_ctl_args)
        } else {
            self.cmd(&pg.host, pg_ctl_args[0]).args(&pg_ctl_args[1..])
        };
        cmd.run().assert_ok();
    }
}

impl Postgres {
    /// `postgresql://roo_test:<password>@<addr>:5432/roo_test?sslmode=disable`, for
    /// `ROO_STORE` (the server has no TLS, and a TCP host without `sslmode` means
    /// `verify-full`, so the harness writes `disable`). It holds
    /// the password: never print it (the store itself shows only
    /// `postgresql://user@host:port/db`); give a command line
    /// [`Postgres::url_without_password`] and `PGPASSFILE` instead.
    pub fn url(&self) -> String {
        format!(
            "postgresql://{ROLE}:{}@{}:{}/{ROLE}?sslmode=disable",
            self.password, self.addr, self.port
        )
    }

    /// `postgresql://roo_test@<addr>:5432/roo_test?sslmode=disable`.
    pub fn url_without_password(&self) -> String {
        format!(
            "postgresql://{ROLE}@{}:{}/{ROLE}?sslmode=disable",
            self.addr, self.port
        )
    }

    /// The role's password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// A libpq password file (mode 0600) with the role's password, for `PGPASSFILE`.
    pub fn passfile(&self) -> &Path {
        &self.passfile
    }

    /// The cluster owner's URL over the unix socket (trust): for administration from the
    /// test itself, since a unix socket's path does not depend on the network namespace.
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }

    /// Lets the role create member roles (docs/DISTRIBUTED.md "Authority in the database"):
    /// `ALTER ROLE roo_test CREATEROLE` (it owns the tables it makes), and admits every
    /// role with a password — the member roles the store creates, `roo_m_…` — over TCP
    /// to the role's database by password, as the only other `pg_hba.conf` line (then
    /// reloaded).
    pub fn allow_member_roles(&self) {
        let psql = find_program("psql").expect("psql");
        let out = crate::TestCommand::new(psql)
            .args([self.admin_url(), "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c"])
            .arg(format!("ALTER ROLE {ROLE} CREATEROLE"))
            .run();
        out.assert_ok();
        let hba = self.dir.join("data/pg_hba.conf");
        let mut lines = std::fs::read_to_string(&hba).unwrap();
        lines.push_str(&format!("host {ROLE} all samenet scram-sha-256\n"));
        std::fs::write(&hba, lines).unwrap();
        crate::TestCommand::new(find_program("psql").expect("psql"))
            .args([
                self.admin_url(),
                "-X",
                "-At",
                "-c",
                "SELECT pg_reload_conf()",
            ])
            .run()
            .assert_ok();
    }

    /// The address the server listens on.
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    /// The cluster's directory (`data/`, `server.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// `psql` in host `from` connecting as the role over TCP (password from
    /// [`Postgres::passfile`], never prompting, giving up connecting after 5 s), running
    /// `sql` and printing bare values (`-At`); `psql` exits 1–3 on failure.
    pub fn psql<'h>(&self, hosts: &'h Hosts, from: &str, sql: &str) -> NsCommand<'h> {
        hosts
            .cmd(from, "psql")
            .args([&self.url_without_password(), "-X", "-w", "-At"])
            .args(["-v", "ON_ERROR_STOP=1", "-c", sql])
            .env("PGPASSFILE", &self.passfile)
            .env("PGCONNECT_TIMEOUT", "5")
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `bytes` random bytes from the kernel, in hex.
pub(super) fn random_hex(bytes: usize) -> String {
    use std::io::Read;
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .unwrap();
    buf.iter().map(|b| format!("{b:02x}")).collect()
}
