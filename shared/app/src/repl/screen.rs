//! The session's screen: the stream that scrolls (model text, tool lines, team
//! notices, the record of each answer) above a block pinned at the bottom — the
//! questions waiting for an answer, the model's started line, and the status line
//! (the spinner while a run works, what the keys answer while questions wait) or,
//! when nothing waits, the prompt being edited. Every write to the stream goes
//! through [`Screen::stream`], which takes the block off, prints, and draws it again
//! ([`Dock`]), so no later line can bury a question.
//!
//! Kept apart from the session's loops so that they can hold the agent's run (a
//! borrow of the agent) while writing here.

use std::collections::VecDeque;
use std::io::{Stdout, Write};

use crossterm::event::{KeyCode, KeyEvent};
use crossterm::terminal;
use roo_agent::event::AgentEvent;

use super::activity::Activity;
use super::dock::{Dock, head_fitting, tail_fitting};
use super::question::Question;
use crate::line_editor::LineEditor;
use crate::render::interleaved::complete_lines;
use crate::render::{RawWriter, Renderer, Style};
use crate::setup::PendingApproval;

pub(super) const PROMPT: &str = "› ";

/// Queued questions listed one line each under the first; the rest are counted.
const LISTED: usize = 3;

pub(super) struct Screen {
    pub(super) out: RawWriter<Stdout>,
    /// Renders agent events into a buffer: complete lines go to the stream, the started
    /// one is shown in the block until it ends.
    render: Renderer<Vec<u8>>,
    dock: Dock,
    pub(super) editor: LineEditor,
    /// Whether the prompt is on screen below the block.
    editor_shown: bool,
    /// Questions waiting for an answer, oldest first: keys answer the first.
    pub(super) questions: VecDeque<Question>,
    /// The run under way, counted for the spinner.
    activity: Option<Activity>,
    pub(super) style: Style,
}

pub(super) fn width() -> u16 {
    terminal::size().map(|(w, _)| w).unwrap_or(80)
}

impl Screen {
    pub(super) fn new(style: Style) -> Screen {
        Screen {
            out: RawWriter::new(std::io::stdout()),
            render: Renderer::new(Vec::new(), style),
            dock: Dock::default(),
            editor: LineEditor::new(),
            editor_shown: false,
            questions: VecDeque::new(),
            activity: None,
            style,
        }
    }

    /// Prints `lines` in the stream, above the pinned block, and draws the block again.
    pub(super) fn stream(&mut self, lines: &[String]) {
        Dock::begin(&mut self.out);
        self.hide_bottom();
        for line in lines {
            let _ = writeln!(self.out, "{line}");
        }
        self.show_bottom();
        Dock::end(&mut self.out);
    }

    /// Draws the block again (a key that changed a question, a new question).
    pub(super) fn redraw(&mut self) {
        self.stream(&[]);
    }

    /// The spinner's tick: its line rewritten in place when nothing else in the block
    /// changed (the usual case), else the block drawn again.
    pub(super) fn tick(&mut self) {
        if self.editor_shown {
            return;
        }
        let width = width();
        let (rows, last) = self.bottom(usize::from(width));
        let updated = last
            .as_deref()
            .is_some_and(|last| self.dock.update_last(&mut self.out, &rows, last, width));
        if updated {
            let _ = self.out.flush();
        } else {
            self.redraw();
        }
    }

    /// One agent event: its complete lines to the stream, a started line to the block —
    /// shown by the spinner's next tick, so a fast stream of small pieces redraws the
    /// block at most ten times a second.
    pub(super) fn event(&mut self, event: &AgentEvent) {
        if let Some(activity) = &mut self.activity {
            activity.saw(event);
        }
        self.render.event(event);
        let lines = complete_lines(self.render.out());
        if !lines.is_empty() || self.activity.is_none() {
            self.stream(&lines);
        }
    }

    /// A run starts: the spinner shows until [`Screen::end_run`].
    pub(super) fn start_run(&mut self) {
        self.hide_bottom();
        self.activity = Some(Activity::start());
        self.show_bottom();
        let _ = self.out.flush();
    }

    /// The run ended: its started line is ended and the spinner gone; the block is left
    /// off the screen (the prompt draws it again).
    pub(super) fn end_run(&mut self) {
        self.render.break_line();
        let lines = complete_lines(self.render.out());
        self.hide_bottom();
        self.activity = None;
        for line in lines {
            let _ = writeln!(self.out, "{line}");
        }
        let _ = self.out.flush();
    }

    /// Takes the block (and the prompt) off the screen, the cursor where it began.
    pub(super) fn hide_bottom(&mut self) {
        if self.editor_shown {
            let _ = self.editor.erase(&mut self.out);
            self.editor_shown = false;
        }
        self.dock.erase(&mut self.out);
    }

    /// Draws the block, and the prompt under it when nothing waits and no run works.
    pub(super) fn show_bottom(&mut self) {
        let width = width();
        let (rows, last) = self.bottom(usize::from(width));
        self.dock.draw(&mut self.out, &rows, last.as_deref(), width);
        if last.is_none() {
            self.editor.reset_render();
            let _ = self.editor.render(&mut self.out, PROMPT, width);
            self.editor_shown = true;
        }
    }

    /// Redraws the prompt in place after an edit.
    pub(super) fn render_editor(&mut self) {
        if self.editor_shown {
            let _ = self.editor.render(&mut self.out, PROMPT, width());
        }
    }

    /// The prompt's line was submitted (or given up): it stays in the stream as typed.
    pub(super) fn leave_editor(&mut self) {
        let _ = writeln!(self.out);
        self.editor.reset_render();
        self.editor_shown = false;
    }

    /// The block's rows and its last line (`None`: the prompt is the last line).
    fn bottom(&self, width: usize) -> (Vec<String>, Option<String>) {
        let style = &self.style;
        let mut rows = Vec::new();
        if self.activity.is_some() {
            let started = String::from_utf8_lossy(self.render_buffer());
            if !started.is_empty() {
                rows.push(tail_fitting(&started, width));
            }
        }
        if let Some(first) = self.questions.front() {
            rows.extend(first.pinned(style, self.activity.is_some()));
        }
        for question in self.questions.iter().skip(1).take(LISTED) {
            let line = format!("  {} {}", style.dim("then (Tab)"), question.headline(style));
            rows.push(head_fitting(&line, width));
        }
        if self.questions.len() > LISTED + 1 {
            let more = self.questions.len() - LISTED - 1;
            rows.push(style.dim(&format!("  … and {more} more")));
        }
        let waits = self.questions.front().map(|first| {
            let n = self.questions.len();
            let keys = if first.offers_always() {
                "y/n/a"
            } else {
                "y/n"
            };
            format!(
                "{n} question{} — {keys} answers {}",
                if n == 1 { " waits" } else { "s wait" },
                first.whose()
            )
        });
        let last = match (&self.activity, waits) {
            (Some(activity), None) => Some(activity.line(style, false)),
            (Some(activity), Some(waits)) => Some(format!(
                "{} {}",
                activity.line(style, true),
                style.yellow(&format!("· {waits}"))
            )),
            (None, Some(waits)) => Some(format!("{PROMPT}{}", style.yellow(&waits))),
            (None, None) => None,
        };
        (rows, last.map(|line| head_fitting(&line, width)))
    }

    fn render_buffer(&self) -> &[u8] {
        self.render.buffered()
    }

    /// A question arrived: pinned at the end of the queue (or its refusal printed).
    pub(super) fn ask(&mut self, pending: PendingApproval) {
        match Question::open(pending, &self.style) {
            Ok(question) => {
                self.questions.push_back(question);
                self.redraw();
            }
            Err(lines) => self.stream(&lines),
        }
    }

    /// The asker of question `index` stopped waiting: it leaves the block, with a record.
    pub(super) fn withdraw(&mut self, index: usize) {
        if let Some(question) = self.questions.remove(index) {
            let line = format!(
                "{} {}",
                question.headline(&self.style),
                self.style
                    .dim("→ withdrawn: the question no longer waits for an answer")
            );
            self.stream(&[line]);
        }
    }

    /// `key` for the first question, if one waits (Tab brings the next one first): `None`
    /// when none does (the key is the caller's), else whether the key answered it with Esc.
    pub(super) fn answer_key(&mut self, key: &KeyEvent) -> Option<bool> {
        if key.code == KeyCode::Tab && self.questions.len() > 1 {
            // The next question comes first; the first waits at the end.
            self.questions.rotate_left(1);
            self.redraw();
            return Some(false);
        }
        let question = self.questions.pop_front()?;
        let (kept, lines) = question.key(key, &self.style);
        let answered_esc = kept.is_none() && key.code == KeyCode::Esc;
        if let Some(question) = kept {
            self.questions.push_front(question);
        }
        self.stream(&lines);
        Some(answered_esc)
    }
}
