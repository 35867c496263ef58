//! TLS to the PostgreSQL store, chosen in its URL as libpq chooses it (`sslmode` and
//! `sslrootcert`, on rustls with the `ring` provider, like the LLM transport) — except
//! the default, which is safe: **a TCP host without `sslmode` means `verify-full`**.
//! libpq's default, `prefer`, lets anyone on the path answer "no TLS" and read the
//! session, and `require` takes any certificate; a lead hands its URL to teammates on
//! other hosts, so the URL that says nothing must resist a man in the middle.
//!
//! - `disable`: never TLS (only when written).
//! - `prefer`: TLS if the server offers it, else plain; the certificate is not checked —
//!   unless `sslrootcert` is given, then the chain is (as libpq does). Only when written.
//! - `require`: TLS or no connection; certificates as for `prefer`. Only when written.
//! - `verify-ca`: TLS, the chain checked against the root certificates.
//! - `verify-full` (the default over TCP): as `verify-ca`, and the server's name (the
//!   URL's host) against the certificate's subjectAltName.
//! - `allow` is refused (plain first, TLS only if the server insists: not supported).
//!
//! `sslrootcert` is the absolute path of a PEM file of one or more CA certificates (a
//! relative one is refused: it would be read from the current directory, perhaps a
//! hostile repository), or `system` (the
//! platform's roots; only with `verify-full`, as libpq demands). `verify-full` without
//! `sslrootcert` checks against the platform's roots (a server with a certificate from a
//! public CA needs nothing more). A unix socket never uses TLS, whatever the mode (as
//! libpq): it does not cross a network. Client certificates (`sslcert`, `sslkey`) are
//! refused. Every refusal is a setting error at connect, never a silent plain connection;
//! a failed handshake or a server without TLS is an error that says, in a sentence, what
//! failed, with which host, and what to set.
//!
//! One [`PgTls`] is built per store and connects both its connections and their
//! reconnects.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::{Host, SslMode as ClientSslMode};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use tokio_postgres::{Config, Socket};

/// libpq's `sslmode` values this store supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// Where the root certificates come from.
enum Roots {
    File(String),
    System,
}

/// How a store connects: plain only, or TLS with this client configuration (see the
/// module). Cheap to clone.
#[derive(Clone)]
pub(crate) struct PgTls {
    config: Option<Arc<ClientConfig>>,
    /// Where the roots come from, and the mode, for the error sentences.
    roots: Arc<str>,
    mode: SslMode,
    /// Whether `sslmode` was written (else the default over TCP, `verify-full`).
    written: bool,
    /// Over TCP, whether the server's identity goes unchecked (see [`PgTls::unverified`]).
    unverified: bool,
}

/// The URL's `sslmode` and `sslrootcert`, read: the mode, whether `sslmode` was written,
/// the roots.
fn read_params(url: &str) -> Result<(SslMode, bool, Option<Roots>), String> {
    let params = super::url::tls_params(url);
    let param = |key: &str| {
        params
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    };
    for key in ["sslcert", "sslkey"] {
        if param(key).is_some() {
            return Err(format!(
                "{key}: client certificates are not supported; log in with a password"
            ));
        }
    }
    let roots = match param("sslrootcert") {
        None | Some("") => None,
        Some("system") => Some(Roots::System),
        // A relative path would be read from the current directory — a repository the
        // process was started in, which may be anyone's.
        Some(path) if !std::path::Path::new(path).is_absolute() => {
            return Err(format!(
                "sslrootcert {path}: not an absolute path; a relative one would be read from \
                 whatever directory a command starts in (a repository may plant a CA there); \
                 give the CA file's full path"
            ));
        }
        Some(path) => Some(Roots::File(path.to_owned())),
    };
    let mode = match param("sslmode") {
        // Safe by default (see the module): TLS, the certificate and the name checked.
        None => SslMode::VerifyFull,
        Some("prefer") => SslMode::Prefer,
        Some("disable") => SslMode::Disable,
        Some("require") => SslMode::Require,
        Some("verify-ca") => SslMode::VerifyCa,
        Some("verify-full") => SslMode::VerifyFull,
        Some("allow") => {
            return Err("sslmode=allow is not supported; use prefer or require".into());
        }
        Some(other) => {
            return Err(format!(
                "sslmode={other:?} is not one of disable, prefer, require, verify-ca, \
                 verify-full"
            ));
        }
    };
    if matches!(roots, Some(Roots::System)) && mode != SslMode::VerifyFull {
        return Err(format!(
            "sslrootcert=system needs sslmode=verify-full (a public CA signs certificates \
             for anyone's server, so only the host name check makes it safe), not {}",
            mode.name()
        ));
    }
    if mode == SslMode::VerifyCa && roots.is_none() {
        return Err("sslmode=verify-ca needs the root certificates: sslrootcert=<PEM file>".into());
    }
    Ok((mode, param("sslmode").is_some(), roots))
}

impl PgTls {
    /// The TLS of the store at `url` (its `sslmode` and `sslrootcert`), with `config`'s
    /// own TLS mode set to match. `Err` says what is wrong, for a setting error.
    pub(crate) fn from_url(url: &str, config: &mut Config) -> Result<PgTls, String> {
        let (mode, written, roots) = read_params(url)?;
        // verify-full without a root file: the platform's roots.
        let roots = match (mode, roots) {
            (SslMode::VerifyFull, None) => Some(Roots::System),
            (_, roots) => roots,
        };
        let plain = |config: &mut Config, unverified| {
            config.ssl_mode(ClientSslMode::Disable);
            PgTls {
                config: None,
                roots: Arc::from(""),
                mode,
                written,
                unverified,
            }
        };
        // tokio-postgres connects each entry to its `hostaddr` over TCP when one is given
        // (whatever its `host`), else to its host; the TLS name is the host when it is a
        // TCP name, and without one it makes no TLS session at all.
        let (hosts, addrs) = (config.get_hosts(), config.get_hostaddrs());
        let entries = hosts.len().max(addrs.len());
        let is_tcp_name = |i: usize| matches!(hosts.get(i), Some(Host::Tcp(_)));
        // A unix socket never uses TLS (the server refuses it there). A list mixing
        // sockets and TCP hosts cannot require TLS of the TCP ones only.
        let sockets = (0..entries)
            .filter(|&i| addrs.get(i).is_none() && !is_tcp_name(i))
            .count();
        let nameless = (0..entries).any(|i| addrs.get(i).is_some() && !is_tcp_name(i));
        if sockets == entries && sockets > 0 {
            return Ok(plain(config, false));
        }
        if mode == SslMode::Disable {
            return Ok(plain(config, true));
        }
        let default = if written {
            String::new()
        } else {
            " (the default for a TCP host)".to_owned()
        };
        if nameless && mode != SslMode::Prefer {
            return Err(format!(
                "sslmode={}{default} with a hostaddr= whose host= is not a server name \
                 (missing, or a socket directory): TLS needs the name; give host=<the \
                 server's name> with each hostaddr=",
                mode.name()
            ));
        }
        if sockets > 0 && mode != SslMode::Prefer {
            return Err(format!(
                "sslmode={}{default} with both a unix socket and TCP hosts: list one kind",
                mode.name()
            ));
        }
        config.ssl_mode(match mode {
            SslMode::Prefer => ClientSslMode::Prefer,
            _ => ClientSslMode::Require,
        });
        let roots_shown: Arc<str> = match &roots {
            Some(Roots::File(path)) => Arc::from(format!("sslrootcert {path}")),
            Some(Roots::System) => Arc::from("this system's trusted roots"),
            None => Arc::from(""),
        };
        let unverified = !matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull);
        let client = client_config(mode, roots.as_ref())?;
        Ok(PgTls {
            config: Some(Arc::new(client)),
            roots: roots_shown,
            mode,
            written,
            unverified,
        })
    }

    /// Over TCP, why the server's identity goes unchecked (`sslmode` disable, prefer or
    /// require): whoever holds this URL may be talking to a man in the middle. `None`
    /// when it is checked, or for a unix socket.
    pub(crate) fn unverified(&self) -> Option<String> {
        self.unverified.then(|| {
            format!(
                "sslmode={} does not check the server's certificate{}",
                self.mode.name(),
                match self.mode {
                    SslMode::Disable => " (no TLS at all)",
                    SslMode::Prefer => " and falls back to plain text",
                    _ => "",
                }
            )
        })
    }

    /// The failure of a connect `e` as a sentence, when it is TLS's: a server (or someone
    /// on the path) that answered "no TLS" to a mode that needs it. `None` for anything
    /// else (a handshake's failure is worded by the handshake: see [`explained`]).
    pub(crate) fn explain(&self, e: &tokio_postgres::Error) -> Option<String> {
        let mut source: Option<&dyn std::error::Error> = Some(e);
        let mut refused_tls = false;
        while let Some(cause) = source {
            refused_tls |= cause.to_string() == "server does not support TLS";
            source = cause.source();
        }
        refused_tls.then(|| {
            let default = if self.written {
                ""
            } else {
                ", the default for a TCP host,"
            };
            format!(
                "the server answered that it does not support TLS, and sslmode={}{default} \
                 never sends the login or the team's messages in plain text (whoever answered \
                 may be someone on the path between here and the server); turn TLS on at the \
                 server (ssl=on), or write sslmode=disable in the URL if the network between \
                 here and the server is trusted",
                self.mode.name()
            )
        })
    }
}

/// The rustls client of `mode` checking certificates against `roots` (none: any
/// certificate, the signatures still checked).
fn client_config(mode: SslMode, roots: Option<&Roots>) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match roots {
        None => Arc::new(Unchecked(provider.clone())),
        Some(roots) => {
            let store = root_store(roots)?;
            if store.is_empty() {
                // No root on this system: every certificate is refused at the handshake,
                // with the sentence that says what to set.
                Arc::new(NoRoots(provider.clone()))
            } else {
                let webpki =
                    WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider.clone())
                        .build()
                        .map_err(|e| format!("sslrootcert: {e}"))?;
                if mode == SslMode::VerifyFull {
                    webpki
                } else {
                    // libpq: a root file makes prefer and require check the chain too.
                    Arc::new(ChainOnly(webpki))
                }
            }
        }
    };
    let mut client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    // What libpq 17 sends; servers before 17 ignore it.
    client.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(client)
}

impl SslMode {
    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// The root certificates of `roots`; `Err` names the file and what is wrong with it.
fn root_store(roots: &Roots) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::File(path) => {
            let pem = read_root_file(path)?;
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("sslrootcert {path}: cannot read it: {e}"))?;
            if certs.is_empty() {
                return Err(format!(
                    "sslrootcert {path}: no PEM certificate (BEGIN CERTIFICATE) in it"
                ));
            }
            for cert in certs {
                store
                    .add(cert)
                    .map_err(|e| format!("sslrootcert {path}: {e}"))?;
            }
        }
        Roots::System => {
            // None found is not refused here: the handshake then refuses every
            // certificate, saying to set sslrootcert (`NoRoots`).
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
        }
    }
    Ok(store)
}

/// The largest root file read: far above any CA bundle (the system's is well under 1 MiB).
const MAX_ROOT_FILE: u64 = 16 << 20;

/// The bytes of the root file at `path`, refused unless it is a regular file (after
/// symbolic links) of at most [`MAX_ROOT_FILE`] bytes: a FIFO would block the open or
/// the read for ever, `/dev/zero` would never end. Opened without blocking, then
/// checked, so the file looked at is the file read.
fn read_root_file(path: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;

    let cannot = |e: &dyn std::fmt::Display| format!("sslrootcert {path}: cannot read it: {e}");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| cannot(&e))?;
    let meta = file.metadata().map_err(|e| cannot(&e))?;
    if !meta.is_file() {
        return Err(format!(
            "sslrootcert {path}: not a regular file; give a PEM file of CA certificates"
        ));
    }
    let mut pem = Vec::new();
    file.take(MAX_ROOT_FILE + 1)
        .read_to_end(&mut pem)
        .map_err(|e| cannot(&e))?;
    if pem.len() as u64 > MAX_ROOT_FILE {
        return Err(format!(
            "sslrootcert {path}: larger than {} MiB, not a file of CA certificates",
            MAX_ROOT_FILE >> 20
        ));
    }
    Ok(pem)
}

/// `prefer` and `require` without root certificates: any certificate, as libpq (the
/// handshake's signatures are still checked, so the session is with the key's holder).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-full` with no root certificate on this system: every certificate is refused
/// as of an unknown issuer (the handshake's error then says to set `sslrootcert`).
#[derive(Debug)]
struct NoRoots(Arc<CryptoProvider>);

impl ServerCertVerifier for NoRoots {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Err(rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer,
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Unchecked(self.0.clone()).verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Unchecked(self.0.clone()).verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain checked, the host name not. webpki checks the chain before the
/// name, so a name mismatch means the chain was good.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

impl MakeTlsConnect<Socket> for PgTls {
    type Stream = PgTlsStream;
    type TlsConnect = PgTlsConnect;
    type Error = io::Error;

    /// `host` is the URL's host name (empty for a unix socket, which never gets here with
    /// TLS on: see [`PgTls::from_url`]).
    fn make_tls_connect(&mut self, host: &str) -> io::Result<PgTlsConnect> {
        let name = match (&self.config, host) {
            (Some(_), host) if !host.is_empty() => Some(
                ServerName::try_from(host.to_owned())
                    .map_err(|e| io::Error::other(format!("host {host:?}: {e}")))?,
            ),
            _ => None,
        };
        Ok(PgTlsConnect {
            config: self.config.clone(),
            name,
            host: host.to_owned(),
            roots: self.roots.clone(),
            written: self.written,
        })
    }
}

/// The TLS handshake with one server.
pub(crate) struct PgTlsConnect {
    config: Option<Arc<ClientConfig>>,
    name: Option<ServerName<'static>>,
    /// For the error sentences: the host, where the roots come from, whether `sslmode`
    /// was written.
    host: String,
    roots: Arc<str>,
    written: bool,
}

impl TlsConnect<Socket> for PgTlsConnect {
    type Stream = PgTlsStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<PgTlsStream>> + Send>>;

    fn connect(self, socket: Socket) -> Self::Future {
        Box::pin(async move {
            let (Some(config), Some(name)) = (self.config.clone(), self.name.clone()) else {
                return Err(io::Error::other("TLS is off for this server"));
            };
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, socket)
                .await
                .map_err(|e| self.explained(e))?;
            Ok(PgTlsStream(stream))
        })
    }
}

impl PgTlsConnect {
    /// The handshake's error as a sentence: what failed, with which host, what to set.
    fn explained(&self, e: io::Error) -> io::Error {
        let Some(certificate) = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .and_then(|inner| match inner {
                rustls::Error::InvalidCertificate(why) => Some(why.clone()),
                _ => None,
            })
        else {
            return e;
        };
        let host = &self.host;
        let default = if self.written {
            ""
        } else {
            " (sslmode=verify-full is the default for a TCP host)"
        };
        let sentence = match certificate {
            CertificateError::UnknownIssuer => {
                let roots = if self.roots.is_empty() {
                    "sslrootcert"
                } else {
                    &self.roots
                };
                format!(
                    "the certificate the server at {host} presented is not signed by a CA of \
                     {roots}, so it may not be the server at all{default}; give the CA that \
                     signed the server's certificate as sslrootcert=<PEM file> in the URL"
                )
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!(
                    "the certificate the server at {host} presented is not valid for the name \
                 {host}{default}; connect by a name the certificate carries, or write \
                 sslmode=verify-ca to check the CA only"
                )
            }
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => format!(
                "the certificate the server at {host} presented is expired or not yet valid; \
                 renew it on the server (or check this machine's clock)"
            ),
            other => format!(
                "the certificate the server at {host} presented was refused ({other:?}), so \
                 it may not be the server at all{default}; give the CA that signed the \
                 server's certificate as sslrootcert=<PEM file> in the URL"
            ),
        };
        io::Error::other(format!("{e}: {sentence}"))
    }
}

/// A TLS session with the server. No channel binding: SCRAM then authenticates without it
/// (`SCRAM-SHA-256`, not `-PLUS`), as libpq does with `channel_binding=prefer` against a
/// server that offers none.
pub(crate) struct PgTlsStream(tokio_rustls::client::TlsStream<Socket>);

impl TlsStream for PgTlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl AsyncRead for PgTlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for PgTlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn refusal(url: &str) -> String {
        let mut config = crate::pg::url::parse(url).unwrap();
        match PgTls::from_url(url, &mut config) {
            Ok(_) => panic!("{url} was accepted"),
            Err(reason) => reason,
        }
    }

    fn mode(url: &str) -> (bool, ClientSslMode) {
        let mut config = crate::pg::url::parse(url).unwrap();
        let tls = PgTls::from_url(url, &mut config).unwrap();
        (tls.config.is_some(), config.get_ssl_mode())
    }

    #[test]
    fn modes_read_as_libpq_reads_them_but_a_tcp_host_verifies_by_default() {
        // No sslmode over TCP: verify-full (TLS or nothing), whatever the host — a
        // loopback address too.
        for url in [
            "postgresql://r@db/r",
            "postgresql://r@localhost:5432/r",
            "postgresql://r@127.0.0.1/r?connect_timeout=3",
        ] {
            assert_eq!(mode(url), (true, ClientSslMode::Require), "{url}");
            let mut config = crate::pg::url::parse(url).unwrap();
            let tls = PgTls::from_url(url, &mut config).unwrap();
            assert_eq!(tls.mode, SslMode::VerifyFull, "{url}");
            assert_eq!(tls.unverified(), None, "{url}");
        }
        // The weaker modes only when written, and said to be unverified.
        for (query, tls_on) in [("disable", false), ("prefer", true), ("require", true)] {
            let url = format!("postgresql://r@db/r?sslmode={query}");
            let mut config = crate::pg::url::parse(&url).unwrap();
            let tls = PgTls::from_url(&url, &mut config).unwrap();
            assert_eq!(tls.config.is_some(), tls_on, "{url}");
            assert!(
                tls.unverified()
                    .unwrap()
                    .contains(&format!("sslmode={query}")),
                "{url}"
            );
        }
        // A unix socket: no TLS, and nothing unverified to warn of.
        let url = "postgresql://r@localhost/r?host=/run/pg";
        assert_eq!(mode(url), (false, ClientSslMode::Disable));
        let mut config = crate::pg::url::parse(url).unwrap();
        assert_eq!(
            PgTls::from_url(url, &mut config).unwrap().unverified(),
            None
        );
        assert_eq!(
            mode("postgresql://r@db/r?sslmode=require"),
            (true, ClientSslMode::Require)
        );
        assert_eq!(
            mode("postgresql://r@db/r?sslmode=disable"),
            (false, ClientSslMode::Disable)
        );
        // A unix socket: never TLS, even when the URL requires it (as libpq).
        assert_eq!(
            mode("postgresql://r@localhost/r?host=/run/pg&sslmode=require"),
            (false, ClientSslMode::Disable)
        );
    }

    #[test]
    fn what_cannot_hold_is_refused_with_its_reason() {
        assert!(refusal("postgresql://r@db/r?sslmode=bogus").contains("\"bogus\" is not one of"));
        assert!(refusal("postgresql://r@db/r?sslmode=allow").contains("allow is not supported"));
        assert!(refusal("postgresql://r@db/r?sslmode=verify-ca").contains("needs the root"));
        assert!(
            refusal("postgresql://r@db/r?sslmode=require&sslrootcert=system")
                .contains("needs sslmode=verify-full")
        );
        assert!(refusal("postgresql://r@db/r?sslcert=/c.pem").contains("client certificates"));
        // A relative root file would be read from the current directory (a repository).
        for root in ["ca.pem", "./ca.pem", "certs/ca.pem", "~/ca.pem"] {
            let url = format!("postgresql://r@db/r?sslmode=verify-full&sslrootcert={root}");
            let reason = refusal(&url);
            assert!(
                reason.contains(&format!("sslrootcert {root}: not an absolute path")),
                "{reason}"
            );
        }
        let missing =
            refusal("postgresql://r@db/r?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem");
        assert!(
            missing.contains("sslrootcert /nonexistent/ca.pem: cannot read it"),
            "{missing}"
        );
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let url = format!(
            "postgresql://r@db/r?sslmode=verify-full&sslrootcert={}",
            empty.display()
        );
        assert!(refusal(&url).contains("no PEM certificate"));
    }
}
