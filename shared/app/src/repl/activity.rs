//! A sign of life while the model works: the spinner line of the pinned block, with
//! the time the run has taken and the output tokens so far — the usage the provider
//! reported for the responses that ended, plus an estimate (about four characters a
//! token) of the response still streaming. The session redraws it on a tick of
//! [`TICK`], so it changes at most ten times a second, and drops it when the run ends.

use std::time::{Duration, Instant};

use roo_agent::event::AgentEvent;

use crate::render::Style;

/// How often the spinner line is redrawn.
pub(super) const TICK: Duration = Duration::from_millis(100);

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// What the spinner line counts for one run.
pub(super) struct Activity {
    started: Instant,
    /// Output tokens of the responses that ended (their usage events).
    reported: u64,
    /// Characters streamed since the last usage event.
    streaming_chars: usize,
}

impl Activity {
    pub(super) fn start() -> Activity {
        Activity {
            started: Instant::now(),
            reported: 0,
            streaming_chars: 0,
        }
    }

    /// Counts what `event` streamed or reported.
    pub(super) fn saw(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::TextDelta { text } | AgentEvent::ThinkingDelta { text } => {
                self.streaming_chars += text.chars().count();
            }
            AgentEvent::Usage { turn, .. } => {
                self.reported += turn.output_tokens;
                self.streaming_chars = 0;
            }
            _ => {}
        }
    }

    /// Output tokens so far: reported, plus the estimate of the streaming response.
    pub(super) fn tokens(&self) -> u64 {
        self.reported + (self.streaming_chars as u64).div_ceil(4)
    }

    /// The spinner line, e.g. `⠹ working · 12s · ↓ 340 tokens · Esc stops`; without
    /// the Esc hint when `short` (questions wait, and their keys line says it).
    pub(super) fn line(&self, style: &Style, short: bool) -> String {
        let elapsed = self.started.elapsed();
        let frame = FRAMES[(elapsed.as_millis() / TICK.as_millis()) as usize % FRAMES.len()];
        format!(
            "{} {}",
            style.cyan(&frame.to_string()),
            style.dim(&format!(
                "working · {} · ↓ {} tokens{}",
                seconds(elapsed),
                self.tokens(),
                if short { "" } else { " · Esc stops" }
            ))
        )
    }
}

/// `12s`, or `3m 05s` from a minute on.
fn seconds(elapsed: Duration) -> String {
    let s = elapsed.as_secs();
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m {:02}s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roo_llm::Usage;

    #[test]
    fn tokens_are_the_reported_usage_plus_the_streaming_estimate() {
        let mut activity = Activity::start();
        activity.saw(&AgentEvent::TextDelta {
            text: "12345678".into(),
        });
        assert_eq!(activity.tokens(), 2);
        activity.saw(&AgentEvent::Usage {
            turn: Usage {
                output_tokens: 30,
                ..Usage::default()
            },
            total: Usage::default(),
            cost_usd: None,
        });
        assert_eq!(activity.tokens(), 30);
        activity.saw(&AgentEvent::ThinkingDelta { text: "abc".into() });
        assert_eq!(activity.tokens(), 31);
        let line = activity.line(&Style::plain(), false);
        assert!(
            line.contains("working · 0s · ↓ 31 tokens · Esc stops"),
            "{line}"
        );
        let line = activity.line(&Style::plain(), true);
        assert!(line.ends_with("↓ 31 tokens"), "{line}");
        assert_eq!(seconds(Duration::from_secs(125)), "2m 05s");
    }
}
