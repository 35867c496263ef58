//! The lead's side of a team, without a UI.
//!
//! A lead starts without a team: its [`TeamSlot`](crate::TeamSlot) is empty until its
//! TeamCreate tool (or `roo-lead --team`, [`join_as_lead`]) binds it, and TeamDelete
//! empties it again. Everything here follows the slot, so it can be installed when the
//! lead is built. One module per job, this file their face:
//!
//! - `hooks`: [`SlotDelivery`], a turn hook: teammates' messages enter the lead's next
//!   turn (an [`InboxDelivery`](crate::InboxDelivery) of the current binding; nothing
//!   while unbound); [`TeamStateReminder`], a turn hook: after a compaction the model
//!   gets the team's state back (members, states, open tasks);
//! - `requests`: [`spawn_request_answerer`]: teammates' permission and plan-approval
//!   requests are answered by a [`RequestDecider`] — the person at the terminal
//!   ([`ApproverDecider`]) or, in a headless run, the lead's own permission policy
//!   ([`PolicyDecider`]) — never left waiting;
//! - `wait`: [`wait_for_team`], a headless lead's wait between its turns, and
//!   [`team_input`], what an idle interactive lead waits on;
//! - `deaths`: what a teammate's death leaves the lead ([`tell_lead_of_death`],
//!   [`lost_work`]);
//! - `join`: taking up and letting go of an existing team ([`join_as_lead`],
//!   [`team_led_in`], [`release_lead`]);
//! - [`status`]: teammates' states, the monitor that reports them, `/team` and `/tasks`;
//! - `leftover`: what a lead that leaves its team behind leaves ([`LeftTeam`]).

mod deaths;
mod hooks;
mod join;
mod leftover;
mod requests;
pub mod status;
mod wait;

#[cfg(test)]
mod tests;

pub use deaths::{lost_work, tell_lead_of_death};
pub use hooks::{SlotDelivery, TeamStateReminder};
pub use join::{JoinError, join_as_lead, release_lead, team_led_in};
pub use leftover::{LeftMember, LeftTeam};
pub use requests::{
    ApproverDecider, Decision, PolicyDecider, RequestDecider, answer_requests,
    spawn_request_answerer,
};
pub use wait::{
    BROKEN_AFTER, TEAM_MAX_DELAY, TEAM_QUIET, TeamWait, gather_input, team_input, wait_for_team,
    wakes_lead,
};
