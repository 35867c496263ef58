//! Running the git CLI: one place that decides the environment git sees and
//! turns its failures into [`WorktreeError`]s.
//!
//! Variables that would point git at another repository than the directory it
//! is run in (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`, … — set when RooCode
//! itself is started from a git hook) are removed, nothing ever prompts
//! (`GIT_TERMINAL_PROMPT=0`, stdin closed, `GIT_EDITOR=true`). Output that code
//! reads is requested in NUL-separated porcelain formats.
//!
//! Every run ignores hooks and the fsmonitor ([`SAFE_CONFIG`]) and takes no
//! optional locks: the runtime's git never starts a program a repository's
//! config names for those. Teammates work in their own clones and cannot write
//! the lead's git directory; git the runtime runs *inside* a teammate's clone
//! (whose config the teammate wrote) goes through [`Git::confined_to`], a
//! command sandbox that may write that clone only. Git for the lead runs
//! [`Git::sandboxed`] in the lead's own command sandbox, but for the runs that read
//! refs only ([`Git::run_limited`]: discovery, the reads before a clone is made), which
//! start git directly, bounded in time; runs that must stay confined can share one
//! launch ([`Git::run_script`]).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use roo_agent::exec::{Confine, Ending, Launcher};

use super::{Result, WorktreeError};

/// Variables that redirect git away from the directory it runs in.
const REDIRECTING_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_QUARANTINE_PATH",
];

/// `-c` settings given to every git run: no hooks (a `reference-transaction`,
/// `post-merge` or `pre-merge-commit` hook never runs for the runtime) and no
/// fsmonitor program.
pub(crate) const SAFE_CONFIG: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "diff.external=",
    "--no-optional-locks",
];

/// How git is run: the program and extra environment.
#[derive(Debug, Clone)]
pub struct Git {
    program: PathBuf,
    env: Vec<(OsString, OsString)>,
    launcher: Option<Launcher>,
    /// How long each [`Git::run`] may take before git and what it started are ended
    /// ([`Git::limited`]); `None`: no bound.
    limit: Option<std::time::Duration>,
}

impl Default for Git {
    fn default() -> Self {
        Self::new()
    }
}

/// `dir` is a directory to run git in: spawning in a missing one would fail like a missing
/// program, so it is its own error.
pub(crate) fn existing_dir(dir: &Path) -> Result<()> {
    std::fs::metadata(dir)
        .and_then(|m| {
            if m.is_dir() {
                Ok(())
            } else {
                Err(std::io::Error::other("not a directory"))
            }
        })
        .map_err(|source| WorktreeError::Io {
            action: "run git in",
            path: dir.to_path_buf(),
            source,
        })
}

/// What a [`Git::run_script`] launch printed, and its exit code (`None`: killed).
#[derive(Debug)]
pub(crate) struct ScriptOutput {
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// What one git run printed.
#[derive(Debug)]
pub(crate) struct GitOutput {
    pub(crate) success: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Git {
    /// `git` from `PATH`, with the process environment.
    pub fn new() -> Self {
        Self {
            program: PathBuf::from("git"),
            env: Vec::new(),
            launcher: None,
            limit: None,
        }
    }

    /// The same git, each [`Git::run`] of which (confined or not) is ended with
    /// everything it started after `limit`, a failure saying so: for git that runs in a
    /// teammate's clone where nothing waits for an answer, as the report of a team left
    /// behind (a filter the clone's config names could otherwise hang it for ever).
    pub fn limited(mut self, limit: std::time::Duration) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Runs every git command through `sandbox` (its helper, confined by its policy):
    /// what git starts — hooks, filters, merge drivers, an fsmonitor — is confined too.
    pub fn sandboxed(mut self, sandbox: roo_agent::exec::sandbox::CommandSandbox) -> Self {
        self.launcher = Some(Launcher::new(Some(std::sync::Arc::new(sandbox))));
        self
    }

    /// Starts git with the launcher of a tool call (the agent's own: its sandbox and
    /// scrubbed environment) unless this one already has a launcher: the team tools
    /// create and clean worktrees with the git of the lead's sandbox, which exists only
    /// once the lead is built.
    pub fn in_launcher_of(mut self, launcher: &Launcher) -> Self {
        if self.launcher.is_none() && launcher.sandbox.is_some() {
            self.launcher = Some(launcher.clone());
        }
        self
    }

    /// The same git, for running inside a teammate's clone `root`: when it runs in a
    /// command sandbox, that sandbox may write `root` only (and the shell's devices),
    /// so a filter or other program the clone's config names cannot touch the lead's
    /// repository.
    pub fn confined_to(&self, root: &Path) -> Self {
        let mut git = self.clone();
        if let Some(launcher) = &mut git.launcher
            && let Some(sandbox) = &launcher.sandbox
        {
            let mut sandbox = (**sandbox).clone();
            if let Some(policy) = sandbox.policy.as_mut() {
                let mut write = vec![root.to_path_buf()];
                write.extend(
                    roo_agent::exec::sandbox::WRITABLE_DEVICES
                        .iter()
                        .map(PathBuf::from),
                );
                policy.write = write;
            }
            launcher.sandbox = Some(std::sync::Arc::new(sandbox));
        }
        git
    }

    /// Another git executable (a path, or a name looked up in `PATH`).
    pub fn with_program(mut self, program: impl Into<PathBuf>) -> Self {
        self.program = program.into();
        self
    }

    /// Sets `key=value` for every git run (tests point `HOME` at a temp dir).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_os_string(), value.as_ref().to_os_string()));
        self
    }

    /// `git` with the safe config, `args`, in `dir`, stdin closed, never prompting, without
    /// the variables that redirect it; through the launcher (confined) if `launched` and
    /// there is one.
    fn command<S: AsRef<OsStr>>(&self, dir: &Path, args: &[S], launched: bool) -> Command {
        let args: Vec<OsString> = SAFE_CONFIG
            .iter()
            .map(OsString::from)
            .chain(args.iter().map(|a| a.as_ref().to_owned()))
            .collect();
        self.command_of(&self.program, &args, dir, launched)
    }

    /// `program args` in `dir` with git's environment (see [`Git::command`]).
    fn command_of(&self, program: &Path, args: &[OsString], dir: &Path, launched: bool) -> Command {
        let mut command = match &self.launcher {
            Some(launcher) if launched => launcher.command(program, args, dir, Confine::Yes),
            _ => {
                let mut command = Command::new(program);
                command.args(args).current_dir(dir).stdin(Stdio::null());
                command
            }
        };
        command
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_EDITOR", "true");
        for name in REDIRECTING_ENV {
            command.env_remove(name);
        }
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command
    }

    /// Runs `git args` in `dir`; a non-zero exit is not an error here.
    pub(crate) fn run<S: AsRef<OsStr>>(&self, dir: &Path, args: &[S]) -> Result<GitOutput> {
        existing_dir(dir)?;
        let mut command = self.command(dir, args, true);
        if let Some(limit) = self.limit {
            return output_within(&mut command, limit, "git").map_err(|source| {
                WorktreeError::GitUnavailable {
                    program: self.program.clone(),
                    source,
                }
            });
        }
        let out = command
            .output()
            .map_err(|source| WorktreeError::GitUnavailable {
                program: self.program.clone(),
                source,
            })?;
        Ok(GitOutput {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    /// Runs the shell `script` in `dir` in one launch (confined, as [`Git::run`]): git
    /// runs that must stay confined, batched so they pay the sandbox helper's start and
    /// its second stage once. The script gets `$1` = the git program and calls git as
    /// `g ARGS` (a shell function adding [`SAFE_CONFIG`]); `args` follow as `$2`, `$3`, ….
    /// A non-zero exit is not an error here.
    pub(crate) fn run_script<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        script: &str,
        args: &[S],
    ) -> Result<ScriptOutput> {
        existing_dir(dir)?;
        let safe: Vec<String> = SAFE_CONFIG.iter().map(|a| format!("'{a}'")).collect();
        let script = format!(
            "g() {{ \"$G\" {} \"$@\"; }}\nG=$1\n{script}",
            safe.join(" ")
        );
        let mut argv: Vec<OsString> = vec!["-c".into(), script.into(), "sh".into()];
        argv.push(self.program.clone().into_os_string());
        argv.extend(args.iter().map(|a| a.as_ref().to_owned()));
        let out = self
            .command_of(Path::new("sh"), &argv, dir, true)
            .output()
            .map_err(|source| WorktreeError::GitUnavailable {
                program: PathBuf::from("sh"),
                source,
            })?;
        Ok(ScriptOutput {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    /// [`Git::run`] (never confined) that ends git and everything it started after
    /// `limit`: a failure saying so.
    pub(crate) fn run_limited<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        args: &[S],
        limit: std::time::Duration,
    ) -> Result<GitOutput> {
        let mut command = self.command(dir, args, false);
        output_within(&mut command, limit, "git").map_err(|source| WorktreeError::GitUnavailable {
            program: self.program.clone(),
            source,
        })
    }

    /// [`Git::run_limited`] with `input` on git's stdin (written by a thread of its own,
    /// so a git that reads none of it cannot block the caller past `limit`).
    pub(crate) fn run_limited_input<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        args: &[S],
        input: Vec<u8>,
        limit: std::time::Duration,
    ) -> Result<GitOutput> {
        let mut command = self.command(dir, args, false);
        command.stdin(Stdio::piped());
        output_within_input(&mut command, Some(input), limit, "git").map_err(|source| {
            WorktreeError::GitUnavailable {
                program: self.program.clone(),
                source,
            }
        })
    }

    /// Runs `git args` in `dir` (never confined: only for commands that read objects and
    /// start no program the repository names) and hands each NUL-terminated field of its
    /// stdout to `keep`, which returns `false` to stop: git and what it started are then
    /// ended at once, so a huge output costs only what was read. Returns whether git ran
    /// to its end; a failure is a [`WorktreeError::Git`].
    pub(crate) fn for_each_field<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        args: &[S],
        keep: impl FnMut(&[u8]) -> bool,
    ) -> Result<bool> {
        self.stream(dir, args, None, b'\0', keep)
    }

    /// Runs `git args` in `dir` (never confined, as [`Git::for_each_field`]) with `input`
    /// on its stdin; returns its stdout.
    pub(crate) fn output_with_input<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        args: &[S],
        input: Vec<u8>,
    ) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.stream(dir, args, Some(input), b'\n', |line| {
            out.extend_from_slice(line);
            out.push(b'\n');
            true
        })?;
        Ok(out)
    }

    fn stream<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        args: &[S],
        input: Option<Vec<u8>>,
        separator: u8,
        mut keep: impl FnMut(&[u8]) -> bool,
    ) -> Result<bool> {
        use std::io::{BufRead, Read, Write};
        use std::os::unix::process::CommandExt;
        let unavailable = |source| WorktreeError::GitUnavailable {
            program: self.program.clone(),
            source,
        };
        let mut command = self.command(dir, args, false);
        command
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = command.spawn().map_err(unavailable)?;
        let writer = child.stdin.take().zip(input).map(|(mut stdin, input)| {
            // A write error means git stopped reading: its exit status says why.
            std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            })
        });
        let stderr = child.stderr.take().map(|stderr| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stderr.take(64 * 1024).read_to_string(&mut text);
                text
            })
        });
        let mut complete = true;
        if let Some(stdout) = child.stdout.take() {
            let mut reader = std::io::BufReader::new(stdout);
            let mut field = Vec::new();
            loop {
                field.clear();
                let n = reader
                    .read_until(separator, &mut field)
                    .map_err(unavailable)?;
                if n == 0 {
                    break;
                }
                if field.last() == Some(&separator) {
                    field.pop();
                }
                if !keep(&field) {
                    complete = false;
                    break;
                }
            }
        }
        if !complete && let Ok(pgid) = i32::try_from(child.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let status = child.wait().map_err(unavailable)?;
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        let stderr = stderr
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
            .trim()
            .to_string();
        if complete && !status.success() {
            return Err(self.failure(dir, args, stderr));
        }
        Ok(complete)
    }

    /// Runs `git args` in `dir` and returns its stdout; a non-zero exit is a
    /// [`WorktreeError::Git`] carrying git's message.
    pub(crate) fn ok<S: AsRef<OsStr>>(&self, dir: &Path, args: &[S]) -> Result<String> {
        let out = self.run(dir, args)?;
        if out.success {
            Ok(out.stdout)
        } else {
            Err(self.failure(dir, args, out.stderr))
        }
    }

    /// The error for a failed `git args` in `dir`.
    pub(crate) fn failure<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        args: &[S],
        stderr: String,
    ) -> WorktreeError {
        WorktreeError::Git {
            command: args
                .iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
            dir: dir.to_path_buf(),
            stderr: capped(stderr),
        }
    }
}

/// Most bytes of git's message an error carries.
const MAX_STDERR: usize = 2000;

/// `stderr` with control characters (terminal escapes) but newlines and tabs shown as
/// `\u{…}` escapes, cut to [`MAX_STDERR`] bytes (at a character boundary), with a note
/// when cut.
fn capped(stderr: String) -> String {
    let mut stderr: String = stderr
        .chars()
        .flat_map(|c| {
            let escape = c.is_control() && c != '\n' && c != '\t';
            let shown: Vec<char> = if escape {
                c.escape_unicode().collect()
            } else {
                vec![c]
            };
            shown
        })
        .collect();
    if stderr.len() > MAX_STDERR {
        let mut cut = MAX_STDERR;
        while !stderr.is_char_boundary(cut) {
            cut -= 1;
        }
        stderr.truncate(cut);
        stderr.push_str(" … (cut)");
    }
    stderr
}

/// Splits NUL-separated output into its non-empty fields.
pub(crate) fn nul_fields(text: &str) -> impl Iterator<Item = &str> {
    text.split('\0').filter(|s| !s.is_empty())
}

/// Runs `command` through [`roo_agent::exec::output_within`] for at most `limit`: past
/// it the whole group (the program and what it started, e.g. git's upload-pack or ssh's
/// proxy) is killed and the output is a failure saying `what` took too long. `Err` only
/// if it could not be started or waited for.
pub(crate) fn output_within(
    command: &mut std::process::Command,
    limit: std::time::Duration,
    what: &str,
) -> std::io::Result<GitOutput> {
    output_within_input(command, None, limit, what)
}

/// [`output_within`], writing `input` to the program's stdin (which `command` pipes).
fn output_within_input(
    command: &mut std::process::Command,
    input: Option<Vec<u8>>,
    limit: std::time::Duration,
    what: &str,
) -> std::io::Result<GitOutput> {
    let out = roo_agent::exec::output_within(command, input, limit)?;
    Ok(match out.ending {
        Ending::Exited(status) => GitOutput {
            success: status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        },
        Ending::TimedOut | Ending::Cancelled => GitOutput {
            success: false,
            stdout: String::new(),
            stderr: format!(
                "{what} took longer than {} s and was ended",
                limit.as_secs()
            ),
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn git_messages_are_cut_and_carry_no_terminal_escape() {
        let long = format!("fatal: \u{1b}[2Jgone\r\n{}", "é".repeat(3000));
        let shown = super::capped(long);
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\r'),
            "{shown}"
        );
        assert!(
            shown.starts_with("fatal: \\u{1b}[2Jgone\\u{d}\n"),
            "{shown}"
        );
        assert!(
            shown.len() <= super::MAX_STDERR + " … (cut)".len(),
            "{}",
            shown.len()
        );
        assert!(shown.ends_with(" … (cut)"));
    }
}
