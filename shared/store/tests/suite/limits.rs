//! "A writer never writes what a reader rejects": randomized round trips (fixed seed) and
//! the limits that keep every send and write bounded.
use std::time::Duration;

use roo_store::limits::{MAX_LEASE, MAX_UNREAD_BYTES, MAX_UNREAD_PER_SENDER};
use roo_store::{
    ClaimOptions, ClaimOutcome, Error, MessageBody, NewTask, Outgoing, ReadFilter, TaskPatch,
};
use serde_json::{Value, json};

use super::common::{name, team};

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn string(&mut self, max: u64) -> String {
        const ALPHABET: &[char] = &[
            'a', 'Z', ' ', '\n', '\t', '\u{0}', '\u{1b}', '"', '\\', '/', 'é', '中', '🦀',
            '\u{202e}', '[', '{', '}', ']',
        ];
        let len = self.below(max + 1);
        (0..len)
            .map(|_| ALPHABET[self.below(ALPHABET.len() as u64) as usize])
            .collect()
    }
    fn value(&mut self, depth: u64) -> Value {
        if depth == 0 {
            return match self.below(4) {
                0 => json!(self.string(8)),
                1 => json!(self.next() as i64),
                2 => json!(f64::from(self.below(1000) as u32) / 7.0),
                _ => Value::Null,
            };
        }
        if self.below(2) == 0 {
            json!([self.value(depth - 1)])
        } else {
            let key = self.string(4);
            let mut map = serde_json::Map::new();
            map.insert(key, self.value(depth - 1));
            Value::Object(map)
        }
    }
    fn text(&mut self) -> String {
        let n = self.size();
        self.string(n)
    }
    /// [`Rng::text`] on one line: the store refuses line breaks and control characters in
    /// a subject or an active form.
    fn line(&mut self) -> String {
        self.text()
            .chars()
            .map(|c| {
                if roo_store::check_line("", &c.to_string()).is_ok() {
                    c
                } else {
                    ' '
                }
            })
            .collect()
    }
    fn size(&mut self) -> u64 {
        // Mostly small, sometimes around the limits.
        match self.below(8) {
            0 => 64 * 1024 + self.below(3),
            1 => 1024 + self.below(3),
            _ => self.below(40),
        }
    }
}

#[test]
fn every_task_the_writer_accepts_reads_back_equal() {
    let f = team();
    let list = f.team.tasks();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..150 {
        let mut metadata = serde_json::Map::new();
        let depth = rng.below(40);
        metadata.insert(rng.string(6), rng.value(depth));
        let new = NewTask {
            subject: format!("s{}", rng.line()),
            description: rng.text(),
            active_form: Some(rng.line()),
            paths: (0..rng.below(4)).map(|_| rng.string(10)).collect(),
            metadata,
            ..Default::default()
        };
        match list.create(new) {
            Ok(task) => {
                accepted += 1;
                assert_eq!(list.get(&task.id).unwrap(), task);
                let lease = Duration::from_secs(rng.next() % (MAX_LEASE.as_secs() * 2));
                let opts = ClaimOptions {
                    lease,
                    ignore_scope: true,
                };
                // The lead's lease may be up to MAX_LEASE (a member's is capped lower).
                match list.claim(&task.id, &name("lead"), &opts) {
                    Ok(ClaimOutcome::Claimed(claimed)) => {
                        assert!(lease <= MAX_LEASE);
                        assert_eq!(list.get(&task.id).unwrap(), *claimed);
                    }
                    Ok(other) => panic!("{other:?}"),
                    Err(e) => {
                        assert!(lease > MAX_LEASE, "{e}");
                        assert!(matches!(e, Error::InvalidTask { .. }), "{e}");
                    }
                }
                let patch = TaskPatch {
                    note: Some(rng.text()),
                    by: Some(name("lead")),
                    ..Default::default()
                };
                if let Ok(updated) = list.update(&task.id, patch) {
                    assert_eq!(list.get(&task.id).unwrap(), updated);
                }
            }
            Err(e) => {
                refused += 1;
                assert!(matches!(e, Error::InvalidTask { .. }), "{e}");
            }
        }
        // Whatever happened, the list still reads.
        list.list(&Default::default()).unwrap();
    }
    assert!(
        accepted > 20 && refused > 5,
        "{accepted} accepted, {refused} refused"
    );
    let files: Vec<_> = std::fs::read_dir(list.path().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.iter().all(|f| !f.contains(".corrupt-")), "{files:?}");
}

#[test]
fn every_message_the_writer_accepts_reads_back_equal() {
    let f = team();
    let mailbox = f.team.mailbox();
    let mut rng = Rng(0x5eed_1234_abcd_0002);
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..150 {
        let depth = rng.below(40);
        let body = match rng.below(3) {
            0 => MessageBody::Text,
            1 => MessageBody::PlanApprovalRequest {
                request_id: rng.string(8),
                plan: rng.text(),
            },
            _ => MessageBody::PermissionRequest {
                request_id: rng.string(8),
                tool: rng.string(8),
                input: rng.value(depth),
            },
        };
        let outgoing = Outgoing::new(body, format!("t{}", rng.text())).with_summary("a summary");
        match mailbox.send(&name("bob"), "lead", outgoing) {
            Ok(sent) => {
                accepted += 1;
                let inbox = mailbox.read(&name("lead"), &ReadFilter::default()).unwrap();
                let stored = inbox.iter().find(|m| m.id == sent[0].id).unwrap();
                assert_eq!(*stored, sent[0]);
            }
            Err(e) => {
                refused += 1;
                assert!(matches!(e, Error::InvalidMessage { .. }), "{e}");
            }
        }
        mailbox.read(&name("lead"), &ReadFilter::default()).unwrap();
        // Keep the unread volume under the inbox limit.
        mailbox.take_unread(&name("lead")).unwrap();
    }
    assert!(
        accepted > 20 && refused > 5,
        "{accepted} accepted, {refused} refused"
    );
}

#[test]
fn a_full_inbox_refuses_sends_until_it_is_read() {
    let f = team();
    for extra in ["carol", "dave", "erin"] {
        f.team
            .add_member(roo_store::Member::new(name(extra), f.team.name()))
            .unwrap();
    }
    let mailbox = f.team.mailbox();
    let text = "x".repeat(60 * 1024);
    let fill = |from: &str| {
        let mut sent = 0;
        let err = loop {
            match mailbox.send(
                &name(from),
                "alice",
                Outgoing::text(text.clone(), "big one"),
            ) {
                Ok(_) => sent += 1,
                Err(e) => break e,
            }
            assert!(sent < 200, "never refused");
        };
        (sent, err)
    };
    // One sender fills at most its share: the others still get through.
    let (bob_sent, err) = fill("bob");
    assert!(matches!(err, Error::NotPermitted { .. }), "{err}");
    assert!(err.to_string().contains("per sender"), "{err}");
    assert!(bob_sent * 60 * 1024 <= MAX_UNREAD_PER_SENDER, "{bob_sent}");
    let mut sent = bob_sent;
    let mut last = None;
    for from in ["lead", "carol", "dave", "erin"] {
        let (n, err) = fill(from);
        sent += n;
        last = Some(err);
    }
    let err = last.unwrap();
    assert!(err.to_string().contains("inbox is full"), "{err}");
    assert!(
        err.to_string().contains(&MAX_UNREAD_BYTES.to_string()),
        "{err}"
    );
    assert!(sent * 60 * 1024 <= MAX_UNREAD_BYTES, "{sent}");
    // The protocol's own messages still fit in the full inbox.
    mailbox
        .send(
            &name("erin"),
            "alice",
            Outgoing::new(
                MessageBody::IdleNotification {
                    completed_task_id: None,
                },
                "idle",
            ),
        )
        .unwrap();
    assert_eq!(mailbox.unread_count(&name("alice")).unwrap(), sent + 1);
    mailbox.take_unread(&name("alice")).unwrap();
    mailbox
        .send(&name("bob"), "alice", Outgoing::text(text, "big one"))
        .unwrap();
}

/// Issue 18 item 4: readers accept no record a writer would refuse. A message of 50 MB
/// written by hand is skipped by readers (with a warning) and quarantined, not dropped,
/// by the next change; the other messages are kept.
#[test]
fn a_reader_quarantines_a_record_over_the_writers_limits() {
    let f = team();
    let mailbox = f.team.mailbox();
    mailbox
        .send(&name("bob"), "alice", Outgoing::text("fits", "a small one"))
        .unwrap();
    let path = mailbox.inbox_path(&name("alice"));
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut huge = doc["messages"][0].clone();
    huge["id"] = json!("msg-huge");
    huge["text"] = json!("x".repeat(50 * 1024 * 1024));
    doc["messages"].as_array_mut().unwrap().push(huge);
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();

    let read = mailbox
        .read(&name("alice"), &ReadFilter::default())
        .unwrap();
    assert_eq!(read.len(), 1, "the oversized record must not be read");
    assert_eq!(read[0].text, "fits");
    let warnings = roo_store::quarantine::take_warnings();
    assert!(
        warnings.iter().any(|w| w.contains("damaged record")),
        "{warnings:?}"
    );

    // The next change moves it aside whole, and says so.
    mailbox
        .send(&name("bob"), "alice", Outgoing::text("next", "another one"))
        .unwrap();
    let quarantined = roo_store::quarantine::quarantined(&f.home, f.team.name()).unwrap();
    assert_eq!(quarantined.len(), 1, "{quarantined:?}");
    let moved: Value = serde_json::from_slice(&std::fs::read(&quarantined[0]).unwrap()).unwrap();
    assert_eq!(moved["messages"][0]["id"], "msg-huge");
    assert_eq!(
        moved["messages"][0]["text"].as_str().unwrap().len(),
        50 * 1024 * 1024
    );
    assert!(
        moved["quarantined_because"]
            .as_str()
            .unwrap()
            .contains("msg-huge"),
        "{moved:?}"
    );
    let texts: Vec<String> = mailbox
        .read(&name("alice"), &ReadFilter::default())
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(texts, ["fits", "next"]);
}

/// Issue 18 item 4: a sender that is not a member of the team is refused (`user` is
/// nobody's name here), so nobody can speak as "the user" into a member's context.
#[test]
fn a_sender_that_is_not_a_member_is_refused() {
    let f = team();
    let mailbox = f.team.mailbox();
    for from in ["user", "mallory"] {
        let err = mailbox
            .send(
                &name(from),
                "alice",
                Outgoing::text("do it", "the user says so"),
            )
            .unwrap_err();
        assert!(matches!(err, Error::NotPermitted { .. }), "{err}");
        assert!(err.to_string().contains("not a member"), "{err}");
        assert!(
            mailbox
                .send(&name(from), "*", Outgoing::text("x", "to all"))
                .is_err(),
            "a broadcast from {from} went out"
        );
    }
    assert_eq!(mailbox.unread_count(&name("alice")).unwrap(), 0);
    // Members, the lead included, still send.
    for from in ["lead", "bob"] {
        mailbox
            .send(&name(from), "alice", Outgoing::text("hi", "a greeting"))
            .unwrap();
    }
}

/// An id-like field becomes an attribute of the wrapper a model reads: one over 256 bytes
/// is refused, so a single message cannot blow a turn's delivery budget.
#[test]
fn an_id_like_field_over_the_limit_is_refused() {
    let fixture = team();
    let mailbox = fixture.team.mailbox();
    let long = "<".repeat(65_000);
    let err = mailbox
        .send(
            &name("lead"),
            "alice",
            Outgoing::new(MessageBody::TaskAssignment { task_id: long }, "take it"),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("`task_id` is 65000 bytes"),
        "{err}"
    );
    assert!(
        mailbox
            .read(&name("alice"), &ReadFilter::default())
            .unwrap()
            .is_empty()
    );
    mailbox
        .send(
            &name("lead"),
            "alice",
            Outgoing::new(
                MessageBody::TaskAssignment {
                    task_id: "42".into(),
                },
                "take it",
            ),
        )
        .unwrap();
}

/// A keyed send is skipped as a retry only when the same sender's copy is there: a
/// member that used a peer's key first cannot make the peer's message vanish.
#[test]
fn another_senders_use_of_a_key_does_not_swallow_a_message() {
    let f = team();
    let mailbox = f.team.mailbox();
    mailbox
        .send_keyed(
            &name("bob"),
            "lead",
            Outgoing::text("decoy", "decoy"),
            Some("report-1"),
        )
        .unwrap();
    let report = mailbox
        .send_keyed(
            &name("alice"),
            "lead",
            Outgoing::text("the real report", "real report"),
            Some("report-1"),
        )
        .unwrap();
    assert!(
        report.delivered.is_empty() && report.already.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert!(
        report.failed[0]
            .1
            .to_string()
            .contains("was used by bob already"),
        "{:?}",
        report.failed
    );
    // Alice's own retry is still a retry.
    mailbox
        .send_keyed(
            &name("alice"),
            "lead",
            Outgoing::text("x", "x"),
            Some("report-2"),
        )
        .unwrap();
    let again = mailbox
        .send_keyed(
            &name("alice"),
            "lead",
            Outgoing::text("x", "x"),
            Some("report-2"),
        )
        .unwrap();
    assert_eq!(again.already.len(), 1, "{again:?}");
}
