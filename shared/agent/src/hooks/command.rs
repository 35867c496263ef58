//! [`CommandHooks`]: the `hooks:` of the config files as an [`AgentHook`]. Each hook
//! is a shell command, run like a Bash command (through the agent's
//! [`crate::exec::sandbox::CommandSandbox`], own process group, killed on timeout or cancel)
//! with the context as environment variables (`$TOOL_NAME`, `$FILE_PATH`, …) and as
//! one JSON object on stdin.
//!
//! What a command's exit means:
//! - `pre_tool_use`, `user_prompt_submit`: exit 0 lets the call (the prompt) through;
//!   anything else — a non-zero exit, a signal, a timeout, a command that cannot start
//!   — blocks it, and the model gets the hook's stderr as the call's error result (the
//!   user gets it as the run's stop reason). A guard that breaks fails closed.
//! - `session_start`, `user_prompt_submit`: what a successful command prints on stdout
//!   is added to the conversation as context.
//! - `post_tool_use`: a failing command's stderr is appended to the call's result, so
//!   a linter run after WriteFile reaches the model.
//! - every failure (of any event) is reported as a notice; a hook that hangs is
//!   killed at its timeout, so no hook ever hangs the agent.
//!
//! `teammate_idle` and `task_completed` are no points of the loop: the team calls
//! [`CommandHooks::teammate_idle`] and [`CommandHooks::task_completed`] itself.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::hook::{AgentHook, PromptDecision, ToolCallInfo, Verdict};
use crate::config::{Hook, HookAction, HookCondition, HookEvent, HookFacts, Source};
use crate::event::{AgentEvent, EventSink, RunOutcome};
use crate::exec::{self, Ending};
use crate::tool::{PermissionTarget, ToolContext, ToolOutput};

/// How long a hook command may run when its config gives no `timeout_ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// The longest `timeout_ms` a hook may ask for.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Characters of a hook's stdout added as context, and of its stderr shown.
const MAX_TEXT_CHARS: usize = 10_000;
/// Bytes of a hook's stdout read back.
const MAX_STDOUT_BYTES: u64 = 64 * 1024;
/// Characters of a tool result passed to a `post_tool_use` hook on stdin.
const MAX_RESULT_CHARS: usize = 100_000;
/// What ends a hook's text that was cut: a marker a reader tells from the text's own `…`.
const CUT: &str = "… [cut]";
/// `$TOOL_INPUT` is left out of the environment above this size (stdin has it).
const MAX_ENV_INPUT_BYTES: usize = 32 * 1024;

/// Who runs the hooks, for their context.
#[derive(Debug, Clone)]
pub struct HookSetup {
    /// The agent's name (`$AGENT_NAME`).
    pub agent_name: String,
    /// Its team, if any (`$TEAM_NAME`).
    pub team: Option<String>,
    /// Its session (`$SESSION_ID`).
    pub session_id: Option<String>,
    /// Paths in conditions are relative to it (`$PROJECT_ROOT`).
    pub project_root: PathBuf,
    /// How commands start: working directory, environment, sandbox. Its cancel token
    /// is replaced by the caller's.
    pub context: ToolContext,
}

/// The configured command hooks of one agent.
pub struct CommandHooks {
    hooks: Vec<Prepared>,
    setup: HookSetup,
}

struct Prepared {
    event: HookEvent,
    condition: Option<HookCondition>,
    command: String,
    timeout: Duration,
    source: Source,
}

impl std::fmt::Debug for CommandHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandHooks")
            .field("hooks", &self.hooks.len())
            .field("agent", &self.setup.agent_name)
            .finish()
    }
}

/// The context of one hook run.
#[derive(Debug, Default, Serialize)]
struct Payload<'a> {
    event: &'a str,
    agent: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    team: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    cwd: Option<&'a Path>,
    project_root: Option<&'a Path>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_use_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_input: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_result: Option<ResultPayload>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resumed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    final_text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    estimated_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    teammate: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_subject: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct ResultPayload {
    content: String,
    is_error: bool,
}

/// How one hook command ended.
#[derive(Debug)]
enum Run {
    /// Exit 0.
    Passed { stdout: String },
    /// It ended badly; `why` says how (exit code, signal, timeout, not started) and
    /// `stderr` is what it printed there.
    Failed { why: String, stderr: String },
    /// The run was cancelled while the hook ran.
    Cancelled,
}

impl CommandHooks {
    /// The hooks of `hooks` (in config order: user, project, local) for the agent of
    /// `setup`. A hook whose `if:` does not parse is left out with a warning in the
    /// returned notices (the config reader rejects those, so this is a safety net).
    pub fn new(hooks: &[Hook], setup: HookSetup) -> (Self, Vec<String>) {
        let mut notices = Vec::new();
        let prepared = hooks
            .iter()
            .filter_map(|hook| {
                let HookAction::Command {
                    command,
                    timeout_ms,
                } = &hook.action;
                let condition = match hook.condition.as_deref().map(HookCondition::parse) {
                    None => None,
                    Some(Ok(condition)) => Some(condition),
                    Some(Err(e)) => {
                        notices.push(format!(
                            "ignored the {} hook `{}` of the {} config: its `if` is invalid: {e}",
                            event_name(hook.event),
                            shown(command),
                            hook.source
                        ));
                        return None;
                    }
                };
                let timeout = timeout_ms
                    .unwrap_or(DEFAULT_TIMEOUT_MS)
                    .clamp(1, MAX_TIMEOUT_MS);
                Some(Prepared {
                    event: hook.event,
                    condition,
                    command: command.clone(),
                    timeout: Duration::from_millis(timeout),
                    source: hook.source,
                })
            })
            .collect();
        (
            Self {
                hooks: prepared,
                setup,
            },
            notices,
        )
    }

    /// Whether no hook is configured.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Whether some hook listens to `event`.
    pub fn has(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|h| h.event == event)
    }

    /// Runs the `teammate_idle` hooks for `teammate`; returns the failures, for
    /// the caller's log.
    pub async fn teammate_idle(&self, teammate: &str, cancel: &CancellationToken) -> Vec<String> {
        let payload = Payload {
            teammate: Some(teammate),
            ..self.payload(HookEvent::TeammateIdle)
        };
        let extra = vec![("TEAMMATE_NAME".to_string(), teammate.to_string())];
        self.run_all(
            HookEvent::TeammateIdle,
            &HookFacts::default(),
            payload,
            extra,
            cancel,
        )
        .await
        .failures
    }

    /// Runs the `task_completed` hooks for task `id` (`subject`, completed by
    /// `owner`); returns the failures, for the caller's log.
    pub async fn task_completed(
        &self,
        id: &str,
        subject: &str,
        owner: &str,
        cancel: &CancellationToken,
    ) -> Vec<String> {
        let payload = Payload {
            task_id: Some(id),
            task_subject: Some(subject),
            teammate: Some(owner),
            ..self.payload(HookEvent::TaskCompleted)
        };
        let extra = vec![
            ("TASK_ID".to_string(), id.to_string()),
            ("TASK_SUBJECT".to_string(), subject.to_string()),
            ("TEAMMATE_NAME".to_string(), owner.to_string()),
        ];
        self.run_all(
            HookEvent::TaskCompleted,
            &HookFacts::default(),
            payload,
            extra,
            cancel,
        )
        .await
        .failures
    }

    fn payload(&self, event: HookEvent) -> Payload<'_> {
        Payload {
            event: event_name(event),
            agent: &self.setup.agent_name,
            team: self.setup.team.as_deref(),
            session_id: self.setup.session_id.as_deref(),
            cwd: Some(&self.setup.context.cwd),
            project_root: Some(&self.setup.project_root),
            ..Payload::default()
        }
    }

    /// Runs every hook of `event` whose condition holds, in order. A blocking event
    /// stops at the first hook that fails.
    /// [`CommandHooks::run_all`] for an event about no tool or path, its failures reported.
    async fn fire_plain(
        &self,
        event: HookEvent,
        payload: Payload<'_>,
        cancel: &CancellationToken,
        events: &EventSink,
    ) -> Report {
        let report = self
            .run_all(event, &HookFacts::default(), payload, Vec::new(), cancel)
            .await;
        emit_failures(&report, events);
        report
    }

    async fn run_all(
        &self,
        event: HookEvent,
        facts: &HookFacts<'_>,
        payload: Payload<'_>,
        extra_env: Vec<(String, String)>,
        cancel: &CancellationToken,
    ) -> Report {
        let mut report = Report::default();
        let selected = self
            .hooks
            .iter()
            .filter(|h| h.event == event && h.condition.as_ref().is_none_or(|c| c.matches(facts)));
        let mut input = None;
        for hook in selected {
            let json = match &input {
                Some(json) => json,
                None => input.insert(serde_json::to_string(&payload).unwrap_or_default()),
            };
            let mut env = self.base_env(event);
            env.extend(extra_env.iter().cloned());
            let run = self.run_one(hook, json, env, cancel).await;
            let name = shown(&hook.command);
            match run {
                Run::Passed { stdout } => {
                    let stdout = roo_term::clip_with(stdout.trim(), MAX_TEXT_CHARS, CUT);
                    if !stdout.is_empty() {
                        report.stdout.push(stdout);
                    }
                }
                Run::Cancelled => {
                    report.cancelled = true;
                    break;
                }
                Run::Failed { why, stderr } => {
                    let stderr = roo_term::clip_with(stderr.trim(), MAX_TEXT_CHARS, CUT);
                    let line = stderr.lines().next().unwrap_or("").to_string();
                    report.failures.push(format!(
                        "the {} hook `{name}` ({} config) {why}{}",
                        event_name(event),
                        hook.source,
                        if line.is_empty() {
                            String::new()
                        } else {
                            format!(": {line}")
                        }
                    ));
                    report.failed.push(Failure {
                        command: name,
                        source: hook.source,
                        why,
                        stderr,
                    });
                    if matches!(event, HookEvent::PreToolUse | HookEvent::UserPromptSubmit) {
                        break;
                    }
                }
            }
        }
        report
    }

    fn base_env(&self, event: HookEvent) -> Vec<(String, String)> {
        let mut env = vec![
            ("HOOK_EVENT".to_string(), event_name(event).to_string()),
            ("AGENT_NAME".to_string(), self.setup.agent_name.clone()),
            (
                "PROJECT_ROOT".to_string(),
                self.setup.project_root.to_string_lossy().into_owned(),
            ),
        ];
        if let Some(team) = &self.setup.team {
            env.push(("TEAM_NAME".to_string(), team.clone()));
        }
        if let Some(id) = &self.setup.session_id {
            env.push(("SESSION_ID".to_string(), id.clone()));
        }
        env
    }

    /// Runs one hook command: stdin from a private temp file holding `input`, stdout
    /// to another (read back, capped), stderr captured.
    async fn run_one(
        &self,
        hook: &Prepared,
        input: &str,
        env: Vec<(String, String)>,
        cancel: &CancellationToken,
    ) -> Run {
        // A teammate's worktree may still be being checked out.
        if let Some(gate) = &self.setup.context.workspace {
            let ready = tokio::select! {
                ready = gate.ready() => ready,
                () = cancel.cancelled() => return Run::Cancelled,
            };
            if let Err(why) = ready {
                return Run::Failed {
                    why: format!(
                        "could not start: its working directory could not be prepared ({why})"
                    ),
                    stderr: String::new(),
                };
            }
        }
        let context = &self.setup.context;
        let mut launcher = context.launcher.clone();
        launcher.env.extend(env);
        let outcome = match exec::run_piped(
            &hook.command,
            input,
            hook.timeout,
            &launcher,
            &context.cwd,
            cancel,
            MAX_STDOUT_BYTES,
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(e) => {
                return Run::Failed {
                    why: format!("could not start: {e}"),
                    stderr: String::new(),
                };
            }
        };
        let stderr = outcome.stderr;
        match outcome.ending {
            Ending::Cancelled => Run::Cancelled,
            Ending::TimedOut => Run::Failed {
                why: format!(
                    "did not finish within {} ms and was killed with every process it started",
                    hook.timeout.as_millis()
                ),
                stderr,
            },
            Ending::Exited(status) => {
                use std::os::unix::process::ExitStatusExt;
                match (status.code(), status.signal()) {
                    (Some(0), _) => Run::Passed {
                        stdout: outcome.stdout,
                    },
                    (Some(code), _) => Run::Failed {
                        why: format!("exited with code {code}"),
                        stderr,
                    },
                    (None, Some(signal)) => Run::Failed {
                        why: format!("crashed (killed by signal {signal})"),
                        stderr,
                    },
                    (None, None) => Run::Failed {
                        why: "ended without an exit code".to_string(),
                        stderr,
                    },
                }
            }
        }
    }

    /// The facts, payload and environment of a tool call.
    fn call_context<'a>(
        &'a self,
        event: HookEvent,
        call: &ToolCallInfo<'a>,
        file_path: Option<&'a PathBuf>,
        relative: Option<&'a str>,
        command: Option<&'a str>,
    ) -> (HookFacts<'a>, Payload<'a>, Vec<(String, String)>) {
        let facts = HookFacts {
            tool: Some(call.tool.name()),
            path: relative,
            command,
        };
        let payload = Payload {
            tool_name: Some(call.tool.name()),
            tool_use_id: Some(call.id),
            tool_input: Some(call.input),
            file_path: file_path.map(|p| p.to_string_lossy().into_owned()),
            command,
            ..self.payload(event)
        };
        let mut env = vec![
            ("TOOL_NAME".to_string(), call.tool.name().to_string()),
            ("TOOL_USE_ID".to_string(), call.id.to_string()),
        ];
        if let Some(path) = file_path {
            env.push(("FILE_PATH".to_string(), path.to_string_lossy().into_owned()));
        }
        if let Some(command) = command {
            env.push(("COMMAND".to_string(), command.to_string()));
        }
        let input = call.input.to_string();
        if input.len() <= MAX_ENV_INPUT_BYTES {
            env.push(("TOOL_INPUT".to_string(), input));
        }
        (facts, payload, env)
    }

    /// The absolute path a call touches, and the same relative to the project root
    /// when inside it (for conditions).
    fn call_path(&self, call: &ToolCallInfo<'_>) -> (Option<PathBuf>, Option<String>) {
        match call.tool.permission_target(call.input) {
            PermissionTarget::Path(path) => {
                let absolute = normalize(&call.context.cwd.join(path));
                let shown = match absolute.strip_prefix(&self.setup.project_root) {
                    Ok(rel) if !rel.as_os_str().is_empty() => rel.to_string_lossy().into_owned(),
                    _ => absolute.to_string_lossy().into_owned(),
                };
                (Some(absolute), Some(shown))
            }
            _ => (None, None),
        }
    }
}

/// What running the hooks of one event came to.
#[derive(Debug, Default)]
struct Report {
    /// Stdout of the hooks that passed.
    stdout: Vec<String>,
    /// One line per failed hook, for notices and logs.
    failures: Vec<String>,
    failed: Vec<Failure>,
    cancelled: bool,
}

#[derive(Debug)]
struct Failure {
    command: String,
    source: Source,
    why: String,
    stderr: String,
}

impl Failure {
    /// What the model reads when this hook blocked a call.
    fn blocked(&self, event: HookEvent, what: &str) -> String {
        let stderr = if self.stderr.is_empty() {
            "(it printed nothing on stderr)".to_string()
        } else {
            self.stderr.clone()
        };
        format!(
            "{what} was blocked by a {} hook of the user's configuration (`{}`, {} config), \
             which {}. Its stderr:\n{stderr}",
            event_name(event),
            self.command,
            self.source,
            self.why
        )
    }
}

fn emit_failures(report: &Report, events: &EventSink) {
    for text in &report.failures {
        events.emit(AgentEvent::Notice { text: text.clone() });
    }
}

impl AgentHook for CommandHooks {
    fn session_start<'a>(
        &'a self,
        resumed: bool,
        cancel: &'a CancellationToken,
        events: &'a EventSink,
    ) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move {
            if !self.has(HookEvent::SessionStart) {
                return Vec::new();
            }
            let payload = Payload {
                resumed: Some(resumed),
                ..self.payload(HookEvent::SessionStart)
            };
            let report = self
                .fire_plain(HookEvent::SessionStart, payload, cancel, events)
                .await;
            report.stdout
        })
    }

    fn user_prompt_submit<'a>(
        &'a self,
        prompt: &'a str,
        cancel: &'a CancellationToken,
        events: &'a EventSink,
    ) -> BoxFuture<'a, PromptDecision> {
        Box::pin(async move {
            if !self.has(HookEvent::UserPromptSubmit) {
                return PromptDecision::default();
            }
            let payload = Payload {
                prompt: Some(prompt),
                ..self.payload(HookEvent::UserPromptSubmit)
            };
            let report = self
                .fire_plain(HookEvent::UserPromptSubmit, payload, cancel, events)
                .await;
            PromptDecision {
                block: report
                    .failed
                    .first()
                    .map(|f| f.blocked(HookEvent::UserPromptSubmit, "The prompt")),
                context: report.stdout,
            }
        })
    }

    fn pre_tool_use<'a>(
        &'a self,
        call: ToolCallInfo<'a>,
        events: &'a EventSink,
    ) -> BoxFuture<'a, Verdict> {
        Box::pin(async move {
            if !self.has(HookEvent::PreToolUse) {
                return Verdict::Continue;
            }
            let (absolute, relative) = self.call_path(&call);
            let command = command_of(&call);
            let (facts, payload, env) = self.call_context(
                HookEvent::PreToolUse,
                &call,
                absolute.as_ref(),
                relative.as_deref(),
                command.as_deref(),
            );
            let report = self
                .run_all(
                    HookEvent::PreToolUse,
                    &facts,
                    payload,
                    env,
                    &call.context.cancel,
                )
                .await;
            emit_failures(&report, events);
            if report.cancelled {
                return Verdict::Block {
                    reason: "Interrupted by the user before this call ran.".to_string(),
                };
            }
            match report.failed.first() {
                Some(failure) => Verdict::Block {
                    reason: failure.blocked(
                        HookEvent::PreToolUse,
                        &format!("This {} call", call.tool.name()),
                    ) + "\nThe call was not run.",
                },
                None => Verdict::Continue,
            }
        })
    }

    fn post_tool_use<'a>(
        &'a self,
        call: ToolCallInfo<'a>,
        output: &'a mut ToolOutput,
        events: &'a EventSink,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if !self.has(HookEvent::PostToolUse) {
                return;
            }
            let (absolute, relative) = self.call_path(&call);
            let command = command_of(&call);
            let (facts, mut payload, mut env) = self.call_context(
                HookEvent::PostToolUse,
                &call,
                absolute.as_ref(),
                relative.as_deref(),
                command.as_deref(),
            );
            payload.tool_result = Some(ResultPayload {
                content: roo_term::clip_with(&output.content, MAX_RESULT_CHARS, CUT),
                is_error: output.is_error,
            });
            env.push(("TOOL_IS_ERROR".to_string(), output.is_error.to_string()));
            let report = self
                .run_all(
                    HookEvent::PostToolUse,
                    &facts,
                    payload,
                    env,
                    &call.context.cancel,
                )
                .await;
            emit_failures(&report, events);
            for failure in &report.failed {
                let stderr = if failure.stderr.is_empty() {
                    String::new()
                } else {
                    format!(":\n{}", failure.stderr)
                };
                output.content.push_str(&format!(
                    "\n\n[post_tool_use hook `{}` ({} config) {}{stderr}]",
                    failure.command, failure.source, failure.why
                ));
            }
        })
    }

    fn pre_compact<'a>(
        &'a self,
        tokens: u64,
        cancel: &'a CancellationToken,
        events: &'a EventSink,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if !self.has(HookEvent::PreCompact) {
                return;
            }
            let payload = Payload {
                estimated_tokens: Some(tokens),
                ..self.payload(HookEvent::PreCompact)
            };
            self.fire_plain(HookEvent::PreCompact, payload, cancel, events)
                .await;
        })
    }

    fn stop<'a>(
        &'a self,
        outcome: &'a RunOutcome,
        final_text: &'a str,
        cancel: &'a CancellationToken,
        events: &'a EventSink,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if !self.has(HookEvent::Stop) {
                return;
            }
            let payload = Payload {
                outcome: Some(outcome.describe()),
                final_text: Some(final_text),
                ..self.payload(HookEvent::Stop)
            };
            self.fire_plain(HookEvent::Stop, payload, cancel, events)
                .await;
        })
    }
}

/// The command line of a Bash-like call.
fn command_of(call: &ToolCallInfo<'_>) -> Option<String> {
    match call.tool.permission_target(call.input) {
        PermissionTarget::Command(command) => Some(command),
        _ => None,
    }
}

/// The config name of an event (`pre_tool_use`).
pub fn event_name(event: HookEvent) -> &'static str {
    match event {
        HookEvent::SessionStart => "session_start",
        HookEvent::UserPromptSubmit => "user_prompt_submit",
        HookEvent::PreToolUse => "pre_tool_use",
        HookEvent::PostToolUse => "post_tool_use",
        HookEvent::Stop => "stop",
        HookEvent::PreCompact => "pre_compact",
        HookEvent::TeammateIdle => "teammate_idle",
        HookEvent::TaskCompleted => "task_completed",
    }
}

/// A command as shown in messages: its first line, at most 80 characters, with `…`
/// when anything was left out (the rest of the line or further lines).
fn shown(command: &str) -> String {
    let mut lines = command.trim().lines();
    let first = lines.next().unwrap_or("");
    match lines.next() {
        Some(_) => format!("{}…", roo_term::clip_with(first, 80, "")),
        None => roo_term::clip(first, 80),
    }
}

/// `a/./b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
