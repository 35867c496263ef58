//! Spending caps and the team's running spend, as numbers.
//!
//! A team's task list keeps, besides the tasks, each member's total spend (`spend`) and
//! the caps in force (`caps`): the team's, each member's, and the default of a task
//! without its own ([`crate::Task::budget`]), and the requests each member reserved and
//! not answered yet (`reserved`, counted by every check, in no total). The team runtime
//! adds a model request's spend to the member, and to the task it works on, in one locked
//! write that may also reserve the member's next request ([`crate::TaskList::settle_spend`]),
//! and gets back what it needs to decide whether the next request may start
//! ([`SpendState`]). The store knows nothing about models or prices: it adds, bounds and
//! compares numbers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::name::Name;
use crate::usage::{MAX_USAGE_COST_USD, MAX_USAGE_COUNT, TaskUsage};

/// A cap in USD, in model requests, or both. A scope whose spend reached either stops.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct SpendCap {
    /// Most USD (of requests whose price is known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// Most model requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
}

impl SpendCap {
    /// Whether neither part is set.
    pub fn is_empty(&self) -> bool {
        self.usd.is_none() && self.requests.is_none()
    }

    /// `Err(reason)` unless the USD part is a finite amount from 0 to
    /// [`MAX_USAGE_COST_USD`] and the request part at most [`MAX_USAGE_COUNT`].
    pub fn check(&self) -> Result<(), String> {
        if let Some(usd) = self.usd
            && !(usd.is_finite() && (0.0..=MAX_USAGE_COST_USD).contains(&usd))
        {
            return Err(format!(
                "a cap of {usd} USD is out of range; give a finite amount from 0 to \
                 {MAX_USAGE_COST_USD}"
            ));
        }
        if let Some(n) = self.requests
            && n > MAX_USAGE_COUNT
        {
            return Err(format!(
                "a cap of {n} requests is out of range; the limit is {MAX_USAGE_COUNT}"
            ));
        }
        Ok(())
    }

    /// The lower of two caps, part by part (a part set in only one is kept).
    pub fn min(&self, other: &SpendCap) -> SpendCap {
        fn lower<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        SpendCap {
            usd: lower(self.usd, other.usd),
            requests: lower(self.requests, other.requests),
        }
    }

    /// How much of the cap `spent` used: the larger of its parts' fractions (0 for a
    /// cap without parts). A spend no writer writes (a negative or out-of-range cost in
    /// a document another program changed) uses the whole cap: it stops, never lifts it.
    pub fn used(&self, spent: &TaskUsage) -> f64 {
        if !self.is_empty() && spent.check().is_err() {
            return f64::INFINITY;
        }
        let usd = match self.usd {
            Some(cap) if cap > 0.0 => spent.cost_usd.unwrap_or(0.0) / cap,
            Some(_) => f64::INFINITY,
            None => 0.0,
        };
        let requests = match self.requests {
            Some(0) => f64::INFINITY,
            Some(cap) => spent.requests as f64 / cap as f64,
            None => 0.0,
        };
        usd.max(requests)
    }

    /// Whether `spent` reached the cap (no new request may start).
    pub fn reached(&self, spent: &TaskUsage) -> bool {
        self.used(spent) >= 1.0
    }

    /// The cap in words: `0.5 USD`, `10 requests`, `0.5 USD or 10 requests`.
    pub fn describe(&self) -> String {
        match (self.usd, self.requests) {
            (Some(usd), Some(n)) => format!("{usd} USD or {n} requests"),
            (Some(usd), None) => format!("{usd} USD"),
            (None, Some(n)) => format!("{n} requests"),
            (None, None) => "no cap".to_owned(),
        }
    }
}

/// What was spent, in words: `0.0540 USD in 3 requests` (or only the requests when no
/// price was known).
pub fn describe_spend(spent: &TaskUsage) -> String {
    match spent.cost_usd {
        Some(usd) => format!("{usd:.4} USD in {} requests", spent.requests),
        None => format!("{} requests (no known price)", spent.requests),
    }
}

/// The caps of one team, kept in its task list.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TeamCaps {
    /// The whole team's cap, on the sum of every member's spend (the lead's included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<SpendCap>,
    /// Each member's cap, on its own spend (its sub-agents' included).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub members: BTreeMap<Name, SpendCap>,
    /// The cap of every task (a task's own cap may only lower it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_default: Option<SpendCap>,
    /// Every member's cap besides its own (the lower of the two holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_default: Option<SpendCap>,
}

impl TeamCaps {
    /// Whether no cap is set.
    pub fn is_empty(&self) -> bool {
        self.team.is_none()
            && self.members.is_empty()
            && self.task_default.is_none()
            && self.member_default.is_none()
    }

    /// The cap of `member`: the lower of its own and the default.
    pub fn member(&self, member: &Name) -> Option<SpendCap> {
        match (self.members.get(member), &self.member_default) {
            (Some(own), Some(default)) => Some(own.min(default)),
            (own, default) => own.or(default.as_ref()).copied(),
        }
    }

    /// The cap of a task whose own is `own`: the lower of it and the default, part by
    /// part (a task's cap may lower the team's default, never raise it).
    pub fn task(&self, own: Option<SpendCap>) -> Option<SpendCap> {
        match (own, self.task_default) {
            (Some(own), Some(default)) => Some(own.min(&default)),
            (own, default) => own.or(default),
        }
    }

    /// `Err(reason)` unless every cap is in range.
    pub fn check(&self) -> Result<(), String> {
        if let Some(cap) = &self.team {
            cap.check().map_err(|r| format!("the team's {r}"))?;
        }
        if let Some(cap) = &self.task_default {
            cap.check().map_err(|r| format!("the tasks' {r}"))?;
        }
        if let Some(cap) = &self.member_default {
            cap.check().map_err(|r| format!("the members' {r}"))?;
        }
        for (member, cap) in &self.members {
            cap.check().map_err(|r| format!("{member}'s {r}"))?;
        }
        Ok(())
    }
}

/// Where a member's spend stands after a request (or now): its own total and cap, the
/// team's, and those of the task it works on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpendState {
    /// The member's total spend in this team.
    pub member: TaskUsage,
    /// The member's cap.
    pub member_cap: Option<SpendCap>,
    /// The sum of every member's spend.
    pub team: TaskUsage,
    /// The sum of every member's recorded spend, reserved requests left out: it never
    /// goes down while the list holds its record (a reader that sees it go down knows
    /// the list was reset).
    pub team_recorded: TaskUsage,
    /// The team's cap.
    pub team_cap: Option<SpendCap>,
    /// The task charged (or asked about; else the member's in-progress task, the most
    /// recently claimed): its id, its total spend and its cap (its own, else the team's
    /// default).
    pub task: Option<(crate::task::TaskId, TaskUsage, Option<SpendCap>)>,
}

impl SpendState {
    /// The first scope whose cap `self` reached: the team's, and unless `team_only` (a
    /// lead, whose own spend counts in the team's) the member's and its task's.
    pub fn reached(&self, team_only: bool) -> Option<CapScope> {
        let over =
            |cap: &Option<SpendCap>, spent: &TaskUsage| cap.is_some_and(|c| c.reached(spent));
        if over(&self.team_cap, &self.team) {
            return Some(CapScope::Team);
        }
        if team_only {
            return None;
        }
        if over(&self.member_cap, &self.member) {
            return Some(CapScope::Member);
        }
        match &self.task {
            Some((_, spent, cap)) if over(cap, spent) => Some(CapScope::Task),
            _ => None,
        }
    }
}

impl SpendState {
    /// Whether a cap in requests applies to the next request: the team's, and unless
    /// `team_only` the member's or its task's.
    pub fn request_capped(&self, team_only: bool) -> bool {
        let capped = |cap: &Option<SpendCap>| cap.is_some_and(|c| c.requests.is_some());
        capped(&self.team_cap)
            || (!team_only
                && (capped(&self.member_cap)
                    || self.task.as_ref().is_some_and(|(_, _, cap)| capped(cap))))
    }
}

/// A scope with a cap of its own in a team.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapScope {
    /// The whole team's.
    Team,
    /// One member's.
    Member,
    /// One task's.
    Task,
}

/// What [`crate::TaskList::reserve_request`] did: the spend as it stood before the
/// request (what the caps were compared with), and whether it may start and was counted.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestSlot {
    /// The member's, its task's and the team's spend before this request.
    pub state: SpendState,
    /// `None`: the request may start; else the scope whose cap it would pass (nothing
    /// was counted).
    pub refused_by: Option<CapScope>,
    /// Whether the request is reserved (a cap in requests applies to it): its response
    /// takes the reservation off ([`SpendRecord::consumed`]).
    pub counted: bool,
    /// The task the request counts toward as well (the member's in-progress task).
    pub task: Option<crate::task::TaskId>,
}

/// How [`crate::TaskList::reserve_request`] reserves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserve {
    /// The first reservation of the member's process: one left by an earlier process of
    /// the same member is replaced.
    Fresh,
    /// A new reservation beside those the member holds (requests in flight).
    More,
    /// Use the reservation the member's last response made.
    Held,
}

/// A model response's spend for [`crate::TaskList::settle_spend`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpendRecord {
    /// Added to the member's total (the request itself included).
    pub spent: TaskUsage,
    /// Added to the task the member holds; `None`: charged to no task, and only the
    /// team's cap decides the next reservation (a lead).
    pub task_spent: Option<TaskUsage>,
    /// The task charged when the member holds none in progress (if it still owns it).
    pub fallback: Option<crate::task::TaskId>,
    /// The request answered was reserved: one reservation is taken off.
    pub consumed: bool,
    /// Reserve the next request in the same write (a cap in requests permitting).
    pub next: bool,
}

/// What [`crate::TaskList::settle_spend`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Settled {
    /// The spend after the write (reserved requests counted, the next one not).
    pub state: SpendState,
    /// The task charged.
    pub task: Option<crate::task::TaskId>,
    /// Whether the member's next request was reserved.
    pub reserved_next: bool,
}

/// The sum of every member's spend.
pub fn team_total(spend: &BTreeMap<Name, TaskUsage>) -> TaskUsage {
    crate::usage::usage_total(spend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_is_reached_by_either_part() {
        let cap = SpendCap {
            usd: Some(1.0),
            requests: Some(4),
        };
        let mut spent = TaskUsage {
            requests: 3,
            cost_usd: Some(0.5),
            ..Default::default()
        };
        assert!(!cap.reached(&spent));
        assert!((cap.used(&spent) - 0.75).abs() < 1e-9);
        spent.requests = 4;
        assert!(cap.reached(&spent));
        spent.requests = 1;
        spent.cost_usd = Some(1.0);
        assert!(cap.reached(&spent));
        // No price known: only requests count.
        spent.cost_usd = None;
        assert!(!cap.reached(&spent));
        assert!(SpendCap::default().used(&spent) == 0.0);
    }

    #[test]
    fn min_keeps_the_lower_part_and_bounds_are_checked() {
        let a = SpendCap {
            usd: Some(2.0),
            requests: None,
        };
        let b = SpendCap {
            usd: Some(1.0),
            requests: Some(3),
        };
        assert_eq!(a.min(&b), b);
        for bad in [f64::NAN, -1.0, f64::INFINITY, 2e9] {
            assert!(
                SpendCap {
                    usd: Some(bad),
                    requests: None
                }
                .check()
                .is_err()
            );
        }
    }
}
