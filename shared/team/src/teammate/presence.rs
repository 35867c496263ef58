//! A teammate's membership in the team: the roster entry it joins with, joining (one locked
//! write, refused while a live process is that member), holding its presence, and keeping
//! that presence while its loop runs (PostgreSQL) — joining again after a cut link, or
//! stopping the teammate when another process is that member now. Apart from the loop
//! because it runs beside it and must not depend on what the loop is doing.

use std::sync::Arc;

use roo_agent::event::{AgentEvent, EventSink};
use roo_store::{Joined, Member, Name, Outgoing, Presence};
use tokio_util::sync::CancellationToken;

use super::fence::TurnFence;
use super::{Activity, TeammateError, TeammateSpec};

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
/// through the binding's team handle ([`Team::hold_presence`](roo_store::Team::hold_presence)): on PostgreSQL, from
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

/// What [`keep_presence`] works with.
pub(super) struct Keeper {
    pub(super) presence: Arc<Presence>,
    /// The roster entry it joins again with.
    pub(super) entry: Member,
    pub(super) lead: Name,
    pub(super) output: EventSink,
    pub(super) activity: Activity,
    /// Why it stopped the teammate, if it did.
    pub(super) displaced: Arc<std::sync::Mutex<Option<String>>>,
    /// The loop's token: cancelled to stop the teammate when displaced.
    pub(super) cancel: CancellationToken,
    /// Cancelled when the loop has ended.
    pub(super) stop: CancellationToken,
    /// The run in flight, cancelled when the teammate learns it was declared dead.
    pub(super) fence: Arc<TurnFence>,
}

/// How often a teammate looks at its presence ([`keep_presence`]).
pub const PRESENCE_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// Keeps a teammate's presence (PostgreSQL) while its loop runs. Every
/// [`PRESENCE_CHECK`] it reads whether the presence still vouches for this process
/// ([`Presence::check`]). Once lost — the member was declared dead while its link was
/// cut, its writes are refused — it first stops the run in flight and keeps the death for
/// the model ([`TurnFence::declared_dead`]), then joins again with `entry` and holds a new presence
/// through the same handle, which moves every clone (router, tools, approver) to the new
/// epoch, and tells the lead. If it cannot join again because another process is that
/// member now (the lead respawned it), or must not (it was removed from the roster, or
/// shut down), it stops the teammate: `displaced` says why.
pub(super) async fn keep_presence(keeper: Keeper) {
    let Keeper {
        mut presence,
        entry,
        lead,
        output,
        activity,
        displaced,
        cancel,
        stop,
        fence,
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
        // Its tasks were released, maybe to a peer already: the run in flight stops now
        // (its command killed), before anything else, and its model is told.
        let stopped = fence.declared_dead(&reason);
        tracing::warn!(member = %me, %reason, stopped, "presence lost; run stopped; joining again");
        output.emit(AgentEvent::Notice {
            text: format!(
                "{me} was cut off from the team: {reason}; {}joining again",
                if stopped { "its run was stopped; " } else { "" }
            ),
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
                     meanwhile ({reason}); it stopped the work in flight and has joined again \
                     as a new member epoch. The tasks released at its death stay released and \
                     {me} does not continue them: it takes work again only through the task \
                     list, or assign them to {me} again if it should finish them."
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
