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
use roo_agent::event::EventSink;
use roo_agent::permissions::{Approval, PermissionMode};
use roo_store::TaskFilter;
use roo_team::lead::status::{members_table, tasks_table};
use roo_team::{TeamEvent, TeamSlot, TeamStatus};
use tokio::sync::mpsc;
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

async fn run_session(built: Built) -> Result<ExitCode, AppError> {
    let Built {
        mut agent,
        notices,
        approvals,
        team_sender: _team_sender,
        mut team_events,
        team,
        team_status,
        team_tasks: _team_tasks,
        skills,
        subagents,
        mcp,
        ..
    } = built;
    // Background tasks that end print one line at once, even while the user types.
    let (task_sink, mut task_events) = EventSink::channel();
    if let Some(runtime) = &subagents {
        runtime.tasks().set_listener(Some(task_sink));
    } else {
        drop(task_sink);
    }
    let mut approvals = approvals.unwrap_or_else(|| mpsc::channel(1).1);
    let mut last_status: Option<String> = None;
    let style = Style::for_stdout();
    // Restore the terminal even if something panics.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = terminal::disable_raw_mode();
        default_hook(info);
    }));
    let _raw = RawMode::enable()?;
    let mut keys = spawn_key_reader();
    let mut render = Renderer::new(RawWriter::new(std::io::stdout()), style);
    let mut editor = LineEditor::new();

    {
        let out = render.out();
        let session = agent
            .session()
            .map(|s| s.id().to_string())
            .unwrap_or_default();
        let mode = agent
            .policy()
            .read()
            .map(|p| p.mode().to_string())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{} {}",
            style.bold("RooCode"),
            style.dim(&format!(
                "· {} ({}) · mode {} · session {}",
                agent.model(),
                agent.provider().name(),
                mode,
                session
            ))
        );
        let _ = writeln!(
            out,
            "{}",
            style.dim("/help for commands · Esc stops a run · Ctrl+C twice exits")
        );
        for notice in &notices {
            let _ = writeln!(out, "{}", style.dim(&format!("note: {notice}")));
        }
        if !agent.messages().is_empty() {
            let _ = writeln!(
                out,
                "{}",
                style.dim(&format!("resumed {} messages", agent.messages().len()))
            );
        }
    }

    let mut last_ctrl_c: Option<Instant> = None;
    let mut idle_question: Option<Question> = None;
    loop {
        // Read one line.
        let width = terminal::size().map(|(w, _)| w).unwrap_or(80);
        let _ = editor.render(render.out(), PROMPT, width);
        let line = loop {
            // Teammates' events show up while the user types, above the prompt.
            let event = tokio::select! {
                key = keys.recv() => match key {
                    Some(event) => event,
                    None => return Ok(ExitCode::from(exit::OK)),
                },
                // A teammate's question while the lead is idle: asked above the prompt,
                // answered with the next y / n / a key.
                Some(pending) = approvals.recv(), if idle_question.is_none() => {
                    let width = terminal::size().map(|(w, _)| w).unwrap_or(80);
                    let (question, lines) = Question::open(pending, &style, false);
                    for line in lines {
                        let _ = editor.print_above(render.out(), &line, PROMPT, width);
                    }
                    idle_question = question;
                    continue;
                }
                // The asker withdrew its question (it ended, died or was answered).
                () = withdrawn(&mut idle_question) => {
                    let width = terminal::size().map(|(w, _)| w).unwrap_or(80);
                    idle_question = None;
                    let line = style.dim("  → withdrawn: the question no longer waits for an answer");
                    let _ = editor.print_above(render.out(), &line, PROMPT, width);
                    continue;
                }
                Some(team) = team_events.recv() => {
                    let width = terminal::size().map(|(w, _)| w).unwrap_or(80);
                    if let Some(line) =
                        team_line(&style, &team, &team_status.borrow(), &mut last_status)
                    {
                        let _ = editor.print_above(render.out(), &line, PROMPT, width);
                    }
                    continue;
                }
                Some(task) = task_events.recv() => {
                    let width = terminal::size().map(|(w, _)| w).unwrap_or(80);
                    if let Some(line) = crate::render::subagent_line(&task, &style) {
                        let _ = editor.print_above(render.out(), &line, PROMPT, width);
                    }
                    continue;
                }
            };
            if let Event::Key(key) = &event
                && key.kind != KeyEventKind::Release
                && !is_ctrl_c(key)
                && let Some(question) = idle_question.take()
            {
                let (kept, lines) = question.key(key, &style, false);
                let width = terminal::size().map(|(w, _)| w).unwrap_or(80);
                for line in lines {
                    let _ = editor.print_above(render.out(), &line, PROMPT, width);
                }
                idle_question = kept;
                continue;
            }
            let action = match event {
                Event::Key(key) if key.kind != KeyEventKind::Release => {
                    if !is_ctrl_c(&key) {
                        last_ctrl_c = None;
                    }
                    editor.key(key)
                }
                Event::Paste(text) => {
                    editor.paste(&text);
                    EditAction::Continue
                }
                Event::Resize(..) => EditAction::Continue,
                _ => continue,
            };
            let width = terminal::size().map(|(w, _)| w).unwrap_or(80);
            match action {
                EditAction::Continue => {
                    let _ = editor.render(render.out(), PROMPT, width);
                }
                EditAction::Submit(line) => {
                    let _ = writeln!(render.out());
                    editor.reset_render();
                    break line;
                }
                EditAction::Eof => {
                    let _ = writeln!(render.out());
                    return Ok(ExitCode::from(exit::OK));
                }
                EditAction::Interrupt => {
                    if last_ctrl_c.is_some_and(|t| t.elapsed() < DOUBLE_PRESS) {
                        let _ = writeln!(render.out());
                        return Ok(ExitCode::from(exit::OK));
                    }
                    last_ctrl_c = Some(Instant::now());
                    editor.clear();
                    let _ = writeln!(render.out());
                    editor.reset_render();
                    let _ = writeln!(
                        render.out(),
                        "{}",
                        style.dim("(press Ctrl+C again to exit)")
                    );
                    let _ = editor.render(render.out(), PROMPT, width);
                }
            }
        };

        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed == "/mcp" {
            let report = mcp.as_ref().map_or_else(
                || "No MCP servers are configured (mcp_servers: in a config file).\n".to_string(),
                roo_agent::mcp::McpServers::report,
            );
            let _ = write!(render.out(), "{report}");
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("/mcp ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let line = match (words.as_slice(), mcp.as_ref()) {
                (["restart", server], Some(servers)) => {
                    let _ = writeln!(
                        render.out(),
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
            let _ = writeln!(render.out(), "{line}");
            continue;
        }
        let mut skill = crate::skill_command::skill_prompt(skills.as_ref(), trimmed);
        if skill.is_none() {
            skill = crate::skill_command::mcp_prompt(mcp.as_ref(), trimmed).await;
        }
        let trimmed = match &skill {
            Some(Ok(prompt)) => prompt.as_str(),
            Some(Err(why)) => {
                let _ = writeln!(render.out(), "{}", style.red(&format!("error: {why}")));
                continue;
            }
            None => trimmed,
        };
        if skill.is_none()
            && let Some(command) = trimmed.strip_prefix('/')
        {
            match slash_command(
                command,
                &mut agent,
                &team,
                subagents.as_ref(),
                render.out(),
                &style,
            ) {
                Flow::Continue if command.trim() == "help" => {
                    let help = crate::skill_command::skills_help(skills.as_ref());
                    let _ = write!(render.out(), "{help}");
                    let help = crate::skill_command::mcp_help(mcp.as_ref());
                    let _ = write!(render.out(), "{help}");
                    continue;
                }
                Flow::Continue => continue,
                Flow::Exit => return Ok(ExitCode::from(exit::OK)),
            }
        }

        // Run the agent on the line.
        let cancel = CancellationToken::new();
        let (sink, mut events) = EventSink::channel();
        let mut asking: Option<Question> = None;
        let mut exit_after = false;
        {
            let run = agent.run(trimmed, &sink, cancel.clone());
            tokio::pin!(run);
            loop {
                tokio::select! {
                    _ = &mut run => break,
                    Some(event) = events.recv() => render.event(&event),
                    Some(event) = task_events.recv() => render.event(&event),
                    Some(event) = team_events.recv() => {
                        if let Some(line) =
                            team_line(&style, &event, &team_status.borrow(), &mut last_status)
                        {
                            render.break_line();
                            let _ = writeln!(render.out(), "{line}");
                        }
                    }
                    Some(pending) = approvals.recv(), if asking.is_none() => {
                        render.break_line();
                        let (question, lines) = Question::open(pending, &style, true);
                        print_lines(render.out(), &lines);
                        asking = question;
                    }
                    () = withdrawn(&mut asking) => {
                        asking = None;
                        let _ = writeln!(render.out(), "{}", style.dim("  → withdrawn: the question no longer waits for an answer"));
                    }
                    Some(event) = keys.recv() => {
                        let Event::Key(key) = event else { continue };
                        if key.kind == KeyEventKind::Release {
                            continue;
                        }
                        if is_ctrl_c(&key) {
                            if last_ctrl_c.is_some_and(|t| t.elapsed() < DOUBLE_PRESS) {
                                exit_after = true;
                            } else {
                                last_ctrl_c = Some(Instant::now());
                                render.break_line();
                                let _ = writeln!(render.out(), "{}", style.dim("(stopping; press Ctrl+C again to exit)"));
                            }
                            if let Some(question) = asking.take() {
                                let _ = question.pending.reply.send(Approval::Deny { feedback: None });
                            }
                            cancel.cancel();
                            continue;
                        }
                        last_ctrl_c = None;
                        if let Some(question) = asking.take() {
                            let (kept, lines) = question.key(&key, &style, true);
                            print_lines(render.out(), &lines);
                            if kept.is_none() && key.code == KeyCode::Esc {
                                cancel.cancel();
                            }
                            asking = kept;
                        } else if key.code == KeyCode::Esc {
                            cancel.cancel();
                        } else if is_ctrl_b(&key) {
                            let moved = subagents.as_ref().map_or(0, |s| s.detach_foreground());
                            let text = match moved {
                                0 => "(no sub-agent is running in the foreground)".to_string(),
                                1 => "(moved 1 sub-agent to the background; /tasks lists it)".to_string(),
                                n => format!("(moved {n} sub-agents to the background; /tasks lists them)"),
                            };
                            render.break_line();
                            let _ = writeln!(render.out(), "{}", style.dim(&text));
                        }
                    }
                }
            }
        }
        drop(sink);
        while let Ok(event) = events.try_recv() {
            render.event(&event);
        }
        // A teammate's question still open when the lead's run ended stays open: it is
        // answered at the prompt (the lead's own questions end with its run).
        if let Some(question) = asking.take() {
            idle_question = Some(question);
        }
        if exit_after {
            return Ok(ExitCode::from(exit::OK));
        }
    }
}

enum Flow {
    Continue,
    Exit,
}

fn slash_command(
    command: &str,
    agent: &mut roo_agent::agent_loop::Agent,
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
        binding.team.config().map(|c| members_table(&c))
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
