//! What an allow rule may approve: one table of the options that make a
//! command run code or write files, and the checks of redirections, path
//! operands and expansions.
//!
//! An allow rule such as `Bash(find *)` is meant for finding files, not for
//! `find -exec sh -c …`; `Bash(git log *)` is not meant for `git log
//! --output=../outside/x`, nor `Bash(echo *)` for `echo x >> ~/.bashrc`. So a
//! simple command is approvable by a pattern rule only when:
//! - it has no redirection that writes outside the project (`/dev/null` and
//!   paths inside the project are fine; a target with an expansion is not);
//! - no word has an expansion RooCode cannot resolve (`$VAR`, `${…}`, `$(…)`);
//!   globs are fine;
//! - none of its programs (the wrappers before it included) uses an option
//!   listed in [`RISKS`] (`find -exec`, `sed 'e'`, `git -c`, `python -c`,
//!   `xargs`, …), and the programs that write files (`cp`, `rm`, `tee`, …)
//!   name only paths inside the project.
//!
//! A rule whose own literal text contains the risky option (`Bash(find *
//! -delete)`) approves it anyway: the user asked for exactly that. An exact
//! rule (no `*`) equal to the whole command line approves it as written.

use std::path::Path;

use super::confinement;
use super::shell::{Segment, Word, basename, is_operator, program_name};

/// Where a command runs: what "inside the project" means for its paths.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope<'a> {
    pub(crate) cwd: &'a Path,
    pub(crate) project_root: &'a Path,
}

/// Why an allow rule may not approve a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Blocker {
    pub(crate) reason: String,
    /// The option that makes the command risky; a rule whose literal text
    /// contains it approves the command anyway.
    pub(crate) token: Option<String>,
}

impl Blocker {
    fn new(reason: String, token: Option<&str>) -> Self {
        Self {
            reason,
            token: token.map(str::to_string),
        }
    }
}

/// How a program's arguments can run code or write files.
enum Check {
    /// Options that do: exact words (`-exec`), long options (also as
    /// `--opt=value` and GNU abbreviations), and short option letters (also in
    /// clusters such as `-lc`).
    Options {
        words: &'static [&'static str],
        long: &'static [&'static str],
        letters: &'static str,
    },
    /// Every use (the program runs the commands it is given).
    Always,
    /// A reader of its own.
    Custom(fn(&[&Word], &Scope<'_>) -> Option<Blocker>),
}

use Check::{Always, Custom, Options};

/// The programs whose options run code or write files, by name (interpreters
/// and shells without their version suffix). Programs not listed are judged by
/// their redirections and expansions only.
const RISKS: &[(&[&str], Check)] = &[
    (
        &["find"],
        Options {
            words: &[
                "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
                "-fls",
            ],
            long: &[],
            letters: "",
        },
    ),
    (&["sed", "gsed"], Custom(sed)),
    (&["awk", "gawk", "mawk", "nawk"], Custom(awk)),
    (&["git"], Custom(git)),
    (
        &["python", "pypy"],
        Options {
            words: &[],
            long: &["--command"],
            letters: "cm",
        },
    ),
    (
        &["perl"],
        Options {
            words: &[],
            long: &[],
            letters: "eEMx",
        },
    ),
    (
        &["ruby"],
        Options {
            words: &[],
            long: &[],
            letters: "erx",
        },
    ),
    (
        &["node", "nodejs", "bun", "deno"],
        Options {
            words: &["eval"],
            long: &["--eval", "--print", "--require", "--import", "--loader"],
            letters: "epr",
        },
    ),
    (
        &["php"],
        Options {
            words: &[],
            long: &[],
            letters: "rBREF",
        },
    ),
    (
        &["lua", "luajit"],
        Options {
            words: &[],
            long: &[],
            letters: "el",
        },
    ),
    (
        &[
            "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "ash", "csh", "tcsh", "yash",
            "rbash",
        ],
        Custom(shell),
    ),
    (
        &["env"],
        Options {
            words: &[],
            long: &["--split-string"],
            letters: "S",
        },
    ),
    (
        &[
            "xargs", "parallel", "watch", "eval", "exec", "source", ".", "vim", "vi", "nvim", "ex",
            "view",
        ],
        Always,
    ),
    (
        &["tar", "gtar", "bsdtar"],
        Options {
            words: &[],
            long: &[
                "--to-command",
                "--checkpoint-action",
                "--use-compress-program",
                "--info-script",
                "--new-volume-script",
                "--rsh-command",
                "--absolute-names",
                "--directory",
            ],
            letters: "IFPC",
        },
    ),
    (
        &["rsync"],
        Options {
            words: &[],
            long: &["--rsh", "--rsync-path"],
            letters: "e",
        },
    ),
    (
        &["zip"],
        Options {
            words: &["-TT"],
            long: &["--unzip-command"],
            letters: "",
        },
    ),
    (
        &["sort"],
        Options {
            words: &[],
            long: &["--compress-program", "--output"],
            letters: "o",
        },
    ),
    (
        &["emacs"],
        Options {
            words: &[],
            long: &["--eval", "--load", "--funcall"],
            letters: "lf",
        },
    ),
    (
        &["make", "gmake"],
        Options {
            words: &[],
            long: &["--eval"],
            letters: "",
        },
    ),
    (
        &["curl"],
        Options {
            words: &[],
            long: &["--output", "--config", "--output-dir"],
            letters: "oK",
        },
    ),
    (
        &["wget"],
        Options {
            words: &[],
            long: &[
                "--output-document",
                "--directory-prefix",
                "--output-file",
                "--append-output",
                "--execute",
            ],
            letters: "OPoae",
        },
    ),
    (
        &["ssh", "scp", "sftp"],
        Options {
            words: &[],
            long: &[],
            letters: "oSF",
        },
    ),
    (
        &[
            "cp", "mv", "ln", "install", "rm", "rmdir", "touch", "mkdir", "truncate", "shred",
            "unlink", "tee", "chmod", "chown", "chgrp", "dd",
        ],
        Custom(writes_paths),
    ),
];

/// Why no pattern rule may approve `segment` (run in `scope`), or `None`.
pub(crate) fn blocker(segment: &Segment, scope: &Scope<'_>) -> Option<Blocker> {
    let words = &segment.words;
    // Redirections.
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        if is_operator(word) {
            if let Some(target) = words.get(i + 1)
                && let Some(reason) = redirection(&word.value, target, scope)
            {
                return Some(Blocker::new(reason, None));
            }
            i += 2;
            continue;
        }
        if word.expands || word.substituted {
            return Some(Blocker::new(
                format!("`{}` expands to something its text does not show", word.raw),
                None,
            ));
        }
        i += 1;
    }
    // Each program in the chain: wrappers (`env -S`, `xargs`) and the command.
    let plain: Vec<&Word> = plain_words(words);
    let effective_start = plain
        .len()
        .saturating_sub(plain_words(segment.effective()).len());
    for (i, word) in plain.iter().enumerate() {
        let is_program = i == effective_start || i < effective_start && is_wrapper_word(word);
        if !is_program {
            continue;
        }
        let name = program_name(basename(&word.value));
        let args = &plain[i + 1..];
        if let Some(blocker) = check_program(name, args, scope) {
            return Some(blocker);
        }
    }
    None
}

/// Words other than redirections and their targets.
fn plain_words(words: &[Word]) -> Vec<&Word> {
    let mut out = Vec::new();
    let mut skip = false;
    for word in words {
        if skip {
            skip = false;
        } else if is_operator(word) {
            skip = true;
        } else {
            out.push(word);
        }
    }
    out
}

fn is_wrapper_word(word: &Word) -> bool {
    !word.value.starts_with('-') && !word.value.contains('=')
}

fn check_program(name: &str, args: &[&Word], scope: &Scope<'_>) -> Option<Blocker> {
    let (_, check) = RISKS.iter().find(|(names, _)| names.contains(&name))?;
    match check {
        Always => Some(Blocker::new(
            format!("`{name}` runs the commands it is given"),
            Some(name),
        )),
        Custom(read) => read(args, scope),
        Options {
            words,
            long,
            letters,
        } => args.iter().find_map(|arg| {
            let v = arg.value.as_str();
            let hit = words.contains(&v)
                || long.iter().any(|l| long_option(v, l))
                || short_cluster(v).is_some_and(|c| c.chars().any(|l| letters.contains(l)));
            hit.then(|| {
                let token = v.split('=').next().unwrap_or(v);
                Blocker::new(
                    format!("`{name} {token}` can run code or write files"),
                    Some(token),
                )
            })
        }),
    }
}

/// `--rec` or `--recursive=x` for `--recursive`.
fn long_option(word: &str, long: &str) -> bool {
    let name = word.split('=').next().unwrap_or(word);
    name.len() > 3 && name.starts_with("--") && long.starts_with(name)
}

/// The letters of a short option cluster (`lc` for `-lc`).
fn short_cluster(word: &str) -> Option<&str> {
    let rest = word.strip_prefix('-')?;
    (!rest.is_empty() && !rest.starts_with('-')).then_some(rest)
}

/// Why a redirection may not be approved: it writes outside the project.
fn redirection(op: &str, target: &Word, scope: &Scope<'_>) -> Option<String> {
    let writes = op.contains('>');
    if !writes {
        return None;
    }
    // `2>&1`, `>&-`: duplicating or closing a descriptor.
    if op.ends_with('&')
        && (target.value == "-" || target.value.chars().all(|c| c.is_ascii_digit()))
    {
        return None;
    }
    (!path_inside(target, scope)).then(|| {
        format!(
            "it writes to `{}`, outside the project (or to a place its text does not show)",
            target.raw
        )
    })
}

/// Whether a path word surely names a place inside the project (or a harmless
/// device such as `/dev/null`).
fn path_inside(word: &Word, scope: &Scope<'_>) -> bool {
    if word.expands || word.substituted {
        return false;
    }
    let value = word.value.as_str();
    if matches!(value, "/dev/null" | "/dev/stdout" | "/dev/stderr" | "-") {
        return true;
    }
    let path = if word.raw.starts_with('~') {
        let Some(home) = roo_store::user_home() else {
            return false;
        };
        let rest = value.trim_start_matches('~').trim_start_matches('/');
        if value.starts_with("~/") || value == "~" {
            home.join(rest)
        } else {
            // `~user/…`.
            return false;
        }
    } else {
        scope.cwd.join(value)
    };
    match confinement::resolve(&path) {
        Ok(resolved) => confinement::is_within(&resolved, scope.project_root),
        Err(_) => false,
    }
}

/// `sh -c`, `bash -s` and a shell reading its script from stdin.
fn shell(args: &[&Word], _: &Scope<'_>) -> Option<Blocker> {
    for arg in args {
        if let Some(cluster) = short_cluster(&arg.value)
            && let Some(letter) = cluster.chars().find(|c| "cs".contains(*c))
        {
            return Some(Blocker::new(
                format!("the shell runs the command line given by `-{letter}`"),
                Some(&arg.value),
            ));
        }
        if !arg.value.starts_with('-') {
            return None;
        }
    }
    Some(Blocker::new(
        "the shell runs whatever it reads from its input".to_string(),
        None,
    ))
}

/// `sed -i`, `sed -f`, and scripts with the `e`/`w`/`W` commands or `s///e`,
/// `s///w` flags.
fn sed(args: &[&Word], _: &Scope<'_>) -> Option<Blocker> {
    let mut scripts = Vec::new();
    let mut i = 0;
    let mut script_given = false;
    while i < args.len() {
        let v = args[i].value.as_str();
        if v == "-e" || v == "--expression" {
            script_given = true;
            if let Some(s) = args.get(i + 1) {
                scripts.push(s.value.as_str());
            }
            i += 2;
            continue;
        }
        if let Some(s) = v.strip_prefix("--expression=") {
            script_given = true;
            scripts.push(s);
        } else if long_option(v, "--in-place") || long_option(v, "--file") {
            return Some(Blocker::new(
                format!("`sed {v}` writes files or runs a script file"),
                Some(v.split('=').next().unwrap_or(v)),
            ));
        } else if let Some(cluster) = short_cluster(v)
            && !v.starts_with("--")
        {
            if let Some(letter) = cluster.chars().find(|c| "if".contains(*c)) {
                return Some(Blocker::new(
                    format!("`sed -{letter}` writes files or runs a script file"),
                    Some(&format!("-{letter}")),
                ));
            }
            if let Some(rest) = cluster.strip_prefix('e')
                && !rest.is_empty()
            {
                script_given = true;
                scripts.push(rest);
            }
        } else if !v.starts_with('-') && !script_given {
            script_given = true;
            scripts.push(v);
        }
        i += 1;
    }
    scripts.iter().any(|s| sed_script_risky(s)).then(|| {
        Blocker::new(
            "the sed script runs commands (`e`) or writes files (`w`)".to_string(),
            None,
        )
    })
}

/// Whether a sed script uses `e`, `w` or `W`, or the `e`/`w` flags of `s`.
/// Anything it cannot read counts as risky.
pub(crate) fn sed_script_risky(script: &str) -> bool {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let to_eol = |i: &mut usize| {
        while *i < chars.len() && chars[*i] != '\n' {
            *i += 1;
        }
    };
    // Reads a delimited part (`/re/`), returning false if unterminated.
    let delimited = |i: &mut usize, delim: char| -> bool {
        while *i < chars.len() {
            match chars[*i] {
                '\\' => *i += 2,
                c if c == delim => {
                    *i += 1;
                    return true;
                }
                _ => *i += 1,
            }
        }
        false
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' | ';' | '{' | '}' | '!' | ',' | '$' | '~' | '+' => i += 1,
            '0'..='9' => i += 1,
            '/' => {
                i += 1;
                if !delimited(&mut i, '/') {
                    return true;
                }
                // `/re/I`, `/re/M` address flags.
                while i < chars.len() && matches!(chars[i], 'I' | 'M') {
                    i += 1;
                }
            }
            '\\' => {
                let Some(&delim) = chars.get(i + 1) else {
                    return true;
                };
                i += 2;
                if !delimited(&mut i, delim) {
                    return true;
                }
            }
            'e' | 'w' | 'W' => return true,
            's' | 'y' => {
                let Some(&delim) = chars.get(i + 1) else {
                    return true;
                };
                if delim == '\n' || delim == '\\' {
                    return true;
                }
                i += 2;
                if !delimited(&mut i, delim) || !delimited(&mut i, delim) {
                    return true;
                }
                if c == 's' {
                    while i < chars.len() && !matches!(chars[i], ';' | '\n' | '}') {
                        match chars[i] {
                            'e' | 'w' | 'W' => return true,
                            ' ' | 'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => i += 1,
                            _ => return true,
                        }
                    }
                }
            }
            'a' | 'i' | 'c' | 'r' | 'R' | 'b' | 't' | 'T' | ':' | '#' => to_eol(&mut i),
            'd' | 'D' | 'p' | 'P' | 'n' | 'N' | 'g' | 'G' | 'h' | 'H' | 'x' | '=' | 'z' | 'F'
            | 'q' | 'Q' | 'l' | 'L' => i += 1,
            _ => return true,
        }
    }
    false
}

/// awk programs that run commands (`system(…)`, `print | "cmd"`) or write
/// files (`print > "f"`), and program files or extensions.
fn awk(args: &[&Word], _: &Scope<'_>) -> Option<Blocker> {
    let mut program_given = false;
    let mut i = 0;
    while i < args.len() {
        let v = args[i].value.as_str();
        if ["-f", "-i", "-l", "-E"].contains(&v)
            || ["--file", "--include", "--load", "--exec"]
                .iter()
                .any(|l| long_option(v, l))
        {
            return Some(Blocker::new(
                format!("`awk {v}` runs a program file or loads an extension"),
                Some(v.split('=').next().unwrap_or(v)),
            ));
        }
        let program = if v == "-e" || v == "--source" {
            i += 1;
            args.get(i).map(|w| w.value.as_str())
        } else if v == "-v" || v == "-F" {
            i += 1;
            None
        } else if !v.starts_with('-') && !program_given {
            Some(v)
        } else {
            None
        };
        if let Some(program) = program {
            program_given = true;
            if ["system", "|", ">"].iter().any(|s| program.contains(s)) {
                return Some(Blocker::new(
                    "the awk program runs commands or writes files (`system`, `|`, `>`)"
                        .to_string(),
                    None,
                ));
            }
        }
        i += 1;
    }
    None
}

/// git's options and subcommands that run commands or write outside the
/// repository: `-c` (aliases, pagers, hooks), `-C`/`--git-dir`/`--work-tree`
/// (another repository's config), `--output`, `--exec`, `--upload-pack`,
/// `config` changes, `bisect run`, `submodule foreach`, `filter-branch`.
fn git(args: &[&Word], _: &Scope<'_>) -> Option<Blocker> {
    let block = |what: &str, token: &str| {
        Some(Blocker::new(
            format!("`git {what}` can run commands or write outside the project"),
            Some(token),
        ))
    };
    let mut i = 0;
    while i < args.len() && args[i].value.starts_with('-') {
        let v = args[i].value.as_str();
        let name = v.split('=').next().unwrap_or(v);
        if v.starts_with("-c")
            || v.starts_with("-C")
            || [
                "--git-dir",
                "--work-tree",
                "--config-env",
                "--exec-path",
                "--namespace",
            ]
            .contains(&name)
        {
            let token = if name.starts_with("--") {
                name
            } else {
                &v[..2]
            };
            return block(v, token);
        }
        i += 1;
    }
    let sub = args.get(i).map(|w| w.value.as_str())?;
    let rest = &args[i + 1..];
    let operands = rest.iter().filter(|w| !w.value.starts_with('-')).count();
    match sub {
        "config" if operands > 1 => return block("config KEY VALUE", "config"),
        "bisect" if rest.first().is_some_and(|w| w.value == "run") => {
            return block("bisect run", "run");
        }
        "submodule" if rest.iter().any(|w| w.value == "foreach") => {
            return block("submodule foreach", "foreach");
        }
        "filter-branch" | "filter-repo" => return block(sub, sub),
        _ => {}
    }
    if sub == "config"
        && let Some(w) = rest.iter().find(|w| {
            [
                "--add",
                "--replace-all",
                "--unset",
                "--unset-all",
                "--edit",
                "-e",
                "--file",
                "-f",
            ]
            .contains(&w.value.as_str())
        })
    {
        return block(&format!("config {}", w.value), &w.value);
    }
    let long = [
        "--output",
        "--output-directory",
        "--exec",
        "--upload-pack",
        "--receive-pack",
        "--extcmd",
        "--open-files-in-pager",
        "--template",
        "--tool",
    ];
    for w in rest {
        let v = w.value.as_str();
        if let Some(l) = long.iter().find(|l| long_option(v, l)) {
            return block(&format!("{sub} {l}"), v.split('=').next().unwrap_or(v));
        }
        let short = match sub {
            "rebase" | "difftool" | "mergetool" => "x",
            "clone" => "u",
            "grep" => "O",
            "format-patch" => "o",
            _ => "",
        };
        if let Some(cluster) = short_cluster(v)
            && let Some(letter) = cluster.chars().find(|c| short.contains(*c))
        {
            return block(&format!("{sub} -{letter}"), &format!("-{letter}"));
        }
    }
    None
}

/// Programs that write, move or delete the files they name: every path
/// operand (and `of=` of dd) must be inside the project.
fn writes_paths(args: &[&Word], scope: &Scope<'_>) -> Option<Blocker> {
    let mut after_dashes = false;
    for arg in args {
        let v = arg.value.as_str();
        if !after_dashes && v == "--" {
            after_dashes = true;
            continue;
        }
        if !after_dashes && v.starts_with('-') && v.len() > 1 {
            // `--target-directory=DIR`.
            if let Some(dir) = v.split_once('=').map(|(_, d)| d)
                && dir.contains('/')
            {
                let word = Word {
                    raw: dir.to_string(),
                    value: dir.to_string(),
                    ..(*arg).clone()
                };
                if !path_inside(&word, scope) {
                    return Some(outside(&word.raw));
                }
            }
            continue;
        }
        let target = if let Some(path) = v.strip_prefix("of=") {
            Word {
                raw: path.to_string(),
                value: path.to_string(),
                ..(*arg).clone()
            }
        } else if v.contains('=') && !v.contains('/') {
            // dd's `if=`, `bs=`… and chmod-like `u=rw` modes are not paths.
            continue;
        } else {
            (*arg).clone()
        };
        // A mode (`755`, `u+x`) or owner (`me:staff`) of chmod/chown is a
        // relative name, so it counts as inside the project: no special case.
        if !path_inside(&target, scope) {
            return Some(outside(&target.raw));
        }
    }
    None
}

fn outside(raw: &str) -> Blocker {
    Blocker::new(
        format!("it names `{raw}`, outside the project (or a place its text does not show)"),
        None,
    )
}

#[cfg(test)]
mod tests;
