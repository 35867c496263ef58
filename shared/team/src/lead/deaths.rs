//! What a teammate's death leaves the lead: a notice in the lead's own inbox, so its
//! model hears of it and redoes the work, and the tasks whose work was lost, which keep a
//! headless lead from exiting 0.

use roo_store::{Name, Outgoing, TaskFilter, Team};

/// Puts `text` about teammate `member`'s death into the lead's own inbox, so its model
/// hears of it at its next turn (and a headless lead waiting for its team gets that
/// turn) rather than the work silently going back to pending. Blocking.
pub fn tell_lead_of_death(team: &Team, lead: &Name, member: &Name, text: &str) {
    let message = format!(
        "[team runtime] {text}. Its unfinished tasks are pending again; its commits stay on its branch. Reassign the work (spawn a teammate again with the Agent tool) or finish it yourself, and say what was not done."
    );
    let sent = team.mailbox().send(
        lead,
        lead.as_str(),
        Outgoing::text(message, format!("teammate {member} died")),
    );
    if let Err(e) = sent {
        tracing::warn!(%member, error = %e, "failed to tell the lead's model of a death");
    }
}

/// The tasks whose work was lost to a teammate's death and never finished: not
/// completed, with a `reclaimed from` note. A headless lead that ends with any does not
/// exit 0. Blocking.
/// Only notes written by `lead` count (a teammate can add notes, never as the lead).
pub fn lost_work(team: &Team, lead: &Name) -> Vec<roo_store::Task> {
    team.tasks()
        .list(&TaskFilter::default())
        .map(|tasks| {
            tasks
                .into_iter()
                .filter(|t| t.status != roo_store::TaskStatus::Completed)
                .filter(|t| {
                    t.notes.iter().any(|n| {
                        n.by.as_ref() == Some(lead) && n.text.starts_with("reclaimed from ")
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}
