//! The agent's side of MCP: wait for servers before the first request, and tell
//! the user what happened to them.

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::servers::McpServers;
use crate::event::{AgentEvent, EventSink};
use crate::hooks::{AgentHook, PromptDecision, ToolCallInfo};
use crate::tool::ToolOutput;

/// Add to every agent that uses [`McpServers`]: a submitted prompt waits until
/// start-up is over (bounded by `mcp_startup_timeout_secs`), so the first request
/// carries the servers' tools; server failures and exits are shown as warnings,
/// each once per process.
#[derive(Clone)]
pub struct McpHook {
    servers: McpServers,
}

impl McpHook {
    /// The hook over `servers`, for the agent that uses their tools.
    pub fn new(servers: McpServers) -> Self {
        Self { servers }
    }

    fn tell(&self, events: &EventSink) {
        for text in self.servers.take_notices() {
            events.emit(AgentEvent::Warning { text });
        }
    }
}

impl AgentHook for McpHook {
    fn user_prompt_submit<'a>(
        &'a self,
        _prompt: &'a str,
        cancel: &'a CancellationToken,
        events: &'a EventSink,
    ) -> BoxFuture<'a, PromptDecision> {
        Box::pin(async move {
            tokio::select! {
                () = self.servers.wait_started() => {}
                () = cancel.cancelled() => {}
            }
            self.tell(events);
            PromptDecision::default()
        })
    }

    fn post_tool_use<'a>(
        &'a self,
        _call: ToolCallInfo<'a>,
        _output: &'a mut ToolOutput,
        events: &'a EventSink,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move { self.tell(events) })
    }
}
