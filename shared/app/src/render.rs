//! Terminal rendering of agent events: streamed text, one-line tool summaries,
//! colours only on a terminal and never with `NO_COLOR`.

use std::io::Write;

use roo_agent::event::{AgentEvent, CompactionMethod, Outcome};

pub use roo_term::Style;

pub mod interleaved;

/// Writes to the terminal in raw mode, where `\n` alone does not return the
/// carriage: every newline becomes `\r\n`.
pub struct RawWriter<W: Write> {
    inner: W,
}

impl<W: Write> RawWriter<W> {
    pub fn new(inner: W) -> Self {
        Self { inner }
    }
}

impl<W: Write> Write for RawWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut start = 0;
        for (i, &b) in buf.iter().enumerate() {
            if b == b'\n' {
                self.inner.write_all(&buf[start..i])?;
                self.inner.write_all(b"\r\n")?;
                start = i + 1;
            }
        }
        self.inner.write_all(&buf[start..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Renders the event stream of runs in the interactive terminal.
pub struct Renderer<W: Write> {
    out: W,
    style: Style,
    /// Whether the cursor is in the middle of streamed text.
    mid_line: bool,
    in_thinking: bool,
}

impl<W: Write> Renderer<W> {
    pub fn new(out: W, style: Style) -> Self {
        Self {
            out,
            style,
            mid_line: false,
            in_thinking: false,
        }
    }

    /// The underlying writer (for prompts printed between events).
    pub fn out(&mut self) -> &mut W {
        &mut self.out
    }

    /// Ends a line of streamed text, if one is open.
    pub fn break_line(&mut self) {
        if self.mid_line {
            let _ = writeln!(self.out);
            self.mid_line = false;
        }
        self.in_thinking = false;
    }

    /// Prints one event.
    pub fn event(&mut self, event: &AgentEvent) {
        let s = self.style;
        match event {
            AgentEvent::TextDelta { text } => {
                if self.in_thinking {
                    self.break_line();
                }
                let _ = write!(self.out, "{text}");
                self.mid_line = !text.ends_with('\n');
            }
            AgentEvent::ThinkingDelta { text } => {
                if !self.in_thinking {
                    self.break_line();
                    self.in_thinking = true;
                }
                let _ = write!(self.out, "{}", s.dim(text));
                self.mid_line = !text.ends_with('\n');
            }
            AgentEvent::ToolStart { summary, .. } => {
                self.break_line();
                let _ = writeln!(self.out, "{} {}", s.cyan("●"), s.bold(first_line(summary)));
            }
            AgentEvent::ToolEnd {
                is_error,
                preview,
                duration_ms,
                ..
            } => {
                let status = if *is_error {
                    s.red("error")
                } else {
                    s.green("ok")
                };
                let _ = writeln!(
                    self.out,
                    "  {} {} {} {}",
                    s.dim("⎿"),
                    status,
                    s.dim(&format!("{}", Millis(*duration_ms))),
                    s.dim(headline(preview))
                );
            }
            AgentEvent::PermissionDenied {
                summary, reason, ..
            } => {
                self.break_line();
                let _ = writeln!(
                    self.out,
                    "{} {} {}",
                    s.red("✗"),
                    first_line(summary),
                    s.dim(&format!("— {reason}"))
                );
            }
            AgentEvent::Compaction {
                method,
                messages_before,
                messages_after,
                tokens_before,
            } => {
                self.break_line();
                let how = match method {
                    CompactionMethod::Summary => "summarized",
                    CompactionMethod::DropOldest => "dropped the oldest rounds",
                };
                let _ = writeln!(
                    self.out,
                    "{}",
                    s.dim(&format!(
                        "context compacted ({how}): {messages_before} → {messages_after} messages, was ~{tokens_before} tokens"
                    ))
                );
            }
            AgentEvent::Notice { text } => {
                self.break_line();
                let _ = writeln!(self.out, "{}", s.dim(text));
            }
            AgentEvent::Warning { text } => {
                self.break_line();
                let _ = writeln!(self.out, "{}", s.yellow(&format!("warning: {text}")));
            }
            AgentEvent::Error { message } => {
                self.break_line();
                let _ = writeln!(self.out, "{}", s.red(&format!("error: {message}")));
            }
            AgentEvent::Done { outcome, .. } => {
                self.break_line();
                match outcome {
                    // A failed run's error event came just before: once is enough.
                    Outcome::Completed | Outcome::Error { .. } => {}
                    Outcome::Cancelled => {
                        let _ = writeln!(self.out, "{}", s.yellow("⏹ stopped"));
                    }
                    other => {
                        let _ = writeln!(self.out, "{}", s.yellow(&other.describe()));
                    }
                }
            }
            AgentEvent::SubagentStart { .. }
            | AgentEvent::SubagentProgress { .. }
            | AgentEvent::TaskEnded { .. } => {
                if let Some(line) = subagent_line(event, &s) {
                    self.break_line();
                    let _ = writeln!(self.out, "{line}");
                }
            }
            AgentEvent::TurnStart { .. }
            | AgentEvent::AssistantMessage { .. }
            | AgentEvent::PermissionRequest { .. }
            | AgentEvent::Usage { .. } => {}
        }
        let _ = self.out.flush();
    }
}

/// The line for a sub-agent event, or `None` when it is not worth a line: progress
/// is shown at the 1st, 2nd, 4th, 8th, … tool call, so a long child prints a few
/// lines, not one per call.
pub fn subagent_line(event: &AgentEvent, s: &Style) -> Option<String> {
    // Descriptions, tool summaries and results come from models: escaped.
    let first_line = |text: &str| roo_term::escape(first_line(text));
    match event {
        AgentEvent::SubagentStart {
            id,
            agent_type,
            description,
            background,
        } => Some(format!(
            "  {} {} {}{}",
            s.dim("↳"),
            s.bold(&format!(
                "sub-agent {id} ({})",
                roo_term::escape(agent_type)
            )),
            first_line(description),
            if *background {
                s.dim(" — in the background")
            } else {
                String::new()
            }
        )),
        AgentEvent::SubagentProgress {
            id,
            tool_count,
            last_tool,
        } if tool_count.is_power_of_two() => Some(format!(
            "  {} {}",
            s.dim("↳"),
            s.dim(&format!(
                "{id}: {tool_count} tool call(s), last {}",
                first_line(last_tool)
            ))
        )),
        AgentEvent::TaskEnded {
            id,
            name,
            status,
            summary,
        } => {
            let name = name
                .as_deref()
                .map(|n| format!(" ({})", roo_term::escape(n)))
                .unwrap_or_default();
            let text = format!("task {id}{name} {status}");
            let text = if status == "completed" {
                s.green(&text)
            } else {
                s.yellow(&text)
            };
            Some(format!(
                "{} {text} {}",
                s.cyan("◆"),
                s.dim(&first_line(summary))
            ))
        }
        _ => None,
    }
}

/// A duration in ms printed as `12 ms` or `3.4 s`.
struct Millis(u64);

impl std::fmt::Display for Millis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 < 1000 {
            write!(f, "{} ms", self.0)
        } else {
            write!(f, "{:.1} s", self.0 as f64 / 1000.0)
        }
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// The first line of a result preview that says something (skips blank lines and
/// rulers such as `=====`), for one-line tool summaries.
pub fn headline(preview: &str) -> &str {
    preview
        .lines()
        .map(str::trim)
        .find(|l| l.chars().any(char::is_alphanumeric))
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_writer_returns_the_carriage() {
        let mut buf = Vec::new();
        write!(RawWriter::new(&mut buf), "a\nb\n").unwrap();
        assert_eq!(buf, b"a\r\nb\r\n");
    }

    #[test]
    fn sub_agent_lines_escape_what_models_wrote_and_thin_out_progress() {
        let s = Style::plain();
        let start = AgentEvent::SubagentStart {
            id: "a1".into(),
            agent_type: "Explore".into(),
            description: "look\x1b[2J around".into(),
            background: true,
        };
        let line = subagent_line(&start, &s).unwrap();
        assert!(
            !line.contains('\x1b') && line.contains("in the background"),
            "{line}"
        );
        let progress = |n| AgentEvent::SubagentProgress {
            id: "a1".into(),
            tool_count: n,
            last_tool: "Grep(x)".into(),
        };
        let shown: Vec<u32> = (1..=20)
            .filter(|n| subagent_line(&progress(*n), &s).is_some())
            .collect();
        assert_eq!(shown, [1, 2, 4, 8, 16]);
        let ended = AgentEvent::TaskEnded {
            id: "a3".into(),
            name: Some("scout".into()),
            status: "completed".into(),
            summary: "found it\nmore".into(),
        };
        let line = subagent_line(&ended, &s).unwrap();
        assert!(line.contains("task a3 (scout) completed") && line.contains("found it"));
        assert!(!line.contains("more"), "{line}");
    }

    #[test]
    fn headline_skips_rulers() {
        assert_eq!(headline("=====\n\nFAIL: test_x\n"), "FAIL: test_x");
        assert_eq!(headline(""), "");
    }
}
