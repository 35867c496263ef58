//! The lead's turn hooks, installed when the lead is built and following its
//! [`TeamSlot`] from then on: [`SlotDelivery`] puts teammates' messages into the lead's
//! next turn, [`TeamStateReminder`] gives its model the team's state back after a
//! compaction. Both do nothing while the slot is unbound.

use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use roo_agent::{AgentHook, TurnAction};
use roo_store::TaskFilter;

use super::status::team_summary;
use crate::binding::{TeamBinding, TeamSlot};
use crate::delivery::InboxDelivery;

/// The turn hook that delivers the lead's inbox into its conversation while its slot
/// is bound (an [`InboxDelivery`] per binding), and does nothing while it is not.
pub struct SlotDelivery {
    slot: TeamSlot,
    current: Mutex<Option<(Arc<TeamBinding>, Arc<InboxDelivery>)>>,
    /// The delivery whose texts the loop is injecting this turn.
    injecting: Mutex<Option<Arc<InboxDelivery>>>,
}

impl SlotDelivery {
    pub fn new(slot: TeamSlot) -> SlotDelivery {
        SlotDelivery {
            slot,
            current: Mutex::new(None),
            injecting: Mutex::new(None),
        }
    }

    /// The delivery of the current binding, made on first use after each bind.
    fn delivery(&self) -> Option<Arc<InboxDelivery>> {
        let binding = self.slot.get();
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        match binding {
            None => {
                *current = None;
                None
            }
            Some(binding) => {
                if let Some((bound, delivery)) = current.as_ref()
                    && Arc::ptr_eq(bound, &binding)
                {
                    return Some(delivery.clone());
                }
                // The lead's own notices (a teammate's death, sent to itself) are never
                // collapsed: several deaths at once are each work to redo.
                let delivery = Arc::new(
                    InboxDelivery::new(binding.router.clone()).never_collapse(binding.me.clone()),
                );
                *current = Some((binding, delivery.clone()));
                Some(delivery)
            }
        }
    }
}

impl AgentHook for SlotDelivery {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async move {
            let Some(delivery) = self.delivery() else {
                return TurnAction::Continue;
            };
            let action = delivery.before_turn().await;
            if matches!(action, TurnAction::Inject(_)) {
                *self.injecting.lock().unwrap_or_else(|e| e.into_inner()) = Some(delivery);
            }
            action
        })
    }

    fn injected(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let delivery = self
                .injecting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(delivery) = delivery {
                delivery.injected().await;
            }
        })
    }

    fn undeliverable(&self, reason: &str) -> BoxFuture<'_, ()> {
        let reason = reason.to_owned();
        Box::pin(async move {
            let delivery = self
                .injecting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(delivery) = delivery {
                delivery.undeliverable(&reason).await;
            }
        })
    }
}

/// The turn hook that gives the lead's model its team's state back after a compaction
/// (which may have summarized it away): teammates with their states and open tasks.
pub struct TeamStateReminder {
    slot: TeamSlot,
}

impl TeamStateReminder {
    pub fn new(slot: TeamSlot) -> TeamStateReminder {
        TeamStateReminder { slot }
    }
}

impl AgentHook for TeamStateReminder {
    fn before_turn(&self) -> BoxFuture<'_, TurnAction> {
        Box::pin(async { TurnAction::Continue })
    }

    fn after_compaction(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move {
            let binding = self.slot.get()?;
            let team = binding.team.clone();
            let read = tokio::task::spawn_blocking(move || {
                let config = team.config()?;
                let tasks = team.tasks().list(&TaskFilter::default())?;
                let liveness = team.liveness(&config)?;
                Ok::<_, roo_store::Error>(team_summary(&config, &liveness, &tasks))
            })
            .await;
            match read {
                Ok(Ok(summary)) => Some(summary),
                Ok(Err(e)) => Some(roo_store::model_safe(&format!(
                    "You lead team {}; its state could not be read after the compaction ({e}). Use TaskList and the team tools to look.",
                    binding.team.name()
                ))),
                Err(_) => None,
            }
        })
    }
}
