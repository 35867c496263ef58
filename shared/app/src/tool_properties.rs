//! The test that ties the tool classes to the tools: every tool a lead and a teammate
//! get declares its [`Delegation`] and whether it manages sub-agents as [`CLASSES`]
//! says (the lists of names the sub-agent filter once kept), and is in
//! [`CODE_TOOLS`] exactly when its row says it works on code. A new tool without a row
//! here fails, so its author decides what sub-agents and a coordinator may do with it.

use std::collections::BTreeSet;

use clap::Parser;
use roo_agent::permissions::CODE_TOOLS;
use roo_agent::tool::{Delegation, ToolRegistry};
use roo_agent::tools::ToolSearch;
use roo_store::{Member, Name, RooHome, Team};
use roo_team::{AgentSettings, Identity, InboxRouter, SessionPlan, ShutdownOnRequest};

use crate::flags::LeadArgs;

/// Every built-in tool: its name, its delegation, whether it manages sub-agents,
/// whether it works on code.
const CLASSES: &[(&str, Delegation, bool, bool)] = &[
    ("ReadFile", Delegation::AnyAgent, false, true),
    ("WriteFile", Delegation::AnyAgent, false, true),
    ("EditFile", Delegation::AnyAgent, false, true),
    ("Bash", Delegation::AnyAgent, false, true),
    ("Glob", Delegation::AnyAgent, false, true),
    ("Grep", Delegation::AnyAgent, false, true),
    ("ToolSearch", Delegation::AnyAgent, false, false),
    ("LoadSkill", Delegation::AnyAgent, false, false),
    ("TaskGet", Delegation::AnyAgent, false, false),
    ("TaskList", Delegation::AnyAgent, false, false),
    ("EnterPlanMode", Delegation::NoSubAgent, false, true),
    ("ExitPlanMode", Delegation::NoSubAgent, false, true),
    ("TeamCreate", Delegation::NoSubAgent, false, false),
    ("TeamMerge", Delegation::NoSubAgent, false, false),
    ("TeamDelete", Delegation::NoSubAgent, false, false),
    ("ShutdownResponse", Delegation::NoSubAgent, false, false),
    ("SendMessage", Delegation::BuiltInAgents, false, false),
    ("TaskCreate", Delegation::BuiltInAgents, false, false),
    ("TaskUpdate", Delegation::BuiltInAgents, false, false),
    ("TaskStop", Delegation::BuiltInAgents, true, false),
    ("Agent", Delegation::BuiltInAgents, true, false),
];

/// Checks every tool of `tools` against [`CLASSES`]; adds its name to `seen`.
fn classify(who: &str, tools: &ToolRegistry, seen: &mut BTreeSet<String>) {
    for name in tools.names() {
        let tool = tools.get(&name).unwrap();
        let Some(&(_, delegation, manages, code)) = CLASSES.iter().find(|class| class.0 == name)
        else {
            panic!("{who}'s tool {name} is not classified: add it to CLASSES");
        };
        assert_eq!(
            (tool.delegation(), tool.manages_sub_agents()),
            (delegation, manages),
            "{who}'s {name}"
        );
        assert_eq!(CODE_TOOLS.contains(&name.as_str()), code, "{who}'s {name}");
        seen.insert(name);
    }
}

#[tokio::test]
async fn every_tool_of_a_lead_and_a_teammate_declares_what_sub_agents_may_do_with_it() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let script = home.path().join("script.yaml");
    std::fs::write(&script, "agents:\n  lead:\n    - text: ok\n").unwrap();
    let mut seen = BTreeSet::new();

    let args = LeadArgs::try_parse_from([
        "roo-lead".as_ref(),
        "--permission-mode".as_ref(),
        "plan".as_ref(),
        "--script".as_ref(),
        script.as_os_str(),
        "-C".as_ref(),
        cwd.path().as_os_str(),
        "--teammate-mode".as_ref(),
        "in-process".as_ref(),
        "--trust-project".as_ref(),
    ])
    .unwrap();
    let lead = crate::setup::build_in(&args, false, RooHome::new(home.path().to_path_buf()))
        .await
        .unwrap();
    classify("a lead", lead.agent.tools(), &mut seen);

    let name = |s: &str| Name::parse(s).unwrap();
    let mut settings = AgentSettings::new(
        Identity::teammate(name("alice"), name("t"), name("lead")),
        home.path().to_path_buf(),
    );
    settings.cwd = Some(cwd.path().to_path_buf());
    settings.llm.script = Some(script.clone());
    settings.session = SessionPlan::Transcript(home.path().join("teams/t/transcripts/alice.jsonl"));
    // As the teammate runtime adds it: the answer to the lead's shutdown request.
    let team = Team::create(
        &RooHome::new(home.path().to_path_buf()),
        name("t"),
        "tool properties",
        Member::new(name("lead"), &name("t")),
        vec![Member::new(name("alice"), &name("t"))],
    )
    .unwrap();
    let router = InboxRouter::new(team.mailbox(), name("alice"));
    let shutdown = ShutdownOnRequest::new(router, team.mailbox(), name("lead"));
    settings.tools.deferred.push(shutdown.response_tool());
    let teammate = roo_team::build_agent(settings).await.unwrap();
    // As MCP servers add it when their tools are deferred.
    let tools = teammate.agent.tools();
    tools.register(std::sync::Arc::new(ToolSearch::new(tools.downgrade())));
    classify("a teammate", teammate.agent.tools(), &mut seen);

    let unseen: Vec<&str> = CLASSES
        .iter()
        .map(|class| class.0)
        .filter(|name| !seen.contains(*name))
        .collect();
    assert!(unseen.is_empty(), "no lead or teammate has {unseen:?}");
}
