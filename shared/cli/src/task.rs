//! `roo-task`: the task-list CLI (create, list, get, update, claim, renew, reclaim, ready,
//! assign, add-usage, delete, team setup).

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use crate::common::{Common, Context, main_with};
use crate::exit::{CliError, CliResult, TASK_EXIT_CODES_HELP};
use crate::output::{print_json, write_task, write_task_line};
use crate::shape::{self, ClaimRefusal};
use crate::team;
use clap::{Parser, Subcommand};
use roo_store::{
    ClaimOptions, ClaimOutcome, DEFAULT_LEASE, Name, NewTask, TaskFilter, TaskId, TaskPatch,
    TaskStatus, TaskUsage,
};

const EXAMPLES: &str = "\
Examples:
  roo-task team create --team demo --lead lead --member alice --member bob
  roo-task create --team demo --subject 'Refactor the data layer' --path src/db/
  roo-task create --subject 'Update tests' --blocked-by 1
  roo-task ready --json
  roo-task claim 1 --as alice          # exit 1 if someone else got it first
  roo-task claim --next --as alice     # the first ready task, atomically
  roo-task update 1 --status completed
  roo-task update 3 --add-blocked-by 2
  roo-task list --status in_progress --owner alice
  roo-task reclaim --as lead           # return tasks of gone owners to the ready set
  roo-task assign 4 bob --as lead      # bob owns it now and gets a task_assignment
  roo-task add-usage 1 --as alice --input 1200 --output 340 --requests 1 --cost 0.0123

--team defaults to $ROO_TEAM, --as to $ROO_AGENT_NAME, the home to $ROO_HOME (default
~/.roocode). The team must exist (`roo-task team create`). Colours only on a terminal and
never with NO_COLOR set. Protocol: docs/PROTOCOL.md.";

/// The task-list CLI of RooCode Teams.
#[derive(Parser, Debug)]
#[command(
    name = "roo-task",
    version,
    about = "Script the shared task list of a RooCode team",
    after_help = format!("{EXAMPLES}\n\n{TASK_EXIT_CODES_HELP}")
)]
pub struct TaskCli {
    #[command(flatten)]
    pub(crate) common: Common,
    #[command(subcommand)]
    pub(crate) command: TaskCommand,
}

fn parse_status(raw: &str) -> Result<TaskStatus, String> {
    TaskStatus::parse(raw)
        .ok_or_else(|| format!("{raw:?} is not a status: use pending, in_progress or completed"))
}

fn parse_id(raw: &str) -> Result<TaskId, String> {
    TaskId::parse(raw).map_err(|e| e.to_string())
}

fn parse_meta(raw: &str) -> Result<(String, serde_json::Value), String> {
    let (key, value) = raw
        .split_once('=')
        .ok_or_else(|| format!("{raw:?} is not KEY=VALUE"))?;
    let value =
        serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
    Ok((key.to_owned(), value))
}

#[derive(Subcommand, Debug)]
pub(crate) enum TaskCommand {
    /// Create a task; prints its id
    Create {
        /// One line: what to do
        #[arg(long)]
        subject: String,
        /// Details
        #[arg(long, default_value = "")]
        description: String,
        /// Present-continuous form ("Refactoring the data layer")
        #[arg(long)]
        active_form: Option<String>,
        /// A task this one waits on (repeatable)
        #[arg(long = "blocked-by", value_name = "ID", value_parser = parse_id)]
        blocked_by: Vec<TaskId>,
        /// A task that waits on this one (repeatable)
        #[arg(long = "blocks", value_name = "ID", value_parser = parse_id)]
        blocks: Vec<TaskId>,
        /// A path or glob the task will touch (repeatable; used by scope-aware ready)
        #[arg(long = "path", value_name = "PATH")]
        paths: Vec<String>,
        /// Pre-assign an owner (the task stays pending until the owner claims it)
        #[arg(long)]
        owner: Option<String>,
        /// Metadata KEY=VALUE (VALUE parsed as JSON if it can be; repeatable)
        #[arg(long = "meta", value_name = "KEY=VALUE", value_parser = parse_meta)]
        metadata: Vec<(String, serde_json::Value)>,
        /// Spending cap of the task in USD: once its model spend reaches it, no new
        /// request is started for it
        #[arg(long = "budget-usd", value_name = "USD")]
        budget_usd: Option<f64>,
        /// Spending cap of the task in model requests
        #[arg(long = "budget-requests", value_name = "N")]
        budget_requests: Option<u64>,
    },
    /// List tasks
    List {
        /// Only this status (pending, in_progress, completed)
        #[arg(long, value_parser = parse_status)]
        status: Option<TaskStatus>,
        /// Only this owner
        #[arg(long)]
        owner: Option<String>,
    },
    /// Show one task
    Get {
        /// Task id
        #[arg(value_parser = parse_id)]
        id: TaskId,
    },
    /// Change a task
    Update(UpdateArgs),
    /// Claim a task atomically: pending, unowned, unblocked, no scope conflict
    Claim {
        /// Task id
        #[arg(value_parser = parse_id, required_unless_present = "next", conflicts_with = "next")]
        id: Option<TaskId>,
        /// Claim the first ready task instead
        #[arg(long)]
        next: bool,
        /// Lease length in seconds (the owner renews it with `roo-task renew`; at most 3600
        /// for a member other than the lead)
        #[arg(long, value_name = "SECS", default_value_t = DEFAULT_LEASE.as_secs())]
        lease: u64,
        /// Claim even if the task's paths overlap another in-progress task's
        #[arg(long)]
        ignore_scope: bool,
    },
    /// Renew your lease on a task you own
    Renew {
        /// Task id
        #[arg(value_parser = parse_id)]
        id: TaskId,
        /// New lease length in seconds from now (at most 3600 for a member other than the
        /// lead)
        #[arg(long, value_name = "SECS", default_value_t = DEFAULT_LEASE.as_secs())]
        lease: u64,
    },
    /// Return tasks whose owner is gone (not a member, marked dead, dead pid, expired
    /// lease) to the ready set, with a note
    Reclaim,
    /// Tasks ready to claim: pending, unowned, unblocked, no scope overlap with work in
    /// progress
    Ready,
    /// Make another member the owner of a task and send it a task_assignment message
    #[command(after_help = "Example:\n  roo-task assign 3 bob --as lead")]
    Assign {
        /// Task id
        #[arg(value_parser = parse_id)]
        id: TaskId,
        /// The new owner (member name or agent id)
        to: String,
        /// Take over another member's in-progress claim (recorded in the task's notes)
        #[arg(long)]
        force: bool,
    },
    /// Add usage (tokens, requests, cost) spent on a task by you (--as) to its totals
    #[command(
        name = "add-usage",
        after_help = "Example:\n  roo-task add-usage 3 --as alice --input 1200 --output 340 --requests 1 --cost 0.0123"
    )]
    AddUsage {
        /// Task id
        #[arg(value_parser = parse_id)]
        id: TaskId,
        /// Uncached input tokens
        #[arg(long, value_name = "N", default_value_t = 0)]
        input: u64,
        /// Output tokens
        #[arg(long, value_name = "N", default_value_t = 0)]
        output: u64,
        /// Input tokens read from the prompt cache
        #[arg(long, value_name = "N", default_value_t = 0)]
        cache_read: u64,
        /// Input tokens written to the prompt cache
        #[arg(long, value_name = "N", default_value_t = 0)]
        cache_write: u64,
        /// Model requests
        #[arg(long, value_name = "N", default_value_t = 0)]
        requests: u64,
        /// Cost in USD, if known
        #[arg(long, value_name = "USD")]
        cost: Option<f64>,
    },
    /// List the team's quarantined (damaged) data; --acknowledge ends the warnings
    Doctor {
        /// Rename each quarantined file to <name>.acknowledged (kept for inspection)
        #[arg(long)]
        acknowledge: bool,
    },
    /// Delete a task (its id is never reused)
    Delete {
        /// Task id
        #[arg(value_parser = parse_id)]
        id: TaskId,
        /// Delete a task that is not yours to delete anyway (another member's claim; as a
        /// member, a task you do not own), recorded in the output
        #[arg(long)]
        force: bool,
    },
    /// Create, inspect and delete teams
    #[command(subcommand)]
    Team(team::TeamCommand),
}

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  roo-task update 2 --status completed --note 'merged in abc123'
  roo-task update 4 --add-blocked-by 2 --add-blocked-by 3
  roo-task update 5 --owner bob --as lead   # pre-assign
  roo-task update 5 --status pending --no-owner

As a member (--as NAME, not the lead) you change only the tasks you own and give none
away; the lead may change any task (docs/PROTOCOL.md §6.3, authority).")]
pub(crate) struct UpdateArgs {
    /// Task id
    #[arg(value_parser = parse_id)]
    id: TaskId,
    /// New status (pending, in_progress, completed)
    #[arg(long, value_parser = parse_status)]
    status: Option<TaskStatus>,
    /// New owner
    #[arg(long, conflicts_with = "no_owner")]
    owner: Option<String>,
    /// Clear the owner
    #[arg(long)]
    no_owner: bool,
    /// New subject
    #[arg(long)]
    subject: Option<String>,
    /// New description
    #[arg(long)]
    description: Option<String>,
    /// New active form
    #[arg(long)]
    active_form: Option<String>,
    /// Tasks that will wait on this one (repeatable)
    #[arg(long = "add-blocks", value_name = "ID", value_parser = parse_id)]
    add_blocks: Vec<TaskId>,
    /// Tasks this one will wait on (repeatable)
    #[arg(long = "add-blocked-by", value_name = "ID", value_parser = parse_id)]
    add_blocked_by: Vec<TaskId>,
    /// Drop "this blocks ID" (repeatable)
    #[arg(long = "remove-blocks", value_name = "ID", value_parser = parse_id)]
    remove_blocks: Vec<TaskId>,
    /// Drop "this is blocked by ID" (repeatable)
    #[arg(long = "remove-blocked-by", value_name = "ID", value_parser = parse_id)]
    remove_blocked_by: Vec<TaskId>,
    /// Replace the scope with these paths (repeatable)
    #[arg(long = "path", value_name = "PATH")]
    paths: Vec<String>,
    /// Metadata KEY=VALUE (null deletes the key; repeatable)
    #[arg(long = "meta", value_name = "KEY=VALUE", value_parser = parse_meta)]
    metadata: Vec<(String, serde_json::Value)>,
    /// Append a note to the task's history
    #[arg(long)]
    note: Option<String>,
    /// Change a task that is not yours to change anyway (another member's claim; as a
    /// member, a task you do not own): who, when and what is recorded in the task's notes
    #[arg(long)]
    pub(crate) force: bool,
}

/// The program's name.
pub const PROGRAM: &str = "roo-task";

/// Entry point of the `roo-task` binary.
pub fn main() -> ExitCode {
    main_with(PROGRAM, std::env::args_os(), run)
}

fn member_name(raw: &str) -> CliResult<Name> {
    Ok(Name::parse_as("member name", raw)?)
}

/// Runs one `roo-task` command: `doctor` and `team` on their own, every other one on
/// the team's task list.
fn run(cli: TaskCli) -> CliResult {
    let ctx = Context::new(PROGRAM, cli.common);
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let out = &mut out;
    // Commands that do not need the team to exist (or not only its task list).
    match cli.command {
        TaskCommand::Doctor { acknowledge } => {
            return crate::common::doctor(&ctx, acknowledge, out);
        }
        TaskCommand::Team(command) => return team::run(&ctx, command, out),
        _ => {}
    }
    let team = ctx.team()?;
    let tasks = team.tasks();
    match cli.command {
        TaskCommand::Create {
            subject,
            description,
            active_form,
            blocked_by,
            blocks,
            paths,
            owner,
            metadata,
            budget_usd,
            budget_requests,
        } => {
            let budget = roo_store::budget::SpendCap {
                usd: budget_usd,
                requests: budget_requests,
            };
            let task = tasks.create(NewTask {
                subject,
                description,
                active_form,
                blocked_by,
                blocks,
                paths,
                metadata: metadata.into_iter().collect(),
                owner: owner.as_deref().map(member_name).transpose()?,
                by: ctx.agent_opt()?,
                budget: (!budget.is_empty()).then_some(budget),
            })?;
            print_id_or_task(&ctx, out, &task, "")?;
        }
        TaskCommand::List { status, owner } => {
            let filter = TaskFilter {
                status,
                owner: owner.as_deref().map(member_name).transpose()?,
            };
            list(&ctx, &tasks.list(&filter)?, out)?;
        }
        TaskCommand::Get { id } => print_task(&ctx, out, &tasks.get(&id)?)?,
        TaskCommand::Update(args) => update(&ctx, &tasks, args, out)?,
        TaskCommand::Claim {
            id,
            next,
            lease,
            ignore_scope,
        } => {
            let me = ctx.agent()?;
            let options = ClaimOptions {
                lease: Duration::from_secs(lease),
                ignore_scope,
            };
            if next {
                claim_next(&ctx, &tasks, &me, &options, out)?;
            } else if let Some(id) = id {
                claim(&ctx, &tasks, team.name(), &id, &me, &options, out)?;
            }
        }
        TaskCommand::Renew { id, lease } => {
            let task = tasks.renew(&id, &ctx.agent()?, Duration::from_secs(lease))?;
            print_task(&ctx, out, &task)?;
        }
        TaskCommand::Assign { id, to, force } => {
            let assignment = team.assign_task(&id, &to, &ctx.agent()?, force)?;
            assigned(&ctx, &assignment, out)?;
        }
        TaskCommand::AddUsage {
            id,
            input,
            output,
            cache_read,
            cache_write,
            requests,
            cost,
        } => {
            let me = ctx.agent()?;
            let usage = TaskUsage {
                input_tokens: input,
                output_tokens: output,
                cache_read_tokens: cache_read,
                cache_write_tokens: cache_write,
                requests,
                cost_usd: cost,
            };
            print_task(&ctx, out, &tasks.add_usage(&id, &me, &usage)?)?;
        }
        TaskCommand::Reclaim => {
            reclaimed(&ctx, &tasks.reclaim_gone(ctx.agent_opt()?.as_ref())?, out)?;
        }
        TaskCommand::Ready => ready(&ctx, &tasks.ready_report()?, out)?,
        TaskCommand::Doctor { .. } | TaskCommand::Team(_) => {}
        TaskCommand::Delete { id, force } => {
            let task = tasks.delete(&id, ctx.agent_opt()?.as_ref(), force)?;
            print_id_or_task(&ctx, out, &task, "deleted task ")?;
        }
    }
    Ok(())
}

/// One task: as JSON, or in full.
fn print_task(ctx: &Context, out: &mut impl Write, task: &roo_store::Task) -> CliResult {
    if ctx.json() {
        print_json(out, task)?;
    } else {
        write_task(out, ctx.style, task)?;
    }
    Ok(())
}

/// A task created or deleted: as JSON, or its id after `prefix`.
fn print_id_or_task(
    ctx: &Context,
    out: &mut impl Write,
    task: &roo_store::Task,
    prefix: &str,
) -> CliResult {
    if ctx.json() {
        print_json(out, task)?;
    } else {
        writeln!(out, "{prefix}{}", task.id)?;
    }
    Ok(())
}

/// `list`: the tasks found, one line each.
fn list(ctx: &Context, list: &[roo_store::Task], out: &mut impl Write) -> CliResult {
    if ctx.json() {
        print_json(out, &list)?;
    } else if list.is_empty() {
        writeln!(out, "no tasks")?;
    } else {
        for t in list {
            write_task_line(out, ctx.style, t)?;
        }
    }
    Ok(())
}

/// `update`: the patch the arguments make, applied as the calling member.
fn update(
    ctx: &Context,
    tasks: &roo_store::TaskList,
    args: UpdateArgs,
    out: &mut impl Write,
) -> CliResult {
    let owner = match (args.owner, args.no_owner) {
        (Some(o), _) => Some(Some(member_name(&o)?)),
        (None, true) => Some(None),
        (None, false) => None,
    };
    let task = tasks.update(
        &args.id,
        TaskPatch {
            subject: args.subject,
            description: args.description,
            active_form: args.active_form,
            status: args.status,
            owner,
            add_blocks: args.add_blocks,
            add_blocked_by: args.add_blocked_by,
            remove_blocks: args.remove_blocks,
            remove_blocked_by: args.remove_blocked_by,
            paths: (!args.paths.is_empty()).then_some(args.paths),
            metadata: args.metadata.into_iter().collect(),
            note: args.note,
            by: ctx.agent_opt()?,
            force: args.force,
        },
    )?;
    print_task(ctx, out, &task)
}

/// `claim --next`: the task claimed, or a refusal when none is ready.
fn claim_next(
    ctx: &Context,
    tasks: &roo_store::TaskList,
    me: &Name,
    options: &ClaimOptions,
    out: &mut impl Write,
) -> CliResult {
    match tasks.claim_next(me, options)? {
        Some(task) => print_task(ctx, out, &task),
        None => {
            if ctx.json() {
                print_json(
                    out,
                    &shape::ClaimRefused {
                        claimed: false,
                        id: None,
                        refusal: ClaimRefusal::NoneReady,
                    },
                )?;
            }
            Err(CliError::Refused("claim a task: none is ready".into()))
        }
    }
}

/// `assign`: the task assigned and the message that told its new owner.
fn assigned(ctx: &Context, assignment: &roo_store::Assignment, out: &mut impl Write) -> CliResult {
    if ctx.json() {
        print_json(
            out,
            &shape::Assigned {
                task: &assignment.task,
                message: &assignment.message,
            },
        )?;
    } else {
        write_task(out, ctx.style, &assignment.task)?;
        writeln!(
            out,
            "sent task_assignment {} to {}",
            assignment.message.id,
            crate::output::escape(&assignment.message.to)
        )?;
    }
    Ok(())
}

/// `reclaim`: the tasks taken back from members that are gone, and why.
fn reclaimed(ctx: &Context, reclaimed: &[roo_store::Reclaimed], out: &mut impl Write) -> CliResult {
    if ctx.json() {
        let rows: Vec<_> = reclaimed
            .iter()
            .map(|r| shape::Reclaimed {
                task: &r.task,
                previous_owner: &r.previous_owner,
                reason: &r.reason,
            })
            .collect();
        print_json(out, &rows)?;
    } else if reclaimed.is_empty() {
        writeln!(out, "nothing to reclaim")?;
    } else {
        for r in reclaimed {
            writeln!(
                out,
                "reclaimed {} from {}: {}",
                r.task.id,
                r.previous_owner,
                crate::output::escape(&r.reason)
            )?;
        }
    }
    Ok(())
}

/// `ready`: the tasks ready to claim, and those held back by another's scope.
fn ready(ctx: &Context, report: &roo_store::ReadyReport, out: &mut impl Write) -> CliResult {
    if ctx.json() {
        print_json(out, &report.ready)?;
    } else {
        if report.ready.is_empty() {
            writeln!(out, "no task is ready")?;
        }
        for t in &report.ready {
            write_task_line(out, ctx.style, t)?;
        }
        for (t, with) in &report.held_back {
            writeln!(
                out,
                "{}",
                ctx.style.dim(&format!(
                    "held back: task {} overlaps the paths of in-progress task {with}",
                    t.id
                ))
            )?;
        }
    }
    Ok(())
}

fn claim(
    ctx: &Context,
    tasks: &roo_store::TaskList,
    team: &Name,
    id: &TaskId,
    me: &Name,
    options: &ClaimOptions,
    out: &mut impl Write,
) -> CliResult {
    let outcome = tasks.claim(id, me, options)?;
    let (refusal, message) = match &outcome {
        ClaimOutcome::Claimed(task) => {
            if ctx.json() {
                print_json(out, task)?;
            } else {
                write_task(out, ctx.style, task)?;
            }
            return Ok(());
        }
        ClaimOutcome::AlreadyOwned { owner, status } => (
            ClaimRefusal::AlreadyOwned {
                owner,
                status: *status,
            },
            format!("it is owned by {owner} ({status})"),
        ),
        ClaimOutcome::Blocked { by } => {
            let ids: Vec<&str> = by.iter().map(TaskId::as_str).collect();
            (
                ClaimRefusal::Blocked { blocked_by: by },
                format!("it is blocked by unfinished tasks {}", ids.join(", ")),
            )
        }
        ClaimOutcome::NotPending { status } => (
            ClaimRefusal::NotPending { status: *status },
            format!("it is {status}"),
        ),
        ClaimOutcome::ScopeConflict { with, owner } => (
            ClaimRefusal::ScopeConflict {
                with,
                owner: owner.as_ref(),
            },
            format!(
                "its paths overlap in-progress task {with} of {} (use --ignore-scope to claim anyway)",
                owner.as_ref().map_or("nobody", Name::as_str)
            ),
        ),
        ClaimOutcome::NotFound => {
            return Err(roo_store::Error::TaskNotFound {
                team: team.to_string(),
                id: id.to_string(),
            }
            .into());
        }
    };
    if ctx.json() {
        print_json(
            out,
            &shape::ClaimRefused {
                claimed: false,
                id: Some(id),
                refusal,
            },
        )?;
    }
    Err(CliError::Refused(format!("claim task {id}: {message}")))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        TaskCli::command().debug_assert();
    }

    #[test]
    fn ids_and_statuses_are_validated_by_the_parser() {
        assert!(TaskCli::try_parse_from(["roo-task", "get", "x1"]).is_err());
        assert!(TaskCli::try_parse_from(["roo-task", "list", "--status", "done"]).is_err());
        let cli = TaskCli::try_parse_from(["roo-task", "list", "--status", "in-progress"]).unwrap();
        let TaskCommand::List { status, .. } = cli.command else {
            panic!("not list")
        };
        assert_eq!(status, Some(TaskStatus::InProgress));
        assert!(TaskCli::try_parse_from(["roo-task", "claim"]).is_err());
        assert!(TaskCli::try_parse_from(["roo-task", "claim", "--next"]).is_ok());
    }

    #[test]
    fn metadata_values_are_json_when_they_parse() {
        assert_eq!(
            parse_meta("n=3").unwrap(),
            ("n".into(), serde_json::json!(3))
        );
        assert_eq!(
            parse_meta("s=abc").unwrap(),
            ("s".into(), serde_json::json!("abc"))
        );
        assert!(parse_meta("novalue").is_err());
    }
}
