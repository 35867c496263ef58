//! Benchmark of `roo-mail team top`'s redraw (run with `cargo bench --workspace --bench
//! top`): a files store holding a team of 50 members and 500 tasks (a third in progress,
//! each with usage, a third pending with dependencies, the rest done) and a message from
//! every member; then, n times each: reading the store ([`Snapshot::load`]: roster,
//! liveness, tasks, inboxes, the newest 200 events), building the view and drawing one
//! frame at 80×24 and 200×60 (pure, what a redraw costs beyond the reads), and the whole
//! redraw (read + build + draw), and the same with the task list kept from the last read
//! (what the live view does while the event log records no task change). Target: under
//! 5 ms a frame.
//!
//! Then the same for a big team (issue 31 review): 51 members, 10,000 tasks and about
//! 19 MB in the inboxes (six messages of 60 KB from each member to the next), where a frame must
//! cost what it shows, not what the store holds (`ROO_BENCH_BIG=0` skips it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use roo_cli::top::frame::{FrameOptions, render};
use roo_cli::top::model::{Snapshot, TaskCache, TeamView};
use roo_store::{
    ClaimOptions, Member, Name, NewTask, Outgoing, RooHome, TaskId, TaskPatch, TaskStatus,
    TaskUsage, Team,
};
use roo_term::Style;

/// A team to time: members (lead included), tasks, and messages of `message_bytes`
/// each member sends the lead.
#[derive(Clone, Copy)]
struct Shape {
    members: usize,
    tasks: usize,
    messages: usize,
    message_bytes: usize,
}

const SMALL: Shape = Shape {
    members: 50,
    tasks: 500,
    messages: 1,
    message_bytes: 8,
};
const BIG: Shape = Shape {
    members: 51,
    tasks: 10_000,
    messages: 6,
    message_bytes: 60_000,
};

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

fn stats(label: &str, mut v: Vec<Duration>) {
    v.sort();
    let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3;
    println!(
        "{label:<44} p50 {:>7.3} ms  p90 {:>7.3} ms  p99 {:>7.3} ms  (n={})",
        at(0.5),
        at(0.9),
        at(0.99),
        v.len()
    );
}

fn time(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect()
}

fn setup(home: &RooHome, shape: Shape) -> Team {
    let Shape {
        members: all,
        tasks: count,
        ..
    } = shape;
    let t = name("bench");
    let members = (0..all - 1)
        .map(|i| Member::new(name(&format!("member{i:02}")), &t))
        .collect();
    let team = Team::create(
        home,
        t.clone(),
        "top bench",
        Member::new(name("lead"), &t),
        members,
    )
    .unwrap();
    if count > 1000 {
        write_tasks(home, &t, count, all);
    } else {
        create_tasks(&team, count, all);
    }
    let body = "progress ".repeat(shape.message_bytes / 9 + 1);
    for i in 0..all - 1 {
        let from = name(&format!("member{i:02}"));
        // The small team's messages go to the lead; the big team's around the roster
        // (an inbox holds at most 4 MiB unread).
        let to = match shape.messages {
            1 => "lead".to_owned(),
            _ => format!("member{:02}", (i + 1) % (all - 1)),
        };
        for _ in 0..shape.messages {
            team.mailbox()
                .send(&from, &to, Outgoing::text(body.as_str(), "progress report"))
                .unwrap();
        }
    }
    team
}

/// Creates `count` tasks through the store, as a team would (the small team).
fn create_tasks(team: &Team, count: usize, all: usize) {
    let tasks = team.tasks();
    let lead = name("lead");
    for i in 0..count {
        let blocked_by = if i % 3 == 1 && i > 3 {
            vec![TaskId::parse(&(i - 2).to_string()).unwrap()]
        } else {
            Vec::new()
        };
        tasks
            .create(NewTask {
                subject: format!("task number {i} with a subject of some length"),
                blocked_by,
                by: Some(lead.clone()),
                ..Default::default()
            })
            .unwrap();
    }
    for i in 0..count {
        let id = TaskId::parse(&(i + 1).to_string()).unwrap();
        let owner = name(&format!("member{:02}", i % (all - 1)));
        match i % 3 {
            0 => {
                tasks.claim(&id, &owner, &ClaimOptions::default()).unwrap();
                let spend = TaskUsage {
                    input_tokens: 12_000,
                    output_tokens: 800,
                    requests: 3,
                    cost_usd: Some(0.05),
                    ..Default::default()
                };
                tasks.add_usage(&id, &owner, &spend).unwrap();
            }
            2 => {
                let done = TaskPatch {
                    status: Some(TaskStatus::Completed),
                    ..Default::default()
                };
                tasks.update(&id, done).unwrap();
            }
            _ => {}
        }
    }
}

/// Writes `count` tasks of the same mix as [`create_tasks`] as one task list file: one
/// create at a time rewrites the whole list, so 10,000 of them would take the bench
/// longer than the frames it times.
fn write_tasks(home: &RooHome, team: &Name, count: usize, all: usize) {
    let now = roo_store::Timestamp::now();
    let tasks: Vec<serde_json::Value> = (0..count)
        .map(|i| {
            let owner = format!("member{:02}", i % (all - 1));
            let (status, owner, usage) = match i % 3 {
                0 => (
                    "in_progress",
                    Some(owner.clone()),
                    serde_json::json!({ owner: {
                        "input_tokens": 12_000, "output_tokens": 800,
                        "requests": 3, "cost_usd": 0.05 } }),
                ),
                2 => ("completed", None, serde_json::json!({})),
                _ => ("pending", None, serde_json::json!({})),
            };
            let blocked_by: Vec<String> = if i % 3 == 1 && i > 3 {
                vec![(i - 1).to_string()]
            } else {
                Vec::new()
            };
            serde_json::json!({
                "id": (i + 1).to_string(),
                "subject": format!("task number {i} with a subject of some length"),
                "status": status,
                "owner": owner,
                "blocked_by": blocked_by,
                "usage": usage,
                "created_by": "lead",
                "created_at": now,
                "updated_at": now,
            })
        })
        .collect();
    let list = serde_json::json!({ "version": "1.0", "next_id": count + 1, "tasks": tasks });
    let path = home
        .root()
        .join("tasks")
        .join(team.as_str())
        .join("tasks.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(&list).unwrap()).unwrap();
}

fn main() {
    let n: usize = std::env::var("ROO_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    run(SMALL, n);
    if std::env::var("ROO_BENCH_BIG").as_deref() != Ok("0") {
        run(BIG, (n / 10).max(10));
    }
}

fn run(shape: Shape, n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path().join("roo"));
    let team = setup(&home, shape);
    let snapshot = Snapshot::load(&team).unwrap();
    println!(
        "team top redraw: {} members, {} tasks, {} MB of inboxes, {} events shown (n = {n})",
        snapshot.config.members.len(),
        snapshot.tasks.len(),
        inbox_bytes(&home) / 1_000_000,
        snapshot.events.len()
    );
    for (w, h) in [(80, 24), (200, 60)] {
        let options = FrameOptions {
            width: w,
            height: h,
            style: Style::coloured(),
            selected: 25,
            follow: false,
            interactive: true,
            notice: None,
        };
        stats(
            &format!("build the view + draw a frame ({w}x{h})"),
            time(n, || {
                let view = TeamView::build(snapshot.clone());
                std::hint::black_box(render(&view, &options));
            }),
        );
    }
    stats(
        "read the store (Snapshot::load)",
        time(n, || {
            std::hint::black_box(Snapshot::load(&team).unwrap());
        }),
    );
    let options = FrameOptions {
        width: 80,
        height: 24,
        style: Style::coloured(),
        selected: 0,
        follow: false,
        interactive: true,
        notice: None,
    };
    stats(
        "whole redraw: read + build + draw (80x24)",
        time(n, || {
            let view = TeamView::build(Snapshot::load(&team).unwrap());
            std::hint::black_box(render(&view, &options));
        }),
    );
    // What the live view does between task events: the task list kept from the last
    // read (`TaskCache`), the roster, liveness and log read again.
    let mut cache = TaskCache::default();
    Snapshot::load_kept(&team, &mut cache).unwrap();
    stats(
        "whole redraw, task list kept (no task event since)",
        time(n, || {
            let view = TeamView::build(Snapshot::load_kept(&team, &mut cache).unwrap());
            std::hint::black_box(render(&view, &options));
        }),
    );
}

/// The bytes of every inbox file under `home`.
fn inbox_bytes(home: &RooHome) -> u64 {
    fn walk(dir: &std::path::Path, inboxes: bool) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .filter_map(Result::ok)
            .map(|e| {
                let path = e.path();
                let inside = inboxes || e.file_name() == "inboxes";
                match e.file_type() {
                    Ok(t) if t.is_dir() => walk(&path, inside),
                    Ok(_) if inside => e.metadata().map_or(0, |m| m.len()),
                    _ => 0,
                }
            })
            .sum()
    }
    walk(home.root(), false)
}
