//! `ROO_HOME` and the paths under it.
//!
//! [`RooHome`] is the root of all cross-project state. Path builders take only validated
//! [`Name`]s, so no caller can build a path outside the home. The home also carries the
//! [`LockPolicy`] every store operation uses, so tests and benchmarks can choose the
//! original protocol or the improved one without global state.

use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::Engine;
use crate::env::{ROO_HOME_ENV, ROO_LOCK_MODE_ENV, ROO_STORE_ENV};
use crate::error::{Error, Result};
use crate::lock::LockPolicy;
use crate::name::Name;
use crate::pg::PgStore;
use crate::pg::pgpass::EnvLookup;

/// Where the shared documents live, as `ROO_STORE` says.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// Files under `ROO_HOME` (the default).
    File,
    /// A PostgreSQL store: the URL (credentials included) and how messages show it
    /// (without them).
    Postgres { url: String, shown: String },
}

impl std::fmt::Debug for StoreChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreChoice::File => f.write_str("File"),
            StoreChoice::Postgres { shown, .. } => write!(f, "Postgres({shown})"),
        }
    }
}

impl StoreChoice {
    /// The store of the home at `root`: `ROO_STORE` when set (even to `file`), else the
    /// `store:` key of the user's own config file, `<root>/config.yaml` — never a
    /// project's — else files. A user config that cannot be read is an error (it may
    /// name the store: guessing files could split the team).
    pub fn resolve(root: &Path) -> Result<StoreChoice> {
        // A value that is not UTF-8 is refused, not taken as unset.
        StoreChoice::from_env()?;
        StoreChoice::resolve_in(root, &crate::pg::pgpass::process_env)
    }

    /// [`StoreChoice::resolve`] with `ROO_STORE` looked up by `env` (an agent keeps it
    /// among the secrets it took out of its environment block).
    pub fn resolve_in(root: &Path, env: EnvLookup<'_>) -> Result<StoreChoice> {
        if let Some(value) = env(ROO_STORE_ENV) {
            return StoreChoice::parse(&value);
        }
        let path = root.join("config.yaml");
        // The user's own file, read as the agent's config loader reads it (a symbolic
        // link to a dotfiles repository is fine).
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(StoreChoice::File),
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        let config: serde_yaml_ng::Value =
            serde_yaml_ng::from_slice(&bytes).map_err(|e| Error::InvalidSetting {
                name: "store",
                reason: format!("{} does not parse as YAML: {e}", path.display()),
            })?;
        match config.get("store") {
            None | Some(serde_yaml_ng::Value::Null) => Ok(StoreChoice::File),
            Some(serde_yaml_ng::Value::String(value)) => {
                StoreChoice::parse(value).map_err(|e| match e {
                    Error::InvalidSetting { reason, .. } => Error::InvalidSetting {
                        name: "store",
                        reason: format!("{reason} (in {})", path.display()),
                    },
                    other => other,
                })
            }
            Some(_) => Err(Error::InvalidSetting {
                name: "store",
                reason: format!(
                    "`store:` in {} must be `file` or a postgresql:// URL",
                    path.display()
                ),
            }),
        }
    }

    /// `ROO_STORE` read: unset, empty or `file` is [`StoreChoice::File`]; a
    /// `postgresql://` or `postgres://` URL is [`StoreChoice::Postgres`]; anything else
    /// is refused (never a silent fallback to files).
    pub fn from_env() -> Result<StoreChoice> {
        match std::env::var(ROO_STORE_ENV) {
            Err(std::env::VarError::NotPresent) => Ok(StoreChoice::File),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::InvalidSetting {
                name: ROO_STORE_ENV,
                reason: "it is not valid UTF-8".into(),
            }),
            Ok(value) => StoreChoice::parse(&value),
        }
    }

    /// A `ROO_STORE` value read (see [`StoreChoice::from_env`]).
    pub fn parse(value: &str) -> Result<StoreChoice> {
        let value = value.trim();
        if value.is_empty() || value == "file" {
            return Ok(StoreChoice::File);
        }
        if value.starts_with("postgresql://") || value.starts_with("postgres://") {
            return match crate::pg::shown_url(value) {
                Ok(shown) => Ok(StoreChoice::Postgres {
                    url: value.to_owned(),
                    shown,
                }),
                Err(reason) => Err(Error::InvalidSetting {
                    name: ROO_STORE_ENV,
                    reason,
                }),
            };
        }
        // The value is not shown: it may hold a password (a libpq `key=value` string).
        Err(Error::InvalidSetting {
            name: ROO_STORE_ENV,
            reason: "its value is neither `file` nor a postgresql:// URL".into(),
        })
    }
}

impl StoreChoice {
    /// The values that give the store away, for scrubbing from commands' environment
    /// like an API key's value: the URL and the password in it (empty for files).
    pub fn secret_values(&self) -> Vec<String> {
        let StoreChoice::Postgres { url, .. } = self else {
            return Vec::new();
        };
        let mut values = vec![url.clone()];
        if let Ok(config) = crate::pg::url::parse(url)
            && let Some(password) = config.get_password().filter(|p| !p.is_empty())
        {
            values.push(String::from_utf8_lossy(password).into_owned());
        }
        values
    }

    /// The directory of the server's UNIX socket when the store is reached through one
    /// (a URL whose host is a path): what the command sandbox must hide, as a process
    /// that can reach the socket may reach the store without the agent.
    pub fn socket_dirs(&self) -> Vec<PathBuf> {
        let StoreChoice::Postgres { url, .. } = self else {
            return Vec::new();
        };
        let Ok(config) = crate::pg::url::parse(url) else {
            return Vec::new();
        };
        config
            .get_hosts()
            .iter()
            .filter_map(|host| match host {
                tokio_postgres::config::Host::Unix(dir) => Some(dir.clone()),
                _ => None,
            })
            .collect()
    }
}

/// The root directory of RooCode state (`$ROO_HOME`, default `~/.roocode`).
///
/// The home also says where the shared documents live: files under the root (the
/// default), or rows of a PostgreSQL store ([`RooHome::with_store`]), keyed by the path
/// they would have under the root. A member's own files (transcript, log) stay files.
#[derive(Clone)]
pub struct RooHome {
    root: Arc<Path>,
    lock_policy: LockPolicy,
    /// Where the shared documents live: chosen here, once ([`RooHome::open`],
    /// [`RooHome::with_store`]).
    engine: Engine,
    /// The store's URL when [`RooHome::open`] chose PostgreSQL (a secret).
    url: Option<Arc<str>>,
}

impl std::fmt::Debug for RooHome {
    /// Everything but the store's URL, which may hold a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RooHome")
            .field("root", &self.root)
            .field("lock_policy", &self.lock_policy)
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl RooHome {
    /// A home at `root` with the default lock policy.
    pub fn new(root: impl Into<PathBuf>) -> RooHome {
        RooHome {
            root: Arc::from(root.into()),
            lock_policy: LockPolicy::default(),
            engine: Engine::Files,
            url: None,
        }
    }

    /// The home named by `$ROO_HOME`, else `~/.roocode`; `$ROO_LOCK_MODE=protocol` selects
    /// the original lock protocol without the queue layer; `$ROO_STORE`, or `store:` in
    /// the user's config, a PostgreSQL store ([`StoreChoice::resolve`]; connected here:
    /// an unreachable one is an [`Error::Engine`]).
    pub fn from_env() -> Result<RooHome> {
        StoreChoice::from_env()?;
        RooHome::open(root_from_env()?, &crate::pg::pgpass::process_env)
    }

    /// The home at `root` on the store `env` selects (`ROO_STORE`, else `store:` in the
    /// user's config; its password, if the URL has none, from `PGPASSWORD` or the
    /// password file as `env` names them): connected here, so an unreachable server is an
    /// [`Error::Engine`] at once. `$ROO_LOCK_MODE` is read from the process environment.
    pub fn open(root: PathBuf, env: EnvLookup<'_>) -> Result<RooHome> {
        let mut home = RooHome::new(root);
        if let StoreChoice::Postgres { url, .. } = StoreChoice::resolve_in(&home.root, env)? {
            home = home.with_store(PgStore::connect_with(&url, env)?);
            home.url = Some(Arc::from(url));
        }
        if std::env::var(ROO_LOCK_MODE_ENV).is_ok_and(|m| m == "protocol") {
            home.lock_policy = LockPolicy::protocol();
        }
        Ok(home)
    }

    /// The same home with another lock policy.
    pub fn with_lock_policy(mut self, policy: LockPolicy) -> RooHome {
        self.lock_policy = policy;
        self
    }

    /// The same home with its shared documents in the PostgreSQL store `pg`.
    pub fn with_store(mut self, pg: PgStore) -> RooHome {
        self.engine = Engine::Postgres(pg);
        self
    }

    /// This home's store as `ROO_STORE` says it, for a process that must use the same
    /// one (a worker the lead starts, a CLI run for an agent): `file`, or the PostgreSQL
    /// URL it was opened with (credentials included: a secret, never to be shown or put
    /// on a command line). `None` for a PostgreSQL store attached without its URL.
    pub fn store_setting(&self) -> Option<String> {
        self.engine.store_setting(self.url.as_ref())
    }

    /// The PostgreSQL store holding the shared documents, if they are not files.
    pub fn pg(&self) -> Option<&PgStore> {
        self.engine.postgres()
    }

    /// The engine holding the shared documents.
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The same home with its PostgreSQL store handle replaced by `f`'s (e.g. a fenced
    /// one); a file home is returned as it is.
    pub(crate) fn map_pg(&self, f: impl FnOnce(&PgStore) -> PgStore) -> RooHome {
        let mut home = self.clone();
        home.engine = self.engine.map_postgres(f);
        home
    }

    /// The key of the document at `path` in the PostgreSQL store: its path under the
    /// root, `/`-separated (`teams/<team>/config.json`).
    pub(crate) fn key(&self, path: &Path) -> Result<String> {
        let relative = path.strip_prefix(&self.root).map_err(|_| Error::Io {
            action: "locate the document",
            path: path.to_owned(),
            source: std::io::Error::other("it is not under ROO_HOME"),
        })?;
        let parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        Ok(parts.join("/"))
    }

    /// The stored text of the document at `path` as is (the file's bytes, or the row's
    /// JSON text), without judging it; `None` if there is none. For inspection.
    pub fn read_raw(&self, path: &Path) -> Result<Option<Vec<u8>>> {
        self.engine.read_raw(self, path)
    }

    /// Whether the document at `path` exists (a file, or a row of the PostgreSQL store).
    pub(crate) fn doc_exists(&self, path: &Path) -> Result<bool> {
        self.engine.doc_exists(self, path)
    }

    /// Makes sure documents can be written in `dir`: creates it (and its parents, 0700)
    /// for files; nothing to do for the PostgreSQL store.
    pub(crate) fn ensure_doc_dir(&self, dir: &Path) -> Result<()> {
        self.engine.ensure_doc_dir(dir)
    }

    /// The names of the documents directly in `dir` ending in `suffix` (file names, or
    /// the last part of the PostgreSQL store's keys), sorted; empty if `dir` is missing.
    pub(crate) fn doc_names(&self, dir: &Path, suffix: &str) -> Result<Vec<String>> {
        let mut names = self.engine.doc_names(self, dir)?;
        names.retain(|n| n.ends_with(suffix) && !n.starts_with('.'));
        names.sort();
        Ok(names)
    }

    /// The lock policy store operations use.
    pub fn lock_policy(&self) -> &LockPolicy {
        &self.lock_policy
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `teams/`.
    pub fn teams_dir(&self) -> PathBuf {
        self.root.join("teams")
    }

    /// `teams/<team>/`.
    pub fn team_dir(&self, team: &Name) -> PathBuf {
        self.teams_dir().join(team.as_str())
    }

    /// `teams/<team>/config.json`.
    pub fn team_config(&self, team: &Name) -> PathBuf {
        self.team_dir(team).join("config.json")
    }

    /// `teams/<team>/inboxes/`.
    pub fn inboxes_dir(&self, team: &Name) -> PathBuf {
        self.team_dir(team).join("inboxes")
    }

    /// `teams/<team>/inboxes/<member>.json`.
    pub fn inbox(&self, team: &Name, member: &Name) -> PathBuf {
        self.inboxes_dir(team).join(format!("{member}.json"))
    }

    /// `teams/<team>/inboxes/<member>.archive.jsonl`: read messages moved out of the inbox.
    pub fn inbox_archive(&self, team: &Name, member: &Name) -> PathBuf {
        self.inboxes_dir(team)
            .join(format!("{member}.archive.jsonl"))
    }

    /// `teams/<team>/transcripts/`.
    pub fn transcripts_dir(&self, team: &Name) -> PathBuf {
        self.team_dir(team).join("transcripts")
    }

    /// `teams/<team>/transcripts/<member>.jsonl`.
    pub fn transcript(&self, team: &Name, member: &Name) -> PathBuf {
        self.transcripts_dir(team).join(format!("{member}.jsonl"))
    }

    /// `teams/<team>/logs/`.
    pub fn logs_dir(&self, team: &Name) -> PathBuf {
        self.team_dir(team).join("logs")
    }

    /// `teams/<team>/logs/<member>.log`.
    pub fn log(&self, team: &Name, member: &Name) -> PathBuf {
        self.logs_dir(team).join(format!("{member}.log"))
    }

    /// `tasks/<team>/`.
    pub fn tasks_dir(&self, team: &Name) -> PathBuf {
        self.root.join("tasks").join(team.as_str())
    }

    /// `tasks/<team>/tasks.json`.
    pub fn task_list(&self, team: &Name) -> PathBuf {
        self.tasks_dir(team).join("tasks.json")
    }
}

/// The home directory path: `$ROO_HOME`, else `$HOME/.roocode`. An unset or empty
/// variable counts as missing; with both missing this is [`Error::NoHome`] (a usage error:
/// the caller must set `ROO_HOME`). The one lookup every binary uses.
pub fn root_from_env() -> Result<PathBuf> {
    if let Some(root) = std::env::var_os(ROO_HOME_ENV).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(root));
    }
    user_home()
        .map(|home| home.join(".roocode"))
        .ok_or(Error::NoHome)
}

/// The user's home directory: `$HOME` if set and not empty. The one lookup of it (tilde
/// expansion, config and sandbox paths, the default `ROO_HOME`).
pub fn user_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The user's own config file under a home root: `<root>/config.yaml`. Named here, beside
/// the home lookup, so every crate's messages name the file roo-agent's config reads.
pub fn user_config_file(root: &Path) -> PathBuf {
    root.join("config.yaml")
}

/// The user's own config file as messages show it: `$ROO_HOME/config.yaml` (by default
/// `~/.roocode/config.yaml`), shortened by [`shown_path`]. With neither `ROO_HOME` nor
/// `HOME` set, the default's spelling.
pub fn user_config_shown() -> String {
    match root_from_env() {
        Ok(root) => shown_path(&user_config_file(&root)),
        Err(_) => "~/.roocode/config.yaml".to_string(),
    }
}

/// A path as messages show it: `~/…` only when it really is under the user's home
/// directory (`$HOME`, not `/`), else the whole path.
pub fn shown_path(path: &Path) -> String {
    let home = user_home().filter(|home| home.parent().is_some());
    match home
        .as_deref()
        .and_then(|home| path.strip_prefix(home).ok())
    {
        Some(rest) if rest.as_os_str().is_empty() => "~".to_string(),
        Some(rest) => format!("~/{}", rest.display()),
        None => path.display().to_string(),
    }
}

/// The names of the entries in `dir` (empty if it is missing), unsorted.
pub(crate) fn file_names(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

/// Creates `dir` and its missing parents with mode 0700.
pub(crate) fn ensure_dir(dir: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io("create directory", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_reached_through_a_socket_names_its_directory_for_the_sandbox() {
        let choice = StoreChoice::parse("postgresql://roo@%2Fvar%2Frun%2Fpostgresql/roo").unwrap();
        assert_eq!(choice.socket_dirs(), [PathBuf::from("/var/run/postgresql")]);
        let choice = StoreChoice::parse("postgresql://roo@localhost/roo?host=/srv/pg").unwrap();
        assert_eq!(choice.socket_dirs(), [PathBuf::from("/srv/pg")]);
        let tcp = StoreChoice::parse("postgresql://roo@db.example:5432/roo").unwrap();
        assert!(tcp.socket_dirs().is_empty());
        let url = "postgresql://roo:p%40ss@db.example/roo";
        assert_eq!(
            StoreChoice::parse(url).unwrap().secret_values(),
            [url.to_string(), "p@ss".to_string()]
        );
        assert_eq!(
            tcp.secret_values(),
            ["postgresql://roo@db.example:5432/roo".to_string()]
        );
        assert!(StoreChoice::File.secret_values().is_empty());
        assert!(StoreChoice::File.socket_dirs().is_empty());
    }

    #[test]
    fn paths_follow_the_layout() {
        let home = RooHome::new("/h");
        let team = Name::parse("t").unwrap();
        let alice = Name::parse("alice").unwrap();
        assert_eq!(home.team_config(&team), Path::new("/h/teams/t/config.json"));
        assert_eq!(
            home.inbox(&team, &alice),
            Path::new("/h/teams/t/inboxes/alice.json")
        );
        assert_eq!(
            home.transcript(&team, &alice),
            Path::new("/h/teams/t/transcripts/alice.jsonl")
        );
        assert_eq!(
            home.log(&team, &alice),
            Path::new("/h/teams/t/logs/alice.log")
        );
        assert_eq!(home.task_list(&team), Path::new("/h/tasks/t/tasks.json"));
    }
}
