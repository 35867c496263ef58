//! The expansions whose result the text shows.
//!
//! Brace expansion (`{rm,-rf,/}`), backslash escapes (`$'\x72m'`, `echo -e`,
//! `printf`) and the output of substitutions simple enough to know
//! (`$(echo x)`, `$(which x)`). Kept apart from the lexer because each is a
//! small evaluator of its own with its own limits (word count, work budget),
//! and the lexer only asks for their results.

use super::segment::{basename, is_operator};
use super::{MAX_DEPTH, parse_depth, spend};

/// Most words one brace expansion may produce before it is left as typed.
const MAX_BRACE_WORDS: usize = 256;

/// What `echo ARGS` or `printf ARGS` prints (trailing newline dropped).
pub(super) fn echo_or_printf(name: &str, args: &[&str]) -> Option<String> {
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
pub(super) fn decode_escapes(text: &str) -> String {
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

/// What `$(…)` prints when its command is simple enough to know: `echo x`,
/// `printf x`, `which x`, `command -v x`, `type -P x`, `basename x`.
pub(super) fn resolve_substitution(inner: &str, depth: usize) -> Option<String> {
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
pub(super) fn brace_expand(raw: &str) -> Option<Vec<String>> {
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
