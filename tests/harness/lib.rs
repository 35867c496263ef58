//! Harness for the end-to-end tests: locate the built binaries, make temp homes and
//! directories, run commands with a readable failure report, wait for conditions.
//!
//! The binaries are found next to the test executable (`target/<profile>/deps/e2e-…` →
//! `target/<profile>/roo-mail`), so the tests drive exactly what `cargo build --workspace
//! --bins` produced with the same `CARGO_TARGET_DIR`. Every [`TestCommand`] runs with a
//! private `ROO_HOME` and without the developer's `ROO_*` variables, so a test never
//! touches real state.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod command;
mod diff;
mod dir;
pub mod hosts;
mod mock_llm;
pub mod pg;
pub mod pg_proxy;
mod process;
mod repo;
mod tmux;

pub use command::{ChildGuard, RunOutput, TestCommand};
pub use diff::line_diff;
pub use dir::{TempDir, TempHome};
pub use mock_llm::MockLlm;
pub use process::{child_of, process_gone, read_pid};
pub use repo::{bugfix_repo, demo_data, git, git_init_commit, git_repo_with_identity};
pub use tmux::{Pane, Tmux, TmuxServer, end_tmux_server, tmux_socket_path};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why the OS sandbox's confinement cannot be tested with files under `base`, if it
/// cannot: the sandbox leaves the system temp dirs (`/tmp`, `/var/tmp`, `$TMPDIR`)
/// writable, so a checkout that lives there (e.g. a CI clone in `/tmp`) puts every
/// "outside the project" path of a test inside a writable directory.
/// Whether a command's output shows the OS sandbox refusing it: Landlock says
/// "Permission denied", the namespace layer's read-only file system "Read-only file
/// system", and a hidden path is simply not there.
pub fn sandbox_refused(output: &str) -> bool {
    [
        "Permission denied",
        "Read-only file system",
        "No such file or directory",
    ]
    .iter()
    .any(|why| output.contains(why))
}

pub fn confinement_untestable(base: &Path) -> Option<String> {
    let base = base.canonicalize().unwrap_or_else(|_| base.to_path_buf());
    let temp_dirs = [
        PathBuf::from("/tmp"),
        PathBuf::from("/var/tmp"),
        std::env::temp_dir(),
    ];
    temp_dirs.iter().find_map(|dir| {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        base.starts_with(&dir).then(|| {
            format!(
                "the build directory {} lies inside {}, which the command sandbox leaves \
                 writable, so confinement cannot be observed there; build outside it",
                base.display(),
                dir.display()
            )
        })
    })
}

/// Path of a built binary of the workspace (`roo-mail`, `roo-task`, …).
///
/// Panics with instructions if it has not been built.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("locate the test executable");
    // target/<profile>/deps/<test-binary> → target/<profile>/<name>
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test executable lives in target/<profile>/deps");
    let path = profile_dir.join(name);
    assert!(
        path.is_file(),
        "binary {name} not found at {}: build the binaries first with \
         `cargo build --workspace --bins` (same CARGO_TARGET_DIR), or run scripts/test",
        path.display()
    );
    path
}

/// `PATH` with this build's binaries first (`roo-mail` in the commands a lead runs).
pub fn path_with_bins() -> String {
    format!(
        "{}:{}",
        bin("roo-mail").parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// `target/mcp-servers`, where `scripts/install-mcp-servers` puts the MCP servers the
/// tests run (the npm reference server `@modelcontextprotocol/server-everything` and
/// the `many-tools.mjs` fixture). Panics with how to install them when they are missing:
/// the MCP tests must not skip silently.
pub fn mcp_servers_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("locate the test executable");
    let target = exe
        .parent()
        .and_then(|deps| deps.parent())
        .and_then(|profile| profile.parent())
        .expect("the test executable lives in target/<profile>/deps");
    let dir = target.join("mcp-servers");
    let everything = dir.join(EVERYTHING_ENTRY);
    assert!(
        everything.is_file() && dir.join("many-tools.mjs").is_file(),
        "the MCP test servers are not installed in {}: run scripts/install-mcp-servers \
         (needs node >= 18 and npm; scripts/test and .ci/run do it)",
        dir.display()
    );
    dir
}

/// The entry point of server-everything below [`mcp_servers_dir`].
pub const EVERYTHING_ENTRY: &str =
    "node_modules/@modelcontextprotocol/server-everything/dist/index.js";

/// Polls `check` until it returns `Some`, or panics after `timeout` naming `what` and the
/// last state `describe` reports.
pub fn wait_until<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Option<T>,
    describe: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(value) = check() {
            return value;
        }
        if Instant::now() >= deadline {
            panic!(
                "timed out after {timeout:?} waiting for {what}; last state:\n{}",
                describe()
            );
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}
