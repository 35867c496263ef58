//! The team's spend and caps in the task list: adding a model request's spend to a
//! member (and to the task it works on) in one locked write, reading where a member's
//! spend stands, setting caps, and refusing a claim the team or the task cannot pay for
//! (see [`crate::budget`]). The rest of [`TaskList`] stays in `task_list.rs`.

use std::collections::BTreeMap;

use super::*;
use crate::budget::{SpendCap, SpendState, TeamCaps, describe_spend, team_total};

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

    /// `Err` when claiming `task` must wait for money: the team reached its cap, or the
    /// task reached its own (or the default) cap.
    pub(super) fn refuse_unpaid_claim(
        &self,
        list: &TaskListDoc,
        task: Option<&Task>,
        owner: &Name,
    ) -> Result<()> {
        let id = task.map(|t| t.id.clone()).unwrap_or(TaskId::from_number(0));
        let state = state_of(list, owner, task.map(|t| &t.id));
        if let Some(cap) = state.team_cap
            && cap.reached(&state.team)
        {
            return Err(self.invalid(
                "claim",
                &id,
                &format!(
                    "the team reached its budget of {} (spent {}); no new work starts",
                    cap.describe(),
                    describe_spend(&state.team)
                ),
            ));
        }
        if task.is_some()
            && let Some((_, spent, Some(cap))) = &state.task
            && cap.reached(spent)
        {
            return Err(self.invalid(
                "claim",
                &id,
                &format!(
                    "the task reached its budget of {} (spent {})",
                    cap.describe(),
                    describe_spend(spent)
                ),
            ));
        }
        Ok(())
    }
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
            let cap: Option<SpendCap> = t.budget.or(list.caps.task_default);
            (t.id.clone(), t.usage_total(), cap)
        }),
    }
}
