//! A permission question pinned on screen (the agent's own or a teammate's):
//! shown whole through [`ApprovalView`], compact until `v` when long, never
//! approvable while part of it is hidden, and answered with y / n / a. The
//! session decides when a question opens; this module owns what it shows and
//! which keys answer it.

use crossterm::event::{KeyCode, KeyEvent};
use crossterm::terminal;
use roo_agent::permissions::Approval;

use crate::approval_view::{ApprovalView, TooLarge, visible};
use crate::render::Style;
use crate::setup::PendingApproval;

/// Resolves when the open question's asker stopped waiting for it (its reply channel
/// closed); never while no question is open.
pub(super) async fn withdrawn(question: &mut Option<Question>) {
    match question {
        Some(question) => question.pending.reply.closed().await,
        None => std::future::pending().await,
    }
}

/// A permission question on screen: the call shown whole (`ApprovalView`), compact
/// until `v` when long, and not approvable while part of it is hidden.
pub(super) struct Question {
    pub(super) pending: PendingApproval,
    view: ApprovalView,
    expanded: bool,
}

impl Question {
    /// Shows `pending`: the question, or, for a call too large to show whole, the
    /// denial it got without asking (`None`).
    pub(super) fn open(
        pending: PendingApproval,
        style: &Style,
        running: bool,
    ) -> (Option<Question>, Vec<String>) {
        if pending.reply.is_closed() {
            // Withdrawn while it waited behind another question.
            return (None, Vec::new());
        }
        let request = &pending.request;
        // Every text of the question is made visible: no escape sequence reaches the
        // terminal to redraw what the person reads.
        let mut lines = vec![format!(
            "{} {}",
            style.yellow("?"),
            style.bold(&visible(&request.summary))
        )];
        if !request.reason.is_empty() {
            lines.push(format!("  {}", style.dim(&visible(&request.reason))));
        }
        // Rows of the terminal's width, less the indent: the compact view counts rows.
        let width = usize::from(terminal::size().map(|(w, _)| w).unwrap_or(80)).saturating_sub(4);
        match ApprovalView::of(request, width) {
            Err(TooLarge(why)) => {
                lines.push(style.dim(&format!("  → denied: {why}")));
                let _ = pending.reply.send(Approval::Deny {
                    feedback: Some(why),
                });
                (None, lines)
            }
            Ok(view) => {
                let question = Question {
                    pending,
                    view,
                    expanded: false,
                };
                for line in question.view.compact() {
                    lines.push(format!("    {line}"));
                }
                if question.view.hidden() > 0 {
                    lines.push(style.dim(&format!(
                        "    … {} more rows: press v to see them all before answering",
                        question.view.hidden()
                    )));
                }
                lines.push(question.keys(style, running));
                (Some(question), lines)
            }
        }
    }

    fn hiding(&self) -> bool {
        !self.expanded && self.view.hidden() > 0
    }

    fn keys(&self, style: &Style, running: bool) -> String {
        format!(
            "  {} yes   {} no   {} always (saves: {}){}   {}",
            style.bold("[y]"),
            style.bold("[n]"),
            style.bold("[a]"),
            visible(&self.pending.request.suggested_rule),
            if self.hiding() {
                format!("   {} view all", style.bold("[v]"))
            } else {
                String::new()
            },
            style.dim(if running {
                "(Esc: no, and stop)"
            } else {
                "(Esc: no)"
            })
        )
    }

    /// Takes `key`: the question back while it stays open, and the lines to print.
    pub(super) fn key(
        mut self,
        key: &KeyEvent,
        style: &Style,
        running: bool,
    ) -> (Option<Question>, Vec<String>) {
        match key.code {
            KeyCode::Char('v') | KeyCode::Char('V') if self.hiding() => {
                self.expanded = true;
                let mut lines: Vec<String> = self.view.lines[self.view.compact().len()..]
                    .iter()
                    .map(|line| format!("    {line}"))
                    .collect();
                lines.push(self.keys(style, running));
                (Some(self), lines)
            }
            _ => match answer(key) {
                Some(Approval::AllowOnce | Approval::AllowAlways) if self.hiding() => {
                    let hint = style.dim(&format!(
                        "  {} rows of this call are hidden: press v to see them before allowing it",
                        self.view.hidden()
                    ));
                    (Some(self), vec![hint])
                }
                Some(approval) => {
                    let label = style.dim(answer_label(&approval)).to_string();
                    let _ = self.pending.reply.send(approval);
                    (None, vec![label])
                }
                None => (Some(self), Vec::new()),
            },
        }
    }
}

fn answer(key: &KeyEvent) -> Option<Approval> {
    match key.code {
        KeyCode::Char('y') | KeyCode::Char('Y') => Some(Approval::AllowOnce),
        KeyCode::Char('a') | KeyCode::Char('A') => Some(Approval::AllowAlways),
        KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => {
            Some(Approval::Deny { feedback: None })
        }
        _ => None,
    }
}

fn answer_label(approval: &Approval) -> &'static str {
    match approval {
        Approval::AllowOnce => "  → allowed once",
        Approval::AllowAlways => "  → always allowed",
        Approval::Deny { .. } => "  → denied",
    }
}
