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
//!
//! The reader is split by job: [`segment`] says what a simple command is and
//! which program it runs, [`lexer`] reads characters into words and segments,
//! [`expansion`] evaluates the expansions whose result the text shows, and
//! [`nested`] finds the command lines a command runs besides itself. This file
//! ties them together ([`ParsedCommand::parse`], the depth limit and the work
//! budget) and is the one address the permission layers import from.

mod expansion;
mod lexer;
mod nested;
mod segment;

pub(crate) use nested::{find_roots, string_literals};
pub(crate) use segment::{
    INTERPRETERS, SHELLS, Segment, Word, basename, is_operator, program_name,
};

use lexer::Lexer;
use nested::inline_scripts;

/// How deep nested commands (`bash -c "$(…)"`) are followed.
const MAX_DEPTH: usize = 6;

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

#[cfg(test)]
mod tests;
