//! TLS to the store, with libpq's `sslmode` and `sslrootcert` — and `verify-full` when a
//! TCP URL says nothing: clusters of the test's own listening on 127.0.0.1
//! (`scripts/pg-cluster start --listen … --ssl …`), with a test CA and a server
//! certificate for `localhost` and `127.0.0.1` made by the `openssl` CLI, and a man in
//! the middle between the store and such a cluster.
use std::path::{Path, PathBuf};
use std::process::Command;

use std::sync::Arc;

use roo_store::{Error, Outgoing, PgStore, ReadFilter, Team};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::common::{dsn, fresh_schema_url, home_at, name, psql, team_named};

const PASSWORD: &str = "tls-test-password";

/// A throwaway cluster on 127.0.0.1 with role `roo` (password [`PASSWORD`]), TLS on when
/// given a certificate directory; stopped and removed when dropped.
struct TcpCluster {
    dir: PathBuf,
    /// The owner's unix-socket DSN, to look at the server's sessions.
    owner: String,
    port: u16,
}

fn pg_cluster() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-cluster")
}

impl TcpCluster {
    fn start(certs: Option<&Path>) -> TcpCluster {
        // A port free a moment ago; the server fails loudly if another took it since.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cmd = Command::new(pg_cluster());
        cmd.args(["start", "--listen", "127.0.0.1", "--role", "roo"])
            .args(["--port", &port.to_string(), "--allow", "127.0.0.1/32"])
            .env("PG_CLUSTER_PASSWORD", PASSWORD);
        if let Some(certs) = certs {
            cmd.arg("--ssl").arg(certs);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "scripts/pg-cluster start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
        TcpCluster {
            dir: PathBuf::from(lines[0]),
            owner: lines[1].to_owned(),
            port,
        }
    }

    /// The role's URL at `host` with `query` (TLS parameters).
    fn url(&self, host: &str, query: &str) -> String {
        format!(
            "postgresql://roo:{PASSWORD}@{host}:{}/roo?{query}",
            self.port
        )
    }

    /// Whether each session of application `app` is encrypted, and whether it holds an
    /// advisory lock (the presence connection does): `ssl|holds` lines, the holders last.
    fn sessions(&self, app: &str) -> String {
        psql(
            &self.owner,
            &format!(
                "SELECT s.ssl, EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid \
                 AND l.locktype = 'advisory' AND l.granted) AS holds \
                 FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
                 WHERE a.application_name = '{app}' ORDER BY holds"
            ),
        )
    }
}

impl Drop for TcpCluster {
    fn drop(&mut self) {
        let _ = Command::new(pg_cluster())
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

/// A test CA (`ca.crt`), a server certificate it signed for `localhost` and `127.0.0.1`
/// (`server.crt`, `server.key`), and an unrelated CA (`other.crt`).
fn certificates() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let key = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    for ca in ["ca", "other"] {
        let (keyout, out, subject) = (
            format!("{ca}.key"),
            format!("{ca}.crt"),
            format!("/CN=roo test {ca} CA"),
        );
        let mut args = vec!["req", "-x509", "-days", "2", "-subj", &subject];
        args.extend(key);
        args.extend(["-keyout", &keyout, "-out", &out]);
        args.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
        args.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
        openssl(&args);
    }
    let mut args = vec!["req", "-new", "-subj", "/CN=localhost"];
    args.extend(key);
    args.extend(["-keyout", "server.key", "-out", "server.csr"]);
    openssl(&args);
    std::fs::write(
        dir.path().join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n\
         basicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-days",
        "2",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-extfile",
        "server.ext",
    ]);
    dir
}

/// The error of connecting to `url`; the test fails if it connects.
fn refusal(url: &str) -> Error {
    match PgStore::connect(url) {
        Ok(_) => panic!("connected to {url}"),
        Err(e) => e,
    }
}

/// A send to `alice` of `team` and its read.
fn send_and_read(team: &Team) {
    team.mailbox()
        .send(&name("lead"), "alice", Outgoing::text("over TLS?", "hi"))
        .unwrap();
    let inbox = team
        .mailbox()
        .read(&name("alice"), &ReadFilter::default())
        .unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].text, "over TLS?");
}

#[test]
fn verify_full_with_the_right_root_encrypts_both_connections() {
    if dsn().is_none() {
        return;
    }
    let certs = certificates();
    let cluster = TcpCluster::start(Some(certs.path()));
    let ca = certs.path().join("ca.crt");
    let url = fresh_schema_url(&cluster.url(
        "localhost",
        &format!(
            "sslmode=verify-full&sslrootcert={}&application_name=full",
            ca.display()
        ),
    ));
    let (_dir, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice"]);
    send_and_read(&team);
    // The presence connection opens with the presence.
    let _presence = team.hold_presence(&name("lead")).unwrap();
    assert_eq!(
        cluster.sessions("full"),
        "t|f\nt|t",
        "the request connection (first) and the presence connection (second) are not \
         both encrypted"
    );
}

#[test]
fn each_mode_checks_what_libpq_checks() {
    if dsn().is_none() {
        return;
    }
    let certs = certificates();
    let cluster = TcpCluster::start(Some(certs.path()));
    let ca = certs.path().join("ca.crt").display().to_string();
    let other = certs.path().join("other.crt").display().to_string();
    // Reached at 127.0.0.1 under a name the certificate does not carry.
    let wrong_name =
        |query: &str| cluster.url("db.invalid", &format!("hostaddr=127.0.0.1&{query}"));

    let refused = refusal(&wrong_name(&format!(
        "sslmode=verify-full&sslrootcert={ca}"
    )));
    let text = refused.to_string();
    assert!(matches!(refused, Error::Engine { .. }), "{text}");
    assert!(
        text.contains("db.invalid"),
        "the server is not named: {text}"
    );
    assert!(text.contains("not valid for name"), "{text}");

    // verify-ca checks the chain only: the same server is accepted.
    let (_dir, home) = home_at(&fresh_schema_url(&wrong_name(&format!(
        "sslmode=verify-ca&sslrootcert={ca}"
    ))));
    send_and_read(&team_named(&home, "t", &["alice"]));

    // A chain from another CA is refused by verify-ca, and by require given a root file
    // (libpq's rule).
    for mode in ["verify-ca", "require"] {
        let refused =
            refusal(&cluster.url("127.0.0.1", &format!("sslmode={mode}&sslrootcert={other}")));
        let text = refused.to_string();
        assert!(matches!(refused, Error::Engine { .. }), "{mode}: {text}");
        assert!(text.contains("127.0.0.1"), "{mode}: {text}");
        assert!(
            text.contains("not signed by a CA of sslrootcert"),
            "{mode}: {text}"
        );
    }

    // No sslmode over TCP: verify-full. With the right root, encrypted and checked.
    let url = fresh_schema_url(&cluster.url(
        "127.0.0.1",
        &format!("sslrootcert={ca}&application_name=default"),
    ));
    let (_dir2, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice"]);
    let _presence = team.hold_presence(&name("lead")).unwrap();
    assert_eq!(cluster.sessions("default"), "t|f\nt|t");
    // Without a root: the system's, which never signed the test CA — refused, saying
    // what to set.
    let text = refusal(&cluster.url("127.0.0.1", "application_name=x")).to_string();
    assert!(
        text.contains("not signed by a CA of this system's trusted roots")
            && text.contains("sslmode=verify-full is the default for a TCP host")
            && text.contains("sslrootcert=<PEM file>")
            // Never a hint to take any certificate (require accepts any interceptor).
            && !text.contains("sslmode=require"),
        "{text}"
    );
}

#[test]
fn without_tls_on_the_server_require_is_refused_and_prefer_is_plain() {
    if dsn().is_none() {
        return;
    }
    let certs = certificates();
    let cluster = TcpCluster::start(None);
    let ca = certs.path().join("ca.crt").display().to_string();
    for query in [
        "sslmode=require".to_owned(),
        format!("sslmode=verify-full&sslrootcert={ca}"),
        // No sslmode: verify-full, the default over TCP.
        format!("sslrootcert={ca}"),
        "connect_timeout=10".to_owned(),
    ] {
        let refused = refusal(&cluster.url("127.0.0.1", &query));
        let text = refused.to_string();
        assert!(matches!(refused, Error::Engine { .. }), "{query}: {text}");
        assert!(
            text.contains(&format!("127.0.0.1:{}", cluster.port)),
            "{query}: the server is not named: {text}"
        );
        assert!(
            text.contains("the server answered that it does not support TLS")
                && text.contains("write sslmode=disable"),
            "{query}: {text}"
        );
    }

    let url = fresh_schema_url(&cluster.url("127.0.0.1", "sslmode=prefer&application_name=prefer"));
    let (_dir, home) = home_at(&url);
    let team = team_named(&home, "t", &["alice"]);
    send_and_read(&team);
    let _presence = team.hold_presence(&name("lead")).unwrap();
    assert_eq!(
        cluster.sessions("prefer"),
        "f|f\nf|t",
        "prefer without TLS on the server is plain"
    );
}

#[test]
fn a_unix_socket_never_uses_tls_whatever_the_mode() {
    let Some(dsn) = dsn() else {
        return;
    };
    // The test server's URL is a unix socket's (scripts/pg-cluster).
    let sep = if dsn.contains('?') { '&' } else { '?' };
    let (_dir, home) = home_at(&fresh_schema_url(&format!("{dsn}{sep}sslmode=require")));
    send_and_read(&team_named(&home, "t", &["alice"]));
}

#[test]
fn tls_settings_that_cannot_hold_are_setting_errors() {
    let certs = certificates();
    let missing = certs.path().join("missing.crt").display().to_string();
    for (query, says) in [
        ("sslmode=bogus", "sslmode=\"bogus\" is not one of"),
        ("sslmode=allow", "sslmode=allow is not supported"),
        ("sslmode=verify-ca", "needs the root certificates"),
        (
            &format!("sslmode=verify-ca&sslrootcert={missing}") as &str,
            "cannot read it",
        ),
        (
            "sslmode=require&sslrootcert=system",
            "needs sslmode=verify-full",
        ),
        (
            "sslcert=client.crt&sslkey=client.key",
            "client certificates are not supported",
        ),
    ] {
        // No server is asked: a host that does not resolve would be an engine error.
        let refused = refusal(&format!("postgresql://roo@db.invalid:5432/roo?{query}"));
        let text = refused.to_string();
        assert!(
            matches!(refused, Error::InvalidSetting { .. }),
            "{query}: {text}"
        );
        assert!(text.contains(says), "{query}: {text}");
        assert!(
            text.contains("db.invalid:5432/roo"),
            "{query}: the server is not named: {text}"
        );
    }
}

#[test]
fn a_socket_host_with_a_hostaddr_is_tcp_and_never_plain_under_require() {
    if dsn().is_none() {
        return;
    }
    let certs = certificates();
    // No TLS on the server: a plain session is what a wrong reading would give.
    let cluster = TcpCluster::start(None);
    let ca = certs.path().join("ca.crt").display().to_string();
    // `host=` a socket directory but `hostaddr=` an address: tokio-postgres connects over
    // TCP to the address, so this is not the unix socket that never uses TLS.
    for query in [
        "sslmode=require".to_owned(),
        format!("sslmode=verify-full&sslrootcert={ca}"),
    ] {
        let url = cluster.url(
            "127.0.0.1",
            &format!("host=/nonexistent&hostaddr=127.0.0.1&{query}"),
        );
        let refused = refusal(&url);
        let text = refused.to_string();
        assert!(
            matches!(refused, Error::InvalidSetting { .. }),
            "{query}: {text}"
        );
        assert!(text.contains("TLS needs the name"), "{query}: {text}");
        assert!(!text.contains(PASSWORD), "{query}: {text}");
    }
}

#[test]
fn a_root_file_that_is_no_regular_file_is_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ca.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let link = dir.path().join("ca-link.pem");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    for root in [
        fifo.display().to_string(),
        link.display().to_string(),
        "/dev/zero".to_owned(),
        dir.path().display().to_string(),
    ] {
        let url =
            format!("postgresql://roo@db.invalid:5432/roo?sslmode=verify-ca&sslrootcert={root}");
        // On a thread: a connect that blocks on the root file fails the test instead of
        // hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(PgStore::connect(&url).err().map(|e| e.to_string()));
        });
        let text = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("sslrootcert={root}: the connect hung"))
            .unwrap_or_else(|| panic!("sslrootcert={root}: accepted"));
        assert!(text.contains("not a regular file"), "{root}: {text}");
    }
}

/// What the man in the middle does with a client's `SSLRequest`.
#[derive(Clone)]
enum Attack {
    /// Answers `N` ("no TLS") and relays the plaintext session: a downgrade.
    Downgrade,
    /// Answers `S` and ends TLS itself, with its own self-signed certificate for
    /// 127.0.0.1 and localhost, relaying the decrypted session.
    SelfSigned(Arc<rustls::ServerConfig>),
}

/// The 8 bytes of PostgreSQL's `SSLRequest`.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// A man in the middle on 127.0.0.1 (its port returned) relaying every connection to the
/// real server at 127.0.0.1:`upstream` in plain text (which the server accepts from
/// 127.0.0.1 with the role's password, TLS or not), doing `attack` to the client's
/// `SSLRequest`; a client that sends none is relayed as it is. Runs until the test ends.
fn man_in_the_middle(upstream: u16, attack: Attack) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, upstream, attack.clone()));
            }
        });
    });
    port
}

/// One connection through the man in the middle (see [`man_in_the_middle`]).
async fn relay(mut client: tokio::net::TcpStream, upstream: u16, attack: Attack) {
    let mut first = [0u8; 8];
    if client.read_exact(&mut first).await.is_err() {
        return;
    }
    let Ok(mut server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else {
        return;
    };
    if first != SSL_REQUEST {
        if server.write_all(&first).await.is_ok() {
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        }
        return;
    }
    match attack {
        Attack::Downgrade => {
            if client.write_all(b"N").await.is_ok() {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            }
        }
        Attack::SelfSigned(config) => {
            if client.write_all(b"S").await.is_err() {
                return;
            }
            let Ok(mut client) = tokio_rustls::TlsAcceptor::from(config).accept(client).await
            else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        }
    }
}

/// The attacker's TLS server: a self-signed certificate for 127.0.0.1 and localhost,
/// made by the `openssl` CLI in `dir`.
fn self_signed_server(dir: &Path) -> Arc<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-nodes",
        ])
        .args(["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
        .args(["-keyout", "mitm.key", "-out", "mitm.crt"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        // An end-entity certificate, as a careful attacker's would be.
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cert = CertificateDer::from_pem_file(dir.join("mitm.crt")).unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("mitm.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    Arc::new(config)
}

/// The man in the middle: between the store and a real server with TLS, one
/// that answers "no TLS" (a downgrade) and one that ends TLS with its own self-signed
/// certificate. The URL that says nothing of TLS (`verify-full` over TCP) refuses both,
/// with a sentence naming the host and what to set — with or without the real server's
/// root — while the same URL reaches the real server; `sslmode=disable`, `prefer` and
/// `require` written do what they say (the attacker gets the session).
#[test]
fn the_default_url_refuses_a_man_in_the_middle_and_weaker_modes_do_as_written() {
    if dsn().is_none() {
        return;
    }
    let certs = certificates();
    let cluster = TcpCluster::start(Some(certs.path()));
    let ca = certs.path().join("ca.crt").display().to_string();
    let at = |port: u16, query: &str| {
        format!("postgresql://roo:{PASSWORD}@127.0.0.1:{port}/roo?{query}")
    };
    // The real server: the default URL with its root connects.
    PgStore::connect(&at(cluster.port, &format!("sslrootcert={ca}"))).unwrap();

    let downgrade = man_in_the_middle(cluster.port, Attack::Downgrade);
    let self_signed = man_in_the_middle(
        cluster.port,
        Attack::SelfSigned(self_signed_server(certs.path())),
    );
    for (port, says) in [
        (
            downgrade,
            "the server answered that it does not support TLS",
        ),
        // webpki's reason varies with the roots it tried (an unknown issuer, a
        // signature no root's key makes); the sentence is the same.
        (self_signed, "so it may not be the server at all"),
    ] {
        for query in [String::new(), format!("sslrootcert={ca}")] {
            let refused = refusal(&at(port, &query));
            let text = refused.to_string();
            assert!(matches!(refused, Error::Engine { .. }), "{query}: {text}");
            assert!(text.contains(says), "{port} {query}: {text}");
            assert!(
                text.contains("write sslmode=disable") || text.contains("sslrootcert=<PEM file>"),
                "{query}: the sentence does not say what to set: {text}"
            );
            assert!(
                text.contains(&format!("127.0.0.1:{port}")),
                "{query}: the server is not named: {text}"
            );
            assert!(!text.contains(PASSWORD), "{query}: {text}");
        }
    }
    // Written weaker modes do as written: the attacker relays the session.
    PgStore::connect(&at(downgrade, "sslmode=disable")).unwrap();
    PgStore::connect(&at(downgrade, "sslmode=prefer")).unwrap();
    PgStore::connect(&at(self_signed, "sslmode=require")).unwrap();
    // require is refused by the downgrade (TLS or nothing).
    let text = refusal(&at(downgrade, "sslmode=require")).to_string();
    assert!(text.contains("does not support TLS"), "{text}");
}

/// A relay on 127.0.0.1 (its port returned) to the cluster's `port` for the first
/// `forwarded` connections; every later one is accepted and never answered (a hung
/// server, or another program on the port, as a reconnect or a second connection meets
/// it).
fn relay_then_silence(port: u16, forwarded: usize) -> u16 {
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        for (i, client) in listener.incoming().enumerate() {
            let Ok(client) = client else { continue };
            if i >= forwarded {
                kept.push(client);
                continue;
            }
            let server = TcpStream::connect(("127.0.0.1", port)).unwrap();
            for (mut from, mut to) in [
                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                (server, client),
            ] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Both);
                });
            }
        }
    });
    relay
}

/// The presence connection gives up a server that accepts and never answers its
/// start-up (as the requests' connection does), with a sentence, instead of holding the
/// member's join for ever. The 60 s only keeps a regression from hanging the suite.
#[test]
fn a_presence_connection_to_a_server_that_never_answers_gives_up_with_a_sentence() {
    if dsn().is_none() {
        return;
    }
    let cluster = TcpCluster::start(None);
    let url = fresh_schema_url(&cluster.url("127.0.0.1", "sslmode=disable"));
    let relay = relay_then_silence(cluster.port, 1);
    let relayed = url.replacen(&format!(":{}/", cluster.port), &format!(":{relay}/"), 1);
    let (_dir, home) = home_at(&relayed);
    let team = team_named(&home, "t", &["alice"]);
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(team.hold_presence(&name("lead")).map(|_| ()));
    });
    let outcome = outcome
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the presence connection still waits after 60 s");
    let text = outcome
        .expect_err("a silent server gave a presence")
        .to_string();
    assert!(
        text.contains("did not answer the connection's start-up (TCP, TLS, login) in 10 s"),
        "{text}"
    );
}
