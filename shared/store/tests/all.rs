//! Integration tests of roo-store's public API against real files in temp homes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
