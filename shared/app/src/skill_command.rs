//! `/<skill> args` typed by the user (REPL) or given as the prompt (`-p`).

use roo_agent::skills::{SkillCommand, Skills};

/// The REPL's own commands: a skill of the same name is reached with LoadSkill only.
pub const BUILT_IN_COMMANDS: &[&str] = &[
    "exit", "quit", "help", "clear", "cost", "mode", "team", "tasks",
];

/// What `line` turns into when it is `/<skill> args`: `None` when it is not a skill
/// command (no leading `/`, a built-in command, or no skill of that name); otherwise
/// the prompt to run (the skill's tool scope is queued for that run) or why not.
pub fn skill_prompt(skills: Option<&Skills>, line: &str) -> Option<Result<String, String>> {
    let command = line.trim().strip_prefix('/')?;
    let (name, arguments) = command
        .split_once(char::is_whitespace)
        .unwrap_or((command, ""));
    if name.is_empty() || BUILT_IN_COMMANDS.contains(&name) {
        return None;
    }
    match skills?.command(name, arguments) {
        SkillCommand::NotASkill => None,
        SkillCommand::Prompt(prompt) => Some(Ok(prompt)),
        SkillCommand::Refused(why) => Some(Err(format!("/{name}: {why}"))),
    }
}
