//! Deciding whether this run honours the project's config files in full.
//!
//! A project is trusted when the user's `trusted_projects` lists it or the run
//! passes `--trust-project` (not saved). Otherwise its `.roocode/config.yaml`
//! and `.roocode/config.local.yaml` may only narrow (see
//! `roo_agent::config::trust`). The interactive lead asks once — only when the
//! project's files hold something that trust would enable — and saves a "yes"
//! to the trust list; a `-p` run never asks and lists what it ignored.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use roo_agent::config::{ConfigFiles, IgnoredSetting, ProjectTrust, trust_project};

use crate::exit::AppError;

/// The config to use, and notices about what was ignored (one per setting).
pub struct TrustDecision {
    pub config: ConfigFiles,
    pub notices: Vec<String>,
}

/// Decides the trust of `project_root`. `config` must have been loaded
/// untrusted: its `ignored()` is what trust would enable.
pub async fn decide(
    config: ConfigFiles,
    project_root: &Path,
    roo_home: &Path,
    trust_flag: bool,
    interactive: bool,
) -> Result<TrustDecision, AppError> {
    let config_err = |e: roo_agent::config::ConfigError| AppError::Config(e.to_string());
    if trust_flag || config.lists_as_trusted(project_root) {
        return Ok(TrustDecision {
            config: config
                .with_trust(ProjectTrust::Trusted)
                .map_err(config_err)?,
            notices: Vec::new(),
        });
    }
    // Nothing to widen: no question, nothing ignored.
    if config.ignored().is_empty() {
        return Ok(TrustDecision {
            config,
            notices: Vec::new(),
        });
    }
    if interactive {
        let question = question(project_root, config.ignored());
        let yes = tokio::task::spawn_blocking(move || ask(&question))
            .await
            .map_err(|e| AppError::Io(format!("failed to ask about trusting the project: {e}")))?;
        if yes {
            let saved = match trust_project(roo_home, project_root) {
                Ok(()) => format!(
                    "trusted {} (saved in {}; delete it from trusted_projects there to undo)",
                    project_root.display(),
                    roo_agent::config::user_config_path(roo_home).display()
                ),
                // The answer still holds for this session.
                Err(e) => format!(
                    "trusted {} for this session only: {e}",
                    project_root.display()
                ),
            };
            return Ok(TrustDecision {
                config: config
                    .with_trust(ProjectTrust::Trusted)
                    .map_err(config_err)?,
                notices: vec![saved],
            });
        }
    }
    let hint = if interactive {
        "this project is not trusted"
    } else {
        "this project is not trusted; pass --trust-project to honour it"
    };
    let notices = config
        .ignored()
        .iter()
        .map(|ignored| format!("ignored {ignored} ({hint})"))
        .collect();
    Ok(TrustDecision { config, notices })
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
