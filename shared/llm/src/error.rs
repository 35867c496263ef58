//! Errors of the LLM client layer.

/// What went wrong talking to a model. Messages read well after "failed to …".
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// Bad or missing configuration (no key, unknown provider, unreadable script).
    #[error("{0}")]
    Config(String),
    /// The provider answered with an HTTP error that retrying will not fix.
    #[error("{provider} returned HTTP {status}: {message}")]
    Http {
        provider: String,
        status: u16,
        message: String,
    },
    /// Connection-level failure after all retries.
    #[error("could not reach {provider} at {url}: {message}")]
    Connect {
        provider: String,
        url: String,
        message: String,
    },
    /// The stream broke or ended before the message was complete.
    #[error("the {provider} stream ended before the message was complete: {message}")]
    Truncated { provider: String, message: String },
    /// The provider sent an `error` event or an unparsable payload.
    #[error("{provider} reported an error: {message}")]
    Provider { provider: String, message: String },
    /// No data arrived within the idle timeout.
    #[error("no data from {provider} for {secs} s")]
    Timeout { provider: String, secs: u64 },
}

/// Result alias of this crate.
pub type Result<T, E = LlmError> = std::result::Result<T, E>;
