//! The command lines of the ssh backend, as plain functions (unit-tested): the ssh argv,
//! the one quoting function every remote command goes through, the remote commands
//! themselves (the handoff server, the tmux session, stopping it), git's ssh command, and
//! the hint for ssh's usual failures.
//!
//! **Quoting.** ssh sends the remote command as one string that the remote user's login
//! shell (a POSIX shell: sh, bash, dash, ksh, zsh) runs with `-c`, so every argument is
//! single-quoted by [`sh_quote`] (a `'` becomes `'\''`) and nothing is ever interpolated
//! into a command string unquoted. A NUL cannot be quoted (nor passed at all) and is
//! refused. The destination itself is checked by
//! [`roo_agent::config::hosts::check_destination`] (never an option: no leading `-`), and
//! ssh gets `--` before it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use roo_agent::config::HostConfig;
use roo_agent::config::hosts::check_destination;

/// The options every ssh run gets: never prompt (no password, no passphrase, no "trust
/// this host?"), and check the host key against the known hosts (an unknown or changed
/// key fails: add it to known_hosts first).
pub const SSH_OPTIONS: &[&str] = &["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"];

/// A value that cannot be put on a remote command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("put {what} on a remote command line: it holds a NUL byte")]
pub struct QuoteError {
    pub what: String,
}

/// `arg` single-quoted for a POSIX shell: `'…'`, each `'` written `'\''`. Refuses a NUL.
pub fn sh_quote(arg: &str) -> Result<String, QuoteError> {
    if arg.contains('\0') {
        let shown: String = arg.chars().take(40).collect();
        return Err(QuoteError {
            what: format!("{:?}", shown),
        });
    }
    let mut out = String::with_capacity(arg.len() + 2);
    out.push('\'');
    for c in arg.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    Ok(out)
}

/// `args` quoted one by one and joined with spaces: a command line the remote shell
/// splits back into exactly `args`.
pub fn sh_join<S: AsRef<str>>(args: &[S]) -> Result<String, QuoteError> {
    let quoted: Result<Vec<String>, QuoteError> =
        args.iter().map(|a| sh_quote(a.as_ref())).collect();
    Ok(quoted?.join(" "))
}

/// `arg` as tmux must get it to pass it on unchanged: tmux ends a command at an argument
/// ending in `;` (`a;` would become `a` and a new command), and keeps `\;` at the end as
/// a literal `;`; so a trailing `;` gets a `\` before it.
pub fn tmux_arg(arg: &str) -> String {
    match arg.strip_suffix(';') {
        Some(head) => format!("{head}\\;"),
        None => arg.to_string(),
    }
}

/// How to reach one host: the `ssh` program, its options and the destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ssh {
    program: PathBuf,
    destination: String,
    config: Option<PathBuf>,
}

impl Ssh {
    /// `ssh` (from `PATH`) to `host`'s destination, with its config file if it names one.
    /// The destination is checked again (a `HostConfig` made by hand could hold anything).
    pub fn new(host: &HostConfig) -> Result<Ssh, String> {
        check_destination(&host.ssh).map_err(|why| format!("ssh destination {why}"))?;
        Ok(Ssh {
            program: PathBuf::from("ssh"),
            destination: host.ssh.clone(),
            config: host.ssh_config.clone(),
        })
    }

    /// Another ssh program (tests).
    pub fn with_program(mut self, program: impl Into<PathBuf>) -> Ssh {
        self.program = program.into();
        self
    }

    /// The ssh program.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The destination (`user@host`).
    pub fn destination(&self) -> &str {
        &self.destination
    }

    /// [`SSH_OPTIONS`], then `-F <config>` if there is one.
    pub fn options(&self) -> Vec<OsString> {
        let mut options: Vec<OsString> = SSH_OPTIONS.iter().map(OsString::from).collect();
        if let Some(config) = &self.config {
            options.push("-F".into());
            options.push(config.as_os_str().to_owned());
        }
        options
    }

    /// The arguments of ssh (after the program) that run `remote` (a command line made by
    /// [`sh_join`]) there: `<options> -- <destination> <remote>`.
    pub fn argv(&self, remote: &str) -> Vec<OsString> {
        let mut argv = self.options();
        argv.push("--".into());
        argv.push(self.destination.clone().into());
        argv.push(remote.into());
        argv
    }

    /// The same ssh for git (`GIT_SSH_COMMAND`, run by git through `sh -c` with the host
    /// and git's command appended): the program and options, each quoted.
    pub fn git_ssh_command(&self) -> Result<String, QuoteError> {
        let mut words = vec![self.program.display().to_string()];
        words.extend(
            self.options()
                .into_iter()
                .map(|o| o.to_string_lossy().into_owned()),
        );
        sh_join(&words)
    }

    /// git's address of the repository at `path` there: `<destination>:<path>`.
    pub fn git_url(&self, path: &Path) -> String {
        format!("{}:{}", self.destination, path.display())
    }

    /// How a person watches session `session` of `tmux`: `ssh -t [-F cfg] <destination>
    /// tmux [-L sock] attach -t <session>`.
    pub fn attach_hint(&self, tmux: &RemoteTmux, session: &str) -> String {
        let mut line = vec!["ssh".to_string(), "-t".to_string()];
        if let Some(config) = &self.config {
            line.push("-F".into());
            line.push(config.display().to_string());
        }
        line.push(self.destination.clone());
        line.extend(tmux.server_args());
        line.extend(["attach".into(), "-t".into(), session.to_string()]);
        line.join(" ")
    }
}

/// The tmux server on the host: `tmux`, with `-L <socket>` when the host names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteTmux {
    socket: Option<String>,
}

impl RemoteTmux {
    /// The server `-L socket` (`None`: the user's default server there).
    pub fn new(socket: Option<String>) -> RemoteTmux {
        RemoteTmux { socket }
    }

    fn server_args(&self) -> Vec<String> {
        match &self.socket {
            Some(socket) => vec!["tmux".into(), "-L".into(), socket.clone()],
            None => vec!["tmux".into()],
        }
    }

    /// A detached session `session` whose pane first runs a placeholder, set to stay
    /// when its process fails (its last lines stay readable), whose placeholder is then
    /// replaced by `argv`, run directly (no shell) with only the handoff's socket and
    /// one-time token (`env`) added to its environment: one tmux command line.
    pub fn start(&self, session: &str, env: (&str, &str), argv: &[String]) -> Vec<String> {
        let pane = format!("={session}:");
        let mut args = self.server_args();
        args.extend(
            [
                "new-session",
                "-d",
                "-s",
                session,
                "-x",
                "200",
                "-y",
                "50",
                "--",
                "sleep",
                "86400",
                ";",
                "set-option",
                "-p",
                "-t",
                &pane,
                "remain-on-exit",
                "failed",
                ";",
                "respawn-pane",
                "-k",
                "-t",
                &pane,
                "-e",
            ]
            .map(str::to_string),
        );
        args.push(tmux_arg(&format!("{}={}", env.0, env.1)));
        args.push("--".into());
        args.extend(argv.iter().map(|a| tmux_arg(a)));
        args
    }

    /// A shell script that stops session `session`: its pane's process gets SIGTERM (the
    /// worker marks itself idle and ends its commands) and up to 3 s to end, then the
    /// session is killed (which ends whatever is left). Succeeds when there is no such
    /// session. On the private server (`tmux_socket`), once its last session is gone and
    /// the server with it, the socket file tmux leaves behind is removed too: only when
    /// tmux itself says no server runs on it (never the user's default server's).
    pub fn stop_script(&self, session: &str) -> Result<String, QuoteError> {
        let tmux = sh_join(&self.server_args())?;
        let pane = sh_quote(&format!("={session}:"))?;
        let whole = sh_quote(&format!("={session}"))?;
        let stop = format!(
            "p=$({tmux} display-message -p -t {pane} '#{{pane_pid}}' 2>/dev/null) && \
             [ -n \"$p\" ] && kill -TERM \"$p\" 2>/dev/null && {{ n=0; while kill -0 \"$p\" \
             2>/dev/null && [ $n -lt 30 ]; do sleep 0.1; n=$((n+1)); done; }}; \
             {tmux} kill-session -t {whole} 2>/dev/null; "
        );
        let Some(socket) = &self.socket else {
            return Ok(stop + "true");
        };
        // An emptied server ends by itself a moment later (up to 1 s is waited for: while
        // it still answers with no session); one that keeps other sessions keeps its file.
        let name = sh_quote(&format!("/{socket}"))?;
        Ok(format!(
            "{stop}n=0; while o=$({tmux} list-sessions 2>&1) && [ -z \"$o\" ] && [ $n -lt 10 ]; \
             do sleep 0.1; n=$((n+1)); done; \
             case $o in 'no server running on '*{name}) s=${{o#no server running on }}; \
             [ -S \"$s\" ] && rm -f -- \"$s\";; esac; true"
        ))
    }

    /// The last 200 lines of the session's pane, history included.
    pub fn capture(&self, session: &str) -> Vec<String> {
        let mut args = self.server_args();
        args.extend(
            ["capture-pane", "-p", "-S", "-200", "-t"]
                .map(str::to_string)
                .into_iter()
                .chain([format!("={session}:")]),
        );
        args
    }

    /// Whether the session exists (exit status).
    pub fn has_session(&self, session: &str) -> Vec<String> {
        let mut args = self.server_args();
        args.extend([
            "has-session".to_string(),
            "-t".into(),
            format!("={session}"),
        ]);
        args
    }
}

/// The session of teammate `name` of `team` on a host: `roo-<team>-<name>`, with the `.`
/// and `:` tmux does not allow in a session name made `_`.
pub fn session_name(team: &str, name: &str) -> String {
    format!("roo-{team}-{name}").replace(['.', ':'], "_")
}

/// The handoff server's command: `<roo_worker> --serve-handoff <label>`.
pub fn serve_handoff(roo_worker: &str, label: &str) -> Vec<String> {
    vec![
        roo_worker.to_string(),
        SERVE_HANDOFF_FLAG.to_string(),
        label.to_string(),
    ]
}

/// `roo-worker`'s hidden flag that serves a handoff (see `roo_app::worker`).
pub const SERVE_HANDOFF_FLAG: &str = "--serve-handoff";

/// What to do about ssh's usual failures, from what it wrote on stderr ("" if nothing
/// is known).
pub fn ssh_hint(stderr: &str) -> &'static str {
    if stderr.contains("Host key verification failed") || stderr.contains("No matching host key") {
        "; the host key is unknown or changed: add the host's key to known_hosts \
         (ssh-keyscan, or one ssh by hand) first"
    } else if stderr.contains("Permission denied (publickey") {
        "; ssh needs a key it can use without a prompt (ssh-agent, or an unencrypted key \
         for this host)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// What `sh -c` makes of a command line: the arguments it runs.
    fn through_sh(line: &str) -> Vec<String> {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("for a in {line}; do printf '%s\\0' \"$a\"; done"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{line}");
        String::from_utf8(out.stdout)
            .unwrap()
            .split_terminator('\0')
            .map(str::to_string)
            .collect()
    }

    const HOSTILE: &[&str] = &[
        "plain",
        "with space",
        "it's",
        "'",
        "''",
        "\"double\"",
        "$(touch /tmp/roo-pwned)",
        "`touch /tmp/roo-pwned`",
        "${HOME}",
        "$HOME",
        "a\nb",
        "\n",
        "-oProxyCommand=touch /tmp/roo-pwned",
        "--",
        "-",
        "; rm -rf /",
        "a;",
        "a\\",
        "\\'",
        "*",
        "~",
        "!event",
        "tab\there",
        "",
        "ünï\u{1F980}",
    ];

    #[test]
    fn quoting_gives_back_exactly_the_arguments_whatever_they_hold() {
        for arg in HOSTILE {
            assert_eq!(
                through_sh(&sh_quote(arg).unwrap()),
                vec![arg.to_string()],
                "{arg:?}"
            );
        }
        let all: Vec<String> = HOSTILE.iter().map(|a| a.to_string()).collect();
        assert_eq!(through_sh(&sh_join(&all).unwrap()), all);
        assert_eq!(sh_quote("it's").unwrap(), r"'it'\''s'");
        assert!(sh_quote("a\0b").is_err());
        assert!(!std::path::Path::new("/tmp/roo-pwned").exists());
    }

    #[test]
    fn a_trailing_semicolon_is_escaped_for_tmux_and_nothing_else_changes() {
        assert_eq!(tmux_arg("a;"), "a\\;");
        assert_eq!(tmux_arg("a\\;"), "a\\\\;");
        assert_eq!(tmux_arg(";"), "\\;");
        assert_eq!(tmux_arg("a;b"), "a;b");
        assert_eq!(tmux_arg("--prompt=x"), "--prompt=x");
    }

    fn host(ssh: &str, config: Option<&str>) -> HostConfig {
        HostConfig {
            name: roo_store::Name::parse("b").unwrap(),
            ssh: ssh.to_string(),
            repo: PathBuf::from("/srv/app"),
            roo_worker: "roo-worker".into(),
            ssh_config: config.map(PathBuf::from),
            tmux_socket: None,
        }
    }

    #[test]
    fn every_ssh_run_is_batch_mode_checks_host_keys_and_ends_the_options_before_the_host() {
        let ssh = Ssh::new(&host("alice@b.example", Some("/h/ssh config"))).unwrap();
        let argv: Vec<String> = ssh
            .argv("'true'")
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(
            argv,
            [
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=yes",
                "-F",
                "/h/ssh config",
                "--",
                "alice@b.example",
                "'true'"
            ]
        );
        assert_eq!(
            ssh.git_ssh_command().unwrap(),
            "'ssh' '-o' 'BatchMode=yes' '-o' 'StrictHostKeyChecking=yes' '-F' '/h/ssh config'"
        );
        assert_eq!(
            ssh.git_url(Path::new("/srv/a b")),
            "alice@b.example:/srv/a b"
        );
        for bad in ["-oProxyCommand=x", "a b", "", "h:22", "a\nb"] {
            assert!(Ssh::new(&host(bad, None)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_session_start_runs_the_worker_directly_with_only_the_handoff_in_its_environment() {
        let tmux = RemoteTmux::new(Some("roo-test".into()));
        let argv = vec![
            "/opt/roo-worker".to_string(),
            "--team".into(),
            "crew".into(),
            "--prompt=do it;".into(),
        ];
        let args = tmux.start(
            "roo-crew-alice",
            ("ROO_ENV_HANDOFF", "/h/s.sock#ab12"),
            &argv,
        );
        let line = sh_join(&args).unwrap();
        // The remote shell gives tmux exactly these arguments.
        assert_eq!(through_sh(&line), args);
        assert_eq!(&args[..3], ["tmux", "-L", "roo-test"]);
        let respawn = args.iter().position(|a| a == "respawn-pane").unwrap();
        assert_eq!(
            &args[respawn..respawn + 7],
            [
                "respawn-pane",
                "-k",
                "-t",
                "=roo-crew-alice:",
                "-e",
                "ROO_ENV_HANDOFF=/h/s.sock#ab12",
                "--"
            ]
        );
        assert_eq!(args.last().unwrap(), "--prompt=do it\\;");
        assert_eq!(
            RemoteTmux::new(None).capture("s")[..2],
            ["tmux".to_string(), "capture-pane".to_string()]
        );
        assert_eq!(session_name("crew", "a.b"), "roo-crew-a_b");
        let ssh = Ssh::new(&host("alice@b", None)).unwrap();
        assert_eq!(
            ssh.attach_hint(&tmux, "roo-crew-alice"),
            "ssh -t alice@b tmux -L roo-test attach -t roo-crew-alice"
        );
    }

    #[test]
    fn the_stop_script_is_valid_shell_and_ends_nothing_when_there_is_no_session() {
        let script = RemoteTmux::new(Some(format!("roo-probe-{}", std::process::id())))
            .stop_script("no-such-session")
            .unwrap();
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .env("TMUX_TMPDIR", std::env::temp_dir())
            .status()
            .unwrap();
        assert!(status.success(), "{script}");
    }

    #[test]
    fn the_stop_script_removes_its_private_servers_socket_once_the_server_is_gone() {
        let dir = tempfile::TempDir::new().unwrap();
        let socket = format!("roo-probe-{}", std::process::id());
        let tmux = |args: &[&str]| {
            std::process::Command::new("tmux")
                .arg("-L")
                .arg(&socket)
                .args(["-f", "/dev/null"])
                .args(args)
                .env("TMUX_TMPDIR", dir.path())
                .output()
                .unwrap()
        };
        let path = std::fs::canonicalize(dir.path())
            .unwrap()
            .join(format!("tmux-{}", nix::unistd::getuid()))
            .join(&socket);
        let stop = |session: &str| {
            let script = RemoteTmux::new(Some(socket.clone()))
                .stop_script(session)
                .unwrap();
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(&script)
                .env("TMUX_TMPDIR", dir.path())
                .status()
                .unwrap();
            assert!(status.success(), "{script}");
        };
        tmux(&["new-session", "-d", "-s", "one", "sleep", "100"]);
        tmux(&["new-session", "-d", "-s", "two", "sleep", "100"]);
        assert!(path.exists(), "{}", path.display());
        // Another session still runs on the server: its socket stays.
        stop("one");
        assert!(path.exists(), "removed while the server runs");
        assert!(tmux(&["has-session", "-t", "=two"]).status.success());
        // The last one: the server ends, and its file goes with it.
        stop("two");
        let gone = path.exists();
        tmux(&["kill-server"]);
        assert!(!gone, "{} left behind", path.display());
    }
}
