//! Compaction of an agent's conversation: when the next prompt would pass the
//! threshold of the model's window (or of a local server's, counted in the server's
//! tokens), the oldest rounds give way to a summary ([`crate::context::compact`]) and
//! what must survive every compaction goes back in front — the instructions, then what
//! the hooks restore ([`crate::hooks::AgentHook::after_compaction`]). The hooks hear of
//! it first ([`crate::hooks::AgentHook::pre_compact`]).

use crate::context::{compact, estimate_text, estimate_tokens};
use crate::event::{AgentEvent, EventSink};
use crate::prompt::system_reminder;
use roo_llm::{ContentBlock, Usage};
use tokio_util::sync::CancellationToken;

use super::{Agent, server_window};

impl Agent {
    /// Estimated size of the next prompt: the last measured usage plus an estimate of
    /// what was appended since.
    pub(super) fn estimated_prompt_tokens(&self) -> u64 {
        let (measured, estimated) = self.prompt_tokens_parts();
        measured + estimated
    }

    /// The next prompt's size in two parts: what the provider measured (its own tokens)
    /// and what is estimated (four bytes a token) on top.
    fn prompt_tokens_parts(&self) -> (u64, u64) {
        let fixed: u64 = self.system.iter().map(|s| estimate_text(s)).sum();
        let pending: u64 = self
            .injection
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text } => estimate_text(text),
                _ => 0,
            })
            .sum();
        match self.measured {
            Some((covered, tokens)) if covered <= self.messages.len() => {
                (tokens, pending + estimate_tokens(&self.messages[covered..]))
            }
            _ => (0, pending + fixed + estimate_tokens(&self.messages)),
        }
    }

    pub(super) async fn compact_if_needed(
        &mut self,
        events: &EventSink,
        cancel: &CancellationToken,
        usage: &mut Usage,
    ) {
        let model_window = self.provider.context_window();
        let threshold = self.options.compaction.threshold;
        let estimate = self.estimated_prompt_tokens();
        // Against a local server's window the prompt is counted in the server's tokens:
        // what it measured as is, the estimated rest a fifth higher (the estimate runs
        // low there).
        let over_server = self.server_window.is_some_and(|server| {
            let (measured, estimated) = self.prompt_tokens_parts();
            (measured + server_window::local_tokens(estimated)) as f64 >= server as f64 * threshold
        });
        if !over_server && (estimate as f64) < model_window as f64 * threshold {
            return;
        }
        // What `compact` budgets is estimated: the server's window in the estimate.
        let window = self.server_window.map_or(model_window, |server| {
            server_window::in_estimate(server).min(model_window)
        });
        // A summary is a model request too: none starts past a spending cap (the turn's
        // own request then ends the run with the reason).
        if let Some(gate) = self.options.spend_gate.clone() {
            match gate.0.before_request().await {
                crate::hooks::SpendVerdict::Stop(_) => return,
                crate::hooks::SpendVerdict::Warn(text) => {
                    events.emit(AgentEvent::Notice { text: text.clone() });
                    self.injection.push(roo_llm::ContentBlock::Text {
                        text: crate::prompt::system_reminder(&text),
                    });
                }
                crate::hooks::SpendVerdict::Go => {}
            }
        }
        for hook in &self.hooks {
            hook.pre_compact(estimate, cancel, events).await;
        }
        let base = self.request();
        let Some(compacted) = compact(
            self.provider.as_ref(),
            &base,
            &self.messages,
            window,
            &self.options.compaction,
            cancel,
        )
        .await
        else {
            return;
        };
        if let Some(reason) = &compacted.fallback_reason {
            events.emit(AgentEvent::Notice {
                text: format!(
                    "context summary not used ({reason}); dropped the oldest rounds instead"
                ),
            });
        }
        tracing::info!(
            method = ?compacted.method,
            before = self.messages.len(),
            after = compacted.messages.len(),
            estimated_tokens = estimate,
            "context compacted"
        );
        usage.add(&compacted.usage);
        self.total_usage.add(&compacted.usage);
        if let Some(gate) = &self.options.spend_gate
            && compacted.usage.input_tokens + compacted.usage.output_tokens > 0
        {
            let cost = self.options.prices.cost(self.model(), &compacted.usage);
            gate.0.spent(compacted.usage, cost).await;
        }
        events.emit(AgentEvent::Compaction {
            method: compacted.method,
            messages_before: self.messages.len(),
            messages_after: compacted.messages.len(),
            tokens_before: estimate,
        });
        self.messages = compacted.messages;
        // What must survive every compaction goes back in front of the kept rounds:
        // the instructions, then what the hooks restore (in hook order).
        let mut restored: Vec<String> = self.instructions.iter().cloned().collect();
        for hook in &self.hooks {
            if let Some(text) = hook.after_compaction().await {
                restored.push(text);
            }
        }
        if let Some(first) = self.messages.first_mut() {
            for (at, text) in restored.iter().enumerate() {
                first.content.insert(
                    at,
                    ContentBlock::Text {
                        text: system_reminder(text),
                    },
                );
            }
        }
        self.measured = None;
        self.persist_replace("compaction", events);
    }
}
