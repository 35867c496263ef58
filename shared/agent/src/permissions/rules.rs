//! Layer 3: allow / ask / deny rules from the three config files.
//!
//! A rule is `Tool` (every call of that tool) or `Tool(pattern)`. For Bash the
//! pattern is a glob over the command line where `*` matches anything; a single
//! trailing ` *` or the legacy `:*` suffix also matches the bare prefix
//! (`Bash(git *)` matches `git` and `git status`). For file tools the pattern is
//! a path glob relative to the project root (`src/**`, `*.md` at any depth,
//! `:/config` anchored at the root, `/abs/path/**` for absolute paths). Tool names may use `*`
//! (`mcp__github__*`).
//!
//! Rules come from three sources, and **the highest-priority source that has a
//! matching rule decides** (local > project > user); within one source deny beats
//! ask beats allow. Getting this order wrong lets a project allow overturn a local
//! deny (a known failure of rule merging); the regression tests below pin it.
//!
//! Compound commands are judged part by part: a deny or ask rule matching any
//! part (or the whole line, or a command nested in `$(…)` / `bash -c`) applies to
//! the whole command, and sees each part's normalised program (`/usr/bin/curl`,
//! `$(which curl)`, `{curl,-s,x}`, `$'curl'`, `command curl` are all `curl`).
//! An allow needs every part allowed — `Bash(git *)` does not approve `git
//! status && curl … | sh` — never approves a command that substitutes command
//! output (`$(…)`), whose effect its text cannot show, and approves a part only
//! if [`super::approvable`] finds nothing risky in it (`find -exec`, a
//! redirection outside the project, `$VAR`…). An exact rule without wildcards
//! (as "always allow" writes) approves exactly that command line. A command
//! whose program cannot be resolved (`$X -s …`) matches no allow rule when
//! deny or ask rules with patterns exist: it is left to the mode.
//!
//! Rule text is strict: a tool name in the wrong case or close to a built-in
//! one (`bash(…)`, `Bsah`), or a space before or just inside the parentheses
//! (`Bash (git *)`, `Bash( git *)`), is an error rather than a rule that
//! silently matches nothing. In a pattern `\*` is a literal `*`.

use std::fmt;
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use regex::Regex;

use super::approvable::Blocker;
use super::shell::{ParsedCommand, Segment, basename, program_name};
use crate::config::Source;

/// What a rule does when it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleKind {
    /// Run without asking.
    Allow,
    /// Ask the human, whatever the mode.
    Ask,
    /// Refuse.
    Deny,
}

impl RuleKind {
    /// The config key for this kind: `allow`, `ask` or `deny`.
    pub fn key(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// Why a rule string is not a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parse permission rule `{rule}`: {message}")]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub message: String,
}

/// One parsed rule.
#[derive(Debug, Clone)]
pub struct Rule {
    text: String,
    tool: Regex,
    content: Option<Content>,
}

/// The tools that read, search, change or run code, and plan mode's (which only
/// restricts those): what permission rules are about, so a rule naming something close
/// to one of them is a typo; and what a `--coordinator` lead loses. The one list: a test
/// in roo-app checks it against every tool a lead and a teammate get.
pub const CODE_TOOLS: [&str; 8] = [
    "Bash",
    "ReadFile",
    "WriteFile",
    "EditFile",
    "Glob",
    "Grep",
    "EnterPlanMode",
    "ExitPlanMode",
];

/// The `(pattern)` part of a rule, compiled for both kinds of target.
#[derive(Debug, Clone)]
struct Content {
    pattern: String,
    /// The pattern with `\*` read as `*`, for exact comparisons.
    literal: String,
    /// Whether the pattern has a wildcard `*`.
    wildcard: bool,
    /// The first word of a command pattern when it is literal (`curl` in
    /// `curl *`): deny and ask rules compare programs by normalised name.
    program: Option<String>,
    command: Regex,
    /// Path globs; `None` if the pattern is not a valid glob (then it can only
    /// match commands).
    paths: Option<PathPattern>,
}

#[derive(Debug, Clone)]
struct PathPattern {
    absolute: bool,
    globs: Vec<GlobMatcher>,
}

impl Rule {
    /// Parses `Tool` or `Tool(pattern)`.
    pub fn parse(text: &str) -> Result<Self, RuleError> {
        let text = text.trim();
        let fail = |message: &str| RuleError {
            rule: text.to_string(),
            message: message.to_string(),
        };
        let (tool, content) = match text.find('(') {
            None => (text, None),
            Some(open) => {
                let Some(inner) = text[open + 1..].strip_suffix(')') else {
                    return Err(fail(
                        "a pattern must be closed with `)` at the end, as in `Bash(git *)`",
                    ));
                };
                if inner.trim().is_empty() {
                    return Err(fail(
                        "the pattern in parentheses is empty; write just the tool name to match every call",
                    ));
                }
                let name = &text[..open];
                if name.ends_with(char::is_whitespace) {
                    return Err(fail(&format!(
                        "remove the space between the tool name and `(`: write `{}({inner})`",
                        name.trim()
                    )));
                }
                if inner.trim() != inner {
                    return Err(fail(&format!(
                        "remove the spaces just inside the parentheses: write `{name}({})`",
                        inner.trim()
                    )));
                }
                (name, Some(inner))
            }
        };
        if tool.is_empty() {
            return Err(fail(
                "the tool name is missing; write `Tool` or `Tool(pattern)`",
            ));
        }
        if !tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '*')
        {
            return Err(fail(
                "a tool name may only contain letters, digits, `_`, `-` and `*`",
            ));
        }
        if let Some(known) = near_known_tool(tool) {
            return Err(fail(&format!(
                "unknown tool `{tool}`; tool names are case-sensitive: did you mean `{known}`?"
            )));
        }
        let tool_regex = wildcard_regex(tool, false).map_err(|e| fail(&e))?;
        let content = content
            .map(|pattern| -> Result<Content, RuleError> {
                let command = squash(pattern);
                let first = command.split(' ').next().unwrap_or("");
                Ok(Content {
                    pattern: pattern.to_string(),
                    literal: pattern.replace("\\*", "*"),
                    wildcard: split_wildcards(pattern).len() > 1,
                    program: (!first.contains('*') && !first.is_empty()).then(|| first.to_string()),
                    command: wildcard_regex(&command, true).map_err(|e| fail(&e))?,
                    paths: path_pattern(pattern),
                })
            })
            .transpose()?;
        Ok(Self {
            text: text.to_string(),
            tool: tool_regex,
            content,
        })
    }

    /// The rule as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn matches_tool(&self, tool: &str) -> bool {
        self.tool.is_match(tool)
    }

    /// Whether the rule's tool part (`Bash`, `mcp__github__*`) names `tool`,
    /// whatever its pattern in parentheses. Tool filters use bare rules.
    pub fn names_tool(&self, tool: &str) -> bool {
        self.matches_tool(tool)
    }

    /// Whether the rule has a pattern in parentheses (`Bash(git *)`).
    pub fn has_pattern(&self) -> bool {
        self.content.is_some()
    }

    /// Matches a bare tool rule, or a path rule against a path target.
    fn matches_path(&self, path: &PathTarget<'_>) -> bool {
        match &self.content {
            None => true,
            Some(content) => content.paths.as_ref().is_some_and(|p| {
                if p.absolute {
                    p.globs.iter().any(|g| g.is_match(path.absolute))
                } else {
                    path.relative
                        .is_some_and(|rel| p.globs.iter().any(|g| g.is_match(rel)))
                }
            }),
        }
    }

    fn matches_text(&self, text: &str) -> bool {
        match &self.content {
            None => true,
            Some(content) => content.command.is_match(text),
        }
    }

    /// An exact (wildcard-free) rule equal to the whole command line.
    fn matches_exactly(&self, command: &str) -> bool {
        match &self.content {
            None => true,
            Some(content) => !content.wildcard && squash(&content.literal) == squash(command),
        }
    }

    /// Whether this allow rule approves one part of a command: its pattern
    /// matches the part as typed, and nothing risky was found in the part
    /// unless the rule itself names the risky option.
    fn approves(&self, segment: &Segment, blocker: Option<&Blocker>) -> bool {
        let Some(content) = &self.content else {
            return true;
        };
        if !content.command.is_match(&segment.raw_text()) {
            return false;
        }
        match blocker {
            None => true,
            Some(Blocker {
                token: Some(token), ..
            }) => split_wildcards(&content.pattern)
                .iter()
                .any(|part| part.contains(token.as_str())),
            Some(_) => false,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `bash` for `Bash`, `Bsah` for `Bash`: a tool name that is not a built-in one
/// but close to one (case-insensitively equal, or two edits away).
fn near_known_tool(tool: &str) -> Option<&'static str> {
    if tool.contains('*') || CODE_TOOLS.contains(&tool) {
        return None;
    }
    let lower = tool.to_ascii_lowercase();
    CODE_TOOLS.iter().copied().find(|known| {
        let known_lower = known.to_ascii_lowercase();
        known_lower == lower || (lower.len() >= 4 && edit_distance(&lower, &known_lower) <= 2)
    })
}

/// Levenshtein distance, for spotting typos in tool names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(cur)
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// The literal parts of a pattern between its wildcards (`\*` is literal).
fn split_wildcards(pattern: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'*') => {
                chars.next();
                current.push('*');
            }
            '*' => parts.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    parts.push(current);
    parts
}

/// `*` matches anything; everything else is literal. For commands, one trailing
/// ` *` (or `:*`) also matches the bare prefix.
fn wildcard_regex(pattern: &str, command: bool) -> Result<Regex, String> {
    let (body, optional_tail) = if command && let Some(prefix) = pattern.strip_suffix(":*") {
        (prefix, true)
    } else if command
        && let Some(prefix) = pattern.strip_suffix(" *")
        && split_wildcards(prefix).len() == 1
    {
        (prefix, true)
    } else {
        (pattern, false)
    };
    let mut regex = String::from("(?s)^");
    for (i, part) in split_wildcards(body).iter().enumerate() {
        if i > 0 {
            regex.push_str(".*");
        }
        regex.push_str(&regex::escape(part));
    }
    if optional_tail {
        regex.push_str("(?: .*)?");
    }
    regex.push('$');
    Regex::new(&regex).map_err(|e| e.to_string())
}

/// Compiles a path pattern: relative patterns without `/` match at any depth;
/// `:/` anchors one at the project root (`:/config` is only the root's `config`,
/// as in git's pathspecs); `dir/**` also matches `dir` itself.
fn path_pattern(pattern: &str) -> Option<PathPattern> {
    let (anchored, pattern) = match pattern.strip_prefix(ROOT_ANCHOR) {
        Some(rest) => (true, rest),
        None => (false, pattern.trim_start_matches("./")),
    };
    let mut pattern = pattern.to_string();
    let absolute = if anchored {
        false
    } else if let Some(rest) = pattern.strip_prefix("~/") {
        let home = roo_store::user_home()?;
        pattern = format!("{}/{rest}", Path::new(&home).display());
        true
    } else {
        pattern.starts_with('/')
    };
    let mut sources = vec![if !anchored && !absolute && !pattern.contains('/') {
        format!("**/{pattern}")
    } else {
        pattern.clone()
    }];
    if let Some(stem) = pattern.strip_suffix("/**")
        && !stem.is_empty()
    {
        sources.push(stem.to_string());
    }
    let globs = sources
        .iter()
        .map(|s| {
            GlobBuilder::new(s)
                .literal_separator(true)
                .build()
                .map(|g| g.compile_matcher())
        })
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    Some(PathPattern { absolute, globs })
}

/// The prefix that anchors a path pattern at the project root: `EditFile(:/config)`
/// matches the root's `config` only, where `EditFile(config)` matches one at any depth.
pub const ROOT_ANCHOR: &str = ":/";

/// `path` as a path pattern that matches exactly it: glob metacharacters
/// escaped (see [`escape_glob`]), and anchored at the project root (`:/name`)
/// when it has no `/`, so the pattern is never widened to any depth.
pub fn literal_path_pattern(path: &Path) -> String {
    let escaped = escape_glob(path);
    if escaped.contains('/') {
        escaped
    } else {
        format!("{ROOT_ANCHOR}{escaped}")
    }
}

/// `path` with every glob metacharacter (`\ * ? [ ] { }`) escaped, and a leading
/// `~` or `:` too (so it is not read as the home directory or the root anchor).
pub fn escape_glob(path: &Path) -> String {
    let mut escaped = String::new();
    for (i, c) in path.to_string_lossy().chars().enumerate() {
        if matches!(c, '\\' | '*' | '?' | '[' | ']' | '{' | '}')
            || (i == 0 && matches!(c, '~' | ':'))
        {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Collapses runs of whitespace, for comparing command lines.
fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The allow, ask and deny rules of one source.
#[derive(Debug, Clone, Default)]
pub struct SourceRules {
    /// Calls these rules allow.
    pub allow: Vec<Rule>,
    /// Calls these rules send to the human.
    pub ask: Vec<Rule>,
    /// Calls these rules deny.
    pub deny: Vec<Rule>,
}

impl SourceRules {
    fn list(&self, kind: RuleKind) -> &[Rule] {
        match kind {
            RuleKind::Allow => &self.allow,
            RuleKind::Ask => &self.ask,
            RuleKind::Deny => &self.deny,
        }
    }

    fn list_mut(&mut self, kind: RuleKind) -> &mut Vec<Rule> {
        match kind {
            RuleKind::Allow => &mut self.allow,
            RuleKind::Ask => &mut self.ask,
            RuleKind::Deny => &mut self.deny,
        }
    }
}

/// The rules of all three sources.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    user: SourceRules,
    project: SourceRules,
    local: SourceRules,
    /// The project sources are from an untrusted project: they may add denials
    /// and questions but never lift a denial of the user's.
    project_narrows_only: bool,
}

/// What a call touches, as the rule layer sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RuleTarget<'a> {
    None,
    Path(PathTarget<'a>),
    Command {
        line: &'a str,
        parsed: &'a ParsedCommand,
        /// Why each top-level segment may not be approved by a pattern rule.
        blockers: &'a [Option<Blocker>],
    },
}

/// A resolved path: absolute, and relative to the project root when inside it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathTarget<'a> {
    pub(crate) absolute: &'a Path,
    pub(crate) relative: Option<&'a Path>,
}

/// The rule that decided a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleHit {
    /// Whether the rule allows, asks or denies.
    pub kind: RuleKind,
    /// Where the deciding rule is configured; `None` when allow rules of several
    /// sources together approved the parts of a compound command.
    pub source: Option<Source>,
    /// The deciding rule(s), as written.
    pub rule: String,
}

impl RuleSet {
    /// No rules.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks the project and local sources as coming from an untrusted project:
    /// their `ask` rules, which outrank the user's rules, may no longer turn a
    /// user `deny` into a question (the stricter of the two decides).
    pub fn set_project_narrows_only(&mut self, narrows_only: bool) {
        self.project_narrows_only = narrows_only;
    }

    /// The rules of one source.
    pub fn source(&self, source: Source) -> &SourceRules {
        match source {
            Source::User => &self.user,
            Source::Project => &self.project,
            Source::Local => &self.local,
        }
    }

    fn source_mut(&mut self, source: Source) -> &mut SourceRules {
        match source {
            Source::User => &mut self.user,
            Source::Project => &mut self.project,
            Source::Local => &mut self.local,
        }
    }

    /// Parses and adds a rule.
    pub fn add(&mut self, source: Source, kind: RuleKind, rule: &str) -> Result<(), RuleError> {
        let rule = Rule::parse(rule)?;
        self.push(source, kind, rule);
        Ok(())
    }

    /// Adds a parsed rule (once: an identical rule of the same kind and source is
    /// not added again).
    pub fn push(&mut self, source: Source, kind: RuleKind, rule: Rule) {
        let list = self.source_mut(source).list_mut(kind);
        if !list.iter().any(|r| r.text == rule.text) {
            list.push(rule);
        }
    }

    /// Whether no source has any rule.
    pub fn is_empty(&self) -> bool {
        Source::ALL.iter().all(|s| {
            let r = self.source(*s);
            r.allow.is_empty() && r.ask.is_empty() && r.deny.is_empty()
        })
    }

    /// Whether any source has a deny rule for `tool`.
    pub(crate) fn has_deny_rules(&self, tool: &str) -> bool {
        Source::ALL
            .iter()
            .any(|s| self.source(*s).deny.iter().any(|r| r.matches_tool(tool)))
    }

    /// Whether any source has a deny or ask rule with a pattern for `tool`: a
    /// command whose program cannot be resolved might be what it names.
    pub(crate) fn has_restrictive_patterns(&self, tool: &str) -> bool {
        Source::ALL.iter().any(|s| {
            let rules = self.source(*s);
            rules
                .deny
                .iter()
                .chain(&rules.ask)
                .any(|r| r.content.is_some() && r.matches_tool(tool))
        })
    }

    /// The first rule that denies reading `path` with `tool` (`ReadFile`),
    /// honouring source priority, or `None`.
    pub(crate) fn denies(&self, tool: &str, path: &PathTarget<'_>) -> Option<RuleHit> {
        if !self.has_deny_rules(tool) {
            return None;
        }
        self.decide(tool, &RuleTarget::Path(*path))
            .filter(|hit| hit.kind == RuleKind::Deny)
    }

    /// The first deny rule of `sources` (in that order) that matches.
    fn lower_deny(
        &self,
        sources: &[Source],
        tool: &str,
        target: &RuleTarget<'_>,
    ) -> Option<RuleHit> {
        sources.iter().find_map(|&source| {
            match decide_in(self.source(source), tool, target, false)? {
                (RuleKind::Deny, rule) => Some(RuleHit {
                    kind: RuleKind::Deny,
                    source: Some(source),
                    rule,
                }),
                _ => None,
            }
        })
    }

    /// The decision of the rule layer, or `None` when no rule matches.
    pub(crate) fn decide(&self, tool: &str, target: &RuleTarget<'_>) -> Option<RuleHit> {
        // `$X -s …` may be `curl`: no allow rule may approve it while deny or
        // ask rules with patterns exist.
        let unresolvable = matches!(target, RuleTarget::Command { parsed, .. }
            if parsed.all_segments().iter().any(|s| s.program_unresolved()))
            && self.has_restrictive_patterns(tool);
        for (i, source) in Source::BY_PRIORITY.into_iter().enumerate() {
            let rules = self.source(source);
            if let Some((kind, rule)) = decide_in(rules, tool, target, unresolvable) {
                if kind == RuleKind::Ask
                    && self.project_narrows_only
                    && source != Source::User
                    && let Some(deny) = self.lower_deny(&Source::BY_PRIORITY[i + 1..], tool, target)
                {
                    return Some(deny);
                }
                return Some(RuleHit {
                    kind,
                    source: Some(source),
                    rule,
                });
            }
        }
        // No source decided alone: no deny or ask rule matched anywhere. Allow rules
        // of different sources may still cover every part of a compound command.
        if let RuleTarget::Command {
            parsed, blockers, ..
        } = target
            && !unresolvable
            && !parsed.substitutes_anywhere()
            && !parsed.segments.is_empty()
        {
            let allow: Vec<&Rule> = Source::BY_PRIORITY
                .iter()
                .flat_map(|s| self.source(*s).allow.iter())
                .filter(|r| r.matches_tool(tool))
                .collect();
            let mut used = Vec::new();
            for (i, segment) in parsed.segments.iter().enumerate() {
                let blocker = blockers.get(i).and_then(Option::as_ref);
                let rule = allow.iter().find(|r| r.approves(segment, blocker))?;
                if !used.contains(&rule.as_str()) {
                    used.push(rule.as_str());
                }
            }
            return Some(RuleHit {
                kind: RuleKind::Allow,
                source: None,
                rule: used.join(", "),
            });
        }
        None
    }
}

/// The decision of one source: deny > ask > allow.
fn decide_in(
    rules: &SourceRules,
    tool: &str,
    target: &RuleTarget<'_>,
    unresolvable: bool,
) -> Option<(RuleKind, String)> {
    for kind in [RuleKind::Deny, RuleKind::Ask] {
        let hit = rules
            .list(kind)
            .iter()
            .filter(|r| r.matches_tool(tool))
            .find(|r| match target {
                RuleTarget::None => r.content.is_none(),
                RuleTarget::Path(path) => r.matches_path(path),
                RuleTarget::Command { line, parsed, .. } => {
                    r.content.is_none()
                        || r.matches_text(line.trim())
                        || parsed
                            .all_segments()
                            .iter()
                            .any(|s| segment_matches_restrictive(r, s))
                }
            });
        if let Some(rule) = hit {
            return Some((kind, rule.text.clone()));
        }
    }
    let allow: Vec<&Rule> = rules
        .allow
        .iter()
        .filter(|r| r.matches_tool(tool))
        .collect();
    let covering = match target {
        RuleTarget::None => allow
            .iter()
            .find(|r| r.content.is_none())
            .map(|r| r.text.clone()),
        RuleTarget::Path(path) => allow
            .iter()
            .find(|r| r.matches_path(path))
            .map(|r| r.text.clone()),
        RuleTarget::Command { .. } if unresolvable => None,
        RuleTarget::Command {
            line,
            parsed,
            blockers,
        } => {
            if let Some(exact) = allow.iter().find(|r| r.matches_exactly(line)) {
                Some(exact.text.clone())
            } else if parsed.substitutes_anywhere() || parsed.segments.is_empty() {
                None
            } else {
                let mut used: Vec<&str> = Vec::new();
                for (i, segment) in parsed.segments.iter().enumerate() {
                    let blocker = blockers.get(i).and_then(Option::as_ref);
                    let rule = allow.iter().find(|r| r.approves(segment, blocker))?;
                    if !used.contains(&rule.as_str()) {
                        used.push(rule.as_str());
                    }
                }
                Some(used.join(", "))
            }
        }
    };
    covering.map(|rule| (RuleKind::Allow, rule))
}

/// Deny and ask rules see a part as typed, de-quoted, without wrappers (`sudo
/// rm`, `env X=1 rm`, `nohup rm` all count as `rm`), and with the program
/// compared by normalised name (`/usr/bin/curl` and `curl`, `python3.11` and
/// `python3`).
fn segment_matches_restrictive(rule: &Rule, segment: &Segment) -> bool {
    let effective = segment.effective();
    let rest = || {
        effective
            .iter()
            .skip(1)
            .map(|w| format!(" {}", w.value))
            .collect::<String>()
    };
    let renamed = rule
        .content
        .as_ref()
        .and_then(|c| c.program.as_deref())
        .filter(|p| {
            let theirs = program_name(basename(p));
            segment
                .program()
                .is_some_and(|ours| ours == theirs || program_name(ours) == program_name(theirs))
        })
        .map(|p| format!("{p}{}", rest()));
    if renamed.is_some_and(|c| rule.matches_text(&c)) {
        return true;
    }
    let candidates = [
        segment.raw_text(),
        segment.value_text(),
        effective
            .iter()
            .map(|w| w.raw.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        effective
            .iter()
            .map(|w| w.value.as_str())
            .collect::<Vec<_>>()
            .join(" "),
    ];
    candidates
        .iter()
        .any(|c| !c.is_empty() && rule.matches_text(c))
}

#[cfg(test)]
mod tests;
