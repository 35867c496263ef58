//! `Provider::server_context` over HTTP, against the mock server taught what
//! llama-server and Ollama answer: the window and slots of `/props`, Ollama's loaded
//! model, `num_ctx` and model limit, the key sent along, and nothing — quickly — for
//! answers that do not fit.

use std::time::{Duration, Instant};

use roo_llm::mock_server::{MockServer, RawEnd, RawReply, llama_props};
use roo_llm::script::{Cursors, Script, ScriptPlayer};
use roo_llm::server_context::PROBE_TIMEOUT;
use roo_llm::{LocalServer, OllamaWindow, ProviderKind, ServerContext, build_provider};
use serde_json::json;

use super::support::settings;

async fn probe(server: &MockServer, kind: ProviderKind) -> Option<ServerContext> {
    build_provider(&settings(kind, server))
        .unwrap()
        .server_context()
        .await
}

#[tokio::test]
async fn llama_server_props_over_both_protocols() {
    let server = MockServer::start().await.unwrap();
    server.serve_props(RawReply::json(200, &llama_props(4096, 2)));
    let root = format!("http://{}", server.addr());
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        let found = probe(&server, kind).await;
        assert_eq!(
            found,
            Some(ServerContext {
                tokens: 4096,
                server: LocalServer::LlamaServer { slots: Some(2) },
                root: root.clone(),
            }),
            "{kind:?}"
        );
    }
    // The key goes along, as each protocol sends it (llama-server started with
    // --api-key wants it on /props too); nothing is asked of the model endpoints.
    let probes = server.probes();
    assert_eq!(probes.len(), 2);
    assert_eq!(probes[0].header("authorization"), Some("Bearer test-key"));
    assert_eq!(probes[1].header("x-api-key"), Some("test-key"));
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn ollama_loaded_model_then_num_ctx_then_model_limit() {
    let server = MockServer::start().await.unwrap();
    let ps = json!({"models": [
        {"name": "other:latest", "model": "other:latest", "context_length": 2048},
        {"name": "mock-model:latest", "model": "mock-model:latest", "context_length": 8192},
    ]});
    server.serve("GET", "/api/ps", RawReply::json(200, &ps));
    let found = probe(&server, ProviderKind::OpenAi).await.unwrap();
    assert_eq!(found.tokens, 8192);
    assert_eq!(
        found.server,
        LocalServer::Ollama {
            model: "mock-model".into(),
            source: OllamaWindow::Loaded
        }
    );

    // Not loaded: the model's parameters, else its own limit.
    server.serve(
        "GET",
        "/api/ps",
        RawReply::json(200, &json!({"models": []})),
    );
    let show = json!({
        "parameters": "num_ctx                        16384\ntemperature 0.7",
        "model_info": {"qwen2.context_length": 32768},
    });
    server.serve("POST", "/api/show", RawReply::json(200, &show));
    let found = probe(&server, ProviderKind::OpenAi).await.unwrap();
    assert_eq!(found.tokens, 16384);
    let show =
        json!({"model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768}});
    server.serve("POST", "/api/show", RawReply::json(200, &show));
    let found = probe(&server, ProviderKind::OpenAi).await.unwrap();
    assert_eq!(
        (found.tokens, found.server),
        (
            32768,
            LocalServer::Ollama {
                model: "mock-model".into(),
                source: OllamaWindow::ModelLimit
            }
        )
    );
    let show_request = server.probes().last().cloned().unwrap();
    assert_eq!(show_request.method, "POST");
    assert_eq!(show_request.body, json!({"model": "mock-model"}));
}

#[tokio::test]
async fn answers_that_do_not_fit_give_nothing() {
    let server = MockServer::start().await.unwrap();
    let big = RawReply {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        // Chunked, with no length announced: the limit holds while reading.
        chunks: vec![(Duration::ZERO, vec![b' '; 300 * 1024]); 4],
        end: RawEnd::Complete,
    };
    for reply in [
        RawReply::json(200, &json!({"default_generation_settings": {"n_ctx": 0}})),
        RawReply::json(200, &json!({"default_generation_settings": {"n_ctx": 1.5}})),
        RawReply::json(
            404,
            &json!({"default_generation_settings": {"n_ctx": 4096}}),
        ),
        RawReply::json(200, &json!(["n_ctx", 4096])),
        big,
    ] {
        server.serve_props(reply.clone());
        assert_eq!(
            probe(&server, ProviderKind::OpenAi).await,
            None,
            "{reply:?}"
        );
    }
}

#[tokio::test]
async fn a_server_that_never_answers_is_given_up_on_in_time() {
    let server = MockServer::start().await.unwrap();
    server.serve_props(
        RawReply::json(200, &json!({}))
            .ending(RawEnd::Hold)
            .with_delay(Duration::from_secs(3600)),
    );
    let started = Instant::now();
    assert_eq!(probe(&server, ProviderKind::Anthropic).await, None);
    let elapsed = started.elapsed();
    assert!(elapsed >= PROBE_TIMEOUT, "{elapsed:?}");
    assert!(
        elapsed < PROBE_TIMEOUT + Duration::from_secs(1),
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn hosted_and_scripted_providers_are_not_asked() {
    let server = MockServer::start().await.unwrap();
    server.serve_props(RawReply::json(200, &llama_props(4096, 1)));
    let mut remote = settings(ProviderKind::OpenAi, &server);
    remote.base_url = "https://api.openai.com/v1".into();
    let provider = build_provider(&remote).unwrap();
    assert_eq!(provider.server_context().await, None);
    let player = ScriptPlayer::new(
        Script::parse("- text: hi\n", false).unwrap(),
        "test",
        Cursors::in_memory(),
    );
    let script = roo_llm::ScriptProvider::new(player, "mock-model", 128_000);
    assert_eq!(roo_llm::Provider::server_context(&script).await, None);
    assert!(server.probes().is_empty());
}
