//! End-to-end tests driving the real binaries. One test binary; modules in `suite/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
