//! Terminal rendering of agent events: streamed text, one-line tool summaries,
//! colours only on a terminal and never with `NO_COLOR`.
//!
//! Everything an event carries was written by someone else — the model's text and
//! thinking, tool summaries and results (a command's output, a file's content), hooks'
//! notices, providers' errors — so it is printed through [`roo_term::escape_text`] (or
//! [`roo_term::escape`] for one-line summaries): an escape sequence in it (a title, a
//! screen clear, a cursor move) or a carriage return is shown as `\u{1b}`, `\r`, …
//! instead of being obeyed. Only the renderer's own styles reach the terminal as codes.

use std::io::Write;

use roo_agent::event::{AgentEvent, CompactionMethod, RunOutcome};

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
                let text = roo_term::escape_text(text);
                let _ = write!(self.out, "{text}");
                self.mid_line = !text.ends_with('\n');
            }
            AgentEvent::ThinkingDelta { text } => {
                if !self.in_thinking {
                    self.break_line();
                    self.in_thinking = true;
                }
                let text = roo_term::escape_text(text);
                let _ = write!(self.out, "{}", s.dim(&text));
                self.mid_line = !text.ends_with('\n');
            }
            AgentEvent::ToolStart { summary, .. } => {
                self.break_line();
                let summary = roo_term::escape(first_line(summary));
                let _ = writeln!(self.out, "{} {}", s.cyan("●"), s.bold(&summary));
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
                    s.dim(&roo_term::escape_text(headline(preview)))
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
                    roo_term::escape(first_line(summary)),
                    s.dim(&format!("— {}", roo_term::escape_text(reason)))
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
                let _ = writeln!(self.out, "{}", s.dim(&roo_term::escape_text(text)));
            }
            AgentEvent::Warning { text } => {
                self.break_line();
                let text = roo_term::escape_text(text);
                let _ = writeln!(self.out, "{}", s.yellow(&format!("warning: {text}")));
            }
            AgentEvent::Error { message } => {
                self.break_line();
                let message = roo_term::escape_text(message);
                let _ = writeln!(self.out, "{}", s.red(&format!("error: {message}")));
            }
            AgentEvent::Done { outcome, .. } => {
                self.break_line();
                match outcome {
                    // A failed run's error event came just before: once is enough.
                    RunOutcome::Completed | RunOutcome::Error { .. } => {}
                    RunOutcome::Cancelled => {
                        let _ = writeln!(self.out, "{}", s.yellow("⏹ stopped"));
                    }
                    other => {
                        let outcome = roo_term::escape(&other.describe());
                        let _ = writeln!(self.out, "{}", s.yellow(&outcome));
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

impl Renderer<Vec<u8>> {
    /// What was rendered into the buffer and not taken out yet.
    pub fn buffered(&self) -> &[u8] {
        &self.out
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

    /// What a model, a command or a file could print to take over the terminal: a
    /// window title (OSC, BEL- and ST-terminated), a screen clear, an 8-bit CSI, a
    /// carriage return and a backspace that overwrite.
    const ATTACK: &str = "\x1b]2;PWNED\x07\x1b]0;PWNED\x1b\\\x1b[2J\u{9b}1mX\rY\x08";

    /// `shown` without the renderer's own styles (`ESC [ digits m`).
    fn without_styles(shown: &str) -> String {
        let mut out = String::new();
        let mut rest = shown;
        while let Some(at) = rest.find("\x1b[") {
            out.push_str(&rest[..at]);
            let code = &rest[at + 2..];
            let end = code.find(|c: char| !c.is_ascii_digit() && c != ';');
            match end {
                Some(end) if code[end..].starts_with('m') => rest = &code[end + 1..],
                _ => {
                    out.push_str(&rest[at..at + 2]);
                    rest = code;
                }
            }
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn what_models_and_tools_wrote_is_shown_escaped_and_only_styles_are_codes() {
        let attack = ATTACK.to_string();
        let events = [
            AgentEvent::ThinkingDelta {
                text: format!("hmm {attack}\n"),
            },
            AgentEvent::TextDelta {
                text: format!("answer {attack}\n\tindented\n"),
            },
            AgentEvent::ToolStart {
                id: "t1".into(),
                name: "Bash".into(),
                summary: format!("Bash(printf {attack})"),
                input: serde_json::Value::Null,
            },
            AgentEvent::ToolEnd {
                id: "t1".into(),
                name: "Bash".into(),
                summary: String::new(),
                is_error: false,
                preview: format!("out {attack}\nmore"),
                duration_ms: 3,
            },
            AgentEvent::PermissionDenied {
                id: "t2".into(),
                summary: format!("ReadFile({attack})"),
                reason: format!("no {attack}"),
            },
            AgentEvent::Notice {
                text: format!("hook said {attack}"),
            },
            AgentEvent::Warning {
                text: format!("server said {attack}"),
            },
            AgentEvent::Error {
                message: format!("provider said {attack}"),
            },
            AgentEvent::Done {
                outcome: RunOutcome::UnknownTools {
                    names: vec![attack.clone()],
                },
                final_text: String::new(),
                turns: 1,
                usage: Default::default(),
            },
        ];
        let mut r = Renderer::new(Vec::new(), Style::coloured());
        for event in &events {
            r.event(event);
        }
        let out = String::from_utf8(r.out).unwrap();
        assert!(
            out.contains("\x1b[2m"),
            "the renderer's styles stay: {out:?}"
        );
        let text = without_styles(&out);
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{text:?}"
        );
        let escaped = roo_term::escape(ATTACK);
        // Once per event, twice for the denial (its call and its reason).
        assert_eq!(
            text.matches(&escaped).count(),
            events.len() + 1,
            "every event shows the sequence escaped:\n{text}"
        );
        assert!(text.contains("answer "), "{text}");
        assert!(
            text.contains("\n\tindented\n"),
            "lines and tabs stay: {text:?}"
        );
    }

    #[test]
    fn headline_skips_rulers() {
        assert_eq!(headline("=====\n\nFAIL: test_x\n"), "FAIL: test_x");
        assert_eq!(headline(""), "");
    }
}
