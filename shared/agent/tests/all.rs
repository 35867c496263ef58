//! Integration tests of roo-agent's public API: real files, real processes, real
//! git repositories in temp directories. One test binary; modules in `suite/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
