//! A private tmux server per test (`tmux -L roo-test-<pid>-<n> -f /dev/null`), killed on
//! drop, for driving interactive programs in a real terminal. tmux leaves a server's socket
//! file behind when the server ends (killed or by itself), so ending one here also removes
//! that file ([`end_tmux_server`]); a test's own private servers use the same function.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What the wrapper prints when the command ends, followed by its status and `]`.
const EXIT_MARK: &str = "[roo-test exit ";

/// One pane as `list-panes` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pane {
    pub id: String,
    pub title: String,
    pub pid: u32,
    pub dead: bool,
}

/// One tmux server with one window running a command.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts a server whose only pane runs `command` (a shell line) in `cwd` with `env`,
    /// 120×40, kept after the command exits so the last screen can be read.
    pub fn start(cwd: &Path, env: &[(&str, String)], command: &str) -> Tmux {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let socket = format!(
            "roo-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let tmux = Tmux { socket };
        let mut args: Vec<String> = vec![
            "new-session".into(),
            "-d".into(),
            "-s".into(),
            "main".into(),
            "-x".into(),
            "120".into(),
            "-y".into(),
            "40".into(),
            "-c".into(),
            cwd.display().to_string(),
        ];
        for (k, v) in env {
            args.push("-e".into());
            args.push(format!("{k}={v}"));
        }
        // A placeholder first, so remain-on-exit is set before the real command runs.
        args.push("sleep 1000000".into());
        tmux.run(&args);
        tmux.run(&["set-option", "-g", "remain-on-exit", "on"]);
        // tmux loses the exit status when the program closes the terminal before it is
        // reaped, so the shell reports it on the screen instead.
        let wrapped = format!("{command}; echo \"{EXIT_MARK}$?]\"");
        tmux.run(&["respawn-pane", "-k", "-t", "main", &wrapped]);
        tmux
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", &self.socket, "-f", "/dev/null"]);
        cmd
    }

    /// Runs a tmux command, panicking on failure.
    pub fn run<S: AsRef<str>>(&self, args: &[S]) -> String {
        let out = self
            .command()
            .args(args.iter().map(|a| a.as_ref()))
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {:?} failed: {}",
            args.iter().map(|a| a.as_ref()).collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The server's socket name (`-L`).
    pub fn socket(&self) -> &str {
        &self.socket
    }

    /// Every pane of the server: id, title, pid, whether its command is dead.
    pub fn panes(&self) -> Vec<Pane> {
        let out = self
            .command()
            .args([
                "list-panes",
                "-a",
                "-F",
                "#{pane_id}\t#{pane_title}\t#{pane_pid}\t#{pane_dead}",
            ])
            .output()
            .expect("run tmux list-panes");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split('\t').collect();
                (f.len() == 4).then(|| Pane {
                    id: f[0].to_string(),
                    title: f[1].to_string(),
                    pid: f[2].parse().unwrap_or(0),
                    dead: f[3] == "1",
                })
            })
            .collect()
    }

    /// What every pane shows, for a failure report.
    pub fn all_screens(&self) -> String {
        let mut out = String::new();
        for pane in self.panes() {
            let screen = self
                .command()
                .args(["capture-pane", "-p", "-t", &pane.id])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            out.push_str(&format!(
                "--- pane {} {:?} pid {} dead {} ---\n{}\n",
                pane.id,
                pane.title,
                pane.pid,
                pane.dead,
                screen.trim_end()
            ));
        }
        out
    }

    /// The visible screen.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "main"])
    }

    /// The visible screen with the lines the terminal wrapped joined again (`-J`), for
    /// checks on text whose length depends on a path (a long `TMPDIR` wraps it).
    pub fn joined_screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-J", "-t", "main"])
    }

    /// Types `text` literally.
    pub fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "main", "-l", text]);
    }

    /// Presses keys by tmux name (`Enter`, `Escape`, `C-c`, `y`).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "main"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Whether the pane's command has exited.
    pub fn exited(&self) -> bool {
        self.exit_status().is_some()
    }

    /// Exit status of the pane's command once it has exited.
    pub fn exit_status(&self) -> Option<i32> {
        let screen = self.screen();
        let line = screen.lines().rev().find(|l| l.starts_with(EXIT_MARK))?;
        line[EXIT_MARK.len()..].trim_end_matches(']').parse().ok()
    }

    /// Waits for the command to exit and returns its status.
    pub fn wait_exit(&self) -> i32 {
        crate::wait_until(
            "the command to exit",
            Duration::from_secs(10),
            || self.exit_status(),
            || self.screen(),
        )
    }

    /// Waits until `check(screen)` holds; on timeout panics showing `what` and the screen.
    pub fn wait_for(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        crate::wait_until(
            what,
            Duration::from_secs(20),
            || {
                let screen = self.screen();
                check(&screen).then_some(screen)
            },
            || self.screen(),
        )
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        end_tmux_server(&self.socket);
    }
}

/// Where tmux keeps the socket of the server named `name` (`-L`):
/// `$TMUX_TMPDIR/tmux-<uid>/<name>`, `/tmp` when `TMUX_TMPDIR` is unset or empty.
pub fn tmux_socket_path(name: &str) -> PathBuf {
    let base = std::env::var_os("TMUX_TMPDIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    base.join(format!("tmux-{}", nix::unistd::getuid()))
        .join(name)
}

/// Ends the tmux server named `name` (`-L`), if one runs, and removes its socket file,
/// which tmux leaves behind, but only once nothing answers on it: a server that
/// `kill-server` did not end (or a listener that is no tmux, which `kill-server` would
/// wait on for ever: it is given 5 s) keeps its file, so it stays reachable and is
/// reported. Safe to call for a server that already ended.
pub fn end_tmux_server(name: &str) {
    let path = tmux_socket_path(name);
    if let Ok(mut kill) = Command::new("tmux")
        .args(["-L", name, "kill-server"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while kill.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = kill.kill();
        let _ = kill.wait();
    }
    // The server ends just after it answers `kill-server`: wait for its socket to refuse.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::os::unix::net::UnixStream::connect(&path).is_ok() {
        if std::time::Instant::now() >= deadline {
            eprintln!(
                "tmux server {name} still answers on {} after kill-server: its socket is kept",
                path.display()
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_file(&path);
}

/// Ends a private tmux server named `name` (and removes its socket file) when dropped,
/// also when the test panics: for a test that starts its own server.
#[derive(Debug)]
pub struct TmuxServer(pub String);

impl Drop for TmuxServer {
    fn drop(&mut self) {
        end_tmux_server(&self.0);
    }
}
