//! The in-process backend behind [`TeammateExecutor`]: each teammate is the teammate
//! loop as a tokio task of the lead's process ([`spawn_in_process`]), whose
//! [`TeammateHandle`] this executor keeps by name. Dropping the executor (or
//! [`TeammateExecutor::shutdown_all`]) cancels them all: in-process teammates end with
//! the lead whatever `keep` says.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use futures_util::future::BoxFuture;
use roo_store::{BackendType, Name};

use crate::authority::LeadPublicKey;
use crate::backend::executor::{ExecError, Launch, TeammateExecutor};
use crate::binding::{TeamBinding, TeamSlot};
use crate::event::{TeamEvent, TeamEventSender};
use crate::router::InboxRouter;
use crate::spawner::output::TeammateOutput;
use crate::teammate::{TeammateEnd, TeammateHandle, TeammateSpec, spawn_in_process};
use crate::tools::{OnSent, TeamTools, teammate_tools};

/// Teammates as tasks of this process.
#[derive(Default)]
pub struct InProcessExecutor {
    handles: Mutex<HashMap<Name, TeammateHandle>>,
    events: Option<TeamEventSender>,
    /// Where teammates' agent events go (discarded without one).
    output: OnceLock<TeammateOutput>,
    /// Called after each of their team tools' sends (the spawner's restart hook).
    on_sent: OnceLock<OnSent>,
}

impl InProcessExecutor {
    /// An executor reporting why a teammate died (a panic, a failed loop) to `events`;
    /// its states come from the lead's monitor.
    pub fn new(events: Option<TeamEventSender>) -> InProcessExecutor {
        InProcessExecutor {
            handles: Mutex::new(HashMap::new()),
            events,
            output: OnceLock::new(),
            on_sent: OnceLock::new(),
        }
    }

    /// Sends teammates' agent events, tagged with their names, to `output`; the first
    /// call wins.
    pub fn set_output(&self, output: TeammateOutput) {
        let _ = self.output.set(output);
    }

    /// Calls `on_sent` after each send of a teammate's team tools; the first call wins.
    pub fn set_on_sent(&self, on_sent: OnSent) {
        let _ = self.on_sent.set(on_sent);
    }

    /// How `name`'s current loop ended (`None` while it runs or if unknown).
    pub fn ended(&self, name: &Name) -> Option<TeammateEnd> {
        lock(&self.handles).get(name).and_then(|h| h.ended())
    }

    /// The spec the launch describes: its binding (a fresh router), tools, plan mode and
    /// roster entry.
    fn spec(&self, launch: Launch) -> TeammateSpec {
        // A team handle of its own: its presence fences its writes, not the lead's.
        let team = launch.team.detached();
        let router = InboxRouter::new(team.mailbox(), launch.name.clone());
        // It takes answers signed by the lead's key as the lead holds it in memory.
        if let Some(key) = launch.lead_key.as_deref().and_then(LeadPublicKey::parse) {
            router.pin_lead_key(key);
        }
        let binding = TeamBinding {
            router,
            team,
            me: launch.name.clone(),
            lead: launch.lead,
            presence: None,
            lead_key: None,
        };
        let mut spec = TeammateSpec::new(launch.settings, binding, launch.prompt);
        // Its team tools, bound to its own binding; a message to a stopped peer restarts
        // it through the hook.
        let mut team_tools = TeamTools::new(TeamSlot::bound(spec.binding.clone()));
        if let Some(on_sent) = self.on_sent.get() {
            team_tools = team_tools.with_on_sent(on_sent.clone());
        }
        spec.tools = teammate_tools(&team_tools);
        spec.tools.extend(launch.tools);
        if let Some(output) = self.output.get() {
            spec.output = output.sink_for(&launch.name);
        }
        spec.plan_mode_required = launch.plan_mode_required;
        spec.mode_after_plan = launch.mode_after_plan;
        spec.member.agent_type = launch.agent_type;
        spec.member.model = launch.model;
        spec.member.color = launch.color;
        spec.member.worktree_path = Some(launch.work_dir);
        spec
    }
}

impl TeammateExecutor for InProcessExecutor {
    fn backend(&self) -> BackendType {
        BackendType::InProcess
    }

    fn label(&self) -> &'static str {
        "in-process"
    }

    fn spawn(&self, launch: Launch) -> BoxFuture<'_, Result<Vec<String>, ExecError>> {
        Box::pin(async move {
            let name = launch.name.clone();
            if self.is_active(&name) {
                return Err(ExecError::Start {
                    name,
                    message: "a teammate of that name is already running in this process"
                        .to_string(),
                });
            }
            // No `spec.events`: the lead's monitor reports every teammate's states from
            // the roster; the teammate's own reports would repeat each one. Only why it
            // died is not in the roster: reported below.
            let handle =
                spawn_in_process(self.spec(launch))
                    .await
                    .map_err(|e| ExecError::Start {
                        name: name.clone(),
                        message: e.to_string(),
                    })?;
            if let Some(events) = self.events.clone() {
                let mut end = handle.watch_end();
                let name = name.clone();
                tokio::spawn(async move {
                    let died = match end.wait_for(Option::is_some).await {
                        Ok(end) => match &*end {
                            Some(TeammateEnd::Died { reason }) => Some(reason.clone()),
                            _ => None,
                        },
                        Err(_) => None,
                    };
                    if let Some(reason) = died {
                        events.send(TeamEvent::Notice {
                            text: format!(
                                "teammate {name} died ({reason}); its unfinished tasks were \
                                 returned to pending"
                            ),
                        });
                    }
                });
            }
            // Replacing an ended handle drops it (it had ended: nothing to cancel).
            lock(&self.handles).insert(name, handle);
            Ok(Vec::new())
        })
    }

    fn is_active(&self, name: &Name) -> bool {
        lock(&self.handles)
            .get(name)
            .is_some_and(|h| h.ended().is_none())
    }

    fn kill(&self, name: &Name) -> BoxFuture<'_, Result<(), ExecError>> {
        let found = lock(&self.handles).get(name).map(TeammateHandle::cancel);
        let name = name.clone();
        Box::pin(async move {
            found.ok_or(ExecError::Unknown {
                backend: "in-process",
                name,
            })
        })
    }

    fn shutdown_all(&self, _keep: bool) -> BoxFuture<'_, ()> {
        let all: Vec<TeammateHandle> = lock(&self.handles).drain().map(|(_, h)| h).collect();
        drop(all);
        Box::pin(async {})
    }

    /// An in-process teammate's router watches its inbox file itself.
    fn wake(&self, _name: &Name) -> Result<(), ExecError> {
        Ok(())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
