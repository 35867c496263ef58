//! A server's tool in the registry: `mcp__<server>__<tool>`.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RoleClient;
use rmcp::{Peer, ServiceError};
use serde_json::Value;
use tokio::sync::watch;

use super::convert::{ToolListing, call_result, qualified_name};
use crate::tool::{Tool, ToolContext, ToolKind, ToolOutput};

/// What the tools of one connected server share.
pub struct ServerLink {
    pub server: String,
    pub peer: Peer<RoleClient>,
    /// Why the server is gone, once it is.
    pub down: watch::Receiver<Option<String>>,
    pub tool_timeout: Duration,
}

impl ServerLink {
    /// `Some(message)` when the server is gone: what a call returns.
    pub fn unavailable(&self) -> Option<String> {
        self.down.borrow().as_ref().map(|why| {
            format!(
                "MCP server `{}` {why}; its tools are unavailable until the user restarts it \
                 (`/mcp restart {}`)",
                self.server, self.server
            )
        })
    }
}

/// The current connection of one server, shared by all its tools in every registry
/// (a sub-agent's copy included): a restart puts the new connection here, so the
/// tools registered before keep working.
#[derive(Clone)]
pub struct LinkSlot(Arc<std::sync::RwLock<Arc<ServerLink>>>);

impl LinkSlot {
    pub fn new(link: Arc<ServerLink>) -> Self {
        Self(Arc::new(std::sync::RwLock::new(link)))
    }

    /// The connection now.
    pub fn current(&self) -> Arc<ServerLink> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Puts a new connection in place of the old one.
    pub fn replace(&self, link: Arc<ServerLink>) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = link;
    }
}

/// What went wrong with a request, for the model: the server's own error message,
/// or the innermost cause of a transport failure (not the SDK's type names).
pub fn describe_error(server: &str, error: &ServiceError) -> String {
    match error {
        ServiceError::McpError(data) => {
            format!(
                "MCP server `{server}` answered with an error: {}",
                data.message
            )
        }
        ServiceError::TransportClosed => {
            format!("the connection to MCP server `{server}` is closed")
        }
        other => {
            let mut cause: &dyn std::error::Error = other;
            while let Some(source) = cause.source() {
                cause = source;
            }
            format!("the request to MCP server `{server}` failed: {cause}")
        }
    }
}

/// One tool of an MCP server.
pub struct McpTool {
    name: String,
    server: String,
    listing: ToolListing,
    slot: LinkSlot,
}

impl McpTool {
    pub fn new(listing: ToolListing, slot: LinkSlot) -> Self {
        let server = slot.current().server.clone();
        Self {
            name: qualified_name(&server, &listing.name),
            server,
            listing,
            slot,
        }
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        let mut text = format!("[MCP server {}] {}", self.server, self.listing.description);
        if self.listing.read_only_hint {
            // The server's claim; permissions do not rely on it.
            text.push_str(" (The server says this tool only reads.)");
        }
        text
    }

    fn input_schema(&self) -> Value {
        self.listing.input_schema.clone()
    }

    /// Whatever a server does is outside the agent: asked for in the default mode
    /// unless a rule (`mcp__server__*`) allows it. A `readOnlyHint` does not change it.
    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    fn summarize(&self, input: &Value) -> String {
        let args = serde_json::to_string(input).unwrap_or_default();
        format!("{}({})", self.name, roo_term::clip(&args, 80))
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let link = self.slot.current();
            if let Some(message) = link.unavailable() {
                return ToolOutput::error(message);
            }
            let Value::Object(arguments) = input else {
                return ToolOutput::error(format!(
                    "The input of {} must be a JSON object; this call was not run.",
                    self.name
                ));
            };
            let params =
                CallToolRequestParams::new(self.listing.name.clone()).with_arguments(arguments);
            let timeout = link.tool_timeout;
            // Dropping the request (timeout, cancel) sends `notifications/cancelled`.
            tokio::select! {
                result = link.peer.call_tool(params) => match result {
                    Ok(result) => match serde_json::to_value(&result) {
                        Ok(value) => call_result(&value),
                        Err(e) => ToolOutput::error(format!("failed to read the result of {}: {e}", self.name)),
                    },
                    Err(e) => {
                        // A dead server shows as a closed transport; say how it ended.
                        let mut down = link.down.clone();
                        let _ = tokio::time::timeout(
                            Duration::from_secs(2),
                            down.wait_for(Option::is_some),
                        )
                        .await;
                        link.unavailable().map_or_else(
                            || ToolOutput::error(format!(
                                "failed to call {}: {}",
                                self.name,
                                describe_error(&link.server, &e)
                            )),
                            ToolOutput::error,
                        )
                    }
                },
                () = tokio::time::sleep(timeout) => ToolOutput::error(format!(
                    "{} did not answer within {} s (mcp_tool_timeout_secs); the call was \
                     cancelled and the server told so",
                    self.name,
                    timeout.as_secs()
                )),
                () = ctx.cancel.cancelled() => ToolOutput::error(
                    "Interrupted by the user; the MCP server was told to cancel the call.",
                ),
            }
        })
    }
}
