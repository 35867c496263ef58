//! Which events a change makes: derived from what the change wrote (a message stored, a
//! member marked dead, a task list before and after), never from what a caller says, so
//! every path to a change logs it the same way. Each draft names its actor (the member
//! acting, the lead when none is known) and that actor's epoch from the team's config.

use super::{ApprovalRequest, Draft, EventKind};
use crate::limits::MAX_EVENT_IDS;
use crate::name::Name;

/// The events of a message stored for `recipient`: `message_sent`, and for a question or
/// an answer `approval_asked` / `approval_answered` (and `plan_approved`). As its sender.
pub(crate) fn sent(
    message: &crate::message::Message,
    recipient: &Name,
    config: &crate::team::TeamConfig,
) -> Vec<Draft> {
    use crate::message::{MessageBody, PermissionDecision};
    let from = message.from.to_string();
    let to = recipient.to_string();
    let epoch = epoch_of(config, &from);
    let mut kinds = vec![EventKind::MessageSent {
        id: message.id.as_str().to_owned(),
        from: from.clone(),
        to: to.clone(),
        message_type: message.body.type_name().to_owned(),
        summary: message.summary.clone(),
    }];
    let asked = |request, request_id: &String| EventKind::ApprovalAsked {
        request,
        request_id: request_id.clone(),
        from: from.clone(),
        to: to.clone(),
    };
    let answered = |request, request_id: &String, approved| EventKind::ApprovalAnswered {
        request,
        request_id: request_id.clone(),
        by: from.clone(),
        to: to.clone(),
        approved,
    };
    match &message.body {
        MessageBody::PermissionRequest { request_id, .. } => {
            kinds.push(asked(ApprovalRequest::Permission, request_id));
        }
        MessageBody::PlanApprovalRequest { request_id, .. } => {
            kinds.push(asked(ApprovalRequest::Plan, request_id));
        }
        MessageBody::PermissionResponse {
            request_id,
            decision,
            ..
        } => kinds.push(answered(
            ApprovalRequest::Permission,
            request_id,
            *decision == PermissionDecision::Allow,
        )),
        MessageBody::PlanApprovalResponse {
            request_id,
            approve,
            ..
        } => {
            kinds.push(answered(ApprovalRequest::Plan, request_id, *approve));
            if *approve {
                kinds.push(EventKind::PlanApproved {
                    member: to.clone(),
                    request_id: request_id.clone(),
                });
            }
        }
        _ => {}
    }
    kinds
        .into_iter()
        .map(|kind| Draft::new(kind, from.clone(), epoch))
        .collect()
}

/// The `message_delivered` events of messages taken from `recipient`'s inbox (at most
/// [`MAX_EVENT_IDS`] ids each). As the recipient.
pub(crate) fn delivered(recipient: &Name, taken: &[crate::message::Message]) -> Vec<Draft> {
    taken
        .chunks(MAX_EVENT_IDS)
        .map(|chunk| {
            Draft::new(
                EventKind::MessageDelivered {
                    to: recipient.to_string(),
                    ids: chunk.iter().map(|m| m.id.as_str().to_owned()).collect(),
                },
                recipient.to_string(),
                None,
            )
        })
        .collect()
}

/// The epoch `actor`'s entry in `config` records, if any.
pub(crate) fn epoch_of(config: &crate::team::TeamConfig, actor: &str) -> Option<u64> {
    config.member(actor).and_then(|m| m.epoch)
}

/// Who acts for a change made without a member's identity (a `roo-mail` command, the
/// runtime's roster changes): the team's lead.
pub(crate) fn lead_of(config: &crate::team::TeamConfig) -> String {
    config
        .lead()
        .map(|lead| lead.name.to_string())
        .unwrap_or_else(|| "lead".to_owned())
}

/// `team_created`, as its lead.
pub(crate) fn team_created(lead: &crate::team::Member) -> Draft {
    Draft::new(
        EventKind::TeamCreated {
            lead: lead.name.to_string(),
        },
        lead.name.to_string(),
        None,
    )
}

/// `spawn` of a member added to the roster, as the lead.
pub(crate) fn spawned(config: &crate::team::TeamConfig, member: &crate::team::Member) -> Draft {
    let lead = lead_of(config);
    let epoch = epoch_of(config, &lead);
    Draft::new(
        EventKind::Spawn {
            member: member.name.to_string(),
            backend: member
                .backend_type
                .as_ref()
                .and_then(|b| serde_json::to_value(b).ok())
                .and_then(|v| v.as_str().map(str::to_owned)),
        },
        lead,
        epoch,
    )
}

/// `member_removed`, as the lead.
pub(crate) fn removed(config: &crate::team::TeamConfig, member: &crate::team::Member) -> Draft {
    let lead = lead_of(config);
    let epoch = epoch_of(config, &lead);
    Draft::new(
        EventKind::MemberRemoved {
            member: member.name.to_string(),
        },
        lead,
        epoch,
    )
}

/// `join` of `member` (its entry as joined), as itself.
pub(crate) fn joined(member: &crate::team::Member) -> Draft {
    Draft::new(
        EventKind::Join {
            member: member.name.to_string(),
        },
        member.name.to_string(),
        member.epoch,
    )
}

/// `death` of `member` (or `shutdown`, when it stopped at the lead's request), as `by`
/// (the lead when `None`).
pub(crate) fn died(
    config: &crate::team::TeamConfig,
    member: &crate::team::Member,
    by: Option<&Name>,
    reason: &str,
) -> Draft {
    let actor = by.map(Name::to_string).unwrap_or_else(|| lead_of(config));
    let epoch = epoch_of(config, &actor);
    let kind = if reason == crate::team::SHUT_DOWN_REASON {
        EventKind::Shutdown {
            member: member.name.to_string(),
        }
    } else {
        EventKind::Death {
            member: member.name.to_string(),
            reason: reason.to_owned(),
        }
    };
    Draft::new(kind, actor, epoch)
}

/// What a task list change's events are derived from: each task's status, owner and
/// number of notes before the change.
pub(crate) struct TaskMarks(Vec<TaskMark>);

struct TaskMark {
    id: crate::task::TaskId,
    status: crate::task::TaskStatus,
    owner: Option<Name>,
    notes: usize,
}

impl TaskMarks {
    pub(crate) fn of(list: &crate::task_list_doc::TaskListDoc) -> TaskMarks {
        TaskMarks(
            list.tasks
                .iter()
                .map(|t| TaskMark {
                    id: t.id.clone(),
                    status: t.status,
                    owner: t.owner.clone(),
                    notes: t.notes.len(),
                })
                .collect(),
        )
    }

    /// The events of the change from these marks to `list`, as `actor` (the lead when
    /// `None`), in task order.
    pub(crate) fn changes(
        &self,
        list: &crate::task_list_doc::TaskListDoc,
        config: &crate::team::TeamConfig,
        actor: Option<&Name>,
    ) -> Vec<Draft> {
        use crate::task::TaskStatus;
        let actor = actor
            .map(Name::to_string)
            .unwrap_or_else(|| lead_of(config));
        let epoch = epoch_of(config, &actor);
        let mut kinds = Vec::new();
        let owner_of = |o: &Option<Name>| o.as_ref().map(Name::to_string);
        for task in &list.tasks {
            let id = task.id.to_string();
            let Some(before) = self.0.iter().find(|m| m.id == task.id) else {
                kinds.push(EventKind::TaskCreated {
                    task: id.clone(),
                    subject: task.subject.clone(),
                });
                if let Some(owner) = &task.owner {
                    kinds.push(EventKind::TaskAssigned {
                        task: id,
                        owner: owner.to_string(),
                    });
                }
                continue;
            };
            if before.status == task.status && before.owner == task.owner {
                continue;
            }
            let new_note = task
                .notes
                .last()
                .filter(|_| task.notes.len() != before.notes)
                .map(|n| n.text.clone());
            kinds.push(match (task.status, &task.owner) {
                (TaskStatus::Completed, owner) => EventKind::TaskCompleted {
                    task: id,
                    owner: owner_of(owner),
                },
                (TaskStatus::InProgress, Some(owner)) => EventKind::TaskClaimed {
                    task: id,
                    owner: owner.to_string(),
                },
                (TaskStatus::Pending, None) if before.owner.is_some() => EventKind::TaskReleased {
                    task: id,
                    owner: owner_of(&before.owner),
                    reason: new_note.unwrap_or_else(|| "released".to_owned()),
                },
                (TaskStatus::Pending, Some(owner)) if before.owner != task.owner => {
                    EventKind::TaskAssigned {
                        task: id,
                        owner: owner.to_string(),
                    }
                }
                (status, _) => EventKind::TaskStatus {
                    task: id,
                    status: status.to_string(),
                },
            });
        }
        for gone in self
            .0
            .iter()
            .filter(|m| !list.tasks.iter().any(|t| t.id == m.id))
        {
            kinds.push(EventKind::TaskStatus {
                task: gone.id.to_string(),
                status: "deleted".to_owned(),
            });
        }
        kinds
            .into_iter()
            .map(|kind| Draft::new(kind, actor.clone(), epoch))
            .collect()
    }
}
