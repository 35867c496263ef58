//! One connection to the PostgreSQL store, opened: the thread that drives it (and hands
//! its notifications to the watchers), the session's timeouts, the schema created or
//! checked (`roo_meta` records its version), and every statement the store uses,
//! prepared at once.
//!
//! Kept apart from the store's operations (`pg.rs`), which only use a [`Conn`]: what a
//! connection is made of changes with the schema, not with what the store does.

use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio_postgres::{AsyncMessage, Client, Config, Statement};

use super::tls::PgTls;
use super::{
    LOCK_WAIT, SCHEMA_VERSION, START_UP, Stage, Watchers, block_on_until, engine_detail,
    silent_server, start_up_limit,
};
use crate::error::{Error, Result};

/// Serializes schema creation across processes (`pg_advisory_xact_lock`): concurrent
/// `CREATE TABLE IF NOT EXISTS` can still collide in the catalog.
pub(super) const SCHEMA_LOCK: i64 = 0x726f_6f5f_7363_6831; // "roo_sch1"

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS roo_meta (
    key text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE IF NOT EXISTS roo_doc (
    key text PRIMARY KEY,
    doc json,
    rev bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS roo_archive (
    id bigserial PRIMARY KEY,
    key text NOT NULL,
    line text NOT NULL
);
CREATE INDEX IF NOT EXISTS roo_archive_key ON roo_archive (key, id);
CREATE TABLE IF NOT EXISTS roo_quarantine (
    id bigserial PRIMARY KEY,
    key text NOT NULL,
    moved_at timestamptz NOT NULL DEFAULT now(),
    detail text NOT NULL,
    doc text NOT NULL,
    acknowledged boolean NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS roo_event (
    key text NOT NULL,
    seq bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    body text NOT NULL,
    PRIMARY KEY (key, seq)
);
CREATE TABLE IF NOT EXISTS roo_event_seq (
    key text PRIMARY KEY,
    seq bigint NOT NULL
);
";

/// One connection: its client (its connection task runs on a thread of its own) and its
/// prepared statements.
pub(super) struct Conn {
    pub(super) client: Client,
    pub(super) statements: Statements,
    /// Set when a request on it failed because the link was lost: the next operation
    /// connects again, even before the client has noticed the close.
    pub(super) lost: std::sync::atomic::AtomicBool,
}

pub(super) struct Statements {
    /// The session's kind, as the statements were prepared for it.
    pub(super) mode: super::roles::Mode,
    pub(super) read: Statement,
    pub(super) read_in_team: Statement,
    pub(super) placeholder: Statement,
    pub(super) lock: Statement,
    pub(super) clock: Statement,
    pub(super) write: Statement,
    pub(super) notify: Statement,
    pub(super) quarantine: Statement,
    pub(super) archive: Statement,
    pub(super) delete: Statement,
    pub(super) share_config: Statement,
    pub(super) xact: Statement,
    pub(super) end_session: Statement,
    pub(super) xact_status: Statement,
    pub(super) quarantined_texts: Statement,
    pub(super) archive_lines: Statement,
    pub(super) list: Statement,
    pub(super) exists: Statement,
    pub(super) quarantined: Statement,
    pub(super) quarantined_under: Statement,
    pub(super) new_epoch: Statement,
    pub(super) held_keys: Statement,
    pub(super) delete_docs_under: Statement,
    pub(super) delete_archive_under: Statement,
    pub(super) delete_quarantine_under: Statement,
    pub(super) held_all: Statement,
    pub(super) event: Statement,
    pub(super) events_page: Statement,
    pub(super) delete_events_under: Statement,
    pub(super) delete_event_seq_under: Statement,
    pub(super) last_event_seq: Statement,
}

/// [`open_connection`], tried again with backoff while the server says "not now" —
/// connection refused or its socket gone (a restart), `57P03` (starting up, shutting
/// down), `53300` (too many connections), `55000` (the database closed to connections),
/// the session ended while it was being set up — for at most `window` from the first try
/// ([`Patience`]). Nothing of the caller's has run yet on a connection being opened (its
/// set-up is idempotent), so trying again can never make anything happen twice. Any other
/// failure (a refused login, a certificate, a bad schema) is returned at once.
pub(super) fn open_connection_patiently(
    config: &Config,
    tls: &PgTls,
    target: &str,
    watchers: &Arc<Watchers>,
    window: Duration,
) -> Result<Conn> {
    let mut patience = Patience::new(window);
    loop {
        match open_connection(config, tls, target, watchers.clone()) {
            Ok(conn) => return Ok(conn),
            Err(Opening { error, transient }) => match patience.next_pause(transient) {
                Some(pause) => std::thread::sleep(pause),
                None => {
                    return Err(match error {
                        Error::Engine {
                            action,
                            target,
                            detail,
                        } if transient => Error::Engine {
                            action,
                            target,
                            detail: patience.gave_up(&detail),
                        },
                        other => other,
                    });
                }
            },
        }
    }
}

/// The one schedule by which a connection being opened for the first time is tried again
/// (the work connection's, [`open_connection_patiently`], and the presence connection's,
/// `presence::run`): after a transient failure ([`is_transient`]) a jittered pause
/// doubling from 50 ms to 1 s, for at most a window from the first try.
pub(super) struct Patience {
    started: Instant,
    pause: Duration,
    window: Duration,
    waited: Duration,
}

impl Patience {
    /// A schedule starting now, giving up after `window`.
    pub(super) fn new(window: Duration) -> Patience {
        Patience {
            started: Instant::now(),
            pause: Duration::from_millis(50),
            window,
            waited: Duration::ZERO,
        }
    }

    /// The pause before the next try after a failure (`transient`: the server said
    /// "not now"), or `None`: give up.
    pub(super) fn next_pause(&mut self, transient: bool) -> Option<Duration> {
        self.waited = self.started.elapsed();
        if !transient || self.waited + self.pause >= self.window {
            return None;
        }
        let pause = jittered(self.pause);
        self.pause = (self.pause * 2).min(Duration::from_secs(1));
        Some(pause)
    }

    /// `detail` of the last transient failure, saying how long it was tried.
    pub(super) fn gave_up(&self, detail: &str) -> String {
        format!(
            "{detail} (tried again for {} s; is the server running?)",
            self.waited.as_secs()
        )
    }
}

/// `pause` spread over 50–150 % of itself, so processes refused together (a restart,
/// a full server) do not all come back in the same instant.
pub(super) fn jittered(pause: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let spread = (u64::from(nanos) ^ u64::from(std::process::id())) % 1000;
    pause / 2 + pause * u32::try_from(spread).unwrap_or(500) / 1000
}

/// Why a connection could not be opened, and whether trying again soon may succeed.
pub(super) struct Opening {
    error: Error,
    transient: bool,
}

/// Whether `e`, met while opening a connection, says "not now" rather than "never":
/// see [`open_connection_patiently`].
pub(super) fn is_transient(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    if let Some(code) = e.code() {
        return [
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::CANNOT_CONNECT_NOW,
            // `55000` at login: the database does not accept connections now
            // (`ALLOW_CONNECTIONS false` for maintenance).
            SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE,
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
        ]
        .contains(code);
    }
    if e.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            return matches!(
                io.kind(),
                ConnectionRefused
                    | NotFound
                    | ConnectionReset
                    | ConnectionAborted
                    | UnexpectedEof
                    | BrokenPipe
                    | TimedOut
            );
        }
        source = cause.source();
    }
    false
}

/// Connects (a thread of its own drives the connection and hands its notifications to
/// `watchers`), sets the session's timeouts, creates or checks the schema, prepares the
/// statements — all within [`start_up_limit`]: a server that stops answering at any step
/// ends the attempt (transient: a server starting may be slow) instead of holding the
/// caller.
fn open_connection(
    config: &Config,
    tls: &PgTls,
    target: &str,
    watchers: Arc<Watchers>,
) -> std::result::Result<Conn, Opening> {
    let limit = start_up_limit(config);
    let deadline = Instant::now() + limit;
    let (client, abandon) = connect_on_own_thread(config, tls, watchers, target, limit)?;
    match block_on_until(deadline, set_up(&client, target)) {
        Some(statements) => Ok(Conn {
            client,
            statements: statements?,
            lost: Default::default(),
        }),
        None => {
            // The request in flight keeps the connection waiting: close it now.
            let _ = abandon.send(());
            Err(Opening {
                error: Error::Engine {
                    action: "set up the session".into(),
                    target: target.to_owned(),
                    detail: silent_server(Stage::SetUp, limit),
                },
                transient: true,
            })
        }
    }
}

/// The session's set-up on a new connection: its timeouts, the schema, the statements.
async fn set_up(client: &Client, target: &str) -> std::result::Result<Statements, Opening> {
    let failed = |action: &str, e: &tokio_postgres::Error| Opening {
        error: Error::Engine {
            action: action.to_owned(),
            target: target.to_owned(),
            detail: engine_detail(e),
        },
        transient: is_transient(e),
    };
    // Like a file lock's queue deadline (§3): a change never waits more than 10 s for a
    // row another participant holds, and a participant stopped inside a transaction
    // (SIGSTOP, a cut link the server has not noticed yet) loses it after a minute. The
    // set-up's own statements (the schema lock among them) get a statement timeout,
    // reset once they are done.
    client
        .batch_execute(&format!(
            "SET statement_timeout = '{}ms'; SET lock_timeout = '{}ms'; \
             SET idle_in_transaction_session_timeout = '60s'",
            START_UP.as_millis(),
            LOCK_WAIT.as_millis()
        ))
        .await
        .map_err(|e| failed("set the session's timeouts", &e))?;
    migrate(client).await.map_err(|e| match e {
        Migration::Newer(found) => Opening {
            error: Error::Engine {
                action: "open the store".into(),
                target: target.to_owned(),
                detail: format!(
                    "its schema is version {found}, newer than this build's {SCHEMA_VERSION}; \
                     upgrade RooCode"
                ),
            },
            transient: false,
        },
        Migration::Failed(e) => failed("create the schema", &e),
    })?;
    let mode = super::roles::mode(client)
        .await
        .map_err(|e| failed("read the session's member role", &e))?;
    let statements = Statements::prepare(client, target, mode, failed).await?;
    client
        .batch_execute("RESET statement_timeout")
        .await
        .map_err(|e| failed("set the session's timeouts", &e))?;
    Ok(statements)
}

/// Connects on a thread of its own, which runs the connection until the client is
/// dropped or the link fails (or it is told to [`Abandon`] it), handing each
/// notification to the watchers of its key. The start-up (TCP, TLS, login) is given up
/// after `limit`.
fn connect_on_own_thread(
    config: &Config,
    tls: &PgTls,
    watchers: Arc<Watchers>,
    target: &str,
    limit: Duration,
) -> std::result::Result<(Client, Abandon), Opening> {
    let fatal = |action: &str, detail: String| Opening {
        error: Error::Engine {
            action: action.to_owned(),
            target: target.to_owned(),
            detail,
        },
        transient: false,
    };
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (abandon, mut abandoned) = tokio::sync::oneshot::channel::<()>();
    let dispatch = watchers;
    let config = config.clone();
    let tls = tls.clone();
    std::thread::Builder::new()
        .name("roo-store-pg".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = ready_tx.send(Err((e.to_string(), false)));
                    return;
                }
            };
            runtime.block_on(async move {
                match tokio::time::timeout(limit, config.connect(tls.clone())).await {
                    Ok(Ok((client, mut connection))) => {
                        let _ = ready_tx.send(Ok(client));
                        let driving = futures_util::future::poll_fn(|cx| {
                            loop {
                                match connection.poll_message(cx) {
                                    Poll::Ready(Some(Ok(AsyncMessage::Notification(n)))) => {
                                        dispatch.notify(n.payload());
                                    }
                                    Poll::Ready(Some(Ok(_))) => {}
                                    Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(()),
                                    Poll::Pending => return Poll::Pending,
                                }
                            }
                        });
                        // An abandoned set-up closes the connection at once; a dropped
                        // `Abandon` (the usual case) only disables this branch.
                        tokio::select! {
                            () = driving => dispatch.closed(),
                            Ok(()) = &mut abandoned => {}
                        }
                    }
                    Ok(Err(e)) => {
                        let detail = tls.explain(&e).unwrap_or_else(|| engine_detail(&e));
                        let _ = ready_tx.send(Err((detail, is_transient(&e))));
                    }
                    Err(_) => {
                        let detail = silent_server(Stage::StartUp, limit);
                        let _ = ready_tx.send(Err((detail, true)));
                    }
                }
            });
        })
        .map_err(|e| fatal("start the connection thread", e.to_string()))?;
    match ready_rx.recv() {
        Ok(Ok(client)) => Ok((client, abandon)),
        Ok(Err((detail, transient))) => Err(Opening {
            transient,
            ..fatal("connect", detail)
        }),
        Err(_) => Err(fatal("connect", "the connection thread stopped".into())),
    }
}

/// Told (sent `()`), the thread driving a connection drops it at once, even with a
/// request in flight; dropped, it changes nothing.
type Abandon = tokio::sync::oneshot::Sender<()>;

/// Every statement a connection prepares, each named by the comment above it, in the
/// order of [`Statements`]' fields.
pub(super) const STATEMENT_SQL: [&str; 31] = [
    // read
    "SELECT doc::text FROM roo_doc WHERE key = $1",
    // read_in_team
    "SELECT (SELECT doc::text FROM roo_doc WHERE key = $1), \
         EXISTS (SELECT 1 FROM roo_doc WHERE key = $2 AND doc IS NOT NULL)",
    // placeholder
    "INSERT INTO roo_doc (key, doc) VALUES ($1, NULL) ON CONFLICT (key) DO NOTHING",
    // lock
    "SELECT doc::text FROM roo_doc WHERE key = $1 FOR UPDATE",
    // clock: milliseconds since the Unix epoch, by the server's clock, now
    "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8",
    // write
    "UPDATE roo_doc SET doc = $2::text::json, rev = rev + 1, updated_at = now() \
         WHERE key = $1",
    // notify
    "SELECT pg_notify($1, $2)",
    // quarantine
    "INSERT INTO roo_quarantine (key, detail, doc) VALUES ($1, $2, $3)",
    // archive
    "INSERT INTO roo_archive (key, line) VALUES ($1, $2)",
    // delete
    "DELETE FROM roo_doc WHERE key = $1",
    // share_config
    "SELECT doc::text FROM roo_doc WHERE key = $1 AND doc IS NOT NULL FOR SHARE",
    // xact
    "SELECT pg_current_xact_id()::text, pg_backend_pid()",
    // end_session
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE pid = $1 AND backend_xid::text = $2",
    // xact_status
    "SELECT pg_xact_status($1::text::xid8)",
    // quarantined_texts
    "SELECT doc FROM roo_quarantine WHERE key = $1 ORDER BY id",
    // archive_lines
    "SELECT line FROM roo_archive WHERE key = $1 ORDER BY id",
    // list
    "SELECT key FROM roo_doc WHERE key LIKE $1 AND doc IS NOT NULL ORDER BY key",
    // exists
    "SELECT 1 FROM roo_doc WHERE key = $1 AND doc IS NOT NULL",
    // quarantined
    "SELECT id, doc FROM roo_quarantine WHERE key = $1 AND (NOT acknowledged OR $2) \
         ORDER BY id",
    // quarantined_under
    "SELECT id, key FROM roo_quarantine WHERE key LIKE $1 AND NOT acknowledged \
         ORDER BY id",
    // new_epoch
    "SELECT txid_current()",
    // held_keys: which of the presence lock keys $1 some session holds (granted
    // advisory locks of this database), and whether the server started — or
    // reinitialized after a backend crash, which ends every session and resets the
    // statistics (`stats_reset`) but not `pg_postmaster_start_time()` — less than $2
    // seconds ago
    "SELECT ARRAY(SELECT k FROM unnest($1::int8[]) AS k WHERE EXISTS (\
           SELECT 1 FROM pg_locks l \
           WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
             AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND l.classid = ((k >> 32) & 4294967295)::oid \
             AND l.objid = (k & 4294967295)::oid)), \
         now() - greatest(pg_postmaster_start_time(), (SELECT stats_reset FROM pg_stat_bgwriter)) \
           < $2::float8 * interval '1 second'",
    // delete_docs_under
    "DELETE FROM roo_doc WHERE key LIKE ANY($1)",
    // delete_archive_under
    "DELETE FROM roo_archive WHERE key LIKE ANY($1)",
    // delete_quarantine_under
    "DELETE FROM roo_quarantine WHERE key LIKE ANY($1)",
    // held_all: every presence lock key held in this database (a change that judges
    // liveness reads them in its first round trip), and whether the server started
    // (or reinitialized after a backend crash: see held_keys) less than $1 seconds ago
    "SELECT ARRAY(SELECT (l.classid::int8 << 32) | l.objid::int8 FROM pg_locks l \
           WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
             AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())), \
         now() - greatest(pg_postmaster_start_time(), (SELECT stats_reset FROM pg_stat_bgwriter)) \
           < $1::float8 * interval '1 second'",
    // event: the events $2 of log $1 in one statement: their seqs from the team's
    // counter row (locked until the commit: the events lock, taken last), their rows at
    // the server's clock, the log's followers notified on channel $4 and, each time the
    // counter passes a multiple of 256, the rows older than the $3 newest pruned
    "WITH next AS (\
           INSERT INTO roo_event_seq AS s (key, seq) VALUES ($1, cardinality($2::text[])) \
           ON CONFLICT (key) DO UPDATE SET seq = s.seq + cardinality($2::text[]) \
           RETURNING seq), \
         added AS (\
           INSERT INTO roo_event (key, seq, at, body) \
           SELECT $1, next.seq - cardinality($2::text[]) + b.n, clock_timestamp(), b.body \
           FROM next, unnest($2::text[]) WITH ORDINALITY AS b(body, n)), \
         pruned AS (\
           DELETE FROM roo_event WHERE key = $1 \
             AND (SELECT seq FROM next) / 256 \
               <> ((SELECT seq FROM next) - cardinality($2::text[])) / 256 \
             AND seq <= (SELECT seq FROM next) - $3) \
     SELECT pg_notify($4, $1)",
    // events_page: the newest $3 events of log $1 with seq > $2, newest first, and the
    // log's last seq
    "SELECT seq, floor(extract(epoch FROM at) * 1000)::int8, body, \
         (SELECT seq FROM roo_event_seq WHERE key = $1) \
     FROM roo_event e WHERE e.key = $1 AND e.seq > $2 ORDER BY e.seq DESC LIMIT $3",
    // delete_events_under
    "DELETE FROM roo_event WHERE key LIKE ANY($1)",
    // delete_event_seq_under
    "DELETE FROM roo_event_seq WHERE key LIKE ANY($1)",
    // last_event_seq
    "SELECT seq FROM roo_event_seq WHERE key = $1",
];

impl Statements {
    /// Every statement prepared at once, pipelined: one round trip for them all.
    async fn prepare(
        client: &Client,
        target: &str,
        mode: super::roles::Mode,
        failed: impl Fn(&str, &tokio_postgres::Error) -> Opening,
    ) -> std::result::Result<Statements, Opening> {
        let engine = |action: &str, detail: &str| Opening {
            error: Error::Engine {
                action: action.to_owned(),
                target: target.to_owned(),
                detail: detail.to_owned(),
            },
            transient: false,
        };
        // A member role's session writes through the functions that check it.
        let sql = super::roles::statement_sql(STATEMENT_SQL, mode);
        let prepared = futures_util::future::join_all(sql.iter().map(|sql| client.prepare(sql)))
            .await
            .into_iter()
            .zip(sql)
            .map(|(prepared, sql)| {
                // A schema changed by hand fails here, at connect, naming the statement.
                prepared.map_err(|e| {
                    let sql = sql.split_whitespace().collect::<Vec<_>>().join(" ");
                    failed(&format!("prepare {sql}"), &e)
                })
            })
            .collect::<std::result::Result<Vec<Statement>, Opening>>()?;
        // In the order of `sql` above.
        let mut prepared = prepared.into_iter();
        let mut next = || {
            prepared
                .next()
                .ok_or_else(|| engine("prepare the statements", "a statement is missing"))
        };
        let statements = Statements {
            mode,
            read: next()?,
            read_in_team: next()?,
            placeholder: next()?,
            lock: next()?,
            clock: next()?,
            write: next()?,
            notify: next()?,
            quarantine: next()?,
            archive: next()?,
            delete: next()?,
            share_config: next()?,
            xact: next()?,
            end_session: next()?,
            xact_status: next()?,
            quarantined_texts: next()?,
            archive_lines: next()?,
            list: next()?,
            exists: next()?,
            quarantined: next()?,
            quarantined_under: next()?,
            new_epoch: next()?,
            held_keys: next()?,
            delete_docs_under: next()?,
            delete_archive_under: next()?,
            delete_quarantine_under: next()?,
            held_all: next()?,
            event: next()?,
            events_page: next()?,
            delete_events_under: next()?,
            delete_event_seq_under: next()?,
            last_event_seq: next()?,
        };
        if prepared.next().is_some() {
            return Err(engine("prepare the statements", "a statement is left over"));
        }
        Ok(statements)
    }
}

enum Migration {
    Newer(String),
    Failed(tokio_postgres::Error),
}

/// Creates the schema if missing, records its version, refuses a newer major. A store
/// whose schema is there already is only read: a role with row privileges alone (no
/// CREATE on the schema, not the tables' owner) can use it.
async fn migrate(client: &Client) -> std::result::Result<(), Migration> {
    async fn found(client: &Client) -> std::result::Result<Option<String>, tokio_postgres::Error> {
        let present = client
            .query_one(
                "SELECT to_regclass('roo_meta') IS NOT NULL AND to_regclass('roo_doc') IS NOT NULL \
                 AND to_regclass('roo_archive') IS NOT NULL \
                 AND to_regclass('roo_quarantine') IS NOT NULL \
                 AND to_regclass('roo_event') IS NOT NULL \
                 AND to_regclass('roo_event_seq') IS NOT NULL",
                &[],
            )
            .await?
            .get::<_, bool>(0);
        if !present {
            return Ok(None);
        }
        Ok(client
            .query(
                "SELECT value FROM roo_meta WHERE key = 'schema_version'",
                &[],
            )
            .await?
            .first()
            .map(|row| row.get::<_, String>(0)))
    }
    let existing = found(client).await.map_err(Migration::Failed)?;
    let version = match existing {
        Some(version) => version,
        None => {
            let create = async {
                client.batch_execute("BEGIN").await?;
                client
                    .execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
                    .await?;
                client.batch_execute(SCHEMA).await?;
                client
                    .execute(
                        // A 1.0 store (no event log) is upgraded to this minor.
                        "INSERT INTO roo_meta (key, value) VALUES ('schema_version', $1) \
                         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value \
                         WHERE roo_meta.value = '1.0'",
                        &[&SCHEMA_VERSION.to_string()],
                    )
                    .await?;
                client.batch_execute("COMMIT").await?;
                Ok::<_, tokio_postgres::Error>(())
            };
            if let Err(e) = create.await {
                let _ = client.batch_execute("ROLLBACK").await;
                return Err(Migration::Failed(e));
            }
            found(client)
                .await
                .map_err(Migration::Failed)?
                .unwrap_or_else(|| SCHEMA_VERSION.to_string())
        }
    };
    let major = version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(u32::MAX);
    if major > SCHEMA_VERSION.major {
        return Err(Migration::Newer(version));
    }
    Ok(())
}
