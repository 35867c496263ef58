//! `hosts:`: the machines a lead may start teammates on over SSH (docs/BACKENDS.md "The
//! ssh backend"). Read from the user's own file (`$ROO_HOME/config.yaml`) only, like
//! `trusted_projects` and `store:`: a repository must not be able to send the lead's
//! credentials to a machine of its choosing, so a project's `hosts:` is ignored with a
//! notice.
//!
//! ```yaml
//! hosts:
//!   gpu:
//!     ssh: alice@gpu.example       # the ssh destination; never an option
//!     repo: /home/alice/src/app    # a clone of the project there (absolute)
//!     roo_worker: roo-worker       # default; a path or a name on the remote PATH
//!     ssh_config: /home/alice/.ssh/roo_config   # optional, passed as `ssh -F`
//!     tmux_socket: roo             # optional, `tmux -L roo` there
//! ```
//!
//! Every value ends up in an ssh command line or the remote shell, so each is checked
//! here and a bad entry is an error naming it (exit 2), never a guess.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use roo_store::Name;
use serde_yaml_ng::Value;

use super::{ConfigError, read_yaml, user_config_path};

/// The key of the section.
pub const HOSTS_KEY: &str = "hosts";

/// `roo_worker` when an entry names none: `roo-worker` on the remote `PATH`.
pub const DEFAULT_ROO_WORKER: &str = "roo-worker";

/// Longest `ssh` destination accepted.
const MAX_DESTINATION: usize = 255;

/// One entry of `hosts:`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    /// The entry's name (what the Agent tool's `host` and the roster's `host` say).
    pub name: Name,
    /// The ssh destination, `user@host` or a `Host` of the ssh config: no whitespace or
    /// control character, no leading `-`, no `:` or `/`.
    pub ssh: String,
    /// A clone of the project on that host (absolute); teammates' clones go under its
    /// `.roocode/worktrees`.
    pub repo: PathBuf,
    /// The `roo-worker` to run there: a path or a name on the remote `PATH`.
    pub roo_worker: String,
    /// An ssh config file (absolute, on the lead's machine), passed as `-F`.
    pub ssh_config: Option<PathBuf>,
    /// The tmux server there (`tmux -L NAME`); `None`: the user's default server.
    pub tmux_socket: Option<Name>,
}

/// The configured hosts by name.
pub type Hosts = BTreeMap<Name, HostConfig>;

/// The `hosts:` of the user's file under `roo_home` (empty without the file or the key).
pub fn user_hosts(roo_home: &Path) -> Result<Hosts, ConfigError> {
    let path = user_config_path(roo_home);
    match read_yaml(&path)? {
        Some(value) => hosts(&value, &path),
        None => Ok(Hosts::new()),
    }
}

fn invalid(path: &Path, key: String, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        path: path.to_path_buf(),
        key,
        message: message.into(),
    }
}

/// `hosts:` of the document `value` read from `path`, checked.
pub(crate) fn hosts(value: &Value, path: &Path) -> Result<Hosts, ConfigError> {
    let section = match value.get(HOSTS_KEY) {
        None | Some(Value::Null) => return Ok(Hosts::new()),
        Some(Value::Mapping(section)) => section,
        Some(_) => {
            return Err(invalid(
                path,
                HOSTS_KEY.into(),
                "must map host names to {ssh: user@host, repo: /path/of/a/clone}",
            ));
        }
    };
    let mut hosts = Hosts::new();
    for (key, entry) in section {
        let Some(text) = key.as_str() else {
            return Err(invalid(
                path,
                HOSTS_KEY.into(),
                "has a key that is not a string",
            ));
        };
        let shown = format!("{HOSTS_KEY}.{}", text.escape_debug());
        let name = Name::parse_as("host name", text)
            .map_err(|e| invalid(path, shown.clone(), e.to_string()))?;
        let host = entry_of(&name, entry, path, &shown)?;
        hosts.insert(name, host);
    }
    Ok(hosts)
}

fn entry_of(
    name: &Name,
    entry: &Value,
    path: &Path,
    shown: &str,
) -> Result<HostConfig, ConfigError> {
    let Some(map) = entry.as_mapping() else {
        return Err(invalid(
            path,
            shown.to_string(),
            "must be a mapping {ssh: user@host, repo: /path/of/a/clone}",
        ));
    };
    let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
    for (key, value) in map {
        let key = key.as_str().unwrap_or("(non-string key)");
        if !["ssh", "repo", "roo_worker", "ssh_config", "tmux_socket"].contains(&key) {
            return Err(invalid(
                path,
                format!("{shown}.{}", key.escape_debug()),
                "is not a host setting (ssh, repo, roo_worker, ssh_config, tmux_socket)",
            ));
        }
        if value.is_null() {
            continue;
        }
        let Some(text) = value.as_str() else {
            return Err(invalid(path, format!("{shown}.{key}"), "must be a string"));
        };
        fields.insert(key, text);
    }
    let field = |key: &str| format!("{shown}.{key}");
    let ssh = fields.get("ssh").ok_or_else(|| {
        invalid(
            path,
            field("ssh"),
            "is missing: give the ssh destination, e.g. alice@build.example",
        )
    })?;
    check_destination(ssh).map_err(|m| invalid(path, field("ssh"), m))?;
    let repo = fields.get("repo").ok_or_else(|| {
        invalid(
            path,
            field("repo"),
            "is missing: give the absolute path of a clone of the project on that host",
        )
    })?;
    let repo = absolute(repo).map_err(|m| invalid(path, field("repo"), m))?;
    let roo_worker = fields
        .get("roo_worker")
        .copied()
        .unwrap_or(DEFAULT_ROO_WORKER);
    if roo_worker.is_empty()
        || roo_worker.starts_with('-')
        || roo_worker.chars().any(char::is_control)
    {
        return Err(invalid(
            path,
            field("roo_worker"),
            "must be a path or a command name (not empty, no leading `-`, no control character)",
        ));
    }
    let ssh_config = fields
        .get("ssh_config")
        .map(|p| absolute(p))
        .transpose()
        .map_err(|m| invalid(path, field("ssh_config"), m))?;
    let tmux_socket = fields
        .get("tmux_socket")
        .map(|s| Name::parse_as("tmux socket name", s))
        .transpose()
        .map_err(|e| invalid(path, field("tmux_socket"), e.to_string()))?;
    Ok(HostConfig {
        name: name.clone(),
        ssh: (*ssh).to_string(),
        repo,
        roo_worker: roo_worker.to_string(),
        ssh_config,
        tmux_socket,
    })
}

/// Why `ssh` cannot be an ssh destination here, if it cannot. A leading `-` would make it
/// an option of ssh (`-oProxyCommand=…` runs a command); whitespace or a control
/// character would split or disguise it; `:` and `/` break git's `host:path` address.
pub fn check_destination(ssh: &str) -> Result<(), String> {
    if ssh.is_empty() {
        return Err("is empty: give the ssh destination, e.g. alice@build.example".into());
    }
    if ssh.starts_with('-') {
        return Err(format!(
            "is {:?}, which starts with `-` and would be an ssh option; it is refused",
            ssh.escape_debug().to_string()
        ));
    }
    if ssh.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("holds whitespace or a control character; give user@host".into());
    }
    if ssh.contains([':', '/']) {
        return Err(
            "holds `:` or `/`; give user@host (a port or an IPv6 address goes in a Host entry \
             of the ssh_config file)"
                .into(),
        );
    }
    if ssh.len() > MAX_DESTINATION {
        return Err(format!("is longer than {MAX_DESTINATION} bytes"));
    }
    Ok(())
}

fn absolute(text: &str) -> Result<PathBuf, String> {
    if text.chars().any(char::is_control) {
        return Err("holds a control character".into());
    }
    let path = PathBuf::from(text);
    if !path.is_absolute() {
        return Err(format!("is {text:?}, which is not an absolute path"));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(yaml: &str) -> Result<Hosts, String> {
        let value: Value = serde_yaml_ng::from_str(yaml).unwrap();
        hosts(&value, Path::new("/h/config.yaml")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_full_entry_and_a_minimal_one_are_read_with_their_defaults() {
        let hosts = parse(
            "hosts:\n  gpu: {ssh: alice@gpu.example, repo: /srv/app, roo_worker: /opt/roo/roo-worker, \
             ssh_config: /home/a/.ssh/roo, tmux_socket: roo}\n  b: {ssh: b, repo: /r}\n",
        )
        .unwrap();
        let gpu = &hosts[&Name::parse("gpu").unwrap()];
        assert_eq!(gpu.ssh, "alice@gpu.example");
        assert_eq!(gpu.repo, PathBuf::from("/srv/app"));
        assert_eq!(gpu.roo_worker, "/opt/roo/roo-worker");
        assert_eq!(
            gpu.ssh_config.as_deref(),
            Some(Path::new("/home/a/.ssh/roo"))
        );
        assert_eq!(gpu.tmux_socket.as_ref().map(Name::as_str), Some("roo"));
        let b = &hosts[&Name::parse("b").unwrap()];
        assert_eq!(b.roo_worker, DEFAULT_ROO_WORKER);
        assert_eq!((b.ssh_config.clone(), b.tmux_socket.clone()), (None, None));
        assert!(parse("other: 1\n").unwrap().is_empty());
        assert!(parse("hosts:\n").unwrap().is_empty());
    }

    #[test]
    fn bad_entries_are_errors_that_name_the_key() {
        for (yaml, key, says) in [
            ("hosts: [a]", "`hosts`", "must map"),
            (
                "hosts: {\"-x\": {ssh: a, repo: /r}}",
                "hosts.-x",
                "host name",
            ),
            (
                "hosts: {\"a b\": {ssh: a, repo: /r}}",
                "hosts.a b",
                "host name",
            ),
            ("hosts: {b: {repo: /r}}", "hosts.b.ssh", "missing"),
            ("hosts: {b: {ssh: '', repo: /r}}", "hosts.b.ssh", "empty"),
            (
                "hosts: {b: {ssh: -oProxyCommand=touch /tmp/x, repo: /r}}",
                "hosts.b.ssh",
                "starts with `-`",
            ),
            (
                "hosts: {b: {ssh: '-F/etc/x', repo: /r}}",
                "hosts.b.ssh",
                "starts with `-`",
            ),
            (
                "hosts: {b: {ssh: a b, repo: /r}}",
                "hosts.b.ssh",
                "whitespace",
            ),
            (
                "hosts: {b: {ssh: \"a\\nb\", repo: /r}}",
                "hosts.b.ssh",
                "whitespace",
            ),
            (
                "hosts: {b: {ssh: \"a\\u0007\", repo: /r}}",
                "hosts.b.ssh",
                "control",
            ),
            ("hosts: {b: {ssh: 'a:22', repo: /r}}", "hosts.b.ssh", "`:`"),
            ("hosts: {b: {ssh: a}}", "hosts.b.repo", "missing"),
            (
                "hosts: {b: {ssh: a, repo: src/app}}",
                "hosts.b.repo",
                "not an absolute",
            ),
            (
                "hosts: {b: {ssh: a, repo: 7}}",
                "hosts.b.repo",
                "must be a string",
            ),
            (
                "hosts: {b: {ssh: a, repo: /r, roo_worker: -x}}",
                "hosts.b.roo_worker",
                "leading",
            ),
            (
                "hosts: {b: {ssh: a, repo: /r, ssh_config: cfg}}",
                "hosts.b.ssh_config",
                "absolute",
            ),
            (
                "hosts: {b: {ssh: a, repo: /r, tmux_socket: a/b}}",
                "hosts.b.tmux_socket",
                "socket",
            ),
            (
                "hosts: {b: {ssh: a, repo: /r, port: 22}}",
                "hosts.b.port",
                "not a host setting",
            ),
            ("hosts: {b: x}", "hosts.b", "must be a mapping"),
        ] {
            let err = parse(yaml).unwrap_err();
            assert!(
                err.contains(key) && err.contains(says) && err.contains("/h/config.yaml"),
                "{yaml}: {err}"
            );
        }
        assert!(check_destination("alice@build-1.example.org").is_ok());
        assert!(check_destination(&"a".repeat(256)).is_err());
    }
}
