//! The followed member's detail (Enter or `f` in the live view): where it runs, its
//! task and spend, the tasks it owns, its newest events and the messages from or to it
//! still in the inboxes (summaries only).

use roo_term::Style;

use super::frame::{age, cost, place, tokens};
use super::model::TeamView;
use crate::output::escape;

/// Most of the member's own tasks listed.
const TASKS_SHOWN: usize = 5;
/// Most of the member's own events listed.
const EVENTS_SHOWN: usize = 6;

fn fit(text: &str, width: usize) -> String {
    if text.chars().count() > width {
        roo_term::clip(text, width.saturating_sub(1))
    } else {
        text.to_owned()
    }
}

/// `text` in `width` columns keeping its end (a path's last components say most).
fn tail(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width {
        return text.to_owned();
    }
    let kept: String = text.chars().skip(n + 3 - width.max(4)).collect();
    format!("  …{kept}")
}

/// The detail lines of member `index` (none if there is no such member).
pub fn lines(view: &TeamView, index: usize, width: usize, style: Style) -> Vec<String> {
    let Some(m) = view.members.get(index) else {
        return Vec::new();
    };
    let name = escape(m.name.as_str());
    let mut facts = vec![place(m)];
    if let Some(pid) = m.pid {
        facts.push(format!("pid {pid}"));
    }
    if let Some(t) = &m.agent_type {
        facts.push(format!("type {}", escape(t)));
    }
    if let Some(model) = &m.model {
        facts.push(format!("model {}", escape(model)));
    }

    let mut out = vec![style.bold(&fit(
        &format!(
            "FOLLOWING {name} ({})  {}",
            m.state.replace('_', " "),
            facts.join(", ")
        ),
        width,
    ))];
    if let Some(dir) = &m.worktree {
        out.push(tail(
            &format!("  in {}", escape(&dir.display().to_string())),
            width,
        ));
    }
    if let Some(reason) = &m.dead_reason {
        out.push(fit(&format!("  dead: {}", escape(reason)), width));
    }
    let doing = match &m.task {
        Some((id, subject)) => format!("task #{id} {}", escape(subject)),
        None => "no task".into(),
    };
    let spoke = m.last_message.map_or_else(
        || "no message in an inbox".into(),
        |t| format!("spoke {} ago", age(view.now.unix_ms() - t.unix_ms())),
    );
    out.push(fit(
        &format!(
            "  {doing}, for {}; {spoke}",
            age(view.now.unix_ms() - m.since.unix_ms())
        ),
        width,
    ));
    out.push(fit(
        &format!(
            "  spend recorded on tasks: {} tokens in {} requests, {}",
            tokens(m.usage.total_tokens()),
            m.usage.requests,
            cost(&m.usage)
        ),
        width,
    ));
    let owned: Vec<_> = view.tasks_of(&m.name).collect();
    out.push(style.bold(&fit(&format!("TASKS OF {name} ({})", owned.len()), width)));
    for t in owned.iter().take(TASKS_SHOWN) {
        out.push(fit(
            &format!(
                "  #{} {} {} {}",
                t.id,
                t.column.label(),
                cost(&t.usage),
                escape(&t.subject)
            ),
            width,
        ));
    }
    let mut recent: Vec<String> = view
        .messages
        .iter()
        .filter(|msg| msg.from == m.name || msg.to == m.name)
        .rev()
        .map(|msg| {
            fit(
                &format!(
                    "  {} {} -> {} {}: {}",
                    super::frame::clock(msg.time),
                    escape(msg.from.as_str()),
                    escape(msg.to.as_str()),
                    msg.kind,
                    escape(&msg.summary)
                ),
                width,
            )
        })
        .collect();
    let events: Vec<String> = view
        .events
        .iter()
        .rev()
        .filter(|e| e.actor.as_deref() == Some(m.name.as_str()))
        .take(EVENTS_SHOWN)
        .map(|e| {
            fit(
                &format!(
                    "  {} {} {}",
                    super::frame::clock(e.time),
                    escape(&e.kind),
                    escape(&e.text)
                ),
                width,
            )
        })
        .collect();
    if !events.is_empty() {
        out.push(style.bold(&fit(&format!("EVENTS OF {name} (newest first)"), width)));
        out.extend(events);
    }
    out.push(style.bold(&fit(
        &format!("MESSAGES FROM OR TO {name} (newest first)"),
        width,
    )));
    if recent.is_empty() {
        recent.push("  none in the inboxes".into());
    }
    out.extend(recent);
    out
}
