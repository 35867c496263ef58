//! Tests of the interactive session's pieces.

use roo_store::{MemberState, Name};
use roo_team::TeamEvent;
use roo_team::lead::status::{MemberStatus, TeamStatus};

use super::team_turns::team_line;
use crate::render::Style;

fn status(states: &[(&str, MemberState)]) -> Option<TeamStatus> {
    Some(TeamStatus {
        team: Name::parse("crew").unwrap(),
        members: states
            .iter()
            .map(|(name, state)| MemberStatus {
                name: Name::parse(name).unwrap(),
                state: *state,
                shut_down: false,
            })
            .collect(),
    })
}

fn change(name: &str, state: MemberState) -> TeamEvent {
    TeamEvent::MemberState {
        name: Name::parse(name).unwrap(),
        state,
    }
}

#[test]
fn state_changes_seen_in_one_poll_print_the_status_line_once() {
    let style = Style::plain();
    let mut last = None;
    let now = status(&[("alice", MemberState::Idle), ("bob", MemberState::Busy)]);
    // The monitor reported alice and bob together: the status already holds both.
    let first = team_line(&style, &change("alice", MemberState::Idle), &now, &mut last);
    assert_eq!(first.as_deref(), Some("team crew · alice idle · bob busy"));
    assert_eq!(
        team_line(&style, &change("bob", MemberState::Busy), &now, &mut last),
        None
    );
    // Other events are always shown, and a new status is shown again.
    assert!(
        team_line(
            &style,
            &TeamEvent::Notice { text: "x".into() },
            &now,
            &mut last
        )
        .is_some()
    );
    let later = status(&[("alice", MemberState::Idle), ("bob", MemberState::Idle)]);
    assert_eq!(
        team_line(&style, &change("bob", MemberState::Idle), &later, &mut last).as_deref(),
        Some("team crew · alice idle · bob idle")
    );
}
pub(super) fn pending(
    summary: &str,
    command: &str,
    reason: &str,
    offer_always: bool,
) -> (
    crate::setup::PendingApproval,
    tokio::sync::oneshot::Receiver<roo_agent::permissions::Approval>,
) {
    use roo_agent::permissions::PermissionRequest;
    let (reply, answer) = tokio::sync::oneshot::channel();
    let pending = crate::setup::PendingApproval {
        request: PermissionRequest {
            tool: "Bash".to_string(),
            summary: summary.to_string(),
            input: serde_json::json!({ "command": command }),
            reason: reason.to_string(),
            suggested_rule: "Bash(:\u{1b}[H *)".to_string(),
            offer_always,
        },
        reply,
    };
    (pending, answer)
}

pub(super) fn question(
    summary: &str,
    command: &str,
    offer_always: bool,
) -> super::question::Question {
    let (pending, answer) = pending(summary, command, "why\u{1b}[2J", offer_always);
    // The answer's receiver is kept open for the test's length: the question waits.
    std::mem::forget(answer);
    match super::question::Question::open(pending, &Style::plain()) {
        Ok(question) => question,
        Err(lines) => panic!("not asked: {lines:?}"),
    }
}

#[test]
fn no_text_of_a_question_reaches_the_terminal_raw() {
    let question = question(
        "Bash(:\u{1b}[1;2r; touch own.txt)",
        ":\u{1b}[1;2r; touch own.txt",
        true,
    );
    let lines = question.pinned(&Style::plain(), true, true);
    for line in &lines {
        assert!(!line.contains('\u{1b}'), "{line:?}");
    }
    assert!(lines[0].contains("\\u{1b}[1;2r"), "{lines:?}");
}

#[test]
fn always_is_offered_only_where_the_policy_says_and_a_names_the_asker() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let style = Style::plain();
    let a = KeyEvent::new(KeyCode::Char('a'), KeyModifiers::NONE);
    let teammate = question("teammate alice: Bash(make)", "make", false);
    assert_eq!(teammate.whose(), "alice's");
    let keys = teammate.pinned(&style, false, true).pop().unwrap();
    assert!(keys.contains("[y] yes") && !keys.contains("[a]"), "{keys}");
    // `a` where "always" is not offered answers nothing.
    let (kept, lines) = teammate.key(&a, &style, 0);
    let kept = kept.expect("still open");
    assert!(lines.is_empty(), "{lines:?}");
    assert!(
        kept.pinned(&style, false, true)
            .iter()
            .any(|l| l.contains("not offered")),
        "the hint says why"
    );
    let own = question("Bash(make)", "make", true);
    assert_eq!(own.whose(), "the lead's");
    let keys = own.pinned(&style, false, true).pop().unwrap();
    assert!(keys.contains("[a] always (saves:"), "{keys}");
    let (kept, lines) = own.key(&a, &style, 0);
    assert!(kept.is_none());
    assert!(
        lines[0].contains("Bash(make) → always allowed"),
        "{lines:?}"
    );
}

#[test]
fn an_unarmed_question_shows_no_answer_keys() {
    let style = Style::plain();
    let q = question("teammate alice: Bash(make)", "make", false);
    let keys = q.pinned(&style, true, false).pop().unwrap();
    assert!(
        !keys.contains("[y] yes") && keys.contains("open in a moment"),
        "{keys}"
    );
}

#[test]
fn a_long_reason_takes_one_row_and_v_prints_it_whole() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let style = Style::plain();
    let reason = format!("plan: {}", "word ".repeat(80));
    let (pending, _answer) = pending("Bash(make)", "make", &reason, false);
    let q = super::question::Question::open(pending, &style).unwrap();
    let lines = q.pinned(&style, false, true);
    let width = usize::from(crossterm::terminal::size().map_or(80, |(w, _)| w));
    for line in &lines[..lines.len() - 1] {
        assert_eq!(super::dock::screen_rows(line, width), 1, "{line:?}");
    }
    assert!(lines.last().unwrap().contains("[v] view all"), "{lines:?}");
    let v = KeyEvent::new(KeyCode::Char('v'), KeyModifiers::NONE);
    let (kept, printed) = q.key(&v, &style, 0);
    assert!(kept.is_some());
    assert!(
        printed.iter().any(|l| l.contains(reason.trim_end())),
        "{printed:?}"
    );
}

/// Issue 31 review: on a terminal so short that the screen cut the call's only row,
/// `y` ran a call the person never saw whole. Rows the screen cut count as hidden:
/// `y` asks for `v` first, and after `v` it answers.
#[test]
fn rows_a_short_terminal_cut_need_v_before_yes() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let style = Style::plain();
    let y = KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE);
    let v = KeyEvent::new(KeyCode::Char('v'), KeyModifiers::NONE);
    let q = question("teammate alice: Bash(make)", "make", false);
    let (kept, lines) = q.key(&y, &style, 1);
    let q = kept.expect("still open: a row was cut");
    assert!(lines.is_empty(), "{lines:?}");
    assert!(
        q.pinned(&style, false, true)
            .iter()
            .any(|l| l.contains("press v to see them")),
        "the hint says why"
    );
    let (kept, printed) = q.key(&v, &style, 1);
    let q = kept.expect("v keeps it open");
    assert!(printed.iter().any(|l| l.contains("make")), "{printed:?}");
    let (kept, lines) = q.key(&y, &style, 1);
    assert!(kept.is_none(), "after v, y answers");
    assert!(lines[0].contains("→ allowed once"), "{lines:?}");
}
