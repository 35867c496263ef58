//! Handing an agent's environment to a process another program starts (a `roo-worker`
//! in a tmux pane) without putting a secret on any command line or in any file.
//!
//! A pane's process is started by the terminal multiplexer's server, so it gets the
//! server's environment, not the lead's; and `tmux respawn-pane -e KEY=value` would put
//! the value on tmux's argv, where every user of the machine can read it. Instead the
//! lead offers its environment on a UNIX socket ([`offer_handoff`]) in a 0700 directory
//! it owns under `ROO_HOME` (hidden from every agent's commands), and names the socket
//! and a one-time 128-bit token in the pane's command environment ([`HANDOFF_ENV`],
//! `<socket>#<token>`). Reading the socket yields nothing: the environment is written
//! only to the one connection that presents the token, after which the socket is
//! removed (also when nobody took it in time). The worker's first act
//! ([`enter_handoff`]) checks the directory (ours, private), connects, takes the
//! environment and re-executes itself with the lead's variables: API keys go through
//! the sealed document of [`super::seal_secret_env`] (never into an environment block), the
//! rest into the environment. The pane's own terminal variables ([`TERMINAL_VARS`]) are
//! kept; everything else is the lead's. Besides the environment, an offer may carry a
//! launch document (a worker's prompt and, on another host, its project config), which
//! the re-executed image reads from the same sealed document ([`super::handed_launch`]):
//! never on a command line, where every process of the machine could read it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::env::{is_secret_env_name, sealed_secrets};

/// Variable naming the handoff file in the started process's environment.
pub const HANDOFF_ENV: &str = "ROO_ENV_HANDOFF";

/// Variables that describe the terminal a process runs in: the pane's values are kept,
/// the lead's are not handed over.
pub const TERMINAL_VARS: &[&str] = &[
    "TERM",
    "TMUX",
    "TMUX_PANE",
    "COLORTERM",
    "TERM_PROGRAM",
    "TERM_PROGRAM_VERSION",
    "ITERM_SESSION_ID",
    "ITERM_PROFILE",
    "LC_TERMINAL",
    "LC_TERMINAL_VERSION",
    "COLUMNS",
    "LINES",
    "WINDOWID",
    "STY",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
];

/// Largest handoff file read.
const MAX_HANDOFF: u64 = 1024 * 1024;

/// Why a handoff could not be written or taken. Read after "failed to ".
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    #[error("create the private handoff directory {path}: {source}")]
    /// The handoff directory could not be created.
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why creating it failed.
        source: std::io::Error,
    },
    #[error(
        "use the handoff directory {path}: {reason}; remove it (roo recreates it with mode 0700)"
    )]
    /// The handoff directory is not private to this user.
    UnsafeDir {
        /// The directory.
        path: PathBuf,
        /// What is unsafe about it.
        reason: String,
    },
    #[error("write the handoff file {path}: {source}")]
    /// The handoff file could not be written.
    Write {
        /// The file.
        path: PathBuf,
        /// Why writing failed.
        source: std::io::Error,
    },
    #[error("take the environment handed over in {path}: {reason}")]
    /// The handed environment could not be taken.
    Take {
        /// The socket.
        path: PathBuf,
        /// Why it could not be taken.
        reason: String,
    },
}

/// The environment of this process as a handoff: every variable but the terminal's
/// ([`TERMINAL_VARS`]) and [`HANDOFF_ENV`], plus the API keys this process sealed away.
pub fn current_env_for_handoff() -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars()
        .filter(|(name, _)| !TERMINAL_VARS.contains(&name.as_str()) && name != HANDOFF_ENV)
        .filter(|(name, _)| name != super::SEALED_ENV_FD)
        .collect();
    env.extend(sealed_secrets());
    env
}

/// A handoff on offer: the socket (removed once taken or expired) and what the
/// started process's [`HANDOFF_ENV`] must hold.
#[derive(Debug, Clone)]
pub struct Offer {
    /// The socket the started process takes the environment from.
    pub socket: PathBuf,
    /// The value of [`HANDOFF_ENV`] for the started process.
    pub env_value: String,
}

/// Offers `env` on a new socket in `dir` (created with mode 0700 if missing; an
/// existing one must be a directory of this user that nobody else can enter) for at
/// most `wait`, with `launch` (what the started process reads with
/// [`super::handed_launch`]). The name is `label` plus 64 random bits. A thread serves
/// it: the one connection that sends the token gets the environment; wrong tokens get
/// nothing.
pub fn offer_handoff(
    dir: &Path,
    label: &str,
    env: &BTreeMap<String, String>,
    launch: Option<&serde_json::Value>,
    wait: Duration,
) -> Result<Offer, HandoffError> {
    private_dir(dir)?;
    let doc = match launch {
        Some(launch) => serde_json::json!({ "env": env, "launch": launch }),
        None => serde_json::json!({ "env": env }),
    };
    let text = serde_json::to_vec(&doc).map_err(|e| HandoffError::Write {
        path: dir.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    let label: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let random = || {
        roo_store::random_u64().map_err(|source| HandoffError::Write {
            path: dir.to_path_buf(),
            source,
        })
    };
    let token = format!("{:016x}{:016x}", random()?, random()?);
    for _ in 0..8 {
        let path = dir.join(format!("{label}-{:016x}.sock", random()?));
        match within_sun_len(&path, |p| UnixListener::bind(p)) {
            Ok(listener) => {
                let write_error = |source| HandoffError::Write {
                    path: path.clone(),
                    source,
                };
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .and_then(|()| listener.set_nonblocking(true))
                    .map_err(|e| {
                        let _ = std::fs::remove_file(&path);
                        write_error(e)
                    })?;
                let (socket, secret) = (path.clone(), token.clone());
                std::thread::Builder::new()
                    .name("roo-handoff".to_string())
                    .spawn(move || serve_offer(&listener, &socket, &secret, &text, wait))
                    .map_err(|e| {
                        let _ = std::fs::remove_file(&path);
                        write_error(e)
                    })?;
                let env_value = format!("{}#{token}", path.display());
                return Ok(Offer {
                    socket: path,
                    env_value,
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(source) => return Err(HandoffError::Write { path, source }),
        }
    }
    Err(HandoffError::Write {
        path: dir.to_path_buf(),
        source: std::io::Error::other("no free socket name after 8 tries"),
    })
}

/// Answers connections until one presents `token` (it gets `text`) or `wait` is
/// over; then removes the socket.
fn serve_offer(listener: &UnixListener, socket: &Path, token: &str, text: &[u8], wait: Duration) {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        match listener.accept() {
            Ok((mut stream, _)) => {
                if stream.set_nonblocking(false).is_err()
                    || stream
                        .set_read_timeout(Some(Duration::from_secs(2)))
                        .is_err()
                {
                    continue;
                }
                let mut sent = [0u8; 64];
                let mut got = 0;
                while got < token.len() {
                    match stream.read(&mut sent[got..token.len()]) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got += n,
                    }
                }
                if got == token.len() && same(&sent[..got], token.as_bytes()) {
                    let _ = stream.write_all(text);
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                wait_for_connection(listener, deadline);
            }
            Err(_) => break,
        }
        // The socket was removed (the spawn failed): nobody can connect any more.
        if !socket.exists() {
            return;
        }
    }
    let _ = std::fs::remove_file(socket);
}

/// Sleeps until `listener` has a connection waiting, at most 100 ms (so a removed socket
/// and the deadline are noticed) and never past `deadline`: a worker connecting is
/// answered at once, not at the next tick of a timer.
fn wait_for_connection(listener: &UnixListener, deadline: Instant) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let left = deadline.saturating_duration_since(Instant::now());
    let ms = u16::try_from(left.min(Duration::from_millis(100)).as_millis()).unwrap_or(100);
    let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    if poll(&mut fds, PollTimeout::from(ms)).is_err() {
        // EINTR or worse: do not spin.
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `f` (bind or connect) on `path`, or, where `path` is too long for a socket
/// address (about 100 bytes) on Linux, on the same file reached through a
/// descriptor of its directory (`/proc/self/fd/N/name`).
fn within_sun_len<T>(
    path: &Path,
    f: impl FnOnce(&Path) -> std::io::Result<T>,
) -> std::io::Result<T> {
    use std::os::unix::ffi::OsStrExt;
    const SUN_PATH_MAX: usize = 100;
    if cfg!(not(target_os = "linux")) || path.as_os_str().as_bytes().len() < SUN_PATH_MAX {
        return f(path);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return f(path);
    };
    let dir = std::fs::File::open(dir)?;
    use std::os::fd::AsRawFd;
    let short = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    f(&short)
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Makes sure `dir` is a private directory of this user: created 0700 if missing; an
/// existing one must not be a link, must be ours, and is made 0700 if it is looser.
pub fn private_dir(dir: &Path) -> Result<(), HandoffError> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|source| HandoffError::Dir {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(HandoffError::Dir {
                path: dir.to_path_buf(),
                source,
            });
        }
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|source| HandoffError::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    let unsafe_dir = |reason: &str| HandoffError::UnsafeDir {
        path: dir.to_path_buf(),
        reason: reason.to_string(),
    };
    if !meta.file_type().is_dir() {
        return Err(unsafe_dir("it is not a directory (a symbolic link?)"));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(unsafe_dir("it belongs to another user"));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| HandoffError::Dir {
                path: dir.to_path_buf(),
                source,
            },
        )?;
    }
    Ok(())
}

/// What a handoff carried.
#[derive(Debug, Clone, PartialEq)]
pub struct Handed {
    /// The environment variables handed over.
    pub env: BTreeMap<String, String>,
    /// What was handed over beside the environment, if anything.
    pub launch: Option<serde_json::Value>,
}

/// Takes the environment offered at `value` (`<socket>#<token>`, [`offer_handoff`])
/// after checking that the socket's directory is a private directory of this user.
pub fn take_handoff(value: &str) -> Result<Handed, HandoffError> {
    let (socket, token) = value.rsplit_once('#').unwrap_or((value, ""));
    let path = Path::new(socket);
    let take = |reason: String| HandoffError::Take {
        path: path.to_path_buf(),
        reason,
    };
    if !path.is_absolute() {
        return Err(take("the path is not absolute".into()));
    }
    if token.is_empty() {
        return Err(take("it carries no token".into()));
    }
    let me = nix::unistd::geteuid().as_raw();
    let dir = path
        .parent()
        .ok_or_else(|| take("the path has no directory".into()))?;
    let dir_meta =
        std::fs::symlink_metadata(dir).map_err(|e| take(format!("its directory: {e}")))?;
    if !dir_meta.file_type().is_dir() || dir_meta.uid() != me || dir_meta.mode() & 0o077 != 0 {
        return Err(take(
            "its directory is not a private directory of this user (mode 0700)".into(),
        ));
    }
    let mut stream =
        within_sun_len(path, |p| UnixStream::connect(p)).map_err(|e| take(e.to_string()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .and_then(|()| stream.write_all(token.as_bytes()))
        .map_err(|e| take(e.to_string()))?;
    let mut text = Vec::new();
    Read::by_ref(&mut stream)
        .take(MAX_HANDOFF + 1)
        .read_to_end(&mut text)
        .map_err(|e| take(e.to_string()))?;
    if text.is_empty() {
        return Err(take("the lead handed nothing over (a wrong token?)".into()));
    }
    if text.len() as u64 > MAX_HANDOFF {
        return Err(take("it is larger than 1 MiB".into()));
    }
    #[derive(serde::Deserialize)]
    struct Doc {
        env: BTreeMap<String, String>,
        #[serde(default)]
        launch: Option<serde_json::Value>,
    }
    let doc: Doc = serde_json::from_slice(&text).map_err(|e| take(e.to_string()))?;
    if let Some(bad) = doc
        .env
        .keys()
        .find(|k| k.is_empty() || k.contains('=') || k.contains('\0'))
    {
        return Err(take(format!("invalid variable name {bad:?}")));
    }
    if doc.env.values().any(|v| v.contains('\0')) {
        return Err(take("a value contains a NUL byte".into()));
    }
    Ok(Handed {
        env: doc.env,
        launch: doc.launch,
    })
}

/// Call first thing in `main`, while the process has one thread. Without
/// [`HANDOFF_ENV`]: returns `None` and does nothing. With it: takes the file
/// ([`take_handoff`]) and re-executes this program with the same arguments, the pane's
/// [`TERMINAL_VARS`], the handed-over variables in the environment, and the API keys
/// among them sealed (read back by [`super::secret_env`]). Returns only on failure,
/// with the error to print; the caller must then exit rather than run without its
/// environment.
pub fn enter_handoff() -> Option<String> {
    let value = std::env::var_os(HANDOFF_ENV)?;
    let Handed { env, launch } = match take_handoff(&value.to_string_lossy()) {
        Ok(handed) => handed,
        Err(e) => return Some(format!("failed to {e}")),
    };
    let mut plain = BTreeMap::new();
    let mut secrets = BTreeMap::new();
    for (name, value) in env {
        if is_secret_env_name(&name) {
            secrets.insert(name, value);
        } else {
            plain.insert(name, value);
        }
    }
    let keep: Vec<(String, String)> = std::env::vars()
        .filter(|(name, _)| TERMINAL_VARS.contains(&name.as_str()))
        .collect();
    plain.extend(keep);
    super::env::reexec_with(&secrets, Some(&plain), launch).err()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_handoff_goes_only_to_the_token_once_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let hand = dir.path().join("run").join("handoff");
        let vars = env(&[("OPENAI_API_KEY", "sk-canary"), ("ROO_HOME", "/h")]);
        let offer =
            offer_handoff(&hand, "crew+alice", &vars, None, Duration::from_secs(10)).unwrap();
        assert_eq!(std::fs::metadata(&hand).unwrap().mode() & 0o777, 0o700);
        let name = offer.socket.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("crew_alice-"), "{name}");
        // Reading the path yields nothing; a wrong token gets nothing.
        assert!(std::fs::read(&offer.socket).is_err());
        let wrong = format!("{}#{}", offer.socket.display(), "0".repeat(32));
        assert!(take_handoff(&wrong).is_err());
        assert_eq!(take_handoff(&offer.env_value).unwrap().env, vars);
        let start = Instant::now();
        while offer.socket.exists() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!offer.socket.exists(), "the socket is removed once taken");
        assert!(take_handoff(&offer.env_value).is_err(), "taken only once");
    }

    #[test]
    fn a_launch_document_goes_with_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let hand = dir.path().join("handoff");
        let vars = env(&[("A", "1")]);
        let launch = serde_json::json!({ "prompt": "claim task 1" });
        let offer =
            offer_handoff(&hand, "l", &vars, Some(&launch), Duration::from_secs(10)).unwrap();
        let handed = take_handoff(&offer.env_value).unwrap();
        assert_eq!(handed.env, vars);
        assert_eq!(handed.launch, Some(launch));
    }

    #[test]
    fn an_offer_nobody_takes_expires_and_a_loose_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let hand = dir.path().join("handoff");
        let offer = offer_handoff(
            &hand,
            "x",
            &env(&[("A", "1")]),
            None,
            Duration::from_millis(50),
        )
        .unwrap();
        let start = Instant::now();
        while offer.socket.exists() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!offer.socket.exists(), "an expired offer is removed");
        assert!(take_handoff(&offer.env_value).is_err());

        // A directory others can enter is refused when taking, tightened when offering.
        let offer = offer_handoff(&hand, "y", &env(&[]), None, Duration::from_secs(10)).unwrap();
        std::fs::set_permissions(&hand, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = take_handoff(&offer.env_value).unwrap_err().to_string();
        assert!(err.contains("private directory"), "{err}");
        offer_handoff(&hand, "z", &env(&[]), None, Duration::from_millis(10)).unwrap();
        assert_eq!(std::fs::metadata(&hand).unwrap().mode() & 0o777, 0o700);
        assert!(take_handoff("relative.sock#abc").is_err());
        assert!(
            take_handoff(&offer.socket.display().to_string()).is_err(),
            "no token"
        );
    }

    #[test]
    fn a_handoff_works_under_a_directory_too_deep_for_a_socket_address() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir
            .path()
            .join("d".repeat(60))
            .join("e".repeat(60))
            .join("handoff");
        std::fs::create_dir_all(deep.parent().unwrap()).unwrap();
        let vars = env(&[("A", "1")]);
        let offer =
            offer_handoff(&deep, "crew+alice", &vars, None, Duration::from_secs(10)).unwrap();
        assert!(offer.socket.as_os_str().len() > 110);
        assert_eq!(take_handoff(&offer.env_value).unwrap().env, vars);
    }

    #[test]
    fn a_handoff_directory_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("handoff");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = offer_handoff(&link, "x", &env(&[]), None, Duration::from_millis(10))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a directory"), "{err}");
    }

    #[test]
    fn the_handed_environment_leaves_out_the_terminal() {
        let env = current_env_for_handoff();
        for name in TERMINAL_VARS {
            assert!(!env.contains_key(*name), "{name}");
        }
        assert!(!env.contains_key(HANDOFF_ENV));
    }
}
