//! Errors of the LLM client layer.
//!
//! One enum for the whole crate: every provider, the configuration loader, the scripted
//! provider and the mock server report through it, so the agent loop has one thing to
//! match on. Messages are lowercase fragments that read well after "failed to …" and
//! say what failed, where, and what to do about it.

use std::path::PathBuf;

/// What went wrong talking to a model.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// Bad or missing configuration (no key, unknown provider, bad value).
    #[error("{0}")]
    Config(String),
    /// A config file exists but cannot be read or parsed.
    #[error("read config file {path}: {message}")]
    ConfigFile { path: PathBuf, message: String },
    /// The provider answered with an HTTP error that retrying will not fix, or that
    /// kept failing after every retry.
    #[error("get a response from {provider}: HTTP {status}: {message}")]
    Http {
        provider: String,
        status: u16,
        message: String,
    },
    /// Connection-level failure after all retries.
    #[error("reach {provider} at {url}: {message}")]
    Connect {
        provider: String,
        url: String,
        message: String,
    },
    /// The stream broke or ended before the message was complete.
    #[error(
        "read the whole {provider} response: the stream ended before the message was complete ({message})"
    )]
    Truncated { provider: String, message: String },
    /// The provider sent an `error` event or a payload that does not fit its protocol.
    #[error("get a response from {provider}: {message}")]
    Provider { provider: String, message: String },
    /// No data arrived within the idle timeout.
    #[error(
        "get a response from {provider}: no data for {secs} s (raise `timeouts.idle` in config.yaml if the model is just slow)"
    )]
    Timeout { provider: String, secs: u64 },
    /// The whole request took longer than the request timeout.
    #[error(
        "finish the {provider} request within {secs} s (raise `timeouts.request` in config.yaml for long answers)"
    )]
    Deadline { provider: String, secs: u64 },
    /// The scripted provider cannot answer (bad script file, no turn left, scripted error).
    #[error("{0}")]
    Script(String),
    /// A file operation of this crate (script state, lock) failed.
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl LlmError {
    /// Whether trying the same request again later may succeed: connection problems,
    /// timeouts, broken streams, rate limits, overload and server errors. Configuration
    /// mistakes and rejected requests (401, 400, 404, …) are not transient.
    pub fn is_transient(&self) -> bool {
        match self {
            LlmError::Connect { .. }
            | LlmError::Truncated { .. }
            | LlmError::Timeout { .. }
            | LlmError::Deadline { .. } => true,
            LlmError::Http { status, .. } => is_retryable_status(*status),
            LlmError::Provider { message, .. } => {
                message.contains("overloaded") || message.contains("api_error")
            }
            LlmError::Config(_)
            | LlmError::ConfigFile { .. }
            | LlmError::Script(_)
            | LlmError::Io { .. } => false,
        }
    }

    /// Whether the provider refused this request for what it carries (HTTP 400, 413 or
    /// 422): the same request will fail again, a different one may not.
    pub fn is_rejection(&self) -> bool {
        matches!(
            self,
            LlmError::Http {
                status: 400 | 413 | 422,
                ..
            }
        )
    }
}

/// HTTP statuses worth retrying: timeouts, conflicts, rate limits and server errors
/// (including Anthropic's 529 "overloaded").
pub(crate) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// Result alias of this crate.
pub type Result<T, E = LlmError> = std::result::Result<T, E>;
