//! The view's EVENTS section: what happened in the team, newest last. Until the store
//! keeps an event log, the messages still in the inboxes (sender, recipient, type and
//! summary, never the body) are the record the view can show.

use roo_store::Team;

use super::model::{EventLine, MessageLine};
use crate::exit::CliResult;

/// The newest `limit` events of `team`, oldest first (`messages`: what the snapshot read
/// from the inboxes, oldest first).
pub fn newest(_team: &Team, limit: usize, messages: &[MessageLine]) -> CliResult<Vec<EventLine>> {
    let skip = messages.len().saturating_sub(limit);
    Ok(messages[skip..]
        .iter()
        .map(|m| EventLine {
            time: m.time,
            actor: Some(m.from.to_string()),
            kind: "message_sent".into(),
            text: format!("{} -> {}: {}", m.from, m.to, m.summary),
        })
        .collect())
}
