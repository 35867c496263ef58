//! The six built-in tools: ReadFile, WriteFile, EditFile, Bash, Glob and Grep.
//!
//! Each tool lives in its own module and implements [`Tool`]; this module owns what
//! they share: the error type whose messages the model reads, input parsing that
//! forgives the usual model slips (numbers sent as strings), path resolution
//! against the call's working directory, and running blocking file work off the
//! async runtime. Large results are not cut here: the loop hands every result to
//! [`spill_if_large`], which writes the full text under the session directory.

pub mod bash;
pub mod edit_file;
pub mod glob;
pub mod grep;
pub mod read_file;
pub mod spill;
pub mod tool_search;
pub mod write_file;

pub(crate) mod confined;
mod input;
mod walk;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::tool::{Tool, ToolError};

pub use bash::Bash;
pub use edit_file::EditFile;
pub use glob::Glob;
pub use grep::Grep;
pub use read_file::ReadFile;
pub use spill::spill_if_large;
pub use tool_search::ToolSearch;
pub use write_file::WriteFile;

/// The six built-in tools, ready to register.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadFile),
        Arc::new(WriteFile),
        Arc::new(EditFile),
        Arc::new(Bash),
        Arc::new(Glob),
        Arc::new(Grep),
    ]
}

/// Resolves a path the model gave against the working directory. A leading
/// `~` or `~user` is expanded as a shell would (the path confinement then judges
/// the real location), so `~/x` never becomes a directory named `~`.
pub(crate) fn resolve_path(cwd: &Path, path: &str) -> Result<PathBuf, ToolError> {
    let expanded = expand_home(path)?;
    Ok(if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    })
}

/// The path a file tool call targets, for the permission layer: `~` expanded
/// where possible (a call whose `~` cannot be expanded fails in the tool).
pub(crate) fn target_path(path: &str) -> PathBuf {
    expand_home(path).unwrap_or_else(|_| PathBuf::from(path))
}

/// Expands a leading `~` (the user's home: `$HOME`, else the password
/// database) or `~name` (that user's home). Other paths are returned as given.
fn expand_home(path: &str) -> Result<PathBuf, ToolError> {
    let Some(rest) = path.strip_prefix('~') else {
        return Ok(PathBuf::from(path));
    };
    let (user, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i + 1..].trim_start_matches('/')),
        None => (rest, ""),
    };
    let fail = |message: String| ToolError::Home {
        path: path.to_string(),
        message,
    };
    let home = if user.is_empty() {
        match roo_store::user_home() {
            Some(home) => home,
            None => nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.dir)
                .ok_or_else(|| fail("HOME is not set and the user database has no home".into()))?,
        }
    } else {
        nix::unistd::User::from_name(user)
            .ok()
            .flatten()
            .map(|u| u.dir)
            .ok_or_else(|| fail(format!("there is no user named `{user}`")))?
    };
    if !home.is_absolute() {
        return Err(fail(format!(
            "the home directory {} is not absolute",
            home.display()
        )));
    }
    Ok(if tail.is_empty() {
        home
    } else {
        home.join(tail)
    })
}

/// Reads the `path` field of an input, for permission targets and summaries.
pub(crate) fn input_str<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

/// Runs blocking file work on the blocking pool so the runtime keeps serving
/// other calls and streams. Returns as soon as `cancel` fires: a read stuck in
/// the kernel then finishes (or not) on its own thread, unobserved, and never
/// holds up the agent.
pub(crate) async fn run_blocking<T, F>(
    tool: &'static str,
    cancel: &CancellationToken,
    work: F,
) -> Result<T, ToolError>
where
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
    T: Send + 'static,
{
    let task = tokio::task::spawn_blocking(work);
    tokio::select! {
        joined = task => match joined {
            Ok(result) => result,
            Err(e) => Err(ToolError::Worker {
                tool,
                message: e.to_string(),
            }),
        },
        () = cancel.cancelled() => Err(ToolError::Cancelled { tool }),
    }
}

/// Shows a path to the model: relative to the working directory when it is inside
/// it (shorter, and directly usable in the next call), absolute otherwise.
pub(crate) fn display_path(cwd: &Path, path: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}

/// Whether the first 8 KiB of a file's content contain a NUL byte: the same
/// heuristic git and ripgrep use to call a file binary.
pub(crate) fn looks_binary(head: &[u8]) -> bool {
    head.iter().take(8 * 1024).any(|&b| b == 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn builtin_tools_have_distinct_names_and_object_schemas() {
        let tools = builtin_tools();
        let mut names: Vec<_> = tools.iter().map(|t| t.name().to_string()).collect();
        names.sort();
        assert_eq!(
            names,
            ["Bash", "EditFile", "Glob", "Grep", "ReadFile", "WriteFile"]
        );
        for tool in &tools {
            let schema = tool.input_schema();
            assert_eq!(schema["type"], "object", "{}", tool.name());
            assert!(schema["required"].is_array(), "{}", tool.name());
            // Enough to use the tool well, and no more (issue 20: say it once, briefly).
            let description = tool.description().chars().count();
            assert!(
                (100..=600).contains(&description),
                "{} description: {description} characters",
                tool.name()
            );
        }
    }

    /// `schema` without its annotations (`description`, `default`): what it accepts.
    fn accepted(schema: &Value) -> Value {
        let Value::Object(map) = schema else {
            return schema.clone();
        };
        let mut out = serde_json::Map::new();
        for (key, value) in map {
            match key.as_str() {
                "description" | "default" => {}
                "properties" => {
                    let properties = value.as_object().into_iter().flatten();
                    let kept = properties.map(|(name, field)| (name.clone(), accepted(field)));
                    out.insert(key.clone(), Value::Object(kept.collect()));
                }
                _ => {
                    out.insert(key.clone(), accepted(value));
                }
            }
        }
        Value::Object(out)
    }

    #[test]
    fn typed_tools_accept_what_their_hand_written_schemas_accepted() {
        use serde_json::json;
        // The schemas these tools had before they derived them from their input structs,
        // without their texts: the derived ones must accept the same inputs.
        let read_file = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer", "minimum": 1},
                "limit": {"type": "integer", "minimum": 1}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        let write_file = json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
            "additionalProperties": false
        });
        let glob = json!({
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
            "required": ["pattern"],
            "additionalProperties": false
        });
        let edit_file = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "replace_all": {"type": "boolean"}
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        });
        let bash = json!({
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout_ms": {"type": "integer", "minimum": 1, "maximum": bash::MAX_TIMEOUT_MS},
                "description": {"type": "string"}
            },
            "required": ["command"],
            "additionalProperties": false
        });
        let grep = json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "glob": {"type": "string"},
                "case_insensitive": {"type": "boolean"},
                "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
                "context": {"type": "integer", "minimum": 0},
                "max_results": {"type": "integer", "minimum": 1}
            },
            "required": ["pattern"],
            "additionalProperties": false
        });
        assert_eq!(accepted(&ReadFile.input_schema()), read_file);
        assert_eq!(accepted(&WriteFile.input_schema()), write_file);
        assert_eq!(accepted(&Glob.input_schema()), glob);
        assert_eq!(accepted(&EditFile.input_schema()), edit_file);
        assert_eq!(accepted(&Bash.input_schema()), bash);
        assert_eq!(accepted(&Grep.input_schema()), grep);
        // Defaults the model reads come from the constants the tools use.
        let default_of = |schema: Value, field: &str| {
            schema["properties"][field]["description"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert!(
            default_of(ReadFile.input_schema(), "limit")
                .contains(&read_file::DEFAULT_LIMIT.to_string())
        );
        assert!(
            default_of(Bash.input_schema(), "timeout_ms")
                .contains(&bash::DEFAULT_TIMEOUT_MS.to_string())
        );
        assert!(
            default_of(Grep.input_schema(), "max_results")
                .contains(&grep::DEFAULT_MAX_RESULTS.to_string())
        );
    }

    #[test]
    fn resolve_path_keeps_absolute_and_joins_relative() {
        let cwd = Path::new("/work/project");
        assert_eq!(
            resolve_path(cwd, "/etc/hosts").unwrap(),
            PathBuf::from("/etc/hosts")
        );
        assert_eq!(
            resolve_path(cwd, "src/main.rs").unwrap(),
            PathBuf::from("/work/project/src/main.rs")
        );
        assert_eq!(
            resolve_path(cwd, "./~x").unwrap(),
            PathBuf::from("/work/project/~x")
        );
        assert_eq!(
            resolve_path(cwd, "a/~/b").unwrap(),
            PathBuf::from("/work/project/a/~/b")
        );
    }

    #[test]
    fn tilde_is_the_home_directory_never_a_directory_named_tilde() {
        let cwd = Path::new("/work/project");
        let home = expand_home("~").unwrap();
        assert!(home.is_absolute(), "{}", home.display());
        assert_eq!(resolve_path(cwd, "~/x").unwrap(), home.join("x"));
        assert_eq!(resolve_path(cwd, "~").unwrap(), home);
        assert_eq!(target_path("~/.ssh/id_rsa"), home.join(".ssh/id_rsa"));
        assert_eq!(resolve_path(cwd, "~root/x").unwrap(), {
            let root = nix::unistd::User::from_name("root").unwrap().unwrap();
            root.dir.join("x")
        });
        let err = resolve_path(cwd, "~no-such-user-roo/x").unwrap_err();
        assert!(matches!(err, ToolError::Home { .. }), "{err}");
        assert!(err.to_string().contains("./~no-such-user-roo/x"), "{err}");
    }

    #[test]
    fn display_path_is_relative_inside_cwd() {
        let cwd = Path::new("/p");
        assert_eq!(display_path(cwd, Path::new("/p/a/b.rs")), "a/b.rs");
        assert_eq!(display_path(cwd, Path::new("/q/c.rs")), "/q/c.rs");
        assert_eq!(display_path(cwd, Path::new("/p")), "/p");
    }

    #[test]
    fn error_messages_read_after_failed_to() {
        let out = ToolError::NotFound {
            path: PathBuf::from("/x/y"),
        }
        .into_output();
        assert!(out.is_error);
        assert!(out.content.starts_with("failed to open /x/y: no such file"));
    }
}
