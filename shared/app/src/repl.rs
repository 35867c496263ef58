//! The interactive `roo-lead` session on a terminal.
//!
//! One `select!` loop linearizes everything that can happen while a run is under
//! way: agent events (rendered as they stream), keys (Esc stops the run, Ctrl+C twice
//! exits), permission questions from the agent (answered with y / n / a) and team
//! events. While the user types, a second `select!` takes keys and team events, so a
//! teammate's message appears as one line above the prompt without disturbing the line
//! being edited. Slash commands are handled here and never reach the model.
//!
//! This file holds the session and its two loops; the pieces they call live beside
//! it: [`raw_terminal`] (raw mode, the key-reader thread, key chords), [`slash`] (the
//! commands answered without the model), [`question`] (a permission question pinned
//! on screen and its keys) and [`team_turns`] (team event lines and when teammates'
//! messages start a turn of the lead's own).

use std::io::{Stdout, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyCode, KeyEventKind};
use crossterm::terminal;
use roo_agent::event::{AgentEvent, EventSink};
use roo_agent::permissions::Approval;
use roo_agent::skills::Skills;
use roo_agent::subagent::SubagentRuntime;
use roo_agent::{Agent, McpServers};
use roo_team::{TeamEvent, TeamSlot, TeamStatus};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::exit::{self, AppError};
use crate::line_editor::{EditAction, LineEditor};
use crate::render::{RawWriter, Renderer, Style};
use crate::setup::{Built, PendingApproval};

mod question;
mod raw_terminal;
mod slash;
mod team_turns;

use question::{Question, withdrawn};
use raw_terminal::{RawMode, is_ctrl_b, is_ctrl_c, spawn_key_reader};
use slash::{Flow, slash_command};
use team_turns::{MAX_TEAM_TURNS, TeamTurns, team_line, team_wake};

const PROMPT: &str = "› ";
/// Two Ctrl+C presses within this window exit.
const DOUBLE_PRESS: Duration = Duration::from_secs(2);

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
            Flow::TeamView => {
                slash::team_view(&self.team, &mut self.keys, self.render.out(), &style).await;
                Command::Done
            }
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

fn print_lines(out: &mut RawWriter<Stdout>, lines: &[String]) {
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests;
