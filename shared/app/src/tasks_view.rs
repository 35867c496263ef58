//! `/tasks`: the session's sub-agent tasks (id, name, type, status, duration, tokens,
//! first line of the result), and `/tasks <id>` with one task's whole result.

use std::fmt::Write as _;

use roo_agent::subagent::{BackgroundTasks, TaskInfo};

/// The table of every sub-agent task of the session, oldest first; `None` when there
/// is none.
pub fn tasks_table(tasks: &BackgroundTasks) -> Option<String> {
    let list = tasks.list();
    if list.is_empty() {
        return None;
    }
    let mut text = String::from("sub-agent tasks\n");
    let _ = writeln!(
        text,
        "  {:<5} {:<14} {:<16} {:<10} {:>8} {:>9}  result",
        "id", "name", "type", "status", "time", "tokens"
    );
    for task in &list {
        let _ = writeln!(text, "  {}", row(task));
    }
    text.push_str("  /tasks <id> shows a task's whole result\n");
    Some(text)
}

fn row(task: &TaskInfo) -> String {
    let tokens = task.usage.context_tokens() + task.usage.output_tokens;
    let status = if task.background && task.status.as_str() == "running" {
        "running*".to_string()
    } else {
        task.status.as_str().to_string()
    };
    let first = task
        .result
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(if task.result.is_empty() {
            task.last_tool.as_deref().unwrap_or("")
        } else {
            ""
        });
    format!(
        "{:<5} {:<14} {:<16} {:<10} {:>7.1}s {:>9}  {}",
        task.id,
        clip(task.name.as_deref().unwrap_or("-"), 14),
        clip(&task.agent_type, 16),
        status,
        task.duration.as_secs_f64(),
        tokens,
        clip(first, 60)
    )
}

/// One task's details and whole result, or `None` for an unknown id. Models wrote the
/// type, description and result: their control characters are shown escaped.
pub fn task_detail(tasks: &BackgroundTasks, id: &str) -> Option<String> {
    let task = tasks.get(id)?;
    let mut text = format!(
        "task {} · {} · {} · {:.1} s · {} tool call(s) · {} turn(s)\n",
        task.id,
        roo_term::escape(&task.agent_type),
        task.status.as_str(),
        task.duration.as_secs_f64(),
        task.tool_count,
        task.turns
    );
    if !task.description.is_empty() {
        let _ = writeln!(text, "{}", roo_term::escape_text(&task.description));
    }
    if task.result.is_empty() {
        text.push_str("(no result yet)\n");
    } else {
        let _ = writeln!(text, "{}", roo_term::escape_text(task.result.trim_end()));
    }
    Some(text)
}

/// `text` on one line in at most `max` columns: control characters become spaces.
fn clip(text: &str, max: usize) -> String {
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() <= max {
        text
    } else {
        // The `…` takes the last of the `max` columns.
        roo_term::clip(&text, max.saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roo_agent::subagent::TaskStatus;
    use roo_agent::subagent::tasks::TaskEnd;
    use tokio_util::sync::CancellationToken;

    #[test]
    fn the_table_lists_every_task_and_the_detail_shows_the_whole_result() {
        let tasks = BackgroundTasks::new();
        assert_eq!(tasks_table(&tasks), None);
        let done = tasks.start(
            0,
            Some("scout".into()),
            "Explore".into(),
            "find the parser".into(),
            true,
            CancellationToken::new(),
            None,
        );
        tasks.finish(
            done.number,
            TaskEnd {
                status: TaskStatus::Completed,
                result: "\nParser is in config.rs\nsecond line\x1b[2J".into(),
                turns: 3,
            },
        );
        tasks.start(
            0,
            None,
            "fork".into(),
            String::new(),
            false,
            CancellationToken::new(),
            None,
        );
        let table = tasks_table(&tasks).unwrap();
        let rows: Vec<&str> = table.lines().collect();
        assert!(
            rows[2].contains("a1") && rows[2].contains("scout"),
            "{table}"
        );
        assert!(rows[2].contains("completed") && rows[2].contains("Parser is in config.rs"));
        assert!(rows[3].contains("a2") && rows[3].contains("fork") && rows[3].contains("running"));
        let detail = task_detail(&tasks, "A1").unwrap();
        assert!(detail.contains("second line"), "{detail}");
        assert!(
            !detail.contains('\x1b') && detail.contains("second line\\u{1b}[2J"),
            "{detail}"
        );
        assert!(task_detail(&tasks, "a9").is_none());
    }
}
