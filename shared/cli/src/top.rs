//! `team top`: a live view of one team — its members (state, task, time on it, spend,
//! when each last spoke, where it runs), the task board (in progress, pending, blocked,
//! done, with owners and what each waits on) and the newest events.
//!
//! Three layers, so each can be tested alone: [`model`] reads the store once and builds
//! the view's data by a pure function; [`frame`] draws that data as lines for a given
//! width and height; [`terminal`] is the thin loop around them (alternate screen, keys,
//! redraw on a store change or each second). `--once` prints one frame and exits (for
//! scripts and tests); the interactive lead's `/team` opens the same view.

mod events;
mod follow;
pub mod frame;
pub mod model;
mod pane;
pub mod terminal;

use std::io::{IsTerminal, Write};

use roo_store::Team;
use roo_term::Style;

use crate::common::Context;
use crate::exit::{CliError, CliResult};

pub use terminal::{KeySource, TerminalKeys};

/// The size of a frame printed without a terminal to measure, unless given.
pub const DEFAULT_SIZE: (u16, u16) = (80, 24);

/// `team top`'s flags.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  {program} team top --team demo                 # live; q quits
  {program} team top --team demo --once          # one frame as text, for scripts
  NO_COLOR=1 {program} team top --team demo --once --width 100 --height 40

Keys: q, Esc or Ctrl-C quit; up/down (or k/j) select a member; Enter or f follows it
(its tasks and messages; again to go back); o switches to its pane (tmux) or says how to
reach it. A member's tokens and cost are the spend recorded on the team's tasks. Without
a terminal (stdout or stdin not one), one frame is printed as with --once.")]
pub struct TopArgs {
    /// Print one frame and exit (plain text unless stdout is a colour terminal)
    #[arg(long)]
    once: bool,
    /// Columns of the --once frame [default: $COLUMNS, the terminal's, or 80]
    #[arg(long, value_name = "COLS", value_parser = clap::value_parser!(u16).range(20..))]
    width: Option<u16>,
    /// Lines of the --once frame [default: $LINES, the terminal's, or 24]
    #[arg(long, value_name = "LINES", value_parser = clap::value_parser!(u16).range(5..))]
    height: Option<u16>,
}

fn env_size(key: &str) -> Option<u16> {
    std::env::var(key)
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|n| *n > 0)
}

/// The frame's size: the flags, else `$COLUMNS`/`$LINES`, else the terminal's, else
/// [`DEFAULT_SIZE`].
fn once_size(width: Option<u16>, height: Option<u16>) -> (u16, u16) {
    let term = crossterm::terminal::size().ok();
    let width = width
        .or_else(|| env_size("COLUMNS"))
        .or(term.map(|t| t.0))
        .unwrap_or(DEFAULT_SIZE.0);
    let height = height
        .or_else(|| env_size("LINES"))
        .or(term.map(|t| t.1))
        .unwrap_or(DEFAULT_SIZE.1);
    (width.max(20), height.max(5))
}

/// One frame of `team`'s view as text (lines ending in `\n`).
pub fn once(team: &Team, width: u16, height: u16, style: Style) -> CliResult<String> {
    let view = model::TeamView::build(model::Snapshot::load(team)?);
    let options = frame::FrameOptions {
        width: usize::from(width),
        height: usize::from(height),
        style,
        selected: 0,
        follow: false,
        interactive: false,
        notice: None,
    };
    Ok(frame::render(&view, &options)
        .into_iter()
        .map(|l| format!("{l}\n"))
        .collect())
}

/// Runs `team top`.
pub fn run(ctx: &Context, args: TopArgs, out: &mut impl Write) -> CliResult {
    if ctx.json() {
        return Err(CliError::Usage(format!(
            "print the team view as JSON: it has none; use `{} team show --json`, \
             `roo-task list --json` or `roo-mail log --json`",
            ctx.program
        )));
    }
    let team = ctx.team()?;
    let live = !args.once && std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    if !live {
        let (width, height) = once_size(args.width, args.height);
        out.write_all(once(&team, width, height, ctx.style)?.as_bytes())?;
        return Ok(());
    }
    terminal::run(&team, &mut TerminalKeys::new(), terminal::Owner::Own)
}

#[cfg(test)]
mod tests;
