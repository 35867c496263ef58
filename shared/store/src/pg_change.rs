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

use std::sync::atomic::Ordering;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use super::{
    Conn, LOCK_WAIT, Open, PgChange, PgStore, PgWrites, block_on, channel_of, engine_detail,
    is_lock_timeout, team_config_key,
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
        let action = || format!("update {key}");
        let mut unsettled: Option<Unsettled<R>> = None;
        let (mut lost_links, mut vanished) = (0, 0);
        loop {
            let hold = match self.serialize() {
                Ok(hold) => hold,
                Err(e) => return Err(self.unsettled_or(key, &unsettled, e)),
            };
            let depth = hold.depth;
            let client = &hold.conn.client;
            let statements = &hold.conn.statements;
            // An inbox or a task list belongs to a team: its config must exist, held shared
            // until the commit, so a team delete cannot slip between (a late send would
            // leave an inbox for a new team of that name). Inside a change of the config
            // itself (a team's creation) the outer change holds it.
            let config_key = team_config_key(key).filter(|_| team_check && depth == 0);
            // A handle writing as a member of this team (`PgStore::set_fence`): its entry is
            // checked in the config read with the share lock, in this same round trip.
            let fence_now = self.fence();
            let fence = fence_now.as_deref().filter(|fence| {
                config_key.as_deref() == Some(format!("teams/{}/config.json", fence.team).as_str())
            });
            // A change of that team's config itself is fenced on the config it locks.
            let own_config = fence_now
                .as_deref()
                .filter(|fence| key == format!("teams/{}/config.json", fence.team));
            // Round trip 1. The team's config first, the document's row after: every
            // change takes its locks in that order. The lost attempt's status is asked
            // after the row lock, which waits for that attempt's transaction to end, and
            // so is the server's clock (the time the change happens at).
            let open = Open::begin(&hold.conn, &hold);
            let key_param: [&(dyn ToSql + Sync); 1] = [&key];
            let config_param: [&(dyn ToSql + Sync); 1] = [&config_key];
            let lost_xact = unsettled.as_ref().map(|lost| lost.xact.clone());
            let status_param: [&(dyn ToSql + Sync); 1] = [&lost_xact];
            // The lost session may still be alive on the server (a cut link it has not
            // noticed), idle in the transaction and holding the row: it is ended, which
            // rolls back what has not committed. Only if it still runs that transaction
            // (a process id alone may have been reused).
            let lost_session = unsettled
                .as_ref()
                .map(|lost| (lost.pid, short_xid(&lost.xact)));
            let begin = client.batch_execute(&open.begin_sql);
            let end_lost = async {
                match &lost_session {
                    Some((pid, xid)) => client
                        .execute(&statements.end_session, &[pid, xid])
                        .await
                        .map(|_| ()),
                    None => Ok(()),
                }
            };
            let team = async {
                match &config_key {
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
            let grace = super::RESTART_GRACE.as_secs_f64();
            let grace_param: [&(dyn ToSql + Sync); 1] = [&grace];
            // After the row lock: what is held while this change holds it.
            let presence = async {
                match wants.presence {
                    true => client
                        .query_one(&statements.held_all, &grace_param)
                        .await
                        .map(|row| {
                            Some(super::HeldKeys {
                                held: row.get::<_, Vec<i64>>(0).into_iter().collect(),
                                server_restarted: row.get(1),
                            })
                        }),
                    false => Ok(None),
                }
            };
            let (
                (begun, ended, team, placed),
                ((locked, clock, xact, status, quarantined), presence),
            ) = block_on(futures_util::future::join(
                futures_util::future::join4(begin, end_lost, team, placeholder),
                futures_util::future::join(
                    futures_util::future::join5(lock, clock, xact, status, quarantined),
                    presence,
                ),
            ));
            let first = (|| {
                begun?;
                ended?;
                let team = team?;
                placed?;
                let rows = locked?;
                let server_ms = clock?.get::<_, i64>(0);
                let xact = xact?;
                let status = status?;
                let quarantined = quarantined?;
                let presence = presence?;
                Ok::<_, tokio_postgres::Error>((
                    team,
                    rows,
                    server_ms,
                    xact,
                    status,
                    quarantined,
                    presence,
                ))
            })();
            let (team, rows, server_ms, xact, status, quarantined, presence) = match first {
                Ok(read) => read,
                Err(e) if link_lost(&e, client) => {
                    hold.conn.mark_lost();
                    drop(open);
                    if depth == 0 && lost_links < ATTEMPTS {
                        lost_links += 1;
                        continue;
                    }
                    return Err(self.unsettled_or(key, &unsettled, self.db_error(action(), &e)));
                }
                Err(e) => {
                    let error = if is_lock_timeout(&e) {
                        Error::LockTimeout {
                            path: std::path::PathBuf::from(format!("postgresql row {key}")),
                            attempts: 1,
                            waited: LOCK_WAIT,
                            holder: crate::error::LockHolder {
                                pid: None,
                                age: None,
                            },
                        }
                    } else {
                        self.db_error(action(), &e)
                    };
                    return Err(self.unsettled_or(key, &unsettled, error));
                }
            };
            // What became of the attempt whose link was lost after its COMMIT was sent.
            if let Some(lost) = unsettled.take() {
                match status.flatten().as_deref() {
                    Some("committed") => {
                        drop(open);
                        return Ok(lost.value);
                    }
                    // Rolled back: the change runs again from scratch, below.
                    Some("aborted") => {}
                    other => {
                        drop(open);
                        let e = self.error(
                            action(),
                            format!(
                                "its transaction is {}",
                                other.unwrap_or("unknown to the server")
                            ),
                        );
                        return Err(self.unsettled_or(key, &Some(lost), e));
                    }
                }
            }
            let config = match team {
                Some(None) if !wants.config => {
                    let config = config_key.unwrap_or_default();
                    let team = config.split('/').nth(1).unwrap_or_default().to_owned();
                    return Err(Error::TeamNotFound {
                        team,
                        path: std::path::PathBuf::from(config),
                    });
                }
                Some(config) => config,
                None => None,
            };
            // Written as a member: refused unless its entry, read under the share lock,
            // still vouches for this process — checked on every run, so a change run again
            // after a lost link is fenced as its first run was. (No config: the change
            // itself refuses the missing team.)
            if let (Some(fence), Some(config)) = (fence, &config) {
                fence.check(config)?;
            }
            // A row deleted between the placeholder and the lock (a concurrent team
            // delete or quarantine committed): start again, a change must not write into
            // nothing.
            let text = match rows.first() {
                Some(row) => row.get::<_, Option<String>>(0),
                None if vanished < 5 => {
                    vanished += 1;
                    drop(open);
                    continue;
                }
                None => {
                    return Err(self.error(
                        action(),
                        "the row kept vanishing under the change (deleted by others)",
                    ));
                }
            };
            if let (Some(fence), Some(text)) = (own_config, &text) {
                fence.check(text)?;
            }
            let reads = Reads {
                config,
                quarantined,
            };
            let mut writes = PgWrites::default();
            // A failed (or panicking) change rolls back as `open` drops. One that failed
            // because the link went under it (a read of its own) runs again.
            // The times it writes are the server's (`StoreClock`).
            let clock = crate::time::StoreClock::enter(server_ms);
            let prefetched = presence.map(|held| super::Prefetched::enter(self, held));
            let outcome = change(text, &reads, &mut writes);
            drop(prefetched);
            drop(clock);
            let outcome = match outcome {
                Ok(outcome) => outcome,
                Err(e) => {
                    let lost = client.is_closed() || hold.conn.is_lost();
                    drop(open);
                    if lost && depth == 0 && lost_links < ATTEMPTS {
                        hold.conn.mark_lost();
                        lost_links += 1;
                        continue;
                    }
                    return Err(e);
                }
            };
            let (value, new_text, delete) = match outcome {
                PgChange::Keep(value) if writes.is_empty() => {
                    drop(open);
                    return Ok(value);
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
                &writes,
                new_text.as_deref(),
                delete,
            );
            match result {
                Ok(written) if written == 1 || delete => {
                    open.finish();
                    return Ok(value);
                }
                Ok(written) => {
                    return Err(self.error(
                        action(),
                        format!("the locked row was not there to write ({written} rows)"),
                    ));
                }
                Err(e) if link_lost(&e, client) => {
                    hold.conn.mark_lost();
                    drop(open);
                    let detail = engine_detail(&e);
                    // A savepoint's loss is its outer change's: that one runs again.
                    let Some((xact, pid)) = xact.filter(|_| depth == 0) else {
                        return Err(self.db_error(action(), &e));
                    };
                    unsettled = Some(Unsettled {
                        xact,
                        pid,
                        value,
                        detail,
                    });
                    if lost_links >= ATTEMPTS {
                        let e = self.error(action(), "the link was lost again and again");
                        return Err(self.unsettled_or(key, &unsettled, e));
                    }
                    lost_links += 1;
                }
                // A failed statement aborted the transaction; the COMMIT then rolled back
                // and `open` ends what is left.
                Err(e) => return Err(self.error(action(), engine_detail(&e))),
            }
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
                    &statements.delete_docs_under,
                ]
            };
            let deleted = futures_util::future::try_join_all(
                under
                    .into_iter()
                    .map(|statement| client.execute(statement, &deleted_param)),
            );
            let write = async {
                let written = match (new_text, delete) {
                    (Some(text), _) => client.execute(&statements.write, &[&key, &text]).await?,
                    (None, true) => client.execute(&statements.delete, &[&key]).await?,
                    (None, false) => 1,
                };
                Ok::<_, tokio_postgres::Error>(written)
            };
            let notify = client.execute(&statements.notify, &notify_params);
            let commit = client.batch_execute(commit_sql);
            let ((q, a, d), w, n, c) = futures_util::future::join4(
                futures_util::future::join3(quarantined, archived, deleted),
                write,
                notify,
                commit,
            )
            .await;
            q.map(|_| ())
                .and(a.map(|_| ()))
                .and(d.map(|_| ()))
                .and(n.map(|_| ()))
                .and(w)
                .and_then(|written| c.map(|()| written))
        })
    }
}
