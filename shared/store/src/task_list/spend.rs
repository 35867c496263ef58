//! The team's spend and caps in the task list: adding a model request's spend to a
//! member (and to the task it works on) in one locked write, reading where a member's
//! spend stands, setting caps, and refusing a claim the team or the task cannot pay for
//! (see [`crate::budget`]). The rest of [`TaskList`] stays in `task_list.rs`.

use std::collections::BTreeMap;

use super::*;
use crate::budget::{
    CapScope, RequestSlot, Reserve, Settled, SpendCap, SpendRecord, SpendState, TeamCaps,
    describe_spend, team_total,
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
                None,
            )))
        })
    }

    /// Decides whether a model request of `member` may start, and reserves it: in one
    /// locked change, adds `pending` (its spend not yet added) to its total, then refuses
    /// the request if a cap in force is reached (the team's; unless `team_only`, also the
    /// member's and its in-progress task's), counting every member's reserved requests.
    /// A request that may start, and to which a cap in requests applies, is reserved
    /// (`reserved` in the list, one per request, toward the member's in-progress task
    /// unless `team_only`); the response turns it into a counted request
    /// ([`settle_spend`](Self::settle_spend)). Because the check and the reservation are
    /// one write, members starting requests at once never start more than a cap allows.
    ///
    /// `held`: the member already holds a reservation made with its last response, not
    /// used yet; the check then leaves one of its reserved requests out and nothing is
    /// written (a locked read), unless its task changed (the reservation moves to the new
    /// task) or the request is refused (the reservation is given back). `fresh`: the
    /// first reservation of the member's process: any reservation left by an earlier
    /// process of the same member (it died) is replaced, not added to.
    pub fn reserve_request(
        &self,
        member: &Name,
        pending: &TaskUsage,
        team_only: bool,
        how: Reserve,
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
            if how == Reserve::Fresh && list.reserved.remove(member).is_some() {
                changed = true;
            }
            let held = how == Reserve::Held && reserved_count(list, member) > 0;
            let state = state_of(list, member, None, held.then_some(member));
            let refused_by = state.reached(team_only);
            let task = state
                .task
                .as_ref()
                .map(|(id, _, _)| id.clone())
                .filter(|_| !team_only);
            let counted = refused_by.is_none() && (held || state.request_capped(team_only));
            match (held, refused_by.is_some(), counted) {
                (true, true, _) => give_back(list, member, 1),
                (true, false, _) => {
                    let entry = list.reserved.entry(member.clone()).or_default();
                    if entry.task == task {
                        return Ok(Outcome::Keep(RequestSlot {
                            state,
                            refused_by,
                            counted,
                            task,
                        }));
                    }
                    entry.task = task.clone();
                }
                (false, _, true) => add_reserved(list, member, task.clone()),
                (false, _, false) if !changed => {
                    return Ok(Outcome::Keep(RequestSlot {
                        state,
                        refused_by,
                        counted,
                        task,
                    }));
                }
                (false, _, false) => {}
            }
            Ok(Outcome::Write(RequestSlot {
                state,
                refused_by,
                counted,
                task,
            }))
        })
    }

    /// Adds a model response's spend for `member` in one locked write (see
    /// [`SpendRecord`]): `spent` to its total and `task_spent` (if any) to the task it
    /// holds (its in-progress task, else `fallback` if it still owns it); takes one of its
    /// reserved requests off if `consumed` (the request answered was reserved); and, if
    /// `next` and a cap in requests applies, reserves the member's next request in the
    /// same write when the caps allow it (so a request after a response needs no write
    /// of its own). Returns where the spend stands, the task charged and whether the next
    /// request was reserved.
    pub fn settle_spend(&self, member: &Name, record: &SpendRecord) -> Result<Settled> {
        self.update_doc(Some(member), |_, list| {
            let invalid = |id: &TaskId, reason: String| Error::InvalidTask {
                action: "add usage to",
                id: id.to_string(),
                reason: format!("{member}'s {reason}"),
            };
            let before = list.spend.get(member).copied().unwrap_or_default();
            let after = before
                .checked_add(&record.spent)
                .map_err(|r| invalid(&TaskId::from_number(0), r))?;
            list.spend.insert(member.clone(), after);
            let held = match &record.task_spent {
                Some(_) => held_task(list, member, record.fallback.as_ref()),
                None => None,
            };
            if let (Some(id), Some(task_spent)) = (&held, &record.task_spent)
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
            if record.consumed {
                give_back(list, member, 1);
            }
            let state = state_of(list, member, held.as_ref(), None);
            let team_only = record.task_spent.is_none();
            let next = record.next
                && state.reached(team_only).is_none()
                && state.request_capped(team_only);
            if next {
                let task = in_progress(list, member).map(|t| t.id.clone());
                add_reserved(list, member, task.filter(|_| !team_only));
            }
            Ok(Outcome::Write(Settled {
                state,
                task: held,
                reserved_next: next,
            }))
        })
    }

    /// Gives back `count` of `member`'s reserved requests that will not start (the turn
    /// ended with its reservation unused, or a request was refused after all).
    pub fn release_request(&self, member: &Name, count: u64) -> Result<()> {
        self.update_doc(Some(member), |_, list| {
            if reserved_count(list, member) == 0 || count == 0 {
                return Ok(Outcome::Keep(()));
            }
            give_back(list, member, count);
            Ok(Outcome::Write(()))
        })
    }

    /// Drops every reservation of `member` (it died or left: its requests will not be
    /// answered). Part of [`release_owner`](Self::release_owner)'s write.
    pub(super) fn drop_reservations(list: &mut TaskListDoc, member: &Name) -> bool {
        list.reserved.remove(member).is_some()
    }

    /// Where `member`'s spend stands now (and that of `task`, if given and listed).
    pub fn spend_state(&self, member: &Name, task: Option<&TaskId>) -> Result<SpendState> {
        Ok(state_of(&self.load()?, member, task, None))
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
        let mut state = state_of(list, owner, task.map(|t| &t.id), None);
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
        &state_of(list, owner, Some(task), None).task,
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

/// [`SpendState`] of `member` (and `task`, else its in-progress task) in `list`, every
/// member's reserved requests counted; but one of `leave_out`'s left out (the
/// reservation the request asking holds already).
fn state_of(
    list: &TaskListDoc,
    member: &Name,
    task: Option<&TaskId>,
    leave_out: Option<&Name>,
) -> SpendState {
    let task = match task {
        Some(id) => list.tasks.iter().find(|t| &t.id == id),
        None => in_progress(list, member),
    };
    let mut team_reserved: u64 = 0;
    let mut task_reserved: u64 = 0;
    for (who, reserved) in &list.reserved {
        let mut n = reserved.requests;
        if leave_out == Some(who) {
            n = n.saturating_sub(1);
        }
        team_reserved = team_reserved.saturating_add(n);
        if task.is_some_and(|t| reserved.task.as_ref() == Some(&t.id)) {
            task_reserved = task_reserved.saturating_add(n);
        }
    }
    let own_reserved = list.reserved.get(member).map_or(0, |r| {
        r.requests
            .saturating_sub(u64::from(leave_out == Some(member)))
    });
    let plus = |mut spent: TaskUsage, n: u64| {
        spent.requests = spent.requests.saturating_add(n);
        spent
    };
    let recorded = team_total(&list.spend);
    SpendState {
        member: plus(
            list.spend.get(member).copied().unwrap_or_default(),
            own_reserved,
        ),
        member_cap: list.caps.member(member),
        team: plus(recorded, team_reserved),
        team_recorded: recorded,
        team_cap: list.caps.team,
        task: task.map(|t| {
            let cap: Option<SpendCap> = list.caps.task(t.budget);
            (t.id.clone(), plus(t.usage_total(), task_reserved), cap)
        }),
    }
}

/// How many requests `member` has reserved in `list`.
fn reserved_count(list: &TaskListDoc, member: &Name) -> u64 {
    list.reserved.get(member).map_or(0, |r| r.requests)
}

/// Reserves one more request of `member`, toward `task` (all its reservations count
/// toward its latest task).
fn add_reserved(list: &mut TaskListDoc, member: &Name, task: Option<TaskId>) {
    let entry = list.reserved.entry(member.clone()).or_default();
    entry.requests = entry.requests.saturating_add(1);
    entry.task = task;
}

/// Takes `count` of `member`'s reserved requests off (none left: its entry goes).
fn give_back(list: &mut TaskListDoc, member: &Name, count: u64) {
    if let Some(entry) = list.reserved.get_mut(member) {
        entry.requests = entry.requests.saturating_sub(count);
        if entry.requests == 0 {
            list.reserved.remove(member);
        }
    }
}
