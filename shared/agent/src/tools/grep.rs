//! Grep: search file contents with a regular expression.
//!
//! A small ripgrep: Rust `regex` syntax, the same `.gitignore`-aware walk as Glob,
//! binary files skipped, three output modes (matching files, matching lines with
//! optional context, counts per file) and a cap on results so one broad pattern
//! cannot flood the context. Matching is line by line.

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::confined::{effective_roots, open_regular, search_root};
use super::input::{opt_bool, opt_usize};
use super::walk::{Skipped, is_file, search_summary, search_target, walker};
use super::{ToolError, display_path, looks_binary, resolve_path, run_blocking};
use crate::permissions::confinement::resolve_root;
use crate::tool::{PermissionTarget, ReadFilter, ToolContext, ToolKind, ToolOutput, TypedTool};

/// Results (files, lines or counts) returned when the call gives no `max_results`.
pub const DEFAULT_MAX_RESULTS: usize = 500;
/// Characters kept of a matching line.
pub const MAX_LINE_CHARS: usize = 500;
/// Files larger than this are skipped (logs, dumps); the result says so.
const MAX_FILE_BYTES: u64 = 20 * 1024 * 1024;
/// Most skipped files named in a result; the rest are counted.
const MAX_SKIPPED_LISTED: usize = 10;

const NAME: &str = "Grep";

/// Searches file contents.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grep;

/// What Grep prints.
// Variants carry no doc comments: they would turn the schema's `enum` into a `oneOf`.
#[allow(
    missing_docs,
    reason = "variant doc comments would turn the schema's `enum` into a `oneOf`"
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    // `path:line:text` for each matching line (plus context lines).
    Content,
    // Paths of files with at least one match.
    #[default]
    FilesWithMatches,
    // `path:count` per file with matches.
    Count,
}

#[derive(Debug, Deserialize, JsonSchema)]
/// Input of Grep.
pub struct GrepInput {
    pattern: String,
    /// File or directory, absolute or relative to the working directory (the default).
    #[serde(default)]
    path: Option<String>,
    /// Only files matching this glob (`*.rs`, `src/**/*.ts`); without `/`, the file name.
    #[serde(default)]
    glob: Option<String>,
    #[serde(default, deserialize_with = "opt_bool")]
    case_insensitive: Option<bool>,
    /// `files_with_matches` (default): paths; `content`: `path:line:text`; `count`: per file.
    #[serde(default)]
    output_mode: Option<OutputMode>,
    /// Lines before and after each match (content mode).
    #[serde(default, deserialize_with = "opt_usize")]
    context: Option<usize>,
    #[serde(default, deserialize_with = "opt_usize")]
    #[schemars(
        range(min = 1),
        extend("description" = format!("Most files, lines or counts returned (default {DEFAULT_MAX_RESULTS}).")),
    )]
    max_results: Option<usize>,
}

impl TypedTool for Grep {
    type Input = GrepInput;
    const NAME: &'static str = NAME;

    // Files over the size limit are named in the result, so the limit is not repeated here.
    fn description(&self) -> String {
        "Searches file contents for a regular expression (Rust regex: no look-around or \
         backreferences), line by line, like ripgrep. Skips `.git`, binary files and files \
         ignored by .gitignore."
            .to_string()
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

    async fn run(&self, input: GrepInput, ctx: &ToolContext) -> ToolOutput {
        let roots = effective_roots(&ctx.allowed_roots, &ctx.cwd);
        let root = match resolve_path(&ctx.cwd, input.path.as_deref().unwrap_or("."))
            .and_then(|root| search_root(&root, &roots))
        {
            Ok(root) => root,
            Err(e) => return e.into_output(),
        };
        let cwd = resolve_root(&ctx.cwd);
        let search = match Search::new(&input, root, cwd) {
            Ok(search) => Search {
                filter: ctx.read_filter.clone(),
                ..search
            },
            Err(e) => return e.into_output(),
        };
        let cancel = ctx.cancel.clone();
        match run_blocking(NAME, &ctx.cancel, move || search.run(&cancel)).await {
            Ok(text) => ToolOutput::ok(text),
            Err(e) => e.into_output(),
        }
    }
}

/// One compiled search.
struct Search {
    regex: Regex,
    pattern: String,
    root: PathBuf,
    cwd: PathBuf,
    glob: Option<(GlobMatcher, bool)>,
    mode: OutputMode,
    context: usize,
    max_results: usize,
    max_file_bytes: u64,
    /// Files the permission rules deny to reading are skipped.
    filter: ReadFilter,
}

impl Search {
    fn new(input: &GrepInput, root: PathBuf, cwd: PathBuf) -> Result<Self, ToolError> {
        let regex = RegexBuilder::new(&input.pattern)
            .case_insensitive(input.case_insensitive.unwrap_or(false))
            .build()
            .map_err(|e| ToolError::Pattern {
                pattern: input.pattern.clone(),
                message: e.to_string(),
            })?;
        let glob = match input
            .glob
            .as_deref()
            .map(str::trim)
            .filter(|g| !g.is_empty())
        {
            None => None,
            Some(g) => {
                let by_path = g.contains('/');
                let matcher = GlobBuilder::new(g.trim_start_matches("./"))
                    .literal_separator(true)
                    .build()
                    .map_err(|e| ToolError::Pattern {
                        pattern: g.to_string(),
                        message: e.kind().to_string(),
                    })?
                    .compile_matcher();
                Some((matcher, by_path))
            }
        };
        Ok(Self {
            regex,
            pattern: input.pattern.clone(),
            root,
            cwd,
            glob,
            mode: input.output_mode.unwrap_or_default(),
            context: input.context.unwrap_or(0),
            max_results: input
                .max_results
                .filter(|&m| m > 0)
                .unwrap_or(DEFAULT_MAX_RESULTS),
            max_file_bytes: MAX_FILE_BYTES,
            filter: ReadFilter::default(),
        })
    }

    fn wanted(&self, path: &Path) -> bool {
        match &self.glob {
            None => true,
            Some((matcher, true)) => path
                .strip_prefix(&self.root)
                .is_ok_and(|rel| matcher.is_match(rel)),
            Some((matcher, false)) => path.file_name().is_some_and(|n| matcher.is_match(n)),
        }
    }

    fn run(&self, cancel: &CancellationToken) -> Result<String, ToolError> {
        let meta =
            std::fs::metadata(&self.root).map_err(|e| ToolError::io("search", &self.root, e))?;
        let files: Box<dyn Iterator<Item = PathBuf>> = if !meta.is_dir() {
            if let Some(reason) = self.filter.denied(&self.root) {
                return Err(ToolError::Denied {
                    path: self.root.clone(),
                    reason,
                });
            }
            Box::new(std::iter::once(self.root.clone()))
        } else {
            Box::new(
                walker(&self.root)
                    .flatten()
                    .filter(is_file)
                    .map(ignore::DirEntry::into_path)
                    .filter(|p| self.wanted(p)),
            )
        };

        let mut out = String::new();
        let mut results = 0usize;
        let mut truncated = false;
        let mut skipped_large = SkippedNames::default();
        let mut skipped_special = SkippedNames::default();
        let mut denied = Skipped::default();
        for path in files {
            if cancel.is_cancelled() {
                return Err(ToolError::Cancelled { tool: NAME });
            }
            if denied.denied(&self.filter, &path) {
                continue;
            }
            if results >= self.max_results {
                truncated = true;
                break;
            }
            let shown = display_path(&self.cwd, &path);
            let bytes = match read_text(&path, self.max_file_bytes) {
                Ok(Some(bytes)) => bytes,
                Ok(None) => continue,
                Err(Skip::Large) => {
                    skipped_large.push(shown);
                    continue;
                }
                Err(Skip::Special) => {
                    skipped_special.push(shown);
                    continue;
                }
            };
            let text = String::from_utf8_lossy(&bytes);
            match self.mode {
                OutputMode::FilesWithMatches => {
                    if text.lines().any(|l| self.regex.is_match(l)) {
                        let _ = writeln!(out, "{shown}");
                        results += 1;
                    }
                }
                OutputMode::Count => {
                    let n = text.lines().filter(|l| self.regex.is_match(l)).count();
                    if n > 0 {
                        let _ = writeln!(out, "{shown}:{n}");
                        results += 1;
                    }
                }
                OutputMode::Content => {
                    let budget = self.max_results - results;
                    let (printed, cut) = self.content(&text, &shown, budget, &mut out);
                    results += printed;
                    truncated |= cut;
                }
            }
        }
        let mut text = if out.is_empty() {
            format!(
                "No matches for `{}` in {}.",
                self.pattern,
                display_path(&self.cwd, &self.root)
            )
        } else {
            out.trim_end().to_string()
        };
        if truncated {
            let _ = write!(
                text,
                "\n[Stopped after {} results; narrow the pattern, path or glob, or raise max_results.]",
                self.max_results
            );
        }
        if let Some(note) = denied.note("skipped") {
            text.push('\n');
            text.push_str(&note);
        }
        if skipped_large.count > 0 {
            let _ = write!(
                text,
                "\n[{} file(s) over {} MiB were not searched: {}; read them a window at a time \
                 with ReadFile (offset/limit).]",
                skipped_large.count,
                self.max_file_bytes.div_ceil(1024 * 1024),
                skipped_large.listed()
            );
        }
        if skipped_special.count > 0 {
            let _ = write!(
                text,
                "\n[{} file(s) that are not regular files (FIFOs, sockets, devices) were not \
                 searched: {}.]",
                skipped_special.count,
                skipped_special.listed()
            );
        }
        Ok(text)
    }

    /// Appends the matching lines of one file (with context) to `out`; returns how
    /// many matching lines were printed and whether the budget cut the file short.
    fn content(&self, text: &str, shown: &str, budget: usize, out: &mut String) -> (usize, bool) {
        let lines: Vec<&str> = text.lines().collect();
        let matches: Vec<usize> = (0..lines.len())
            .filter(|&i| self.regex.is_match(lines[i]))
            .collect();
        if matches.is_empty() {
            return (0, false);
        }
        let cut = matches.len() > budget;
        let matches = &matches[..matches.len().min(budget)];
        let mut last_printed: Option<usize> = None;
        for &m in matches {
            let from = m.saturating_sub(self.context);
            let to = (m + self.context).min(lines.len() - 1);
            let from = match last_printed {
                Some(last) if from <= last => last + 1,
                Some(_) if self.context > 0 => {
                    out.push_str("--\n");
                    from
                }
                _ => from,
            };
            for (i, line) in lines.iter().enumerate().take(to + 1).skip(from) {
                let sep = if matches.binary_search(&i).is_ok() || i == m {
                    ':'
                } else {
                    '-'
                };
                let line = line.trim_end_matches('\r');
                let shown_line = roo_term::clip_with(line, MAX_LINE_CHARS, " …");
                let _ = writeln!(out, "{shown}{sep}{}{sep}{shown_line}", i + 1);
            }
            last_printed = Some(to.max(last_printed.unwrap_or(0)));
        }
        (matches.len(), cut)
    }
}

/// Why a file was left out of a search, for the result's notes.
enum Skip {
    /// Over the size limit.
    Large,
    /// A FIFO, socket or device (possibly swapped in after the walk).
    Special,
}

/// The content of a text file; `Ok(None)` for binary or unreadable files. The
/// file is opened without blocking and without following a symlink, and
/// checked on the open handle; only the first 8 KiB of a binary file are read.
fn read_text(path: &Path, max_bytes: u64) -> Result<Option<Vec<u8>>, Skip> {
    let mut file = match open_regular(path) {
        Ok(file) => file,
        Err(ToolError::NotRegular { .. }) => return Err(Skip::Special),
        Err(_) => return Ok(None),
    };
    if file.metadata().is_ok_and(|m| m.len() > max_bytes) {
        return Err(Skip::Large);
    }
    let mut bytes = Vec::new();
    if (&mut file).take(8 * 1024).read_to_end(&mut bytes).is_err() || looks_binary(&bytes) {
        return Ok(None);
    }
    // The size was checked on this handle; a file still growing is cut at the limit.
    let rest = max_bytes.saturating_sub(bytes.len() as u64);
    if file.take(rest).read_to_end(&mut bytes).is_err() {
        return Ok(None);
    }
    Ok(Some(bytes))
}

/// Files left out of a search: all counted, the first few named.
#[derive(Default)]
struct SkippedNames {
    count: usize,
    names: Vec<String>,
}

impl SkippedNames {
    fn push(&mut self, name: String) {
        self.count += 1;
        if self.names.len() < MAX_SKIPPED_LISTED {
            self.names.push(name);
        }
    }

    /// The named ones, comma-separated, with a count of the rest.
    fn listed(&self) -> String {
        let mut text = self.names.join(", ");
        if self.count > self.names.len() {
            let _ = write!(text, " and {} more", self.count - self.names.len());
        }
        text
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;
    use std::fs;
    use std::process::Command;

    fn search(root: &Path, input: Value) -> String {
        let input: GrepInput = serde_json::from_value(input).unwrap();
        Search::new(&input, root.to_path_buf(), root.to_path_buf())
            .unwrap()
            .run(&CancellationToken::new())
            .unwrap()
    }

    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("git")
            .args(["init", "-q"])
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        let root = dir.path();
        fs::create_dir_all(root.join("src")).unwrap();
        fs::create_dir_all(root.join("target")).unwrap();
        fs::write(root.join(".gitignore"), "target/\n").unwrap();
        fs::write(
            root.join("src/main.rs"),
            "fn main() {\n    let total = add(1, 2);\n    println!(\"{total}\");\n}\n",
        )
        .unwrap();
        fs::write(
            root.join("src/lib.rs"),
            "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n",
        )
        .unwrap();
        fs::write(root.join("target/gen.rs"), "fn add() {}\n").unwrap();
        fs::write(root.join("src/blob.bin"), b"add\0\x01").unwrap();
        fs::write(root.join("README.md"), "Call ADD to add.\n").unwrap();
        dir
    }

    #[test]
    fn files_over_the_size_limit_are_named_not_silently_skipped() {
        let dir = project();
        let root = dir.path();
        for i in 0..12 {
            fs::write(root.join(format!("big{i:02}.log")), "add\n".repeat(100)).unwrap();
        }
        let input: GrepInput = serde_json::from_value(json!({"pattern": "add"})).unwrap();
        let mut search = Search::new(&input, root.to_path_buf(), root.to_path_buf()).unwrap();
        search.max_file_bytes = 100;
        let out = search.run(&CancellationToken::new()).unwrap();
        assert!(out.contains("src/lib.rs"), "{out}");
        assert!(
            out.contains("[12 file(s) over 1 MiB were not searched: big00.log, big01.log"),
            "{out}"
        );
        assert!(out.contains("big09.log and 2 more;"), "{out}");
        assert!(!out.contains("big10.log"), "{out}");

        // Also when nothing else matched.
        let input: GrepInput =
            serde_json::from_value(json!({"pattern": "add", "glob": "*.log"})).unwrap();
        let mut search = Search::new(&input, root.to_path_buf(), root.to_path_buf()).unwrap();
        search.max_file_bytes = 100;
        let out = search.run(&CancellationToken::new()).unwrap();
        assert!(out.starts_with("No matches"), "{out}");
        assert!(out.contains("12 file(s) over"), "{out}");
    }

    #[test]
    fn files_mode_honours_gitignore_and_skips_binaries() {
        let dir = project();
        let out = search(dir.path(), json!({"pattern": "add"}));
        assert_eq!(out, "README.md\nsrc/lib.rs\nsrc/main.rs");
    }

    #[test]
    fn content_mode_prints_line_numbers_and_context() {
        let dir = project();
        let out = search(
            dir.path(),
            json!({"pattern": "total", "output_mode": "content", "glob": "*.rs"}),
        );
        assert_eq!(
            out,
            "src/main.rs:2:    let total = add(1, 2);\nsrc/main.rs:3:    println!(\"{total}\");"
        );
        let out = search(
            dir.path(),
            json!({"pattern": "a \\+ b", "output_mode": "content", "context": 1}),
        );
        assert_eq!(
            out,
            "src/lib.rs-1-pub fn add(a: u32, b: u32) -> u32 {\nsrc/lib.rs:2:    a + b\nsrc/lib.rs-3-}"
        );
    }

    #[test]
    fn count_mode_and_case_insensitivity() {
        let dir = project();
        let out = search(
            dir.path(),
            json!({"pattern": "add", "output_mode": "count", "case_insensitive": true, "glob": "*.md"}),
        );
        assert_eq!(out, "README.md:1");
        let out = search(
            dir.path(),
            json!({"pattern": "ADD", "output_mode": "count"}),
        );
        assert_eq!(out, "README.md:1");
    }

    #[test]
    fn caps_results_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..50).map(|i| format!("hit {i}\n")).collect();
        fs::write(dir.path().join("a.txt"), text).unwrap();
        let out = search(
            dir.path(),
            json!({"pattern": "hit", "output_mode": "content", "max_results": 10}),
        );
        assert_eq!(out.lines().filter(|l| l.starts_with("a.txt:")).count(), 10);
        assert!(out.contains("Stopped after 10 results"), "{out}");
    }

    #[test]
    fn searches_a_single_file_and_reports_no_match() {
        let dir = project();
        let out = search(
            &dir.path().join("src/lib.rs"),
            json!({"pattern": "a \\+ b"}),
        );
        assert!(out.ends_with("src/lib.rs"), "{out}");
        let out = search(dir.path(), json!({"pattern": "nothing-here"}));
        assert!(out.starts_with("No matches for `nothing-here`"), "{out}");
    }

    #[test]
    fn symlinks_out_of_the_tree_are_not_read() {
        let dir = project();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.txt"), "add secret\n").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.txt"),
            dir.path().join("src/link.txt"),
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("linkdir")).unwrap();
        let out = search(
            dir.path(),
            json!({"pattern": "secret", "output_mode": "content"}),
        );
        assert!(out.starts_with("No matches"), "{out}");
    }

    #[test]
    fn invalid_regex_is_a_clear_error() {
        let input: GrepInput = serde_json::from_value(json!({"pattern": "fn("})).unwrap();
        let err = Search::new(&input, PathBuf::from("."), PathBuf::from("."))
            .err()
            .unwrap();
        assert!(
            err.to_string().starts_with("compile the pattern `fn(`"),
            "{err}"
        );
    }
}
