//! `o` in the live view: switch to the followed member's pane, or say how to reach it.
//! The CLI does not depend on the team runtime: it runs `tmux` itself, on the tmux server
//! of `$TMUX` (the one the lead's panes are in when the view runs inside the lead's
//! tmux), with the pane id the roster records.

use std::process::{Command, Stdio};

use roo_store::BackendType;

use super::model::MemberRow;
use crate::output::escape;

/// Whether `id` looks like a tmux pane id (`%` then digits): the roster is written by
/// members, so an id is checked before it goes to tmux.
fn tmux_pane_id(id: &str) -> bool {
    id.strip_prefix('%')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn tmux(args: &[&str]) -> bool {
    Command::new("tmux")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Does what `o` does for `m` and returns the notice to show.
pub fn open(m: &MemberRow, team: &str) -> String {
    let name = escape(m.name.as_str());
    if let Some(host) = &m.host {
        let pane = m
            .pane
            .as_deref()
            .map_or(String::new(), |p| format!(" (pane {})", escape(p)));
        return format!(
            "{name} runs on host {}{pane}: ssh there and attach to its tmux session \
             (roo-{}-{name}, as its spawn said)",
            escape(host),
            escape(team)
        );
    }
    match (m.backend, m.pane.as_deref()) {
        (Some(BackendType::Tmux), Some(pane)) if tmux_pane_id(pane) => {
            let inside = std::env::var_os("TMUX").is_some_and(|v| !v.is_empty());
            // switch-client changes session when the pane is in another one; the
            // other two bring its window and the pane itself forward.
            if inside
                && (tmux(&["switch-client", "-t", pane]) | tmux(&["select-window", "-t", pane]))
                && tmux(&["select-pane", "-t", pane])
            {
                format!("switched to {name}'s pane {pane}")
            } else {
                format!(
                    "{name} runs in tmux pane {pane}: in the lead's tmux run `tmux select-pane -t {pane}` (a detached team session: `tmux attach -t roo-{}`)",
                    escape(team)
                )
            }
        }
        (Some(BackendType::Iterm2), Some(session)) => format!(
            "{name} runs in iTerm2 session {}: switch to its tab in iTerm2",
            escape(session)
        ),
        (Some(BackendType::InProcess), _) => {
            format!("{name} runs inside the lead's process: its stream is in the lead's screen")
        }
        _ => format!("{name} has no pane recorded"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(backend: Option<BackendType>, pane: Option<&str>, host: Option<&str>) -> MemberRow {
        MemberRow {
            name: roo_store::Name::parse("alice").unwrap(),
            lead: false,
            state: "busy",
            task: None,
            since: roo_store::Timestamp::from_unix_ms(0),
            usage: Default::default(),
            last_message: None,
            backend,
            host: host.map(Into::into),
            pane: pane.map(Into::into),
            pid: None,
            dead_reason: None,
            agent_type: None,
            model: None,
            worktree: None,
            color: None,
        }
    }

    #[test]
    fn says_how_to_reach_a_member_it_cannot_switch_to() {
        let hint = |m: MemberRow| open(&m, "crew");
        let remote = hint(member(Some(BackendType::Tmux), Some("%4"), Some("gpu")));
        assert!(
            remote.contains("host gpu") && remote.contains("roo-crew-alice"),
            "{remote}"
        );
        let iterm = hint(member(Some(BackendType::Iterm2), Some("w0t0p1:ABC"), None));
        assert!(iterm.contains("iTerm2 session w0t0p1:ABC"), "{iterm}");
        let inside = hint(member(Some(BackendType::InProcess), None, None));
        assert!(inside.contains("inside the lead's process"), "{inside}");
        assert!(hint(member(None, None, None)).contains("no pane"));
        // A pane id that is not one never reaches tmux.
        let odd = hint(member(Some(BackendType::Tmux), Some("-k"), None));
        assert!(odd.contains("no pane"), "{odd}");
    }

    #[test]
    fn only_pane_ids_reach_tmux() {
        assert!(tmux_pane_id("%12"));
        for bad in ["%", "12", "%1;kill", "-t", "%1 %2", ""] {
            assert!(!tmux_pane_id(bad), "{bad}");
        }
    }
}
