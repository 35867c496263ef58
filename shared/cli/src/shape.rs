//! The JSON objects `roo-mail` and `roo-task` print besides the store's own records: one
//! struct per shape, its fields in the order docs/PROTOCOL.md §7 lists them.
//!
//! A message, a task and a member are always serialized by their store struct
//! ([`Message`], [`Task`], [`Member`]), printed alone or nested in a shape here, so each
//! has one key order in every command. Nothing the CLIs print goes through
//! `serde_json::json!` or `serde_json::Value`: their maps sort keys alphabetically, so a
//! task nested in one would print in another order than `roo-task get` prints it.

use std::path::PathBuf;

use roo_store::{BackendType, Member, MemberState, Message, Name, Task, TaskId, TaskStatus};
use serde::Serialize;

/// One row of `roo-mail list --json`: the fields it shares with a member object come in
/// the member's order, then the row's own.
#[derive(Serialize, Debug)]
pub struct MemberRow {
    pub name: String,
    pub agent_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_type: Option<BackendType>,
    pub is_active: bool,
    pub lead: bool,
    pub state: MemberState,
    pub unread: usize,
    /// The member's model spend in this team (tokens, requests, USD where priced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spend: Option<roo_store::TaskUsage>,
    /// The member's spending cap, if any (its own, or the team's default for members).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<roo_store::budget::SpendCap>,
}

/// `roo-mail status --json`: where a message is and its receipts, then the message. The
/// fields it shares with a message object come in the message's order.
#[derive(Serialize, Debug)]
pub struct MessageStatus<'a> {
    pub id: &'a str,
    pub inbox: &'a str,
    pub state: &'a str,
    pub archived: bool,
    pub timestamp: String,
    pub read: bool,
    pub delivered_at: Option<String>,
    pub acknowledged_at: Option<String>,
    pub message: &'a Message,
}

/// `roo-mail ack --json`.
#[derive(Serialize, Debug)]
pub struct Acknowledged {
    /// How many messages were acknowledged.
    pub acknowledged: usize,
}

/// One recipient of a send that failed for others, and the id its copy has.
#[derive(Serialize, Debug)]
pub struct Recipient<'a> {
    pub to: &'a str,
    pub id: &'a str,
}

/// One recipient a send did not reach, and why.
#[derive(Serialize, Debug)]
pub struct Undelivered {
    pub to: String,
    pub error: String,
}

/// `roo-mail send --json` when some recipients were not reached.
#[derive(Serialize, Debug)]
pub struct PartialSend<'a> {
    /// The idempotency key to retry with (`--id`), if the send had one.
    pub key: Option<&'a str>,
    pub delivered: Vec<Recipient<'a>>,
    pub already_delivered: Vec<Recipient<'a>>,
    pub failed: Vec<Undelivered>,
    /// How to deliver to the rest.
    pub retry: String,
}

/// `team join --json`: the entry now, and the one it took over (if any).
#[derive(Serialize, Debug)]
pub struct Joined<'a> {
    pub member: &'a Member,
    pub replaced: Option<&'a Member>,
}

/// `team mark-dead --json`: the member, whether this call marked it, and the tasks it
/// released.
#[derive(Serialize, Debug)]
pub struct MarkedDead<'a> {
    pub member: &'a Member,
    pub newly_dead: bool,
    pub released: Vec<&'a Task>,
}

/// `team delete --json`.
#[derive(Serialize, Debug)]
pub struct TeamDeleted<'a> {
    pub deleted: &'a Name,
}

/// `doctor --json`; `presence` only on the PostgreSQL store.
#[derive(Serialize, Debug)]
pub struct Quarantine<'a> {
    pub quarantined: &'a [PathBuf],
    pub acknowledged: &'a [PathBuf],
    /// The team's task list is missing as damage (present only then): `"missing"`, or
    /// `"restored"` when `--acknowledge` started an empty one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_list: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence: Option<Presence>,
}

/// `doctor --json`'s `presence`: the presence connection's keepalive settings as the
/// server applies them (`null`: a setting this server lacks), and how fast a death is seen.
#[derive(Serialize, Debug)]
pub struct Presence {
    pub unix_socket: bool,
    pub settings: serde_json::Map<String, serde_json::Value>,
    pub detects_in_seconds: bool,
    pub verdict: String,
}

impl Presence {
    pub fn of(settings: &roo_store::PresenceSettings) -> Presence {
        Presence {
            unix_socket: settings.unix_socket,
            settings: settings
                .server
                .iter()
                .map(|(name, value)| {
                    (
                        name.clone(),
                        value
                            .clone()
                            .map_or(serde_json::Value::Null, serde_json::Value::String),
                    )
                })
                .collect(),
            detects_in_seconds: settings.detects_in_seconds(),
            verdict: settings.verdict(),
        }
    }
}

/// The one JSON line on stderr of a `--json` command that met damaged data.
#[derive(Serialize, Debug)]
pub struct Warnings<'a> {
    pub program: &'a str,
    pub warnings: &'a [String],
    pub quarantined: &'a [PathBuf],
}

/// `roo-task assign --json`.
#[derive(Serialize, Debug)]
pub struct Assigned<'a> {
    pub task: &'a Task,
    pub message: &'a Message,
}

/// One row of `roo-task reclaim --json`.
#[derive(Serialize, Debug)]
pub struct Reclaimed<'a> {
    pub task: &'a Task,
    pub previous_owner: &'a Name,
    pub reason: &'a str,
}

/// A refused `roo-task claim --json`: `{"claimed": false, "id", "reason", ...details}`
/// (no `id` for `claim --next`).
#[derive(Serialize, Debug)]
pub struct ClaimRefused<'a> {
    pub claimed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a TaskId>,
    #[serde(flatten)]
    pub refusal: ClaimRefusal<'a>,
}

/// Why a claim was refused (`reason`), with its details.
#[derive(Serialize, Debug)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum ClaimRefusal<'a> {
    AlreadyOwned {
        owner: &'a Name,
        status: TaskStatus,
    },
    Blocked {
        blocked_by: &'a [TaskId],
    },
    NotPending {
        status: TaskStatus,
    },
    ScopeConflict {
        with: &'a TaskId,
        owner: Option<&'a Name>,
    },
    NoneReady,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use roo_store::{MessageBody, MessageId, NewTask, RooHome, Team, Timestamp};

    use super::*;

    fn task() -> Task {
        let home = tempfile::tempdir().unwrap();
        let team = Team::create(
            &RooHome::new(home.path()),
            Name::parse("t").unwrap(),
            "",
            Member::new(Name::parse("lead").unwrap(), &Name::parse("t").unwrap()),
            Vec::new(),
        )
        .unwrap();
        let mut new = NewTask {
            subject: "the parser".into(),
            description: "zebra first, alpha last".into(),
            paths: vec!["src/".into()],
            ..NewTask::default()
        };
        new.metadata.insert("k".into(), serde_json::json!(1));
        team.tasks().create(new).unwrap()
    }

    fn message() -> Message {
        Message {
            id: MessageId::from_string("m-1"),
            from: Name::parse("lead").unwrap(),
            to: "alice".into(),
            body: MessageBody::TaskAssignment {
                task_id: "1".into(),
            },
            text: "take it".into(),
            summary: Some("task 1: the parser".into()),
            timestamp: Timestamp::from_unix_ms(0),
            read: false,
            delivered_at: None,
            acknowledged_at: None,
            signature: None,
        }
    }

    fn compact<T: Serialize>(value: &T) -> String {
        serde_json::to_string(value).unwrap()
    }

    /// A record nested in a shape prints exactly as it prints alone: same keys, same
    /// order (`json!` would have sorted them).
    #[test]
    fn nested_records_keep_their_own_key_order() {
        let (task, message) = (task(), message());
        let member = Member::new(Name::parse("alice").unwrap(), &Name::parse("t").unwrap());
        let owner = Name::parse("bob").unwrap();
        let assigned = compact(&Assigned {
            task: &task,
            message: &message,
        });
        assert!(assigned.contains(&compact(&task)), "{assigned}");
        assert!(assigned.contains(&compact(&message)), "{assigned}");
        let reclaimed = compact(&Reclaimed {
            task: &task,
            previous_owner: &owner,
            reason: "gone",
        });
        assert!(reclaimed.contains(&compact(&task)), "{reclaimed}");
        let dead = compact(&MarkedDead {
            member: &member,
            newly_dead: true,
            released: vec![&task],
        });
        assert!(dead.contains(&compact(&member)), "{dead}");
        assert!(dead.contains(&compact(&task)), "{dead}");
        let joined = compact(&Joined {
            member: &member,
            replaced: Some(&member),
        });
        assert_eq!(
            joined,
            format!("{{\"member\":{m},\"replaced\":{m}}}", m = compact(&member))
        );
    }

    #[test]
    fn shapes_print_their_fields_in_the_documented_order() {
        let id = TaskId::parse("3").unwrap();
        let owner = Name::parse("bob").unwrap();
        let refused = ClaimRefused {
            claimed: false,
            id: Some(&id),
            refusal: ClaimRefusal::AlreadyOwned {
                owner: &owner,
                status: TaskStatus::InProgress,
            },
        };
        assert_eq!(
            compact(&refused),
            r#"{"claimed":false,"id":"3","reason":"already_owned","owner":"bob","status":"in_progress"}"#
        );
        let none = ClaimRefused {
            claimed: false,
            id: None,
            refusal: ClaimRefusal::NoneReady,
        };
        assert_eq!(compact(&none), r#"{"claimed":false,"reason":"none_ready"}"#);
        let conflict = ClaimRefused {
            claimed: false,
            id: Some(&id),
            refusal: ClaimRefusal::ScopeConflict {
                with: &id,
                owner: None,
            },
        };
        assert_eq!(
            compact(&conflict),
            r#"{"claimed":false,"id":"3","reason":"scope_conflict","with":"3","owner":null}"#
        );
        let send = PartialSend {
            key: Some("k"),
            delivered: vec![Recipient {
                to: "alice",
                id: "k:alice",
            }],
            already_delivered: Vec::new(),
            failed: vec![Undelivered {
                to: "bob".into(),
                error: "inbox is full".into(),
            }],
            retry: "retry with --id k".into(),
        };
        assert_eq!(
            compact(&send),
            r#"{"key":"k","delivered":[{"to":"alice","id":"k:alice"}],"already_delivered":[],"failed":[{"to":"bob","error":"inbox is full"}],"retry":"retry with --id k"}"#
        );
        let warnings = Warnings {
            program: "roo-task",
            warnings: &["w".into()],
            quarantined: &[PathBuf::from("/q")],
        };
        assert_eq!(
            compact(&warnings),
            r#"{"program":"roo-task","warnings":["w"],"quarantined":["/q"]}"#
        );
    }
}
