//! The presence connection: a second connection per process to the PostgreSQL store,
//! opened when a watcher or a presence first needs it, that never runs a transaction.
//!
//! It carries what must not wait behind the request connection's changes: the `LISTEN`s
//! of the inbox watchers (so a change waiting for a row lock never holds a notification
//! back), the watchers' safety-net polls, and the session advisory locks that say a member
//! is alive (its presence, PROTOCOL.md §8). Its session sets the TCP keepalive settings
//! that make the server see a dead peer in seconds ([`KEEPALIVE_IDLE`] …): the lock of a
//! member whose host vanished is freed when the server drops its session.
//!
//! One thread owns the connection and its wanted state (channels, locks): callers send it
//! commands. When the link is lost it connects again by itself (with backoff, for as long
//! as the store lives), `LISTEN`s again, takes the locks again (a presence whose member was declared dead meanwhile is given up), and wakes every watcher
//! to read afresh (a notification sent meanwhile is lost). Reads (the watchers' polls,
//! `doctor`'s settings) use the current client directly.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio_postgres::{AsyncMessage, Client, Config, Statement};

use super::connection::{Patience, is_transient};
use super::tls::PgTls;
use super::{Fence, Stage, Watchers, block_on, engine_detail, silent_server, start_up_limit};
use crate::error::{Error, Result};

/// Idle time before the first TCP keepalive probe, on both ends of the presence
/// connection (`tcp_keepalives_idle` on the server, the client's socket option).
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(2);
/// Time between keepalive probes (`tcp_keepalives_interval`).
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// Unanswered probes before the peer counts as gone (`tcp_keepalives_count`).
pub const KEEPALIVE_COUNT: u32 = 3;
/// How long sent data may stay unacknowledged before the connection is dropped
/// (`tcp_user_timeout`): what bounds detection when a link is cut while data is in flight.
pub const USER_TIMEOUT: Duration = Duration::from_millis(5000);

/// How often a presence lock that could not be taken again after a reconnect (the server
/// had not yet dropped the old session) is tried again.
const RELOCK_EVERY: Duration = Duration::from_millis(500);

/// The server settings the presence session sets, with their values.
fn session_settings() -> [(&'static str, String); 4] {
    [
        ("tcp_keepalives_idle", KEEPALIVE_IDLE.as_secs().to_string()),
        (
            "tcp_keepalives_interval",
            KEEPALIVE_INTERVAL.as_secs().to_string(),
        ),
        ("tcp_keepalives_count", KEEPALIVE_COUNT.to_string()),
        ("tcp_user_timeout", USER_TIMEOUT.as_millis().to_string()),
    ]
}

/// What the thread is asked to do.
enum Command {
    /// `LISTEN` on a channel (kept across reconnects).
    Listen {
        channel: String,
        reply: std::sync::mpsc::Sender<std::result::Result<(), String>>,
    },
    /// Take a session advisory lock (kept across reconnects): `Ok(false)` if another
    /// session holds it.
    Lock {
        key: i64,
        /// The member whose presence it is: after a reconnect the lock is taken again
        /// only while its entry still vouches for this epoch (not marked dead, not
        /// taken over), checked under the config row's share lock.
        guard: Option<Fence>,
        reply: std::sync::mpsc::Sender<std::result::Result<bool, String>>,
    },
    /// Release a lock taken with `Lock`; the reply says it is done.
    Unlock {
        key: i64,
        reply: std::sync::mpsc::Sender<()>,
    },
}

/// What callers read without going through the thread.
#[derive(Default)]
struct Shared {
    /// The live connection, while there is one.
    live: Mutex<Option<Arc<Live>>>,
    /// The locks held now (a lock waiting to be taken again after a reconnect is not).
    held: Mutex<HashSet<i64>>,
    /// The locks this process holds or is taking again after a lost link.
    wanted: Mutex<HashSet<i64>>,
    /// The locks given up after a lost link: their member's entry no longer vouched for
    /// them when the connection came back (declared dead, or taken over, meanwhile).
    forfeited: Mutex<HashSet<i64>>,
}

fn set(set: &Mutex<HashSet<i64>>) -> std::sync::MutexGuard<'_, HashSet<i64>> {
    set.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Live {
    client: Client,
    revision: Statement,
}

/// The presence connection of one store (see the module documentation).
pub(crate) struct PresenceConn {
    commands: UnboundedSender<Command>,
    shared: Arc<Shared>,
    target: String,
}

impl PresenceConn {
    /// Connects (on a thread of its own, which keeps it connected until this is dropped)
    /// and sets the session's keepalive settings. A server that says "not now" (full,
    /// restarting) is tried again as for the work connection (`connection::Patience`);
    /// an unreachable server is an error here; later losses are repaired by the thread.
    pub(super) fn open(
        config: &Config,
        tls: &PgTls,
        target: &str,
        watchers: Arc<Watchers>,
    ) -> Result<PresenceConn> {
        let engine = |detail: String| Error::Engine {
            action: "open the presence connection".into(),
            target: target.to_owned(),
            detail,
        };
        let (commands, rx) = tokio::sync::mpsc::unbounded_channel();
        let shared = Arc::new(Shared::default());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread_config = config.clone();
        let thread_tls = tls.clone();
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("roo-store-presence".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                runtime.block_on(run(
                    thread_config,
                    thread_tls,
                    watchers,
                    rx,
                    thread_shared,
                    ready_tx,
                ));
            })
            .map_err(|e| engine(e.to_string()))?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(detail)) => return Err(engine(detail)),
            Err(_) => return Err(engine("the connection thread stopped".into())),
        }
        Ok(PresenceConn {
            commands,
            shared,
            target: target.to_owned(),
        })
    }

    fn error(&self, action: impl Into<String>, detail: impl Into<String>) -> Error {
        Error::Engine {
            action: action.into(),
            target: self.target.clone(),
            detail: detail.into(),
        }
    }

    /// `LISTEN`s on `channel` (now, or as soon as the connection is back).
    pub(crate) fn listen(&self, channel: &str) -> Result<()> {
        let (reply, answer) = std::sync::mpsc::channel();
        let action = || format!("listen on {channel}");
        self.commands
            .send(Command::Listen {
                channel: channel.to_owned(),
                reply,
            })
            .map_err(|_| self.error(action(), "the presence connection's thread stopped"))?;
        match answer.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(detail)) => Err(self.error(action(), detail)),
            Err(_) => Err(self.error(action(), "the presence connection's thread stopped")),
        }
    }

    /// Takes the session advisory lock `key`: `Ok(false)` if another session holds it.
    /// Held until [`PresenceConn::unlock`], and taken again after a reconnect. While the
    /// connection is being restored it waits for it (refused once the reconnection has
    /// failed for [`super::RECONNECT_FOR`]).
    pub(crate) fn lock(&self, key: i64, guard: Option<Fence>) -> Result<bool> {
        let (reply, answer) = std::sync::mpsc::channel();
        let action = || format!("take the presence lock {key}");
        self.commands
            .send(Command::Lock { key, guard, reply })
            .map_err(|_| self.error(action(), "the presence connection's thread stopped"))?;
        match answer.recv() {
            Ok(Ok(taken)) => Ok(taken),
            Ok(Err(detail)) => Err(self.error(action(), detail)),
            Err(_) => Err(self.error(action(), "the presence connection's thread stopped")),
        }
    }

    /// Releases the lock `key` and returns once the server has (a lost connection
    /// released it already).
    pub(crate) fn unlock(&self, key: i64) {
        let (reply, done) = std::sync::mpsc::channel();
        if self.commands.send(Command::Unlock { key, reply }).is_ok() {
            let _ = done.recv();
        }
    }

    /// Whether lock `key` is held now (false while the connection is being restored).
    pub(crate) fn holds(&self, key: i64) -> bool {
        self.shared
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&key)
    }

    /// Whether this process holds lock `key` or is taking it again after a lost link.
    pub(crate) fn wants(&self, key: i64) -> bool {
        set(&self.shared.wanted).contains(&key)
    }

    /// Whether lock `key` was given up after a lost link: its member's entry no longer
    /// vouched for it (see `relock`).
    pub(crate) fn forfeited(&self, key: i64) -> bool {
        set(&self.shared.forfeited).contains(&key)
    }

    fn live(&self) -> Option<Arc<Live>> {
        self.shared
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The revision of document `key` (`None`: no row), read on this connection: it
    /// never waits behind a change of the request connection.
    pub(crate) fn revision(&self, key: &str) -> Result<Option<i64>> {
        let action = || format!("read {key}");
        let live = self
            .live()
            .ok_or_else(|| self.error(action(), "the presence connection is being restored"))?;
        let rows = block_on(live.client.query(&live.revision, &[&key]))
            .map_err(|e| self.error(action(), engine_detail(&e)))?;
        Ok(rows.first().map(|row| row.get(0)))
    }

    /// The keepalive settings of this session as the server reports them.
    pub(crate) fn settings(&self) -> Result<PresenceSettings> {
        let action = || "read the presence connection's settings".to_string();
        let live = self
            .live()
            .ok_or_else(|| self.error(action(), "the presence connection is being restored"))?;
        let names: Vec<String> = session_settings()
            .iter()
            .map(|(name, _)| (*name).to_owned())
            .collect();
        let rows = block_on(live.client.query(
            "SELECT name, setting FROM pg_settings WHERE name = ANY($1) ORDER BY name",
            &[&names],
        ))
        .map_err(|e| self.error(action(), engine_detail(&e)))?;
        let found: HashMap<String, String> =
            rows.iter().map(|row| (row.get(0), row.get(1))).collect();
        // The server knows the transport this session came by: no client address is a
        // unix socket (a URL may list a TCP host and a socket directory, tried in turn).
        let unix_socket = block_on(
            live.client
                .query_one("SELECT inet_client_addr() IS NULL", &[]),
        )
        .map_err(|e| self.error(action(), engine_detail(&e)))?
        .get::<_, bool>(0);
        Ok(PresenceSettings {
            unix_socket,
            server: names
                .into_iter()
                .map(|name| {
                    let value = found.get(&name).cloned();
                    (name, value)
                })
                .collect(),
        })
    }
}

/// The presence connection's keepalive settings, as the server applies them to its
/// session (`SHOW tcp_keepalives_idle` …), and what they mean for death detection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PresenceSettings {
    /// The connection is a unix socket: the keepalive settings do not apply (the server
    /// shows 0), and there is no link to cut — a process that dies closes its socket.
    pub unix_socket: bool,
    /// Each setting and the server's value (`None`: this server has no such setting).
    pub server: Vec<(String, Option<String>)>,
}

impl PresenceSettings {
    /// Whether a cut link is seen within seconds: over TCP, with every setting at the
    /// product's value (a server older than PostgreSQL 12 has no `tcp_user_timeout`).
    pub fn detects_in_seconds(&self) -> bool {
        !self.unix_socket
            && session_settings().iter().all(|(name, wanted)| {
                self.server
                    .iter()
                    .any(|(n, v)| n == name && v.as_deref() == Some(wanted.as_str()))
            })
    }

    /// One sentence on how fast the death of a member is seen.
    pub fn verdict(&self) -> String {
        if self.unix_socket {
            return "unix socket: keepalives do not apply, and need not — a member that dies \
                    closes its socket and its presence lock is freed at once; only members on \
                    this host can connect this way"
                .into();
        }
        if self.detects_in_seconds() {
            return format!(
                "seconds: a killed member's lock is freed at once, a member behind a cut link \
                 is dropped after about {} s (keepalives {} s idle + {} × {} s, or \
                 tcp_user_timeout {} ms with data in flight)",
                KEEPALIVE_IDLE.as_secs()
                    + u64::from(KEEPALIVE_COUNT) * KEEPALIVE_INTERVAL.as_secs(),
                KEEPALIVE_IDLE.as_secs(),
                KEEPALIVE_COUNT,
                KEEPALIVE_INTERVAL.as_secs(),
                USER_TIMEOUT.as_millis()
            );
        }
        "longer: the server did not take the product's keepalive settings for this session \
         (a pooler in between, or an old server); a member behind a cut link keeps its lock \
         until the system's TCP timeouts end its session (by default, hours)"
            .into()
    }
}

/// The thread's loop: connect, set the session up, serve commands and keep the wanted
/// state until the connection ends; then again, until the store is dropped.
async fn run(
    config: Config,
    tls: PgTls,
    watchers: Arc<Watchers>,
    mut commands: UnboundedReceiver<Command>,
    shared: Arc<Shared>,
    ready: std::sync::mpsc::Sender<std::result::Result<(), String>>,
) {
    let mut ready = Some(ready);
    let mut channels: BTreeSet<String> = BTreeSet::new();
    let mut locks: HashMap<i64, (usize, Option<Fence>)> = HashMap::new();
    // Locks asked for while there is no connection: taken once it is back, or refused
    // after [`super::RECONNECT_FOR`].
    let mut pending: Vec<(Instant, Command)> = Vec::new();
    let mut pause = Duration::from_millis(50);
    // The first open is tried again as the work connection's is; a lost connection is
    // restored for as long as the store lives.
    let mut first_open = Patience::new(super::RECONNECT_FOR);
    loop {
        // Commands keep being served while connecting. The start-up and the set-up
        // together get `limit` (a listener that accepts and never answers would
        // otherwise hold this loop — and every lock wanted meanwhile — for ever).
        let limit = start_up_limit(&config);
        let deadline = tokio::time::Instant::now() + limit;
        let connecting = tokio::time::timeout_at(deadline, config.connect(tls.clone()));
        tokio::pin!(connecting);
        let attempt = loop {
            tokio::select! {
                attempt = &mut connecting => break attempt,
                command = commands.recv() => match command {
                    None => return,
                    Some(command) => offline(command, &mut channels, &mut locks, &mut pending, &shared),
                },
            }
        };
        let connected = match attempt {
            Ok(Ok((client, connection))) => {
                let driving = tokio::spawn(drive(connection, watchers.clone()));
                match tokio::time::timeout_at(deadline, set_up(client, &channels)).await {
                    Ok(Ok(live)) => Ok((Arc::new(live), driving)),
                    Ok(Err(e)) => {
                        driving.abort();
                        Err(e)
                    }
                    Err(_) => {
                        driving.abort();
                        Err((silent_server(Stage::SetUp, limit), true))
                    }
                }
            }
            Ok(Err(e)) => Err((engine_detail(&e), is_transient(&e))),
            Err(_) => Err((silent_server(Stage::StartUp, limit), true)),
        };
        let (live, mut driving) = match connected {
            Ok(pair) => pair,
            Err((detail, transient)) => {
                let this_pause = match ready.take() {
                    Some(first) => match first_open.next_pause(transient) {
                        Some(first_pause) => {
                            ready = Some(first);
                            first_pause
                        }
                        None => {
                            let detail = match transient {
                                true => first_open.gave_up(&detail),
                                false => detail,
                            };
                            let _ = first.send(Err(detail));
                            return;
                        }
                    },
                    None => {
                        expire(&mut pending, &detail);
                        // Jittered, like the first open's, so that the members a
                        // restart cut off do not all come back at the same moment.
                        let this_pause = super::connection::jittered(pause);
                        pause = (pause * 2).min(Duration::from_secs(1));
                        this_pause
                    }
                };
                // Wait a moment, serving commands meanwhile (what they want is kept).
                let wait = tokio::time::sleep(this_pause);
                tokio::pin!(wait);
                loop {
                    tokio::select! {
                        () = &mut wait => break,
                        command = commands.recv() => match command {
                            None => return,
                            Some(command) => offline(command, &mut channels, &mut locks, &mut pending, &shared),
                        },
                    }
                }
                continue;
            }
        };
        pause = Duration::from_millis(50);
        relock(&live, &mut locks, &shared).await;
        *shared.live.lock().unwrap_or_else(PoisonError::into_inner) = Some(live.clone());
        match ready.take() {
            Some(ready) => {
                let _ = ready.send(Ok(()));
            }
            // Notifications sent while the link was down are lost: every watcher reads
            // afresh.
            None => watchers.closed(),
        }
        for (_, command) in pending.drain(..) {
            online(command, &live, &mut channels, &mut locks, &shared).await;
        }
        let mut retry = tokio::time::interval(RELOCK_EVERY);
        loop {
            let missing = locks.len()
                > shared
                    .held
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .len();
            tokio::select! {
                _ = &mut driving => break,
                command = commands.recv() => match command {
                    None => return,
                    Some(command) => online(command, &live, &mut channels, &mut locks, &shared).await,
                },
                _ = retry.tick(), if missing => relock(&live, &mut locks, &shared).await,
            }
        }
        *shared.live.lock().unwrap_or_else(PoisonError::into_inner) = None;
        shared
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        watchers.closed();
    }
}

/// Drives the connection until it ends, handing each notification to the watchers.
async fn drive<S, T>(mut connection: tokio_postgres::Connection<S, T>, watchers: Arc<Watchers>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    futures_util::future::poll_fn(|cx| {
        loop {
            match connection.poll_message(cx) {
                Poll::Ready(Some(Ok(AsyncMessage::Notification(n)))) => {
                    watchers.notify(n.payload());
                }
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    })
    .await;
}

/// The session's settings (those this server has), the poll's statement, the `LISTEN`s.
/// A failure is `(detail, transient)`: see [`is_transient`].
async fn set_up(
    client: Client,
    channels: &BTreeSet<String>,
) -> std::result::Result<Live, (String, bool)> {
    let failed = |e: tokio_postgres::Error| (engine_detail(&e), is_transient(&e));
    let settings = session_settings();
    let (names, values): (Vec<&str>, Vec<String>) = settings.iter().cloned().unzip();
    client
        .query(
            "SELECT set_config(s.name, s.value, false) \
             FROM unnest($1::text[], $2::text[]) AS s(name, value) \
             WHERE s.name IN (SELECT name FROM pg_settings)",
            &[&names, &values],
        )
        .await
        .map_err(|e| {
            let (detail, transient) = failed(e);
            (format!("set the session's keepalives: {detail}"), transient)
        })?;
    let revision = client
        .prepare("SELECT rev FROM roo_doc WHERE key = $1")
        .await
        .map_err(failed)?;
    for channel in channels {
        // `channel` is `roo_` and hex digits (`channel_of`): a plain identifier.
        client
            .batch_execute(&format!("LISTEN {channel}"))
            .await
            .map_err(failed)?;
    }
    Ok(Live { client, revision })
}

/// Takes every wanted lock this session does not hold yet. One not free (the server has
/// not yet dropped this process's old session) is tried again later. One whose member's
/// entry no longer vouches for it (declared dead, or taken over, while the connection
/// was away) is given up: that member stays dead (PROTOCOL.md §8).
async fn relock(live: &Live, locks: &mut HashMap<i64, (usize, Option<Fence>)>, shared: &Shared) {
    let missing: Vec<i64> = {
        let held = shared.held.lock().unwrap_or_else(PoisonError::into_inner);
        locks
            .keys()
            .filter(|k| !held.contains(k))
            .copied()
            .collect()
    };
    for key in missing {
        let guard = locks.get(&key).and_then(|(_, guard)| guard.clone());
        let taken = match guard {
            None => matches!(
                live.client
                    .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                    .await
                    .map(|row| row.get::<_, bool>(0)),
                Ok(true)
            ),
            Some(fence) => match relock_guarded(&live.client, key, &fence).await {
                Ok(Some(taken)) => taken,
                // The entry no longer vouches for this epoch: never taken again.
                Ok(None) => {
                    locks.remove(&key);
                    set(&shared.wanted).remove(&key);
                    set(&shared.forfeited).insert(key);
                    false
                }
                Err(_) => false,
            },
        };
        if taken {
            shared
                .held
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key);
        }
    }
}

/// Takes lock `key` again for `fence`'s member, in one short transaction: the lock first,
/// then the team's config row `FOR SHARE` — which waits for a change declaring the member
/// dead (it checked the lock free under that row's lock) — and the lock is released again
/// unless the entry still records this epoch and is not marked dead. `Ok(None)`: the
/// entry no longer vouches for it; `Ok(Some(false))`: another session holds the lock.
async fn relock_guarded(
    client: &Client,
    key: i64,
    fence: &Fence,
) -> std::result::Result<Option<bool>, tokio_postgres::Error> {
    client.batch_execute("BEGIN").await?;
    let result = async {
        let taken: bool = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
            .await?
            .get(0);
        if !taken {
            return Ok(Some(false));
        }
        let config_key = format!("teams/{}/config.json", fence.team);
        let row = client
            .query_opt(
                "SELECT doc::text FROM roo_doc WHERE key = $1 AND doc IS NOT NULL FOR SHARE",
                &[&config_key],
            )
            .await;
        let vouches = match &row {
            Ok(Some(row)) => fence.check(&row.get::<_, String>(0)).is_ok(),
            Ok(None) => false,
            Err(_) => false,
        };
        if !vouches {
            // A session lock outlives the transaction: release it explicitly.
            client
                .query_one("SELECT pg_advisory_unlock($1)", &[&key])
                .await?;
            row?;
            return Ok(None);
        }
        Ok(Some(true))
    }
    .await;
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let _ = client.batch_execute(end).await;
    result
}

/// A command while there is no connection: the wanted state is kept for the next one;
/// a lock waits for it ([`expire`]).
fn offline(
    command: Command,
    channels: &mut BTreeSet<String>,
    locks: &mut HashMap<i64, (usize, Option<Fence>)>,
    pending: &mut Vec<(Instant, Command)>,
    shared: &Shared,
) {
    match command {
        Command::Listen { channel, reply } => {
            channels.insert(channel);
            let _ = reply.send(Ok(()));
        }
        lock @ Command::Lock { .. } => pending.push((Instant::now(), lock)),
        Command::Unlock { key, reply } => {
            if release(locks, key) {
                set(&shared.wanted).remove(&key);
            }
            let _ = reply.send(());
        }
    }
}

async fn online(
    command: Command,
    live: &Live,
    channels: &mut BTreeSet<String>,
    locks: &mut HashMap<i64, (usize, Option<Fence>)>,
    shared: &Shared,
) {
    match command {
        Command::Listen { channel, reply } => {
            if !channels.insert(channel.clone()) {
                let _ = reply.send(Ok(()));
                return;
            }
            let result = match live
                .client
                .batch_execute(&format!("LISTEN {channel}"))
                .await
            {
                Ok(()) => Ok(()),
                // A lost link: the next connection LISTENs (the channel stays wanted).
                Err(_) if live.client.is_closed() => Ok(()),
                Err(e) => {
                    channels.remove(&channel);
                    Err(engine_detail(&e))
                }
            };
            let _ = reply.send(result);
        }
        Command::Lock { key, guard, reply } => {
            if let Some((count, _)) = locks.get_mut(&key) {
                *count += 1;
                let _ = reply.send(Ok(true));
                return;
            }
            let result = live
                .client
                .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                .await
                .map(|row| row.get::<_, bool>(0))
                .map_err(|e| engine_detail(&e));
            if let Ok(true) = result {
                locks.insert(key, (1, guard));
                set(&shared.held).insert(key);
                set(&shared.wanted).insert(key);
            }
            let _ = reply.send(result);
        }
        Command::Unlock { key, reply } => {
            if release(locks, key) {
                set(&shared.wanted).remove(&key);
                let was_held = shared
                    .held
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&key);
                if was_held {
                    let _ = live
                        .client
                        .query_one("SELECT pg_advisory_unlock($1)", &[&key])
                        .await;
                }
            }
            let _ = reply.send(());
        }
    }
}

/// Refuses the locks that have waited for a connection longer than
/// [`super::RECONNECT_FOR`], with why the last attempt failed.
fn expire(pending: &mut Vec<(Instant, Command)>, detail: &str) {
    let (expired, waiting): (Vec<_>, Vec<_>) = pending
        .drain(..)
        .partition(|(since, _)| since.elapsed() >= super::RECONNECT_FOR);
    *pending = waiting;
    for (_, command) in expired {
        if let Command::Lock { reply, .. } = command {
            let _ = reply.send(Err(format!(
                "the presence connection is lost and could not be restored: {detail}"
            )));
        }
    }
}

/// Counts one release of `key`; true when it is no longer wanted.
fn release(locks: &mut HashMap<i64, (usize, Option<Fence>)>, key: i64) -> bool {
    match locks.get_mut(&key) {
        Some((count, _)) if *count > 1 => {
            *count -= 1;
            false
        }
        Some(_) => {
            locks.remove(&key);
            true
        }
        None => false,
    }
}

/// The advisory lock key of a member's presence (PROTOCOL.md §8): FNV-1a 64 of
/// `roo-presence`, the team name, the member's agent id and its epoch in decimal, joined
/// by NUL bytes, as a signed 64-bit integer (`pg_advisory_lock(bigint)`; in `pg_locks`:
/// `classid` = its high 32 bits, `objid` = its low 32 bits, `objsubid` = 1).
pub fn presence_key(team: &str, agent_id: &str, epoch: u64) -> i64 {
    let text = format!("roo-presence\0{team}\0{agent_id}\0{epoch}");
    super::fnv1a(text.as_bytes()) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented derivation, pinned: a third-party program computes the same key.
    #[test]
    fn presence_keys_follow_the_documented_derivation() {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in b"roo-presence\x00crew\x00alice@crew\x0042" {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        assert_eq!(presence_key("crew", "alice@crew", 42), hash as i64);
        assert_ne!(
            presence_key("crew", "alice@crew", 42),
            presence_key("crew", "alice@crew", 43)
        );
        assert_ne!(
            presence_key("crew", "alice@crew", 42),
            presence_key("crow", "alice@crew", 42)
        );
    }

    #[test]
    fn the_verdict_says_seconds_only_with_every_setting_over_tcp() {
        let all = |unix_socket| PresenceSettings {
            unix_socket,
            server: session_settings()
                .iter()
                .map(|(n, v)| ((*n).to_owned(), Some(v.clone())))
                .collect(),
        };
        assert!(all(false).detects_in_seconds());
        assert!(all(false).verdict().starts_with("seconds"));
        assert!(!all(true).detects_in_seconds());
        assert!(all(true).verdict().starts_with("unix socket"));
        let mut defaults = all(false);
        defaults.server[0].1 = Some("0".into());
        assert!(defaults.verdict().starts_with("longer"));
    }
}
