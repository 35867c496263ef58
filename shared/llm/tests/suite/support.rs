//! Shared helpers: settings pointed at a mock server, event draining, temp dirs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use roo_llm::mock_server::{MockServer, Protocol};
use roo_llm::{
    EventStream, LlmError, LlmSettings, Message, ProviderKind, Request, RetryPolicy, StreamEvent,
    Timeouts,
};

/// Settings for `kind` talking to `server`, with short retries and timeouts.
pub fn settings(kind: ProviderKind, server: &MockServer) -> LlmSettings {
    let protocol = match kind {
        ProviderKind::Anthropic => Protocol::Anthropic,
        _ => Protocol::OpenAi,
    };
    let mut s = LlmSettings::defaults(kind);
    s.base_url = server.base_url(protocol);
    s.api_key = Some("test-key".to_owned());
    s.model = "mock-model".to_owned();
    s.retry = RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        max_retry_after: Duration::from_secs(5),
    };
    s.timeouts = Timeouts {
        connect: Duration::from_secs(5),
        request: Duration::from_secs(30),
        idle: Duration::from_secs(10),
    };
    s
}

/// A one-message request.
pub fn ask(text: &str) -> Request {
    Request {
        system: vec!["You are a test.".to_owned()],
        messages: vec![Message::user_text(text)],
        ..Request::default()
    }
}

/// Drains a stream: the events, and the error that ended it, if any.
pub async fn drain(mut stream: EventStream) -> (Vec<StreamEvent>, Option<LlmError>) {
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => return (events, Some(error)),
        }
    }
    (events, None)
}

/// Splits `bytes` into pieces of `size` bytes (the last may be shorter).
pub fn pieces(bytes: &[u8], size: usize) -> Vec<Vec<u8>> {
    bytes.chunks(size).map(<[u8]>::to_vec).collect()
}

/// A temp directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "roo-llm-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
