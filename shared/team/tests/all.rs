//! Integration tests of roo-team's public API: real temp `ROO_HOME`s, real store writes
//! from other threads and processes, the scripted provider. One test binary; modules in
//! `suite/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
