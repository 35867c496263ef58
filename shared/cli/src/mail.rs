//! `roo-mail`: the mailbox CLI (send, read, list, watch, status, ack, the team's event
//! log, team setup).

mod log;
mod send;
mod watch;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use roo_store::{MessageId, ReadFilter};

use crate::common::{Common, Context, main_with};
use crate::exit::{CliError, CliResult, MAIL_EXIT_CODES_HELP};
use crate::output::{print_json, write_message};
use crate::shape;
use crate::team;

const EXAMPLES: &str = "\
Examples:
  roo-mail team create --team demo --lead lead --member alice --member bob
  roo-mail send --team demo --from lead --to alice --summary 'start on the parser' \\
      'Please take task 1: the parser.'
  echo 'long text' | roo-mail send --to '*' --type status_update -
  roo-mail read --team demo --as alice --unread --mark-read
  roo-mail watch --team demo --as alice --json
  roo-mail list --team demo
  roo-mail log --team demo --follow
  roo-mail status msg-1767225600000-4242-0-5f3a9c0e12b4

--team defaults to $ROO_TEAM, --as/--from to $ROO_AGENT_NAME, the home to $ROO_HOME
(default ~/.roocode). Colours only on a terminal and never with NO_COLOR set.
Protocol: docs/PROTOCOL.md.";

/// The mailbox CLI of RooCode Teams.
#[derive(Parser, Debug)]
#[command(
    name = "roo-mail",
    version,
    about = "Send and read RooCode team messages (lock-file mailboxes under $ROO_HOME)",
    after_help = format!("{EXAMPLES}\n\n{MAIL_EXIT_CODES_HELP}")
)]
pub struct MailCli {
    #[command(flatten)]
    pub(crate) common: Common,
    #[command(subcommand)]
    pub(crate) command: MailCommand,
}

#[derive(Subcommand, Debug)]
pub(crate) enum MailCommand {
    /// Send a message to a member, an agent id, or '*' (everyone but you)
    Send(send::SendArgs),
    /// Print your inbox
    #[command(
        after_help = "Examples:\n  roo-mail read --as alice --unread --mark-read\n  \
                            roo-mail read --as alice --json --archived --limit 20"
    )]
    Read(ReadArgs),
    /// List members with their unread counts
    List,
    /// Print messages as they arrive (until interrupted, --count or --timeout)
    Watch(watch::WatchArgs),
    /// Print the team's event log: who joined, sent, claimed, answered, merged, died
    Log(log::LogArgs),
    /// Show where a message is and its receipts (delivered, acknowledged)
    Status {
        /// Message id
        id: String,
    },
    /// Acknowledge messages you received (receipt)
    ///
    /// An id in neither your inbox nor its archive fails the command (exit 2), naming it;
    /// the other messages are acknowledged all the same.
    Ack {
        /// Message ids
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// List the team's quarantined (damaged) data; --acknowledge ends the warnings
    Doctor {
        /// Rename each quarantined file to <name>.acknowledged (kept for inspection)
        #[arg(long)]
        acknowledge: bool,
    },
    /// Create, inspect and delete teams
    #[command(subcommand)]
    Team(team::TeamCommand),
}

#[derive(clap::Args, Debug)]
pub(crate) struct ReadArgs {
    /// Only unread messages
    #[arg(long)]
    unread: bool,
    /// Mark the printed messages read
    #[arg(long)]
    mark_read: bool,
    /// Include archived (older, read) messages
    #[arg(long)]
    archived: bool,
    /// At most N messages (the newest)
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
}

/// The program's name.
pub const PROGRAM: &str = "roo-mail";

/// Entry point of the `roo-mail` binary.
pub fn main() -> ExitCode {
    main_with(PROGRAM, std::env::args_os(), run)
}

fn run(cli: MailCli) -> CliResult {
    let ctx = Context::new(PROGRAM, cli.common);
    let stdout = io::stdout();
    let mut out = stdout.lock();
    match cli.command {
        MailCommand::Send(args) => send::run(&ctx, args, &mut out),
        MailCommand::Read(args) => read(&ctx, args, &mut out),
        MailCommand::List => list(&ctx, &mut out),
        MailCommand::Watch(args) => watch::run(&ctx, args, &mut out),
        MailCommand::Log(args) => log::run(&ctx, args, &mut out),
        MailCommand::Status { id } => status(&ctx, &id, &mut out),
        MailCommand::Ack { ids } => ack(&ctx, &ids, &mut out),
        MailCommand::Team(command) => team::run(&ctx, command, &mut out),
        MailCommand::Doctor { acknowledge } => crate::common::doctor(&ctx, acknowledge, &mut out),
    }
}

fn read(ctx: &Context, args: ReadArgs, out: &mut impl Write) -> CliResult {
    ctx.team_name()?;
    let me = ctx.agent()?;
    let team = ctx.team()?;
    team::require_member(&team, &me)?;
    let mailbox = team.mailbox();
    let messages = mailbox.read(
        &me,
        &ReadFilter {
            unread_only: args.unread,
            include_archived: args.archived,
            limit: args.limit,
        },
    )?;
    if args.mark_read {
        let ids: Vec<MessageId> = messages
            .iter()
            .filter(|m| !m.read)
            .map(|m| m.id.clone())
            .collect();
        if !ids.is_empty() {
            mailbox.mark_read(&me, &ids)?;
        }
    }
    if ctx.json() {
        print_json(out, &messages)?;
    } else if messages.is_empty() {
        writeln!(out, "no messages")?;
    } else {
        for m in &messages {
            write_message(out, ctx.style, m)?;
        }
    }
    Ok(())
}

fn list(ctx: &Context, out: &mut impl Write) -> CliResult {
    let team = ctx.team()?;
    let config = team.config()?;
    // The store's own test: on PostgreSQL the presence locks, not pids (another host's).
    let liveness = team.liveness(&config)?;
    let mailbox = team.mailbox();
    let (spend, caps) = team.tasks().spend()?;
    let mut rows = Vec::new();
    for m in &config.members {
        rows.push(shape::MemberRow {
            name: m.name.to_string(),
            agent_id: m.agent_id.clone(),
            backend_type: m.backend_type,
            is_active: m.is_active(),
            lead: m.agent_id == config.lead_agent_id,
            state: liveness.observed_state(m),
            unread: mailbox.unread_count(&m.name)?,
            spend: spend.get(&m.name).copied(),
            budget: caps.member(&m.name),
        });
    }
    if ctx.json() {
        print_json(out, &rows)?;
        return Ok(());
    }
    for r in &rows {
        let role = if r.lead { " (lead)" } else { "" };
        let state = r.state.label();
        let unread = if r.unread > 0 {
            ctx.style.yellow(&format!("{} unread", r.unread))
        } else {
            ctx.style.dim("0 unread")
        };
        let spent = r
            .spend
            .map(|s| format!("  {}", roo_store::budget::describe_spend(&s)))
            .unwrap_or_default();
        writeln!(
            out,
            "{}{role}  {}  {unread}{}",
            ctx.style.bold(&r.name),
            ctx.style.dim(state),
            ctx.style.dim(&spent)
        )?;
    }
    Ok(())
}

fn status(ctx: &Context, id: &str, out: &mut impl Write) -> CliResult {
    let team = ctx.team()?;
    let status = team.mailbox().status(&MessageId::from_string(id))?;
    let m = &status.message;
    // Inside an agent's command (relayed), a member reads only its own messages: ones
    // in its inbox or sent by it, never a peer's (request ids included).
    if std::env::var_os(roo_store::relay::ENV_RELAYED_BY).is_some() {
        let me = ctx.agent()?;
        if status.inbox != me && m.from != me {
            return Err(CliError::Refused(format!(
                "message {id} is in {}'s inbox and not from {me}; an agent's command reads only its own messages",
                status.inbox
            )));
        }
    }
    let view = shape::MessageStatus {
        id: m.id.as_str(),
        inbox: status.inbox.as_str(),
        state: status.state(),
        archived: status.archived,
        timestamp: m.timestamp.to_string(),
        read: m.read,
        delivered_at: m.delivered_at.map(|t| t.to_string()),
        acknowledged_at: m.acknowledged_at.map(|t| t.to_string()),
        message: m,
    };
    if ctx.json() {
        print_json(out, &view)?;
        return Ok(());
    }
    let or_dash = |t: &Option<String>| t.clone().unwrap_or_else(|| "-".into());
    writeln!(out, "{}  {}", ctx.style.bold(view.id), view.state)?;
    writeln!(
        out,
        "  inbox:        {}{}",
        view.inbox,
        if view.archived { " (archived)" } else { "" }
    )?;
    writeln!(out, "  sent:         {}", view.timestamp)?;
    writeln!(out, "  delivered:    {}", or_dash(&view.delivered_at))?;
    writeln!(out, "  acknowledged: {}", or_dash(&view.acknowledged_at))?;
    Ok(())
}

fn ack(ctx: &Context, ids: &[String], out: &mut impl Write) -> CliResult {
    ctx.team_name()?;
    let me = ctx.agent()?;
    let team = ctx.team()?;
    team::require_member(&team, &me)?;
    // The same id twice is one message: acknowledge it once, count it once.
    let mut unique: Vec<MessageId> = Vec::with_capacity(ids.len());
    for id in ids.iter().map(MessageId::from_string) {
        if !unique.contains(&id) {
            unique.push(id);
        }
    }
    let receipt = team.mailbox().acknowledge(&me, &unique)?;
    if !receipt.unknown.is_empty() {
        // The found ones stay acknowledged; the exit code (2) says some id was unknown.
        return Err(CliError::Usage(partial_ack(&me, &receipt)));
    }
    if ctx.json() {
        print_json(
            out,
            &shape::Acknowledged {
                acknowledged: receipt.found,
            },
        )?;
    } else {
        writeln!(out, "acknowledged {}", receipt.found)?;
    }
    Ok(())
}

/// The error of an `ack` that found only some of its messages (it reads after "failed
/// to"): which ids are unknown, and what was acknowledged all the same.
fn partial_ack(me: &roo_store::Name, receipt: &roo_store::Receipt) -> String {
    let ids: Vec<&str> = receipt.unknown.iter().map(MessageId::as_str).collect();
    let ids = crate::output::escape(&ids.join(", "));
    let which = match receipt.unknown.len() {
        1 => format!("message {ids}: it is"),
        n => format!("{n} messages ({ids}): they are"),
    };
    let others = match receipt.found {
        0 => "no message was acknowledged".to_owned(),
        1 => "the other one is acknowledged".to_owned(),
        n => format!("the other {n} are acknowledged"),
    };
    format!("acknowledge {which} not in {me}'s inbox or archive; {others}")
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        MailCli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = MailCli::try_parse_from([
            "roo-mail", "send", "--to", "bob", "--team", "t", "--from", "alice", "--json", "hi",
        ])
        .unwrap();
        assert_eq!(cli.common.team.as_deref(), Some("t"));
        assert_eq!(cli.common.agent.as_deref(), Some("alice"));
        assert!(cli.common.json);
    }
}
