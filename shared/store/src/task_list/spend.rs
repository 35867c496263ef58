//! The team's spend and caps in the task list: adding a model request's spend to a
//! member (and to the task it works on) in one locked write, reading where a member's
//! spend stands, setting caps, and refusing a claim the team or the task cannot pay for
//! (see [`crate::budget`]). The rest of [`TaskList`] stays in `task_list.rs`.

use std::collections::BTreeMap;

use super::*;
use crate::budget::{
    CapScope, RequestSlot, SpendCap, SpendState, TeamCaps, describe_spend, team_total,
};

impl TaskList {
    /// Adds `spent` to `member`'s total, and `task_spent` (if any) to that task's usage
    /// by `member`, in one locked write; returns where the member's spend stands after
    /// it. A value over the bounds of [`crate::usage`] is refused and nothing is written.
    pub fn add_spend(
        &self,
        member: &Name,
        spent: &TaskUsage,
        task_spent: Option<(&TaskId, &TaskUsage)>,
    ) -> Result<SpendState> {
        self.update_doc(Some(member), |_, list| {
            let invalid = |reason: String| Error::InvalidTask {
                action: "add usage to",
                id: task_spent.map(|(id, _)| id.to_string()).unwrap_or_default(),
                reason: format!("{member}'s {reason}"),
            };
            let before = list.spend.get(member).copied().unwrap_or_default();
            let after = before.checked_add(spent).map_err(invalid)?;
            list.spend.insert(member.clone(), after);
            if let Some((id, usage)) = task_spent
                && *usage != TaskUsage::default()
            {
                let index = self.index(list, id)?;
                let task = &mut list.tasks[index];
                let before = task.usage.get(member).copied().unwrap_or_default();
                let after = before.checked_add(usage).map_err(invalid)?;
                task.usage.insert(member.clone(), after);
                let task = task.clone();
                self.check_limits("add usage to", &task)?;
            }
            Ok(Outcome::Write(state_of(
                list,
                member,
                task_spent.map(|(id, _)| id),
            )))
        })
    }

    /// [`add_spend`](Self::add_spend) to the task `member` holds, found in the same locked
    /// write: its in-progress task (the latest claim), else `fallback` if it still owns it
    /// (the request after it completed the task). `task_spent` goes to that task; with no
    /// such task it is not charged to any. Returns where the spend stands and the task
    /// charged.
    pub fn add_spend_held(
        &self,
        member: &Name,
        spent: &TaskUsage,
        task_spent: &TaskUsage,
        fallback: Option<&TaskId>,
    ) -> Result<(SpendState, Option<TaskId>)> {
        self.update_doc(Some(member), |_, list| {
            let invalid = |id: &TaskId, reason: String| Error::InvalidTask {
                action: "add usage to",
                id: id.to_string(),
                reason: format!("{member}'s {reason}"),
            };
            let before = list.spend.get(member).copied().unwrap_or_default();
            let after = before
                .checked_add(spent)
                .map_err(|r| invalid(&TaskId::from_number(0), r))?;
            list.spend.insert(member.clone(), after);
            let held = held_task(list, member, fallback);
            if let Some(id) = &held
                && *task_spent != TaskUsage::default()
            {
                let index = self.index(list, id)?;
                let task = &mut list.tasks[index];
                let before = task.usage.get(member).copied().unwrap_or_default();
                let after = before.checked_add(task_spent).map_err(|r| invalid(id, r))?;
                task.usage.insert(member.clone(), after);
                let task = task.clone();
                self.check_limits("add usage to", &task)?;
            }
            let state = state_of(list, member, held.as_ref());
            Ok(Outcome::Write((state, held)))
        })
    }

    /// Decides whether a model request of `member` may start, and counts it: in one
    /// locked change, adds `pending` (its spend not yet added) to its total, then refuses
    /// the request if a cap in force is reached (the team's; unless `team_only`, also the
    /// member's and its in-progress task's). A request that may start, and to which a cap
    /// in requests applies, is counted now: one request to the member's total and (unless
    /// `team_only`) to that task's usage. Because the check and the count are one write,
    /// members starting requests at once never start more than a request cap allows. The
    /// response's tokens and cost (and the request, if not counted now) are added later
    /// by [`add_spend`](Self::add_spend) / [`add_spend_held`](Self::add_spend_held).
    /// Without a request cap and pending spend, nothing is written (a locked read).
    pub fn reserve_request(
        &self,
        member: &Name,
        pending: &TaskUsage,
        team_only: bool,
    ) -> Result<RequestSlot> {
        self.update_doc(Some(member), |_, list| {
            let invalid = |reason: String| Error::InvalidSetting {
                name: "spend",
                reason: format!("{member}'s {reason}"),
            };
            let mut changed = false;
            if *pending != TaskUsage::default() {
                let before = list.spend.get(member).copied().unwrap_or_default();
                let after = before.checked_add(pending).map_err(invalid)?;
                list.spend.insert(member.clone(), after);
                changed = true;
            }
            let state = state_of(list, member, None);
            let refused_by = state.reached(team_only);
            let counted = refused_by.is_none() && state.request_capped(team_only);
            let mut task = None;
            if counted {
                let one = TaskUsage {
                    requests: 1,
                    ..TaskUsage::default()
                };
                let before = list.spend.get(member).copied().unwrap_or_default();
                let after = before.checked_add(&one).map_err(invalid)?;
                list.spend.insert(member.clone(), after);
                if let (Some((id, _, _)), false) = (&state.task, team_only) {
                    let index = self.index(list, id)?;
                    let held = &mut list.tasks[index];
                    let before = held.usage.get(member).copied().unwrap_or_default();
                    let after = before.checked_add(&one).map_err(invalid)?;
                    held.usage.insert(member.clone(), after);
                    let held = held.clone();
                    self.check_limits("add usage to", &held)?;
                    task = Some(id.clone());
                }
                changed = true;
            }
            let slot = RequestSlot {
                state,
                refused_by,
                counted,
                task,
            };
            Ok(match changed {
                true => Outcome::Write(slot),
                false => Outcome::Keep(slot),
            })
        })
    }

    /// Takes back the request [`reserve_request`](Self::reserve_request) counted for
    /// `member` (and `task`) when it did not start after all.
    pub fn release_request(&self, member: &Name, task: Option<&TaskId>) -> Result<()> {
        self.update_doc(Some(member), |_, list| {
            if let Some(spent) = list.spend.get_mut(member) {
                spent.requests = spent.requests.saturating_sub(1);
            }
            if let Some(index) = task.and_then(|id| list.tasks.iter().position(|t| &t.id == id))
                && let Some(spent) = list.tasks[index].usage.get_mut(member)
            {
                spent.requests = spent.requests.saturating_sub(1);
            }
            Ok(Outcome::Write(()))
        })
    }

    /// Where `member`'s spend stands now (and that of `task`, if given and listed).
    pub fn spend_state(&self, member: &Name, task: Option<&TaskId>) -> Result<SpendState> {
        Ok(state_of(&self.load()?, member, task))
    }

    /// Every member's total spend and the caps in force.
    pub fn spend(&self) -> Result<(BTreeMap<Name, TaskUsage>, TeamCaps)> {
        let list = self.load()?;
        Ok((list.spend, list.caps))
    }

    /// Changes the caps in force with `change`, in one locked write; refused (nothing
    /// written) when a cap is out of range.
    pub fn set_caps(&self, by: Option<&Name>, change: impl Fn(&mut TeamCaps)) -> Result<TeamCaps> {
        self.update_doc(by, |_, list| {
            let mut caps = list.caps.clone();
            change(&mut caps);
            caps.check().map_err(|reason| Error::InvalidSetting {
                name: "budget",
                reason,
            })?;
            list.caps = caps.clone();
            Ok(Outcome::Write(caps))
        })
    }

    /// `Err` when claiming `task` must wait for money: the team reached its cap, the
    /// claimer (unless it is the lead, `lead`) reached its own, or the task reached its
    /// cap (the lower of its own and the team's default).
    pub(super) fn refuse_unpaid_claim(
        &self,
        list: &TaskListDoc,
        task: Option<&Task>,
        owner: &Name,
        lead: bool,
    ) -> Result<()> {
        let id = task.map(|t| t.id.clone()).unwrap_or(TaskId::from_number(0));
        let mut state = state_of(list, owner, task.map(|t| &t.id));
        if task.is_none() {
            state.task = None;
        }
        if lead {
            // The lead's own spend counts in the team's; a task's cap holds for it too.
            state.member_cap = None;
        }
        let reason = match state.reached(false) {
            None => return Ok(()),
            Some(CapScope::Team) => format!(
                "the team reached its budget of {} (spent {}); no new work starts",
                state.team_cap.map(|c| c.describe()).unwrap_or_default(),
                describe_spend(&state.team)
            ),
            Some(CapScope::Member) => format!(
                "{owner} reached its budget of {} (spent {}); it claims no new work",
                state.member_cap.map(|c| c.describe()).unwrap_or_default(),
                describe_spend(&state.member)
            ),
            Some(CapScope::Task) => task_over(&state),
        };
        Err(self.invalid("claim", &id, &reason))
    }
}

/// Why a task whose cap is reached is not claimed.
fn task_over(state: &SpendState) -> String {
    let Some((_, spent, cap)) = &state.task else {
        return String::new();
    };
    format!(
        "the task reached its budget of {} (spent {}); no new work starts on it",
        cap.map(|c| c.describe()).unwrap_or_default(),
        describe_spend(spent)
    )
}

/// Whether `task`'s cap in `list` is reached (it is not claimed by `claim_next`).
pub(super) fn task_cap_reached(list: &TaskListDoc, owner: &Name, task: &TaskId) -> bool {
    matches!(
        &state_of(list, owner, Some(task)).task,
        Some((_, spent, Some(cap))) if cap.reached(spent)
    )
}

/// The task `member` holds: its in-progress task (the latest claim), else `fallback` if
/// it still owns it.
fn held_task(list: &TaskListDoc, member: &Name, fallback: Option<&TaskId>) -> Option<TaskId> {
    in_progress(list, member).map(|t| t.id.clone()).or_else(|| {
        fallback
            .filter(|id| {
                list.tasks
                    .iter()
                    .any(|t| &t.id == *id && t.owner.as_ref() == Some(member))
            })
            .cloned()
    })
}

/// `member`'s in-progress task, the most recently claimed if several.
fn in_progress<'a>(list: &'a TaskListDoc, member: &Name) -> Option<&'a Task> {
    list.tasks
        .iter()
        .filter(|t| t.status == TaskStatus::InProgress && t.owner.as_ref() == Some(member))
        .max_by_key(|t| {
            (
                t.lease.as_ref().map(|l| l.acquired_at.to_string()),
                t.id.number(),
            )
        })
}

/// [`SpendState`] of `member` (and `task`, else its in-progress task) in `list`.
fn state_of(list: &TaskListDoc, member: &Name, task: Option<&TaskId>) -> SpendState {
    let task = match task {
        Some(id) => list.tasks.iter().find(|t| &t.id == id),
        None => in_progress(list, member),
    };
    SpendState {
        member: list.spend.get(member).copied().unwrap_or_default(),
        member_cap: list.caps.member(member),
        team: team_total(&list.spend),
        team_cap: list.caps.team,
        task: task.map(|t| {
            let cap: Option<SpendCap> = list.caps.task(t.budget);
            (t.id.clone(), t.usage_total(), cap)
        }),
    }
}
