//! The `budget:` key: spending caps (`team_usd`, `teammate_usd`, `task_usd`, `requests`).
//!
//! The files are read in priority order (user, project, local): a trusted file's values
//! replace the ones before it, an untrusted project's only lower them (a cap it sets
//! where none was set counts as lowering). What the caps mean and who enforces them is
//! the team runtime's (docs/AGENT.md "Budgets").

use std::path::Path;

use serde::Deserialize;
use serde_yaml_ng::Value;

use super::ConfigError;

/// The caps of `budget:`; `None`: no cap of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// The whole team's spend in USD (the lead's included).
    #[serde(default)]
    pub team_usd: Option<f64>,
    /// Each teammate's spend in USD (its sub-agents' included).
    #[serde(default)]
    pub teammate_usd: Option<f64>,
    /// Each task's spend in USD (a task's own lower `budget_usd` holds).
    #[serde(default)]
    pub task_usd: Option<f64>,
    /// Model requests of the session and, for a lead, its whole team.
    #[serde(default)]
    pub requests: Option<u64>,
}

impl BudgetConfig {
    /// `other`'s values replace these where it sets them.
    pub(crate) fn override_with(&mut self, other: &BudgetConfig) {
        self.team_usd = other.team_usd.or(self.team_usd);
        self.teammate_usd = other.teammate_usd.or(self.teammate_usd);
        self.task_usd = other.task_usd.or(self.task_usd);
        self.requests = other.requests.or(self.requests);
    }

    /// `other`'s values where they are lower (or set where these are not).
    pub(crate) fn lower_with(&mut self, other: &BudgetConfig) {
        fn min<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        self.team_usd = min(self.team_usd, other.team_usd);
        self.teammate_usd = min(self.teammate_usd, other.teammate_usd);
        self.task_usd = min(self.task_usd, other.task_usd);
        self.requests = min(self.requests, other.requests);
    }
}

/// The `budget:` section of one file, checked: amounts finite and not negative.
pub(crate) fn budget(value: &Value, path: &Path) -> Result<Option<BudgetConfig>, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        key: "budget".to_string(),
        message,
    };
    let Some(section) = value.get("budget").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let budget: BudgetConfig = serde_yaml_ng::from_value(section.clone()).map_err(|e| {
        invalid(format!(
            "must be a map of team_usd, teammate_usd, task_usd (amounts in USD) and requests \
             (a count): {e}"
        ))
    })?;
    for (key, usd) in [
        ("team_usd", budget.team_usd),
        ("teammate_usd", budget.teammate_usd),
        ("task_usd", budget.task_usd),
    ] {
        if let Some(usd) = usd
            && !(usd.is_finite() && usd >= 0.0)
        {
            return Err(invalid(format!(
                "{key} must be an amount of USD of 0 or more, not {usd}"
            )));
        }
    }
    Ok(Some(budget))
}
