//! Member roles (docs/DISTRIBUTED.md "Authority in the database"): a login role per
//! member of a team, which the server lets read only its own team's rows and write only
//! through `SECURITY DEFINER` functions that check `session_user` against the rules the
//! protocol gives a member.
//!
//! Installed by the store's owner (the lead's login) on the first member role it creates,
//! and only when that login may create roles and owns the tables ([`can_create`]); a
//! store without them works as before. What is installed:
//!
//! - `roo_member_role (role, team, member)`: which login is which member (only the owner
//!   writes it);
//! - row-level security on every table but `roo_meta`: a member role sees the rows of
//!   its team's keys only; other roles (the owner, a role with row privileges) see all;
//! - a member role gets `SELECT` on the tables and nothing else: no `INSERT`, `UPDATE`,
//!   `DELETE`, and so no `SELECT … FOR UPDATE` of its own;
//! - `roo_m_*` functions, the only way a member role writes: each checks that the key is
//!   of the caller's team and the rules of that key (see [`INSTALL`]);
//! - `roo_presence_counts(pid, key)`: a presence lock held by a session of a member role
//!   counts only if it is that member's own key at the epoch its config entry records;
//!   held by any other session, only if its login is the owner, a member of it, or a
//!   superuser.
//!
//! A session finds which kind it is when it opens ([`mode`]), and a member's session
//! prepares the `roo_m_*` calls in place of the plain writes ([`statement_sql`]).

use tokio_postgres::Client;

use super::{PgStore, block_on};
use crate::error::{Error, Result};
use crate::name::Name;
use crate::random::random_u64;

/// What a session of this store is, as far as member roles go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// The store has no member roles: everything as before.
    Plain,
    /// Member roles are installed; this session is not one of them (the owner, the lead):
    /// its writes are direct, its presence reads count only proven locks.
    Trusted,
    /// This session is a member role: its writes go through the `roo_m_*` functions.
    Member,
    /// As `Trusted`, in a store whose member roles an older version installed (without
    /// `roo_lock_row`): its row lock is that version's, until the next member role
    /// created installs the current one.
    TrustedOlder,
}

/// The schema objects of member roles, idempotent; run by the owner in a transaction
/// under the schema lock, `@STUCK@` replaced by [`STUCK_AFTER_SECONDS`]. Every function's
/// `search_path` is fixed to the schema, then `pg_temp`, so a caller's own objects can
/// never stand in for ours.
pub(super) const INSTALL: &str = r#"
CREATE TABLE IF NOT EXISTS roo_member_role (
    role text PRIMARY KEY,
    team text NOT NULL,
    member text NOT NULL,
    UNIQUE (team, member)
);

-- The team a key belongs to: `teams/<team>/…` or `tasks/<team>/…`; NULL for any other.
CREATE OR REPLACE FUNCTION roo_key_team(k text) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
    SELECT CASE WHEN pg_catalog.split_part(k, '/', 1) IN ('teams', 'tasks') AND pg_catalog.split_part(k, '/', 2) <> ''
                 AND pg_catalog.split_part(k, '/', 3) <> ''
           THEN pg_catalog.split_part(k, '/', 2) END
$f$;

-- The caller's team and member when the session's login is a member role; NULL else.
CREATE OR REPLACE FUNCTION roo_session_team() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER AS $f$
    SELECT team FROM roo_member_role WHERE role = session_user::text
$f$;
CREATE OR REPLACE FUNCTION roo_session_member() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER AS $f$
    SELECT member FROM roo_member_role WHERE role = session_user::text
$f$;

-- Row-level security: a member role's rows are its team's; anyone else's are all rows.
CREATE OR REPLACE FUNCTION roo_may_see(k text) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER AS $f$
    SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM roo_member_role WHERE role = session_user::text)
           THEN true
           ELSE roo_key_team(k) IS NOT DISTINCT FROM
                (SELECT team FROM roo_member_role WHERE role = session_user::text)
                AND roo_key_team(k) IS NOT NULL END
$f$;

-- A member role's call: its team (refused for anyone else, and for a key outside it).
CREATE OR REPLACE FUNCTION roo_m_team_of(k text) RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $f$
DECLARE t text := roo_session_team();
BEGIN
    IF t IS NULL THEN
        RAISE EXCEPTION 'role % is not a member role of this store', session_user
            USING ERRCODE = '42501';
    END IF;
    IF roo_key_team(k) IS DISTINCT FROM t THEN
        RAISE EXCEPTION 'member role % of team % may not touch %', session_user, t, k
            USING ERRCODE = '42501';
    END IF;
    RETURN t;
END
$f$;

CREATE OR REPLACE FUNCTION roo_m_placeholder(k text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $f$
BEGIN
    PERFORM roo_m_team_of(k);
    INSERT INTO roo_doc (key, doc) VALUES (k, NULL) ON CONFLICT (key) DO NOTHING;
END
$f$;

-- Ends the sessions of member roles whose transaction has held a write lock on one of
-- our tables (a row locked, a row written) for more than @STUCK@ s: a member cannot hold
-- a row longer, whatever it SETs in its own session. Called before every row lock a
-- change takes; true. The limit is no parameter: a member calling it cannot end a
-- peer's change in flight.
CREATE OR REPLACE FUNCTION roo_end_stuck_members() RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER AS $f$
DECLARE p int;
BEGIN
    FOR p IN SELECT DISTINCT a.pid FROM pg_stat_activity a
             JOIN roo_member_role r ON r.role = a.usename::text
             JOIN pg_locks l ON l.pid = a.pid
             WHERE a.xact_start < pg_catalog.clock_timestamp() - pg_catalog.make_interval(secs => @STUCK@)
               AND a.pid <> pg_catalog.pg_backend_pid()
               AND l.locktype = 'relation' AND l.granted AND l.mode <> 'AccessShareLock'
               AND l.relation IN ('roo_doc'::regclass, 'roo_archive'::regclass,
                                  'roo_quarantine'::regclass, 'roo_event'::regclass,
                                  'roo_event_seq'::regclass) LOOP
        BEGIN
            PERFORM pg_catalog.pg_terminate_backend(p);
        EXCEPTION WHEN insufficient_privilege THEN
            NULL;
        END;
    END LOOP;
    RETURN true;
END
$f$;

-- The row lock of a change (the owner's, and a member's through roo_m_lock): the row of
-- key k, locked. Stuck member sessions are looked for (roo_end_stuck_members, a join of
-- pg_stat_activity and pg_locks) only when the row is held by another transaction: the
-- row is first taken with SKIP LOCKED (no error, so no subtransaction); when that gives
-- no row but the row is there, the stuck are ended and the row waited for. The rights
-- of the caller (not SECURITY DEFINER).
CREATE OR REPLACE FUNCTION roo_lock_row(k text) RETURNS TABLE (doc text)
LANGUAGE plpgsql AS $f$
BEGIN
    RETURN QUERY SELECT d.doc::text FROM roo_doc d WHERE d.key = k FOR UPDATE SKIP LOCKED;
    IF FOUND OR NOT EXISTS (SELECT 1 FROM roo_doc d WHERE d.key = k) THEN
        RETURN;
    END IF;
    PERFORM roo_end_stuck_members();
    RETURN QUERY SELECT d.doc::text FROM roo_doc d WHERE d.key = k FOR UPDATE;
END
$f$;

CREATE OR REPLACE FUNCTION roo_m_lock(k text) RETURNS TABLE (doc text)
LANGUAGE plpgsql SECURITY DEFINER AS $f$
BEGIN
    PERFORM roo_m_team_of(k);
    RETURN QUERY SELECT l.doc FROM roo_lock_row(k) l;
END
$f$;

CREATE OR REPLACE FUNCTION roo_m_share_config(k text) RETURNS TABLE (doc text)
LANGUAGE plpgsql SECURITY DEFINER AS $f$
BEGIN
    PERFORM roo_m_team_of(k);
    RETURN QUERY SELECT d.doc::text FROM roo_doc d WHERE d.key = k AND d.doc IS NOT NULL
        FOR SHARE;
END
$f$;

-- Two JSON values equal: as written, else as jsonb (a value jsonb cannot hold, a string
-- with \u0000, compares as written only).
CREATE OR REPLACE FUNCTION roo_json_same(a json, b json) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
    IF a::text = b::text THEN
        RETURN true;
    END IF;
    RETURN a::jsonb = b::jsonb;
EXCEPTION WHEN others THEN
    RETURN false;
END
$f$;

-- The messages of an inbox document (the bare array of before versions, or `messages`).
CREATE OR REPLACE FUNCTION roo_inbox_messages(d json) RETURNS json
LANGUAGE sql IMMUTABLE AS $f$
    SELECT CASE WHEN d IS NULL THEN '[]'::json
                WHEN pg_catalog.json_typeof(d) = 'array' THEN d
                WHEN pg_catalog.json_typeof(d) = 'object' AND pg_catalog.json_typeof(d -> 'messages') = 'array'
                THEN d -> 'messages'
                ELSE '[]'::json END
$f$;

-- A member's write of a peer's inbox: a send. Every unread message stays as it was;
-- a message that was not there before (by id) carries `from` = the caller (its name or
-- agent id) and is none of the types only the lead may send (PROTOCOL.md §5.2); read
-- messages may go (the bounded inbox moves them to the archive).
CREATE OR REPLACE FUNCTION roo_m_check_send(t text, m text, oj json, nj json) RETURNS void
LANGUAGE plpgsql STABLE AS $f$
DECLARE
    me_id text;
    olds json := roo_inbox_messages(oj);
    news json := roo_inbox_messages(nj);
    bad text;
    w_old json;
    w_new json;
BEGIN
    IF nj IS NULL OR pg_catalog.json_typeof(nj) NOT IN ('object', 'array') THEN
        RAISE EXCEPTION 'member % may not remove the inbox of a peer', m USING ERRCODE = '42501';
    END IF;
    -- The wrapper is the owner's: only `messages` (an array) changes; a new one has a
    -- version of this major (a newer one would make the inbox unreadable).
    IF pg_catalog.json_typeof(nj) = 'object' THEN
        IF pg_catalog.json_typeof(nj -> 'messages') IS DISTINCT FROM 'array' THEN
            RAISE EXCEPTION 'member % may not write a peer''s inbox whose messages are not a list', m
                USING ERRCODE = '42501';
        END IF;
        w_new := (SELECT pg_catalog.json_object_agg(e.key, e.value ORDER BY e.key)
                  FROM pg_catalog.json_each(nj) e WHERE e.key <> 'messages');
        IF pg_catalog.json_typeof(oj) = 'object' THEN
            w_old := (SELECT pg_catalog.json_object_agg(e.key, e.value ORDER BY e.key)
                      FROM pg_catalog.json_each(oj) e WHERE e.key <> 'messages');
            IF NOT ((w_old IS NULL AND w_new IS NULL) OR coalesce(roo_json_same(w_old, w_new), false)) THEN
                RAISE EXCEPTION 'member % may not change a peer''s inbox but its messages', m
                    USING ERRCODE = '42501';
            END IF;
        ELSIF EXISTS (SELECT 1 FROM pg_catalog.json_object_keys(nj) k WHERE k NOT IN ('version', 'messages'))
              OR ((nj -> 'version') IS NOT NULL
                  AND (pg_catalog.json_typeof(nj -> 'version') IS DISTINCT FROM 'string'
                       OR (nj ->> 'version') !~ '^@MAJOR@\.[0-9]{1,9}$')) THEN
            RAISE EXCEPTION 'member % may not start a peer''s inbox but as version @MAJOR@ with messages', m
                USING ERRCODE = '42501';
        END IF;
    END IF;
    SELECT x ->> 'agent_id' INTO me_id
      FROM roo_doc d,
           pg_catalog.json_array_elements(CASE WHEN pg_catalog.json_typeof(d.doc -> 'members') = 'array'
                               THEN d.doc -> 'members' ELSE '[]'::json END) x
     WHERE d.key = 'teams/' || t || '/config.json' AND x ->> 'name' = m;
    -- Each array parsed once; messages matched by id (a hash join).
    IF EXISTS (SELECT 1 FROM pg_catalog.json_array_elements(olds) o
               LEFT JOIN pg_catalog.json_array_elements(news) n ON (n ->> 'id') = (o ->> 'id')
               WHERE NOT coalesce(pg_catalog.json_typeof(o -> 'read') = 'boolean' AND (o ->> 'read')::boolean, false)
                 AND (n IS NULL OR NOT roo_json_same(n, o))) THEN
        RAISE EXCEPTION 'member % may not remove or change an unread message of a peer''s inbox', m
            USING ERRCODE = '42501';
    END IF;
    SELECT n ->> 'type' INTO bad
      FROM pg_catalog.json_array_elements(news) n
      LEFT JOIN pg_catalog.json_array_elements(olds) o ON (o ->> 'id') = (n ->> 'id')
     WHERE o IS NULL
       AND (n ->> 'type') IN ('task_assignment', 'plan_approval_response', 'permission_response')
     LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'member % may not send a % (only the lead may)', m, bad
            USING ERRCODE = '42501';
    END IF;
    -- An id of the lead's assignments (PROTOCOL.md §5.2), or a text over the limit.
    SELECT CASE WHEN pg_catalog.lower(n ->> 'id') LIKE '@ASSIGN@%' THEN 'an id starting with @ASSIGN@'
                ELSE 'a text over @MAX_TEXT@ bytes' END INTO bad
      FROM pg_catalog.json_array_elements(news) n
      LEFT JOIN pg_catalog.json_array_elements(olds) o ON (o ->> 'id') = (n ->> 'id')
     WHERE o IS NULL
       AND (pg_catalog.lower(n ->> 'id') LIKE '@ASSIGN@%'
            OR pg_catalog.octet_length(n ->> 'text') > @MAX_TEXT@)
     LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'member % may not send a message with %', m, bad
            USING ERRCODE = '42501';
    END IF;
    SELECT CASE WHEN o IS NULL THEN coalesce(n ->> 'from', '(none)') ELSE '' END INTO bad
      FROM pg_catalog.json_array_elements(news) n
      LEFT JOIN pg_catalog.json_array_elements(olds) o ON (o ->> 'id') = (n ->> 'id')
     WHERE (o IS NULL AND (n ->> 'from') IS DISTINCT FROM m
            AND (me_id IS NULL OR (n ->> 'from') IS DISTINCT FROM me_id))
        OR (o IS NOT NULL AND NOT roo_json_same(o, n))
     LIMIT 1;
    IF bad = '' THEN
        RAISE EXCEPTION 'member % may not change a message of a peer''s inbox', m
            USING ERRCODE = '42501';
    ELSIF bad IS NOT NULL THEN
        RAISE EXCEPTION 'member % may send only as itself (a message from %)', m, bad
            USING ERRCODE = '42501';
    END IF;
END
$f$;

-- A member's write of its team's config: the roster (names and agent ids, in order),
-- the lead's entry and every team-level field (the lead key, the lead's id, the name)
-- stay as they were; of a peer's entry only what marking it dead writes (`dead_at`,
-- `dead_reason`, `is_active`) may change, and only to mark it dead: from no `dead_at` to
-- one, while no presence lock of its key at the epoch its entry records counts
-- (`roo_presence_counts`); a peer with no epoch has no presence, and its recorded pid is
-- the client's evidence. A dead peer stays dead (only its own join clears its
-- `dead_at`). Its own entry is the member's.
CREATE OR REPLACE FUNCTION roo_m_check_config(t text, m text, oj json, nj json) RETURNS void
LANGUAGE plpgsql STABLE AS $f$
DECLARE
    roster_old text;
    roster_new text;
    lead text;
    peer text;
BEGIN
    IF oj IS NULL OR nj IS NULL OR pg_catalog.json_typeof(nj) <> 'object' OR pg_catalog.json_typeof(oj) <> 'object' THEN
        RAISE EXCEPTION 'member % may not create or remove the team''s config', m USING ERRCODE = '42501';
    END IF;
    IF (oj::jsonb - 'members') IS DISTINCT FROM (nj::jsonb - 'members') THEN
        RAISE EXCEPTION 'member % may not change the team''s settings (lead key, lead, name)', m
            USING ERRCODE = '42501';
    END IF;
    IF pg_catalog.json_typeof(nj -> 'members') IS DISTINCT FROM 'array'
       OR pg_catalog.json_typeof(oj -> 'members') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'member % may not change the roster', m USING ERRCODE = '42501';
    END IF;
    SELECT pg_catalog.string_agg(pg_catalog.json_build_array(x ->> 'name', x ->> 'agent_id')::text, ',' ORDER BY i)
      INTO roster_old FROM pg_catalog.json_array_elements(oj -> 'members') WITH ORDINALITY AS e(x, i);
    SELECT pg_catalog.string_agg(pg_catalog.json_build_array(x ->> 'name', x ->> 'agent_id')::text, ',' ORDER BY i)
      INTO roster_new FROM pg_catalog.json_array_elements(nj -> 'members') WITH ORDINALITY AS e(x, i);
    -- Its first join adds its own entry, last, under its own name and agent id (a
    -- pane or remote teammate joins after the lead started its process).
    IF roster_old IS DISTINCT FROM roster_new
       AND NOT (NOT EXISTS (SELECT 1 FROM pg_catalog.json_array_elements(oj -> 'members') o
                            WHERE pg_catalog.lower(o ->> 'name') = pg_catalog.lower(m))
                AND roster_new = pg_catalog.concat_ws(',', roster_old,
                        pg_catalog.json_build_array(m, m || '@' || t)::text)) THEN
        RAISE EXCEPTION 'member % may not change the roster', m USING ERRCODE = '42501';
    END IF;
    lead := oj ->> 'lead_agent_id';
    IF EXISTS (SELECT 1 FROM pg_catalog.json_array_elements(oj -> 'members') o,
                             pg_catalog.json_array_elements(nj -> 'members') n
               WHERE o ->> 'agent_id' = lead AND n ->> 'agent_id' = lead
                 AND NOT roo_json_same(o, n)) THEN
        RAISE EXCEPTION 'member % may not change the lead''s entry', m USING ERRCODE = '42501';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.json_array_elements(oj -> 'members') WITH ORDINALITY AS a(o, i)
               JOIN pg_catalog.json_array_elements(nj -> 'members') WITH ORDINALITY AS b(n, j) ON i = j
               WHERE (o ->> 'name') IS DISTINCT FROM m
                 AND (o::jsonb - 'dead_at' - 'dead_reason' - 'is_active')
                     IS DISTINCT FROM (n::jsonb - 'dead_at' - 'dead_reason' - 'is_active')) THEN
        RAISE EXCEPTION 'member % may change only its own entry and whether a peer is dead', m
            USING ERRCODE = '42501';
    END IF;
    SELECT o ->> 'name' INTO peer
      FROM pg_catalog.json_array_elements(oj -> 'members') WITH ORDINALITY AS a(o, i)
      JOIN pg_catalog.json_array_elements(nj -> 'members') WITH ORDINALITY AS b(n, j) ON i = j
     WHERE (o ->> 'name') IS DISTINCT FROM m
       AND NOT roo_json_same(o, n)
       AND ((o -> 'dead_at') IS NOT NULL AND pg_catalog.json_typeof(o -> 'dead_at') <> 'null'
            OR (n -> 'dead_at') IS NULL OR pg_catalog.json_typeof(n -> 'dead_at') = 'null')
     LIMIT 1;
    IF peer IS NOT NULL THEN
        RAISE EXCEPTION 'member % may change a peer''s entry (%) only to mark it dead, and never revive it', m, peer
            USING ERRCODE = '42501';
    END IF;
    SELECT o ->> 'name' INTO peer
      FROM pg_catalog.json_array_elements(oj -> 'members') WITH ORDINALITY AS a(o, i)
      JOIN pg_catalog.json_array_elements(nj -> 'members') WITH ORDINALITY AS b(n, j) ON i = j
     WHERE (o ->> 'name') IS DISTINCT FROM m
       AND NOT roo_json_same(o, n)
       AND (o ->> 'epoch') IS NOT NULL
       AND EXISTS (
           SELECT 1 FROM pg_catalog.pg_locks l,
                  LATERAL (SELECT roo_presence_key(t, coalesce(o ->> 'agent_id', o ->> 'name'), o ->> 'epoch') AS k) pk
            WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
              AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
              AND l.classid = ((pk.k >> 32) & 4294967295)::oid
              AND l.objid = (pk.k & 4294967295)::oid
              AND roo_presence_counts(l.pid, pk.k))
     LIMIT 1;
    IF peer IS NOT NULL THEN
        RAISE EXCEPTION 'member % may not mark % dead: its presence is held', m, peer
            USING ERRCODE = '42501';
    END IF;
END
$f$;

-- A member's write of its team's task list: an object whose `tasks` is a list; no task
-- disappears (so none is renumbered) but one the member created itself (a member may
-- delete its own task); `next_id` never goes back (ids are never reused).
CREATE OR REPLACE FUNCTION roo_m_check_tasks(m text, oj json, nj json) RETURNS void
LANGUAGE plpgsql STABLE AS $f$
DECLARE gone text;
BEGIN
    IF nj IS NULL OR pg_catalog.json_typeof(nj) <> 'object' THEN
        RAISE EXCEPTION 'member % may not remove the task list', m USING ERRCODE = '42501';
    END IF;
    IF pg_catalog.json_typeof(nj -> 'tasks') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'member % may not write a task list whose tasks are not a list', m
            USING ERRCODE = '42501';
    END IF;
    IF oj IS NULL OR pg_catalog.json_typeof(oj) <> 'object'
       OR pg_catalog.json_typeof(oj -> 'tasks') IS DISTINCT FROM 'array' THEN
        RETURN;
    END IF;
    SELECT coalesce(o ->> 'id', '(no id)') INTO gone
      FROM pg_catalog.json_array_elements(oj -> 'tasks') o
      LEFT JOIN pg_catalog.json_array_elements(nj -> 'tasks') n ON (n ->> 'id') = (o ->> 'id')
     WHERE n IS NULL AND (o ->> 'created_by') IS DISTINCT FROM m
     LIMIT 1;
    IF gone IS NOT NULL THEN
        RAISE EXCEPTION 'member % may not remove or renumber task % (only its creator or the lead may delete it)', m, gone
            USING ERRCODE = '42501';
    END IF;
    IF pg_catalog.json_typeof(oj -> 'next_id') = 'number'
       AND (pg_catalog.json_typeof(nj -> 'next_id') IS DISTINCT FROM 'number'
            OR (nj ->> 'next_id')::numeric < (oj ->> 'next_id')::numeric) THEN
        RAISE EXCEPTION 'member % may not lower the task list''s next id', m USING ERRCODE = '42501';
    END IF;
END
$f$;

CREATE OR REPLACE FUNCTION roo_m_write(k text, txt text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER AS $f$
DECLARE
    t text := roo_m_team_of(k);
    m text := roo_session_member();
    nj json := txt::json;
    oj json;
BEGIN
    SELECT d.doc INTO oj FROM roo_doc d WHERE d.key = k;
    IF k = 'teams/' || t || '/config.json' THEN
        PERFORM roo_m_check_config(t, m, oj, nj);
    ELSIF pg_catalog.starts_with(k, 'teams/' || t || '/inboxes/') AND k <> 'teams/' || t || '/inboxes/' || m || '.json' THEN
        PERFORM roo_m_check_send(t, m, oj, nj);
    ELSIF k = 'tasks/' || t || '/tasks.json' THEN
        PERFORM roo_m_check_tasks(m, oj, nj);
    END IF;
    UPDATE roo_doc SET doc = nj, rev = rev + 1, updated_at = pg_catalog.now() WHERE key = k;
    RETURN FOUND;
END
$f$;

CREATE OR REPLACE FUNCTION roo_m_delete(k text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER AS $f$
DECLARE
    t text := roo_m_team_of(k);
    m text := roo_session_member();
BEGIN
    IF k = 'teams/' || t || '/config.json' OR k = 'tasks/' || t || '/tasks.json'
       OR (pg_catalog.starts_with(k, 'teams/' || t || '/inboxes/') AND k <> 'teams/' || t || '/inboxes/' || m || '.json') THEN
        RAISE EXCEPTION 'member % may not delete %', m, k USING ERRCODE = '42501';
    END IF;
    DELETE FROM roo_doc WHERE key = k;
    RETURN FOUND;
END
$f$;

CREATE OR REPLACE FUNCTION roo_m_quarantine(k text, detail text, d text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $f$
BEGIN
    PERFORM roo_m_team_of(k);
    INSERT INTO roo_quarantine (key, detail, doc) VALUES (k, detail, d);
END
$f$;

CREATE OR REPLACE FUNCTION roo_m_archive(k text, line text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $f$
BEGIN
    PERFORM roo_m_team_of(k);
    INSERT INTO roo_archive (key, line) VALUES (k, line);
END
$f$;

-- The event statement of a plain session (connection.rs), for a member's key.
CREATE OR REPLACE FUNCTION roo_m_event(k text, bodies text[], keep int8, channel text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $f$
DECLARE last int8;
BEGIN
    PERFORM roo_m_team_of(k);
    -- The log keeps at least what the store keeps; each line within the protocol's limit.
    keep := GREATEST(keep, @KEEP@);
    IF EXISTS (SELECT 1 FROM pg_catalog.unnest(bodies) b
               WHERE b IS NULL OR pg_catalog.octet_length(b) > @EVENT_LINE@) THEN
        RAISE EXCEPTION 'member % may not log an event over @EVENT_LINE@ bytes', session_user
            USING ERRCODE = '42501';
    END IF;
    INSERT INTO roo_event_seq AS s (key, seq) VALUES (k, pg_catalog.cardinality(bodies))
        ON CONFLICT (key) DO UPDATE SET seq = s.seq + pg_catalog.cardinality(bodies)
        RETURNING seq INTO last;
    INSERT INTO roo_event (key, seq, at, body)
        SELECT k, last - pg_catalog.cardinality(bodies) + b.n, pg_catalog.clock_timestamp(), b.body
        FROM pg_catalog.unnest(bodies) WITH ORDINALITY AS b(body, n);
    IF last / 256 <> (last - pg_catalog.cardinality(bodies)) / 256 THEN
        DELETE FROM roo_event WHERE key = k AND seq <= last - keep;
    END IF;
    PERFORM pg_catalog.pg_notify(channel, k);
END
$f$;

-- The presence key of docs/PROTOCOL.md §8 (FNV-1a, 64 bits, of
-- "roo-presence\0<team>\0<agent id>\0<epoch>"), as `presence_key` computes it.
CREATE OR REPLACE FUNCTION roo_presence_key(t text, a text, e text) RETURNS int8
LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
    b bytea := pg_catalog.convert_to('roo-presence', 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(t, 'UTF8')
        || '\x00'::bytea || pg_catalog.convert_to(a, 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(e, 'UTF8');
    h numeric := 14695981039346656037;
    i int;
BEGIN
    FOR i IN 0 .. pg_catalog.length(b) - 1 LOOP
        h := h - pg_catalog.mod(h, 256) + ((pg_catalog.mod(h, 256)::int) # pg_catalog.get_byte(b, i));
        h := pg_catalog.mod(h * 1099511628211, 18446744073709551616);
    END LOOP;
    IF h >= 9223372036854775808 THEN
        h := h - 18446744073709551616;
    END IF;
    RETURN h::int8;
END
$f$;

-- Whether presence lock `k`, held by backend `p`, counts: only when `p` is a live
-- backend (a lock with no backend, a prepared transaction's, proves no process); then,
-- for a member role's session, only if `k` is that member's own key at the epoch its
-- config entry records; for any other session, only if its login (not a role it SET)
-- is a superuser or a member of the tables' owner (the lead's login): any other login
-- of the server could take a key it read in `pg_locks` and keep a dead member alive.
-- (`pg_stat_get_activity(p)`: the one backend, not the whole of `pg_stat_activity` per
-- lock.)
CREATE OR REPLACE FUNCTION roo_presence_counts(p int, k int8) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER AS $f$
    SELECT coalesce((
        SELECT CASE WHEN r.role IS NULL THEN
                   EXISTS (SELECT 1 FROM pg_catalog.pg_roles u WHERE u.oid = a.usesysid AND u.rolsuper)
                   OR pg_catalog.pg_has_role(a.usesysid,
                          (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = 'roo_doc'::regclass),
                          'MEMBER')
               ELSE EXISTS (
                   SELECT 1 FROM roo_doc d,
                          pg_catalog.json_array_elements(CASE WHEN pg_catalog.json_typeof(d.doc -> 'members') = 'array'
                                              THEN d.doc -> 'members' ELSE '[]'::json END) x
                   WHERE d.key = 'teams/' || r.team || '/config.json'
                     AND x ->> 'name' = r.member AND x ->> 'epoch' IS NOT NULL
                     AND roo_presence_key(r.team, coalesce(x ->> 'agent_id', r.member),
                                          x ->> 'epoch') = k) END
        FROM pg_catalog.pg_stat_get_activity(p) a
             LEFT JOIN roo_member_role r ON r.role = pg_catalog.pg_get_userbyid(a.usesysid)::text
        WHERE p IS NOT NULL AND a.pid = p AND a.usesysid IS NOT NULL), false)
$f$;

ALTER TABLE roo_doc ENABLE ROW LEVEL SECURITY;
ALTER TABLE roo_archive ENABLE ROW LEVEL SECURITY;
ALTER TABLE roo_quarantine ENABLE ROW LEVEL SECURITY;
ALTER TABLE roo_event ENABLE ROW LEVEL SECURITY;
ALTER TABLE roo_event_seq ENABLE ROW LEVEL SECURITY;
ALTER TABLE roo_member_role ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS roo_team_rows ON roo_doc;
CREATE POLICY roo_team_rows ON roo_doc USING (roo_may_see(key));
DROP POLICY IF EXISTS roo_team_rows ON roo_archive;
CREATE POLICY roo_team_rows ON roo_archive USING (roo_may_see(key));
DROP POLICY IF EXISTS roo_team_rows ON roo_quarantine;
CREATE POLICY roo_team_rows ON roo_quarantine USING (roo_may_see(key));
DROP POLICY IF EXISTS roo_team_rows ON roo_event;
CREATE POLICY roo_team_rows ON roo_event USING (roo_may_see(key));
DROP POLICY IF EXISTS roo_team_rows ON roo_event_seq;
CREATE POLICY roo_team_rows ON roo_event_seq USING (roo_may_see(key));

-- The owner's administration: a member's role replaced (retried after a lost link, a
-- second call replaces the first's role), and a team's roles dropped. In two steps, each
-- its own transaction, so that a role its member made hard to drop (objects it owns,
-- default privileges, in this database or another) has lost its login all the same:
-- first every role of the team (or the member) loses its login, its password, its rights
-- on the store and its sessions; then each role is dropped, alone, and one that cannot
-- be is reported (its row stays, a later drop tries again).
DROP FUNCTION IF EXISTS roo_admin_drop_member_roles(text, text);
CREATE OR REPLACE FUNCTION roo_admin_revoke_member_roles(t text, m text) RETURNS text[]
LANGUAGE plpgsql AS $f$
DECLARE
    r text;
    roles text[] := '{}';
BEGIN
    FOR r IN SELECT role FROM roo_member_role WHERE team = t AND (m IS NULL OR member = m)
             ORDER BY role LOOP
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            EXECUTE pg_catalog.format('ALTER ROLE %I NOLOGIN PASSWORD NULL', r);
            EXECUTE pg_catalog.format('REVOKE ALL ON roo_meta, roo_doc, roo_archive, roo_quarantine, roo_event, roo_event_seq FROM %I', r);
            EXECUTE pg_catalog.format('REVOKE USAGE ON SCHEMA %I FROM %I', pg_catalog.current_schema(), r);
            -- Its sessions end with its login (the owner is a member of the role).
            BEGIN
                PERFORM pg_catalog.pg_terminate_backend(a.pid) FROM pg_catalog.pg_stat_activity a
                  WHERE a.usename::text = r AND a.pid <> pg_catalog.pg_backend_pid();
            EXCEPTION WHEN insufficient_privilege THEN
                NULL;
            END;
        END IF;
        roles := roles || r;
    END LOOP;
    RETURN roles;
END
$f$;

-- Drops role r (revoked first): what it owns in this database becomes the owner's, its
-- privileges and default privileges go, then the role. NULL when done, else why not.
CREATE OR REPLACE FUNCTION roo_admin_drop_member_role(r text) RETURNS text
LANGUAGE plpgsql AS $f$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM roo_member_role WHERE role = r) THEN
        RETURN NULL;
    END IF;
    BEGIN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            EXECUTE pg_catalog.format('REASSIGN OWNED BY %I TO %I', r, current_user);
            EXECUTE pg_catalog.format('DROP OWNED BY %I', r);
            EXECUTE pg_catalog.format('DROP ROLE %I', r);
        END IF;
        DELETE FROM roo_member_role WHERE role = r;
        RETURN NULL;
    EXCEPTION WHEN others THEN
        RETURN SQLERRM;
    END;
END
$f$;

CREATE OR REPLACE FUNCTION roo_admin_create_member_role(t text, m text, r text, verifier text) RETURNS void
LANGUAGE plpgsql AS $f$
BEGIN
    IF r !~ '^roo_m_[a-z0-9_]{1,57}$' THEN
        RAISE EXCEPTION 'invalid member role name %', r;
    END IF;
    IF EXISTS (SELECT 1 FROM roo_member_role WHERE team = t AND member = m) THEN
        RAISE EXCEPTION 'member % of team % still has a role', m, t;
    END IF;
    EXECUTE pg_catalog.format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS PASSWORD %L', r, verifier);
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %I TO %I', pg_catalog.current_schema(), r);
    -- The owner may end the role's sessions (roo_end_stuck_members).
    EXECUTE pg_catalog.format('GRANT %I TO %I', r, current_user);
    EXECUTE pg_catalog.format('GRANT SELECT ON roo_meta, roo_doc, roo_archive, roo_quarantine, roo_event, roo_event_seq TO %I', r);
    -- A default only: the member's own session may SET it otherwise (docs/DISTRIBUTED.md).
    EXECUTE pg_catalog.format('ALTER ROLE %I SET idle_in_transaction_session_timeout = %L', r, '60s');
    INSERT INTO roo_member_role (role, team, member) VALUES (r, t, m);
END
$f$;
REVOKE ALL ON FUNCTION roo_admin_revoke_member_roles(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION roo_admin_drop_member_role(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION roo_admin_create_member_role(text, text, text, text) FROM PUBLIC;

DO $d$
DECLARE f text;
BEGIN
    FOR f IN SELECT p.oid::regprocedure::text FROM pg_proc p
             WHERE p.pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = pg_catalog.current_schema())
               AND (p.proname LIKE 'roo\_m\_%' OR p.proname IN ('roo_session_team',
                    'roo_session_member', 'roo_may_see', 'roo_presence_counts',
                    'roo_key_team', 'roo_json_same', 'roo_inbox_messages', 'roo_presence_key',
                    'roo_admin_revoke_member_roles', 'roo_admin_drop_member_role',
                    'roo_admin_create_member_role',
                    'roo_end_stuck_members', 'roo_lock_row')) LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, pg_catalog.current_schema());
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET lock_timeout = %L', f, '10s');
    END LOOP;
END
$d$;
INSERT INTO roo_meta (key, value) VALUES ('member_roles', '@VERSION@')
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
"#;

/// [`INSTALL`] with its settings in place.
fn install_sql() -> String {
    INSTALL
        .replace("@STUCK@", &STUCK_AFTER_SECONDS.to_string())
        .replace("@VERSION@", INSTALL_VERSION)
        .replace("@MAJOR@", &crate::format_version::FORMAT_MAJOR.to_string())
        .replace("@ASSIGN@", crate::message::ASSIGN_KEY_PREFIX)
        .replace("@MAX_TEXT@", &crate::limits::MAX_MESSAGE_TEXT.to_string())
        .replace("@KEEP@", &crate::limits::EVENT_LOG_MAX_ROWS.to_string())
        .replace("@EVENT_LINE@", &crate::limits::MAX_EVENT_LINE.to_string())
}

/// The version of [`INSTALL`] recorded in `roo_meta`: a store with another one is
/// installed again (every statement is idempotent).
const INSTALL_VERSION: &str = "10";

/// Which [`Mode`] the session of `client` is in.
pub(super) async fn mode(client: &Client) -> std::result::Result<Mode, tokio_postgres::Error> {
    let installed: bool = client
        .query_one(
            "SELECT to_regprocedure('roo_session_team()') IS NOT NULL \
             AND to_regprocedure('roo_presence_counts(int, int8)') IS NOT NULL",
            &[],
        )
        .await?
        .get(0);
    if !installed {
        return Ok(Mode::Plain);
    }
    let row = client
        .query_one(
            "SELECT roo_session_team() IS NOT NULL, \
             to_regprocedure('roo_lock_row(text)') IS NOT NULL",
            &[],
        )
        .await?;
    let (member, current): (bool, bool) = (row.get(0), row.get(1));
    if member {
        return Ok(Mode::Member);
    }
    Ok(if current {
        Mode::Trusted
    } else {
        Mode::TrustedOlder
    })
}

/// Positions in `connection::STATEMENT_SQL` of the statements a mode replaces.
const PLACEHOLDER: usize = 2;
const LOCK: usize = 3;
const WRITE: usize = 5;
const QUARANTINE: usize = 7;
const ARCHIVE: usize = 8;
const DELETE: usize = 9;
const SHARE_CONFIG: usize = 10;
const HELD_KEYS: usize = 21;
const HELD_ALL: usize = 25;
const EVENT: usize = 26;

/// The presence reads of an installed store: a lock counts only if
/// `roo_presence_counts` says so.
const HELD_KEYS_PROVEN: &str = "SELECT ARRAY(SELECT k FROM unnest($1::int8[]) AS k WHERE EXISTS (\
       SELECT 1 FROM pg_locks l \
       WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
         AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
         AND l.classid = ((k >> 32) & 4294967295)::oid \
         AND l.objid = (k & 4294967295)::oid \
         AND roo_presence_counts(l.pid, k))), \
     now() - greatest(pg_postmaster_start_time(), (SELECT stats_reset FROM pg_stat_bgwriter)) \
       < $2::float8 * interval '1 second'";
const HELD_ALL_PROVEN: &str = "SELECT ARRAY(SELECT k FROM (\
       SELECT (l.classid::int8 << 32) | l.objid::int8 AS k, l.pid FROM pg_locks l \
       WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
         AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())) h \
       WHERE roo_presence_counts(h.pid, h.k)), \
     now() - greatest(pg_postmaster_start_time(), (SELECT stats_reset FROM pg_stat_bgwriter)) \
       < $1::float8 * interval '1 second'";

/// The row lock of a trusted session, which ends member sessions stuck holding rows
/// when its row is held (`roo_lock_row`, as `roo_m_lock` does for a member's).
const LOCK_ENDING_STUCK: &str = "SELECT doc FROM roo_lock_row($1)";
/// [`LOCK_ENDING_STUCK`] in a store installed before version 8: stuck member sessions
/// looked for before every row lock.
const LOCK_ENDING_STUCK_BEFORE_8: &str = "SELECT doc::text FROM roo_doc \
     WHERE key = $1 AND roo_end_stuck_members() FOR UPDATE";

/// How long a member role's transaction may hold a write lock on the store's tables
/// before the next change that wants a row ends its session: twice [`super::LOCK_WAIT`],
/// the longest a change waits for a row (docs/DISTRIBUTED.md).
pub(super) const STUCK_AFTER_SECONDS: u64 = 20;

/// The statements of a session in `mode`: `plain` (every statement of a store without
/// member roles) with those the mode replaces replaced, each with the same parameters
/// and the same result columns.
pub(super) fn statement_sql<const N: usize>(
    plain: [&'static str; N],
    mode: Mode,
) -> [&'static str; N] {
    let mut sql = plain;
    if mode == Mode::Plain {
        return sql;
    }
    sql[HELD_KEYS] = HELD_KEYS_PROVEN;
    sql[HELD_ALL] = HELD_ALL_PROVEN;
    sql[LOCK] = if mode == Mode::TrustedOlder {
        LOCK_ENDING_STUCK_BEFORE_8
    } else {
        LOCK_ENDING_STUCK
    };
    if mode == Mode::Member {
        sql[PLACEHOLDER] = "SELECT roo_m_placeholder($1)";
        sql[LOCK] = "SELECT doc FROM roo_m_lock($1)";
        // One row when the document was written (or deleted), none when it was not
        // there: the row count of the plain UPDATE (DELETE).
        sql[WRITE] = "SELECT 1 WHERE roo_m_write($1, $2::text)";
        sql[DELETE] = "SELECT 1 WHERE roo_m_delete($1)";
        sql[QUARANTINE] = "SELECT roo_m_quarantine($1, $2, $3)";
        sql[ARCHIVE] = "SELECT roo_m_archive($1, $2)";
        sql[SHARE_CONFIG] = "SELECT doc FROM roo_m_share_config($1)";
        sql[EVENT] = "SELECT roo_m_event($1, $2::text[], $3, $4)";
    }
    sql
}

/// Whether the login of `client` may create member roles here: a superuser, or a role
/// with CREATEROLE that owns the store's tables.
pub(super) async fn can_create(
    client: &Client,
) -> std::result::Result<bool, tokio_postgres::Error> {
    Ok(client
        .query_one(
            "SELECT r.rolsuper OR (r.rolcreaterole AND c.relowner = r.oid) \
             FROM pg_roles r, pg_class c \
             WHERE r.rolname = current_user AND c.oid = to_regclass('roo_doc')",
            &[],
        )
        .await?
        .get(0))
}

/// Why member roles may not be created in this store, if they may not: what lets a
/// member escape the server's checks, read by [`refusal_of`].
pub(super) async fn refusal(
    client: &Client,
) -> std::result::Result<Option<String>, tokio_postgres::Error> {
    let row = client
        .query_one(
            "WITH o AS (SELECT coalesce(\
                 (SELECT c.relowner FROM pg_catalog.pg_class c \
                  WHERE c.oid = pg_catalog.to_regclass('roo_doc')), \
                 (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)) AS owner) \
             SELECT pg_catalog.current_setting('max_prepared_transactions')::int, \
                    pg_catalog.current_schema()::text, \
                    CASE WHEN pg_catalog.has_schema_privilege('public', pg_catalog.current_schema(), 'CREATE') \
                    THEN ARRAY['PUBLIC'] \
                    ELSE ARRAY(SELECT r.rolname::text FROM pg_catalog.pg_roles r, o \
                         WHERE NOT r.rolsuper AND r.oid <> o.owner \
                           AND NOT (r.rolname = 'pg_database_owner' \
                                    AND pg_catalog.pg_has_role(o.owner, r.oid, 'MEMBER')) \
                           AND pg_catalog.has_schema_privilege(r.oid, pg_catalog.current_schema(), 'CREATE') \
                         ORDER BY 1) END",
            &[],
        )
        .await?;
    let creators: Vec<String> = row.get(2);
    Ok(refusal_of(row.get(0), row.get(1), &creators))
}

/// [`refusal`] from what the server said:
/// - `max_prepared_transactions` above 0 lets a member keep a row lock or a presence
///   lock past its session (`PREPARE TRANSACTION`), out of reach of the stuck-lock limit
///   and of the presence proof;
/// - a role other than the owner (and superusers) that may `CREATE` in the store's
///   schema (`PUBLIC`: the default for `public` before PostgreSQL 15) could put there a
///   function or operator that the owner's functions would call in place of the
///   built-in one.
pub(super) fn refusal_of(max_prepared: i32, schema: &str, creators: &[String]) -> Option<String> {
    if max_prepared > 0 {
        return Some(format!(
            "the server allows prepared transactions (max_prepared_transactions = \
             {max_prepared}), with which a member could hold a lock past its session; set it \
             to 0 to use member roles"
        ));
    }
    let first = creators.first()?;
    let who = match first.as_str() {
        "PUBLIC" => "every role (PUBLIC)".to_owned(),
        _ => creators.join(", "),
    };
    Some(format!(
        "{who} may create objects in schema {schema}, where a member could plant a function \
         that the store's own would call; run REVOKE CREATE ON SCHEMA {schema} FROM {}",
        if first == "PUBLIC" {
            "PUBLIC"
        } else {
            "<role>"
        }
    ))
}

/// A role name for `member` of `team`: `roo_m_`, the lowercase letters and digits of
/// both (shortened), and 16 random hex digits, so names never collide across teams,
/// schemas or a team created again.
pub(super) fn role_name(team: &str, member: &str, random: u64) -> String {
    let clean = |s: &str, max: usize| -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .take(max)
            .collect()
    };
    format!(
        "roo_m_{}_{}_{random:016x}",
        clean(team, 16),
        clean(member, 16)
    )
}

/// The login of a member role: its name and its password. The password is for the
/// member's process only (handed over like the store's URL, never on a command line,
/// in a command's environment or on disk); `Debug` does not show it.
pub struct MemberLogin {
    role: String,
    password: String,
}

impl MemberLogin {
    /// The role's name (the `user` of the member's URL).
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The role's password.
    pub fn password(&self) -> &str {
        &self.password
    }
}

impl MemberLogin {
    /// The URL of this member's process: `lead_url` (the lead's store URL) with this
    /// role as its user and no password (the authority's, or a `password`, `user` or
    /// `passfile` parameter, all left out); host, port, database and every other
    /// parameter (`sslmode`, `sslrootcert`, `options`, …) as written. The password goes
    /// apart ([`MemberLogin::password`], as `PGPASSWORD`).
    pub fn url_for(&self, lead_url: &str) -> Result<String> {
        let refused = |why: &str| Error::InvalidSetting {
            name: crate::env::ROO_STORE_ENV,
            reason: format!("make the URL of member role {}: {why}", self.role),
        };
        let (scheme, rest) = ["postgresql://", "postgres://"]
            .iter()
            .find_map(|scheme| lead_url.strip_prefix(scheme).map(|rest| (*scheme, rest)))
            .ok_or_else(|| refused("the store URL is not a postgresql:// URL"))?;
        // The credentials run to the first `@`, as the URL is read (`crate::pg_url`).
        let rest = rest.find('@').map_or(rest, |at| &rest[at + 1..]);
        let (base, query) = match rest.split_once('?') {
            Some((base, query)) => (base, query),
            None => (rest, ""),
        };
        let kept: Vec<&str> = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .filter(|pair| {
                let key = pair.split_once('=').map_or(*pair, |(key, _)| key);
                !matches!(
                    crate::pg::url::percent_decoded(key).as_str(),
                    "user" | "password" | "passfile"
                )
            })
            .collect();
        let mut url = format!("{scheme}{}@{base}", self.role);
        if !kept.is_empty() {
            url.push('?');
            url.push_str(&kept.join("&"));
        }
        let config = crate::pg::url::parse(&url).map_err(|_| refused("it does not parse"))?;
        if config.get_user() != Some(self.role.as_str()) || config.get_password().is_some() {
            return Err(refused("its user or password would not be the member's"));
        }
        Ok(url)
    }
}

impl std::fmt::Debug for MemberLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberLogin")
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Whether this store's login may create member roles: a superuser, or a role with
    /// CREATEROLE that owns the tables. Without it, teammates use the store's own login,
    /// as before member roles.
    pub fn can_create_member_roles(&self) -> Result<bool> {
        self.request("check the right to create roles", |conn| {
            block_on(can_create(&conn.client))
        })
    }

    /// Whether this store has member roles installed (a member's pid is then no
    /// evidence of its liveness: it writes its own entry).
    pub(crate) fn has_member_roles(&self) -> Result<bool> {
        self.request("read the session's kind", |conn| {
            Ok(conn.statements.mode != Mode::Plain)
        })
    }

    /// Why this store may not have member roles though its login may create them
    /// ([`refusal_of`]); `None` when it may.
    pub fn member_roles_refused(&self) -> Result<Option<String>> {
        self.request("check the server for member roles", |conn| {
            block_on(refusal(&conn.client))
        })
    }

    /// Why this store cannot give members roles of their own (its login may not
    /// create roles, or [`PgStore::member_roles_refused`]); `None` when it can.
    pub fn member_roles_unavailable(&self) -> Result<Option<String>> {
        if !self.can_create_member_roles()? {
            return Ok(Some(
                "the store's login may not create roles (it needs CREATEROLE and to own the \
                 tables)"
                    .to_owned(),
            ));
        }
        self.member_roles_refused()
    }

    /// `env`, what this store's login (the lead) hands to `login`'s member process,
    /// made the member's: `ROO_STORE` its URL ([`MemberLogin::url_for`] of `lead_url`),
    /// `PGPASSWORD` its password, and this login's password in no variable — the lead's
    /// `PGPASSWORD` and `PGPASSFILE` and every variable whose value holds the password
    /// this store logged in with (or the one of `lead_url`) are left out.
    pub fn hand_member_login(
        &self,
        login: &MemberLogin,
        lead_url: &str,
        env: &mut std::collections::BTreeMap<String, String>,
    ) -> Result<()> {
        let url = login.url_for(lead_url)?;
        let bytes = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let mut secrets: Vec<String> = Vec::new();
        secrets.extend(self.inner.config.get_password().map(bytes));
        if let Ok(config) = crate::pg::url::parse(lead_url) {
            secrets.extend(config.get_password().map(bytes));
        }
        secrets.extend(env.get("PGPASSWORD").cloned());
        // Each also as a URL would carry it: percent-encoded (upper- and lower-case
        // hex), and the lead URL's password exactly as written there.
        let encoded: Vec<String> = secrets
            .iter()
            .flat_map(|s| [percent_encoded(s, false), percent_encoded(s, true)])
            .collect();
        secrets.extend(encoded);
        secrets.extend(written_password(lead_url));
        secrets.sort();
        secrets.dedup();
        secrets.retain(|s| !s.is_empty());
        // A short password would match much else: only a value equal to it goes then.
        let holds = |value: &str| {
            secrets
                .iter()
                .any(|s| value == s || (s.len() >= 8 && value.contains(s.as_str())))
        };
        env.retain(|name, value| {
            !matches!(
                name.to_ascii_uppercase().as_str(),
                "PGPASSWORD" | "PGPASSFILE" | "PGUSER" | "ROO_STORE"
            ) && !holds(value)
        });
        env.insert(crate::env::ROO_STORE_ENV.to_owned(), url);
        env.insert("PGPASSWORD".to_owned(), login.password.clone());
        Ok(())
    }

    /// Whether the server lets `login` in with what its member's process is handed: the
    /// URL [`MemberLogin::url_for`] of `lead_url` and its password as `PGPASSWORD`, and
    /// nothing else (no password file). One connection, opened as the member's own is
    /// ([`PgStore::connect_with`]: a refused login at once, with no second try; a
    /// server that does not answer, within its limit), then closed. The error is the
    /// server's (or the connection's) sentence. Its `pg_hba.conf` may refuse a login the
    /// lead's rights let it create (docs/DISTRIBUTED.md "Authority in the database").
    pub fn check_member_login(
        login: &MemberLogin,
        lead_url: &str,
    ) -> std::result::Result<(), String> {
        let url = login.url_for(lead_url).map_err(|e| e.to_string())?;
        let password = login.password.clone();
        let env = move |name: &str| (name == "PGPASSWORD").then(|| password.clone());
        PgStore::connect_with(&url, &env)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// Drops the role of `member` of `team`, if it has one (a teammate stopped, removed
    /// or whose spawn failed): its login goes first, then the role, as in
    /// [`PgStore::drop_member_roles`]; how many there were.
    pub fn drop_member_role(&self, team: &Name, member: &Name) -> Result<usize> {
        let installed = self.request("look for member roles", |conn| {
            block_on(async { Ok(mode(&conn.client).await? != Mode::Plain) })
        })?;
        if !installed {
            return Ok(0);
        }
        self.revoke_and_drop(
            team,
            Some(member),
            &format!("drop the role of member {member} of team {team}"),
        )
    }

    /// Drops `role`, the role one start of `member` of `team` was given, only while
    /// `roo_member_role` still maps it to that member: a later start's role (which
    /// replaced it, revoking it then) is never touched. Two steps like the others: the
    /// login goes first (when it is still the member's only role), then the role.
    /// Whether there was such a role.
    pub fn drop_member_role_named(&self, team: &Name, member: &Name, role: &str) -> Result<bool> {
        let action = format!("drop role {role} of member {member} of team {team}");
        let installed = self.request("look for member roles", |conn| {
            block_on(async { Ok(mode(&conn.client).await? != Mode::Plain) })
        })?;
        if !installed {
            return Ok(false);
        }
        // One statement: revoked only while it is the member's one role (a newer start's
        // role, once made, had this one revoked already and must keep its own login).
        let (mapped, _revoked): (bool, bool) = self
            .request(&action, |conn| {
                block_on(conn.client.query_one(
                    "WITH mine AS (SELECT 1 FROM roo_member_role \
                                    WHERE role = $3 AND team = $1 AND member = $2), \
                          others AS (SELECT 1 FROM roo_member_role \
                                    WHERE team = $1 AND member = $2 AND role <> $3) \
                     SELECT EXISTS (SELECT 1 FROM mine), \
                            CASE WHEN EXISTS (SELECT 1 FROM mine) \
                                      AND NOT EXISTS (SELECT 1 FROM others) \
                                 THEN roo_admin_revoke_member_roles($1, $2) IS NOT NULL \
                                 ELSE false END",
                    &[&team.as_str(), &member.as_str(), &role],
                ))
            })
            .map(|row| (row.get(0), row.get(1)))?;
        if !mapped {
            return Ok(false);
        }
        let why: Option<String> = self
            .request(&action, |conn| {
                block_on(
                    conn.client
                        .query_one("SELECT roo_admin_drop_member_role($1)", &[&role]),
                )
            })?
            .get(0);
        match why {
            None => Ok(true),
            Some(why) => Err(self.error(
                &action,
                format!("it lost its login but could not be dropped: {why}"),
            )),
        }
    }

    /// A new login role for `member` of `team`, replacing one it had (whose sessions are
    /// ended): it reads only
    /// `team`'s rows and writes only through the checks of docs/DISTRIBUTED.md. Installs
    /// member roles in this store the first time. Refused when this login may not create
    /// roles ([`PgStore::can_create_member_roles`]).
    pub fn create_member_role(&self, team: &Name, member: &Name) -> Result<MemberLogin> {
        let action = format!("create a role for member {member} of team {team}");
        if !self.can_create_member_roles()? {
            return Err(Error::NotPermitted {
                action,
                reason: "the store's login may not create roles (it needs CREATEROLE and to \
                         own the tables)"
                    .into(),
            });
        }
        self.install_member_roles()?;
        let draw = || random_u64().map_err(|e| self.error(&action, e));
        let role = role_name(team.as_str(), member.as_str(), draw()?);
        let password = format!("{:016x}{:016x}{:016x}", draw()?, draw()?, draw()?);
        let verifier = postgres_protocol::password::scram_sha_256(password.as_bytes());
        self.revoke_and_drop(team, Some(member), &action)?;
        self.request(&action, |conn| {
            block_on(conn.client.execute(
                "SELECT roo_admin_create_member_role($1, $2, $3, $4)",
                &[&team.as_str(), &member.as_str(), &role, &verifier],
            ))
        })?;
        Ok(MemberLogin { role, password })
    }

    /// Drops the member roles of `team` (TeamDelete), ending their sessions; how many
    /// there were. Every role loses its login first, for good; a role that cannot then
    /// be dropped (its member made objects or privileges elsewhere) is named in the
    /// error, and a later call tries again.
    pub fn drop_member_roles(&self, team: &Name) -> Result<usize> {
        let installed = self.request("look for member roles", |conn| {
            block_on(async { Ok(mode(&conn.client).await? != Mode::Plain) })
        })?;
        if !installed {
            return Ok(0);
        }
        self.revoke_and_drop(team, None, &format!("drop the member roles of team {team}"))
    }

    /// [`PgStore::drop_member_roles`] for `team`, or only its `member`'s role.
    fn revoke_and_drop(&self, team: &Name, member: Option<&Name>, action: &str) -> Result<usize> {
        let member = member.map(Name::as_str);
        // Its own transaction: committed whatever the drops do.
        let roles: Vec<String> = self
            .request(action, |conn| {
                block_on(conn.client.query_one(
                    "SELECT roo_admin_revoke_member_roles($1, $2)",
                    &[&team.as_str(), &member],
                ))
            })?
            .get(0);
        let mut left = Vec::new();
        for role in &roles {
            let why: Option<String> = self
                .request(action, |conn| {
                    block_on(
                        conn.client
                            .query_one("SELECT roo_admin_drop_member_role($1)", &[role]),
                    )
                })?
                .get(0);
            if let Some(why) = why {
                left.push(format!("{role} ({why})"));
            }
        }
        if !left.is_empty() {
            return Err(self.error(
                action,
                format!(
                    "these roles lost their login but could not be dropped: {}",
                    left.join("; ")
                ),
            ));
        }
        Ok(roles.len())
    }

    /// Installs member roles ([`INSTALL`]) unless they are; this store's connection is
    /// then opened again, to prepare the statements of an installed store.
    fn install_member_roles(&self) -> Result<()> {
        let action = "install member roles";
        if let Some(reason) = self.member_roles_refused()? {
            return Err(Error::NotPermitted {
                action: action.into(),
                reason,
            });
        }
        self.request(action, |conn| {
            block_on(async {
                let installed: bool = conn
                    .client
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM roo_meta WHERE key = 'member_roles' \
                         AND value = $1)",
                        &[&INSTALL_VERSION],
                    )
                    .await?
                    .get(0);
                if installed && mode(&conn.client).await? != Mode::Plain {
                    return Ok(());
                }
                let install = async {
                    conn.client.batch_execute("BEGIN").await?;
                    conn.client
                        .execute(
                            "SELECT pg_advisory_xact_lock($1)",
                            &[&super::connection::SCHEMA_LOCK],
                        )
                        .await?;
                    conn.client.batch_execute(&install_sql()).await?;
                    conn.client.batch_execute("COMMIT").await
                };
                let done = install.await;
                if done.is_err() {
                    let _ = conn.client.batch_execute("ROLLBACK").await;
                }
                done?;
                // Prepared for a store without member roles: opened again at the next use.
                conn.lost.store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            })
        })
    }
}

/// `text` percent-encoded as in a URL's user info: every byte but the unreserved ones
/// (`A-Z a-z 0-9 - . _ ~`) as `%XX`, in `lower`-case hex or upper.
fn percent_encoded(text: &str, lower: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else if lower {
            out.push_str(&format!("%{b:02x}"));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The password of `url` (`scheme://user:pw@host…`) exactly as written, undecoded.
fn written_password(url: &str) -> Option<String> {
    let rest = &url[url.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    let userinfo = &authority[..authority.rfind('@')?];
    let (_, password) = userinfo.split_once(':')?;
    Some(password.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn replaced_statements_are_where_expected() {
        assert!(install_sql().contains(&format!("make_interval(secs => {STUCK_AFTER_SECONDS})")));
        assert_eq!(STUCK_AFTER_SECONDS, 2 * super::super::LOCK_WAIT.as_secs());
        let plain = super::super::connection::STATEMENT_SQL;
        assert!(plain[PLACEHOLDER].starts_with("INSERT INTO roo_doc"));
        assert!(plain[LOCK].ends_with("FOR UPDATE"));
        assert!(plain[WRITE].starts_with("UPDATE roo_doc"));
        assert!(plain[QUARANTINE].starts_with("INSERT INTO roo_quarantine"));
        assert!(plain[ARCHIVE].starts_with("INSERT INTO roo_archive"));
        assert!(plain[DELETE].starts_with("DELETE FROM roo_doc WHERE key = $1"));
        assert!(plain[SHARE_CONFIG].ends_with("FOR SHARE"));
        assert!(plain[HELD_KEYS].contains("unnest($1::int8[])"));
        assert!(plain[HELD_ALL].starts_with("SELECT ARRAY(SELECT (l.classid"));
        assert!(plain[EVENT].starts_with("WITH next AS"));
    }

    /// Hostile review H2: a prepared transaction outlives its session with its locks.
    #[test]
    fn prepared_transactions_refuse_member_roles() {
        assert_eq!(refusal_of(0, "s", &[]), None);
        let why = refusal_of(5, "s", &[]).expect("refused with prepared transactions");
        assert!(why.contains("max_prepared_transactions = 5"), "{why}");
    }

    #[test]
    fn a_members_url_is_the_leads_with_its_role_and_no_password() {
        let login = MemberLogin {
            role: "roo_m_crew_alice_00ff".into(),
            password: "member-pw".into(),
        };
        for (lead, member) in [
            (
                "postgresql://roo:s3cr%40t@db.example:5433/roo?sslmode=verify-full&sslrootcert=%2Fca.pem&options=-c%20search_path%3Dx",
                "postgresql://roo_m_crew_alice_00ff@db.example:5433/roo?sslmode=verify-full&sslrootcert=%2Fca.pem&options=-c%20search_path%3Dx",
            ),
            (
                "postgres://postgres@localhost/postgres?host=/tmp/pg&password=leadpw&p%61ssfile=/p&user=roo&connect_timeout=3",
                "postgres://roo_m_crew_alice_00ff@localhost/postgres?host=/tmp/pg&connect_timeout=3",
            ),
            (
                "postgresql://[fd00::2]:5432/roo",
                "postgresql://roo_m_crew_alice_00ff@[fd00::2]:5432/roo",
            ),
            (
                "postgresql:///roo?host=/run/pg",
                "postgresql://roo_m_crew_alice_00ff@/roo?host=/run/pg",
            ),
        ] {
            let url = login.url_for(lead).unwrap();
            assert_eq!(url, member, "{lead}");
            assert!(!url.contains("s3cr") && !url.contains("leadpw"), "{url}");
        }
        assert!(login.url_for("mysql://x@y/z").is_err());
    }

    #[test]
    fn role_names_are_plain_and_short() {
        let name = role_name(&"A.b-C_d".repeat(9), &"x".repeat(64), u64::MAX);
        assert!(name.len() <= 63, "{name}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        );
        assert!(name.starts_with("roo_m_abcdabcd"));
    }
}
