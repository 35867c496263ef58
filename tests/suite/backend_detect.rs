//! `roo-lead --print-backend`: where teammates would run, for each environment case of
//! docs/BACKENDS.md "Detection" (TMUX set, iTerm2 with and without `it2`, no terminal,
//! tmux absent), and
//! a forced backend that cannot work (exit 2). `tmux` and `it2` are fake scripts in a
//! private PATH directory, so the real ones on this machine change nothing; the cases
//! with a terminal run inside a private tmux server.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use roo_tests::{TempDir, TempHome, TestCommand, Tmux, bin};

const TMUX_VAR: &str = "/tmp/tmux-1000/default,4242,0";
const ITERM_SESSION: &str = "w0t0p0:2A3B1C4D-0000-4000-8000-00000000ABCD";

/// A PATH directory holding fake executables named `tools` (each exits 0).
fn fake_path(root: &TempDir, name: &str, tools: &[&str]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for tool in tools {
        let path = dir.join(tool);
        std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

/// `roo-lead --print-backend` with stdin and stdout not terminals and only `path` on PATH.
fn print_backend(home: &TempHome, path: &Path) -> TestCommand {
    home.cmd("roo-lead")
        .arg("--print-backend")
        .env("PATH", path)
}

#[test]
fn inside_tmux_teammates_split_the_current_window() {
    let home = TempHome::new();
    let path = fake_path(&home.home, "bin", &["tmux"]);
    let out = print_backend(&home, &path).env("TMUX", TMUX_VAR).run();
    out.assert_ok();
    out.assert_stdout_contains("backend: tmux (a pane per teammate in the current window)\n");
    out.assert_stdout_contains("reason: running inside tmux ($TMUX is set)\n");
    out.assert_stdout_contains(&format!("using: {}\n", path.join("tmux").display()));
}

#[test]
fn inside_tmux_without_a_tmux_binary_says_so_and_falls_through() {
    let home = TempHome::new();
    let path = fake_path(&home.home, "bin", &[]);
    let out = print_backend(&home, &path).env("TMUX", TMUX_VAR).run();
    out.assert_ok();
    out.assert_stdout_contains("backend: in-process");
    out.assert_stdout_contains("note: $TMUX is set but tmux is not on PATH");
}

#[test]
fn inside_iterm2_with_it2_teammates_open_iterm2_panes() {
    let home = TempHome::new();
    let path = fake_path(&home.home, "bin", &["it2", "tmux"]);
    for (var, value) in [
        ("TERM_PROGRAM", "iTerm.app"),
        ("ITERM_SESSION_ID", ITERM_SESSION),
    ] {
        let out = print_backend(&home, &path).env(var, value).run();
        out.assert_ok();
        out.assert_stdout_contains("backend: iterm2 (a pane per teammate, split from this one");
        out.assert_stdout_contains("reason: running inside iTerm2 and it2 is installed\n");
        out.assert_stdout_contains(&format!("using: {}\n", path.join("it2").display()));
    }
}

#[test]
fn inside_iterm2_without_it2_teammates_use_a_detached_tmux_session() {
    let home = TempHome::new();
    let path = fake_path(&home.home, "bin", &["tmux"]);
    let out = print_backend(&home, &path)
        .env("TERM_PROGRAM", "iTerm.app")
        .args(["--team", "crew"])
        .run();
    out.assert_ok();
    out.assert_stdout_contains(
        "backend: tmux (a pane per teammate in the detached session roo-crew; \
         attach with: tmux attach -t roo-crew)\n",
    );
    out.assert_stdout_contains("reason: running inside iTerm2 without it2");
}

#[test]
fn inside_iterm2_without_it2_or_tmux_the_error_says_how_to_install_it2() {
    let home = TempHome::new();
    let path = fake_path(&home.home, "bin", &[]);
    let out = print_backend(&home, &path)
        .env("TERM_PROGRAM", "iTerm.app")
        .run();
    out.assert_code(2);
    out.assert_stderr_contains("roo-lead: teammates: running inside iTerm2");
    out.assert_stderr_contains("uv tool install it2");
    out.assert_stderr_contains("Enable Python API");
    assert_eq!(out.stdout(), "");
}

#[test]
fn without_a_terminal_teammates_run_in_process_even_with_tmux_installed() {
    let home = TempHome::new();
    let path = fake_path(&home.home, "bin", &["tmux", "it2"]);
    let out = print_backend(&home, &path).run();
    out.assert_ok();
    out.assert_stdout(
        "backend: in-process (teammates run inside the lead's process)\n\
         reason: stdin or stdout is not a terminal, so nobody would watch teammate panes\n",
    );
}

#[test]
fn a_forced_backend_that_cannot_work_exits_2_with_the_reason() {
    let home = TempHome::new();
    let empty = fake_path(&home.home, "empty", &[]);
    let out = print_backend(&home, &empty)
        .args(["--teammate-mode", "tmux"])
        .run();
    out.assert_code(2);
    out.assert_stderr_contains(
        "roo-lead: teammates: --teammate-mode tmux needs tmux, which is not on PATH; \
         install tmux 3.3 or later",
    );
    // Inside iTerm2, by the environment variable, without it2.
    let tmux_only = fake_path(&home.home, "tmux-only", &["tmux"]);
    let out = print_backend(&home, &tmux_only)
        .env("ROO_TEAMMATE_MODE", "iterm2")
        .env("TERM_PROGRAM", "iTerm.app")
        .run();
    out.assert_code(2);
    out.assert_stderr_contains("--teammate-mode iterm2 needs the it2 CLI, which is not on PATH");
    out.assert_stderr_contains("pipx install it2");
    // Forced and available: taken, whatever the environment says.
    let out = print_backend(&home, &tmux_only)
        .args(["--teammate-mode", "tmux"])
        .run();
    out.assert_ok();
    out.assert_stdout_contains("backend: tmux (a pane per teammate in the detached session");
    out.assert_stdout_contains("reason: --teammate-mode tmux (or ROO_TEAMMATE_MODE) asked for it");
    let out = print_backend(&home, &empty)
        .env("ROO_TEAMMATE_MODE", "in-process")
        .env("TMUX", TMUX_VAR)
        .run();
    out.assert_ok();
    out.assert_stdout_contains("backend: in-process");
}

/// The pane's text with its history: tmux 3.3 scrolls the first line of a pane whose
/// command exited off the visible screen when it shows "Pane is dead".
fn all_lines(tmux: &Tmux) -> String {
    tmux.run(&["capture-pane", "-p", "-S", "-", "-t", "main"])
}

/// Runs `roo-lead --print-backend ARGS` in a real terminal (a private tmux server) with
/// `$TMUX` (and any iTerm2 variables the server inherited from the developer's terminal)
/// removed and `path` as PATH; returns the screen once it exited with `code`.
fn print_backend_on_a_terminal(home: &TempHome, path: &Path, args: &str, code: i32) -> String {
    let command = format!(
        "/usr/bin/env -u TMUX -u TMUX_PANE -u TERM_PROGRAM -u ITERM_SESSION_ID PATH={} {} \
         --print-backend {args}",
        path.display(),
        bin("roo-lead").display()
    );
    let tmux = Tmux::start(
        home.cwd.path(),
        &[("ROO_HOME", home.path().display().to_string())],
        &command,
    );
    assert_eq!(tmux.wait_exit(), code, "{}", all_lines(&tmux));
    all_lines(&tmux)
}

#[test]
fn on_a_terminal_with_tmux_installed_teammates_get_a_detached_session() {
    let home = TempHome::new();
    let path = fake_path(&home.home, "bin", &["tmux"]);
    let screen = print_backend_on_a_terminal(&home, &path, "--team crew", 0);
    assert!(
        screen.contains(
            "backend: tmux (a pane per teammate in the detached session roo-crew; attach with: \
             tmux attach -t roo-crew)"
        ),
        "{screen}"
    );
    assert!(
        screen.contains("reason: a terminal outside tmux and iTerm2, and tmux is installed"),
        "{screen}"
    );
}

#[test]
fn on_a_terminal_without_tmux_teammates_run_in_process() {
    let home = TempHome::new();
    let path = fake_path(&home.home, "bin", &["it2"]);
    let screen = print_backend_on_a_terminal(&home, &path, "", 0);
    assert!(screen.contains("backend: in-process"), "{screen}");
    assert!(
        screen.contains("reason: a terminal outside tmux and iTerm2, and tmux is not installed"),
        "{screen}"
    );
}

#[test]
fn in_a_real_tmux_pane_teammates_split_its_window() {
    let home = TempHome::new();
    // The real tmux (the pane's $TMUX is the private server's).
    let command = format!(
        "/usr/bin/env -u ITERM_SESSION_ID {} --print-backend --teammate-mode auto",
        bin("roo-lead").display()
    );
    let tmux = Tmux::start(
        home.cwd.path(),
        &[("ROO_HOME", home.path().display().to_string())],
        &command,
    );
    assert_eq!(tmux.wait_exit(), 0, "{}", all_lines(&tmux));
    let screen = all_lines(&tmux);
    assert!(
        screen.contains("backend: tmux (a pane per teammate in the current window)"),
        "{screen}"
    );
}

#[test]
fn an_empty_tmux_variable_is_not_being_inside_tmux() {
    let home = TempHome::new();
    let path = fake_path(&home.home, "bin", &["tmux"]);
    let out = print_backend(&home, &path).env("TMUX", "").run();
    out.assert_ok();
    out.assert_stdout_contains("backend: in-process");
    out.assert_stdout_contains("reason: stdin or stdout is not a terminal");
}

#[test]
fn a_bad_team_name_is_refused_not_printed_into_a_command() {
    let home = TempHome::new();
    let path = fake_path(&home.home, "bin", &["tmux"]);
    let out = print_backend(&home, &path)
        .args(["--teammate-mode", "tmux", "--team", "x; rm -rf ~"])
        .run();
    out.assert_code(2);
    assert_eq!(out.stdout(), "");
    assert!(!out.stderr().is_empty());
}
