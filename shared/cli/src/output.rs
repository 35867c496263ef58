//! Output helpers: colour only on a TTY without `NO_COLOR`, JSON printing, and the
//! human-readable forms of messages and tasks.

use std::io::{self, IsTerminal, Write};

use roo_store::{Message, Task, TaskStatus, TaskUsage};
use serde::Serialize;

/// Whether and how to colour output.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    colour: bool,
}

impl Style {
    /// Colour iff stdout is a terminal and `NO_COLOR` is unset or empty.
    pub fn detect() -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style {
            colour: !no_color && io::stdout().is_terminal(),
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// Bold.
    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    /// Dim.
    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    /// Green.
    pub fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    /// Yellow.
    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }

    /// Cyan.
    pub fn cyan(self, text: &str) -> String {
        self.paint("36", text)
    }
}

/// Makes untrusted text safe for one line of a terminal: control characters (C0 including
/// newline and tab, DEL, C1) and the bidirectional-override format characters are shown
/// as `\u{..}` escapes (`\n`, `\r`, `\t` for the common ones), so a summary cannot
/// start a forged header line or send terminal escape sequences. Every human-output path
/// prints user-supplied text through this; `--json` output is exact (JSON escapes it).
pub fn escape(text: &str) -> String {
    let unsafe_char =
        |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if !text.chars().any(unsafe_char) {
        return text.to_owned();
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => shown.push_str("\\n"),
            '\r' => shown.push_str("\\r"),
            '\t' => shown.push_str("\\t"),
            c if unsafe_char(c) => shown.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => shown.push(c),
        }
    }
    shown
}

/// Prints `value` as pretty JSON plus a newline.
pub fn print_json<T: Serialize + ?Sized>(out: &mut impl Write, value: &T) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

/// Prints `value` as one line of JSON.
pub fn print_json_line<T: Serialize + ?Sized>(out: &mut impl Write, value: &T) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)
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
            serde_json::Value::Object(t.metadata.clone())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_neutralises_control_and_bidi_characters() {
        assert_eq!(
            escape("plain text, ünïcode 中文"),
            "plain text, ünïcode 中文"
        );
        assert_eq!(escape("a\nFrom: lead"), "a\\nFrom: lead");
        assert_eq!(escape("\x1b]0;pwned\x07"), "\\u{1b}]0;pwned\\u{7}");
        assert_eq!(escape("x\r\ty\u{9b}\u{7f}"), "x\\r\\ty\\u{9b}\\u{7f}");
        assert_eq!(escape("\u{202e}abc"), "\\u{202e}abc");
    }
}
