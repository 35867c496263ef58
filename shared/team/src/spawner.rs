//! The lead's spawner: starts named teammates on the selected backend, keeps their
//! handles, restarts a stopped one when a message is sent to it, and stops one on
//! request (the `Agent` and `TaskStop` tools, [`crate::spawner::tools`]).
//!
//! Every teammate starts through a [`TeammateExecutor`] from one [`Launch`]: the
//! teammate loop as a tokio task of the lead's process ([`InProcessExecutor`]), or, with
//! a worker executor (made for the spawner's backend by [`Spawner::set_executors`], set
//! at [`Location::Worker`], e.g. [`crate::backend::TmuxExecutor`]), a `roo-worker`
//! process in a terminal pane:
//! SendMessage to it nudges it ([`TeammateExecutor::wake`]), TaskStop and the slot's
//! clearing end its process and close its pane, [`Spawner::shutdown`] does so for all
//! at the lead's exit (unless the panes are kept), and a message to a stopped one starts
//! it in a new pane from its transcript. Each gets its own git worktree (made
//! with the lead's sandboxed [`Git`]) or, outside a repository, the lead's directory
//! (the lead is told). A new worktree is checked out while the teammate is built and
//! sends its first model request: its path, branch and the repository's shared git
//! directory (which its sandbox must let it write) are known beforehand, and its tool
//! calls wait for the checkout ([`roo_agent::tool::WorkspaceGate`] in process; for a pane's
//! `roo-worker`, the gate file of [`crate::backend::clone_gate`], its pane opened in the
//! lead's repository); if the checkout fails, the teammate is stopped before any call ran
//! and the spawn fails. A worktree
//! that exists already is checked first. It inherits the lead's provider,
//! trust (granted if the lead's project is trusted), `--no-sandbox` and max turns; its
//! permission mode may be the lead's or stricter, never looser.
//!
//! The in-process executor holds the teammates' handles (dropping one cancels its
//! teammate): in-process teammates end when the spawner's `runtime` token is cancelled
//! (the lead exits), when the lead's team slot is cleared or rebound (TeamDelete), or at
//! [`Spawner::shutdown`].

mod checkout;
pub mod output;
mod remote;
mod rewind;
mod running;
pub mod tools;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use roo_agent::config::HostConfig;
use roo_agent::permissions::PermissionMode;
use roo_store::{BackendType, MemberLogin, MemberRoles, Name, ROO_STORE_ENV, Team};
use tokio_util::sync::CancellationToken;

use crate::backend::{
    BackendError, ExecError, ExecutorTable, InProcessExecutor, Launch, LeadBackends, Location,
    TeammateExecutor,
};
use crate::binding::{TeamBinding, TeamSlot};
use crate::event::TeamEventSender;
use crate::settings::{AgentSettings, Identity};
use crate::teammate::TeammateEnd;
use crate::tools::OnSent;
use crate::worktree::{Discovered, Git, LeadRepo, Workspace};

use checkout::blocking;
use running::{Entry, Recipe, Running, lock};

/// What every teammate of this lead inherits, known once the lead is built.
#[derive(Clone)]
pub struct TeammateBase {
    /// A template for each teammate's settings: `roo_home`, `llm`, `provider` (shared
    /// with the lead), `trust`, `no_sandbox`, `sandbox_helper`, `max_turns`, extra
    /// tools. Identity, cwd, project root, mode and session are set per teammate.
    pub settings: AgentSettings,
    /// The lead's permission mode: a teammate's default, the loosest it may get, and
    /// its mode after an approved plan.
    pub lead_mode: PermissionMode,
    /// The git that creates worktrees; without a sandbox of its own it runs in the
    /// sandbox of the lead's Agent call.
    pub git: Git,
    /// The trust the lead's own config load came to (`--trust-project`, its trust
    /// list or the user's answer): handed to a teammate on another host with the
    /// project config, where it is final.
    pub project_trusted: bool,
    /// The config's `member_roles`: whether a teammate in a process of its own gets a
    /// member role of the PostgreSQL store instead of the lead's login.
    pub member_roles: MemberRoles,
}

/// What the Agent tool asks for.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    pub name: Name,
    pub prompt: String,
    pub agent_type: Option<String>,
    pub model: Option<String>,
    pub plan_mode_required: bool,
    pub permission_mode: Option<PermissionMode>,
    /// The lead's working directory (the worktree is made in its repository).
    pub cwd: PathBuf,
    /// The launcher of the lead's tool call: git runs with it.
    pub launcher: roo_agent::exec::Launcher,
    /// A host of the user's `hosts:` to run it on (over ssh) instead of this machine.
    pub host: Option<Name>,
}

/// Why a teammate could not be spawned or stopped. Read after "failed to ".
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error(
        "spawn a teammate: you lead no team; create one with TeamCreate, then spawn (if TeamCreate failed, its error says why and what to do)"
    )]
    NoTeam,
    /// `a` and digits (`a3`) are the ids of background tasks, which TaskStop takes
    /// next to teammate names: a teammate of that name would be ambiguous.
    #[error(
        "spawn teammate {name}: names like `a3` are reserved for background task ids; pick \
         another name"
    )]
    ReservedName { name: Name },
    #[error("spawn a teammate: only the team's lead ({lead}) may spawn teammates")]
    NotLead { lead: Name },
    #[error(
        "spawn {name}: this lead cannot open {backend} panes here (see the note it \
         printed at start, and docs/BACKENDS.md); run the lead with --teammate-mode \
         in-process"
    )]
    Backend { name: Name, backend: String },
    #[error(
        "spawn {name}: a teammate of that name is already running; message it with \
         SendMessage, stop it with TaskStop, or pick another name"
    )]
    AlreadyRunning { name: Name },
    #[error(
        "spawn {name}: permission mode {asked} is less strict than the lead's ({lead}); \
         use {lead} or a stricter mode"
    )]
    LooserMode {
        name: Name,
        asked: PermissionMode,
        lead: PermissionMode,
    },
    #[error("spawn {name}: the spawner is not ready (the lead is still being built)")]
    NotReady { name: Name },
    #[error("prepare the worktree of {name}: {message}")]
    Worktree { name: Name, message: String },
    #[error("start {name}: {source}")]
    Teammate {
        name: Name,
        source: Box<crate::teammate::TeammateError>,
    },
    #[error(
        "stop {name}: no teammate of that name was spawned by this lead in team {team}; \
         a roo-worker started by hand is stopped with SendMessage type shutdown_request"
    )]
    NotSpawned { name: Name, team: Name },
    #[error("{source}")]
    Pane { name: Name, source: Box<ExecError> },
    #[error("spawn {name} on host {host}: {why}")]
    Host { name: Name, host: Name, why: String },
    #[error(
        "spawn {name}: member roles: not here: {why}; `member_roles: required` in your \
         config refuses to hand {name} the lead's login (docs/DISTRIBUTED.md)"
    )]
    MemberRolesRequired { name: Name, why: String },
    #[error("spawn {name}: {message}")]
    MemberRole { name: Name, message: String },
}

/// What a spawn did, for the lead's model.
#[derive(Debug, Clone)]
pub struct Spawned {
    pub name: Name,
    /// Its working directory (its worktree, or the shared directory).
    pub work_dir: PathBuf,
    /// Its branch, with a worktree.
    pub branch: Option<String>,
    /// Things the lead should know (shared directory, reused worktree, dirty tree).
    pub notices: Vec<String>,
    /// The host it runs on (`None`: this machine).
    pub host: Option<Name>,
}

struct Inner {
    slot: TeamSlot,
    backend: BackendType,
    events: Option<TeamEventSender>,
    base: OnceLock<TeammateBase>,
    running: Mutex<HashMap<Name, Entry>>,
    runtime: tokio::runtime::Handle,
    /// Where teammates run, by location (the in-process executor's too).
    executors: ExecutorTable,
    /// The in-process executor (it holds the teammates' handles and says how their
    /// loops ended), as set up here.
    in_process: Arc<InProcessExecutor>,
    /// The hosts of the user's `hosts:` that have an executor: where a teammate's clone
    /// there is made.
    hosts: OnceLock<BTreeMap<Name, HostConfig>>,
    /// Whether the lead was told that this store gives no member roles (said once).
    told_no_roles: std::sync::atomic::AtomicBool,
    /// The names being spawned now: a second spawn of one is refused before it makes
    /// anything (its member role would replace the first one's).
    spawning: Mutex<std::collections::HashSet<Name>>,
}

/// A name reserved while its spawn runs ([`Inner::spawning`]); released on drop.
struct Reserved {
    inner: Arc<Inner>,
    name: Name,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        lock(&self.inner.spawning).remove(&self.name);
    }
}

/// The lead's teammates. Cheap to clone; all clones share the handles.
#[derive(Clone)]
pub struct Spawner {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawner")
            .field("backend", &self.inner.backend)
            .field("running", &self.names())
            .finish_non_exhaustive()
    }
}

impl Spawner {
    /// A spawner for the lead whose team is `slot`, on `backend`, reporting to `events`.
    /// Its teammates are stopped when `lifetime` is cancelled and when the slot is
    /// cleared or bound to another team. Call from inside a tokio runtime.
    pub fn new(
        slot: TeamSlot,
        backend: BackendType,
        events: Option<TeamEventSender>,
        lifetime: CancellationToken,
    ) -> Spawner {
        let in_process = Arc::new(InProcessExecutor::new(events.clone()));
        let spawner = Spawner {
            inner: Arc::new(Inner {
                slot: slot.clone(),
                backend,
                executors: ExecutorTable::new(in_process.clone()),
                in_process,
                events,
                base: OnceLock::new(),
                running: Mutex::new(HashMap::new()),
                runtime: tokio::runtime::Handle::current(),
                hosts: OnceLock::new(),
                told_no_roles: std::sync::atomic::AtomicBool::new(false),
                spawning: Mutex::new(Default::default()),
            }),
        };
        spawner.inner.in_process.set_on_sent(spawner.on_sent());
        // A weak reference: the watcher must not keep the handles alive.
        let weak = Arc::downgrade(&spawner.inner);
        tokio::spawn(async move {
            let mut bindings = slot.subscribe();
            loop {
                let team = bindings
                    .borrow_and_update()
                    .as_ref()
                    .map(|b| b.team.name().clone());
                if let Some(inner) = weak.upgrade() {
                    let stopped: Vec<Entry> = {
                        let mut running = lock(&inner.running);
                        let gone: Vec<Name> = running
                            .iter()
                            .filter(|(_, e)| Some(&e.team) != team.as_ref())
                            .map(|(n, _)| n.clone())
                            .collect();
                        gone.iter().filter_map(|n| running.remove(n)).collect()
                    };
                    for entry in &stopped {
                        entry.handle.stop(&inner.runtime);
                    }
                    drop(stopped);
                } else {
                    return;
                }
                tokio::select! {
                    changed = bindings.changed() => if changed.is_err() { break },
                    () = lifetime.cancelled() => break,
                }
            }
            if let Some(inner) = weak.upgrade() {
                let all: Vec<Entry> = lock(&inner.running).drain().map(|(_, e)| e).collect();
                drop(all);
                drop(inner.in_process.shutdown_all(false));
            }
        });
        spawner
    }

    /// Gives the spawner what teammates inherit; the first call wins.
    pub fn set_base(&self, base: TeammateBase) {
        let _ = self.inner.base.set(base);
    }

    /// Gives the spawner the executor the teammates of `location` run on (for
    /// [`Location::Worker`], one of this spawner's backend); the first call for a
    /// location wins. See [`ExecutorTable`].
    pub fn set_executor(&self, location: Location, executor: Arc<dyn TeammateExecutor>) {
        self.inner.executors.set(location, executor);
    }

    /// Makes the executors of this spawner's backend and of `backends.hosts` and sets
    /// them in its table ([`ExecutorTable::fill`]); the first call wins.
    pub fn set_executors(&self, backends: &LeadBackends) -> Result<(), BackendError> {
        if self.inner.hosts.get().is_some() {
            return Ok(());
        }
        self.inner.executors.fill(self.inner.backend, backends)?;
        let _ = self.inner.hosts.set(backends.hosts.clone());
        Ok(())
    }

    /// The names of the hosts teammates may run on (empty: none configured).
    pub fn host_names(&self) -> Vec<Name> {
        self.inner.executors.hosts()
    }

    /// Ends what the lead's teammates leave behind when the lead exits: in-process
    /// teammates are cancelled; pane teammates are shut down (SIGTERM, then their panes
    /// closed) unless `keep_panes`, in which case they keep running in their panes.
    pub async fn shutdown(&self, keep_panes: bool) {
        let all: Vec<Entry> = lock(&self.inner.running).drain().map(|(_, e)| e).collect();
        let roles: Vec<((Team, String), Name)> = all
            .iter()
            .filter_map(|e| Some((e.handle.role_of.clone()?, e.handle.name.clone())))
            .collect();
        drop(all);
        self.inner.executors.shutdown_all(keep_panes).await;
        // Their processes ended: so do their logins. Kept panes keep theirs.
        if !keep_panes {
            for ((team, role), name) in roles {
                running::drop_member_role(team, name, role).await;
            }
        }
    }

    /// Sends in-process teammates' agent events, tagged with their names, to `output`
    /// (for a UI that shows them beside the lead's); the first call wins. Teammates
    /// spawned before the call keep discarding theirs.
    pub fn set_output(&self, output: output::TeammateOutput) {
        self.inner.in_process.set_output(output);
    }

    /// The lead's `Agent` and `TaskStop` for the builder ([`crate::ToolSet::spawn_tools`]):
    /// over the agent's sub-agents where it has some (`Agent` without a `name` starts a
    /// sub-agent, `TaskStop` stops background tasks too), else this spawner's alone.
    pub fn spawn_tools(&self) -> crate::settings::SpawnTools {
        let spawner = self.clone();
        Arc::new(
            move |subagents: Option<&roo_agent::subagent::SubagentRuntime>| {
                let Some(runtime) = subagents else {
                    return spawner.tools();
                };
                let (agent_tool, _) = runtime.tools();
                vec![
                    Arc::new(tools::AgentTool::new(spawner.clone()).with_subagents(agent_tool)),
                    Arc::new(
                        tools::TaskStop::new(spawner.clone()).with_tasks(runtime.tasks().clone()),
                    ),
                ]
            },
        )
    }

    /// The lead's spawn and stop tools (`Agent`, `TaskStop`) for this spawner.
    pub fn tools(&self) -> Vec<Arc<dyn roo_agent::tool::Tool>> {
        vec![
            Arc::new(tools::AgentTool::new(self.clone())),
            Arc::new(tools::TaskStop::new(self.clone())),
        ]
    }

    /// Whether the lead is in a team now (a named Agent call spawns a teammate).
    pub fn in_team(&self) -> bool {
        self.inner.slot.get().is_some_and(|b| b.is_lead())
    }

    /// The backend teammates are spawned on.
    pub fn backend(&self) -> BackendType {
        self.inner.backend
    }

    /// The names of the teammates whose loop is running.
    pub fn names(&self) -> Vec<Name> {
        let mut names: Vec<Name> = lock(&self.inner.running)
            .iter()
            .filter(|(_, e)| e.handle.running())
            .map(|(n, _)| n.clone())
            .collect();
        names.sort();
        names
    }

    /// How a spawned teammate's current loop ended (`None` while it runs or if unknown).
    pub fn ended(&self, name: &Name) -> Option<TeammateEnd> {
        let running = lock(&self.inner.running);
        let entry = running.get(name)?;
        (entry.handle.location == Location::InProcess)
            .then(|| self.inner.in_process.ended(name))
            .flatten()
    }

    /// The hook for the lead's [`TeamTools`]: a message sent to a teammate of this
    /// spawner whose loop ended (shut down, stopped, died) starts it again from its
    /// transcript, where it takes up the message.
    pub fn on_sent(&self) -> OnSent {
        let weak = Arc::downgrade(&self.inner);
        Arc::new(move |to: &Name| {
            if let Some(inner) = weak.upgrade() {
                Spawner { inner }.restart_if_stopped(to);
            }
        })
    }

    /// Spawns a teammate. See the module documentation.
    pub async fn spawn(&self, request: SpawnRequest) -> Result<Spawned, SpawnError> {
        let binding = self.lead_binding()?;
        let (base, mode) = self.admit(&request)?;
        // Reserved until this spawn ends: a second spawn of the name meanwhile is refused
        // before its member role would replace this one's.
        let _reserved = self.reserve(&request.name)?;
        // Decided before anything is made: `required` where roles are refused leaves
        // nothing behind.
        let (member_role, role_notice) = self.member_role_plan(&binding, &base, &request).await?;
        if let Some(host) = request.host.clone() {
            let mut spawned = self
                .spawn_remote(request, host, binding, base, mode, member_role)
                .await?;
            spawned.notices.extend(role_notice);
            return Ok(spawned);
        }
        let name = request.name.clone();
        let git = base.git.clone().in_launcher_of(&request.launcher);
        let discovered = {
            let (cwd, git) = (request.cwd.clone(), git.clone());
            blocking(&name, move || LeadRepo::discover(&cwd, &git)).await?
        };
        let team = binding.team.name().clone();
        // A new clone is made while the teammate starts (in process or in a pane). A pane's
        // worker starts its MCP servers (the lead's, as configured) in the clone at once:
        // with servers configured, its clone is made first.
        let worker_mcp = self.inner.backend != BackendType::InProcess
            && matches!(base.settings.mcp, crate::settings::McpPlan::Shared(_));
        let planned = match &discovered {
            Discovered::Repo(_) if worker_mcp => None,
            Discovered::Repo(repo) => repo
                .planned_worktree(&team, &name)
                .zip(repo.git_dir().map(Path::to_path_buf))
                .map(|((path, branch), _)| (repo.clone(), path, branch)),
            Discovered::Shared { .. } => None,
        };
        let recipe = Recipe {
            host: None,
            member_role,
            settings: teammate_settings(&base, &binding, &request, mode),
            plan_mode_required: request.plan_mode_required,
            mode_after_plan: base.lead_mode,
            agent_type: request.agent_type.clone(),
            model: request.model.clone(),
            work_dir: PathBuf::new(),
            clone_dir: None,
        };
        let (mut handle, recipe, workspace) = match planned {
            Some((repo, path, branch)) => {
                self.start_during_checkout(&binding, &request, recipe, repo, path, branch)
                    .await?
            }
            None => {
                self.start_in_workspace(&binding, &request, recipe, discovered)
                    .await?
            }
        };
        let mut notices = workspace.notices();
        notices.append(&mut handle.notices);
        notices.extend(role_notice);
        let (work_dir, branch) = match &workspace {
            Workspace::Worktree(w) => (w.path.clone(), Some(w.branch.clone())),
            Workspace::Shared { dir, .. } => (dir.clone(), None),
        };
        self.register(&binding, &name, handle, recipe)?;
        Ok(Spawned {
            name,
            work_dir,
            branch,
            notices,
            host: None,
        })
    }

    /// Whether `request` may spawn now (a name that is no task id, a backend that can
    /// start it, a built lead, a mode no looser than the lead's, a name not running):
    /// what teammates inherit, and its permission mode.
    fn admit(&self, request: &SpawnRequest) -> Result<(TeammateBase, PermissionMode), SpawnError> {
        let name = request.name.clone();
        if is_task_id(name.as_str()) {
            return Err(SpawnError::ReservedName { name });
        }
        let location = self.location_of_host(None);
        if self.inner.executors.executor_for(&location).is_none() {
            return Err(SpawnError::Backend {
                name,
                backend: backend_name(self.inner.backend),
            });
        }
        let base = self
            .inner
            .base
            .get()
            .cloned()
            .ok_or_else(|| SpawnError::NotReady { name: name.clone() })?;
        let mode = request.permission_mode.unwrap_or(base.lead_mode);
        if roo_agent::config::strictness(mode) < roo_agent::config::strictness(base.lead_mode) {
            return Err(SpawnError::LooserMode {
                name,
                asked: mode,
                lead: base.lead_mode,
            });
        }
        if self.is_running(&name) {
            return Err(SpawnError::AlreadyRunning { name });
        }
        Ok((base, mode))
    }

    /// Reserves `name` for a spawn: refused while another spawn of it runs, or it runs.
    fn reserve(&self, name: &Name) -> Result<Reserved, SpawnError> {
        let mut spawning = lock(&self.inner.spawning);
        if spawning.contains(name) || self.is_running(name) {
            return Err(SpawnError::AlreadyRunning { name: name.clone() });
        }
        spawning.insert(name.clone());
        Ok(Reserved {
            inner: self.inner.clone(),
            name: name.clone(),
        })
    }

    /// Whether `request`'s teammate gets a member role of its own (a process of its
    /// own — a pane, another host — on the PostgreSQL store, with `member_roles` not
    /// `off`, where the server allows them), and what the lead is told when `auto`
    /// falls back to its own login; refused under `required` where roles are not
    /// possible.
    async fn member_role_plan(
        &self,
        binding: &TeamBinding,
        base: &TeammateBase,
        request: &SpawnRequest,
    ) -> Result<(bool, Option<String>), SpawnError> {
        let own_process = request.host.is_some() || self.inner.backend != BackendType::InProcess;
        let Some(pg) = binding.team.home().pg().cloned() else {
            return Ok((false, None));
        };
        if !own_process || base.member_roles == MemberRoles::Off {
            return Ok((false, None));
        }
        let name = request.name.clone();
        let failed = |message: String| SpawnError::MemberRole {
            name: name.clone(),
            message: format!("failed to check for member roles: {message}"),
        };
        let why = tokio::task::spawn_blocking(move || pg.member_roles_unavailable())
            .await
            .map_err(|e| failed(e.to_string()))?
            .map_err(|e| failed(e.to_string()))?;
        let Some(why) = why else {
            return Ok((true, None));
        };
        if base.member_roles == MemberRoles::Required {
            return Err(SpawnError::MemberRolesRequired { name, why });
        }
        Ok((false, Some(self.no_roles_notice(&name, &why))))
    }

    /// What the lead is told when `auto` gives teammate `name` the lead's login since
    /// member roles are not possible (`why`): said once in the lead's status and log, and
    /// returned for each spawn's output.
    fn no_roles_notice(&self, name: &Name, why: &str) -> String {
        let notice =
            format!("member roles: not here: {why}; teammate {name} uses the lead's login");
        let first = !self
            .inner
            .told_no_roles
            .swap(true, std::sync::atomic::Ordering::Relaxed);
        if first {
            tracing::warn!("{notice}");
            if let Some(events) = &self.inner.events {
                events.send(crate::event::TeamEvent::Notice {
                    text: notice.clone(),
                });
            }
        }
        notice
    }

    /// `login`, made for teammate `name` at `location`, once the server has let it in
    /// with exactly the URL and password its process will be handed
    /// (`PgStore::check_member_login`, off the runtime). Refused (its `pg_hba.conf`
    /// admits the lead's login but not the member's): the role is dropped, and under
    /// `member_roles: required` the start fails; else the lead's login is handed over,
    /// with the notice of [`Spawner::no_roles_notice`].
    async fn checked_login(
        &self,
        binding: &TeamBinding,
        name: &Name,
        location: &Location,
        settings: &AgentSettings,
        login: Arc<MemberLogin>,
    ) -> Result<(Option<Arc<MemberLogin>>, Option<String>), SpawnError> {
        let Some(lead_url) = handed_lead_url(settings, location) else {
            // Not handed over at all: the hand-over itself fails and says why.
            return Ok((Some(login), None));
        };
        let checked = login.clone();
        let refused = tokio::task::spawn_blocking(move || {
            roo_store::PgStore::check_member_login(&checked, &lead_url)
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|checked| checked);
        let Err(sentence) = refused else {
            return Ok((Some(login), None));
        };
        running::drop_member_role(binding.team.clone(), name.clone(), login.role().to_owned())
            .await;
        let why = format!("the server refused the member role's login ({sentence})");
        let required = self
            .inner
            .base
            .get()
            .is_some_and(|base| base.member_roles == MemberRoles::Required);
        if required {
            return Err(SpawnError::MemberRolesRequired {
                name: name.clone(),
                why,
            });
        }
        Ok((None, Some(self.no_roles_notice(name, &why))))
    }

    pub(crate) fn lead_binding(&self) -> Result<Arc<TeamBinding>, SpawnError> {
        let binding = self.inner.slot.get().ok_or(SpawnError::NoTeam)?;
        if !binding.is_lead() {
            return Err(SpawnError::NotLead {
                lead: binding.lead.clone(),
            });
        }
        Ok(binding)
    }

    /// Where a teammate runs: on `host`, else on this spawner's backend.
    fn location_of_host(&self, host: Option<&Name>) -> Location {
        match host {
            Some(host) => Location::Host(host.clone()),
            None if self.inner.backend == BackendType::InProcess => Location::InProcess,
            None => Location::Worker,
        }
    }

    /// Starts `recipe`'s teammate on the executor of its location ([`ExecutorTable`]).
    async fn start(
        &self,
        binding: &TeamBinding,
        name: &Name,
        recipe: Recipe,
        prompt: String,
    ) -> Result<Running, SpawnError> {
        let location = self.location_of_host(recipe.host.as_ref());
        let executor = match (self.inner.executors.executor_for(&location), &location) {
            (Some(executor), _) => executor,
            (None, Location::Host(host)) => {
                return Err(self
                    .host_config(name, host)
                    .err()
                    .unwrap_or_else(|| SpawnError::NotReady { name: name.clone() }));
            }
            (None, _) => {
                return Err(SpawnError::Backend {
                    name: name.clone(),
                    backend: backend_name(self.inner.backend),
                });
            }
        };
        // Its role, made again at each start (a new one replaces the old, whose
        // sessions end), off the runtime.
        let login = match binding.team.home().pg() {
            Some(pg) if recipe.member_role && location != Location::InProcess => {
                let (pg, team, member) = (pg.clone(), binding.team.name().clone(), name.clone());
                let made =
                    tokio::task::spawn_blocking(move || pg.create_member_role(&team, &member))
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|made| made.map_err(|e| e.to_string()));
                Some(Arc::new(made.map_err(|message| {
                    SpawnError::MemberRole {
                        name: name.clone(),
                        message: format!("failed to {message}"),
                    }
                })?))
            }
            _ => None,
        };
        // Let in where it is handed over, or (`auto`) the lead's login after all.
        let (login, role_notice) = match login {
            Some(login) => {
                self.checked_login(binding, name, &location, &recipe.settings, login)
                    .await?
            }
            None => (None, None),
        };
        let role_of = login
            .as_ref()
            .map(|login| (binding.team.clone(), login.role().to_string()));
        let mut launch = launch(binding, name, recipe, prompt);
        launch.member_login = login;
        let notices = match executor.spawn(launch).await {
            Ok(notices) => notices,
            Err(source) => {
                if let Some((team, role)) = role_of {
                    running::drop_member_role(team, name.clone(), role).await;
                }
                return Err(SpawnError::Pane {
                    name: name.clone(),
                    source: Box::new(source),
                });
            }
        };
        let mut notices = notices;
        notices.extend(role_notice);
        Ok(Running {
            location,
            executor,
            name: name.clone(),
            notices,
            role_of,
        })
    }
}

/// The lead's store URL the worker at `location` is handed (its handoff's `ROO_STORE`,
/// as `backend::pane::write_handoff` and `backend::ssh::handoff_env` make it), from
/// which its member role's URL is made; `None` when it is no PostgreSQL URL.
fn handed_lead_url(settings: &AgentSettings, location: &Location) -> Option<String> {
    let url = match location {
        Location::Host(_) => crate::backend::ssh::handoff_env(settings).remove(ROO_STORE_ENV),
        _ => settings.store_setting.clone().or_else(|| {
            roo_agent::exec::sandbox::handoff::current_env_for_handoff().remove(ROO_STORE_ENV)
        }),
    };
    url.filter(|url| url.starts_with("postgres"))
}

/// A teammate's settings from the lead's template: its identity in `binding`'s team,
/// its `mode`, and another model (with its own provider, built from the lead's flags)
/// if `request` asks for one. Where it works is set by the caller.
fn teammate_settings(
    base: &TeammateBase,
    binding: &TeamBinding,
    request: &SpawnRequest,
    mode: PermissionMode,
) -> AgentSettings {
    let mut settings = base.settings.clone();
    settings.identity = Identity::teammate(
        request.name.clone(),
        binding.team.name().clone(),
        binding.lead.clone(),
    );
    settings.permission_mode = Some(mode);
    if let Some(model) = &request.model {
        settings.llm.model = Some(model.clone());
        settings.provider = None;
    }
    settings
}

/// The one [`Launch`] of a teammate: `recipe` for `name` of `binding`'s team, with
/// `prompt` (empty: it resumes from its transcript) and the lead's key pinned.
fn launch(binding: &TeamBinding, name: &Name, recipe: Recipe, prompt: String) -> Launch {
    Launch {
        team: binding.team.clone(),
        name: name.clone(),
        lead: binding.lead.clone(),
        prompt,
        settings: recipe.settings,
        plan_mode_required: recipe.plan_mode_required,
        mode_after_plan: recipe.mode_after_plan,
        agent_type: recipe.agent_type,
        model: recipe.model,
        work_dir: recipe.work_dir,
        color: None,
        tools: Vec::new(),
        lead_key: binding.lead_key.as_ref().map(|k| k.public().to_hex()),
        member_login: None,
    }
}

fn backend_name(backend: BackendType) -> String {
    serde_json::to_value(backend)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{backend:?}"))
}

/// Whether `name` has the form of a background task id (`a` and digits, any case).
pub fn is_task_id(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a' | 'A')) && name.len() > 1 && chars.all(|c| c.is_ascii_digit())
}
