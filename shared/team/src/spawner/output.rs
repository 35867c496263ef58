//! Where in-process teammates' agent events go: each teammate's own [`EventSink`]
//! forwards into one channel, tagged with the teammate's name, so a UI can show their
//! work interleaved with the lead's (a pane teammate renders itself in its pane).
//!
//! Without a [`TeammateOutput`] an in-process teammate's events are discarded (only its
//! messages and states reach the lead's UI, as [`crate::TeamEvent`]s).

use roo_agent::event::{AgentEvent, EventSink};
use roo_store::Name;
use tokio::sync::mpsc;

/// One agent event of a teammate.
#[derive(Debug, Clone)]
pub struct MemberEvent {
    pub member: Name,
    pub event: AgentEvent,
}

/// The sending side: gives each teammate a sink that tags its events. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TeammateOutput {
    tx: mpsc::UnboundedSender<MemberEvent>,
}

impl TeammateOutput {
    /// An output and the receiver the UI reads. Unbounded like [`EventSink`]: a run's
    /// events are few and the UI drains them as they come.
    pub fn channel() -> (TeammateOutput, mpsc::UnboundedReceiver<MemberEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (TeammateOutput { tx }, rx)
    }

    /// The sink of teammate `member`: every event it emits arrives tagged, in order.
    /// Call from inside a tokio runtime (a task forwards the events until the sink and
    /// its clones are dropped, or the receiver is).
    pub fn sink_for(&self, member: &Name) -> EventSink {
        let (sink, mut events) = EventSink::channel();
        let tx = self.tx.clone();
        let member = member.clone();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let tagged = MemberEvent {
                    member: member.clone(),
                    event,
                };
                if tx.send(tagged).is_err() {
                    break;
                }
            }
        });
        sink
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_teammates_events_arrive_tagged_in_order() {
        let (output, mut rx) = TeammateOutput::channel();
        let alice = output.sink_for(&Name::parse("alice").unwrap());
        let bob = output.sink_for(&Name::parse("bob").unwrap());
        alice.emit(AgentEvent::Notice { text: "a1".into() });
        alice.emit(AgentEvent::Notice { text: "a2".into() });
        bob.emit(AgentEvent::Notice { text: "b1".into() });
        drop((alice, bob));
        let mut seen = Vec::new();
        while let Some(MemberEvent { member, event }) = rx.recv().await {
            if let AgentEvent::Notice { text } = event {
                seen.push(format!("{member}:{text}"));
            }
            if seen.len() == 3 {
                break;
            }
        }
        let alice: Vec<_> = seen.iter().filter(|s| s.starts_with("alice")).collect();
        assert_eq!(alice, ["alice:a1", "alice:a2"]);
        assert!(seen.contains(&"bob:b1".to_string()), "{seen:?}");
    }
}
