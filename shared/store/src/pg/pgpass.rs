//! Where the PostgreSQL store's password comes from when its URL carries none: the
//! `PGPASSWORD` variable, else the password file (`PGPASSFILE`, else `~/.pgpass`), read
//! with libpq's rules, so a user's existing setup works unchanged and no password needs
//! to be on a command line or in a URL.
//!
//! The variables are looked up through a caller's function: the agents take secrets out
//! of their environment block at start (they keep them in memory), so `std::env` alone
//! would not see them there.

use std::path::{Path, PathBuf};

use tokio_postgres::Config;
use tokio_postgres::config::Host;

/// Looks up an environment variable (the process's, or the secrets an agent sealed).
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment, as an [`EnvLookup`].
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Sets `config`'s password from `PGPASSWORD` or the password file when the URL gave
/// none (or an empty one). A password file that others may read is ignored, as libpq
/// ignores it.
pub(crate) fn fill_password(config: &mut Config, env: EnvLookup<'_>) {
    if config.get_password().is_some_and(|p| !p.is_empty()) {
        return;
    }
    if let Some(password) = env("PGPASSWORD").filter(|p| !p.is_empty()) {
        config.password(password);
        return;
    }
    let Some(file) = password_file(env) else {
        return;
    };
    let Ok(text) = read_private(&file) else {
        return;
    };
    // The host as libpq matches it: the name, else the address, else `localhost`; a
    // socket connection by its directory, or as `localhost` when that is libpq's default
    // one (`/tmp` upstream, `/var/run/postgresql` in distributions' builds).
    let hosts: Vec<String> = match (config.get_hosts().first(), config.get_hostaddrs().first()) {
        (Some(Host::Tcp(host)), _) => vec![host.clone()],
        #[cfg(unix)]
        (Some(Host::Unix(dir)), _) => {
            let mut names = vec![dir.to_string_lossy().into_owned()];
            if DEFAULT_SOCKET_DIRS.iter().any(|d| dir == Path::new(d)) {
                names.push("localhost".to_string());
            }
            names
        }
        (None, Some(addr)) => vec![addr.to_string()],
        (None, None) => vec!["localhost".to_string()],
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    // Without a user in the URL the client logs in as the OS user, and the database
    // defaults to the user's name: libpq looks those up.
    let user = match config.get_user() {
        Some(user) => user.to_string(),
        None => os_user().unwrap_or_default(),
    };
    let db = config.get_dbname().unwrap_or(&user).to_string();
    if let Some(password) = lookup(&text, &hosts, &port, &db, &user) {
        config.password(password);
    }
}

/// libpq's default socket directories, matched as `localhost` in the password file.
const DEFAULT_SOCKET_DIRS: [&str; 2] = ["/tmp", "/var/run/postgresql"];

/// The name of the user this process runs as (what the client logs in as by default).
fn os_user() -> Option<String> {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|user| user.name)
}

/// The password file: `PGPASSFILE`, else `.pgpass` in the home directory.
fn password_file(env: EnvLookup<'_>) -> Option<PathBuf> {
    if let Some(file) = env("PGPASSFILE").filter(|f| !f.is_empty()) {
        return Some(PathBuf::from(file));
    }
    env("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| Path::new(&home).join(".pgpass"))
}

/// The file's text if it is a regular file nobody but its owner can read or write.
fn read_private(file: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(file)?;
    if !meta.is_file() || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::other("not a private regular file"));
    }
    std::fs::read_to_string(file)
}

/// The password of the first line of a password file matching one of `hosts`, `port`,
/// `db` and `user`, read as libpq reads it: lines starting with `#` are comments; each
/// of the first four fields is an unescaped `*` (anything) or the value, `\\` escaping
/// the next character; the password runs to the next unescaped `:` (more fields may
/// follow) and is unescaped.
fn lookup(text: &str, hosts: &[String], port: &str, db: &str, user: &str) -> Option<String> {
    text.split('\n')
        .map(|line| line.trim_end_matches(['\r', '\n']))
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .find_map(|line| {
            let rest = hosts.iter().find_map(|host| match_field(line, host))?;
            let rest = match_field(rest, port)?;
            let rest = match_field(rest, db)?;
            let rest = match_field(rest, user)?;
            Some(unescape_password(rest))
        })
}

/// libpq's `pwdfMatchesString`: whether the field at the start of `line` is an unescaped
/// `*` or `value`; the rest of the line after the field's `:` if so.
fn match_field<'a>(line: &'a str, value: &str) -> Option<&'a str> {
    if let Some(rest) = line.strip_prefix("*:") {
        return Some(rest);
    }
    let mut want = value.chars();
    let mut chars = line.char_indices();
    while let Some((at, c)) = chars.next() {
        let (c, escaped) = match c {
            '\\' => (chars.next()?.1, true),
            c => (c, false),
        };
        let next = want.clone().next();
        if c == ':' && !escaped && next.is_none() {
            return Some(&line[at + 1..]);
        }
        if next != Some(c) {
            return None;
        }
        want.next();
    }
    None
}

/// The password field: up to the next unescaped `:`, escapes removed.
fn unescape_password(field: &str) -> String {
    let mut password = String::new();
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        match c {
            ':' => break,
            '\\' => match chars.next() {
                Some(next) => password.push(next),
                None => password.push('\\'),
            },
            c => password.push(c),
        }
    }
    password
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn find(text: &str, [host, port, db, user]: [&str; 4]) -> Option<String> {
        lookup(text, &[host.to_string()], port, db, user)
    }

    #[test]
    fn lines_match_field_by_field_with_wildcards_and_escapes() {
        let text = "# comment\n\
                    db.example:5432:roo:alice:first\n\
                    *:*:*:bob:b\\:o\\\\b\n\
                    too:few:fields\n\
                    *:*:*:*:fallback\n";
        assert_eq!(
            find(text, ["db.example", "5432", "roo", "alice"]).as_deref(),
            Some("first")
        );
        assert_eq!(
            find(text, ["other", "1", "x", "bob"]).as_deref(),
            Some("b:o\\b")
        );
        assert_eq!(
            find(text, ["db.example", "5433", "roo", "alice"]).as_deref(),
            Some("fallback")
        );
        assert_eq!(find("a:b:c:d\n", ["a", "b", "c", "d"]), None);
    }

    /// libpq's reading: the password ends at the next unescaped `:` (a note may follow),
    /// `\\*` is a star and no wildcard, an escaped `:` belongs to its field, a line
    /// ending in CR LF is the same line, and only a `#` in the first column comments.
    #[test]
    fn fields_are_read_as_libpq_reads_them() {
        assert_eq!(
            find("*:*:*:bob:pw:a note\n", ["h", "1", "d", "bob"]).as_deref(),
            Some("pw")
        );
        assert_eq!(find("\\*:*:*:*:star\n", ["h", "1", "d", "u"]), None);
        assert_eq!(
            find("\\*:*:*:*:star\n", ["*", "1", "d", "u"]).as_deref(),
            Some("star")
        );
        assert_eq!(
            find("fe80\\:\\:1:*:*:*:v6\r\n", ["fe80::1", "5432", "d", "u"]).as_deref(),
            Some("v6")
        );
        assert_eq!(
            find(" #h:*:*:*:pw\n", [" #h", "5432", "d", "u"]).as_deref(),
            Some("pw")
        );
    }

    /// A socket connection is matched by its directory; `localhost` stands for libpq's
    /// default one only. A URL without a user is the OS user's, its database the user's.
    #[test]
    fn a_socket_matches_its_directory_and_no_user_is_the_os_user() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        use std::os::unix::fs::PermissionsExt;
        let me = os_user().unwrap();
        let with = |text: String, url: &str| {
            std::fs::write(&file, text).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
            let mut config = crate::pg::url::parse(url).unwrap();
            fill_password(&mut config, &|name: &str| {
                (name == "PGPASSFILE").then(|| file.display().to_string())
            });
            config
                .get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned())
        };
        let socket = "postgresql://roo@%2Fsrv%2Fpg/roo";
        assert_eq!(
            with("/srv/pg:5432:roo:roo:s\n".into(), socket).as_deref(),
            Some("s")
        );
        assert_eq!(with("localhost:5432:roo:roo:l\n".into(), socket), None);
        let default = "postgresql://roo@localhost/roo?host=/var/run/postgresql";
        assert_eq!(
            with("localhost:5432:roo:roo:l\n".into(), default).as_deref(),
            Some("l")
        );
        let no_user = "postgresql://db.example/roo";
        assert_eq!(
            with(format!("db.example:5432:roo:{me}:u\n"), no_user).as_deref(),
            Some("u")
        );
        let no_db = "postgresql://db.example";
        assert_eq!(
            with(format!("db.example:5432:{me}:{me}:d\n"), no_db).as_deref(),
            Some("d")
        );
    }

    fn config_of(url: &str) -> Config {
        url.parse().unwrap()
    }

    #[test]
    fn the_url_wins_then_pgpassword_then_the_private_password_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(&file, "db:5432:roo:alice:from-file\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let file_env = |name: &str| (name == "PGPASSFILE").then(|| file.display().to_string());

        let mut config = config_of("postgresql://alice:in-url@db/roo");
        fill_password(&mut config, &|_| Some("from-env".into()));
        assert_eq!(config.get_password(), Some(&b"in-url"[..]));

        let mut config = config_of("postgresql://alice@db/roo");
        fill_password(&mut config, &|name| {
            (name == "PGPASSWORD").then(|| "from-env".into())
        });
        assert_eq!(config.get_password(), Some(&b"from-env"[..]));

        let mut config = config_of("postgresql://alice@db/roo");
        fill_password(&mut config, &file_env);
        assert_eq!(config.get_password(), Some(&b"from-file"[..]));

        // Readable by others: ignored, as libpq ignores it.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut config = config_of("postgresql://alice@db/roo");
        fill_password(&mut config, &file_env);
        assert_eq!(config.get_password(), None);
    }
}
