//! What a teammate reports when a run ends: its own roster entry and tasks (busy, idle,
//! shut down), the one compact idle notification to the lead and its fingerprint (sent
//! only when something changed, with at most [`MAX_ANSWER_ONLY_NOTICES`] answer-only
//! notifications in a row), and the config's `task_completed` and `teammate_idle` hooks.
//! Apart from the loop because it is the teammate's whole reporting contract with its lead.

use roo_agent::CommandHooks;
use roo_agent::event::RunOutcome;
use roo_store::{
    MemberState, MessageBody, Name, Outgoing, Task, TaskFilter, TaskId, TaskStatus, Team,
};
use tokio_util::sync::CancellationToken;

use crate::event::{TeamEvent, TeamEventSender, one_line};

use super::{Activity, TeammateExit};

/// How long a teammate retries recording its idle state before it stops.
pub const STATE_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// How a teammate's last run ended and what its model answered last, for the idle
/// notification: the answer is the teammate's report, so reporting needs no SendMessage.
pub struct LastRun {
    pub outcome: RunOutcome,
    pub answer: String,
}

/// At most this many characters of a run's final answer go into the idle notification
/// (the rest is cut with a mark): a report, not a transcript.
pub const IDLE_ANSWER_CHARS: usize = 2_000;

/// The teammate's own roster entry and tasks.
pub(super) struct OwnEntry {
    pub(super) team: Team,
    pub(super) me: Name,
    pub(super) events: Option<TeamEventSender>,
    /// Notifications in a row that carried only a new answer (see [`AnswerStreak`]).
    pub(super) answers: std::sync::Mutex<AnswerStreak>,
    /// What it last recorded (busy or idle), held while it records.
    pub(super) activity: Activity,
}

/// At most this many idle notifications in a row may carry only a new final answer (the
/// tasks and the way the run ended unchanged): a question of the lead and a follow-up
/// get their answers, but a lead that thanks every report and a teammate that answers
/// every thanks stop waking each other after that. A change of tasks or outcome starts
/// the count again.
pub const MAX_ANSWER_ONLY_NOTICES: u32 = 2;

/// The fingerprint without the answer at the last idle, the fingerprint used then, and
/// how many idles in a row differed from the one before only by their answer.
#[derive(Default)]
pub(super) struct AnswerStreak {
    base: Option<String>,
    used: Option<String>,
    count: u32,
}

impl AnswerStreak {
    /// Whether the next idle's answer goes unforwarded if the run changes no task.
    pub(super) fn next_withheld(&self) -> bool {
        self.used.is_some() && self.count >= MAX_ANSWER_ONLY_NOTICES
    }

    /// The fingerprint of this idle: `full` (with the answer) unless the streak of
    /// answer-only changes is spent, then the one used last, which the store finds
    /// unchanged and so sends nothing.
    fn fingerprint(&mut self, base: String, full: String) -> String {
        if self.base.as_deref() == Some(base.as_str()) {
            // The same answer as the notification before: the store sends nothing, so
            // it is no answer-only notification and does not use up the streak.
            if self.used.as_deref() == Some(full.as_str()) {
                return full;
            }
            self.count += 1;
        } else {
            self.base = Some(base);
            self.count = 0;
        }
        let used = match &self.used {
            Some(used) if self.count > MAX_ANSWER_ONLY_NOTICES => used.clone(),
            _ => full,
        };
        self.used = Some(used.clone());
        used
    }
}

impl OwnEntry {
    pub(super) async fn set_active(&self, active: bool) {
        let mut recorded = self.activity.lock().await;
        *recorded = active;
        let (team, me) = (self.team.clone(), self.me.clone());
        match tokio::task::spawn_blocking(move || team.set_active(me.as_str(), active)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(member = %self.me, error = %e, "failed to record the state")
            }
            Err(e) => tracing::warn!(member = %self.me, error = %e, "failed to record the state"),
        }
        self.state(if active {
            MemberState::Busy
        } else {
            MemberState::Idle
        });
    }

    /// Records that this member stops at its lead's request (`Team::record_shut_down`:
    /// the lead then says it shut down, not that it died) and returns the exit.
    pub(super) async fn shut_down(&self) -> TeammateExit {
        // After a re-join under way, which would otherwise clear the record.
        let _recorded = self.activity.lock().await;
        let (team, me) = (self.team.clone(), self.me.clone());
        match tokio::task::spawn_blocking(move || team.record_shut_down(&me)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(member = %self.me, error = %e, "failed to record the shutdown")
            }
            Err(e) => {
                tracing::warn!(member = %self.me, error = %e, "failed to record the shutdown")
            }
        }
        TeammateExit::ShutDown
    }

    fn state(&self, state: MemberState) {
        if let Some(events) = &self.events {
            events.send(TeamEvent::MemberState {
                name: self.me.clone(),
                state,
            });
        }
    }

    /// The tasks this member owns (any status), in id order; empty if unreadable.
    pub(super) async fn owned_tasks(&self) -> Vec<Task> {
        let (tasks, me) = (self.team.tasks(), self.me.clone());
        let filter = TaskFilter {
            owner: Some(me),
            ..TaskFilter::default()
        };
        match tokio::task::spawn_blocking(move || tasks.list(&filter)).await {
            Ok(Ok(tasks)) => tasks,
            Ok(Err(e)) => {
                tracing::warn!(member = %self.me, error = %e, "failed to read the task list");
                Vec::new()
            }
            Err(_) => Vec::new(),
        }
    }

    /// `is_active: false` and, if something changed since the last one, one
    /// `idle_notification` to the lead. Failures are logged: an idle teammate that
    /// could not tell the lead still waits for messages.
    pub(super) async fn go_idle(
        &self,
        last: Option<&LastRun>,
        before: &[Task],
    ) -> Result<Vec<Task>, String> {
        let now = self.owned_tasks().await;
        let (base, full) = (
            idle_fingerprint(last, &now, false),
            idle_fingerprint(last, &now, true),
        );
        let fingerprint = match self.answers.lock() {
            Ok(mut streak) => streak.fingerprint(base, full),
            Err(_) => full,
        };
        let completed = newly_completed(before, &now);
        let text = idle_text(&self.me, last, &now);
        let notice = Outgoing::new(
            MessageBody::IdleNotification {
                completed_task_id: completed.map(|id| id.to_string()),
            },
            text,
        )
        .with_summary(match completed {
            Some(id) => format!("idle, completed task {id}"),
            None => "idle".to_string(),
        });
        // Retried for a while (a full disk may clear); a state that cannot be recorded
        // at all ends the teammate instead of leaving it "busy" for ever.
        let deadline = tokio::time::Instant::now() + STATE_RETRY_FOR;
        loop {
            // Held for one attempt, not across the retries: a member declared dead
            // meanwhile has its writes refused until the presence keeper joins it again,
            // which takes this lock.
            let mut recorded = self.activity.lock().await;
            *recorded = false;
            let (team, me, fingerprint, notice) = (
                self.team.clone(),
                self.me.clone(),
                fingerprint.clone(),
                notice.clone(),
            );
            let error = match tokio::task::spawn_blocking(move || {
                team.become_idle(&me, &fingerprint, notice)
            })
            .await
            {
                Ok(Ok(idle)) => {
                    tracing::info!(member = %self.me, notified = idle.sent.is_some(), "idle");
                    break;
                }
                Ok(Err(e)) => e.to_string(),
                Err(e) => e.to_string(),
            };
            drop(recorded);
            tracing::warn!(member = %self.me, %error, "failed to go idle");
            if tokio::time::Instant::now() >= deadline {
                return Err(error);
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        self.state(MemberState::Idle);
        Ok(now
            .into_iter()
            .filter(|t| t.status == TaskStatus::Completed)
            .filter(|t| {
                !before
                    .iter()
                    .any(|b| b.id == t.id && b.status == TaskStatus::Completed)
            })
            .collect())
    }
}

/// The config's `task_completed` hooks for each task the run completed, then its
/// `teammate_idle` hooks. Failures go to the log: nobody watches an idle teammate.
pub(super) async fn fire_team_hooks(
    hooks: &CommandHooks,
    me: &Name,
    completed: &[Task],
    cancel: &CancellationToken,
) {
    let mut failures = Vec::new();
    for task in completed {
        let id = task.id.to_string();
        failures.extend(
            hooks
                .task_completed(&id, &task.subject, me.as_str(), cancel)
                .await,
        );
    }
    failures.extend(hooks.teammate_idle(me.as_str(), cancel).await);
    for failure in failures {
        tracing::warn!(member = %me, "{failure}");
    }
}

/// What an idle notification's fingerprint covers: how the last run ended (its kind,
/// not its text), the id and status of every task the member owns and, with
/// `with_answer`, the run's final answer (the report). Claiming, completing or releasing
/// a task, a run ending differently (an error, the turn limit) or a new answer notify
/// the lead again; a run that changes none of them does not. The answer counts for at
/// most [`MAX_ANSWER_ONLY_NOTICES`] notifications in a row that differ only by it (the
/// teammate loop decides), which breaks notification ping-pong (a lead thanking every
/// report, a teammate answering every thanks). FNV-1a 64 over a canonical text, so the value is
/// stable across builds and survives a restart in the team config.
pub fn idle_fingerprint(last: Option<&LastRun>, owned: &[Task], with_answer: bool) -> String {
    let mut canonical = String::from("v2;");
    canonical.push_str(match last.map(|l| &l.outcome) {
        None => "none",
        Some(RunOutcome::Completed) => "completed",
        Some(RunOutcome::MaxTurns { .. }) => "max_turns",
        Some(RunOutcome::Cancelled) => "cancelled",
        Some(RunOutcome::UnknownTools { .. }) => "unknown_tools",
        Some(RunOutcome::MalformedToolCalls { .. }) => "malformed_tool_calls",
        Some(RunOutcome::Error { .. }) => "error",
        Some(RunOutcome::Stopped { .. }) => "stopped",
        Some(RunOutcome::OverBudget { .. }) => "over_budget",
    });
    for task in owned {
        canonical.push_str(&format!(";{}={}", task.id, task.status.as_str()));
    }
    // A new answer is news for the lead even when the tasks did not change.
    if let Some(answer) = last
        .filter(|_| with_answer)
        .map(|l| l.answer.trim())
        .filter(|a| !a.is_empty())
    {
        canonical.push_str(";answer=");
        canonical.push_str(answer);
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in canonical.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("fnv1a64:{hash:016x}")
}

/// The highest-numbered task that is completed now and was not before the run.
fn newly_completed<'a>(before: &[Task], now: &'a [Task]) -> Option<&'a TaskId> {
    now.iter()
        .filter(|t| t.status == TaskStatus::Completed)
        .filter(|t| {
            !before
                .iter()
                .any(|b| b.id == t.id && b.status == TaskStatus::Completed)
        })
        .max_by_key(|t| t.id.number())
        .map(|t| &t.id)
}

/// The notification's text: one line for the outcome and the tasks, then the run's
/// final answer (cut at [`IDLE_ANSWER_CHARS`]), if it gave one.
fn idle_text(me: &Name, last: Option<&LastRun>, owned: &[Task]) -> String {
    let outcome = match last {
        None => "waiting for messages".to_string(),
        Some(last) => format!("last run {}", one_line(&last.outcome.describe(), 200)),
    };
    let open: Vec<String> = owned
        .iter()
        .filter(|t| t.status != TaskStatus::Completed)
        .map(|t| format!("#{} {}", t.id, t.status.as_str()))
        .collect();
    let tasks = if open.is_empty() {
        "no open tasks".to_string()
    } else {
        format!("open tasks: {}", open.join(", "))
    };
    let head = format!("{me} is idle: {outcome}; {tasks}.");
    match last.map(|l| l.answer.trim()).filter(|a| !a.is_empty()) {
        None => head,
        Some(answer) => {
            let cut = roo_term::clip_with(answer, IDLE_ANSWER_CHARS, " […]");
            format!("{head}\nIts final answer:\n{cut}")
        }
    }
}

#[cfg(test)]
mod answer_streak_tests {
    use super::{AnswerStreak, MAX_ANSWER_ONLY_NOTICES};

    /// What the store does with a fingerprint: sends a notification when it differs from
    /// the one stored, and stores it.
    fn sent(stored: &mut Option<String>, fingerprint: String) -> bool {
        let changed = stored.as_deref() != Some(fingerprint.as_str());
        *stored = Some(fingerprint);
        changed
    }

    /// The doc: "at most two notifications in a row may differ only by their answer". An
    /// idle whose answer repeats the last one sends nothing and must not use up the streak:
    /// the first report, a repeated answer (nothing sent), then two new answers must all
    /// notify (the first report and two answer-only notifications).
    #[test]
    fn a_repeated_answer_that_sends_nothing_does_not_use_up_the_streak() {
        let mut streak = AnswerStreak::default();
        let mut stored = None;
        let base = || "base".to_string();
        let mut notices = 0;
        for answer in ["report", "ok", "ok", "the word is quokka"] {
            if sent(
                &mut stored,
                streak.fingerprint(base(), format!("full:{answer}")),
            ) {
                notices += 1;
            }
        }
        assert_eq!(
            notices,
            1 + MAX_ANSWER_ONLY_NOTICES,
            "a repeated answer that sent nothing counted as an answer-only notification"
        );
    }

    /// And the cap still holds: a fourth new answer in a row is not sent.
    #[test]
    fn the_streak_still_stops_the_ping_pong() {
        let mut streak = AnswerStreak::default();
        let mut stored = None;
        let sends: Vec<bool> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|answer| {
                sent(
                    &mut stored,
                    streak.fingerprint("base".into(), format!("full:{answer}")),
                )
            })
            .collect();
        assert_eq!(sends, [true, true, true, false, false]);
        // A change of tasks starts the count again.
        assert!(sent(
            &mut stored,
            streak.fingerprint("other".into(), "full:f".into())
        ));
    }
}
