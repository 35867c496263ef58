//! `member_roles:` in the user's config: whether a lead on the PostgreSQL store gives its
//! teammates member roles (docs/DISTRIBUTED.md "Authority in the database"). A setting,
//! not an engine's code: the roles themselves are `pg/roles.rs`.

use crate::error::{Error, Result};

/// `member_roles:` in the user's config (docs/DISTRIBUTED.md "Authority in the
/// database"): whether a lead on the PostgreSQL store gives each teammate that runs in
/// a process of its own (a pane, another host) a member role of its own. Ordered from
/// the weakest: a project's file may only make it stricter unless trusted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum MemberRoles {
    /// Teammates use the lead's login, as before member roles.
    Off,
    /// A member role where the server allows them, else the lead's login (said once).
    #[default]
    Auto,
    /// A member role, or no teammate at all: a spawn where member roles are not
    /// possible fails and leaves nothing.
    Required,
}

impl MemberRoles {
    /// The config key.
    pub const KEY: &'static str = "member_roles";

    /// The setting as written (`auto`, `required`, `off`); `Err` says what is allowed.
    pub fn parse(value: &str) -> std::result::Result<MemberRoles, String> {
        match value.trim() {
            "auto" => Ok(MemberRoles::Auto),
            "required" => Ok(MemberRoles::Required),
            "off" => Ok(MemberRoles::Off),
            other => Err(format!(
                "`{}: {}` is not a value it takes; use auto, required or off",
                MemberRoles::KEY,
                other.escape_debug()
            )),
        }
    }

    /// The setting of a config document (`None`: not set); `Err` says why it is not
    /// one ([`MemberRoles::parse`]; YAML's `off` read as `false` is `off`).
    pub fn of_yaml(
        document: &serde_yaml_ng::Value,
    ) -> std::result::Result<Option<MemberRoles>, String> {
        match document.get(MemberRoles::KEY) {
            None | Some(serde_yaml_ng::Value::Null) => Ok(None),
            Some(serde_yaml_ng::Value::String(value)) => MemberRoles::parse(value).map(Some),
            Some(serde_yaml_ng::Value::Bool(false)) => Ok(Some(MemberRoles::Off)),
            Some(_) => Err(format!(
                "`{}` must be auto, required or off",
                MemberRoles::KEY
            )),
        }
    }

    /// The setting of the user's own config file, `<root>/config.yaml` (the default
    /// without the file or the key): what `doctor` states.
    pub fn of_user_config(root: &std::path::Path) -> Result<MemberRoles> {
        let path = crate::home::user_config_file(root);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(MemberRoles::default());
            }
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        let invalid = |reason: String| Error::InvalidSetting {
            name: MemberRoles::KEY,
            reason: format!("{reason} (in {})", path.display()),
        };
        let document: serde_yaml_ng::Value = serde_yaml_ng::from_slice(&bytes)
            .map_err(|e| invalid(format!("the file does not parse as YAML: {e}")))?;
        Ok(MemberRoles::of_yaml(&document)
            .map_err(invalid)?
            .unwrap_or_default())
    }
}

impl std::fmt::Display for MemberRoles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MemberRoles::Off => "off",
            MemberRoles::Auto => "auto",
            MemberRoles::Required => "required",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_is_one_of_three_words() {
        let yaml = |text: &str| serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text).unwrap();
        assert_eq!(MemberRoles::of_yaml(&yaml("a: 1")), Ok(None));
        for (text, value) in [
            ("member_roles: auto", MemberRoles::Auto),
            ("member_roles: required", MemberRoles::Required),
            ("member_roles: off", MemberRoles::Off),
        ] {
            assert_eq!(MemberRoles::of_yaml(&yaml(text)), Ok(Some(value)));
        }
        let err = MemberRoles::of_yaml(&yaml("member_roles: maybe")).unwrap_err();
        assert!(
            err.contains("member_roles") && err.contains("auto, required or off"),
            "{err}"
        );
        assert!(MemberRoles::of_yaml(&yaml("member_roles: [x]")).is_err());
        assert!(MemberRoles::Off < MemberRoles::Auto && MemberRoles::Auto < MemberRoles::Required);
    }
}
