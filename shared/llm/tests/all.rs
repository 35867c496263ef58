//! Integration tests of roo-llm against the local mock server. One test binary;
//! modules in `suite/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
