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
use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use crossterm::terminal;
use roo_agent::event::AgentEvent;

use super::activity::Activity;
use super::arming::Arming;
use super::dock::{Dock, head_fitting, screen_rows, tail_fitting};
use super::question::Question;
use crate::line_editor::LineEditor;
use crate::render::interleaved::complete_lines;
use crate::render::{RawWriter, Renderer, Style};
use crate::setup::PendingApproval;

pub(super) const PROMPT: &str = "› ";

/// The key that moves the keys between the pinned questions and the prompt (at the
/// prompt, between runs): a stream of questions never locks the person out of typing.
/// Stops the named teammate's current run; the error says why it could not.
pub(super) type PauseTeammate = Box<dyn Fn(&str) -> Result<(), String> + Send>;

pub(super) fn is_focus_key(key: &KeyEvent) -> bool {
    key.code == KeyCode::Char('t') && key.modifiers.contains(KeyModifiers::CONTROL)
}

/// What [`Screen::answer_key`] did with a key.
#[derive(PartialEq, Eq, Debug)]
pub(super) enum KeyFor {
    /// No question takes keys (none waits, or the person types at the prompt): the
    /// key is the caller's.
    NotMine,
    /// The questions took it (an answer, Tab, `v`, a dropped key).
    Taken,
    /// It answered the front question with Esc (no; during a run: and stop).
    AnsweredEsc,
}

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
    /// When keys may answer the front question.
    arming: Arming,
    /// The serial number the next question gets.
    next_serial: u64,
    /// The person moved the keys to the prompt (Ctrl+T) while questions stay pinned.
    typing: bool,
    /// Stops a teammate's current run (the spawner's TaskStop), for the `p` answer.
    pause: Option<PauseTeammate>,
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
            arming: Arming::default(),
            next_serial: 0,
            typing: false,
            pause: None,
            style,
        }
    }

    /// The same screen, whose `p` answer to a teammate's question also stops that
    /// teammate's current run through `pause`.
    pub(super) fn pausing(mut self, pause: PauseTeammate) -> Screen {
        self.pause = Some(pause);
        self
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
        if self.typing {
            self.typing = false;
            self.arming.rearm(Instant::now());
        }
    }

    /// Whether the prompt takes keys while questions wait (Ctrl+T).
    pub(super) fn typing(&self) -> bool {
        self.typing
    }

    /// When the front question arms, while it waits to (the idle prompt redraws then).
    pub(super) fn arms_at(&self) -> Option<Instant> {
        if self.typing {
            return None;
        }
        self.arming.arms_at(Instant::now())
    }

    /// The front question may have changed: it arms again when it did (`by_user`: the
    /// person's answer or Tab changed it, so it is not marked as changed).
    fn front_changed(&mut self, by_user: bool) {
        let front = self.questions.front().map(|q| q.serial);
        self.arming.front_is(front, Instant::now(), by_user);
        if self.questions.is_empty() {
            self.typing = false;
        }
    }

    /// The block's rows and its last line (`None`: the prompt is the last line). The
    /// block is kept shorter than the terminal: the queue and the started line go
    /// first, and the front question's own rows are fitted when it opened.
    fn bottom(&self, width: usize) -> (Vec<String>, Option<String>) {
        let (rows, last, _) = self.bottom_cut(width);
        (rows, last)
    }

    /// [`Self::bottom`], and how many of the front question's rows a short terminal cut.
    fn bottom_cut(&self, width: usize) -> (Vec<String>, Option<String>, usize) {
        let style = &self.style;
        let height = usize::from(terminal::size().map(|(_, h)| h).unwrap_or(24));
        let armed = !self.typing && self.arming.armed(Instant::now());
        let mut started = None;
        if self.activity.is_some() {
            let text = String::from_utf8_lossy(self.render_buffer());
            if !text.is_empty() {
                started = Some(tail_fitting(&text, width));
            }
        }
        let mut front = Vec::new();
        // Rows at the front block's start and end a short terminal never cuts: the
        // headline (and the line saying it changed); the note, the keys and the line
        // about dropped keys.
        let (mut head, mut tail) = (1, 1);
        if let Some(first) = self.questions.front() {
            head += usize::from(self.arming.changed);
            tail += usize::from(first.has_note());
            if self.arming.changed {
                front.push(
                    style.yellow("  (the question changed: the one here before was withdrawn)"),
                );
            }
            front.extend(first.pinned(style, self.activity.is_some(), armed));
            if self.arming.dropped > 0 && !self.typing {
                front.push(style.dim(&format!(
                    "  ({} key{} typed before the question was ready dropped)",
                    self.arming.dropped,
                    if self.arming.dropped == 1 { "" } else { "s" }
                )));
                tail += 1;
            }
        }
        let mut queue = Vec::new();
        for question in self.questions.iter().skip(1).take(LISTED) {
            let line = format!("  {} {}", style.dim("then (Tab)"), question.headline(style));
            queue.push(head_fitting(&line, width));
        }
        if self.questions.len() > LISTED + 1 {
            let more = self.questions.len() - LISTED - 1;
            queue.push(style.dim(&format!("  … and {more} more")));
        }
        let n = self.questions.len();
        let waits = self.questions.front().map(|first| {
            let keys = if first.offers_always() {
                "y/n/a"
            } else {
                "y/n"
            };
            let waits = if n == 1 { " waits" } else { "s wait" };
            if armed {
                format!("{n} question{waits} — {keys} answers {}", first.whose())
            } else {
                format!("{n} question{waits} — {} opens in a moment", first.whose())
            }
        });
        let mut last = match (&self.activity, waits) {
            (Some(activity), None) => Some(activity.line(style, false)),
            (Some(activity), Some(waits)) => Some(format!(
                "{} {}",
                activity.line(style, true),
                style.yellow(&format!("· {waits}"))
            )),
            (None, Some(_)) if self.typing => {
                queue.push(style.yellow(&format!(
                    "  {n} question{} — Ctrl+T answers (your line stays)",
                    if n == 1 { " waits" } else { "s wait" },
                )));
                None
            }
            (None, Some(waits)) => Some(format!(
                "{PROMPT}{} {}",
                style.yellow(&waits),
                style.dim("· Ctrl+T types at the prompt")
            )),
            (None, None) => None,
        };
        last = last.map(|line| head_fitting(&line, width));
        // Rows for the block: the terminal less two, the last line (or prompt) apart.
        let budget = height.saturating_sub(3);
        let rows_of = |lines: &[String]| -> usize {
            lines
                .iter()
                .map(|l| usize::from(screen_rows(l, width)))
                .sum()
        };
        let mut front_at = usize::from(started.is_some());
        let mut cut = 0;
        let front_len = front.len();
        let mut rows: Vec<String> = started.into_iter().collect();
        rows.extend(front);
        rows.extend(queue);
        if rows_of(&rows) > budget && self.questions.len() > 1 {
            // The queue gives way to a count.
            rows.retain(|row| !row.contains("then (Tab)") && !row.contains("… and "));
            rows.push(style.dim(&format!("  … and {} more (Tab)", n - 1)));
        }
        if rows_of(&rows) > budget && front_at == 1 && !self.questions.is_empty() {
            // So does the started line (it is printed when it ends).
            rows.remove(0);
            front_at = 0;
        }
        if rows_of(&rows) > budget && front_len > head + tail {
            // A short terminal: the question's headline and answer keys stay, with
            // as many rows between them as fit and a marker of what is cut.
            let after: Vec<String> = rows.split_off(front_at + front_len);
            let keys = rows.split_off(front_at + front_len - tail);
            let middle = rows.split_off(front_at + head);
            let fixed = rows_of(&rows) + rows_of(&keys) + rows_of(&after);
            let room = budget.saturating_sub(fixed + 1);
            let mut used = 0;
            for row in middle {
                let taken = rows_of(std::slice::from_ref(&row));
                if cut == 0 && used + taken <= room {
                    used += taken;
                    rows.push(row);
                } else {
                    cut += 1;
                }
            }
            if cut > 0 {
                rows.push(head_fitting(
                    &style.dim(&format!(
                        "  … {cut} row{} cut: the terminal is only {height} rows high (v shows all)",
                        if cut == 1 { "" } else { "s" }
                    )),
                    width,
                ));
            }
            rows.extend(keys);
            rows.extend(after);
        }
        (rows, last, cut)
    }

    fn render_buffer(&self) -> &[u8] {
        self.render.buffered()
    }

    /// A question arrived: pinned at the end of the queue (or its refusal printed).
    pub(super) fn ask(&mut self, pending: PendingApproval) {
        match Question::open(pending, &self.style) {
            Ok(mut question) => {
                question.serial = self.next_serial;
                self.next_serial += 1;
                self.questions.push_back(question);
                self.front_changed(false);
                self.redraw();
            }
            Err(lines) => self.stream(&lines),
        }
    }

    /// The asker of question `index` stopped waiting: it leaves the block, with a record.
    pub(super) fn withdraw(&mut self, index: usize) {
        if let Some(question) = self.questions.remove(index) {
            self.front_changed(false);
            let line = format!(
                "{} {}",
                question.headline(&self.style),
                self.style
                    .dim("→ withdrawn: the question no longer waits for an answer")
            );
            self.stream(&[line]);
        }
    }

    /// `key` for the front question, if one takes keys (Tab brings the next one first;
    /// Ctrl+T moves the keys to the prompt and back). A key before the front question
    /// is armed ([`super::arming`]) is dropped, Esc during a run apart (it stops the run
    /// and leaves the question pinned).
    pub(super) fn answer_key(&mut self, key: &KeyEvent) -> KeyFor {
        let now = Instant::now();
        if self.questions.is_empty() {
            self.arming.key(now);
            return KeyFor::NotMine;
        }
        if is_focus_key(key) && self.activity.is_none() {
            self.typing = !self.typing;
            if !self.typing {
                self.arming.rearm(now);
            }
            self.redraw();
            return KeyFor::Taken;
        }
        if self.typing {
            return KeyFor::NotMine;
        }
        if !self.arming.key(now) {
            if key.code == KeyCode::Esc && self.activity.is_some() {
                return KeyFor::NotMine;
            }
            self.redraw();
            return KeyFor::Taken;
        }
        if key.code == KeyCode::Tab && self.questions.len() > 1 {
            // The next question comes first; the first waits at the end.
            self.questions.rotate_left(1);
            self.front_changed(true);
            self.redraw();
            return KeyFor::Taken;
        }
        // Rows a short terminal cut count as hidden: `y` needs `v` first.
        let (_, _, clipped) = self.bottom_cut(usize::from(width()));
        let Some(question) = self.questions.pop_front() else {
            return KeyFor::NotMine;
        };
        if let (KeyCode::Char('p' | 'P'), Some(pause), Some(name)) =
            (key.code, &self.pause, question.teammate())
        {
            // Stopped first, so the denial cannot start its next step.
            let paused = pause(&name);
            let mut lines = question.deny_and_pause(&name, &self.style);
            if let Err(why) = paused {
                lines.push(
                    self.style
                        .red(&format!("error: failed to pause {name}: {why}")),
                );
            }
            self.front_changed(true);
            self.stream(&lines);
            return KeyFor::Taken;
        }
        let (kept, lines) = question.key(key, &self.style, clipped);
        let answered_esc = kept.is_none() && key.code == KeyCode::Esc;
        if let Some(question) = kept {
            self.questions.push_front(question);
        }
        self.front_changed(true);
        self.stream(&lines);
        if answered_esc {
            KeyFor::AnsweredEsc
        } else {
            KeyFor::Taken
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repl::tests::pending;
    use crossterm::event::KeyModifiers;

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    #[test]
    fn a_letter_typed_as_a_question_opens_does_not_answer_it() {
        let mut screen = Screen::new(Style::plain());
        // "please try again" half typed at the prompt when alice's question opens.
        for c in "please ".chars() {
            assert_eq!(screen.answer_key(&key(c)), KeyFor::NotMine);
        }
        let (asked, mut answer) = pending("teammate alice: WriteFile(a.txt)", "x", "", false);
        screen.ask(asked);
        for c in "try".chars() {
            assert_eq!(screen.answer_key(&key(c)), KeyFor::Taken);
        }
        assert!(
            answer.try_recv().is_err(),
            "a typed letter answered the question"
        );
        assert_eq!(screen.questions.len(), 1);
        let (rows, _) = screen.bottom(80);
        assert!(
            rows.iter()
                .any(|r| r.contains("3 keys typed before the question was ready")),
            "{rows:?}"
        );
        assert!(!rows.iter().any(|r| r.contains("[y] yes")), "{rows:?}");
    }

    #[test]
    fn a_withdrawn_front_question_marks_the_next_one_changed() {
        let mut screen = Screen::new(Style::plain());
        let (alice, _a) = pending("teammate alice: WriteFile(a.txt)", "x", "", false);
        let (bob, mut b) = pending("teammate bob: WriteFile(b.txt)", "y", "", false);
        screen.ask(alice);
        screen.ask(bob);
        screen.withdraw(0);
        // The `y` meant for alice's does not answer bob's, which moved up.
        assert_eq!(screen.answer_key(&key('y')), KeyFor::Taken);
        assert!(b.try_recv().is_err());
        let (rows, _) = screen.bottom(80);
        assert!(
            rows.iter().any(|r| r.contains("the question changed")),
            "{rows:?}"
        );
    }

    #[test]
    fn ctrl_t_gives_the_prompt_the_keys_while_questions_stay_pinned() {
        let mut screen = Screen::new(Style::plain());
        let (alice, mut a) = pending("teammate alice: WriteFile(a.txt)", "x", "", false);
        screen.ask(alice);
        let ctrl_t = KeyEvent::new(KeyCode::Char('t'), KeyModifiers::CONTROL);
        assert_eq!(screen.answer_key(&ctrl_t), KeyFor::Taken);
        assert_eq!(
            screen.answer_key(&key('y')),
            KeyFor::NotMine,
            "the prompt's"
        );
        let (rows, last) = screen.bottom(80);
        assert!(last.is_none(), "the prompt is the last line");
        assert!(
            rows.iter().any(|r| r.contains("Ctrl+T answers")),
            "{rows:?}"
        );
        assert!(
            rows.iter().any(|r| r.contains("? teammate alice")),
            "{rows:?}"
        );
        assert_eq!(screen.answer_key(&ctrl_t), KeyFor::Taken);
        assert!(
            screen.arms_at().is_some(),
            "back at the question: it arms again"
        );
        assert!(a.try_recv().is_err());
    }

    #[test]
    fn the_block_stays_shorter_than_an_80_by_24_terminal() {
        let mut screen = Screen::new(Style::plain());
        screen.start_run();
        let command: String = (0..40).map(|i| format!("echo step{i}\n")).collect();
        let reason = "r".repeat(400);
        let mut kept = Vec::new();
        for name in ["alice", "bob", "carol", "dave", "erin", "frank"] {
            let summary = format!("teammate {name}: Bash({})", "x".repeat(120));
            let (asked, answer) = pending(&summary, &command, &reason, true);
            kept.push(answer);
            screen.ask(asked);
        }
        let (rows, last) = screen.bottom(80);
        let used: usize = rows
            .iter()
            .map(|r| usize::from(screen_rows(r, 80)))
            .sum::<usize>()
            + last.map_or(1, |l| usize::from(screen_rows(&l, 80)));
        assert!(used <= 22, "{used} rows: {rows:#?}");
        assert!(
            rows.iter().any(|r| r.contains("press v to see them")),
            "{rows:?}"
        );
    }
}
