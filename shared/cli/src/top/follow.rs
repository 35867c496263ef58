//! The followed member's detail (Enter or `f` in the live view): where it runs, its
//! task and spend, the tasks it owns, its newest events and the messages from or to it
//! still in the inboxes (summaries only).

use roo_term::Style;

use unicode_width::UnicodeWidthChar;

use super::frame::{age, columns, cost, fit, place, tokens};
use super::model::TeamView;
use crate::output::escape;

/// Most of the member's own tasks listed.
const TASKS_SHOWN: usize = 5;
/// Most of the member's own events listed.
const EVENTS_SHOWN: usize = 6;

/// `text` in `width` columns keeping its end (a path's last components say most).
fn tail(text: &str, width: usize) -> String {
    if columns(text) <= width {
        return text.to_owned();
    }
    let room = width.max(4) - 3;
    let mut used = 0;
    let mut start = text.len();
    for (i, c) in text.char_indices().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > room {
            break;
        }
        used += w;
        start = i;
    }
    // Combining marks at the start belong to a character cut away.
    let kept = text[start..].trim_start_matches(|c: char| c.width() == Some(0));
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
        .filter(|msg| msg.from == m.name.as_str() || msg.to == m.name.as_str())
        .rev()
        .map(|msg| {
            fit(
                &format!(
                    "  {} {} -> {} {}: {}",
                    super::frame::clock(msg.time),
                    escape(&msg.from),
                    escape(&msg.to),
                    escape(&msg.kind),
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
