//! A TCP proxy between PostgreSQL clients and a server on a unix socket, for tests and
//! benchmarks: it counts the clients' round trips and cuts connections at exact points.
//!
//! The proxy listens on `127.0.0.1:<free port>` and forwards each connection to the
//! server's socket (`<dir>/.s.PGSQL.<port>` of a DSN with `?host=<dir>`, as
//! `scripts/pg-cluster` prints), so a store connects with [`PgProxy::url_for`]'s
//! `postgresql://…@127.0.0.1:<port>/…` URL.
//!
//! - **Round trips**: a client's *turn* is counted each time it sends after the proxy has
//!   handed it server bytes since its previous send — it waited for an answer. Requests
//!   pipelined without waiting are one turn. A client may write one pipeline in pieces
//!   (its I/O thread woke before all requests were queued); with
//!   [`PgProxy::hold_answers`] the server's bytes are handed over only once the client
//!   has been quiet that long, so the later pieces arrive first and are not counted.
//! - **Cut after a `COMMIT`** ([`PgProxy::cut_after_commit`]): the chosen `COMMIT` query
//!   reaches the server, then the client's side is closed at once, so the client never
//!   sees the answer; the server's side gets end-of-file after the `COMMIT` and its
//!   answers are read and dropped, so the server commits before it notices. The outcome
//!   is unknown to the client and known to have committed.
//! - **Cut before a `COMMIT`** ([`PgProxy::cut_before_commit`]): what the client sent
//!   before the chosen `COMMIT` reaches the server, the `COMMIT` does not, both sides
//!   close: the server rolls the transaction back.
//! - **Partition before a `COMMIT`** ([`PgProxy::partition_before_commit`]): like a cut
//!   before it, but the server's side stays open, as when a link is cut and the server
//!   has not noticed: its session stays idle in the transaction, holding its locks.
//! - **Cut everything** ([`PgProxy::cut_all`]): every open connection closes now.
//!
//! Only std: the store's own tests and the store benchmark include this file by path
//! (`#[path]`), `roo_tests` exports it; one implementation.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The proxy; dropping it closes every connection and stops listening.
pub struct PgProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

/// Something to do while a cut client is kept from connecting again.
type Meanwhile = Box<dyn FnOnce() + Send>;

/// Which `COMMIT` to cut at, and how.
struct Cut {
    /// The number (counted from 1 over every connection) of the `COMMIT` query.
    at: u64,
    /// Whether that `COMMIT` reaches the server.
    after: bool,
    /// Whether the server's side stays open (a partition the server has not noticed).
    partition: bool,
    /// Run right after the cut; no new connection is let through until it returns.
    meanwhile: Option<Meanwhile>,
}

struct Shared {
    upstream: PathBuf,
    stopping: AtomicBool,
    round_trips: AtomicU64,
    connections: AtomicU64,
    commits: AtomicU64,
    cuts: AtomicU64,
    cut: Mutex<Option<Cut>>,
    links: Mutex<Vec<Arc<Link>>>,
    /// Held while a cut's `meanwhile` runs; taken before each new connection is linked.
    gate: Mutex<()>,
    /// How long a client must have been quiet before the server's bytes reach it.
    hold: Mutex<Duration>,
}

/// One proxied connection.
struct Link {
    client: TcpStream,
    server: UnixStream,
    /// Whether the client's side is cut: the server's bytes are dropped from then on.
    /// Held while bytes are handed to the client, so none cross after the cut.
    cut: Mutex<bool>,
    /// Whether server bytes reached the client since it last sent.
    answered: AtomicBool,
    /// When the client last sent.
    sent_at: Mutex<Instant>,
}

impl Link {
    /// Closes the client's side now (it never sees another byte) and ends the server's
    /// input after what it has received.
    fn cut(&self) {
        self.cut_client();
        let _ = self.server.shutdown(Shutdown::Write);
    }

    /// Closes the client's side only: the server's session stays as it is.
    fn cut_client(&self) {
        *self.cut.lock().unwrap_or_else(PoisonError::into_inner) = true;
        let _ = self.client.shutdown(Shutdown::Both);
    }
}

impl PgProxy {
    /// A proxy to the server whose unix socket is `socket` (`<dir>/.s.PGSQL.5432`).
    pub fn start(socket: &Path) -> PgProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy's port");
        let addr = listener.local_addr().expect("the proxy's address");
        let shared = Arc::new(Shared {
            upstream: socket.to_owned(),
            stopping: AtomicBool::new(false),
            round_trips: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            cuts: AtomicU64::new(0),
            cut: Mutex::new(None),
            links: Mutex::new(Vec::new()),
            gate: Mutex::new(()),
            hold: Mutex::new(Duration::ZERO),
        });
        let accepting = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("pg-proxy-accept".into())
            .spawn(move || {
                for client in listener.incoming() {
                    if accepting.stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let _ = client.set_nodelay(true);
                    let _gate = accepting
                        .gate
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    match UnixStream::connect(&accepting.upstream) {
                        Ok(server) => link(&accepting, client, server),
                        Err(_) => drop(client),
                    }
                }
            })
            .expect("start the proxy's thread");
        PgProxy {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// A proxy to the server of `dsn` (`postgresql://…?host=<socket dir>[&port=N]`).
    pub fn for_dsn(dsn: &str) -> PgProxy {
        let param = |name: &str| {
            dsn.split_once('?')
                .map(|(_, query)| query)
                .unwrap_or("")
                .split('&')
                .find_map(|pair| pair.strip_prefix(&format!("{name}=")[..]))
                .map(str::to_owned)
        };
        let dir = param("host").expect("the DSN names its socket directory with ?host=");
        let port = param("port").unwrap_or_else(|| "5432".into());
        PgProxy::start(&Path::new(&dir).join(format!(".s.PGSQL.{port}")))
    }

    /// The port the proxy listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `url` (`postgresql://user@host/db?host=…&…`) made to connect through the proxy:
    /// the authority's host becomes `127.0.0.1:<port>`, `host=` and `port=` are dropped,
    /// the other parameters (e.g. `options=`) kept, and `sslmode=disable` written (the
    /// proxy relays to a unix socket, which has no TLS; a TCP host without `sslmode`
    /// means `verify-full`).
    pub fn url_for(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("a postgresql:// URL");
        let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = before_query.split_once('/').unwrap_or((before_query, ""));
        let user = authority
            .rsplit_once('@')
            .map(|(user, _)| format!("{user}@"))
            .unwrap_or_default();
        let mut kept: Vec<&str> = query
            .split('&')
            .filter(|pair| {
                !pair.is_empty()
                    && !pair.starts_with("host=")
                    && !pair.starts_with("port=")
                    && !pair.starts_with("sslmode=")
            })
            .collect();
        kept.push("sslmode=disable");
        format!(
            "{scheme}://{user}127.0.0.1:{}/{path}?{}",
            self.port(),
            kept.join("&")
        )
    }

    /// Hands the server's bytes to a client only once it has been quiet for `hold` (for
    /// counting round trips; every answer is late by up to `hold`).
    pub fn hold_answers(&self, hold: Duration) {
        *self
            .shared
            .hold
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = hold;
    }

    /// The clients' turns so far, over every connection (see the module documentation).
    pub fn round_trips(&self) -> u64 {
        self.shared.round_trips.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// `COMMIT` queries seen so far, over every connection.
    pub fn commits(&self) -> u64 {
        self.shared.commits.load(Ordering::SeqCst)
    }

    /// Cuts made at a `COMMIT` so far.
    pub fn cuts(&self) -> u64 {
        self.shared.cuts.load(Ordering::SeqCst)
    }

    /// Arms a cut right after the `nth` `COMMIT` from now (1: the next) has reached the
    /// server, before its answer reaches the client.
    pub fn cut_after_commit(&self, nth: u64) {
        self.arm(nth, true, false, None);
    }

    /// Arms a cut right before the `nth` `COMMIT` from now: it never reaches the server.
    pub fn cut_before_commit(&self, nth: u64) {
        self.arm(nth, false, false, None);
    }

    /// Arms a partition right before the `nth` `COMMIT` from now: the client's side is
    /// closed, the server's left open (until the proxy is dropped), so its session stays
    /// in the transaction.
    pub fn partition_before_commit(&self, nth: u64) {
        self.arm(nth, false, true, None);
    }

    /// [`PgProxy::cut_after_commit`] (`after`) or [`PgProxy::cut_before_commit`], then
    /// runs `meanwhile` (on the proxy's thread) before any client may connect again:
    /// what another participant does while the cut one is away.
    pub fn cut_at_commit_then(
        &self,
        nth: u64,
        after: bool,
        meanwhile: impl FnOnce() + Send + 'static,
    ) {
        self.arm(nth, after, false, Some(Box::new(meanwhile)));
    }

    fn arm(&self, nth: u64, after: bool, partition: bool, meanwhile: Option<Meanwhile>) {
        assert!(nth >= 1, "the first COMMIT from now is number 1");
        let mut cut = self
            .shared
            .cut
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *cut = Some(Cut {
            at: self.commits() + nth,
            after,
            partition,
            meanwhile,
        });
    }

    /// Closes every open connection now.
    pub fn cut_all(&self) {
        for link in self.shared.take_links() {
            link.cut();
            let _ = link.server.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees `stopping`.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        self.cut_all();
    }
}

impl Shared {
    fn take_links(&self) -> Vec<Arc<Link>> {
        std::mem::take(&mut *self.links.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether the `COMMIT` numbered `n` is the one to cut at (and disarms it).
    fn cut_at(&self, n: u64) -> Option<Cut> {
        let mut cut = self.cut.lock().unwrap_or_else(PoisonError::into_inner);
        match &*cut {
            Some(armed) if armed.at == n => cut.take(),
            _ => None,
        }
    }
}

/// Starts pumping one connection both ways.
fn link(shared: &Arc<Shared>, client: TcpStream, server: UnixStream) {
    let (Ok(client_in), Ok(server_in)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    shared.connections.fetch_add(1, Ordering::SeqCst);
    let link = Arc::new(Link {
        client,
        server,
        cut: Mutex::new(false),
        answered: AtomicBool::new(false),
        sent_at: Mutex::new(Instant::now()),
    });
    shared
        .links
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(link.clone());
    let (up, up_shared) = (link.clone(), shared.clone());
    let _ = std::thread::Builder::new()
        .name("pg-proxy-up".into())
        .spawn(move || client_to_server(&up_shared, &up, client_in));
    let down_shared = shared.clone();
    let _ = std::thread::Builder::new()
        .name("pg-proxy-down".into())
        .spawn(move || server_to_client(&down_shared, &link, server_in));
}

/// The client's bytes to the server: counts turns and `COMMIT`s, and cuts where armed.
fn client_to_server(shared: &Shared, link: &Link, mut from: TcpStream) {
    let mut to = &link.server;
    let mut frontend = Frontend::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        *link.sent_at.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
        if link.answered.swap(false, Ordering::SeqCst) {
            shared.round_trips.fetch_add(1, Ordering::SeqCst);
        }
        let mut sent = 0;
        for (start, end) in frontend.feed(chunk) {
            let number = shared.commits.fetch_add(1, Ordering::SeqCst) + 1;
            if let Some(cut) = shared.cut_at(number) {
                // No client connects again before `meanwhile` is done.
                let gate = shared.gate.lock().unwrap_or_else(PoisonError::into_inner);
                // Nothing of the server's crosses to the client from here on.
                *link.cut.lock().unwrap_or_else(PoisonError::into_inner) = true;
                let upto = if cut.after { end } else { start };
                let _ = to.write_all(&chunk[sent..upto]);
                shared.cuts.fetch_add(1, Ordering::SeqCst);
                if cut.partition {
                    link.cut_client();
                } else {
                    link.cut();
                }
                if let Some(meanwhile) = cut.meanwhile {
                    meanwhile();
                }
                drop(gate);
                return;
            }
            let _ = to.write_all(&chunk[sent..end]);
            sent = end;
        }
        if to.write_all(&chunk[sent..]).is_err() {
            break;
        }
    }
    let _ = link.server.shutdown(Shutdown::Write);
}

/// The server's bytes to the client, unless the client's side was cut: then they are
/// read and dropped until the server closes.
fn server_to_client(shared: &Shared, link: &Link, mut from: UnixStream) {
    let mut to = &link.client;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let hold = *shared.hold.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let quiet = link
                .sent_at
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .elapsed();
            if quiet >= hold {
                break;
            }
            std::thread::sleep(hold - quiet);
        }
        let cut = link.cut.lock().unwrap_or_else(PoisonError::into_inner);
        if *cut {
            continue;
        }
        // Set before the bytes can reach the client: its next send, however quick,
        // finds it.
        link.answered.store(true, Ordering::SeqCst);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        drop(cut);
    }
    let _ = link.client.shutdown(Shutdown::Both);
}

/// The frontend side of the PostgreSQL wire protocol, as far as the proxy needs it: the
/// message boundaries, to find `COMMIT` queries.
struct Frontend {
    pending: Vec<u8>,
    /// Before the startup message: untyped messages (`SSLRequest`, `StartupMessage`).
    startup: bool,
}

impl Default for Frontend {
    fn default() -> Self {
        Frontend {
            pending: Vec::new(),
            startup: true,
        }
    }
}

impl Frontend {
    /// Feeds `chunk`; returns where, in `chunk`, each simple-query `COMMIT` it completes
    /// starts and ends.
    fn feed(&mut self, chunk: &[u8]) -> Vec<(usize, usize)> {
        const SSL_REQUEST: u32 = 80_877_103;
        const GSSENC_REQUEST: u32 = 80_877_104;
        let carried = self.pending.len();
        self.pending.extend_from_slice(chunk);
        let mut at = 0;
        let mut commits = Vec::new();
        loop {
            let rest = &self.pending[at..];
            let header = if self.startup { 4 } else { 5 };
            if rest.len() < header {
                break;
            }
            let len = u32::from_be_bytes([
                rest[header - 4],
                rest[header - 3],
                rest[header - 2],
                rest[header - 1],
            ]) as usize;
            let total = if self.startup { len } else { 1 + len };
            if total < header || rest.len() < total {
                break;
            }
            if self.startup {
                let code = rest
                    .get(4..8)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                if code != Some(SSL_REQUEST) && code != Some(GSSENC_REQUEST) {
                    self.startup = false;
                }
            } else if rest[0] == b'Q' {
                let query = rest[5..total].strip_suffix(&[0]).unwrap_or(&rest[5..total]);
                let query = String::from_utf8_lossy(query);
                if query
                    .trim()
                    .trim_end_matches(';')
                    .eq_ignore_ascii_case("COMMIT")
                {
                    // A start in an earlier chunk was forwarded already: it counts as 0.
                    commits.push((at.saturating_sub(carried), at + total - carried));
                }
            }
            at += total;
        }
        self.pending.drain(..at);
        commits
    }
}

#[cfg(test)]
mod tests {
    use super::Frontend;

    fn query(text: &str) -> Vec<u8> {
        let mut m = vec![b'Q'];
        m.extend_from_slice(&((text.len() + 5) as u32).to_be_bytes());
        m.extend_from_slice(text.as_bytes());
        m.push(0);
        m
    }

    #[test]
    fn finds_commit_queries_across_chunks() {
        let mut startup = 9u32.to_be_bytes().to_vec();
        startup.extend_from_slice(&196_608u32.to_be_bytes());
        startup.push(0);
        let mut stream = startup.clone();
        stream.extend(query("BEGIN"));
        let commit_at = stream.len();
        stream.extend(query("COMMIT"));
        stream.extend(query("SELECT 'COMMIT'"));
        let mut frontend = Frontend::default();
        let (a, b) = stream.split_at(commit_at + 3);
        assert!(frontend.feed(a).is_empty());
        assert_eq!(frontend.feed(b), vec![(0, 12 - 3)]);
    }
}
