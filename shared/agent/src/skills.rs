//! Skills: procedures written for the agent, loaded on demand.
//!
//! A skill is a directory `<name>/` holding `SKILL.md` — YAML front matter (name,
//! description, when_to_use, allowed_tools, mode, arguments) and a Markdown body —
//! and optionally `tool.json` and a `references/` folder. Three are built in
//! (`skills/` at the repository's top level, embedded in the binary); more come from
//! `<ROO_HOME>/skills/` and, for a trusted project only, `<project>/.roocode/skills/`.
//! A project skill replaces a user skill of the same name, which replaces a built-in
//! one (whole skill, no field merging).
//!
//! Loading is two-phase: the model sees names and descriptions in the description
//! of the [`LoadSkill`] tool; calling it brings the body (with `$ARGUMENTS`
//! substituted) into the conversation and narrows the run's tools to the skill's
//! `allowed_tools` through a [`ToolScope`], enforced when a call executes. The skill
//! folders are scanned again on every use, so a new or changed skill is picked up
//! without a restart.
//!
//! User and project skills are untrusted input: sizes and counts are bounded, names
//! are validated, symlinks are not followed, and a reference is only read from inside
//! the skill's `references/` folder. A bad skill is skipped with a warning naming its
//! file; a bad built-in skill fails the crate's tests.

mod load;
mod script_tool;
mod tool;

pub use load::{Catalog, DefinitionSource, Mode, Scan, Skill, SkillError, parse_skill};
pub use script_tool::{SkillTool, SkillToolSpec, parse_tool_json, registered_name};
pub use tool::{
    LoadSkill, LoadSkillInput, MAX_LISTING_CHARS, SkillCommand, SkillFork, SkillScopes, Skills,
    expand,
};
