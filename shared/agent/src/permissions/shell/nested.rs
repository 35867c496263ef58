//! Commands a simple command runs besides itself.
//!
//! `bash -c '…'`, `eval …`, `echo … | sh`, here-strings, `xargs` fed by `echo`,
//! `env -S`, `script -c`, `find -exec`, git aliases and config values git runs
//! through a shell, and the shell-outs of inline interpreter code. Each finder
//! turns a segment into command lines for the parser to read again, so this
//! module owns the knowledge of which programs hide commands and where.

use super::segment::{
    INTERPRETERS, SHELLS, Segment, Word, basename, is_operator, join, program_name,
};

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

/// Command lines a segment runs besides itself.
pub(super) fn inline_scripts(segment: &Segment, stdin: Option<&str>) -> Vec<String> {
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
