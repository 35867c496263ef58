//! `/<skill> args` and `/mcp__<server>__<prompt> args` typed by the user (REPL) or
//! given as the prompt (`-p`).

use roo_agent::McpServers;
use roo_agent::skills::{SkillCommand, Skills};

/// The REPL's own commands: a skill of the same name is reached with LoadSkill only.
pub const BUILT_IN_COMMANDS: &[&str] = &[
    "exit", "quit", "help", "clear", "cost", "mode", "team", "tasks", "mcp",
];

/// What `line` turns into when it is `/mcp__<server>__<prompt> args`: `None` when
/// it does not start that way; otherwise the prompt's messages as the user input,
/// or why not. Waits for servers still starting (bounded by their startup timeout).
pub async fn mcp_prompt(mcp: Option<&McpServers>, line: &str) -> Option<Result<String, String>> {
    let command = line.trim().strip_prefix('/')?;
    let (name, arguments) = command
        .split_once(char::is_whitespace)
        .unwrap_or((command, ""));
    if !name.starts_with("mcp__") {
        return None;
    }
    let Some(mcp) = mcp else {
        return Some(Err(format!("/{name}: no MCP servers are configured")));
    };
    mcp.wait_started().await;
    match mcp.prompt(name, arguments).await {
        Some(result) => Some(result),
        None => Some(Err(format!(
            "/{name}: no connected MCP server offers this prompt; /mcp lists the servers"
        ))),
    }
}

/// The MCP prompts for `/help`: one line each, `  /mcp__s__p ARGS  description`.
pub fn mcp_help(mcp: Option<&McpServers>) -> String {
    let commands = mcp.map(McpServers::prompt_commands).unwrap_or_default();
    if commands.is_empty() {
        return String::new();
    }
    let mut text = String::from("MCP prompts (/mcp__<server>__<prompt> [ARGS], or name=value):\n");
    for c in commands {
        let usage = if c.usage.is_empty() {
            format!("/{}", c.command)
        } else {
            format!("/{} {}", c.command, c.usage)
        };
        let description = roo_term::clip(&c.description, 100);
        text.push_str(&format!("  {usage}\n      {description}\n"));
    }
    text
}

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

/// The skills for `/help`: one line each, `  /name ARGS  description`.
pub fn skills_help(skills: Option<&Skills>) -> String {
    let Some(skills) = skills else {
        return String::new();
    };
    let scan = skills.catalog.scan();
    let mut text = String::from("Skills (/<skill> [ARGS]):\n");
    for skill in scan.skills.values() {
        let usage = match &skill.arguments {
            Some(args) => format!("/{} {args}", skill.name),
            None => format!("/{}", skill.name),
        };
        let description = roo_term::clip(&skill.description, 100);
        text.push_str(&format!(
            "  {usage}\n      {description} ({})\n",
            skill.source
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use roo_agent::skills::Catalog;
    use roo_agent::tool::{Lookup, ToolRegistry};

    #[test]
    fn built_in_commands_win_and_unknown_names_pass_through() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("skills");
        for name in ["help", "deploy"] {
            let file = user.join(name).join("SKILL.md");
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(
                &file,
                format!("---\nname: {name}\ndescription: d\nallowed_tools: [ReadFile]\n---\nDo {name} for $ARGUMENTS\n"),
            )
            .unwrap();
        }
        let tools = ToolRegistry::new();
        let skills = Skills::install(Catalog::from_dirs(Some(user), None), &tools);
        assert_eq!(skill_prompt(Some(&skills), "/help"), None);
        assert_eq!(skill_prompt(Some(&skills), "/nope x"), None);
        assert_eq!(skill_prompt(Some(&skills), "deploy x"), None);
        assert_eq!(skill_prompt(None, "/deploy x"), None);
        let prompt = skill_prompt(Some(&skills), "  /deploy  prod now ")
            .unwrap()
            .unwrap();
        assert!(prompt.contains("Do deploy for prod now"), "{prompt}");
        // The scope is queued, not applied: the run's prompt hook applies it.
        assert!(matches!(tools.lookup("LoadSkill"), Lookup::Ready(_)));
        let help = skills_help(Some(&skills));
        assert!(help.contains("  /deploy\n      d (user)"), "{help}");
    }
}
