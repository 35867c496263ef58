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
/// none. A password file that others may read is ignored, as libpq ignores it.
pub(crate) fn fill_password(config: &mut Config, env: EnvLookup<'_>) {
    if config.get_password().is_some() {
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
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        // libpq matches a socket directory as `localhost`.
        _ => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_string();
    let db = config.get_dbname().unwrap_or(&user).to_string();
    if let Some(password) = lookup(&text, [&host, &port, &db, &user]) {
        config.password(password);
    }
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

/// The password of the first line of a password file matching `want` (host, port,
/// database, user): fields separated by `:`, `*` matching anything, `\` escaping `:` and
/// `\`; comments (`#`) and malformed lines skipped.
fn lookup(text: &str, want: [&str; 4]) -> Option<String> {
    text.lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .find_map(|line| {
            let fields = split_fields(line)?;
            let matches = fields[..4]
                .iter()
                .zip(want)
                .all(|(field, value)| field == "*" || field == value);
            matches.then(|| fields[4].clone())
        })
}

/// A line's five fields, unescaped; `None` unless it has exactly five.
fn split_fields(line: &str) -> Option<[String; 5]> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut()?.push(chars.next().unwrap_or('\\')),
            ':' => fields.push(String::new()),
            c => fields.last_mut()?.push(c),
        }
    }
    fields.try_into().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn lines_match_field_by_field_with_wildcards_and_escapes() {
        let text = "# comment\n\
                    db.example:5432:roo:alice:first\n\
                    *:*:*:bob:b\\:o\\\\b\n\
                    too:few:fields\n\
                    *:*:*:*:fallback\n";
        assert_eq!(
            lookup(text, ["db.example", "5432", "roo", "alice"]).as_deref(),
            Some("first")
        );
        assert_eq!(
            lookup(text, ["other", "1", "x", "bob"]).as_deref(),
            Some("b:o\\b")
        );
        assert_eq!(
            lookup(text, ["db.example", "5433", "roo", "alice"]).as_deref(),
            Some("fallback")
        );
        assert_eq!(lookup("a:b:c:d\n", ["a", "b", "c", "d"]), None);
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
