//! The view's EVENTS section: the newest records of the team's event log
//! ([`roo_store::Team::events`], files and PostgreSQL alike), each as one line.

use roo_store::Event;

use super::model::EventLine;

/// An event as the view shows it: the kind's own description (the log's words).
pub fn line(e: &Event) -> EventLine {
    EventLine {
        time: e.time,
        actor: Some(e.actor.clone()),
        kind: e.kind.name().to_owned(),
        text: e.kind.describe(),
    }
}
