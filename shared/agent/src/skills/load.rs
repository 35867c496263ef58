//! Parsing `SKILL.md` and discovering skills in the three places they come from.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::script_tool::{SkillToolSpec, parse_tool_json};
pub use crate::front_matter::DefinitionSource;
use crate::front_matter::{self, one_line};
use crate::tool::ToolScope;

/// Longest `SKILL.md` (or `tool.json`) read, in bytes.
pub const MAX_SKILL_BYTES: u64 = 64 * 1024;
/// Longest reference file returned, in bytes.
pub const MAX_REFERENCE_BYTES: u64 = 256 * 1024;
/// Most skill directories looked at in one folder.
pub const MAX_SKILLS_PER_DIR: usize = 200;
/// Longest description or when_to_use, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Most directory entries read in one skills folder or one `references/` tree.
const MAX_ENTRIES_LOOKED_AT: usize = 2000;
/// Longest skill name.
const MAX_NAME_CHARS: usize = 64;

/// The built-in skills, embedded in the binary: (directory name, SKILL.md).
const BUILTIN: &[(&str, &str)] = &[
    ("commit", include_str!("../../../../skills/commit/SKILL.md")),
    ("review", include_str!("../../../../skills/review/SKILL.md")),
    ("test", include_str!("../../../../skills/test/SKILL.md")),
];

/// How a skill runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Its body joins the current conversation.
    #[default]
    Inline,
    /// It runs as a sub-agent with a fresh context; only its report comes back.
    Fork,
}

/// One parsed skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The skill's name.
    pub name: String,
    /// What it does, shown to the model.
    pub description: String,
    /// When to use it, shown to the model after the description.
    pub when_to_use: Option<String>,
    /// `None`: every tool of the run; `Some`: only these (plus LoadSkill).
    pub allowed_tools: Option<Vec<String>>,
    /// Whether it runs inline or as a forked sub-agent.
    pub mode: Mode,
    /// What the arguments are, for the model and `/help` (`[message]`).
    pub arguments: Option<String>,
    /// The Markdown instructions.
    pub body: String,
    /// Where it came from (built in, the user's, the project's).
    pub source: DefinitionSource,
    /// The skill's directory; `None` for a built-in one.
    pub dir: Option<PathBuf>,
    /// The tools its `tool.json` declares, registered when it is loaded.
    pub tools: Vec<SkillToolSpec>,
    /// Files under `references/`, relative to it, sorted.
    pub references: Vec<String>,
}

/// Why a skill was not loaded or a reference not read. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("skill file {}: {message}", path.display())]
    /// The file does not parse or breaks a rule.
    Invalid {
        /// The skill file.
        path: PathBuf,
        /// What is wrong, in words a user can act on.
        message: String,
    },
    #[error("failed to read skill file {}: {source}", path.display())]
    /// The file could not be read.
    Io {
        /// The skill file.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
}

fn invalid(path: &Path, message: impl Into<String>) -> SkillError {
    SkillError::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    name: String,
    description: String,
    #[serde(default)]
    when_to_use: Option<String>,
    #[serde(default, alias = "allowed-tools", alias = "allowedTools")]
    allowed_tools: Option<Vec<String>>,
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    arguments: Option<Arguments>,
    #[serde(default)]
    #[allow(dead_code)]
    tags: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Arguments {
    Hint(String),
    Names(Vec<String>),
}

/// Whether `name` may name a skill: lowercase ASCII letters, digits and `-`, starting
/// with a letter or digit, at most 64 characters (it becomes a `/command`).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
}

/// Parses a `SKILL.md` text. `path` names the file in errors; `dir_name` is the name
/// the skill's folder gives it, which the front matter must repeat.
pub fn parse_skill(
    text: &str,
    path: &Path,
    dir_name: &str,
    source: DefinitionSource,
) -> Result<Skill, SkillError> {
    let (front, body) =
        front_matter::parse::<FrontMatter>(text).map_err(|message| invalid(path, message))?;
    if !valid_name(&front.name) {
        return Err(invalid(
            path,
            format!(
                "name `{}` is not valid: use lowercase letters, digits and `-` (at most {MAX_NAME_CHARS})",
                front.name
            ),
        ));
    }
    if front.name != dir_name {
        return Err(invalid(
            path,
            format!(
                "name `{}` differs from its folder `{dir_name}`; make them equal",
                front.name
            ),
        ));
    }
    let description = one_line(&front.description);
    if description.is_empty() {
        return Err(invalid(path, "description is empty"));
    }
    for (field, value) in [
        ("description", Some(&description)),
        ("when_to_use", front.when_to_use.as_ref()),
    ] {
        if value.is_some_and(|v| v.chars().count() > MAX_DESCRIPTION_CHARS) {
            return Err(invalid(
                path,
                format!("{field} is longer than {MAX_DESCRIPTION_CHARS} characters"),
            ));
        }
    }
    if let Some(tools) = &front.allowed_tools {
        // The same validation the registry applies when the skill narrows a run.
        ToolScope::allow_only(format!("skill {}", front.name), tools)
            .map_err(|e| invalid(path, format!("allowed_tools: {e}")))?;
    }
    if body.is_empty() {
        return Err(invalid(
            path,
            "the body (the instructions after the front matter) is empty",
        ));
    }
    let arguments = front.arguments.map(|a| match a {
        Arguments::Hint(hint) => one_line(&hint),
        Arguments::Names(names) => names
            .iter()
            .map(|n| format!("<{}>", one_line(n)))
            .collect::<Vec<_>>()
            .join(" "),
    });
    Ok(Skill {
        name: front.name,
        description,
        when_to_use: front.when_to_use.map(|w| one_line(&w)),
        allowed_tools: front.allowed_tools,
        mode: front.mode,
        arguments,
        body,
        source,
        dir: None,
        tools: Vec::new(),
        references: Vec::new(),
    })
}

/// The built-in skills. Each is checked by a test, so this never fails in a release.
pub fn builtin() -> Vec<Skill> {
    BUILTIN
        .iter()
        .filter_map(|(name, text)| {
            let path = PathBuf::from(format!("<built-in>/skills/{name}/SKILL.md"));
            match parse_skill(text, &path, name, DefinitionSource::BuiltIn) {
                Ok(skill) => Some(skill),
                Err(e) => {
                    tracing::error!("{e}");
                    None
                }
            }
        })
        .collect()
}

/// The result of one scan: the skills by name and what was skipped.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// The skills by name.
    pub skills: BTreeMap<String, Skill>,
    /// One line per skipped skill or folder, naming the file.
    pub warnings: Vec<String>,
}

impl Scan {
    /// The skill called `name` (case-insensitive, like `/Commit`).
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(&name.to_ascii_lowercase())
    }
}

/// Where skills are found. Cheap to clone; [`Catalog::scan`] reads the folders again.
#[derive(Debug, Clone)]
pub struct Catalog {
    user_dir: Option<PathBuf>,
    /// `None` when the project is not trusted (its skills are ignored).
    project_dir: Option<PathBuf>,
    /// Whether built-in skills are offered.
    builtin: bool,
}

impl Catalog {
    /// Skills of `<roo_home>/skills/` and, only when `trusted`, of
    /// `<project_root>/.roocode/skills/`, over the built-in ones.
    pub fn new(roo_home: &Path, project_root: &Path, trusted: bool) -> Self {
        Self {
            user_dir: Some(roo_home.join("skills")),
            project_dir: trusted.then(|| project_root.join(".roocode").join("skills")),
            builtin: true,
        }
    }

    /// A catalog of exactly these folders and no built-in skills (tests, embedding).
    pub fn from_dirs(user_dir: Option<PathBuf>, project_dir: Option<PathBuf>) -> Self {
        Self {
            user_dir,
            project_dir,
            builtin: false,
        }
    }

    /// Reads every skill now: built-in, then user, then project, later replacing earlier.
    pub fn scan(&self) -> Scan {
        let mut scan = Scan::default();
        if self.builtin {
            for skill in builtin() {
                scan.skills.insert(skill.name.clone(), skill);
            }
        }
        for (dir, source) in [
            (&self.user_dir, DefinitionSource::User),
            (&self.project_dir, DefinitionSource::Project),
        ] {
            if let Some(dir) = dir {
                scan_dir(dir, source, &mut scan);
            }
        }
        scan
    }
}

fn scan_dir(dir: &Path, source: DefinitionSource, scan: &mut Scan) {
    let names = front_matter::list_dir(
        dir,
        front_matter::Entries::Folders,
        &format!("{source} skill folders"),
        MAX_SKILLS_PER_DIR,
        &mut scan.warnings,
    );
    for (name, path) in names {
        match load_dir(&path, &name, source) {
            Ok(skill) => {
                scan.skills.insert(skill.name.clone(), skill);
            }
            Err(e) => scan.warnings.push(format!("skipped a {source} skill: {e}")),
        }
    }
}

/// Reads a regular file of at most `max` bytes, refusing symlinks and special files.
fn read_bounded(path: &Path, max: u64) -> Result<String, SkillError> {
    front_matter::read_bounded(path, max).map_err(|e| match e {
        front_matter::ReadError::Invalid(message) => invalid(path, message),
        front_matter::ReadError::Io(source) => SkillError::Io {
            path: path.to_path_buf(),
            source,
        },
    })
}

fn load_dir(dir: &Path, name: &str, source: DefinitionSource) -> Result<Skill, SkillError> {
    let file = dir.join("SKILL.md");
    if !valid_name(name) {
        return Err(invalid(
            &file,
            "the folder name is not a valid skill name (lowercase letters, digits and `-`)",
        ));
    }
    let text = read_bounded(&file, MAX_SKILL_BYTES)?;
    let mut skill = parse_skill(&text, &file, name, source)?;
    let tool_json = dir.join("tool.json");
    if fs::symlink_metadata(&tool_json).is_ok() {
        let text = read_bounded(&tool_json, MAX_SKILL_BYTES)?;
        skill.tools = parse_tool_json(&text, &skill.name).map_err(|e| invalid(&tool_json, e))?;
    }
    skill.references = list_references(&dir.join("references"));
    skill.dir = Some(dir.to_path_buf());
    Ok(skill)
}

/// Regular files under `references/` (no symlinks followed), relative, sorted; at most 200.
fn list_references(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    let mut looked_at = 0usize;
    while let Some(rel) = stack.pop() {
        let Ok(entries) = fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            looked_at += 1;
            if looked_at > MAX_ENTRIES_LOOKED_AT {
                out.sort();
                return out;
            }
            let Ok(ft) = entry.file_type() else { continue };
            let child = rel.join(entry.file_name());
            if ft.is_dir() && child.components().count() < 8 {
                stack.push(child);
            } else if ft.is_file()
                && let Some(s) = child.to_str()
            {
                out.push(s.to_string());
            }
            if out.len() >= 200 {
                out.sort();
                return out;
            }
        }
    }
    out.sort();
    out
}

impl Skill {
    /// Reads `references/<rel>` of this skill: only a listed regular file inside
    /// `references/`, never through `..`, an absolute path or a symlink.
    pub fn read_reference(&self, rel: &str) -> Result<String, SkillError> {
        let Some(dir) = &self.dir else {
            return Err(invalid(
                Path::new(rel),
                format!("skill {} is built in and has no references", self.name),
            ));
        };
        let root = dir.join("references");
        let wanted = Path::new(rel);
        let normal = wanted
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !normal || !self.references.iter().any(|r| Path::new(r) == wanted) {
            return Err(invalid(
                &root.join(rel),
                format!(
                    "is not a reference of skill {}; its references are: {}",
                    self.name,
                    if self.references.is_empty() {
                        "none".to_string()
                    } else {
                        self.references.join(", ")
                    }
                ),
            ));
        }
        // Every folder on the way must be a real folder, not a symlink.
        let mut at = root.clone();
        for part in wanted.parent().into_iter().flat_map(|p| p.components()) {
            at.push(part);
            let meta = fs::symlink_metadata(&at).map_err(|source| SkillError::Io {
                path: at.clone(),
                source,
            })?;
            if !meta.is_dir() {
                return Err(invalid(&at, "is not a folder (symlinks are not followed)"));
            }
        }
        if fs::symlink_metadata(&root).is_ok_and(|m| !m.is_dir()) {
            return Err(invalid(
                &root,
                "is not a folder (symlinks are not followed)",
            ));
        }
        read_bounded(&root.join(wanted), MAX_REFERENCE_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_skill_parses() {
        for (name, text) in BUILTIN {
            let path = PathBuf::from(format!("skills/{name}/SKILL.md"));
            let skill = parse_skill(text, &path, name, DefinitionSource::BuiltIn)
                .unwrap_or_else(|e| panic!("built-in skill {name} is broken: {e}"));
            assert!(
                skill.body.contains("$ARGUMENTS"),
                "{name} ignores its arguments"
            );
        }
        let names: Vec<_> = builtin().into_iter().map(|s| (s.name, s.mode)).collect();
        assert_eq!(
            names,
            [
                ("commit".to_string(), Mode::Inline),
                ("review".to_string(), Mode::Fork),
                ("test".to_string(), Mode::Inline)
            ]
        );
    }

    fn parse(text: &str) -> Result<Skill, SkillError> {
        parse_skill(text, Path::new("x/SKILL.md"), "x", DefinitionSource::User)
    }

    #[test]
    fn front_matter_errors_name_the_problem() {
        let cases = [
            ("no front matter", "does not start with YAML front matter"),
            ("---\nname: x\ndescription: d\n", "no closing"),
            ("---\nname: x\n---\nbody", "bad front matter"),
            ("---\nname: X\ndescription: d\n---\nbody", "is not valid"),
            (
                "---\nname: y\ndescription: d\n---\nbody",
                "differs from its folder",
            ),
            ("---\nname: x\ndescription: d\n---\n  \n", "body"),
            (
                "---\nname: x\ndescription: d\nallowed_tools: [readfile]\n---\nb",
                "allowed_tools",
            ),
            (
                "---\nname: x\ndescription: d\nmode: sideways\n---\nb",
                "bad front matter",
            ),
            (
                "---\nname: x\ndescription: d\nrogue: 1\n---\nb",
                "unknown field",
            ),
        ];
        for (text, want) in cases {
            let err = parse(text).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(want), "{text:?}: {err:?} lacks {want:?}");
            assert!(err.contains("x/SKILL.md"), "{err}");
        }
    }

    #[test]
    fn parses_all_fields_with_crlf_and_bom() {
        let text = "\u{feff}---\r\nname: x\r\ndescription: |\r\n  two\r\n  lines\r\nwhen_to_use: w\r\nallowed-tools: [ReadFile, mcp__gh__*]\r\nmode: fork\r\narguments: [path, depth]\r\n---\r\nDo $ARGUMENTS.\r\n";
        let skill = parse(text).unwrap();
        assert_eq!(skill.description, "two lines");
        assert_eq!(skill.when_to_use.as_deref(), Some("w"));
        assert_eq!(
            skill.allowed_tools,
            Some(vec!["ReadFile".to_string(), "mcp__gh__*".to_string()])
        );
        assert_eq!(skill.mode, Mode::Fork);
        assert_eq!(skill.arguments.as_deref(), Some("<path> <depth>"));
        assert_eq!(skill.body, "Do $ARGUMENTS.");
    }

    #[test]
    fn names_are_validated() {
        for good in ["a", "commit", "my-skill-2"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", "-x", "Commit", "a/b", "..", "a b", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
