//! The `MAJOR.MINOR` format version every protocol document carries, and the version this
//! build writes. A leaf of its own: the documents (`doc`) and the PostgreSQL store's
//! schema check (`pg`) both read it, and neither owns the other.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Major format version this build reads and writes.
pub const FORMAT_MAJOR: u32 = 1;
/// Minor format version this build writes.
pub const FORMAT_MINOR: u32 = 0;

/// A `MAJOR.MINOR` format version, serialized as a string such as `"1.0"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FormatVersion {
    /// Incompatible changes bump this; readers refuse a newer major.
    pub major: u32,
    /// Compatible additions bump this; readers accept any minor.
    pub minor: u32,
}

impl FormatVersion {
    /// The version this build writes.
    pub const CURRENT: FormatVersion = FormatVersion {
        major: FORMAT_MAJOR,
        minor: FORMAT_MINOR,
    };

    pub(crate) fn parse(s: &str) -> Option<FormatVersion> {
        let (major, minor) = s.split_once('.').unwrap_or((s, "0"));
        Some(FormatVersion {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }
}

impl Default for FormatVersion {
    fn default() -> Self {
        FormatVersion::CURRENT
    }
}

impl fmt::Display for FormatVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Serialize for FormatVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FormatVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        FormatVersion::parse(&raw)
            .ok_or_else(|| serde::de::Error::custom(format!("invalid format version {raw:?}")))
    }
}
