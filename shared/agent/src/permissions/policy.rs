//! The permission policy: layers 1–4 chained, and "always allow".
//!
//! [`PermissionPolicy::check`] is what the loop calls before every tool call. It
//! walks the layers in order and returns at the first one that decides, so a
//! deny from the dangerous-command list or the sandbox can never be overturned by
//! a rule or a mode, and an allow or deny rule is never overturned by the mode —
//! except that no allow rule lifts the question for a write under `.git/` or
//! `.roocode/` (outside `bypassPermissions`). Only `dontAsk` touches the outcome
//! afterwards, turning an ask into a deny.
//! The policy is plain data (`Clone`): each agent owns its own copy, so one
//! agent's approvals and mode changes do not leak to another.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::approvable::{self, Scope};
use super::confinement::{self, ResolveError};
use super::dangerous;
use super::mode::{self, CallFacts, PermissionMode};
use super::rules::{self, PathTarget, Rule, RuleKind, RuleSet, RuleTarget};
use super::shell::ParsedCommand;
use super::{PermissionDecision, PermissionRequest};
use crate::config::{ConfigError, ConfigFiles, Source, append_local_allow, local_config_path};
use crate::tool::{PermissionTarget, ReadFilter, Tool, ToolKind};

/// Commands for which "always allow" saves `prefix *` instead of the exact
/// command: read-only or build-and-test commands whose further arguments do
/// not change what kind of thing they do. Anything else gets the exact command.
const SAFE_PREFIXES: &[&str] = &[
    "git status",
    "git diff",
    "git log",
    "git show",
    "git branch",
    "git blame",
    "git ls-files",
    "git rev-parse",
    "cargo test",
    "cargo build",
    "cargo check",
    "cargo clippy",
    "cargo fmt",
    "cargo nextest",
    "cargo doc",
    "cargo tree",
    "npm test",
    "npm run test",
    "npm run build",
    "npm run lint",
    "pnpm test",
    "yarn test",
    "go test",
    "go build",
    "go vet",
    "pytest",
    "ls",
    "pwd",
];

/// The tool whose path denials also hold for the other tools that read.
const READ_TOOL: &str = "ReadFile";

/// The permission policy of one agent.
#[derive(Debug, Clone)]
pub struct PermissionPolicy {
    project_root: PathBuf,
    mode: PermissionMode,
    rules: RuleSet,
    extra_roots: Vec<PathBuf>,
    plan_file: Option<PathBuf>,
    /// Directories no file tool may read or write (the team's state under `ROO_HOME`),
    /// except an extra root inside one (the session directory).
    hidden: Vec<PathBuf>,
}

impl PermissionPolicy {
    /// A policy for `project_root` (resolved through symlinks) with a mode and
    /// the rules of the config files.
    pub fn new(project_root: PathBuf, mode: PermissionMode, rules: RuleSet) -> Self {
        Self {
            project_root: confinement::resolve_root(&project_root),
            mode,
            rules,
            extra_roots: Vec::new(),
            plan_file: None,
            hidden: Vec::new(),
        }
    }

    /// Hides `dir` from every file tool, reading and writing alike, wherever it is (in
    /// the project too): the team's coordination state under `ROO_HOME`
    /// (`sandbox::TEAM_STATE_DIRS`), which commands cannot see either. An extra root
    /// inside it (the session directory) stays reachable.
    pub fn hide(&mut self, dir: PathBuf) {
        let dir = confinement::resolve_root(&dir);
        if !self.hidden.contains(&dir) {
            self.hidden.push(dir);
        }
    }

    /// Hides the team state dirs of `roo_home` (see [`Self::hide`]).
    pub fn hide_team_state(&mut self, roo_home: &Path) {
        for dir in crate::exec::sandbox::TEAM_STATE_DIRS {
            self.hide(roo_home.join(dir));
        }
    }

    /// Why `resolved` is hidden from file tools, if it is.
    fn hidden_reason(&self, resolved: &Path) -> Option<String> {
        let dir = self
            .hidden
            .iter()
            .find(|dir| confinement::is_within(resolved, dir))?;
        if self
            .extra_roots
            .iter()
            .any(|root| root.starts_with(dir) && confinement::is_within(resolved, root))
        {
            return None;
        }
        Some(format!(
            "inside {}, the team's coordination state, which no file tool may read or write; use the team tools (or roo-mail and roo-task)",
            dir.display()
        ))
    }

    /// A policy from loaded config files: `mode` if given, else the configured
    /// `permission_mode`, else default.
    pub fn from_config(
        config: &ConfigFiles,
        project_root: PathBuf,
        mode: Option<PermissionMode>,
    ) -> Result<Self, ConfigError> {
        let mode = match mode {
            Some(mode) => mode,
            None => config.permission_mode()?.unwrap_or_default(),
        };
        Ok(Self::new(project_root, mode, config.rules()))
    }

    /// The project root, resolved.
    pub fn project_root(&self) -> &Path {
        &self.project_root
    }

    /// The rules in force.
    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    /// The current mode.
    pub fn mode(&self) -> PermissionMode {
        self.mode
    }

    /// Changes the mode (`/mode`, plan mode entry and exit).
    pub fn set_mode(&mut self, mode: PermissionMode) {
        self.mode = mode;
    }

    /// Sets (or clears) the plan file: in plan mode writing it needs no approval,
    /// and its directory is an allowed root.
    pub fn set_plan_file(&mut self, plan_file: Option<PathBuf>) {
        self.plan_file = plan_file.map(|p| confinement::resolve_root(&p));
    }

    /// Lets file tools reach `root` too (the session directory, where large
    /// results spill; a worktree).
    pub fn add_allowed_root(&mut self, root: PathBuf) {
        let root = confinement::resolve_root(&root);
        if !self.extra_roots.contains(&root) {
            self.extra_roots.push(root);
        }
    }

    /// Every directory file tools may reach: the project root, the extra roots
    /// and the plan file's directory.
    pub fn allowed_roots(&self) -> Vec<&Path> {
        let mut roots: Vec<&Path> = vec![&self.project_root];
        roots.extend(self.extra_roots.iter().map(PathBuf::as_path));
        if let Some(dir) = self.plan_file.as_deref().and_then(Path::parent) {
            roots.push(dir);
        }
        roots
    }

    /// Layers 1–4 for one call. `cwd` resolves relative paths. An `Ask` carries the
    /// request the human is shown.
    pub fn check(&self, tool: &dyn Tool, input: &Value, cwd: &Path) -> PermissionDecision {
        self.judge(tool, input, cwd).map_ask(|reason| {
            let mut request = self.request(tool, input, reason);
            request.offer_always = self.offers_always(tool, input, cwd, &request.suggested_rule);
            request
        })
    }

    /// Layers 1–4 for one call, an `Ask` carrying only its reason.
    fn judge(&self, tool: &dyn Tool, input: &Value, cwd: &Path) -> PermissionDecision<String> {
        let name = tool.name();
        let mut facts = CallFacts {
            kind: tool.kind(),
            has_path: false,
            inside_project: false,
            is_plan_file: false,
            protected: false,
        };
        match tool.permission_target(input) {
            PermissionTarget::None => self.rules_then_mode(name, &RuleTarget::None, facts),
            PermissionTarget::Command(command) => {
                // Layer 1.
                let parsed = ParsedCommand::parse(&command);
                if let Some(reason) = dangerous::check_parsed_command(&command, &parsed) {
                    return PermissionDecision::Deny { reason };
                }
                let scope = Scope {
                    cwd,
                    project_root: &self.project_root,
                };
                let blockers: Vec<_> = parsed
                    .segments
                    .iter()
                    .map(|s| approvable::blocker(s, &scope))
                    .collect();
                let target = RuleTarget::Command {
                    line: &command,
                    parsed: &parsed,
                    blockers: &blockers,
                };
                let decision = self.rules_then_mode(name, &target, facts);
                match decision {
                    PermissionDecision::Ask(reason)
                        if parsed.all_segments().iter().any(|s| s.program_unresolved())
                            && self.rules.has_restrictive_patterns(name) =>
                    {
                        PermissionDecision::Ask(format!(
                            "{reason}; its program comes from an expansion RooCode cannot \
                             resolve, so no allow rule applies and the deny and ask rules \
                             cannot tell what it runs"
                        ))
                    }
                    other => other,
                }
            }
            PermissionTarget::Path(path) => {
                // Layer 2.
                let absolute = if path.is_absolute() {
                    path.clone()
                } else {
                    cwd.join(&path)
                };
                let resolved = match confinement::resolve(&absolute) {
                    Ok(resolved) => resolved,
                    Err(ResolveError::TooManySymlinks) => {
                        return PermissionDecision::Deny {
                            reason: format!(
                                "{} cannot be resolved: its symlinks form a loop",
                                path.display()
                            ),
                        };
                    }
                };
                if !self
                    .allowed_roots()
                    .iter()
                    .any(|root| confinement::is_within(&resolved, root))
                {
                    return PermissionDecision::Deny {
                        reason: self.outside_reason(&path, &absolute, &resolved),
                    };
                }
                if let Some(reason) = self.hidden_reason(&resolved) {
                    return PermissionDecision::Deny {
                        reason: format!("{} is {reason}", path.display()),
                    };
                }
                let relative = resolved.strip_prefix(&self.project_root).ok();
                // A path denied to ReadFile is denied to every tool that reads.
                if tool.kind() == ToolKind::Read
                    && name != READ_TOOL
                    && let Some(reason) = self.read_denied_resolved(&resolved)
                {
                    return PermissionDecision::Deny {
                        reason: format!(
                            "{} is {reason}, which holds for every tool that reads",
                            path.display()
                        ),
                    };
                }
                facts.has_path = true;
                facts.inside_project = relative.is_some();
                facts.is_plan_file = self.plan_file.as_deref() == Some(resolved.as_path());
                facts.protected = relative.is_some_and(mode::is_protected);
                let target = RuleTarget::Path(PathTarget {
                    absolute: &resolved,
                    relative,
                });
                self.rules_then_mode(name, &target, facts)
            }
        }
    }

    /// Why reading `path` is denied by the rules (a `ReadFile` deny rule of any
    /// source, honouring source priority), or `None`. Relative paths are taken
    /// from the project root; symlinks are resolved. Grep and Glob skip such
    /// files, ROOCODE.md includes refuse them.
    pub fn read_denied(&self, path: &Path) -> Option<String> {
        let absolute = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.project_root.join(path)
        };
        let resolved = confinement::resolve(&absolute).unwrap_or(absolute);
        self.read_denied_resolved(&resolved)
    }

    fn read_denied_resolved(&self, resolved: &Path) -> Option<String> {
        if let Some(reason) = self.hidden_reason(resolved) {
            return Some(reason);
        }
        let target = PathTarget {
            absolute: resolved,
            relative: resolved.strip_prefix(&self.project_root).ok(),
        };
        let hit = self.rules.denies(READ_TOOL, &target)?;
        let origin = hit
            .source
            .map(|s| format!(" in the {s} config ({})", self.source_path(s)))
            .unwrap_or_default();
        Some(format!(
            "denied by the permission rule `{}`{origin}",
            hit.rule
        ))
    }

    /// [`Self::read_denied`] as a filter tools can hold: a snapshot of the
    /// current rules, which knows nothing else of the policy.
    pub fn read_filter(&self) -> ReadFilter {
        if !self.rules.has_deny_rules(READ_TOOL) && self.hidden.is_empty() {
            return ReadFilter::default();
        }
        let policy = self.clone();
        ReadFilter::new(move |path| policy.read_denied(path))
    }

    fn outside_reason(&self, given: &Path, absolute: &Path, resolved: &Path) -> String {
        let via = if confinement::is_within(
            &confinement::normalize_lexically(absolute),
            &self.project_root,
        ) {
            format!(" (it leads through a symlink to {})", resolved.display())
        } else {
            String::new()
        };
        format!(
            "{} is outside the project {}{via}; file tools may only touch files inside the project. \
             Work on files inside it, or ask the user to start RooCode in a directory that contains this path",
            given.display(),
            self.project_root.display()
        )
    }

    /// Layers 3 and 4, then `dontAsk`.
    fn rules_then_mode(
        &self,
        tool: &str,
        target: &RuleTarget<'_>,
        facts: CallFacts,
    ) -> PermissionDecision<String> {
        let decision = match self.rules.decide(tool, target) {
            Some(hit) => {
                let origin = match hit.source {
                    Some(source) => {
                        format!("in the {source} config ({})", self.source_path(source))
                    }
                    None => "in the config files".to_string(),
                };
                match hit.kind {
                    // A rule never lifts the question for .git/ and .roocode/: an allow
                    // rule there would let a write plant a hook or grant permissions.
                    RuleKind::Allow if mode::asks_despite_rules(self.mode, facts) => {
                        PermissionDecision::Ask(format!(
                            "{}; an allow rule (here `{}` {origin}) does not lift that",
                            mode::PROTECTED_REASON,
                            hit.rule
                        ))
                    }
                    RuleKind::Allow => PermissionDecision::Allow,
                    RuleKind::Deny => PermissionDecision::Deny {
                        reason: format!(
                            "denied by the permission rule `{}` {origin}; do the task another way \
                             or ask the user to change the rule",
                            hit.rule
                        ),
                    },
                    RuleKind::Ask => PermissionDecision::Ask(format!(
                        "the permission rule `{}` {origin} asks for approval",
                        hit.rule
                    )),
                }
            }
            None => mode::decide(self.mode, facts),
        };
        match decision {
            PermissionDecision::Ask(reason) if self.mode == PermissionMode::DontAsk => {
                PermissionDecision::Deny {
                    reason: format!(
                        "{reason}, but this agent runs in dontAsk mode where nobody can approve it; \
                     only an allow rule can grant it"
                    ),
                }
            }
            other => other,
        }
    }

    fn source_path(&self, source: Source) -> String {
        match source {
            Source::User => roo_store::user_config_shown(),
            Source::Project => ".roocode/config.yaml".to_string(),
            Source::Local => ".roocode/config.local.yaml".to_string(),
        }
    }

    /// The request shown to the human for a call `check` answered with `Ask`.
    pub fn request(&self, tool: &dyn Tool, input: &Value, reason: String) -> PermissionRequest {
        PermissionRequest {
            tool: tool.name().to_string(),
            summary: tool.summarize(input),
            input: input.clone(),
            reason,
            suggested_rule: self.suggested_rule(tool, input),
            offer_always: false,
        }
    }

    /// Whether "always allow" may be offered for this call with `rule` as what it
    /// saves: the rule must approve this same call again (a deny or ask rule, a
    /// dangerous command or a path outside the project may still ask whatever allow
    /// rule exists: then saving it would only mislead), it must not also approve a
    /// write under `.git/` or `.roocode/` (`reaches_protected`), and a command must be one
    /// simple command — a compound or multi-line command, or one that runs others
    /// (`$(…)`, `bash -c`), gets no "always".
    pub fn offers_always(&self, tool: &dyn Tool, input: &Value, cwd: &Path, rule: &str) -> bool {
        if let PermissionTarget::Command(command) = tool.permission_target(input) {
            let parsed = ParsedCommand::parse(&command);
            if parsed.segments.len() != 1
                || !parsed.nested.is_empty()
                || parsed.substitutes_anywhere()
                || command.trim().contains('\n')
            {
                return false;
            }
        }
        let mut with_rule = self.clone();
        if with_rule
            .rules
            .add(Source::Local, RuleKind::Allow, rule)
            .is_err()
        {
            return false;
        }
        matches!(with_rule.judge(tool, input, cwd), PermissionDecision::Allow)
            && !self.reaches_protected(tool, input, rule)
    }

    /// Whether `rule`, saved as an allow rule, would also approve `tool` writing
    /// somewhere under a protected directory (`.git/`, `.roocode/`, at the root or
    /// nested): probes named after this call's file and the files that matter
    /// there (`config`, hooks, RooCode's config files). Such a rule promises far
    /// more than this call, so "always" is not offered for it.
    fn reaches_protected(&self, tool: &dyn Tool, input: &Value, rule: &str) -> bool {
        if tool.kind() != ToolKind::Write {
            return false;
        }
        let mut only = RuleSet::new();
        if only.add(Source::Local, RuleKind::Allow, rule).is_err() {
            return true;
        }
        let mut names = vec![
            PathBuf::from("config"),
            PathBuf::from("hooks/pre-commit"),
            PathBuf::from("config.yaml"),
            PathBuf::from("config.local.yaml"),
        ];
        if let PermissionTarget::Path(path) = tool.permission_target(input) {
            let relative = path
                .strip_prefix(&self.project_root)
                .unwrap_or(&path)
                .to_path_buf();
            names.extend(relative.file_name().map(PathBuf::from));
            if relative.is_relative() {
                names.push(relative);
            }
        }
        mode::PROTECTED_DIRS.iter().any(|dir| {
            [PathBuf::from(dir), Path::new("nested").join(dir)]
                .iter()
                .flat_map(|base| names.iter().map(move |name| base.join(name)))
                .any(|probe| {
                    let absolute = self.project_root.join(&probe);
                    let target = RuleTarget::Path(PathTarget {
                        absolute: &absolute,
                        relative: Some(&probe),
                    });
                    only.decide(tool.name(), &target).is_some()
                })
        })
    }

    /// The rule "always allow" would save for this call: `Bash(cargo test *)` for
    /// `cargo test --all` (a known-safe prefix), the exact command line for any
    /// other command, `EditFile(src/**)` for a file in `src/`, `WriteFile(:/notes.md)`
    /// for a file at the root (anchored there, glob characters escaped), the bare
    /// tool name for calls without a target.
    pub fn suggested_rule(&self, tool: &dyn Tool, input: &Value) -> String {
        let name = tool.name();
        match tool.permission_target(input) {
            PermissionTarget::None => name.to_string(),
            PermissionTarget::Command(command) => {
                let scope = Scope {
                    cwd: &self.project_root,
                    project_root: &self.project_root,
                };
                suggest_command_rule(name, &command, &scope)
            }
            PermissionTarget::Path(path) => {
                let absolute = if path.is_absolute() {
                    path
                } else {
                    self.project_root.join(path)
                };
                let resolved = confinement::resolve(&absolute).unwrap_or(absolute);
                let (shown, is_dir) = match resolved.strip_prefix(&self.project_root) {
                    Ok(rel) => (rel.to_path_buf(), resolved.is_dir()),
                    Err(_) => (resolved.clone(), resolved.is_dir()),
                };
                if shown.as_os_str().is_empty() {
                    return name.to_string();
                }
                let dir_rule = |dir: &Path| format!("{name}({}/**)", rules::escape_glob(dir));
                if is_dir || tool.kind() == ToolKind::Read {
                    let dir = if is_dir {
                        shown.as_path()
                    } else {
                        shown.parent().unwrap_or(&shown)
                    };
                    if dir.as_os_str().is_empty() {
                        return name.to_string();
                    }
                    return dir_rule(dir);
                }
                match shown.parent() {
                    Some(dir) if !dir.as_os_str().is_empty() => dir_rule(dir),
                    _ => format!("{name}({})", rules::literal_path_pattern(&shown)),
                }
            }
        }
    }

    /// "Always allow": saves `rule` to `.roocode/config.local.yaml` (creating it,
    /// keeping its other keys) and adds it to the rules in force.
    pub fn allow_always(&mut self, rule: &str) -> Result<(), ConfigError> {
        let parsed = Rule::parse(rule).map_err(|e| ConfigError::InvalidRule {
            path: local_config_path(&self.project_root),
            rule: e.rule,
            message: e.message,
        })?;
        append_local_allow(&self.project_root, parsed.as_str())?;
        self.rules.push(Source::Local, RuleKind::Allow, parsed);
        Ok(())
    }
}

/// The narrowest rule for a command: `prefix *` for a command that starts with
/// one of [`SAFE_PREFIXES`] and has nothing an allow rule may not approve (see
/// [`approvable`]), else the exact command (`*` escaped).
fn suggest_command_rule(tool: &str, command: &str, scope: &Scope<'_>) -> String {
    let exact = || {
        let squashed = command.split_whitespace().collect::<Vec<_>>().join(" ");
        format!("{tool}({})", squashed.replace('*', "\\*"))
    };
    let parsed = ParsedCommand::parse(command);
    let [segment] = parsed.segments.as_slice() else {
        return exact();
    };
    if parsed.substitutes_anywhere()
        || !parsed.nested.is_empty()
        || approvable::blocker(segment, scope).is_some()
    {
        return exact();
    }
    let words: Vec<&str> = segment.words.iter().map(|w| w.raw.as_str()).collect();
    SAFE_PREFIXES
        .iter()
        .filter(|prefix| {
            let prefix: Vec<&str> = prefix.split(' ').collect();
            words.starts_with(&prefix)
        })
        .max_by_key(|prefix| prefix.len())
        .map_or_else(exact, |prefix| format!("{tool}({prefix} *)"))
}

#[cfg(test)]
mod tests;
