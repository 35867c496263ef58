//! Running a binary: a builder that isolates the environment, and assertions on the
//! result that print the command, its exit code, stdout, stderr and a diff.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use crate::diff::line_diff;

/// Environment variables that would leak the developer's state into a test.
const SCRUBBED: [&str; 24] = [
    "ROO_HOME",
    "ROO_STORE",
    "PGPASSWORD",
    "PGPASSFILE",
    "ROO_TEAM",
    "ROO_AGENT_NAME",
    "ROO_LOCK_MODE",
    "NO_COLOR",
    "ROO_PROVIDER",
    "ROO_MODEL",
    "ROO_BASE_URL",
    "ROO_SCRIPT_STATE",
    "ROO_TEAMMATE_MODE",
    "ROO_LOG",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "TMUX",
    "TMUX_PANE",
    "TERM_PROGRAM",
    "ITERM_SESSION_ID",
    "GIT_DIR",
    "GIT_WORK_TREE",
];

/// A command to run, built step by step.
#[derive(Debug, Clone)]
pub struct TestCommand {
    program: PathBuf,
    args: Vec<OsString>,
    envs: Vec<(OsString, Option<OsString>)>,
    cwd: Option<PathBuf>,
    stdin: Option<Vec<u8>>,
}

impl TestCommand {
    /// A command running `program` with the `ROO_*` variables removed.
    pub fn new(program: impl Into<PathBuf>) -> TestCommand {
        TestCommand {
            program: program.into(),
            args: Vec::new(),
            envs: SCRUBBED.iter().map(|k| (OsString::from(k), None)).collect(),
            cwd: None,
            stdin: None,
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> TestCommand {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> TestCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable of the child.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> TestCommand {
        self.envs
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Removes an environment variable from the child.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> TestCommand {
        self.envs.push((key.as_ref().to_owned(), None));
        self
    }

    /// Sets the working directory.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> TestCommand {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// Feeds `input` on stdin.
    pub fn stdin(mut self, input: impl AsRef<[u8]>) -> TestCommand {
        self.stdin = Some(input.as_ref().to_owned());
        self
    }

    /// The command line, for failure messages.
    pub fn display(&self) -> String {
        let mut s = self.program.display().to_string();
        for a in &self.args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }

    fn build(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        for (k, v) in &self.envs {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        cmd
    }

    /// Runs to completion, capturing stdout and stderr.
    pub fn run(&self) -> RunOutput {
        let mut cmd = self.build();
        cmd.stdin(if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.display()));
        if let Some(input) = &self.stdin {
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input).unwrap();
        }
        let output = child.wait_with_output().unwrap();
        RunOutput {
            command: self.display(),
            output,
        }
    }

    /// Starts the command with piped stdout and stderr; it is killed when the guard drops.
    pub fn spawn(&self) -> ChildGuard {
        let mut cmd = self.build();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.display()));
        ChildGuard {
            child: Some(child),
            command: self.display(),
        }
    }
}

/// A running child, killed and reaped on drop.
#[derive(Debug)]
pub struct ChildGuard {
    child: Option<Child>,
    command: String,
}

impl ChildGuard {
    /// The child.
    pub fn child(&mut self) -> &mut Child {
        self.child.as_mut().unwrap()
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits for it to exit and returns its output.
    pub fn wait(mut self) -> RunOutput {
        let child = self.child.take().unwrap();
        RunOutput {
            command: self.command.clone(),
            output: child.wait_with_output().unwrap(),
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The result of [`TestCommand::run`].
#[derive(Debug)]
pub struct RunOutput {
    command: String,
    /// The raw output.
    pub output: Output,
}

impl RunOutput {
    /// Exit code (-1 if killed by a signal).
    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }

    /// Stdout as text.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Stderr as text.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    fn report(&self) -> String {
        format!(
            "command: {}\nexit code: {}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.command,
            self.code(),
            self.stdout(),
            self.stderr()
        )
    }

    /// Asserts exit code 0.
    #[track_caller]
    pub fn assert_ok(&self) -> &RunOutput {
        self.assert_code(0)
    }

    /// Asserts the exit code.
    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &RunOutput {
        assert!(
            self.code() == code,
            "expected exit code {code}\n{}",
            self.report()
        );
        self
    }

    /// Asserts stdout equals `expected`, printing a line diff if not.
    #[track_caller]
    pub fn assert_stdout(&self, expected: &str) -> &RunOutput {
        let actual = self.stdout();
        assert!(
            actual == expected,
            "stdout differs (- expected, + actual):\n{}\n{}",
            line_diff(expected, &actual),
            self.report()
        );
        self
    }

    /// Asserts stdout contains `needle`.
    #[track_caller]
    pub fn assert_stdout_contains(&self, needle: &str) -> &RunOutput {
        assert!(
            self.stdout().contains(needle),
            "stdout lacks {needle:?}\n{}",
            self.report()
        );
        self
    }

    /// Asserts stderr contains `needle`.
    #[track_caller]
    pub fn assert_stderr_contains(&self, needle: &str) -> &RunOutput {
        assert!(
            self.stderr().contains(needle),
            "stderr lacks {needle:?}\n{}",
            self.report()
        );
        self
    }

    /// Stdout parsed as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.output.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON: {e}\n{}", self.report()))
    }
}
