//! The teammate loop: what a `roo-worker` process and an in-process teammate both run.
//!
//! [`run`] joins the team (a pid for every member: the process's own, which for an
//! in-process teammate is the lead's), builds the agent with the one builder
//! (`Identity::teammate`, its transcript `teams/<team>/transcripts/<name>.jsonl`, the
//! hooks [`InboxDelivery`] and [`ShutdownOnRequest`] (with its `ShutdownResponse` tool)
//! and the plan gate sharing the binding's one [`InboxRouter`], whose `run` task runs
//! beside the agent, and a [`TeammateApprover`] that asks the lead), then:
//!
//! 1. runs the prompt (if any) as a run; messages arriving meanwhile are injected at the
//!    top of every turn;
//! 2. when a run ends, goes idle ([`Team::become_idle`]): `is_active: false` and one
//!    compact `idle_notification` to the lead, unless the
//!    [fingerprint](idle::idle_fingerprint) is the one of its last notification
//!    ([`idle`]);
//! 3. waits on the router (file notification with a polling fallback) — a
//!    `shutdown_request` from the lead is approved at once and ends the loop (idle, it
//!    has nothing to finish), one from anybody else is acknowledged and ignored; a
//!    conversation message wakes it, except FYI ones
//!    ([`wakes_teammate`](wake::wakes_teammate): `status_update`, `idle_notification`),
//!    which wait for the next real message ([`wake`]);
//! 4. marks itself busy and resumes with its full history as a new run, in which the
//!    delivery hook injects the waiting messages; back to 2.
//!
//! While a run is going, the lead's `shutdown_request` is put before the model, which
//! answers it with the `ShutdownResponse` tool ([`ShutdownOnRequest`]): approved, the run
//! stops (`RunOutcome::Stopped`) and the loop ends; rejected, it keeps working; unanswered
//! when the run ends, it is approved then and the loop ends. Each model request's usage
//! (and cost, at the agent's price) is added to the teammate's total and the task it
//! owns, and its caps are checked before every request ([`crate::budget`]).
//!
//! Each run has its own token, a child of the loop's: when the presence keeper finds the
//! teammate declared dead (PostgreSQL), it cancels that run alone — the tool call in
//! flight ends, a command's process group is killed — and the loop puts the death before
//! the model as the input of the next run ([`fence`]).

pub mod approver;
mod fence;
pub mod idle;
pub mod in_process;
pub mod lead_watch;
pub mod presence;
pub mod wake;

use std::sync::Arc;

use roo_agent::event::{AgentEvent, EventSink, RunOutcome};
use roo_agent::permissions::PermissionMode;
use roo_agent::tool::Tool;
use roo_agent::{Agent, PlanApprover};
use roo_store::{Mailbox, Member, Name, Presence, Task, Team, Timestamp};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::approver::LeadApprover;
use crate::binding::TeamBinding;
use crate::builder::{BuildError, build_agent};
use crate::delivery::InboxDelivery;
use crate::event::TeamEventSender;
use crate::router::{InboxRouter, RouterError};
use crate::settings::{AgentSettings, Identity, SessionPlan};
use crate::shutdown::ShutdownOnRequest;

pub use approver::{NoLead, PlanGate, TeammateApprover};
pub use in_process::{TeammateEnd, TeammateHandle, spawn_in_process};

use idle::{AnswerStreak, LastRun, OwnEntry, STATE_RETRY_FOR, fire_team_hooks};
use presence::{Keeper, enter, keep_presence};
use wake::{messages_wait, wait_for_input, wake_input};

/// Everything a teammate needs. Start from [`TeammateSpec::new`] and override fields.
pub struct TeammateSpec {
    /// Builder settings: provider, cwd, mode, trust, sandbox, max turns. The loop sets
    /// the identity, transcript, approver, plan approver and its hooks (added after any
    /// given here) from the binding.
    pub settings: AgentSettings,
    /// Team, own name, lead's name and the router of its inbox (the router must not be
    /// running yet: the loop runs it).
    pub binding: TeamBinding,
    /// The first run's input; empty: go idle at once and wait for messages (a restarted
    /// `roo-worker` without `--prompt`).
    pub prompt: String,
    /// More tools (the team tools), appended to `settings.tools.extra`.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Start in plan mode; nothing may be written until the lead approves a plan.
    pub plan_mode_required: bool,
    /// The permission mode once the lead approved the plan (the lead's mode).
    pub mode_after_plan: PermissionMode,
    /// The roster entry to join with (agent type, model, colour, backend, worktree,
    /// pane); its name is the binding's, its pid is set by the loop.
    pub member: Member,
    /// Busy/idle/dead changes for the lead's UI.
    pub events: Option<TeamEventSender>,
    /// The agent's events (a `roo-worker` renders them on its terminal).
    pub output: EventSink,
    /// How long an idle teammate waits for a new lead once its lead's process is gone,
    /// before it stops, and how long a question waits while no lead process runs,
    /// before it is denied (`None`: it never stops, the question waits until answered;
    /// an in-process teammate ends with its lead anyway).
    pub orphan_timeout: Option<std::time::Duration>,
}

impl TeammateSpec {
    /// A teammate of `binding` that starts with `prompt`, with `settings` for the rest.
    pub fn new(settings: AgentSettings, binding: TeamBinding, prompt: String) -> TeammateSpec {
        let member = Member::new(binding.me.clone(), binding.team.name());
        TeammateSpec {
            settings,
            binding,
            prompt,
            tools: Vec::new(),
            plan_mode_required: false,
            mode_after_plan: PermissionMode::Default,
            member,
            events: None,
            output: EventSink::discard(),
            orphan_timeout: None,
        }
    }
}

impl TeammateSpec {
    /// A teammate `me` of `team` working for `lead`, with a fresh router of its inbox
    /// (build the team tools from `TeamSlot::bound(spec.binding.clone())`).
    pub fn for_member(
        settings: AgentSettings,
        team: Team,
        me: Name,
        lead: Name,
        prompt: String,
    ) -> TeammateSpec {
        let router = InboxRouter::new(team.mailbox(), me.clone());
        let binding = TeamBinding {
            team,
            me,
            lead,
            router,
            presence: None,
            lead_key: None,
        };
        TeammateSpec::new(settings, binding, prompt)
    }
}

impl std::fmt::Debug for TeammateSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeammateSpec")
            .field("binding", &self.binding)
            .field("plan_mode_required", &self.plan_mode_required)
            .finish_non_exhaustive()
    }
}

/// How a teammate loop ended (normally).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TeammateExit {
    /// The lead asked it to shut down and the request was approved (`shutdown_response`):
    /// by its model during a run, or by the loop when it was idle or its run ended
    /// without an answer. (A turn hook given in `settings.hooks` that stops a run ends
    /// the loop the same way.)
    ShutDown,
    /// Its owner cancelled it (a signal to `roo-worker`, the lead exiting).
    Cancelled,
    /// Its lead's process went away and no lead adopted the team within its orphan
    /// timeout, while it was idle (the reason says so).
    LeadGone(String),
    /// On another host than its lead, the lead's presence was gone for
    /// [`lead_watch::LEAD_GONE_WINDOW`], busy or idle: its run was stopped, its tasks
    /// released and its entry marked stopped (the reason says so). Nothing is left to
    /// inspect or answer: `roo-worker` exits 0, so its tmux session there ends with it.
    LeftLeadGone(String),
    /// It was declared dead while cut off from the store (PostgreSQL) and could not join
    /// again: another process is that member now (the reason says so), so it stopped so
    /// that two processes never act as one member; or it was removed from the roster
    /// while it ran, and stopped rather than add itself back.
    Displaced(String),
}

/// Why a teammate loop failed.
#[derive(Debug, thiserror::Error)]
pub enum TeammateError {
    #[error("failed to join team {team} as {name}: {source}")]
    Join {
        team: Name,
        name: Name,
        source: roo_store::Error,
    },
    #[error("failed to build teammate {name}: {source}")]
    Build { name: Name, source: BuildError },
    #[error("teammate {name} lost its inbox: {source}")]
    Router { name: Name, source: RouterError },
    #[error("teammate {name}: {what}")]
    Task { name: Name, what: String },
    /// Its idle state could not be recorded (a full disk, a broken store): it stops
    /// rather than stay "busy" in the roster for ever, so the lead sees it gone.
    #[error(
        "teammate {name} could not record that it is idle for {} s ({error}); it stops so the lead sees it gone",
        STATE_RETRY_FOR.as_secs()
    )]
    State { name: Name, error: String },
}

/// Joins the team with this process's pid, holds its presence ([`enter`]) and runs the
/// teammate until the lead shuts it down or `cancel` fires. See the module
/// documentation.
pub async fn run(
    mut spec: TeammateSpec,
    cancel: CancellationToken,
) -> Result<TeammateExit, TeammateError> {
    let (entry, presence) = enter(&mut spec, std::process::id()).await?;
    run_joined(spec, entry, presence, cancel).await
}

/// Whether the teammate's loop last recorded itself busy, and the lock its state writes
/// take (the presence keeper's re-join writes the state too).
type Activity = Arc<tokio::sync::Mutex<bool>>;

/// The loop of a teammate that has joined as `entry` and holds `presence`, which is kept
/// ([`keep_presence`], PostgreSQL) while it runs.
pub(crate) async fn run_joined(
    spec: TeammateSpec,
    entry: Member,
    presence: Presence,
    cancel: CancellationToken,
) -> Result<TeammateExit, TeammateError> {
    let displaced = Arc::new(std::sync::Mutex::new(None));
    // Joined: busy.
    let activity: Activity = Arc::new(tokio::sync::Mutex::new(true));
    // Stopped when the loop ends — after the step it is in, so a re-join under way
    // completes or is not begun — and aborted if the loop unwinds; its presence is
    // released as it ends.
    let stop = CancellationToken::new();
    let fence = Arc::new(fence::TurnFence::default());
    let keeper = presence.epoch().is_some().then(|| {
        tokio_util::task::AbortOnDropHandle::new(tokio::spawn(keep_presence(Keeper {
            presence: Arc::new(presence),
            entry,
            lead: spec.binding.lead.clone(),
            output: spec.output.clone(),
            activity: activity.clone(),
            displaced: displaced.clone(),
            cancel: cancel.clone(),
            stop: stop.clone(),
            fence: fence.clone(),
        })))
    });
    // A teammate on another host than its lead stops once the lead's presence is gone
    // ([`lead_watch::lead_presence_gone`]): its loop is cancelled as a signal would
    // cancel it (the run in flight and its command stopped), then it releases its tasks
    // and records why.
    let loop_cancel = cancel.child_token();
    let reaped = Arc::new(std::sync::Mutex::new(None::<String>));
    let reaper = reap_window(&spec).map(|window| {
        let (team, host) = (spec.binding.team.clone(), spec.member.host.clone());
        let (me, output) = (spec.binding.me.clone(), spec.output.clone());
        let (loop_cancel, reaped) = (loop_cancel.clone(), reaped.clone());
        tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            let why = lead_watch::lead_presence_gone(&team, host, window).await;
            tracing::warn!(member = %me, "{why}; stopping");
            output.emit(AgentEvent::Notice {
                text: format!("{why}; stopping its work and leaving the team"),
            });
            *reaped
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
            loop_cancel.cancel();
        }))
    });
    let (team, me) = (spec.binding.team.clone(), spec.binding.me.clone());
    let exit = run_loop(spec, activity, fence, loop_cancel).await;
    drop(reaper);
    stop.cancel();
    if let Some(keeper) = keeper {
        let _ = keeper.await;
    }
    let displaced = displaced
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let reaped = reaped
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    match (exit, displaced, reaped) {
        (Ok(TeammateExit::Cancelled), Some(why), _) => Ok(TeammateExit::Displaced(why)),
        (Ok(TeammateExit::Cancelled), None, Some(why)) if !cancel.is_cancelled() => {
            Ok(leave_lead_gone(team, me, why).await)
        }
        (exit, _, _) => exit,
    }
}

/// How long a teammate waits, its lead's presence gone, before it stops: on another host
/// than its lead (its entry names a host) with an orphan timeout, the shorter of that
/// timeout and [`lead_watch::LEAD_GONE_WINDOW`]. A teammate on the lead's host (a pane,
/// in-process) has none: it judges its lead by the lead's pid, as before.
fn reap_window(spec: &TeammateSpec) -> Option<std::time::Duration> {
    spec.member.host.as_ref()?;
    spec.orphan_timeout
        .map(|orphan| orphan.min(lead_watch::LEAD_GONE_WINDOW))
}

/// Ends a teammate whose lead is gone (`why`) once its loop stopped: its unfinished tasks
/// released with a note saying so and its entry marked stopped ([`Team::record_stop`]).
async fn leave_lead_gone(team: Team, me: Name, why: String) -> TeammateExit {
    let reason = format!("its lead is gone ({why})");
    let who = me.clone();
    match tokio::task::spawn_blocking(move || team.record_stop(&who, &reason)).await {
        Ok(Ok(death)) => {
            let ids: Vec<String> = death
                .released
                .iter()
                .map(|r| format!("#{}", r.task.id))
                .collect();
            tracing::info!(member = %me, released = ?ids, "left the team: its lead is gone");
            if ids.is_empty() {
                TeammateExit::LeftLeadGone(why)
            } else {
                TeammateExit::LeftLeadGone(format!("{why}; released task(s) {}", ids.join(", ")))
            }
        }
        Ok(Err(e)) => {
            tracing::warn!(member = %me, error = %e, "failed to record that it stopped");
            TeammateExit::LeftLeadGone(format!("{why}; could not release its tasks: {e}"))
        }
        Err(e) => TeammateExit::LeftLeadGone(format!("{why}; could not release its tasks: {e}")),
    }
}

/// The loop itself (see the module documentation).
async fn run_loop(
    spec: TeammateSpec,
    activity: Activity,
    fence: Arc<fence::TurnFence>,
    cancel: CancellationToken,
) -> Result<TeammateExit, TeammateError> {
    let TeammateSpec {
        mut settings,
        binding,
        prompt,
        tools,
        plan_mode_required,
        mode_after_plan,
        member: _,
        events,
        output,
        orphan_timeout,
    } = spec;
    // Its spend counts in the team (and its task), under the caps its lead wrote there.
    settings.budget = Some(crate::budget::BudgetPlan {
        session: Default::default(),
        slot: crate::binding::TeamSlot::bound(binding.clone()),
        lead: false,
    });
    let TeamBinding {
        team,
        me,
        lead,
        router,
        presence: _,
        lead_key: _,
    } = binding;
    let mailbox = team.mailbox();
    pin_lead_key(&router, &team).await;
    settings.identity = Identity::teammate(me.clone(), team.name().clone(), lead.clone());
    settings.session = SessionPlan::member(&settings.roo_home, team.name(), &me);
    settings.tools.extra.extend(tools);
    let no_lead = NoLead {
        notices: output.clone(),
        timeout: orphan_timeout,
    };
    let (gate, shutdown) = wire_to_lead(
        &mut settings,
        &router,
        &mailbox,
        &lead,
        (plan_mode_required, mode_after_plan),
        no_lead,
    );

    let member = OwnEntry {
        team: team.clone(),
        me: me.clone(),
        events,
        answers: std::sync::Mutex::new(AnswerStreak::default()),
        activity,
    };
    let mut built = build_teammate(settings, &member, (&gate, &shutdown), &output).await?;

    // The router runs beside the agent: permission and plan answers arrive while the
    // loop is inside a tool call, and an idle teammate waits on it.
    let router_cancel = cancel.child_token();
    let _stop_router = router_cancel.clone().drop_guard();
    let mut router_task: JoinHandle<Result<(), RouterError>> = tokio::spawn({
        let router = router.clone();
        async move { router.run(router_cancel).await }
    });

    let mut input = Some(prompt).filter(|p| !p.trim().is_empty());
    let mut last: Option<LastRun> = None;
    let mut before: Vec<Task> = member.owned_tasks().await;
    // When the last run began: tasks reclaimed at a death since then were its.
    let mut run_start = Timestamp::now();
    // Restarted without a prompt while messages wait: take them up without going idle.
    let mut skip_idle = input.is_none() && messages_wait(&router, &me).await;
    loop {
        if let Some(mut text) = input.take() {
            member.set_active(true).await;
            // Its own token, a child of the loop's: cancelled alone when the teammate
            // learns it was declared dead ([`fence`]).
            let turn = cancel.child_token();
            let since = std::mem::replace(&mut run_start, Timestamp::now());
            if let Some(reason) = fence.begin(turn.clone()) {
                let told =
                    fence::notice_for_model(&me, &reason, &released(&member, &before, since).await);
                text = format!("{told}\n\n{text}");
            }
            before = member.owned_tasks().await;
            let (outcome, answer) = run_once(&mut built.agent, &text, &output, turn).await;
            let death = fence.end();
            tracing::info!(member = %me, outcome = %outcome.describe(), "run ended");
            if cancel.is_cancelled() {
                member.set_active(false).await;
                return Ok(TeammateExit::Cancelled);
            }
            // Declared dead during the run: it was stopped; the model is told at once, in
            // a run of its own, and its answer is not a result of the released work.
            if let Some(reason) = death {
                tracing::warn!(member = %me, %reason, "declared dead during its run; telling its model");
                let released = released(&member, &before, run_start).await;
                input = Some(fence::notice_for_model(&me, &reason, &released));
                continue;
            }
            // Stopped: the model approved the lead's shutdown request (or another hook
            // stopped the run). A request the model left unanswered is approved now.
            if matches!(outcome, RunOutcome::Stopped { .. }) || shutdown.after_run().await {
                return Ok(member.shut_down().await);
            }
            last = Some(LastRun { outcome, answer });
        }
        if !std::mem::take(&mut skip_idle) {
            let completed = member
                .go_idle(last.as_ref(), &before)
                .await
                .map_err(|error| TeammateError::State {
                    name: me.clone(),
                    error,
                })?;
            fire_team_hooks(&built.command_hooks, &me, &completed, &cancel).await;
        }
        let orphan = orphan_timeout.map(|timeout| (timeout, &output));
        let wake = wait_for_input(
            &router,
            &mailbox,
            &me,
            &lead,
            &cancel,
            &mut router_task,
            orphan,
        )
        .await?;
        match wake_input(wake, &member, &output).await {
            Ok(text) => input = Some(text),
            Err(exit) => return Ok(exit),
        }
    }
}

/// The tasks released at `member`'s death: those of `before` it owns no more, and those
/// reclaimed from it at a death since `since` (claimed during the run, so not in
/// `before`; the store notes "reclaimed from <me>: <me> died: …").
async fn released(member: &OwnEntry, before: &[Task], since: Timestamp) -> Vec<Task> {
    let now = member.owned_tasks().await;
    let tasks = member.team.tasks();
    let all = tokio::task::spawn_blocking(move || tasks.list(&roo_store::TaskFilter::default()))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let died = format!("reclaimed from {me}: {me} died", me = member.me);
    let mut released: Vec<Task> = before
        .iter()
        .filter(|t| !now.iter().any(|n| n.id == t.id))
        .cloned()
        .collect();
    for task in all {
        let at_death = task
            .notes
            .iter()
            .any(|n| n.at >= since && n.text.starts_with(&died));
        if at_death && !released.iter().any(|t| t.id == task.id) {
            released.push(task);
        }
    }
    released
}

/// Builds the teammate's agent and binds `hooks` (its plan gate and shutdown hook) to
/// it; its notices go to `output`. A failed build leaves it not busy in the roster.
async fn build_teammate(
    settings: AgentSettings,
    member: &OwnEntry,
    (gate, shutdown): (&PlanGate, &ShutdownOnRequest),
    output: &EventSink,
) -> Result<crate::builder::BuiltAgent, TeammateError> {
    let mut built = match build_agent(settings).await {
        Ok(built) => built,
        Err(source) => {
            // Joined but never working: not busy in the roster.
            member.set_active(false).await;
            return Err(TeammateError::Build {
                name: member.me.clone(),
                source,
            });
        }
    };
    gate.bind(built.agent.policy().clone());
    shutdown.bind(built.agent.tools());
    for text in std::mem::take(&mut built.notices) {
        output.emit(AgentEvent::Notice { text });
    }
    tracing::info!(team = %member.team.name(), member = %member.me, cwd = %built.cwd.display(), resumed = built.agent.messages().len(), "teammate started");
    Ok(built)
}

/// Answers need the lead's signature. The key is pinned now: the spawner's (from the
/// lead's memory or `--lead-key`), else the team config's as it is at the start — later
/// changes to the config are not trusted.
async fn pin_lead_key(router: &InboxRouter, team: &Team) {
    router.require_signed_answers();
    if !router.has_lead_key() {
        let config_team = team.clone();
        if let Ok(Ok(Some(key))) = tokio::task::spawn_blocking(move || {
            crate::authority::LeadPublicKey::of_team(&config_team)
        })
        .await
        {
            router.pin_lead_key(key);
        }
    }
}

/// Ties a teammate's settings to its lead: its questions go to the lead
/// ([`TeammateApprover`], with `no_lead` when none answers), a plan first where the lead
/// requires one (`plan`: required, and the mode once approved), the lead's and peers'
/// messages delivered between turns, and the lead's shutdown request put before the
/// model. Returns the plan gate and the shutdown hook, bound to the agent once built.
fn wire_to_lead(
    settings: &mut AgentSettings,
    router: &InboxRouter,
    mailbox: &Mailbox,
    lead: &Name,
    (plan_mode_required, mode_after_plan): (bool, PermissionMode),
    no_lead: NoLead,
) -> (Arc<PlanGate>, Arc<ShutdownOnRequest>) {
    let gate = Arc::new(PlanGate::new(plan_mode_required, mode_after_plan));
    let lead_approver = LeadApprover::new(router.clone(), mailbox.clone(), lead.clone());
    settings.approver = Arc::new(TeammateApprover::new(
        lead_approver,
        router.clone(),
        mailbox.clone(),
        lead.clone(),
        gate.clone(),
        no_lead,
    ));
    settings.plan_approver = PlanApprover::Present;
    if plan_mode_required {
        settings.permission_mode = Some(PermissionMode::Plan);
    }
    // Whether a teammate plans first is the lead's call (`plan_mode_required`, or the
    // plan mode it spawned it in): the plan tools come only with it. (A worker whose
    // mode comes from the config gets them from the builder when that mode is plan.)
    settings.tools.plan_mode = settings.permission_mode == Some(PermissionMode::Plan);
    // The lead's messages are never collapsed into a digest entry (a lead assigning
    // many tasks at once is no flood); a peer's backlog is.
    settings.hooks.push(Arc::new(
        InboxDelivery::new(router.clone()).never_collapse(lead.clone()),
    ));
    let shutdown = Arc::new(ShutdownOnRequest::new(
        router.clone(),
        mailbox.clone(),
        lead.clone(),
    ));
    // Deferred: revealed by the hook when the lead asks (see `ShutdownOnRequest::bind`).
    settings.tools.deferred.push(shutdown.response_tool());
    settings.hooks.push(shutdown.clone());
    settings.hooks.push(gate.clone());
    (gate, shutdown)
}

/// One run, with the agent's events forwarded to `output` (its spend is accounted by its
/// spend gate, [`crate::budget`]).
async fn run_once(
    agent: &mut Agent,
    input: &str,
    output: &EventSink,
    cancel: CancellationToken,
) -> (RunOutcome, String) {
    let (sink, mut events) = EventSink::channel();
    let run = async move {
        let result = agent.run(input, &sink, cancel).await;
        drop(sink);
        result
    };
    let forward = async {
        while let Some(event) = events.recv().await {
            output.emit(event);
        }
    };
    let (result, ()) = tokio::join!(run, forward);
    (result.outcome, result.final_text)
}
