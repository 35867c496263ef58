//! MCP servers: their tools in the agent's registry, their prompts as commands.
//!
//! Servers come from `mcp_servers:` in the config files (an untrusted project's
//! are never started). [`McpServers`] starts every server of a process at once
//! and concurrently, when the first agent is built; in-process teammates and
//! sub-agents reuse its connections. Start-up does not block: the first prompt
//! waits for servers still starting up to `mcp_startup_timeout_secs`
//! ([`McpHook`]); a server ready later adds its tools then. A server that fails,
//! hangs or dies is reported and the session goes on.
//!
//! Tools are `mcp__<server>__<tool>` in the same [`crate::tool::ToolRegistry`],
//! so permission rules and tool scopes apply. When they are many they are
//! registered deferred and found through [`crate::tools::ToolSearch`].

mod connection;
pub mod convert;
mod hook;
mod servers;
mod settings;
mod tool;

pub use connection::McpLaunch;
pub use hook::McpHook;
pub use servers::McpServers;
pub use settings::McpSettings;
