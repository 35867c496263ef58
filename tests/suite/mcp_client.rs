//! MCP through the library with real servers: in-process teammates share their
//! process's connections, and a cancelled call reaches the server as an MCP
//! cancellation. Stdio servers start through the built `roo-lead` as the sandbox helper,
//! as in the binaries.

use std::path::Path;
use std::time::Duration;

use roo_agent::McpServers;
use roo_agent::tool::{ToolContext, ToolRegistry};
use roo_store::Name;
use roo_team::{AgentSettings, Identity, McpPlan, build_agent};
use roo_tests::{EVERYTHING_ENTRY, TempHome, bin, mcp_servers_dir, process_gone, wait_until};
use serde_json::json;

fn settings(home: &TempHome, name: &str) -> AgentSettings {
    let script = home
        .home
        .write("script.yaml", "agents:\n  \"*\":\n    - text: ok\n");
    let mut settings = AgentSettings::new(
        Identity::solo(Name::parse(name).unwrap()),
        home.home.path().to_path_buf(),
    );
    settings.cwd = Some(home.cwd.path().to_path_buf());
    settings.llm.script = Some(script);
    settings.sandbox_helper = Some(bin("roo-lead"));
    settings
}

fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn in_process_teammates_share_the_servers_of_their_process() {
    let home = TempHome::new();
    let starts = home.home.join("starts");
    let entry = mcp_servers_dir().join(EVERYTHING_ENTRY);
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\nmcp_servers:\n  everything:\n    command: sh\n    args: [\"-c\", \"echo $$ >> '{}'; exec node '{}' stdio\"]\n",
            starts.display(),
            entry.display()
        ),
    );
    let lead = build_agent(settings(&home, "lead")).await.unwrap();
    let servers = lead
        .mcp
        .clone()
        .expect("the lead started the configured servers");
    servers.wait_started().await;
    assert!(lead.agent.tools().get("mcp__everything__echo").is_some());

    let mut mate = settings(&home, "alice");
    mate.mcp = McpPlan::Shared(servers.clone());
    let mate = build_agent(mate).await.unwrap();
    let echo = mate
        .agent
        .tools()
        .get("mcp__everything__echo")
        .expect("the teammate has the server's tools");
    let ctx = ToolContext::new(
        home.cwd.path().to_path_buf(),
        home.home.path().to_path_buf(),
    );
    let out = echo.call(json!({"message": "shared"}), &ctx).await;
    assert_eq!(out.content, "Echo: shared");
    assert_eq!(
        pids(&starts).len(),
        1,
        "one server process for the whole process"
    );
    assert!(
        servers
            .report()
            .contains("everything (stdio: sh): connected"),
        "{}",
        servers.report()
    );

    McpServers::shutdown_all().await;
    let pid = pids(&starts)[0];
    wait_until(
        "the server to end",
        Duration::from_secs(10),
        || process_gone(pid).then_some(()),
        || format!("{pid} runs"),
    );
    let after = echo.call(json!({"message": "late"}), &ctx).await;
    assert!(after.is_error, "{}", after.content);
}

#[tokio::test(flavor = "current_thread")]
async fn a_cancelled_call_is_cancelled_on_the_server() {
    let home = TempHome::new();
    let fixture = mcp_servers_dir().join("many-tools.mjs");
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\nmcp_servers:\n  many:\n    command: node\n    args: [\"{}\", \"2\", \"slow\"]\n",
            fixture.display()
        ),
    );
    let built = build_agent(settings(&home, "lead")).await.unwrap();
    let servers = built.mcp.clone().unwrap();
    servers.wait_started().await;
    let registry: &ToolRegistry = built.agent.tools();
    let slow = registry.get("mcp__many__slow").expect("the slow tool");
    let ctx = ToolContext::new(
        home.cwd.path().to_path_buf(),
        home.home.path().to_path_buf(),
    );
    let cancel = ctx.cancel.clone();
    let log = home.home.join("logs/mcp-many.log");
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let canceller = async {
        while !read_log().contains("slow started") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        cancel.cancel();
    };
    let (out, ()) = tokio::join!(slow.call(json!({}), &ctx), canceller);
    assert!(
        out.is_error && out.content.contains("Interrupted by the user"),
        "{}",
        out.content
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !read_log().contains("slow cancelled") {
        assert!(
            std::time::Instant::now() < deadline,
            "no cancellation reached the server:\n{}",
            read_log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    McpServers::shutdown_all().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_that_died_can_be_restarted_and_its_tools_work_again() {
    // A server killed mid-session: its tools fail with a clear reason; `/mcp restart`
    // starts it again, and the tool objects registered before — here one taken from
    // the lead's registry before the crash — use the new connection.
    let home = TempHome::new();
    let starts = home.home.join("starts");
    let entry = mcp_servers_dir().join(EVERYTHING_ENTRY);
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\nmcp_servers:\n  everything:\n    command: sh\n    args: [\"-c\", \"echo $$ >> '{}'; exec node '{}' stdio\"]\n",
            starts.display(),
            entry.display()
        ),
    );
    let lead = build_agent(settings(&home, "lead")).await.unwrap();
    let servers = lead.mcp.clone().unwrap();
    servers.wait_started().await;
    let echo = lead.agent.tools().get("mcp__everything__echo").unwrap();
    let ctx = ToolContext::new(
        home.cwd.path().to_path_buf(),
        home.home.path().to_path_buf(),
    );
    assert_eq!(
        echo.call(json!({"message": "one"}), &ctx).await.content,
        "Echo: one"
    );
    let Err(why) = servers.restart("nope").await else {
        panic!("an unknown server restarted")
    };
    assert!(why.contains("configured: everything"), "{why}");

    let first = pids(&starts)[0];
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // (The runtime runs the watcher: wait without blocking it.)
    let noticed = tokio::time::timeout(Duration::from_secs(20), async {
        while !servers.report().contains("restart <server>") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(noticed.is_ok(), "not noticed:\n{}", servers.report());
    let dead = echo.call(json!({"message": "two"}), &ctx).await;
    assert!(dead.is_error, "{}", dead.content);
    assert!(
        dead.content.contains("/mcp restart everything"),
        "{}",
        dead.content
    );

    let restarted = servers.restart("everything").await.unwrap();
    assert!(restarted.contains("restarted"), "{restarted}");
    assert_eq!(pids(&starts).len(), 2, "a second server process");
    assert_eq!(
        echo.call(json!({"message": "three"}), &ctx).await.content,
        "Echo: three"
    );
    assert!(
        servers
            .report()
            .contains("everything (stdio: sh): connected"),
        "{}",
        servers.report()
    );
    // Restarting a live server replaces its process; the old one ends.
    servers.restart("everything").await.unwrap();
    let second = pids(&starts)[1];
    wait_until(
        "the replaced server to end",
        Duration::from_secs(10),
        || process_gone(second).then_some(()),
        || format!("{second} runs"),
    );
    assert_eq!(
        echo.call(json!({"message": "four"}), &ctx).await.content,
        "Echo: four"
    );
    McpServers::shutdown_all().await;
    let third = pids(&starts)[2];
    wait_until(
        "the last server to end",
        Duration::from_secs(10),
        || process_gone(third).then_some(()),
        || format!("{third} runs"),
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_that_connects_late_reaches_sub_agents_registries_too() {
    // A sub-agent's registry is a copy of its parent's taken when it starts; a server
    // that connects afterwards must add its tools to the copy as well.
    let home = TempHome::new();
    let gate = home.home.join("gate");
    let entry = mcp_servers_dir().join(EVERYTHING_ENTRY);
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\nmcp_startup_timeout_secs: 1\nmcp_servers:\n  everything:\n    command: sh\n    args: [\"-c\", \"while [ ! -f '{}' ]; do sleep 0.05; done; exec node '{}' stdio\"]\n",
            gate.display(),
            entry.display()
        ),
    );
    let lead = build_agent(settings(&home, "lead")).await.unwrap();
    let servers = lead.mcp.clone().unwrap();
    servers.wait_started().await;
    let registry: &ToolRegistry = lead.agent.tools();
    assert!(
        registry.get("mcp__everything__echo").is_none(),
        "not connected yet"
    );
    let child = registry.detached();
    let grandchild = child.detached();
    std::fs::write(&gate, "").unwrap();
    let connected = tokio::time::timeout(Duration::from_secs(30), async {
        while registry.get("mcp__everything__echo").is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(connected.is_ok(), "{}", servers.report());
    for copy in [&child, &grandchild] {
        let echo = copy
            .get("mcp__everything__echo")
            .expect("the late server's tools reach the copy");
        let ctx = ToolContext::new(
            home.cwd.path().to_path_buf(),
            home.home.path().to_path_buf(),
        );
        assert_eq!(
            echo.call(json!({"message": "copy"}), &ctx).await.content,
            "Echo: copy"
        );
    }
    McpServers::shutdown_all().await;
}
