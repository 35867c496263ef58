//! The provider interface every model backend implements.

use std::pin::Pin;

use futures_util::Stream;
use futures_util::future::BoxFuture;

use crate::error::LlmError;
use crate::server_context::ServerContext;
use crate::types::{Request, StreamEvent};

/// A stream of normalized events for one model response.
///
/// Dropping it cancels the underlying HTTP request promptly.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, LlmError>> + Send>>;

/// A model backend: Anthropic, OpenAI-compatible, or the scripted provider.
pub trait Provider: Send + Sync {
    /// Short provider name (`anthropic`, `openai`, `script`), for logs and cost lines.
    fn name(&self) -> &str;

    /// The model used when a request leaves `Request::model` empty.
    fn model(&self) -> &str;

    /// Context window of the configured model in tokens, for compaction decisions.
    fn context_window(&self) -> u64;

    /// Starts one streamed request. Transient failures before the first event are
    /// retried inside the stream; a stream that ends before `MessageStop` yields an error.
    fn stream(&self, request: Request) -> EventStream;

    /// The context window the model server reports, if it is a local server that
    /// reports one (llama-server, Ollama): asked once per call, within
    /// [`PROBE_TIMEOUT`](crate::server_context::PROBE_TIMEOUT); `None` for hosted APIs,
    /// the scripted provider and anything that fails. See [`crate::server_context`].
    fn server_context(&self) -> BoxFuture<'_, Option<ServerContext>> {
        Box::pin(async { None })
    }
}
