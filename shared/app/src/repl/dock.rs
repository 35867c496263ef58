//! The block pinned at the bottom of the session's screen: the questions that wait for
//! an answer, the started line of the model's text, and the status line (the spinner
//! while the model works, or what the keys answer). Everything else — the stream of
//! text, tool lines and team notices — is printed above it: the block is taken off the
//! screen, the stream's lines printed, and the block drawn again below them, so a
//! question never scrolls away under later lines.
//!
//! No scroll region: the block is redrawn in place with relative cursor moves, which
//! works the same in tmux, over ssh and on any terminal size, and leaves the stream in
//! the terminal's own scrollback. The dock counts the rows it drew (a line wider than
//! the terminal takes several) so it can take exactly those off again.

use std::io::Write;

use crossterm::cursor::{MoveToColumn, MoveUp};
use crossterm::queue;
use crossterm::terminal::{BeginSynchronizedUpdate, Clear, ClearType, EndSynchronizedUpdate};
use unicode_width::UnicodeWidthChar;

/// What the dock drew: the rows above the cursor's row, and the block's lines (its last
/// line apart), so a change of the last line alone rewrites only that row.
#[derive(Default)]
pub(super) struct Dock {
    rows_above: u16,
    drawn: Vec<String>,
    last: Option<String>,
}

impl Dock {
    /// Starts an update drawn at once (terminals that do not know the mode ignore it).
    pub(super) fn begin(out: &mut impl Write) {
        let _ = queue!(out, BeginSynchronizedUpdate);
    }

    /// Ends the update begun by [`Dock::begin`] and flushes.
    pub(super) fn end(out: &mut impl Write) {
        let _ = queue!(out, EndSynchronizedUpdate);
        let _ = out.flush();
    }

    /// Takes the block off the screen: the cursor ends at column 0 of the row where the
    /// block began, everything from there down cleared.
    pub(super) fn erase(&mut self, out: &mut impl Write) {
        let _ = queue!(out, MoveToColumn(0));
        if self.rows_above > 0 {
            let _ = queue!(out, MoveUp(self.rows_above));
        }
        let _ = queue!(out, Clear(ClearType::FromCursorDown));
        self.rows_above = 0;
        self.drawn.clear();
        self.last = None;
    }

    /// Rewrites the last line in place when only it changed since the block was drawn
    /// with `rows` (the spinner's tick): one row instead of the whole block. `false`
    /// when more changed, or the last line takes more than one row.
    pub(super) fn update_last(
        &mut self,
        out: &mut impl Write,
        rows: &[String],
        last: &str,
        width: u16,
    ) -> bool {
        let (Some(drawn_last), true) = (&self.last, self.drawn == rows) else {
            return false;
        };
        let width = usize::from(width.max(10));
        if screen_rows(drawn_last, width) != 1 || screen_rows(last, width) != 1 {
            return false;
        }
        if drawn_last != last {
            let _ = queue!(out, MoveToColumn(0), Clear(ClearType::UntilNewLine));
            let _ = write!(out, "{last}");
            self.last = Some(last.to_string());
        }
        true
    }

    /// Draws `rows`, each on rows of its own, then `last` (if any) without a newline, the
    /// cursor after it; `width` is the terminal's width, for rows that wrap.
    pub(super) fn draw(
        &mut self,
        out: &mut impl Write,
        rows: &[String],
        last: Option<&str>,
        width: u16,
    ) {
        let width = usize::from(width.max(10));
        for row in rows {
            let _ = writeln!(out, "{row}");
            self.rows_above += screen_rows(row, width);
        }
        self.drawn = rows.to_vec();
        if let Some(last) = last {
            let _ = write!(out, "{last}");
            self.rows_above += screen_rows(last, width) - 1;
        }
        self.last = last.map(str::to_string);
    }
}

/// The rows `line` takes on a terminal `width` columns wide (at least one).
pub(super) fn screen_rows(line: &str, width: usize) -> u16 {
    let columns = shown_width(line);
    u16::try_from(columns.div_ceil(width.max(1)).max(1)).unwrap_or(u16::MAX)
}

/// Columns `line` takes on screen: styles (`ESC [ … m`) take none.
pub(super) fn shown_width(line: &str) -> usize {
    without_styles(line)
        .chars()
        .map(|c| c.width().unwrap_or(0))
        .sum()
}

/// `line` without styles, cut to at most `width - 1` columns keeping its end (a started
/// line shows what was written last), with `…` where it was cut.
pub(super) fn tail_fitting(line: &str, width: usize) -> String {
    let plain = without_styles(line);
    let room = width.saturating_sub(1).max(2);
    if shown_width(&plain) <= room {
        return plain;
    }
    let mut kept: Vec<char> = Vec::new();
    let mut used = 1;
    for c in plain.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > room {
            break;
        }
        used += w;
        kept.push(c);
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

/// `line` cut to at most `width - 1` columns keeping its start, with `…` where it was
/// cut; styles are dropped when it is cut.
pub(super) fn head_fitting(line: &str, width: usize) -> String {
    let room = width.saturating_sub(1).max(2);
    if shown_width(line) <= room {
        return line.to_string();
    }
    let mut out = String::new();
    let mut used = 1;
    for c in without_styles(line).chars() {
        let w = c.width().unwrap_or(0);
        if used + w > room {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

fn without_styles(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_count_wrapped_lines_and_ignore_styles() {
        assert_eq!(screen_rows("", 80), 1);
        assert_eq!(screen_rows(&"x".repeat(80), 80), 1);
        assert_eq!(screen_rows(&"x".repeat(81), 80), 2);
        assert_eq!(screen_rows("\x1b[2mdim\x1b[0m", 3), 1);
        assert_eq!(shown_width("界x"), 3);
    }

    #[test]
    fn the_block_is_taken_off_exactly_as_drawn() {
        let mut dock = Dock::default();
        let mut out = Vec::new();
        dock.draw(
            &mut out,
            &["a".to_string(), "b".repeat(25)],
            Some("status"),
            20,
        );
        // One row for `a`, two for the wrapped line; the status is the cursor's row.
        assert_eq!(dock.rows_above, 3);
        out.clear();
        dock.erase(&mut out);
        let shown = String::from_utf8(out).unwrap();
        assert!(shown.contains("\x1b[3A"), "{shown:?}");
        assert_eq!(dock.rows_above, 0);
    }

    #[test]
    fn a_tick_rewrites_only_the_last_line_when_nothing_else_changed() {
        let mut dock = Dock::default();
        let rows = vec!["? question".to_string(), "  [y] yes".to_string()];
        let mut out = Vec::new();
        dock.draw(&mut out, &rows, Some("⠋ working · 1s"), 40);
        out.clear();
        assert!(dock.update_last(&mut out, &rows, "⠙ working · 1s", 40));
        let shown = String::from_utf8(out).unwrap();
        assert!(!shown.contains("question"), "{shown:?}");
        assert!(shown.ends_with("⠙ working · 1s"), "{shown:?}");
        // Another row changed: the whole block is drawn again.
        let mut out = Vec::new();
        assert!(!dock.update_last(&mut out, &rows[..1], "⠙ working · 1s", 40));
        assert!(out.is_empty());
    }

    #[test]
    fn a_started_line_shows_its_end_and_a_status_its_start() {
        assert_eq!(tail_fitting("short", 80), "short");
        assert_eq!(tail_fitting("abcdefghij", 6), "…ghij");
        assert_eq!(tail_fitting("\x1b[2mabc\x1b[0m", 80), "abc");
        assert_eq!(head_fitting("abcdefghij", 6), "abcd…");
        assert_eq!(head_fitting("abc", 6), "abc");
    }
}
