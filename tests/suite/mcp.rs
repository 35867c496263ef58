//! MCP end to end: `roo-lead -p` against the mock LLM server, with real MCP servers —
//! the npm reference server `@modelcontextprotocol/server-everything` (stdio and
//! streamable HTTP) and the `many-tools.mjs` fixture on the same SDK — installed by
//! `scripts/install-mcp-servers` into `target/mcp-servers`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_tests::{
    EVERYTHING_ENTRY, MockLlm, TempHome, TestCommand, mcp_servers_dir, process_gone, read_pid,
    wait_until,
};
use serde_json::Value;

fn everything() -> PathBuf {
    mcp_servers_dir().join(EVERYTHING_ENTRY)
}

fn many_tools() -> PathBuf {
    mcp_servers_dir().join("many-tools.mjs")
}

/// A stdio server entry that records the server's pid in `pid_file` first.
fn recorded_server(name: &str, pid_file: &Path, node_args: &str) -> String {
    format!(
        "  {name}:\n    command: sh\n    args: [\"-c\", \"echo $$ > '{}'; exec node {node_args}\"]\n",
        pid_file.display()
    )
}

fn lead(home: &TempHome, mock: &MockLlm, prompt: &str) -> TestCommand {
    home.cmd("roo-lead")
        .env("HOME", home.home.path())
        .env("ANTHROPIC_API_KEY", "secret-test-key")
        .args(["-p", prompt, "--provider", "anthropic"])
        .args(["--base-url", &mock.base_url("anthropic")])
}

/// Names of the tools sent with request `i`.
fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A transcript entry's message as a one-message request, for [`tool_results`].
fn json_messages(entry: &Value) -> Value {
    serde_json::json!({"messages": [entry["message"].clone()]})
}

fn tool_results(request: &Value) -> Vec<(String, bool)> {
    let mut results = Vec::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                let text = match &block["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                results.push((text, block["is_error"] == true));
            }
        }
    }
    results
}

fn wait_gone(pid: i32, what: &str) {
    wait_until(
        what,
        Duration::from_secs(10),
        || process_gone(pid).then_some(()),
        || format!("process {pid} is still running"),
    );
}

#[test]
fn stdio_tool_call_allowed_by_a_rule_reaches_the_next_request_and_the_server_ends_at_exit() {
    let home = TempHome::new();
    let pid_file = home.home.join("server.pid");
    let entry = everything();
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\npermissions:\n  allow: [\"mcp__everything__*\"]\nmcp_servers:\n{}    env: {{MCP_TEST_VAR: from-config}}\n",
            recorded_server("everything", &pid_file, &format!("'{}' stdio", entry.display()))
        ),
    );
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - tool_calls:
        - {name: mcp__everything__echo, input: {message: "hello from roo"}}
    - tool_calls:
        - {name: mcp__everything__get-env, input: {}}
    - text: "done"
"#,
    );
    // A variable holding the provider's key under another name is scrubbed too.
    let out = lead(&home, &mock, "use the server")
        .env("KEY_ALIAS", "secret-test-key")
        .run();
    out.assert_ok();
    let requests: Vec<Value> = mock.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    // The first request already carries the server's tools (it waited for start-up).
    let names = tool_names(&requests[0]);
    assert!(
        names.contains(&"mcp__everything__echo".to_string()),
        "{names:?}"
    );
    let results = tool_results(&requests[1]);
    assert_eq!(results, [("Echo: hello from roo".to_string(), false)]);
    // Provider keys are scrubbed from the server's environment; `env:` is passed.
    let (env, is_error) = &tool_results(&requests[2])[1];
    assert!(!is_error, "{env}");
    assert!(env.contains("from-config"), "{env}");
    assert!(
        !env.contains("secret-test-key"),
        "the API key leaked: {env}"
    );
    // Its stderr went to the log, not to the terminal.
    assert!(
        !out.stderr().contains("Starting default (STDIO) server"),
        "{}",
        out.stderr()
    );
    let log = home.home.read("logs/mcp-everything.log");
    assert!(log.contains("Starting default (STDIO) server"), "{log}");
    // Shut down at exit: no orphan.
    let pid = read_pid(&pid_file).expect("the server recorded its pid");
    wait_gone(pid, "the MCP server to end with roo-lead");
}

#[test]
fn without_an_allow_rule_the_default_mode_asks_even_for_a_read_only_hint_and_a_headless_run_denies()
{
    let home = TempHome::new();
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\nmcp_servers:\n  everything:\n    command: node\n    args: [\"{}\", \"stdio\"]\n",
            everything().display()
        ),
    );
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - tool_calls:
        - {name: mcp__everything__echo, input: {message: "hi"}}
    - text: "done"
"#,
    );
    lead(&home, &mock, "echo").run().assert_ok();
    let requests = mock.requests();
    // The server marks echo read-only: the model is told, the permission check is not.
    let echo = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__everything__echo")
        .unwrap();
    let description = echo["description"].as_str().unwrap();
    assert!(
        description.contains("The server says this tool only reads."),
        "{description}"
    );
    let (text, is_error) = &tool_results(&requests[1].body)[0];
    assert!(
        *is_error && text.contains("Permission denied for mcp__everything__echo"),
        "{text}"
    );
}

#[test]
fn deferred_tools_are_found_through_toolsearch_and_sent_from_the_next_request() {
    let home = TempHome::new();
    home.home.write(
        "config.yaml",
        format!(
            "permissions:\n  allow: [\"mcp__many__*\"]\nmcp_servers:\n  many:\n    command: node\n    args: [\"{}\", \"50\"]\n",
            many_tools().display()
        ),
    );
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - tool_calls:
        - {name: ToolSearch, input: {query: "select:mcp__many__tool_007"}}
    - tool_calls:
        - {name: mcp__many__tool_007, input: {project: acme/web}}
    - tool_calls:
        - {name: mcp__many__tool_003, input: {project: acme/web}}
    - text: "done"
"#,
    );
    let out = lead(&home, &mock, "find a tool").run();
    out.assert_ok();
    let requests: Vec<Value> = mock.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(requests.len(), 4);
    let first = tool_names(&requests[0]);
    assert!(first.contains(&"ToolSearch".to_string()), "{first:?}");
    assert!(
        !first.iter().any(|n| n.starts_with("mcp__")),
        "50 tools are deferred: {first:?}"
    );
    let search = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ToolSearch")
        .unwrap();
    let listing = search["description"].as_str().unwrap();
    assert!(listing.contains("- mcp__many__tool_007"), "{listing}");
    assert!(listing.contains("- mcp__many__tool_050"), "{listing}");
    // Invalid tools of the server are skipped with a notice.
    assert!(!listing.contains("bad"), "{listing}");
    assert!(
        out.stderr().contains("skipped tool \"bad name\""),
        "{}",
        out.stderr()
    );
    assert!(out.stderr().contains("bad_schema"), "{}", out.stderr());

    // The schema goes with the request after the search, not before.
    let second = &requests[1];
    let revealed = second["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__many__tool_007")
        .expect("tool_007 is sent after ToolSearch revealed it");
    assert_eq!(
        revealed["input_schema"]["required"],
        serde_json::json!(["project"])
    );
    assert!(!tool_names(second).contains(&"mcp__many__tool_003".to_string()));
    let (found, _) = &tool_results(second)[0];
    assert!(
        found.contains("<tool name=\"mcp__many__tool_007\">"),
        "{found}"
    );
    let (called, is_error) = &tool_results(&requests[2])[1];
    assert!(
        !is_error && called.contains("tool_007 called with"),
        "{called}"
    );
    // A deferred tool called without a search is not run: it is loaded, and the model
    // is told to call it again.
    let (unloaded, is_error) = &tool_results(&requests[3])[2];
    assert!(
        *is_error && unloaded.contains("call mcp__many__tool_003 again"),
        "{unloaded}"
    );
    assert!(tool_names(&requests[3]).contains(&"mcp__many__tool_003".to_string()));
}

#[test]
fn streamable_http_server_tools_work() {
    let home = TempHome::new();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let server = TestCommand::new("node")
        .arg(everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .spawn();
    wait_until(
        "server-everything to listen",
        Duration::from_secs(20),
        || std::net::TcpStream::connect(("127.0.0.1", port)).ok(),
        || format!("nothing listens on {port} (server pid {})", server.pid()),
    );
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\npermissions:\n  allow: [mcp__remote__echo]\nmcp_servers:\n  remote:\n    url: http://127.0.0.1:{port}/mcp\n    headers: {{X-Test: yes}}\n"
        ),
    );
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - tool_calls:
        - {name: mcp__remote__echo, input: {message: "over http"}}
    - text: "done"
"#,
    );
    lead(&home, &mock, "echo").run().assert_ok();
    let requests = mock.requests();
    assert_eq!(
        tool_results(&requests[1].body),
        [("Echo: over http".to_string(), false)]
    );
}

#[test]
fn a_server_killed_mid_session_gives_error_results_and_the_session_goes_on() {
    let home = TempHome::new();
    let pid_file = home.home.join("server.pid");
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\nmcp_servers:\n{}",
            recorded_server(
                "everything",
                &pid_file,
                &format!("'{}' stdio", everything().display())
            )
        ),
    );
    let script = format!(
        r#"
agents:
  "*":
    - tool_calls:
        - {{name: mcp__everything__echo, input: {{message: "before"}}}}
    - tool_calls:
        - {{name: Bash, input: {{command: "kill -9 $(cat '{pid}')"}}}}
    - tool_calls:
        - {{name: mcp__everything__echo, input: {{message: "after"}}}}
    - tool_calls:
        - {{name: mcp__everything__echo, input: {{message: "again"}}}}
    - tool_calls:
        - {{name: Bash, input: {{command: "echo still-here"}}}}
    - text: "done"
"#,
        pid = pid_file.display()
    );
    let mock = MockLlm::start(&script);
    let out = lead(&home, &mock, "crash it")
        .args(["--permission-mode", "bypassPermissions", "--no-sandbox"])
        .run();
    out.assert_ok();
    let requests = mock.requests();
    assert_eq!(requests.len(), 6);
    let results = tool_results(&requests[5].body);
    assert_eq!(results[0], ("Echo: before".to_string(), false));
    for (text, is_error) in [&results[2], &results[3]] {
        assert!(*is_error, "{text}");
        assert!(
            text.contains("MCP server `everything` exited (killed by signal 9)")
                && text.contains("its tools are unavailable"),
            "{text}"
        );
    }
    assert!(results[4].0.contains("still-here"), "{results:?}");
    // The user is told once.
    assert_eq!(
        out.stderr()
            .matches("MCP server `everything` exited")
            .count(),
        1,
        "{}",
        out.stderr()
    );
    let pid = read_pid(&pid_file).unwrap();
    wait_gone(pid, "the killed server");
}

#[test]
fn servers_that_fail_or_hang_at_start_are_reported_and_the_session_goes_on() {
    let home = TempHome::new();
    let pid_file = home.home.join("hang.pid");
    home.home.write(
        "config.yaml",
        format!(
            "mcp_startup_timeout_secs: 1\nmcp_servers:\n  ghost:\n    command: /nonexistent/mcp-server\n{}",
            recorded_server("hang", &pid_file, "-e 'setInterval(() => {}, 1000)'")
        ),
    );
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - text: "fine without them"
"#,
    );
    let out = lead(&home, &mock, "hello").run();
    out.assert_ok();
    assert!(out.stdout().contains("fine without them"));
    let stderr = out.stderr();
    assert!(
        stderr.contains("MCP server `ghost` failed to start"),
        "{stderr}"
    );
    assert!(stderr.contains("/nonexistent/mcp-server"), "{stderr}");
    assert!(
        stderr.contains("`hang` still starting after 1 s"),
        "{stderr}"
    );
    let pid = read_pid(&pid_file).expect("the hanging server started");
    wait_gone(pid, "the hanging server to be ended at exit");
}

#[test]
fn a_call_that_hangs_times_out() {
    let home = TempHome::new();
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\nmcp_tool_timeout_secs: 1\npermissions:\n  allow: [\"mcp__everything__*\"]\nmcp_servers:\n  everything:\n    command: node\n    args: [\"{}\", \"stdio\"]\n",
            everything().display()
        ),
    );
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - tool_calls:
        - {name: mcp__everything__trigger-long-running-operation, input: {duration: 30, steps: 2}}
    - tool_calls:
        - {name: mcp__everything__echo, input: {message: "next"}}
    - text: "done"
"#,
    );
    lead(&home, &mock, "wait").run().assert_ok();
    let requests = mock.requests();
    let results = tool_results(&requests[2].body);
    assert!(
        results[0].1 && results[0].0.contains("did not answer within 1 s"),
        "{results:?}"
    );
    assert_eq!(results[1], ("Echo: next".to_string(), false));
}

#[test]
fn an_mcp_prompt_runs_as_a_slash_command() {
    let home = TempHome::new();
    home.home.write(
        "config.yaml",
        format!(
            "mcp_servers:\n  everything:\n    command: node\n    args: [\"{}\", \"stdio\"]\n",
            everything().display()
        ),
    );
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - text: "sunny"
"#,
    );
    lead(
        &home,
        &mock,
        "/mcp__everything__args-prompt state=Texas Austin",
    )
    .run()
    .assert_ok();
    let requests = mock.requests();
    let first = requests[0].body["messages"][0].to_string();
    assert!(
        first.contains("What's weather in Austin, Texas?"),
        "{first}"
    );

    let out = lead(&home, &mock, "/mcp__everything__args-prompt").run();
    out.assert_code(2);
    assert!(
        out.stderr().contains("needs the argument(s) city"),
        "{}",
        out.stderr()
    );
}

#[test]
fn an_untrusted_projects_servers_are_not_started() {
    let home = TempHome::new();
    let marker = home.home.join("started");
    home.cwd.write(
        ".roocode/config.yaml",
        format!(
            "mcp_servers:\n  evil:\n    command: sh\n    args: [\"-c\", \"touch '{}'\"]\n",
            marker.display()
        ),
    );
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - text: "ok"
    - text: "ok"
"#,
    );
    let out = lead(&home, &mock, "hi").run();
    out.assert_ok();
    assert!(
        out.stderr().contains("mcp_servers"),
        "the user is told: {}",
        out.stderr()
    );
    assert!(
        !marker.exists(),
        "an untrusted project's server was started"
    );
    let out = lead(&home, &mock, "hi").arg("--trust-project").run();
    out.assert_ok();
    assert!(marker.exists(), "a trusted project's server is started");
}

#[test]
fn a_worker_process_starts_its_own_servers_and_ends_them_with_it() {
    let home = TempHome::new();
    home.team("t", "lead", &[]);
    let pid_file = home.home.join("server.pid");
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\nmcp_servers:\n{}",
            recorded_server(
                "everything",
                &pid_file,
                &format!("'{}' stdio", everything().display())
            )
        ),
    );
    let mock = MockLlm::start(
        r#"
agents:
  "*":
    - tool_calls:
        - {name: mcp__everything__echo, input: {message: "from carol"}}
    - text: "done"
"#,
    );
    let worker = home
        .cmd("roo-worker")
        .env("ANTHROPIC_API_KEY", "test-key")
        .args(["--team", "t", "--name", "carol", "--prompt", "echo"])
        .args([
            "--provider",
            "anthropic",
            "--base-url",
            &mock.base_url("anthropic"),
        ])
        .args(["--permission-mode", "bypassPermissions"])
        .spawn();
    let requests = wait_until(
        "carol's second request",
        Duration::from_secs(30),
        || {
            let requests = mock.requests();
            (requests.len() >= 2).then_some(requests)
        },
        || format!("{} requests", mock.requests().len()),
    );
    assert_eq!(
        tool_results(&requests[1].body),
        [("Echo: from carol".to_string(), false)]
    );
    let pid = read_pid(&pid_file).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    wait_gone(pid, "the worker's server to end with it");
    drop(worker);
}

#[test]
fn an_in_process_teammate_uses_the_leads_server_connection() {
    let home = TempHome::new();
    home.cwd.write("README.md", "# demo\n");
    roo_tests::git_repo_with_identity(home.cwd.path());
    let starts = home.home.join("starts");
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\nmcp_servers:\n  everything:\n    command: sh\n    args: [\"-c\", \"echo $$ >> '{}'; exec node '{}' stdio\"]\n",
            starts.display(),
            everything().display()
        ),
    );
    // Agents are told apart by name: the scripted provider, not the mock server.
    let script = home.home.write(
        "script.yaml",
        r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Echo something."}}
    - text: "Waiting for alice."
    - text: "Noted."
    - text: "Noted."
  alice:
    - tool_calls:
        - {name: mcp__everything__echo, input: {message: "from alice"}}
    - text: "Done."
"#,
    );
    let bins = roo_tests::bin("roo-task").parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    home.cmd("roo-lead")
        .env("HOME", home.home.path())
        .env("PATH", path)
        .env("ROO_TEAMMATE_MODE", "in-process")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["-p", "Have alice echo.", "--provider", "script", "--script"])
        .arg(&script)
        .args([
            "--permission-mode",
            "bypassPermissions",
            "--team-timeout",
            "60",
        ])
        .run()
        .assert_ok();
    let transcript = home.home.read("teams/crew/transcripts/alice.jsonl");
    let results: Vec<(String, bool)> = transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .flat_map(|entry| tool_results(&json_messages(&entry)))
        .collect();
    assert_eq!(
        results,
        [("Echo: from alice".to_string(), false)],
        "{transcript}"
    );
    let started = std::fs::read_to_string(&starts).unwrap();
    assert_eq!(
        started.lines().count(),
        1,
        "one server for the process: {started}"
    );
    let pid: i32 = started.trim().parse().unwrap();
    wait_gone(pid, "the server to end with the lead");
}

#[test]
fn an_http_server_that_goes_away_gives_error_results_and_the_session_goes_on() {
    let home = TempHome::new();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let server = TestCommand::new("node")
        .arg(everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .spawn();
    wait_until(
        "server-everything to listen",
        Duration::from_secs(20),
        || std::net::TcpStream::connect(("127.0.0.1", port)).ok(),
        || format!("nothing listens on {port} (server pid {})", server.pid()),
    );
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\nmcp_servers:\n  remote:\n    url: http://127.0.0.1:{port}/mcp\n"
        ),
    );
    let script = format!(
        r#"
agents:
  "*":
    - tool_calls:
        - {{name: mcp__remote__echo, input: {{message: "before"}}}}
    - tool_calls:
        - {{name: Bash, input: {{command: "kill -9 {pid}"}}}}
    - tool_calls:
        - {{name: mcp__remote__echo, input: {{message: "after"}}}}
    - text: "done"
"#,
        pid = server.pid()
    );
    let mock = MockLlm::start(&script);
    let out = lead(&home, &mock, "use it")
        .args(["--permission-mode", "bypassPermissions", "--no-sandbox"])
        .run();
    out.assert_ok();
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let results = tool_results(&requests[3].body);
    assert_eq!(results[0], ("Echo: before".to_string(), false));
    let (after, is_error) = &results[2];
    assert!(
        *is_error
            && after.contains(
                "failed to call mcp__remote__echo: the request to MCP server `remote` failed"
            ),
        "{after}"
    );
    drop(server);
}

#[test]
fn a_server_ready_after_the_startup_wait_adds_its_tools_to_the_next_request() {
    let home = TempHome::new();
    let gate = home.home.join("gate");
    let log = home.home.join("logs/roo-lead.log");
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\nmcp_startup_timeout_secs: 1\nmcp_servers:\n  everything:\n    command: sh\n    args: [\"-c\", \"while [ ! -f '{}' ]; do sleep 0.05; done; exec node '{}' stdio\"]\n",
            gate.display(),
            everything().display()
        ),
    );
    // The first turn opens the gate and waits until the server's tools are registered.
    let script = format!(
        r#"
agents:
  "*":
    - tool_calls:
        - name: Bash
          input: {{command: "touch '{gate}'; until grep -q 'MCP server `everything` connected' '{log}'; do sleep 0.05; done; echo ready"}}
    - tool_calls:
        - {{name: mcp__everything__echo, input: {{message: "late"}}}}
    - text: "done"
"#,
        gate = gate.display(),
        log = log.display()
    );
    let mock = MockLlm::start(&script);
    let out = lead(&home, &mock, "wait for it")
        .env("ROO_LOG", "info")
        .args(["--permission-mode", "bypassPermissions", "--no-sandbox"])
        .run();
    out.assert_ok();
    assert!(
        out.stderr()
            .contains("`everything` still starting after 1 s"),
        "{}",
        out.stderr()
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        !tool_names(&requests[0].body)
            .iter()
            .any(|n| n.starts_with("mcp__"))
    );
    assert!(tool_names(&requests[1].body).contains(&"mcp__everything__echo".to_string()));
    assert_eq!(
        tool_results(&requests[2].body)[1],
        ("Echo: late".to_string(), false)
    );
}
