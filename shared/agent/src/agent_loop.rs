//! The agent loop: call the model, run the tools it asks for, feed the results back,
//! repeat until it answers without tools.
//!
//! The loop makes no decisions of its own (the model decides, the system executes): it
//! runs calls faithfully, in concurrency-safe batches, behind the permission policy,
//! and stops on end-turn, max turns, cancel, or repeated unknown tools or malformed
//! calls. Everything it does is reported as [`AgentEvent`]s; it never knows which UI
//! listens.
//!
//! A misbehaving model never ends the run by itself: a call whose arguments are not a
//! JSON object (broken, or cut off at `max_tokens`) gets an error result the model can
//! correct, and a call written as text can be run as a call
//! ([`crate::text_tool_call`]).
//!
//! This file holds the agent and its turn loop, each turn a few named steps (begin,
//! stop before the turn, call the model, take its answer, run its calls). Beside it:
//! `tool_calls` runs the calls of one response (batches, hooks, permission, spill),
//! `compaction` keeps the conversation inside the window, `server_window` asks a
//! local model server for its window, and `tool_order` keeps the request's tool list
//! stable for the prompt cache. Hooks ([`crate::hooks::AgentHook`]) are asked at each
//! point of a run.

mod checkpoint;
mod compaction;
mod server_window;
mod tool_calls;

use tool_calls::Call;
mod tool_order;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::FutureExt;
use roo_llm::{ContentBlock, Message, Provider, Request, Role, StopReason, StreamEvent, Usage};
use tokio::sync::Mutex as AsyncMutex;
use tokio_util::sync::CancellationToken;

pub use checkpoint::{RewindOutcome, RewindScope};

use crate::checkpoints::Checkpoints;
use crate::context::CompactionOptions;
use crate::conversation::{push_user, repair_chain};
use crate::event::{AgentEvent, EventSink, RunOutcome};
use crate::hooks::{AgentHook, TurnAction};
use crate::permissions::{Approver, PermissionPolicy};
use crate::prompt::{plan_mode_reminder, system_reminder};
use crate::session::Session;
use crate::text_tool_call::parse_text_tool_call;
use crate::tool::{ConversationSnapshot, ToolContext, ToolRegistry};
use tool_order::ToolOrder;

/// The permission policy, shared with tools that change the mode (plan mode) and
/// with the UI (`/mode`).
pub type SharedPolicy = Arc<RwLock<PermissionPolicy>>;

/// Tunables of one agent.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// Name sent with requests (the scripted provider keys replies on it). Whoever
    /// builds the agent sets its own name; the default is a neutral `agent`.
    pub agent_name: String,
    /// Model override; empty = the provider's model.
    pub model: String,
    /// Model calls per run before stopping.
    pub max_turns: u32,
    /// Output budget per response.
    pub max_tokens: u32,
    /// Concurrency-safe calls run at most this many at a time.
    pub tool_concurrency: usize,
    /// Consecutive turns whose calls all name unknown tools before stopping.
    pub unknown_tool_limit: u32,
    /// Consecutive turns whose calls all have unusable arguments (not a JSON object,
    /// e.g. cut off at `max_tokens`) before stopping.
    pub malformed_call_limit: u32,
    /// Run a tool call the model wrote as text (the whole text of a turn without
    /// structured calls is one `{"name", "arguments"}` object naming a registered
    /// tool) as a call. See `LlmSettings::text_tool_calls_enabled`.
    pub text_tool_calls: bool,
    /// How and when the conversation is compacted to fit the context window.
    pub compaction: CompactionOptions,
    /// Prices for the cost figures in usage events (built-in plus config overrides).
    pub prices: roo_llm::PriceTable,
    /// The tool list sent with every request instead of the registry's: a fork keeps
    /// its parent's list byte for byte (the prompt cache hits); tools registered or
    /// revealed later are appended after it (see [`ToolOrder`]). Calls are still
    /// checked against the registry when they execute.
    pub pinned_tools: Option<Vec<roo_llm::ToolSpec>>,
    /// Before the first model request, ask a local model server for its context window
    /// and warn when the request does not fit (see `server_window`). The lead sets it;
    /// its sub-agents and teammates use the same server and leave it off, so the user
    /// is told once.
    pub check_server_window: bool,
    /// Where the files the agent changes are checkpointed before each file-changing call
    /// (`None`: not at all). Sub-agents share their parent's.
    pub checkpoints: Option<Arc<Checkpoints>>,
    /// Whether each run's input opens a checkpoint (the agent the person or lead
    /// prompts); a sub-agent's calls count toward its parent's prompt instead.
    pub checkpoint_prompts: bool,
    /// Asked before every model request and told after every response (spending
    /// caps); shared with sub-agents, whose spend counts toward this agent's.
    pub spend_gate: Option<crate::hooks::SharedSpendGate>,
}

impl Default for AgentOptions {
    fn default() -> Self {
        Self {
            agent_name: "agent".to_string(),
            model: String::new(),
            max_turns: 50,
            max_tokens: 16_384,
            tool_concurrency: 8,
            unknown_tool_limit: 3,
            malformed_call_limit: 3,
            text_tool_calls: false,
            compaction: CompactionOptions::default(),
            prices: roo_llm::PriceTable::default(),
            pinned_tools: None,
            check_server_window: false,
            checkpoints: None,
            checkpoint_prompts: true,
            spend_gate: None,
        }
    }
}

/// What a run returns (also sent as [`AgentEvent::Done`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// How the run ended.
    pub outcome: RunOutcome,
    /// Text of the last assistant message.
    pub final_text: String,
    /// Model requests made in this run.
    pub turns: u32,
    /// Usage of this run alone.
    pub usage: Usage,
}

/// One agent: its conversation, tools, policy and session.
pub struct Agent {
    provider: Arc<dyn Provider>,
    tools: ToolRegistry,
    policy: SharedPolicy,
    approver: Arc<dyn Approver>,
    /// Serializes questions to the human when a concurrent batch asks twice.
    ask_lock: AsyncMutex<()>,
    system: Vec<String>,
    messages: Vec<Message>,
    /// Reminders to put in front of the next user input (resume notes).
    pending_reminders: Vec<String>,
    /// ROOCODE.md instructions: sent with the first input and again after compaction.
    instructions: Option<String>,
    /// Text of the newest assistant message of the current run.
    answer: String,
    session: Option<Session>,
    context: ToolContext,
    options: AgentOptions,
    /// The hooks, in the order they were added: asked at session start, on each
    /// prompt, at the top of every turn, around tool calls and compactions, at the end.
    hooks: Vec<Arc<dyn AgentHook>>,
    /// Whether the first run began (`session_start` fired).
    started: bool,
    total_usage: Usage,
    /// (messages covered, prompt+output tokens) from the last response's usage.
    measured: Option<(usize, u64)>,
    plan_file: std::path::PathBuf,
    /// Reminders turn hooks handed over that no successful model call carried yet: sent
    /// with every call, added to the conversation once one succeeds.
    injection: Vec<ContentBlock>,
    /// The hooks whose texts are in `injection`, told by `injected()` on success.
    injecting: Vec<Arc<dyn AgentHook>>,
    /// The order the last request sent its tools in, which the next one keeps.
    tool_order: ToolOrder,
    /// Whether the model server's context window was checked (once per agent).
    server_window_checked: bool,
    /// The window the local model server reported, in the server's tokens: compaction
    /// keeps the prompt inside it too.
    server_window: Option<u64>,
}

/// A pending injection set aside while the request that the provider refused with it
/// is tried without it.
struct SetAside {
    blocks: Vec<ContentBlock>,
    hooks: Vec<Arc<dyn AgentHook>>,
    /// The provider's error.
    reason: String,
}

/// How one model call came out.
enum ModelReply {
    /// The model answered; `sent_tools` is the tool list the request carried.
    Answer {
        response: roo_llm::Response,
        sent_tools: Vec<roo_llm::ToolSpec>,
    },
    /// The provider refused the request carrying the pending injection: the same
    /// request goes again without it.
    Retry,
    /// The run ends.
    End(RunOutcome),
}

/// The tool calls of one answer, and by call id the error result of each call whose
/// arguments were unusable.
struct TurnCalls {
    calls: Vec<Call>,
    invalid: HashMap<String, String>,
}

/// Consecutive turns whose calls all went nowhere, which end a run at their limits.
#[derive(Default)]
struct Streaks {
    /// Turns whose calls all named unknown tools.
    unknown: u32,
    /// Turns whose calls all had unusable arguments.
    malformed: u32,
}

impl Streaks {
    /// Counts a turn whose calls named `unknown` tools the registry lacks; the outcome
    /// when a streak reached its limit.
    fn after_turn(
        &mut self,
        unknown: Vec<String>,
        all_unknown: bool,
        all_malformed: bool,
        options: &AgentOptions,
    ) -> Option<RunOutcome> {
        if all_unknown {
            self.unknown += 1;
            if self.unknown >= options.unknown_tool_limit {
                return Some(RunOutcome::UnknownTools { names: unknown });
            }
        } else {
            self.unknown = 0;
        }
        if all_malformed {
            self.malformed += 1;
            if self.malformed >= options.malformed_call_limit {
                return Some(RunOutcome::MalformedToolCalls {
                    turns: self.malformed,
                });
            }
        } else {
            self.malformed = 0;
        }
        None
    }
}

impl Agent {
    /// Builds an agent. `context.cancel` is replaced by each run's token.
    #[expect(
        clippy::too_many_arguments,
        reason = "one-time wiring of the agent's parts"
    )]
    pub fn new(
        provider: Arc<dyn Provider>,
        tools: ToolRegistry,
        policy: SharedPolicy,
        approver: Arc<dyn Approver>,
        system: Vec<String>,
        context: ToolContext,
        options: AgentOptions,
        plan_file: std::path::PathBuf,
    ) -> Self {
        Self {
            provider,
            tools,
            policy,
            approver,
            ask_lock: AsyncMutex::new(()),
            system,
            messages: Vec::new(),
            pending_reminders: Vec::new(),
            instructions: None,
            answer: String::new(),
            session: None,
            context,
            options,
            hooks: Vec::new(),
            started: false,
            total_usage: Usage::default(),
            measured: None,
            plan_file,
            injection: Vec::new(),
            injecting: Vec::new(),
            tool_order: ToolOrder::default(),
            server_window_checked: false,
            server_window: None,
        }
    }

    /// Attaches a transcript; `messages` is the history restored from it (empty for
    /// a new session).
    pub fn with_session(mut self, session: Session, messages: Vec<Message>) -> Self {
        self.session = Some(session);
        self.messages = messages;
        self
    }

    /// Starts from `messages` without a transcript (a sub-agent whose transcript
    /// could not be created).
    pub fn with_messages(mut self, messages: Vec<Message>) -> Self {
        self.messages = messages;
        self
    }

    /// Adds a hook: asked at session start, on each submitted prompt, at the top of
    /// every turn, around every tool call and compaction and when a run stops, after
    /// the hooks added before it.
    pub fn add_hook(&mut self, hook: Arc<dyn AgentHook>) {
        self.hooks.push(hook);
    }

    /// Sets the instruction-file text (ROOCODE.md stack), injected as a system
    /// reminder with the first input and after every compaction.
    pub fn set_instructions(&mut self, text: Option<String>) {
        self.instructions = text;
    }

    /// Queues a system reminder for the next user input.
    pub fn remind(&mut self, text: String) {
        self.pending_reminders.push(text);
    }

    /// The system prompt parts.
    pub fn system(&self) -> &[String] {
        &self.system
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Total usage of this agent since it was built.
    pub fn total_usage(&self) -> Usage {
        self.total_usage
    }

    /// Cost in USD of `usage` on this agent's model, if its price is known.
    pub fn cost(&self, usage: &Usage) -> Option<f64> {
        self.options.prices.cost(self.model(), usage)
    }

    /// The provider (for cost and model names).
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// The model requests use.
    pub fn model(&self) -> &str {
        if self.options.model.is_empty() {
            self.provider.model()
        } else {
            &self.options.model
        }
    }

    /// The shared permission policy.
    pub fn policy(&self) -> &SharedPolicy {
        &self.policy
    }

    /// The session transcript, if any.
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// The tools this agent has.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// What this agent's tool calls run with (working directory, the launcher of its
    /// command sandbox): for commands the runtime runs on the agent's behalf between
    /// runs, confined as its tools' are.
    pub fn tool_context(&self) -> &ToolContext {
        &self.context
    }

    /// Forgets the conversation (`/clear`); the transcript records it.
    pub fn clear(&mut self) -> Result<(), crate::session::SessionError> {
        self.messages.clear();
        self.measured = None;
        self.history_replaced();
        if let Some(session) = &mut self.session {
            session.replace("clear", &[])?;
        }
        Ok(())
    }

    /// Runs the loop for one user input until the model ends its turn or a stop
    /// condition hits. Never panics on model or tool failures: they end up in the
    /// outcome or in tool results.
    pub async fn run(
        &mut self,
        input: &str,
        events: &EventSink,
        cancel: CancellationToken,
    ) -> RunResult {
        let mut usage = Usage::default();
        let mut turns = 0;
        self.answer.clear();
        let outcome = self
            .run_inner(input, events, &cancel, &mut usage, &mut turns)
            .await;
        self.checkpoint_settle(events).await;
        if let Some(gate) = &self.options.spend_gate {
            gate.0.run_ended().await;
        }
        let final_text = std::mem::take(&mut self.answer);
        if outcome != RunOutcome::Cancelled {
            for hook in &self.hooks {
                hook.stop(&outcome, &final_text, &cancel, events).await;
            }
        }
        // Whatever happened, leave a history every provider accepts.
        if let Some(what) = repair_chain(&mut self.messages) {
            events.emit(AgentEvent::Notice {
                text: format!("repaired the history: {what}"),
            });
            self.persist_replace("repair", events);
        }
        let result = RunResult {
            outcome,
            final_text,
            turns,
            usage,
        };
        events.emit(AgentEvent::Done {
            outcome: result.outcome.clone(),
            final_text: result.final_text.clone(),
            turns: result.turns,
            usage: result.usage,
        });
        result
    }

    /// One run, step by step: the hooks' say on the prompt and the input appended, then
    /// turns — each a model call whose tool calls run and feed the next — until the
    /// model answers without calls or a stop condition hits.
    async fn run_inner(
        &mut self,
        input: &str,
        events: &EventSink,
        cancel: &CancellationToken,
        usage: &mut Usage,
        turns: &mut u32,
    ) -> RunOutcome {
        if let Err(outcome) = self.begin(input, events, cancel).await {
            return outcome;
        }
        let mut streaks = Streaks::default();
        // The injection set aside while the same request is tried without it.
        let mut probe: Option<SetAside> = None;
        loop {
            if let Some(outcome) = self.stop_before_turn(*turns, events, cancel).await {
                self.put_back(probe.take());
                return outcome;
            }
            *turns += 1;
            self.compact_if_needed(events, cancel, usage).await;

            events.emit(AgentEvent::TurnStart { turn: *turns });
            tracing::debug!(
                agent = %self.options.agent_name,
                turn = *turns,
                messages = self.messages.len(),
                estimated_tokens = self.estimated_prompt_tokens(),
                "model request"
            );
            let (response, sent_tools) = match self.call_model(&mut probe, events, cancel).await {
                ModelReply::Answer {
                    response,
                    sent_tools,
                } => (response, sent_tools),
                ModelReply::Retry => continue,
                ModelReply::End(outcome) => return outcome,
            };
            self.record_usage(&response, usage, events);
            if let Some(gate) = &self.options.spend_gate {
                let cost = self.options.prices.cost(self.model(), &response.usage);
                gate.0.spent(response.usage, cost).await;
            }
            let TurnCalls { calls, invalid } = self.take_answer(response, events);
            if calls.is_empty() {
                return RunOutcome::Completed;
            }

            let unknown: Vec<String> = calls
                .iter()
                .filter(|call| self.tools.get(&call.name).is_none())
                .map(|call| call.name.clone())
                .collect();
            let all_unknown = unknown.len() == calls.len();
            let all_malformed = calls.iter().all(|call| invalid.contains_key(&call.id));
            let snapshot = self.snapshot_for(&calls, sent_tools);
            let results = self
                .execute(calls, &invalid, snapshot, events, cancel)
                .await;
            self.append_user(results, events);

            if cancel.is_cancelled() {
                return RunOutcome::Cancelled;
            }
            if let Some(outcome) =
                streaks.after_turn(unknown, all_unknown, all_malformed, &self.options)
            {
                return outcome;
            }
        }
    }

    /// The start of a run: `session_start` hooks on the first run, then the
    /// `user_prompt_submit` hooks (which may refuse the prompt), then the input joins
    /// the conversation behind the instructions (first input only) and pending
    /// reminders. `Err`: the run ends before any model call, with this outcome.
    async fn begin(
        &mut self,
        input: &str,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<(), RunOutcome> {
        if !std::mem::replace(&mut self.started, true) {
            let resumed = !self.messages.is_empty();
            for hook in &self.hooks {
                let context = hook.session_start(resumed, cancel, events).await;
                self.pending_reminders.extend(context);
            }
        }
        for hook in &self.hooks {
            let decision = hook.user_prompt_submit(input, cancel, events).await;
            if let Some(reason) = decision.block {
                return Err(RunOutcome::Stopped { reason });
            }
            self.pending_reminders.extend(decision.context);
        }
        if cancel.is_cancelled() {
            return Err(RunOutcome::Cancelled);
        }
        self.checkpoint_prompt(input, events);
        let instructions = self
            .instructions
            .clone()
            .filter(|_| self.messages.is_empty());
        let mut blocks: Vec<ContentBlock> = instructions
            .into_iter()
            .chain(self.pending_reminders.drain(..))
            .map(|text| ContentBlock::Text {
                text: system_reminder(&text),
            })
            .collect();
        blocks.push(ContentBlock::Text {
            text: input.to_string(),
        });
        self.append_user(blocks, events);
        Ok(())
    }

    /// Whether the run ends before the next turn: cancelled, out of turns, or stopped
    /// by a hook (whose texts, and the other hooks', are injected either way).
    async fn stop_before_turn(
        &mut self,
        turns: u32,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Option<RunOutcome> {
        if cancel.is_cancelled() {
            return Some(RunOutcome::Cancelled);
        }
        if turns >= self.options.max_turns {
            events.emit(AgentEvent::Notice {
                text: format!(
                    "The agent ran {} turns without finishing and was stopped. Continue with a new message, or raise the limit with --max-turns.",
                    self.options.max_turns
                ),
            });
            return Some(RunOutcome::MaxTurns {
                limit: self.options.max_turns,
            });
        }
        let reason = self.run_turn_hooks(events).await?;
        Some(RunOutcome::Stopped { reason })
    }

    /// One model call (the server's window checked before the first): its response,
    /// a retry without the pending injection when the provider refused the request
    /// carrying it (`probe` then holds what was set aside), or the end of the run.
    async fn call_model(
        &mut self,
        probe: &mut Option<SetAside>,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> ModelReply {
        if let Some(outcome) = self.ask_spend_gate(events).await {
            self.put_back(probe.take());
            return ModelReply::End(outcome);
        }
        let request = self.request();
        if self.options.check_server_window
            && !std::mem::replace(&mut self.server_window_checked, true)
        {
            let provider = self.provider.clone();
            let check = server_window::warn_if_too_small(provider.as_ref(), &request, events);
            tokio::select! {
                window = check => self.server_window = window,
                _ = cancel.cancelled() => {
                    self.put_back(probe.take());
                    return ModelReply::End(RunOutcome::Cancelled);
                }
            }
        }
        self.tool_order = ToolOrder::of(&request.tools);
        let sent_tools = request.tools.clone();
        let call = roo_llm::collect(self.provider.stream(request), |event| {
            forward_stream_event(event, events)
        })
        .fuse();
        let response = tokio::select! {
            r = call => r,
            _ = cancel.cancelled() => {
                self.put_back(probe.take());
                return ModelReply::End(RunOutcome::Cancelled);
            }
        };
        match response {
            Ok(response) => {
                if let Some(aside) = probe.take() {
                    // Refused with the injection, accepted without: it was the cause.
                    for hook in aside.hooks {
                        hook.undeliverable(&aside.reason).await;
                    }
                }
                self.injection_delivered(events).await;
                ModelReply::Answer {
                    response,
                    sent_tools,
                }
            }
            Err(e) if e.is_rejection() && probe.is_none() && !self.injecting.is_empty() => {
                // Whether what the hooks handed over is what the provider refuses
                // (e.g. a teammate's message it will never accept) shows by trying
                // the same request without it; otherwise every later call would
                // carry it and fail the same way.
                *probe = Some(self.set_aside_injection(e.to_string()));
                ModelReply::Retry
            }
            Err(e) => {
                // Refused without the injection too: it was not the cause.
                self.put_back(probe.take());
                let message = e.to_string();
                tracing::warn!(agent = %self.options.agent_name, error = %message, "model call failed");
                events.emit(AgentEvent::Error {
                    message: message.clone(),
                });
                ModelReply::End(RunOutcome::Error { message })
            }
        }
    }

    /// Asks the spend gate whether the next request may start: `Some(outcome)` ends the
    /// run before it; a warning goes to the user and, with the request, to the model.
    async fn ask_spend_gate(&mut self, events: &EventSink) -> Option<RunOutcome> {
        let gate = self.options.spend_gate.clone()?;
        match gate.0.before_request().await {
            crate::hooks::SpendVerdict::Go => None,
            crate::hooks::SpendVerdict::Warn(text) => {
                events.emit(AgentEvent::Notice { text: text.clone() });
                self.injection.push(ContentBlock::Text {
                    text: system_reminder(&text),
                });
                None
            }
            crate::hooks::SpendVerdict::Stop(reason) => {
                events.emit(AgentEvent::Notice {
                    text: format!("budget: {reason}"),
                });
                Some(RunOutcome::OverBudget { reason })
            }
        }
    }

    /// Takes the pending injection out of the next request (the provider refused it
    /// with `reason`), leaving a notice in its place that some messages were lost.
    fn set_aside_injection(&mut self, reason: String) -> SetAside {
        tracing::warn!(agent = %self.options.agent_name, error = %reason, "model call carrying injected messages refused; trying without them");
        let blocks = std::mem::take(&mut self.injection);
        let notice = format!(
            "{} injected message(s) could not be delivered: the model provider refused the request carrying them ({reason}). Their senders were told.",
            blocks.len()
        );
        self.injection.push(ContentBlock::Text {
            text: system_reminder(&notice),
        });
        SetAside {
            blocks,
            hooks: std::mem::take(&mut self.injecting),
            reason,
        }
    }

    /// Adds a response's usage to the run's and the agent's, and says when the
    /// response hit the output limit.
    fn record_usage(
        &mut self,
        response: &roo_llm::Response,
        usage: &mut Usage,
        events: &EventSink,
    ) {
        usage.add(&response.usage);
        self.total_usage.add(&response.usage);
        events.emit(AgentEvent::Usage {
            turn: response.usage,
            total: self.total_usage,
            cost_usd: self.options.prices.cost(self.model(), &self.total_usage),
        });
        if response.stop_reason == StopReason::MaxTokens {
            events.emit(AgentEvent::Notice {
                text: format!(
                    "the response hit the output limit of {} tokens",
                    self.options.max_tokens
                ),
            });
        }
    }

    /// The model's answer joins the conversation (a call written as text adopted as a
    /// call when allowed); returns its tool calls.
    fn take_answer(&mut self, response: roo_llm::Response, events: &EventSink) -> TurnCalls {
        let mut message = response.message;
        if self.options.text_tool_calls
            && message.tool_uses().next().is_none()
            && let Some(name) = self.adopt_text_tool_call(&mut message)
        {
            events.emit(AgentEvent::Notice {
                text: format!("the model wrote a {name} call as text; running it as a call"),
            });
        }
        let last_call = message.tool_uses().last().map(|(id, _, _)| id.to_string());
        let cut_off = response.stop_reason == StopReason::MaxTokens;
        let invalid: HashMap<String, String> = response
            .invalid_tool_calls
            .into_iter()
            .map(|call| {
                events.emit(AgentEvent::Notice {
                    text: format!("the model's {} call was not run: {}", call.name, call.error),
                });
                let truncated = cut_off && last_call.as_deref() == Some(call.id.as_str());
                let text = invalid_call_result(&call.name, &call.error, truncated);
                (call.id, text)
            })
            .collect();
        let calls: Vec<Call> = message
            .tool_uses()
            .map(|(id, name, input)| Call {
                id: id.to_string(),
                name: name.to_string(),
                input: input.clone(),
            })
            .collect();
        if !message.content.is_empty() {
            events.emit(AgentEvent::AssistantMessage {
                message: message.clone(),
            });
            let text = message.text();
            if !text.trim().is_empty() {
                self.answer = text;
            }
            self.append(message, events);
        }
        self.measured = Some((
            self.messages.len(),
            response.usage.context_tokens() + response.usage.output_tokens,
        ));
        TurnCalls { calls, invalid }
    }

    /// What the model saw, for tools that start work from this context (a fork);
    /// `None` when no call needs it.
    fn snapshot_for(
        &self,
        calls: &[Call],
        sent_tools: Vec<roo_llm::ToolSpec>,
    ) -> Option<Arc<ConversationSnapshot>> {
        calls
            .iter()
            .any(|call| {
                self.tools
                    .get(&call.name)
                    .is_some_and(|t| t.needs_conversation())
            })
            .then(|| {
                Arc::new(ConversationSnapshot {
                    system: self.system.clone(),
                    tools: sent_tools,
                    messages: self.messages.clone(),
                })
            })
    }

    /// If the text of `message` (which has no tool calls) is one tool call written as
    /// text, replaces its text blocks by that call and returns the tool's name.
    /// Thinking blocks stay, so the message is what a structured call would have been.
    fn adopt_text_tool_call(&self, message: &mut Message) -> Option<String> {
        let (name, input) =
            parse_text_tool_call(&message.text(), |name| self.tools.get(name).is_some())?;
        let at = message
            .content
            .iter()
            .position(|b| matches!(b, ContentBlock::Text { .. }))?;
        message
            .content
            .retain(|b| !matches!(b, ContentBlock::Text { .. }));
        message.content.insert(
            at.min(message.content.len()),
            ContentBlock::ToolUse {
                id: text_call_id(),
                name: name.clone(),
                input,
            },
        );
        Some(name)
    }

    fn request(&self) -> Request {
        let mut system = self.system.clone();
        if self.policy_mode_is_plan() {
            system.push(plan_mode_reminder(&self.plan_file));
        }
        let mut messages = self.messages.clone();
        push_user(&mut messages, self.injection.clone());
        Request {
            model: self.options.model.clone(),
            system,
            messages,
            tools: self
                .tool_order
                .arrange(self.options.pinned_tools.as_deref(), self.tools.specs()),
            max_tokens: self.options.max_tokens,
            temperature: None,
            agent: self.options.agent_name.clone(),
        }
    }

    fn policy_mode_is_plan(&self) -> bool {
        self.policy
            .read()
            .map(|p| p.mode() == crate::permissions::PermissionMode::Plan)
            .unwrap_or(false)
    }

    /// Consults every hook; injects what they return and tells each hook whose texts
    /// went in. Returns the reason of the first hook that asked to stop. Texts of the
    /// other hooks are injected even then, so nothing a hook handed over is dropped.
    async fn run_turn_hooks(&mut self, events: &EventSink) -> Option<String> {
        let mut texts = Vec::new();
        let mut injecting = Vec::new();
        let mut stop = None;
        for hook in &self.hooks {
            match hook.before_turn().await {
                TurnAction::Continue => {}
                TurnAction::Inject(more) => {
                    if !more.is_empty() {
                        texts.extend(more);
                        injecting.push(hook.clone());
                    }
                }
                TurnAction::Stop(reason) => {
                    stop.get_or_insert(reason);
                }
            }
        }
        if !texts.is_empty() {
            events.emit(AgentEvent::Notice {
                text: format!("{} message(s) delivered into the conversation", texts.len()),
            });
            self.injection
                .extend(texts.iter().map(|t| ContentBlock::Text {
                    text: system_reminder(t),
                }));
            for hook in injecting {
                if !self.injecting.iter().any(|h| Arc::ptr_eq(h, &hook)) {
                    self.injecting.push(hook);
                }
            }
        }
        stop
    }

    /// Makes an injection set aside for a probe pending again, ahead of what joined
    /// since, and drops the probe's notice: the next call carries it as before.
    fn put_back(&mut self, aside: Option<SetAside>) {
        let Some(aside) = aside else { return };
        let later = self.injection.split_off(1.min(self.injection.len()));
        self.injection = aside.blocks;
        self.injection.extend(later);
        let later = std::mem::replace(&mut self.injecting, aside.hooks);
        for hook in later {
            if !self.injecting.iter().any(|h| Arc::ptr_eq(h, &hook)) {
                self.injecting.push(hook);
            }
        }
    }

    /// A model call carrying the pending injection succeeded: it joins the conversation
    /// (one appended transcript record) and its hooks record delivery.
    async fn injection_delivered(&mut self, events: &EventSink) {
        let blocks = std::mem::take(&mut self.injection);
        self.append_user(blocks, events);
        for hook in std::mem::take(&mut self.injecting) {
            hook.injected().await;
        }
    }

    fn append(&mut self, message: Message, events: &EventSink) {
        if let Some(session) = &mut self.session
            && let Err(e) = session.append_message(&message)
        {
            events.emit(AgentEvent::Error {
                message: e.to_string(),
            });
        }
        self.messages.push(message);
    }

    fn append_user(&mut self, blocks: Vec<ContentBlock>, events: &EventSink) {
        if blocks.is_empty() {
            return;
        }
        let merge = self.messages.last().is_some_and(|m| m.role == Role::User);
        push_user(&mut self.messages, blocks.clone());
        // The transcript only appends: merged blocks are one record of their own (never
        // a rewrite of the history), which replays to the same conversation.
        let persisted = match (&mut self.session, self.messages.last()) {
            (Some(session), _) if merge => session.append_user_blocks(&blocks),
            (Some(session), Some(last)) => session.append_message(last),
            _ => Ok(()),
        };
        if let Err(e) = persisted {
            events.emit(AgentEvent::Error {
                message: e.to_string(),
            });
        }
    }

    fn persist_replace(&mut self, reason: &str, events: &EventSink) {
        if reason != "repair" {
            self.history_replaced();
        }
        if let Some(session) = &mut self.session
            && let Err(e) = session.replace(reason, &self.messages)
        {
            events.emit(AgentEvent::Error {
                message: e.to_string(),
            });
        }
    }
}

/// The error result of a call whose arguments were unusable. `error` is bounded (it
/// never holds the whole raw text); `truncated` says the response hit `max_tokens` in
/// this call.
fn invalid_call_result(name: &str, error: &str, truncated: bool) -> String {
    let advice = if truncated {
        "Your response hit the output limit (max_tokens) in the middle of this call, so \
         its arguments were cut off. Make smaller calls: e.g. split a large WriteFile into \
         a shorter file plus EditFile calls that add the rest."
    } else {
        "Send the call again with its arguments as one complete JSON object matching the \
         tool's input schema."
    };
    format!("This {name} call was not run: {error}. {advice}")
}

/// A fresh id for a call the model wrote as text. Unique across processes too (a
/// resumed session keeps the old ids), in the character set both providers accept.
fn text_call_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "toolu_text_{nanos:x}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn forward_stream_event(event: &StreamEvent, events: &EventSink) {
    match event {
        StreamEvent::TextDelta { text } => {
            events.emit(AgentEvent::TextDelta { text: text.clone() })
        }
        StreamEvent::ThinkingDelta { text } => {
            events.emit(AgentEvent::ThinkingDelta { text: text.clone() })
        }
        _ => {}
    }
}
