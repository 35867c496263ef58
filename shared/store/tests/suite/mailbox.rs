//! Mailboxes.
use roo_store::{
    ARCHIVE_BATCH, Error, MessageBody, MessageId, Outgoing, PermissionDecision, RETAINED_READ,
    ReadFilter, Receipt,
};

use super::common::{name, team};

#[test]
fn send_and_take_unread_marks_read_and_delivered() {
    let f = team();
    let mb = f.team.mailbox();
    let sent = mb
        .send(
            &name("lead"),
            "alice",
            Outgoing::text("hello there", "a greeting"),
        )
        .unwrap();
    assert_eq!(sent.len(), 1);
    assert_eq!(mb.unread_count(&name("alice")).unwrap(), 1);
    let taken = mb.take_unread(&name("alice")).unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].id, sent[0].id);
    assert!(taken[0].read && taken[0].delivered_at.is_some());
    assert!(mb.take_unread(&name("alice")).unwrap().is_empty());
    let status = mb.status(&sent[0].id).unwrap();
    assert_eq!(status.state(), "delivered");
    mb.acknowledge(&name("alice"), std::slice::from_ref(&sent[0].id))
        .unwrap();
    assert_eq!(mb.status(&sent[0].id).unwrap().state(), "acknowledged");
}

/// A receipt names the ids it did not find (each once, in the order given) and still
/// marks the others.
#[test]
fn a_receipt_names_the_unknown_ids_and_marks_the_rest() {
    let f = team();
    let mb = f.team.mailbox();
    let sent = mb
        .send(&name("lead"), "alice", Outgoing::text("hello", "hi"))
        .unwrap();
    let (x, y) = (MessageId::from_string("x"), MessageId::from_string("y"));
    let ids = [x.clone(), sent[0].id.clone(), y.clone(), x.clone()];
    assert_eq!(
        mb.acknowledge(&name("alice"), &ids).unwrap(),
        Receipt {
            found: 1,
            unknown: vec![x, y]
        }
    );
    assert_eq!(mb.status(&sent[0].id).unwrap().state(), "acknowledged");
}

#[test]
fn broadcast_reaches_everyone_but_the_sender() {
    let f = team();
    let mb = f.team.mailbox();
    let sent = mb
        .send(
            &name("alice"),
            "*",
            Outgoing::new(MessageBody::StatusUpdate, "module 1 done"),
        )
        .unwrap();
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|m| m.to == "*"));
    assert_eq!(mb.unread_count(&name("lead")).unwrap(), 1);
    assert_eq!(mb.unread_count(&name("bob")).unwrap(), 1);
    assert_eq!(mb.unread_count(&name("alice")).unwrap(), 0);
}

#[test]
fn unknown_recipient_creates_no_inbox() {
    let f = team();
    let mb = f.team.mailbox();
    let err = mb
        .send(&name("lead"), "mallory", Outgoing::text("x", "y z"))
        .unwrap_err();
    assert!(matches!(err, Error::UnknownRecipient { .. }), "{err}");
    assert!(!mb.inbox_path(&name("mallory")).exists());
}

#[test]
fn protocol_rules_on_structured_types() {
    let f = team();
    let mb = f.team.mailbox();
    let plan_ok = Outgoing::new(
        MessageBody::PlanApprovalResponse {
            request_id: "r1".into(),
            approve: true,
            feedback: String::new(),
        },
        "",
    );
    let err = mb.send(&name("alice"), "bob", plan_ok.clone()).unwrap_err();
    assert!(err.to_string().contains("only the team's lead"), "{err}");
    mb.send(&name("lead"), "bob", plan_ok.clone()).unwrap();
    let err = mb.send(&name("lead"), "*", plan_ok).unwrap_err();
    assert!(matches!(err, Error::NotPermitted { .. }), "{err}");

    let bye = Outgoing::new(
        MessageBody::ShutdownResponse {
            approve: true,
            reason: "done".into(),
            request_id: None,
        },
        "",
    );
    let err = mb.send(&name("alice"), "bob", bye.clone()).unwrap_err();
    assert!(
        err.to_string().contains("only be sent to the team's lead"),
        "{err}"
    );
    mb.send(&name("alice"), "lead", bye).unwrap();

    let perm = Outgoing::new(
        MessageBody::PermissionResponse {
            request_id: "p".into(),
            decision: PermissionDecision::Allow,
            reason: String::new(),
        },
        "",
    );
    assert!(mb.send(&name("bob"), "alice", perm).is_err());
    let err = mb
        .send(
            &name("lead"),
            "alice",
            Outgoing::new(MessageBody::Text, "no summary"),
        )
        .unwrap_err();
    assert!(matches!(err, Error::InvalidMessage { .. }), "{err}");
}

#[test]
fn read_filters_and_mark_read() {
    let f = team();
    let mb = f.team.mailbox();
    let bob = name("bob");
    let ids: Vec<MessageId> = (0..5)
        .map(|i| {
            mb.send(
                &name("lead"),
                "bob",
                Outgoing::text(format!("m{i}"), "numbered message"),
            )
            .unwrap()[0]
                .id
                .clone()
        })
        .collect();
    assert_eq!(mb.mark_read(&bob, &ids[..2]).unwrap(), 2);
    assert_eq!(mb.mark_read(&bob, &ids[..2]).unwrap(), 0);
    let unread = mb
        .read(
            &bob,
            &ReadFilter {
                unread_only: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        unread.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
        ["m2", "m3", "m4"]
    );
    let last = mb
        .read(
            &bob,
            &ReadFilter {
                limit: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(last[0].text, "m4");
}

#[test]
fn inbox_stays_bounded_and_history_moves_to_the_archive() {
    let f = team();
    let mb = f.team.mailbox();
    let bob = name("bob");
    let total = RETAINED_READ + ARCHIVE_BATCH + 30;
    let mut first = None;
    for i in 0..total {
        let m = mb
            .send(
                &name("lead"),
                "bob",
                Outgoing::text(format!("m{i}"), "numbered message"),
            )
            .unwrap();
        first.get_or_insert(m[0].id.clone());
        mb.take_unread(&bob).unwrap();
    }
    let inbox = mb.read(&bob, &ReadFilter::default()).unwrap();
    assert!(
        inbox.len() <= RETAINED_READ + ARCHIVE_BATCH,
        "{}",
        inbox.len()
    );
    let archived = mb.archived(&bob).unwrap();
    assert_eq!(archived.len() + inbox.len(), total);
    let all = mb
        .read(
            &bob,
            &ReadFilter {
                include_archived: true,
                ..Default::default()
            },
        )
        .unwrap();
    let texts: Vec<String> = all.iter().map(|m| m.text.clone()).collect();
    let expected: Vec<String> = (0..total).map(|i| format!("m{i}")).collect();
    assert_eq!(texts, expected);
    // Receipts still work once a message is archived.
    let first = first.unwrap();
    assert!(mb.status(&first).unwrap().archived);
    assert_eq!(
        mb.acknowledge(&bob, std::slice::from_ref(&first)).unwrap(),
        Receipt {
            found: 1,
            unknown: Vec::new()
        }
    );
    assert_eq!(mb.status(&first).unwrap().state(), "acknowledged");
}

#[test]
fn unread_messages_are_never_archived() {
    let f = team();
    let mb = f.team.mailbox();
    let total = RETAINED_READ + ARCHIVE_BATCH + 10;
    for i in 0..total {
        mb.send(
            &name("lead"),
            "alice",
            Outgoing::text(format!("m{i}"), "numbered message"),
        )
        .unwrap();
    }
    assert_eq!(mb.unread_count(&name("alice")).unwrap(), total);
    assert!(mb.archived(&name("alice")).unwrap().is_empty());
}

#[test]
fn a_bare_array_inbox_from_the_original_design_is_read() {
    if super::common::not_files() {
        return; // It looks at the files themselves.
    }
    let f = team();
    let mb = f.team.mailbox();
    std::fs::write(
        mb.inbox_path(&name("bob")),
        r#"[{"id":"x1","from":"lead","to":"bob","type":"text","text":"hi","summary":"say hi",
             "timestamp":"2026-01-01T00:00:00Z","read":false}]"#,
    )
    .unwrap();
    assert_eq!(mb.unread_count(&name("bob")).unwrap(), 1);
    mb.send(
        &name("lead"),
        "bob",
        Outgoing::text("again", "say hi again"),
    )
    .unwrap();
    let text = std::fs::read_to_string(mb.inbox_path(&name("bob"))).unwrap();
    assert!(text.contains("\"version\": \"1.0\""), "{text}");
    assert_eq!(mb.unread_count(&name("bob")).unwrap(), 2);
}

#[test]
fn corrupt_inbox_is_moved_aside_and_the_failed_send_writes_nothing() {
    if super::common::not_files() {
        return; // It looks at the files themselves.
    }
    let f = team();
    let mb = f.team.mailbox();
    let path = mb.inbox_path(&name("bob"));
    std::fs::write(&path, "[{\"id\": ").unwrap();
    let err = mb
        .send(&name("lead"), "bob", Outgoing::text("x", "a test message"))
        .unwrap_err();
    let Error::Corrupt { moved_to, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(std::fs::read_to_string(moved_to).unwrap(), "[{\"id\": ");
    assert!(
        !path.exists(),
        "the failed send must not write a fresh inbox"
    );
    mb.send(&name("lead"), "bob", Outgoing::text("x", "a test message"))
        .unwrap();
    assert_eq!(mb.unread_count(&name("bob")).unwrap(), 1);
}

#[test]
fn newer_major_inbox_is_refused_untouched() {
    if super::common::not_files() {
        return; // It looks at the files themselves.
    }
    let f = team();
    let mb = f.team.mailbox();
    let path = mb.inbox_path(&name("bob"));
    std::fs::write(&path, r#"{"version":"2.0","entries":[]}"#).unwrap();
    let err = mb
        .send(&name("lead"), "bob", Outgoing::text("x", "a test message"))
        .unwrap_err();
    assert!(matches!(err, Error::NewerFormat { .. }), "{err}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        r#"{"version":"2.0","entries":[]}"#
    );
}

#[test]
fn one_bad_message_is_quarantined_and_the_unread_ones_survive() {
    if super::common::not_files() {
        return; // It looks at the files themselves.
    }
    let f = team();
    let mailbox = f.team.mailbox();
    let alice = name("alice");
    mailbox
        .send(
            &name("bob"),
            "alice",
            Outgoing::text("first", "the first one"),
        )
        .unwrap();
    mailbox
        .send(
            &name("bob"),
            "alice",
            Outgoing::text("second", "the second one"),
        )
        .unwrap();
    let path = mailbox.inbox_path(&alice);
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["messages"][1]["type"] = "from_the_future".into();
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let texts = |m: &roo_store::Mailbox| -> Vec<String> {
        m.read(&alice, &ReadFilter::default())
            .unwrap()
            .into_iter()
            .map(|m| m.text)
            .collect()
    };
    // Read-only: the valid message is shown, nothing is moved.
    assert_eq!(texts(&mailbox), ["first"]);
    assert!(
        roo_store::quarantine::quarantined(&f.home, f.team.name())
            .unwrap()
            .is_empty()
    );
    // A send quarantines the bad message alone; the unread one survives.
    mailbox
        .send(
            &name("bob"),
            "alice",
            Outgoing::text("third", "the third one"),
        )
        .unwrap();
    assert_eq!(texts(&mailbox), ["first", "third"]);
    let quarantined = roo_store::quarantine::quarantined(&f.home, f.team.name()).unwrap();
    assert_eq!(quarantined.len(), 1, "{quarantined:?}");
    let bad: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&quarantined[0]).unwrap()).unwrap();
    assert_eq!(bad["messages"][0]["text"], "second");
    let warnings = roo_store::quarantine::take_warnings();
    assert!(
        warnings.iter().any(|w| w.contains("damaged record")),
        "{warnings:?}"
    );
}
