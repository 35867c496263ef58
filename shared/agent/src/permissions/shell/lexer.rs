//! The character-level reader of one command line.
//!
//! The [`Lexer`] walks the text once: it removes quoting, splits words and
//! segments at operators, keeps redirections as words, marks expansions it
//! cannot resolve, and collects the text of substitutions for the parser to
//! read as nested commands. It is the only part that looks at characters; all
//! others work on words.

use super::expansion::{brace_expand, decode_escapes, resolve_substitution};
use super::segment::{Segment, Word};

/// Splits a command line into segments and collects nested command texts.
pub(super) struct Lexer {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
    pub(super) segments: Vec<Segment>,
    current: Segment,
    raw: String,
    value: String,
    in_word: bool,
    expands: bool,
    substituted: bool,
    /// An unquoted substitution was resolved to text with spaces: the value
    /// splits into several words.
    split: bool,
    /// Brace expansion applies (not in the lexer of an already expanded word).
    braces: bool,
    pub(super) substitutions: Vec<String>,
}

impl Lexer {
    pub(super) fn new(source: &str, depth: usize) -> Self {
        Self {
            chars: source.chars().collect(),
            pos: 0,
            depth,
            segments: Vec::new(),
            current: Segment::default(),
            raw: String::new(),
            value: String::new(),
            in_word: false,
            expands: false,
            substituted: false,
            split: false,
            braces: true,
            substitutions: Vec::new(),
        }
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn end_word(&mut self) {
        if !self.in_word {
            return;
        }
        let word = Word {
            raw: std::mem::take(&mut self.raw),
            value: std::mem::take(&mut self.value),
            expands: std::mem::take(&mut self.expands),
            substituted: std::mem::take(&mut self.substituted),
        };
        self.in_word = false;
        let split = std::mem::take(&mut self.split);
        if self.braces
            && let Some(pieces) = brace_expand(&word.raw)
        {
            for piece in pieces {
                let mut lexer = Lexer::new(&piece, self.depth);
                lexer.braces = false;
                lexer.run();
                for segment in lexer.segments {
                    self.current
                        .words
                        .extend(segment.words.into_iter().map(|w| Word {
                            expands: w.expands || word.expands,
                            substituted: w.substituted || word.substituted,
                            ..w
                        }));
                }
            }
        } else if split {
            for value in word.value.split_whitespace() {
                self.current.words.push(Word {
                    value: value.to_string(),
                    ..word.clone()
                });
            }
        } else {
            self.current.words.push(word);
        }
    }

    fn end_segment(&mut self, next_piped: bool) {
        self.end_word();
        let segment = std::mem::take(&mut self.current);
        if !segment.words.is_empty() {
            self.segments.push(segment);
        }
        self.current.piped = next_piped;
    }

    fn push_op_word(&mut self, op: &str) {
        self.end_word();
        self.current.words.push(Word {
            raw: op.to_string(),
            value: op.to_string(),
            ..Word::default()
        });
    }

    fn push_char(&mut self, c: char) {
        self.raw.push(c);
        self.value.push(c);
        self.in_word = true;
    }

    pub(super) fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' => {
                    self.end_word();
                    self.pos += 1;
                }
                '\n' | ';' => {
                    self.end_segment(false);
                    self.pos += 1;
                }
                '(' | ')' => {
                    self.end_segment(false);
                    self.pos += 1;
                }
                '#' if !self.in_word => {
                    while let Some(c) = self.peek(0) {
                        if c == '\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                '&' => {
                    if self.peek(1) == Some('>') {
                        let op = if self.peek(2) == Some('>') {
                            "&>>"
                        } else {
                            "&>"
                        };
                        self.push_op_word(op);
                        self.pos += op.len();
                    } else {
                        // `&&` or `&`.
                        self.end_segment(false);
                        self.pos += if self.peek(1) == Some('&') { 2 } else { 1 };
                    }
                }
                '|' => match self.peek(1) {
                    Some('|') => {
                        self.end_segment(false);
                        self.pos += 2;
                    }
                    Some('&') => {
                        self.end_segment(true);
                        self.pos += 2;
                    }
                    _ => {
                        self.end_segment(true);
                        self.pos += 1;
                    }
                },
                '<' | '>' if self.peek(1) == Some('(') => {
                    let inner = self.capture_balanced(self.pos + 2, '(', ')');
                    self.raw.push_str(&format!("{c}({})", inner.0));
                    self.value.push_str(&format!("{c}({})", inner.0));
                    self.in_word = true;
                    self.expands = true;
                    self.substituted = true;
                    self.substitutions.push(inner.0);
                    self.pos = inner.1;
                }
                '<' | '>' => self.redirect(c),
                '\'' => self.single_quoted(),
                '"' => self.double_quoted(),
                '\\' => {
                    match self.peek(1) {
                        Some('\n') => {}
                        Some(next) => {
                            self.raw.push('\\');
                            self.raw.push(next);
                            self.value.push(next);
                            self.in_word = true;
                        }
                        None => self.push_char('\\'),
                    }
                    self.pos += 2;
                }
                '`' => self.backticks(true),
                '$' => self.dollar(false),
                _ => {
                    self.push_char(c);
                    self.pos += 1;
                }
            }
        }
        self.end_segment(false);
    }

    /// `$…` at the current position, unquoted or inside double quotes.
    fn dollar(&mut self, quoted: bool) {
        match self.peek(1) {
            Some('(') => self.dollar_paren(!quoted),
            Some('\'') if !quoted => self.ansi_c(),
            Some('"') if !quoted => {
                // `$"…"`: a translated string, read as a plain double-quoted one.
                self.raw.push('$');
                self.pos += 1;
                self.double_quoted();
            }
            Some('{') => {
                let (inner, next) = self.capture_balanced(self.pos + 2, '{', '}');
                self.pos = next;
                if !quoted && inner == "IFS" {
                    self.end_word();
                    return;
                }
                let text = format!("${{{inner}}}");
                self.raw.push_str(&text);
                self.value.push_str(&text);
                self.in_word = true;
                self.expands = true;
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let mut name = String::new();
                let mut i = self.pos + 1;
                while let Some(&c) = self.chars.get(i) {
                    if !(c.is_ascii_alphanumeric() || c == '_') {
                        break;
                    }
                    name.push(c);
                    i += 1;
                }
                self.pos = i;
                if !quoted && name == "IFS" {
                    self.end_word();
                    return;
                }
                let text = format!("${name}");
                self.raw.push_str(&text);
                self.value.push_str(&text);
                self.in_word = true;
                self.expands = true;
            }
            Some(c) if c.is_ascii_digit() || "?$#@*!-".contains(c) => {
                let text = format!("${c}");
                self.raw.push_str(&text);
                self.value.push_str(&text);
                self.in_word = true;
                self.expands = true;
                self.pos += 2;
            }
            _ => {
                self.push_char('$');
                self.pos += 1;
            }
        }
    }

    /// `$'…'`: ANSI-C quoting, escapes decoded (`$'\x72m'` is `rm`).
    fn ansi_c(&mut self) {
        let start = self.pos + 2;
        let mut end = start;
        while end < self.chars.len() && self.chars[end] != '\'' {
            if self.chars[end] == '\\' {
                end += 1;
            }
            end += 1;
        }
        let end = end.min(self.chars.len());
        let body: String = self.chars[start..end].iter().collect();
        self.raw.push_str(&format!("$'{body}'"));
        self.value.push_str(&decode_escapes(&body));
        self.in_word = true;
        self.pos = (end + 1).min(self.chars.len());
    }

    /// `>`, `>>`, `>|`, `>&`, `<`, `<<`, `<<<`, `<>`, `<&`, with a preceding fd
    /// number (`2>`) folded in.
    fn redirect(&mut self, c: char) {
        let mut op = String::new();
        if self.in_word && self.value.chars().all(|d| d.is_ascii_digit()) && self.raw == self.value
        {
            op.push_str(&std::mem::take(&mut self.raw));
            self.value.clear();
            self.in_word = false;
        }
        op.push(c);
        self.pos += 1;
        while let Some(next) = self.peek(0) {
            let more = match (c, next) {
                ('>', '>') | ('>', '|') | ('>', '&') => true,
                ('<', '<') | ('<', '>') | ('<', '&') => op.len() < 3,
                _ => false,
            };
            if !more {
                break;
            }
            op.push(next);
            self.pos += 1;
        }
        self.push_op_word(&op);
    }

    fn single_quoted(&mut self) {
        self.raw.push('\'');
        self.in_word = true;
        self.pos += 1;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            self.raw.push(c);
            if c == '\'' {
                return;
            }
            self.value.push(c);
        }
    }

    fn double_quoted(&mut self) {
        self.raw.push('"');
        self.in_word = true;
        self.pos += 1;
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.raw.push('"');
                    self.pos += 1;
                    return;
                }
                '\\' => {
                    let next = self.peek(1);
                    self.raw.push('\\');
                    if let Some(n) = next {
                        self.raw.push(n);
                        if !matches!(n, '"' | '\\' | '$' | '`' | '\n') {
                            self.value.push('\\');
                        }
                        if n != '\n' {
                            self.value.push(n);
                        }
                    }
                    self.pos += 2;
                }
                '`' => self.backticks(false),
                '$' => self.dollar(true),
                _ => {
                    self.raw.push(c);
                    self.value.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn backticks(&mut self, unquoted: bool) {
        let start = self.pos + 1;
        let mut end = start;
        while end < self.chars.len() && self.chars[end] != '`' {
            if self.chars[end] == '\\' {
                end += 1;
            }
            end += 1;
        }
        let inner: String = self.chars[start..end.min(self.chars.len())]
            .iter()
            .collect();
        self.raw.push_str(&format!("`{inner}`"));
        self.substituted(&inner, unquoted, format!("`{inner}`"));
        self.substitutions.push(inner);
        self.pos = (end + 1).min(self.chars.len());
    }

    fn dollar_paren(&mut self, unquoted: bool) {
        // `$(( … ))` is arithmetic, but may itself contain `$(…)`: treat it the same.
        let (inner, next) = self.capture_balanced(self.pos + 2, '(', ')');
        self.raw.push_str(&format!("$({inner})"));
        self.substituted(&inner, unquoted, format!("$({inner})"));
        self.substitutions.push(inner);
        self.pos = next;
    }

    /// The value of a command substitution: what it prints when that is known,
    /// else the text as typed (and the word is marked as unresolved).
    fn substituted(&mut self, inner: &str, unquoted: bool, typed: String) {
        self.in_word = true;
        self.substituted = true;
        match resolve_substitution(inner, self.depth) {
            Some(text) => {
                self.split |= unquoted && text.contains(char::is_whitespace);
                self.value.push_str(&text);
            }
            None => {
                self.expands = true;
                self.value.push_str(&typed);
            }
        }
    }

    /// Text from `start` up to the `close` that balances an already-open `open`,
    /// skipping quoted parts; returns it and the position after `close`.
    fn capture_balanced(&self, start: usize, open: char, close: char) -> (String, usize) {
        let mut depth = 1;
        let mut i = start;
        let mut quote: Option<char> = None;
        while i < self.chars.len() {
            let c = self.chars[i];
            match quote {
                Some(q) if c == q => quote = None,
                Some('"') if c == '\\' => i += 1,
                Some(_) => {}
                None => match c {
                    '\'' | '"' => quote = Some(c),
                    '\\' => i += 1,
                    c if c == open => depth += 1,
                    c if c == close => {
                        depth -= 1;
                        if depth == 0 {
                            let inner: String = self.chars[start..i].iter().collect();
                            return (inner, i + 1);
                        }
                    }
                    _ => {}
                },
            }
            i += 1;
        }
        let inner: String = self.chars[start.min(self.chars.len())..].iter().collect();
        (inner, self.chars.len())
    }
}
