//! Handing an agent's environment to a process another program starts (a `roo-worker`
//! in a tmux pane) without putting a secret on any command line.
//!
//! A pane's process is started by the terminal multiplexer's server, so it gets the
//! server's environment, not the lead's; and `tmux respawn-pane -e KEY=value` would put
//! the value on tmux's argv, where every user of the machine can read it. Instead the
//! lead writes its environment to a file ([`write_handoff`]): created with `O_EXCL`,
//! mode 0600, in a 0700 directory it owns under `ROO_HOME`, and names only the file in
//! the pane's command environment ([`HANDOFF_ENV`]). The worker's first act
//! ([`enter_handoff`]) checks the file (a regular file, not a link, owned by this user,
//! private, in a private directory), reads it, deletes it, and re-executes itself with
//! the lead's variables: API keys go through the sealed pipe of [`super::seal_secret_env`]
//! (never into an environment block), the rest into the environment. The pane's own
//! terminal variables ([`TERMINAL_VARS`]) are kept; everything else is the lead's.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

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
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "use the handoff directory {path}: {reason}; remove it (roo recreates it with mode 0700)"
    )]
    UnsafeDir { path: PathBuf, reason: String },
    #[error("write the handoff file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("take the environment handed over in {path}: {reason}")]
    Take { path: PathBuf, reason: String },
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

/// Writes `env` to a new private file in `dir` (created with mode 0700 if missing; an
/// existing one must be a directory of this user that nobody else can enter). The name
/// is `label` plus 64 random bits. Returns the file's path for [`HANDOFF_ENV`].
pub fn write_handoff(
    dir: &Path,
    label: &str,
    env: &BTreeMap<String, String>,
) -> Result<PathBuf, HandoffError> {
    private_dir(dir)?;
    let text = serde_json::to_vec(&serde_json::json!({ "env": env })).map_err(|e| {
        HandoffError::Write {
            path: dir.to_path_buf(),
            source: std::io::Error::other(e),
        }
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
    for _ in 0..8 {
        let path = dir.join(format!("{label}-{:016x}.env", random_u64()));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .open(&path);
        match file {
            Ok(mut file) => {
                let written = file.write_all(&text).and_then(|()| file.sync_all());
                if let Err(source) = written {
                    let _ = std::fs::remove_file(&path);
                    return Err(HandoffError::Write { path, source });
                }
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(HandoffError::Write { path, source }),
        }
    }
    Err(HandoffError::Write {
        path: dir.to_path_buf(),
        source: std::io::Error::other("no free file name after 8 tries"),
    })
}

/// Makes sure `dir` is a private directory of this user: created 0700 if missing; an
/// existing one must not be a link, must be ours, and is made 0700 if it is looser.
fn private_dir(dir: &Path) -> Result<(), HandoffError> {
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

/// Reads and deletes the handoff file at `path` after checking that it is a private
/// regular file of this user in a private directory; returns its variables.
pub fn take_handoff(path: &Path) -> Result<BTreeMap<String, String>, HandoffError> {
    let take = |reason: String| HandoffError::Take {
        path: path.to_path_buf(),
        reason,
    };
    if !path.is_absolute() {
        return Err(take("the path is not absolute".into()));
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
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| take(e.to_string()))?;
    let meta = file.metadata().map_err(|e| take(e.to_string()))?;
    if !meta.file_type().is_file() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(take(
            "it is not a private regular file of this user (mode 0600)".into(),
        ));
    }
    // Deleted before it is used: a key never outlives the start.
    std::fs::remove_file(path).map_err(|e| take(format!("delete it: {e}")))?;
    let mut text = Vec::new();
    Read::by_ref(&mut file)
        .take(MAX_HANDOFF + 1)
        .read_to_end(&mut text)
        .map_err(|e| take(e.to_string()))?;
    if text.len() as u64 > MAX_HANDOFF {
        return Err(take("it is larger than 1 MiB".into()));
    }
    #[derive(serde::Deserialize)]
    struct Doc {
        env: BTreeMap<String, String>,
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
    Ok(doc.env)
}

/// Call first thing in `main`, while the process has one thread. Without
/// [`HANDOFF_ENV`]: returns `None` and does nothing. With it: takes the file
/// ([`take_handoff`]) and re-executes this program with the same arguments, the pane's
/// [`TERMINAL_VARS`], the handed-over variables in the environment, and the API keys
/// among them sealed (read back by [`super::secret_env`]). Returns only on failure,
/// with the error to print; the caller must then exit rather than run without its
/// environment.
pub fn enter_handoff() -> Option<String> {
    let path = std::env::var_os(HANDOFF_ENV)?;
    let env = match take_handoff(Path::new(&path)) {
        Ok(env) => env,
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
    super::env::reexec_with(&secrets, Some(&plain)).err()
}

fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_err()
    {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        return (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32);
    }
    u64::from_le_bytes(bytes)
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
    fn a_handoff_is_private_taken_once_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let hand = dir.path().join("run").join("handoff");
        let vars = env(&[("OPENAI_API_KEY", "sk-canary"), ("ROO_HOME", "/h")]);
        let path = write_handoff(&hand, "crew+alice", &vars).unwrap();
        let dir_mode = std::fs::metadata(&hand).unwrap().mode() & 0o777;
        assert_eq!(dir_mode, 0o700);
        let file_mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(file_mode, 0o600);
        assert!(
            path.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("crew_alice-")
        );
        assert_eq!(take_handoff(&path).unwrap(), vars);
        assert!(!path.exists(), "the file is deleted when taken");
        assert!(take_handoff(&path).is_err(), "taken only once");
    }

    #[test]
    fn a_handoff_file_others_could_read_or_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let hand = dir.path().join("handoff");
        let path = write_handoff(&hand, "x", &env(&[("A", "1")])).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = take_handoff(&path).unwrap_err().to_string();
        assert!(err.contains("private regular file"), "{err}");
        assert!(path.exists(), "a refused file is left for inspection");

        let target = write_handoff(&hand, "y", &env(&[("A", "1")])).unwrap();
        let link = hand.join("link.env");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(take_handoff(&link).is_err());
        assert!(target.exists(), "a link is not followed");

        // A directory others can enter is refused when taking, tightened when writing.
        std::fs::set_permissions(&hand, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = take_handoff(&target).unwrap_err().to_string();
        assert!(err.contains("private directory"), "{err}");
        write_handoff(&hand, "z", &env(&[])).unwrap();
        assert_eq!(std::fs::metadata(&hand).unwrap().mode() & 0o777, 0o700);
        assert!(take_handoff(Path::new("relative.env")).is_err());
    }

    #[test]
    fn a_handoff_directory_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("handoff");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = write_handoff(&link, "x", &env(&[]))
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
