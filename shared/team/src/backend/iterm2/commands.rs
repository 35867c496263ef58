//! The `it2` command lines the iTerm2 backend issues, as plain functions (unit-tested),
//! the parsing of `it2`'s answers, and the launcher a new pane's shell runs.
//!
//! Each function returns the arguments after `it2`. Options come first and free text
//! last, after `--`, so a title or text that starts with `-` is never read as an
//! option.

use std::fmt;
use std::path::{Path, PathBuf};

use super::It2Error;

/// What `it2 session split` prints before the new session's id.
pub const SPLIT_ANSWER: &str = "Created new pane: ";

/// An iTerm2 session: the GUID the Python API (and so `it2 --session`) knows it by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionId(String);

impl SessionId {
    /// A GUID, or `$ITERM_SESSION_ID`'s `w<N>t<N>p<N>:<GUID>` (its GUID is kept).
    pub fn parse(value: &str) -> Result<SessionId, It2Error> {
        let guid = match value.split_once(':') {
            Some((prefix, guid)) if is_pane_prefix(prefix) => guid,
            Some(_) => "",
            None => value,
        };
        if is_guid(guid) {
            Ok(SessionId(guid.to_string()))
        } else {
            Err(It2Error::SessionId {
                value: value.to_string(),
            })
        }
    }

    /// The GUID.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `w<digits>t<digits>p<digits>`.
fn is_pane_prefix(prefix: &str) -> bool {
    let mut rest = prefix;
    for letter in ['w', 't', 'p'] {
        let Some(after) = rest.strip_prefix(letter) else {
            return false;
        };
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return false;
        }
        rest = &after[digits..];
    }
    rest.is_empty()
}

/// 8-4-4-4-12 hex digits.
fn is_guid(value: &str) -> bool {
    let groups: Vec<&str> = value.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, len)| g.len() == len && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Where a new pane goes relative to the one it is split from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Side by side (a vertical divider: `--vertical`).
    Beside,
    /// Stacked (a horizontal divider).
    Below,
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_string()).collect()
}

/// Splits `target`'s pane; `it2` prints [`SPLIT_ANSWER`] and the new session's id.
pub fn split(target: &SessionId, split: Split) -> Vec<String> {
    let mut args = strings(&["session", "split"]);
    if split == Split::Beside {
        args.push("--vertical".into());
    }
    args.extend(strings(&["--session", target.as_str()]));
    args
}

/// Sets the session's name (its title in the pane's title bar and the tab).
pub fn set_name(session: &SessionId, name: &str) -> Vec<String> {
    strings(&[
        "session",
        "set-name",
        "--session",
        session.as_str(),
        "--",
        name,
    ])
}

/// Types `text` into the session as it is.
pub fn send_text(session: &SessionId, text: &str) -> Vec<String> {
    strings(&["session", "send", "--session", session.as_str(), "--", text])
}

/// Types `line` and Enter into the session.
pub fn run_line(session: &SessionId, line: &str) -> Vec<String> {
    strings(&["session", "run", "--session", session.as_str(), "--", line])
}

/// Closes the session without asking.
pub fn close(session: &SessionId) -> Vec<String> {
    strings(&["session", "close", "--force", "--session", session.as_str()])
}

/// Every session of every window, as JSON.
pub fn list() -> Vec<String> {
    strings(&["session", "list", "--json"])
}

/// The value of `--session` in `args`, if any (for error messages).
pub fn session_arg(args: &[String]) -> Option<String> {
    let at = args.iter().position(|a| a == "--session")?;
    args.get(at + 1).cloned()
}

/// The new session's id from `it2 session split`'s answer.
pub fn parse_split(out: &str, args: &[String]) -> Result<SessionId, It2Error> {
    out.lines()
        .find_map(|line| line.trim().strip_prefix(SPLIT_ANSWER))
        .and_then(|id| SessionId::parse(id.trim()).ok())
        .ok_or_else(|| It2Error::Answer {
            args: args.join(" "),
            answer: out.to_string(),
        })
}

/// One session of `it2 session list --json` (other fields are ignored).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ListedSession {
    pub id: String,
    #[serde(default)]
    pub name: String,
}

/// Parses `it2 session list --json`.
pub fn parse_list(out: &str, args: &[String]) -> Result<Vec<ListedSession>, It2Error> {
    serde_json::from_str(out).map_err(|_| It2Error::Answer {
        args: args.join(" "),
        answer: out.to_string(),
    })
}

/// What a teammate's pane starts: `argv` (the `roo-worker` command line, no secret on
/// it) in `cwd`, with `env` added (non-secret variables only, e.g. the path of the
/// credentials handoff file). With `pid_file`, the launcher first writes its pid there
/// (a line; the worker keeps that pid, as the launcher `exec`s it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneLaunch {
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub argv: Vec<String>,
    pub pid_file: Option<PathBuf>,
}

/// Parts of variable names that say the value is a secret, which must never be written
/// to a launcher (credentials go through the handoff file).
const SECRET_NAME_PARTS: [&str; 5] = ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"];

/// The `/bin/sh` script that starts `launch` in a new pane: it deletes itself, writes
/// its pid if asked, changes to the directory, exports the variables and `exec`s the command, every word quoted.
/// The error says what in `launch` cannot be written.
pub fn launcher_script(launch: &PaneLaunch) -> Result<String, String> {
    if launch.argv.is_empty() {
        return Err("the worker's command line is empty".into());
    }
    let mut script = String::from(
        "#!/bin/sh\n\
         # Starts a RooCode teammate in this iTerm2 pane. Holds no secret; deletes itself.\n\
         rm -f -- \"$0\"\n",
    );
    if let Some(pid_file) = &launch.pid_file {
        script.push_str(&format!(
            "printf '%s\\n' \"$$\" > {} || exit 1\n",
            sh_quote(&path_text(pid_file)?)
        ));
    }
    script.push_str(&format!(
        "cd -- {} || exit 1\n",
        sh_quote(&path_text(&launch.cwd)?)
    ));
    for (key, value) in &launch.env {
        if !is_env_name(key) {
            return Err(format!("{key:?} is not a variable name"));
        }
        let upper = key.to_ascii_uppercase();
        if SECRET_NAME_PARTS.iter().any(|part| upper.contains(part)) {
            return Err(format!(
                "{key} looks like a secret, and secrets never go into a launcher; pass \
                 credentials through the handoff file"
            ));
        }
        script.push_str(&format!("export {key}={}\n", sh_quote(value)));
    }
    let words: Vec<String> = launch.argv.iter().map(|w| sh_quote(w)).collect();
    script.push_str(&format!("exec {}\n", words.join(" ")));
    Ok(script)
}

/// The line typed into a new pane's shell to run `launcher`: ` /bin/sh '<path>'`.
///
/// Read alike by sh, bash, zsh, fish and tcsh only if the path has none of `'` `\` `!`
/// and no control character (fish reads `\` in quotes, tcsh `!`): such a path is an
/// error, never typed.
pub fn typed_line(launcher: &Path) -> Result<String, String> {
    let text = path_text(launcher)?;
    if !launcher.is_absolute() {
        return Err(format!("the launcher path {text} is not absolute"));
    }
    if let Some(c) = text
        .chars()
        .find(|c| matches!(c, '\'' | '\\' | '!') || c.is_control())
    {
        return Err(format!(
            "the launcher path {text:?} holds {c:?}, which a shell would not read as typed; \
             use a ROO_HOME without it"
        ));
    }
    Ok(format!(" /bin/sh '{text}'"))
}

fn path_text(path: &Path) -> Result<String, String> {
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| format!("the path {} is not UTF-8", path.display()))
}

fn is_env_name(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `word` as one `/bin/sh` word: single-quoted, each `'` written as `'\''`.
pub fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}
