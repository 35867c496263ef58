//! A permission question pinned on screen (the agent's own or a teammate's):
//! shown whole through [`ApprovalView`], compact until `v` when long, never
//! approvable while part of it is hidden, and answered with y / n / a. The
//! session decides when a question opens and where it is drawn (the pinned block,
//! [`super::dock`]); this module owns what it shows, which keys answer it and the
//! line its answer leaves in the stream.

use std::collections::VecDeque;
use std::task::Poll;

use crossterm::event::{KeyCode, KeyEvent};
use crossterm::terminal;
use roo_agent::permissions::Approval;

use super::dock::{head_fitting, shown_width};
use crate::approval_view::{ApprovalView, COMPACT_LINES, TooLarge, visible};
use crate::render::Style;
use crate::setup::PendingApproval;

/// Resolves with the index of a question whose asker stopped waiting for it (its reply
/// channel closed); never while no question is open.
pub(super) async fn withdrawn(questions: &mut VecDeque<Question>) -> usize {
    std::future::poll_fn(|cx| {
        for (i, question) in questions.iter_mut().enumerate() {
            if question.pending.reply.poll_closed(cx).is_ready() {
                return Poll::Ready(i);
            }
        }
        Poll::Pending
    })
    .await
}

/// A permission question on screen: the call shown whole (`ApprovalView`), compact
/// until `v` when long, and not approvable while part of it is hidden.
pub(super) struct Question {
    pub(super) pending: PendingApproval,
    /// Which question this is, for noticing that another came to the front.
    pub(super) serial: u64,
    view: ApprovalView,
    /// Rows of the call the pinned block shows before `v` (fewer on a short terminal).
    rows: usize,
    expanded: bool,
    /// A hint shown under the question after a key that did not answer it.
    note: Option<String>,
    /// The terminal's width when the question opened: its one-line rows are fitted to it.
    width: usize,
}

impl Question {
    /// Opens the question for `pending`, or gives the lines for the stream when it
    /// cannot be asked: a call too large to show whole is denied without asking, and
    /// a question withdrawn while it waited leaves nothing.
    pub(super) fn open(pending: PendingApproval, style: &Style) -> Result<Question, Vec<String>> {
        if pending.reply.is_closed() {
            return Err(Vec::new());
        }
        let (columns, height) = terminal::size().unwrap_or((80, 24));
        // Rows of the terminal's width, less the indent: the compact view counts rows.
        let width = usize::from(columns).saturating_sub(4);
        match ApprovalView::of(&pending.request, width) {
            Err(TooLarge(why)) => {
                let line = format!(
                    "{} {}",
                    headline(&pending, style),
                    style.dim(&format!("→ denied: {why}"))
                );
                let _ = pending.reply.send(Approval::Deny {
                    feedback: Some(why),
                });
                Err(vec![line])
            }
            Ok(view) => Ok(Question {
                pending,
                serial: 0,
                view,
                // Leave room for the question's other lines (headline, reason, hints,
                // keys), the queue under it, the status and a row of the stream: the
                // whole block stays shorter than the terminal (on a short one the rest
                // is behind `v`, which an answer then needs first).
                rows: COMPACT_LINES.min(usize::from(height).saturating_sub(OTHER_ROWS).max(1)),
                expanded: false,
                note: None,
                width: usize::from(columns),
            }),
        }
    }

    /// Whether "always" is offered: only where a rule would be saved that matches this
    /// call again and not far more (decided by the permission policy).
    pub(super) fn offers_always(&self) -> bool {
        self.pending.request.offer_always
    }

    /// Whether a hint shows under the question (the row before its keys).
    pub(super) fn has_note(&self) -> bool {
        self.note.is_some()
    }

    fn hidden(&self) -> usize {
        if self.expanded {
            0
        } else {
            self.view.hidden(self.rows)
        }
    }

    /// The reason's line as pinned (one row: cut when longer; `v` prints it whole).
    fn reason_line(&self, style: &Style) -> Option<String> {
        let reason = &self.pending.request.reason;
        (!reason.is_empty())
            .then(|| head_fitting(&format!("  {}", style.dim(&visible(reason))), self.width))
    }

    /// Whether part of the question is not in the block: rows of the call, or the
    /// reason's end.
    fn cut(&self) -> bool {
        self.hidden() > 0
            || (!self.expanded
                && self.reason_line(&Style::plain()).is_some_and(|line| {
                    shown_width(&line) < shown_width(&visible(&self.pending.request.reason)) + 2
                }))
    }

    /// The question as pinned above the prompt. Every text of it is made visible: no
    /// escape sequence reaches the terminal to redraw what the person reads. Until it
    /// is `armed` (see [`super::arming`]) the answer keys are not shown.
    pub(super) fn pinned(&self, style: &Style, running: bool, armed: bool) -> Vec<String> {
        let mut lines = vec![head_fitting(&headline(&self.pending, style), self.width)];
        if let Some(reason) = self.reason_line(style) {
            lines.push(reason);
        }
        if self.expanded {
            lines.push(style.dim("    (the whole call is printed above)"));
        } else {
            for line in self.view.compact(self.rows) {
                lines.push(format!("    {line}"));
            }
            if self.hidden() > 0 {
                lines.push(style.dim(&format!(
                    "    … {} more rows: press v to see them all before answering",
                    self.hidden()
                )));
            }
        }
        if let Some(note) = &self.note {
            lines.push(head_fitting(note, self.width));
        }
        if armed {
            lines.push(self.keys(style, running));
        } else {
            lines.push(style.dim(&format!(
                "  (the answer keys open in a moment: keys typed until [y] shows are dropped{})",
                if running { "; Esc stops" } else { "" }
            )));
        }
        lines
    }

    fn keys(&self, style: &Style, running: bool) -> String {
        let always = if self.offers_always() {
            format!(
                "   {} always (saves: {})",
                style.bold("[a]"),
                visible(&self.pending.request.suggested_rule)
            )
        } else {
            String::new()
        };
        let pause = self.teammate().map_or_else(String::new, |name| {
            format!("   {} no, pause {}", style.bold("[p]"), visible(&name))
        });
        format!(
            "  {} yes   {} no{pause}{always}{}   {}",
            style.bold("[y]"),
            style.bold("[n]"),
            if self.cut() {
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

    /// The teammate who asked, when a teammate did (`teammate alice: …`).
    pub(super) fn teammate(&self) -> Option<String> {
        self.pending
            .request
            .summary
            .strip_prefix("teammate ")
            .and_then(|rest| rest.split([':', ' ']).next())
            .filter(|name| !name.is_empty())
            .map(str::to_string)
    }

    /// `p`: the call is denied and the teammate told to stop and wait (the caller
    /// stops its current run); the record for the stream.
    pub(super) fn deny_and_pause(self, name: &str, style: &Style) -> Vec<String> {
        let line = format!(
            "{} {}",
            self.headline(style),
            style.dim(&format!("→ denied, {} paused", visible(name)))
        );
        let _ = self.pending.reply.send(Approval::Deny {
            feedback: Some(PAUSED.to_string()),
        });
        vec![line]
    }

    /// Whose question it is, for the status line: `alice's`, or `the lead's`.
    pub(super) fn whose(&self) -> String {
        let summary = &self.pending.request.summary;
        summary
            .strip_prefix("teammate ")
            .and_then(|rest| rest.split([':', ' ']).next())
            .filter(|name| !name.is_empty())
            .map_or_else(
                || "the lead's".to_string(),
                |name| format!("{}'s", visible(name)),
            )
    }

    /// The question in one line (`? summary`), for the queue and the stream's record.
    pub(super) fn headline(&self, style: &Style) -> String {
        headline(&self.pending, style)
    }

    /// Takes `key`: the question back while it stays open, and the lines for the
    /// stream (the whole call after `v`, the record of the answer).
    /// `clipped`: rows of the pinned block a short terminal cut, which count as hidden
    /// until `v` printed the whole call.
    pub(super) fn key(
        mut self,
        key: &KeyEvent,
        style: &Style,
        clipped: usize,
    ) -> (Option<Question>, Vec<String>) {
        self.note = None;
        let clipped = if self.expanded { 0 } else { clipped };
        let hidden = self.hidden() + clipped;
        match key.code {
            KeyCode::Char('v') | KeyCode::Char('V') if self.cut() || clipped > 0 => {
                self.expanded = true;
                let mut lines = vec![self.headline(style)];
                let reason = &self.pending.request.reason;
                if !reason.is_empty() {
                    lines.push(format!("  {}", style.dim(&visible(reason))));
                }
                lines.extend(self.view.lines.iter().map(|line| format!("    {line}")));
                (Some(self), lines)
            }
            _ => match answer(key) {
                Some(Approval::AllowOnce | Approval::AllowAlways) if hidden > 0 => {
                    self.note = Some(style.dim(&format!(
                        "  {hidden} rows of this call are hidden: press v to see them before allowing it"
                    )));
                    (Some(self), Vec::new())
                }
                Some(Approval::AllowAlways) if !self.offers_always() => {
                    self.note = Some(style.dim(
                        "  \"always\" is not offered here (no rule would match just this call): y allows it once",
                    ));
                    (Some(self), Vec::new())
                }
                Some(approval) => {
                    let label = match &approval {
                        Approval::AllowOnce => "→ allowed once".to_string(),
                        Approval::AllowAlways => format!(
                            "→ always allowed (saved {})",
                            visible(&self.pending.request.suggested_rule)
                        ),
                        Approval::Deny { .. } => "→ denied".to_string(),
                    };
                    let line = format!("{} {}", self.headline(style), style.dim(&label));
                    let _ = self.pending.reply.send(approval);
                    (None, vec![line])
                }
                None => (Some(self), Vec::new()),
            },
        }
    }
}

/// What a teammate paused with `p` is told (its run is stopped as well).
const PAUSED: &str = "the user denied this call and paused you: stop your current work and \
                      wait for the lead's next message";

/// Rows of the pinned block besides the call's compact view: the question's headline,
/// reason, hints and keys, the queue under it, the started line and the status line,
/// and two rows of the stream.
const OTHER_ROWS: usize = 16;

fn headline(pending: &PendingApproval, style: &Style) -> String {
    format!(
        "{} {}",
        style.yellow("?"),
        style.bold(&visible(&pending.request.summary))
    )
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
