//! The team an agent belongs to, once it has one.
//!
//! A teammate is bound from its start; a lead is bound when its `TeamCreate` tool runs
//! and unbound by `TeamDelete`. One [`TeamSlot`] per agent is shared by everything that
//! needs to know: the team tools (which act for `me`), the turn hooks, the lead's
//! terminal UI and its headless loop (which [`TeamSlot::subscribe`] to learn when a team
//! appears or goes). The binding carries the agent's [`InboxRouter`], the one reader of
//! its inbox in this process.

use std::sync::{Arc, Mutex, PoisonError};

use roo_store::{Name, Presence, Team};
use tokio::sync::watch;

use crate::authority::LeadKey;
use crate::router::InboxRouter;

/// An agent's membership: its team, its own name, the lead's name, its inbox's router.
#[derive(Clone)]
pub struct TeamBinding {
    /// The team (store handle).
    pub team: Team,
    /// This agent's member name.
    pub me: Name,
    /// The team lead's member name (equal to `me` for the lead).
    pub lead: Name,
    /// The owner of `me`'s inbox.
    pub router: InboxRouter,
    /// The lead's signing key, held by the lead's binding only: it signs the answers to
    /// teammates' questions (`crate::authority`).
    pub lead_key: Option<Arc<LeadKey>>,
    /// The lead's presence (PostgreSQL: what tells teammates on any host that it runs),
    /// held by the lead's binding only while it is bound; a teammate's presence is kept
    /// by its loop.
    pub presence: Option<Arc<Presence>>,
}

impl TeamBinding {
    /// Whether this agent is the team's lead.
    pub fn is_lead(&self) -> bool {
        self.me == self.lead
    }
}

impl std::fmt::Debug for TeamBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamBinding")
            .field("team", &self.team.name())
            .field("me", &self.me)
            .field("lead", &self.lead)
            .finish_non_exhaustive()
    }
}

/// Refused: the agent already belongs to a team.
#[derive(Debug, thiserror::Error)]
#[error("already in team {team} as {me}; delete that team first")]
pub struct AlreadyBound {
    /// The team it is in.
    pub team: Name,
    /// Its name there.
    pub me: Name,
}

/// Where an agent's [`TeamBinding`] lives. Cheap to clone; clones share the slot.
#[derive(Clone)]
pub struct TeamSlot {
    binding: Arc<watch::Sender<Option<Arc<TeamBinding>>>>,
    /// Called within every successful [`TeamSlot::bind`], before it returns.
    on_bind: Arc<Mutex<Vec<BindHook>>>,
}

/// See [`TeamSlot::on_bind`].
type BindHook = Arc<dyn Fn(&Arc<TeamBinding>) + Send + Sync>;

impl Default for TeamSlot {
    fn default() -> Self {
        TeamSlot::with(None)
    }
}

impl std::fmt::Debug for TeamSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TeamSlot").field(&self.get()).finish()
    }
}

impl TeamSlot {
    /// An empty slot (a lead before `TeamCreate`).
    pub fn new() -> TeamSlot {
        TeamSlot::default()
    }

    /// A slot holding `binding` from the start (a teammate).
    pub fn bound(binding: TeamBinding) -> TeamSlot {
        TeamSlot::with(Some(Arc::new(binding)))
    }

    fn with(binding: Option<Arc<TeamBinding>>) -> TeamSlot {
        TeamSlot {
            binding: Arc::new(watch::Sender::new(binding)),
            on_bind: Arc::default(),
        }
    }

    /// The current binding, if any.
    pub fn get(&self) -> Option<Arc<TeamBinding>> {
        self.binding.borrow().clone()
    }

    /// Calls `hook` with every binding from now on — synchronously, inside
    /// [`TeamSlot::bind`], so what it changes (e.g. tools revealed to the model) holds
    /// before the binder goes on — and at once with the current binding, if any.
    pub fn on_bind(&self, hook: impl Fn(&Arc<TeamBinding>) + Send + Sync + 'static) {
        let hook: BindHook = Arc::new(hook);
        self.hooks().push(hook.clone());
        if let Some(binding) = self.get() {
            hook(&binding);
        }
    }

    fn hooks(&self) -> std::sync::MutexGuard<'_, Vec<BindHook>> {
        // A hook that panicked leaves the list as it was.
        self.on_bind.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Binds the agent to a team; refused if it already is in one.
    pub fn bind(&self, binding: TeamBinding) -> Result<Arc<TeamBinding>, AlreadyBound> {
        let binding = Arc::new(binding);
        let mut refused = None;
        self.binding.send_if_modified(|slot| match slot {
            Some(current) => {
                refused = Some(AlreadyBound {
                    team: current.team.name().clone(),
                    me: current.me.clone(),
                });
                false
            }
            None => {
                *slot = Some(binding.clone());
                true
            }
        });
        if let Some(error) = refused {
            return Err(error);
        }
        let hooks = self.hooks().clone();
        for hook in hooks {
            hook(&binding);
        }
        Ok(binding)
    }

    /// Unbinds the agent (after `TeamDelete`); returns what it was bound to.
    pub fn clear(&self) -> Option<Arc<TeamBinding>> {
        let mut old = None;
        self.binding.send_if_modified(|slot| {
            old = slot.take();
            old.is_some()
        });
        old
    }

    /// A receiver that sees every bind and clear from now on.
    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<TeamBinding>>> {
        self.binding.subscribe()
    }

    /// `ROO_TEAM` and `ROO_AGENT_NAME` of the current binding (none while unbound), for
    /// the agent's commands: a lead's `roo-mail` and `roo-task` need no arguments once
    /// it created or joined a team.
    pub fn env_source(&self) -> roo_agent::exec::EnvSource {
        let slot = self.clone();
        roo_agent::exec::EnvSource::new(move || match slot.get() {
            Some(binding) => vec![
                ("ROO_TEAM".to_string(), binding.team.name().to_string()),
                ("ROO_AGENT_NAME".to_string(), binding.me.to_string()),
            ],
            None => Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roo_store::RooHome;

    fn binding(home: &RooHome, team: &str, me: &str) -> TeamBinding {
        let name = |s: &str| Name::parse_as("name", s).unwrap();
        let team = Team::open(home, name(team)).unwrap_or_else(|_| {
            let lead = roo_store::Member::new(name("lead"), &name(team));
            Team::create(home, name(team), "", lead, Vec::new()).unwrap()
        });
        let router = InboxRouter::new(team.mailbox(), name(me));
        TeamBinding {
            team,
            me: name(me),
            lead: name("lead"),
            router,
            presence: None,
            lead_key: None,
        }
    }

    #[tokio::test]
    async fn a_slot_binds_once_and_tells_subscribers() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let slot = TeamSlot::new();
        let mut seen = slot.subscribe();
        assert!(slot.get().is_none());
        let bound = slot.bind(binding(&home, "t", "lead")).unwrap();
        assert!(bound.is_lead());
        seen.changed().await.unwrap();
        assert_eq!(seen.borrow().as_ref().unwrap().team.name().as_str(), "t");
        let err = slot.bind(binding(&home, "u", "lead")).unwrap_err();
        assert_eq!(err.team.as_str(), "t");
        assert_eq!(slot.clear().unwrap().team.name().as_str(), "t");
        seen.changed().await.unwrap();
        assert!(seen.borrow().is_none());
        assert!(slot.clear().is_none());
    }

    #[test]
    fn bind_hooks_run_inside_bind_and_at_once_when_already_bound() {
        let dir = tempfile::tempdir().unwrap();
        let home = RooHome::new(dir.path());
        let slot = TeamSlot::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        slot.on_bind(move |b| log.lock().unwrap().push(b.team.name().to_string()));
        assert!(seen.lock().unwrap().is_empty());
        slot.bind(binding(&home, "t", "lead")).unwrap();
        assert_eq!(*seen.lock().unwrap(), ["t"]);
        // A refused bind calls nothing.
        slot.bind(binding(&home, "u", "lead")).unwrap_err();
        assert_eq!(*seen.lock().unwrap(), ["t"]);
        // Registered while bound: called at once.
        let late = Arc::new(Mutex::new(0));
        let count = late.clone();
        slot.on_bind(move |_| *count.lock().unwrap() += 1);
        assert_eq!(*late.lock().unwrap(), 1);
        slot.clear();
        slot.bind(binding(&home, "v", "lead")).unwrap();
        assert_eq!(*seen.lock().unwrap(), ["t", "v"]);
        assert_eq!(*late.lock().unwrap(), 2);
    }
}
