//! Test modules.
mod common;
mod permissions;
mod tools;
