//! Glob: find files by name pattern.
//!
//! Patterns are matched against paths relative to the search directory with
//! `globset` (`*` stays within one directory, `**` crosses directories, `{a,b}`
//! alternates). The walk honours `.gitignore` (see `walk`), so build output and
//! dependencies do not drown the answer. Results are sorted newest first — the
//! files someone is working on are usually the ones wanted — and capped.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use globset::GlobBuilder;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::confined::{effective_roots, search_root};
use super::walk::{Skipped, is_file, search_summary, search_target, walker};
use super::{ToolError, display_path, resolve_path, run_blocking};
use crate::permissions::confinement::resolve_root;
use crate::tool::{PermissionTarget, ReadFilter, ToolContext, ToolKind, ToolOutput, TypedTool};

/// Most paths returned by one call.
pub const MAX_RESULTS: usize = 500;

const NAME: &str = "Glob";

/// Finds files by glob pattern.
#[derive(Debug, Clone, Copy, Default)]
pub struct Glob;

#[derive(Debug, Deserialize, JsonSchema)]
/// Input of Glob.
pub struct GlobInput {
    /// Matched against paths relative to `path`: `**/*.rs`, `src/**/*.{ts,tsx}`, `*.md` (top level only).
    pattern: String,
    /// Directory to search, absolute or relative to the working directory (the default).
    #[serde(default)]
    path: Option<String>,
}

impl TypedTool for Glob {
    type Input = GlobInput;
    const NAME: &'static str = NAME;

    fn description(&self) -> String {
        format!(
            "Finds files by glob pattern (`*` within a directory, `**` across directories), \
             newest first, at most {MAX_RESULTS}. Skips files ignored by .gitignore and `.git`; \
             includes hidden files."
        )
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn permission_target(&self, input: &Value) -> PermissionTarget {
        search_target(input)
    }

    fn summarize(&self, input: &Value) -> Option<String> {
        Some(search_summary(NAME, input))
    }

    async fn run(&self, input: GlobInput, ctx: &ToolContext) -> ToolOutput {
        let roots = effective_roots(&ctx.allowed_roots, &ctx.cwd);
        let root = match resolve_path(&ctx.cwd, input.path.as_deref().unwrap_or("."))
            .and_then(|root| search_root(&root, &roots))
        {
            Ok(root) => root,
            Err(e) => return e.into_output(),
        };
        let cwd = resolve_root(&ctx.cwd);
        let cancel = ctx.cancel.clone();
        let pattern = input.pattern;
        let filter = ctx.read_filter.clone();
        let work = move || find_files(&root, &pattern, &cwd, &cancel, &filter);
        match run_blocking(NAME, &ctx.cancel, work).await {
            Ok(text) => ToolOutput::ok(text),
            Err(e) => e.into_output(),
        }
    }
}

/// Finds files under `root` matching `pattern`, newest first, as text for the model;
/// files `filter` denies are left out with a note.
fn find_files(
    root: &Path,
    pattern: &str,
    cwd: &Path,
    cancel: &CancellationToken,
    filter: &ReadFilter,
) -> Result<String, ToolError> {
    let pattern_text = pattern.trim().trim_start_matches("./");
    if Path::new(pattern_text).is_absolute() {
        return Err(ToolError::Pattern {
            pattern: pattern.to_string(),
            message: "the pattern must be relative to the search directory; pass the \
                      directory as `path` and a relative pattern"
                .to_string(),
        });
    }
    let matcher = GlobBuilder::new(pattern_text)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| ToolError::Pattern {
            pattern: pattern.to_string(),
            message: e.kind().to_string(),
        })?
        .compile_matcher();
    let meta = std::fs::metadata(root).map_err(|e| ToolError::io("search", root, e))?;
    if !meta.is_dir() {
        return Err(ToolError::Io {
            action: "search",
            path: root.to_path_buf(),
            source: std::io::Error::other("not a directory; `path` must be a directory"),
        });
    }

    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    let mut denied = Skipped::default();
    for entry in walker(root).flatten() {
        if cancel.is_cancelled() {
            return Err(ToolError::Cancelled { tool: NAME });
        }
        if !is_file(&entry) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        if matcher.is_match(rel) && !denied.denied(filter, entry.path()) {
            let modified = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((modified, entry.into_path()));
        }
    }
    let denied_note = denied.note("omitted").map(|n| format!("\n{n}"));
    if found.is_empty() {
        return Ok(format!(
            "No files match `{pattern}` under {}.{}",
            display_path(cwd, root),
            denied_note.unwrap_or_default()
        ));
    }
    // Newest first; ties by path for a stable order.
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let mut lines: Vec<String> = found
        .iter()
        .take(MAX_RESULTS)
        .map(|(_, p)| display_path(cwd, p))
        .collect();
    if total > MAX_RESULTS {
        lines.push(format!(
            "[Showing the {MAX_RESULTS} most recently modified of {total} matches; narrow the \
             pattern or the path to see the rest.]"
        ));
    }
    let mut text = lines.join("\n");
    if let Some(note) = denied_note {
        text.push_str(&note);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::fs;
    use std::process::Command;
    use std::time::Duration;

    fn find(
        root: &Path,
        pattern: &str,
        cwd: &Path,
        cancel: &CancellationToken,
    ) -> Result<String, ToolError> {
        find_files(root, pattern, cwd, cancel, &ReadFilter::default())
    }

    fn touch(root: &Path, rel: &str, age_secs: u64) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, rel).unwrap();
        let when = SystemTime::now() - Duration::from_secs(age_secs);
        fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }

    fn git_repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("git")
            .args(["init", "-q"])
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        dir
    }

    #[test]
    fn matches_recursively_newest_first_and_honours_gitignore() {
        let repo = git_repo();
        let root = repo.path();
        fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
        touch(root, "src/old.rs", 300);
        touch(root, "src/new.rs", 10);
        touch(root, "src/deep/mid.rs", 100);
        touch(root, "target/debug/build.rs", 1);
        touch(root, "notes.log", 1);
        let out = find(root, "**/*.rs", root, &CancellationToken::new()).unwrap();
        assert_eq!(out, "src/new.rs\nsrc/deep/mid.rs\nsrc/old.rs");
        let out = find(root, "*.log", root, &CancellationToken::new()).unwrap();
        assert!(out.starts_with("No files match"), "{out}");
        let out = find(root, "**/HEAD", root, &CancellationToken::new()).unwrap();
        assert!(out.starts_with("No files match"), "{out}");
    }

    #[test]
    fn star_stays_in_one_directory_and_path_narrows() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(root, "a.md", 5);
        touch(root, "docs/b.md", 50);
        let cancel = CancellationToken::new();
        assert_eq!(find(root, "*.md", root, &cancel).unwrap(), "a.md");
        assert_eq!(
            find(&root.join("docs"), "*.md", root, &cancel).unwrap(),
            "docs/b.md"
        );
        assert_eq!(
            find(root, "{a,docs/b}.md", root, &cancel).unwrap(),
            "a.md\ndocs/b.md"
        );
    }

    #[test]
    fn caps_results_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(MAX_RESULTS + 5) {
            touch(dir.path(), &format!("f{i}.txt"), 1);
        }
        let out = find(dir.path(), "*.txt", dir.path(), &CancellationToken::new()).unwrap();
        assert_eq!(out.lines().count(), MAX_RESULTS + 1);
        assert!(out.contains(&format!("of {} matches", MAX_RESULTS + 5)));
    }

    #[test]
    fn bad_patterns_and_paths_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = CancellationToken::new();
        let err = find(dir.path(), "a[", dir.path(), &cancel).unwrap_err();
        assert!(err.to_string().contains("compile the pattern"), "{err}");
        let err = find(dir.path(), "/etc/*", dir.path(), &cancel).unwrap_err();
        assert!(err.to_string().contains("relative"), "{err}");
        let err = find(&dir.path().join("nope"), "*", dir.path(), &cancel).unwrap_err();
        assert!(matches!(err, ToolError::NotFound { .. }));
    }
}
