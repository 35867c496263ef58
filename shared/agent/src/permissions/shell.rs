//! A small shell-command reader for permission checks.
//!
//! Both the dangerous-command layer and the rule layer must see a command the way
//! the shell will run it, not as a string: `echo ok && rm -rf ~` is two commands,
//! `"r"m -rf /` is `rm -rf /`, `sudo env X=1 /bin/rm …` runs `rm`, and
//! `bash -c "…"`, `eval …` and `$(…)` hide further commands. This module splits a
//! command line into simple commands (segments) at `&&`, `||`, `;`, `|`, `&`,
//! newlines and parentheses, removes quoting, keeps redirections as words, and
//! parses nested commands recursively (to a fixed depth). It is deliberately
//! conservative: when in doubt a word stays as typed, which can only make an
//! allow rule fail to match, never make a deny rule miss a plain command.

/// Wrapper commands that run their arguments as a command, with the options of
/// each that take a value.
const WRAPPERS: &[(&str, &[&str])] = &[
    (
        "sudo",
        &["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"],
    ),
    ("doas", &["-u", "-C"]),
    ("env", &["-u", "-C", "-S", "--unset", "--chdir"]),
    ("nohup", &[]),
    ("exec", &["-a"]),
    ("time", &["-f", "-o"]),
    ("nice", &["-n", "--adjustment"]),
    ("ionice", &["-c", "-n", "-p", "--class", "--classdata"]),
    ("timeout", &["-s", "-k", "--signal", "--kill-after"]),
    ("command", &[]),
    ("builtin", &[]),
    ("stdbuf", &["-i", "-o", "-e"]),
    ("setsid", &[]),
    ("xargs", &["-n", "-I", "-L", "-P", "-d", "-E", "-s", "-a"]),
    ("chrt", &[]),
    ("taskset", &[]),
];

/// Shell keywords that may start a simple command without being the command.
const KEYWORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "do", "while", "until",
];

/// Shells whose `-c` argument is itself a command line.
pub(crate) const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "fish", "ash", "busybox"];

/// How deep nested commands (`bash -c "$(…)"`) are followed.
const MAX_DEPTH: usize = 6;

/// One word of a command: as typed, and with quotes and escapes removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    pub(crate) raw: String,
    pub(crate) value: String,
}

/// A simple command: the words between two operators.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Segment {
    pub(crate) words: Vec<Word>,
    /// Whether this segment reads the previous one's output (`a | b`).
    pub(crate) piped: bool,
}

impl Segment {
    /// The segment as typed, words joined by single spaces.
    pub(crate) fn raw_text(&self) -> String {
        join(self.words.iter().map(|w| w.raw.as_str()))
    }

    /// The segment with quoting removed.
    pub(crate) fn value_text(&self) -> String {
        join(self.words.iter().map(|w| w.value.as_str()))
    }

    /// The words from the real command on: leading `NAME=value` assignments,
    /// keywords and wrappers such as `sudo`, `env`, `nohup`, `timeout 5` removed.
    pub(crate) fn effective(&self) -> &[Word] {
        let words = &self.words[..];
        let mut i = 0;
        'outer: while i < words.len() {
            let value = words[i].value.as_str();
            if is_assignment(&words[i]) || KEYWORDS.contains(&value) {
                i += 1;
                continue;
            }
            let name = basename(value);
            for (wrapper, takes_value) in WRAPPERS {
                if name == *wrapper {
                    i += 1;
                    // Options (and their values) of the wrapper.
                    while i < words.len() && words[i].value.starts_with('-') {
                        let opt = words[i].value.as_str();
                        i += 1;
                        if opt == "--" {
                            break;
                        }
                        if takes_value.contains(&opt) {
                            i += 1;
                        }
                    }
                    // Positional arguments before the command.
                    let positional = match name {
                        "timeout" | "chrt" | "taskset" => 1,
                        _ => 0,
                    };
                    i += positional;
                    continue 'outer;
                }
            }
            break;
        }
        &words[i.min(words.len())..]
    }

    /// The name of the command run (`rm` for `sudo /bin/rm -rf x`), if any.
    pub(crate) fn command_name(&self) -> Option<&str> {
        self.effective().first().map(|w| basename(&w.value))
    }

    /// The words before the real command (assignments, wrappers, their options).
    pub(crate) fn prefix(&self) -> &[Word] {
        let skip = self.words.len() - self.effective().len();
        &self.words[..skip]
    }
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ParsedCommand {
    /// The top-level simple commands, in order.
    pub(crate) segments: Vec<Segment>,
    /// Command lines nested in this one: `$(…)`, `` `…` ``, `<(…)`, `>(…)`,
    /// `bash -c '…'`, `eval …`.
    pub(crate) nested: Vec<ParsedCommand>,
    /// Whether the command substitutes the output of other commands into itself
    /// (`$(…)`, backticks, process substitution): what such a command runs cannot
    /// be judged from its text, so allow rules never approve it.
    pub(crate) substitutes: bool,
}

impl ParsedCommand {
    /// Parses a command line.
    pub(crate) fn parse(command: &str) -> Self {
        parse_depth(command, 0)
    }

    /// Every segment, top-level and nested, depth first.
    pub(crate) fn all_segments(&self) -> Vec<&Segment> {
        let mut out: Vec<&Segment> = self.segments.iter().collect();
        for nested in &self.nested {
            out.extend(nested.all_segments());
        }
        out
    }

    /// Whether this command or any nested one substitutes command output.
    pub(crate) fn substitutes_anywhere(&self) -> bool {
        self.substitutes || self.nested.iter().any(Self::substitutes_anywhere)
    }
}

fn parse_depth(command: &str, depth: usize) -> ParsedCommand {
    let mut lexer = Lexer::new(command);
    lexer.run();
    let mut parsed = ParsedCommand {
        segments: lexer.segments,
        nested: Vec::new(),
        substitutes: !lexer.substitutions.is_empty(),
    };
    if depth >= MAX_DEPTH {
        return parsed;
    }
    for inner in &lexer.substitutions {
        parsed.nested.push(parse_depth(inner, depth + 1));
    }
    let mut inline = Vec::new();
    for segment in &parsed.segments {
        let words = segment.effective();
        let Some(first) = words.first() else { continue };
        let name = basename(&first.value);
        if SHELLS.contains(&name) {
            // `bash -c 'cmd'`, `bash -lc 'cmd'`, `busybox sh -c 'cmd'`.
            if let Some(pos) = words.iter().position(|w| {
                w.value.starts_with('-') && !w.value.starts_with("--") && w.value.contains('c')
            }) && let Some(script) = words.get(pos + 1)
            {
                inline.push(script.value.clone());
            }
        } else if name == "eval" {
            inline.push(join(words[1..].iter().map(|w| w.value.as_str())));
        }
    }
    for script in inline {
        parsed.nested.push(parse_depth(&script, depth + 1));
    }
    parsed
}

fn join<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    parts.collect::<Vec<_>>().join(" ")
}

/// `NAME=value` (not quoted at the start).
fn is_assignment(word: &Word) -> bool {
    let Some(eq) = word.raw.find('=') else {
        return false;
    };
    let name = &word.raw[..eq];
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// `rm` for `/usr/bin/rm`.
pub(crate) fn basename(value: &str) -> &str {
    value.rsplit('/').next().unwrap_or(value)
}

/// Splits a command line into segments and collects nested command texts.
struct Lexer {
    chars: Vec<char>,
    pos: usize,
    segments: Vec<Segment>,
    current: Segment,
    raw: String,
    value: String,
    in_word: bool,
    substitutions: Vec<String>,
}

impl Lexer {
    fn new(source: &str) -> Self {
        Self {
            chars: source.chars().collect(),
            pos: 0,
            segments: Vec::new(),
            current: Segment::default(),
            raw: String::new(),
            value: String::new(),
            in_word: false,
            substitutions: Vec::new(),
        }
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn end_word(&mut self) {
        if self.in_word {
            self.current.words.push(Word {
                raw: std::mem::take(&mut self.raw),
                value: std::mem::take(&mut self.value),
            });
            self.in_word = false;
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
        });
    }

    fn push_char(&mut self, c: char) {
        self.raw.push(c);
        self.value.push(c);
        self.in_word = true;
    }

    fn run(&mut self) {
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
                '`' => self.backticks(),
                '$' if self.peek(1) == Some('(') => self.dollar_paren(),
                _ => {
                    self.push_char(c);
                    self.pos += 1;
                }
            }
        }
        self.end_segment(false);
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
                '`' => self.backticks(),
                '$' if self.peek(1) == Some('(') => self.dollar_paren(),
                _ => {
                    self.raw.push(c);
                    self.value.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn backticks(&mut self) {
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
        self.value.push_str(&format!("`{inner}`"));
        self.in_word = true;
        self.substitutions.push(inner);
        self.pos = (end + 1).min(self.chars.len());
    }

    fn dollar_paren(&mut self) {
        // `$(( … ))` is arithmetic, but may itself contain `$(…)`: treat it the same.
        let (inner, next) = self.capture_balanced(self.pos + 2, '(', ')');
        self.raw.push_str(&format!("$({inner})"));
        self.value.push_str(&format!("$({inner})"));
        self.in_word = true;
        self.substitutions.push(inner);
        self.pos = next;
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn texts(cmd: &str) -> Vec<String> {
        ParsedCommand::parse(cmd)
            .segments
            .iter()
            .map(Segment::value_text)
            .collect()
    }

    #[test]
    fn splits_on_operators_outside_quotes() {
        assert_eq!(
            texts("git add . && git commit -m 'a && b'; echo done | tee log & wait"),
            [
                "git add .",
                "git commit -m a && b",
                "echo done",
                "tee log",
                "wait"
            ]
        );
        assert_eq!(texts("a || b\nc"), ["a", "b", "c"]);
        assert_eq!(texts("(cd x && make)"), ["cd x", "make"]);
    }

    #[test]
    fn marks_piped_segments() {
        let parsed = ParsedCommand::parse("curl -s x | sh && ls");
        let piped: Vec<bool> = parsed.segments.iter().map(|s| s.piped).collect();
        assert_eq!(piped, [false, true, false]);
    }

    #[test]
    fn removes_quotes_and_escapes() {
        assert_eq!(texts(r#""r"m -rf '/'"#), ["rm -rf /"]);
        assert_eq!(texts(r"\rm -rf \/"), ["rm -rf /"]);
        assert_eq!(texts(r#"echo "a \"b\" \$c""#), [r#"echo a "b" $c"#]);
        let parsed = ParsedCommand::parse("git commit -m 'fix: x'");
        assert_eq!(parsed.segments[0].raw_text(), "git commit -m 'fix: x'");
    }

    #[test]
    fn keeps_redirections_as_words() {
        let parsed = ParsedCommand::parse("echo x>/dev/sda 2>&1");
        let words: Vec<&str> = parsed.segments[0]
            .words
            .iter()
            .map(|w| w.value.as_str())
            .collect();
        assert_eq!(words, ["echo", "x", ">", "/dev/sda", "2>&", "1"]);
        assert_eq!(texts("cmd &> out.log"), ["cmd &> out.log"]);
    }

    #[test]
    fn sees_through_wrappers_and_assignments() {
        let parsed =
            ParsedCommand::parse("sudo -u root env -i FOO=1 nohup timeout -s KILL 5 /bin/rm -rf x");
        let seg = &parsed.segments[0];
        assert_eq!(seg.command_name(), Some("rm"));
        let eff: Vec<&str> = seg.effective().iter().map(|w| w.value.as_str()).collect();
        assert_eq!(eff, ["/bin/rm", "-rf", "x"]);
        assert_eq!(seg.prefix()[0].value, "sudo");
        let parsed = ParsedCommand::parse("RUST_LOG=debug cargo test");
        assert_eq!(parsed.segments[0].command_name(), Some("cargo"));
    }

    #[test]
    fn parses_nested_commands() {
        let parsed = ParsedCommand::parse(
            r#"echo $(rm -rf ~) `whoami` && bash -c "sudo reboot" && eval 'mkfs /dev/sda'"#,
        );
        assert!(parsed.substitutes);
        let names: Vec<_> = parsed
            .all_segments()
            .iter()
            .filter_map(|s| s.command_name().map(str::to_string))
            .collect();
        assert!(names.contains(&"rm".to_string()), "{names:?}");
        assert!(names.contains(&"whoami".to_string()), "{names:?}");
        assert!(names.contains(&"reboot".to_string()), "{names:?}");
        assert!(names.contains(&"mkfs".to_string()), "{names:?}");
        let parsed = ParsedCommand::parse("diff <(ls a) <(ls b)");
        assert!(parsed.substitutes);
        assert_eq!(parsed.nested.len(), 2);
    }

    #[test]
    fn comments_and_line_continuations() {
        assert_eq!(texts("ls # rm -rf /"), ["ls"]);
        assert_eq!(texts("cargo \\\n  test"), ["cargo test"]);
        assert_eq!(texts("echo a#b"), ["echo a#b"]);
    }

    #[test]
    fn arbitrary_input_does_not_panic() {
        // A deterministic pseudo-random walk over the characters the lexer treats
        // specially.
        let alphabet: Vec<char> = " \t\n;&|()<>'\"\\`$#{}=-*~/.0123abcrm语".chars().collect();
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for len in 0..400 {
            let text: String = (0..len % 40)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            let parsed = ParsedCommand::parse(&text);
            for segment in parsed.all_segments() {
                let _ = (segment.command_name(), segment.raw_text(), segment.prefix());
            }
            let _ = super::super::dangerous::check(&text);
        }
    }

    #[test]
    fn unterminated_input_does_not_panic() {
        for cmd in [
            "echo 'abc",
            "echo \"abc",
            "echo $(ls",
            "echo `ls",
            "a \\",
            "<(",
            "$(",
        ] {
            let _ = ParsedCommand::parse(cmd);
        }
    }
}
