//! Provider API keys and other credentials are not for the commands the model runs.
//!
//! A command sees the agent's environment minus:
//! - every variable whose name contains `KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`,
//!   `CREDENTIAL` or `AUTH` (ASCII case-insensitive; a `_`-separated word `AUTHOR` or
//!   `AUTHORS` alone does not count, so `GIT_AUTHOR_NAME` stays), or has a
//!   `_`-separated word equal to `PASS`, `PWD`, `PAT`, `CREDS`, `JWT`, `COOKIE` or `DSN`
//!   (`SMTP_PASS`, `MYSQL_PWD`, `GITHUB_PAT`, `SENTRY_DSN`; not `COMPASS`, and never the
//!   shell's own `PWD` and `OLDPWD`) — [`is_credential_env_name`];
//! - every variable whose value holds a password in a URL (`scheme://user:pw@host`) or
//!   a bare `user:pw@host` (`HTTP_PROXY=u:pw@proxy:3128`) — [`holds_url_password`];
//! - the team store's credentials (`ROO_STORE`, `PGPASSWORD`) and any variable whose
//!   value is the key the agent itself uses, the store's URL or its password (of 8
//!   characters or more);
//!
//! except those the user passes through with `sandbox: {pass_env: [...]}` in the user
//! config. API keys and the store's credentials ([`is_secret_env_name`]) are also sealed
//! out of the agent's own environment block ([`seal_secret_env`]); the other credentials
//! stay in it, as the agent's own git and ssh may need them.

/// Whether `name` looks like an API key variable or holds the team store's
/// credentials (a command that had them could rewrite the team's state directly).
pub fn is_secret_env_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.ends_with("_API_KEY")
        || upper.ends_with("_APIKEY")
        || upper == "ANTHROPIC_AUTH_TOKEN"
        || upper == "ROO_STORE"
        || upper == "PGPASSWORD"
}

/// Words that mark a variable as holding a credential when its name contains one.
const CREDENTIAL_WORDS: [&str; 7] = [
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
];

/// `_`-separated words that mark a variable as holding a credential when its name has
/// one of them as a whole word (`DB_PASS`, not `PASSTHROUGH` nor `COMPASS`).
const CREDENTIAL_PARTS: [&str; 7] = ["PASS", "PWD", "PAT", "CREDS", "JWT", "COOKIE", "DSN"];

/// Whether `name` contains one of [`CREDENTIAL_WORDS`] (ASCII case-insensitive), not
/// counting `_`-separated words that are exactly `AUTHOR` or `AUTHORS` (git's
/// `GIT_AUTHOR_NAME`, `GIT_AUTHOR_EMAIL`, `GIT_AUTHOR_DATE`), or has one of
/// [`CREDENTIAL_PARTS`] as a `_`-separated word (the shell's `PWD` and `OLDPWD` are
/// not credentials).
pub fn is_credential_env_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if upper == "PWD" || upper == "OLDPWD" {
        return false;
    }
    upper
        .split('_')
        .any(|part| CREDENTIAL_PARTS.contains(&part))
        || CREDENTIAL_WORDS
            .iter()
            .filter(|word| **word != "AUTH")
            .any(|word| upper.contains(word))
        || upper
            .split('_')
            .any(|part| part.contains("AUTH") && part != "AUTHOR" && part != "AUTHORS")
}

/// Whether `value` holds a URL with a password anywhere in it: `scheme://user:pw@…`
/// with a non-empty password (`postgres://u:pw@h/db`, `https://x:tok@host`, also in a
/// space- or comma-separated list), or a word without a scheme of the form
/// `user:pw@host` ([`bare_password`]).
pub fn holds_url_password(value: &str) -> bool {
    if value
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .any(bare_password)
    {
        return true;
    }
    let bytes = value.as_bytes();
    let mut from = 0;
    while let Some(at) = value[from..].find("://") {
        let start = from + at;
        from = start + 3;
        // A scheme: at least one letter, digit, `+`, `-` or `.` right before.
        let scheme_ok = start > 0 && {
            let b = bytes[start - 1];
            b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.'
        };
        if !scheme_ok {
            continue;
        }
        let authority: &str = value[from..]
            .split(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace() || c == ',')
            .next()
            .unwrap_or("");
        if let Some(at) = authority.rfind('@')
            && let Some((_, password)) = authority[..at].split_once(':')
            && !password.is_empty()
        {
            return true;
        }
    }
    false
}

/// Whether `word` (no scheme) is `user:pw@host[:port][/…]` with a non-empty password:
/// `u:pw@proxy:3128` is, `git@github.com:o/r.git` (no password before the `@`) and
/// `a:b` (no `@`) are not.
fn bare_password(word: &str) -> bool {
    if word.contains("://") {
        return false;
    }
    let Some(at) = word.rfind('@') else {
        return false;
    };
    let (userinfo, host) = (&word[..at], &word[at + 1..]);
    let host = host.split('/').next().unwrap_or("");
    let host_ok = host.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '[')
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    host_ok
        && !userinfo.contains('/')
        && userinfo
            .split_once(':')
            .is_some_and(|(_, password)| !password.is_empty())
}

/// Names of the variables in `vars` to remove from commands' environment: secret
/// names ([`is_secret_env_name`], [`is_credential_env_name`]), values holding a URL
/// with a password, and any variable whose value is one of `secret_values`
/// (non-empty), except the names in `pass`.
pub fn scrubbed_env_names(
    vars: impl IntoIterator<Item = (String, String)>,
    secret_values: &[&str],
    pass: &[String],
) -> Vec<String> {
    let mut names: Vec<String> = vars
        .into_iter()
        .filter(|(name, value)| {
            is_secret_env_name(name)
                || is_credential_env_name(name)
                || holds_url_password(value)
                || secret_values
                    .iter()
                    .any(|secret| !secret.is_empty() && value == secret)
        })
        .map(|(name, _)| name)
        .filter(|name| !pass.iter().any(|p| p == name))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Variable that tells a re-executed agent where its sealed secrets are.
pub const SEALED_ENV_FD: &str = "ROO_SEALED_ENV_FD";

static SEALED: std::sync::OnceLock<std::collections::BTreeMap<String, String>> =
    std::sync::OnceLock::new();

/// What a handoff carried besides the environment ([`handed_launch`]).
static HANDED: std::sync::OnceLock<Option<serde_json::Value>> = std::sync::OnceLock::new();

/// What goes in the sealed document to the re-executed image.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Sealed {
    secrets: std::collections::BTreeMap<String, String>,
    /// A handoff's launch document (a worker's prompt, …): never argv or environment.
    launch: Option<serde_json::Value>,
}

/// Largest sealed document: 1 MiB on Linux (a prompt handed to a worker; it goes in a
/// sealed memfd), else 16 KiB, what any pipe holds.
const SEALED_MAX: usize = if cfg!(target_os = "linux") {
    1024 * 1024
} else {
    16 * 1024
};

/// Takes API keys out of this process's environment block.
///
/// `/proc/<pid>/environ` shows the environment a process was *started* with,
/// and a sandboxed command can read the agent's (Landlock does not stop it on
/// every kernel). So when the agent starts with key-like variables, it passes
/// them to a fresh image of itself through a sealed document (a sealed memfd on Linux, else a pipe) and re-executes without
/// them; the new image reads them back ([`secret_env`]) and closes the pipe.
/// Call first thing in `main`, while the process has one thread. Returns only
/// if no re-exec was needed or it failed (then with a warning to print).
///
/// A re-executed image whose sealed document cannot be read or parsed gets
/// [`Sealing::Failed`]: it must stop, never run without the secrets and the launch
/// document (a remote worker's project config, with the lead's deny rules) it was
/// handed.
pub fn seal_secret_env() -> Sealing {
    if let Some(fd) = std::env::var_os(SEALED_ENV_FD) {
        return match read_sealed(&fd) {
            Ok(sealed) => {
                let _ = SEALED.set(sealed.secrets);
                let _ = HANDED.set(sealed.launch);
                Sealing::Done
            }
            Err(e) => Sealing::Failed(format!(
                "failed to read the sealed document ({SEALED_ENV_FD}={}): {e}; the worker \
                 does not run without what its lead handed over: start it again from the lead",
                fd.to_string_lossy()
            )),
        };
    }
    let secrets: std::collections::BTreeMap<String, String> = std::env::vars()
        .filter(|(name, _)| is_secret_env_name(name))
        .collect();
    if secrets.is_empty() {
        return Sealing::Done;
    }
    match reexec_with(&secrets, None, None) {
        Ok(()) => Sealing::Done,
        Err(e) => Sealing::Warning(e),
    }
}

/// What [`seal_secret_env`] came to when it returns.
#[derive(Debug, PartialEq, Eq)]
pub enum Sealing {
    /// Nothing to seal, or the sealed document was read back.
    Done,
    /// The re-exec failed: the process runs on with the keys in its environment.
    Warning(String),
    /// The sealed document this image was started with could not be read or parsed:
    /// the process must stop with this message.
    Failed(String),
}

/// A descriptor (not close-on-exec) from which the re-executed image reads `text`
/// through `/dev/fd/N`. On Linux a memfd sealed against any change (`F_SEAL_WRITE`,
/// `F_SEAL_SHRINK`, `F_SEAL_GROW`, `F_SEAL_SEAL`): its size is not limited by the per-user
/// pipe buffer accounting, which another process of the same user can use up. Else (or
/// if no memfd can be made) a pipe, written without blocking.
fn sealed_document(text: &[u8]) -> Result<std::os::fd::OwnedFd, String> {
    #[cfg(target_os = "linux")]
    if let Ok(fd) = sealed_memfd(text) {
        return Ok(fd);
    }
    sealed_pipe(text)
}

/// [`sealed_document`] in a sealed memfd.
#[cfg(target_os = "linux")]
fn sealed_memfd(text: &[u8]) -> Result<std::os::fd::OwnedFd, String> {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};
    use std::io::Write;
    let fd = memfd_create("roo-sealed", MFdFlags::MFD_ALLOW_SEALING)
        .map_err(|e| format!("make the sealed document: {e}"))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(text)
        .map_err(|e| format!("write the sealed document ({} bytes): {e}", text.len()))?;
    let fd = std::os::fd::OwnedFd::from(file);
    fcntl(
        &fd,
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_WRITE
                | SealFlag::F_SEAL_SHRINK
                | SealFlag::F_SEAL_GROW
                | SealFlag::F_SEAL_SEAL,
        ),
    )
    .map_err(|e| format!("seal the sealed document: {e}"))?;
    Ok(fd)
}

/// [`sealed_document`] in a pipe: it must hold it all, as nobody reads until after the
/// exec (grown on Linux where needed, which the kernel refuses once this user's pipes
/// hold too much).
fn sealed_pipe(text: &[u8]) -> Result<std::os::fd::OwnedFd, String> {
    use std::io::Write;
    // Neither end is close-on-exec; the write end is closed before the exec.
    let (reader, writer) = nix::unistd::pipe().map_err(|e| format!("pipe: {e}"))?;
    #[cfg(target_os = "linux")]
    if text.len() > 16 * 1024 {
        let size = i32::try_from(text.len()).unwrap_or(i32::MAX);
        nix::fcntl::fcntl(&writer, nix::fcntl::FcntlArg::F_SETPIPE_SZ(size))
            .map_err(|e| format!("grow the sealing pipe to {} bytes: {e}", text.len()))?;
    }
    // Never wait: a pipe that cannot hold it all is an error, not a hang.
    nix::fcntl::fcntl(
        &writer,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .map_err(|e| format!("set up the sealing pipe: {e}"))?;
    std::fs::File::from(writer)
        .write_all(text)
        .map_err(|e| format!("write the sealed variables ({} bytes): {e}", text.len()))?;
    Ok(reader)
}

/// Reads and closes the sealed document at descriptor `fd` (the [`SEALED_ENV_FD`] value).
fn read_sealed(fd: &std::ffi::OsStr) -> Result<Sealed, String> {
    let fd: i32 = fd
        .to_str()
        .and_then(|s| s.parse().ok())
        .filter(|fd| *fd >= 0)
        .ok_or("it names no file descriptor")?;
    let text = std::fs::read(format!("/dev/fd/{fd}"));
    let _ = nix::unistd::close(fd);
    let text = text.map_err(|e| e.to_string())?;
    serde_json::from_slice(&text).map_err(|e| format!("it is not a sealed document: {e}"))
}

/// Re-executes this program with the same arguments and `secrets` (and a handoff's
/// `launch` document) passed through a sealed document ([`sealed_document`]) (removed from the environment). With
/// `env`, the new image's environment is exactly `env` (a handoff, see
/// [`super::handoff`]); else this process's. Returns only on failure.
pub(super) fn reexec_with(
    secrets: &std::collections::BTreeMap<String, String>,
    env: Option<&std::collections::BTreeMap<String, String>>,
    launch: Option<serde_json::Value>,
) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;

    let text = serde_json::to_vec(&Sealed {
        secrets: secrets.clone(),
        launch,
    })
    .map_err(|e| e.to_string())?;
    if text.len() > SEALED_MAX {
        return Err(format!(
            "the API key variables and the handed launch are too large to seal ({} bytes, \
             at most {SEALED_MAX})",
            text.len()
        ));
    }
    let exe = std::env::current_exe().map_err(|e| format!("locate the executable: {e}"))?;
    let reader = sealed_document(&text)?;
    let mut command = std::process::Command::new(exe);
    if let Some(env) = env {
        command.env_clear().envs(env);
    }
    command
        .args(std::env::args_os().skip(1))
        .env(SEALED_ENV_FD, reader.as_raw_fd().to_string());
    if let Some(arg0) = std::env::args_os().next() {
        command.arg0(arg0);
    }
    for name in secrets.keys() {
        command.env_remove(name);
    }
    let error = command.exec();
    Err(format!(
        "re-execute without the API keys in the environment: {error}"
    ))
}

/// The value of `name`: from the sealed secrets if the agent sealed them,
/// else from the environment.
pub fn secret_env(name: &str) -> Option<String> {
    SEALED
        .get()
        .and_then(|map| map.get(name).cloned())
        .or_else(|| std::env::var(name).ok())
}

/// What the handoff this process was started with carried besides the environment
/// (`None`: no handoff, or it carried nothing else). Read by `roo-worker` for its prompt
/// and project config.
pub fn handed_launch() -> Option<serde_json::Value> {
    HANDED.get().cloned().flatten()
}

/// All sealed secrets (empty if nothing was sealed).
pub fn sealed_secrets() -> Vec<(String, String)> {
    SEALED
        .get()
        .map(|map| map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}
