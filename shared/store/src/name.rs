//! Validated names: of teams and members, and the keys of keyed sends.
//!
//! Every path under `ROO_HOME` is built from a [`Name`], and a `Name` can only be made by
//! [`Name::parse`], which enforces `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`. That makes path
//! traversal (`..`, `/`, NUL, empty names) impossible by construction rather than by
//! checks sprinkled over the code that builds paths.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// Longest accepted name, in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// A validated team or member name, safe to use as a path component.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(String);

impl Name {
    /// Validates `value` as a name: 1–64 bytes of `[A-Za-z0-9._-]`, starting with a letter
    /// or digit. `what` names the kind of name in the error ("team name", "member name").
    pub fn parse_as(what: &'static str, value: &str) -> Result<Name> {
        let invalid = |reason: &'static str| Error::InvalidName {
            what,
            value: value.to_owned(),
            reason,
        };
        let first = value.bytes().next().ok_or_else(|| invalid("it is empty"))?;
        if value.len() > MAX_NAME_LEN {
            return Err(invalid("it is longer than 64 bytes"));
        }
        if !first.is_ascii_alphanumeric() {
            return Err(invalid("it must start with a letter or a digit"));
        }
        if !value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(invalid(
                "it may only contain letters, digits, '.', '_' and '-'",
            ));
        }
        Ok(Name(value.to_owned()))
    }

    /// Validates `value` as a name (see [`Name::parse_as`]).
    pub fn parse(value: &str) -> Result<Name> {
        Name::parse_as("name", value)
    }

    /// Why git cannot use this name as a component of a branch name
    /// (`roo/<team>/<member>`), if it cannot: it contains `..`, or ends in `.lock`
    /// or `.`. The rest of git's rules are already excluded by the name syntax.
    pub fn ref_component_problem(&self) -> Option<&'static str> {
        let value = self.as_str();
        if value.contains("..") {
            Some("it contains `..`")
        } else if value.ends_with(".lock") {
            Some("it ends in `.lock`")
        } else if value.ends_with('.') {
            Some("it ends in `.`")
        } else {
            None
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Name::parse(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        for ok in ["alice", "a", "Team-1", "x.y_z", "0abc", &"a".repeat(64)] {
            assert_eq!(Name::parse(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn refuses_traversal_and_odd_names() {
        for bad in [
            "",
            ".",
            "..",
            "../etc",
            "a/b",
            "/abs",
            "a\0b",
            "-flag",
            ".hidden",
            "_x",
            "white space",
            "ünï",
            &"a".repeat(65),
        ] {
            let err = Name::parse_as("member name", bad).unwrap_err();
            let text = err.to_string();
            assert!(text.starts_with("accept member name"), "{text}");
        }
    }

    #[test]
    fn deserialize_validates() {
        let err = serde_json::from_str::<Name>("\"a/../x\"").unwrap_err();
        assert!(err.to_string().contains("may only contain"), "{err}");
    }
}
