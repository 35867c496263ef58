//! Taking up and letting go of a team that already exists: joining it as its lead
//! (`roo-lead --team`, one lead per team), which team a resumed conversation leads
//! (what `--continue` rebinds), and releasing the lead entry for teammates kept running.

use std::sync::Arc;

use roo_store::{Name, RooHome, Team};

use crate::authority::LeadKey;
use crate::binding::{TeamBinding, TeamSlot};
use crate::event::TeamEventSender;
use crate::router::InboxRouter;

/// The team a lead's conversation leaves it leading: the team of its last successful
/// TeamCreate not followed by a successful TeamDelete (what `--continue` rebinds).
pub fn team_led_in(messages: &[roo_llm::Message]) -> Option<Name> {
    use roo_llm::ContentBlock;
    let mut calls: std::collections::HashMap<&str, (&str, &serde_json::Value)> =
        std::collections::HashMap::new();
    let mut led = None;
    for message in messages {
        for block in &message.content {
            match block {
                ContentBlock::ToolUse { id, name, input } => {
                    calls.insert(id, (name, input));
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    is_error: false,
                    ..
                } => match calls.get(tool_use_id.as_str()) {
                    Some((crate::tools::team::CREATE, input)) => {
                        led = input
                            .get("team_name")
                            .and_then(serde_json::Value::as_str)
                            .and_then(|name| Name::parse_as("team name", name.trim()).ok());
                    }
                    Some((crate::tools::team::DELETE, _)) => led = None,
                    _ => {}
                },
                _ => {}
            }
        }
    }
    led
}

/// A lead leaving its team on purpose with teammates still running (`--keep-panes`):
/// its pid is taken off the lead entry, so they wait for the next lead without end
/// rather than stop as they do when the lead's process is gone (`teammate::lead_watch`).
pub async fn release_lead(slot: &TeamSlot) {
    let Some(binding) = slot.get().filter(|b| b.is_lead()) else {
        return;
    };
    let (team, me) = (binding.team.clone(), binding.me.clone());
    let own = std::process::id();
    let released = tokio::task::spawn_blocking(move || {
        team.update_member(me.as_str(), |lead| {
            if lead.pid == Some(own) {
                lead.pid = None;
            }
        })
    })
    .await;
    if !matches!(released, Ok(Ok(_))) {
        tracing::warn!("failed to release the lead entry for kept teammates");
    }
}

/// Why the lead could not join a team.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("{0}")]
    Store(#[from] roo_store::Error),
    #[error("team {team} is led by {lead}, not by {me}; a lead can only lead its own team")]
    NotLead { team: Name, lead: String, me: Name },
    #[error(transparent)]
    Bound(#[from] crate::binding::AlreadyBound),
    #[error(transparent)]
    Key(#[from] crate::authority::AuthorityError),
    #[error(
        "team {team} is led by a running roo-lead (pid {pid}); one lead per team: stop that one, or pass --take-over to lead it from here (it is told and stops leading)"
    )]
    LeadAlive { team: Name, pid: u32 },
    #[error(
        "lead team {team} from inside an agent's command ({why}): a command may not start a lead that claims a team; start roo-lead from your own terminal"
    )]
    InsideCommand { team: Name, why: String },
}

/// Binds `slot` to the existing team `team` with `me` as its lead (`roo-lead --team`):
/// the team's lead must be `me`. The new binding's router reports to `events`; the
/// caller runs it (`router.run`).
///
/// One lead per team: while the lead entry names another live process, this is refused
/// unless `take_over`, which records this process as the lead (the other lead's monitor
/// sees that and stops leading). Teammates waiting for a lead are adopted: the lead
/// entry names a live process again.
///
/// Refused inside an agent's command ([`roo_agent::exec::sandbox::inside_agent_command`]),
/// whichever way the lead got here (`--team`, `--continue`, `--resume`): a
/// prompt-injected teammate must not take its own team over.
pub fn join_as_lead(
    slot: &TeamSlot,
    home: &RooHome,
    team: Name,
    me: Name,
    events: TeamEventSender,
    take_over: bool,
) -> Result<Arc<TeamBinding>, JoinError> {
    if let Some(why) = roo_agent::exec::sandbox::inside_agent_command() {
        return Err(JoinError::InsideCommand { team, why });
    }
    let team = Team::open(home, team)?;
    let config = team.config()?;
    if !config.is_lead(me.as_str()) {
        let lead = config
            .lead()
            .map_or_else(|| config.lead_agent_id.clone(), |m| m.name.to_string());
        return Err(JoinError::NotLead {
            team: team.name().clone(),
            lead,
            me,
        });
    }
    // Checked and written under the config's lock: two leads starting at once cannot
    // both pass.
    if let roo_store::LeadClaim::Held(pid) = team.claim_lead(std::process::id(), take_over)? {
        return Err(JoinError::LeadAlive {
            team: team.name().clone(),
            pid,
        });
    }
    // Teammates on any host see it lead (PostgreSQL); every write of its binding is
    // fenced as the lead.
    let presence = team.hold_presence(&me)?;
    let key = LeadKey::load_or_create(&team)?;
    let router = InboxRouter::with_events(team.mailbox(), me.clone(), events);
    Ok(slot.bind(TeamBinding {
        team,
        lead: me.clone(),
        me,
        router,
        presence: Some(Arc::new(presence)),
        lead_key: Some(Arc::new(key)),
    })?)
}
