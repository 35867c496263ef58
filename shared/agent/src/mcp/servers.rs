//! The MCP servers of one process: started together, shared by its agents.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use rmcp::model::GetPromptRequestParams;
use serde_json::Value;
use tokio::sync::watch;

use super::connection::{Connection, McpLaunch, Starting};
use super::convert::{
    MAX_TOOLS_PER_SERVER, PromptListing, ToolListing, prompt_arguments, prompt_listing,
    prompt_text, qualified_name, tool_listing,
};
use super::settings::McpSettings;
use super::tool::{LinkSlot, McpTool, ServerLink};
use crate::config::{McpServerConfig, McpTransport};
use crate::tool::{Lookup, Tool, ToolRegistry, WeakToolRegistry};
use crate::tools::ToolSearch;

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStatus {
    Starting,
    Connected,
    /// Could not start; says why.
    Failed(String),
    /// Was connected and is gone; says how.
    Exited(String),
    /// Shut down by the agent.
    Stopped,
}

/// One server as `/mcp` shows it.
#[derive(Debug, Clone)]
pub struct ServerState {
    pub name: String,
    /// `stdio: <command>` or `http: <url>`.
    pub transport: String,
    pub status: ServerStatus,
    pub tools: usize,
    pub prompts: usize,
}

/// A server's prompt as a slash command.
#[derive(Debug, Clone)]
pub struct PromptCommand {
    /// `mcp__<server>__<prompt>`, typed after `/`.
    pub command: String,
    pub description: String,
    /// `NAME [ARG]...`-style argument summary.
    pub usage: String,
}

/// Starts, lists and stops the MCP servers of one process. Cheap to clone.
#[derive(Clone)]
pub struct McpServers {
    inner: Arc<Inner>,
}

struct Inner {
    settings: McpSettings,
    /// How servers are started (again, on a restart).
    launch: McpLaunch,
    state: Mutex<State>,
    /// True once start-up is over (every server answered or the startup timeout
    /// passed): tools are then in the registries.
    settled: watch::Sender<bool>,
    /// Bumped whenever a server stops starting (connected or failed).
    answered: watch::Sender<u64>,
}

#[derive(Default)]
struct State {
    servers: BTreeMap<String, Server>,
    registries: Vec<WeakToolRegistry>,
    /// Things to tell the user, taken once by whichever agent's hook runs first.
    notices: Vec<String>,
    /// Decided when start-up settles: whether MCP tools are registered deferred.
    deferring: Option<bool>,
    /// Start-up is over: a server that connects now registers its own tools. Set under
    /// the lock before the settling publish, so no server falls between the two.
    publishing: bool,
    stopping: bool,
}

struct Server {
    transport: String,
    /// Its configuration, to start it again.
    config: McpTransport,
    status: ServerStatus,
    /// Its current connection, shared by its tools; replaced by a restart.
    link: Option<LinkSlot>,
    tools: Vec<ToolListing>,
    prompts: Vec<PromptListing>,
    starting: Option<Starting>,
    connection: Option<Connection>,
}

impl McpServers {
    /// Starts every server of `configs` concurrently and returns at once. Call on
    /// the thread that lives as long as the agent (see [`crate::exec::sandbox`]).
    pub fn start(
        configs: &BTreeMap<String, McpServerConfig>,
        settings: McpSettings,
        launch: McpLaunch,
    ) -> Self {
        let (settled, _) = watch::channel(configs.is_empty());
        let servers = McpServers {
            inner: Arc::new(Inner {
                settings,
                launch: launch.clone(),
                state: Mutex::default(),
                settled,
                answered: watch::channel(0).0,
            }),
        };
        let started = Instant::now();
        {
            let mut state = servers.lock();
            for (name, config) in configs {
                let transport = match &config.transport {
                    McpTransport::Stdio { command, .. } => format!("stdio: {command}"),
                    McpTransport::Http { url, .. } => format!("http: {url}"),
                };
                state.servers.insert(
                    name.clone(),
                    Server {
                        transport,
                        config: config.transport.clone(),
                        status: ServerStatus::Starting,
                        link: None,
                        tools: Vec::new(),
                        prompts: Vec::new(),
                        starting: None,
                        connection: None,
                    },
                );
            }
        }
        for (name, config) in configs {
            let this = servers.clone();
            let (name, transport, launch) =
                (name.clone(), config.transport.clone(), launch.clone());
            tokio::spawn(async move { this.run_server(name, transport, launch).await });
        }
        if !configs.is_empty() {
            let this = servers.clone();
            tokio::spawn(async move { this.settle_after_startup(started).await });
            started_sets().push(servers.clone());
        }
        servers
    }

    /// Shuts down every set of servers this process started ([`McpServers::shutdown`]):
    /// what a binary calls on its way out, whichever agents used them.
    pub async fn shutdown_all() {
        let sets = std::mem::take(&mut *started_sets());
        futures_util::future::join_all(sets.iter().map(McpServers::shutdown)).await;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether any server is configured.
    pub fn is_empty(&self) -> bool {
        self.lock().servers.is_empty()
    }

    /// Starts server `name`, lists its tools and prompts, publishes them and then
    /// watches for it to go away; a failure on the way is its status.
    async fn run_server(self, name: String, transport: McpTransport, launch: McpLaunch) {
        let connection = match self.connect(&name, &transport, &launch).await {
            Ok(connection) => connection,
            Err(why) => return self.fail(&name, why).await,
        };
        let (tools, prompts) = match self.list(&name, &connection).await {
            Ok(listed) => listed,
            Err(why) => {
                connection.close().await;
                return self.fail(&name, why).await;
            }
        };
        let listings = Listings::of(&name, &tools, &prompts);
        let link = Arc::new(ServerLink {
            server: name.clone(),
            peer: connection.peer.clone(),
            down: connection.down.clone(),
            tool_timeout: self.inner.settings.tool_timeout,
        });
        let down = connection.down.clone();
        let (stopping, publish) = self.connected(&name, connection, &link, listings);
        if stopping {
            self.stop_one(&name).await;
            return;
        }
        if publish {
            self.publish();
        }
        tracing::info!("MCP server `{name}` connected");
        self.watch(&name, down, &link).await;
    }

    /// Opens the connection to server `name` within the connect timeout; while it
    /// starts, what is needed to stop it is in its entry.
    async fn connect(
        &self,
        name: &str,
        transport: &McpTransport,
        launch: &McpLaunch,
    ) -> Result<Connection, String> {
        let opened = tokio::time::timeout(
            self.inner.settings.connect_timeout,
            Connection::open(name, transport, launch, |starting| {
                if let Some(server) = self.lock().servers.get_mut(name) {
                    server.starting = Some(Starting {
                        down: starting.down.clone(),
                        group: starting.group,
                        stderr: starting.stderr.clone(),
                    });
                }
            }),
        )
        .await;
        match opened {
            Ok(result) => result,
            Err(_) => Err(format!(
                "did not finish starting within {} s{}",
                self.inner.settings.connect_timeout.as_secs(),
                self.lock()
                    .servers
                    .get(name)
                    .and_then(|s| s.starting.as_ref())
                    .map(|s| s.stderr.suffix())
                    .unwrap_or_default()
            )),
        }
    }

    /// The tools and prompts server `name` declared, within the connect timeout. A
    /// broken prompt list costs the prompts, not the tools.
    async fn list(
        &self,
        name: &str,
        connection: &Connection,
    ) -> Result<(Vec<rmcp::model::Tool>, Vec<rmcp::model::Prompt>), String> {
        let listed = tokio::time::timeout(self.inner.settings.connect_timeout, async {
            // Only what the server declared: one without tools or prompts may answer
            // those requests with an error.
            let (has_tools, has_prompts) = connection
                .peer
                .peer_info()
                .map(|info| {
                    (
                        info.capabilities.tools.is_some(),
                        info.capabilities.prompts.is_some(),
                    )
                })
                .unwrap_or((true, false));
            let tools = if has_tools {
                connection.peer.list_all_tools().await
            } else {
                Ok(Vec::new())
            };
            let prompts = if has_prompts {
                connection.peer.list_all_prompts().await.unwrap_or_default()
            } else {
                Vec::new()
            };
            (tools, prompts)
        })
        .await;
        match listed {
            Ok((Ok(tools), prompts)) => Ok((tools, prompts)),
            Ok((Err(e), _)) => Err(format!(
                "failed to list its tools: {}",
                super::tool::describe_error(name, &e)
            )),
            Err(_) => Err("did not list its tools in time".to_string()),
        }
    }

    /// Marks server `name` connected with its `listings` and `link` (a restart's
    /// registered tools switch to the new link) and keeps its notices. Returns
    /// whether the servers are stopping and whether tools are being published.
    fn connected(
        &self,
        name: &str,
        connection: Connection,
        link: &Arc<ServerLink>,
        listings: Listings,
    ) -> (bool, bool) {
        let mut state = self.lock();
        for warning in listings.warnings {
            let text = format!("MCP server `{name}`: skipped {warning}");
            tracing::warn!("{text}");
            state.notices.push(text);
        }
        if let Some(server) = state.servers.get_mut(name) {
            server.status = ServerStatus::Connected;
            self.inner.answered.send_modify(|n| *n += 1);
            match &server.link {
                // A restart: the tools registered before use the new connection.
                Some(slot) => slot.replace(link.clone()),
                None => server.link = Some(LinkSlot::new(link.clone())),
            }
            server.tools = listings.tools;
            server.prompts = listings.prompts;
            server.starting = None;
            server.connection = Some(connection);
        }
        (state.stopping, state.publishing)
    }

    /// Waits for server `name` to go away and then marks it exited with a notice,
    /// unless the servers are stopping or `link` was closed or replaced by a restart.
    async fn watch(
        &self,
        name: &str,
        mut down: watch::Receiver<Option<String>>,
        link: &Arc<ServerLink>,
    ) {
        if down.wait_for(Option::is_some).await.is_err() {
            return;
        }
        let why = down.borrow().clone().unwrap_or_default();
        let mut state = self.lock();
        if state.stopping {
            return;
        }
        let Some(server) = state.servers.get_mut(name) else {
            return;
        };
        // A connection closed or replaced by a restart ends quietly.
        let current = server
            .link
            .as_ref()
            .is_some_and(|slot| Arc::ptr_eq(&slot.current(), link));
        if server.status != ServerStatus::Connected || !current {
            return;
        }
        server.status = ServerStatus::Exited(why.clone());
        let text = format!("MCP server `{name}` {why}; its tools are unavailable");
        tracing::warn!("{text}");
        state.notices.push(text);
    }

    async fn fail(&self, name: &str, why: String) {
        let starting = {
            let mut state = self.lock();
            let Some(server) = state.servers.get_mut(name) else {
                return;
            };
            server.status = ServerStatus::Failed(why.clone());
            self.inner.answered.send_modify(|n| *n += 1);
            let starting = server.starting.take();
            let text = format!("MCP server `{name}` failed to start: {why}");
            tracing::warn!("{text}");
            state.notices.push(text);
            starting
        };
        if let Some(starting) = starting {
            starting.abandon().await;
        }
    }

    /// Waits until every server answered or the startup timeout passed, then
    /// decides on deferral and registers the tools.
    async fn settle_after_startup(self, started: Instant) {
        let deadline =
            tokio::time::Instant::from_std(started + self.inner.settings.startup_timeout);
        let mut answered = self.inner.answered.subscribe();
        loop {
            let pending = self
                .lock()
                .servers
                .values()
                .any(|s| s.status == ServerStatus::Starting);
            if !pending {
                break;
            }
            tokio::select! {
                changed = answered.changed() => if changed.is_err() { break },
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        {
            let mut state = self.lock();
            let slow: Vec<String> = state
                .servers
                .iter()
                .filter(|(_, s)| s.status == ServerStatus::Starting)
                .map(|(n, _)| format!("`{n}`"))
                .collect();
            if !slow.is_empty() {
                let text = format!(
                    "MCP server(s) {} still starting after {} s (mcp_startup_timeout_secs); \
                     their tools are added when they are ready",
                    slow.join(", "),
                    self.inner.settings.startup_timeout.as_secs()
                );
                tracing::warn!("{text}");
                state.notices.push(text);
            }
        }
        self.lock().publishing = true;
        self.publish();
        self.inner.settled.send_replace(true);
    }

    /// Registers connected servers' tools in every registry that lacks them.
    fn publish(&self) {
        let mut state = self.lock();
        let (count, bytes) = state
            .servers
            .values()
            .filter(|s| s.status == ServerStatus::Connected)
            .flat_map(|s| &s.tools)
            .fold((0, 0), |(n, b), t| {
                (
                    n + 1,
                    b + t.name.len() + t.description.len() + t.input_schema.to_string().len(),
                )
            });
        let deferring = match state.deferring {
            Some(true) => true,
            _ => self.inner.settings.defers(count, bytes),
        };
        state.deferring = Some(deferring);
        let tools: Vec<Arc<dyn Tool>> = state
            .servers
            .values()
            .filter(|s| s.status == ServerStatus::Connected)
            .filter_map(|s| s.link.as_ref().map(|link| (s, link)))
            .flat_map(|(s, link)| {
                s.tools
                    .iter()
                    .map(|t| Arc::new(McpTool::new(t.clone(), link.clone())) as Arc<dyn Tool>)
            })
            .collect();
        state.registries.retain(|weak| weak.upgrade().is_some());
        for registry in state
            .registries
            .iter()
            .filter_map(WeakToolRegistry::upgrade)
        {
            install(&registry, &tools, deferring);
        }
    }

    /// Adds this process's MCP tools to `registry`, now and whenever a server
    /// connects later.
    pub fn attach(&self, registry: &ToolRegistry) {
        // Sub-agents' copies of the registry (and their copies, which inherit the
        // hook) get the tools of servers that connect later too.
        let servers = self.clone();
        registry.on_detach(move |copy| servers.attach_only(copy));
        self.attach_only(registry);
    }

    fn attach_only(&self, registry: &ToolRegistry) {
        let publishing = {
            let mut state = self.lock();
            state.registries.push(registry.downgrade());
            state.publishing
        };
        if publishing {
            self.publish();
        }
    }

    /// Waits until start-up is over (bounded by the startup timeout).
    pub async fn wait_started(&self) {
        let mut settled = self.inner.settled.subscribe();
        let _ = settled.wait_for(|s| *s).await;
    }

    /// Notices not yet shown to the user (each is handed out once).
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().notices)
    }

    /// Every configured server, for `/mcp`.
    pub fn states(&self) -> Vec<ServerState> {
        self.lock()
            .servers
            .iter()
            .map(|(name, s)| ServerState {
                name: name.clone(),
                transport: s.transport.clone(),
                status: s.status.clone(),
                tools: s.tools.len(),
                prompts: s.prompts.len(),
            })
            .collect()
    }

    /// `/mcp`: one block per server.
    pub fn report(&self) -> String {
        let states = self.states();
        if states.is_empty() {
            return "No MCP servers are configured (mcp_servers: in a config file).\n".to_string();
        }
        let mut text = String::from("MCP servers:\n");
        let mut down = false;
        for s in states {
            let status = match &s.status {
                ServerStatus::Connected => {
                    format!("connected, {} tool(s), {} prompt(s)", s.tools, s.prompts)
                }
                other => status_text(other),
            };
            let _ = writeln!(text, "  {} ({}): {status}", s.name, s.transport);
            down |= matches!(s.status, ServerStatus::Failed(_) | ServerStatus::Exited(_));
        }
        if down {
            text.push_str("Start one again with /mcp restart <server>.\n");
        }
        text
    }

    /// The prompts of connected servers as slash commands.
    pub fn prompt_commands(&self) -> Vec<PromptCommand> {
        let state = self.lock();
        let mut commands = Vec::new();
        for (server_name, server) in &state.servers {
            if server.status != ServerStatus::Connected {
                continue;
            }
            for prompt in &server.prompts {
                let usage = prompt
                    .arguments
                    .iter()
                    .map(|a| {
                        if a.required {
                            a.name.clone()
                        } else {
                            format!("[{}]", a.name)
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                commands.push(PromptCommand {
                    command: qualified_name(server_name, &prompt.name),
                    description: prompt.description.clone(),
                    usage,
                });
            }
        }
        commands
    }

    /// `/mcp__<server>__<prompt> args`: the prompt's messages as the user input.
    /// `None` when `command` names no prompt of a connected server.
    pub async fn prompt(&self, command: &str, arguments: &str) -> Option<Result<String, String>> {
        let (link, listing) = {
            let state = self.lock();
            state.servers.iter().find_map(|(server_name, server)| {
                let link = server.link.as_ref()?.current();
                server
                    .prompts
                    .iter()
                    .find(|p| qualified_name(server_name, &p.name) == command)
                    .map(|p| (link, p.clone()))
            })?
        };
        if let Some(message) = link.unavailable() {
            return Some(Err(message));
        }
        let args = match prompt_arguments(&listing, arguments) {
            Ok(args) => args,
            Err(why) => return Some(Err(format!("/{command}: {why}"))),
        };
        let mut params = GetPromptRequestParams::new(listing.name.clone());
        if !args.is_empty() {
            params = params.with_arguments(args);
        }
        let result = tokio::time::timeout(
            self.inner.settings.tool_timeout,
            link.peer.get_prompt(params),
        )
        .await;
        Some(match result {
            Ok(Ok(result)) => match serde_json::to_value(&result) {
                Ok(value) => Ok(prompt_text(&value)),
                Err(e) => Err(format!("failed to read prompt {command}: {e}")),
            },
            Ok(Err(e)) => Err(link.unavailable().unwrap_or_else(|| {
                format!(
                    "failed to get prompt {command}: {}",
                    super::tool::describe_error(&link.server, &e)
                )
            })),
            Err(_) => Err(format!(
                "failed to get prompt {command}: the server did not answer in time"
            )),
        })
    }

    /// Starts server `name` again (`/mcp restart`): its old connection is closed and
    /// its process ended, a new one is started, and its tools — in every registry
    /// that has them, sub-agents' copies included — use the new connection. Waits for
    /// the outcome (bounded by the start-up limits); the `Ok` text says what it
    /// offers, the `Err` why it failed.
    pub async fn restart(&self, name: &str) -> Result<String, String> {
        let (old, abandoned, config, answered) = {
            let mut state = self.lock();
            if state.stopping {
                return Err("the MCP servers are shutting down".to_string());
            }
            let known = state.servers.keys().cloned().collect::<Vec<_>>().join(", ");
            let Some(server) = state.servers.get_mut(name) else {
                return Err(format!(
                    "there is no MCP server `{name}`; configured: {}",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known
                    }
                ));
            };
            if server.status == ServerStatus::Starting {
                return Err(format!("MCP server `{name}` is still starting"));
            }
            server.status = ServerStatus::Starting;
            let answered = self.inner.answered.subscribe();
            (
                server.connection.take(),
                server.starting.take(),
                server.config.clone(),
                answered,
            )
        };
        if let Some(connection) = old {
            connection.close().await;
        }
        if let Some(starting) = abandoned {
            starting.abandon().await;
        }
        let mut answered = answered;
        answered.mark_unchanged();
        let this = self.clone();
        let (owned, launch) = (name.to_string(), self.inner.launch.clone());
        tokio::spawn(async move { this.run_server(owned, config, launch).await });
        let settings = &self.inner.settings;
        let limit = settings.connect_timeout.saturating_mul(2);
        let _ = tokio::time::timeout(limit, async {
            loop {
                if self
                    .lock()
                    .servers
                    .get(name)
                    .is_some_and(|s| s.status != ServerStatus::Starting)
                {
                    break;
                }
                if answered.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        if self.lock().publishing {
            self.publish();
        }
        let state = self.lock();
        let Some(server) = state.servers.get(name) else {
            return Err(format!("MCP server `{name}` is gone"));
        };
        match &server.status {
            ServerStatus::Connected => Ok(format!(
                "MCP server `{name}` restarted: {} tool(s), {} prompt(s)",
                server.tools.len(),
                server.prompts.len()
            )),
            ServerStatus::Starting => Err(format!(
                "MCP server `{name}` did not answer within {} s; it keeps starting",
                limit.as_secs()
            )),
            other => Err(format!("MCP server `{name}` {}", status_text(other))),
        }
    }

    /// Closes every connection and ends every server process (stdin closed first,
    /// then the process group after a grace period). Servers still starting are
    /// ended too.
    pub async fn shutdown(&self) {
        let (connections, starting) = {
            let mut state = self.lock();
            state.stopping = true;
            let mut connections = Vec::new();
            let mut starting = Vec::new();
            for server in state.servers.values_mut() {
                if let Some(c) = server.connection.take() {
                    connections.push(c);
                }
                if let Some(s) = server.starting.take() {
                    starting.push(s);
                }
                if matches!(
                    server.status,
                    ServerStatus::Connected | ServerStatus::Starting
                ) {
                    server.status = ServerStatus::Stopped;
                }
            }
            (connections, starting)
        };
        let closing = connections.into_iter().map(Connection::close);
        let abandoning = starting.iter().map(Starting::abandon);
        futures_util::future::join(
            futures_util::future::join_all(closing),
            futures_util::future::join_all(abandoning),
        )
        .await;
    }

    async fn stop_one(&self, name: &str) {
        let connection = self
            .lock()
            .servers
            .get_mut(name)
            .and_then(|s| s.connection.take());
        if let Some(connection) = connection {
            connection.close().await;
        }
    }
}

/// A status as `/mcp` and a failed restart say it.
fn status_text(status: &ServerStatus) -> String {
    match status {
        ServerStatus::Starting => "starting".to_string(),
        ServerStatus::Connected => "connected".to_string(),
        ServerStatus::Failed(why) => format!("failed: {why}"),
        ServerStatus::Exited(why) => why.clone(),
        ServerStatus::Stopped => "stopped".to_string(),
    }
}

/// The sets [`McpServers::start`] started in this process, for [`McpServers::shutdown_all`].
fn started_sets() -> MutexGuard<'static, Vec<McpServers>> {
    static SETS: Mutex<Vec<McpServers>> = Mutex::new(Vec::new());
    SETS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Registers `tools` that `registry` does not have yet, deferred or not, and
/// ToolSearch once anything is deferred.
fn install(registry: &ToolRegistry, tools: &[Arc<dyn Tool>], deferring: bool) {
    let mut added = false;
    for tool in tools {
        if matches!(registry.lookup(tool.name()), Lookup::Unknown) {
            if deferring {
                registry.register_deferred(tool.clone());
                added = true;
            } else {
                registry.register(tool.clone());
            }
        }
    }
    if added && matches!(registry.lookup(ToolSearch::NAME), Lookup::Unknown) {
        registry.register(Arc::new(ToolSearch::new(registry.downgrade())));
    }
}
/// What a server's tool and prompt lists came to: the entries kept and why others
/// were skipped (bad schemas, duplicates, more than [`MAX_TOOLS_PER_SERVER`]).
struct Listings {
    tools: Vec<ToolListing>,
    prompts: Vec<PromptListing>,
    warnings: Vec<String>,
}

impl Listings {
    fn of(name: &str, tools: &[rmcp::model::Tool], prompts: &[rmcp::model::Prompt]) -> Self {
        let mut warnings = Vec::new();
        let mut listings = Vec::new();
        for tool in tools {
            let value = serde_json::to_value(tool).unwrap_or(Value::Null);
            if listings.len() == MAX_TOOLS_PER_SERVER {
                warnings.push(format!(
                    "more than {MAX_TOOLS_PER_SERVER} tools; the rest are skipped"
                ));
                break;
            }
            match tool_listing(name, &value) {
                Ok(listing)
                    if !listings
                        .iter()
                        .any(|l: &ToolListing| l.name == listing.name) =>
                {
                    listings.push(listing)
                }
                Ok(listing) => warnings.push(format!("tool {} is listed twice", listing.name)),
                Err(why) => warnings.push(why),
            }
        }
        let mut prompt_listings = Vec::new();
        for prompt in prompts {
            let value = serde_json::to_value(prompt).unwrap_or(Value::Null);
            match prompt_listing(name, &value) {
                Ok(listing) => prompt_listings.push(listing),
                Err(why) => warnings.push(why),
            }
        }
        Self {
            tools: listings,
            prompts: prompt_listings,
            warnings,
        }
    }
}
