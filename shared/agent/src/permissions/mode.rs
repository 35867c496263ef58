//! Layer 4: the permission mode, the overall trust level of a session.
//!
//! | mode | read | write | execute |
//! |---|---|---|---|
//! | `default` | allow | ask | ask |
//! | `acceptEdits` | allow | allow inside the project (ask for `.git/`, `.roocode/`) | ask |
//! | `plan` | allow | ask, except the plan file | ask |
//! | `bypassPermissions` | allow | allow | allow |
//! | `dontAsk` | allow | deny | deny |
//!
//! Internal tools (plan mode, tasks, messages) are always allowed. `dontAsk` is
//! for agents nobody watches (sub-agents, background runs): whatever would be
//! asked is denied instead, so they never wait for an answer that cannot come;
//! what they may do is granted by allow rules. The mode only decides what the
//! earlier layers left open: it never lifts a deny. Writes under `.git/` and
//! `.roocode/` are asked outside `bypassPermissions` even where an allow rule
//! matches ([`asks_despite_rules`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::PermissionDecision;
use crate::tool::ToolKind;

/// The overall permission mode of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PermissionMode {
    /// Reads run; writes and commands are asked.
    #[default]
    Default,
    /// Edits inside the project run too; commands are asked.
    AcceptEdits,
    /// Like default, but the plan file may be written without asking; the
    /// prompt keeps the model to reading and planning.
    Plan,
    /// Everything the earlier layers did not deny or explicitly ask about runs.
    BypassPermissions,
    /// Whatever would be asked is denied: for agents nobody can answer.
    DontAsk,
}

impl PermissionMode {
    /// All modes, in the order `/mode` cycles through the interactive ones.
    pub const ALL: [PermissionMode; 5] = [
        PermissionMode::Default,
        PermissionMode::AcceptEdits,
        PermissionMode::Plan,
        PermissionMode::BypassPermissions,
        PermissionMode::DontAsk,
    ];

    /// The canonical name: `default`, `acceptEdits`, `plan`, `bypassPermissions`,
    /// `dontAsk`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::Plan => "plan",
            Self::BypassPermissions => "bypassPermissions",
            Self::DontAsk => "dontAsk",
        }
    }

    /// One line for help texts and `/mode`.
    pub fn description(self) -> &'static str {
        match self {
            Self::Default => "reads run; file writes and commands ask first",
            Self::AcceptEdits => "reads and edits inside the project run; commands ask first",
            Self::Plan => "read and plan only; writing the plan file is the one write that runs",
            Self::BypassPermissions => {
                "everything runs except dangerous commands, denied rules and paths outside the project"
            }
            Self::DontAsk => "what would ask is denied; only allow rules grant more than reading",
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not a permission mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "parse permission mode `{given}`: expected one of default, acceptEdits, plan, \
     bypassPermissions, dontAsk"
)]
pub struct ParseModeError {
    /// The string given.
    pub given: String,
}

impl FromStr for PermissionMode {
    type Err = ParseModeError;

    /// Accepts the canonical names case-insensitively, with or without `-`/`_`
    /// (`acceptEdits`, `accept-edits`, `ACCEPT_EDITS`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let key: String = s
            .trim()
            .chars()
            .filter(|c| *c != '-' && *c != '_')
            .collect::<String>()
            .to_ascii_lowercase();
        match key.as_str() {
            "default" => Ok(Self::Default),
            "acceptedits" => Ok(Self::AcceptEdits),
            "plan" => Ok(Self::Plan),
            "bypasspermissions" => Ok(Self::BypassPermissions),
            "dontask" => Ok(Self::DontAsk),
            _ => Err(ParseModeError {
                given: s.to_string(),
            }),
        }
    }
}

/// What the mode layer needs to know about a call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallFacts {
    pub(crate) kind: ToolKind,
    /// The call targets a path (after layer 2, inside an allowed root).
    pub(crate) has_path: bool,
    /// That path is inside the project root.
    pub(crate) inside_project: bool,
    /// That path is the plan file.
    pub(crate) is_plan_file: bool,
    /// That path is under the project's `.git/` or `.roocode/`.
    pub(crate) protected: bool,
}

/// Directories whose files hold history and configuration: changing them needs
/// approval even in acceptEdits mode.
pub(crate) const PROTECTED_DIRS: [&str; 2] = [".git", ".roocode"];

/// Why a write under a protected directory is asked.
pub(crate) const PROTECTED_REASON: &str = "files under .git/ and .roocode/ hold history and \
     configuration (a hook or a config change there runs or grants more later); changing them \
     needs approval";

/// Whether this call is asked even where an allow rule matches it: a write under
/// `.git/` or `.roocode/` in every mode but `bypassPermissions` (which skips
/// asking, for sandboxes and CI). Rules cannot lift it, so neither can "always".
pub(crate) fn asks_despite_rules(mode: PermissionMode, facts: CallFacts) -> bool {
    facts.kind == ToolKind::Write
        && facts.protected
        && mode != PermissionMode::BypassPermissions
        && !(mode == PermissionMode::Plan && facts.is_plan_file)
}

/// Whether `relative` (a path inside the project) lies in a `.git/` or
/// `.roocode/` directory, at any depth (a nested repository's hooks run too).
/// Names compare case-insensitively and without the code points HFS+ ignores,
/// as git itself does: on a case-insensitive file system (macOS, Windows)
/// `.ROOCODE/config.local.yaml` or `.Git/hooks/…` is the protected file, and
/// asking once too often elsewhere costs little.
pub(crate) fn is_protected(relative: &std::path::Path) -> bool {
    relative.components().any(|c| match c {
        std::path::Component::Normal(name) => {
            let name: String = name
                .to_string_lossy()
                .chars()
                .filter(|&c| !is_hfs_ignorable(c))
                .collect();
            PROTECTED_DIRS.iter().any(|p| name.eq_ignore_ascii_case(p))
        }
        _ => false,
    })
}

/// Code points HFS+ drops when comparing names (git's `is_hfs_dotgit` list).
fn is_hfs_ignorable(c: char) -> bool {
    matches!(c,
        '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

/// The mode layer's verdict (before `dontAsk` turns asks into denials).
pub(crate) fn decide(mode: PermissionMode, facts: CallFacts) -> PermissionDecision<String> {
    let ask = |reason: String| PermissionDecision::Ask(reason);
    match facts.kind {
        ToolKind::Internal | ToolKind::Read => PermissionDecision::Allow,
        _ if mode == PermissionMode::BypassPermissions => PermissionDecision::Allow,
        ToolKind::Write => {
            if mode == PermissionMode::Plan && facts.is_plan_file {
                PermissionDecision::Allow
            } else if mode == PermissionMode::AcceptEdits && facts.has_path && facts.inside_project
            {
                if facts.protected {
                    ask(
                        "files under .git/ and .roocode/ hold history and configuration; changing \
                         them needs approval even in acceptEdits mode"
                            .to_string(),
                    )
                } else {
                    PermissionDecision::Allow
                }
            } else if mode == PermissionMode::AcceptEdits && facts.has_path {
                ask(
                    "the file is outside the project; acceptEdits only covers edits inside it"
                        .to_string(),
                )
            } else if mode == PermissionMode::Plan {
                ask("plan mode: only the plan file may be written without approval".to_string())
            } else {
                ask(format!("file changes need approval in {mode} mode"))
            }
        }
        ToolKind::Execute => ask(format!("commands need approval in {mode} mode")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn facts(kind: ToolKind) -> CallFacts {
        CallFacts {
            kind,
            has_path: kind == ToolKind::Write || kind == ToolKind::Read,
            inside_project: true,
            is_plan_file: false,
            protected: false,
        }
    }

    fn is_ask<Q>(d: &PermissionDecision<Q>) -> bool {
        matches!(d, PermissionDecision::Ask(_))
    }

    #[test]
    fn parses_and_prints_every_mode() {
        for mode in PermissionMode::ALL {
            assert_eq!(mode.as_str().parse::<PermissionMode>().unwrap(), mode);
            assert_eq!(mode.to_string(), mode.as_str());
        }
        assert_eq!("accept-edits".parse(), Ok(PermissionMode::AcceptEdits));
        assert_eq!(
            "BYPASS_PERMISSIONS".parse(),
            Ok(PermissionMode::BypassPermissions)
        );
        let err = "yolo".parse::<PermissionMode>().unwrap_err();
        assert!(err.to_string().contains("expected one of default"), "{err}");
        assert_eq!(
            serde_json::to_string(&PermissionMode::AcceptEdits).unwrap(),
            "\"acceptEdits\""
        );
    }

    #[test]
    fn default_mode_reads_freely_and_asks_for_the_rest() {
        let m = PermissionMode::Default;
        assert_eq!(decide(m, facts(ToolKind::Read)), PermissionDecision::Allow);
        assert_eq!(
            decide(m, facts(ToolKind::Internal)),
            PermissionDecision::Allow
        );
        assert!(is_ask(&decide(m, facts(ToolKind::Write))));
        assert!(is_ask(&decide(m, facts(ToolKind::Execute))));
    }

    #[test]
    fn accept_edits_allows_project_writes_only() {
        let m = PermissionMode::AcceptEdits;
        assert_eq!(decide(m, facts(ToolKind::Write)), PermissionDecision::Allow);
        assert!(is_ask(&decide(m, facts(ToolKind::Execute))));
        let outside = CallFacts {
            inside_project: false,
            ..facts(ToolKind::Write)
        };
        assert!(is_ask(&decide(m, outside)));
        let protected = CallFacts {
            protected: true,
            ..facts(ToolKind::Write)
        };
        assert!(is_ask(&decide(m, protected)));
        let no_path = CallFacts {
            has_path: false,
            ..facts(ToolKind::Write)
        };
        assert!(is_ask(&decide(m, no_path)));
    }

    #[test]
    fn protection_ignores_case_and_hfs_ignorable_characters() {
        use std::path::Path;
        for path in [
            ".roocode/config.local.yaml",
            ".ROOCODE/config.local.yaml",
            ".RooCode/config.yaml",
            ".git/hooks/pre-commit",
            ".Git/hooks/pre-commit",
            ".GIT/config",
            ".g\u{200c}it/config",
            "\u{feff}.roocode/config.yaml",
            "vendor/lib/.git/hooks/post-checkout",
            ".git",
        ] {
            assert!(is_protected(Path::new(path)), "{path}");
        }
        for path in [
            "src/main.rs",
            ".github/workflows/ci.yml",
            ".gitignore",
            "roocode/notes.md",
            ".roocode.md",
        ] {
            assert!(!is_protected(Path::new(path)), "{path}");
        }
    }

    #[test]
    fn accept_edits_asks_for_protected_files_in_any_case() {
        use crate::permissions::{PermissionPolicy, RuleSet};
        use crate::tools::{EditFile, WriteFile};
        let dir = tempfile::tempdir().unwrap();
        let policy = PermissionPolicy::new(
            dir.path().to_path_buf(),
            PermissionMode::AcceptEdits,
            RuleSet::new(),
        );
        for path in [".ROOCODE/config.local.yaml", ".Git/hooks/pre-commit"] {
            let input = serde_json::json!({"path": path, "content": "x"});
            let decision = policy.check(&WriteFile, &input, dir.path());
            assert!(is_ask(&decision), "{path}: {decision:?}");
        }
        let input = serde_json::json!({"path": "src/a.rs", "old_string": "a", "new_string": "b"});
        assert_eq!(
            policy.check(&EditFile, &input, dir.path()),
            PermissionDecision::Allow
        );
    }

    #[test]
    fn plan_mode_allows_only_the_plan_file() {
        let m = PermissionMode::Plan;
        let plan = CallFacts {
            is_plan_file: true,
            ..facts(ToolKind::Write)
        };
        assert_eq!(decide(m, plan), PermissionDecision::Allow);
        assert!(is_ask(&decide(m, facts(ToolKind::Write))));
        assert!(is_ask(&decide(m, facts(ToolKind::Execute))));
        assert_eq!(decide(m, facts(ToolKind::Read)), PermissionDecision::Allow);
        // The plan file is not special outside plan mode.
        assert!(is_ask(&decide(PermissionMode::Default, plan)));
    }

    #[test]
    fn bypass_allows_everything_it_sees() {
        let m = PermissionMode::BypassPermissions;
        for kind in [
            ToolKind::Read,
            ToolKind::Write,
            ToolKind::Execute,
            ToolKind::Internal,
        ] {
            assert_eq!(decide(m, facts(kind)), PermissionDecision::Allow);
        }
    }
}
