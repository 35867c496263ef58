//! Simple commands and the program each one runs.
//!
//! A [`Segment`] is the words between two operators; its job is to say which
//! program the shell will start once assignments, keywords and wrappers
//! (`sudo`, `env`, `timeout 5`, …) are peeled off. The word lists that define
//! what a wrapper, a shell and an interpreter are live here because every
//! other part of the reader, and the permission layers, ask these questions.

use super::expansion::echo_or_printf;

/// Wrapper commands that run their arguments as a command: the options of each
/// that take a value, and how many positional arguments come before the
/// command (`timeout 5 cmd`, `flock FILE cmd`).
const WRAPPERS: &[(&str, &[&str], usize)] = &[
    (
        "sudo",
        &["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"],
        0,
    ),
    ("doas", &["-u", "-C"], 0),
    (
        "env",
        &["-u", "-C", "-S", "--unset", "--chdir", "--split-string"],
        0,
    ),
    ("nohup", &[], 0),
    ("exec", &["-a"], 0),
    ("time", &["-f", "-o", "--format", "--output"], 0),
    ("nice", &["-n", "--adjustment"], 0),
    ("ionice", &["-c", "-n", "-p", "--class", "--classdata"], 0),
    ("timeout", &["-s", "-k", "--signal", "--kill-after"], 1),
    ("command", &[], 0),
    ("builtin", &[], 0),
    (
        "stdbuf",
        &["-i", "-o", "-e", "--input", "--output", "--error"],
        0,
    ),
    ("setsid", &[], 0),
    (
        "xargs",
        &[
            "-n",
            "-I",
            "-L",
            "-P",
            "-d",
            "-E",
            "-s",
            "-a",
            "--max-args",
            "--replace",
            "--max-lines",
            "--max-procs",
            "--delimiter",
            "--eof",
            "--max-chars",
            "--arg-file",
        ],
        0,
    ),
    ("chrt", &[], 1),
    ("taskset", &[], 1),
    (
        "flock",
        &["-w", "-E", "--timeout", "--wait", "--conflict-exit-code"],
        1,
    ),
    ("busybox", &[], 0),
    ("chroot", &["--userspec", "--groups"], 1),
    ("unshare", &[], 0),
    ("nsenter", &["-t", "--target"], 0),
    ("watch", &["-n", "--interval"], 0),
    ("strace", &["-o", "-e", "-p", "-s", "-u", "-E"], 0),
    ("ltrace", &["-o", "-e", "-p", "-s", "-u"], 0),
    ("fakeroot", &[], 0),
    ("unbuffer", &[], 0),
    ("torsocks", &[], 0),
    ("proxychains", &["-f"], 0),
    ("proxychains4", &["-f"], 0),
    ("catchsegv", &[], 0),
    ("systemd-run", &["-p", "--property", "-u", "--unit"], 0),
];

/// Shell keywords that may start a simple command without being the command.
const KEYWORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "do", "while", "until", "coproc",
];

/// Shells whose `-c` argument (or stdin) is itself a command line.
pub(crate) const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "ash", "csh", "tcsh", "yash", "rbash",
];

/// Interpreters of other languages, by their name without a version suffix
/// (`python3.11` is `python`).
pub(crate) const INTERPRETERS: &[&str] = &[
    "python",
    "pypy",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "php",
    "lua",
    "luajit",
    "deno",
    "bun",
    "tclsh",
    "Rscript",
    "osascript",
];

/// One word of a command: as typed, and with quotes and escapes removed (and
/// the expansions RooCode can resolve applied: braces, `$'…'`, `$(echo x)`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Word {
    pub(crate) raw: String,
    pub(crate) value: String,
    /// The word contains an expansion whose result cannot be known from the
    /// text: `$VAR`, `${…}`, `$(cmd)` of an unknown command, backticks.
    pub(crate) expands: bool,
    /// The word substitutes command output (`$(…)`, backticks, `<(…)`), even
    /// if RooCode could tell what it prints.
    pub(crate) substituted: bool,
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
            for (wrapper, takes_value, positional) in WRAPPERS {
                if name != *wrapper {
                    continue;
                }
                // `command -v curl` prints where curl is; it does not run it.
                if name == "command"
                    && words
                        .get(i + 1)
                        .is_some_and(|w| w.value == "-v" || w.value == "-V")
                {
                    break 'outer;
                }
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
                i += positional;
                continue 'outer;
            }
            break;
        }
        &words[i.min(words.len())..]
    }

    /// The name of the command run (`rm` for `sudo /bin/rm -rf x`), if any.
    pub(crate) fn command_name(&self) -> Option<&str> {
        self.effective().first().map(|w| basename(&w.value))
    }

    /// The program as a deny rule sees it: `rm` for `sudo /bin/rm`, `python`
    /// for `python3.11`.
    pub(crate) fn program(&self) -> Option<&str> {
        self.command_name().map(program_name)
    }

    /// Whether the program run comes from an expansion RooCode cannot resolve
    /// (`$X -s …`, `$(cat name) …`): no rule can tell what it is.
    pub(crate) fn program_unresolved(&self) -> bool {
        self.effective().first().is_some_and(|w| w.expands)
    }

    /// The words before the real command (assignments, wrappers, their options).
    pub(crate) fn prefix(&self) -> &[Word] {
        let skip = self.words.len() - self.effective().len();
        &self.words[..skip]
    }

    /// The text of a here-string (`cmd <<< 'text'`), if the segment has one.
    pub(super) fn here_string(&self) -> Option<&str> {
        self.words
            .windows(2)
            .find(|pair| pair[0].value.ends_with("<<<") && is_operator(&pair[0]))
            .map(|pair| pair[1].value.as_str())
    }

    /// What `echo …` or `printf …` prints, when every word is known.
    pub(super) fn literal_output(&self) -> Option<String> {
        let words = self.effective();
        let name = basename(&words.first()?.value);
        let args: Vec<&Word> = words[1..].iter().take_while(|w| !is_operator(w)).collect();
        let values: Vec<&str> = args.iter().map(|w| w.value.as_str()).collect();
        echo_or_printf(name, &values)
    }
}

/// `python` for `python3.11`, `perl` for `perl5.36`: interpreters and shells
/// without their version suffix; other names as they are.
pub(crate) fn program_name(name: &str) -> &str {
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    if stem.len() < name.len() && (INTERPRETERS.contains(&stem) || SHELLS.contains(&stem)) {
        stem
    } else {
        name
    }
}

/// Whether a word is a redirection operator the lexer produced (`>`, `2>&`).
pub(crate) fn is_operator(word: &Word) -> bool {
    word.raw == word.value
        && !word.value.is_empty()
        && word.value.contains(['<', '>'])
        && word
            .value
            .chars()
            .all(|c| c.is_ascii_digit() || "<>&|".contains(c))
}

pub(super) fn join<'a>(parts: impl Iterator<Item = &'a str>) -> String {
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
