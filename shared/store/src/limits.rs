//! Bounds on what the store writes, shared by the writers and the reader.
//!
//! The rule is "never write what a reader would reject": every user-supplied value is
//! checked against these limits before it enters a document (a clear error naming the
//! limit, exit 2 in the CLIs), and [`crate::doc`] re-checks the whole serialized document
//! with the reader's own checks before it replaces a file, so no value that slipped past
//! a field check can make the next reader call the document corrupt.

use std::time::Duration;

use crate::time::Timestamp;

/// Deepest nesting of a user-supplied JSON value (task metadata, a permission request's
/// `input`). A JSON scalar has depth 0, `[1]` depth 1.
pub const MAX_VALUE_DEPTH: usize = 32;
/// Deepest nesting of a whole document the reader accepts: user values plus the
/// document's own structure (document → list → record → field).
pub const MAX_DOCUMENT_DEPTH: usize = MAX_VALUE_DEPTH + 8;

/// Longest message `text`, in bytes.
pub const MAX_MESSAGE_TEXT: usize = 64 * 1024;
/// Longest encoded typed part of a message (plan, feedback, reason, tool input, ids), in
/// bytes of JSON.
pub const MAX_MESSAGE_FIELDS: usize = 64 * 1024;
/// Unread bytes (encoded messages) an inbox may hold; a send beyond it is refused until
/// the recipient reads. Keeps the cost of every send to that inbox bounded.
pub const MAX_UNREAD_BYTES: usize = 4 * 1024 * 1024;

/// Most unread bytes one sender may have in one inbox: one member cannot fill a peer's
/// (or the lead's) inbox and lock the others out.
pub const MAX_UNREAD_PER_SENDER: usize = 1024 * 1024;

/// Room beyond [`MAX_UNREAD_BYTES`] kept for the protocol's own messages (requests,
/// answers, idle notifications): a full inbox still takes a permission question or a
/// shutdown answer.
pub const PROTOCOL_RESERVE: usize = 512 * 1024;

/// Longest task subject or active form, in bytes.
pub const MAX_TASK_LINE: usize = 1024;
/// Longest task description or note, in bytes.
pub const MAX_TASK_TEXT: usize = 64 * 1024;
/// Largest encoded task metadata, in bytes of JSON.
pub const MAX_TASK_METADATA: usize = 64 * 1024;
/// Most scope paths of one task, and the longest one, in bytes.
pub const MAX_TASK_PATHS: usize = 256;
/// Longest scope path, in bytes.
pub const MAX_TASK_PATH: usize = 4096;
/// Most notes a task keeps (the oldest are dropped beyond it).
pub const MAX_TASK_NOTES: usize = 100;

/// Longest reason a member is recorded dead for, in bytes.
pub const MAX_DEAD_REASON: usize = 1024;
/// Longest idle-notification fingerprint, in bytes.
pub const MAX_IDLE_FINGERPRINT: usize = 256;

/// Longest line of the event log (`teams/<team>/events.jsonl`, one event), in bytes: a
/// reader skips a longer one as damaged; writers shorten text fields to fit first.
pub const MAX_EVENT_LINE: usize = 16 * 1024;
/// Longest text field of an event (a summary, a subject, a reason, a commit), in
/// characters: a writer cuts a longer one and ends it with `…`.
pub const MAX_EVENT_TEXT: usize = 300;
/// Most message ids one `message_delivered` event lists (a larger delivery is recorded as
/// several events).
pub const MAX_EVENT_IDS: usize = 32;
/// Size past which `events.jsonl` is rotated to `events.1.jsonl` before the next append.
pub const EVENT_LOG_ROTATE_BYTES: u64 = 1024 * 1024;
/// Rotated event files kept (`events.1.jsonl` … `events.N.jsonl`); the oldest is dropped.
pub const EVENT_LOG_KEEP: usize = 4;
/// Events the PostgreSQL store keeps per team: older rows are pruned in the change that
/// adds one (about what the files keep: 5 files of 1 MiB at ~200 bytes an event).
pub const EVENT_LOG_MAX_ROWS: i64 = 25_000;

/// Longest lease a claim or renewal may ask for.
pub const MAX_LEASE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The earliest time stamp a document may hold: `0000-01-01T00:00:00.000Z`.
pub const MIN_TIMESTAMP: Timestamp = Timestamp::from_unix_ms(-62_167_219_200_000);
/// The latest time stamp a document may hold: `9999-12-31T23:59:59.999Z` (RFC 3339 years
/// have four digits).
pub const MAX_TIMESTAMP: Timestamp = Timestamp::from_unix_ms(253_402_300_799_999);

/// Whether `t` can be written as an RFC 3339 time stamp that readers parse.
pub fn timestamp_in_range(t: Timestamp) -> bool {
    (MIN_TIMESTAMP..=MAX_TIMESTAMP).contains(&t)
}

/// The nesting depth of a JSON value (a scalar is 0).
pub fn value_depth(value: &serde_json::Value) -> usize {
    // Iterative, so a hostile value cannot overflow the stack.
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &serde_json::Value>> = match v {
            serde_json::Value::Array(items) => Box::new(items.iter()),
            serde_json::Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        deepest = deepest.max(depth + 1);
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    deepest
}

/// The nesting depth of JSON text (brackets outside strings), without parsing it. Strings
/// are skipped by searching for the next quote or backslash (most of a document is string
/// content), which halves the cost of a byte-by-byte scan.
pub fn text_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                i += 1;
                // To the closing quote; an escape skips the character after the backslash.
                loop {
                    let rest = bytes.get(i..).unwrap_or_default();
                    match rest.iter().position(|&c| c == b'"' || c == b'\\') {
                        None => return deepest,
                        Some(k) if rest[k] == b'\\' => i += k + 2,
                        Some(k) => {
                            i += k;
                            break;
                        }
                    }
                }
            }
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    deepest
}

/// `Err(reason)` if `value` is nested deeper than [`MAX_VALUE_DEPTH`] or encodes to more
/// than `max_bytes`.
pub fn check_value(what: &str, value: &serde_json::Value, max_bytes: usize) -> Result<(), String> {
    let depth = value_depth(value);
    if depth > MAX_VALUE_DEPTH {
        return Err(format!(
            "{what} is nested {depth} levels deep; the limit is {MAX_VALUE_DEPTH}"
        ));
    }
    let size = serde_json::to_vec(value).map_or(usize::MAX, |v| v.len());
    check_len(what, size, max_bytes)
}

/// `Err(reason)` if `len` bytes exceed `max` (the reason names both).
pub fn check_len(what: &str, len: usize, max: usize) -> Result<(), String> {
    if len > max {
        Err(format!(
            "{what} is {len} bytes; the limit is {max} bytes ({} KiB)",
            max / 1024
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn depths_agree_between_value_and_text() {
        for v in [
            json!(1),
            json!([]),
            json!({"a": [1, {"b": "[[[{"}]}),
            json!([[[[]]]]),
            json!(["\\", "\"]]", {"k\\\"[": ["\\\\", [1]]}]),
        ] {
            let text = serde_json::to_vec(&v).unwrap();
            assert_eq!(value_depth(&v), text_depth(&text), "{v}");
        }
        // Truncated text ends the scan without panicking.
        for text in ["\"", "\"\\", "[\"\\", "[[\"a"] {
            assert!(text_depth(text.as_bytes()) <= 2, "{text}");
        }
    }

    #[test]
    fn timestamp_range_matches_what_formats_with_four_digit_years() {
        assert_eq!(MIN_TIMESTAMP.to_string(), "0000-01-01T00:00:00.000Z");
        assert_eq!(MAX_TIMESTAMP.to_string(), "9999-12-31T23:59:59.999Z");
        for t in [MIN_TIMESTAMP, MAX_TIMESTAMP] {
            assert_eq!(Timestamp::parse(&t.to_string()), Some(t));
        }
        let beyond = Timestamp::from_unix_ms(MAX_TIMESTAMP.unix_ms() + 1);
        assert!(!timestamp_in_range(beyond));
        assert_eq!(Timestamp::parse(&beyond.to_string()), None);
    }
}
