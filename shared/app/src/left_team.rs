//! The notice of a team a lead leaves behind, on stderr: a `-p` run that ends with its
//! team still bound (no TeamDelete) or whose TeamCreate found a team left by an earlier
//! run, and the interactive lead the person leaves with a team, say what is left —
//! teammates and their states, unmerged commits, uncommitted and git-ignored files and
//! where — and the commands that merge or delete it ([`roo_team::lead::LeftTeam`]).
//! The git that reads the teammates' clones runs in the lead's command sandbox, as its
//! team tools' does; every line is escaped for the terminal (names, commit subjects and
//! file names come from teammates). It also keeps the `-p` run's account of its
//! TeamCreate and named Agent calls ([`TeamCalls`]): one that failed means the team was
//! not formed as asked, and the run did not finish (exit 1).

use std::collections::HashMap;

use roo_agent::event::AgentEvent;
use roo_agent::tool::ToolContext;
use roo_store::{Name, Team};
use roo_team::lead::LeftTeam;
use roo_team::teammate::lead_watch::{LeadState, lead_state};
use roo_team::worktree::Git;

use crate::render::Style;
use crate::setup::Built;

/// The notice's lines for `team` under `header` (not escaped yet: [`print`] does).
pub async fn lines(team: Team, context: &ToolContext, header: String) -> Vec<String> {
    let git = Git::new().in_launcher_of(&context.launcher);
    let cwd = context.cwd.clone();
    let name = team.name().clone();
    let read = tokio::task::spawn_blocking(move || LeftTeam::read(&team, &cwd, &git)).await;
    match read {
        Ok(Ok(left)) => left.lines(&header),
        Ok(Err(e)) => vec![
            header,
            format!("  the team could not be read: {e}"),
            format!("  {}", roo_team::tools::left_team_advice(&name)),
        ],
        Err(e) => vec![header, format!("  the team could not be read: {e}")],
    }
}

/// Prints `lines` on stderr, escaped, each prefixed like `roo-lead`'s other messages.
pub fn print(lines: &[String], style: Style) {
    for (i, line) in lines.iter().enumerate() {
        let line = roo_term::escape(line);
        if i == 0 {
            eprintln!("roo-lead: {}", style.yellow(&line));
        } else {
            eprintln!("roo-lead: {line}");
        }
    }
}

/// The header of a team this run leaves behind.
pub fn left_header(team: &roo_store::Name) -> String {
    format!(
        "team {team} is left behind: the lead ended without deleting it (TeamDelete); it \
         holds:"
    )
}

/// The header of a team an earlier run left, which this run's TeamCreate found in its way.
pub fn taken_header(team: &roo_store::Name) -> String {
    format!(
        "team {team} was left by an earlier run, so this run could not create it (it does \
         not take over a team it did not start); it holds:"
    )
}

/// The notices of the teams this run leaves on disk: its own, still bound (no
/// TeamDelete), and those its TeamCreate found left by an earlier run (whose lead is
/// gone), which it does not take over.
pub async fn left_teams(built: &Built, calls: &TeamCalls) -> Vec<Vec<String>> {
    let context = built.agent.tool_context();
    let mut notices = Vec::new();
    let bound = built.team.get().map(|b| b.team.clone());
    if let Some(team) = &bound {
        let header = left_header(team.name());
        notices.push(lines(team.clone(), context, header).await);
    }
    let mut taken: Vec<Name> = calls
        .failed
        .iter()
        .filter(|c| c.tool == CREATE)
        .filter_map(|c| Name::parse(&c.target).ok())
        .filter(|name| bound.as_ref().is_none_or(|b| b.name() != name))
        .collect();
    taken.dedup();
    if taken.is_empty() {
        return notices;
    }
    let Ok(home) = crate::setup::store_home() else {
        return notices;
    };
    for name in taken {
        let left = tokio::task::spawn_blocking({
            let home = home.clone();
            let name = name.clone();
            move || {
                let team = Team::open(&home, name).ok()?;
                matches!(lead_state(&team), LeadState::Gone(_) | LeadState::Absent).then_some(team)
            }
        })
        .await;
        if let Ok(Some(team)) = left {
            let header = taken_header(&name);
            notices.push(lines(team, context, header).await);
        }
    }
    notices
}

/// The tool names whose failures [`TeamCalls`] counts.
const CREATE: &str = "TeamCreate";
const AGENT: &str = "Agent";

/// The lead's TeamCreate calls and its Agent calls that name a teammate, and those of
/// them that failed (an error result or a denial): a run whose team was not formed as
/// it asked did not finish.
#[derive(Debug, Default)]
pub struct TeamCalls {
    /// Call id → (tool, the team or teammate it names).
    asked: HashMap<String, (&'static str, String)>,
    pub(crate) failed: Vec<FailedCall>,
}

#[derive(Debug)]
pub(crate) struct FailedCall {
    tool: &'static str,
    target: String,
    /// The first line of the call's error.
    why: String,
}

impl TeamCalls {
    pub fn note(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::AssistantMessage { message } => {
                for (id, name, input) in message.tool_uses() {
                    let (tool, field) = match name {
                        CREATE => (CREATE, "team_name"),
                        AGENT => (AGENT, "name"),
                        _ => continue,
                    };
                    let target = input[field].as_str().map(str::trim).unwrap_or_default();
                    // An Agent call without `name` starts a sub-agent, not a teammate.
                    if tool == AGENT && target.is_empty() {
                        continue;
                    }
                    let target = roo_term::clip(target, 64);
                    self.asked.insert(id.to_string(), (tool, target));
                }
            }
            AgentEvent::ToolEnd {
                id,
                is_error: true,
                preview,
                ..
            } => self.fail(id, preview),
            AgentEvent::PermissionDenied { id, reason, .. } => self.fail(id, reason),
            _ => {}
        }
    }

    fn fail(&mut self, id: &str, why: &str) {
        if let Some((tool, target)) = self.asked.remove(id) {
            // What failed, without the advice after it (a warning showed it in full).
            let line = why.lines().next().unwrap_or_default();
            let why = roo_term::clip(line.split("; ").next().unwrap_or(line), 200);
            self.failed.push(FailedCall { tool, target, why });
        }
    }

    /// Why the run did not finish, when a call failed.
    pub fn message(&self) -> Option<String> {
        if self.failed.is_empty() {
            return None;
        }
        let calls: Vec<String> = self
            .failed
            .iter()
            .map(|c| {
                let what = if c.tool == CREATE { "team" } else { "teammate" };
                format!("{} of {what} {} failed ({})", c.tool, c.target, c.why)
            })
            .collect();
        Some(format!(
            "the team was not formed as asked, so the run did not finish: {}",
            calls.join("; ")
        ))
    }
}
