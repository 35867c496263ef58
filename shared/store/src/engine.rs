//! The store's engine: where the shared documents live (files under `ROO_HOME`, or rows
//! of a PostgreSQL store, docs/PROTOCOL.md §8). One closed enum, chosen once where a
//! [`RooHome`] is opened ([`RooHome::open`] from the [`crate::StoreChoice`], or
//! [`RooHome::with_store`]), and matched once per operation here; each arm calls its
//! engine's code (its connections and SQL in its folder, `pg/` for PostgreSQL; the rules a
//! document follows on rows beside its file rules, in the document's module), so
//! the rest of the store asks for an operation and never for the engine. A third engine
//! is a folder of its own and one arm in each method below (docs/PROTOCOL.md §8
//! "Engines").

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::doc::{self, Document, Guard, InTeam, Outcome};
use crate::error::Result;
use crate::events::EventPage;
use crate::home::RooHome;
use crate::message::{Message, MessageId};
use crate::name::Name;
use crate::pg::PgStore;
use crate::team::TeamConfig;
use crate::watch::InboxWatcher;

/// The engine holding a home's shared documents.
#[derive(Clone, Debug)]
pub(crate) enum Engine {
    /// Files under the home's root, guarded by the lock protocol.
    Files,
    /// Rows of a PostgreSQL store, keyed by the path they would have under the root.
    Postgres(PgStore),
}

impl Engine {
    /// The PostgreSQL store, if the documents live in one.
    pub(crate) fn postgres(&self) -> Option<&PgStore> {
        match self {
            Engine::Files => None,
            Engine::Postgres(pg) => Some(pg),
        }
    }

    /// The same engine with its PostgreSQL handle replaced by `f`'s (e.g. a fenced one).
    pub(crate) fn map_postgres(&self, f: impl FnOnce(&PgStore) -> PgStore) -> Engine {
        match self {
            Engine::Files => Engine::Files,
            Engine::Postgres(pg) => Engine::Postgres(f(pg)),
        }
    }

    /// The `ROO_STORE` setting naming this engine (see [`RooHome::store_setting`]).
    pub(crate) fn store_setting(&self, url: Option<&Arc<str>>) -> Option<String> {
        match self {
            Engine::Files => Some("file".to_string()),
            Engine::Postgres(_) => url.map(|url| url.to_string()),
        }
    }

    /// See [`RooHome::read_raw`].
    pub(crate) fn read_raw(&self, home: &RooHome, path: &Path) -> Result<Option<Vec<u8>>> {
        match self {
            Engine::Files => crate::fsio::read_regular(path, "read"),
            Engine::Postgres(pg) => Ok(pg.read(&home.key(path)?)?.map(String::into_bytes)),
        }
    }

    /// Whether the document at `path` exists.
    pub(crate) fn doc_exists(&self, home: &RooHome, path: &Path) -> Result<bool> {
        match self {
            Engine::Files => Ok(path.is_file()),
            Engine::Postgres(pg) => pg.exists(&home.key(path)?),
        }
    }

    /// Makes sure documents can be written in `dir` (see [`RooHome::ensure_doc_dir`]).
    pub(crate) fn ensure_doc_dir(&self, dir: &Path) -> Result<()> {
        match self {
            Engine::Files => crate::home::ensure_dir(dir),
            Engine::Postgres(_) => Ok(()),
        }
    }

    /// The names of the documents directly in `dir`, unsorted and unfiltered.
    pub(crate) fn doc_names(&self, home: &RooHome, dir: &Path) -> Result<Vec<String>> {
        match self {
            Engine::Files => crate::home::file_names(dir),
            Engine::Postgres(pg) => {
                let prefix = format!("{}/", home.key(dir)?);
                Ok(pg
                    .list(&prefix)?
                    .into_iter()
                    .filter_map(|key| key.strip_prefix(&prefix).map(str::to_owned))
                    .filter(|rest| !rest.contains('/'))
                    .collect())
            }
        }
    }

    /// See [`doc::load`].
    pub(crate) fn load<T: Document>(&self, home: &RooHome, path: &Path) -> Result<Option<T>> {
        match self {
            Engine::Files => doc::load_file(path),
            Engine::Postgres(pg) => doc::load_row(home, pg, path),
        }
    }

    /// See [`doc::load_in_team`].
    pub(crate) fn load_in_team<T: Document>(
        &self,
        home: &RooHome,
        path: &Path,
        config: &Path,
    ) -> Result<(Option<T>, bool)> {
        match self {
            Engine::Files => Ok((doc::load_file(path)?, self.doc_exists(home, config)?)),
            Engine::Postgres(pg) => doc::load_row_in_team(home, pg, path),
        }
    }

    /// One change of the document at `path` (see `doc::update_fenced`).
    pub(crate) fn update<T: Document, R>(
        &self,
        home: &RooHome,
        path: &Path,
        team: Option<&InTeam<'_>>,
        missing: impl FnMut() -> Result<T>,
        change: impl FnMut(Option<&TeamConfig>, &mut T, &mut Guard) -> Result<Outcome<R>>,
    ) -> Result<R> {
        match self {
            Engine::Files => doc::update_file(home, path, team, missing, change),
            Engine::Postgres(pg) => doc::update_row(home, pg, path, team, missing, change),
        }
    }

    /// The archive at `path` outside a change, receipts applied (only the message
    /// `only`, if given).
    pub(crate) fn archive(
        &self,
        home: &RooHome,
        path: &Path,
        only: Option<&MessageId>,
    ) -> Result<Vec<Message>> {
        match self {
            Engine::Files => crate::mailbox::read_archive_filtered(path, only),
            Engine::Postgres(pg) => {
                let lines = pg.archive_lines(&home.key(path)?)?;
                crate::mailbox::fold_archive(lines.into_iter().map(Ok), only, path)
            }
        }
    }

    /// A watcher woken when the document at `path` changes.
    pub(crate) fn watcher(&self, home: &RooHome, path: PathBuf) -> Result<InboxWatcher> {
        match self {
            Engine::Files => InboxWatcher::new(path),
            Engine::Postgres(pg) => {
                let key = home.key(&path)?;
                InboxWatcher::for_pg(path, pg.clone(), key)
            }
        }
    }

    /// A page of the event log at `path` (see [`crate::Team::events`]).
    pub(crate) fn events(
        &self,
        home: &RooHome,
        path: &Path,
        after: Option<u64>,
        limit: usize,
    ) -> Result<EventPage> {
        match self {
            Engine::Files => {
                crate::events::read_files(path, after, limit, crate::events::Rotation::DEFAULT.keep)
            }
            Engine::Postgres(pg) => crate::events::read_rows(pg, &home.key(path)?, after, limit),
        }
    }

    /// See [`crate::quarantine::quarantined`].
    pub(crate) fn quarantined(&self, home: &RooHome, team: &Name) -> Result<Vec<PathBuf>> {
        match self {
            Engine::Files => Ok(crate::quarantine::quarantined_files(home, team)),
            Engine::Postgres(pg) => crate::quarantine::quarantined_rows(home, pg, team),
        }
    }

    /// See [`crate::quarantine::siblings_of`].
    pub(crate) fn quarantined_copies(
        &self,
        home: &RooHome,
        path: &Path,
        acknowledged: bool,
    ) -> Result<Vec<PathBuf>> {
        match self {
            Engine::Files => Ok(crate::quarantine::siblings(path, acknowledged)),
            Engine::Postgres(pg) => crate::quarantine::copies_in_rows(home, pg, path, acknowledged),
        }
    }

    /// See [`crate::quarantine::texts_of`].
    pub(crate) fn quarantined_texts(&self, home: &RooHome, path: &Path) -> Result<Vec<Vec<u8>>> {
        match self {
            Engine::Files => Ok(crate::quarantine::texts_in_files(path)),
            Engine::Postgres(pg) => crate::quarantine::texts_in_rows(home, pg, path),
        }
    }

    /// See [`crate::quarantine::acknowledge`].
    pub(crate) fn acknowledge(&self, home: &RooHome, team: &Name) -> Result<Vec<PathBuf>> {
        match self {
            Engine::Files => crate::quarantine::acknowledge_files(home, team),
            Engine::Postgres(pg) => crate::quarantine::acknowledge_rows(home, pg, team),
        }
    }

    /// The PostgreSQL store as errors name it (`None` for files: the path says it).
    pub(crate) fn target(&self) -> Option<String> {
        match self {
            Engine::Files => None,
            Engine::Postgres(pg) => Some(pg.target().to_owned()),
        }
    }

    /// Whether the document at `path` is missing for sure, without asking the store:
    /// a file not there. On PostgreSQL the change itself finds out, in its own round trip.
    pub(crate) fn surely_missing(&self, path: &Path) -> bool {
        match self {
            Engine::Files => !path.is_file(),
            Engine::Postgres(_) => false,
        }
    }

    /// Whether the shared documents are the home's own files: a look at one is cheap
    /// and a change of a team's document reads the team's config first; otherwise
    /// (PostgreSQL) they are shared with other hosts, a change reads the config in its
    /// own round trip, and the home's files of a team are only this host's.
    pub(crate) fn documents_are_files(&self) -> bool {
        match self {
            Engine::Files => true,
            Engine::Postgres(_) => false,
        }
    }

    /// Whether a member's liveness is proven by its presence (a lock its process holds on
    /// the store's server, for a member with an epoch) rather than by its pid.
    pub(crate) fn proves_presence(&self) -> bool {
        match self {
            Engine::Files => false,
            Engine::Postgres(_) => true,
        }
    }

    /// Moves what is damaged in the document at `path` aside now, in a change of its own,
    /// returning the [`crate::Error::Corrupt`] of a document that was damaged as a whole.
    /// Nothing for files: a load moves a damaged file aside, and that stays.
    pub(crate) fn repair<T: Document>(
        &self,
        home: &RooHome,
        path: &Path,
    ) -> Result<Option<crate::error::Error>> {
        match self {
            Engine::Files => Ok(None),
            Engine::Postgres(pg) => doc::repair_row::<T>(home, pg, path),
        }
    }

    /// See [`crate::Team::delete`].
    pub(crate) fn delete_team(&self, team: &crate::Team, force: bool) -> Result<()> {
        match self {
            Engine::Files => team.delete_files(force),
            Engine::Postgres(pg) => team.delete_rows(pg, force),
        }
    }

    /// Takes the login of `member`'s member role of `team`, if it has one (files have
    /// none): [`crate::Team::remove_member`].
    pub(crate) fn drop_member_role(&self, team: &Name, member: &Name) -> Result<()> {
        match self {
            Engine::Files => Ok(()),
            Engine::Postgres(pg) => pg.drop_member_role(team, member).map(|_| ()),
        }
    }

    /// The presence locks held of `keys` ([`crate::Team::liveness`]); `None` for files,
    /// where a member's pid is the evidence.
    pub(crate) fn held_presence(
        &self,
        keys: impl FnOnce() -> Vec<i64>,
    ) -> Result<Option<crate::pg::HeldKeys>> {
        match self {
            Engine::Files => Ok(None),
            Engine::Postgres(pg) => pg.held_keys(&keys()).map(Some),
        }
    }

    /// See [`crate::Team::evidence_now`].
    pub(crate) fn evidence_now(
        &self,
        team: &Name,
        member: &crate::team::Member,
    ) -> Result<Option<bool>> {
        match self {
            Engine::Files => Ok(member.local_pid().map(crate::lock::pid_alive)),
            Engine::Postgres(pg) => crate::Team::evidence_of_rows(pg, team, member),
        }
    }

    /// See [`crate::Team::hold_presence`]: `entry` is `name`'s, found not marked dead.
    pub(crate) fn hold_presence(
        &self,
        team: &crate::Team,
        name: &Name,
        entry: &crate::team::Member,
    ) -> Result<crate::liveness::Presence> {
        match self {
            Engine::Files => Ok(team.presence_of_files(name)),
            Engine::Postgres(pg) => team.presence_of_rows(pg, name, entry),
        }
    }
}
