//! Benchmark of `roo-mail team top`'s redraw (run with `cargo bench --workspace --bench
//! top`): a files store holding a team of 50 members and 500 tasks (a third in progress,
//! each with usage, a third pending with dependencies, the rest done) and a message from
//! every member; then, n times each: reading the store ([`Snapshot::load`]: roster,
//! liveness, tasks, inboxes, the newest 200 events), building the view and drawing one
//! frame at 80×24 and 200×60 (pure, what a redraw costs beyond the reads), and the whole
//! redraw (read + build + draw). Target: under 5 ms a frame.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use roo_cli::top::frame::{FrameOptions, render};
use roo_cli::top::model::{Snapshot, TeamView};
use roo_store::{
    ClaimOptions, Member, Name, NewTask, Outgoing, RooHome, TaskId, TaskPatch, TaskStatus,
    TaskUsage, Team,
};
use roo_term::Style;

const MEMBERS: usize = 50;
const TASKS: usize = 500;

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

fn setup(home: &RooHome) -> Team {
    let t = name("bench");
    let members = (0..MEMBERS - 1)
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
    let tasks = team.tasks();
    let lead = name("lead");
    for i in 0..TASKS {
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
    for i in 0..TASKS {
        let id = TaskId::parse(&(i + 1).to_string()).unwrap();
        let owner = name(&format!("member{:02}", i % (MEMBERS - 1)));
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
    for i in 0..MEMBERS - 1 {
        let from = name(&format!("member{i:02}"));
        team.mailbox()
            .send(&from, "lead", Outgoing::text("progress", "progress report"))
            .unwrap();
    }
    team
}

fn main() {
    let n: usize = std::env::var("ROO_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path().join("roo"));
    let team = setup(&home);
    let snapshot = Snapshot::load(&team).unwrap();
    println!(
        "team top redraw: {} members, {} tasks, {} events read (n = {n})",
        snapshot.config.members.len(),
        snapshot.tasks.len(),
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
}
