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
#[test]
fn no_text_of_a_question_reaches_the_terminal_raw() {
    use roo_agent::permissions::PermissionRequest;
    let (reply, _answer) = tokio::sync::oneshot::channel();
    let pending = crate::setup::PendingApproval {
        request: PermissionRequest {
            tool: "Bash".to_string(),
            summary: "Bash(:\u{1b}[1;2r; touch own.txt)".to_string(),
            input: serde_json::json!({"command": ":\u{1b}[1;2r; touch own.txt"}),
            reason: "why\u{1b}[2J".to_string(),
            suggested_rule: "Bash(:\u{1b}[H *)".to_string(),
        },
        reply,
    };
    let (question, lines) = super::question::Question::open(pending, &Style::plain(), true);
    assert!(question.is_some());
    for line in &lines {
        assert!(!line.contains('\u{1b}'), "{line:?}");
    }
    assert!(lines[0].contains("\\u{1b}[1;2r"), "{lines:?}");
}
