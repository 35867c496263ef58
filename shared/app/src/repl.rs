//! The interactive `roo-lead` session on a terminal.
//!
//! One `select!` loop linearizes everything that can happen while a run is under
//! way: agent events (rendered as they stream), keys (Esc stops the run, Ctrl+C twice
//! exits), permission questions from the agent (answered with y / n / a) and team
//! events. While the user types, a second `select!` takes keys and team events, so a
//! teammate's message appears as one line above the prompt without disturbing the line
//! being edited. Slash commands are handled here and never reach the model.

use std::io::{Stdout, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::terminal;
use roo_agent::event::{AgentEvent, EventSink};
use roo_agent::permissions::{Approval, PermissionMode};
use roo_agent::skills::Skills;
use roo_agent::subagent::SubagentRuntime;
use roo_agent::{Agent, McpServers};
use roo_store::TaskFilter;
use roo_team::lead::status::{members_table, tasks_table};
use roo_team::{TeamEvent, TeamSlot, TeamStatus};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::approval_view::{ApprovalView, TooLarge, visible};
use crate::exit::{self, AppError};
use crate::line_editor::{EditAction, LineEditor};
use crate::render::{RawWriter, Renderer, Style};
use crate::setup::{Built, PendingApproval};

const PROMPT: &str = "› ";
/// Two Ctrl+C presses within this window exit.
const DOUBLE_PRESS: Duration = Duration::from_secs(2);

const HELP: &str = "Commands:
  /help            this help
  /clear           forget the conversation (the transcript keeps it)
  /cost            tokens used and cost of this session
  /mode [MODE]     show or set the permission mode: default, acceptEdits, plan, bypassPermissions, dontAsk
  /team            the team's members and their states (busy, idle, dead)
  /tasks [ID]      sub-agent tasks (id, type, status, time, tokens, result) and the team's task list; with an id, that task's whole result
  /exit            leave (also Ctrl+D, or Ctrl+C twice)
  /<skill> [ARGS]  run a skill: commit, review, test, and those in ~/.roocode/skills and .roocode/skills
  /mcp             the MCP servers: connected (tools, prompts), failed and why
  /mcp restart S   start MCP server S again (after it failed or exited)
  /mcp__<server>__<prompt> [ARGS]  send an MCP server's prompt
While the lead is idle, teammates' messages start a turn of its own (team_turns: false in a config file turns that off).
Keys: Esc stops the current run; Ctrl+B moves the sub-agents it waits for to the background; Enter sends; a trailing \\ or Ctrl+J adds a line; Up/Down browse history.";

/// Puts the terminal in raw mode for the session and restores it on drop.
struct RawMode;

impl RawMode {
    fn enable() -> Result<Self, AppError> {
        terminal::enable_raw_mode()
            .map_err(|e| AppError::Io(format!("failed to set up the terminal: {e}")))?;
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableBracketedPaste);
        Ok(Self)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::DisableBracketedPaste);
        let _ = terminal::disable_raw_mode();
    }
}

/// Reads terminal events on a thread of its own (crossterm's reader blocks).
fn spawn_key_reader() -> mpsc::UnboundedReceiver<Event> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        while let Ok(event) = crossterm::event::read() {
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    rx
}

/// Whether a key is Ctrl+C.
fn is_ctrl_c(key: &KeyEvent) -> bool {
    key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL)
}

/// Ctrl+B while the agent works: the sub-agents it waits for go on in the background.
fn is_ctrl_b(key: &KeyEvent) -> bool {
    key.code == KeyCode::Char('b') && key.modifiers.contains(KeyModifiers::CONTROL)
}

/// Team turns in a row, without the person's prompt, before they pause: a lead and
/// teammates answering each other without end cost tokens nobody asked for.
const MAX_TEAM_TURNS: u32 = 25;

/// Runs the interactive session until the user leaves.
pub async fn run(built: Built) -> Result<ExitCode, AppError> {
    let subagents = built.subagents.clone();
    let code = run_session(built).await;
    // Sub-agents end with the session: running ones are cancelled, their commands
    // killed, before the process exits.
    if let Some(runtime) = subagents {
        runtime.shutdown().await;
    }
    code
}

/// The session: read a line (or take the team's messages), run it, until the person
/// leaves. What `built` keeps beyond the fields taken here (the team tasks' guard)
/// lives until this returns.
async fn run_session(built: Built) -> Result<ExitCode, AppError> {
    let Built {
        agent,
        notices,
        approvals,
        team_sender: _team_sender,
        team_events,
        team,
        team_status,
        skills,
        subagents,
        mcp,
        team_turns,
        ..
    } = built;
    // Background tasks that end print one line at once, even while the user types.
    let (task_sink, task_events) = EventSink::channel();
    if let Some(runtime) = &subagents {
        runtime.tasks().set_listener(Some(task_sink));
    } else {
        drop(task_sink);
    }
    // Restore the terminal even if something panics.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = terminal::disable_raw_mode();
        default_hook(info);
    }));
    let _raw = RawMode::enable()?;
    let style = Style::for_stdout();
    let mut session = Session {
        agent,
        team,
        team_status,
        team_events,
        task_events,
        approvals: approvals.unwrap_or_else(|| mpsc::channel(1).1),
        keys: spawn_key_reader(),
        render: Renderer::new(RawWriter::new(std::io::stdout()), style),
        editor: LineEditor::new(),
        style,
        skills,
        subagents,
        mcp,
        last_status: None,
        last_ctrl_c: None,
        idle_question: None,
        team_turns: TeamTurns::new(team_turns),
    };
    session.banner(&notices);
    loop {
        let line = match session.read_input().await {
            Input::Exit => break,
            Input::Team => {
                if session.team_turn().await.exit {
                    break;
                }
                continue;
            }
            Input::Line(line) => line,
        };
        match session.command(line.trim()).await {
            Command::Done => {}
            Command::Exit => break,
            Command::Prompt(prompt) => {
                session.team_turns.person_spoke();
                if session.run(&prompt).await.exit {
                    break;
                }
            }
        }
    }
    Ok(ExitCode::from(exit::OK))
}

/// What the idle prompt yields.
enum Input {
    /// A line the person submitted.
    Line(String),
    /// Teammates' messages wait and the lead takes them up as a turn of its own.
    Team,
    /// The person leaves (Ctrl+D, Ctrl+C twice, the terminal gone).
    Exit,
}

/// What a submitted line is.
enum Command {
    /// Handled here (a slash command, an error shown).
    Done,
    /// Input for the model (the line, or a skill's or MCP prompt's expansion).
    Prompt(String),
    Exit,
}

/// How a run ended, as far as the session cares.
struct RunEnd {
    /// Ctrl+C twice during the run: leave.
    exit: bool,
    /// The run completed (not stopped, not failed).
    completed: bool,
}

/// When teammates' messages start a turn of their own while the lead is idle.
struct TeamTurns {
    /// The `team_turns` setting.
    enabled: bool,
    /// A team turn was stopped or failed, or there were too many in a row: messages
    /// wait for the person's next prompt.
    paused: bool,
    /// Team turns since the person's last prompt.
    in_a_row: u32,
    /// When messages that wake the lead were first seen waiting ([`TEAM_MAX_DELAY`](roo_team::lead::TEAM_MAX_DELAY)).
    waiting_since: Option<tokio::time::Instant>,
}

impl TeamTurns {
    fn new(enabled: bool) -> TeamTurns {
        TeamTurns {
            enabled,
            paused: false,
            in_a_row: 0,
            waiting_since: None,
        }
    }

    fn ready(&self) -> bool {
        self.enabled && !self.paused
    }

    /// The person submitted a prompt: team turns may start again afterwards.
    fn person_spoke(&mut self) {
        self.paused = false;
        self.in_a_row = 0;
    }
}

/// Resolves when teammates' messages have waited for the lead long enough to take them
/// up: [`TEAM_QUIET`](roo_team::lead::TEAM_QUIET) after now (the caller starts this again after every message or
/// key, so typing and a burst of messages postpone it), at most [`TEAM_MAX_DELAY`](roo_team::lead::TEAM_MAX_DELAY)
/// after they were first seen (`since`).
async fn team_wake(slot: &TeamSlot, since: &mut Option<tokio::time::Instant>) {
    roo_team::lead::team_input(slot).await;
    let now = tokio::time::Instant::now();
    let first = *since.get_or_insert(now);
    tokio::time::sleep_until(
        (now + roo_team::lead::TEAM_QUIET).min(first + roo_team::lead::TEAM_MAX_DELAY),
    )
    .await;
}

/// The interactive session's state, between runs and during them.
struct Session {
    agent: Agent,
    team: TeamSlot,
    team_status: watch::Receiver<Option<TeamStatus>>,
    team_events: mpsc::Receiver<TeamEvent>,
    task_events: mpsc::UnboundedReceiver<AgentEvent>,
    approvals: mpsc::Receiver<PendingApproval>,
    keys: mpsc::UnboundedReceiver<Event>,
    render: Renderer<RawWriter<Stdout>>,
    editor: LineEditor,
    style: Style,
    skills: Option<Skills>,
    subagents: Option<SubagentRuntime>,
    mcp: Option<McpServers>,
    /// The team status line shown last (see [`team_line`]).
    last_status: Option<String>,
    last_ctrl_c: Option<Instant>,
    /// A teammate's question asked while the lead is idle, answered at the prompt.
    idle_question: Option<Question>,
    team_turns: TeamTurns,
}

impl Session {
    /// The first lines: model, provider, mode, session, notices.
    fn banner(&mut self, notices: &[String]) {
        let style = self.style;
        let session = self
            .agent
            .session()
            .map(|s| s.id().to_string())
            .unwrap_or_default();
        let mode = self
            .agent
            .policy()
            .read()
            .map(|p| p.mode().to_string())
            .unwrap_or_default();
        let resumed = self.agent.messages().len();
        let (model, provider) = (
            self.agent.model().to_string(),
            self.agent.provider().name().to_string(),
        );
        let out = self.render.out();
        let _ = writeln!(
            out,
            "{} {}",
            style.bold("RooCode"),
            style.dim(&format!(
                "· {model} ({provider}) · mode {mode} · session {session}"
            ))
        );
        let _ = writeln!(
            out,
            "{}",
            style.dim("/help for commands · Esc stops a run · Ctrl+C twice exits")
        );
        for notice in notices {
            let _ = writeln!(out, "{}", style.dim(&format!("note: {notice}")));
        }
        if resumed > 0 {
            let _ = writeln!(out, "{}", style.dim(&format!("resumed {resumed} messages")));
        }
    }

    /// One line above the prompt, the line being edited redrawn below it.
    fn above(&mut self, line: &str) {
        let width = terminal::size().map(|(w, _)| w).unwrap_or(80);
        let _ = self
            .editor
            .print_above(self.render.out(), line, PROMPT, width);
    }

    /// Reads one line at the prompt. Meanwhile teammates' events and finished
    /// background tasks print above it, a teammate's question is asked and answered
    /// there, and teammates' messages may start a turn ([`Input::Team`]).
    async fn read_input(&mut self) -> Input {
        let width = terminal::size().map(|(w, _)| w).unwrap_or(80);
        let _ = self.editor.render(self.render.out(), PROMPT, width);
        let style = self.style;
        loop {
            let team_ready = self.team_turns.ready() && self.idle_question.is_none();
            let event = tokio::select! {
                key = self.keys.recv() => match key {
                    Some(event) => event,
                    None => return Input::Exit,
                },
                // A teammate's question while the lead is idle: asked above the prompt,
                // answered with the next y / n / a key.
                Some(pending) = self.approvals.recv(), if self.idle_question.is_none() => {
                    let (question, lines) = Question::open(pending, &style, false);
                    for line in lines {
                        self.above(&line);
                    }
                    self.idle_question = question;
                    continue;
                }
                // The asker withdrew its question (it ended, died or was answered).
                () = withdrawn(&mut self.idle_question) => {
                    self.idle_question = None;
                    self.above(&style.dim("  → withdrawn: the question no longer waits for an answer"));
                    continue;
                }
                Some(team) = self.team_events.recv() => {
                    let status = self.team_status.borrow().clone();
                    if let Some(line) = team_line(&style, &team, &status, &mut self.last_status) {
                        self.above(&line);
                    }
                    continue;
                }
                Some(task) = self.task_events.recv() => {
                    if let Some(line) = crate::render::subagent_line(&task, &style) {
                        self.above(&line);
                    }
                    continue;
                }
                () = team_wake(&self.team, &mut self.team_turns.waiting_since), if team_ready => {
                    return Input::Team;
                }
            };
            if let Event::Key(key) = &event
                && key.kind != KeyEventKind::Release
                && !is_ctrl_c(key)
                && let Some(question) = self.idle_question.take()
            {
                let (kept, lines) = question.key(key, &style, false);
                for line in lines {
                    self.above(&line);
                }
                self.idle_question = kept;
                continue;
            }
            let action = match event {
                Event::Key(key) if key.kind != KeyEventKind::Release => {
                    if !is_ctrl_c(&key) {
                        self.last_ctrl_c = None;
                    }
                    self.editor.key(key)
                }
                Event::Paste(text) => {
                    self.editor.paste(&text);
                    EditAction::Continue
                }
                Event::Resize(..) => EditAction::Continue,
                _ => continue,
            };
            let width = terminal::size().map(|(w, _)| w).unwrap_or(80);
            let out = self.render.out();
            match action {
                EditAction::Continue => {
                    let _ = self.editor.render(out, PROMPT, width);
                }
                EditAction::Submit(line) => {
                    let _ = writeln!(out);
                    self.editor.reset_render();
                    return Input::Line(line);
                }
                EditAction::Eof => {
                    let _ = writeln!(out);
                    return Input::Exit;
                }
                EditAction::Interrupt => {
                    if self.last_ctrl_c.is_some_and(|t| t.elapsed() < DOUBLE_PRESS) {
                        let _ = writeln!(out);
                        return Input::Exit;
                    }
                    self.last_ctrl_c = Some(Instant::now());
                    self.editor.clear();
                    let _ = writeln!(out);
                    self.editor.reset_render();
                    let _ = writeln!(out, "{}", style.dim("(press Ctrl+C again to exit)"));
                    let _ = self.editor.render(out, PROMPT, width);
                }
            }
        }
    }

    /// A submitted line: a slash command handled here, or the prompt for the model
    /// (a skill's or MCP prompt's expansion, or the line itself).
    async fn command(&mut self, trimmed: &str) -> Command {
        let style = self.style;
        if trimmed.is_empty() {
            return Command::Done;
        }
        if trimmed == "/mcp" {
            let report = self.mcp.as_ref().map_or_else(
                || "No MCP servers are configured (mcp_servers: in a config file).\n".to_string(),
                McpServers::report,
            );
            let _ = write!(self.render.out(), "{report}");
            return Command::Done;
        }
        if let Some(rest) = trimmed.strip_prefix("/mcp ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let line = match (words.as_slice(), self.mcp.as_ref()) {
                (["restart", server], Some(servers)) => {
                    let _ = writeln!(
                        self.render.out(),
                        "{}",
                        style.dim(&format!("(restarting {server}…)"))
                    );
                    match servers.restart(server).await {
                        Ok(text) => style.dim(&text),
                        Err(why) => style.red(&format!("error: {why}")),
                    }
                }
                (["restart", _], None) => style
                    .red("error: no MCP servers are configured (mcp_servers: in a config file)"),
                _ => style.red("error: usage: /mcp, or /mcp restart <server>"),
            };
            let _ = writeln!(self.render.out(), "{line}");
            return Command::Done;
        }
        let mut skill = crate::skill_command::skill_prompt(self.skills.as_ref(), trimmed);
        if skill.is_none() {
            skill = crate::skill_command::mcp_prompt(self.mcp.as_ref(), trimmed).await;
        }
        match skill {
            Some(Ok(prompt)) => return Command::Prompt(prompt),
            Some(Err(why)) => {
                let _ = writeln!(self.render.out(), "{}", style.red(&format!("error: {why}")));
                return Command::Done;
            }
            None => {}
        }
        let Some(command) = trimmed.strip_prefix('/') else {
            return Command::Prompt(trimmed.to_string());
        };
        match slash_command(
            command,
            &mut self.agent,
            &self.team,
            self.subagents.as_ref(),
            self.render.out(),
            &style,
        ) {
            Flow::Continue if command.trim() == "help" => {
                let help = crate::skill_command::skills_help(self.skills.as_ref());
                let _ = write!(self.render.out(), "{help}");
                let help = crate::skill_command::mcp_help(self.mcp.as_ref());
                let _ = write!(self.render.out(), "{help}");
                Command::Done
            }
            Flow::Continue => Command::Done,
            Flow::Exit => Command::Exit,
        }
    }

    /// Teammates' messages as a turn of the lead's own, shown as such. The person's
    /// unfinished line is kept and comes back at the prompt after the turn. A turn that
    /// was stopped (Esc) or failed, or one too many in a row, pauses team turns until
    /// the person's next prompt, so a failing provider is not asked again and again.
    async fn team_turn(&mut self) -> RunEnd {
        let style = self.style;
        let _ = self.editor.erase(self.render.out());
        let _ = writeln!(
            self.render.out(),
            "{}",
            style.cyan("» teammates' messages (Esc stops)")
        );
        self.team_turns.in_a_row += 1;
        let end = self.run(crate::headless::TEAM_TURN_INPUT).await;
        let why = if !end.completed {
            Some("stopped".to_string())
        } else if self.team_turns.in_a_row >= MAX_TEAM_TURNS {
            Some(format!("{MAX_TEAM_TURNS} team turns in a row"))
        } else {
            None
        };
        if let Some(why) = why {
            self.team_turns.paused = true;
            let text = format!("({why}: teammates' messages now wait for your next prompt)");
            let _ = writeln!(self.render.out(), "{}", style.dim(&text));
        }
        end
    }

    /// Runs the agent on `input`, rendering its events as they stream: Esc stops it,
    /// Ctrl+C twice leaves, Ctrl+B moves the sub-agents it waits for to the background,
    /// and permission questions (its own and teammates') are asked and answered here.
    async fn run(&mut self, input: &str) -> RunEnd {
        let style = self.style;
        self.team_turns.waiting_since = None;
        let cancel = CancellationToken::new();
        let (sink, mut events) = EventSink::channel();
        let mut asking: Option<Question> = None;
        let mut exit_after = false;
        let result = {
            let run = self.agent.run(input, &sink, cancel.clone());
            tokio::pin!(run);
            loop {
                tokio::select! {
                    result = &mut run => break result,
                    Some(event) = events.recv() => self.render.event(&event),
                    Some(event) = self.task_events.recv() => self.render.event(&event),
                    Some(event) = self.team_events.recv() => {
                        if let Some(line) =
                            team_line(&style, &event, &self.team_status.borrow(), &mut self.last_status)
                        {
                            self.render.break_line();
                            let _ = writeln!(self.render.out(), "{line}");
                        }
                    }
                    Some(pending) = self.approvals.recv(), if asking.is_none() => {
                        self.render.break_line();
                        let (question, lines) = Question::open(pending, &style, true);
                        print_lines(self.render.out(), &lines);
                        asking = question;
                    }
                    () = withdrawn(&mut asking) => {
                        asking = None;
                        let _ = writeln!(self.render.out(), "{}", style.dim("  → withdrawn: the question no longer waits for an answer"));
                    }
                    Some(event) = self.keys.recv() => {
                        let Event::Key(key) = event else { continue };
                        if key.kind == KeyEventKind::Release {
                            continue;
                        }
                        if is_ctrl_c(&key) {
                            if self.last_ctrl_c.is_some_and(|t| t.elapsed() < DOUBLE_PRESS) {
                                exit_after = true;
                            } else {
                                self.last_ctrl_c = Some(Instant::now());
                                self.render.break_line();
                                let _ = writeln!(self.render.out(), "{}", style.dim("(stopping; press Ctrl+C again to exit)"));
                            }
                            if let Some(question) = asking.take() {
                                let _ = question.pending.reply.send(Approval::Deny { feedback: None });
                            }
                            cancel.cancel();
                            continue;
                        }
                        self.last_ctrl_c = None;
                        if let Some(question) = asking.take() {
                            let (kept, lines) = question.key(&key, &style, true);
                            print_lines(self.render.out(), &lines);
                            if kept.is_none() && key.code == KeyCode::Esc {
                                cancel.cancel();
                            }
                            asking = kept;
                        } else if key.code == KeyCode::Esc {
                            cancel.cancel();
                        } else if is_ctrl_b(&key) {
                            let moved = self.subagents.as_ref().map_or(0, |s| s.detach_foreground());
                            let text = match moved {
                                0 => "(no sub-agent is running in the foreground)".to_string(),
                                1 => "(moved 1 sub-agent to the background; /tasks lists it)".to_string(),
                                n => format!("(moved {n} sub-agents to the background; /tasks lists them)"),
                            };
                            self.render.break_line();
                            let _ = writeln!(self.render.out(), "{}", style.dim(&text));
                        }
                    }
                }
            }
        };
        drop(sink);
        while let Ok(event) = events.try_recv() {
            self.render.event(&event);
        }
        // A teammate's question still open when the lead's run ended stays open: it is
        // answered at the prompt (the lead's own questions end with its run).
        if let Some(question) = asking.take() {
            self.idle_question = Some(question);
        }
        RunEnd {
            exit: exit_after,
            completed: result.outcome.is_success(),
        }
    }
}

enum Flow {
    Continue,
    Exit,
}

fn slash_command(
    command: &str,
    agent: &mut roo_agent::Agent,
    team: &TeamSlot,
    subagents: Option<&roo_agent::subagent::SubagentRuntime>,
    out: &mut RawWriter<Stdout>,
    style: &Style,
) -> Flow {
    let mut words = command.split_whitespace();
    let name = words.next().unwrap_or("");
    let arg = words.next();
    match name {
        "exit" | "quit" => return Flow::Exit,
        "help" | "" => {
            let _ = writeln!(out, "{HELP}");
        }
        "clear" => match agent.clear() {
            Ok(()) => {
                let _ = writeln!(out, "{}", style.dim("conversation cleared"));
            }
            Err(e) => {
                let _ = writeln!(out, "{}", style.red(&format!("error: {e}")));
            }
        },
        "cost" => {
            let usage = agent.total_usage();
            let cost = agent.cost(&usage).map_or_else(
                || "unknown (no price for this model)".to_string(),
                |c| format!("${c:.4}"),
            );
            let _ = writeln!(
                out,
                "model {}\ninput {} · output {} · cache read {} · cache write {} tokens\ncost {}",
                agent.model(),
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                cost
            );
        }
        "mode" => match arg {
            None => {
                let mode = agent
                    .policy()
                    .read()
                    .map(|p| p.mode().to_string())
                    .unwrap_or_default();
                let _ = writeln!(out, "permission mode: {mode}");
            }
            Some(m) => match m.parse::<PermissionMode>() {
                Ok(mode) => {
                    if let Ok(mut policy) = agent.policy().write() {
                        policy.set_mode(mode);
                    }
                    let _ = writeln!(out, "{}", style.dim(&format!("permission mode: {mode}")));
                }
                Err(e) => {
                    let _ = writeln!(out, "{}", style.red(&format!("error: {e}")));
                }
            },
        },
        "tasks" if arg.is_some() => {
            let id = arg.unwrap_or_default();
            match subagents.and_then(|s| crate::tasks_view::task_detail(s.tasks(), id)) {
                Some(text) => {
                    let _ = write!(out, "{text}");
                }
                None => {
                    let _ = writeln!(out, "{}", style.red(&format!("error: no task {id}")));
                }
            }
        }
        "tasks" => {
            if let Some(table) = subagents.and_then(|s| crate::tasks_view::tasks_table(s.tasks())) {
                let _ = write!(out, "{table}");
            }
            let _ = write!(out, "{}", team_command(name, team));
        }
        "team" => {
            let _ = write!(out, "{}", team_command(name, team));
        }
        other => {
            let _ = writeln!(
                out,
                "{}",
                style.red(&format!(
                    "unknown command /{other}; /help lists the commands"
                ))
            );
        }
    }
    Flow::Continue
}

/// The output of `/team` or `/tasks` for the team `slot` is bound to.
pub fn team_command(name: &str, slot: &TeamSlot) -> String {
    let Some(binding) = slot.get() else {
        return "no team yet: the lead creates one with its TeamCreate tool (or start roo-lead with --team NAME)\n".to_string();
    };
    // Reads take no lock (PROTOCOL.md §2.3) and the files are small.
    let shown = if name == "team" {
        binding
            .team
            .config()
            .and_then(|c| Ok(members_table(&c, &binding.team.liveness(&c)?)))
    } else {
        binding
            .team
            .tasks()
            .list(&TaskFilter::default())
            .map(|tasks| {
                format!(
                    "tasks of team {}\n{}",
                    binding.team.name(),
                    tasks_table(&tasks)
                )
            })
    };
    shown.unwrap_or_else(|e| format!("error: {e}\n"))
}

/// One styled line for a team event; a state change shows the whole status line, read
/// when the event is shown — so several changes seen in one poll would print the same
/// line several times: `last_status` (the status line shown last) leaves those out.
fn team_line(
    style: &Style,
    event: &TeamEvent,
    status: &Option<TeamStatus>,
    last_status: &mut Option<String>,
) -> Option<String> {
    Some(match event {
        TeamEvent::MemberState { .. } if status.is_some() => {
            let line = status.as_ref().map(TeamStatus::line).unwrap_or_default();
            if last_status.as_deref() == Some(line.as_str()) {
                return None;
            }
            *last_status = Some(line.clone());
            style.dim(&line)
        }
        TeamEvent::Message { .. } => style.cyan(&event.line()),
        TeamEvent::Joined { .. } | TeamEvent::MemberState { .. } | TeamEvent::Notice { .. } => {
            style.dim(&event.line())
        }
    })
}

fn print_lines(out: &mut RawWriter<Stdout>, lines: &[String]) {
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
}

/// Resolves when the open question's asker stopped waiting for it (its reply channel
/// closed); never while no question is open.
async fn withdrawn(question: &mut Option<Question>) {
    match question {
        Some(question) => question.pending.reply.closed().await,
        None => std::future::pending().await,
    }
}

/// A permission question on screen: the call shown whole (`ApprovalView`), compact
/// until `v` when long, and not approvable while part of it is hidden.
struct Question {
    pending: PendingApproval,
    view: ApprovalView,
    expanded: bool,
}

impl Question {
    /// Shows `pending`: the question, or, for a call too large to show whole, the
    /// denial it got without asking (`None`).
    fn open(
        pending: PendingApproval,
        style: &Style,
        running: bool,
    ) -> (Option<Question>, Vec<String>) {
        if pending.reply.is_closed() {
            // Withdrawn while it waited behind another question.
            return (None, Vec::new());
        }
        let request = &pending.request;
        // Every text of the question is made visible: no escape sequence reaches the
        // terminal to redraw what the person reads.
        let mut lines = vec![format!(
            "{} {}",
            style.yellow("?"),
            style.bold(&visible(&request.summary))
        )];
        if !request.reason.is_empty() {
            lines.push(format!("  {}", style.dim(&visible(&request.reason))));
        }
        // Rows of the terminal's width, less the indent: the compact view counts rows.
        let width = usize::from(terminal::size().map(|(w, _)| w).unwrap_or(80)).saturating_sub(4);
        match ApprovalView::of(request, width) {
            Err(TooLarge(why)) => {
                lines.push(style.dim(&format!("  → denied: {why}")));
                let _ = pending.reply.send(Approval::Deny {
                    feedback: Some(why),
                });
                (None, lines)
            }
            Ok(view) => {
                let question = Question {
                    pending,
                    view,
                    expanded: false,
                };
                for line in question.view.compact() {
                    lines.push(format!("    {line}"));
                }
                if question.view.hidden() > 0 {
                    lines.push(style.dim(&format!(
                        "    … {} more rows: press v to see them all before answering",
                        question.view.hidden()
                    )));
                }
                lines.push(question.keys(style, running));
                (Some(question), lines)
            }
        }
    }

    fn hiding(&self) -> bool {
        !self.expanded && self.view.hidden() > 0
    }

    fn keys(&self, style: &Style, running: bool) -> String {
        format!(
            "  {} yes   {} no   {} always (saves: {}){}   {}",
            style.bold("[y]"),
            style.bold("[n]"),
            style.bold("[a]"),
            visible(&self.pending.request.suggested_rule),
            if self.hiding() {
                format!("   {} view all", style.bold("[v]"))
            } else {
                String::new()
            },
            style.dim(if running {
                "(Esc: no, and stop)"
            } else {
                "(Esc: no)"
            })
        )
    }

    /// Takes `key`: the question back while it stays open, and the lines to print.
    fn key(
        mut self,
        key: &KeyEvent,
        style: &Style,
        running: bool,
    ) -> (Option<Question>, Vec<String>) {
        match key.code {
            KeyCode::Char('v') | KeyCode::Char('V') if self.hiding() => {
                self.expanded = true;
                let mut lines: Vec<String> = self.view.lines[self.view.compact().len()..]
                    .iter()
                    .map(|line| format!("    {line}"))
                    .collect();
                lines.push(self.keys(style, running));
                (Some(self), lines)
            }
            _ => match answer(key) {
                Some(Approval::AllowOnce | Approval::AllowAlways) if self.hiding() => {
                    let hint = style.dim(&format!(
                        "  {} rows of this call are hidden: press v to see them before allowing it",
                        self.view.hidden()
                    ));
                    (Some(self), vec![hint])
                }
                Some(approval) => {
                    let label = style.dim(answer_label(&approval)).to_string();
                    let _ = self.pending.reply.send(approval);
                    (None, vec![label])
                }
                None => (Some(self), Vec::new()),
            },
        }
    }
}

fn answer(key: &KeyEvent) -> Option<Approval> {
    match key.code {
        KeyCode::Char('y') | KeyCode::Char('Y') => Some(Approval::AllowOnce),
        KeyCode::Char('a') | KeyCode::Char('A') => Some(Approval::AllowAlways),
        KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => {
            Some(Approval::Deny { feedback: None })
        }
        _ => None,
    }
}

fn answer_label(approval: &Approval) -> &'static str {
    match approval {
        Approval::AllowOnce => "  → allowed once",
        Approval::AllowAlways => "  → always allowed",
        Approval::Deny { .. } => "  → denied",
    }
}

#[cfg(test)]
mod tests {
    use roo_store::{MemberState, Name};
    use roo_team::TeamEvent;
    use roo_team::lead::status::{MemberStatus, TeamStatus};

    use super::team_line;
    use crate::render::Style;

    fn status(states: &[(&str, MemberState)]) -> Option<TeamStatus> {
        Some(TeamStatus {
            team: Name::parse("crew").unwrap(),
            members: states
                .iter()
                .map(|(name, state)| MemberStatus {
                    name: Name::parse(name).unwrap(),
                    state: *state,
                    shut_down: false,
                })
                .collect(),
        })
    }

    fn change(name: &str, state: MemberState) -> TeamEvent {
        TeamEvent::MemberState {
            name: Name::parse(name).unwrap(),
            state,
        }
    }

    #[test]
    fn state_changes_seen_in_one_poll_print_the_status_line_once() {
        let style = Style::plain();
        let mut last = None;
        let now = status(&[("alice", MemberState::Idle), ("bob", MemberState::Busy)]);
        // The monitor reported alice and bob together: the status already holds both.
        let first = team_line(&style, &change("alice", MemberState::Idle), &now, &mut last);
        assert_eq!(first.as_deref(), Some("team crew · alice idle · bob busy"));
        assert_eq!(
            team_line(&style, &change("bob", MemberState::Busy), &now, &mut last),
            None
        );
        // Other events are always shown, and a new status is shown again.
        assert!(
            team_line(
                &style,
                &TeamEvent::Notice { text: "x".into() },
                &now,
                &mut last
            )
            .is_some()
        );
        let later = status(&[("alice", MemberState::Idle), ("bob", MemberState::Idle)]);
        assert_eq!(
            team_line(&style, &change("bob", MemberState::Idle), &later, &mut last).as_deref(),
            Some("team crew · alice idle · bob idle")
        );
    }
    #[test]
    fn no_text_of_a_question_reaches_the_terminal_raw() {
        use roo_agent::permissions::PermissionRequest;
        let (reply, _answer) = tokio::sync::oneshot::channel();
        let pending = crate::setup::PendingApproval {
            request: PermissionRequest {
                tool: "Bash".to_string(),
                summary: "Bash(:\u{1b}[1;2r; touch own.txt)".to_string(),
                input: serde_json::json!({"command": ":\u{1b}[1;2r; touch own.txt"}),
                reason: "why\u{1b}[2J".to_string(),
                suggested_rule: "Bash(:\u{1b}[H *)".to_string(),
            },
            reply,
        };
        let (question, lines) = super::Question::open(pending, &Style::plain(), true);
        assert!(question.is_some());
        for line in &lines {
            assert!(!line.contains('\u{1b}'), "{line:?}");
        }
        assert!(lines[0].contains("\\u{1b}[1;2r"), "{lines:?}");
    }
}
