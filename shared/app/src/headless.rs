//! One-shot runs (`roo-lead -p`): run the prompt, print the answer in the chosen
//! format, exit with a code that says how it went.
//!
//! Text output (the answer on stdout, progress and errors on stderr) shows control
//! characters of what models, tools and providers wrote escaped
//! ([`roo_term::escape_text`]), as the interactive renderer does; `json` and
//! `stream-json` carry the exact strings (JSON escapes them).

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use roo_agent::RunResult;
use roo_agent::event::{AgentEvent, EventSink, RunOutcome};
use roo_llm::Usage;
use roo_store::{MemberState, Name};
use roo_team::{TeamEvent, TeamWait};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::exit::{self, AppError};
use crate::flags::OutputFormat;
use crate::left_team::TeamCalls;
use crate::render::interleaved::Interleaved;
use crate::render::{Style, headline};
use crate::setup::Built;

/// How a headless run prints and how long it waits for a team.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub format: OutputFormat,
    pub verbose: bool,
    /// The longest the lead waits, in all, for busy teammates after its first turn.
    pub team_timeout: Duration,
}

/// The input of a turn the lead takes because teammates wrote (their messages are
/// injected by the delivery hook at the top of the turn).
pub const TEAM_TURN_INPUT: &str = "Your teammates' messages came while you waited. Act on \
them; when the team's work is done, give your final answer.";

/// The input of a turn the lead takes because its background tasks ended (their
/// `<task-notification>`s are injected at the top of the turn).
pub const BACKGROUND_TURN_INPUT: &str = "Your background tasks ended; their notifications \
are above. Use their results to finish the task, then give your final answer.";

/// At most this many extra turns for background tasks in one headless run.
pub const MAX_BACKGROUND_TURNS: u32 = 5;

/// Runs `prompt` and prints the result. With a team (the slot is bound when the turn
/// ends), the lead stays: it takes teammates' messages as new turns, and ends when a
/// turn ends with every teammate idle, dead or not started and nothing unread, or at the
/// team timeout (exit 1, naming the busy teammates). Teammates still not started at
/// the end make it exit 1 too, saying how to start them.
pub async fn run(built: &mut Built, prompt: &str, options: Options) -> Result<ExitCode, AppError> {
    let started = Instant::now();
    let style = Style::for_stderr();
    let expanded = expand_prompt(built, prompt).await?;
    let prompt = expanded.as_deref().unwrap_or(prompt);
    for notice in &built.notices {
        eprintln!("{}", style.dim(&format!("note: {notice}")));
    }
    let (sink, events) = EventSink::channel();
    if let Some(subagents) = &built.subagents {
        subagents.tasks().set_listener(Some(sink.clone()));
    }
    let cancel = CancellationToken::new();
    // Ctrl+C (SIGINT) or SIGTERM cancel the run cleanly: tools are stopped, the
    // transcript stays consistent, and the exit code says it did not finish.
    let signal_cancel = cancel.clone();
    let signals = tokio::spawn(async move {
        wait_for_termination().await;
        signal_cancel.cancel();
    });

    let (_, placeholder) = roo_team::team_events();
    let team_events = std::mem::replace(&mut built.team_events, placeholder);
    // With --verbose (text and json), in-process teammates' work goes to stderr beside
    // the lead's progress, each line prefixed with the teammate's name.
    let (output, member_events) = roo_team::TeammateOutput::channel();
    if options.verbose && options.format != OutputFormat::StreamJson {
        built.spawner.set_output(output);
    }
    let printer = spawn_printer(events, member_events, team_events, options, style);
    let team_run = run_with_team(built, prompt, &sink, &cancel, options.team_timeout).await;
    let (shown_errors, team_calls) = finish_printing(built, sink, printer, options, style).await;
    signals.abort();

    let verdict = Verdict::of(built, &team_run, &team_calls, options.team_timeout).await;
    print_result(
        built,
        &team_run,
        &verdict,
        &shown_errors,
        options.format,
        started,
    );
    // A team left on disk is said, with what it holds, whatever the exit code; the
    // verdict comes last.
    for lines in crate::left_team::left_teams(built, &team_calls).await {
        crate::left_team::print(&lines, style);
    }
    // Task subjects (in the lost work) were written by models.
    for message in verdict.messages() {
        eprintln!("roo-lead: {}", roo_term::escape(message));
    }
    if let RunOutcome::Error { message } = &team_run.result.outcome
        && options.format == OutputFormat::Text
    {
        tracing::debug!("run failed: {message}");
    }
    Ok(ExitCode::from(verdict.code))
}

/// `prompt` as the REPL would run it: `-p "/commit fix typo"` runs the skill (or the
/// MCP prompt); `None` for a plain prompt.
async fn expand_prompt(built: &Built, prompt: &str) -> Result<Option<String>, AppError> {
    let mut command = crate::skill_command::skill_prompt(built.skills.as_ref(), prompt);
    if command.is_none() {
        command = crate::skill_command::mcp_prompt(built.mcp.as_ref(), prompt).await;
    }
    match command {
        Some(Ok(expanded)) => Ok(Some(expanded)),
        Some(Err(why)) => Err(AppError::Usage(why)),
        None => Ok(None),
    }
}

/// The task that prints the lead's events, its in-process teammates' and the team's
/// as they come, until the lead's events end. Returns the errors it printed (the
/// run's outcome does not repeat them), the last state it printed for each
/// teammate and the lead's team calls.
fn spawn_printer(
    mut events: tokio::sync::mpsc::UnboundedReceiver<AgentEvent>,
    mut member_events: tokio::sync::mpsc::UnboundedReceiver<roo_team::MemberEvent>,
    mut team_events: tokio::sync::mpsc::Receiver<TeamEvent>,
    options: Options,
    style: Style,
) -> tokio::task::JoinHandle<(Vec<String>, PrintedStates, TeamCalls)> {
    let Options {
        format, verbose, ..
    } = options;
    tokio::spawn(async move {
        let mut stdout = std::io::stdout();
        let mut teammates = Interleaved::new(std::io::stderr(), style);
        let mut printed = PrintedStates::new();
        let mut agent_open = true;
        let mut shown_errors = Vec::new();
        let mut team_calls = TeamCalls::default();
        loop {
            tokio::select! {
                event = events.recv(), if agent_open => match event {
                    Some(event) => {
                        team_calls.note(&event);
                        if let AgentEvent::Error { message } = &event
                            && format != OutputFormat::StreamJson
                        {
                            shown_errors.push(message.clone());
                        }
                        print_agent_event(&mut stdout, format, verbose, &style, &event);
                    }
                    None => agent_open = false,
                },
                Some(m) = member_events.recv() => teammates.member_event(m.member.as_str(), &m.event),
                Some(team) = team_events.recv() => {
                    printed.note(&team);
                    print_team_event(&mut stdout, format, verbose, &style, &team);
                }
                else => break,
            }
            if !agent_open {
                // The runs are over: print what the team reported meanwhile, then stop.
                while let Ok(m) = member_events.try_recv() {
                    teammates.member_event(m.member.as_str(), &m.event);
                }
                teammates.finish();
                while let Ok(team) = team_events.try_recv() {
                    printed.note(&team);
                    print_team_event(&mut stdout, format, verbose, &style, &team);
                }
                break;
            }
        }
        (shown_errors, printed, team_calls)
    })
}

/// After the runs: lets the team monitor catch up, ends the sub-agents, lets the
/// printer drain and end each teammate's lines on the state its config holds now.
/// Returns the errors the printer showed and the lead's team calls.
async fn finish_printing(
    built: &mut Built,
    sink: EventSink,
    printer: tokio::task::JoinHandle<(Vec<String>, PrintedStates, TeamCalls)>,
    options: Options,
    style: Style,
) -> (Vec<String>, TeamCalls) {
    if let Some(binding) = built.team.get() {
        // Let the monitor report the states the team ended in before the printer drains.
        roo_team::lead::status::monitor_caught_up(
            &binding.team,
            &mut built.team_status,
            Duration::from_secs(2),
        )
        .await;
    }
    // Sub-agents end with the run (any still running are killed), and stop sending.
    if let Some(subagents) = &built.subagents {
        subagents.shutdown().await;
        subagents.tasks().set_listener(None);
    }
    drop(sink);
    let (shown_errors, printed, team_calls) = printer.await.unwrap_or_default();
    // The team event channel drops events when it is full (a burst of messages or
    // states), and the catch-up above is bounded: end each teammate's lines on the
    // state its config holds now.
    if let Some(binding) = built.team.get() {
        let team = binding.team.clone();
        if let Ok(Ok(status)) =
            tokio::task::spawn_blocking(move || roo_team::TeamStatus::read(&team)).await
        {
            let mut stdout = std::io::stdout();
            for event in printed.corrections(&status) {
                print_team_event(&mut stdout, options.format, options.verbose, &style, &event);
            }
        }
    }
    (shown_errors, team_calls)
}

/// How a headless run ended: its exit code, whether the result is an error, and what
/// went wrong with the team besides the run's own outcome.
struct Verdict {
    code: u8,
    is_error: bool,
    /// Teammates still busy at the team timeout.
    timeout: Option<String>,
    /// Work a teammate's death sent back to pending and nobody finished.
    lost: Option<String>,
    /// The team could not be read.
    broken: Option<String>,
    /// Teammates no process ever joined, whom the lead did not wait for.
    not_started: Option<String>,
    /// TeamCreate or named Agent calls that failed.
    team_calls: Option<String>,
}

impl Verdict {
    async fn of(
        built: &Built,
        run: &TeamRun,
        calls: &TeamCalls,
        team_timeout: Duration,
    ) -> Verdict {
        let mut code = exit::for_outcome(&run.result.outcome);
        let mut is_error = !run.result.outcome.is_success();
        let timeout = run.timed_out.as_ref().map(|busy| {
            let names: Vec<String> = busy.iter().map(|n| n.to_string()).collect();
            let kept = match built.team.get() {
                Some(binding) => format!(
                    "; team {} is kept: {}",
                    binding.team.name(),
                    roo_team::tools::left_team_advice(binding.team.name())
                ),
                None => String::new(),
            };
            format!(
                "teammates still busy after the team timeout of {} s (--team-timeout): {}; the lead stopped waiting{kept}",
                team_timeout.as_secs(),
                if names.is_empty() { "unknown".to_string() } else { names.join(", ") }
            )
        });
        if timeout.is_some() {
            code = exit::NOT_COMPLETED;
            is_error = true;
        }
        let lost = lost_work(built).await;
        let broken = run.broken.as_ref().map(|error| {
            format!("the team could not be read, so the lead stopped waiting for it: {error}")
        });
        if broken.is_some() {
            code = exit::IO;
            is_error = true;
        }
        let not_started = not_started(built).await;
        let team_calls = calls.message();
        if (lost.is_some() || not_started.is_some() || team_calls.is_some()) && code == exit::OK {
            code = exit::NOT_COMPLETED;
            is_error = true;
        }
        Verdict {
            code,
            is_error,
            timeout,
            lost,
            broken,
            not_started,
            team_calls,
        }
    }

    /// What went wrong with the team, in the order they are printed.
    fn messages(&self) -> impl Iterator<Item = &String> {
        [
            &self.timeout,
            &self.lost,
            &self.broken,
            &self.not_started,
            &self.team_calls,
        ]
        .into_iter()
        .flatten()
    }
}

/// Work a teammate's death sent back to pending and nobody finished (not a success).
async fn lost_work(built: &Built) -> Option<String> {
    let binding = built.team.get()?;
    let (team, lead) = (binding.team.clone(), binding.me.clone());
    let lost = tokio::task::spawn_blocking(move || roo_team::lead::lost_work(&team, &lead))
        .await
        .unwrap_or_default();
    (!lost.is_empty()).then(|| {
        let tasks: Vec<String> = lost
            .iter()
            .map(|t| format!("#{} {}", t.id, t.subject))
            .collect();
        format!(
            "work was lost: a teammate died and these tasks were not finished: {}",
            tasks.join("; ")
        )
    })
}

/// Teammates no process ever joined when the run ended: the team did not finish (not a
/// success), and how to start them.
async fn not_started(built: &Built) -> Option<String> {
    let team = built.team.get()?.team.clone();
    let status = tokio::task::spawn_blocking(move || roo_team::TeamStatus::read(&team))
        .await
        .ok()?
        .ok()?;
    let names = status.not_started();
    (!names.is_empty()).then(|| {
        format!(
            "team {team} did not finish: {}; the team is kept: {}",
            roo_team::lead::status::not_started_advice(&status.team, &names),
            roo_team::tools::left_team_advice(&status.team),
            team = status.team,
        )
    })
}

/// The run's result on stdout: the answer as text (the outcome on stderr unless the
/// printer showed it), or one `result` JSON object.
fn print_result(
    built: &Built,
    run: &TeamRun,
    verdict: &Verdict,
    shown_errors: &[String],
    format: OutputFormat,
    started: Instant,
) {
    let result = &run.result;
    let mut stdout = std::io::stdout();
    match format {
        OutputFormat::Text => {
            if !result.final_text.is_empty() {
                let answer = roo_term::escape_text(result.final_text.trim_end());
                let _ = writeln!(stdout, "{answer}");
            }
            // A failed model call was printed as an error when it happened: once is
            // enough.
            let shown = matches!(&result.outcome, RunOutcome::Error { message } if shown_errors.contains(message));
            if !result.outcome.is_success() && !shown {
                eprintln!("roo-lead: {}", roo_term::escape(&result.outcome.describe()));
            }
        }
        OutputFormat::Json | OutputFormat::StreamJson => {
            let session_id = built
                .agent
                .session()
                .map(|s| s.id().to_string())
                .unwrap_or_default();
            let mut value = json!({
                "type": "result",
                "outcome": result.outcome,
                "is_error": verdict.is_error,
                "result": result.final_text,
                "session_id": session_id,
                "turns": run.turns,
                "usage": run.usage,
                "cost_usd": built.agent.cost(&run.usage),
                "duration_ms": started.elapsed().as_millis() as u64,
                "model": built.agent.model(),
            });
            if let Some(binding) = built.team.get() {
                value["team"] = json!({"name": binding.team.name(), "lead_runs": run.lead_runs});
                // What each member and each task spent, with the caps in force.
                if let Ok((spend, caps)) = binding.team.tasks().spend() {
                    value["team"]["spend"] = json!(spend);
                    value["team"]["caps"] = json!(caps);
                }
                if let Ok(tasks) = binding.team.tasks().list(&Default::default()) {
                    let spent: serde_json::Map<String, serde_json::Value> = tasks
                        .iter()
                        .filter(|t| !t.usage.is_empty())
                        .map(|t| (t.id.to_string(), json!(t.usage_total())))
                        .collect();
                    value["team"]["task_spend"] = json!(spent);
                }
            }
            if let Some(message) = &verdict.timeout {
                value["team_timeout"] = json!(message);
            }
            if let Some(message) = &verdict.lost {
                value["lost_work"] = json!(message);
            }
            if let Some(message) = &verdict.broken {
                value["team_error"] = json!(message);
            }
            if let Some(message) = &verdict.not_started {
                value["team_not_started"] = json!(message);
            }
            if let Some(message) = &verdict.team_calls {
                value["team_calls_failed"] = json!(message);
            }
            let _ = writeln!(stdout, "{value}");
        }
    }
    let _ = stdout.flush();
}

/// A lead's run and the turns its team gave it.
pub struct TeamRun {
    /// The last run's result (its outcome and final text).
    pub result: RunResult,
    /// Usage and turns of all the runs.
    pub usage: Usage,
    pub turns: u32,
    pub lead_runs: u32,
    /// The teammates still busy when the team timeout ended the wait.
    pub timed_out: Option<Vec<roo_store::Name>>,
    /// Why the wait ended early: the team config could not be read.
    pub broken: Option<String>,
}

/// Runs `input`. With a team (the slot is bound when a run ends), the lead stays: it
/// takes teammates' messages as new runs ([`TEAM_TURN_INPUT`]) and returns when a run
/// ends with every teammate idle or dead and nothing unread, when a run does not
/// complete, on `cancel`, or at `team_timeout` after the first run.
pub async fn run_with_team(
    built: &mut Built,
    input: &str,
    sink: &EventSink,
    cancel: &CancellationToken,
    team_timeout: Duration,
) -> TeamRun {
    let mut result = built.agent.run(input, sink, cancel.clone()).await;
    let mut usage = result.usage;
    let mut turns = result.turns;
    let mut lead_runs = 1u32;
    // Background tasks still running when the model ended its turn: wait for them and
    // give their results one more turn (bounded), so they are not lost.
    if let Some(subagents) = built.subagents.clone() {
        let mut rounds = 0;
        while result.outcome.is_success()
            && rounds < MAX_BACKGROUND_TURNS
            && (subagents.tasks().background_running() > 0 || subagents.has_pending())
        {
            subagents.tasks().wait_background(cancel).await;
            if cancel.is_cancelled() {
                result.outcome = RunOutcome::Cancelled;
                break;
            }
            result = built
                .agent
                .run(BACKGROUND_TURN_INPUT, sink, cancel.clone())
                .await;
            usage.add(&result.usage);
            turns += result.turns;
            lead_runs += 1;
            rounds += 1;
        }
    }
    let deadline = tokio::time::Instant::now() + team_timeout;
    let mut timed_out: Option<Vec<roo_store::Name>> = None;
    let mut broken: Option<String> = None;
    while result.outcome.is_success() && built.team.get().is_some() {
        let wait = tokio::select! {
            wait = roo_team::wait_for_team(&built.team, &mut built.team_status, deadline) => wait,
            _ = cancel.cancelled() => {
                result.outcome = RunOutcome::Cancelled;
                break;
            }
        };
        match wait {
            TeamWait::Input => {
                tokio::select! {
                    () = roo_team::lead::gather_input(&built.team, deadline) => {}
                    _ = cancel.cancelled() => {
                        result.outcome = RunOutcome::Cancelled;
                        break;
                    }
                }
                result = built.agent.run(TEAM_TURN_INPUT, sink, cancel.clone()).await;
                usage.add(&result.usage);
                turns += result.turns;
                lead_runs += 1;
            }
            TeamWait::Settled | TeamWait::Unbound => break,
            TeamWait::Broken { error } => {
                broken = Some(error);
                break;
            }
            TeamWait::TimedOut { busy } => {
                timed_out = Some(busy);
                break;
            }
        }
    }
    TeamRun {
        result,
        usage,
        turns,
        lead_runs,
        timed_out,
        broken,
    }
}

fn print_agent_event(
    stdout: &mut std::io::Stdout,
    format: OutputFormat,
    verbose: bool,
    style: &Style,
    event: &AgentEvent,
) {
    match format {
        OutputFormat::StreamJson => {
            if let Ok(line) = serde_json::to_string(event) {
                let _ = writeln!(stdout, "{line}");
                let _ = stdout.flush();
            }
        }
        OutputFormat::Text | OutputFormat::Json => {
            if verbose {
                progress_line(event, style);
            } else if let AgentEvent::Error { message } = event {
                eprintln!("{}", error_line(message, style));
            } else if let AgentEvent::Warning { text } = event {
                eprintln!("{}", warning_line(text, style));
            }
        }
    }
}

/// The last state line printed for each teammate.
#[derive(Default)]
struct PrintedStates(HashMap<Name, MemberState>);

impl PrintedStates {
    fn new() -> PrintedStates {
        PrintedStates::default()
    }

    fn note(&mut self, event: &TeamEvent) {
        if let TeamEvent::MemberState { name, state } = event {
            self.0.insert(name.clone(), *state);
        }
    }

    /// The state events that make the last line of each teammate in `status` its state
    /// there: for those never printed, or last printed in another state.
    fn corrections(&self, status: &roo_team::TeamStatus) -> Vec<TeamEvent> {
        status
            .members
            .iter()
            .filter(|m| self.0.get(&m.name) != Some(&m.state))
            .map(|m| TeamEvent::MemberState {
                name: m.name.clone(),
                state: m.state,
            })
            .collect()
    }
}

fn print_team_event(
    stdout: &mut std::io::Stdout,
    format: OutputFormat,
    verbose: bool,
    style: &Style,
    event: &TeamEvent,
) {
    match format {
        OutputFormat::StreamJson => {
            let _ = writeln!(stdout, "{}", team_event_json(event));
            let _ = stdout.flush();
        }
        OutputFormat::Text | OutputFormat::Json => {
            if verbose {
                eprintln!("{}", style.dim(&event.line()));
            }
        }
    }
}

/// A team event as a stream-json line: `teammate_spawned`, `teammate_message`,
/// `teammate_busy`, `teammate_idle`, `teammate_dead`, `teammate_not_started`,
/// `team_notice` (the `type` tag
/// and snake_case fields of the agent events).
pub fn team_event_json(event: &TeamEvent) -> serde_json::Value {
    match event {
        TeamEvent::Joined { name } => json!({"type": "teammate_spawned", "name": name}),
        TeamEvent::Message {
            from,
            kind,
            preview,
        } => {
            json!({"type": "teammate_message", "from": from, "message_type": kind, "preview": preview})
        }
        TeamEvent::MemberState { name, state } => {
            json!({"type": format!("teammate_{}", state.as_str()), "name": name})
        }
        TeamEvent::Notice { text } => json!({"type": "team_notice", "text": text}),
    }
}

/// One progress line on stderr for `--verbose`; the text of models, tools and hooks
/// in it is escaped.
fn progress_line(event: &AgentEvent, style: &Style) {
    let one_line = |text: &str| roo_term::escape(first_line(text));
    match event {
        AgentEvent::AssistantMessage { message } => {
            let text = message.text();
            if !text.trim().is_empty() && message.tool_uses().next().is_some() {
                eprintln!("{}", roo_term::escape_text(text.trim_end()));
            }
        }
        AgentEvent::ToolStart { summary, .. } => {
            eprintln!("{} {}", style.cyan("●"), one_line(summary));
        }
        AgentEvent::ToolEnd {
            is_error,
            preview,
            duration_ms,
            ..
        } => {
            let status = if *is_error {
                style.red("error")
            } else {
                style.green("ok")
            };
            eprintln!(
                "  {} {} ({} ms) {}",
                style.dim("⎿"),
                status,
                duration_ms,
                style.dim(&roo_term::escape_text(headline(preview)))
            );
        }
        AgentEvent::PermissionDenied {
            summary, reason, ..
        } => {
            eprintln!(
                "  {} {}: {}",
                style.red("denied"),
                one_line(summary),
                roo_term::escape_text(reason)
            );
        }
        AgentEvent::Compaction {
            method,
            messages_before,
            messages_after,
            ..
        } => eprintln!(
            "{}",
            style.dim(&format!(
                "context compacted ({method:?}): {messages_before} → {messages_after} messages"
            ))
        ),
        AgentEvent::Notice { text } => {
            let text = roo_term::escape_text(text);
            eprintln!("{}", style.dim(&format!("note: {text}")));
        }
        AgentEvent::SubagentStart { .. }
        | AgentEvent::SubagentProgress { .. }
        | AgentEvent::TaskEnded { .. } => {
            if let Some(line) = crate::render::subagent_line(event, style) {
                eprintln!("{line}");
            }
        }
        AgentEvent::Error { message } => eprintln!("{}", error_line(message, style)),
        AgentEvent::Warning { text } => eprintln!("{}", warning_line(text, style)),
        _ => {}
    }
}

/// `error: …` for stderr, the message (a provider's, a tool's) escaped.
fn error_line(message: &str, style: &Style) -> String {
    style.red(&format!("error: {}", roo_term::escape_text(message)))
}

/// `warning: …` for stderr, the text escaped.
fn warning_line(text: &str, style: &Style) -> String {
    style.yellow(&format!("warning: {}", roo_term::escape_text(text)))
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// Resolves on SIGINT, SIGTERM or SIGHUP (a closed terminal or tmux pane hangs up its
/// process: the run ends as on SIGTERM, its checkpoints settled, rather than dying).
pub async fn wait_for_termination() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    /// A hang-up (a closed tmux pane) ends the run like SIGTERM. On the code that did not
    /// listen for SIGHUP, its default action killed the process (this test's, as nextest
    /// runs each test in a process of its own) before the run could end and settle.
    #[tokio::test]
    async fn regression_a_hang_up_ends_the_run_like_sigterm() {
        let waiting = tokio::spawn(super::wait_for_termination());
        // Let the handlers be installed before the signal comes.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let sent = std::process::Command::new("kill")
            .args(["-HUP", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
            .await
            .expect("SIGHUP ends the wait")
            .unwrap();
    }
}
