//! The view's EVENTS section: the newest records of the team's event log
//! ([`Team::events`], files and PostgreSQL alike), each as one line.

use roo_store::{Event, Team};

use super::model::EventLine;
use crate::exit::CliResult;

/// An event as the view shows it: the kind's own description (the log's words).
pub fn line(e: &Event) -> EventLine {
    let name = e.kind.name().to_owned();
    // The log's one-line form ends with `<kind>: <description>`.
    let summary = e.summary_line();
    let text = summary
        .split_once(&format!(" {name}: "))
        .map_or(summary.as_str(), |(_, what)| what)
        .to_owned();
    EventLine {
        time: e.time,
        actor: Some(e.actor.clone()),
        kind: name,
        text,
    }
}

/// The newest `limit` events of `team`, oldest first.
pub fn newest(team: &Team, limit: usize) -> CliResult<Vec<EventLine>> {
    Ok(team.events(None, limit)?.events.iter().map(line).collect())
}
