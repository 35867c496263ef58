//! EditFile: exact string replacement in one file.
//!
//! The model names the text to replace exactly as it is in the file; an edit
//! applies only when that text is found exactly once (or everywhere, with
//! `replace_all`). Most failed edits are near misses — different indentation, a
//! copied line-number prefix, a stale read — so a failed match answers with the
//! closest lines of the file, which usually lets the next attempt succeed. After
//! an edit the result shows the changed lines with context, numbered like
//! ReadFile, so the model can check its work without reading the file again.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::confined::{Parents, effective_roots, locate};
use super::input::opt_bool;
use super::{ToolError, input_str, looks_binary, resolve_path, run_blocking, target_path};
use crate::tool::{PermissionTarget, ToolContext, ToolKind, ToolOutput, TypedTool};

const NAME: &str = "EditFile";
/// Lines of context shown around an edit.
const CONTEXT_LINES: usize = 3;
/// Most line numbers listed when a match is ambiguous.
const MAX_LISTED_MATCHES: usize = 20;

/// Replaces exact text in a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile;

#[derive(Debug, Deserialize, JsonSchema)]
/// Input of EditFile.
pub struct EditFileInput {
    /// Absolute or relative to the working directory.
    path: String,
    old_string: String,
    /// Empty deletes `old_string`.
    new_string: String,
    /// Replace every occurrence.
    #[serde(default, deserialize_with = "opt_bool")]
    replace_all: Option<bool>,
}

impl TypedTool for EditFile {
    type Input = EditFileInput;
    const NAME: &'static str = NAME;

    // A failed match is answered with the matching line numbers or the closest lines,
    // so the description need not explain how to recover.
    fn description(&self) -> String {
        "Replaces `old_string` with `new_string` in a file you have read. `old_string` must \
         match the file exactly, indentation included, without ReadFile's line-number prefix, \
         and occur once (add surrounding lines to make it unique) unless `replace_all`."
            .to_string()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Write
    }

    fn permission_target(&self, input: &Value) -> PermissionTarget {
        input_str(input, "path").map_or(PermissionTarget::None, |p| {
            PermissionTarget::Path(target_path(p))
        })
    }

    async fn run(&self, input: EditFileInput, ctx: &ToolContext) -> ToolOutput {
        let path = match resolve_path(&ctx.cwd, &input.path) {
            Ok(path) => path,
            Err(e) => return e.into_output(),
        };
        let roots = effective_roots(&ctx.allowed_roots, &ctx.cwd);
        let shown = input.path.clone();
        let replace_all = input.replace_all.unwrap_or(false);
        let result = run_blocking(NAME, &ctx.cancel, move || {
            edit(
                &path,
                &roots,
                &input.old_string,
                &input.new_string,
                replace_all,
            )
        })
        .await;
        match result {
            Ok(edit) => {
                let what = if edit.replaced == 1 {
                    "1 occurrence".to_string()
                } else {
                    format!("{} occurrences", edit.replaced)
                };
                ToolOutput::ok(format!(
                    "Edited {shown}: replaced {what}. {}:\n{}",
                    if edit.replaced == 1 {
                        "The changed lines now read"
                    } else {
                        "The first change now reads"
                    },
                    edit.snippet
                ))
            }
            Err(e) => e.into_output(),
        }
    }
}

/// What an applied edit did.
#[derive(Debug)]
pub(crate) struct Applied {
    pub(crate) replaced: usize,
    pub(crate) snippet: String,
}

/// Applies one edit to the file at `path`, which must lie under one of `roots`
/// (see `confined`): read and rewritten through the same directory handle.
pub(crate) fn edit(
    path: &Path,
    roots: &[PathBuf],
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Applied, ToolError> {
    let fail = |message: String| ToolError::Edit {
        path: path.to_path_buf(),
        message,
    };
    if old.is_empty() {
        return Err(fail(
            "old_string is empty; give the exact text to replace, or use WriteFile to create a file"
                .to_string(),
        ));
    }
    if old == new {
        return Err(fail(
            "old_string and new_string are identical, so there is nothing to change".to_string(),
        ));
    }
    let located = locate(path, roots, Parents::Existing)?;
    let mut file = located.open_read()?;
    let mode = file
        .metadata()
        .map_err(|e| ToolError::io("read", path, e))?
        .mode()
        & 0o7777;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| ToolError::io("read", path, e))?;
    drop(file);
    if looks_binary(&bytes) {
        return Err(ToolError::Binary {
            path: path.to_path_buf(),
        });
    }
    let content = String::from_utf8(bytes).map_err(|_| {
        fail("the file is not valid UTF-8; edit it with Bash tools instead".to_string())
    })?;

    // Models write `\n`; keep a CRLF file CRLF.
    let (old, new) = if content.contains("\r\n") && !old.contains("\r\n") && old.contains('\n') {
        (old.replace('\n', "\r\n"), new.replace('\n', "\r\n"))
    } else {
        (old.to_string(), new.to_string())
    };

    let starts: Vec<usize> = content.match_indices(&old).map(|(i, _)| i).collect();
    match starts.len() {
        0 => return Err(fail(no_match_message(&content, &old))),
        n if n > 1 && !replace_all => {
            let lines: Vec<String> = starts
                .iter()
                .take(MAX_LISTED_MATCHES)
                .map(|&i| line_of(&content, i).to_string())
                .collect();
            let more = if n > MAX_LISTED_MATCHES { ", …" } else { "" };
            return Err(fail(format!(
                "old_string occurs {n} times (at lines {}{more}); include more surrounding \
                 lines to make it unique, or set replace_all to true to replace every occurrence",
                lines.join(", ")
            )));
        }
        _ => {}
    }
    let updated = if replace_all {
        content.replace(&old, &new)
    } else {
        content.replacen(&old, &new, 1)
    };
    located.write_atomic(updated.as_bytes(), Some(mode))?;

    let first = starts[0];
    let first_line = line_of(&updated, first);
    let new_lines = new.matches('\n').count() + 1;
    let snippet = numbered_window(
        &updated,
        first_line.saturating_sub(CONTEXT_LINES).max(1),
        first_line + new_lines - 1 + CONTEXT_LINES,
    );
    Ok(Applied {
        replaced: starts.len(),
        snippet,
    })
}

/// 1-based line number of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// Lines `from..=to` (1-based, clamped) numbered like ReadFile.
fn numbered_window(text: &str, from: usize, to: usize) -> String {
    text.lines()
        .enumerate()
        .skip(from - 1)
        .take(to + 1 - from)
        .map(|(i, line)| format!("{:>6}\t{}", i + 1, line.trim_end_matches('\r')))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Explains a failed match and points at the most likely intended text.
fn no_match_message(content: &str, old: &str) -> String {
    let mut message = "old_string was not found in the file".to_string();
    let file_lines: Vec<&str> = content.lines().collect();
    let old_lines: Vec<&str> = old.lines().collect();

    if old_lines.iter().any(|l| has_line_number_prefix(l)) {
        message.push_str(
            "; it seems to include ReadFile line-number prefixes (a number and a tab): \
             copy only the text after the tab",
        );
    }
    if let Some(at) = find_ignoring_whitespace(&file_lines, &old_lines) {
        message.push_str(&format!(
            "; it matches lines {}-{} if whitespace is ignored, so the indentation or spacing \
             differs. The file has:\n{}",
            at + 1,
            at + old_lines.len(),
            numbered_window(content, at + 1, at + old_lines.len())
        ));
        return message;
    }
    let probe = old_lines
        .iter()
        .map(|l| l.trim())
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut scored: Vec<(f64, usize)> = file_lines
        .iter()
        .enumerate()
        .map(|(i, line)| (similarity(probe, line.trim()), i))
        .filter(|(score, _)| *score >= 0.5)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    if scored.is_empty() {
        message.push_str(
            "; no line of the file resembles it. The file may have changed since you read it: \
             read it again with ReadFile",
        );
    } else {
        message.push_str(
            "; the closest lines of the file are below. Read the file again with ReadFile and \
             copy old_string exactly:\n",
        );
        let closest: Vec<String> = scored
            .iter()
            .take(3)
            .map(|(_, i)| format!("{:>6}\t{}", i + 1, file_lines[*i].trim_end_matches('\r')))
            .collect();
        message.push_str(&closest.join("\n"));
    }
    message
}

/// `   12\tfoo` as ReadFile prints it.
fn has_line_number_prefix(line: &str) -> bool {
    let trimmed = line.trim_start_matches(' ');
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && trimmed[digits..].starts_with('\t')
}

/// The first line index where `needle` matches `lines` with whitespace collapsed.
fn find_ignoring_whitespace(lines: &[&str], needle: &[&str]) -> Option<usize> {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let needle: Vec<String> = needle.iter().map(|l| squash(l)).collect();
    if needle.is_empty() || needle.iter().all(String::is_empty) || needle.len() > lines.len() {
        return None;
    }
    let squashed: Vec<String> = lines.iter().map(|l| squash(l)).collect();
    (0..=lines.len() - needle.len()).find(|&i| squashed[i..i + needle.len()] == needle[..])
}

/// Dice coefficient over character bigrams: 1.0 for equal strings, near 0 for
/// unrelated ones; robust to small typos and changed identifiers.
fn similarity(a: &str, b: &str) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    if a == b {
        return 1.0;
    }
    let bigrams = |s: &str| {
        let chars: Vec<char> = s.chars().collect();
        let mut v: Vec<(char, char)> = chars.windows(2).map(|w| (w[0], w[1])).collect();
        v.sort_unstable();
        v
    };
    let (x, y) = (bigrams(a), bigrams(b));
    if x.is_empty() || y.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < x.len() && j < y.len() {
        match x[i].cmp(&y[j]) {
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
        }
    }
    2.0 * common as f64 / (x.len() + y.len()) as f64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::fs;

    /// [`super::edit`] with the file's directory as the one allowed root.
    fn edit(p: &Path, old: &str, new: &str, all: bool) -> Result<Applied, ToolError> {
        let root = fs::canonicalize(p.parent().unwrap()).unwrap();
        super::edit(p, &[root], old, new, all)
    }

    fn file(content: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.rs");
        fs::write(&p, content).unwrap();
        (dir, p)
    }

    #[test]
    fn replaces_a_unique_match_and_shows_context() {
        let (_d, p) = file("fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n");
        let applied = edit(&p, "let x = 1;", "let x = 2;", false).unwrap();
        assert_eq!(applied.replaced, 1);
        assert_eq!(
            fs::read_to_string(&p).unwrap(),
            "fn main() {\n    let x = 2;\n    println!(\"{x}\");\n}\n"
        );
        assert!(applied.snippet.contains("     2\t    let x = 2;"));
        assert!(applied.snippet.contains("     1\tfn main() {"));
        assert!(applied.snippet.contains("     4\t}"));
    }

    #[test]
    fn several_matches_need_replace_all() {
        let (_d, p) = file("a = 1\nb = 2\na = 1\n");
        let err = edit(&p, "a = 1", "a = 3", false).unwrap_err().to_string();
        assert!(err.contains("occurs 2 times (at lines 1, 3)"), "{err}");
        assert!(err.contains("replace_all"));
        assert_eq!(fs::read_to_string(&p).unwrap(), "a = 1\nb = 2\na = 1\n");
        let applied = edit(&p, "a = 1", "a = 3", true).unwrap();
        assert_eq!(applied.replaced, 2);
        assert_eq!(fs::read_to_string(&p).unwrap(), "a = 3\nb = 2\na = 3\n");
    }

    #[test]
    fn zero_matches_show_the_closest_lines() {
        let (_d, p) = file("fn alpha() {}\nfn compute_total(items: &[u32]) -> u32 {\n}\n");
        let err = edit(&p, "fn compute_totals(items: &[u64]) -> u32 {", "x", false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("was not found"), "{err}");
        assert!(
            err.contains("     2\tfn compute_total(items: &[u32]) -> u32 {"),
            "{err}"
        );
    }

    #[test]
    fn zero_matches_explain_whitespace_differences() {
        let (_d, p) = file("if x {\n        call();\n}\n");
        let err = edit(&p, "if x {\n    call();", "y", false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("lines 1-2 if whitespace is ignored"), "{err}");
    }

    #[test]
    fn zero_matches_spot_line_number_prefixes() {
        let (_d, p) = file("let a = 1;\n");
        let err = edit(&p, "     1\tlet a = 1;", "let a = 2;", false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line-number prefixes"), "{err}");
    }

    #[test]
    fn identical_or_empty_strings_are_refused() {
        let (_d, p) = file("x\n");
        let err = edit(&p, "x", "x", false).unwrap_err().to_string();
        assert!(err.contains("identical"), "{err}");
        let err = edit(&p, "", "y", false).unwrap_err().to_string();
        assert!(err.contains("old_string is empty"), "{err}");
    }

    #[test]
    fn crlf_files_stay_crlf() {
        let (_d, p) = file("one\r\ntwo\r\nthree\r\n");
        edit(&p, "one\ntwo", "1\n2", false).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "1\r\n2\r\nthree\r\n");
    }

    #[test]
    fn missing_file_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = edit(&dir.path().join("nope"), "a", "b", false).unwrap_err();
        assert!(matches!(err, ToolError::NotFound { .. }));
    }

    #[test]
    fn similarity_ranks_near_misses_high() {
        assert!(similarity("let total = 0;", "let totl = 0;") > 0.7);
        assert!(similarity("let total = 0;", "}") < 0.2);
    }
}
