//! [`Source`]: which config file a value comes from. A leaf: the permission rules
//! carry it too, so it must not pull in the rest of the config.

use std::fmt;

/// Where a config value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// `~/.roocode/config.yaml` (under `ROO_HOME`): personal, every project.
    User,
    /// `<project>/.roocode/config.yaml`: shared with the team through git.
    Project,
    /// `<project>/.roocode/config.local.yaml`: personal, this project; highest
    /// priority; where "always allow" writes.
    Local,
}

impl Source {
    /// All sources in increasing priority (the order files are loaded and merged).
    pub const ALL: [Source; 3] = [Source::User, Source::Project, Source::Local];
    /// All sources in decreasing priority (the order rules are consulted).
    pub const BY_PRIORITY: [Source; 3] = [Source::Local, Source::Project, Source::User];

    /// `user`, `project` or `local`.
    pub fn label(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Project => "project",
            Self::Local => "local",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}
