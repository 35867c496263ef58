//! Spilling large tool results to disk.
//!
//! Tool results are most of what fills a context window, and a single huge one
//! (a test log, a generated file) can crowd out everything else. The loop passes
//! every result through [`spill_if_large`]: a result over
//! `ToolContext::max_result_chars` is written whole to
//! `<session_dir>/tool-results/<call id>.txt` (directory 0700, file 0600) and the
//! model gets a preview — the start and the end — with the path and how to read
//! the rest with ReadFile or search it with Grep. Nothing is lost; the model
//! decides what it needs. (The session directory must be an allowed root of the
//! permission policy for those reads to pass the sandbox.)

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::exec::head_tail::preview;
use crate::tool::{ToolContext, ToolOutput};

/// Characters of the start of a spilled result shown in the preview.
pub const PREVIEW_HEAD_CHARS: usize = 2048;
/// Characters of the end of a spilled result shown in the preview.
pub const PREVIEW_TAIL_CHARS: usize = 1024;

/// Returns `output` unchanged if it fits in `ctx.max_result_chars`; otherwise
/// saves the full text under the session directory and returns a preview that
/// names the file. `is_error` is kept. If the file cannot be written the preview
/// says so (the middle of the output is then lost, which beats a flooded context).
pub fn spill_if_large(output: ToolOutput, call_id: &str, ctx: &ToolContext) -> ToolOutput {
    let limit = ctx
        .max_result_chars
        .max(PREVIEW_HEAD_CHARS + PREVIEW_TAIL_CHARS);
    // Cheap test first: a string of at most `limit` bytes has at most `limit` chars.
    if output.content.len() <= limit || output.content.chars().count() <= limit {
        return output;
    }
    let Some((head, tail)) = preview(&output.content, PREVIEW_HEAD_CHARS, PREVIEW_TAIL_CHARS)
    else {
        return output;
    };
    let chars = output.content.chars().count();
    let lines = output.content.lines().count();
    let path = spill_path(&ctx.session_dir, call_id);
    let note = match save(&path, &output.content) {
        Ok(()) => format!(
            "[This result is too large to show whole ({chars} characters, {lines} lines). The \
             full text is saved in {path}. Below are its start and its end. To see more, call \
             ReadFile with path {path} and an offset/limit (lines are numbered from 1), or \
             search it with Grep.]",
            path = path.display()
        ),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "could not save a large tool result");
            format!(
                "[This result is too large to show whole ({chars} characters, {lines} lines) \
                 and saving it to {} failed ({e}); only its start and end are shown. Re-run the \
                 call with narrower parameters to see the middle.]",
                path.display()
            )
        }
    };
    ToolOutput {
        content: format!("{note}\n\n{head}\n\n… [middle omitted] …\n\n{tail}"),
        is_error: output.is_error,
    }
}

/// `<session_dir>/tool-results/<id>.txt`, with the id reduced to safe characters
/// so a strange call id can never name a path outside the directory.
fn spill_path(session_dir: &Path, call_id: &str) -> PathBuf {
    let mut name: String = call_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect();
    if name.is_empty() {
        name.push_str("result");
    }
    session_dir.join("tool-results").join(format!("{name}.txt"))
}

/// Writes the full text, creating the directory 0700 and the file 0600.
fn save(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    // Never through a symlink, and never blocking on a FIFO planted at the name
    // (opening one for writing without a reader fails at once with O_NONBLOCK).
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    file.set_len(0)?;
    file.write_all(text.as_bytes())?;
    // A pre-existing file keeps its mode on open; make sure it is private.
    fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn ctx(dir: &Path, max: usize) -> ToolContext {
        ToolContext {
            max_result_chars: max,
            ..ToolContext::new(dir.to_path_buf(), dir.join("session"))
        }
    }

    #[test]
    fn small_results_pass_through() {
        let dir = tempfile::tempdir().unwrap();
        let out = ToolOutput::ok("short");
        assert_eq!(
            spill_if_large(out.clone(), "id1", &ctx(dir.path(), 10_000)),
            out
        );
        assert!(!dir.path().join("session").exists());
    }

    #[test]
    fn large_results_are_saved_whole_with_a_preview() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let out = spill_if_large(
            ToolOutput::error(text.clone()),
            "call/../x",
            &ctx(dir.path(), 10_000),
        );
        assert!(out.is_error, "the error flag is kept");
        let saved = dir.path().join("session/tool-results/call____x.txt");
        assert_eq!(fs::read_to_string(&saved).unwrap(), text);
        let mode = fs::metadata(&saved).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = fs::metadata(saved.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dir_mode, 0o700);
        assert!(out.content.contains(&saved.display().to_string()));
        assert!(out.content.contains("ReadFile"));
        assert!(out.content.contains("line 0\n"));
        assert!(out.content.contains("line 4999"));
        assert!(!out.content.contains("line 2500\n"));
        assert!(out.content.len() < PREVIEW_HEAD_CHARS + PREVIEW_TAIL_CHARS + 1000);
    }

    #[test]
    fn multibyte_text_is_measured_in_characters() {
        let dir = tempfile::tempdir().unwrap();
        // 4000 characters but 12000 bytes: under a 5000-character limit.
        let text = "語".repeat(4000);
        let out = spill_if_large(ToolOutput::ok(text.clone()), "id", &ctx(dir.path(), 5000));
        assert_eq!(out.content, text);
    }

    #[test]
    fn a_fifo_at_the_spill_path_fails_instead_of_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = spill_path(&dir.path().join("session"), "id");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let out = spill_if_large(
            ToolOutput::ok("x".repeat(20_000)),
            "id",
            &ctx(dir.path(), 10_000),
        );
        assert!(out.content.contains("failed"), "{}", &out.content[..300]);
    }

    #[test]
    fn unwritable_session_dir_still_gives_a_preview() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("session"), "a file, not a directory").unwrap();
        let text = "x".repeat(20_000);
        let out = spill_if_large(ToolOutput::ok(text), "id", &ctx(dir.path(), 10_000));
        assert!(out.content.contains("failed"), "{}", &out.content[..300]);
        assert!(out.content.len() < 5000);
    }
}
