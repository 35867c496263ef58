//! The loop's side of checkpoints ([`crate::checkpoints`]): each run's input opens one,
//! every allowed file-changing call is recorded around (the tool never knows), a
//! compaction or `/clear` says earlier conversation points are gone, and
//! [`Agent::rewind`] puts the code, the conversation or both back to before a prompt.
//! A checkpoint that cannot be recorded never stops a call: the first failure of a
//! session is told as a notice.

use std::sync::Arc;

use serde_json::Value;

use super::Agent;
use crate::RestoreReport;
use crate::checkpoints::{CallScope, CheckpointError, Checkpoints, ConversationMark, PendingCall};
use crate::conversation::repair_chain;
use crate::event::{AgentEvent, EventSink};
use crate::tool::{Tool, ToolContext};

/// What a rewind puts back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewindScope {
    /// The files the agent changed.
    Code,
    /// The conversation.
    Conversation,
    /// Both.
    Both,
}

impl std::str::FromStr for RewindScope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "code" => Ok(Self::Code),
            "conversation" => Ok(Self::Conversation),
            "both" => Ok(Self::Both),
            other => Err(format!(
                "read the rewind scope \"{other}\": use code, conversation or both"
            )),
        }
    }
}

/// What a rewind did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindOutcome {
    /// The files put back (a code rewind).
    pub code: Option<RestoreReport>,
    /// Messages the conversation lost (a conversation rewind).
    pub conversation: Option<usize>,
}

impl RewindOutcome {
    /// The outcome as lines for the person.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if let Some(report) = &self.code {
            out.push_str(&report.describe());
        }
        if let Some(dropped) = self.conversation {
            out.push_str(&format!(
                "conversation rewound ({dropped} message{} removed)\n",
                if dropped == 1 { "" } else { "s" }
            ));
        }
        out
    }
}

impl Agent {
    /// The agent's checkpoints, if it records any.
    pub fn checkpoints(&self) -> Option<&Arc<Checkpoints>> {
        self.options
            .checkpoints
            .as_ref()
            .filter(|checkpoints| checkpoints.enabled())
    }

    /// A run begins with `input`: it opens a checkpoint.
    pub(super) fn checkpoint_prompt(&mut self, input: &str, events: &EventSink) {
        if !self.options.checkpoint_prompts {
            return;
        }
        let Some(checkpoints) = self.checkpoints() else {
            return;
        };
        let mark = ConversationMark {
            messages: self.messages.len(),
            tail_blocks: self.messages.last().map_or(0, |m| m.content.len()),
        };
        if let Err(e) = checkpoints.begin_prompt(input, mark) {
            failed(checkpoints, &e, events);
        }
    }

    /// The history was replaced: earlier prompts' conversation points are gone.
    pub(super) fn history_replaced(&self) {
        if let Some(checkpoints) = self.checkpoints() {
            checkpoints.history_replaced();
        }
    }

    /// Records what an allowed call of `tool` may change, before it runs; with what the
    /// agent is to be told of a checkpoint skipped or cut short (said once, also to the
    /// person).
    pub(super) async fn checkpoint_before(
        &self,
        tool: &dyn Tool,
        input: &Value,
        context: &ToolContext,
        events: &EventSink,
    ) -> (Option<PendingCall>, Option<String>) {
        let Some(checkpoints) = self.checkpoints().cloned() else {
            return (None, None);
        };
        let Some(scope) = CallScope::of(tool, input, &context.cwd) else {
            return (None, None);
        };
        let cwd = context.cwd.clone();
        let recorder = checkpoints.clone();
        let recorded =
            tokio::task::spawn_blocking(move || recorder.before_call(&scope, &cwd)).await;
        let pending = match recorded {
            Ok(Ok(pending)) => pending,
            Ok(Err(e)) => {
                failed(&checkpoints, &e, events);
                None
            }
            Err(_) => None,
        };
        (pending, told(&checkpoints, events))
    }

    /// Keeps what the call changed, after it ran; with what the agent is to be told.
    pub(super) async fn checkpoint_after(
        &self,
        pending: Option<PendingCall>,
        events: &EventSink,
    ) -> Option<String> {
        let (Some(pending), Some(checkpoints)) = (pending, self.checkpoints()) else {
            return None;
        };
        let recorder = checkpoints.clone();
        if let Ok(Err(e)) = tokio::task::spawn_blocking(move || recorder.after_call(pending)).await
        {
            failed(checkpoints, &e, events);
        }
        told(checkpoints, events)
    }

    /// A run ended: what its last commands changed is found and kept now (one walk), so
    /// a person's edit after the run is never taken for the agent's.
    pub(super) async fn checkpoint_settle(&self, events: &EventSink) {
        let Some(checkpoints) = self.checkpoints().cloned() else {
            return;
        };
        let recorder = checkpoints.clone();
        if let Ok(Err(e)) = tokio::task::spawn_blocking(move || recorder.settle()).await {
            failed(&checkpoints, &e, events);
        }
        told(&checkpoints, events);
    }

    /// Puts `scope` back to before prompt `number` (1 = the session's first; the
    /// numbers [`Checkpoints::list`] shows). The code: only the files the agent changed
    /// since; the conversation: cut back to where it stood, in the transcript too.
    pub fn rewind(
        &mut self,
        number: usize,
        scope: RewindScope,
    ) -> Result<RewindOutcome, CheckpointError> {
        let Some(checkpoints) = self.checkpoints().cloned() else {
            return Err(CheckpointError::Disabled);
        };
        let mark = match scope {
            RewindScope::Code => None,
            _ => Some(checkpoints.conversation_mark(number)?),
        };
        let code = match scope {
            RewindScope::Conversation => None,
            _ => Some(checkpoints.rewind_code(number)?),
        };
        let conversation = match mark {
            Some(mark) => Some(self.cut_conversation(mark)?),
            None => None,
        };
        if scope == RewindScope::Conversation {
            checkpoints.conversation_rewound(number)?;
        }
        Ok(RewindOutcome { code, conversation })
    }

    /// Cuts the history back to `mark`; returns how many messages went.
    fn cut_conversation(&mut self, mark: ConversationMark) -> Result<usize, CheckpointError> {
        let before = self.messages.len();
        self.messages.truncate(mark.messages);
        if mark.messages > 0
            && let Some(last) = self.messages.last_mut()
        {
            last.content.truncate(mark.tail_blocks);
        }
        repair_chain(&mut self.messages);
        self.measured = None;
        if let Some(session) = &mut self.session {
            session
                .replace("rewind", &self.messages)
                .map_err(|e| CheckpointError::Io {
                    action: "write the transcript",
                    path: session.path().to_path_buf(),
                    source: std::io::Error::other(e.to_string()),
                })?;
        }
        Ok(before.saturating_sub(self.messages.len()))
    }
}

/// Tells the person a checkpoint skipped or cut short (a warning, shown even in a quiet
/// `-p` run) and returns it for the agent.
fn told(checkpoints: &Checkpoints, events: &EventSink) -> Option<String> {
    let text = checkpoints.take_notice()?;
    events.emit(AgentEvent::Warning { text: text.clone() });
    Some(text)
}

/// Tells the session's first checkpoint failure.
fn failed(checkpoints: &Checkpoints, error: &CheckpointError, events: &EventSink) {
    tracing::warn!(%error, "checkpoint");
    if checkpoints.first_failure() {
        events.emit(AgentEvent::Notice {
            text: format!("checkpoints: {error} (the call ran without a checkpoint)"),
        });
    }
}
