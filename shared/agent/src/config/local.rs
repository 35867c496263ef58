//! Writing to config files: "always allow" rules and the trust list.
//!
//! When the human answers "always" to a permission prompt, the rule goes to
//! `<project>/.roocode/config.local.yaml` under `permissions.allow` (the file of this
//! user in this project, the highest-priority rule source; docs/PERMISSIONS.md);
//! trusting a project adds it to `trusted_projects` of the user file. Both go
//! through [`update_yaml`]: the file is read, changed and written back atomically
//! (temp file + rename, mode 0600) under an advisory lock on its directory, so
//! agents writing at the same moment do not lose each other's changes; every
//! other key in the file is kept (comments are not: the file is rewritten from
//! its parsed form). When the local file is first created, a `.roocode/.gitignore`
//! naming it is created too if there is none, so personal rules stay out of git.

use std::fs;
use std::path::{Path, PathBuf};

use serde_yaml_ng::{Mapping, Value};

use super::{ConfigError, local_config_path, parse_yaml};

const HEADER: &str = "# Personal RooCode settings for this project; keep this file out of git.\n\
# \"Always allow\" answers to permission prompts are added to permissions.allow.\n";

/// Appends `rule` to `permissions.allow` of the project's local config file,
/// creating the file (and `.roocode/`) if needed. An existing identical rule is
/// not added twice. The rule is stored as given; callers validate it first.
pub fn append_local_allow(project_root: &Path, rule: &str) -> Result<(), ConfigError> {
    let path = local_config_path(project_root);
    // The project's `.roocode/` comes from the repository: nothing is written or read
    // through a symbolic link there (a committed link could aim the write at `~`).
    let write_err = |source: std::io::Error| ConfigError::Write {
        path: path.clone(),
        source,
    };
    let dir = roo_store::make_real_dirs(project_root, Path::new(".roocode")).map_err(write_err)?;
    if fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
        return Err(write_err(std::io::Error::other(format!(
            "{} is a symbolic link or not a regular file, and roo never writes through one \
             there; remove it (it may come from the repository)",
            path.display()
        ))));
    }
    let created = update_yaml(&path, HEADER, |root, invalid| {
        let permissions = root
            .entry(Value::from("permissions"))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        if permissions.is_null() {
            *permissions = Value::Mapping(Mapping::new());
        }
        let Some(permissions) = permissions.as_mapping_mut() else {
            return Err(invalid("permissions", "is not a mapping"));
        };
        let allow = permissions
            .entry(Value::from("allow"))
            .or_insert_with(|| Value::Sequence(Vec::new()));
        if allow.is_null() {
            *allow = Value::Sequence(Vec::new());
        }
        let Some(allow) = allow.as_sequence_mut() else {
            return Err(invalid("permissions.allow", "is not a list"));
        };
        let rule_value = Value::from(rule);
        if allow.contains(&rule_value) {
            return Ok(false);
        }
        allow.push(rule_value);
        Ok(true)
    })?;
    if created {
        // Best effort: the rule is saved either way. Never through a link, a dangling
        // one included: anything at the path is left alone.
        let _ = roo_store::create_new_regular(&dir.join(".gitignore"), b"config.local.yaml\n");
    }
    Ok(())
}

/// Builds the error for a key of unexpected shape found while editing a file.
pub(crate) type InvalidKey<'a> = &'a dyn Fn(&str, &str) -> ConfigError;

/// Reads the YAML file at `path` (a missing file is an empty mapping), lets
/// `edit` change its top-level mapping, and writes it back atomically under a
/// lock on its directory if `edit` returns `true`. `header` starts a newly
/// created file. Returns whether the file was created. A file whose shape
/// `edit` does not expect is left alone (`edit` returns the error it builds with
/// the given constructor).
pub(crate) fn update_yaml(
    path: &Path,
    header: &str,
    edit: impl FnOnce(&mut Mapping, InvalidKey<'_>) -> Result<bool, ConfigError>,
) -> Result<bool, ConfigError> {
    let dir = path
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let write_err = |source: std::io::Error| ConfigError::Write {
        path: path.to_path_buf(),
        source,
    };
    fs::create_dir_all(&dir).map_err(write_err)?;
    // The store's file lock (`<file>.lock`, no queue file left behind), held until the
    // end of the function. Without it a concurrent writer's change could be lost, so a
    // failure to lock is an error, not a warning.
    let _lock = roo_store::FileLock::acquire(path, &roo_store::LockPolicy::protocol()).map_err(
        |source| ConfigError::Lock {
            path: path.to_path_buf(),
            source: Box::new(source),
        },
    )?;

    let (mut value, existed) = match fs::read_to_string(path) {
        Ok(text) => (parse_yaml(&text, path)?, true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            (Value::Mapping(Mapping::new()), false)
        }
        Err(e) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source: e,
            });
        }
    };
    let invalid = |key: &str, message: &str| ConfigError::Invalid {
        path: path.to_path_buf(),
        key: key.to_string(),
        message: format!("{message}; fix it by hand, then try again"),
    };
    let Some(root) = value.as_mapping_mut() else {
        return Err(invalid("(top level)", "must be a mapping"));
    };
    if !edit(root, &invalid)? {
        return Ok(false);
    }

    let body =
        serde_yaml_ng::to_string(&value).map_err(|e| invalid("(document)", &e.to_string()))?;
    let text = if existed {
        body
    } else {
        format!("{header}{body}")
    };
    roo_store::replace_file(path, text.as_bytes())
        .map_err(|e| write_err(std::io::Error::other(e)))?;
    Ok(!existed)
}
