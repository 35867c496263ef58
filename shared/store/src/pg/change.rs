//! A change on the PostgreSQL store as one transaction of two pipelined round trips, and
//! what happens when the link is lost under it (docs/PROTOCOL.md §8).
//!
//! Round trip 1 begins the transaction, holds the team's config shared and reads it (for
//! the change when it wants it; for the fence of a handle writing as a member,
//! `PgStore::set_fence`, which refuses the change unless the member's entry still vouches
//! for it), makes sure the document's row exists, locks and reads it, reads the server's
//! clock (the change's times, `StoreClock`), the transaction's id (`pg_current_xact_id`)
//! and, when the change wants them, the document's quarantined texts. The change runs on
//! what came back; round trip 2 sends its writes, the notification and the `COMMIT`.
//!
//! A link lost in round trip 1 loses nothing: the `COMMIT` was not sent, the server rolls
//! the transaction back, and the change runs again from scratch on a new connection. A
//! link lost in round trip 2 leaves the outcome unknown: the store connects again and
//! starts the change anew. Its first round trip ends the lost session if the server
//! still runs it with that transaction (a cut link the server has not noticed: idle in
//! the transaction, holding the row), locks the same row, which waits until the lost
//! transaction has ended, and asks the server what became of it (`pg_xact_status`).
//! Committed: the lost attempt's result, computed before its commit, is returned and
//! nothing is written again. Aborted: the change runs again from scratch on what the
//! document now holds (fenced again: a member declared dead meanwhile writes nothing). Anything else (the row still held past the lock wait, a server
//! that no longer knows the transaction) is an error that says the outcome is unknown —
//! never a guess. So whatever a change reports is what the document holds, and a change
//! that committed is never made twice.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use super::{
    Conn, Fence, Hold, LOCK_WAIT, Open, PgChange, PgStore, PgWrites, block_on, channel_of,
    engine_detail, is_lock_timeout, team_config_key,
};
use crate::error::{Error, Result};

/// How often one operation connects again after losing its link before it gives up.
const ATTEMPTS: usize = 5;

/// What a change reads besides its document, in its first round trip.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Wants {
    /// The team's config text, handed to the change (which decides what a missing one
    /// means) instead of refusing a missing team.
    pub(crate) config: bool,
    /// The document's quarantined texts, acknowledged ones too (the task list's id
    /// high-water mark counts them, §6.1).
    pub(crate) quarantine: bool,
    /// Every presence lock held (read after the row lock): liveness asked inside the
    /// change is answered from it, without a round trip more (`super::Prefetched`).
    pub(crate) presence: bool,
}

/// What the first round trip read for a change besides its document.
#[derive(Debug, Default)]
pub(crate) struct Reads {
    /// The team's config text, if [`Wants::config`] and there is one.
    pub(crate) config: Option<String>,
    /// The document's quarantined texts, oldest first, if [`Wants::quarantine`].
    pub(crate) quarantined: Vec<String>,
}

/// A change whose `COMMIT` was sent when the link was lost: its transaction and the
/// result it reports if that committed.
struct Unsettled<R> {
    /// Its transaction (`xid8` as text).
    xact: String,
    /// The server process of its session.
    pid: i32,
    value: R,
    /// How the link was lost.
    detail: String,
}

impl<R> Unsettled<R> {
    fn session(&self) -> LostSession {
        LostSession {
            pid: self.pid,
            short_xid: short_xid(&self.xact),
            xact: self.xact.clone(),
        }
    }
}

/// The session and transaction of a lost attempt, as round trip 1 asks about them.
struct LostSession {
    pid: i32,
    /// Its transaction as `pg_stat_activity.backend_xid` shows it.
    short_xid: String,
    /// Its transaction (`xid8` as text).
    xact: String,
}

/// What a change carries from one attempt to the next.
struct Attempts<R> {
    /// The attempt whose link was lost after its `COMMIT` was sent.
    unsettled: Option<Unsettled<R>>,
    /// Links lost so far.
    lost_links: usize,
    /// Times the row vanished between the placeholder and the lock.
    vanished: usize,
}

impl<R> Attempts<R> {
    /// Whether a change at `depth` that lost its link connects again (counted): only
    /// the outermost one, and only [`ATTEMPTS`] times.
    fn may_connect_again(&mut self, depth: usize) -> bool {
        if depth == 0 && self.lost_links < ATTEMPTS {
            self.lost_links += 1;
            true
        } else {
            false
        }
    }
}

/// How one attempt at a change ended.
enum Attempt<R> {
    /// With this result.
    Done(Result<R>),
    /// It must start over on the (new) connection.
    Again,
}

/// Which team config a change of one document holds, and which fences it checks.
struct Scope {
    /// The team's config an inbox or a task list belongs to: it must exist, held shared
    /// until the commit, so a team delete cannot slip between (a late send would leave
    /// an inbox for a new team of that name). Inside a change of the config itself (a
    /// team's creation) the outer change holds it.
    config_key: Option<String>,
    /// A handle writing as a member of this team (`PgStore::set_fence`): its entry is
    /// checked in the config read with the share lock, in this same round trip.
    fence: Option<Arc<Fence>>,
    /// A change of that team's config itself is fenced on the config it locks.
    own_config_fence: Option<Arc<Fence>>,
}

impl Scope {
    fn of(store: &PgStore, key: &str, team_check: bool, depth: usize) -> Scope {
        let config_key = team_config_key(key).filter(|_| team_check && depth == 0);
        let fence_now = store.fence();
        let fence = fence_now.clone().filter(|fence| {
            config_key.as_deref() == Some(format!("teams/{}/config.json", fence.team).as_str())
        });
        let own_config_fence =
            fence_now.filter(|fence| key == format!("teams/{}/config.json", fence.team));
        Scope {
            config_key,
            fence,
            own_config_fence,
        }
    }

    /// The team's config text as the change gets it: `team` is what round trip 1 read
    /// (`None` when no config was asked for); a missing team is refused unless the
    /// change wants the config (and decides itself).
    fn team_config(
        &self,
        store: &PgStore,
        team: Option<Option<String>>,
        wants: Wants,
    ) -> Result<Option<String>> {
        match team {
            Some(None) if !wants.config => {
                let config = self.config_key.clone().unwrap_or_default();
                let team = config.split('/').nth(1).unwrap_or_default().to_owned();
                Err(Error::TeamNotFound {
                    team,
                    path: std::path::PathBuf::from(config),
                    store: Some(store.target().to_owned()),
                })
            }
            Some(config) => Ok(config),
            None => Ok(None),
        }
    }
}

/// What round trip 1 of a change read.
struct FirstRead {
    /// The team's config (`Some(None)`: asked for and missing).
    team: Option<Option<String>>,
    /// The document's locked row (none if it vanished).
    rows: Vec<tokio_postgres::Row>,
    /// The server's clock, in milliseconds since the epoch.
    server_ms: i64,
    /// The transaction's id and the session's server process (outermost change only).
    xact: Option<(String, i32)>,
    /// What became of the lost attempt's transaction, if there is one.
    status: Option<Option<String>>,
    quarantined: Vec<String>,
    presence: Option<super::HeldKeys>,
}

impl FirstRead {
    /// Round trip 1. The team's config first, the document's row after: every change
    /// takes its locks in that order. The lost attempt's status is asked after the row
    /// lock, which waits for that attempt's transaction to end, and so is the server's
    /// clock (the time the change happens at).
    fn ask(
        conn: &Conn,
        open: &Open<'_>,
        depth: usize,
        key: &str,
        scope: &Scope,
        wants: Wants,
        lost: Option<LostSession>,
    ) -> std::result::Result<FirstRead, tokio_postgres::Error> {
        let (client, statements) = (&conn.client, &conn.statements);
        let key_param: [&(dyn ToSql + Sync); 1] = [&key];
        let config_param: [&(dyn ToSql + Sync); 1] = [&scope.config_key];
        let lost_xact = lost.as_ref().map(|lost| lost.xact.clone());
        let status_param: [&(dyn ToSql + Sync); 1] = [&lost_xact];
        let begin = client.batch_execute(&open.begin_sql);
        // The lost session may still be alive on the server (a cut link it has not
        // noticed), idle in the transaction and holding the row: it is ended, which
        // rolls back what has not committed. Only if it still runs that transaction
        // (a process id alone may have been reused).
        let end_lost = async {
            match &lost {
                Some(lost) => client
                    .execute(&statements.end_session, &[&lost.pid, &lost.short_xid])
                    .await
                    .map(|_| ()),
                None => Ok(()),
            }
        };
        let team = async {
            match &scope.config_key {
                Some(_) => client
                    .query(&statements.share_config, &config_param)
                    .await
                    .map(|rows| Some(rows.first().map(|row| row.get::<_, String>(0)))),
                None => Ok(None),
            }
        };
        let placeholder = client.execute(&statements.placeholder, &key_param);
        let lock = client.query(&statements.lock, &key_param);
        let clock = client.query_one(&statements.clock, &[]);
        let xact = async {
            match depth {
                0 => client
                    .query_one(&statements.xact, &[])
                    .await
                    .map(|row| Some((row.get::<_, String>(0), row.get::<_, i32>(1)))),
                _ => Ok(None),
            }
        };
        let status = async {
            match &lost_xact {
                Some(_) => client
                    .query_one(&statements.xact_status, &status_param)
                    .await
                    .map(|row| Some(row.get::<_, Option<String>>(0))),
                None => Ok(None),
            }
        };
        let quarantined = async {
            match wants.quarantine {
                true => client
                    .query(&statements.quarantined_texts, &key_param)
                    .await
                    .map(|rows| rows.iter().map(|row| row.get::<_, String>(0)).collect()),
                false => Ok(Vec::new()),
            }
        };
        let ((begun, ended, team, placed), ((locked, clock, xact, status, quarantined), presence)) =
            block_on(futures_util::future::join(
                futures_util::future::join4(begin, end_lost, team, placeholder),
                futures_util::future::join(
                    futures_util::future::join5(lock, clock, xact, status, quarantined),
                    held_keys(conn, wants.presence),
                ),
            ));
        begun?;
        ended?;
        let team = team?;
        placed?;
        Ok(FirstRead {
            team,
            rows: locked?,
            server_ms: clock?.get::<_, i64>(0),
            xact: xact?,
            status: status?,
            quarantined: quarantined?,
            presence: presence?,
        })
    }
}

/// After the row lock: every presence lock held while this change holds it, if `want`.
async fn held_keys(
    conn: &Conn,
    want: bool,
) -> std::result::Result<Option<super::HeldKeys>, tokio_postgres::Error> {
    if !want {
        return Ok(None);
    }
    let grace = super::RESTART_GRACE.as_secs_f64();
    let row = conn
        .client
        .query_one(&conn.statements.held_all, &[&grace])
        .await?;
    Ok(Some(super::HeldKeys {
        held: row.get::<_, Vec<i64>>(0).into_iter().collect(),
        server_restarted: row.get(1),
    }))
}

/// Whether a failed request lost the link (its session is gone or going), rather than
/// being answered by the server: a closed connection, no answer at all (I/O), or the
/// server ending the session (class 57, operator intervention, e.g. a shutdown; class
/// 08, connection exception). A statement cancelled by a timeout (57014) is an answer.
fn link_lost(e: &tokio_postgres::Error, client: &Client) -> bool {
    if client.is_closed() || e.is_closed() {
        return true;
    }
    match e.as_db_error() {
        Some(db) => {
            let code = db.code().code();
            code != "57014" && (code.starts_with("57") || code.starts_with("08"))
        }
        None => true,
    }
}

/// The 32-bit transaction id of an `xid8` (as text), as `pg_stat_activity.backend_xid`
/// shows it (as text).
fn short_xid(xact: &str) -> String {
    xact.parse::<u64>()
        .map(|full| (full & 0xffff_ffff).to_string())
        .unwrap_or_default()
}

impl Conn {
    /// Whether a request on it lost the link.
    pub(super) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    fn mark_lost(&self) {
        self.lost.store(true, Ordering::Relaxed);
    }
}

impl PgStore {
    /// One request outside a change (a read), asked again on a new connection when the
    /// link was lost under it (a read changes nothing, so asking again is safe). Inside a
    /// change it is not asked again: the change itself starts over.
    pub(super) fn request<T>(
        &self,
        action: &str,
        mut ask: impl FnMut(&Conn) -> std::result::Result<T, tokio_postgres::Error>,
    ) -> Result<T> {
        let mut lost_links = 0;
        loop {
            let hold = self.serialize()?;
            match ask(&hold.conn) {
                Ok(value) => return Ok(value),
                Err(e) if link_lost(&e, &hold.conn.client) => {
                    hold.conn.mark_lost();
                    if hold.depth == 0 && lost_links < ATTEMPTS {
                        lost_links += 1;
                        continue;
                    }
                    return Err(self.db_error(action, &e));
                }
                Err(e) => return Err(self.db_error(action, &e)),
            }
        }
    }

    /// The error of a change whose lost attempt's outcome could not be learned, if there
    /// is one; else `e` itself.
    fn unsettled_or<R>(&self, key: &str, unsettled: &Option<Unsettled<R>>, e: Error) -> Error {
        match unsettled {
            None => e,
            Some(lost) => self.error(
                format!("update {key}"),
                format!(
                    "the link was lost while the change's COMMIT was under way ({}), and \
                     whether it committed could not be learned ({e}); read the document before \
                     trying again",
                    lost.detail
                ),
            ),
        }
    }

    /// Locked read → change → write of document `key` in one transaction (see the module
    /// documentation); `team_check` holds the team's config shared first (refusing a
    /// missing team unless `wants.config`).
    pub(super) fn update_checked<R>(
        &self,
        key: &str,
        team_check: bool,
        wants: Wants,
        mut change: impl FnMut(Option<String>, &Reads, &mut PgWrites) -> Result<PgChange<R>>,
    ) -> Result<R> {
        let mut attempts = Attempts {
            unsettled: None,
            lost_links: 0,
            vanished: 0,
        };
        loop {
            let hold = match self.serialize() {
                Ok(hold) => hold,
                Err(e) => return Err(self.unsettled_or(key, &attempts.unsettled, e)),
            };
            let scope = Scope::of(self, key, team_check, hold.depth);
            let change = &mut change;
            if let Attempt::Done(result) =
                self.attempt(&hold, key, &scope, wants, change, &mut attempts)
            {
                return result;
            }
        }
    }

    /// One attempt at a change on the connection `hold` holds: round trip 1, the lost
    /// attempt settled, the change run, round trip 2.
    fn attempt<R>(
        &self,
        hold: &Hold<'_>,
        key: &str,
        scope: &Scope,
        wants: Wants,
        change: &mut impl FnMut(Option<String>, &Reads, &mut PgWrites) -> Result<PgChange<R>>,
        attempts: &mut Attempts<R>,
    ) -> Attempt<R> {
        let open = Open::begin(&hold.conn, hold);
        let first = FirstRead::ask(&hold.conn, &open, hold.depth, key, scope, wants, {
            attempts.unsettled.as_ref().map(Unsettled::session)
        });
        let read = match first {
            Ok(read) => read,
            Err(e) if link_lost(&e, &hold.conn.client) => {
                hold.conn.mark_lost();
                drop(open);
                if attempts.may_connect_again(hold.depth) {
                    return Attempt::Again;
                }
                let e = self.db_error(format!("update {key}"), &e);
                return Attempt::Done(Err(self.unsettled_or(key, &attempts.unsettled, e)));
            }
            Err(e) => {
                let e = self.first_round_trip_error(key, &e);
                return Attempt::Done(Err(self.unsettled_or(key, &attempts.unsettled, e)));
            }
        };
        // What became of the attempt whose link was lost after its COMMIT was sent.
        // (Rolled back: the change runs again from scratch, below.)
        if let Some(lost) = attempts.unsettled.take()
            && let Some(settled) = self.settle(key, lost, read.status.flatten().as_deref())
        {
            return Attempt::Done(settled);
        }
        let config = match scope.team_config(self, read.team, wants) {
            Ok(config) => config,
            Err(e) => return Attempt::Done(Err(e)),
        };
        // Written as a member: refused unless its entry, read under the share lock,
        // still vouches for this process — checked on every run, so a change run again
        // after a lost link is fenced as its first run was. (No config: the change
        // itself refuses the missing team.)
        if let (Some(fence), Some(config)) = (&scope.fence, &config)
            && let Err(e) = fence.check(config)
        {
            return Attempt::Done(Err(e));
        }
        // A row deleted between the placeholder and the lock (a concurrent team
        // delete or quarantine committed): start again, a change must not write into
        // nothing.
        let text = match read.rows.first() {
            Some(row) => row.get::<_, Option<String>>(0),
            None if attempts.vanished < 5 => {
                attempts.vanished += 1;
                return Attempt::Again;
            }
            None => {
                return Attempt::Done(Err(self.error(
                    format!("update {key}"),
                    "the row kept vanishing under the change (deleted by others)",
                )));
            }
        };
        if let (Some(fence), Some(text)) = (&scope.own_config_fence, &text)
            && let Err(e) = fence.check(text)
        {
            return Attempt::Done(Err(e));
        }
        let reads = Reads {
            config,
            quarantined: read.quarantined,
        };
        let mut writes = PgWrites::default();
        // A failed (or panicking) change rolls back as `open` drops. One that failed
        // because the link went under it (a read of its own) runs again.
        // The times it writes are the server's (`StoreClock`).
        let clock = crate::time::StoreClock::enter(read.server_ms);
        let prefetched = read
            .presence
            .map(|held| super::Prefetched::enter(self, held));
        let outcome = change(text, &reads, &mut writes);
        drop(prefetched);
        drop(clock);
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                let lost = hold.conn.client.is_closed() || hold.conn.is_lost();
                drop(open);
                if lost && attempts.may_connect_again(hold.depth) {
                    hold.conn.mark_lost();
                    return Attempt::Again;
                }
                return Attempt::Done(Err(e));
            }
        };
        self.commit(hold, open, key, &writes, outcome, read.xact, attempts)
    }

    /// The error of round trip 1 answered by the server: a lock not granted in time is
    /// [`Error::RowLocked`].
    fn first_round_trip_error(&self, key: &str, e: &tokio_postgres::Error) -> Error {
        if is_lock_timeout(e) {
            Error::RowLocked {
                key: key.to_owned(),
                target: self.target().to_owned(),
                waited: LOCK_WAIT,
            }
        } else {
            self.db_error(format!("update {key}"), e)
        }
    }

    /// What the server says of `lost`'s transaction (`status`, read after the row lock):
    /// committed — its result; aborted — `None`, the change runs again; anything else —
    /// an error saying the outcome is unknown.
    fn settle<R>(&self, key: &str, lost: Unsettled<R>, status: Option<&str>) -> Option<Result<R>> {
        match status {
            Some("committed") => Some(Ok(lost.value)),
            Some("aborted") => None,
            other => {
                let e = self.error(
                    format!("update {key}"),
                    format!(
                        "its transaction is {}",
                        other.unwrap_or("unknown to the server")
                    ),
                );
                Some(Err(self.unsettled_or(key, &Some(lost), e)))
            }
        }
    }

    /// What the change decided, written: nothing to write ends the transaction (rolled
    /// back as `open` drops); else round trip 2 sends the writes, the notification and
    /// the commit. A link lost under it leaves the change unsettled: the next attempt
    /// learns what became of it.
    #[allow(clippy::too_many_arguments)]
    fn commit<R>(
        &self,
        hold: &Hold<'_>,
        open: Open<'_>,
        key: &str,
        writes: &PgWrites,
        outcome: PgChange<R>,
        xact: Option<(String, i32)>,
        attempts: &mut Attempts<R>,
    ) -> Attempt<R> {
        let (value, new_text, delete) = match outcome {
            PgChange::Keep(value) if writes.is_empty() => {
                drop(open);
                return Attempt::Done(Ok(value));
            }
            PgChange::Keep(value) => (value, None, false),
            PgChange::Write(value, text) => (value, Some(text), false),
            PgChange::Delete(value) => (value, None, true),
        };
        // Round trip 2: the writes, the notification, the commit — every statement
        // prepared, so all are sent at once and in this order.
        let result = self.write_and_commit(
            &hold.conn,
            &open.commit_sql,
            key,
            writes,
            new_text.as_deref(),
            delete,
        );
        let action = || format!("update {key}");
        match result {
            Ok(written) if written == 1 || delete => {
                open.finish();
                Attempt::Done(Ok(value))
            }
            Ok(written) => Attempt::Done(Err(self.error(
                action(),
                format!("the locked row was not there to write ({written} rows)"),
            ))),
            Err(e) if link_lost(&e, &hold.conn.client) => {
                hold.conn.mark_lost();
                drop(open);
                let detail = engine_detail(&e);
                // A savepoint's loss is its outer change's: that one runs again.
                let Some((xact, pid)) = xact.filter(|_| hold.depth == 0) else {
                    return Attempt::Done(Err(self.db_error(action(), &e)));
                };
                attempts.unsettled = Some(Unsettled {
                    xact,
                    pid,
                    value,
                    detail,
                });
                if attempts.lost_links >= ATTEMPTS {
                    let e = self.error(action(), "the link was lost again and again");
                    return Attempt::Done(Err(self.unsettled_or(key, &attempts.unsettled, e)));
                }
                attempts.lost_links += 1;
                Attempt::Again
            }
            // A failed statement aborted the transaction; the COMMIT then rolled back
            // and `open` ends what is left.
            Err(e) => Attempt::Done(Err(self.error(action(), engine_detail(&e)))),
        }
    }

    /// Round trip 2 of a change: its other writes, the document's new text (or its
    /// deletion), the notification and `commit_sql`, pipelined. The rows written.
    fn write_and_commit(
        &self,
        conn: &Conn,
        commit_sql: &str,
        key: &str,
        writes: &PgWrites,
        new_text: Option<&str>,
        delete: bool,
    ) -> std::result::Result<u64, tokio_postgres::Error> {
        let client = &conn.client;
        let statements = &conn.statements;
        let channel = channel_of(key);
        let quarantine_params: Vec<[&(dyn ToSql + Sync); 3]> = writes
            .quarantined
            .iter()
            .map(|(key, detail, doc)| -> [&(dyn ToSql + Sync); 3] { [key, detail, doc] })
            .collect();
        let archive_params: Vec<[&(dyn ToSql + Sync); 2]> = writes
            .archived
            .iter()
            .map(|(key, line)| -> [&(dyn ToSql + Sync); 2] { [key, line] })
            .collect();
        let keep_rows = crate::limits::EVENT_LOG_MAX_ROWS;
        // One statement per log (a change writes to its team's), its events in order; it
        // wakes the log's followers ([`crate::Team::event_watcher`]) on the log's key.
        let mut logs: Vec<(&String, Vec<&str>)> = Vec::new();
        for (log, body) in &writes.events {
            match logs.iter_mut().find(|(key, _)| *key == log) {
                Some((_, bodies)) => bodies.push(body),
                None => logs.push((log, vec![body])),
            }
        }
        let event_params: Vec<[&(dyn ToSql + Sync); 4]> = logs
            .iter()
            .map(|(log, bodies)| -> [&(dyn ToSql + Sync); 4] {
                [*log, bodies, &keep_rows, &channel]
            })
            .collect();
        let deleted: &Vec<String> = &writes.deleted;
        let deleted_param: [&(dyn ToSql + Sync); 1] = [deleted];
        let notify_params: [&(dyn ToSql + Sync); 2] = [&channel, &key];
        block_on(async {
            let quarantined = futures_util::future::try_join_all(
                quarantine_params
                    .iter()
                    .map(|params| client.execute(&statements.quarantine, params)),
            );
            let archived = futures_util::future::try_join_all(
                archive_params
                    .iter()
                    .map(|params| client.execute(&statements.archive, params)),
            );
            let under: Vec<&Statement> = if deleted.is_empty() {
                Vec::new()
            } else {
                vec![
                    &statements.delete_archive_under,
                    &statements.delete_quarantine_under,
                    &statements.delete_events_under,
                    &statements.delete_event_seq_under,
                    &statements.delete_docs_under,
                ]
            };
            let deleted = futures_util::future::try_join_all(
                under
                    .into_iter()
                    .map(|statement| client.execute(statement, &deleted_param)),
            );
            // Last of the writes: the team's event counter row is the innermost lock.
            let evented = futures_util::future::try_join_all(
                event_params
                    .iter()
                    .map(|params| client.execute(&statements.event, params)),
            );
            let write = async {
                let written = match (new_text, delete) {
                    (Some(text), _) => client.execute(&statements.write, &[&key, &text]).await?,
                    (None, true) => client.execute(&statements.delete, &[&key]).await?,
                    (None, false) => 1,
                };
                Ok::<_, tokio_postgres::Error>(written)
            };
            // All sent before the commit, in one pipeline.
            let notify = client.execute(&statements.notify, &notify_params);
            let commit = client.batch_execute(commit_sql);
            let ((q, a, d), w, e, n, c) = futures_util::future::join5(
                futures_util::future::join3(quarantined, archived, deleted),
                write,
                evented,
                notify,
                commit,
            )
            .await;
            // The first failure in the pipeline's order: a refused write (a member
            // role's rule) is the cause of the aborted transaction the later ones meet.
            q.map(|_| ())
                .and(a.map(|_| ()))
                .and(d.map(|_| ()))
                .and(w)
                .and_then(|written| e.map(|_| written))
                .and_then(|written| n.map(|_| written))
                .and_then(|written| c.map(|()| written))
        })
    }
}
