//! TeamCreate and TeamDelete: the lead founds its team and ends it.
//!
//! **TeamCreate** (only while the agent's slot is empty) creates the team in the store
//! with the agent as lead (its member entry records this process's pid, as the protocol
//! asks of every running member), binds the [`TeamSlot`](crate::TeamSlot) with a new
//! [`InboxRouter`] (with the lead's UI events, if any) and starts the router's `run`
//! loop with `tokio::spawn` under a child token of [`LeadTools::runtime`]: the router
//! stops when TeamDelete unbinds the team or when the lead's lifetime token is
//! cancelled. A runtime that binds a lead by other means runs that router itself.
//!
//! **TeamDelete** (only the lead) refuses while any other member is busy. Otherwise it
//! sends each idle member a `shutdown_request` with a fresh secret request id, waits up
//! to [`LeadTools::shutdown_wait`] for every one to approve (and, for a member with a
//! process of its own, for that process to exit) or to leave the team or die, and only
//! then deletes the team in the store, unbinds the slot, stops the router and cleans up
//! the team's worktrees ([`LeadTools::worktrees`]), reporting kept ones (path, branch,
//! why). A member that refuses or does not answer in time leaves the team in place, and
//! the result says who.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roo_agent::event::AgentEvent;
use roo_agent::tool::{Delegation, ToolContext, ToolKind, ToolOutput, TypedTool};
use roo_store::{Member, MemberState, MessageBody, Name, Outgoing, RooHome, Team, pid_alive};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::{LeadTools, TeamToolError, TeamTools, bounded, run_blocking};
use crate::binding::TeamBinding;
use crate::router::{InboxRouter, ResponseKind, Waiter, new_request_id};
use crate::teammate::lead_watch::{LeadState, lead_state};
use crate::worktree::{Discovered, LeadRepo};

/// The router task TeamCreate started, shared with TeamDelete: the team and the token
/// that stops it.
pub(crate) type RouterTask = Arc<Mutex<Option<(Name, CancellationToken)>>>;

fn take_router_task(task: &RouterTask, team: &Name) -> Option<CancellationToken> {
    let mut slot = task.lock().unwrap_or_else(|e| e.into_inner());
    match slot.as_ref() {
        Some((name, _)) if name == team => slot.take().map(|(_, token)| token),
        _ => None,
    }
}

// ---------------------------------------------------------------- TeamCreate

/// Creates a team with this agent as its lead.
pub struct TeamCreate {
    team: TeamTools,
    lead: LeadTools,
    router_task: RouterTask,
}

impl TeamCreate {
    pub(crate) fn new(team: TeamTools, lead: LeadTools, router_task: RouterTask) -> TeamCreate {
        TeamCreate {
            team,
            lead,
            router_task,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateInput {
    /// Like "refactor-auth".
    #[serde(alias = "name")]
    team_name: String,
    #[serde(default)]
    description: Option<String>,
}

pub(crate) const CREATE: &str = "TeamCreate";

impl TypedTool for TeamCreate {
    fn delegation(&self) -> Delegation {
        Delegation::NoSubAgent
    }

    type Input = CreateInput;
    const NAME: &'static str = CREATE;

    fn description(&self) -> String {
        "Creates a team led by you, with a task list and an inbox per member: once, before \
         TaskCreate and spawning teammates. TeamDelete ends it."
            .to_string()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    async fn run(&self, input: CreateInput, ctx: &ToolContext) -> ToolOutput {
        match self.create(input, ctx).await {
            Ok(text) => ToolOutput::ok(bounded(text)),
            Err(TeamToolError::Taken(text)) => {
                // What to do about a team left behind is the user's to decide: they
                // see it too, not only the model.
                ctx.events.emit(AgentEvent::Warning { text: text.clone() });
                TeamToolError::Taken(text).into_output()
            }
            Err(e) => e.into_output(),
        }
    }
}

/// What the user can do with team `team` that a lead left behind (a `-p` run that hit
/// its team timeout, a lead that crashed): lead it again, or delete it.
pub fn left_team_advice(team: &Name) -> String {
    format!(
        "resume it with `roo-lead --team {team}` (or `roo-lead --continue` to resume the \
         session that led it), or delete it with `roo-mail team delete --team {team}`"
    )
}

/// Why TeamCreate cannot take the name `name`: a team of that name exists. Says who
/// leads it and, for a team its lead left behind, how to resume or delete it.
fn taken(home: &RooHome, name: &Name) -> String {
    let state = Team::open(home, name.clone()).map(|team| lead_state(&team));
    let left = |situation: &str| {
        format!(
            "create team {name}: a team of that name exists, {situation}; {}; or create the \
             team under another name",
            left_team_advice(name)
        )
    };
    match state {
        Ok(LeadState::Alive(pid)) => format!(
            "create team {name}: a team of that name exists and a running lead (pid {pid}) \
             leads it; create the team under another name"
        ),
        Ok(LeadState::Gone(pid)) => left(&format!(
            "left by an earlier run (its lead's process {pid} is gone)"
        )),
        Ok(LeadState::Absent) => left("and no lead runs it"),
        Ok(LeadState::Unknown) | Err(_) => format!(
            "create team {name}: a team of that name exists; create the team under another \
             name, or {}",
            left_team_advice(name)
        ),
    }
}

impl TeamCreate {
    async fn create(&self, input: CreateInput, ctx: &ToolContext) -> Result<String, TeamToolError> {
        let name = Name::parse_as("team name", input.team_name.trim()).map_err(|e| {
            TeamToolError::InvalidInput {
                tool: CREATE,
                message: format!("`team_name`: {e}"),
            }
        })?;
        if let Some(current) = self.team.slot.get() {
            return Err(TeamToolError::Refused(format!(
                "create team {name}: you are already in team {} as {}; {}",
                current.team.name(),
                current.me,
                if current.is_lead() {
                    "delete it with TeamDelete first"
                } else {
                    "only a lead creates teams"
                }
            )));
        }
        let (home, me) = (self.lead.roo_home.clone(), self.lead.me.clone());
        let description = input.description.unwrap_or_default();
        let team = run_blocking(CREATE, &ctx.cancel, move || {
            let mut lead = Member::new(me.clone(), &name);
            lead.pid = Some(std::process::id());
            let team = match Team::create(&home, name.clone(), &description, lead, Vec::new()) {
                Err(roo_store::Error::TeamExists { .. }) => {
                    return Err(TeamToolError::Taken(taken(&home, &name)));
                }
                created => created?,
            };
            // The key exists before any teammate can ask: its answers are signed. Its
            // presence says on every host that it leads (PostgreSQL), and fences its
            // writes as the lead.
            let ready = crate::authority::LeadKey::load_or_create(&team)
                .map_err(|e| e.to_string())
                .and_then(|key| {
                    let presence = team.hold_presence(&me).map_err(|e| e.to_string())?;
                    Ok((key, presence))
                });
            match ready {
                Ok((key, presence)) => Ok((team, key, presence)),
                Err(e) => {
                    let _ = team.delete(true);
                    Err(TeamToolError::Refused(format!(
                        "create team {}: {e}",
                        team.name()
                    )))
                }
            }
        })
        .await?;
        let (team, key, presence) = team;
        let mailbox = team.mailbox();
        let router = match &self.lead.events {
            Some(events) => InboxRouter::with_events(mailbox, self.lead.me.clone(), events.clone()),
            None => InboxRouter::new(mailbox, self.lead.me.clone()),
        };
        let binding = TeamBinding {
            team: team.clone(),
            me: self.lead.me.clone(),
            lead: self.lead.me.clone(),
            router: router.clone(),
            presence: Some(std::sync::Arc::new(presence)),
            lead_key: Some(std::sync::Arc::new(key)),
        };
        if let Err(e) = self.team.slot.bind(binding) {
            // Bound by someone else meanwhile: undo the creation, the team is empty.
            let undo = team.clone();
            let _ = tokio::task::spawn_blocking(move || undo.delete(false)).await;
            return Err(TeamToolError::Refused(format!(
                "create team {}: {e}",
                team.name()
            )));
        }
        let token = self.lead.runtime.child_token();
        {
            let mut slot = self.router_task.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, old)) = slot.replace((team.name().clone(), token.clone())) {
                old.cancel();
            }
        }
        let member = self.lead.me.clone();
        tokio::spawn(async move {
            if let Err(e) = router.run(token).await {
                tracing::warn!(%member, error = %e, "the lead's inbox router stopped");
            }
        });
        Ok(format!(
            "created team {}, led by you ({}); no tasks yet.",
            team.name(),
            self.lead.me
        ))
    }
}

// ---------------------------------------------------------------- TeamDelete

/// Shuts down the idle members and deletes the team.
pub struct TeamDelete {
    team: TeamTools,
    lead: LeadTools,
    router_task: RouterTask,
}

impl TeamDelete {
    pub(crate) fn new(team: TeamTools, lead: LeadTools, router_task: RouterTask) -> TeamDelete {
        TeamDelete {
            team,
            lead,
            router_task,
        }
    }
}

/// TeamDelete takes no input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteInput {}

pub(crate) const DELETE: &str = "TeamDelete";

impl TypedTool for TeamDelete {
    fn delegation(&self) -> Delegation {
        Delegation::NoSubAgent
    }

    type Input = DeleteInput;
    const NAME: &'static str = DELETE;

    fn description(&self) -> String {
        "Ends your team once its work is merged: shuts idle teammates down, deletes its tasks \
         and inboxes, removes clean worktrees. Refused while one is busy."
            .to_string()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Internal
    }

    async fn run(&self, _input: DeleteInput, ctx: &ToolContext) -> ToolOutput {
        match self.delete(ctx).await {
            Ok(text) => ToolOutput::ok(bounded(text)),
            Err(e) => e.into_output(),
        }
    }
}

/// One idle member asked to shut down.
struct Asked {
    name: Name,
    pid: Option<u32>,
    waiter: Waiter,
}

/// How an asked member ended up.
enum Verdict {
    Stopped,
    Refused(String),
    NoAnswer,
    StillRunning(u32),
}

impl TeamDelete {
    async fn delete(&self, ctx: &ToolContext) -> Result<String, TeamToolError> {
        let binding = self.team.binding()?;
        if !binding.is_lead() {
            return Err(TeamToolError::LeadOnly {
                action: format!("delete team {}", binding.team.name()),
                lead: binding.lead.clone(),
            });
        }
        let team = binding.team.clone();
        let config = {
            let team = team.clone();
            run_blocking(DELETE, &ctx.cancel, move || {
                let config = team.config()?;
                let liveness = team.liveness(&config)?;
                Ok((config, liveness))
            })
            .await?
        };
        let (config, liveness) = config;
        let others: Vec<&Member> = config
            .members
            .iter()
            .filter(|m| m.agent_id != config.lead_agent_id)
            .collect();
        let busy: Vec<String> = others
            .iter()
            .filter(|m| liveness.observed_state(m) == MemberState::Busy)
            .map(|m| m.name.to_string())
            .collect();
        if !busy.is_empty() {
            return Err(TeamToolError::Refused(format!(
                "delete team {}: {} still busy ({}); wait for their idle notifications, or ask \
                 them to stop with SendMessage type shutdown_request, then call TeamDelete again",
                team.name(),
                if busy.len() == 1 {
                    "a member is"
                } else {
                    "members are"
                },
                busy.join(", ")
            )));
        }
        let idle: Vec<Member> = others
            .into_iter()
            .filter(|m| liveness.observed_state(m) == MemberState::Idle)
            .cloned()
            .collect();
        let asked = self.ask_to_shut_down(&binding, idle, ctx).await?;
        let verdicts = self.wait_for(&binding, asked, ctx).await?;
        let mut stopped = Vec::new();
        let mut problems = Vec::new();
        for (name, verdict) in verdicts {
            match verdict {
                Verdict::Stopped => stopped.push(name.to_string()),
                Verdict::Refused(reason) => {
                    problems.push(format!("{name} refused to shut down: {reason}"))
                }
                Verdict::NoAnswer => problems.push(format!(
                    "{name} did not answer the shutdown request within {:.1} s",
                    self.lead.shutdown_wait.as_secs_f64()
                )),
                Verdict::StillRunning(pid) => problems.push(format!(
                    "{name} agreed to shut down but its process {pid} is still running"
                )),
            }
        }
        if !problems.is_empty() {
            return Err(TeamToolError::Refused(format!(
                "delete team {}: {}; the team was left in place{}. Stop them (or let them \
                 finish) and call TeamDelete again",
                team.name(),
                problems.join("; "),
                if stopped.is_empty() {
                    String::new()
                } else {
                    format!(" (shut down: {})", stopped.join(", "))
                }
            )));
        }
        // Who works on another host, read while the roster exists: the cleanup fetches
        // their branches from there.
        let remotes = match self.lead.hosts.clone().filter(|h| !h.is_empty()) {
            Some(hosts) => {
                let team = team.clone();
                run_blocking(DELETE, &ctx.cancel, move || {
                    Ok(crate::worktree::remote_members(&team.config()?, &hosts))
                })
                .await
                .unwrap_or_default()
            }
            None => Default::default(),
        };
        {
            let team = team.clone();
            run_blocking(DELETE, &ctx.cancel, move || Ok(team.delete(false)?)).await?;
        }
        // The team is gone: unbind (only if still ours) and stop the router we started.
        if self
            .team
            .slot
            .get()
            .is_some_and(|b| Arc::ptr_eq(&b, &binding))
        {
            self.team.slot.clear();
        }
        if let Some(token) = take_router_task(&self.router_task, team.name()) {
            token.cancel();
        }
        let mut out = format!("deleted team {}", team.name());
        if !stopped.is_empty() {
            out.push_str(&format!("; shut down: {}", stopped.join(", ")));
        }
        out.push_str(&self.clean_worktrees(team.name(), remotes, ctx).await);
        Ok(out)
    }

    /// Opens a request per member (before sending, so the answer cannot come first) and
    /// sends its `shutdown_request`.
    async fn ask_to_shut_down(
        &self,
        binding: &TeamBinding,
        idle: Vec<Member>,
        ctx: &ToolContext,
    ) -> Result<Vec<Asked>, TeamToolError> {
        let mut asked = Vec::new();
        for member in idle {
            let request_id = new_request_id().map_err(|e| TeamToolError::Refused(e.to_string()))?;
            let waiter = binding
                .router
                .expect(ResponseKind::Shutdown, &request_id, &member.name)
                .map_err(|e| TeamToolError::Refused(e.to_string()))?;
            let request = Outgoing::new(
                MessageBody::ShutdownRequest {
                    request_id: Some(request_id),
                },
                format!(
                    "The lead is deleting team {}: finish up and shut down.",
                    binding.team.name()
                ),
            )
            .with_summary("the team is being deleted: shut down");
            let (mailbox, me, to) = (
                binding.team.mailbox(),
                binding.me.clone(),
                member.name.to_string(),
            );
            run_blocking(DELETE, &ctx.cancel, move || {
                let sent = mailbox.send(&me, &to, request)?;
                // A pane teammate reads it at once (see `backend::nudge`).
                if let Ok(to) = Name::parse(&to) {
                    roo_store::wake::member(mailbox.team(), &to);
                }
                Ok(sent)
            })
            .await?;
            asked.push(Asked {
                // A process of another host is not waited for here (it marks itself dead).
                pid: member.local_pid(),
                name: member.name,
                waiter,
            });
        }
        Ok(asked)
    }

    /// Waits until every asked member approved (and its own process exited), left or
    /// died, or the deadline passed. Polls the router itself too, so this works whether
    /// or not the router's `run` loop is going.
    async fn wait_for(
        &self,
        binding: &TeamBinding,
        asked: Vec<Asked>,
        ctx: &ToolContext,
    ) -> Result<Vec<(Name, Verdict)>, TeamToolError> {
        let deadline = Instant::now() + self.lead.shutdown_wait;
        let own_pid = std::process::id();
        let mut out = Vec::new();
        for Asked { name, pid, waiter } in asked {
            let mut recv = Box::pin(waiter.recv());
            let mut answered = false;
            let verdict = loop {
                if !answered {
                    let _ = binding.router.poll().await;
                }
                let gone = {
                    let (team, name) = (binding.team.clone(), name.clone());
                    run_blocking(DELETE, &ctx.cancel, move || {
                        // Marked dead (a member that shut down marks itself just
                        // before it exits) counts once its process is gone too.
                        let config = team.config()?;
                        let liveness = team.liveness(&config)?;
                        Ok(config.member(name.as_str()).is_none_or(|m| {
                            liveness.observed_state(m) == MemberState::Dead
                                && m.local_pid().is_none_or(|p| p == own_pid || !pid_alive(p))
                        }))
                    })
                    .await?
                };
                if gone {
                    break Verdict::Stopped;
                }
                if answered {
                    // Approved: a process of its own must also exit (no orphan worker).
                    match pid.filter(|p| *p != own_pid) {
                        Some(p) if pid_alive(p) => {
                            if Instant::now() >= deadline {
                                break Verdict::StillRunning(p);
                            }
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                        _ => break Verdict::Stopped,
                    }
                }
                // Biased: an answer already there counts even once the deadline passed
                // (an earlier member may have used up the wait).
                let slice = deadline
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(100));
                tokio::select! {
                    biased;
                    response = &mut recv => match response {
                        Ok(message) => match message.body {
                            MessageBody::ShutdownResponse { approve: true, .. } => answered = true,
                            MessageBody::ShutdownResponse { approve: false, reason, .. } => {
                                break Verdict::Refused(if reason.trim().is_empty() {
                                    "no reason given".to_string()
                                } else {
                                    reason
                                });
                            }
                            _ => break Verdict::NoAnswer,
                        },
                        Err(_) => break Verdict::NoAnswer,
                    },
                    () = ctx.cancel.cancelled() => {
                        return Err(TeamToolError::Cancelled { tool: DELETE });
                    }
                    () = tokio::time::sleep(slice) => {
                        if Instant::now() >= deadline {
                            break Verdict::NoAnswer;
                        }
                    }
                }
            };
            out.push((name, verdict));
        }
        Ok(out)
    }

    /// Removes the team's clean worktrees; one line per removed or kept one.
    async fn clean_worktrees(
        &self,
        team: &Name,
        remotes: std::collections::HashMap<Name, crate::worktree::RemoteRepo>,
        ctx: &ToolContext,
    ) -> String {
        let Some(git) = self.lead.worktrees.clone() else {
            return String::new();
        };
        let git = git.in_launcher_of(&ctx.launcher);
        let (cwd, team) = (ctx.cwd.clone(), team.clone());
        let report = tokio::task::spawn_blocking(move || match LeadRepo::discover(&cwd, &git)? {
            Discovered::Repo(repo) => repo.with_remotes(remotes).cleanup(&team).map(Some),
            Discovered::Shared { .. } => Ok(None),
        })
        .await;
        match report {
            Ok(Ok(Some(report))) => {
                let lines = report.lines();
                if lines.is_empty() {
                    String::new()
                } else {
                    format!("\nworktrees:\n{}", lines.join("\n"))
                }
            }
            Ok(Ok(None)) => String::new(),
            Ok(Err(e)) => format!("\nworktrees: failed to clean up: {e}"),
            Err(e) => format!("\nworktrees: failed to clean up: {e}"),
        }
    }
}
