//! The PostgreSQL binding of the store (docs/PROTOCOL.md §8): every protocol document
//! is one row of `roo_doc`, keyed by its path under `ROO_HOME` (`teams/<team>/config.json`,
//! `teams/<team>/inboxes/<member>.json`, `tasks/<team>/tasks.json`), its JSON text in a
//! `json` column (kept as written; `jsonb` cannot hold a `\u0000` a message may carry).
//!
//! This module moves bytes; what they mean (versions, damaged records, the writers'
//! limits) stays in `doc`, one code path for both backends. A change is one transaction:
//! the row is locked (`SELECT … FOR UPDATE`, after inserting an empty row if there was
//! none, so two creators of one document queue like two writers), the caller's closure
//! runs on the bytes, and the new text is written together with a `pg_notify` on the
//! team's channel, which PostgreSQL delivers only if the transaction commits. Requests are
//! pipelined: a change takes two round trips (lock and read; write, notify and commit),
//! a read one. `pg/change.rs` runs a change's transaction and learns the outcome of one whose
//! link was lost at its `COMMIT`; `pg/connection.rs` opens a connection (its thread, the
//! schema, the prepared statements); `pg/presence.rs` keeps the presence connection.
//!
//! The client is `tokio-postgres` (the `postgres` crate wraps the same client in a runtime
//! of its own per connection and cannot pipeline): its connection task runs on a thread of
//! this store's own, and the store's synchronous callers wait for their requests with a
//! small `block_on`, so the store stays synchronous and callable from any thread.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use tokio_postgres::Config;

use crate::env::ROO_STORE_ENV;
use crate::error::{Error, Result};
use crate::format_version::FormatVersion;
use tls::PgTls;

mod change;
mod connection;
pub mod pgpass;
mod presence;
mod roles;
pub(crate) mod tls;
pub(crate) mod url;

use connection::{Conn, open_connection_patiently};
pub use roles::MemberLogin;

pub(crate) use change::{Reads, Wants};
pub(crate) use presence::PresenceConn;
pub use presence::{
    KEEPALIVE_COUNT, KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, PresenceSettings, USER_TIMEOUT,
    presence_key,
};

/// The schema version this build creates and reads, recorded in `roo_meta`. A database
/// with a newer major is refused, like a file from a newer format.
pub const SCHEMA_VERSION: FormatVersion = FormatVersion { major: 1, minor: 1 };

/// The longest a change waits for a row lock another participant holds (the file store's
/// lock queue gives up after the same time).
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// How long a connection being opened — the first of a process, or again after the link
/// was lost — keeps being tried while the server refuses it for now (a restart takes a
/// few seconds; a full server frees a session soon): see
/// `connection::open_connection_patiently`.
const RECONNECT_FOR: Duration = Duration::from_secs(10);

/// How long one attempt to open a connection may take, per host the URL names: its
/// start-up (TCP, TLS, login) and its set-up statements together. A listener that
/// accepts and never answers (another program on the port, a hung server) ends the
/// attempt here instead of holding the caller — and, on a reconnect, every store
/// operation of the process — for ever. With [`RECONNECT_FOR`], an open ends within
/// `RECONNECT_FOR + START_UP` (and a jittered pause) for a one-host URL
/// (docs/DISTRIBUTED.md).
const START_UP: Duration = Duration::from_secs(10);

/// [`START_UP`] for each host `config` names (each may take its connect timeout).
fn start_up_limit(config: &Config) -> Duration {
    START_UP * u32::try_from(config.get_hosts().len().max(1)).unwrap_or(u32::MAX / 16)
}

/// The sentence for an attempt that got no answer within `limit`, at `stage`.
fn silent_server(stage: Stage, limit: Duration) -> String {
    match stage {
        Stage::StartUp => format!(
            "the server did not answer the connection's start-up (TCP, TLS, login) in {} s; \
             another program may be listening on that port, or the server is hung",
            limit.as_secs()
        ),
        Stage::SetUp => format!(
            "the server accepted the login but did not answer the session's set-up \
             statements in {} s; is it hung?",
            limit.as_secs()
        ),
    }
}

/// Where an attempt to open a connection got no answer: see [`silent_server`].
#[derive(Clone, Copy)]
enum Stage {
    StartUp,
    SetUp,
}

thread_local! {
    /// The stores whose connection this thread holds, once per [`PgStore::serialize`].
    static HELD: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The connection held by this thread; `depth` > 0 when it held it already.
struct Hold<'a> {
    _guard: Option<std::sync::MutexGuard<'a, ()>>,
    depth: usize,
    /// The connection to use: the one open when the outermost hold was taken.
    conn: Arc<Conn>,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        HELD.with(|held| {
            held.borrow_mut().pop();
        });
    }
}

impl Hold<'_> {
    /// Starts this level's transaction: the transaction itself, or a savepoint in it.
    fn begin(&self) -> String {
        match self.depth {
            0 => "BEGIN".to_string(),
            n => format!("SAVEPOINT roo_{n}"),
        }
    }

    fn commit(&self) -> String {
        match self.depth {
            0 => "COMMIT".to_string(),
            n => format!("RELEASE SAVEPOINT roo_{n}"),
        }
    }

    fn rollback(&self) -> String {
        match self.depth {
            0 => "ROLLBACK".to_string(),
            n => format!("ROLLBACK TO SAVEPOINT roo_{n}; RELEASE SAVEPOINT roo_{n}"),
        }
    }
}

/// A callback run on the connection thread when its key is notified (or the connection
/// closes): it must only signal, never block.
type OnNotify = Arc<dyn Fn() + Send + Sync>;

/// The watchers of one store's connection, by key.
#[derive(Default)]
struct Watchers {
    by_key: Mutex<std::collections::HashMap<String, Vec<(u64, OnNotify)>>>,
    next: std::sync::atomic::AtomicU64,
}

impl Watchers {
    fn notify(&self, key: &str) {
        let callbacks: Vec<OnNotify> = self
            .by_key
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .map(|list| list.iter().map(|(_, f)| f.clone()).collect())
            .unwrap_or_default();
        for callback in callbacks {
            callback();
        }
    }

    /// The connection ended: every watcher wakes (its poll then sees the error).
    fn closed(&self) {
        let callbacks: Vec<OnNotify> = self
            .by_key
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .flat_map(|list| list.iter().map(|(_, f)| f.clone()))
            .collect();
        for callback in callbacks {
            callback();
        }
    }
}

/// A registration made by [`PgStore::watch`]; dropping it ends it.
pub(crate) struct Subscription {
    watchers: Arc<Watchers>,
    key: String,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut by_key = self
            .watchers
            .by_key
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(list) = by_key.get_mut(&self.key) {
            list.retain(|(id, _)| *id != self.id);
            if list.is_empty() {
                by_key.remove(&self.key);
            }
        }
    }
}

impl Fence {
    /// Refuses a write whose member's entry in the team's config `config` (its text, as
    /// the change's first round trip read it under the share lock) is gone, marked dead,
    /// or holds another epoch.
    pub(crate) fn check(&self, config: &str) -> Result<()> {
        let refuse = |reason: String| Error::Fenced {
            team: self.team.clone(),
            member: self.member.clone(),
            epoch: self.epoch,
            reason,
        };
        let config: serde_json::Value = serde_json::from_str(config)
            .map_err(|e| refuse(format!("the team's config does not parse: {e}")))?;
        let entry = config
            .get("members")
            .and_then(serde_json::Value::as_array)
            .and_then(|members| {
                members.iter().find(|m| {
                    m.get("name").and_then(serde_json::Value::as_str) == Some(self.member.as_str())
                })
            });
        let Some(entry) = entry else {
            return Err(refuse("it is no longer a member of the team".into()));
        };
        if let Some(dead_at) = entry.get("dead_at").filter(|v| !v.is_null()) {
            let reason = entry
                .get("dead_reason")
                .and_then(|r| r.as_str())
                .unwrap_or("no reason given");
            return Err(refuse(format!(
                "it was declared dead at {} ({reason})",
                dead_at.as_str().unwrap_or("an unknown time")
            )));
        }
        match entry.get("epoch").and_then(serde_json::Value::as_u64) {
            Some(epoch) if epoch == self.epoch => Ok(()),
            Some(epoch) => Err(refuse(format!(
                "its entry was taken over by a later join (epoch {epoch})"
            ))),
            None => Err(refuse(
                "its entry was taken over by a join without presence".into(),
            )),
        }
    }
}

/// One level of an open transaction (the transaction, or a savepoint in it): rolled
/// back when dropped unless [`Open::finish`]ed — a change that fails, returns early or
/// panics leaves no transaction open and no row locked.
struct Open<'a> {
    conn: &'a Conn,
    begin_sql: String,
    commit_sql: String,
    rollback_sql: String,
    finished: bool,
}

impl<'a> Open<'a> {
    fn begin(conn: &'a Conn, hold: &Hold<'_>) -> Open<'a> {
        Open {
            conn,
            begin_sql: hold.begin(),
            commit_sql: hold.commit(),
            rollback_sql: hold.rollback(),
            finished: false,
        }
    }

    /// The level committed (or released): nothing to roll back.
    fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let _ = block_on(self.conn.client.batch_execute(&self.rollback_sql));
        }
    }
}

/// The config key of the team a document key belongs to, for an inbox or a task list.
fn team_config_key(key: &str) -> Option<String> {
    let parts: Vec<&str> = key.split('/').collect();
    match parts.as_slice() {
        ["teams", team, "inboxes", _] | ["tasks", team, _] => {
            Some(format!("teams/{team}/config.json"))
        }
        _ => None,
    }
}

/// Whether the server gave up waiting for a lock (`lock_timeout`, SQLSTATE 55P03).
fn is_lock_timeout(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE)
}

/// A client error as a message: the server's own message and detail when it sent one
/// (the client's text for those is only "db error"), else the error and its causes.
fn engine_detail(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!("{} ({})", db.message(), db.code().code());
        if let Some(detail) = db.detail() {
            text.push_str(&format!(": {detail}"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// A connection to the PostgreSQL store. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
    /// Whose writes this handle makes: set by a presence ([`PgStore::set_fence`]) and
    /// shared by every clone, so every handle a runtime derived from one team handle —
    /// before or after — writes fenced as that member.
    fence: Arc<FenceSlot>,
}

/// What [`PgStore::held_keys`] found.
#[derive(Clone, Debug, Default)]
pub(crate) struct HeldKeys {
    /// The keys held.
    pub(crate) held: std::collections::HashSet<i64>,
    /// The server started less than [`RESTART_GRACE`] ago: every lock was dropped with
    /// the old server, and live members may not have taken theirs again yet, so a key
    /// not held is no evidence of death.
    pub(crate) server_restarted: bool,
}

impl HeldKeys {
    /// What the lock `key` says of its member: held, alive; not held, dead — unless the
    /// server has just started, when it says nothing.
    pub(crate) fn evidence(&self, key: i64) -> Option<bool> {
        match self.held.contains(&key) {
            true => Some(true),
            false if self.server_restarted => None,
            false => Some(false),
        }
    }
}

thread_local! {
    /// The presence locks held, read in the first round trip of the change running on
    /// this thread ([`Wants::presence`]): liveness asked inside it costs no round trip.
    /// With the store it was read from (its connection's address: another database's
    /// locks answer nothing here).
    static PREFETCHED: std::cell::RefCell<Option<(usize, HeldKeys)>> = const { std::cell::RefCell::new(None) };
    /// Set while a caller wants the changes it makes on this thread to read the held
    /// presence locks in their first round trip ([`want_presence`]).
    static WANT_PRESENCE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While alive, [`PgStore::held_keys`] on this thread answers from `held` (every lock
/// held, read in the running change's first round trip).
pub(crate) struct Prefetched {
    before: Option<(usize, HeldKeys)>,
}

impl Prefetched {
    pub(crate) fn enter(store: &PgStore, held: HeldKeys) -> Prefetched {
        let before = PREFETCHED.with(|p| p.replace(Some((store.id(), held))));
        Prefetched { before }
    }
}

impl Drop for Prefetched {
    fn drop(&mut self) {
        let before = self.before.take();
        PREFETCHED.with(|p| *p.borrow_mut() = before);
    }
}

/// While alive, the changes made on this thread read the held presence locks in their
/// first round trip (a change of a task list that judges its owners' liveness).
pub(crate) struct WantPresence {
    before: bool,
}

pub(crate) fn want_presence() -> WantPresence {
    WantPresence {
        before: WANT_PRESENCE.with(|w| w.replace(true)),
    }
}

impl Drop for WantPresence {
    fn drop(&mut self) {
        WANT_PRESENCE.with(|w| w.set(self.before));
    }
}

/// Whether a change of document `key` reads the held presence locks in its first round
/// trip: a team's config (joins, deaths and the lead's claim judge liveness in it), or
/// any change while [`want_presence`] is held.
pub(crate) fn wants_presence(key: &str) -> bool {
    WANT_PRESENCE.with(std::cell::Cell::get)
        || (key.starts_with("teams/")
            && key.ends_with("/config.json")
            && key.matches('/').count() == 2)
}

/// How long after a server start a presence lock not held proves nothing: members
/// reconnect within a second or two (the presence connection's back-off is at most 1 s)
/// and take their locks again; until then a lead must not declare them all dead.
pub const RESTART_GRACE: Duration = Duration::from_secs(10);

/// The fence of one handle and its clones (see [`PgStore::set_fence`]).
#[derive(Default)]
pub(crate) struct FenceSlot(Mutex<Option<Arc<Fence>>>);

/// Writes made "as member `member` of `team` with epoch `epoch`": each change of the
/// team's inboxes or task list checks, under the config row's share lock in its first
/// round trip, that the member's entry is there, not marked dead and still has this
/// epoch — else it is refused ([`Error::Fenced`]) and writes nothing.
#[derive(Clone, Debug)]
pub(crate) struct Fence {
    pub(crate) team: String,
    pub(crate) member: String,
    pub(crate) epoch: u64,
}

struct Inner {
    /// How to connect again after the link was lost.
    config: Config,
    /// TLS for both connections and their reconnects, built once from the URL.
    tls: PgTls,
    /// The current connection; replaced by the next operation once it is closed, opened
    /// again by the next operation once released ([`PgStore::release_idle_connection`]).
    conn: Mutex<Option<Arc<Conn>>>,
    /// The presence connection (LISTEN, the watchers' polls, presence locks), opened when
    /// first needed.
    presence: Mutex<Option<Arc<PresenceConn>>>,
    /// Who waits for which key's notifications.
    watchers: Arc<Watchers>,
    /// One transaction at a time on the one connection.
    transaction: Mutex<()>,
    /// The server, for messages: host or socket directory, port, database.
    target: String,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PgStore").field(&self.inner.target).finish()
    }
}

/// What a change wants written besides its document, in the same transaction.
#[derive(Default)]
pub(crate) struct PgWrites {
    /// Damaged text moved out of the way: `(key, detail, text)`.
    quarantined: Vec<(String, String, String)>,
    /// Lines appended to archives: `(archive key, line)`.
    archived: Vec<(String, String)>,
    /// Prefixes whose documents and archives are deleted (a team's).
    deleted: Vec<String>,
    /// Events appended to logs: `(log key, body)`, in order.
    pub(crate) events: Vec<(String, String)>,
}

impl PgWrites {
    /// Keeps `text` (damaged records or a whole damaged document of `key`) in
    /// `roo_quarantine`, with why.
    pub(crate) fn quarantine(&mut self, key: &str, detail: &str, text: String) {
        self.quarantined
            .push((key.to_owned(), detail.to_owned(), text));
    }

    /// Appends `line` to the archive `key` (`roo_archive`).
    pub(crate) fn archive(&mut self, key: &str, line: String) {
        self.archived.push((key.to_owned(), line));
    }

    /// Deletes every document and archive under `prefix` (a directory of the file
    /// layout, ending in `/`).
    pub(crate) fn delete_under(&mut self, prefix: &str) {
        self.deleted.push(format!("{}%", like_escape(prefix)));
    }

    /// Appends an event (its `body`, without seq and time) to the log `key`
    /// (`roo_event`): its seq and time are given by the server in the same transaction.
    pub(crate) fn event(&mut self, key: &str, body: String) {
        self.events.push((key.to_owned(), body));
    }

    fn is_empty(&self) -> bool {
        self.quarantined.is_empty()
            && self.archived.is_empty()
            && self.deleted.is_empty()
            && self.events.is_empty()
    }
}

/// A row of an event log: its seq, its time in milliseconds since the epoch, its body.
pub(crate) type EventRow = (i64, i64, String);

/// What a change does with its document.
pub(crate) enum PgChange<R> {
    /// Write this text (and the other writes), notify, commit; return the value.
    Write(R, String),
    /// Delete the row (and do the other writes), notify, commit; return the value.
    Delete(R),
    /// Change nothing: roll back (the other writes too), return the value.
    Keep(R),
}

impl PgStore {
    /// Connects to the store at `url` (`postgresql://…`; the password from the URL, else
    /// `PGPASSWORD`, else the password file: see [`pgpass`]) and creates or checks
    /// the schema.
    pub fn connect(url: &str) -> Result<PgStore> {
        PgStore::connect_with(url, &pgpass::process_env)
    }

    /// [`PgStore::connect`] with the password variables looked up by `env`.
    pub fn connect_with(url: &str, env: pgpass::EnvLookup<'_>) -> Result<PgStore> {
        let shown = shown_url(url).map_err(|reason| Error::InvalidSetting {
            name: ROO_STORE_ENV,
            reason,
        })?;
        let config = url::parse(url).map_err(|_| Error::InvalidSetting {
            name: ROO_STORE_ENV,
            reason: format!("{shown} does not parse"),
        })?;
        let target = describe(&config);
        let mut config = config;
        let tls = PgTls::from_url(url, &mut config).map_err(|reason| Error::InvalidSetting {
            name: ROO_STORE_ENV,
            reason: format!("{shown}: {reason}"),
        })?;
        pgpass::fill_password(&mut config, env);
        // A server lost behind a cut link is seen in seconds, not hours (issue 21); the
        // presence connection's session asks the server for the same about this side.
        // Neither applies to a unix socket.
        config
            .connect_timeout(Duration::from_secs(10))
            .keepalives(true)
            .keepalives_idle(KEEPALIVE_IDLE)
            .keepalives_interval(KEEPALIVE_INTERVAL)
            .keepalives_retries(KEEPALIVE_COUNT)
            .tcp_user_timeout(USER_TIMEOUT);
        let watchers = Arc::new(Watchers::default());
        // A CLI started while the server restarts, or is full, waits for it: nothing has
        // run yet.
        let conn = open_connection_patiently(&config, &tls, &target, &watchers, RECONNECT_FOR)?;
        Ok(PgStore {
            inner: Arc::new(Inner {
                config,
                tls,
                conn: Mutex::new(Some(Arc::new(conn))),
                presence: Mutex::new(None),
                watchers,
                transaction: Mutex::new(()),
                target,
            }),
            fence: Arc::default(),
        })
    }

    /// This store (the same connections) with a fence of its own, empty: what a new team
    /// handle starts with (`Team::open`, `Team::create`), so the members a process runs
    /// (a lead and its in-process teammates) each write through their own.
    pub(crate) fn detached(&self) -> PgStore {
        PgStore {
            inner: self.inner.clone(),
            fence: Arc::default(),
        }
    }

    /// The fence this handle writes under, if any.
    pub(crate) fn fence(&self) -> Option<Arc<Fence>> {
        self.fence
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// From now on every change of `fence.team`'s documents made through this handle or
    /// any of its clones is made as `fence.member` with `fence.epoch` (see [`Fence`]).
    /// Refused (returning the fence in place) if the handle already writes as another
    /// member or team; a later epoch of the same member replaces the earlier one.
    pub(crate) fn set_fence(&self, fence: Fence) -> std::result::Result<(), Arc<Fence>> {
        let mut slot = self.fence.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(current) = slot.as_ref()
            && (current.team != fence.team || current.member != fence.member)
        {
            return Err(current.clone());
        }
        *slot = Some(Arc::new(fence));
        Ok(())
    }

    /// Which store this is (its shared connections' address), for thread-locals.
    fn id(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// The presence connection, opened now if it is not yet.
    pub(crate) fn presence(&self) -> Result<Arc<PresenceConn>> {
        let mut slot = self
            .inner
            .presence
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let conn = Arc::new(PresenceConn::open(
            &self.inner.config,
            &self.inner.tls,
            &self.inner.target,
            self.inner.watchers.clone(),
        )?);
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// The presence connection's keepalive settings as the server applies them, and
    /// whether death detection takes seconds (what `doctor` shows).
    pub fn presence_settings(&self) -> Result<PresenceSettings> {
        self.presence()?.settings()
    }

    /// A new epoch from the server: a transaction id (`txid_current()`), unique in the
    /// whole cluster and never reused, so no two joins — in any schema or team — share one.
    pub(crate) fn new_epoch(&self) -> Result<u64> {
        let row = self.request("draw a presence epoch", |conn| {
            block_on(conn.client.query_one(&conn.statements.new_epoch, &[]))
        })?;
        u64::try_from(row.get::<_, i64>(0))
            .map_err(|_| self.error("draw a presence epoch", "the server gave a negative id"))
    }

    /// Which of the presence lock `keys` some session holds now: one query on `pg_locks`
    /// (granted advisory locks of this database), which also says whether the server
    /// started less than [`RESTART_GRACE`] ago. Inside a change it runs in its
    /// transaction, under the row lock the change holds. A key this process's own
    /// presence connection holds, or is taking again after a lost link, counts as held:
    /// its member runs here.
    pub(crate) fn held_keys(&self, keys: &[i64]) -> Result<HeldKeys> {
        if keys.is_empty() {
            return Ok(HeldKeys::default());
        }
        let prefetched = PREFETCHED
            .with(|p| p.borrow().clone())
            .filter(|(store, _)| *store == self.id());
        let (mut held, server_restarted) = match prefetched {
            // Inside a change of this store that read every held lock in its first round
            // trip.
            Some((_, all)) => (
                keys.iter()
                    .copied()
                    .filter(|key| all.held.contains(key))
                    .collect(),
                all.server_restarted,
            ),
            None => {
                let grace = RESTART_GRACE.as_secs_f64();
                let row = self.request("read the presence locks", |conn| {
                    block_on(
                        conn.client
                            .query_one(&conn.statements.held_keys, &[&keys, &grace]),
                    )
                })?;
                let held: std::collections::HashSet<i64> =
                    row.get::<_, Vec<i64>>(0).into_iter().collect();
                (held, row.get::<_, bool>(1))
            }
        };
        let own = self
            .inner
            .presence
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(own) = own {
            held.extend(keys.iter().copied().filter(|key| own.wants(*key)));
        }
        Ok(HeldKeys {
            held,
            server_restarted,
        })
    }

    /// Over TCP, why this store's URL does not check the server's identity (`sslmode`
    /// disable, prefer or require written): a teammate on another host handed this URL
    /// may be talking to a man in the middle. `None` when it does (the default over TCP),
    /// or for a unix socket. What the remote spawn and `doctor` warn of.
    pub fn unverified_tls(&self) -> Option<String> {
        self.inner.tls.unverified()
    }

    /// When every host of this store's URL is on this machine (a unix socket, a loopback
    /// address), what they are: handed to another host, the URL would name a server
    /// there (see `url::only_this_machine`). What the remote spawn refuses.
    pub fn only_this_machine(&self) -> Option<String> {
        url::only_this_machine(&self.inner.config)
    }

    /// The server, as messages name it.
    pub fn target(&self) -> &str {
        &self.inner.target
    }

    fn error(&self, action: impl Into<String>, e: impl std::fmt::Display) -> Error {
        Error::Engine {
            action: action.into(),
            target: self.inner.target.clone(),
            detail: e.to_string(),
        }
    }

    /// [`PgStore::error`] of a client error, with the server's message.
    fn db_error(&self, action: impl Into<String>, e: &tokio_postgres::Error) -> Error {
        self.error(action, engine_detail(e))
    }

    /// The connection, for one request or one transaction: a read must not run inside
    /// another thread's open transaction (it would see its state, or fail with it). On
    /// the thread that holds it already (a read or a change inside a change's closure,
    /// e.g. a team's task list created inside its config's change) it is used as held:
    /// such a nested change is a savepoint of the outer transaction.
    fn serialize(&self) -> Result<Hold<'_>> {
        let id = self.id();
        let depth = HELD.with(|held| held.borrow().iter().filter(|&&h| h == id).count());
        let guard = (depth == 0).then(|| {
            self.inner
                .transaction
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        });
        let conn = {
            let mut current = self
                .inner
                .conn
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // A lost link (server restart, failover, a cut network) is replaced at the
            // next operation, never inside a transaction: what was open there failed
            // with it, and its outcome is the caller's to re-read.
            match current.as_ref() {
                Some(conn) if depth == 0 && (conn.client.is_closed() || conn.is_lost()) => {
                    let conn = Arc::new(self.reconnect_patiently()?);
                    *current = Some(conn.clone());
                    conn
                }
                Some(conn) => conn.clone(),
                // Released while idle: opened again, patiently (the server may be full
                // for a moment). Nothing was lost, so no watcher is woken now, nor when
                // it is released again: it dispatches to watchers of its own (it LISTENs
                // on nothing; the LISTENs live on the presence connection, which wakes
                // the watchers when its own link is lost). Woken by each release, a
                // watcher would read, open, release and be woken again, forever.
                None => {
                    let conn = Arc::new(open_connection_patiently(
                        &self.inner.config,
                        &self.inner.tls,
                        &self.inner.target,
                        &Arc::new(Watchers::default()),
                        RECONNECT_FOR,
                    )?);
                    *current = Some(conn.clone());
                    conn
                }
            }
        };
        HELD.with(|held| held.borrow_mut().push(id));
        Ok(Hold {
            _guard: guard,
            depth,
            conn,
        })
    }

    /// Closes the request connection (its session ends) until the next operation needs
    /// it, which opens it again (trying for [`RECONNECT_FOR`] while the server is full).
    /// What a process that waits long between operations and holds no presence does
    /// (`roo-mail watch`: its LISTENs live on the presence connection), so it holds one
    /// session while it waits. Waits for an operation in progress on another thread;
    /// must not be called inside a change's closure.
    pub fn release_idle_connection(&self) {
        let _no_transaction = self
            .inner
            .transaction
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// A new connection in place of one whose link was lost, tried again with backoff
    /// for [`RECONNECT_FOR`] while the server refuses it for now (a restart).
    fn reconnect_patiently(&self) -> Result<Conn> {
        let conn = open_connection_patiently(
            &self.inner.config,
            &self.inner.tls,
            &self.inner.target,
            &self.inner.watchers,
            RECONNECT_FOR,
        )?;
        // The LISTENs live on the presence connection, which restores its own; a watcher
        // woken here only reads once more.
        self.inner.watchers.closed();
        Ok(conn)
    }

    /// The text of document `key`; `None` if there is none. One round trip, no lock
    /// (asked again on a new connection if the link was lost).
    pub(crate) fn read(&self, key: &str) -> Result<Option<String>> {
        let rows = self.request(&format!("read {key}"), |conn| {
            block_on(conn.client.query(&conn.statements.read, &[&key]))
        })?;
        Ok(rows.first().and_then(|row| row.get::<_, Option<String>>(0)))
    }

    /// [`PgStore::read`] of a team's document (an inbox or the task list), and whether
    /// the team's config exists: one statement, one round trip.
    pub(crate) fn read_in_team(&self, key: &str) -> Result<(Option<String>, bool)> {
        let config_key = team_config_key(key).unwrap_or_default();
        let row = self.request(&format!("read {key}"), |conn| {
            block_on(
                conn.client
                    .query_one(&conn.statements.read_in_team, &[&key, &config_key]),
            )
        })?;
        Ok((row.get::<_, Option<String>>(0), row.get::<_, bool>(1)))
    }

    /// Locked read → change → write of document `key`, in one transaction; `change`
    /// gets the current text (`None`: no document) and says what to write. A failed
    /// `change` writes nothing. The team's channel is notified with `key` when the
    /// transaction commits a change. `change` may run more than once: again from scratch
    /// when the link was lost before its transaction committed (`change`).
    pub(crate) fn update<R>(
        &self,
        key: &str,
        mut change: impl FnMut(Option<String>, &mut PgWrites) -> Result<PgChange<R>>,
    ) -> Result<R> {
        self.update_checked(key, true, Wants::default(), |text, _, writes| {
            change(text, writes)
        })
    }

    /// [`PgStore::update`] without the team check: for repairing a damaged row (which
    /// may belong to a team being created anew over it).
    pub(crate) fn update_unchecked<R>(
        &self,
        key: &str,
        mut change: impl FnMut(Option<String>, &mut PgWrites) -> Result<PgChange<R>>,
    ) -> Result<R> {
        self.update_checked(key, false, Wants::default(), |text, _, writes| {
            change(text, writes)
        })
    }

    /// [`PgStore::update`] of a team's document that also reads, in the same round trip,
    /// what `wants` names: the team's config (held shared until the commit; `None` to
    /// the change when there is none, which then decides) and the document's quarantined
    /// texts.
    pub(crate) fn update_with<R>(
        &self,
        key: &str,
        wants: Wants,
        change: impl FnMut(Option<String>, &Reads, &mut PgWrites) -> Result<PgChange<R>>,
    ) -> Result<R> {
        self.update_checked(key, true, wants, change)
    }

    /// The lines of archive `key`, oldest first.
    pub(crate) fn archive_lines(&self, key: &str) -> Result<Vec<String>> {
        self.archive_lines_in_transaction(key)
    }

    /// [`PgStore::archive_lines`] from inside an [`PgStore::update`]'s change (the
    /// connection is held re-entrantly, so it is the same read).
    pub(crate) fn archive_lines_in_transaction(&self, key: &str) -> Result<Vec<String>> {
        let rows = self.request(&format!("read {key}"), |conn| {
            block_on(conn.client.query(&conn.statements.archive_lines, &[&key]))
        })?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    /// The newest `limit` events of log `key` with seq > `after`, newest first, and the
    /// log's last seq (0: none).
    pub(crate) fn events(
        &self,
        key: &str,
        after: u64,
        limit: usize,
    ) -> Result<(Vec<EventRow>, u64)> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.request(&format!("read {key}"), |conn| {
            block_on(
                conn.client
                    .query(&conn.statements.events_page, &[&key, &after, &limit]),
            )
        })?;
        let mut last = rows
            .first()
            .and_then(|row| row.get::<_, Option<i64>>(3))
            .unwrap_or(0);
        if rows.is_empty() {
            let seq = self.request(&format!("read {key}"), |conn| {
                block_on(conn.client.query(&conn.statements.last_event_seq, &[&key]))
            })?;
            last = seq.first().map(|row| row.get::<_, i64>(0)).unwrap_or(0);
        }
        let events = rows
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect();
        Ok((events, u64::try_from(last).unwrap_or(0)))
    }

    /// Keys of the documents (not placeholders) under `prefix` (a directory of the file
    /// layout, ending in `/`), sorted.
    pub(crate) fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let pattern = format!("{}%", like_escape(prefix));
        let rows = self.request(&format!("list {prefix}"), |conn| {
            block_on(conn.client.query(&conn.statements.list, &[&pattern]))
        })?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    /// Calls `on_change` (on the connection thread; it must only signal) whenever a
    /// committed change of document `key` is notified, until the returned subscription
    /// is dropped. LISTENs on the key's team channel first (once per connection).
    pub(crate) fn watch(&self, key: &str, on_change: OnNotify) -> Result<Subscription> {
        let channel = channel_of(key);
        let watchers = &self.inner.watchers;
        let id = watchers
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        watchers
            .by_key
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.to_owned())
            .or_default()
            .push((id, on_change));
        let subscription = Subscription {
            watchers: watchers.clone(),
            key: key.to_owned(),
            id,
        };
        // On the presence connection, which never runs a transaction: a change waiting
        // for a row lock on the request connection never holds a notification back.
        self.presence()?.listen(&channel)?;
        Ok(subscription)
    }

    /// The revision of document `key` (changes with every committed write), `None` if
    /// there is no row: what a watcher's poll compares. Read on the presence connection,
    /// so a poll never waits for a change in progress.
    pub(crate) fn revision(&self, key: &str) -> Result<Option<i64>> {
        self.presence()?.revision(key)
    }

    /// Whether document `key` exists (a placeholder row does not count).
    pub(crate) fn exists(&self, key: &str) -> Result<bool> {
        let rows = self.request(&format!("read {key}"), |conn| {
            block_on(conn.client.query(&conn.statements.exists, &[&key]))
        })?;
        Ok(!rows.is_empty())
    }

    /// The quarantined texts of document `key` (acknowledged ones too if
    /// `acknowledged`), oldest first, with their ids.
    pub(crate) fn quarantined(&self, key: &str, acknowledged: bool) -> Result<Vec<(i64, String)>> {
        let rows = self.request(&format!("read the quarantine of {key}"), |conn| {
            block_on(
                conn.client
                    .query(&conn.statements.quarantined, &[&key, &acknowledged]),
            )
        })?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    /// Keys with unacknowledged quarantined texts under `prefix`, with their ids.
    pub(crate) fn quarantined_under(&self, prefix: &str) -> Result<Vec<(i64, String)>> {
        let pattern = format!("{}%", like_escape(prefix));
        let rows = self.request(&format!("read the quarantine of {prefix}"), |conn| {
            block_on(
                conn.client
                    .query(&conn.statements.quarantined_under, &[&pattern]),
            )
        })?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    /// Marks the quarantined texts under `prefix` acknowledged; returns their ids.
    pub(crate) fn acknowledge_under(&self, prefix: &str) -> Result<Vec<i64>> {
        let hold = self.serialize()?;
        let pattern = format!("{}%", like_escape(prefix));
        let rows = block_on(hold.conn.client.query(
            "UPDATE roo_quarantine SET acknowledged = true WHERE key LIKE $1 AND NOT \
             acknowledged RETURNING id",
            &[&pattern],
        ))
        .map_err(|e| self.db_error(format!("acknowledge the quarantine of {prefix}"), &e))?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }
}

/// The notification channel of the team a key belongs to: `roo_` and 16 hex digits of
/// FNV-1a 64 of the team name (a channel name is an identifier of at most 63 bytes; a
/// team name may be longer). Keys outside a team use the channel `roo`.
pub fn channel_of(key: &str) -> String {
    let mut parts = key.split('/');
    match (parts.next(), parts.next()) {
        (Some("teams" | "tasks"), Some(team)) if !team.is_empty() => {
            format!("roo_{:016x}", fnv1a(team.as_bytes()))
        }
        _ => "roo".to_string(),
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn like_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

/// The server a config points at, without credentials.
fn describe(config: &Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(Host::Unix(dir)) => dir.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().unwrap_or("(default database)");
    format!("{host}:{port}/{db}")
}

/// How messages show the store at `url`: `postgresql://user@host:port/database`, built
/// from the parsed URL, so no password (in the authority, or `?password=`) is ever shown.
/// `Err` says why it is refused, without its value: it does not parse, or it has more
/// than one `@` (a password holding an unencoded `@` would be taken partly as the host).
pub(crate) fn shown_url(url: &str) -> std::result::Result<String, String> {
    let before_query = url.split('?').next().unwrap_or(url);
    if before_query.matches('@').count() > 1 {
        return Err(
            "its postgresql:// URL has more than one `@`: percent-encode an `@` in the \
             password as %40"
                .into(),
        );
    }
    let config = url::parse(url).map_err(|_| {
        "its postgresql:// URL does not parse (check the host, port and options; \
         percent-encode `@`, `/` and `?` in a password)"
            .to_string()
    })?;
    let user = config
        .get_user()
        .map(|user| format!("{user}@"))
        .unwrap_or_default();
    Ok(format!("postgresql://{user}{}", describe(&config)))
}

/// Waits for `future` on this thread. The client's futures only talk over channels to
/// the connection task (which the store's own thread drives), so they need no runtime
/// here, and this works from any thread, inside an async runtime or not.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    loop {
        let hour = Instant::now() + Duration::from_secs(3600);
        if let Some(output) = block_on_until(hour, future.as_mut()) {
            return output;
        }
    }
}

/// [`block_on`] until `deadline`: `None` if `future` is not done by then (it is dropped).
fn block_on_until<F: Future>(deadline: Instant, future: F) -> Option<F::Output> {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut context) {
            Poll::Ready(output) => return Some(output),
            Poll::Pending => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return None;
                }
                std::thread::park_timeout(left);
            }
        }
    }
}

#[cfg(test)]
mod tests;
