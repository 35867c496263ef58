//! Spawning a teammate on another host of the user's `hosts:`: the host's configuration,
//! its clone made there from the lead's commit over ssh, and the lead's project config and
//! instructions handed over with it (the clone is the teammate's to write, so nothing is
//! read from it). Apart because only this path needs the PostgreSQL store and ssh.

use std::path::Path;
use std::sync::Arc;

use roo_agent::config::{HandedProjectConfig, HostConfig};
use roo_agent::permissions::PermissionMode;
use roo_store::Name;

use crate::binding::TeamBinding;
use crate::worktree::{self, Discovered, LeadRepo};

use super::checkout::blocking;
use super::running::Recipe;
use super::{SpawnError, SpawnRequest, Spawned, Spawner, TeammateBase, teammate_settings};

/// Largest total of the project instructions handed to a teammate on another host.
const MAX_HANDED_INSTRUCTIONS: usize = 256 * 1024;

/// What a teammate on another host is handed, read in the lead's tree `root`: the
/// project's config files, the lead's trust decision on them, and its `ROOCODE.md`
/// instructions (read under that config's deny rules, at most
/// [`MAX_HANDED_INSTRUCTIONS`]). Its error reads after "failed to …".
fn handed_project(
    root: &Path,
    roo_home: &Path,
    trusted: bool,
) -> Result<HandedProjectConfig, String> {
    use roo_agent::config::{ConfigFiles, ProjectTrust};
    let mut handed = HandedProjectConfig::read(root, trusted)
        .map_err(|e| format!("read its project config: {e}"))?;
    let trust = if trusted {
        ProjectTrust::Trusted
    } else {
        ProjectTrust::Untrusted
    };
    let config = ConfigFiles::load_handed(roo_home, &handed, trust)
        .map_err(|e| format!("read its project config: {e}"))?;
    let filter = roo_agent::permissions::PermissionPolicy::new(
        root.to_path_buf(),
        PermissionMode::Default,
        config.rules(),
    )
    .read_filter();
    let read = roo_agent::instruction_parts(Some(root), None, &|path: &Path| filter.denied(path));
    let size: usize = read.parts.iter().map(String::len).sum();
    if size > MAX_HANDED_INSTRUCTIONS {
        return Err(format!(
            "hand over its project instructions: ROOCODE.md in {} with what it includes is \
             {size} bytes, more than the {} KiB a teammate on another host takes; shorten it",
            root.display(),
            MAX_HANDED_INSTRUCTIONS / 1024
        ));
    }
    handed.instructions = read.parts;
    Ok(handed)
}

impl Spawner {
    /// The configuration of `host`, or an error naming the configured hosts.
    pub(super) fn host_config(&self, name: &Name, host: &Name) -> Result<HostConfig, SpawnError> {
        if let Some(config) = self.inner.hosts.get().and_then(|h| h.get(host)) {
            return Ok(config.clone());
        }
        let configured = self.host_names();
        Err(SpawnError::Host {
            name: name.clone(),
            host: host.clone(),
            why: if configured.is_empty() {
                "no hosts are configured; add `hosts:` to your own config \
                 ($ROO_HOME/config.yaml, see docs/BACKENDS.md)"
                    .to_string()
            } else {
                format!(
                    "no such host; the configured ones are {}",
                    configured
                        .iter()
                        .map(Name::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
        })
    }

    /// [`Spawner::spawn`] on another host: its clone made there (from the lead's commit,
    /// over ssh), then its `roo-worker` started there (`SshExecutor`). The team must be
    /// on the PostgreSQL store: the other host cannot see this machine's files.
    pub(super) async fn spawn_remote(
        &self,
        request: SpawnRequest,
        host: Name,
        binding: Arc<TeamBinding>,
        base: TeammateBase,
        mode: PermissionMode,
        member_role: bool,
    ) -> Result<Spawned, SpawnError> {
        let name = request.name.clone();
        let host_config = self.host_config(&name, &host)?;
        let host_error = |why: String| SpawnError::Host {
            name: name.clone(),
            host: host.clone(),
            why,
        };
        if binding.team.home().pg().is_none() {
            return Err(host_error(
                "the team is kept in files under ROO_HOME on this machine, which the other \
                 host cannot see; run the lead on the PostgreSQL store (ROO_STORE=postgresql://… \
                 or `store:` in your config, reachable from that host; see docs/BACKENDS.md)"
                    .to_string(),
            ));
        }
        // A socket or loopback URL names a server on whatever machine reads it: on that
        // host, another server (or any local user listening on the port, asking for the
        // password in clear text).
        if let Some(here) = binding
            .team
            .home()
            .pg()
            .and_then(|pg| pg.only_this_machine())
        {
            return Err(host_error(format!(
                "the store URL names only {here}, which on host {host} is that machine, not \
                 this one: the teammate would reach another server there, or whatever local \
                 program listens on the port and asks for the password; give the lead a URL \
                 with the server's network name or address, reachable from {host} (see \
                 docs/DISTRIBUTED.md)"
            )));
        }
        let remote = worktree::RemoteRepo::of(&host_config).map_err(&host_error)?;
        let git = base.git.clone().in_launcher_of(&request.launcher);
        let discovered = {
            let (cwd, git) = (request.cwd.clone(), git.clone());
            blocking(&name, move || LeadRepo::discover(&cwd, &git)).await?
        };
        let repo = match discovered {
            Discovered::Repo(repo) => repo,
            Discovered::Shared { dir, .. } => {
                return Err(host_error(format!(
                    "{} is not in a git repository with a commit, and a teammate on another \
                     host works in a clone of it; commit first",
                    dir.display()
                )));
            }
        };
        // Its project config is the lead's, read here in the lead's tree and handed over
        // with its environment: the clone there is the teammate's to write, so a worker
        // started there never reads project config from it.
        let project_config = {
            let root = repo.root().to_path_buf();
            let trusted = base.project_trusted;
            let roo_home = base.settings.roo_home.clone();
            tokio::task::spawn_blocking(move || handed_project(&root, &roo_home, trusted))
                .await
                .map_err(|e| host_error(e.to_string()))?
                .map_err(&host_error)?
        };
        let team = binding.team.name().clone();
        let made = {
            let (repo, team, member, remote) =
                (repo.clone(), team.clone(), name.clone(), remote.clone());
            blocking(&name, move || {
                repo.add_remote_worktree(&team, &member, &remote)
            })
            .await?
        };
        let mut settings = teammate_settings(&base, &binding, &request, mode);
        settings.cwd = Some(made.path.clone());
        settings.project_root = Some(made.path.clone());
        // The lead's repository is not there: its config goes with the handoff.
        settings.config_root = None;
        settings.project_config = Some(project_config);
        let recipe = Recipe {
            host: Some(host.clone()),
            member_role,
            settings,
            plan_mode_required: request.plan_mode_required,
            mode_after_plan: base.lead_mode,
            agent_type: request.agent_type.clone(),
            model: request.model.clone(),
            work_dir: made.path.clone(),
            clone_dir: None,
        };
        let handle = match self
            .start(&binding, &name, recipe.clone(), request.prompt)
            .await
        {
            Ok(handle) => handle,
            Err(e) => {
                let (made, remote) = (made.clone(), remote.clone());
                if let Err(undo) =
                    blocking(&name, move || repo.discard_remote(&made, &remote)).await
                {
                    tracing::warn!("could not remove the clone of refused teammate {name}: {undo}");
                }
                return Err(e);
            }
        };
        let mut handle = handle;
        let mut notices = made.notices.clone();
        notices.append(&mut handle.notices);
        if let Some(why) = binding.team.home().pg().and_then(|pg| pg.unverified_tls()) {
            notices.push(unverified_store_notice(&name, &host, &why));
        }
        self.register(&binding, &name, handle, recipe)?;
        Ok(Spawned {
            name,
            work_dir: made.path,
            branch: Some(made.branch),
            notices,
            host: Some(host),
        })
    }
}

/// What the lead is told when teammate `name` on `host` was handed a store URL that does
/// not check the server's identity (`why`, from `PgStore::unverified_tls`).
fn unverified_store_notice(name: &Name, host: &Name, why: &str) -> String {
    format!(
        "warning: {name} on host {host} was given the lead's store URL, and its {why}: \
         anyone on the network path from {host} to the server can read and change the \
         team's messages and tasks; give the URL sslmode=verify-full with \
         sslrootcert=<the server's CA> (the default when sslmode is not written; see \
         docs/DISTRIBUTED.md)"
    )
}
