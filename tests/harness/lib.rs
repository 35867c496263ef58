//! Test harness for end-to-end tests: locating the built binaries, temp homes and repos.
