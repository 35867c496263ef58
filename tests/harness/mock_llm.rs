//! The mock LLM server of `roo-llm`, run in the test process on its own runtime thread,
//! so tests can point the real binaries at it and then inspect every request they sent.

use roo_llm::mock_server::{MockServer, Protocol, RawReply, RecordedRequest};
use roo_llm::script::Script;

/// A running mock server answering from a script.
pub struct MockLlm {
    server: Option<MockServer>,
    runtime: tokio::runtime::Runtime,
}

impl MockLlm {
    /// Starts a server answering from `script` (YAML, the scripted-provider format).
    pub fn start(script: &str) -> MockLlm {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let script = Script::parse(script, false).unwrap_or_else(|e| panic!("bad script: {e}"));
        let server = runtime.block_on(MockServer::with_script(script)).unwrap();
        MockLlm {
            server: Some(server),
            runtime,
        }
    }

    fn server(&self) -> &MockServer {
        self.server.as_ref().unwrap()
    }

    /// Base URL for `protocol` ("anthropic" or "openai").
    pub fn base_url(&self, protocol: &str) -> String {
        let protocol = match protocol {
            "anthropic" => Protocol::Anthropic,
            "openai" => Protocol::OpenAi,
            other => panic!("unknown protocol {other}"),
        };
        self.server().base_url(protocol)
    }

    /// Every request received so far, but the context probes.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.server().requests()
    }

    /// Answers `GET /props` with `reply` from now on, as a llama-server answers it
    /// (`roo_llm::mock_server::llama_props`) or as a hostile server might.
    pub fn serve_props(&self, reply: RawReply) {
        self.server().serve_props(reply);
    }

    /// The requests to the paths a client asks a local server's context window at
    /// (`/props`, `/api/ps`, `/api/show`).
    pub fn probes(&self) -> Vec<RecordedRequest> {
        self.server().probes()
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        // Stop the server inside its runtime, then the runtime.
        let server = self.server.take();
        self.runtime.block_on(async move { drop(server) });
    }
}
