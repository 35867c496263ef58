//! Several agents on one terminal: the lead's events and its in-process teammates'
//! (`roo_team::TeammateOutput`) rendered as whole lines, a teammate's lines prefixed
//! with its name in its colour, so output that arrives at the same time interleaves
//! line by line instead of mid-line.
//!
//! Each agent has its own [`Renderer`] writing into a buffer; complete lines are moved
//! to the output after every event, a started line waits for its end. Teammates' text is
//! another model's output: the [`Renderer`] shows control characters in it escaped, and
//! a teammate's name is escaped too, so it cannot move the cursor or forge the lead's
//! lines.
//! Colours follow the renderer's [`Style`] (a terminal, `NO_COLOR` unset).

use std::io::Write;

use roo_agent::event::AgentEvent;

use super::{Renderer, Style};

/// Colours given to teammates without one of their own, in order of appearance.
pub const PALETTE: [&str; 6] = ["blue", "magenta", "yellow", "green", "cyan", "red"];

/// Shortest width of the name column, so short names line up.
const NAME_WIDTH: usize = 6;

struct Lane {
    name: String,
    colour: String,
    renderer: Renderer<Vec<u8>>,
}

/// Renders the lead's and its teammates' events as interleaved whole lines.
pub struct Interleaved<W: Write> {
    out: W,
    style: Style,
    lead: Renderer<Vec<u8>>,
    lanes: Vec<Lane>,
}

impl<W: Write> Interleaved<W> {
    pub fn new(out: W, style: Style) -> Self {
        Self {
            out,
            style,
            lead: Renderer::new(Vec::new(), style),
            lanes: Vec::new(),
        }
    }

    /// Gives `member` the colour `colour` (e.g. its roster colour) before its first line.
    pub fn set_colour(&mut self, member: &str, colour: &str) {
        let lane = self.lane(member);
        self.lanes[lane].colour = colour.to_string();
    }

    /// One event of the lead: its lines carry no prefix.
    pub fn lead_event(&mut self, event: &AgentEvent) {
        self.lead.event(event);
        let lines = complete_lines(self.lead.out());
        for line in lines {
            let _ = writeln!(self.out, "{line}");
        }
        let _ = self.out.flush();
    }

    /// One event of teammate `member`: its lines are prefixed `member │ `.
    pub fn member_event(&mut self, member: &str, event: &AgentEvent) {
        let lane = self.lane(member);
        self.lanes[lane].renderer.event(event);
        self.emit(lane);
    }

    /// A line of its own (a heading, a team event): any started line of an agent is
    /// ended first, so nothing is printed in the middle of it.
    pub fn line(&mut self, text: &str) {
        self.finish();
        let _ = writeln!(self.out, "{text}");
        let _ = self.out.flush();
    }

    /// Ends every started line (at the end, or before a line of its own).
    pub fn finish(&mut self) {
        self.lead.break_line();
        let lines = complete_lines(self.lead.out());
        for line in lines {
            let _ = writeln!(self.out, "{line}");
        }
        for lane in 0..self.lanes.len() {
            self.lanes[lane].renderer.break_line();
            self.emit(lane);
        }
        let _ = self.out.flush();
    }

    fn lane(&mut self, member: &str) -> usize {
        if let Some(i) = self.lanes.iter().position(|l| l.name == member) {
            return i;
        }
        let colour = PALETTE[self.lanes.len() % PALETTE.len()].to_string();
        self.lanes.push(Lane {
            name: member.to_string(),
            colour,
            renderer: Renderer::new(Vec::new(), self.style),
        });
        self.lanes.len() - 1
    }

    fn emit(&mut self, lane: usize) {
        let Lane {
            name,
            colour,
            renderer,
        } = &mut self.lanes[lane];
        let lines = complete_lines(renderer.out());
        if lines.is_empty() {
            return;
        }
        let shown = roo_term::escape(name);
        let width = NAME_WIDTH.max(shown.chars().count());
        let prefix = format!(
            "{} {} ",
            self.style
                .member_colour(colour, &format!("{shown:<width$}")),
            self.style.member_colour(colour, "│")
        );
        for line in lines {
            let _ = writeln!(self.out, "{prefix}{line}");
        }
        let _ = self.out.flush();
    }
}

/// Takes the complete lines out of `buffer` (without their newlines), leaving a
/// started line in it.
pub fn complete_lines(buffer: &mut Vec<u8>) -> Vec<String> {
    let Some(end) = buffer.iter().rposition(|&b| b == b'\n') else {
        return Vec::new();
    };
    let done: Vec<u8> = buffer.drain(..=end).collect();
    String::from_utf8_lossy(&done[..done.len() - 1])
        .split('\n')
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> AgentEvent {
        AgentEvent::TextDelta { text: t.into() }
    }

    fn shown(r: &mut Interleaved<Vec<u8>>) -> String {
        String::from_utf8(std::mem::take(&mut r.out)).unwrap()
    }

    #[test]
    fn a_started_line_of_one_agent_is_not_cut_by_another() {
        let mut r = Interleaved::new(Vec::new(), Style::plain());
        r.member_event("alice", &text("fixing the "));
        r.member_event("bob", &text("tests pass\n"));
        r.lead_event(&text("waiting\n"));
        r.member_event("alice", &text("slug\nnext"));
        r.finish();
        assert_eq!(
            shown(&mut r),
            "bob    │ tests pass\nwaiting\nalice  │ fixing the slug\nalice  │ next\n"
        );
    }

    #[test]
    fn control_characters_are_escaped_but_newlines_and_tabs_kept() {
        let mut r = Interleaved::new(Vec::new(), Style::plain());
        r.member_event("mallory", &text("\x1b[2Jgone\nlead │ forged\r\n"));
        r.lead_event(&text("\x1b]2;PWNED\x07\tx\n"));
        assert_eq!(
            shown(&mut r),
            "mallory │ \\u{1b}[2Jgone\nmallory │ lead │ forged\\r\n\\u{1b}]2;PWNED\\u{7}\tx\n"
        );
    }

    #[test]
    fn each_teammate_keeps_its_colour_and_no_colour_means_no_escape_codes() {
        let mut r = Interleaved::new(Vec::new(), Style::coloured());
        r.set_colour("bob", "orange");
        r.member_event("alice", &text("a\n"));
        r.member_event("bob", &text("b\n"));
        let out = shown(&mut r);
        // bob got his colour before alice appeared; alice takes the palette's next one.
        assert!(
            out.starts_with("\x1b[35malice \x1b[0m \x1b[35m│"),
            "{out:?}"
        );
        assert!(out.contains("\x1b[38;5;208mbob   \x1b[0m"), "{out:?}");
        let mut plain = Interleaved::new(Vec::new(), Style::plain());
        plain.member_event(
            "alice",
            &AgentEvent::ToolStart {
                id: "t".into(),
                name: "Bash".into(),
                summary: "sh run-tests".into(),
                input: serde_json::Value::Null,
            },
        );
        let out = shown(&mut plain);
        assert!(!out.contains('\x1b'), "{out:?}");
        assert_eq!(out, "alice  │ ● sh run-tests\n");
    }
}
