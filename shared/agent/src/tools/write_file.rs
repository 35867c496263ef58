//! WriteFile: create or replace a whole file, atomically.
//!
//! The content goes to a temporary file in the same directory, is flushed to disk
//! and renamed over the target, so a crash or a concurrent reader never sees half
//! a file. An existing file keeps its permission bits; writing through a symlink
//! replaces the file it points to, not the link. The directory is reached
//! without following symlinks (`confined`), so a link swapped in after the
//! permission check cannot redirect the write; a FIFO or device at the path is
//! refused. EditFile writes the same way.

use std::io::{BufRead, BufReader, Read};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::confined::{Parents, effective_roots, locate};
use super::{input_str, resolve_path, run_blocking, target_path};
use crate::tool::{PermissionTarget, ToolContext, ToolKind, ToolOutput, TypedTool};

const NAME: &str = "WriteFile";

/// Creates or overwrites a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

#[derive(Debug, Deserialize, JsonSchema)]
/// Input of WriteFile.
pub struct WriteFileInput {
    /// Absolute or relative to the working directory.
    path: String,
    /// The complete new content.
    content: String,
}

impl TypedTool for WriteFile {
    type Input = WriteFileInput;
    const NAME: &'static str = NAME;

    fn description(&self) -> String {
        "Creates a file, with any missing parent directories, or replaces its whole content. \
         To change part of a file use EditFile; read a file before overwriting it. Create only \
         the files the task needs."
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

    async fn run(&self, input: WriteFileInput, ctx: &ToolContext) -> ToolOutput {
        let path = match resolve_path(&ctx.cwd, &input.path) {
            Ok(path) => path,
            Err(e) => return e.into_output(),
        };
        let roots = effective_roots(&ctx.allowed_roots, &ctx.cwd);
        let shown = input.path.clone();
        let result = run_blocking(NAME, &ctx.cancel, move || {
            let located = locate(&path, &roots, Parents::Create)?;
            let mode = located.existing_mode()?;
            let previous = mode.map(|_| {
                located
                    .open_read()
                    .ok()
                    .and_then(|file| count_lines(file).ok())
                    .unwrap_or(0)
            });
            located.write_atomic(input.content.as_bytes(), mode)?;
            Ok((previous, line_count(&input.content)))
        })
        .await;
        match result {
            Ok((None, lines)) => ToolOutput::ok(format!("Created {shown} ({lines} lines).")),
            Ok((Some(before), lines)) => ToolOutput::ok(format!(
                "Overwrote {shown} ({lines} lines; it had {before} lines before)."
            )),
            Err(e) => e.into_output(),
        }
    }
}

/// Lines as an editor counts them: a trailing newline does not start a new line.
pub(crate) fn line_count(text: &str) -> usize {
    text.lines().count()
}

/// [`line_count`] of a file, streamed so a huge file is never held in memory.
pub(crate) fn count_lines(file: impl Read) -> std::io::Result<usize> {
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let (mut lines, mut open_line) = (0usize, false);
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        for &b in buf {
            if b == b'\n' {
                lines += 1;
                open_line = false;
            } else {
                open_line = true;
            }
        }
        let n = buf.len();
        reader.consume(n);
    }
    Ok(lines + usize::from(open_line))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::tool::Tool;
    use serde_json::json;
    use std::fs::{self, Permissions};
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn ctx(dir: &Path) -> ToolContext {
        ToolContext::new(dir.to_path_buf(), dir.join("session"))
    }

    #[tokio::test]
    async fn creates_parents_then_reports_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let out = WriteFile
            .call(json!({"path": "a/b/c.txt", "content": "one\ntwo\n"}), &ctx)
            .await;
        assert_eq!(out.content, "Created a/b/c.txt (2 lines).");
        assert_eq!(
            fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "one\ntwo\n"
        );
        let out = WriteFile
            .call(json!({"path": "a/b/c.txt", "content": "x"}), &ctx)
            .await;
        assert_eq!(
            out.content,
            "Overwrote a/b/c.txt (1 lines; it had 2 lines before)."
        );
        // No temporary files are left behind.
        let names: Vec<_> = fs::read_dir(dir.path().join("a/b"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["c.txt"]);
    }

    #[tokio::test]
    async fn keeps_mode_and_follows_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("script.sh");
        fs::write(&real, "old").unwrap();
        fs::set_permissions(&real, Permissions::from_mode(0o750)).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link.sh")).unwrap();
        let out = WriteFile
            .call(
                json!({"path": "link.sh", "content": "new"}),
                &ctx(dir.path()),
            )
            .await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(
            fs::metadata(&real).unwrap().permissions().mode() & 0o777,
            0o750
        );
        assert!(
            fs::symlink_metadata(dir.path().join("link.sh"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[tokio::test]
    async fn refuses_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let out = WriteFile
            .call(json!({"path": ".", "content": "x"}), &ctx(dir.path()))
            .await;
        assert!(out.is_error);
        assert!(out.content.contains("is a directory"), "{}", out.content);
    }
}
