//! ReadFile: a text file with line numbers, a window at a time.
//!
//! Output follows `cat -n` (right-aligned 1-based line number, a tab, the line) so
//! the model can cite lines and build EditFile calls from them. Long files are
//! read a window at a time (`offset`/`limit`) and the result says how to get the
//! next window; very long lines are cut so one minified file cannot flood the
//! context. Binary files and directories are refused with a pointer to the right
//! tool; so are FIFOs, sockets and devices, which could block the read forever.
//! The file is streamed: memory stays bounded by what is shown, however long a
//! line or however large a `limit` (one call returns at most
//! [`MAX_OUTPUT_BYTES`]; the result says where to continue).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::confined::{Parents, effective_roots, locate};
use super::input::opt_usize;
use super::write_file::count_lines;
use super::{ToolError, input_str, looks_binary, resolve_path, run_blocking, target_path};
use crate::tool::{PermissionTarget, ToolContext, ToolKind, ToolOutput, TypedTool};

/// Lines returned when the call gives no `limit`.
pub const DEFAULT_LIMIT: usize = 2000;
/// Characters kept of one line; the rest is replaced by a marker.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes of numbered lines one call returns at most, whatever the `limit`.
pub const MAX_OUTPUT_BYTES: usize = 512 * 1024;
/// Bytes of one line kept in memory: enough for [`MAX_LINE_CHARS`] characters
/// of any UTF-8 text; the rest of the line is only counted.
const MAX_LINE_BYTES: usize = MAX_LINE_CHARS * 4;

const NAME: &str = "ReadFile";

/// Reads a text file with line numbers.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

#[derive(Debug, Deserialize, JsonSchema)]
/// Input of ReadFile.
pub struct ReadFileInput {
    /// Absolute or relative to the working directory.
    path: String,
    /// 1-based line to start at.
    #[serde(default, deserialize_with = "opt_usize")]
    #[schemars(range(min = 1))]
    offset: Option<usize>,
    #[serde(default, deserialize_with = "opt_usize")]
    #[schemars(range(min = 1), extend("description" = format!("Lines to return (default {DEFAULT_LIMIT}).")))]
    limit: Option<usize>,
}

impl TypedTool for ReadFile {
    type Input = ReadFileInput;
    const NAME: &'static str = NAME;

    // The limits it enforces (line length, binary files, directories) it reports when
    // they apply; the description keeps what a model must know to call it well.
    fn description(&self) -> String {
        "Reads a text file. Lines come numbered like `cat -n` (number, tab, line); the prefix \
         is not part of the file. Read long files in parts with `offset` and `limit`: the \
         result says when it is partial."
            .to_string()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn permission_target(&self, input: &Value) -> PermissionTarget {
        input_str(input, "path").map_or(PermissionTarget::None, |p| {
            PermissionTarget::Path(target_path(p))
        })
    }

    async fn run(&self, input: ReadFileInput, ctx: &ToolContext) -> ToolOutput {
        let path = match resolve_path(&ctx.cwd, &input.path) {
            Ok(path) => path,
            Err(e) => return e.into_output(),
        };
        let roots = effective_roots(&ctx.allowed_roots, &ctx.cwd);
        let start = input.offset.unwrap_or(1).max(1);
        let limit = input.limit.filter(|&l| l > 0).unwrap_or(DEFAULT_LIMIT);
        let read = move || {
            let file = locate(&path, &roots, Parents::Existing)?.open_read()?;
            read_numbered(file, &path, start, limit)
        };
        match run_blocking(NAME, &ctx.cancel, read).await {
            Ok(text) => ToolOutput::ok(text),
            Err(e) => e.into_output(),
        }
    }
}

/// Reads lines `start..start + limit` (1-based) of `file` (opened from
/// `path`), numbered, with a footer when the result is partial.
pub(crate) fn read_numbered(
    mut file: File,
    path: &Path,
    start: usize,
    limit: usize,
) -> Result<String, ToolError> {
    let io_err = |e| ToolError::io("read", path, e);
    let mut head = Vec::with_capacity(8 * 1024);
    (&mut file)
        .take(8 * 1024)
        .read_to_end(&mut head)
        .map_err(io_err)?;
    if looks_binary(&head) {
        return Err(ToolError::Binary {
            path: path.to_path_buf(),
        });
    }
    if head.is_empty() {
        return Ok(format!("<{} is empty: 0 lines>", path.display()));
    }
    let mut reader = BufReader::with_capacity(64 * 1024, Cursor::new(head).chain(file));

    let mut out = String::new();
    let mut line = Vec::new();
    let mut number = 0usize;
    let mut shown = 0usize;
    let mut cut_lines = 0usize;
    let mut capped = false;
    let end = start.saturating_add(limit);
    let total = loop {
        if number + 1 >= end || out.len() >= MAX_OUTPUT_BYTES {
            // Past the window: only count what is left.
            capped = number + 1 < end;
            break number + count_lines(&mut reader).map_err(io_err)?;
        }
        let keep = if number + 1 < start {
            0
        } else {
            MAX_LINE_BYTES
        };
        let Some(dropped) = next_line(&mut reader, &mut line, keep).map_err(io_err)? else {
            break number;
        };
        number += 1;
        if number < start {
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\n').trim_end_matches('\r');
        let chars = text.chars().count();
        if chars > MAX_LINE_CHARS || dropped > 0 {
            cut_lines += 1;
            let cut: String = text.chars().take(MAX_LINE_CHARS).collect();
            let rest = chars.saturating_sub(MAX_LINE_CHARS) + dropped;
            out.push_str(&format!(
                "{number:>6}\t{cut}… [line cut: {rest} more characters]\n"
            ));
        } else {
            out.push_str(&format!("{number:>6}\t{text}\n"));
        }
        shown += 1;
    };
    if shown == 0 {
        return Err(ToolError::OutOfRange {
            path: path.to_path_buf(),
            message: format!(
                "offset {start} is past the end of the file, which has {total} lines; \
                 use an offset between 1 and {total}"
            ),
        });
    }
    let last = start + shown - 1;
    if start > 1 || last < total {
        out.push_str(&format!("\n[Showing lines {start}-{last} of {total}."));
        if capped && last < total {
            out.push_str(&format!(
                " One call returns at most {} KiB.",
                MAX_OUTPUT_BYTES / 1024
            ));
        }
        if last < total {
            out.push_str(&format!(
                " To read more, call ReadFile with offset={} (and a limit if you need fewer lines).",
                last + 1
            ));
        }
        out.push(']');
    }
    if cut_lines > 0 {
        out.push_str(&format!(
            "\n[{cut_lines} line(s) longer than {MAX_LINE_CHARS} characters were cut; use Grep \
             or Bash to inspect them.]"
        ));
    }
    Ok(out.trim_end_matches('\n').to_string())
}

/// Reads the next line into `line`, keeping at most `keep` bytes of it (its
/// newline included when kept). Returns `None` at the end of the input, else
/// how many characters of the line were dropped (counted as UTF-8 lead bytes,
/// the newline not included), so a 100 MB line costs `keep` bytes of memory.
fn next_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    keep: usize,
) -> io::Result<Option<usize>> {
    line.clear();
    let mut any = false;
    let mut dropped = 0usize;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(any.then_some(dropped));
        }
        any = true;
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..newline.map_or(buf.len(), |i| i + 1)];
        let take = chunk.len().min(keep.saturating_sub(line.len()));
        line.extend_from_slice(&chunk[..take]);
        dropped += chunk[take..]
            .iter()
            .filter(|&&b| b != b'\n' && (b & 0xC0) != 0x80)
            .count();
        let used = chunk.len();
        reader.consume(used);
        if newline.is_some() {
            return Ok(Some(dropped));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::tool::Tool;
    use serde_json::json;
    use std::fs;
    use std::path::PathBuf;

    /// [`super::read_numbered`] of a path, opened as the tool opens it with the
    /// path's directory as the allowed root.
    fn read_numbered(p: &Path, start: usize, limit: usize) -> Result<String, ToolError> {
        let root = fs::canonicalize(p.parent().unwrap()).unwrap();
        let file = locate(p, &[root], Parents::Existing)?.open_read()?;
        super::read_numbered(file, p, start, limit)
    }

    fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
        let p = dir.join(name);
        fs::write(&p, content).unwrap();
        p
    }

    #[test]
    fn numbers_lines_from_one() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.txt", b"alpha\r\nbeta\ngamma");
        let out = read_numbered(&p, 1, 100).unwrap();
        assert_eq!(out, "     1\talpha\n     2\tbeta\n     3\tgamma");
    }

    #[test]
    fn window_says_how_to_read_more() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (1..=10).map(|i| format!("l{i}\n")).collect();
        let p = write(dir.path(), "a.txt", text.as_bytes());
        let out = read_numbered(&p, 3, 4).unwrap();
        assert!(out.starts_with("     3\tl3\n"));
        assert!(out.contains("     6\tl6\n"));
        assert!(!out.contains("l7"));
        assert!(out.contains("Showing lines 3-6 of 10"), "{out}");
        assert!(out.contains("offset=7"), "{out}");
    }

    #[test]
    fn total_counts_a_last_line_without_newline() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.txt", b"1\n2\n3\n4");
        let out = read_numbered(&p, 1, 2).unwrap();
        assert!(out.contains("of 4."), "{out}");
        let p = write(dir.path(), "b.txt", b"1\n2\n3\n4\n");
        let out = read_numbered(&p, 1, 2).unwrap();
        assert!(out.contains("of 4."), "{out}");
        let p = write(dir.path(), "c.txt", b"1\n2\n\n\n");
        let out = read_numbered(&p, 1, 1).unwrap();
        assert!(out.contains("of 4."), "{out}");
    }

    #[test]
    fn whole_file_has_no_footer() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.txt", b"one\ntwo\n");
        assert_eq!(read_numbered(&p, 1, 2).unwrap(), "     1\tone\n     2\ttwo");
    }

    #[test]
    fn long_lines_are_cut_with_a_marker() {
        let dir = tempfile::tempdir().unwrap();
        let long = "x".repeat(MAX_LINE_CHARS + 50);
        let p = write(dir.path(), "a.txt", format!("{long}\nshort\n").as_bytes());
        let out = read_numbered(&p, 1, 10).unwrap();
        assert!(out.contains("[line cut: 50 more characters]"));
        assert!(out.contains("     2\tshort"));
        assert!(out.contains("1 line(s) longer than"));
    }

    #[test]
    fn a_100_mb_line_is_cut_without_being_held_whole() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("minified.js");
        let mut file = std::io::BufWriter::new(fs::File::create(&p).unwrap());
        let chunk = vec![b'x'; 1024 * 1024];
        for _ in 0..100 {
            file.write_all(&chunk).unwrap();
        }
        file.write_all(b"\nshort\n").unwrap();
        drop(file);
        let out = read_numbered(&p, 1, 1_000_000_000).unwrap();
        let more = 100 * 1024 * 1024 - MAX_LINE_CHARS;
        assert!(
            out.contains(&format!("[line cut: {more} more characters]")),
            "{}",
            &out[out.len().saturating_sub(300)..]
        );
        assert!(out.contains("     2\tshort"), "{}", &out[out.len() - 300..]);
        assert!(out.len() < MAX_LINE_CHARS + 1000, "{} bytes", out.len());

        // The peak memory of the read, measured in a fresh process (this test
        // binary re-run on the probe below) so no other test counts.
        if cfg!(target_os = "linux") {
            let probe = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "tools::read_file::tests::probe_peak_memory_of_a_read",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("ROO_READ_PROBE_FILE", &p)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&probe.stdout);
            assert!(probe.status.success(), "{stdout}");
            let peak_kb: u64 = stdout
                .lines()
                .find_map(|l| l.split("PEAK_KB=").nth(1))
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_else(|| panic!("no PEAK_KB in {stdout}"))
                .parse()
                .unwrap();
            assert!(
                peak_kb < 48 * 1024,
                "reading the file peaked at {peak_kb} kB"
            );
        }
    }

    #[test]
    #[ignore = "run in a child process by a_100_mb_line_is_cut_without_being_held_whole"]
    fn probe_peak_memory_of_a_read() {
        let Some(p) = std::env::var_os("ROO_READ_PROBE_FILE") else {
            return;
        };
        let out = read_numbered(Path::new(&p), 1, 1_000_000_000).unwrap();
        assert!(out.contains("line cut"));
        let status = fs::read_to_string("/proc/self/status").unwrap();
        let peak = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_string();
        println!("PEAK_KB={peak}");
    }

    #[test]
    fn a_huge_limit_is_capped_by_the_output_size() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (1..=200_000).map(|i| format!("line {i}\n")).collect();
        let p = write(dir.path(), "long.txt", text.as_bytes());
        let out = read_numbered(&p, 1, 1_000_000_000).unwrap();
        assert!(out.len() <= MAX_OUTPUT_BYTES + 500, "{} bytes", out.len());
        let footer = out.lines().last().unwrap();
        assert!(footer.contains("of 200000."), "{footer}");
        assert!(footer.contains("at most 512 KiB"), "{footer}");
        let next: usize = footer
            .split("offset=")
            .nth(1)
            .unwrap()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(out.contains(&format!("{:>6}\tline {}\n", next - 1, next - 1)));
        assert!(!out.contains(&format!("\tline {next}\n")));
    }

    #[test]
    fn refuses_binary_files_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "bin", b"ELF\0\x01\x02");
        let err = read_numbered(&p, 1, 10).unwrap_err();
        assert!(matches!(err, ToolError::Binary { .. }));
        assert!(err.to_string().contains("binary"));
        let err = read_numbered(dir.path(), 1, 10).unwrap_err();
        assert!(matches!(err, ToolError::IsDirectory { .. }));
    }

    #[test]
    fn missing_file_and_offset_past_end_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_numbered(&dir.path().join("nope"), 1, 10).unwrap_err();
        assert!(matches!(err, ToolError::NotFound { .. }));
        let p = write(dir.path(), "a.txt", b"1\n2\n");
        let err = read_numbered(&p, 9, 10).unwrap_err();
        assert!(err.to_string().contains("has 2 lines"), "{err}");
    }

    #[test]
    fn empty_file_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "e.txt", b"");
        assert!(read_numbered(&p, 1, 10).unwrap().contains("is empty"));
    }

    #[tokio::test]
    async fn call_resolves_relative_paths_against_cwd() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.txt", b"hello\n");
        let ctx = ToolContext::new(dir.path().to_path_buf(), dir.path().join("session"));
        let out = ReadFile.call(json!({"path": "a.txt"}), &ctx).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(out.content, "     1\thello");
        let out = ReadFile.call(json!({"offset": 1}), &ctx).await;
        assert!(out.is_error);
        assert!(out.content.contains("missing field `path`"));
    }
}
