//! The interactive lead's trust question, asked on the terminal.
//!
//! The decision itself (trust list, `--trust-project`, what is ignored, saving a
//! "yes") is `roo_team::trust`'s, shared with every agent; the interactive lead asks
//! once — only when the project's files hold something that trust would enable — and a
//! `-p` run never asks.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use futures_util::future::BoxFuture;
use roo_agent::config::IgnoredSetting;
use roo_team::TrustQuestion;

/// Asks on the terminal (before the REPL takes it over).
pub struct TerminalQuestion;

impl TrustQuestion for TerminalQuestion {
    fn ask<'a>(
        &'a self,
        project_root: &'a Path,
        ignored: &'a [IgnoredSetting],
    ) -> BoxFuture<'a, bool> {
        let question = question(project_root, ignored);
        Box::pin(async move {
            // The terminal read blocks; a failed task counts as "no".
            tokio::task::spawn_blocking(move || ask(&question))
                .await
                .unwrap_or(false)
        })
    }
}

/// The question: which files hold what, and what trusting means.
fn question(project_root: &Path, ignored: &[IgnoredSetting]) -> String {
    let mut text = format!(
        "{} has RooCode settings that apply only if you trust this folder:\n",
        project_root.display()
    );
    let mut files: Vec<&PathBuf> = ignored.iter().map(|i| &i.path).collect();
    files.dedup();
    for file in files {
        let keys: Vec<&str> = ignored
            .iter()
            .filter(|i| &i.path == file)
            .map(|i| i.key.as_str())
            .collect();
        text.push_str(&format!("  {}: {}\n", file.display(), keys.join(", ")));
    }
    text.push_str(
        "A project's settings can pick the model server (it receives your API key) or a script as the model, \
         run commands (hooks, MCP servers), allow tool calls without asking and loosen the permission mode.\n\
         Without trust, only its deny/ask rules and a stricter mode apply.\n\
         Trust this folder? Say yes only if you trust its authors. [y/N] ",
    );
    text
}

/// Prints the question and reads a line from the terminal; only `y`/`yes`
/// counts as yes (end of input is no). Reads byte by byte from the descriptor,
/// so nothing typed after the answer is swallowed by a buffer before the REPL
/// reads the terminal.
fn ask(question: &str) -> bool {
    let mut out = std::io::stdout();
    let _ = out.write_all(question.as_bytes());
    let _ = out.flush();
    let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned() else {
        return false;
    };
    let mut terminal = std::fs::File::from(fd);
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 64 {
        match terminal.read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => break,
            Ok(1) => line.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            _ => break,
        }
    }
    let answer = String::from_utf8_lossy(&line).trim().to_ascii_lowercase();
    matches!(answer.as_str(), "y" | "yes")
}
