//! Usage and cost attributed to a task, per member who spent it.
//!
//! The team runtime adds the tokens (and, when it knows the price, the cost) of each model
//! request to the task its teammate owns while it works ([`crate::TaskList::add_usage`],
//! one locked write per call). A task keeps one running total per member, so a task that
//! changed hands shows who spent what. The store knows nothing about models or prices: it
//! adds and bounds numbers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::name::Name;

/// Largest token counter (or request count) a task records: 2^53 − 1, the largest integer
/// every JSON reader (including ones that parse numbers as doubles) holds exactly.
pub const MAX_USAGE_COUNT: u64 = (1 << 53) - 1;
/// Largest cost in USD a task records for one member.
pub const MAX_USAGE_COST_USD: f64 = 1e9;
/// Most members whose usage one task records.
pub const MAX_USAGE_MEMBERS: usize = 256;

/// Tokens, requests and cost: one model request's spend, or a running total.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct TaskUsage {
    /// Uncached input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Model requests.
    #[serde(default)]
    pub requests: u64,
    /// Cost in USD of the spend whose price was known; absent if no price was known. A
    /// total is then a lower bound when some requests had no known price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl TaskUsage {
    /// `self + other`, or `Err(reason)` if either is out of bounds or the sum would be.
    pub fn checked_add(&self, other: &TaskUsage) -> Result<TaskUsage, String> {
        self.check()?;
        other.check()?;
        let cost_usd = match (self.cost_usd, other.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        let sum = TaskUsage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cache_read_tokens: self
                .cache_read_tokens
                .saturating_add(other.cache_read_tokens),
            cache_write_tokens: self
                .cache_write_tokens
                .saturating_add(other.cache_write_tokens),
            requests: self.requests.saturating_add(other.requests),
            cost_usd,
        };
        sum.check()
            .map_err(|reason| format!("the total {reason}"))?;
        Ok(sum)
    }

    /// `Err(reason)` unless every counter is at most [`MAX_USAGE_COUNT`] and the cost is a
    /// finite number from 0 to [`MAX_USAGE_COST_USD`] (JSON cannot hold NaN or infinity).
    pub fn check(&self) -> Result<(), String> {
        for (what, n) in [
            ("input tokens", self.input_tokens),
            ("output tokens", self.output_tokens),
            ("cache read tokens", self.cache_read_tokens),
            ("cache write tokens", self.cache_write_tokens),
            ("requests", self.requests),
        ] {
            if n > MAX_USAGE_COUNT {
                return Err(format!(
                    "usage of {n} {what} is out of range; the limit is {MAX_USAGE_COUNT}"
                ));
            }
        }
        if let Some(cost) = self.cost_usd
            && !(cost.is_finite() && (0.0..=MAX_USAGE_COST_USD).contains(&cost))
        {
            return Err(format!(
                "a cost of {cost} USD is out of range; give a finite amount from 0 to \
                 {MAX_USAGE_COST_USD}"
            ));
        }
        Ok(())
    }

    /// All tokens: input, output and both cache kinds.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_write_tokens)
    }
}

/// The sum over members of a task's usage (unbounded: for display only).
pub fn usage_total(per_member: &BTreeMap<Name, TaskUsage>) -> TaskUsage {
    per_member
        .values()
        .fold(TaskUsage::default(), |acc, u| TaskUsage {
            input_tokens: acc.input_tokens.saturating_add(u.input_tokens),
            output_tokens: acc.output_tokens.saturating_add(u.output_tokens),
            cache_read_tokens: acc.cache_read_tokens.saturating_add(u.cache_read_tokens),
            cache_write_tokens: acc.cache_write_tokens.saturating_add(u.cache_write_tokens),
            requests: acc.requests.saturating_add(u.requests),
            cost_usd: match (acc.cost_usd, u.cost_usd) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
            },
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_keeps_unknown_cost_absent() {
        let a = TaskUsage {
            input_tokens: 10,
            output_tokens: 2,
            requests: 1,
            ..Default::default()
        };
        let sum = a.checked_add(&a).unwrap();
        assert_eq!(sum.input_tokens, 20);
        assert_eq!(sum.cost_usd, None);
        let priced = TaskUsage {
            cost_usd: Some(0.25),
            ..a
        };
        assert_eq!(sum.checked_add(&priced).unwrap().cost_usd, Some(0.25));
    }

    #[test]
    fn refuses_what_json_or_readers_cannot_hold() {
        for bad in [f64::NAN, f64::INFINITY, -0.5, 2e9] {
            let u = TaskUsage {
                cost_usd: Some(bad),
                ..Default::default()
            };
            assert!(TaskUsage::default().checked_add(&u).is_err(), "{bad}");
        }
        let big = TaskUsage {
            output_tokens: MAX_USAGE_COUNT,
            ..Default::default()
        };
        let one = TaskUsage {
            output_tokens: 1,
            ..Default::default()
        };
        let err = big.checked_add(&one).unwrap_err();
        assert!(err.starts_with("the total usage of"), "{err}");
        let over = TaskUsage {
            input_tokens: u64::MAX,
            ..Default::default()
        };
        assert!(TaskUsage::default().checked_add(&over).is_err());
    }
}
