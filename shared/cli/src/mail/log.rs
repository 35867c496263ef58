//! `roo-mail log`: prints the team's event log (docs/PROTOCOL.md §9), one line per event
//! or, with `--json`, each event's line as stored; `--follow` keeps printing what is
//! appended, woken by the store's watch (files and PostgreSQL alike).

use std::io::Write;
use std::time::{Duration, Instant};

use roo_store::{Event, Timestamp, WaitOutcome};

use crate::common::Context;
use crate::exit::{CliError, CliResult};
use crate::output;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  roo-mail log --team demo                  # the whole log, oldest first
  roo-mail log --team demo --since 10m      # the last ten minutes (s, m, h, d)
  roo-mail log --team demo --since 120      # from event 120 on
  roo-mail log --team demo --follow --json  # and what is appended, as JSON Lines

Each event has a seq (1, 2, … never reused), the store's time, the actor and its epoch,
its kind and its fields: message ids and summaries, never bodies. Damaged lines are
skipped with a warning on stderr.")]
pub struct LogArgs {
    /// Keep printing events as they are appended (until interrupted or --timeout)
    #[arg(long)]
    follow: bool,
    /// Only events from seq SEQ on, or from DURATION ago (30s, 10m, 2h, 1d)
    #[arg(long, value_name = "SEQ|DURATION", value_parser = parse_since)]
    since: Option<Since>,
    /// Only the newest N events (of those --since selects)
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// With --follow: exit (status 0) after SECS seconds (at most one year)
    #[arg(long, value_name = "SECS", value_parser = crate::common::parse_seconds)]
    timeout: Option<Duration>,
}

/// Where `--since` starts.
#[derive(Clone, Copy, Debug)]
enum Since {
    Seq(u64),
    Ago(Duration),
}

fn parse_since(raw: &str) -> Result<Since, String> {
    let raw = raw.trim();
    if let Ok(seq) = raw.parse::<u64>() {
        return Ok(Since::Seq(seq));
    }
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (number, unit) = raw.split_at(split);
    let unit_secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => 0,
    };
    match number.parse::<u64>() {
        Ok(n) if unit_secs > 0 && n.saturating_mul(unit_secs) <= 366 * 86_400 => {
            Ok(Since::Ago(Duration::from_secs(n * unit_secs)))
        }
        _ => Err(format!(
            "{raw:?} is neither an event seq (a whole number) nor a duration of at most a \
             year such as 30s, 10m, 2h or 1d"
        )),
    }
}

/// Runs `roo-mail log`.
pub fn run(ctx: &Context, args: LogArgs, out: &mut impl Write) -> CliResult {
    let team = ctx.team()?;
    if args.timeout.is_some() && !args.follow {
        return Err(CliError::Usage(
            "--timeout only applies with --follow".into(),
        ));
    }
    // Subscribe before the first read, so nothing appended in between is missed.
    let mut watcher = match args.follow {
        true => Some(team.event_watcher()?),
        false => None,
    };
    let (after, not_before) = match args.since {
        Some(Since::Seq(seq)) => (Some(seq.saturating_sub(1)), None),
        Some(Since::Ago(ago)) => (
            None,
            Some(Timestamp::from_unix_ms(
                Timestamp::system_now().unix_ms() - i64::try_from(ago.as_millis()).unwrap_or(0),
            )),
        ),
        None => (None, None),
    };
    let page = team.events(after, args.limit.unwrap_or(usize::MAX))?;
    let mut last = page.last_seq;
    for event in page
        .events
        .iter()
        .filter(|e| not_before.is_none_or(|t| e.time >= t))
    {
        print(ctx, out, event)?;
    }
    out.flush()?;
    let Some(watcher) = watcher.as_mut() else {
        return Ok(());
    };
    let deadline = args.timeout.and_then(|t| Instant::now().checked_add(t));
    loop {
        let wait = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(());
                }
                left.min(Duration::from_secs(1))
            }
            // Read now and then anyway: a notification may be missed while the link to
            // the store is re-established.
            None => Duration::from_secs(1),
        };
        if watcher.wait(wait) == WaitOutcome::Stopped {
            return Ok(());
        }
        let page = team.events(Some(last), usize::MAX)?;
        for event in &page.events {
            print(ctx, out, event)?;
        }
        out.flush()?;
        last = last.max(page.last_seq);
        for warning in roo_store::quarantine::take_warnings() {
            eprintln!("roo-mail: warning: {warning}");
        }
    }
}

fn print(ctx: &Context, out: &mut impl Write, event: &Event) -> CliResult {
    // The fields are what members wrote (subjects, summaries, reasons): untrusted, so
    // shown as every other output shows them.
    if ctx.json() {
        output::print_json_text(out, event.json_line())?;
    } else {
        writeln!(out, "{}", output::escape(&event.summary_line()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_a_seq_or_a_duration() {
        assert!(matches!(parse_since("12"), Ok(Since::Seq(12))));
        assert!(matches!(parse_since("10m"), Ok(Since::Ago(d)) if d.as_secs() == 600));
        assert!(matches!(parse_since("2h"), Ok(Since::Ago(d)) if d.as_secs() == 7200));
        for bad in ["", "m", "10x", "-3", "1.5h", "99999d"] {
            assert!(parse_since(bad).is_err(), "{bad}");
        }
    }
}
