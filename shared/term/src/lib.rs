//! Terminal output shared by every binary: one colour decision (a terminal, `NO_COLOR`
//! unset or empty), one set of styles, and one escape for untrusted text ([`escape`] for
//! one line, [`escape_text`] for text that keeps its lines), and the one way text is cut
//! short ([`clip`], [`clip_with`]).

use std::io::IsTerminal;

/// Colour on or off for one output stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    colour: bool,
}

impl Style {
    /// Colour iff stdout is a terminal and `NO_COLOR` is unset or empty.
    pub fn for_stdout() -> Style {
        Style::new(std::io::stdout().is_terminal())
    }

    /// Colour iff stderr is a terminal and `NO_COLOR` is unset or empty.
    pub fn for_stderr() -> Style {
        Style::new(std::io::stderr().is_terminal())
    }

    /// Colour iff `terminal` and `NO_COLOR` is unset or empty.
    pub fn new(terminal: bool) -> Style {
        Style {
            colour: terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    /// Plain text, whatever the stream.
    pub const fn plain() -> Style {
        Style { colour: false }
    }

    /// Always colour (tests, or a caller that decided itself).
    pub const fn coloured() -> Style {
        Style { colour: true }
    }

    /// Whether this style colours.
    pub fn colours(self) -> bool {
        self.colour
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

    /// Red.
    pub fn red(self, text: &str) -> String {
        self.paint("31", text)
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

    /// A team member's colour by name (`red`, `green`, `yellow`, `blue`, `magenta` or
    /// `purple`, `cyan`, `orange`, `pink`); an unknown name is bold.
    pub fn member_colour(self, colour: &str, text: &str) -> String {
        let code = match colour.to_ascii_lowercase().as_str() {
            "red" => "31",
            "green" => "32",
            "yellow" => "33",
            "blue" => "34",
            "magenta" | "purple" => "35",
            "cyan" => "36",
            "orange" => "38;5;208",
            "pink" => "38;5;205",
            _ => "1",
        };
        self.paint(code, text)
    }
}

/// Makes untrusted text safe for one line of a terminal: control characters (C0 including
/// newline and tab, DEL, C1) and the bidirectional-override format characters are shown
/// as `\u{..}` escapes (`\n`, `\r`, `\t` for the common ones), so a summary cannot
/// start a forged header line or send terminal escape sequences. Every human-output path
/// prints user-supplied text through this; `--json` output is exact (JSON escapes it).
pub fn escape(text: &str) -> String {
    shown(text, |_| false)
}

/// Makes untrusted text of several lines safe for a terminal (a model's answer, a tool's
/// output): as [`escape`], but newlines and tabs are kept, so the text keeps its shape
/// while an escape sequence in it (`ESC ] 2 ; title BEL`, `ESC [ 2 J`, an 8-bit CSI) or
/// a carriage return meant to overwrite the line is shown instead of obeyed.
pub fn escape_text(text: &str) -> String {
    shown(text, |c| matches!(c, '\n' | '\t'))
}

/// At most `max` characters of `text`, with `…` when anything was cut: the one clipping
/// of a preview, an error excerpt or a name shown in a message (a terminal's or a
/// model's).
pub fn clip(text: &str, max: usize) -> String {
    clip_with(text, max, "…")
}

/// At most `max` characters of `text`, then `marker` when anything was cut (` …`,
/// `… [cut]`: where the reader must tell a cut from the text's own `…`).
pub fn clip_with(text: &str, max: usize, marker: &str) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}{marker}", &text[..end]),
        None => text.to_string(),
    }
}

/// Whether `c` must never reach a terminal or a model raw: a control character (C0
/// including newline and tab, DEL, C1) or an invisible format character — the
/// bidirectional overrides, isolates and marks (U+202A–U+202E, U+2066–U+2069, LRM, RLM,
/// ALM), the zero-width characters (U+200B–U+200D, U+2060–U+2064, U+FEFF), the
/// deprecated format characters (U+206A–U+206F), the Unicode tag characters
/// (U+E0000–U+E007F) and the line and paragraph separators (U+2028, U+2029): each can
/// hide or reorder text a reader thinks it sees. The one list [`escape`],
/// [`escape_text`], roo-store's `model_safe` and the approval view share.
pub fn hidden_char(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}'
            | '\u{061c}'
            | '\u{2028}'..='\u{2029}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{e0000}'..='\u{e007f}')
}

/// `text` with every unsafe character that `keep` does not keep written as an escape.
fn shown(text: &str, keep: fn(char) -> bool) -> String {
    let unsafe_char = |c: char| !keep(c) && hidden_char(c);
    if !text.chars().any(unsafe_char) {
        return text.to_owned();
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !unsafe_char(c) => shown.push(c),
            '\n' => shown.push_str("\\n"),
            '\r' => shown.push_str("\\r"),
            '\t' => shown.push_str("\\t"),
            c => shown.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_cuts_at_characters_and_marks_only_a_cut() {
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("ééé", 2), "éé…");
        assert_eq!(clip_with("abcd", 2, " …"), "ab …");
        assert_eq!(clip_with("ab", 2, " …"), "ab");
    }

    #[test]
    fn no_escape_codes_without_colour() {
        assert_eq!(Style::plain().red("x"), "x");
        assert_eq!(Style::coloured().red("x"), "\x1b[31mx\x1b[0m");
        assert_eq!(Style::new(false).bold("x"), "x");
        assert_eq!(Style::plain().member_colour("blue", "x"), "x");
        assert_eq!(
            Style::coloured().member_colour("Blue", "x"),
            "\x1b[34mx\x1b[0m"
        );
        assert_eq!(
            Style::coloured().member_colour("mauve", "x"),
            "\x1b[1mx\x1b[0m"
        );
    }

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
        assert_eq!(
            escape("a\u{200b}b\u{200f}\u{61c}\u{2060}\u{feff}\u{e0041}\u{2028}c"),
            "a\\u{200b}b\\u{200f}\\u{61c}\\u{2060}\\u{feff}\\u{e0041}\\u{2028}c"
        );
    }

    #[test]
    fn escape_text_keeps_lines_and_tabs_but_no_sequence() {
        assert_eq!(escape_text("a\n\tb\n"), "a\n\tb\n");
        assert_eq!(
            escape_text("\x1b]2;PWNED\x07x\x1b[2J\n\x1bP1$q\x1b\\"),
            "\\u{1b}]2;PWNED\\u{7}x\\u{1b}[2J\n\\u{1b}P1$q\\u{1b}\\"
        );
        assert_eq!(
            escape_text("100%\rdone\x08\u{9b}31m\u{9d}0;t\u{9c}"),
            "100%\\rdone\\u{8}\\u{9b}31m\\u{9d}0;t\\u{9c}"
        );
        assert_eq!(escape_text("\u{2067}abc"), "\\u{2067}abc");
    }
}
