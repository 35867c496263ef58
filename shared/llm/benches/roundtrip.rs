//! Round-trip cost of one model call through this layer with the model taken out of
//! the picture: the scripted provider, and both real protocols against the local mock
//! server (request encoding, HTTP, SSE framing, parsing, collecting). This is the floor
//! under the agent-overhead benchmark.
//!
//! Run: `cargo bench -p roo-llm --bench roundtrip` (prints median and p95 per call).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use roo_llm::mock_server::MockServer;
use roo_llm::script::{Cursors, Script, ScriptPlayer, ScriptToolCall, ScriptTurn};
use roo_llm::{
    LlmSettings, Message, Provider, ProviderKind, Request, ScriptProvider, build_provider, collect,
};
use serde_json::json;

const CALLS: usize = 2000;

fn turn() -> ScriptTurn {
    ScriptTurn {
        text: Some("I'll read the file and then run the tests. ".repeat(4)),
        tool_calls: vec![ScriptToolCall {
            id: None,
            name: "ReadFile".into(),
            input: json!({"path": "src/lib.rs"}),
            raw_arguments: None,
        }],
        ..ScriptTurn::default()
    }
}

fn script() -> Script {
    Script {
        agents: [("*".to_owned(), vec![turn(); CALLS + 10])].into(),
    }
}

fn request() -> Request {
    Request {
        system: vec!["You are a coding agent. ".repeat(40)],
        messages: vec![Message::user_text("Fix the failing test in src/lib.rs.")],
        ..Request::default()
    }
}

async fn measure(name: &str, provider: Arc<dyn Provider>) {
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let response = collect(provider.stream(request()), |_| {}).await.unwrap();
        samples.push(started.elapsed());
        assert_eq!(response.message.tool_uses().count(), 1);
    }
    samples.sort();
    let pick = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    let total: Duration = samples.iter().sum();
    println!(
        "{name:<28} median {:>8.1} µs   p95 {:>8.1} µs   ({CALLS} sequential calls, {:.2} s)",
        pick(0.5).as_secs_f64() * 1e6,
        pick(0.95).as_secs_f64() * 1e6,
        total.as_secs_f64()
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let scripted = ScriptProvider::new(
            ScriptPlayer::new(script(), "bench", Cursors::in_memory()),
            "script",
            200_000,
        );
        measure("script provider", Arc::new(scripted)).await;
        for kind in [ProviderKind::Anthropic, ProviderKind::OpenAi] {
            let server = MockServer::with_script(script()).await.unwrap();
            let mut settings = LlmSettings::defaults(kind);
            settings.base_url = server.base_url(match kind {
                ProviderKind::Anthropic => roo_llm::mock_server::Protocol::Anthropic,
                _ => roo_llm::mock_server::Protocol::OpenAi,
            });
            settings.api_key = Some("bench".into());
            measure(
                &format!("{kind} via mock server"),
                build_provider(&settings).unwrap(),
            )
            .await;
        }
    });
}
