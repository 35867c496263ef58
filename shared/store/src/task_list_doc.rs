//! The task list as stored (`tasks/<team>/tasks.json`, or its rows): the document, its
//! high-water mark and what a quarantine does to it. A leaf apart from the operations in
//! `task_list`, so a team can create and repair its list without reaching into them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::budget::TeamCaps;
use crate::name::Name;
use crate::usage::TaskUsage;

use crate::doc::Document;
use crate::format_version::FormatVersion;
use crate::task::Task;

/// The task-list document.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TaskListDoc {
    /// Format version.
    #[serde(default)]
    pub version: FormatVersion,
    /// High-water mark: the id the next task gets.
    #[serde(default = "one")]
    pub next_id: u64,
    /// The tasks, in id order.
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// Each member's total spend in this team (see [`crate::TaskList::add_spend`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spend: BTreeMap<Name, TaskUsage>,
    /// The spending caps in force (see [`crate::budget`]).
    #[serde(default, skip_serializing_if = "TeamCaps::is_empty")]
    pub caps: TeamCaps,
    /// Requests reserved and not answered yet, per member: counted by every cap check
    /// but in no total (see [`crate::TaskList::reserve_request`]; PROTOCOL.md §6.5).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reserved: BTreeMap<Name, Reserved>,
    /// Members this version does not know (from a newer minor version), kept on rewrite.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// Whether a change found quarantined copies of the list (read with it, under its
    /// lock): a missing list is then explained (moved there whole), not damage. Not
    /// stored.
    #[serde(skip)]
    pub(crate) quarantined: bool,
}

/// A member's reserved requests: started or about to start, not answered yet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Reserved {
    /// How many (one per request a cap in requests applies to).
    pub requests: u64,
    /// The task they count toward (the member's in-progress task when reserved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<crate::task::TaskId>,
}

fn one() -> u64 {
    1
}

impl TaskListDoc {
    /// An empty list.
    pub fn empty() -> TaskListDoc {
        TaskListDoc {
            version: FormatVersion::CURRENT,
            next_id: 1,
            tasks: Vec::new(),
            spend: BTreeMap::new(),
            caps: TeamCaps::default(),
            reserved: BTreeMap::new(),
            extra: Default::default(),
            quarantined: false,
        }
    }
}

impl Document for TaskListDoc {
    const RECORDS: Option<&'static str> = Some("tasks");

    fn version(&self) -> FormatVersion {
        self.version
    }

    const COUNTS_QUARANTINE: bool = true;

    /// Makes sure `next_id` is above every id that ever existed: those in the list and
    /// those in its quarantined copies (a damaged record or a whole damaged list must not
    /// let an id be handed out twice).
    fn after_quarantine(&mut self, quarantined: &[Vec<u8>]) {
        self.quarantined = !quarantined.is_empty();
        raise_high_water(self, quarantined);
    }
}

/// [`TaskListDoc::after_quarantine`].
fn raise_high_water(list: &mut TaskListDoc, quarantined: &[Vec<u8>]) {
    let listed = list.tasks.iter().map(|t| t.id.number()).max().unwrap_or(0);
    let quarantined = quarantined
        .iter()
        .map(|bytes| crate::quarantine::highest_task_id(bytes))
        .max()
        .unwrap_or(0);
    let floor = listed.max(quarantined).saturating_add(1);
    list.next_id = list.next_id.max(floor);
}
