//! What the caps' accounting adds per model request (issue 32, "Budgets").
//!
//! A teammate's spend gate per request: `before_request` (`TaskList::reserve_request`:
//! a locked read that checks the member's, its task's and the team's spend, using the
//! request reserved with the previous response) and `spent` (`TaskList::settle_spend`:
//! adds the response to the member's total and its task's and, under a cap in requests,
//! reserves the next request, in one locked write), against what a request cost before
//! the caps — the usage meter's list of the member's tasks and `add_usage` — on the same
//! team (20 tasks, 8 members, file store), interleaved; first with a team cap in USD and
//! requests, then in USD only. In the same rounds: the previous way under a cap in
//! requests (each request reserved alone, a second write), one locked write alone
//! (`add_usage`: the floor of anything that writes per request), and a lead's gate
//! without a team (the session's caps only, in memory).

use std::time::{Duration, Instant};

use roo_agent::SpendGate;
use roo_llm::Usage;
use roo_store::budget::{Reserve, SpendRecord};
use roo_store::{
    ClaimOptions, Member, Name, NewTask, RooHome, TaskFilter, TaskId, TaskUsage, Team,
};
use roo_team::budget::{BudgetPlan, TeamSpendGate};
use roo_team::{InboxRouter, TeamBinding, TeamSlot};

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

fn pct(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i].as_secs_f64() * 1000.0
}

fn line(label: &str, samples: &mut [Duration]) {
    println!(
        "{label:>52}: p50 {:.3} ms, p90 {:.3} ms, max {:.3} ms",
        pct(samples, 0.5),
        pct(samples, 0.9),
        pct(samples, 1.0)
    );
}

pub async fn budget_section(n: usize) {
    let n = n * 20;
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let lead = Member::new(name("lead"), &name("crew"));
    let members: Vec<Member> = (0..7)
        .map(|i| Member::new(name(&format!("w{i}")), &name("crew")))
        .collect();
    let team = Team::create(&home, name("crew"), "", lead, members).unwrap();
    let tasks = team.tasks();
    for i in 0..20 {
        tasks
            .create(NewTask {
                subject: format!("task {i} of a realistic list"),
                description: "x".repeat(500),
                ..Default::default()
            })
            .unwrap();
    }
    let (w0, id) = (name("w0"), TaskId::parse("1").unwrap());
    tasks.claim(&id, &w0, &ClaimOptions::default()).unwrap();
    let (w1, id1) = (name("w1"), TaskId::parse("2").unwrap());
    tasks.claim(&id1, &w1, &ClaimOptions::default()).unwrap();
    tasks
        .set_caps(None, |caps| {
            caps.team = Some(roo_store::budget::SpendCap {
                usd: Some(1e6),
                requests: Some(1 << 40),
            });
        })
        .unwrap();
    let binding = TeamBinding {
        router: InboxRouter::new(team.mailbox(), w0.clone()),
        team: team.clone(),
        me: w0.clone(),
        lead: name("lead"),
        lead_key: None,
        presence: None,
    };
    let gate = TeamSpendGate::new(
        BudgetPlan {
            slot: TeamSlot::bound(binding),
            ..BudgetPlan::default()
        },
        Default::default(),
    );
    let solo = TeamSpendGate::new(
        BudgetPlan {
            session: roo_store::budget::SpendCap {
                usd: Some(1e6),
                requests: Some(1 << 40),
            },
            lead: true,
            ..BudgetPlan::default()
        },
        Default::default(),
    );
    let usage = Usage {
        input_tokens: 1200,
        output_tokens: 300,
        cache_read_tokens: 20_000,
        cache_write_tokens: 0,
    };
    let spend = TaskUsage {
        input_tokens: 1200,
        output_tokens: 300,
        cache_read_tokens: 20_000,
        cache_write_tokens: 0,
        requests: 1,
        cost_usd: Some(0.0123),
    };
    let (mut before, mut with_gate, mut solo_gate) = (Vec::new(), Vec::new(), Vec::new());
    let mut usd_only = Vec::new();
    let (mut alone, mut one_write) = (Vec::new(), Vec::new());
    for round in 0..2 * n {
        // First a team cap in USD and requests (each request counted as it starts: two
        // locked writes), then one in USD only (a locked read and a write).
        if round == n {
            tasks
                .set_caps(None, |caps| {
                    caps.team = Some(roo_store::budget::SpendCap {
                        usd: Some(1e6),
                        requests: None,
                    });
                })
                .unwrap();
        }
        // Before the caps: the meter's list of the member's tasks and add_usage.
        let (t, who, task) = (tasks.clone(), w0.clone(), id.clone());
        let started = Instant::now();
        tokio::task::spawn_blocking(move || {
            let filter = TaskFilter {
                owner: Some(who.clone()),
                ..TaskFilter::default()
            };
            t.list(&filter).unwrap();
            t.add_usage(&task, &who, &spend).unwrap();
        })
        .await
        .unwrap();
        before.push(started.elapsed());
        let started = Instant::now();
        gate.before_request().await;
        gate.spent(usage, Some(0.0123)).await;
        match round < n {
            true => with_gate.push(started.elapsed()),
            false => usd_only.push(started.elapsed()),
        }
        if round < n {
            // The previous way: the request reserved alone, then the response.
            let (t, who) = (tasks.clone(), w1.clone());
            let started = Instant::now();
            tokio::task::spawn_blocking(move || {
                let slot = t
                    .reserve_request(&who, &TaskUsage::default(), false, Reserve::More)
                    .unwrap();
                let record = SpendRecord {
                    spent: spend,
                    task_spent: Some(spend),
                    consumed: slot.counted,
                    ..SpendRecord::default()
                };
                t.settle_spend(&who, &record).unwrap();
            })
            .await
            .unwrap();
            alone.push(started.elapsed());
            // One locked write alone.
            let (t, who, task) = (tasks.clone(), w1.clone(), id1.clone());
            let started = Instant::now();
            tokio::task::spawn_blocking(move || t.add_usage(&task, &who, &spend).unwrap())
                .await
                .unwrap();
            one_write.push(started.elapsed());
        }
        let started = Instant::now();
        solo.before_request().await;
        solo.spent(usage, Some(0.0123)).await;
        solo_gate.push(started.elapsed());
    }
    let paired = |gate: &[Duration], before: &[Duration]| -> Vec<Duration> {
        gate.iter()
            .zip(before)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect()
    };
    let mut added = paired(&with_gate, &before[..n]);
    let mut added_usd = paired(&usd_only, &before[n..]);
    let mut added_alone = paired(&alone, &before[..n]);
    println!("\n## Budgets: accounting per model request (n = {n}, 20 tasks, 8 members, files)");
    line("before the caps: list own tasks + add_usage", &mut before);
    line("gate, request cap: before_request + spent", &mut with_gate);
    line("added by a request cap (paired difference)", &mut added);
    line("previous: reserve alone + settle (request cap)", &mut alone);
    line(
        "added the previous way (paired difference)",
        &mut added_alone,
    );
    line("one locked write alone (add_usage)", &mut one_write);
    line("gate, USD cap only: before_request + spent", &mut usd_only);
    line("added by a USD cap (paired difference)", &mut added_usd);
    line("lead's gate without a team (in memory)", &mut solo_gate);
}
