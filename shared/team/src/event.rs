//! Team events for a UI: what a person at the lead's terminal (or a stream-json
//! consumer) is told about teammates while the lead works or waits for input.
//!
//! The runtime sends [`TeamEvent`]s into a bounded channel ([`team_events`]); the
//! interactive lead selects over it together with the terminal, so a notice appears
//! while the user is typing, not only during a run. Sending never blocks the runtime:
//! when the UI lags behind by [`TEAM_EVENT_BUFFER`] events, the newest are dropped and
//! counted ([`TeamEventSender::dropped`]); the inbox stays the record of every message.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use roo_store::MemberState;
use roo_store::{Message, Name};
use tokio::sync::mpsc;

/// Events the channel holds before a sender starts dropping.
pub const TEAM_EVENT_BUFFER: usize = 256;

/// Something that happened in the team.
#[derive(Debug, Clone, PartialEq)]
pub enum TeamEvent {
    /// A message arrived in this member's inbox.
    Message {
        from: Name,
        /// The wire type (`text`, `idle_notification`, …).
        kind: &'static str,
        /// One-line preview: the summary, else the start of the text.
        preview: String,
    },
    /// A teammate appeared in the team config (spawned, or joined by hand).
    Joined { name: Name },
    /// A teammate's state changed.
    MemberState { name: Name, state: MemberState },
    /// Anything else worth one line (a teammate joined, a response was ignored, …).
    Notice { text: String },
}

/// Longest preview of a message, in characters.
const PREVIEW_CHARS: usize = 80;

impl TeamEvent {
    /// The event of a message arriving.
    pub fn message(message: &Message) -> TeamEvent {
        let source = message
            .summary
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or(&message.text);
        TeamEvent::Message {
            from: message.from.clone(),
            kind: message.body.type_name(),
            preview: one_line(source, PREVIEW_CHARS),
        }
    }

    /// The event as one line of plain text (no colours, no newline).
    pub fn line(&self) -> String {
        match self {
            TeamEvent::Message {
                from,
                kind,
                preview,
            } => {
                if *kind == "text" {
                    format!("✉ {from}: {preview}")
                } else if preview.is_empty() {
                    format!("✉ {from} ({kind})")
                } else {
                    format!("✉ {from} ({kind}): {preview}")
                }
            }
            TeamEvent::Joined { name } => format!("+ {name} joined the team"),
            TeamEvent::MemberState { name, state } => format!("● {name} is {state}"),
            TeamEvent::Notice { text } => one_line(text, 200),
        }
    }
}

/// `text` on one line: control characters (newlines, escapes) become spaces, runs of
/// spaces collapse, and it is cut at `max` characters with an ellipsis. Untrusted text
/// (another agent wrote it) must not move the cursor or restyle the terminal.
pub fn one_line(text: &str, max: usize) -> String {
    let mut line = String::new();
    let mut space = false;
    for c in text.trim().chars() {
        let c = if c.is_control() { ' ' } else { c };
        if c == ' ' && space {
            continue;
        }
        space = c == ' ';
        line.push(c);
    }
    roo_term::clip(&line, max)
}

/// Sends [`TeamEvent`]s; never blocks. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TeamEventSender {
    tx: mpsc::Sender<TeamEvent>,
    dropped: Arc<AtomicU64>,
}

impl TeamEventSender {
    /// Sends `event`; if the channel is full, drops it and counts it. A closed channel
    /// (no UI any more) is not an error.
    pub fn send(&self, event: TeamEvent) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(event) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Events dropped because the UI lagged.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// A channel of team events with room for [`TEAM_EVENT_BUFFER`].
pub fn team_events() -> (TeamEventSender, mpsc::Receiver<TeamEvent>) {
    let (tx, rx) = mpsc::channel(TEAM_EVENT_BUFFER);
    (
        TeamEventSender {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        },
        rx,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_neutralises_control_characters_and_cuts() {
        assert_eq!(one_line("a\nb\x1b[2Jc", 80), "a b [2Jc");
        assert_eq!(one_line("  many   spaces  ", 80), "many spaces");
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line("abc", 3), "abc");
    }

    #[test]
    fn a_full_channel_drops_and_counts_instead_of_blocking() {
        let (tx, mut rx) = team_events();
        for i in 0..TEAM_EVENT_BUFFER + 5 {
            tx.send(TeamEvent::Notice {
                text: i.to_string(),
            });
        }
        assert_eq!(tx.dropped(), 5);
        assert_eq!(
            rx.try_recv().ok(),
            Some(TeamEvent::Notice {
                text: "0".to_string()
            })
        );
    }
}
