//! `roo-mail watch`: prints messages as they arrive, woken by file-change notification
//! (with the store's polling fallback).

use std::collections::HashSet;
use std::io::Write;
use std::time::{Duration, Instant};

use roo_store::{MessageId, ReadFilter, WaitOutcome};

use crate::common::Context;
use crate::exit::CliResult;
use crate::output::{print_json_line, write_message};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  roo-mail watch --team demo --as alice               # new messages, as they arrive
  roo-mail watch --as alice --existing --mark-read    # unread ones first; mark all read
  roo-mail watch --as lead --json --count 1 --timeout 30   # wait for one message

With --json each message is printed as one JSON object per line (JSON Lines).")]
pub struct WatchArgs {
    /// Print unread messages already in the inbox first
    #[arg(long)]
    existing: bool,
    /// Mark printed messages read and delivered
    #[arg(long)]
    mark_read: bool,
    /// Exit after printing N messages
    #[arg(long, value_name = "N")]
    count: Option<usize>,
    /// Exit (status 0) after SECS seconds (at most one year)
    #[arg(long, value_name = "SECS", value_parser = crate::common::parse_seconds)]
    timeout: Option<Duration>,
}

/// Runs `roo-mail watch`.
pub fn run(ctx: &Context, args: WatchArgs, out: &mut impl Write) -> CliResult {
    ctx.team_name()?;
    let me = ctx.agent()?;
    let team = ctx.team()?;
    crate::team::require_member(&team, &me)?;
    let mailbox = team.mailbox();
    // Subscribe before looking, so nothing sent in between is missed.
    let mut watcher = mailbox.watcher(&me)?;
    let deadline = args
        .timeout
        .and_then(|wait| Instant::now().checked_add(wait));
    // Without --existing, everything already there counts as seen; with it, only what
    // was already read does.
    let mut seen: HashSet<MessageId> = mailbox
        .read(&me, &ReadFilter::default())?
        .into_iter()
        .filter(|m| !args.existing || m.read)
        .map(|m| m.id)
        .collect();
    // Tell the caller (a person, or a script waiting on stderr) that nothing sent from
    // now on can be missed.
    eprintln!(
        "roo-mail: watching the inbox of {me} in team {} ({})",
        team.name(),
        if watcher.uses_notifications() {
            "file-change notification"
        } else {
            "polling"
        }
    );
    let mut printed = 0usize;
    loop {
        let all = mailbox.read(&me, &ReadFilter::default())?;
        let present: HashSet<&MessageId> = all.iter().map(|m| &m.id).collect();
        seen.retain(|id| present.contains(id));
        let fresh: Vec<_> = all.iter().filter(|m| !seen.contains(&m.id)).collect();
        let mut batch = Vec::new();
        for m in fresh {
            seen.insert(m.id.clone());
            if ctx.json() {
                print_json_line(out, m)?;
            } else {
                write_message(out, ctx.style, m)?;
            }
            out.flush()?;
            batch.push(m.id.clone());
            printed += 1;
            if args.count.is_some_and(|n| printed >= n) {
                break;
            }
        }
        if args.mark_read && !batch.is_empty() {
            mailbox.mark_delivered(&me, &batch)?;
        }
        if args.count.is_some_and(|n| printed >= n) {
            return Ok(());
        }
        let wait = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(());
                }
                left
            }
            None => Duration::from_secs(3600),
        };
        // While it waits it holds its presence connection only (the LISTENs): the
        // request session is closed, and opened again by the next read.
        if let Some(pg) = team.home().pg() {
            pg.release_idle_connection();
        }
        match watcher.wait(wait) {
            WaitOutcome::Stopped => return Ok(()),
            WaitOutcome::Changed | WaitOutcome::Woken | WaitOutcome::TimedOut => {}
        }
    }
}
