//! The hook seam of the agent loop: [`AgentHook`], the one trait through which
//! anything outside the loop takes part in an agent's life — session start, each
//! submitted prompt, the top of every turn (inject text, stop the run), before and
//! after every tool call, around a compaction, and the end of a run.
//!
//! Every method has a do-nothing default, so a hook implements only the points it
//! cares about. The loop calls them for the lead, teammates and sub-agents alike, in
//! the order the hooks were added ([`crate::agent_loop::Agent::add_hook`]), and knows
//! nothing of what a hook is for: the user's configured commands
//! ([`super::CommandHooks`]), inbox delivery and shutdown of teammates, skill scopes
//! and MCP notices all come through here. Failures are the hook's to report (as
//! [`AgentEvent::Notice`](crate::event::AgentEvent::Notice)s on `events`); the loop
//! never fails because of a hook.

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::event::{EventSink, RunOutcome};
use crate::tool::{Tool, ToolContext, ToolOutput};

/// A tool call as hooks see it.
#[derive(Clone, Copy)]
pub struct ToolCallInfo<'a> {
    /// The call's id.
    pub id: &'a str,
    /// The tool being called.
    pub tool: &'a dyn Tool,
    /// The call's input.
    pub input: &'a Value,
    /// The call's context: working directory and cancellation.
    pub context: &'a ToolContext,
}

/// What a hook decides about a call or a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on.
    Continue,
    /// Do not run it; `reason` is what the model (or the user) is told.
    Block {
        /// What the model (or the user) is told.
        reason: String,
    },
}

/// What hooks decided about a submitted prompt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PromptDecision {
    /// `Some`: the prompt is not sent; the reason is the run's stop reason.
    pub block: Option<String>,
    /// Texts added to the conversation before the prompt, as system reminders.
    pub context: Vec<String>,
}

/// What a hook wants the loop to do at the top of a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnAction {
    /// Go on as planned.
    Continue,
    /// Send these texts as system reminders with the next model call. They join the
    /// conversation (and the transcript) only once a call carrying them succeeded; until
    /// then every call carries them. A text that changes the task redirects the run.
    Inject(Vec<String>),
    /// End the run before the next model call; the run's outcome is
    /// [`RunOutcome::Stopped`] with this reason.
    Stop(String),
}

/// The one hook point of the loop. Every method has a do-nothing default; the loop
/// calls them for the lead, teammates and sub-agents alike. Failures are the hook's to
/// report (as [`AgentEvent::Notice`](crate::event::AgentEvent::Notice)s on `events`);
/// the loop never fails because of a hook.
pub trait AgentHook: Send + Sync {
    /// The first run of this agent begins (`resumed`: the conversation was restored).
    /// Returns texts to add to the conversation as context.
    fn session_start<'a>(
        &'a self,
        _resumed: bool,
        _cancel: &'a CancellationToken,
        _events: &'a EventSink,
    ) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async { Vec::new() })
    }

    /// A prompt was submitted, before the model sees it.
    fn user_prompt_submit<'a>(
        &'a self,
        _prompt: &'a str,
        _cancel: &'a CancellationToken,
        _events: &'a EventSink,
    ) -> BoxFuture<'a, PromptDecision> {
        Box::pin(async { PromptDecision::default() })
    }

    /// The top of every turn (the first one and every one after a batch of tool
    /// results), before the next model call: a hook can act between the tool calls of
    /// a long run — inject text, or stop the run (teammates use it to deliver inbox
    /// messages and to end a run on a shutdown request).
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async { TurnAction::Continue })
    }

    /// Called once a model call carrying the texts of this hook's [`TurnAction::Inject`]s
    /// **succeeded**, after they were added to the conversation and the transcript. A
    /// hook that records delivery (an inbox receipt) does it here: a call that fails or
    /// is cancelled, a run that stops first, or a crash leaves the texts undelivered (the
    /// agent's next model call carries them again).
    fn injected(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Called when the provider refused a request carrying this hook's pending texts
    /// ([`LlmError::is_rejection`](roo_llm::LlmError::is_rejection)) and then accepted
    /// the same request without them: those texts will never reach the model and are
    /// dropped (the model is told that some were). `reason` is the provider's error. A
    /// hook that records delivery says here that they were not delivered.
    fn undeliverable(&self, reason: &str) -> BoxFuture<'_, ()> {
        let _ = reason;
        Box::pin(async {})
    }

    /// Before a call runs (before its permission check); `Block` refuses it.
    fn pre_tool_use<'a>(
        &'a self,
        _call: ToolCallInfo<'a>,
        _events: &'a EventSink,
    ) -> BoxFuture<'a, Verdict> {
        Box::pin(async { Verdict::Continue })
    }

    /// After a call ran; may add to its result.
    fn post_tool_use<'a>(
        &'a self,
        _call: ToolCallInfo<'a>,
        _output: &'a mut ToolOutput,
        _events: &'a EventSink,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// The conversation is about to be compacted (`tokens`: its estimated size).
    fn pre_compact<'a>(
        &'a self,
        _tokens: u64,
        _cancel: &'a CancellationToken,
        _events: &'a EventSink,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// Text to put back into the conversation right after a compaction replaced the
    /// oldest rounds with a summary, as a system reminder next to the re-injected
    /// instructions (e.g. a lead's team state, which the summary may have lost).
    /// `None` (the default) adds nothing.
    fn after_compaction(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async { None })
    }

    /// A run ended (not when it was cancelled).
    fn stop<'a>(
        &'a self,
        _outcome: &'a RunOutcome,
        _final_text: &'a str,
        _cancel: &'a CancellationToken,
        _events: &'a EventSink,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}
