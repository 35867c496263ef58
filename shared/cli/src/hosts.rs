//! Teammates' clones on other hosts, for `roo-mail team gc-hosts` and `team delete`.
//!
//! Removing a clone there needs the lead's repository, its `hosts:` config and ssh —
//! the team runtime's, which this crate does not link. The `roo-mail` binary installs
//! the runtime's implementation ([`install`]) before it runs (so does `roo-task`);
//! without one, `gc-hosts` says so and `team delete` leaves the clones as before.

use std::sync::OnceLock;

use roo_store::{Name, RooHome, TeamConfig};

/// Removes the clones of a team's teammates on their hosts (see
/// `roo_team::worktree::remote_gc`).
pub trait HostCleaner: Send + Sync {
    /// For every teammate of `config` on a configured host (with `host`, that one only):
    /// its recorded clone checked against the one the lead makes, its branch fetched into
    /// the repository around the current directory, its clone removed there when merged
    /// (or only reported, `dry_run`). One line per member, and whether any was refused
    /// or kept; an error when nothing could be tried (no repository, a bad config).
    fn gc(
        &self,
        home: &RooHome,
        config: &TeamConfig,
        host: Option<&Name>,
        dry_run: bool,
    ) -> Result<(Vec<String>, bool), String>;
}

static CLEANER: OnceLock<Box<dyn HostCleaner>> = OnceLock::new();

/// Installs the implementation (once; later calls are ignored).
pub fn install(cleaner: Box<dyn HostCleaner>) {
    let _ = CLEANER.set(cleaner);
}

/// The installed implementation.
pub(crate) fn cleaner() -> Option<&'static dyn HostCleaner> {
    CLEANER.get().map(|c| c.as_ref())
}

/// Whether any teammate of `config` ran on another host.
pub(crate) fn has_remote_members(config: &TeamConfig) -> bool {
    config
        .members
        .iter()
        .any(|m| m.agent_id != config.lead_agent_id && m.host.is_some())
}
