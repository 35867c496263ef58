//! The demo's closing summary, from what is on record: the team's task list and
//! inboxes (read before the lead deletes the team), the usage the teammates' runtime
//! charged to their tasks, and the lead's own usage.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use roo_llm::Usage;
use roo_store::{ReadFilter, TaskFilter, TaskStatus, TaskUsage, Team};

use crate::exit::{self, AppError};
use crate::render::Style;

/// The team's state as the store holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct TeamRecord {
    pub tasks_total: usize,
    pub tasks_completed: usize,
    /// Messages in every member's inbox (archived ones included), by wire type.
    pub messages: BTreeMap<&'static str, usize>,
    /// What each member spent on tasks (the teammates' runtime charges every request).
    pub spent: BTreeMap<String, TaskUsage>,
}

impl TeamRecord {
    /// Reads `team`'s tasks and inboxes.
    pub fn read(team: &Team) -> Result<TeamRecord, AppError> {
        let tasks = team
            .tasks()
            .list(&TaskFilter::default())
            .map_err(exit::store_error)?;
        let mut spent: BTreeMap<String, TaskUsage> = BTreeMap::new();
        for task in &tasks {
            for (member, usage) in &task.usage {
                let total = spent.entry(member.to_string()).or_default();
                *total = total.checked_add(usage).map_err(|why| {
                    AppError::Io(format!("failed to add up the usage of {member}: {why}"))
                })?;
            }
        }
        let config = team.config().map_err(exit::store_error)?;
        let mailbox = team.mailbox();
        let everything = ReadFilter {
            include_archived: true,
            ..ReadFilter::default()
        };
        let mut messages = BTreeMap::new();
        for member in &config.members {
            for message in mailbox
                .read(&member.name, &everything)
                .map_err(exit::store_error)?
            {
                *messages.entry(message.body.type_name()).or_insert(0) += 1;
            }
        }
        Ok(TeamRecord {
            tasks_total: tasks.len(),
            tasks_completed: tasks
                .iter()
                .filter(|t| t.status == TaskStatus::Completed)
                .count(),
            messages,
            spent,
        })
    }

    /// Whether every task is completed (and there is one).
    pub fn all_completed(&self) -> bool {
        self.tasks_total > 0 && self.tasks_completed == self.tasks_total
    }
}

/// Everything the summary shows.
#[derive(Debug, Clone)]
pub struct Summary {
    pub record: TeamRecord,
    /// The lead's usage over all its runs, and its model requests.
    pub lead: Usage,
    pub lead_requests: u64,
    /// The lead's sub-agents: (`a1 Explore`, usage, model requests).
    pub subagents: Vec<(String, Usage, u64)>,
    pub elapsed: Duration,
}

impl Summary {
    /// The summary as lines of text: tasks, messages, tokens, requests, wall time.
    pub fn render(&self, style: Style) -> String {
        let r = &self.record;
        let mut out = String::new();
        let _ = writeln!(out, "{}", style.bold("Summary"));
        let _ = writeln!(
            out,
            "  tasks      {}/{} completed",
            r.tasks_completed, r.tasks_total
        );
        let total: usize = r.messages.values().sum();
        let kinds: Vec<String> = r.messages.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(out, "  messages   {total} ({})", kinds.join(", "));
        let (lead_in, lead_out) = (self.lead.context_tokens(), self.lead.output_tokens);
        let mut tokens_in = lead_in;
        let mut tokens_out = lead_out;
        let mut per_member = vec![format!("lead {lead_in}/{lead_out}")];
        let mut requests = self.lead_requests;
        let mut per_member_requests = vec![format!("lead {}", self.lead_requests)];
        for (member, usage) in &r.spent {
            let member_in = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
            tokens_in += member_in;
            tokens_out += usage.output_tokens;
            requests += usage.requests;
            per_member.push(format!("{member} {member_in}/{}", usage.output_tokens));
            per_member_requests.push(format!("{member} {}", usage.requests));
        }
        for (label, usage, turns) in &self.subagents {
            let (child_in, child_out) = (usage.context_tokens(), usage.output_tokens);
            tokens_in += child_in;
            tokens_out += child_out;
            requests += turns;
            per_member.push(format!("{label} {child_in}/{child_out}"));
            per_member_requests.push(format!("{label} {turns}"));
        }
        let _ = writeln!(
            out,
            "  tokens     {tokens_in} in / {tokens_out} out ({})",
            per_member.join(", ")
        );
        let _ = writeln!(
            out,
            "  requests   {requests} ({})",
            per_member_requests.join(", ")
        );
        let _ = writeln!(out, "  wall time  {:.1} s", self.elapsed.as_secs_f64());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_adds_the_lead_to_what_the_teammates_charged() {
        let mut spent = BTreeMap::new();
        spent.insert(
            "alice".to_string(),
            TaskUsage {
                input_tokens: 100,
                output_tokens: 10,
                cache_read_tokens: 5,
                requests: 3,
                ..TaskUsage::default()
            },
        );
        let summary = Summary {
            record: TeamRecord {
                tasks_total: 3,
                tasks_completed: 2,
                messages: BTreeMap::from([("text", 4), ("idle_notification", 2)]),
                spent,
            },
            lead: Usage {
                input_tokens: 1000,
                output_tokens: 50,
                ..Usage::default()
            },
            lead_requests: 7,
            subagents: vec![(
                "a1 Explore".to_string(),
                Usage {
                    input_tokens: 200,
                    output_tokens: 20,
                    ..Usage::default()
                },
                2,
            )],
            elapsed: Duration::from_millis(4250),
        };
        assert_eq!(
            summary.render(Style::plain()),
            "Summary\n  tasks      2/3 completed\n  messages   6 (2 idle_notification, 4 text)\n  \
             tokens     1305 in / 80 out (lead 1000/50, alice 105/10, a1 Explore 200/20)\n  \
             requests   12 (lead 7, alice 3, a1 Explore 2)\n  wall time  4.2 s\n"
        );
        assert!(!summary.record.all_completed());
    }
}
