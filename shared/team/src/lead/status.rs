//! What the lead knows and shows about its team: each teammate's state (busy, idle,
//! dead — as observed, so a teammate whose process is gone counts as dead before anyone
//! marks it — or not started: a roster entry no process ever joined), the task list, and the one-screen summaries the UI prints (`/team`,
//! `/tasks`) and the model gets back after a compaction.
//!
//! [`spawn_monitor`] keeps a [`TeamStatus`] current while the lead's [`TeamSlot`] is
//! bound and reports changes as [`TeamEvent`]s.

use std::fmt::Write as _;
use std::time::Duration;

use roo_store::{Liveness, Member, MemberState, Name, Task, TaskStatus, Team, TeamConfig};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::binding::{TeamBinding, TeamSlot};
use crate::event::{TeamEvent, TeamEventSender, one_line};
use crate::tools::budget::{task_ranks, within_budget};

/// How often the monitor reads the team config (a dead pid changes nothing on disk, so
/// this is a poll, not a file watch).
pub const MONITOR_INTERVAL: Duration = Duration::from_millis(200);

/// Longest task subject shown in a summary line.
const SUBJECT_CHARS: usize = 100;

/// One teammate as the lead sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberStatus {
    pub name: Name,
    /// The observed state (PROTOCOL.md §4.1).
    pub state: MemberState,
    /// Dead because it stopped at the lead's request, not because it died.
    pub shut_down: bool,
}

/// The teammates of a team (the lead excluded) and their observed states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamStatus {
    pub team: Name,
    pub members: Vec<MemberStatus>,
}

impl TeamStatus {
    /// The teammates of `config`, in roster order, in the states `liveness` observes.
    pub fn of(config: &TeamConfig, liveness: &Liveness) -> TeamStatus {
        TeamStatus {
            team: config.name.clone(),
            members: teammates(config)
                .map(|m| MemberStatus {
                    name: m.name.clone(),
                    state: liveness.observed_state(m),
                    shut_down: m.shut_down(),
                })
                .collect(),
        }
    }

    /// Reads `team`'s config now.
    pub fn read(team: &Team) -> roo_store::Result<TeamStatus> {
        let config = team.config()?;
        Ok(TeamStatus::of(&config, &team.liveness(&config)?))
    }

    /// Teammates still working.
    pub fn busy(&self) -> Vec<Name> {
        self.members
            .iter()
            .filter(|m| m.state == MemberState::Busy)
            .map(|m| m.name.clone())
            .collect()
    }

    /// Teammates no process ever joined (`not started`): nobody works as them, so
    /// nobody waits for them.
    pub fn not_started(&self) -> Vec<Name> {
        self.members
            .iter()
            .filter(|m| m.state == MemberState::NotStarted)
            .map(|m| m.name.clone())
            .collect()
    }

    /// Whether every teammate is idle, dead or not started (also true without
    /// teammates): nobody is working.
    pub fn settled(&self) -> bool {
        self.members.iter().all(|m| m.state != MemberState::Busy)
    }

    /// The status line: `team T · alice busy · bob idle`.
    pub fn line(&self) -> String {
        let mut line = format!("team {}", self.team);
        if self.members.is_empty() {
            line.push_str(" · no teammates yet");
        }
        for m in &self.members {
            if m.shut_down {
                let _ = write!(line, " · {} shut down", m.name);
            } else {
                let _ = write!(line, " · {} {}", m.name, m.state);
            }
        }
        line
    }
}

/// Most names [`not_started_advice`] lists a command for.
const ADVICE_NAMES: usize = 5;

/// What a lead says of teammates of `team` that never started (`names`, not empty):
/// who, that it does not wait for them, and how to start them (`teammate alice never
/// started (…), so the lead does not wait for it; start it in another terminal with
/// `roo-worker --team demo --name alice`, or ask the lead to spawn it`).
pub fn not_started_advice(team: &Name, names: &[Name]) -> String {
    let who = match names {
        [one] => format!("teammate {one} never started"),
        [init @ .., last] => format!(
            "teammates {} and {last} never started",
            init.iter().map(Name::as_str).collect::<Vec<_>>().join(", ")
        ),
        [] => "no teammate is waiting to start".to_string(),
    };
    let commands: Vec<String> = names
        .iter()
        .take(ADVICE_NAMES)
        .map(|name| format!("`roo-worker --team {team} --name {name}`"))
        .collect();
    let more = names.len().saturating_sub(ADVICE_NAMES);
    let more = if more > 0 {
        format!(" and {more} more like them")
    } else {
        String::new()
    };
    format!(
        "{who} (no process has joined team {team} as {them}), so the lead does not \
         wait for {them}; start {each} in another terminal with {}{more}, or ask the lead to \
         spawn {them}",
        commands.join(", "),
        them = if names.len() == 1 { "it" } else { "them" },
        each = if names.len() == 1 { "it" } else { "each" },
    )
}

/// [`not_started_advice`] for the teammates of `team` that never started, read now
/// (blocking); `None` when there are none (or the team cannot be read: its other
/// readers say why).
pub fn not_started_notice(team: &Team) -> Option<String> {
    let names = TeamStatus::read(team).ok()?.not_started();
    (!names.is_empty()).then(|| {
        format!(
            "team {}: {}",
            team.name(),
            not_started_advice(team.name(), &names)
        )
    })
}

fn teammates(config: &TeamConfig) -> impl Iterator<Item = &Member> {
    config
        .members
        .iter()
        .filter(|m| !config.is_lead(m.name.as_str()))
}

/// `/team`: every member with its observed state (by `liveness`), backend, host and
/// worktree.
pub fn members_table(config: &TeamConfig, liveness: &Liveness) -> String {
    let mut out = format!("team {}", config.name);
    if !config.description.trim().is_empty() {
        let _ = write!(out, " — {}", one_line(&config.description, SUBJECT_CHARS));
    }
    out.push('\n');
    for m in &config.members {
        let role = if config.is_lead(m.name.as_str()) {
            "lead"
        } else {
            liveness.observed_state(m).label()
        };
        let _ = write!(out, "  {:<20} {:<5}", m.name.as_str(), role);
        if let Some(backend) = m.backend_type {
            let backend = serde_json::to_value(backend)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let _ = write!(out, "  {backend}");
        }
        if let Some(host) = &m.host {
            let _ = write!(out, "  on host {}", one_line(host, 64));
        }
        if let Some(pid) = m.pid {
            let _ = write!(out, "  pid {pid}");
        }
        if let Some(path) = &m.worktree_path {
            let _ = write!(out, "  {}", one_line(&path.display().to_string(), 200));
        }
        if let Some(reason) = &m.dead_reason {
            let _ = write!(out, "  ({})", one_line(reason, SUBJECT_CHARS));
        }
        out.push('\n');
    }
    if teammates(config).next().is_none() {
        out.push_str("  (no teammates yet)\n");
    }
    out
}

/// `/tasks`: one line per task: id, status, owner, subject, blockers.
pub fn tasks_table(tasks: &[Task]) -> String {
    if tasks.is_empty() {
        return "no tasks\n".to_string();
    }
    let mut out = String::new();
    for task in tasks {
        let owner = task.owner.as_ref().map_or("-", |o| o.as_str());
        let _ = write!(
            out,
            "  #{:<4} {:<11} {:<20} {}",
            task.id.as_str(),
            task.status.as_str(),
            owner,
            one_line(&task.subject, SUBJECT_CHARS)
        );
        let open_blockers: Vec<&str> = task.blocked_by.iter().map(|id| id.as_str()).collect();
        if !open_blockers.is_empty() && task.status != TaskStatus::Completed {
            let _ = write!(out, "  (blocked by #{})", open_blockers.join(", #"));
        }
        out.push('\n');
    }
    let done = tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Completed)
        .count();
    let _ = writeln!(out, "{done} of {} completed", tasks.len());
    out
}

/// Bytes of the team state a lead's model gets back after a compaction (about 2,000
/// tokens, a small part of even a 12k-token window), whatever the team holds.
pub const TEAM_STATE_BUDGET: usize = 8 * 1024;

/// Bytes of that state's list of teammates.
const ROSTER_BUDGET: usize = 2 * 1024;

/// The team state a lead's model gets back after a compaction: its team, every
/// teammate's state and the tasks not completed — within [`TEAM_STATE_BUDGET`] bytes
/// (the lead's own, in-progress and blocked tasks first), saying how many it left out
/// and how to see them. Teammates' text in it is [made safe](roo_store::model_safe).
pub fn team_summary(config: &TeamConfig, liveness: &Liveness, tasks: &[Task]) -> String {
    let mut out = format!(
        "Team state (restored after the conversation was compacted): you lead team {}.\nTeammates:",
        config.name
    );
    let roster: Vec<(u8, String)> = teammates(config)
        .map(|m| (0, format!("{} ({})", m.name, liveness.observed_state(m))))
        .collect();
    if roster.is_empty() {
        out.push_str(" none yet");
    }
    let (shown, more) = within_budget(roster, ROSTER_BUDGET);
    let _ = write!(out, " {}", shown.join(", "));
    if more > 0 {
        let _ = write!(
            out,
            " and {more} more (TaskList or `roo-mail list --team {}` lists them all)",
            config.name
        );
    }
    let open: Vec<&Task> = tasks
        .iter()
        .filter(|t| t.status != TaskStatus::Completed)
        .collect();
    let completed = tasks.len() - open.len();
    let _ = write!(
        out,
        "\nOpen tasks ({} open, {completed} completed):",
        open.len()
    );
    if open.is_empty() {
        out.push_str(" none");
    }
    let lead = config.lead().map(|m| &m.name);
    let ranks = task_ranks(&open, lead);
    let lines: Vec<((bool, usize, u8), String)> = open
        .iter()
        .zip(ranks)
        .map(|(t, rank)| {
            let line = format!(
                "- #{} [{}{}] {}",
                t.id.as_str(),
                t.status.as_str(),
                t.owner
                    .as_ref()
                    .map(|o| format!(", {o}"))
                    .unwrap_or_default(),
                one_line(&roo_store::model_safe(&t.subject), SUBJECT_CHARS)
            );
            (rank, roo_store::model_safe(&line))
        })
        .collect();
    let budget = TEAM_STATE_BUDGET.saturating_sub(out.len() + 200);
    let (shown, more) = within_budget(lines, budget);
    for line in shown {
        out.push('\n');
        out.push_str(&line);
    }
    if more > 0 {
        let _ = write!(
            out,
            "\n… {more} more open tasks not shown: TaskList shows them (filter by status or \
             owner), or `roo-task list --team {}`.",
            config.name
        );
    }
    roo_store::model_safe(&out)
}

/// Keeps the status of the team `slot` is bound to current while it is bound: reads the
/// config every [`MONITOR_INTERVAL`], attaches `events` to the binding's router (so
/// incoming messages are reported), reports each teammate's state on binding and every
/// change after ([`TeamEvent::MemberState`]), new teammates ([`TeamEvent::Joined`]) and
/// departures, and declares dead (releasing their tasks, `Team::detect_dead`) the
/// teammates whose process is gone. The receiver holds `None` while unbound. Ends with
/// `cancel`.
///
/// The router's message events pass through the monitor: a message from a teammate the
/// monitor has not reported yet (one that joined and spoke within one interval) makes it
/// read the config first, so `joined` always comes before that teammate's messages.
///
/// Returns the status, and the sender to give the lead's routers (TeamCreate's, a
/// rejoin's): their messages then pass through the monitor too.
pub fn spawn_monitor(
    slot: TeamSlot,
    events: TeamEventSender,
    cancel: CancellationToken,
) -> (watch::Receiver<Option<TeamStatus>>, TeamEventSender) {
    let (tx, rx) = watch::channel(None);
    // One channel for every binding: a router keeps the first sender attached to it.
    let (routed, mut incoming) = crate::event::team_events();
    let for_routers = routed.clone();
    tokio::spawn(async move {
        let mut bindings = slot.subscribe();
        loop {
            let binding = bindings.borrow_and_update().clone();
            let Some(binding) = binding else {
                tx.send_replace(None);
                tokio::select! {
                    changed = bindings.changed() => if changed.is_err() { return },
                    Some(event) = incoming.recv() => events.send(event),
                    _ = cancel.cancelled() => return,
                }
                continue;
            };
            binding.router.attach_events(routed.clone());
            let mut watcher = Watcher {
                slot: &slot,
                binding: &binding,
                events: &events,
                tx: &tx,
                previous: None,
                failing: false,
            };
            'reading: loop {
                if !watcher.look().await {
                    break;
                }
                let next = tokio::time::sleep(MONITOR_INTERVAL);
                tokio::pin!(next);
                loop {
                    tokio::select! {
                        _ = &mut next => continue 'reading,
                        changed = bindings.changed() => {
                            if changed.is_err() { return }
                            break 'reading;
                        }
                        Some(event) = incoming.recv() => {
                            // A teammate not reported yet: its join first.
                            let unbound = !watcher.join_first(&event).await;
                            events.send(event);
                            if unbound {
                                break 'reading;
                            }
                        }
                        _ = cancel.cancelled() => return,
                    }
                }
            }
        }
    });
    (rx, for_routers)
}

/// One binding's reading of the team: what the monitor reported last.
struct Watcher<'a> {
    slot: &'a TeamSlot,
    binding: &'a TeamBinding,
    events: &'a TeamEventSender,
    tx: &'a watch::Sender<Option<TeamStatus>>,
    previous: Option<TeamStatus>,
    failing: bool,
}

impl Watcher<'_> {
    /// Reads the team and reports what changed. `false` when another lead took the team
    /// over: this lead is unbound.
    async fn look(&mut self) -> bool {
        let binding = self.binding;
        let (team, me) = (binding.team.clone(), binding.me.clone());
        let key = binding.lead_key.as_ref().map(|k| k.public().to_hex());
        let read = tokio::task::spawn_blocking(move || observe(&team, &me, key.as_deref())).await;
        match read {
            Ok(Ok((status, deaths))) => {
                self.failing = false;
                for text in deaths {
                    self.events.send(TeamEvent::Notice { text });
                }
                for event in changes(self.previous.as_ref(), &status) {
                    self.events.send(event);
                }
                self.tx.send_replace(Some(status.clone()));
                self.previous = Some(status);
            }
            Ok(Err(e)) if e.to_string().contains(TAKEN_OVER) => {
                // Another lead owns the team now: stop reading its inbox and answering
                // for it; this lead is unbound.
                binding.router.close();
                self.slot.clear();
                self.tx.send_replace(None);
                self.events.send(TeamEvent::Notice {
                    text: format!(
                        "team {}: {e}; this lead no longer leads it",
                        binding.team.name()
                    ),
                });
                return false;
            }
            Ok(Err(e)) if !self.failing => {
                self.failing = true;
                self.events.send(TeamEvent::Notice {
                    text: format!("failed to read team {}: {e}", binding.team.name()),
                });
            }
            _ => {}
        }
        true
    }

    /// Before `event`, a message from a teammate the last reading did not show: reads
    /// the team again until it shows the sender (its join reported first), a few times
    /// 20 ms apart at most (a reading can come just before the join is seen). `false`
    /// when another lead took the team over.
    async fn join_first(&mut self, event: &TeamEvent) -> bool {
        for _ in 0..JOIN_FIRST_TRIES {
            if !self.unknown_sender(event) {
                break;
            }
            if !self.look().await {
                return false;
            }
            if self.unknown_sender(event) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        true
    }

    /// Whether `event` is a message from a teammate the last reading did not show (read
    /// once before the monitor's first reading, never for the lead itself).
    fn unknown_sender(&self, event: &TeamEvent) -> bool {
        let TeamEvent::Message { from, .. } = event else {
            return false;
        };
        *from != self.binding.me
            && self
                .previous
                .as_ref()
                .is_some_and(|p| !p.members.iter().any(|m| m.name == *from))
    }
}

/// Waits (at most `limit`) until the monitor's status shows what `team`'s config shows
/// now, so the events of every change up to now are sent: a headless lead calls it
/// before it exits, so its last lines report the states it ended on.
pub async fn monitor_caught_up(
    team: &Team,
    status: &mut watch::Receiver<Option<TeamStatus>>,
    limit: Duration,
) {
    let team = team.clone();
    let Ok(Ok(now)) = tokio::task::spawn_blocking(move || TeamStatus::read(&team)).await else {
        return;
    };
    let _ = tokio::time::timeout(limit, status.wait_for(|seen| seen.as_ref() == Some(&now))).await;
}

/// Readings a message from a teammate not reported yet waits for at most.
const JOIN_FIRST_TRIES: usize = 10;

/// What a lead's monitor reports when another `roo-lead` took its team over.
const TAKEN_OVER: &str = "the team was taken over by another roo-lead";

/// The pid of a `roo-lead` other than this process that the config now names as the
/// lead `me` (`roo-lead --team T --take-over`), if any: only another lead writes its
/// pid there, so this lead stops leading even if that one has exited since.
fn taken_over(config: &roo_store::TeamConfig, me: &Name) -> Option<u32> {
    let lead = config.lead().filter(|lead| lead.name == *me)?;
    let pid = lead.pid?;
    (pid != std::process::id()).then_some(pid)
}

/// Reads the status; declares dead the teammates whose process is gone (each reported
/// once, with the tasks released). A status never shows a death that is not declared
/// yet: the pid check is made while building the status, so a process that dies between
/// a check and the status is declared and the status read again (a few rounds at most).
fn observe(
    team: &Team,
    me: &Name,
    key: Option<&str>,
) -> roo_store::Result<(TeamStatus, Vec<String>)> {
    let mut deaths = Vec::new();
    for _ in 0..3 {
        let config = team.config()?;
        // Only this lead writes its key there: a changed key is put back, and said.
        if let Some(key) = key
            && config.lead_key.as_deref() != Some(key)
        {
            team.set_lead_key(key)?;
            deaths.push(format!(
                "the team config's lead key had been changed by someone else ({}); the lead's own key was put back, and teammates verify answers only with the key they pinned at their start",
                config.lead_key.as_deref().unwrap_or("removed")
            ));
        }
        if let Some(pid) = taken_over(&config, me) {
            return Err(roo_store::Error::NotPermitted {
                action: format!("lead team {}", team.name()),
                reason: format!("{TAKEN_OVER} (pid {pid})"),
            });
        }
        let status = TeamStatus::of(&config, &team.liveness(&config)?);
        let undeclared = status.members.iter().any(|s| {
            s.state == MemberState::Dead
                && teammates(&config).any(|m| m.name == s.name && m.state() != MemberState::Dead)
        });
        if !undeclared {
            return Ok((status, deaths));
        }
        for death in team.detect_dead(Some(me))? {
            let mut said = format!(
                "teammate {} died: {}",
                death.member.name,
                death
                    .member
                    .dead_reason
                    .as_deref()
                    .unwrap_or("unknown reason")
            );
            if !death.released.is_empty() {
                let ids: Vec<String> = death
                    .released
                    .iter()
                    .map(|r| format!("#{}", r.task.id))
                    .collect();
                let _ = write!(said, "; it was working on {}", ids.join(", "));
            }
            if death.newly_dead {
                super::tell_lead_of_death(team, me, &death.member.name, &said);
            }
            let mut text = format!(
                "{} died: {}",
                death.member.name,
                death
                    .member
                    .dead_reason
                    .as_deref()
                    .unwrap_or("unknown reason")
            );
            if !death.released.is_empty() {
                let _ = write!(
                    text,
                    "; released {} task(s) to pending",
                    death.released.len()
                );
            }
            deaths.push(text);
        }
    }
    Ok((TeamStatus::read(team)?, deaths))
}

/// The events that turn `before` into `now` (`before` `None`: every teammate's state).
fn changes(before: Option<&TeamStatus>, now: &TeamStatus) -> Vec<TeamEvent> {
    let mut out = Vec::new();
    for m in &now.members {
        let old = before.and_then(|b| b.members.iter().find(|o| o.name == m.name));
        match (before, old) {
            (Some(_), None) => {
                out.push(TeamEvent::Joined {
                    name: m.name.clone(),
                });
                out.push(TeamEvent::MemberState {
                    name: m.name.clone(),
                    state: m.state,
                });
            }
            (None, _) => out.push(TeamEvent::MemberState {
                name: m.name.clone(),
                state: m.state,
            }),
            (Some(_), Some(old)) if old.state != m.state => out.push(TeamEvent::MemberState {
                name: m.name.clone(),
                state: m.state,
            }),
            _ => {}
        }
    }
    if let Some(before) = before {
        for gone in before
            .members
            .iter()
            .filter(|o| !now.members.iter().any(|m| m.name == o.name))
        {
            out.push(TeamEvent::Notice {
                text: format!("{} left the team", gone.name),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use roo_store::{NewTask, RooHome, TaskId};

    use super::*;

    fn name(s: &str) -> Name {
        Name::parse_as("name", s).unwrap()
    }

    /// Team `crew`: lead, alice (busy), bob (idle), carol (marked dead); tasks 1 in
    /// progress by alice, 2 pending blocked by 1, 3 completed.
    fn crew(dir: &std::path::Path) -> Team {
        let home = RooHome::new(dir);
        let team_name = name("crew");
        let members = ["alice", "bob", "carol"]
            .iter()
            .map(|m| Member::new(name(m), &team_name))
            .collect();
        let team = Team::create(
            &home,
            team_name.clone(),
            "ship\nthe parser",
            Member::new(name("lead"), &team_name),
            members,
        )
        .unwrap();
        // Joined (a join records `is_active`): roster entries alone never started.
        team.set_active("alice", true).unwrap();
        team.set_active("bob", false).unwrap();
        team.mark_dead("carol", "its process 4242 is no longer running")
            .unwrap();
        let tasks = team.tasks();
        let new = |subject: &str| NewTask {
            subject: subject.to_string(),
            ..NewTask::default()
        };
        let one = tasks.create(new("Write the parser")).unwrap();
        tasks
            .create(NewTask {
                blocked_by: vec![one.id.clone()],
                ..new("Test the parser")
            })
            .unwrap();
        let three = tasks.create(new("Set up CI")).unwrap();
        let claim = roo_store::ClaimOptions::default();
        tasks.claim(&one.id, &name("alice"), &claim).unwrap();
        tasks.claim(&three.id, &name("bob"), &claim).unwrap();
        tasks
            .update(
                &three.id,
                roo_store::TaskPatch {
                    status: Some(TaskStatus::Completed),
                    by: Some(name("bob")),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(three.id, TaskId::parse("3").unwrap());
        // A subject with a control character, as written before the store refused them.
        let path = tasks.path();
        let mut doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        doc["tasks"][1]["subject"] = "Test the parser\x1b[2J".into();
        std::fs::write(&path, doc.to_string()).unwrap();
        team
    }

    #[test]
    fn the_status_line_names_every_teammate_with_its_state_and_never_the_lead() {
        let dir = tempfile::tempdir().unwrap();
        let team = crew(dir.path());
        let status = TeamStatus::read(&team).unwrap();
        assert_eq!(
            status.line(),
            "team crew · alice busy · bob idle · carol dead"
        );
        assert_eq!(status.busy(), vec![name("alice")]);
        assert!(!status.settled());
        team.set_active("alice", false).unwrap();
        assert!(
            TeamStatus::read(&team).unwrap().settled(),
            "dead counts as gone"
        );
    }

    #[test]
    fn a_teammate_no_process_joined_is_not_started_keeps_nobody_waiting_and_is_told_how_to_start() {
        let dir = tempfile::tempdir().unwrap();
        let team = crew(dir.path());
        team.add_member(Member::new(name("dave"), team.name()))
            .unwrap();
        team.set_active("alice", false).unwrap();
        let status = TeamStatus::read(&team).unwrap();
        assert_eq!(
            status.line(),
            "team crew · alice idle · bob idle · carol dead · dave not started"
        );
        assert_eq!(status.not_started(), vec![name("dave")]);
        assert!(status.busy().is_empty());
        assert!(status.settled(), "nobody waits for a member that never ran");
        let notice = not_started_notice(&team).unwrap();
        assert_eq!(
            notice,
            "team crew: teammate dave never started (no process has joined team crew as it), so \
             the lead does not wait for it; start it in another terminal with `roo-worker \
             --team crew --name dave`, or ask the lead to spawn it"
        );
        let config = team.config().unwrap();
        let table = members_table(&config, &team.liveness(&config).unwrap());
        assert!(
            table.contains("  dave                 not started\n"),
            "{table}"
        );
        // Joined, it is busy: somebody works as it now.
        team.set_active("dave", true).unwrap();
        assert!(not_started_notice(&team).is_none());
        assert_eq!(TeamStatus::read(&team).unwrap().busy(), vec![name("dave")]);
    }

    #[test]
    fn slash_team_lists_members_with_states_and_why_one_is_dead() {
        let dir = tempfile::tempdir().unwrap();
        let team = crew(dir.path());
        let config = team.config().unwrap();
        let table = members_table(&config, &team.liveness(&config).unwrap());
        let lines: Vec<&str> = table.lines().map(str::trim_end).collect();
        assert_eq!(lines[0], "team crew — ship the parser");
        assert_eq!(lines[1], "  lead                 lead");
        assert_eq!(lines[2], "  alice                busy");
        assert_eq!(lines[3], "  bob                  idle");
        assert_eq!(
            lines[4],
            "  carol                dead   (its process 4242 is no longer running)"
        );
        assert_eq!(lines.len(), 5);
        // A teammate on another host says which.
        let mut config = config;
        config.members[1].host = Some("gpu".into());
        config.members[1].pid = Some(77);
        let table = members_table(&config, &team.liveness(&config).unwrap());
        assert_eq!(
            table.lines().nth(2).unwrap().trim_end(),
            "  alice                busy   on host gpu  pid 77"
        );
    }

    #[test]
    fn slash_tasks_lists_status_owner_and_open_blockers_without_control_characters() {
        let dir = tempfile::tempdir().unwrap();
        let team = crew(dir.path());
        let tasks = team.tasks().list(&Default::default()).unwrap();
        let table = tasks_table(&tasks);
        let lines: Vec<&str> = table.lines().map(str::trim_end).collect();
        assert_eq!(
            lines,
            [
                "  #1    in_progress alice                Write the parser",
                "  #2    pending     -                    Test the parser [2J  (blocked by #1)",
                "  #3    completed   bob                  Set up CI",
                "1 of 3 completed",
            ]
        );
        assert_eq!(tasks_table(&[]), "no tasks\n");
    }

    #[test]
    fn the_summary_after_compaction_has_states_and_only_open_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let team = crew(dir.path());
        let config = team.config().unwrap();
        let tasks = team.tasks().list(&Default::default()).unwrap();
        assert_eq!(
            team_summary(&config, &team.liveness(&config).unwrap(), &tasks),
            "Team state (restored after the conversation was compacted): you lead team crew.\n\
             Teammates: alice (busy), bob (idle), carol (dead)\n\
             Open tasks (2 open, 1 completed):\n\
             - #1 [in_progress, alice] Write the parser\n\
             - #2 [pending] Test the parser\\u{1b}[2J"
        );
    }

    #[test]
    fn changes_report_new_teammates_state_changes_and_departures() {
        let status = |members: &[(&str, MemberState)]| TeamStatus {
            team: name("crew"),
            members: members
                .iter()
                .map(|(n, state)| MemberStatus {
                    name: name(n),
                    state: *state,
                    shut_down: false,
                })
                .collect(),
        };
        let first = status(&[("alice", MemberState::Busy)]);
        assert_eq!(
            changes(None, &first),
            [TeamEvent::MemberState {
                name: name("alice"),
                state: MemberState::Busy
            }]
        );
        assert!(
            changes(Some(&first), &first).is_empty(),
            "no change, no event"
        );
        let second = status(&[("alice", MemberState::Idle), ("bob", MemberState::Busy)]);
        assert_eq!(
            changes(Some(&first), &second),
            [
                TeamEvent::MemberState {
                    name: name("alice"),
                    state: MemberState::Idle
                },
                TeamEvent::Joined { name: name("bob") },
                TeamEvent::MemberState {
                    name: name("bob"),
                    state: MemberState::Busy
                },
            ]
        );
        assert_eq!(
            changes(Some(&second), &status(&[("bob", MemberState::Busy)])),
            [TeamEvent::Notice {
                text: "alice left the team".to_string()
            }]
        );
    }
}
