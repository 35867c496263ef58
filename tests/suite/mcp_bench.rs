//! Measurements for docs/BENCHMARKS.md, run by `scripts/bench-mcp` (ignored in the
//! normal suite: they print figures and assert nothing about speed).
//!
//! - Prompt size: bytes of the tools part and of the whole first request `roo-lead -p`
//!   sends to the mock LLM server, with no MCP server, with the 50-tool fixture server
//!   deferred (`mcp_defer: auto`) and with the same 50 tools loaded (`mcp_defer: never`).
//! - Start-up: time from starting `roo-lead` to the mock server's receipt of the first
//!   request, without MCP servers and with one stdio server (server-everything).

use std::time::{Duration, Instant};

use roo_tests::{EVERYTHING_ENTRY, MockLlm, TempHome, mcp_servers_dir};
use serde_json::Value;

const RUNS: usize = 7;

fn first_request(config: &str) -> (Value, Duration) {
    let home = TempHome::new();
    home.home.write("config.yaml", config);
    let mock = MockLlm::start("agents:\n  \"*\":\n    - text: ok\n");
    let started = Instant::now();
    home.cmd("roo-lead")
        .env("ANTHROPIC_API_KEY", "bench-key")
        .args(["-p", "hello", "--provider", "anthropic"])
        .args(["--base-url", &mock.base_url("anthropic")])
        .run()
        .assert_ok();
    let request = mock.requests().into_iter().next().expect("one request");
    (request.body, request.received_at - started)
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

#[test]
#[ignore = "a measurement: run by scripts/bench-mcp"]
fn bench_mcp_prompt_size_and_startup() {
    let dir = mcp_servers_dir();
    let many = |defer: &str| {
        format!(
            "mcp_defer: {defer}\nmcp_servers:\n  many:\n    command: node\n    args: [\"{}\", \"50\"]\n",
            dir.join("many-tools.mjs").display()
        )
    };
    println!("| MCP tools | tools sent | tools part (bytes) | whole first request (bytes) |");
    println!("|---|---|---|---|");
    for (label, config) in [
        ("none", String::new()),
        ("50, deferred (`mcp_defer: auto`)", many("auto")),
        ("50, loaded (`mcp_defer: never`)", many("never")),
    ] {
        let (body, _) = first_request(&config);
        let tools = serde_json::to_string(&body["tools"]).unwrap().len();
        let whole = serde_json::to_string(&body).unwrap().len();
        let count = body["tools"].as_array().map_or(0, Vec::len);
        println!("| {label} | {count} | {tools} | {whole} |");
    }
    let everything = format!(
        "mcp_servers:\n  everything:\n    command: node\n    args: [\"{}\", \"stdio\"]\n",
        dir.join(EVERYTHING_ENTRY).display()
    );
    println!();
    println!("| start-up to first request ({RUNS} runs) | median | min | max |");
    println!("|---|---|---|---|");
    for (label, config) in [
        ("no MCP server", String::new()),
        ("one stdio server (server-everything)", everything),
    ] {
        let times: Vec<Duration> = (0..RUNS).map(|_| first_request(&config).1).collect();
        let (min, max) = (*times.iter().min().unwrap(), *times.iter().max().unwrap());
        println!(
            "| {label} | {:.0} ms | {:.0} ms | {:.0} ms |",
            median(times).as_secs_f64() * 1000.0,
            min.as_secs_f64() * 1000.0,
            max.as_secs_f64() * 1000.0
        );
    }
}
