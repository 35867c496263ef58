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
//!    compact `idle_notification` to the lead, unless the [fingerprint](idle_fingerprint)
//!    is the one of its last notification;
//! 3. waits on the router (file notification with a polling fallback) — a
//!    `shutdown_request` from the lead is approved at once and ends the loop (idle, it
//!    has nothing to finish), one from anybody else is acknowledged and ignored; a
//!    conversation message wakes it, except FYI ones ([`wakes_teammate`]: `status_update`,
//!    `idle_notification`), which wait for the next real message;
//! 4. marks itself busy and resumes with its full history as a new run, in which the
//!    delivery hook injects the waiting messages; back to 2.
//!
//! While a run is going, the lead's `shutdown_request` is put before the model, which
//! answers it with the `ShutdownResponse` tool ([`ShutdownOnRequest`]): approved, the run
//! stops (`RunOutcome::Stopped`) and the loop ends; rejected, it keeps working; unanswered
//! when the run ends, it is approved then and the loop ends. Each model request's usage
//! (and cost, at the agent's price) is added to the task the teammate owns ([`usage`]).

pub mod approver;
pub mod in_process;
pub mod lead_watch;
mod usage;

use std::sync::Arc;

use roo_agent::event::{AgentEvent, EventSink, RunOutcome};
use roo_agent::permissions::PermissionMode;
use roo_agent::tool::Tool;
use roo_agent::{Agent, CommandHooks, PlanApprover};
use roo_store::{
    Joined, Mailbox, Member, MemberState, Message, MessageBody, Name, Outgoing, Presence, Task,
    TaskFilter, TaskId, TaskStatus, Team,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::approver::LeadApprover;
use crate::binding::TeamBinding;
use crate::builder::{BuildError, build_agent};
use crate::delivery::InboxDelivery;
use crate::event::{TeamEvent, TeamEventSender, one_line};
use crate::router::{InboxRouter, RouterError};
use crate::settings::{AgentSettings, Identity, SessionPlan};
use crate::shutdown::{ShutdownOnRequest, approve_shutdown};

pub use approver::{NoLead, PlanGate, TeammateApprover};
pub use in_process::{TeammateEnd, TeammateHandle, spawn_in_process};
use usage::UsageMeter;

/// Added to the wake prompt when the teammate's next final answer will not be forwarded
/// unless its run changes the task list ([`MAX_ANSWER_ONLY_NOTICES`]).
pub const ANSWER_WITHHELD: &str = "Your last answers changed nothing on the task list, so your \
     next final answer will not reach the lead unless this run changes it (answers must not go \
     back and forth without end). Send what the lead must read with SendMessage.";

/// The input of a run that an inbox message started; the messages themselves follow as
/// a system reminder injected by the delivery hook (and are marked delivered only then).
pub const WAKE_PROMPT: &str = "New messages from your team arrived while you were idle; they follow. \
     Act on them if they concern your work, then end your turn.";

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

/// How long a teammate retries recording its idle state before it stops.
pub const STATE_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// The roster entry the spec's member joins with, as process `pid`.
fn entry(spec: &TeammateSpec, pid: u32) -> Member {
    let mut member = spec.member.clone();
    member.name = spec.binding.me.clone();
    member.pid = Some(pid);
    member.plan_mode_required |= spec.plan_mode_required;
    member
}

/// Joins the team as the spec's member with `pid`, in one locked write (refused if a
/// live process already is that member). A roster entry that requires a plan keeps
/// requiring one: the caller adopts `joined.member.plan_mode_required`.
pub async fn join(spec: &TeammateSpec, pid: u32) -> Result<Joined, TeammateError> {
    let member = entry(spec, pid);
    let team = spec.binding.team.clone();
    let (team_name, name) = (team.name().clone(), member.name.clone());
    let joined = tokio::task::spawn_blocking(move || team.join(member))
        .await
        .map_err(|e| TeammateError::Task {
            name: name.clone(),
            what: e.to_string(),
        })?;
    joined.map_err(|source| TeammateError::Join {
        team: team_name,
        name,
        source,
    })
}

/// Joins the team as the spec's member with `pid` ([`join`]) and holds its presence
/// through the binding's team handle ([`Team::hold_presence`]): on PostgreSQL, from
/// then on every write of the teammate — its router's, its tools', its approver's, all
/// clones of that handle — is fenced as this member. A presence refused leaves the
/// member joined but idle, so the lead does not wait for it.
pub async fn enter(spec: &mut TeammateSpec, pid: u32) -> Result<(Member, Presence), TeammateError> {
    let joined = join(spec, pid).await?;
    spec.plan_mode_required |= joined.member.plan_mode_required;
    let team = spec.binding.team.clone();
    let me = spec.binding.me.clone();
    let held = {
        let (team, me) = (team.clone(), me.clone());
        tokio::task::spawn_blocking(move || team.hold_presence(&me)).await
    };
    let held = match held {
        Ok(held) => held,
        Err(e) => {
            return Err(TeammateError::Task {
                name: me,
                what: e.to_string(),
            });
        }
    };
    match held {
        Ok(presence) => Ok((entry(spec, pid), presence)),
        Err(source) => {
            let (store, who) = (team.clone(), me.clone());
            let _ =
                tokio::task::spawn_blocking(move || store.set_active(who.as_str(), false)).await;
            Err(TeammateError::Join {
                team: team.name().clone(),
                name: me,
                source,
            })
        }
    }
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

/// What [`keep_presence`] works with.
struct Keeper {
    presence: Arc<Presence>,
    /// The roster entry it joins again with.
    entry: Member,
    lead: Name,
    output: EventSink,
    activity: Activity,
    /// Why it stopped the teammate, if it did.
    displaced: Arc<std::sync::Mutex<Option<String>>>,
    /// The loop's token: cancelled to stop the teammate when displaced.
    cancel: CancellationToken,
    /// Cancelled when the loop has ended.
    stop: CancellationToken,
}

/// How often a teammate looks at its presence ([`keep_presence`]).
pub const PRESENCE_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// Keeps a teammate's presence (PostgreSQL) while its loop runs. Every
/// [`PRESENCE_CHECK`] it reads whether the presence still vouches for this process
/// ([`Presence::check`]). Once lost — the member was declared dead while its link was
/// cut, its writes are refused — it joins again with `entry` and holds a new presence
/// through the same handle, which moves every clone (router, tools, approver) to the new
/// epoch, and tells the lead. If it cannot join again because another process is that
/// member now (the lead respawned it), or must not (it was removed from the roster, or
/// shut down), it stops the teammate: `displaced` says why.
async fn keep_presence(keeper: Keeper) {
    let Keeper {
        mut presence,
        entry,
        lead,
        output,
        activity,
        displaced,
        cancel,
        stop,
    } = keeper;
    let team = presence.team().clone();
    let me = presence.member().clone();
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = stop.cancelled() => return,
            () = tokio::time::sleep(PRESENCE_CHECK) => {}
        }
        let checking = presence.clone();
        let state = tokio::task::spawn_blocking(move || checking.check()).await;
        let reason = match state {
            Ok(Ok(roo_store::PresenceState::Lost(reason))) => reason,
            // Held, being restored, or unreadable now (a cut link): look again later.
            _ => continue,
        };
        tracing::warn!(member = %me, %reason, "presence lost; joining again");
        output.emit(AgentEvent::Notice {
            text: format!("{me} was cut off from the team: {reason}; joining again"),
        });
        // Joining marks the entry busy: what the loop last recorded is put back, under
        // the lock the loop's own state writes (and its shutdown record) take.
        let busy = activity.lock().await;
        // The loop ended meanwhile (it recorded its end under that lock): nothing to keep.
        if stop.is_cancelled() || cancel.is_cancelled() {
            return;
        }
        let again = {
            let (team, me, entry, busy) = (team.clone(), me.clone(), entry.clone(), *busy);
            tokio::task::spawn_blocking(move || {
                // Removed from the roster, or shut down at the lead's request: what the
                // lead (or the member itself) decided is not undone by joining again —
                // checked in the join's own locked write.
                let config = team.config()?;
                match config.member(me.as_str()) {
                    None => return Ok(Err(format!("{me} was removed from the team"))),
                    Some(m) if m.shut_down() => {
                        return Ok(Err(format!("{me} shut down at the lead's request")));
                    }
                    Some(_) => {}
                }
                team.join_again(entry)?;
                let held = team.hold_presence(&me)?;
                if !busy {
                    team.set_active(me.as_str(), false)?;
                }
                Ok::<_, roo_store::Error>(Ok(held))
            })
            .await
        };
        drop(busy);
        match again {
            Ok(Ok(Err(why))) => {
                tracing::warn!(member = %me, "{why}; stopping");
                *displaced
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
                cancel.cancel();
                return;
            }
            Ok(Ok(Ok(held))) => {
                presence = Arc::new(held);
                let text = format!(
                    "{me} lost its connection to the team store and was declared dead \
                     meanwhile ({reason}); it has joined again and goes on. The tasks released \
                     at its death stay released: assign them to {me} again if it should finish \
                     them."
                );
                let (team, me2, lead) = (team.clone(), me.clone(), lead.clone());
                let _ = tokio::task::spawn_blocking(move || {
                    team.mailbox()
                        .send(&me2, lead.as_str(), Outgoing::text(text, "joined again"))
                })
                .await;
                output.emit(AgentEvent::Notice {
                    text: format!("{me} joined the team again"),
                });
            }
            Ok(Err(
                e @ (roo_store::Error::NotPermitted { .. } | roo_store::Error::MemberExists { .. }),
            )) => {
                let why = format!("{me} was declared dead ({reason}) and cannot join again: {e}");
                tracing::error!(member = %me, "{why}");
                *displaced
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
                cancel.cancel();
                return;
            }
            // The store is unreachable again: try on the next look.
            Ok(Err(e)) => tracing::warn!(member = %me, error = %e, "joining again failed"),
            Err(_) => {}
        }
    }
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
        })))
    });
    let exit = run_loop(spec, activity, cancel).await;
    stop.cancel();
    if let Some(keeper) = keeper {
        let _ = keeper.await;
    }
    let displaced = displaced
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    match (exit, displaced) {
        (Ok(TeammateExit::Cancelled), Some(why)) => Ok(TeammateExit::Displaced(why)),
        (exit, _) => exit,
    }
}

/// The loop itself (see the module documentation).
async fn run_loop(
    spec: TeammateSpec,
    activity: Activity,
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

    let mut meter = UsageMeter::new(
        team.tasks(),
        me.clone(),
        built.llm.prices.clone(),
        built.agent.model().to_string(),
    );
    let mut input = Some(prompt).filter(|p| !p.trim().is_empty());
    let mut last: Option<LastRun> = None;
    let mut before: Vec<Task> = member.owned_tasks().await;
    // Restarted without a prompt while messages wait: take them up without going idle.
    let mut skip_idle = input.is_none() && messages_wait(&router, &me).await;
    loop {
        if let Some(text) = input.take() {
            member.set_active(true).await;
            before = member.owned_tasks().await;
            meter.new_run();
            let (outcome, answer) =
                run_once(&mut built.agent, &text, &output, &mut meter, cancel.clone()).await;
            tracing::info!(member = %me, outcome = %outcome.describe(), "run ended");
            if cancel.is_cancelled() {
                member.set_active(false).await;
                return Ok(TeammateExit::Cancelled);
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

/// Whether messages that wake a teammate wait in its inbox now (read first).
async fn messages_wait(router: &InboxRouter, me: &Name) -> bool {
    if let Err(e) = router.poll().await {
        tracing::warn!(member = %me, error = %e, "failed to read the inbox");
    }
    router.has_input_where(wakes_teammate)
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

/// What an idle teammate does on `wake`: the next run's input, or how its loop ends.
async fn wake_input(
    wake: Wake,
    member: &OwnEntry,
    output: &EventSink,
) -> Result<String, TeammateExit> {
    match wake {
        Wake::Conversation => {
            // The streak of answer-only notifications is spent: the next answer reaches
            // the lead only if the run changes the task list. The model must know, or it
            // would take that answer for a report.
            let withheld = member.answers.lock().is_ok_and(|s| s.next_withheld());
            Ok(if withheld {
                format!("{WAKE_PROMPT}\n\n{ANSWER_WITHHELD}")
            } else {
                WAKE_PROMPT.to_string()
            })
        }
        Wake::ShutDown => Err(member.shut_down().await),
        Wake::Cancelled => Err(TeammateExit::Cancelled),
        Wake::LeadGone(why) => {
            tracing::warn!(member = %member.me, "{why}; stopping");
            output.emit(AgentEvent::Notice {
                text: format!("{why}; stopping (restart it with roo-worker once a lead runs)"),
            });
            Err(TeammateExit::LeadGone(why))
        }
    }
}

/// One run, with the agent's events forwarded to `output` and its usage metered.
async fn run_once(
    agent: &mut Agent,
    input: &str,
    output: &EventSink,
    meter: &mut UsageMeter,
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
            let total = match &event {
                AgentEvent::Usage { total, .. } => Some(*total),
                _ => None,
            };
            output.emit(event);
            if let Some(total) = total {
                meter.record(total).await;
            }
        }
    };
    let (result, ()) = tokio::join!(run, forward);
    (result.outcome, result.final_text)
}

/// How a teammate's last run ended and what its model answered last, for the idle
/// notification: the answer is the teammate's report, so reporting needs no SendMessage.
pub struct LastRun {
    pub outcome: RunOutcome,
    pub answer: String,
}

/// At most this many characters of a run's final answer go into the idle notification
/// (the rest is cut with a mark): a report, not a transcript.
pub const IDLE_ANSWER_CHARS: usize = 2_000;

enum Wake {
    Conversation,
    ShutDown,
    Cancelled,
    LeadGone(String),
}

/// Whether a message wakes an idle teammate. `status_update` (progress news) and
/// `idle_notification` are FYI: they wait for the next run a real message (text, a task
/// assignment, a request) starts, and are delivered with it; a busy teammate gets them
/// between tool calls like any message.
pub fn wakes_teammate(message: &Message) -> bool {
    !matches!(
        message.body,
        MessageBody::StatusUpdate | MessageBody::IdleNotification { .. }
    )
}

/// Waits while idle until a message that [wakes](wakes_teammate) it arrives, the lead
/// asks for a shutdown (approved here: idle, it has nothing to finish), or `cancel`.
/// Requests not from the lead, and requests a teammate does not answer (permission and
/// plan requests), are acknowledged and ignored.
async fn wait_for_input(
    router: &InboxRouter,
    mailbox: &Mailbox,
    me: &Name,
    lead: &Name,
    cancel: &CancellationToken,
    router_task: &mut JoinHandle<Result<(), RouterError>>,
    orphan: Option<(std::time::Duration, &EventSink)>,
) -> Result<Wake, TeammateError> {
    // While idle: a lead whose process is gone for the whole orphan timeout ends the
    // wait; its going and a new lead's adoption are told on the way.
    let orphaned = async {
        let Some((timeout, output)) = orphan else {
            return std::future::pending().await;
        };
        let team = mailbox.team();
        lead_watch::orphaned(
            team,
            timeout,
            |pid| {
                let text = format!(
                    "the lead's process {pid} is gone; waiting up to {}s for a lead to adopt team {} (roo-lead --team {})",
                    timeout.as_secs(),
                    team.name(),
                    team.name()
                );
                tracing::warn!(member = %me, "{text}");
                output.emit(AgentEvent::Notice { text });
            },
            |pid| {
                let text = format!("adopted by the lead's process {pid}");
                tracing::info!(member = %me, "{text}");
                output.emit(AgentEvent::Notice { text });
            },
        )
        .await
    };
    tokio::pin!(orphaned);
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Ok(Wake::Cancelled),
            why = &mut orphaned => return Ok(Wake::LeadGone(why)),
            ended = &mut *router_task => {
                let source = match ended {
                    Ok(Ok(())) => RouterError::Task("the inbox task stopped".to_string()),
                    Ok(Err(e)) => e,
                    Err(e) => RouterError::Task(e.to_string()),
                };
                return Err(TeammateError::Router { name: me.clone(), source });
            }
            _ = router.input_where(wakes_teammate) => {}
        }
        let requests = router.take_requests();
        let mut shut_down = false;
        for request in &requests {
            match &request.body {
                MessageBody::ShutdownRequest { .. } if &request.from == lead => {
                    approve_shutdown(mailbox, me, request, "idle; shutting down").await;
                    shut_down = true;
                }
                _ => {
                    tracing::warn!(member = %me, from = %request.from, kind = request.body.type_name(), "ignored a request a teammate does not answer")
                }
            }
        }
        let ids = requests.iter().map(|m| m.id.clone()).collect();
        if let Err(e) = router.handled(ids).await {
            tracing::warn!(member = %me, error = %e, "failed to acknowledge requests");
        }
        if shut_down {
            return Ok(Wake::ShutDown);
        }
        if router.has_input_where(wakes_teammate) {
            return Ok(Wake::Conversation);
        }
    }
}

/// The teammate's own roster entry and tasks.
struct OwnEntry {
    team: Team,
    me: Name,
    events: Option<TeamEventSender>,
    /// Notifications in a row that carried only a new answer (see [`AnswerStreak`]).
    answers: std::sync::Mutex<AnswerStreak>,
    /// What it last recorded (busy or idle), held while it records.
    activity: Activity,
}

/// At most this many idle notifications in a row may carry only a new final answer (the
/// tasks and the way the run ended unchanged): a question of the lead and a follow-up
/// get their answers, but a lead that thanks every report and a teammate that answers
/// every thanks stop waking each other after that. A change of tasks or outcome starts
/// the count again.
pub const MAX_ANSWER_ONLY_NOTICES: u32 = 2;

/// The fingerprint without the answer at the last idle, the fingerprint used then, and
/// how many idles in a row differed from the one before only by their answer.
#[derive(Default)]
struct AnswerStreak {
    base: Option<String>,
    used: Option<String>,
    count: u32,
}

impl AnswerStreak {
    /// Whether the next idle's answer goes unforwarded if the run changes no task.
    fn next_withheld(&self) -> bool {
        self.used.is_some() && self.count >= MAX_ANSWER_ONLY_NOTICES
    }

    /// The fingerprint of this idle: `full` (with the answer) unless the streak of
    /// answer-only changes is spent, then the one used last, which the store finds
    /// unchanged and so sends nothing.
    fn fingerprint(&mut self, base: String, full: String) -> String {
        if self.base.as_deref() == Some(base.as_str()) {
            // The same answer as the notification before: the store sends nothing, so
            // it is no answer-only notification and does not use up the streak.
            if self.used.as_deref() == Some(full.as_str()) {
                return full;
            }
            self.count += 1;
        } else {
            self.base = Some(base);
            self.count = 0;
        }
        let used = match &self.used {
            Some(used) if self.count > MAX_ANSWER_ONLY_NOTICES => used.clone(),
            _ => full,
        };
        self.used = Some(used.clone());
        used
    }
}

impl OwnEntry {
    async fn set_active(&self, active: bool) {
        let mut recorded = self.activity.lock().await;
        *recorded = active;
        let (team, me) = (self.team.clone(), self.me.clone());
        match tokio::task::spawn_blocking(move || team.set_active(me.as_str(), active)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(member = %self.me, error = %e, "failed to record the state")
            }
            Err(e) => tracing::warn!(member = %self.me, error = %e, "failed to record the state"),
        }
        self.state(if active {
            MemberState::Busy
        } else {
            MemberState::Idle
        });
    }

    /// Records that this member stops at its lead's request (`Team::record_shut_down`:
    /// the lead then says it shut down, not that it died) and returns the exit.
    async fn shut_down(&self) -> TeammateExit {
        // After a re-join under way, which would otherwise clear the record.
        let _recorded = self.activity.lock().await;
        let (team, me) = (self.team.clone(), self.me.clone());
        match tokio::task::spawn_blocking(move || team.record_shut_down(&me)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(member = %self.me, error = %e, "failed to record the shutdown")
            }
            Err(e) => {
                tracing::warn!(member = %self.me, error = %e, "failed to record the shutdown")
            }
        }
        TeammateExit::ShutDown
    }

    fn state(&self, state: MemberState) {
        if let Some(events) = &self.events {
            events.send(TeamEvent::MemberState {
                name: self.me.clone(),
                state,
            });
        }
    }

    /// The tasks this member owns (any status), in id order; empty if unreadable.
    async fn owned_tasks(&self) -> Vec<Task> {
        let (tasks, me) = (self.team.tasks(), self.me.clone());
        let filter = TaskFilter {
            owner: Some(me),
            ..TaskFilter::default()
        };
        match tokio::task::spawn_blocking(move || tasks.list(&filter)).await {
            Ok(Ok(tasks)) => tasks,
            Ok(Err(e)) => {
                tracing::warn!(member = %self.me, error = %e, "failed to read the task list");
                Vec::new()
            }
            Err(_) => Vec::new(),
        }
    }

    /// `is_active: false` and, if something changed since the last one, one
    /// `idle_notification` to the lead. Failures are logged: an idle teammate that
    /// could not tell the lead still waits for messages.
    async fn go_idle(&self, last: Option<&LastRun>, before: &[Task]) -> Result<Vec<Task>, String> {
        let now = self.owned_tasks().await;
        let (base, full) = (
            idle_fingerprint(last, &now, false),
            idle_fingerprint(last, &now, true),
        );
        let fingerprint = match self.answers.lock() {
            Ok(mut streak) => streak.fingerprint(base, full),
            Err(_) => full,
        };
        let completed = newly_completed(before, &now);
        let text = idle_text(&self.me, last, &now);
        let notice = Outgoing::new(
            MessageBody::IdleNotification {
                completed_task_id: completed.map(|id| id.to_string()),
            },
            text,
        )
        .with_summary(match completed {
            Some(id) => format!("idle, completed task {id}"),
            None => "idle".to_string(),
        });
        // Retried for a while (a full disk may clear); a state that cannot be recorded
        // at all ends the teammate instead of leaving it "busy" for ever.
        let deadline = tokio::time::Instant::now() + STATE_RETRY_FOR;
        loop {
            // Held for one attempt, not across the retries: a member declared dead
            // meanwhile has its writes refused until the presence keeper joins it again,
            // which takes this lock.
            let mut recorded = self.activity.lock().await;
            *recorded = false;
            let (team, me, fingerprint, notice) = (
                self.team.clone(),
                self.me.clone(),
                fingerprint.clone(),
                notice.clone(),
            );
            let error = match tokio::task::spawn_blocking(move || {
                team.become_idle(&me, &fingerprint, notice)
            })
            .await
            {
                Ok(Ok(idle)) => {
                    tracing::info!(member = %self.me, notified = idle.sent.is_some(), "idle");
                    break;
                }
                Ok(Err(e)) => e.to_string(),
                Err(e) => e.to_string(),
            };
            drop(recorded);
            tracing::warn!(member = %self.me, %error, "failed to go idle");
            if tokio::time::Instant::now() >= deadline {
                return Err(error);
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        self.state(MemberState::Idle);
        Ok(now
            .into_iter()
            .filter(|t| t.status == TaskStatus::Completed)
            .filter(|t| {
                !before
                    .iter()
                    .any(|b| b.id == t.id && b.status == TaskStatus::Completed)
            })
            .collect())
    }
}

/// The config's `task_completed` hooks for each task the run completed, then its
/// `teammate_idle` hooks. Failures go to the log: nobody watches an idle teammate.
async fn fire_team_hooks(
    hooks: &CommandHooks,
    me: &Name,
    completed: &[Task],
    cancel: &CancellationToken,
) {
    let mut failures = Vec::new();
    for task in completed {
        let id = task.id.to_string();
        failures.extend(
            hooks
                .task_completed(&id, &task.subject, me.as_str(), cancel)
                .await,
        );
    }
    failures.extend(hooks.teammate_idle(me.as_str(), cancel).await);
    for failure in failures {
        tracing::warn!(member = %me, "{failure}");
    }
}

/// What an idle notification's fingerprint covers: how the last run ended (its kind,
/// not its text), the id and status of every task the member owns and, with
/// `with_answer`, the run's final answer (the report). Claiming, completing or releasing
/// a task, a run ending differently (an error, the turn limit) or a new answer notify
/// the lead again; a run that changes none of them does not. The answer counts for at
/// most [`MAX_ANSWER_ONLY_NOTICES`] notifications in a row that differ only by it (the
/// teammate loop decides), which breaks notification ping-pong (a lead thanking every
/// report, a teammate answering every thanks). FNV-1a 64 over a canonical text, so the value is
/// stable across builds and survives a restart in the team config.
pub fn idle_fingerprint(last: Option<&LastRun>, owned: &[Task], with_answer: bool) -> String {
    let mut canonical = String::from("v2;");
    canonical.push_str(match last.map(|l| &l.outcome) {
        None => "none",
        Some(RunOutcome::Completed) => "completed",
        Some(RunOutcome::MaxTurns { .. }) => "max_turns",
        Some(RunOutcome::Cancelled) => "cancelled",
        Some(RunOutcome::UnknownTools { .. }) => "unknown_tools",
        Some(RunOutcome::MalformedToolCalls { .. }) => "malformed_tool_calls",
        Some(RunOutcome::Error { .. }) => "error",
        Some(RunOutcome::Stopped { .. }) => "stopped",
    });
    for task in owned {
        canonical.push_str(&format!(";{}={}", task.id, task.status.as_str()));
    }
    // A new answer is news for the lead even when the tasks did not change.
    if let Some(answer) = last
        .filter(|_| with_answer)
        .map(|l| l.answer.trim())
        .filter(|a| !a.is_empty())
    {
        canonical.push_str(";answer=");
        canonical.push_str(answer);
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in canonical.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("fnv1a64:{hash:016x}")
}

/// The highest-numbered task that is completed now and was not before the run.
fn newly_completed<'a>(before: &[Task], now: &'a [Task]) -> Option<&'a TaskId> {
    now.iter()
        .filter(|t| t.status == TaskStatus::Completed)
        .filter(|t| {
            !before
                .iter()
                .any(|b| b.id == t.id && b.status == TaskStatus::Completed)
        })
        .max_by_key(|t| t.id.number())
        .map(|t| &t.id)
}

/// The notification's text: one line for the outcome and the tasks, then the run's
/// final answer (cut at [`IDLE_ANSWER_CHARS`]), if it gave one.
fn idle_text(me: &Name, last: Option<&LastRun>, owned: &[Task]) -> String {
    let outcome = match last {
        None => "waiting for messages".to_string(),
        Some(last) => format!("last run {}", one_line(&last.outcome.describe(), 200)),
    };
    let open: Vec<String> = owned
        .iter()
        .filter(|t| t.status != TaskStatus::Completed)
        .map(|t| format!("#{} {}", t.id, t.status.as_str()))
        .collect();
    let tasks = if open.is_empty() {
        "no open tasks".to_string()
    } else {
        format!("open tasks: {}", open.join(", "))
    };
    let head = format!("{me} is idle: {outcome}; {tasks}.");
    match last.map(|l| l.answer.trim()).filter(|a| !a.is_empty()) {
        None => head,
        Some(answer) => {
            let cut = roo_term::clip_with(answer, IDLE_ANSWER_CHARS, " […]");
            format!("{head}\nIts final answer:\n{cut}")
        }
    }
}

#[cfg(test)]
mod answer_streak_tests {
    use super::{AnswerStreak, MAX_ANSWER_ONLY_NOTICES};

    /// What the store does with a fingerprint: sends a notification when it differs from
    /// the one stored, and stores it.
    fn sent(stored: &mut Option<String>, fingerprint: String) -> bool {
        let changed = stored.as_deref() != Some(fingerprint.as_str());
        *stored = Some(fingerprint);
        changed
    }

    /// The doc: "at most two notifications in a row may differ only by their answer". An
    /// idle whose answer repeats the last one sends nothing and must not use up the streak:
    /// the first report, a repeated answer (nothing sent), then two new answers must all
    /// notify (the first report and two answer-only notifications).
    #[test]
    fn a_repeated_answer_that_sends_nothing_does_not_use_up_the_streak() {
        let mut streak = AnswerStreak::default();
        let mut stored = None;
        let base = || "base".to_string();
        let mut notices = 0;
        for answer in ["report", "ok", "ok", "the word is quokka"] {
            if sent(
                &mut stored,
                streak.fingerprint(base(), format!("full:{answer}")),
            ) {
                notices += 1;
            }
        }
        assert_eq!(
            notices,
            1 + MAX_ANSWER_ONLY_NOTICES,
            "a repeated answer that sent nothing counted as an answer-only notification"
        );
    }

    /// And the cap still holds: a fourth new answer in a row is not sent.
    #[test]
    fn the_streak_still_stops_the_ping_pong() {
        let mut streak = AnswerStreak::default();
        let mut stored = None;
        let sends: Vec<bool> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|answer| {
                sent(
                    &mut stored,
                    streak.fingerprint("base".into(), format!("full:{answer}")),
                )
            })
            .collect();
        assert_eq!(sends, [true, true, true, false, false]);
        // A change of tasks starts the count again.
        assert!(sent(
            &mut stored,
            streak.fingerprint("other".into(), "full:f".into())
        ));
    }
}
