//! What a local model server says about its context window.
//!
//! A hosted model's window is a property of the model; a local server's is what the
//! server was started with — llama.cpp's `-c` shared among its `--parallel` slots,
//! Ollama's `num_ctx` — and it is often smaller than an agent's first request (system
//! prompt, tool definitions, instructions). llama-server then refuses the request and
//! Ollama cuts its start, so the agent asks once, before its first request, and warns.
//!
//! Only servers on this machine or the local network are asked (a base URL whose host
//! is `localhost`, a loopback, private, link-local or unique-local address): a hosted API
//! is never sent a request it did not ask for. The probe is bounded in time
//! ([`PROBE_TIMEOUT`]) and in what it reads ([`MAX_BODY`]); whatever the server answers
//! — an error, HTML, a JSON of another shape, numbers out of range — it says nothing
//! rather than fail.
//!
//! What is read, in order:
//! 1. llama-server: `GET {root}/props` → `default_generation_settings.n_ctx`, the
//!    context of one slot, and `total_slots`;
//! 2. Ollama: `GET {root}/api/ps` → the `context_length` of the configured model while
//!    it is loaded; else `POST {root}/api/show {"model": …}` → `num_ctx` from its
//!    `parameters`, else the model's own limit, `model_info["<arch>.context_length"]`.
//!
//! `{root}` is the base URL without a trailing `/v1` (the OpenAI-compatible base URLs
//! end in it; an Anthropic base URL is the root already).

use std::time::Duration;

use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderMap};
use serde_json::{Value, json};

use crate::transport::{Reach, host_reach};

/// How long the whole probe may take: a server on this machine answers in
/// milliseconds; one that does not answer in time is left alone.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(1500);

/// The most of a response body the probe reads; a longer body ends the probe.
/// (llama-server's `/props` carries the chat template, Ollama's `/api/show` the
/// license and template: tens of kilobytes.)
pub const MAX_BODY: usize = 1024 * 1024;

/// Context sizes beyond this are not believed (a hostile or broken server).
const MAX_TOKENS: u64 = 1 << 32;
/// Slot counts beyond this are not believed.
const MAX_SLOTS: u64 = 1 << 16;

/// A local server's context window, as the server reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerContext {
    /// Tokens one request may use, prompt and answer together.
    pub tokens: u64,
    pub server: LocalServer,
    /// The server root that answered (`http://127.0.0.1:8080`).
    pub root: String,
}

/// Which kind of server answered, and what it said besides the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalServer {
    /// llama.cpp's `llama-server` (`/props`); `slots` is its `total_slots`.
    LlamaServer { slots: Option<u64> },
    /// Ollama, and where the window came from.
    Ollama { model: String, source: OllamaWindow },
}

/// Where an Ollama window came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OllamaWindow {
    /// `context_length` of the loaded model (`/api/ps`): what it runs with.
    Loaded,
    /// `num_ctx` of the model's parameters (`/api/show`).
    NumCtx,
    /// The model's own limit (`model_info`, `/api/show`): the most it can run with.
    ModelLimit,
}

impl ServerContext {
    /// The warning for a first request of about `request_tokens` tokens that does not
    /// fit: both numbers, what the server will do, and how to give it more context.
    pub fn too_small(&self, request_tokens: u64) -> String {
        let suggest = suggested_window(request_tokens);
        match &self.server {
            LocalServer::LlamaServer { slots } => {
                let slots = slots.map_or(String::new(), |n| {
                    format!(", {n} slot{}", if n == 1 { "" } else { "s" })
                });
                format!(
                    "the model server at {root} (llama-server{slots}) gives a request {tokens} tokens \
                     of context, but this agent's first request is about {request_tokens} tokens: \
                     it will be refused. Restart llama-server with more context per slot: -c is \
                     divided among the --parallel slots, so `-c {suggest} --parallel 1` for one \
                     agent, `-c {double} --parallel 2` for two agents at once",
                    root = self.root,
                    tokens = self.tokens,
                    double = suggest.saturating_mul(2),
                )
            }
            LocalServer::Ollama { model, source } => {
                let what = match source {
                    OllamaWindow::Loaded => "runs it with a context window of",
                    OllamaWindow::NumCtx => "gives it a context window (num_ctx) of",
                    OllamaWindow::ModelLimit => "reports a context limit of",
                };
                format!(
                    "the Ollama server at {root} {what} {tokens} tokens for model {model}, but \
                     this agent's first request is about {request_tokens} tokens: Ollama cuts \
                     what does not fit. Give it more context: start the server with \
                     OLLAMA_CONTEXT_LENGTH={suggest}, or set `PARAMETER num_ctx {suggest}` in a \
                     Modelfile",
                    root = self.root,
                    tokens = self.tokens,
                )
            }
        }
    }
}

/// A window to suggest for a first request of `request_tokens`: room for the
/// conversation to grow to about twice that, a power of two, at least 8192.
fn suggested_window(request_tokens: u64) -> u64 {
    request_tokens
        .saturating_mul(2)
        .max(8192)
        .checked_next_power_of_two()
        .unwrap_or(u64::MAX)
}

/// The root of a local server behind `base_url`, or `None` if the base URL is not
/// local (or not a URL).
pub fn local_root(base_url: &str) -> Option<String> {
    if host_reach(base_url) == Reach::Remote {
        return None;
    }
    let mut url = url::Url::parse(base_url.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    url.set_query(None);
    url.set_fragment(None);
    let path = url.path().trim_end_matches('/');
    let path = path.strip_suffix("/v1").unwrap_or(path).to_owned();
    url.set_path(&path);
    Some(url.as_str().trim_end_matches('/').to_owned())
}

/// Asks the local server behind `base_url` for its context window: `None` when the
/// base URL is not local, the server is not one of the known kinds, or anything goes
/// wrong. `auth` carries the headers that authorize requests to that server (its API
/// key), `model` the configured model (Ollama reports per model). Never takes longer
/// than [`PROBE_TIMEOUT`].
pub(crate) async fn probe(
    client: &reqwest::Client,
    base_url: &str,
    auth: &HeaderMap,
    model: &str,
) -> Option<ServerContext> {
    let root = local_root(base_url)?;
    let found = tokio::time::timeout(PROBE_TIMEOUT, async {
        let probe = Probe {
            client,
            auth,
            root: &root,
        };
        if let Some(found) = probe.llama_server().await {
            return Some(found);
        }
        probe.ollama(model).await
    })
    .await
    .ok()
    .flatten();
    tracing::debug!(root, ?found, "local server context probe");
    found
}

struct Probe<'a> {
    client: &'a reqwest::Client,
    auth: &'a HeaderMap,
    root: &'a str,
}

impl Probe<'_> {
    async fn llama_server(&self) -> Option<ServerContext> {
        let props = self.json(self.client.get(self.url("/props"))).await?;
        let (tokens, slots) = llama_props(&props)?;
        Some(self.found(tokens, LocalServer::LlamaServer { slots }))
    }

    async fn ollama(&self, model: &str) -> Option<ServerContext> {
        if model.is_empty() {
            return None;
        }
        let server = |source| LocalServer::Ollama {
            model: model.to_owned(),
            source,
        };
        if let Some(ps) = self.json(self.client.get(self.url("/api/ps"))).await
            && let Some(tokens) = ollama_loaded(&ps, model)
        {
            return Some(self.found(tokens, server(OllamaWindow::Loaded)));
        }
        let show = self
            .client
            .post(self.url("/api/show"))
            .header(CONTENT_TYPE, "application/json")
            .body(json!({ "model": model }).to_string());
        let show = self.json(show).await?;
        let (tokens, source) = ollama_show(&show)?;
        Some(self.found(tokens, server(source)))
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.root)
    }

    fn found(&self, tokens: u64, server: LocalServer) -> ServerContext {
        ServerContext {
            tokens,
            server,
            root: self.root.to_owned(),
        }
    }

    /// Sends `request` and parses a successful answer as JSON, reading at most
    /// [`MAX_BODY`] bytes.
    async fn json(&self, request: reqwest::RequestBuilder) -> Option<Value> {
        let mut response = request
            .headers(self.auth.clone())
            .timeout(PROBE_TIMEOUT)
            .send()
            .await
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let declared = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_BODY as u64) {
            return None;
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.ok()? {
            if body.len() + chunk.len() > MAX_BODY {
                return None;
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).ok()
    }
}

/// A count the probe believes: a whole number from 1 to `max`.
fn count(value: Option<&Value>, max: u64) -> Option<u64> {
    value?.as_u64().filter(|n| (1..=max).contains(n))
}

/// llama-server's `/props`: the context of one slot and the number of slots.
fn llama_props(props: &Value) -> Option<(u64, Option<u64>)> {
    let n_ctx = count(
        props.get("default_generation_settings")?.get("n_ctx"),
        MAX_TOKENS,
    )?;
    Some((n_ctx, count(props.get("total_slots"), MAX_SLOTS)))
}

/// Ollama's `/api/ps`: the `context_length` of `model` if it is loaded. Ollama names a
/// model without a tag `<name>:latest`.
fn ollama_loaded(ps: &Value, model: &str) -> Option<u64> {
    let tagged = format!("{model}:latest");
    ps.get("models")?
        .as_array()?
        .iter()
        .filter(|m| {
            ["name", "model"].iter().any(|key| {
                m.get(key)
                    .and_then(Value::as_str)
                    .is_some_and(|name| name == model || name == tagged)
            })
        })
        .find_map(|m| count(m.get("context_length"), MAX_TOKENS))
}

/// Ollama's `/api/show`: `num_ctx` from the model's parameters (lines of
/// `name value`), else the model's own limit from `model_info`.
fn ollama_show(show: &Value) -> Option<(u64, OllamaWindow)> {
    let num_ctx = show
        .get("parameters")
        .and_then(Value::as_str)
        .and_then(|parameters| {
            parameters.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx"))
                    .then(|| words.next()?.parse::<u64>().ok())
                    .flatten()
            })
        })
        .filter(|n| (1..=MAX_TOKENS).contains(n));
    if let Some(n) = num_ctx {
        return Some((n, OllamaWindow::NumCtx));
    }
    show.get("model_info")?
        .as_object()?
        .iter()
        .filter(|(key, _)| key.ends_with(".context_length"))
        .find_map(|(_, value)| count(Some(value), MAX_TOKENS))
        .map(|n| (n, OllamaWindow::ModelLimit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_base_urls_have_a_root() {
        assert_eq!(
            local_root("http://127.0.0.1:8080/v1").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            local_root("http://localhost:11434/v1/").as_deref(),
            Some("http://localhost:11434")
        );
        assert_eq!(
            local_root("http://127.0.0.1:8080").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            local_root("http://192.168.1.20:8080/llama/v1?x=1#f").as_deref(),
            Some("http://192.168.1.20:8080/llama")
        );
        assert_eq!(
            local_root("http://[::1]:8080/v1").as_deref(),
            Some("http://[::1]:8080")
        );
        for remote in [
            "https://api.anthropic.com",
            "https://api.openai.com/v1",
            "http://gpu-box.example:8080/v1",
            "http://127.0.0.1.nip.io:8080/v1",
            "not a url",
            "",
        ] {
            assert_eq!(local_root(remote), None, "{remote}");
        }
    }

    #[test]
    fn llama_server_props() {
        let props = json!({
            "default_generation_settings": {"n_ctx": 4096, "params": {}},
            "total_slots": 2,
            "model_path": "m.gguf",
        });
        assert_eq!(llama_props(&props), Some((4096, Some(2))));
        let no_slots = json!({"default_generation_settings": {"n_ctx": 8192}});
        assert_eq!(llama_props(&no_slots), Some((8192, None)));
    }

    #[test]
    fn hostile_props_say_nothing() {
        for props in [
            json!(null),
            json!([]),
            json!("n_ctx"),
            json!({"default_generation_settings": null}),
            json!({"default_generation_settings": {"n_ctx": "4096"}}),
            json!({"default_generation_settings": {"n_ctx": -1}}),
            json!({"default_generation_settings": {"n_ctx": 0}}),
            json!({"default_generation_settings": {"n_ctx": 4096.5}}),
            json!({"default_generation_settings": {"n_ctx": 1e300}}),
            json!({"default_generation_settings": {"n_ctx": u64::MAX}}),
            json!({"default_generation_settings": [4096]}),
            json!({"n_ctx": 4096}),
        ] {
            assert_eq!(llama_props(&props), None, "{props}");
        }
        let bad_slots = json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": -3});
        assert_eq!(llama_props(&bad_slots), Some((4096, None)));
    }

    #[test]
    fn ollama_running_model() {
        let ps = json!({"models": [
            {"name": "llama3:latest", "model": "llama3:latest", "context_length": 8192},
            {"name": "qwen2.5-coder:0.5b", "model": "qwen2.5-coder:0.5b", "context_length": 4096},
        ]});
        assert_eq!(ollama_loaded(&ps, "qwen2.5-coder:0.5b"), Some(4096));
        assert_eq!(ollama_loaded(&ps, "llama3"), Some(8192));
        assert_eq!(ollama_loaded(&ps, "mistral"), None);
        assert_eq!(ollama_loaded(&json!({"models": "x"}), "llama3"), None);
        let old = json!({"models": [{"name": "llama3:latest", "size_vram": 1}]});
        assert_eq!(ollama_loaded(&old, "llama3"), None);
    }

    #[test]
    fn ollama_show_prefers_num_ctx_to_the_model_limit() {
        let show = json!({
            "parameters": "stop                           \"<|im_end|>\"\nnum_ctx                        16384",
            "model_info": {"qwen2.context_length": 32768, "general.architecture": "qwen2"},
        });
        assert_eq!(ollama_show(&show), Some((16384, OllamaWindow::NumCtx)));
        let limit_only = json!({"model_info": {"qwen2.context_length": 32768}});
        assert_eq!(
            ollama_show(&limit_only),
            Some((32768, OllamaWindow::ModelLimit))
        );
        let hostile = json!({"parameters": "num_ctx lots\nnum_ctx", "model_info": {"x.context_length": "big"}});
        assert_eq!(ollama_show(&hostile), None);
    }

    #[test]
    fn the_warning_names_both_numbers_and_the_fix() {
        let context = ServerContext {
            tokens: 2048,
            server: LocalServer::LlamaServer { slots: Some(2) },
            root: "http://127.0.0.1:8080".into(),
        };
        let text = context.too_small(5000);
        for needle in [
            "2048 tokens",
            "about 5000 tokens",
            "(llama-server, 2 slots)",
            "-c 16384 --parallel 1",
            "-c 32768 --parallel 2",
            "http://127.0.0.1:8080",
        ] {
            assert!(text.contains(needle), "{needle} in {text}");
        }
        let ollama = ServerContext {
            tokens: 4096,
            server: LocalServer::Ollama {
                model: "qwen2.5-coder:0.5b".into(),
                source: OllamaWindow::Loaded,
            },
            root: "http://localhost:11434".into(),
        };
        let text = ollama.too_small(6000);
        assert!(text.contains("4096 tokens"), "{text}");
        assert!(text.contains("about 6000 tokens"), "{text}");
        assert!(text.contains("OLLAMA_CONTEXT_LENGTH=16384"), "{text}");
    }

    #[test]
    fn suggested_windows() {
        assert_eq!(suggested_window(100), 8192);
        assert_eq!(suggested_window(5000), 16384);
        assert_eq!(suggested_window(9000), 32768);
        assert_eq!(suggested_window(u64::MAX), u64::MAX);
    }
}
