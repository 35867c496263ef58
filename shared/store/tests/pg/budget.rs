//! The connection budget (docs/DISTRIBUTED.md "A connection budget"): a connection being
//! opened while the server is full (`53300 too_many_connections`) is tried again until a
//! session is free — the presence connection's first open as the work connection's.
use std::sync::mpsc;
use std::time::Duration;

use roo_store::{PgStore, RooHome};

use super::common::{Raw, dsn, fresh_schema_url};
use super::restart::{Cluster, wait_for};

/// How many times the server refused a session because it was full.
fn refusals(cluster: &Cluster) -> usize {
    cluster.log().matches("too many clients already").count()
}

#[test]
fn the_presence_connection_opened_while_the_server_is_full_waits_for_a_free_session() {
    // The shared server's variable says PostgreSQL is there to start a cluster with.
    if dsn().is_none() {
        return;
    }
    let cluster = Cluster::start();
    cluster.set_max_connections(4);
    let url = fresh_schema_url(&cluster.dsn);
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path().join("home")).with_store(PgStore::connect(&url).unwrap());
    // The work connection holds one session; three more fill the server.
    let mut fillers: Vec<Raw> = (0..3).map(|_| Raw::connect(&cluster.dsn)).collect();
    let before = refusals(&cluster);

    let (done_tx, done) = mpsc::channel();
    let store = home.pg().unwrap().clone();
    let opener = std::thread::spawn(move || {
        let _ = done_tx.send(store.presence_settings().map(|_| ()));
    });
    wait_for("the server to refuse the presence connection", || {
        refusals(&cluster) > before
    });
    assert!(
        done.try_recv().is_err(),
        "the presence connection gave up at the first refusal"
    );
    fillers.pop();
    let opened = done.recv_timeout(Duration::from_secs(30)).unwrap();
    opener.join().unwrap();
    opened.unwrap();
    drop(fillers);
}
