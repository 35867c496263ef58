use roo_store::{BackendType, Member, Name, Task, TaskStatus, TaskUsage, TeamConfig, Timestamp};
use roo_term::Style;

use super::frame::{FrameOptions, render};
use super::model::{Column, EventLine, MessageLine, Snapshot, TeamView};

const NOW: i64 = 1_800_000_000_000;

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

fn task(id: u64, subject: &str, status: TaskStatus, owner: Option<&str>, deps: &[u64]) -> Task {
    serde_json::from_value(serde_json::json!({
        "id": id.to_string(),
        "subject": subject,
        "status": status.as_str(),
        "owner": owner,
        "blocked_by": deps.iter().map(u64::to_string).collect::<Vec<_>>(),
        "created_at": Timestamp::from_unix_ms(NOW - 600_000),
        "updated_at": Timestamp::from_unix_ms(NOW - 65_000),
    }))
    .unwrap()
}

fn usage(tokens: u64, cost: f64) -> TaskUsage {
    TaskUsage {
        input_tokens: tokens,
        requests: 1,
        cost_usd: Some(cost),
        ..Default::default()
    }
}

/// A team `demo`: the lead, `alice` (tmux %3) and `bob`; alice works on #2, #3 waits on
/// #2, #1 is done by bob.
fn snapshot() -> Snapshot {
    let team = name("demo");
    let mut lead = Member::new(name("lead"), &team);
    lead.backend_type = Some(BackendType::InProcess);
    let mut alice = Member::new(name("alice"), &team);
    alice.backend_type = Some(BackendType::Tmux);
    alice.pane_id = Some("%3".into());
    alice.worktree_path = Some(
        format!(
            "/{}/project/.roocode/worktrees/demo+alice",
            "deep/".repeat(20)
        )
        .into(),
    );
    alice.joined_at = Timestamp::from_unix_ms(NOW - 300_000);
    let mut bob = Member::new(name("bob"), &team);
    bob.joined_at = Timestamp::from_unix_ms(NOW - 20_000);
    let config = TeamConfig {
        version: Default::default(),
        name: team,
        description: "demo team".into(),
        lead_agent_id: lead.agent_id.clone(),
        created_at: Timestamp::from_unix_ms(NOW - 600_000),
        members: vec![alice, lead, bob],
        lead_key: None,
        extra: Default::default(),
    };
    let mut done = task(
        1,
        "write the parser",
        TaskStatus::Completed,
        Some("bob"),
        &[],
    );
    done.usage.insert(name("bob"), usage(1500, 0.25));
    done.usage.insert(name("alice"), usage(500, 0.05));
    let mut alpha = task(
        2,
        "write alpha",
        TaskStatus::InProgress,
        Some("alice"),
        &[1],
    );
    alpha.usage.insert(name("alice"), usage(12_000, 0.5));
    let blocked = task(3, "integrate alpha", TaskStatus::Pending, None, &[2]);
    let ready = task(4, "write docs", TaskStatus::Pending, None, &[1]);
    Snapshot {
        config,
        states: vec!["busy", "busy", "idle"],
        tasks: vec![done, alpha, blocked, ready],
        messages: vec![MessageLine {
            from: "alice".into(),
            to: "lead".into(),
            time: Timestamp::from_unix_ms(NOW - 12_000),
            kind: "text".into(),
            summary: "alpha half done".into(),
        }],
        events: vec![EventLine {
            time: Timestamp::from_unix_ms(NOW - 12_000),
            actor: Some("alice".into()),
            kind: "task_claimed".into(),
            text: "#2".into(),
        }],
        now: Timestamp::from_unix_ms(NOW),
    }
}

fn options(width: usize, height: usize, style: Style) -> FrameOptions {
    FrameOptions {
        width,
        height,
        style,
        selected: 0,
        follow: false,
        interactive: false,
        notice: None,
    }
}

/// Terminal columns (a wide character takes two, a combining mark none).
fn visible_width(line: &str) -> usize {
    use unicode_width::UnicodeWidthChar;
    line.chars().map(|c| c.width().unwrap_or(0)).sum()
}

#[test]
fn a_task_waiting_on_an_unfinished_one_is_blocked() {
    let view = TeamView::build(snapshot());
    let col = |id: &str| view.tasks.iter().find(|t| t.id.as_str() == id).unwrap();
    assert_eq!(col("3").column, Column::Blocked);
    assert_eq!(col("3").waits_on.len(), 1);
    assert_eq!(col("4").column, Column::Pending, "its dependency is done");
    assert_eq!(col("2").column, Column::InProgress);
    assert_eq!(view.counts.blocked, 1);
    let frame = render(&view, &options(80, 24, Style::plain())).join("\n");
    let line = frame.lines().find(|l| l.contains("#3")).unwrap();
    assert!(
        line.contains("blocked") && line.contains("waits on #2"),
        "{frame}"
    );
}

#[test]
fn members_show_their_task_state_spend_and_where_they_run() {
    let view = TeamView::build(snapshot());
    assert_eq!(
        view.members[0].name.as_str(),
        "lead",
        "the lead comes first"
    );
    let alice = view
        .members
        .iter()
        .find(|m| m.name.as_str() == "alice")
        .unwrap();
    assert_eq!(alice.task.as_ref().unwrap().0.as_str(), "2");
    assert_eq!(alice.usage.input_tokens, 12_500, "summed over the tasks");
    assert_eq!(alice.usage.cost_usd, Some(0.55));
    let frame = render(&view, &options(100, 30, Style::plain())).join("\n");
    let line = frame.lines().find(|l| l.contains("alice")).unwrap();
    for want in [
        "busy",
        "#2 write alpha",
        "$0.550",
        "12.5k",
        "12s",
        "tmux %3",
    ] {
        assert!(line.contains(want), "{want} in {line:?}\n{frame}");
    }
    let bob = frame
        .lines()
        .find(|l| l.trim_start().starts_with("bob"))
        .unwrap();
    assert!(bob.contains("idle") && bob.contains("$0.250"), "{bob}");
}

#[test]
fn an_unknown_state_from_a_newer_store_is_shown_as_it_is_named() {
    let mut s = snapshot();
    s.states[2] = "not_started";
    let frame = render(&TeamView::build(s), &options(80, 24, Style::plain())).join("\n");
    assert!(frame.contains("not started"), "{frame}");
}

#[test]
fn fits_80_by_24_and_drops_columns_before_cutting_names() {
    let mut s = snapshot();
    s.tasks[1].subject = "a very long subject ".repeat(10);
    for (width, height) in [(80, 24), (40, 10), (20, 5)] {
        let lines = render(
            &TeamView::build(s.clone()),
            &options(width, height, Style::plain()),
        );
        assert!(lines.len() <= height, "{width}x{height}: {lines:#?}");
        for l in &lines {
            assert!(visible_width(l) <= width, "{width}: {l:?}");
        }
    }
    let narrow = render(
        &TeamView::build(s.clone()),
        &options(40, 24, Style::plain()),
    )
    .join("\n");
    assert!(
        narrow.contains("alice") && narrow.contains("busy"),
        "{narrow}"
    );
    assert!(
        !narrow.contains("WHERE"),
        "the least important column goes first:\n{narrow}"
    );
}

#[test]
fn no_colour_means_no_escape_codes_even_from_what_members_wrote() {
    let mut s = snapshot();
    s.tasks[2].subject = "evil \x1b[2J\x1b]0;title\x07 subject".into();
    s.messages[0].summary = "\x1b[31mred".into();
    let view = TeamView::build(s);
    let mut followed = options(80, 24, Style::plain());
    followed.follow = true;
    followed.selected = 1;
    for opts in [options(80, 24, Style::plain()), followed] {
        let frame = render(&view, &opts).join("\n");
        assert!(!frame.contains('\x1b'), "{frame:?}");
    }
    let coloured = render(&view, &options(80, 24, Style::coloured())).join("\n");
    assert!(coloured.contains('\x1b'), "colour when asked");
    assert!(
        !coloured.contains("\x1b[2J"),
        "what members wrote is escaped"
    );
}

#[test]
fn following_a_member_shows_its_tasks_and_messages() {
    let view = TeamView::build(snapshot());
    let alice = view
        .members
        .iter()
        .position(|m| m.name.as_str() == "alice")
        .unwrap();
    let mut opts = options(80, 24, Style::plain());
    opts.follow = true;
    opts.selected = alice;
    opts.interactive = true;
    let frame = render(&view, &opts).join("\n");
    for want in [
        "FOLLOWING alice",
        "#2 in progress",
        "alpha half done",
        "q quit",
    ] {
        assert!(frame.contains(want), "{want}\n{frame}");
    }
}

#[test]
fn fifty_members_and_five_hundred_tasks_fit_and_keep_the_selection_visible() {
    let mut s = snapshot();
    let team = s.config.name.clone();
    for i in 0..50 {
        s.config
            .members
            .push(Member::new(name(&format!("m{i}")), &team));
        s.states.push("busy");
    }
    for i in 10..510 {
        let owner = format!("m{}", i % 50);
        s.tasks
            .push(task(i, "bulk", TaskStatus::InProgress, Some(&owner), &[]));
    }
    let view = TeamView::build(s);
    let mut opts = options(80, 24, Style::plain());
    opts.interactive = true;
    opts.selected = 40;
    let lines = render(&view, &opts);
    assert!(lines.len() <= 24, "{lines:#?}");
    assert!(lines.iter().all(|l| visible_width(l) <= 80));
    let frame = lines.join("\n");
    assert!(
        frame.contains("> "),
        "the selected member is shown:\n{frame}"
    );
    assert!(frame.contains("more"), "a cut list says so:\n{frame}");
}

/// Issue 31 review: the frame counted characters, not columns: a CJK or emoji subject
/// drew 128 columns in an 80-column frame, and a cut could split a letter from its
/// combining marks.
#[test]
fn wide_characters_fit_the_width_and_a_cut_keeps_combining_marks() {
    let mut s = snapshot();
    s.tasks[2].subject = "漢字のタスク🚀".repeat(12);
    s.tasks[3].subject = "e\u{301}".repeat(200);
    s.messages[0].summary = "表".repeat(100);
    s.config.description = "説明".repeat(60);
    let view = TeamView::build(s);
    let alice = view
        .members
        .iter()
        .position(|m| m.name.as_str() == "alice")
        .unwrap();
    let mut followed = options(80, 24, Style::plain());
    followed.follow = true;
    followed.selected = alice;
    for opts in [
        options(80, 24, Style::plain()),
        options(40, 24, Style::plain()),
        followed,
    ] {
        for line in render(&view, &opts) {
            assert!(
                visible_width(&line) <= opts.width,
                "{} columns: {line}",
                visible_width(&line)
            );
            assert!(
                !line.contains("…\u{301}") && !line.starts_with('\u{301}'),
                "{line:?}"
            );
        }
    }
    let frame = render(&view, &options(80, 24, Style::plain())).join("\n");
    assert!(frame.contains("漢字"), "{frame}");
    assert!(frame.contains("e\u{301}e\u{301}"), "{frame}");
}

/// Issue 31 review: `team top` parsed the whole task list on every frame. A live view
/// reads it again only when the event log records a task change (or after
/// `TASKS_KEPT`): a message leaves the kept list in use, a new task is read.
#[test]
fn a_redraw_reads_the_task_list_again_only_after_a_task_event() {
    use roo_store::{NewTask, Outgoing, RooHome, Team};

    use super::model::TaskCache;

    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path().join("roo"));
    let t = name("crew");
    let team = Team::create(
        &home,
        t.clone(),
        "cache",
        Member::new(name("lead"), &t),
        vec![Member::new(name("alice"), &t)],
    )
    .unwrap();
    let new = |subject: &str| NewTask {
        subject: subject.to_string(),
        by: Some(name("lead")),
        ..Default::default()
    };
    team.tasks().create(new("first")).unwrap();
    let mut cache = TaskCache::default();
    assert_eq!(
        Snapshot::load_kept(&team, &mut cache).unwrap().tasks.len(),
        1
    );
    // A change the log does not record (spend), then a message: the kept list serves.
    let spend = usage(1_000, 0.5);
    let first = roo_store::TaskId::parse("1").unwrap();
    team.tasks()
        .add_usage(&first, &name("alice"), &spend)
        .unwrap();
    team.mailbox()
        .send(&name("alice"), "lead", Outgoing::text("hi", "hello"))
        .unwrap();
    let kept = Snapshot::load_kept(&team, &mut cache).unwrap();
    assert!(kept.tasks[0].usage.is_empty(), "the list was read again");
    assert_eq!(kept.messages.len(), 1);
    // A task event: read again, the spend with it.
    team.tasks().create(new("second")).unwrap();
    let read = Snapshot::load_kept(&team, &mut cache).unwrap();
    assert_eq!(read.tasks.len(), 2);
    assert!(!read.tasks[0].usage.is_empty());
}
