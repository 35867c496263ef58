//! The store's conformance suite against the PostgreSQL store: the same tests as
//! `all.rs` where they do not look at files, each in a fresh schema of the server named by
//! `ROO_TEST_PG_DSN` (scripts/test starts a throwaway cluster and sets it). Without it
//! every test here passes at once and says so.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite {
    #[path = "../pg/common.rs"]
    pub mod common;
    #[path = "../suite/mailbox.rs"]
    mod mailbox;
    #[path = "../suite/membership.rs"]
    mod membership;
    #[path = "../suite/tasks.rs"]
    mod tasks;
    #[path = "../suite/usage.rs"]
    mod usage;
}

#[path = "pg/engine.rs"]
mod engine;

pub use suite::common;

#[path = "pg/presence.rs"]
mod presence;

/// The test proxy of `tests/harness` (one implementation, included by path: this crate's
/// tests cannot depend on the end-to-end harness).
#[path = "../../../tests/harness/pg_proxy.rs"]
mod pg_proxy;

#[path = "pg/round_trips.rs"]
mod round_trips;

#[path = "pg/outcome.rs"]
mod outcome;

#[path = "pg/restart.rs"]
mod restart;

#[path = "pg/budget.rs"]
mod budget;

#[path = "pg/tls.rs"]
mod tls;

#[path = "pg/credentials.rs"]
mod credentials;

#[path = "pg/quarantine.rs"]
mod quarantine;

#[path = "pg/row_locks.rs"]
mod row_locks;

#[path = "pg/team_delete.rs"]
mod team_delete;

#[path = "pg/roles.rs"]
mod roles;
