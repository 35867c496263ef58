//! Output helpers: JSON printing and the human-readable forms of messages and tasks
//! (styles and escaping come from `roo-term`).

use std::io::{self, Write};

use roo_store::{Message, Task, TaskStatus, TaskUsage};
use serde::Serialize;

pub use roo_term::Style;

/// Whether this CLI runs relayed for an agent's command (`ROO_RELAYED_BY` is set): its
/// output goes back into that agent's model input, so what other agents wrote in it is
/// [made safe for a model](roo_store::model_safe).
fn relayed() -> bool {
    static RELAYED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *RELAYED.get_or_init(|| std::env::var_os(roo_store::relay::ENV_RELAYED_BY).is_some())
}

/// Untrusted text for one line of human output: control and invisible characters as
/// escapes ([`roo_term::escape`]); relayed for an agent, also every `<` as `&lt;` (so
/// the text can open or close none of the runtime's wrappers in that agent's input).
pub fn escape(text: &str) -> String {
    let shown = roo_term::escape(text);
    if relayed() {
        roo_store::model_safe(&shown)
    } else {
        shown
    }
}

/// Prints `value` as pretty JSON plus a newline.
pub fn print_json<T: Serialize + ?Sized>(out: &mut impl Write, value: &T) -> io::Result<()> {
    let json = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    writeln!(out, "{}", json_shown(json))
}

/// Prints `value` as one line of JSON.
pub fn print_json_line<T: Serialize + ?Sized>(out: &mut impl Write, value: &T) -> io::Result<()> {
    let json = serde_json::to_string(value).map_err(io::Error::other)?;
    writeln!(out, "{}", json_shown(json))
}

/// Prints `line`, one line of JSON made elsewhere (such as an event's line as stored),
/// as [`print_json_line`] prints its own.
pub fn print_json_text(out: &mut impl Write, line: &str) -> io::Result<()> {
    writeln!(out, "{}", json_shown(line.to_owned()))
}

/// `json` as printed: relayed for an agent, every `<` and every invisible or control
/// character serde leaves raw (DEL, C1, bidi, zero-width, tags) written as a `\uXXXX`
/// escape — still valid JSON that parses to the same strings (such characters occur
/// only inside strings), but no raw tag reaches the agent's model.
fn json_shown(json: String) -> String {
    if !relayed() || !json.chars().any(json_escaped) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if json_escaped(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether [`json_shown`] escapes `c` (serde already escapes the C0 controls in strings;
/// the newlines and spaces outside them are kept).
fn json_escaped(c: char) -> bool {
    c == '<' || (c >= '\u{7f}' && roo_term::hidden_char(c))
}

/// A message for people: a header line, the summary, then the text indented.
pub fn write_message(out: &mut impl Write, style: Style, m: &Message) -> io::Result<()> {
    let state = if m.read { "" } else { " (unread)" };
    writeln!(
        out,
        "{} {} {} -> {} [{}]{}",
        style.dim(&m.timestamp.to_string()),
        style.dim(m.id.as_str()),
        style.bold(m.from.as_str()),
        escape(&m.to),
        style.cyan(m.body.type_name()),
        style.yellow(state)
    )?;
    if let Some(summary) = &m.summary {
        writeln!(out, "  summary: {}", escape(summary))?;
    }
    let typed = serde_json::to_value(&m.body).unwrap_or_default();
    if let Some(fields) = typed.as_object() {
        for (key, value) in fields.iter().filter(|(k, _)| k.as_str() != "type") {
            let shown = match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            writeln!(out, "  {}: {}", escape(key), escape(&shown))?;
        }
    }
    for line in m.text.lines() {
        writeln!(out, "  {}", escape(line))?;
    }
    Ok(())
}

/// A task as one line: id, status, owner, subject, dependencies.
pub fn write_task_line(out: &mut impl Write, style: Style, t: &Task) -> io::Result<()> {
    let status = match t.status {
        TaskStatus::Pending => style.yellow("pending"),
        TaskStatus::InProgress => style.cyan("in_progress"),
        TaskStatus::Completed => style.green("completed"),
    };
    let owner = t
        .owner
        .as_ref()
        .map_or(String::new(), |o| format!(" @{}", escape(o.as_str())));
    let blocked = if t.blocked_by.is_empty() {
        String::new()
    } else {
        let ids: Vec<&str> = t.blocked_by.iter().map(|i| i.as_str()).collect();
        style.dim(&format!(" (depends on {})", escape(&ids.join(", "))))
    };
    writeln!(
        out,
        "{:>4}  {status}{owner}  {}{blocked}",
        style.bold(&escape(t.id.as_str())),
        escape(&t.subject)
    )
}

/// A task in full.
pub fn write_task(out: &mut impl Write, style: Style, t: &Task) -> io::Result<()> {
    write_task_line(out, style, t)?;
    if !t.description.is_empty() {
        for line in t.description.lines() {
            writeln!(out, "      {}", escape(line))?;
        }
    }
    let ids = |v: &[roo_store::TaskId]| v.iter().map(|i| i.as_str()).collect::<Vec<_>>().join(", ");
    if !t.blocks.is_empty() {
        writeln!(out, "      blocks: {}", escape(&ids(&t.blocks)))?;
    }
    if !t.paths.is_empty() {
        writeln!(out, "      paths: {}", escape(&t.paths.join(", ")))?;
    }
    if let Some(lease) = &t.lease {
        writeln!(
            out,
            "      lease: {} until {}",
            escape(lease.owner.as_str()),
            lease.expires_at
        )?;
    }
    if !t.metadata.is_empty() {
        writeln!(
            out,
            "      metadata: {}",
            escape(&serde_json::Value::Object(t.metadata.clone()).to_string())
        )?;
    }
    for (member, usage) in &t.usage {
        writeln!(
            out,
            "      usage {}: {}",
            escape(member.as_str()),
            usage_line(usage)
        )?;
    }
    if t.usage.len() > 1 {
        writeln!(out, "      usage total: {}", usage_line(&t.usage_total()))?;
    }
    for note in &t.notes {
        writeln!(
            out,
            "      note {}: {}",
            style.dim(&note.at.to_string()),
            escape(&note.text)
        )?;
    }
    Ok(())
}

/// `1200 in, 340 out, 5000 cache read, 0 cache write, 3 requests, $0.0123`.
pub fn usage_line(u: &TaskUsage) -> String {
    let cost = match u.cost_usd {
        Some(cost) => format!(", ${cost:.4}"),
        None => String::new(),
    };
    format!(
        "{} in, {} out, {} cache read, {} cache write, {} request{}{cost}",
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        u.requests,
        if u.requests == 1 { "" } else { "s" }
    )
}
