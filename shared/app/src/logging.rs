//! Diagnostic logs: off unless `ROO_LOG` is set, then written to
//! `ROO_HOME/logs/<name>.log` (never to the terminal, which belongs to the UI).

use std::fs::OpenOptions;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use tracing_subscriber::EnvFilter;

/// Starts logging for process `name` if `ROO_LOG` holds a filter (`debug`,
/// `roo_llm=trace,info`, …). Problems setting it up are reported on stderr once and
/// otherwise ignored: logs must never stop the agent.
pub fn init(roo_home: &Path, name: &str) {
    let Some(filter) = std::env::var("ROO_LOG")
        .ok()
        .filter(|f| !f.trim().is_empty())
    else {
        return;
    };
    let filter = match EnvFilter::try_new(&filter) {
        Ok(filter) => filter,
        Err(e) => {
            eprintln!("roo: ignoring ROO_LOG={filter}: {e}");
            return;
        }
    };
    let dir = roo_home.join("logs");
    let file = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .and_then(|()| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(dir.join(format!("{name}.log")))
        });
    match file {
        Ok(file) => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .try_init();
        }
        Err(e) => eprintln!("roo: cannot write logs to {}: {e}", dir.display()),
    }
}

/// Sends logs to `file` (a teammate's `teams/<team>/logs/<name>.log`) with the filter in
/// `ROO_LOG`, else `info`. A second call, or a bad filter, leaves logging as it is.
pub fn init_file(file: std::fs::File) {
    let filter = std::env::var("ROO_LOG")
        .ok()
        .filter(|f| !f.trim().is_empty())
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
}
