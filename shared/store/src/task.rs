//! Task types: the task record of the shared list, its status, lease and scope.
//!
//! A task is what a teammate claims and works on. Besides its subject, description,
//! status, owner, dependencies and metadata it carries a
//! **lease** (the claim's owner renews it; a task whose owner is gone can be reclaimed)
//! and a **scope** (`paths` it will touch; `ready` holds back tasks whose scope overlaps
//! an in-progress task's, so two teammates are not handed the same files).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::name::Name;
use crate::time::Timestamp;
use crate::usage::{MAX_USAGE_MEMBERS, TaskUsage};

/// A task id: a small integer as a string (`"1"`, `"2"`, …), never reused in a team.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Hash, Debug)]
#[serde(transparent)]
pub struct TaskId(String);

impl TaskId {
    /// Parses an id given by a user or another program: decimal digits, as issued.
    pub fn parse(raw: &str) -> Result<TaskId> {
        let raw = raw.trim();
        let digits = raw.strip_prefix('#').unwrap_or(raw);
        if digits.is_empty() || digits.len() > 19 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::InvalidTask {
                action: "parse",
                id: raw.to_owned(),
                reason: "a task id is a number such as 3".into(),
            });
        }
        Ok(TaskId(digits.trim_start_matches('0').to_owned()).or_zero())
    }

    pub(crate) fn from_number(n: u64) -> TaskId {
        TaskId(n.to_string())
    }

    fn or_zero(self) -> TaskId {
        if self.0.is_empty() {
            TaskId("0".into())
        } else {
            self
        }
    }

    /// The numeric value, for ordering.
    pub fn number(&self) -> u64 {
        self.0.parse().unwrap_or(u64::MAX)
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a task is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started.
    Pending,
    /// Claimed and being worked on.
    InProgress,
    /// Done.
    Completed,
}

impl TaskStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Completed => "completed",
        }
    }

    /// Parses a wire name (`in-progress` is accepted too).
    pub fn parse(raw: &str) -> Option<TaskStatus> {
        match raw {
            "pending" => Some(TaskStatus::Pending),
            "in_progress" | "in-progress" => Some(TaskStatus::InProgress),
            "completed" => Some(TaskStatus::Completed),
            _ => None,
        }
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The claim's lease: valid until `expires_at` unless its owner renews it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// Who holds it (same as the task's owner).
    pub owner: Name,
    /// When the claim was made.
    pub acquired_at: Timestamp,
    /// When it was last renewed.
    pub renewed_at: Timestamp,
    /// When it lapses.
    pub expires_at: Timestamp,
}

/// A note in a task's history (e.g. why it was reclaimed).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TaskNote {
    /// When.
    pub at: Timestamp,
    /// Who wrote it, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Name>,
    /// What happened.
    pub text: String,
}

/// One task of the shared list.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Task {
    /// Stable id, never reused.
    pub id: TaskId,
    /// One line: what to do.
    pub subject: String,
    /// Details.
    #[serde(default)]
    pub description: String,
    /// Present-continuous form for spinners ("Refactoring the data layer").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
    /// Status.
    pub status: TaskStatus,
    /// Who works on it.
    #[serde(default)]
    pub owner: Option<Name>,
    /// Tasks that wait on this one.
    #[serde(default)]
    pub blocks: Vec<TaskId>,
    /// Tasks this one waits on.
    #[serde(default)]
    pub blocked_by: Vec<TaskId>,
    /// Free-form data.
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Scope: paths (or globs) the task will touch, relative to the repository root.
    #[serde(default)]
    pub paths: Vec<String>,
    /// The claim's lease, while in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// History notes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<TaskNote>,
    /// Who created it (`None`: an unnamed caller, or a task older than the field). What a
    /// member may change of a task depends on it ([`crate::authority::may`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<Name>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    /// Usage and cost spent on the task, per member who spent it (see
    /// [`crate::TaskList::add_usage`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub usage: BTreeMap<Name, TaskUsage>,
    /// The task's own spending cap (else the team's default applies, see
    /// [`crate::budget`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::budget::SpendCap>,
    /// Members this version does not know (from a newer minor version), kept on rewrite.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Task {
    /// The usage of every member together.
    pub fn usage_total(&self) -> TaskUsage {
        crate::usage::usage_total(&self.usage)
    }

    /// Checks the size limits of [`crate::limits`]; `Err` says which field and the limit.
    pub fn check_limits(&self) -> std::result::Result<(), String> {
        use crate::limits::*;
        check_len("the subject", self.subject.len(), MAX_TASK_LINE)?;
        if let Some(active_form) = &self.active_form {
            check_len("the active form", active_form.len(), MAX_TASK_LINE)?;
        }
        check_len("the description", self.description.len(), MAX_TASK_TEXT)?;
        check_value(
            "the metadata",
            &serde_json::Value::Object(self.metadata.clone()),
            MAX_TASK_METADATA,
        )?;
        if self.paths.len() > MAX_TASK_PATHS {
            return Err(format!(
                "the task has {} paths; the limit is {MAX_TASK_PATHS}",
                self.paths.len()
            ));
        }
        for path in &self.paths {
            check_len("a path", path.len(), MAX_TASK_PATH)?;
        }
        for note in &self.notes {
            check_len("a note", note.text.len(), MAX_TASK_TEXT)?;
        }
        if self.usage.len() > MAX_USAGE_MEMBERS {
            return Err(format!(
                "the task records the usage of {} members; the limit is {MAX_USAGE_MEMBERS}",
                self.usage.len()
            ));
        }
        if let Some(cap) = &self.budget {
            cap.check()?;
        }
        for (member, usage) in &self.usage {
            usage
                .check()
                .map_err(|reason| format!("{member}'s {reason}"))?;
        }
        Ok(())
    }
}

/// Checks a one-line field of a task (its subject, its active form) before it is written:
/// no line breaks and no control characters (a line is shown on one line, e.g. in a
/// lead's assignment, where a second line would read as someone else's words). Only
/// writes are checked: a task written before the check still loads. `Err` says what to do.
pub fn check_line(what: &str, value: &str) -> std::result::Result<(), String> {
    match value
        .chars()
        .find(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        Some(c) => Err(format!(
            "{what} contains {}; it must be one line without control characters (put details \
             in the description)",
            match c {
                '\n' | '\r' | '\u{2028}' | '\u{2029}' | '\u{85}' => "a line break".to_owned(),
                c => format!("the control character U+{:04X}", u32::from(c)),
            }
        )),
        None => Ok(()),
    }
}

/// Whether two scopes share a file (conservatively: a glob stands for everything under its
/// literal prefix). A task without paths has an unknown scope and conflicts with nothing.
pub fn scopes_overlap(a: &[String], b: &[String]) -> bool {
    a.iter().any(|x| b.iter().any(|y| paths_overlap(x, y)))
}

/// Whether two declared paths may name a common file.
pub fn paths_overlap(a: &str, b: &str) -> bool {
    let (a, b) = (literal_prefix(a), literal_prefix(b));
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// The path components before the first one containing a glob character.
fn literal_prefix(path: &str) -> Vec<&str> {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .take_while(|c| !c.contains(['*', '?', '[', '{']))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_parse() {
        assert_eq!(TaskId::parse("12").unwrap().as_str(), "12");
        assert_eq!(TaskId::parse("#7").unwrap().as_str(), "7");
        assert_eq!(TaskId::parse("007").unwrap().as_str(), "7");
        for bad in ["", "x", "-1", "1.5", "../1"] {
            assert!(TaskId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn overlap_is_by_component_prefix_and_glob_prefix() {
        assert!(paths_overlap("src/auth", "src/auth/login.rs"));
        assert!(paths_overlap("./src/auth/", "src/auth"));
        assert!(!paths_overlap("src/auth", "src/authz"));
        assert!(!paths_overlap("src/a.rs", "src/b.rs"));
        assert!(paths_overlap("src/**/*.rs", "src/x/y.rs"));
        assert!(!paths_overlap("src/*.rs", "tests/x.rs"));
        assert!(paths_overlap("**/*.md", "docs/x.md"));
        let a = vec!["docs/".to_owned(), "src/a.rs".to_owned()];
        assert!(scopes_overlap(&a, &["src/a.rs".to_owned()]));
        assert!(!scopes_overlap(&a, &[]));
    }
}
