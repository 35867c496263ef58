//! What a teammate does when it learns it was declared dead (PostgreSQL): its presence
//! keeper ([`super::presence`]) found the presence lost — the lead declared it dead
//! while its link was cut, or a later join took its entry — so its writes are fenced and
//! the tasks it owned were released, maybe to a peer already. The keeper calls
//! [`TurnFence::declared_dead`], which cancels the run in flight through the run's own
//! token (the agent loop's Esc path: the tool call in flight is stopped, a command's
//! process group killed) and keeps a notice; the teammate loop takes that notice when
//! the run ends ([`TurnFence::end`]) or before its next run begins ([`TurnFence::begin`])
//! and puts it before its model in plain words ([`notice_for_model`]), so the model
//! neither goes on with the released work nor reports it done, and takes work again only
//! through the task list. The agent loop knows nothing of teams: it only sees its run
//! cancelled and a new input.

use std::sync::Mutex;

use roo_store::{Name, Task};
use tokio_util::sync::CancellationToken;

/// The run in flight (if any) and the death not yet told to the model.
#[derive(Debug, Default)]
pub(super) struct TurnFence {
    state: Mutex<FenceState>,
}

#[derive(Debug, Default)]
struct FenceState {
    /// The token of the run in flight.
    turn: Option<CancellationToken>,
    /// Why the teammate was found dead, not yet told to its model.
    death: Option<String>,
}

impl TurnFence {
    fn state(&self) -> std::sync::MutexGuard<'_, FenceState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A run begins with `turn` as its token. Returns a death found while no run was in
    /// flight, to be told to the model first.
    pub(super) fn begin(&self, turn: CancellationToken) -> Option<String> {
        let mut state = self.state();
        state.turn = Some(turn);
        state.death.take()
    }

    /// The run ended. Returns the death found during it (its run was cancelled for it).
    pub(super) fn end(&self) -> Option<String> {
        let mut state = self.state();
        state.turn = None;
        state.death.take()
    }

    /// The teammate was found dead (`reason`, as the presence says it): the run in flight
    /// is cancelled and the death kept for the model. Returns whether a run was cancelled.
    pub(super) fn declared_dead(&self, reason: &str) -> bool {
        let mut state = self.state();
        state.death = Some(reason.to_owned());
        match &state.turn {
            Some(turn) => {
                turn.cancel();
                true
            }
            None => false,
        }
    }
}

/// What the model is told when it was declared dead (`reason`): `released` are the tasks
/// it owned before and owns no more.
pub(super) fn notice_for_model(me: &Name, reason: &str, released: &[Task]) -> String {
    let tasks = if released.is_empty() {
        "Every task you owned was released.".to_owned()
    } else {
        let list: Vec<String> = released
            .iter()
            .map(|t| format!("#{} \"{}\"", t.id, t.subject))
            .collect();
        format!(
            "{} {} released and may already be reassigned to another member.",
            if released.len() == 1 { "Task" } else { "Tasks" },
            list.join(", ") + if released.len() == 1 { " was" } else { " were" }
        )
    };
    format!(
        "<team-fence>\nYou ({me}) were declared dead by the team: {reason}. Your work was \
         stopped: the tool call in flight was cancelled and its command killed. {tasks} Do \
         not continue that work, do not report it done and do not tell anyone you go on \
         with it. Take work again only through the task list (TaskList, then claim a \
         pending task with TaskUpdate), or wait for the lead's next message.\n</team-fence>"
    )
}
