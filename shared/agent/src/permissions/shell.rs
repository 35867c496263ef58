//! A small shell-command reader for permission checks.
//!
//! Both the dangerous-command layer and the rule layer must see a command the way
//! the shell will run it, not as a string: `echo ok && rm -rf ~` is two commands,
//! `"r"m -rf /` is `rm -rf /`, `sudo env X=1 /bin/rm …` runs `rm`, and
//! `bash -c "…"`, `eval …` and `$(…)` hide further commands. This module splits a
//! command line into simple commands (segments) at `&&`, `||`, `;`, `|`, `&`,
//! newlines and parentheses, removes quoting (ANSI-C `$'\x72m'` included),
//! applies the expansions whose result the text shows (brace expansion, `$IFS`
//! as a separator, `$(echo x)`, `$(which x)`), marks the words whose value it
//! cannot know (`$VAR`, `$(cmd)`), keeps redirections as words, and parses
//! nested commands recursively (to a fixed depth): substitutions, `bash -c`,
//! `eval`, scripts fed to a shell by `echo`/`printf` or a here-string, the
//! command `xargs` builds from `echo` output, `find -exec`, `env -S`,
//! `script -c`, git aliases, and the shell-outs of inline interpreter code. It is
//! deliberately conservative: when in doubt a word stays as typed, which can
//! only make an allow rule fail to match, never make a deny rule miss a plain
//! command.

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

/// Options of wrappers other than shells whose value is a shell command line.
const COMMAND_OPTIONS: &[(&str, &[&str])] = &[
    ("script", &["-c", "--command"]),
    ("flock", &["-c", "--command"]),
    ("su", &["-c", "--command"]),
    ("runuser", &["-c", "--command"]),
    ("sg", &["-c"]),
];

/// Interpreter options whose value is inline code.
const CODE_OPTIONS: &[&str] = &["-c", "-e", "-E", "-r", "--eval", "-p", "--print"];

/// Words in inline code that hand a string to a shell (`os.system("…")`).
const SHELL_OUTS: &[&str] = &[
    "system",
    "popen",
    "subprocess",
    "exec",
    "spawn",
    "qx",
    "`",
    "shell_exec",
    "passthru",
    "Process",
];

/// How deep nested commands (`bash -c "$(…)"`) are followed.
const MAX_DEPTH: usize = 6;

/// Most words one brace expansion may produce before it is left as typed.
const MAX_BRACE_WORDS: usize = 256;

/// Work (characters lexed) one parse may do per character of input, plus a
/// base: expansions and nested commands multiply the work, and a command built
/// to blow it up is reported as too complex instead of hanging the agent.
const WORK_PER_CHAR: usize = 64;
const WORK_BASE: usize = 100_000;

thread_local! {
    static WORK_LEFT: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// Takes `amount` from the current parse's work budget; false once it is spent.
fn spend(amount: usize) -> bool {
    WORK_LEFT.with(|left| {
        let have = left.get();
        if have < amount {
            left.set(0);
            false
        } else {
            left.set(have - amount);
            true
        }
    })
}

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
    fn here_string(&self) -> Option<&str> {
        self.words
            .windows(2)
            .find(|pair| pair[0].value.ends_with("<<<") && is_operator(&pair[0]))
            .map(|pair| pair[1].value.as_str())
    }

    /// What `echo …` or `printf …` prints, when every word is known.
    fn literal_output(&self) -> Option<String> {
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

/// What `echo ARGS` or `printf ARGS` prints (trailing newline dropped).
fn echo_or_printf(name: &str, args: &[&str]) -> Option<String> {
    match name {
        "echo" => {
            let mut escapes = false;
            let mut i = 0;
            while let Some(opt) = args.get(i) {
                if opt.len() > 1
                    && opt.starts_with('-')
                    && opt[1..].chars().all(|c| "neE".contains(c))
                {
                    escapes |= opt.contains('e');
                    i += 1;
                } else {
                    break;
                }
            }
            let text = args[i..].join(" ");
            Some(if escapes { decode_escapes(&text) } else { text })
        }
        "printf" => {
            let (format, rest) = args.split_first()?;
            let mut rest = rest.iter();
            let mut out = String::new();
            let mut chars = format.chars().peekable();
            while let Some(c) = chars.next() {
                if c == '%' {
                    match chars.next() {
                        Some('%') => out.push('%'),
                        Some('s') | Some('b') => out.push_str(rest.next().copied().unwrap_or("")),
                        _ => return None,
                    }
                } else {
                    out.push(c);
                }
            }
            Some(decode_escapes(&out))
        }
        _ => None,
    }
}

/// Backslash escapes as `echo -e`, `printf` and `$'…'` read them.
pub(crate) fn decode_escapes(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '\\' || i + 1 == chars.len() {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let c = chars[i + 1];
        i += 2;
        let simple = match c {
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            '\\' | '\'' | '"' | '?' => Some(c),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            continue;
        }
        let (radix, max) = match c {
            'x' => (16, 2),
            'u' => (16, 4),
            'U' => (16, 8),
            '0'..='7' => (8, 3),
            _ => {
                out.push('\\');
                out.push(c);
                continue;
            }
        };
        let start = if radix == 8 { i - 1 } else { i };
        let mut end = start;
        while end < chars.len() && end - start < max && chars[end].is_digit(radix) {
            end += 1;
        }
        let digits: String = chars[start..end].iter().collect();
        match u32::from_str_radix(&digits, radix)
            .ok()
            .and_then(char::from_u32)
        {
            Some(decoded) if !digits.is_empty() => {
                out.push(decoded);
                i = end;
            }
            _ => {
                out.push('\\');
                out.push(c);
            }
        }
    }
    out
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

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ParsedCommand {
    /// The top-level simple commands, in order.
    pub(crate) segments: Vec<Segment>,
    /// Command lines nested in this one: `$(…)`, `` `…` ``, `<(…)`, `>(…)`,
    /// `bash -c '…'`, `eval …`, `echo … | sh`, `sh <<< …`, `find -exec …`,
    /// `env -S …`, `xargs` fed by `echo`, git aliases, inline code's shell-outs.
    pub(crate) nested: Vec<ParsedCommand>,
    /// Whether the command substitutes the output of other commands into itself
    /// (`$(…)`, backticks, process substitution): what such a command runs cannot
    /// be judged from its text, so allow rules never approve it.
    pub(crate) substitutes: bool,
    /// Reading the command ran out of its work budget (a pathological brace
    /// expansion or nesting): parts of it may not have been read.
    pub(crate) too_complex: bool,
}

impl ParsedCommand {
    /// Parses a command line.
    pub(crate) fn parse(command: &str) -> Self {
        let budget = WORK_BASE.saturating_add(command.len().saturating_mul(WORK_PER_CHAR));
        WORK_LEFT.with(|left| left.set(budget));
        let mut parsed = parse_depth(command, 0);
        parsed.too_complex = WORK_LEFT.with(|left| left.get() == 0);
        WORK_LEFT.with(|left| left.set(usize::MAX));
        parsed
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
    let mut lexer = Lexer::new(command, depth);
    lexer.run();
    let mut parsed = ParsedCommand {
        segments: lexer.segments,
        nested: Vec::new(),
        substitutes: !lexer.substitutions.is_empty(),
        too_complex: false,
    };
    if depth >= MAX_DEPTH || !spend(command.len() + 1) {
        return parsed;
    }
    for inner in &lexer.substitutions {
        parsed.nested.push(parse_depth(inner, depth + 1));
    }
    let mut inline = Vec::new();
    for (i, segment) in parsed.segments.iter().enumerate() {
        let piped_text = if segment.piped && i > 0 {
            parsed.segments[i - 1].literal_output()
        } else {
            None
        };
        let stdin = segment.here_string().map(str::to_string).or(piped_text);
        inline.extend(inline_scripts(segment, stdin.as_deref()));
    }
    for script in inline {
        parsed.nested.push(parse_depth(&script, depth + 1));
    }
    parsed
}

/// Command lines a segment runs besides itself.
fn inline_scripts(segment: &Segment, stdin: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    // `echo a | xargs cmd`, `env -S 'cmd args' more`.
    let prefix = segment.prefix();
    let mut in_env = false;
    for (i, word) in prefix.iter().enumerate() {
        let name = basename(&word.value);
        if name == "xargs"
            && let Some(text) = stdin
        {
            out.push(xargs_command(&prefix[i + 1..], segment.effective(), text));
        }
        if !word.value.starts_with('-') {
            in_env = name == "env";
            continue;
        }
        if !in_env {
            continue;
        }
        let split = if word.value == "-S" || word.value == "--split-string" {
            prefix.get(i + 1).map(|w| w.value.clone())
        } else {
            word.value
                .strip_prefix("--split-string=")
                .or_else(|| word.value.strip_prefix("-S").filter(|s| !s.is_empty()))
                .map(str::to_string)
        };
        if let Some(script) = split {
            out.push(format!("{script} {}", quote_words(segment.effective())));
        }
    }
    let words = segment.effective();
    let Some(first) = words.first() else {
        return out;
    };
    let name = program_name(basename(&first.value));
    let args = &words[1..];
    if SHELLS.contains(&name) {
        // `bash -c 'cmd'`, `bash -lc 'cmd'`; else `echo cmd | sh`, `sh <<< cmd`.
        if let Some(pos) = args.iter().position(|w| {
            w.value.starts_with('-') && !w.value.starts_with("--") && w.value.contains('c')
        }) {
            if let Some(script) = args.get(pos + 1) {
                out.push(script.value.clone());
            }
        } else if operands(args).is_empty()
            && let Some(text) = stdin
        {
            out.push(text.to_string());
        }
    } else if name == "eval" {
        out.push(join(args.iter().map(|w| w.value.as_str())));
    } else if name == "find" {
        out.extend(find_exec_commands(args));
    } else if name == "git" {
        out.extend(git_config_commands(args));
    } else if INTERPRETERS.contains(&name) {
        out.extend(inline_code_commands(args));
    }
    // `script -c 'cmd'`, `flock FILE -c 'cmd'` (flock is also a wrapper).
    for (start, word) in segment.words.iter().enumerate() {
        let Some((_, options)) = COMMAND_OPTIONS
            .iter()
            .find(|(n, _)| *n == basename(&word.value))
        else {
            continue;
        };
        let rest = &segment.words[start + 1..];
        for (i, arg) in rest.iter().enumerate() {
            if options.contains(&arg.value.as_str())
                && let Some(script) = rest.get(i + 1)
            {
                out.push(script.value.clone());
            } else if let Some(script) = arg.value.strip_prefix("--command=") {
                out.push(script.to_string());
            }
        }
        break;
    }
    out
}

/// The words that are neither options nor redirections (with their targets).
fn operands(words: &[Word]) -> Vec<&Word> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for word in words {
        if skip_next {
            skip_next = false;
        } else if is_operator(word) {
            skip_next = true;
        } else if !word.value.starts_with('-') {
            out.push(word);
        }
    }
    out
}

/// `echo a b | xargs [-I R] cmd args`: the command xargs builds.
fn xargs_command(options: &[Word], command: &[Word], input: &str) -> String {
    let replace = options
        .iter()
        .enumerate()
        .find_map(|(i, w)| match w.value.as_str() {
            "-I" => options.get(i + 1).map(|v| v.value.clone()),
            "-i" | "--replace" => Some("{}".to_string()),
            v => v
                .strip_prefix("-I")
                .or_else(|| v.strip_prefix("--replace="))
                .or_else(|| v.strip_prefix("-i"))
                .filter(|r| !r.is_empty())
                .map(str::to_string),
        });
    // With `-I`, each input line is one item; otherwise each blank-separated word.
    let items: Vec<&str> = if replace.is_some() {
        input
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect()
    } else {
        input.split_whitespace().collect()
    };
    let base = if command.is_empty() {
        "echo".to_string()
    } else {
        quote_words(command)
    };
    match replace {
        Some(r) => items
            .iter()
            .map(|item| base.replace(&r, &quote(item)))
            .collect::<Vec<_>>()
            .join("; "),
        None => format!(
            "{base} {}",
            items.iter().map(|i| quote(i)).collect::<Vec<_>>().join(" ")
        ),
    }
}

/// The commands of `find … -exec CMD ARGS ;` (and `-execdir`, `-ok`, `-okdir`),
/// with `{}` standing for the first starting point.
fn find_exec_commands(args: &[Word]) -> Vec<String> {
    let values: Vec<&str> = args.iter().map(|w| w.value.as_str()).collect();
    let root = find_roots(&values).first().copied().unwrap_or(".");
    let mut out = Vec::new();
    let mut i = 0;
    while i < values.len() {
        if matches!(values[i], "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let mut end = start;
            while end < values.len() && values[end] != ";" && values[end] != "+" {
                end += 1;
            }
            let words: Vec<String> = values[start..end]
                .iter()
                .map(|v| quote(&v.replace("{}", root)))
                .collect();
            if !words.is_empty() {
                out.push(words.join(" "));
            }
            i = end;
        }
        i += 1;
    }
    out
}

/// The starting points of `find [-H|-L|-P] [-D x] [-Olevel] PATH… EXPR`.
pub(crate) fn find_roots<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match *arg {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            a if a.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    args[i.min(args.len())..]
        .iter()
        .copied()
        .take_while(|a| !a.starts_with('-') && *a != "(" && *a != "!")
        .collect()
}

/// Shell commands in `git -c alias.x='!cmd'`, `-c core.pager=cmd` and other
/// config values git runs through a shell; `git config alias.x '!cmd'` too; and
/// the command a `-c alias.x=…` alias expands to when it is the one run
/// (`git -c alias.p='push --force' p origin main`).
fn git_config_commands(args: &[Word]) -> Vec<String> {
    let mut out = Vec::new();
    let mut aliases: Vec<(String, String)> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let value = args[i].value.as_str();
        let setting = if value == "-c" || value == "--config-env" {
            i += 1;
            args.get(i).map(|w| w.value.as_str())
        } else {
            value.strip_prefix("-c").filter(|s| s.contains('='))
        };
        if let Some((key, val)) = setting.and_then(|s| s.split_once('=')) {
            let key = key.to_ascii_lowercase();
            if let Some(name) = key.strip_prefix("alias.") {
                match val.strip_prefix('!') {
                    Some(cmd) => out.push(cmd.to_string()),
                    None => aliases.push((name.to_string(), val.to_string())),
                }
            } else if [
                "pager",
                "editor",
                "sshcommand",
                "fsmonitor",
                "external",
                "program",
                "helper",
                "command",
                "hookspath",
            ]
            .iter()
            .any(|k| key.contains(k))
            {
                out.push(val.to_string());
            }
        } else if !value.starts_with('-') {
            break;
        }
        i += 1;
    }
    let rest = &args[i.min(args.len())..];
    if let Some((sub, more)) = rest.split_first() {
        let sub = sub.value.to_ascii_lowercase();
        if let Some((_, expansion)) = aliases.iter().find(|(name, _)| *name == sub) {
            out.push(format!("git {expansion} {}", quote_words(more)));
        }
        // `git config [--global] alias.x '!cmd'`, `git config core.pager cmd`.
        if sub == "config" {
            let operands: Vec<&Word> = more.iter().filter(|w| !w.value.starts_with('-')).collect();
            if let [key, value, ..] = operands.as_slice() {
                let key = key.value.to_ascii_lowercase();
                let val = value.value.as_str();
                if key.starts_with("alias.") {
                    if let Some(cmd) = val.strip_prefix('!') {
                        out.push(cmd.to_string());
                    }
                } else if ["pager", "editor", "sshcommand", "fsmonitor", "external"]
                    .iter()
                    .any(|k| key.contains(k))
                {
                    out.push(val.to_string());
                }
            }
        }
    }
    out
}

/// String literals of inline interpreter code (`python3 -c '…'`, `perl -e
/// '…'`) that shell out: `os.system("rm …")` runs `rm …`.
fn inline_code_commands(args: &[Word]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        let code = if CODE_OPTIONS.contains(&arg.value.as_str()) {
            args.get(i + 1).map(|w| w.value.as_str())
        } else if arg.value.len() > 2
            && arg.value.starts_with('-')
            && !arg.value.starts_with("--")
            && arg.value[1..].chars().all(|c| c.is_ascii_alphabetic())
            && arg.value.ends_with(['c', 'e', 'E'])
        {
            // `perl -pie '…'`, `python3 -Bc '…'`.
            args.get(i + 1).map(|w| w.value.as_str())
        } else {
            None
        };
        let Some(code) = code else { continue };
        if SHELL_OUTS.iter().any(|s| code.contains(s)) {
            // Each literal (`system("rm -rf /")`) and all of them as one command
            // (`subprocess.run(["rm", "-rf", "/"])`).
            let literals = string_literals(code);
            out.push(
                literals
                    .iter()
                    .map(|l| quote(l))
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            out.extend(literals);
        }
    }
    out
}

/// The contents of the quoted strings in a piece of code.
pub(crate) fn string_literals(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.chars();
    while let Some(c) = chars.next() {
        if matches!(c, '\'' | '"' | '`') {
            let mut text = String::new();
            while let Some(d) = chars.next() {
                if d == '\\' {
                    if let Some(e) = chars.next() {
                        text.push(e);
                    }
                } else if d == c {
                    break;
                } else {
                    text.push(d);
                }
            }
            out.push(text);
        }
    }
    out
}

fn quote_words(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| quote(&w.value))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A value as a single shell word.
fn quote(value: &str) -> String {
    if !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%{}~*".contains(c))
    {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
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

/// What `$(…)` prints when its command is simple enough to know: `echo x`,
/// `printf x`, `which x`, `command -v x`, `type -P x`, `basename x`.
fn resolve_substitution(inner: &str, depth: usize) -> Option<String> {
    if depth >= MAX_DEPTH || !spend(inner.len() + 1) {
        return None;
    }
    let parsed = parse_depth(inner, depth + 1);
    let [segment] = parsed.segments.as_slice() else {
        return None;
    };
    if parsed.substitutes || segment.words.iter().any(|w| w.expands || is_operator(w)) {
        return None;
    }
    let words: Vec<&str> = segment.words.iter().map(|w| w.value.as_str()).collect();
    let text = match words.as_slice() {
        ["which", .., name] | ["command", "-v" | "-V", name] | ["type", "-P" | "-p", name] => {
            (*name).to_string()
        }
        ["basename", path] => basename(path).to_string(),
        [name, args @ ..] => echo_or_printf(basename(name), args)?,
        [] => return None,
    };
    Some(text.trim_end_matches('\n').to_string())
}

/// Brace expansion of a word as typed (`{rm,-rf,/}` is three words); `None`
/// if it has no unquoted `{a,b}` group or would make too many words.
fn brace_expand(raw: &str) -> Option<Vec<String>> {
    let mut words = vec![raw.to_string()];
    let mut done = Vec::new();
    let mut expanded = false;
    while let Some(word) = words.pop() {
        match first_group(&word) {
            Some(alternatives) => {
                expanded = true;
                if !spend(word.len() * alternatives.len()) {
                    return None;
                }
                words.extend(alternatives.into_iter().rev());
            }
            None => done.push(word),
        }
        if words.len() + done.len() > MAX_BRACE_WORDS {
            return None;
        }
    }
    expanded.then_some(done)
}

/// The words the first unquoted `{a,b}` group of `raw` expands to.
fn first_group(raw: &str) -> Option<Vec<String>> {
    let chars: Vec<char> = raw.chars().collect();
    let mut i = 0;
    let mut quote: Option<char> = None;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some('"') if c == '\\' => i += 1,
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '\\' => i += 1,
                '$' if chars.get(i + 1) == Some(&'{') => {
                    // `${…}` is a parameter, not a brace group.
                    while i < chars.len() && chars[i] != '}' {
                        i += 1;
                    }
                }
                '{' => {
                    if let Some((close, commas)) = brace_group(&chars, i) {
                        let pre: String = chars[..i].iter().collect();
                        let post: String = chars[close + 1..].iter().collect();
                        let mut bounds = vec![i];
                        bounds.extend(commas);
                        bounds.push(close);
                        return Some(
                            bounds
                                .windows(2)
                                .map(|pair| {
                                    let alt: String = chars[pair[0] + 1..pair[1]].iter().collect();
                                    format!("{pre}{alt}{post}")
                                })
                                .collect(),
                        );
                    }
                }
                _ => {}
            },
        }
        i += 1;
    }
    None
}

/// The matching `}` of the `{` at `open` and the top-level commas between,
/// if there is at least one comma.
fn brace_group(chars: &[char], open: usize) -> Option<(usize, Vec<usize>)> {
    let mut depth = 0;
    let mut commas = Vec::new();
    let mut quote: Option<char> = None;
    let mut i = open;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some('"') if c == '\\' => i += 1,
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '\\' => i += 1,
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return (!commas.is_empty()).then_some((i, commas));
                    }
                }
                ',' if depth == 1 => commas.push(i),
                _ => {}
            },
        }
        i += 1;
    }
    None
}

/// Splits a command line into segments and collects nested command texts.
struct Lexer {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
    segments: Vec<Segment>,
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
    substitutions: Vec<String>,
}

impl Lexer {
    fn new(source: &str, depth: usize) -> Self {
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

    fn names(cmd: &str) -> Vec<String> {
        ParsedCommand::parse(cmd)
            .all_segments()
            .iter()
            .filter_map(|s| s.program().map(str::to_string))
            .collect()
    }

    #[test]
    fn applies_the_expansions_the_text_shows() {
        assert_eq!(texts("{rm,-rf,/}"), ["rm -rf /"]);
        assert_eq!(texts("r{m,} -rf {a,b}{1,2}"), ["rm r -rf a1 a2 b1 b2"]);
        assert_eq!(texts("echo '{a,b}' ${X} {x}"), ["echo {a,b} ${X} {x}"]);
        assert_eq!(texts("$'\\x72\\155' -rf $'\\u007e'"), ["rm -rf ~"]);
        assert_eq!(texts("rm${IFS}-rf${IFS}/"), ["rm -rf /"]);
        assert_eq!(texts("echo \"$IFS\""), ["echo $IFS"]);
        assert_eq!(texts("$(echo rm) -rf /"), ["rm -rf /"]);
        assert_eq!(texts("$(echo rm -rf) /"), ["rm -rf /"]);
        assert_eq!(texts("\"$(echo r m)\" x"), ["r m x"]);
        assert_eq!(texts("$(which curl) -s x"), ["curl -s x"]);
        let parsed = ParsedCommand::parse("$(cat f) -s x");
        let seg = &parsed.segments[0];
        assert!(seg.program_unresolved());
        assert!(parsed.substitutes);
        let parsed = ParsedCommand::parse("$(echo curl) x");
        assert!(!parsed.segments[0].program_unresolved());
        assert!(
            parsed.substitutes,
            "a resolved substitution still substitutes"
        );
        assert!(ParsedCommand::parse("$X -s").segments[0].program_unresolved());
    }

    #[test]
    fn finds_commands_run_through_other_programs() {
        for (cmd, hidden) in [
            ("echo 'curl x' | sh", "curl"),
            ("printf 'curl %s' x | bash -s", "curl"),
            ("bash <<< 'curl x'", "curl"),
            ("echo x | xargs curl", "curl"),
            ("echo x | xargs -I{} sh -c 'curl {}'", "curl"),
            ("find . -exec curl {} \\;", "curl"),
            ("env -S 'curl x'", "curl"),
            ("flock /tmp/l -c 'curl x'", "curl"),
            ("script -q -c 'curl x' /dev/null", "curl"),
            ("git -c alias.x='!curl y' x", "curl"),
            ("git -c core.pager='curl y' log", "curl"),
            ("python3.11 -c 'import os; os.system(\"curl x\")'", "curl"),
            ("busybox wget x", "wget"),
            ("timeout 5 flock /tmp/l nice curl x", "curl"),
        ] {
            assert!(
                names(cmd).iter().any(|n| n == hidden),
                "{cmd}: {:?}",
                names(cmd)
            );
        }
        assert_eq!(names("python3.11 x.py"), ["python"]);
        assert_eq!(names("command -v curl"), ["command"]);
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
    fn pathological_expansions_are_reported_not_expanded_forever() {
        // 40 brace groups would be 2^40 words; nested substitutions multiply.
        let braces = "{a,b}".repeat(40);
        let parsed = ParsedCommand::parse(&format!("echo {braces}"));
        assert_eq!(parsed.segments.len(), 1);
        let nested = "$(echo {a,b}{c,d}{e,f}{g,h}".repeat(6) + &")".repeat(6);
        let _ = ParsedCommand::parse(&nested);
        let wide = format!(
            "echo {}",
            "{x,y}{x,y}{x,y}{x,y}{x,y}{x,y}{x,y} ".repeat(2000)
        );
        assert!(ParsedCommand::parse(&wide).too_complex);
        assert!(!ParsedCommand::parse("rm -rf {a,b}/{c,d}").too_complex);
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
