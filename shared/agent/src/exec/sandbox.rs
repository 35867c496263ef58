//! The OS sandbox and supervisor every command a tool runs goes through.
//!
//! A command does not start directly: the tool starts the agent's own binary in
//! a hidden helper mode ([`HELPER_ARG`]), which confines itself and then starts
//! the command as its child. Doing this in a fresh process keeps the agent free
//! of `unsafe` `pre_exec` code, and lets one small supervisor guarantee that no
//! process a command started outlives it or the agent:
//!
//! - **Confinement** ([`SandboxPolicy`]): on Linux a Landlock ruleset (writes
//!   only beneath the allowed paths, reads everywhere except the denied
//!   secrets, optionally no TCP), on macOS a Seatbelt profile run through
//!   `/usr/bin/sandbox-exec`. `None` runs the command unconfined (`--no-sandbox`).
//! - **Supervision** (Linux): the helper is a child subreaper with a
//!   parent-death signal. When the command's shell exits it ends every process
//!   still running below it — background jobs in other process groups and
//!   double-forked daemons included, since orphans reparent to the helper — and
//!   reports how many; when the agent dies, the kernel sends the helper SIGTERM
//!   and it ends the whole tree.
//!
//! The parent-death signal fires when the *thread* that started the helper
//! exits, so callers must start commands from a thread that lives as long as
//! the agent: `roo-lead` drives its tools on the main thread of a
//! current-thread runtime (never from `spawn_blocking`).
//!
//! Tools get a [`CommandSandbox`] through their context and never learn which
//! binary they run in; hooks can start their commands the same way.

mod env;
mod git_dirs;
pub mod handoff;
mod helper;
pub mod home_sockets;
mod inside;
#[cfg(target_os = "linux")]
mod landlock;
#[cfg(target_os = "linux")]
mod namespace;
mod seatbelt;
mod settings;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use env::{
    SEALED_ENV_FD, Sealing, handed_launch, holds_url_password, is_credential_env_name,
    is_secret_env_name, scrubbed_env_names, seal_secret_env, sealed_secrets, secret_env,
};
pub use git_dirs::linked_git_dirs;
pub use helper::{
    Enforcement, HELPER_FAILED, HelperReport, LEFTOVER_GRACE, run_helper_if_requested,
};
pub use inside::{COVER_SOURCE, IN_COMMAND_ENV, inside_agent_command};
pub use seatbelt::{seatbelt_command, seatbelt_profile};
pub use settings::{SandboxSettings, default_deny_read};

/// The agent's own state under `ROO_HOME`: the team's config, inboxes, task lists, locks
/// and transcripts (reached through the team tools and the CLIs' relay), pane workers'
/// credentials in flight, every project's session transcripts, and the checkpoints a
/// rewind restores from (an agent must not rewrite its own undo). Hidden from every
/// command, and from file tools (`PermissionPolicy::hide`).
pub const TEAM_STATE_DIRS: [&str; 5] = ["teams", "tasks", "run", "projects", "checkpoints"];

/// First argument that switches `roo-lead`/`roo-worker` into the helper mode.
pub const HELPER_ARG: &str = "__roo-command-helper";

/// What a sandboxed command may touch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxPolicy {
    /// Directories (everything beneath) and files the command may write,
    /// create, rename and delete. Paths that do not exist are skipped.
    pub write: Vec<PathBuf>,
    /// Directories and files whose contents the command may not read.
    pub deny_read: Vec<PathBuf>,
    /// Whether TCP bind and connect are allowed.
    pub network: bool,
    /// Paths the namespace layer covers with an empty directory or `/dev/null`:
    /// sockets that run commands or hold keys, secrets, the agent's own state.
    #[serde(default)]
    pub hide: Vec<PathBuf>,
    /// Whether the helper builds the namespace layer before Landlock.
    #[serde(default)]
    pub namespaces: bool,
    /// Directories searched for sockets when each command starts (the temp dirs):
    /// every socket directly in one, and every directory in one that holds a socket
    /// (`tmux-<uid>`, `.X11-unix`, `ssh-*`), is hidden too — also those created
    /// after the agent started.
    #[serde(default)]
    pub scan: Vec<PathBuf>,
    /// Directories the agent searches for sockets when each command starts (the
    /// home, and a runtime dir that could not be covered whole): every socket found
    /// is added to `hide` ([`home_sockets::search`]). Not sent to the helper.
    #[serde(skip)]
    pub search: Vec<PathBuf>,
}

/// Where a policy's default paths come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyEnv {
    /// The user's home directory (`$HOME`), for `~` and the default secrets.
    pub home: Option<PathBuf>,

    /// RooCode's own state directory (`ROO_HOME`), kept out of commands' reach.
    pub roo_home: PathBuf,
    /// The system temp dirs (`/tmp`, `/var/tmp`, `$TMPDIR`).
    pub temp_dirs: Vec<PathBuf>,
    /// Sockets (or their directories) that run commands outside the sandbox or
    /// hold keys: tmux and screen servers, the D-Bus buses, Docker, the SSH agent,
    /// the user's runtime dir (`$XDG_RUNTIME_DIR`, GPG's agent).
    pub sockets: Vec<PathBuf>,
    /// Further secrets to deny reading: the team store's password file when
    /// `PGPASSFILE` names one (`~/.pgpass` is among the defaults).
    pub secrets: Vec<PathBuf>,
}

impl PolicyEnv {
    /// From the process environment.
    pub fn from_env(roo_home: &Path) -> Self {
        let mut temp_dirs = vec![PathBuf::from("/tmp"), PathBuf::from("/var/tmp")];
        temp_dirs.push(std::env::temp_dir());
        let home = roo_store::user_home();
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let sockets = escape_sockets(&SocketEnv {
            temp_dirs: &temp_dirs,
            home: home.as_deref(),
            tmux: var("TMUX"),
            tmux_tmpdir: var("TMUX_TMPDIR").map(PathBuf::from),
            xdg_runtime_dir: var("XDG_RUNTIME_DIR").map(PathBuf::from),
            dbus_session: var("DBUS_SESSION_BUS_ADDRESS"),
            ssh_auth_sock: var("SSH_AUTH_SOCK").map(PathBuf::from),
            screendir: var("SCREENDIR").map(PathBuf::from),
            pghost: var("PGHOST"),
        });
        // A team store reached through a UNIX socket: a command that reaches the socket
        // could write the team's state without the agent (its URL is a sealed secret).
        let mut sockets = sockets;
        let lookup = |name: &str| secret_env(name);
        if let Ok(store) = roo_store::StoreChoice::resolve_in(roo_home, &lookup) {
            sockets.extend(store.socket_dirs());
        }
        let secrets = var("PGPASSFILE").map(PathBuf::from).into_iter().collect();
        Self {
            home,
            roo_home: roo_home.to_path_buf(),
            temp_dirs,
            sockets,
            secrets,
        }
    }
}

/// Where [`escape_sockets`] looks.
pub struct SocketEnv<'a> {
    /// The system temp dirs.
    pub temp_dirs: &'a [PathBuf],
    /// The user's home directory.
    pub home: Option<&'a Path>,
    /// `$TMUX`: the tmux server's socket.
    pub tmux: Option<OsString>,
    /// `$TMUX_TMPDIR`: where tmux keeps its sockets.
    pub tmux_tmpdir: Option<PathBuf>,
    /// `$XDG_RUNTIME_DIR`: the user's runtime sockets.
    pub xdg_runtime_dir: Option<PathBuf>,
    /// `$DBUS_SESSION_BUS_ADDRESS`: the session bus.
    pub dbus_session: Option<OsString>,
    /// `$SSH_AUTH_SOCK`: the ssh agent.
    pub ssh_auth_sock: Option<PathBuf>,
    /// `$SCREENDIR`: GNU screen's sockets.
    pub screendir: Option<PathBuf>,
    /// `$PGHOST`: host names, or socket directories (absolute paths), comma-separated.
    pub pghost: Option<OsString>,
}

/// The sockets a confined command must not reach, and the directories holding
/// them: every tmux server's directory (`tmux-<uid>` in each temp dir and in
/// `$TMUX_TMPDIR`, the one `$TMUX` names), screen's, the D-Bus buses, Docker's and
/// Podman's, the SSH agent's, the user's runtime directories, and the database
/// servers' socket directories ([`DATABASE_SOCKET_DIRS`], those `$PGHOST` names): a
/// server's `peer` or `trust` rule lets whoever reaches its socket in.
pub fn escape_sockets(env: &SocketEnv<'_>) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut found = Vec::new();
    let mut tmux_parents: Vec<PathBuf> = env.temp_dirs.to_vec();
    tmux_parents.extend(env.tmux_tmpdir.iter().cloned());
    for dir in &tmux_parents {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_name().as_bytes().starts_with(b"tmux-") {
                    found.push(entry.path());
                }
            }
        }
    }
    // `$TMUX` is `socket,pid,session`; the socket's directory may be anywhere.
    if let Some(tmux) = &env.tmux {
        let socket = tmux.as_bytes().split(|&b| b == b',').next().unwrap_or(&[]);
        let socket = Path::new(std::ffi::OsStr::from_bytes(socket));
        found.push(socket_cover(socket, env));
    }
    for dir in ["/run/screen", "/var/run/screen"] {
        found.push(PathBuf::from(dir));
    }
    if let Some(dir) = &env.screendir {
        found.push(dir.clone());
    }
    if let Some(home) = env.home {
        found.push(home.join(".screen"));
    }
    if let Some(address) = &env.dbus_session {
        for part in address.as_bytes().split(|&b| b == b';') {
            for field in part.split(|&b| b == b',' || b == b':') {
                if let Some(path) = field.strip_prefix(b"path=") {
                    let path = Path::new(std::ffi::OsStr::from_bytes(path));
                    found.push(socket_cover(path, env));
                }
            }
        }
    }
    for path in [
        "/run/dbus",
        "/var/run/dbus",
        "/run/docker.sock",
        "/var/run/docker.sock",
        "/run/docker",
        "/var/run/docker",
        "/run/containerd",
        "/var/run/containerd",
        "/run/podman",
        "/var/run/podman",
        "/run/crio",
        "/var/run/crio",
        // libvirt, LXD and Incus: each daemon's socket is host root to whoever reaches it.
        "/run/libvirt",
        "/var/run/libvirt",
        "/var/snap/lxd/common/lxd",
        "/var/lib/lxd",
        "/var/lib/incus",
        "/run/incus",
        "/run/user",
        "/run/systemd/private",
        "/run/systemd/userdb",
    ] {
        found.push(PathBuf::from(path));
    }
    found.extend(DATABASE_SOCKET_DIRS.iter().map(PathBuf::from));
    if let Some(hosts) = &env.pghost {
        for host in hosts.as_bytes().split(|&b| b == b',') {
            let host = Path::new(std::ffi::OsStr::from_bytes(host));
            if host.is_absolute() {
                found.push(host.to_path_buf());
            }
        }
    }
    if let Some(dir) = &env.xdg_runtime_dir {
        found.push(dir.clone());
    }
    if let Some(socket) = &env.ssh_auth_sock {
        found.push(socket_cover(socket, env));
    }
    if let Some(home) = env.home {
        for rel in [
            ".docker/run",
            ".local/share/wezterm",
            ".emacs.d/server",
            ".config/emacs/server",
            ".local/share/kitty",
        ] {
            found.push(home.join(rel));
        }
    }
    found.retain(|p| p.is_absolute() && p != Path::new("/"));
    dedup(&mut found);
    found
}

/// Where PostgreSQL, MySQL/MariaDB and Redis servers put their sockets by default
/// (`/var/lib/mysql` holds MySQL's on some distributions; a command needs nothing
/// else there).
pub const DATABASE_SOCKET_DIRS: &[&str] = &[
    "/run/postgresql",
    "/var/run/postgresql",
    "/run/mysqld",
    "/var/run/mysqld",
    "/var/lib/mysql",
    "/run/redis",
    "/var/run/redis",
];

/// What to cover for a socket: its directory when that holds nothing else the
/// command needs, the socket alone when it sits directly in a temp dir or the home.
fn socket_cover(socket: &Path, env: &SocketEnv<'_>) -> PathBuf {
    match socket.parent() {
        Some(dir)
            if dir != Path::new("/")
                && !env.temp_dirs.iter().any(|t| t == dir)
                && env.home != Some(dir) =>
        {
            dir.to_path_buf()
        }
        _ => socket.to_path_buf(),
    }
}

/// Character devices and device dirs a shell writes to.
pub const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

impl SandboxPolicy {
    /// The policy for commands working in `root` (the project, or a teammate's
    /// worktree): writes to `root`, the git directories outside it that a
    /// commit in a linked worktree or submodule writes ([`linked_git_dirs`]),
    /// the temp dirs, the shell's devices, the team store and
    /// `settings.allow_write`; reads denied on the default secrets and
    /// `settings.deny_read`.
    pub fn for_root(root: &Path, settings: &SandboxSettings, env: &PolicyEnv) -> Self {
        let mut write = vec![root.to_path_buf()];
        write.extend(linked_git_dirs(root));
        write.extend(env.temp_dirs.iter().cloned());
        write.extend(WRITABLE_DEVICES.iter().map(PathBuf::from));
        write.extend(settings.allow_write.iter().cloned());
        let mut deny_read = default_deny_read(env.home.as_deref(), &env.roo_home);
        deny_read.extend(settings.deny_read.iter().cloned());
        deny_read.extend(env.secrets.iter().cloned());
        // The agent's own state: the team's config, inboxes, task lists, locks and
        // transcripts (the CLIs reach them through the agent's relay), pane
        // workers' credentials in flight, every project's session transcripts.
        for dir in TEAM_STATE_DIRS {
            deny_read.push(env.roo_home.join(dir));
        }
        dedup(&mut write);
        dedup(&mut deny_read);
        let mut hide = env.sockets.clone();
        hide.extend(deny_read.iter().cloned());
        dedup(&mut hide);
        // A cover over a write root would take the root away: what it would have
        // covered is searched for sockets instead, as the home is.
        let (uncovered, hide): (Vec<PathBuf>, Vec<PathBuf>) = hide
            .into_iter()
            .partition(|h| write.iter().any(|w| w.starts_with(h)));
        let mut search: Vec<PathBuf> = env.home.iter().cloned().collect();
        search.extend(uncovered.into_iter().filter(|p| p != Path::new("/")));
        Self {
            write,
            deny_read,
            network: settings.network,
            hide,
            namespaces: settings.namespaces,
            scan: {
                let mut scan = env.temp_dirs.clone();
                scan.push(PathBuf::from("/dev/shm"));
                scan
            },
            search,
        }
    }
}

impl SandboxPolicy {
    /// Hides `path` (the namespace layer) from commands started after it exists;
    /// with `unreadable`, Landlock refuses to read it too. Landlock cannot subtract
    /// a path from a directory grant, so a denied path makes entries created later
    /// beside it unreadable for that command: a directory the command adds to
    /// (the lead's worktrees directory) must not hold one.
    pub fn conceal(&mut self, path: PathBuf, unreadable: bool) {
        if unreadable && !self.deny_read.contains(&path) {
            self.deny_read.push(path.clone());
        }
        if !self.hide.contains(&path) {
            self.hide.push(path);
        }
    }
}

fn dedup(paths: &mut Vec<PathBuf>) {
    let mut seen = std::collections::BTreeSet::new();
    paths.retain(|p| seen.insert(p.clone()));
}

/// How commands are started: through `helper` (an executable that honours
/// [`HELPER_ARG`]), confined by `policy` unless it is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSandbox {
    /// The executable that starts each command (it honours [`HELPER_ARG`]).
    pub helper: PathBuf,
    /// What confines commands; `None`: not confined.
    pub policy: Option<SandboxPolicy>,
}

impl CommandSandbox {
    /// How an agent working in `root` starts its commands: through `helper`
    /// (normally the running executable), confined unless `settings` turn the
    /// sandbox off or this machine has none. Returns notices for the user: the
    /// sandbox is off or unavailable, project settings were ignored.
    pub fn for_agent(
        root: &Path,
        settings: &SandboxSettings,
        env: &PolicyEnv,
        helper: PathBuf,
    ) -> (Self, Vec<String>) {
        let mut notices = Vec::new();
        if !settings.ignored.is_empty() {
            notices.push(format!(
                "ignored sandbox settings that only your user config may widen: {}",
                settings.ignored.join(", ")
            ));
        }
        let policy = if settings.enabled {
            match availability() {
                Ok(_) => {
                    // What commands must not see has to exist before the first one
                    // starts: a cover goes only on a path that is there.
                    for dir in TEAM_STATE_DIRS {
                        use std::os::unix::fs::DirBuilderExt;
                        let _ = std::fs::DirBuilder::new()
                            .recursive(true)
                            .mode(0o700)
                            .create(env.roo_home.join(dir));
                    }
                    let mut policy = SandboxPolicy::for_root(root, settings, env);
                    let layers = Layers::probe(settings, &helper);
                    policy.namespaces = layers.namespaces.is_ok();
                    if let Some(notice) = layers.notice() {
                        notices.push(notice);
                    }
                    Some(policy)
                }
                Err(why) => {
                    notices.push(format!(
                        "the OS sandbox is unavailable ({why}): commands run unconfined"
                    ));
                    None
                }
            }
        } else {
            notices.push(format!(
                "the OS sandbox is off ({}): commands can write anywhere you can and read your \
                 credentials",
                settings
                    .disabled_by
                    .as_deref()
                    .unwrap_or("by configuration")
            ));
            None
        };
        (Self { helper, policy }, notices)
    }
}

/// The shortest store URL or password whose value is scrubbed from commands'
/// environment whatever variable holds it.
const MIN_SCRUBBED_LEN: usize = 8;

/// Everything an agent's tool context needs to start commands: the sandbox,
/// the variables to remove and to add, and notices for the user.
#[derive(Debug, Clone)]
pub struct CommandSetup {
    /// How commands are started.
    pub sandbox: CommandSandbox,
    /// Names removed from commands' environment (API keys, [`SEALED_ENV_FD`]).
    pub env_remove: Vec<String>,
    /// Sealed keys the user passes on with `sandbox.pass_env`.
    pub env_add: Vec<(String, String)>,
    /// What the user should be told about the sandbox (e.g. that it is off).
    pub notices: Vec<String>,
}

impl CommandSetup {
    /// For an agent working in `root`, with `settings`, the provider's `api_key`
    /// (scrubbed whatever variable holds it) and `helper` (normally the running
    /// executable).
    pub fn for_agent(
        settings: &SandboxSettings,
        root: &Path,
        roo_home: &Path,
        api_key: Option<&str>,
        helper: PathBuf,
    ) -> Self {
        let env = PolicyEnv::from_env(roo_home);
        let (sandbox, notices) = CommandSandbox::for_agent(root, settings, &env, helper);
        let mut env_remove = removed_env_names(settings, roo_home, api_key);
        env_remove.push(SEALED_ENV_FD.to_string());
        // Sealed keys left the environment; the user may pass some on.
        let env_add = sealed_secrets()
            .into_iter()
            .filter(|(name, _)| settings.pass_env.contains(name))
            .collect();
        Self {
            sandbox,
            env_remove,
            env_add,
            notices,
        }
    }
}

/// The names of this process's variables that commands do not get (see
/// [`scrubbed_env_names`]), for an agent with `settings` using `api_key`.
pub fn removed_env_names(
    settings: &SandboxSettings,
    roo_home: &Path,
    api_key: Option<&str>,
) -> Vec<String> {
    // The team store's URL and password go like the API key: whatever variable
    // holds them (a `DATABASE_URL` the user set `ROO_STORE` from). A password too
    // short to be told from an ordinary value (`SHLVL=1`) is left to its name.
    let lookup = |name: &str| secret_env(name);
    let mut secrets: Vec<String> = roo_store::StoreChoice::resolve_in(roo_home, &lookup)
        .map(|store| store.secret_values())
        .unwrap_or_default();
    secrets.extend(secret_env("PGPASSWORD"));
    secrets.retain(|value| value.len() >= MIN_SCRUBBED_LEN);
    secrets.extend(api_key.map(str::to_string));
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    scrubbed_env_names(std::env::vars(), &secrets, &settings.pass_env)
}

/// What the helper is told; the first argument after [`HELPER_ARG`], as JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HelperSpec {
    pub(crate) policy: Option<SandboxPolicy>,
    /// Pid of the agent that started the helper; if the helper's parent is
    /// already another process, the agent died before the parent-death signal
    /// was armed, and the command is not started.
    pub(crate) parent: u32,
    /// The command talks on the helper's stdin and stdout (an MCP server): it
    /// inherits stdin instead of getting it closed, and no report is written there.
    #[serde(default)]
    pub(crate) stdio: bool,
    /// The caller sends the agent's relay descriptor over the helper's stdin right
    /// after starting it; the command gets it as [`roo_store::relay::ENV_FD`].
    #[serde(default)]
    pub(crate) relay: bool,
}

impl CommandSandbox {
    /// The helper executable and its arguments for running `program args` in
    /// the sandbox. The helper reports how the command ended on its stdin,
    /// which the caller must make the write end of a pipe (see [`HelperReport`]).
    pub fn wrap(&self, program: &Path, args: &[OsString]) -> (PathBuf, Vec<OsString>) {
        self.wrap_relayed(program, args, false)
    }

    /// [`CommandSandbox::wrap`], with `relay`: the caller sends the agent's relay
    /// descriptor on the helper's stdin ([`roo_store::relay::send_fd`]).
    pub fn wrap_relayed(
        &self,
        program: &Path,
        args: &[OsString],
        relay: bool,
    ) -> (PathBuf, Vec<OsString>) {
        self.wrap_spec(
            HelperSpec {
                policy: self.policy.clone(),
                parent: std::process::id(),
                stdio: false,
                relay,
            },
            program,
            args,
        )
    }

    /// The helper executable and its arguments for a long-running server that
    /// talks on stdin and stdout (an MCP server): supervised like a command (its
    /// whole tree ends when the helper is signalled or the agent dies) but not
    /// confined — servers started by `npx` and the like write caches under the
    /// home directory — and with stdin passed through. The helper writes no
    /// report; the caller reads the server's end from the helper's exit status.
    pub fn wrap_server(&self, program: &Path, args: &[OsString]) -> (PathBuf, Vec<OsString>) {
        self.wrap_spec(
            HelperSpec {
                policy: None,
                parent: std::process::id(),
                stdio: true,
                relay: false,
            },
            program,
            args,
        )
    }

    fn wrap_spec(
        &self,
        mut spec: HelperSpec,
        program: &Path,
        args: &[OsString],
    ) -> (PathBuf, Vec<OsString>) {
        // Sockets under the home and an uncovered runtime dir, as they are now (only the
        // namespace layer can cover them).
        if let Some(policy) = spec.policy.as_mut()
            && policy.namespaces
            && !policy.search.is_empty()
        {
            let found = home_sockets::search(&policy.search, &policy.hide, &policy.write);
            policy.hide.extend(found.sockets);
            // Cut short, it fails closed: what it did not search is covered whole.
            if let Some(why) = &found.cut_short {
                static TOLD: std::sync::Once = std::sync::Once::new();
                TOLD.call_once(|| {
                    // The agent's log (stderr would break the terminal UI).
                    tracing::warn!(
                        "the search for sockets in the home was cut short ({why}): {} \
                         unsearched directories are hidden from commands, {} left reachable",
                        found.unsearched.len(),
                        found.left_reachable
                    );
                });
            }
            policy.hide.extend(found.unsearched);
        }
        // Serialising plain paths and bools cannot fail; an empty spec would be
        // refused by the helper, so nothing runs unconfined by accident.
        let spec = serde_json::to_string(&spec).unwrap_or_default();
        let mut argv = vec![OsString::from(HELPER_ARG), OsString::from(spec)];
        argv.push(program.as_os_str().to_os_string());
        argv.extend(args.iter().cloned());
        (self.helper.clone(), argv)
    }
}

/// What confines commands on this machine, with the reasons for what is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers {
    /// The OS mechanism (`Landlock`, `Seatbelt`) or why there is none.
    pub os: Result<&'static str, String>,
    /// The namespace layer (Linux) or why it is not used.
    pub namespaces: Result<(), String>,
}

/// Exit code of a namespace probe that could not build the layer.
const PROBE_FAILED: u8 = 3;

impl Layers {
    /// The layers an agent with `settings` gets, starting `helper` once in its
    /// probe mode (cached per process and helper).
    pub fn probe(settings: &SandboxSettings, helper: &Path) -> Self {
        let os = availability();
        let namespaces = if !settings.enabled {
            Err("the sandbox is off".to_string())
        } else if !settings.namespaces {
            Err("turned off by `sandbox: {namespaces: false}` in your config".to_string())
        } else if !cfg!(target_os = "linux") {
            Err("namespaces are a Linux layer".to_string())
        } else {
            probe_namespaces(helper)
        };
        Self { os, namespaces }
    }

    /// The warning to show at start when the namespace layer is missing on
    /// Linux, naming what Landlock alone leaves uncontained.
    pub fn notice(&self) -> Option<String> {
        if !cfg!(target_os = "linux") || self.os.is_err() {
            return None;
        }
        let why = self.namespaces.as_ref().err()?;
        Some(format!(
            "the sandbox's namespace layer is not in force ({why}): commands are confined by \
             Landlock alone, which does not keep them from UNIX sockets (a tmux server, D-Bus, \
             Docker, the SSH and GPG agents, database servers, any socket in your home) nor from changing the permissions, owner, times and \
             extended attributes of files outside the project"
        ))
    }

    /// One line per layer, for `--print-sandbox`.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        match &self.namespaces {
            Ok(()) => lines.push(
                "namespaces: in force (user + mount namespace: read-only file system outside \
             the write roots, sockets and secrets hidden, mounts locked)"
                    .to_string(),
            ),
            Err(why) => lines.push(format!("namespaces: not in force ({why})")),
        }
        match &self.os {
            Ok(name) => lines.push(format!("{name}: in force")),
            Err(why) => lines.push(format!("OS sandbox: unavailable ({why})")),
        }
        lines
    }
}

/// Starts the namespace probe of `helper` ([`Layers::probe`]) on a thread of its own, at
/// a process's start: the agent built next finds its answer ready, or waits for this one
/// run (never a second), instead of starting the helper on its own path. Nothing is
/// decided here; an agent whose sandbox is off just never asks.
pub fn probe_ahead(helper: PathBuf) {
    if cfg!(target_os = "linux") {
        std::thread::spawn(move || probe_namespaces(&helper));
    }
}

/// Whether `helper` can build the namespace layer here (one probe per helper path and
/// process; a caller while it runs waits for it).
fn probe_namespaces(helper: &Path) -> Result<(), String> {
    use std::sync::{Arc, Mutex, OnceLock};
    type Probed = Arc<OnceLock<Result<(), String>>>;
    static CACHE: Mutex<Vec<(PathBuf, Probed)>> = Mutex::new(Vec::new());
    let probed = match CACHE.lock() {
        Ok(mut cache) => match cache.iter().find(|(h, _)| h == helper) {
            Some((_, probed)) => probed.clone(),
            None => {
                let probed = Probed::default();
                cache.push((helper.to_path_buf(), probed.clone()));
                probed
            }
        },
        Err(_) => Probed::default(),
    };
    probed.get_or_init(|| start_probe(helper)).clone()
}

/// One start of `helper` in its probe mode.
fn start_probe(helper: &Path) -> Result<(), String> {
    match std::process::Command::new(helper)
        .arg(PROBE_ARG)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
    {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stderr).trim().to_string();
            Err(if text.is_empty() {
                format!("the probe exited with {}", out.status)
            } else {
                text
            })
        }
        Err(e) => Err(format!("the probe could not start: {e}")),
    }
}

/// First argument that switches the agent's binary into the namespace probe.
pub const PROBE_ARG: &str = "__roo-namespace-probe";

/// Runs the namespace probe if this process was started for it (see
/// [`run_helper_if_requested`]).
pub(crate) fn run_probe() -> std::process::ExitCode {
    #[cfg(target_os = "linux")]
    {
        match namespace::probe() {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{e}");
                std::process::ExitCode::from(PROBE_FAILED)
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("namespaces are a Linux layer");
        std::process::ExitCode::from(PROBE_FAILED)
    }
}

/// Whether the OS sandbox can confine commands on this machine; the error says
/// why not (shown once, then commands run unconfined).
pub fn availability() -> Result<&'static str, String> {
    #[cfg(target_os = "linux")]
    {
        landlock::probe()
    }
    #[cfg(target_os = "macos")]
    {
        if Path::new(seatbelt::SANDBOX_EXEC).is_file() {
            Ok("Seatbelt")
        } else {
            Err(format!("{} is missing", seatbelt::SANDBOX_EXEC))
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        Err("no OS sandbox is implemented for this platform".to_string())
    }
}

/// Fields of one `/proc/<pid>/stat` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub(crate) state: char,
    pub(crate) ppid: i32,
    pub(crate) pgrp: i32,
}

/// Parses a `/proc/<pid>/stat` line. The command name may contain spaces and
/// parentheses, so fields are counted from the last `)`.
pub(crate) fn proc_stat(stat: &str) -> Option<ProcStat> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(ProcStat { state, ppid, pgrp })
}

#[cfg(test)]
mod tests;
