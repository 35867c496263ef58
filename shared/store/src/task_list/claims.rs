//! Who holds a task: claiming one (by id, the next ready one, one assigned to the
//! claimer), renewing a lease, assigning a task, reclaiming tasks from owners that are
//! gone, and which tasks are ready to claim. The rest of [`TaskList`] (creating,
//! editing, deleting tasks and their dependencies) stays in `task_list.rs`; both go
//! through the one locked change, `TaskList::update_doc`.

use std::cell::RefCell;

use super::*;
use crate::team::Member;

impl TaskList {
    /// Atomically claims task `id` for `owner`: succeeds only if it is pending, unowned (or
    /// pre-assigned to `owner`), all blockers are completed and (unless ignored) its scope
    /// overlaps no in-progress task of another owner. Sets owner, `in_progress` and a lease
    /// in the same write. Claiming a task one already holds renews its lease. A lease
    /// longer than [`crate::authority::MAX_MEMBER_LEASE`] is the lead's (not permitted
    /// for any other claimer).
    pub fn claim(&self, id: &TaskId, owner: &Name, options: &ClaimOptions) -> Result<ClaimOutcome> {
        check_lease("claim", id, options.lease)?;
        self.update_doc(Some(owner), |config, list| {
            self.check_claimer(config, "claim", id, owner)?;
            let index = list.tasks.iter().position(|t| &t.id == id);
            self.authorize_claim(config, owner, index.map(|i| &list.tasks[i]), options.lease)?;
            let Some(index) = index else {
                return Ok(Outcome::Keep(ClaimOutcome::NotFound));
            };
            if list.tasks[index].owner.as_ref() != Some(owner)
                || list.tasks[index].status != TaskStatus::InProgress
            {
                let lead = Role::of(config, Some(owner)) == Role::Lead;
                self.refuse_unpaid_claim(list, Some(&list.tasks[index]), owner, lead)?;
            }
            let outcome = claim_at(list, index, owner, options);
            Ok(match outcome {
                ClaimOutcome::Claimed(_) => Outcome::Write(outcome),
                _ => Outcome::Keep(outcome),
            })
        })
    }

    /// [`claim`](Self::claim) only if task `id` is still pending and pre-assigned to
    /// `owner` (a spawn that made the task for its teammate, once the teammate runs):
    /// `Ok(None)`, writing nothing, when it is not (completed, released, reassigned or
    /// gone). One locked write, so a teammate's own change in between stands.
    pub fn claim_assigned(
        &self,
        id: &TaskId,
        owner: &Name,
        options: &ClaimOptions,
    ) -> Result<Option<ClaimOutcome>> {
        check_lease("claim", id, options.lease)?;
        self.update_doc(Some(owner), |config, list| {
            self.check_claimer(config, "claim", id, owner)?;
            self.authorize_claim(config, owner, None, options.lease)?;
            let Some(index) = list.tasks.iter().position(|t| {
                &t.id == id && t.status == TaskStatus::Pending && t.owner.as_ref() == Some(owner)
            }) else {
                return Ok(Outcome::Keep(None));
            };
            let lead = Role::of(config, Some(owner)) == Role::Lead;
            self.refuse_unpaid_claim(list, Some(&list.tasks[index]), owner, lead)?;
            let outcome = claim_at(list, index, owner, options);
            Ok(match outcome {
                ClaimOutcome::Claimed(_) => Outcome::Write(Some(outcome)),
                _ => Outcome::Keep(Some(outcome)),
            })
        })
    }

    /// Atomically claims the first ready task (lowest id) for `owner`, if any.
    pub fn claim_next(&self, owner: &Name, options: &ClaimOptions) -> Result<Option<Task>> {
        check_lease("claim", &TaskId::from_number(0), options.lease)?;
        self.update_doc(Some(owner), |config, list| {
            self.check_claimer(config, "claim", &TaskId::from_number(0), owner)?;
            self.authorize_claim(config, owner, None, options.lease)?;
            let lead = Role::of(config, Some(owner)) == Role::Lead;
            self.refuse_unpaid_claim(list, None, owner, lead)?;
            let report = ready_report(list);
            // A ready task whose own cap is spent is left; if only such tasks are ready,
            // the claim is refused naming the first.
            let mut unpaid = None;
            for task in report.ready {
                let Some(index) = list.tasks.iter().position(|t| t.id == task.id) else {
                    continue;
                };
                if spend::task_cap_reached(list, owner, &task.id) {
                    unpaid.get_or_insert(index);
                    continue;
                }
                if let ClaimOutcome::Claimed(task) = claim_at(list, index, owner, options) {
                    return Ok(Outcome::Write(Some(*task)));
                }
            }
            if let Some(index) = unpaid {
                self.refuse_unpaid_claim(list, Some(&list.tasks[index]), owner, lead)?;
            }
            Ok(Outcome::Keep(None))
        })
    }

    /// Renews `owner`'s lease on task `id` for `lease` from now.
    pub fn renew(&self, id: &TaskId, owner: &Name, lease: Duration) -> Result<Task> {
        check_lease("renew", id, lease)?;
        self.update_doc(Some(owner), |config, list| {
            let index = self.index(list, id)?;
            let task = &list.tasks[index];
            may(
                Some(owner),
                Role::of(config, Some(owner)),
                Some(task),
                &TaskChange::Renew { lease },
            )
            .map_err(Error::from)?;
            let task = &mut list.tasks[index];
            if task.status != TaskStatus::InProgress || task.owner.as_ref() != Some(owner) {
                return Err(Error::NotPermitted {
                    action: format!("renew the lease on task {id} for {owner}"),
                    reason: format!(
                        "the task is {} and owned by {}; claim it first",
                        task.status,
                        task.owner.as_ref().map_or("nobody", Name::as_str)
                    ),
                });
            }
            let now = Timestamp::now();
            let lease = match task.lease.take() {
                Some(mut l) => {
                    l.renewed_at = now;
                    l.expires_at = now.plus(lease);
                    l
                }
                None => new_lease(owner.clone(), now, lease),
            };
            task.lease = Some(lease);
            task.updated_at = now;
            Ok(Outcome::Write(task.clone()))
        })
    }

    /// Returns in-progress (or pre-assigned) tasks whose owner `gone` judges gone to the
    /// ready set: status `pending`, no owner, no lease, and a note with the reason `gone`
    /// gives. `gone` sees each owned, unfinished task and the current time.
    pub fn reclaim_where(
        &self,
        by: Option<&Name>,
        gone: impl Fn(&Task, Timestamp) -> Option<String>,
    ) -> Result<Vec<Reclaimed>> {
        self.reclaim_in_team(by, None, |_| Ok(&gone))
    }

    /// [`TaskList::reclaim_where`] whose `gone` is made by `judge` from the team's config,
    /// as the change reads it (once per run of the change); the reserved requests of
    /// `gone_member`, if given, are dropped in the same write.
    fn reclaim_in_team<G: Fn(&Task, Timestamp) -> Option<String>>(
        &self,
        by: Option<&Name>,
        gone_member: Option<&Name>,
        judge: impl Fn(&TeamConfig) -> Result<G>,
    ) -> Result<Vec<Reclaimed>> {
        self.update_doc(by, |config, list| {
            let gone = judge(config)?;
            let dropped = gone_member.is_some_and(|m| TaskList::drop_reservations(list, m));
            let now = Timestamp::now();
            let mut reclaimed = Vec::new();
            for task in list.tasks.iter_mut() {
                if task.status == TaskStatus::Completed {
                    continue;
                }
                let Some(owner) = task.owner.clone() else {
                    continue;
                };
                let Some(reason) = gone(task, now) else {
                    continue;
                };
                task.status = TaskStatus::Pending;
                task.owner = None;
                task.lease = None;
                task.updated_at = now;
                push_note(
                    task,
                    now,
                    by.cloned(),
                    format!("reclaimed from {owner}: {reason}"),
                );
                reclaimed.push(Reclaimed {
                    task: task.clone(),
                    previous_owner: owner,
                    reason,
                });
            }
            Ok(if reclaimed.is_empty() && !dropped {
                Outcome::Keep(reclaimed)
            } else {
                Outcome::Write(reclaimed)
            })
        })
    }

    /// Returns every unfinished task of `owner` (in progress or pre-assigned) to the ready
    /// set with the note `"reclaimed from <owner>: <reason>"`, recorded as written by
    /// `by`, and drops the requests `owner` reserved (they will not be answered). What the
    /// lead does when a teammate dies or leaves ([`Team::declare_dead`] calls it).
    pub fn release_owner(
        &self,
        owner: &Name,
        by: Option<&Name>,
        reason: &str,
    ) -> Result<Vec<Reclaimed>> {
        let gone = |task: &Task, _| (task.owner.as_ref() == Some(owner)).then(|| reason.to_owned());
        self.reclaim_in_team(by, Some(owner), |_| Ok(&gone))
    }

    /// Reclaims the tasks of every owner that is gone by the team config's own account:
    /// not a member, marked dead, or gone by the store's test (files: a recorded pid that
    /// is not alive; PostgreSQL: a free presence lock) — or whose lease expired
    /// ([`crate::Liveness::live_member_names`], [`owner_gone`]).
    ///
    /// A free presence lock counts only as [`Team::detect_dead`] counts it: free on every
    /// look over [`crate::ABSENCE_WINDOW`], the last look under the config's lock (a
    /// member reconnecting after a dropped connection is not gone). When no owner's lock
    /// is free this is one change, as before (PostgreSQL: the held locks read in its
    /// first round trip); when one is, that owner's tasks are left in that change, the
    /// lock is looked at again over the window ([`Team::still_gone`]), and a second
    /// change releases the tasks of the owners whose lock stayed free — same entry, same
    /// epoch, lock still free on that change's own look.
    pub fn reclaim_gone(&self, by: Option<&Name>) -> Result<Vec<Reclaimed>> {
        // The store's test of liveness, read under the config's share lock (PostgreSQL:
        // every held presence lock, read in the change's first round trip).
        let _presence = crate::pg::want_presence();
        let first_look = std::time::Instant::now();
        // Owners of unfinished tasks whose presence lock was free on the first look,
        // and the config that look judged (for the looks again).
        let suspects = RefCell::new(Vec::<Member>::new());
        let judged = RefCell::new(None::<TeamConfig>);
        let mut reclaimed = self.reclaim_in_team(by, None, |config| {
            suspects.borrow_mut().clear();
            let liveness = self.team.liveness(config)?;
            *judged.borrow_mut() = Some(config.clone());
            Ok(self.judge_gone(config, &liveness, &[], Some(&suspects)))
        })?;
        let (suspects, Some(config)) = (suspects.into_inner(), judged.into_inner()) else {
            return Ok(reclaimed);
        };
        if suspects.is_empty() {
            return Ok(reclaimed);
        }
        let confirmed = self.team.still_gone(&config, suspects, first_look)?;
        if confirmed.is_empty() {
            return Ok(reclaimed);
        }
        reclaimed.extend(self.reclaim_in_team(by, None, |config| {
            let liveness = self.team.liveness(config)?;
            Ok(self.judge_gone(config, &liveness, &confirmed, None))
        })?);
        Ok(reclaimed)
    }

    /// Which owned, unfinished task [`TaskList::reclaim_gone`] releases, by `liveness`
    /// read for `config`: [`owner_gone`], except that an owner not marked dead whose
    /// presence lock is free counts as gone only if it is in `confirmed` with the same
    /// epoch (its lock stayed free over the absence window); otherwise it is pushed to
    /// `suspects` (once) and its task kept unless its lease expired.
    fn judge_gone<'a>(
        &self,
        config: &TeamConfig,
        liveness: &crate::Liveness,
        confirmed: &'a [Member],
        suspects: Option<&'a RefCell<Vec<Member>>>,
    ) -> impl Fn(&Task, Timestamp) -> Option<String> + use<'a> {
        let pg = self.team.home().engine().proves_presence();
        let absent: Vec<Member> = config
            .members
            .iter()
            .filter(|m| {
                pg && m.epoch.is_some()
                    && m.dead_at.is_none()
                    && liveness.evidence(m) == Some(false)
            })
            .cloned()
            .collect();
        let mut live = liveness.live_member_names(config);
        live.extend(absent.iter().map(|m| m.name.clone()));
        move |task: &Task, now| {
            if let Some(member) = task
                .owner
                .as_ref()
                .and_then(|owner| absent.iter().find(|m| &m.name == owner))
            {
                if confirmed
                    .iter()
                    .any(|c| c.name == member.name && c.epoch == member.epoch)
                {
                    return Some(format!(
                        "{} is no longer a live member of the team (its presence stayed gone)",
                        member.name
                    ));
                }
                if let Some(suspects) = suspects {
                    let mut suspects = suspects.borrow_mut();
                    if !suspects.iter().any(|s| s.name == member.name) {
                        suspects.push(member.clone());
                    }
                }
            }
            owner_gone(task, now, &live)
        }
    }

    /// Sets `to` as the owner of task `id` on `by`'s behalf, in one locked write, and
    /// records the note `"assigned to <to> by <by>"`. A pending task stays pending
    /// (pre-assigned: only `to` can claim it); an in-progress task gets a new lease for
    /// `to`. Giving a task away is the lead's, or `force`'s (PROTOCOL.md §6.3,
    /// authority). A completed task is refused. Repeating the task's latest
    /// assignment (same owner, same `by`, its note still the last) writes nothing. Sends
    /// nothing: [`Team::assign_task`] sends the `task_assignment` after this write.
    pub fn assign(&self, id: &TaskId, to: &Name, by: &Name, force: bool) -> Result<Task> {
        self.update_doc(Some(by), |config, list| {
            let index = self.index(list, id)?;
            let task = &list.tasks[index];
            if task.status == TaskStatus::Completed {
                return Err(self.invalid(
                    "assign",
                    id,
                    "it is completed; reopen it (--status pending) before assigning it",
                ));
            }
            let note = format!("assigned to {to} by {by}");
            if task.owner.as_ref() == Some(to) && task.notes.last().is_some_and(|n| n.text == note)
            {
                // The same assignment again (a retry): nothing to write.
                return Ok(Outcome::Keep(task.clone()));
            }
            let change = format!("owner {} -> {to}", owner_str(task.owner.as_ref()));
            let forced = self.authorize_in(
                config,
                Some(by),
                force,
                task,
                &TaskChange::Update {
                    what: &change,
                    owner: (task.owner.as_ref() != Some(to)).then_some(Some(to)),
                    claim: task.owner.as_ref() != Some(to),
                    status: None,
                    edits: false,
                },
            )?;
            let now = Timestamp::now();
            let task = &mut list.tasks[index];
            task.owner = Some(to.clone());
            if task.status == TaskStatus::InProgress
                && task.lease.as_ref().is_none_or(|l| &l.owner != to)
            {
                task.lease = Some(new_lease(to.clone(), now, DEFAULT_LEASE));
            }
            if let Some(text) = forced {
                push_note(task, now, Some(by.clone()), text);
            }
            push_note(task, now, Some(by.clone()), note);
            task.updated_at = now;
            let task = task.clone();
            self.check_limits("assign", &task)?;
            Ok(Outcome::Write(task))
        })
    }

    /// Reclaims tasks whose owner is not in `live_members`, or whose lease has expired.
    pub fn reclaim(&self, by: Option<&Name>, live_members: &[Name]) -> Result<Vec<Reclaimed>> {
        self.reclaim_where(by, |task, now| owner_gone(task, now, live_members))
    }

    /// Pending, unowned tasks whose blockers are all completed and whose scope does not
    /// overlap an in-progress task's, in id order.
    pub fn ready(&self) -> Result<Vec<Task>> {
        Ok(self.ready_report()?.ready)
    }

    /// [`TaskList::ready`], plus the tasks held back only by scope.
    pub fn ready_report(&self) -> Result<ReadyReport> {
        Ok(ready_report(&self.load()?))
    }
}

/// Task `index` of `list` claimed for `owner` if it may be now (see [`TaskList::claim`]);
/// else why not.
fn claim_at(
    list: &mut TaskListDoc,
    index: usize,
    owner: &Name,
    options: &ClaimOptions,
) -> ClaimOutcome {
    let task = &list.tasks[index];
    if let Some(current) = &task.owner
        && current != owner
    {
        return ClaimOutcome::AlreadyOwned {
            owner: current.clone(),
            status: task.status,
        };
    }
    let now = Timestamp::now();
    match task.status {
        TaskStatus::InProgress => {
            // Ours already (checked above): renew.
            let task = &mut list.tasks[index];
            task.lease = Some(match task.lease.take() {
                Some(mut l) => {
                    l.renewed_at = now;
                    l.expires_at = now.plus(options.lease);
                    l
                }
                None => new_lease(owner.clone(), now, options.lease),
            });
            task.updated_at = now;
            return ClaimOutcome::Claimed(Box::new(task.clone()));
        }
        TaskStatus::Completed => {
            return ClaimOutcome::NotPending {
                status: task.status,
            };
        }
        TaskStatus::Pending => {}
    }
    let unfinished = unfinished_blockers(list, &task.id);
    if !unfinished.is_empty() {
        return ClaimOutcome::Blocked { by: unfinished };
    }
    if !options.ignore_scope
        && let Some(other) = list.tasks.iter().find(|o| {
            o.status == TaskStatus::InProgress
                && o.owner.as_ref() != Some(owner)
                && scopes_overlap(&o.paths, &task.paths)
        })
    {
        return ClaimOutcome::ScopeConflict {
            with: other.id.clone(),
            owner: other.owner.clone(),
        };
    }
    let task = &mut list.tasks[index];
    task.owner = Some(owner.clone());
    task.status = TaskStatus::InProgress;
    task.lease = Some(new_lease(owner.clone(), now, options.lease));
    task.updated_at = now;
    ClaimOutcome::Claimed(Box::new(task.clone()))
}

fn ready_report(list: &TaskListDoc) -> ReadyReport {
    let mut report = ReadyReport::default();
    let in_progress: Vec<&Task> = list
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::InProgress)
        .collect();
    let mut candidates: Vec<&Task> = list
        .tasks
        .iter()
        .filter(|t| {
            t.status == TaskStatus::Pending
                && t.owner.is_none()
                && unfinished_blockers(list, &t.id).is_empty()
        })
        .collect();
    candidates.sort_by_key(|t| t.id.number());
    for task in candidates {
        match in_progress
            .iter()
            .find(|o| scopes_overlap(&o.paths, &task.paths))
        {
            Some(other) => report.held_back.push((task.clone(), other.id.clone())),
            None => report.ready.push(task.clone()),
        }
    }
    report
}
