//! Attributing a teammate's model spend to the task it works on.
//!
//! The loop reports each model response as `AgentEvent::Usage` with the agent's running
//! total; the meter adds the difference since the last report (so a compaction request
//! in between is counted too) as one request, priced at the agent's model, to the task
//! the teammate owns at that moment ([`roo_store::TaskList::add_usage`], member = the
//! teammate): its in-progress task (the most recently claimed if several), else the task
//! it last charged while it still owns it (the request after a `TaskUpdate completed`).
//! Spend with no such task (the request that decided to claim one) is carried to the
//! next task it owns in the same run, so nothing spent while working on a task is lost;
//! a run that never owns a task charges nothing.

use roo_llm::{PriceTable, Usage};
use roo_store::{Name, TaskFilter, TaskId, TaskList, TaskStatus, TaskUsage};

pub(crate) struct UsageMeter {
    tasks: TaskList,
    me: Name,
    prices: PriceTable,
    model: String,
    last_total: Usage,
    current: Option<TaskId>,
    carry: TaskUsage,
}

impl UsageMeter {
    pub(crate) fn new(tasks: TaskList, me: Name, prices: PriceTable, model: String) -> UsageMeter {
        UsageMeter {
            tasks,
            me,
            prices,
            model,
            last_total: Usage::default(),
            current: None,
            carry: TaskUsage::default(),
        }
    }

    /// A run starts: spend of earlier runs that found no task is dropped (it was not
    /// spent on any task).
    pub(crate) fn new_run(&mut self) {
        if self.carry != TaskUsage::default() {
            tracing::info!(member = %self.me, requests = self.carry.requests, "usage of a run without a task is not charged to any");
        }
        self.carry = TaskUsage::default();
    }

    /// Records the spend up to the agent's running `total`.
    pub(crate) async fn record(&mut self, total: Usage) {
        let delta = Usage {
            input_tokens: total
                .input_tokens
                .saturating_sub(self.last_total.input_tokens),
            output_tokens: total
                .output_tokens
                .saturating_sub(self.last_total.output_tokens),
            cache_read_tokens: total
                .cache_read_tokens
                .saturating_sub(self.last_total.cache_read_tokens),
            cache_write_tokens: total
                .cache_write_tokens
                .saturating_sub(self.last_total.cache_write_tokens),
        };
        self.last_total = total;
        let spend = TaskUsage {
            input_tokens: delta.input_tokens,
            output_tokens: delta.output_tokens,
            cache_read_tokens: delta.cache_read_tokens,
            cache_write_tokens: delta.cache_write_tokens,
            requests: 1,
            cost_usd: self.prices.cost(&self.model, &delta),
        };
        let spend = match self.carry.checked_add(&spend) {
            Ok(sum) => sum,
            Err(why) => {
                tracing::warn!(member = %self.me, %why, "dropped usage that could not be added up");
                spend
            }
        };
        let (tasks, me, current) = (self.tasks.clone(), self.me.clone(), self.current.clone());
        let charged = tokio::task::spawn_blocking(move || {
            let target = target_task(&tasks, &me, current)?;
            match target {
                Some(id) => tasks.add_usage(&id, &me, &spend).map(|_| Some(id)),
                None => Ok(None),
            }
        })
        .await;
        match charged {
            Ok(Ok(Some(id))) => {
                self.current = Some(id);
                self.carry = TaskUsage::default();
            }
            Ok(Ok(None)) => self.carry = spend,
            Ok(Err(e)) => {
                tracing::warn!(member = %self.me, error = %e, "failed to add usage to the task");
                self.carry = spend;
            }
            Err(e) => tracing::warn!(member = %self.me, error = %e, "failed to add usage"),
        }
    }
}

/// The task to charge: the member's in-progress task (latest claim), else `current` if
/// the member still owns it.
fn target_task(
    tasks: &TaskList,
    me: &Name,
    current: Option<TaskId>,
) -> roo_store::Result<Option<TaskId>> {
    let owned = tasks.list(&TaskFilter {
        owner: Some(me.clone()),
        ..TaskFilter::default()
    })?;
    let working = owned
        .iter()
        .filter(|t| t.status == TaskStatus::InProgress)
        .max_by_key(|t| {
            (
                t.lease.as_ref().map(|l| l.acquired_at.to_string()),
                t.id.number(),
            )
        });
    if let Some(task) = working {
        return Ok(Some(task.id.clone()));
    }
    Ok(current.filter(|id| owned.iter().any(|t| &t.id == id)))
}
