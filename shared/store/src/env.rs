//! The names of the environment variables that choose the store: where the home is, where
//! the shared documents live, and the lock mode. A leaf of its own, so the home that reads
//! them and the PostgreSQL store that names `ROO_STORE` in its errors share no other import.

/// Environment variable naming the home directory.
pub const ROO_HOME_ENV: &str = "ROO_HOME";
/// Environment variable that selects where the shared documents live: `file` (or unset:
/// files under `ROO_HOME`) or a `postgresql://…` URL (see [`crate::StoreChoice`]).
pub const ROO_STORE_ENV: &str = "ROO_STORE";

/// Environment variable that selects the lock mode: `protocol` disables the queue layer
/// (see [`crate::LockPolicy::protocol`]); anything else, or unset, uses [`crate::LockPolicy::default`].
pub const ROO_LOCK_MODE_ENV: &str = "ROO_LOCK_MODE";
