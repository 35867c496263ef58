//! LLM client layer of RooCode Teams.
//!
//! One [`Provider`] interface, implemented for the Anthropic Messages API, the
//! OpenAI-compatible Chat Completions API and a scripted provider for tests and demos.
//! All of them produce the same normalized [`StreamEvent`] sequence.

pub mod error;
pub mod provider;
pub mod types;

pub use error::{LlmError, Result};
pub use provider::{EventStream, Provider};
pub use types::*;
