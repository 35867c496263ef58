//! The `if:` of a hook: comparisons on the call, joined with `&&` and `||`.
//!
//! ```text
//! tool == "WriteFile"
//! tool matches "{WriteFile,EditFile}" && path matches "*.rs"
//! tool == "Bash" && command matches "git push*" || tool matches "mcp__github__*"
//! ```
//!
//! Fields: `tool` (the tool's name), `path` (the file a call touches: relative to the
//! project root when inside it, else absolute) and `command` (a Bash command line).
//! Operators: `==`, `!=`, and `matches`, a glob: for `path` `*` stays within one
//! directory and `**` crosses them, a pattern without `/` matches the file name at any
//! depth (as in permission rules); for `tool` and `command` `*` matches anything.
//! Values are quoted with `"` or `'`. `&&` binds tighter than `||`; there are no
//! parentheses. A field the event does not have (no path for Bash, no tool for
//! `session_start`) is empty: `==` and `matches` are false, `!=` is true.
//!
//! It lives with the config because it is part of what a config file says: the
//! reader parses every `if:` and rejects a file whose condition does not parse;
//! [`crate::hooks::CommandHooks`] matches it against each event.

use globset::{Glob, GlobBuilder, GlobMatcher};

/// What a condition is evaluated against.
#[derive(Debug, Clone, Copy, Default)]
pub struct HookFacts<'a> {
    /// The tool being called, for `tool ==` conditions.
    pub tool: Option<&'a str>,
    /// Relative to the project root when inside it, else absolute.
    pub path: Option<&'a str>,
    /// The Bash command being run, for `command` conditions.
    pub command: Option<&'a str>,
}

/// A parsed `if:`.
#[derive(Debug, Clone)]
pub struct HookCondition {
    /// Alternatives (`||`) of conjunctions (`&&`).
    any: Vec<Vec<Comparison>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Tool,
    Path,
    Command,
}

#[derive(Debug, Clone)]
enum Test {
    Equal(String),
    NotEqual(String),
    Matches(GlobMatcher),
}

#[derive(Debug, Clone)]
struct Comparison {
    field: Field,
    test: Test,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Text(String),
    Eq,
    Ne,
    And,
    Or,
}

impl HookCondition {
    /// Parses a condition; the error says what is wrong and shows the grammar.
    pub fn parse(text: &str) -> Result<Self, String> {
        let tokens = tokenize(text)?;
        let mut any = Vec::new();
        let mut all = Vec::new();
        let mut rest = tokens.as_slice();
        loop {
            let (comparison, after) = comparison(rest)?;
            all.push(comparison);
            match after.split_first() {
                None => break,
                Some((Token::And, after)) => rest = after,
                Some((Token::Or, after)) => {
                    any.push(std::mem::take(&mut all));
                    rest = after;
                }
                Some((other, _)) => {
                    return Err(format!(
                        "expected `&&` or `||` after a comparison, found {}",
                        show(other)
                    ));
                }
            }
        }
        any.push(all);
        Ok(Self { any })
    }

    /// Whether the condition holds.
    pub fn matches(&self, facts: &HookFacts<'_>) -> bool {
        self.any
            .iter()
            .any(|all| all.iter().all(|c| c.holds(facts)))
    }
}

const GRAMMAR: &str = "write comparisons such as `tool == \"WriteFile\"`, `path matches \"src/**/*.rs\"` \
                       or `command matches \"git push*\"`, joined with && and ||";

fn comparison(tokens: &[Token]) -> Result<(Comparison, &[Token]), String> {
    let [first, op, value, rest @ ..] = tokens else {
        return Err(format!("incomplete comparison; {GRAMMAR}"));
    };
    let field = match first {
        Token::Word(w) if w == "tool" => Field::Tool,
        Token::Word(w) if w == "path" => Field::Path,
        Token::Word(w) if w == "command" => Field::Command,
        other => {
            return Err(format!(
                "unknown field {}; the fields are tool, path and command",
                show(other)
            ));
        }
    };
    let Token::Text(value) = value else {
        return Err(format!(
            "the value after the operator must be quoted, found {}",
            show(value)
        ));
    };
    let test = match op {
        Token::Eq => Test::Equal(value.clone()),
        Token::Ne => Test::NotEqual(value.clone()),
        Token::Word(w) if w == "matches" => Test::Matches(glob(field, value)?),
        other => {
            return Err(format!(
                "unknown operator {}; use ==, != or matches",
                show(other)
            ));
        }
    };
    Ok((Comparison { field, test }, rest))
}

fn glob(field: Field, pattern: &str) -> Result<GlobMatcher, String> {
    let built = match field {
        Field::Path => {
            let pattern = pattern.trim_start_matches("./");
            let pattern = if pattern.contains('/') {
                pattern.to_string()
            } else {
                format!("**/{pattern}")
            };
            GlobBuilder::new(&pattern).literal_separator(true).build()
        }
        Field::Tool | Field::Command => Glob::new(pattern),
    };
    built
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("`{pattern}` is not a valid glob: {e}"))
}

impl Comparison {
    fn holds(&self, facts: &HookFacts<'_>) -> bool {
        let value = match self.field {
            Field::Tool => facts.tool,
            Field::Path => facts.path,
            Field::Command => facts.command,
        };
        match (&self.test, value) {
            (Test::Equal(expected), Some(v)) => v == expected,
            (Test::NotEqual(expected), Some(v)) => v != expected,
            (Test::NotEqual(_), None) => true,
            (Test::Matches(glob), Some(v)) => glob.is_match(v),
            (Test::Equal(_) | Test::Matches(_), None) => false,
        }
    }
}

fn show(token: &Token) -> String {
    match token {
        Token::Word(w) => format!("`{w}`"),
        Token::Text(t) => format!("\"{t}\""),
        Token::Eq => "`==`".to_string(),
        Token::Ne => "`!=`".to_string(),
        Token::And => "`&&`".to_string(),
        Token::Or => "`||`".to_string(),
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '"' | '\'' => {
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err(format!("unclosed {c} in the condition")),
                        Some('\\') => match chars.next() {
                            Some(escaped) => value.push(escaped),
                            None => return Err(format!("unclosed {c} in the condition")),
                        },
                        Some(end) if end == c => break,
                        Some(other) => value.push(other),
                    }
                }
                tokens.push(Token::Text(value));
            }
            '=' | '!' | '&' | '|' => {
                chars.next();
                let pair = (c, chars.next());
                tokens.push(match pair {
                    ('=', Some('=')) => Token::Eq,
                    ('!', Some('=')) => Token::Ne,
                    ('&', Some('&')) => Token::And,
                    ('|', Some('|')) => Token::Or,
                    _ => {
                        return Err(format!(
                            "unknown operator starting with `{c}`; use ==, !=, matches, && and ||"
                        ));
                    }
                });
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut word = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        word.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Word(word));
            }
            other => {
                return Err(format!("unexpected `{other}`; {GRAMMAR}"));
            }
        }
    }
    if tokens.is_empty() {
        return Err(format!("the condition is empty; {GRAMMAR}"));
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn holds(condition: &str, facts: HookFacts<'_>) -> bool {
        HookCondition::parse(condition).unwrap().matches(&facts)
    }

    fn call<'a>(tool: &'a str, path: Option<&'a str>) -> HookFacts<'a> {
        HookFacts {
            tool: Some(tool),
            path,
            command: None,
        }
    }

    #[test]
    fn a_tool_equality_matches_only_that_tool() {
        let c = "tool == \"WriteFile\"";
        assert!(holds(c, call("WriteFile", Some("a.rs"))));
        assert!(!holds(c, call("EditFile", Some("a.rs"))));
        assert!(!holds(c, HookFacts::default()));
    }

    #[test]
    fn globs_on_paths_tools_and_commands() {
        let c = "tool matches '{WriteFile,EditFile}' && path matches '*.rs'";
        assert!(holds(c, call("EditFile", Some("src/deep/main.rs"))));
        assert!(!holds(c, call("EditFile", Some("README.md"))));
        assert!(!holds(c, call("Bash", None)));
        assert!(holds(
            "path matches 'src/*.rs'",
            call("WriteFile", Some("src/a.rs"))
        ));
        assert!(!holds(
            "path matches 'src/*.rs'",
            call("WriteFile", Some("src/x/a.rs"))
        ));
        assert!(holds(
            "tool matches 'mcp__github__*'",
            call("mcp__github__create_issue", None)
        ));
        let push = HookFacts {
            tool: Some("Bash"),
            path: None,
            command: Some("git push --force origin main"),
        };
        assert!(holds("tool == 'Bash' && command matches 'git push*'", push));
    }

    #[test]
    fn and_binds_tighter_than_or() {
        let c = "tool == 'A' && path == 'x' || tool == 'B'";
        assert!(holds(c, call("B", None)));
        assert!(holds(c, call("A", Some("x"))));
        assert!(!holds(c, call("A", Some("y"))));
    }

    #[test]
    fn missing_fields_are_empty() {
        assert!(holds("path != 'x'", call("Bash", None)));
        assert!(!holds("path == 'x'", call("Bash", None)));
    }

    #[test]
    fn bad_conditions_are_errors_that_say_what_is_wrong() {
        for (text, needle) in [
            ("", "empty"),
            ("tool = 'x'", "unknown operator"),
            ("tool == WriteFile", "must be quoted"),
            ("tol == 'x'", "unknown field `tol`"),
            ("tool == 'x' and path == 'y'", "expected `&&` or `||`"),
            ("tool == 'x", "unclosed"),
            ("path matches '[a'", "not a valid glob"),
            ("tool ==", "incomplete"),
        ] {
            let e = HookCondition::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }
}
