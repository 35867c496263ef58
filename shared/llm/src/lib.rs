//! LLM client layer of RooCode Teams.
//!
//! One [`Provider`] interface, implemented for the Anthropic Messages API
//! ([`anthropic`]), the OpenAI-compatible Chat Completions API ([`openai`]) and a
//! scripted provider for tests and demos ([`script`]). All of them produce the same
//! normalized [`StreamEvent`] sequence, which [`collect`] drains into a [`Response`].
//! [`LlmSettings::resolve`] decides which provider to use from flags, environment and
//! config files, and [`build_provider`] builds it. With the `mock-server` feature (tests,
//! benchmarks and the `roo-mockllm` binary; never the release build), `mock_server` is a
//! local HTTP server speaking both wire formats.

pub mod anthropic;
pub mod collect;
pub mod error;
#[cfg(feature = "mock-server")]
pub mod mock_server;
pub mod models;
pub mod openai;
pub mod provider;
mod provider_table;
pub mod retry;
pub mod script;
pub mod server_context;
pub mod settings;
pub mod sse;
pub mod tool_input;
mod transport;
pub mod types;

pub use collect::{MessageBuilder, collect};
pub use error::{LlmError, Result};
pub use models::{Price, PriceTable, cost};
pub use provider::{EventStream, Provider};
pub use provider_table::build_provider;
pub use retry::RetryPolicy;
pub use script::ScriptProvider;
pub use server_context::{LocalServer, OllamaWindow, ServerContext};
pub use settings::{FileSettings, LlmFlags, LlmSettings, ProviderKind, TextToolCalls, Timeouts};
pub use tool_input::parse_tool_input;
pub use types::*;
