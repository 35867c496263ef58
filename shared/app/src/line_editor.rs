//! A small line editor for the REPL prompt: insert, delete, move, history, paste.
//!
//! Key handling is a pure state machine ([`LineEditor::key`]) so it is unit-tested
//! without a terminal; [`LineEditor::render`] redraws the prompt in place, handling
//! lines that wrap past the terminal width. Positions are counted in display columns
//! (CJK characters and most emoji take two, combining marks none), not in `char`s.

use std::io::Write;

use crossterm::cursor::{MoveToColumn, MoveUp};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::queue;
use crossterm::terminal::{Clear, ClearType};
use unicode_width::UnicodeWidthChar;

/// What a key did to the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditAction {
    /// Keep editing (redraw).
    Continue,
    /// Enter: the line is done.
    Submit(String),
    /// Ctrl+C.
    Interrupt,
    /// Ctrl+D on an empty line.
    Eof,
}

/// The prompt line being edited, and the history of submitted lines.
#[derive(Debug, Default)]
pub struct LineEditor {
    buf: Vec<char>,
    cursor: usize,
    history: Vec<String>,
    /// Index into `history` while browsing with Up/Down.
    browsing: Option<usize>,
    /// The unsent line, kept while browsing history.
    draft: Vec<char>,
    /// Rows above the cursor the last render used (for redraw in place).
    rendered_rows_above: u16,
}

impl LineEditor {
    pub fn new() -> Self {
        Self::default()
    }

    /// The current text.
    pub fn text(&self) -> String {
        self.buf.iter().collect()
    }

    /// Empties the line.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.cursor = 0;
        self.browsing = None;
    }

    /// Inserts pasted text (may contain newlines) at the cursor.
    pub fn paste(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        for c in text.chars() {
            self.buf.insert(self.cursor, c);
            self.cursor += 1;
        }
    }

    /// Applies one key.
    pub fn key(&mut self, key: KeyEvent) -> EditAction {
        if key.kind == KeyEventKind::Release {
            return EditAction::Continue;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('c') if ctrl => return EditAction::Interrupt,
            KeyCode::Char('d') if ctrl => {
                if self.buf.is_empty() {
                    return EditAction::Eof;
                }
                self.delete_forward();
            }
            KeyCode::Char('a') if ctrl => self.cursor = 0,
            KeyCode::Char('e') if ctrl => self.cursor = self.buf.len(),
            KeyCode::Char('u') if ctrl => {
                self.buf.drain(..self.cursor);
                self.cursor = 0;
            }
            KeyCode::Char('k') if ctrl => self.buf.truncate(self.cursor),
            KeyCode::Char('w') if ctrl => self.delete_word_back(),
            KeyCode::Char('j') if ctrl => self.insert('\n'),
            KeyCode::Char(c) if !ctrl => self.insert(c),
            KeyCode::Enter => {
                // A trailing backslash continues the input on a new line.
                if self.cursor == self.buf.len() && self.buf.last() == Some(&'\\') {
                    self.buf.pop();
                    self.cursor -= 1;
                    self.insert('\n');
                    return EditAction::Continue;
                }
                let line = self.text();
                if !line.trim().is_empty() && self.history.last() != Some(&line) {
                    self.history.push(line.clone());
                }
                self.clear();
                return EditAction::Submit(line);
            }
            KeyCode::Backspace if self.cursor > 0 => {
                self.cursor -= 1;
                self.buf.remove(self.cursor);
            }
            KeyCode::Delete => self.delete_forward(),
            KeyCode::Left => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Right => self.cursor = (self.cursor + 1).min(self.buf.len()),
            KeyCode::Home => self.cursor = 0,
            KeyCode::End => self.cursor = self.buf.len(),
            KeyCode::Up => self.history_back(),
            KeyCode::Down => self.history_forward(),
            _ => {}
        }
        EditAction::Continue
    }

    fn insert(&mut self, c: char) {
        self.buf.insert(self.cursor, c);
        self.cursor += 1;
    }

    fn delete_forward(&mut self) {
        if self.cursor < self.buf.len() {
            self.buf.remove(self.cursor);
        }
    }

    fn delete_word_back(&mut self) {
        let mut start = self.cursor;
        while start > 0 && self.buf[start - 1].is_whitespace() {
            start -= 1;
        }
        while start > 0 && !self.buf[start - 1].is_whitespace() {
            start -= 1;
        }
        self.buf.drain(start..self.cursor);
        self.cursor = start;
    }

    fn history_back(&mut self) {
        let index = match self.browsing {
            None if self.history.is_empty() => return,
            None => {
                self.draft = self.buf.clone();
                self.history.len() - 1
            }
            Some(0) => return,
            Some(i) => i - 1,
        };
        self.browsing = Some(index);
        self.buf = self.history[index].chars().collect();
        self.cursor = self.buf.len();
    }

    fn history_forward(&mut self) {
        let Some(i) = self.browsing else { return };
        if i + 1 < self.history.len() {
            self.browsing = Some(i + 1);
            self.buf = self.history[i + 1].chars().collect();
        } else {
            self.browsing = None;
            self.buf = std::mem::take(&mut self.draft);
        }
        self.cursor = self.buf.len();
    }

    /// Redraws `prompt` and the line in place. Newlines show as `↵` so the line stays
    /// one logical row; rows wrapped by the terminal are accounted for.
    pub fn render(
        &mut self,
        out: &mut impl Write,
        prompt: &str,
        width: u16,
    ) -> std::io::Result<()> {
        let width = usize::from(width.max(10));
        let shown: String = self
            .buf
            .iter()
            .map(|&c| if c == '\n' { '↵' } else { c })
            .collect();
        if self.rendered_rows_above > 0 {
            queue!(out, MoveUp(self.rendered_rows_above))?;
        }
        queue!(out, MoveToColumn(0), Clear(ClearType::FromCursorDown))?;
        write!(out, "{prompt}{shown}")?;
        let prompt_chars = prompt.chars().count();
        let layout = Layout::of(prompt.chars().chain(shown.chars()), width);
        // Where the terminal left the cursor after printing (a full last row leaves it
        // on that row), and where it should be.
        let end_row = layout.end.0;
        let (row, col) = layout.cursor_at(prompt_chars + self.cursor, width);
        if end_row > row {
            queue!(out, MoveUp((end_row - row) as u16))?;
        }
        queue!(out, MoveToColumn(col as u16))?;
        self.rendered_rows_above = row as u16;
        out.flush()
    }

    /// Takes the prompt and the line off the screen, the cursor where the prompt began;
    /// the line is kept for the next [`LineEditor::render`] (the prompt gives way to
    /// output that is not the person's, such as a turn taking teammates' messages).
    pub fn erase(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if self.rendered_rows_above > 0 {
            queue!(out, MoveUp(self.rendered_rows_above))?;
        }
        queue!(out, MoveToColumn(0), Clear(ClearType::FromCursorDown))?;
        self.rendered_rows_above = 0;
        out.flush()
    }

    /// Forgets the previous render (after the line was submitted and a newline printed).
    pub fn reset_render(&mut self) {
        self.rendered_rows_above = 0;
    }
}

/// Where each character of a line lands on a terminal that wraps a character which
/// does not fit in the rest of its row to the next row.
#[derive(Debug)]
struct Layout {
    /// (row, column) where each character starts.
    starts: Vec<(usize, usize)>,
    /// (row, column) just after the last character; the column may equal the width.
    end: (usize, usize),
}

impl Layout {
    fn of(chars: impl Iterator<Item = char>, width: usize) -> Layout {
        let (mut row, mut col) = (0, 0);
        let mut starts = Vec::new();
        for c in chars {
            // Control characters print nothing visible here; `\n` is shown as `↵`.
            let w = c.width().unwrap_or(0);
            if w > 0 && col + w > width {
                row += 1;
                col = 0;
            }
            starts.push((row, col));
            col += w;
        }
        Layout {
            starts,
            end: (row, col),
        }
    }

    /// Screen position of the cursor before character `index` (or after the last one).
    fn cursor_at(&self, index: usize, width: usize) -> (usize, usize) {
        match self.starts.get(index) {
            Some(&at) => at,
            None if self.end.1 >= width => (self.end.0 + 1, 0),
            None => self.end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(ed: &mut LineEditor, code: KeyCode) -> EditAction {
        ed.key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn ctrl(ed: &mut LineEditor, c: char) -> EditAction {
        ed.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
    }

    fn typed(ed: &mut LineEditor, text: &str) {
        for c in text.chars() {
            press(ed, KeyCode::Char(c));
        }
    }

    #[test]
    fn edit_and_submit() {
        let mut ed = LineEditor::new();
        typed(&mut ed, "helo");
        press(&mut ed, KeyCode::Left);
        typed(&mut ed, "l");
        assert_eq!(
            press(&mut ed, KeyCode::Enter),
            EditAction::Submit("hello".into())
        );
        assert_eq!(ed.text(), "");
    }

    #[test]
    fn history_browsing_keeps_the_draft() {
        let mut ed = LineEditor::new();
        typed(&mut ed, "first");
        press(&mut ed, KeyCode::Enter);
        typed(&mut ed, "second");
        press(&mut ed, KeyCode::Enter);
        typed(&mut ed, "dra");
        press(&mut ed, KeyCode::Up);
        assert_eq!(ed.text(), "second");
        press(&mut ed, KeyCode::Up);
        assert_eq!(ed.text(), "first");
        press(&mut ed, KeyCode::Down);
        press(&mut ed, KeyCode::Down);
        assert_eq!(ed.text(), "dra");
    }

    #[test]
    fn control_keys() {
        let mut ed = LineEditor::new();
        assert_eq!(ctrl(&mut ed, 'd'), EditAction::Eof);
        typed(&mut ed, "rm -rf build");
        ctrl(&mut ed, 'w');
        assert_eq!(ed.text(), "rm -rf ");
        assert_eq!(ctrl(&mut ed, 'c'), EditAction::Interrupt);
        ctrl(&mut ed, 'u');
        assert_eq!(ed.text(), "");
    }

    #[test]
    fn backslash_enter_continues_and_paste_keeps_newlines() {
        let mut ed = LineEditor::new();
        typed(&mut ed, "line one\\");
        assert_eq!(press(&mut ed, KeyCode::Enter), EditAction::Continue);
        ed.paste("two\r\nthree");
        assert_eq!(
            press(&mut ed, KeyCode::Enter),
            EditAction::Submit("line one\ntwo\nthree".into())
        );
    }

    /// Renders and reads back where the cursor went: the row below the line's start
    /// (from the editor's own record) and the column of the last `CSI n G`.
    fn cursor_of(ed: &mut LineEditor, prompt: &str, width: u16) -> (usize, usize) {
        ed.reset_render();
        let mut out = Vec::new();
        ed.render(&mut out, prompt, width).unwrap();
        let text = String::from_utf8(out).unwrap();
        let (_, tail) = text.rsplit_once("\u{1b}[").unwrap();
        let col: usize = tail.strip_suffix('G').unwrap().parse().unwrap();
        (usize::from(ed.rendered_rows_above), col - 1)
    }

    #[test]
    fn chinese_text_places_the_cursor_by_display_width() {
        let mut ed = LineEditor::new();
        typed(&mut ed, "修复登录");
        // "> " is 2 columns, four CJK characters 8 more.
        assert_eq!(cursor_of(&mut ed, "> ", 40), (0, 10));
        press(&mut ed, KeyCode::Left);
        assert_eq!(cursor_of(&mut ed, "> ", 40), (0, 8));
    }

    #[test]
    fn chinese_text_wraps_where_the_terminal_wraps() {
        let mut ed = LineEditor::new();
        // Width 10: "> " + 4 CJK fill the row (10 columns); the 5th starts row 1.
        typed(&mut ed, "一二三四五");
        assert_eq!(cursor_of(&mut ed, "> ", 10), (1, 2));
        // Width 11: the 5th character does not fit in the last column, so it wraps
        // and leaves that column empty.
        assert_eq!(cursor_of(&mut ed, "> ", 11), (1, 2));
        press(&mut ed, KeyCode::Left);
        assert_eq!(cursor_of(&mut ed, "> ", 11), (1, 0));
    }

    #[test]
    fn a_chinese_prompt_is_measured_in_columns() {
        let mut ed = LineEditor::new();
        typed(&mut ed, "ab");
        assert_eq!(cursor_of(&mut ed, "问题> ", 40), (0, 8));
    }

    #[test]
    fn combining_marks_and_emoji_take_their_display_width() {
        let mut ed = LineEditor::new();
        // "e" + COMBINING ACUTE ACCENT is one column; the emoji two.
        typed(&mut ed, "e\u{301}🙂x");
        assert_eq!(cursor_of(&mut ed, "", 40), (0, 4));
        press(&mut ed, KeyCode::Left);
        assert_eq!(cursor_of(&mut ed, "", 40), (0, 3));
        press(&mut ed, KeyCode::Left);
        assert_eq!(cursor_of(&mut ed, "", 40), (0, 1));
    }

    /// A small terminal: the sequences the editor writes (text, `\r`, `\n`, CSI n A,
    /// CSI n G, CSI J), with wrapping like a real terminal (a character that does not fit
    /// moves to the next row; a full row leaves the cursor on it until the next one).
    struct Screen {
        width: usize,
        rows: Vec<Vec<char>>,
        row: usize,
        col: usize,
    }

    impl Screen {
        fn new(width: usize) -> Screen {
            Screen {
                width,
                rows: vec![Vec::new()],
                row: 0,
                col: 0,
            }
        }

        fn feed(&mut self, bytes: &[u8]) {
            let text = String::from_utf8(bytes.to_vec()).unwrap();
            let mut chars = text.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\r' => self.col = 0,
                    '\n' => self.row += 1,
                    '\u{1b}' => {
                        assert_eq!(chars.next(), Some('['));
                        let mut n = String::new();
                        while let Some(d) = chars.next_if(|d| d.is_ascii_digit()) {
                            n.push(d);
                        }
                        let n: usize = n.parse().unwrap_or(1);
                        match chars.next().unwrap() {
                            'A' => self.row -= n,
                            'G' => self.col = n - 1,
                            'J' => {
                                let col = self.col;
                                self.line().truncate(col);
                                self.rows.truncate(self.row + 1);
                            }
                            other => panic!("unexpected CSI {other}"),
                        }
                    }
                    c => {
                        if self.col >= self.width {
                            self.row += 1;
                            self.col = 0;
                        }
                        let col = self.col;
                        let line = self.line();
                        if line.len() <= col {
                            line.resize(col + 1, ' ');
                        }
                        line[col] = c;
                        self.col += 1;
                    }
                }
            }
        }

        fn line(&mut self) -> &mut Vec<char> {
            while self.rows.len() <= self.row {
                self.rows.push(Vec::new());
            }
            &mut self.rows[self.row]
        }

        fn text(&self) -> Vec<String> {
            let mut rows: Vec<String> = self.rows.iter().map(|r| r.iter().collect()).collect();
            while rows.last().is_some_and(|r| r.is_empty()) {
                rows.pop();
            }
            rows
        }
    }

    fn draw(screen: &mut Screen, ed: &mut LineEditor, prompt: &str) {
        let mut out = Vec::new();
        ed.render(&mut out, prompt, screen.width as u16).unwrap();
        screen.feed(&out);
    }

    fn notice(screen: &mut Screen, ed: &mut LineEditor, prompt: &str, line: &str) {
        let mut out = Vec::new();
        // As the session's screen prints a line above the prompt: erase, print, redraw.
        ed.erase(&mut out).unwrap();
        write!(out, "{line}\r\n").unwrap();
        ed.render(&mut out, prompt, screen.width as u16).unwrap();
        screen.feed(&out);
    }

    #[test]
    fn a_notice_while_typing_goes_above_and_the_line_is_redrawn_intact() {
        let mut screen = Screen::new(20);
        let mut ed = LineEditor::new();
        typed(&mut ed, "fix the");
        draw(&mut screen, &mut ed, "> ");
        notice(&mut screen, &mut ed, "> ", "* bob: parser done");
        assert_eq!(screen.text(), vec!["* bob: parser done", "> fix the"]);
        assert_eq!((screen.row, screen.col), (1, 9));
        // Typing goes on where it was.
        typed(&mut ed, " bug");
        draw(&mut screen, &mut ed, "> ");
        assert_eq!(screen.text(), vec!["* bob: parser done", "> fix the bug"]);
        assert_eq!(ed.text(), "fix the bug");
    }

    #[test]
    fn a_notice_over_a_wrapped_line_with_the_cursor_on_its_first_row() {
        let mut screen = Screen::new(10);
        let mut ed = LineEditor::new();
        typed(&mut ed, "abcdefghijkl");
        press(&mut ed, KeyCode::Home);
        draw(&mut screen, &mut ed, "> ");
        assert_eq!(screen.text(), vec!["> abcdefgh", "ijkl"]);
        notice(&mut screen, &mut ed, "> ", "note one");
        notice(&mut screen, &mut ed, "> ", "note two");
        assert_eq!(
            screen.text(),
            vec!["note one", "note two", "> abcdefgh", "ijkl"]
        );
        assert_eq!((screen.row, screen.col), (2, 2));
        typed(&mut ed, "X");
        draw(&mut screen, &mut ed, "> ");
        assert_eq!(
            screen.text(),
            vec!["note one", "note two", "> Xabcdefg", "hijkl"]
        );
        assert_eq!((screen.row, screen.col), (2, 3));
        // With the cursor at the end (on the second row) too.
        press(&mut ed, KeyCode::End);
        draw(&mut screen, &mut ed, "> ");
        notice(&mut screen, &mut ed, "> ", "note three");
        assert_eq!(
            screen.text(),
            vec!["note one", "note two", "note three", "> Xabcdefg", "hijkl"]
        );
        assert_eq!((screen.row, screen.col), (4, 5));
    }

    #[test]
    fn render_moves_to_the_display_column() {
        let mut ed = LineEditor::new();
        typed(&mut ed, "你好");
        let mut out = Vec::new();
        ed.render(&mut out, "> ", 40).unwrap();
        let text = String::from_utf8(out).unwrap();
        // MoveToColumn(6) is CSI 7 G (1-based).
        assert!(text.ends_with("\u{1b}[7G"), "{text:?}");
    }
}
