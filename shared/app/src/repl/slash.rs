//! The slash commands the session answers itself (`/help`, `/clear`, `/cost`,
//! `/rewind`, `/mode`, `/team`, `/tasks`, `/exit`): they never reach the model. Skills and
//! MCP prompts, which expand into a prompt for the model, are resolved by the
//! session before it asks here.

use std::io::{Stdout, Write};

use roo_agent::RewindScope;
use roo_agent::permissions::PermissionMode;
use roo_store::TaskFilter;
use roo_team::TeamSlot;
use roo_team::lead::status::{members_table, tasks_table};

use crate::render::{RawWriter, Style};
use crate::setup::PendingApproval;

const HELP: &str = "Commands:
  /help            this help
  /clear           forget the conversation (the transcript keeps it)
  /cost            tokens used and cost of this session (and of the team per member and task)
  /rewind          the session's checkpoints: its prompts, newest first, with the files each changed
  /rewind N [code|conversation|both]  put the files the agent changed, the conversation, or both (default) back to before prompt N
  /mode [MODE]     show or set the permission mode: default, acceptEdits, plan, bypassPermissions, dontAsk
  /team            the live team view: members, task board, events (q returns here)
  /tasks [ID]      sub-agent tasks (id, type, status, time, tokens, result) and the team's task list; with an id, that task's whole result
  /exit            leave (also Ctrl+D, or Ctrl+C twice)
  /<skill> [ARGS]  run a skill: commit, review, test, and those in ~/.roocode/skills and .roocode/skills
  /mcp             the MCP servers: connected (tools, prompts), failed and why
  /mcp restart S   start MCP server S again (after it failed or exited)
  /mcp__<server>__<prompt> [ARGS]  send an MCP server's prompt
While the lead is idle, teammates' messages start a turn of its own (team_turns: false in a config file turns that off).
Keys: Esc stops the current run; Ctrl+B moves the sub-agents it waits for to the background; Enter sends; a trailing \\ or Ctrl+J adds a line; Up/Down browse history.";

pub(super) enum Flow {
    Continue,
    Exit,
    /// `/team`: open the live team view ([`team_view`]), which needs the session's keys.
    TeamView,
}

pub(super) fn slash_command(
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
            // The team's spend per member and task, with their caps.
            if let Some(binding) = team.get() {
                match roo_team::budget::spend_lines(&binding.team) {
                    Ok(lines) => {
                        for line in lines {
                            let _ = writeln!(out, "{}", roo_term::escape(&line));
                        }
                    }
                    Err(e) => {
                        let _ = writeln!(out, "{}", style.red(&format!("error: {e}")));
                    }
                }
            }
        }
        "rewind" => {
            let rest: Vec<&str> = arg.into_iter().chain(words).collect();
            match rewind_command(agent, &rest) {
                Ok(text) => {
                    let _ = write!(out, "{text}");
                }
                Err(e) => {
                    let _ = writeln!(out, "{}", style.red(&format!("error: failed to {e}")));
                }
            }
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
        "team" => return Flow::TeamView,
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

/// `/rewind` (the checkpoints, newest first) or `/rewind N [code|conversation|both]`.
fn rewind_command(agent: &mut roo_agent::Agent, args: &[&str]) -> Result<String, String> {
    let Some(checkpoints) = agent.checkpoints() else {
        return Err(
            "rewind: checkpoints are off for this session (checkpoints.enabled in the config)"
                .to_string(),
        );
    };
    let Some(number) = args.first() else {
        return Ok(format!(
            "{}rewind with /rewind N code|conversation|both (to before prompt N)\n",
            checkpoints.describe()
        ));
    };
    let number: usize = number
        .parse()
        .map_err(|_| format!("read the checkpoint number \"{number}\": /rewind lists them"))?;
    let scope: RewindScope = args.get(1).copied().unwrap_or("both").parse()?;
    if args.len() > 2 {
        return Err("read /rewind: use /rewind N code|conversation|both".to_string());
    }
    let outcome = agent.rewind(number, scope).map_err(|e| {
        let text = e.to_string();
        text.strip_prefix("failed to ").unwrap_or(&text).to_string()
    })?;
    Ok(outcome.describe())
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

/// Keys the session's reader thread forwards to the view's thread.
struct ForwardedKeys(std::sync::mpsc::Receiver<crossterm::event::Event>);

impl roo_cli::top::KeySource for ForwardedKeys {
    fn next(
        &mut self,
        timeout: std::time::Duration,
    ) -> std::io::Result<Option<crossterm::event::Event>> {
        match self.0.recv_timeout(timeout) {
            Ok(event) => Ok(Some(event)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Ok(None),
            // The session's reader ended: the terminal hung up.
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the terminal hung up",
            )),
        }
    }
}

/// `/team`: the same live view as `roo-mail team top` (full screen; `q` comes back to the
/// prompt), or, when stdout is not a terminal, one frame of it. The view runs on a
/// blocking thread (the session's runtime keeps serving in-process teammates) and gets
/// the keys the session's reader thread reads, so nothing else reads the terminal.
/// A permission question that arrives meanwhile closes the view (as `q` would) and is
/// returned, to be pinned at the prompt: the full-screen view never hides a question.
pub(super) async fn team_view(
    slot: &TeamSlot,
    keys: &mut tokio::sync::mpsc::UnboundedReceiver<crossterm::event::Event>,
    approvals: &mut tokio::sync::mpsc::Receiver<PendingApproval>,
    out: &mut RawWriter<Stdout>,
    style: &Style,
) -> Option<PendingApproval> {
    let Some(binding) = slot.get() else {
        let _ = write!(out, "{}", team_command("team", slot));
        return None;
    };
    let team = binding.team.clone();
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        let (w, h) = roo_cli::top::DEFAULT_SIZE;
        let shown = roo_cli::top::once(&team, w, h, roo_term::Style::for_stdout())
            .unwrap_or_else(|e| format!("error: {e}\n"));
        let _ = write!(out, "{shown}");
        return None;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let mut tx = Some(tx);
    let mut view = tokio::task::spawn_blocking(move || {
        roo_cli::top::terminal::run(
            &team,
            &mut ForwardedKeys(rx),
            roo_cli::top::terminal::Owner::Caller,
        )
        .map_err(|e| e.to_string())
    });
    let mut asked = None;
    let ended = loop {
        tokio::select! {
            ended = &mut view => break ended,
            key = keys.recv(), if tx.is_some() => match (key, &tx) {
                (Some(event), Some(tx)) => {
                    let _ = tx.send(event);
                }
                // The terminal hung up: the view's keys end, and so does the view.
                _ => tx = None,
            },
            Some(pending) = approvals.recv(), if asked.is_none() => {
                asked = Some(pending);
                let quit = crossterm::event::KeyEvent::new(
                    crossterm::event::KeyCode::Char('q'),
                    crossterm::event::KeyModifiers::NONE,
                );
                if let Some(tx) = &tx {
                    let _ = tx.send(crossterm::event::Event::Key(quit));
                }
            }
        }
    };
    let failed = match ended {
        Ok(Ok(())) => return asked,
        Ok(Err(why)) => why,
        Err(e) => format!("the team view stopped: {e}"),
    };
    let _ = writeln!(out, "{}", style.red(&format!("error: {failed}")));
    asked
}
