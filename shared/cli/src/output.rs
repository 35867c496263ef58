//! Output helpers: colour only on a TTY without `NO_COLOR`, JSON printing, and the
//! human-readable forms of messages and tasks.

use std::io::{self, IsTerminal, Write};

use roo_store::{Message, Task, TaskStatus};
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
        m.to,
        style.cyan(m.body.type_name()),
        style.yellow(state)
    )?;
    if let Some(summary) = &m.summary {
        writeln!(out, "  summary: {summary}")?;
    }
    let typed = serde_json::to_value(&m.body).unwrap_or_default();
    if let Some(fields) = typed.as_object() {
        for (key, value) in fields.iter().filter(|(k, _)| k.as_str() != "type") {
            let shown = match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            writeln!(out, "  {key}: {shown}")?;
        }
    }
    for line in m.text.lines() {
        writeln!(out, "  {line}")?;
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
    let owner = t.owner.as_ref().map_or(String::new(), |o| format!(" @{o}"));
    let blocked = if t.blocked_by.is_empty() {
        String::new()
    } else {
        let ids: Vec<&str> = t.blocked_by.iter().map(|i| i.as_str()).collect();
        style.dim(&format!(" (depends on {})", ids.join(", ")))
    };
    writeln!(
        out,
        "{:>4}  {status}{owner}  {}{blocked}",
        style.bold(t.id.as_str()),
        t.subject
    )
}

/// A task in full.
pub fn write_task(out: &mut impl Write, style: Style, t: &Task) -> io::Result<()> {
    write_task_line(out, style, t)?;
    if !t.description.is_empty() {
        for line in t.description.lines() {
            writeln!(out, "      {line}")?;
        }
    }
    let ids = |v: &[roo_store::TaskId]| v.iter().map(|i| i.as_str()).collect::<Vec<_>>().join(", ");
    if !t.blocks.is_empty() {
        writeln!(out, "      blocks: {}", ids(&t.blocks))?;
    }
    if !t.paths.is_empty() {
        writeln!(out, "      paths: {}", t.paths.join(", "))?;
    }
    if let Some(lease) = &t.lease {
        writeln!(
            out,
            "      lease: {} until {}",
            lease.owner, lease.expires_at
        )?;
    }
    if !t.metadata.is_empty() {
        writeln!(
            out,
            "      metadata: {}",
            serde_json::Value::Object(t.metadata.clone())
        )?;
    }
    for note in &t.notes {
        writeln!(
            out,
            "      note {}: {}",
            style.dim(&note.at.to_string()),
            note.text
        )?;
    }
    Ok(())
}
