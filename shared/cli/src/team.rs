//! `team …`, a command of both `roo-mail` and `roo-task`: set a team up without the lead
//! (scripts, people, other agents). A team holds both the mailboxes and the task list, so
//! either CLI creates, inspects and deletes one; the examples name the CLI they are shown
//! in (see [`crate::common::PROGRAM`]).

use std::io::Write;

use clap::Subcommand;
use roo_store::{BackendType, Error as StoreError, Member, MemberState, Name, Team};

use crate::common::Context;
use crate::exit::{CliError, CliResult};
use crate::output::{escape, print_json};
use crate::shape;

/// Team subcommands.
#[derive(Subcommand, Debug)]
pub enum TeamCommand {
    /// Create a team with its lead and members (and an empty task list)
    #[command(
        after_help = "Example:\n  {program} team create --team demo --lead lead --member alice --member bob"
    )]
    Create {
        /// The lead's member name
        #[arg(long, value_name = "NAME")]
        lead: String,
        /// A member to add (repeatable)
        #[arg(long = "member", value_name = "NAME")]
        members: Vec<String>,
        /// What the team is for
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Add a member
    #[command(after_help = "Example:\n  {program} team add --team demo carol --agent-type Explore")]
    Add {
        /// Member name
        name: String,
        #[command(flatten)]
        fields: MemberFields,
    },
    /// Register a process as a member (taking over a name only if its holder is dead)
    #[command(after_help = "Examples:
  {program} team join --team demo carol --pid 4242 --backend tmux --pane-id %3
  {program} team join --team demo dave            # a roster entry without a process
A name held by another live process (its pid is alive) is refused with exit 1.")]
    Join {
        /// Member name
        name: String,
        /// The member's process id (its liveness is checked by pid)
        #[arg(long)]
        pid: Option<u32>,
        /// Where it runs
        #[arg(long, value_enum)]
        backend: Option<Backend>,
        /// Terminal pane id (tmux %N, iTerm2 session id)
        #[arg(long)]
        pane_id: Option<String>,
        /// Git worktree it works in
        #[arg(long, value_name = "PATH")]
        worktree: Option<std::path::PathBuf>,
        #[command(flatten)]
        fields: MemberFields,
    },
    /// Mark a member dead and return its unfinished tasks to the ready set (with a note)
    #[command(
        name = "mark-dead",
        after_help = "Example:\n  {program} team mark-dead --team demo carol --as lead --reason 'pane closed'"
    )]
    MarkDead {
        /// Member name or agent id
        name: String,
        /// Why (recorded in the config and in each released task's note)
        #[arg(long)]
        reason: String,
    },
    /// Remove a member (it has terminated)
    Remove {
        /// Member name or agent id
        name: String,
    },
    /// Print the team config
    Show,
    /// Watch the team live: members, the task board and the newest events (q quits)
    Top(crate::top::TopArgs),
    /// Delete the team and its task list (refused while members other than the lead are
    /// active, unless --force)
    Delete {
        /// Delete even if members are active
        #[arg(long)]
        force: bool,
    },
    /// Remove the teammates' clones on other hosts whose branches are merged (a team
    /// whose lead died); run it in the lead's repository
    #[command(
        name = "gc-hosts",
        after_help = "Each teammate's clone is the one the lead makes there \
(<repo>/.roocode/worktrees/<team>+<name>, repo: from your hosts: config); a roster \
entry that records any other path is refused and nothing runs for it. Its branch is \
fetched into this repository first; a clone is removed only when the branch has nothing \
HEAD lacks and the host finds it unchanged since. Kept ones are named with why (exit 1).

Examples:
  {program} team gc-hosts --team demo --dry-run
  {program} team gc-hosts --team demo --host b"
    )]
    GcHosts {
        /// Only the clones on this host (a name of hosts:)
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
        /// Fetch and report, remove nothing
        #[arg(long)]
        dry_run: bool,
    },
}

/// What `add` and `join` record about a member besides its name.
#[derive(Debug, clap::Args)]
pub struct MemberFields {
    /// Agent definition it runs
    #[arg(long)]
    agent_type: Option<String>,
    /// Model override
    #[arg(long)]
    model: Option<String>,
    /// Display colour
    #[arg(long)]
    color: Option<String>,
    /// The member must get its plans approved by the lead
    #[arg(long)]
    plan_mode_required: bool,
}

impl MemberFields {
    fn apply(self, m: &mut Member) {
        m.agent_type = self.agent_type;
        m.model = self.model;
        m.color = self.color;
        m.plan_mode_required = self.plan_mode_required;
    }
}

/// Backends, as on the wire.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A roo-worker in a tmux pane
    Tmux,
    /// A roo-worker in an iTerm2 pane
    Iterm2,
    /// A task inside the lead's process
    InProcess,
}

impl From<Backend> for BackendType {
    fn from(b: Backend) -> BackendType {
        match b {
            Backend::Tmux => BackendType::Tmux,
            Backend::Iterm2 => BackendType::Iterm2,
            Backend::InProcess => BackendType::InProcess,
        }
    }
}

/// Fails unless `name` is a member of `team`.
pub fn require_member(team: &Team, name: &Name) -> CliResult {
    if team.config()?.member(name.as_str()).is_none() {
        return Err(StoreError::MemberNotFound {
            team: team.name().to_string(),
            name: name.to_string(),
        }
        .into());
    }
    Ok(())
}

fn member(raw: &str, team: &Name) -> CliResult<Member> {
    Ok(Member::new(Name::parse_as("member name", raw)?, team))
}

/// Runs a team subcommand.
pub fn run(ctx: &Context, command: TeamCommand, out: &mut impl Write) -> CliResult {
    match command {
        TeamCommand::Create {
            lead,
            members,
            description,
        } => {
            let name = ctx.team_name()?;
            let lead = member(&lead, &name)?;
            let members = members
                .iter()
                .map(|m| member(m, &name))
                .collect::<CliResult<Vec<_>>>()?;
            let team = Team::create(&ctx.home()?, name, &description, lead, members)?;
            show(ctx, &team, out)
        }
        TeamCommand::Add { name, fields } => {
            let team = ctx.team()?;
            let mut m = member(&name, team.name())?;
            fields.apply(&mut m);
            let added = team.add_member(m)?;
            if ctx.json() {
                print_json(out, &added)?;
            } else {
                writeln!(out, "added {} ({})", added.name, escape(&added.agent_id))?;
            }
            Ok(())
        }
        TeamCommand::Join {
            name,
            pid,
            backend,
            pane_id,
            worktree,
            fields,
        } => {
            let team = ctx.team()?;
            let mut m = member(&name, team.name())?;
            m.pid = pid;
            m.backend_type = backend.map(Into::into);
            m.pane_id = pane_id;
            m.worktree_path = worktree;
            fields.apply(&mut m);
            let joined = team.join(m)?;
            if ctx.json() {
                print_json(
                    out,
                    &shape::Joined {
                        member: &joined.member,
                        replaced: joined.replaced.as_ref(),
                    },
                )?;
            } else {
                let how = match &joined.replaced {
                    None => String::new(),
                    Some(old) if old.observed_state() == MemberState::NotStarted => {
                        " (its roster entry, which had never started)".to_string()
                    }
                    Some(old) => format!(
                        " (took over the entry of {}{})",
                        old.observed_state(),
                        old.pid.map_or(String::new(), |p| format!(" pid {p}"))
                    ),
                };
                writeln!(out, "joined as {}{how}", joined.member.name)?;
            }
            Ok(())
        }
        TeamCommand::MarkDead { name, reason } => {
            let team = ctx.team()?;
            let death = team.declare_dead(&name, ctx.agent_opt()?.as_ref(), &reason)?;
            if ctx.json() {
                print_json(
                    out,
                    &shape::MarkedDead {
                        member: &death.member,
                        newly_dead: death.newly_dead,
                        released: death.released.iter().map(|r| &r.task).collect(),
                    },
                )?;
            } else {
                let was = if death.newly_dead {
                    "marked"
                } else {
                    "already marked"
                };
                writeln!(out, "{was} {} dead", death.member.name)?;
                for r in &death.released {
                    writeln!(out, "released task {} to pending", r.task.id)?;
                }
            }
            Ok(())
        }
        TeamCommand::Remove { name } => {
            let team = ctx.team()?;
            let removed = team.remove_member(&name)?;
            if ctx.json() {
                print_json(out, &removed)?;
            } else {
                writeln!(out, "removed {}", removed.name)?;
            }
            Ok(())
        }
        TeamCommand::Show => show(ctx, &ctx.team()?, out),
        TeamCommand::Top(args) => crate::top::run(ctx, args, out),
        TeamCommand::GcHosts { host, dry_run } => gc_hosts(ctx, host, dry_run, out),
        TeamCommand::Delete { force } => {
            let team = ctx.team()?;
            // Teammates on other hosts, read while the roster exists: their clones there
            // are removed once merged (`crate::hosts`).
            let remote = match crate::hosts::cleaner() {
                Some(cleaner) if crate::hosts::has_remote_members(&team.config()?) => {
                    Some((cleaner, stopped_only(&team)?))
                }
                _ => None,
            };
            team.delete(force)?;
            if let Some((cleaner, (config, mut skipped))) = remote {
                match cleaner.gc(&ctx.home()?, &config, None, false) {
                    Ok((lines, _)) => {
                        skipped.extend(lines);
                        for line in skipped {
                            eprintln!("{}: {}", ctx.program, escape(&line));
                        }
                    }
                    Err(why) => eprintln!(
                        "{}: the clones on other hosts were left: {}",
                        ctx.program,
                        escape(&why)
                    ),
                }
            }
            if ctx.json() {
                print_json(
                    out,
                    &shape::TeamDeleted {
                        deleted: team.name(),
                    },
                )?;
            } else {
                writeln!(out, "deleted team {}", team.name())?;
            }
            Ok(())
        }
    }
}

/// `team gc-hosts`: the clones of the team's stopped teammates on other hosts removed
/// once merged (see [`crate::hosts`]); a teammate still running is skipped.
fn gc_hosts(ctx: &Context, host: Option<String>, dry_run: bool, out: &mut impl Write) -> CliResult {
    let host = host
        .map(|h| {
            Name::parse_as("host name", &h).map_err(|e| CliError::Usage(format!("--host: {e}")))
        })
        .transpose()?;
    let Some(cleaner) = crate::hosts::cleaner() else {
        return Err(CliError::Usage(format!(
            "{} was built without the team runtime; gc-hosts needs it",
            ctx.program
        )));
    };
    let team = ctx.team()?;
    let (config, mut lines) = stopped_only(&team)?;
    let (more, held_back) = cleaner
        .gc(&ctx.home()?, &config, host.as_ref(), dry_run)
        .map_err(CliError::Refused)?;
    lines.extend(more);
    for line in &lines {
        writeln!(out, "{}", escape(line))?;
    }
    if lines.is_empty() {
        writeln!(out, "no clones of team {} on other hosts", team.name())?;
    }
    if held_back || lines.iter().any(|l| l.contains(": skipped: ")) {
        return Err(CliError::Refused(
            "some clones were kept (named above)".to_string(),
        ));
    }
    Ok(())
}

/// The team's config without its teammates on other hosts that still run (their clones
/// are in use), and a line for each of those.
fn stopped_only(team: &Team) -> CliResult<(roo_store::TeamConfig, Vec<String>)> {
    let mut config = team.config()?;
    let liveness = team.liveness(&config)?;
    let mut lines = Vec::new();
    let lead = config.lead_agent_id.clone();
    config.members.retain(|m| {
        let running = m.agent_id != lead
            && m.host.is_some()
            && liveness.observed_state(m) != MemberState::Dead
            && !m.never_joined();
        if running {
            lines.push(format!(
                "{}: skipped: it is still running (stop it first)",
                m.name
            ));
        }
        !running
    });
    Ok((config, lines))
}

fn show(ctx: &Context, team: &Team, out: &mut impl Write) -> CliResult {
    let config = team.config()?;
    if ctx.json() {
        print_json(out, &config)?;
        return Ok(());
    }
    let liveness = team.liveness(&config)?;
    let style = ctx.style;
    writeln!(out, "team {}", style.bold(config.name.as_str()))?;
    if !config.description.is_empty() {
        writeln!(out, "  {}", escape(&config.description))?;
    }
    writeln!(out, "  created {}", config.created_at)?;
    for m in &config.members {
        let role = if m.agent_id == config.lead_agent_id {
            " (lead)"
        } else {
            ""
        };
        let state = liveness.observed_state(m);
        let mut extra = Vec::new();
        if let Some(reason) = &m.dead_reason {
            extra.push(format!("dead: {reason}"));
        }
        if let Some(t) = &m.agent_type {
            extra.push(format!("type {t}"));
        }
        if let Some(b) = m.backend_type {
            extra.push(format!(
                "backend {}",
                serde_json::to_value(b)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or("")
            ));
        }
        if let Some(h) = &m.host {
            extra.push(format!("host {h}"));
        }
        if let Some(p) = &m.pane_id {
            extra.push(format!("pane {p}"));
        }
        if let Some(p) = m.pid {
            extra.push(format!("pid {p}"));
        }
        if let Some(w) = &m.worktree_path {
            extra.push(format!("worktree {}", w.display()));
        }
        let extra = if extra.is_empty() {
            String::new()
        } else {
            format!("  {}", style.dim(&escape(&extra.join(", "))))
        };
        writeln!(
            out,
            "  {}{role}  {}  {}{extra}",
            style.bold(m.name.as_str()),
            escape(&m.agent_id),
            state
        )?;
    }
    Ok(())
}
