//! The interactive `roo-lead` session on a terminal.
//!
//! One `select!` loop linearizes everything that can happen while a run is under
//! way: agent events (rendered as they stream), keys (Esc stops the run, Ctrl+C twice
//! exits), permission questions (the agent's own and teammates', answered with y / n /
//! a), team events and the spinner's tick. While the user types, a second `select!`
//! takes keys and team events, so a teammate's message appears as one line above the
//! prompt without disturbing the line being edited. Questions are pinned in a block
//! above the prompt until answered, oldest first, whatever streams meanwhile; keys
//! answer the front one only once it is armed ([`arming`]: a moment after it came to
//! the front and a pause in typing), and Ctrl+T at the prompt moves the keys to the
//! prompt and back while questions stay pinned. Slash commands are handled here and
//! never reach the model.
//!
//! This file holds the session and its two loops; the pieces they call live beside
//! it: [`raw_terminal`] (raw mode, the key-reader thread, key chords), [`slash`] (the
//! commands answered without the model), [`screen`] (the stream and the pinned block,
//! drawn by [`dock`]), [`question`] (a permission question and its keys),
//! [`activity`] (the spinner's line) and [`team_turns`] (team event lines and when
//! teammates' messages start a turn of the lead's own).

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyCode, KeyEventKind};
use crossterm::terminal;
use roo_agent::event::{AgentEvent, EventSink};
use roo_agent::skills::Skills;
use roo_agent::subagent::SubagentRuntime;
use roo_agent::{Agent, McpServers};
use roo_team::{TeamEvent, TeamSlot, TeamStatus};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::exit::{self, AppError};
use crate::line_editor::EditAction;
use crate::render::Style;
use crate::setup::{Built, PendingApproval};

mod activity;
mod arming;
mod dock;
mod question;
mod raw_terminal;
mod screen;
mod slash;
mod team_turns;

use question::withdrawn;
use raw_terminal::{RawMode, is_ctrl_b, is_ctrl_c, spawn_key_reader};
use screen::{KeyFor, Screen};
use slash::{Flow, slash_command};
use team_turns::{MAX_TEAM_TURNS, TeamTurns, team_line, team_wake};
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
        spawner,
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
        screen: Screen::new(style).pausing(Box::new(move |name: &str| {
            let name = roo_store::Name::parse(name).map_err(|e| e.to_string())?;
            spawner.stop(&name).map(|_| ()).map_err(|e| e.to_string())
        })),
        style,
        skills,
        subagents,
        mcp,
        last_status: None,
        last_ctrl_c: None,
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
    /// The stream, the pinned questions and the prompt.
    screen: Screen,
    style: Style,
    skills: Option<Skills>,
    subagents: Option<SubagentRuntime>,
    mcp: Option<McpServers>,
    /// The team status line shown last (see [`team_line`]).
    last_status: Option<String>,
    last_ctrl_c: Option<Instant>,
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
        let out = &mut self.screen.out;
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

    /// One line in the stream, above the pinned questions and the prompt.
    fn above(&mut self, line: &str) {
        self.screen.stream(&[line.to_string()]);
    }

    /// Reads one line at the prompt. Meanwhile teammates' events and finished
    /// background tasks print above it, teammates' questions are pinned above it and
    /// answered there (keys answer the first question while any waits and none reaches
    /// the prompt, until Ctrl+T gives the prompt the keys), and teammates' messages may
    /// start a turn ([`Input::Team`]).
    async fn read_input(&mut self) -> Input {
        self.screen.redraw();
        let style = self.style;
        loop {
            let team_ready = self.team_turns.ready() && self.screen.questions.is_empty();
            let arms_at = self.screen.arms_at();
            let event = tokio::select! {
                key = self.keys.recv() => match key {
                    Some(event) => event,
                    None => return Input::Exit,
                },
                Some(pending) = self.approvals.recv() => {
                    self.screen.ask(pending);
                    continue;
                }
                // An asker withdrew its question (it ended, died or was answered).
                index = withdrawn(&mut self.screen.questions) => {
                    self.screen.withdraw(index);
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
                // The front question arms: its answer keys are shown.
                () = until(arms_at), if arms_at.is_some() => {
                    self.screen.redraw();
                    continue;
                }
            };
            if let Event::Key(key) = &event
                && key.kind != KeyEventKind::Release
                && !is_ctrl_c(key)
                && self.screen.answer_key(key) != KeyFor::NotMine
            {
                continue;
            }
            if !self.screen.questions.is_empty()
                && !self.screen.typing()
                && !matches!(event, Event::Key(_))
            {
                // A paste while a question waits goes nowhere, like a stray key.
                continue;
            }
            let action = match event {
                Event::Key(key) if key.kind != KeyEventKind::Release => {
                    if !is_ctrl_c(&key) {
                        self.last_ctrl_c = None;
                    }
                    self.screen.editor.key(key)
                }
                Event::Paste(text) => {
                    self.screen.editor.paste(&text);
                    EditAction::Continue
                }
                Event::Resize(..) => EditAction::Continue,
                _ => continue,
            };
            if let Some(input) = self.edited(action) {
                return input;
            }
        }
    }

    /// What an edit of the prompt's line does: redraw it, or end the reading.
    fn edited(&mut self, action: EditAction) -> Option<Input> {
        let style = self.style;
        match action {
            EditAction::Continue => {
                if self.screen.questions.is_empty() || self.screen.typing() {
                    self.screen.render_editor();
                }
                None
            }
            EditAction::Submit(line) => {
                self.screen.leave_editor();
                Some(Input::Line(line))
            }
            EditAction::Eof => {
                self.screen.leave_editor();
                Some(Input::Exit)
            }
            EditAction::Interrupt => {
                if self.last_ctrl_c.is_some_and(|t| t.elapsed() < DOUBLE_PRESS) {
                    self.screen.leave_editor();
                    return Some(Input::Exit);
                }
                self.last_ctrl_c = Some(Instant::now());
                self.screen.editor.clear();
                self.above(&style.dim("(press Ctrl+C again to exit)"));
                None
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
            let _ = write!(&mut self.screen.out, "{report}");
            return Command::Done;
        }
        if let Some(rest) = trimmed.strip_prefix("/mcp ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let line = match (words.as_slice(), self.mcp.as_ref()) {
                (["restart", server], Some(servers)) => {
                    let _ = writeln!(
                        &mut self.screen.out,
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
            let _ = writeln!(&mut self.screen.out, "{line}");
            return Command::Done;
        }
        let mut skill = crate::skill_command::skill_prompt(self.skills.as_ref(), trimmed);
        if skill.is_none() {
            skill = crate::skill_command::mcp_prompt(self.mcp.as_ref(), trimmed).await;
        }
        match skill {
            Some(Ok(prompt)) => return Command::Prompt(prompt),
            Some(Err(why)) => {
                let _ = writeln!(
                    &mut self.screen.out,
                    "{}",
                    style.red(&format!("error: {why}"))
                );
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
            &mut self.screen.out,
            &style,
        ) {
            Flow::Continue if command.trim() == "help" => {
                let help = crate::skill_command::skills_help(self.skills.as_ref());
                let _ = write!(&mut self.screen.out, "{help}");
                let help = crate::skill_command::mcp_help(self.mcp.as_ref());
                let _ = write!(&mut self.screen.out, "{help}");
                Command::Done
            }
            Flow::Continue => Command::Done,
            Flow::Exit => Command::Exit,
            // Questions already pinned would be out of sight behind the view (an
            // arriving one closes it): they are answered first.
            Flow::TeamView if !self.screen.questions.is_empty() => {
                let n = self.screen.questions.len();
                let (waits, them) = if n == 1 {
                    ("question waits", "it")
                } else {
                    ("questions wait", "them")
                };
                self.screen.stream(&[style.yellow(&format!(
                    "/team did not open: {n} {waits} below; answer {them} first (the view \
                     would hide {them})"
                ))]);
                Command::Done
            }
            Flow::TeamView => {
                let asked = slash::team_view(
                    &self.team,
                    &mut self.keys,
                    &mut self.approvals,
                    &mut self.screen.out,
                    &style,
                )
                .await;
                // A question arrived while the view was open: the view left, and the
                // question is pinned here.
                if let Some(pending) = asked {
                    self.screen.ask(pending);
                }
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
        self.screen.hide_bottom();
        let _ = writeln!(
            &mut self.screen.out,
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
            let _ = writeln!(&mut self.screen.out, "{}", style.dim(&text));
        }
        end
    }

    /// Runs the agent on `input`, rendering its events as they stream under a spinner:
    /// Esc stops it, Ctrl+C twice leaves, Ctrl+B moves the sub-agents it waits for to
    /// the background, and permission questions (its own and teammates') are pinned
    /// and answered here.
    async fn run(&mut self, input: &str) -> RunEnd {
        self.team_turns.waiting_since = None;
        let cancel = CancellationToken::new();
        let (sink, mut events) = EventSink::channel();
        let mut exit_after = false;
        let mut tick = tokio::time::interval(activity::TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        self.screen.start_run();
        let result = {
            let run = self.agent.run(input, &sink, cancel.clone());
            tokio::pin!(run);
            loop {
                tokio::select! {
                    result = &mut run => break result,
                    Some(event) = events.recv() => self.screen.event(&event),
                    Some(event) = self.task_events.recv() => self.screen.event(&event),
                    Some(event) = self.team_events.recv() => {
                        if let Some(line) =
                            team_line(&self.style, &event, &self.team_status.borrow(), &mut self.last_status)
                        {
                            self.screen.stream(&[line]);
                        }
                    }
                    Some(pending) = self.approvals.recv() => self.screen.ask(pending),
                    index = withdrawn(&mut self.screen.questions) => self.screen.withdraw(index),
                    _ = tick.tick() => self.screen.tick(),
                    Some(event) = self.keys.recv() => {
                        let Event::Key(key) = event else { continue };
                        if key.kind == KeyEventKind::Release {
                            continue;
                        }
                        let stop = run_key(&key, &mut self.screen, &mut self.last_ctrl_c, self.subagents.as_ref());
                        exit_after |= stop == RunKey::Exit;
                        if stop != RunKey::Continue {
                            cancel.cancel();
                        }
                    }
                }
            }
        };
        drop(sink);
        while let Ok(event) = events.try_recv() {
            self.screen.event(&event);
        }
        // A teammate's question still open when the lead's run ended stays pinned: it
        // is answered at the prompt (the lead's own questions end with its run).
        self.screen.end_run();
        RunEnd {
            exit: exit_after,
            completed: result.outcome.is_success(),
        }
    }
}

/// Resolves at `at` (never when `None`).
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

/// What a key did during a run.
#[derive(PartialEq, Eq)]
enum RunKey {
    Continue,
    /// Stop the run.
    Stop,
    /// Stop the run and leave (Ctrl+C twice).
    Exit,
}

/// A key during a run: Ctrl+C (twice: leave), the first pinned question's answer
/// (Esc there: no, and stop), Esc (stop), Ctrl+B (sub-agents to the background).
fn run_key(
    key: &crossterm::event::KeyEvent,
    screen: &mut Screen,
    last_ctrl_c: &mut Option<Instant>,
    subagents: Option<&SubagentRuntime>,
) -> RunKey {
    let style = screen.style;
    if is_ctrl_c(key) {
        if last_ctrl_c.is_some_and(|t| t.elapsed() < DOUBLE_PRESS) {
            return RunKey::Exit;
        }
        *last_ctrl_c = Some(Instant::now());
        screen.stream(&[style.dim("(stopping; press Ctrl+C again to exit)")]);
        return RunKey::Stop;
    }
    *last_ctrl_c = None;
    match screen.answer_key(key) {
        KeyFor::AnsweredEsc => return RunKey::Stop,
        KeyFor::Taken => return RunKey::Continue,
        KeyFor::NotMine => {}
    }
    if key.code == KeyCode::Esc {
        return RunKey::Stop;
    }
    if is_ctrl_b(key) {
        let moved = subagents.map_or(0, |s| s.detach_foreground());
        let text = match moved {
            0 => "(no sub-agent is running in the foreground)".to_string(),
            1 => "(moved 1 sub-agent to the background; /tasks lists it)".to_string(),
            n => format!("(moved {n} sub-agents to the background; /tasks lists them)"),
        };
        screen.stream(&[style.dim(&text)]);
    }
    RunKey::Continue
}

#[cfg(test)]
mod tests;
