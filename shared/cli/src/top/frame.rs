//! The team view's frame: a [`TeamView`] as lines of text for a terminal of a given width
//! and height. Pure (no terminal, no store), so `--once`, the live view, the tests and the
//! benchmark share it. Every line fits the width in terminal columns (untrusted text is
//! escaped, then cut by display width, a wide character as two columns and never apart
//! from its combining marks); on a narrow terminal the less important columns go first; colour
//! comes only from the [`Style`] given, so `NO_COLOR` and a pipe get plain text. Only
//! ASCII is drawn besides the `…` of a cut.

use roo_store::{BackendType, TaskUsage, Timestamp};
use roo_term::Style;
use unicode_width::UnicodeWidthChar;

use super::model::{Column, MemberRow, TaskRow, TeamView};
use crate::output::escape;

/// What to draw besides the view itself.
#[derive(Clone, Debug)]
pub struct FrameOptions {
    /// Columns.
    pub width: usize,
    /// Lines.
    pub height: usize,
    /// Colour or plain.
    pub style: Style,
    /// The selected member (an index into [`TeamView::members`]).
    pub selected: usize,
    /// Show the selected member's detail instead of the board and events.
    pub follow: bool,
    /// Draw the selection marker and the key line (the live view; not `--once`).
    pub interactive: bool,
    /// A one-line notice for the key line (what `o` did, an error reading the store).
    pub notice: Option<String>,
}

/// The terminal columns `text` takes: a wide (CJK, emoji) character two, a combining
/// mark none (text is escaped first, so no control character is left to count).
pub(super) fn columns(text: &str) -> usize {
    text.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// The longest start of `text` within `max` columns, never cut between a character and
/// the combining marks that follow it (they take no column, so they go with it).
fn head(text: &str, max: usize) -> &str {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        let w = c.width().unwrap_or(0);
        if w > 0 && used + w > max {
            return &text[..i];
        }
        used += w;
    }
    text
}

/// `text` in exactly `width` columns: cut with `…`, or padded with spaces.
fn cell(text: &str, width: usize) -> String {
    let n = columns(text);
    if n > width {
        if width == 0 {
            return String::new();
        }
        let kept = head(text, width - 1);
        format!("{kept}…{}", " ".repeat(width - 1 - columns(kept)))
    } else {
        format!("{text}{}", " ".repeat(width - n))
    }
}

/// A whole line cut to `width` columns (without padding).
pub(super) fn fit(text: &str, width: usize) -> String {
    if columns(text) > width {
        cell(text, width).trim_end_matches(' ').to_owned()
    } else {
        text.to_owned()
    }
}

/// A duration in at most 5 columns: `12s`, `4m05s`, `3h07m`, `2d03h`.
pub fn age(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// A token count in at most 6 columns: `950`, `12.3k`, `4.1M`.
pub fn tokens(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// A cost: `$0.012`, `$3.40`, `-` when no price was known.
pub fn cost(usage: &TaskUsage) -> String {
    match usage.cost_usd {
        None => "-".into(),
        Some(c) if c < 1.0 => format!("${c:.3}"),
        Some(c) => format!("${c:.2}"),
    }
}

/// `HH:MM:SS` (UTC) of a time stamp.
pub fn clock(t: Timestamp) -> String {
    t.to_string().get(11..19).unwrap_or_default().to_owned()
}

fn backend_name(b: BackendType) -> &'static str {
    match b {
        BackendType::Tmux => "tmux",
        BackendType::Iterm2 => "iterm2",
        BackendType::InProcess => "in-process",
    }
}

/// Where a member runs: backend, host, pane (`tmux@box2 %5`).
pub fn place(m: &MemberRow) -> String {
    let mut s = m.backend.map_or("-", backend_name).to_owned();
    if let Some(h) = &m.host {
        s.push('@');
        s.push_str(h);
    }
    if let Some(p) = &m.pane {
        s.push(' ');
        s.push_str(p);
    }
    escape(&s)
}

fn state_styled(style: Style, state: &str, text: &str) -> String {
    match state {
        "busy" => style.yellow(text),
        "idle" => style.green(text),
        "dead" => style.red(text),
        _ => style.dim(text),
    }
}

fn column_styled(style: Style, column: Column, text: &str) -> String {
    match column {
        Column::InProgress => style.cyan(text),
        Column::Pending => text.to_owned(),
        Column::Blocked => style.yellow(text),
        Column::Done => style.dim(text),
    }
}

/// Spaces between two columns of the members table.
const GAP: usize = 2;

/// One column of the members table.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Name,
    State,
    Task,
    Cost,
    For,
    Msg,
    Tokens,
    Where,
}

impl Field {
    /// Most important first: the last ones are dropped first on a narrow terminal.
    const ALL: [Field; 8] = [
        Field::Name,
        Field::State,
        Field::Task,
        Field::Cost,
        Field::For,
        Field::Msg,
        Field::Tokens,
        Field::Where,
    ];
    /// Columns in the order they are drawn.
    const DRAWN: [Field; 8] = [
        Field::Name,
        Field::State,
        Field::Task,
        Field::For,
        Field::Tokens,
        Field::Cost,
        Field::Msg,
        Field::Where,
    ];

    fn title(self) -> &'static str {
        match self {
            Field::Name => "MEMBER",
            Field::State => "STATE",
            Field::Task => "TASK",
            Field::Cost => "COST",
            Field::For => "FOR",
            Field::Msg => "SPOKE",
            Field::Tokens => "TOKENS",
            Field::Where => "WHERE",
        }
    }

    fn text(self, view: &TeamView, m: &MemberRow) -> String {
        match self {
            Field::Name => {
                let lead = if m.lead { " (lead)" } else { "" };
                format!("{}{lead}", escape(m.name.as_str()))
            }
            Field::State => m.state.replace('_', " "),
            Field::Task => m.task.as_ref().map_or_else(
                || "-".into(),
                |(id, subject)| format!("#{id} {}", escape(subject)),
            ),
            Field::Cost => cost(&m.usage),
            Field::For => age(view.now.unix_ms() - m.since.unix_ms()),
            Field::Msg => m
                .last_message
                .map_or_else(|| "-".into(), |t| age(view.now.unix_ms() - t.unix_ms())),
            Field::Tokens => tokens(m.usage.total_tokens()),
            Field::Where => place(m),
        }
    }
}

/// The members table's columns and their widths for `width` columns (the task column
/// takes what is left).
fn layout(view: &TeamView, width: usize) -> Vec<(Field, usize)> {
    let natural = |f: Field| {
        view.members
            .iter()
            .map(|m| columns(&f.text(view, m)))
            .chain([f.title().len()])
            .max()
            .unwrap_or(0)
    };
    let mut widths: Vec<(Field, usize)> = Field::ALL
        .iter()
        .map(|&f| {
            let w = match f {
                Field::Name => natural(f).min(20),
                Field::Task => 12,
                Field::Where => natural(f).min(18),
                _ => natural(f).min(11),
            };
            (f, w)
        })
        .collect();
    // Two columns of gutter for the selection marker, two spaces between columns.
    let used = |ws: &[(Field, usize)]| 2 + ws.iter().map(|(_, w)| w + GAP).sum::<usize>();
    while widths.len() > 1 && used(&widths) > width {
        widths.pop();
    }
    let spare = width.saturating_sub(used(&widths));
    let task_natural = natural(Field::Task);
    for (f, w) in &mut widths {
        if *f == Field::Task {
            *w = (*w + spare).min(task_natural.max(*w));
        }
    }
    Field::DRAWN
        .iter()
        .filter_map(|f| widths.iter().find(|(g, _)| g == f).copied())
        .collect()
}

fn member_line(
    view: &TeamView,
    m: &MemberRow,
    cols: &[(Field, usize)],
    marker: &str,
    style: Style,
) -> String {
    let mut line = marker.to_owned();
    for (f, w) in cols {
        let text = cell(&f.text(view, m), *w);
        let shown = match f {
            Field::Name => match &m.color {
                Some(c) => style.member_colour(c, &text),
                None => style.bold(&text),
            },
            Field::State => state_styled(style, m.state, &text),
            _ => text,
        };
        line.push_str(&shown);
        line.push_str(&" ".repeat(GAP));
    }
    line.trim_end().to_owned()
}

/// Lines for `wants` rows in each section, within `avail` lines: one line at a time to
/// each section that still wants more, in turn.
fn share(avail: usize, wants: &[usize]) -> Vec<usize> {
    let mut got = vec![0; wants.len()];
    let mut left = avail;
    while left > 0 {
        let mut gave = false;
        for (g, w) in got.iter_mut().zip(wants) {
            if left > 0 && *g < *w {
                *g += 1;
                left -= 1;
                gave = true;
            }
        }
        if !gave {
            break;
        }
    }
    got
}

/// The rows of a list shown in `room` lines: the window holding `keep` (or the first
/// ones), and how many are not shown.
fn window(len: usize, room: usize, keep: usize) -> (usize, usize) {
    if len <= room {
        return (0, len);
    }
    let start = keep.saturating_sub(room.saturating_sub(1)).min(len - room);
    (start, start + room)
}

fn heading(style: Style, text: &str, width: usize) -> String {
    style.bold(&fit(text, width))
}

fn task_line(t: &TaskRow, width: usize, style: Style) -> String {
    let owner = t.owner.as_ref().map_or("-".into(), |o| escape(o.as_str()));
    let waits = if t.waits_on.is_empty() {
        String::new()
    } else {
        let ids: Vec<String> = t.waits_on.iter().map(|id| format!("#{id}")).collect();
        format!(" (waits on {})", ids.join(", "))
    };
    let id = cell(&format!("#{}", t.id), 5);
    let label = cell(t.column.label(), 11);
    let owner = cell(&owner, 10);
    let rest = width.saturating_sub(2 + 6 + 12 + 11);
    let subject = fit(&format!("{}{waits}", escape(&t.subject)), rest);
    let text = format!(
        "  {id} {} {owner} {subject}",
        column_styled(style, t.column, &label)
    );
    text.trim_end().to_owned()
}

fn event_line(e: &super::model::EventLine, width: usize) -> String {
    let actor = e.actor.as_deref().map_or("-".into(), escape);
    fit(
        &format!(
            "  {} {} {} {}",
            clock(e.time),
            escape(&e.kind),
            actor,
            escape(&e.text)
        ),
        width,
    )
}

fn title(view: &TeamView, opts: &FrameOptions) -> String {
    let busy = view.members.iter().filter(|m| m.state == "busy").count();
    let spend = if view.total.cost_usd.is_some() {
        format!(", {} spent on tasks", cost(&view.total))
    } else {
        String::new()
    };
    let text = format!(
        "team {}: {} members, {busy} busy{spend}  {} UTC",
        escape(view.team.as_str()),
        view.members.len(),
        clock(view.now),
    );
    opts.style.bold(&fit(&text, opts.width))
}

fn more(n: usize, width: usize) -> String {
    fit(&format!("  … {n} more"), width)
}

/// A section's rows in `room` lines: the window, with a last line saying how many are
/// not shown when some are not (unless the window is kept around a selection).
fn rows_in<T>(rows: &[T], room: usize, draw: impl Fn(&T) -> String, width: usize) -> Vec<String> {
    if rows.len() <= room {
        return rows.iter().map(draw).collect();
    }
    let mut out: Vec<String> = rows[..room.saturating_sub(1)].iter().map(draw).collect();
    if room > 0 {
        out.push(more(rows.len() - room + 1, width));
    }
    out
}

/// The frame: at most `opts.height` lines, none wider than `opts.width`.
pub fn render(view: &TeamView, opts: &FrameOptions) -> Vec<String> {
    let (width, style) = (opts.width.max(20), opts.style);
    let mut lines = vec![title(view, opts)];
    let footer = opts.interactive || opts.notice.is_some();
    // The title, the members' heading, the key line; the board's two headings.
    let fixed = 2 + usize::from(footer) + if opts.follow { 0 } else { 2 };
    let avail = opts.height.saturating_sub(fixed);
    let selected = opts.selected.min(view.members.len().saturating_sub(1));
    let cols = layout(view, width);
    let (room_m, body) = if opts.follow {
        let detail = super::follow::lines(view, selected, width, style);
        let got = share(avail, &[view.members.len().min(3), detail.len()]);
        (got[0], Body::Follow(detail, got[1]))
    } else {
        let events = view.events.len();
        let got = share(avail, &[view.members.len(), view.tasks.len(), events]);
        (got[0], Body::Board(got[1], got[2]))
    };
    let head: String = cols
        .iter()
        .map(|(f, w)| format!("{}{}", cell(f.title(), *w), " ".repeat(GAP)))
        .collect();
    lines.push(heading(style, &format!("  {}", head.trim_end()), width));
    let (start, end) = window(view.members.len(), room_m, selected);
    for (i, m) in view.members.iter().enumerate().take(end).skip(start) {
        let marker = if opts.interactive && i == selected {
            "> "
        } else {
            "  "
        };
        lines.push(fit(&member_line(view, m, &cols, marker, style), width));
    }
    match body {
        Body::Board(room_t, room_e) => {
            let c = view.counts;
            lines.push(heading(
                style,
                &format!(
                    "TASKS  {} in progress, {} pending, {} blocked, {} done",
                    c.in_progress, c.pending, c.blocked, c.done
                ),
                width,
            ));
            lines.extend(rows_in(
                &view.tasks,
                room_t,
                |t| task_line(t, width, style),
                width,
            ));
            lines.push(heading(style, "EVENTS (newest last)", width));
            let skip = view.events.len().saturating_sub(room_e);
            lines.extend(view.events[skip..].iter().map(|e| event_line(e, width)));
        }
        Body::Follow(detail, room) => {
            lines.extend(detail.into_iter().take(room));
        }
    }
    if footer {
        let keys = if opts.interactive {
            "q quit  up/down select  enter follow  o open pane"
        } else {
            ""
        };
        let text = match &opts.notice {
            Some(n) if keys.is_empty() => n.clone(),
            Some(n) => format!("{n}  ({keys})"),
            None => keys.to_owned(),
        };
        lines.push(style.dim(&fit(&text, width)));
    }
    lines.truncate(opts.height.max(1));
    lines
}

enum Body {
    /// The board and events, with their rooms.
    Board(usize, usize),
    /// The selected member's detail lines, and the room for them.
    Follow(Vec<String>, usize),
}
