//! Benchmark of the coordination substrate (run with `scripts/bench-store`).
//!
//! Prints: in-process send latency, `roo-mail send` whole-process latency, send→watch
//! delivery latency (CLI watcher and in-process watcher), throughput at 1/4/16 concurrent
//! writer processes with the improved lock and with the original protocol, and per-send
//! cost at inbox sizes 10 / 1,000 / 10,000 (read history, and unread backlog), and the
//! team runtime's store calls (`add_usage` vs `renew`, `detect_dead`).
//!
//! With `ROO_TEST_PG_DSN`, also the PostgreSQL store beside the file store, its round
//! trips per operation counted at the test proxy (`tests/harness/pg_proxy.rs`), and a
//! sender through `pg_ctl restart` of a cluster of its own (`scripts/pg-cluster`).
//!
//! `ROO_BENCH_ONLY=teams` (only when named; a cluster of its own): send→wake and claims/s
//! for 1/10/50 teams on the file store, PostgreSQL with the store's own login and with
//! member roles, interleaved in rounds, then the sessions each kind of process holds.
//!
//! Writers are this executable re-run with `--writer`, so they are real OS processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// The test proxy of `tests/harness` (one implementation, included by path; the bench
/// uses part of it).
#[path = "../../../tests/harness/pg_proxy.rs"]
#[allow(dead_code, unused_imports)]
mod pg_proxy;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use roo_store::{
    ClaimOptions, DEFAULT_LEASE, InboxDoc, LockPolicy, Member, Message, MessageBody, MessageId,
    Name, NewTask, Outgoing, PgStore, RooHome, TaskId, TaskUsage, Team, Timestamp, WaitOutcome,
};

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join(name);
    assert!(
        path.is_file(),
        "build {name} first (scripts/bench-store does)"
    );
    path
}

fn team(home: &RooHome, members: &[String]) -> Team {
    team_named(home, "bench", members)
}

fn team_named(home: &RooHome, team: &str, members: &[String]) -> Team {
    let t = name(team);
    let members = members.iter().map(|m| Member::new(name(m), &t)).collect();
    Team::create(
        home,
        t.clone(),
        "benchmark",
        Member::new(name("lead"), &t),
        members,
    )
    .unwrap()
}

struct Stats(Vec<Duration>);

impl Stats {
    fn pct(&self, p: f64) -> Duration {
        let mut v = self.0.clone();
        v.sort();
        v[((v.len() - 1) as f64 * p).round() as usize]
    }
    fn line(&self) -> String {
        format!(
            "p50 {:>8.3} ms  p90 {:>8.3} ms  p99 {:>8.3} ms  (n={})",
            ms(self.pct(0.5)),
            ms(self.pct(0.9)),
            ms(self.pct(0.99)),
            self.0.len()
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--writer") {
        return writer(&args[2..]);
    }
    if args.get(1).map(String::as_str) == Some("--member") {
        return member_process(&args[2..]);
    }
    if args.get(1).map(String::as_str) == Some("--teammate") {
        return teammate_process(&args[2..]);
    }
    // `cargo bench` passes `--bench`; anything else is ignored.
    let quick = std::env::var_os("ROO_BENCH_QUICK").is_some();
    let n = |full: usize, small: usize| if quick { small } else { full };
    println!("# Coordination substrate benchmark");
    println!(
        "machine: {} cores, {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model()
    );
    println!("date: {}\n", Timestamp::now());

    // ROO_BENCH_ONLY=team runs one section (names: send, process, delivery, throughput,
    // sizes, team, pg, roles; and teams, run only when named).
    let only = std::env::var("ROO_BENCH_ONLY").ok();
    let run = |section: &str| only.as_deref().is_none_or(|o| o == section);
    if run("send") {
        in_process_send(n(1000, 100));
    }
    if run("process") {
        whole_process_send(n(200, 30));
    }
    if run("delivery") {
        delivery(n(100, 20));
    }
    if run("throughput") {
        throughput(n(40, 10));
    }
    if run("sizes") {
        inbox_sizes(n(200, 30));
    }
    if run("team") {
        team_runtime(n(500, 100));
    }
    if run("pg") {
        match std::env::var("ROO_TEST_PG_DSN") {
            Ok(dsn) if !dsn.is_empty() => {
                file_and_postgresql(&dsn, n(300, 50));
                pg_round_trips(&dsn);
                pg_restart(n(5, 2));
            }
            _ => println!("(PostgreSQL store: ROO_TEST_PG_DSN is not set; skipped)"),
        }
    }
    // Only when asked for: it starts a cluster of its own and runs for minutes.
    if only.as_deref() == Some("teams") {
        teams(n(3, 1), quick);
    }
    if run("roles") {
        match std::env::var("ROO_TEST_PG_DSN") {
            Ok(dsn) if !dsn.is_empty() => member_roles(&dsn, n(300, 50)),
            _ => println!("(member roles: ROO_TEST_PG_DSN is not set; skipped)"),
        }
    }
}

/// A home in a fresh schema of the PostgreSQL server at `dsn`.
fn pg_home(dsn: &str) -> (tempfile::TempDir, RooHome, String) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let schema = format!(
        "roo_bench_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let out = Command::new("psql")
        .args([dsn, "-qc", &format!("CREATE SCHEMA {schema}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sep = if dsn.contains('?') { '&' } else { '?' };
    let url = format!("{dsn}{sep}options=-c%20search_path%3D{schema}");
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path().join("home")).with_store(PgStore::connect(&url).unwrap());
    (dir, home, url)
}

/// The file store and the PostgreSQL store side by side, in one run: a send, a send
/// seen by an in-process watcher of another connection, claims one after another, four
/// claimers on their own connections taking 400 tasks, and death detection after a
/// member's process is killed.
fn file_and_postgresql(dsn: &str, iterations: usize) {
    println!("\n## File store and PostgreSQL store (unix socket, fsync on), side by side");
    let file_dir = tempfile::tempdir().unwrap();
    let file_home = RooHome::new(file_dir.path());
    let (_pg_dir, pg_home_, url) = pg_home(dsn);
    let other = |backend: &str| -> RooHome {
        match backend {
            "file" => file_home.clone(),
            _ => RooHome::new(file_dir.path().join("unused"))
                .with_store(PgStore::connect(&url).unwrap()),
        }
    };
    for (backend, home) in [("file", &file_home), ("postgresql", &pg_home_)] {
        let members: Vec<String> = (0..4).map(|i| format!("w{i}")).collect();
        let mut all = members.clone();
        all.extend(["alice".to_string(), "bob".to_string()]);
        let team = team(home, &all);
        let mb = team.mailbox();
        let (lead, alice, bob) = (name("lead"), name("alice"), name("bob"));
        let mut samples = Vec::new();
        for i in 0..iterations {
            let started = Instant::now();
            mb.send(&lead, "alice", Outgoing::text(format!("m{i}"), "benchmark"))
                .unwrap();
            samples.push(started.elapsed());
            mb.take_unread(&alice).unwrap();
        }
        println!(
            "{backend:>10}: send (Mailbox::send)                 {}",
            Stats(samples).line()
        );
        // `roo-mail send` as a whole process: start, connect (PostgreSQL), send, exit.
        let mail = bin("roo-mail");
        let mut samples = Vec::new();
        for i in 0..iterations.min(100) {
            let mut command = Command::new(&mail);
            command
                .args(["send", "--team", "bench", "--from", "lead", "--to", "alice"])
                .args(["--summary", "benchmark", &format!("p{i}")])
                .env("ROO_HOME", file_dir.path())
                .stdout(Stdio::null());
            if backend == "file" {
                command.env_remove("ROO_STORE");
            } else {
                command.env("ROO_STORE", &url);
            }
            let started = Instant::now();
            let status = command.status().unwrap();
            samples.push(started.elapsed());
            assert!(status.success());
            mb.take_unread(&alice).unwrap();
        }
        println!(
            "{backend:>10}: roo-mail send (whole process)        {}",
            Stats(samples).line()
        );
        // The watcher on this connection, the sender on another (another process's).
        let sender_home = other(backend);
        let sender = Team::open(&sender_home, name("bench")).unwrap().mailbox();
        println!(
            "{backend:>10}: send -> watcher wakes + take_unread  {}",
            watcher_wakes(&mb, &sender, &bob, iterations).line()
        );
        // Claims one after another: create, claim.
        let list = team.tasks();
        let started = Instant::now();
        let claims = iterations;
        for i in 0..claims {
            let task = list
                .create(NewTask {
                    subject: format!("t{i}"),
                    ..Default::default()
                })
                .unwrap();
            list.claim(&task.id, &name("w0"), &ClaimOptions::default())
                .unwrap();
        }
        let per_s = claims as f64 / started.elapsed().as_secs_f64();
        println!("{backend:>10}: create + claim, one claimer          {per_s:>8.0} pairs/s");
        // Four claimers, each its own connection (or, for files, the same files).
        let before = list.list(&Default::default()).unwrap().len();
        for i in 0..400 {
            list.create(NewTask {
                subject: format!("q{i}"),
                ..Default::default()
            })
            .unwrap();
        }
        let homes: Vec<RooHome> = (0..4).map(|_| other(backend)).collect();
        let started = Instant::now();
        let taken: Vec<Vec<TaskId>> = std::thread::scope(|s| {
            let handles: Vec<_> = homes
                .iter()
                .zip(&members)
                .map(|(home, me)| {
                    s.spawn(move || {
                        let list = Team::open(home, name("bench")).unwrap().tasks();
                        let mut mine = Vec::new();
                        while let Some(task) = list
                            .claim_next(&name(me), &ClaimOptions::default())
                            .unwrap()
                        {
                            mine.push(task.id.clone());
                            let patch = roo_store::TaskPatch {
                                status: Some(roo_store::TaskStatus::Completed),
                                by: Some(name(me)),
                                ..Default::default()
                            };
                            list.update(&task.id, patch).unwrap();
                        }
                        mine
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let elapsed = started.elapsed();
        let mut ids: Vec<u64> = taken.into_iter().flatten().map(|id| id.number()).collect();
        let total = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), total, "{backend}: a task was claimed twice");
        assert_eq!(
            total, 400,
            "{backend}: {total} of 400 claimed ({before} before)"
        );
        println!(
            "{backend:>10}: 4 claimers, claim_next + complete      {:>8.0} tasks/s (400 distinct)",
            400.0 / elapsed.as_secs_f64()
        );
        let (root, store) = match backend {
            "file" => (file_dir.path().to_path_buf(), String::new()),
            _ => (file_dir.path().join("unused"), url.clone()),
        };
        println!(
            "{backend:>10}: kill -9 -> detect_dead declares it    {} (detect every 100 ms)",
            death_detection(&team, &root, &store, iterations.min(20)).line()
        );
    }
}

/// Member roles (docs/DISTRIBUTED.md "Authority in the database"), in one run: a member's
/// send to a peer and its claims, as the store's own login in a store without member
/// roles, as that login in a store with them (its row locks first look for stuck member
/// sessions), and as the member's own role (every write through the checking functions).
fn member_roles(dsn: &str, iterations: usize) {
    println!("\n## Member roles (PostgreSQL, unix socket): alice's send to bob, alice's claims");
    for setup in [
        "owner login, no roles",
        "owner login, roles on",
        "member role",
    ] {
        let (_dir, home, url) = pg_home(dsn);
        let team = team(&home, &["alice".to_string(), "bob".to_string()]);
        let store = home.pg().unwrap();
        let alice_url = match setup {
            "owner login, no roles" => url.clone(),
            _ => {
                let login = store
                    .create_member_role(&name("bench"), &name("alice"))
                    .unwrap();
                if setup == "member role" {
                    login_url(&url, &login)
                } else {
                    url.clone()
                }
            }
        };
        let alice_dir = tempfile::tempdir().unwrap();
        let alice_home = RooHome::new(alice_dir.path().join("home"))
            .with_store(PgStore::connect(&alice_url).unwrap());
        let mine = Team::open(&alice_home, name("bench")).unwrap();
        let (alice, bob) = (name("alice"), name("bob"));
        let mut samples = Vec::new();
        for i in 0..iterations {
            let started = Instant::now();
            mine.mailbox()
                .send(&alice, "bob", Outgoing::text(format!("m{i}"), "benchmark"))
                .unwrap();
            samples.push(started.elapsed());
            team.mailbox().take_unread(&bob).unwrap();
        }
        println!("{setup:>22}: send            {}", Stats(samples).line());
        let ids: Vec<TaskId> = (0..iterations)
            .map(|i| {
                team.tasks()
                    .create(NewTask {
                        subject: format!("t{i}"),
                        ..Default::default()
                    })
                    .unwrap()
                    .id
            })
            .collect();
        let started = Instant::now();
        for id in &ids {
            mine.tasks()
                .claim(id, &alice, &ClaimOptions::default())
                .unwrap();
        }
        let per_s = ids.len() as f64 / started.elapsed().as_secs_f64();
        println!("{setup:>22}: claim, one claimer {per_s:>8.0} claims/s");
        let _ = store.drop_member_roles(&name("bench"));
    }
}

/// Time from `kill -9` of a member's process (joined, holding its presence: on files its
/// pid is the evidence, on PostgreSQL its presence lock) to the `detect_dead` poll, every
/// 100 ms as a lead would, that declares it dead.
fn death_detection(team: &Team, root: &Path, store: &str, rounds: usize) -> Stats {
    let mut samples = Vec::new();
    for _ in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--member", &root.display().to_string(), store, "victim"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready");
        assert!(team.detect_dead(Some(&name("lead"))).unwrap().is_empty());
        let killed = Instant::now();
        child.kill().unwrap();
        loop {
            if !team.detect_dead(Some(&name("lead"))).unwrap().is_empty() {
                break;
            }
            assert!(killed.elapsed() < Duration::from_secs(60), "never declared");
            std::thread::sleep(Duration::from_millis(100));
        }
        samples.push(killed.elapsed());
        child.wait().unwrap();
    }
    Stats(samples)
}

/// Child mode: join team `bench` as `member` (at `root`, in the store `url` if not
/// empty), hold its presence, say "ready", wait for stdin to close or a kill.
fn member_process(args: &[String]) {
    let home = RooHome::new(&args[0]);
    let home = if args[1].is_empty() {
        home
    } else {
        home.with_store(PgStore::connect(&args[1]).unwrap())
    };
    let team = Team::open(&home, name("bench")).unwrap();
    let me = name(&args[2]);
    let mut entry = Member::new(me.clone(), team.name());
    entry.pid = Some(std::process::id());
    team.join(entry).unwrap();
    let _presence = team.hold_presence(&me).unwrap();
    println!("ready");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// Round trips per operation of the PostgreSQL store after connect, counted at the test
/// proxy (a client's turn: it sends after an answer reached it), the fewest of five runs
/// each (a pipeline written in pieces can count a turn the client never waited for).
fn pg_round_trips(dsn: &str) {
    println!("\n## PostgreSQL store: round trips per operation after connect (at a proxy)");
    let proxy = pg_proxy::PgProxy::for_dsn(dsn);
    proxy.hold_answers(Duration::from_millis(3));
    let (dir, _direct, url) = pg_home(dsn);
    let home = RooHome::new(dir.path().join("proxied"))
        .with_store(PgStore::connect(&proxy.url_for(&url)).unwrap());
    let team = team(&home, &["alice".to_string(), "bob".to_string()]);
    let (mb, list) = (team.mailbox(), team.tasks());
    let (lead, alice) = (name("lead"), name("alice"));
    let fewest = |op: &mut dyn FnMut(usize)| -> u64 {
        (0..5)
            .map(|run| {
                let before = proxy.round_trips();
                op(run);
                proxy.round_trips() - before
            })
            .min()
            .unwrap()
    };
    let new_task = |subject: String| {
        list.create(NewTask {
            subject,
            ..Default::default()
        })
        .unwrap()
    };
    let ids: Vec<TaskId> = (0..10).map(|i| new_task(format!("r{i}")).id).collect();
    let mut rows: Vec<(&str, u64)> = vec![
        (
            "send (to a member by name)",
            fewest(&mut |i| {
                mb.send(&lead, "alice", Outgoing::text(format!("r{i}"), "rt"))
                    .unwrap();
            }),
        ),
        (
            "claim",
            fewest(&mut |i| {
                list.claim(&ids[i], &alice, &ClaimOptions::default())
                    .unwrap();
            }),
        ),
        (
            "task create",
            fewest(&mut |i| {
                new_task(format!("c{i}"));
            }),
        ),
        (
            "task update",
            fewest(&mut |i| {
                let patch = roo_store::TaskPatch {
                    description: Some(format!("d{i}")),
                    ..Default::default()
                };
                list.update(&ids[5 + i], patch).unwrap();
            }),
        ),
        (
            "team config change (add a member)",
            fewest(&mut |i| {
                team.add_member(Member::new(name(&format!("m{i}")), team.name()))
                    .unwrap();
            }),
        ),
        (
            "take_unread (with mail)",
            fewest(&mut |i| {
                // The send is counted too; subtracted below.
                mb.send(&lead, "alice", Outgoing::text(format!("t{i}"), "rt"))
                    .unwrap();
                mb.take_unread(&alice).unwrap();
            }),
        ),
    ];
    rows[5].1 -= rows[0].1;
    rows.extend([
        (
            "read: task list",
            fewest(&mut |_| {
                list.list(&Default::default()).unwrap();
            }),
        ),
        (
            "read: inbox",
            fewest(&mut |_| {
                mb.read(&alice, &Default::default()).unwrap();
            }),
        ),
        (
            "read: team config",
            fewest(&mut |_| {
                team.config().unwrap();
            }),
        ),
    ]);
    for (what, n) in rows {
        println!("{what:>40}: {n} round trip(s)");
    }
}

/// A throwaway cluster of `scripts/pg-cluster`, stopped when dropped.
struct Cluster {
    dir: PathBuf,
    dsn: String,
}

impl Cluster {
    fn script() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-cluster")
    }

    fn start() -> Cluster {
        let out = Command::new(Cluster::script())
            .arg("start")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
        Cluster {
            dir: PathBuf::from(lines[0].trim()),
            dsn: lines[lines.len() - 1].trim().to_owned(),
        }
    }

    fn restart(&self) {
        let out = Command::new(Cluster::script())
            .arg("restart")
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(Cluster::script())
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

/// A sender looping through `restarts` fast restarts (`pg_ctl restart -m fast`, which
/// ends every session) of a cluster of its own: how long the restart took, how long after
/// the server was back the first send completed (the store connects again and learns
/// what became of the change it lost), the longest gap between two completed sends, and
/// that every message sent arrived exactly once.
fn pg_restart(restarts: usize) {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    println!("\n## PostgreSQL store: a sender through `pg_ctl restart` (a cluster of its own)");
    let cluster = Cluster::start();
    let (_dir, home, url) = pg_home(&cluster.dsn);
    let team = team(&home, &["alice".to_string()]);
    let mb = team.mailbox();
    let done: Mutex<Vec<Instant>> = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    let completed = || done.lock().unwrap().len();
    let last_done = || done.lock().unwrap().last().copied();
    let wait = |what: &str, until: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !until() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let mut took = Vec::new();
    let mut first_after = Vec::new();
    let mut longest_gap = Vec::new();
    let sent: Vec<String> = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let mut texts = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let text = format!("m{}", texts.len());
                mb.send(&name("lead"), "alice", Outgoing::text(&text, "restart"))
                    .unwrap_or_else(|e| panic!("send {text}: {e}"));
                texts.push(text);
                done.lock().unwrap().push(Instant::now());
            }
            texts
        });
        for _ in 0..restarts {
            let before = completed();
            wait("20 sends", &|| completed() >= before + 20);
            let begun = Instant::now();
            cluster.restart();
            let ready = Instant::now();
            wait("a send after the restart", &|| {
                last_done().is_some_and(|at| at > ready)
            });
            let times = done.lock().unwrap().clone();
            let first = times.iter().copied().find(|at| *at > ready).unwrap();
            let gap = times
                .windows(2)
                .filter(|w| w[1] > begun && w[0] <= first)
                .map(|w| w[1] - w[0])
                .max()
                .unwrap_or_default();
            took.push(ready - begun);
            first_after.push(first - ready);
            longest_gap.push(gap);
        }
        stop.store(true, Ordering::SeqCst);
        sender.join().unwrap()
    });
    let check_dir = tempfile::tempdir().unwrap();
    let checker = RooHome::new(check_dir.path()).with_store(PgStore::connect(&url).unwrap());
    let arrived: Vec<String> = Team::open(&checker, name("bench"))
        .unwrap()
        .mailbox()
        .read(&name("alice"), &Default::default())
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(arrived, sent, "lost, repeated or reordered messages");
    let max = |v: &[Duration]| v.iter().copied().max().unwrap_or_default();
    println!(
        "{:>40}: {:.0} ms (max {:.0} ms; {restarts} restarts)",
        "pg_ctl restart -m fast -w, median",
        ms(Stats(took.clone()).pct(0.5)),
        ms(max(&took))
    );
    println!(
        "{:>40}: {:.0} ms (max {:.0} ms)",
        "server back -> first send done, median",
        ms(Stats(first_after.clone()).pct(0.5)),
        ms(max(&first_after))
    );
    println!(
        "{:>40}: {:.0} ms (max {:.0} ms)",
        "longest gap between sends, median",
        ms(Stats(longest_gap.clone()).pct(0.5)),
        ms(max(&longest_gap))
    );
    println!(
        "{:>40}: {} sent, {} arrived, each once, in order",
        "messages",
        sent.len(),
        arrived.len()
    );
}

/// The team runtime's store calls: `add_usage` after every model request (compared with
/// `renew`, the same kind of locked task-list write, in the same run), and `detect_dead`,
/// which the lead polls about once a second, when nobody died.
fn team_runtime(iterations: usize) {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let members: Vec<String> = (0..8).map(|i| format!("w{i}")).collect();
    let team = team(&home, &members);
    for m in &members {
        team.update_member(m, |e| e.pid = Some(std::process::id()))
            .unwrap();
    }
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
    let spend = TaskUsage {
        input_tokens: 1200,
        output_tokens: 300,
        cache_read_tokens: 20_000,
        cache_write_tokens: 0,
        requests: 1,
        cost_usd: Some(0.0123),
    };
    let (mut add, mut renew) = (Vec::new(), Vec::new());
    // Interleaved, so both see the same machine load.
    for _ in 0..iterations {
        let started = Instant::now();
        tasks.add_usage(&id, &w0, &spend).unwrap();
        add.push(started.elapsed());
        let started = Instant::now();
        tasks.renew(&id, &w0, DEFAULT_LEASE).unwrap();
        renew.push(started.elapsed());
    }
    let mut detect = Vec::new();
    for _ in 0..iterations {
        let started = Instant::now();
        assert!(team.detect_dead(None).unwrap().is_empty());
        detect.push(started.elapsed());
    }
    println!("\n## Team runtime calls (20 tasks, 8 members with live pids)");
    println!(
        "TaskList::add_usage                            {}",
        Stats(add).line()
    );
    println!(
        "TaskList::renew (same kind of write)           {}",
        Stats(renew).line()
    );
    println!(
        "Team::detect_dead, nobody died                 {}",
        Stats(detect).line()
    );
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn in_process_send(iterations: usize) {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let team = team(&home, &["alice".into()]);
    let mb = team.mailbox();
    let (lead, alice) = (name("lead"), name("alice"));
    let mut samples = Vec::new();
    for i in 0..iterations {
        let started = Instant::now();
        mb.send(
            &lead,
            "alice",
            Outgoing::text(format!("m{i}"), "benchmark message"),
        )
        .unwrap();
        samples.push(started.elapsed());
        mb.take_unread(&alice).unwrap();
    }
    println!(
        "in-process send (Mailbox::send, 1 recipient)   {}",
        Stats(samples).line()
    );
}

fn whole_process_send(iterations: usize) {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let team = team(&home, &["alice".into()]);
    let mail = bin("roo-mail");
    let mut samples = Vec::new();
    for i in 0..iterations {
        let started = Instant::now();
        let status = Command::new(&mail)
            .args(["send", "--team", "bench", "--from", "lead", "--to", "alice"])
            .args(["--summary", "benchmark message", &format!("m{i}")])
            .env("ROO_HOME", dir.path())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        samples.push(started.elapsed());
        assert!(status.success());
        team.mailbox().take_unread(&name("alice")).unwrap();
    }
    println!(
        "roo-mail send (whole process)                  {}",
        Stats(samples).line()
    );
}

fn delivery(iterations: usize) {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let team = team(&home, &["alice".into(), "bob".into()]);
    let mb = team.mailbox();
    let lead = name("lead");

    // A `roo-mail watch` process.
    let mut watch = Command::new(bin("roo-mail"))
        .args([
            "watch",
            "--team",
            "bench",
            "--as",
            "alice",
            "--json",
            "--mark-read",
        ])
        .env("ROO_HOME", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = BufReader::new(watch.stderr.take().unwrap());
    let mut line = String::new();
    ready.read_line(&mut line).unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut samples = Vec::new();
    for i in 0..iterations {
        let started = Instant::now();
        mb.send(
            &lead,
            "alice",
            Outgoing::text(format!("d{i}"), "delivery probe"),
        )
        .unwrap();
        let got = lines.next().unwrap().unwrap();
        samples.push(started.elapsed());
        assert!(got.contains(&format!("\"d{i}\"")), "{got}");
    }
    let _ = watch.kill();
    let _ = watch.wait();
    println!(
        "send -> roo-mail watch prints it               {}",
        Stats(samples).line()
    );

    // An in-process watcher, as the agent runtime uses it.
    let bob = name("bob");
    println!(
        "send -> InboxWatcher wakes + take_unread       {}",
        watcher_wakes(&mb, &mb, &bob, iterations).line()
    );
    println!("(polling every 500 ms instead: 250 ms mean, 500 ms worst case)");
}

/// `to`'s in-process watcher on `mailbox` woken by `sender`'s sends (from another thread;
/// another connection when `sender` is another store's), until `take_unread` has them.
fn watcher_wakes(
    mailbox: &roo_store::Mailbox,
    sender: &roo_store::Mailbox,
    to: &Name,
    iterations: usize,
) -> Stats {
    let mut watcher = mailbox.watcher(to).unwrap();
    let mut samples = Vec::new();
    for i in 0..iterations {
        let (sender, recipient) = (sender.clone(), to.to_string());
        let started = Instant::now();
        let t = std::thread::spawn(move || {
            sender
                .send(
                    &name("lead"),
                    &recipient,
                    Outgoing::text(format!("w{i}"), "delivery probe"),
                )
                .unwrap();
        });
        loop {
            assert_eq!(watcher.wait(Duration::from_secs(10)), WaitOutcome::Changed);
            if !mailbox.take_unread(to).unwrap().is_empty() {
                break;
            }
        }
        samples.push(started.elapsed());
        t.join().unwrap();
    }
    Stats(samples)
}

fn throughput(per_writer: usize) {
    println!("\nthroughput, W writer processes x {per_writer} sends each into one inbox:");
    for mode in ["queue", "protocol"] {
        for writers in [1usize, 4, 16] {
            let dir = tempfile::tempdir().unwrap();
            let home = RooHome::new(dir.path());
            let names: Vec<String> = (0..writers).map(|w| format!("w{w}")).collect();
            let mut members = names.clone();
            members.push("sink".into());
            team(&home, &members);
            let exe = std::env::current_exe().unwrap();
            let started = Instant::now();
            let children: Vec<_> = names
                .iter()
                .map(|w| {
                    Command::new(&exe)
                        .args(["--writer", &dir.path().to_string_lossy(), w])
                        .arg(per_writer.to_string())
                        .arg(mode)
                        .stdout(Stdio::piped())
                        .spawn()
                        .unwrap()
                })
                .collect();
            let mut failures = 0usize;
            let mut worst = Duration::ZERO;
            for child in children {
                let out = child.wait_with_output().unwrap();
                let text = String::from_utf8_lossy(&out.stdout);
                let mut parts = text.split_whitespace();
                failures += parts.next().unwrap_or("0").parse::<usize>().unwrap_or(0);
                let w: f64 = parts.next().unwrap_or("0").parse().unwrap_or(0.0);
                worst = worst.max(Duration::from_secs_f64(w / 1000.0));
            }
            let elapsed = started.elapsed();
            let delivered = team_unread(&home);
            let sent = writers * per_writer;
            println!(
                "  {mode:<8} W={writers:<2}  {:>7.0} sends/s  worst send {:>8.1} ms  \
                 lock timeouts {failures:>3}/{sent}  delivered {delivered}/{sent}",
                sent as f64 / elapsed.as_secs_f64(),
                ms(worst)
            );
        }
    }
}

fn team_unread(home: &RooHome) -> usize {
    Team::open(home, name("bench"))
        .unwrap()
        .mailbox()
        .unread_count(&name("sink"))
        .unwrap()
}

/// Child mode: send `count` messages to `sink`; print "<failures> <worst ms>".
fn writer(args: &[String]) {
    let home = RooHome::new(&args[0]);
    let home = if args[3] == "protocol" {
        home.with_lock_policy(LockPolicy::protocol())
    } else {
        home
    };
    let me = name(&args[1]);
    let count: usize = args[2].parse().unwrap();
    let mb = Team::open(&home, name("bench")).unwrap().mailbox();
    let mut failures = 0;
    let mut worst = Duration::ZERO;
    for i in 0..count {
        let started = Instant::now();
        if mb
            .send(
                &me,
                "sink",
                Outgoing::text(format!("{me}-{i}"), "throughput message"),
            )
            .is_err()
        {
            failures += 1;
        }
        worst = worst.max(started.elapsed());
    }
    println!("{failures} {}", ms(worst));
}

fn inbox_sizes(iterations: usize) {
    println!("\nper-send cost by inbox size ({iterations} sends each):");
    for size in [10usize, 1_000, 10_000] {
        for unread in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let home = RooHome::new(dir.path());
            let team = team(&home, &["alice".into()]);
            let mb = team.mailbox();
            prefill(&mb.inbox_path(&name("alice")), size, !unread);
            let lead = name("lead");
            let mut samples = Vec::new();
            for i in 0..iterations {
                let started = Instant::now();
                mb.send(
                    &lead,
                    "alice",
                    Outgoing::text(format!("s{i}"), "size probe"),
                )
                .unwrap();
                samples.push(started.elapsed());
                if !unread {
                    mb.take_unread(&name("alice")).unwrap();
                }
            }
            let kind = if unread {
                "unread backlog"
            } else {
                "read history "
            };
            println!("  {size:>6} messages, {kind}  {}", Stats(samples).line());
        }
    }
}

fn prefill(inbox: &Path, size: usize, read: bool) {
    let messages = (0..size)
        .map(|i| Message {
            id: MessageId::from_string(format!("pre-{i}")),
            from: name("lead"),
            to: "alice".into(),
            body: MessageBody::Text,
            text: format!("prefilled message number {i} with a little body text"),
            summary: Some("prefilled benchmark message".into()),
            timestamp: Timestamp::now(),
            read,
            delivered_at: None,
            acknowledged_at: None,
            signature: None,
        })
        .collect();
    let doc = InboxDoc {
        messages,
        ..Default::default()
    };
    std::fs::write(inbox, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
}

/// The three set-ups of the teams benchmark, run in turn in every round.
const SETUPS: [&str; 3] = ["file", "pg owner", "pg member"];

/// Wall-clock nanoseconds: the one clock a sender and a teammate process share.
fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// `url` with a member role's login in place of the owner's.
fn login_url(url: &str, login: &roo_store::MemberLogin) -> String {
    let start = url.find("://").unwrap() + 3;
    let at = start + url[start..].find('@').unwrap();
    format!(
        "{}{}:{}{}",
        &url[..start],
        login.role(),
        login.password(),
        &url[at..]
    )
}

/// A `--teammate` process: joined, holding its presence, its inbox watcher waiting.
struct Mate {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Mate {
    /// Starts one; the store URL (a member role's has its password) goes on stdin.
    fn spawn(root: &Path, team: &str, url: &str) -> Mate {
        use std::io::Write;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--teammate", &root.display().to_string(), team, "mate"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{url}").unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Mate {
            child,
            stdin,
            lines,
        }
    }

    fn line(&mut self) -> String {
        self.lines.next().expect("teammate ended").unwrap()
    }

    fn say(&mut self, line: &str) {
        use std::io::Write;
        writeln!(self.stdin, "{line}").unwrap();
    }

    fn stop(mut self) {
        self.say("quit");
        drop(self.stdin);
        assert!(self.child.wait().unwrap().success());
    }
}

/// Child mode (`--teammate ROOT TEAM MEMBER`, the store URL on stdin, empty for files):
/// joins, holds its presence and waits on its inbox watcher as a teammate does. For each
/// message `probe <ns>` that `take_unread` returns it prints `wake <now - ns>`; on the
/// line `claim <ns>` it waits for that wall-clock time, claims with `claim_next` until
/// none is left and prints `claimed <count> <end ns>`; `quit` or the end of stdin ends it.
fn teammate_process(args: &[String]) {
    let mut url = String::new();
    std::io::stdin().read_line(&mut url).unwrap();
    let url = url.trim_end();
    let home = RooHome::new(&args[0]);
    let home = if url.is_empty() {
        home
    } else {
        home.with_store(PgStore::connect(url).unwrap())
    };
    let team = Team::open(&home, name(&args[1])).unwrap();
    let me = name(&args[2]);
    let mut entry = Member::new(me.clone(), team.name());
    entry.pid = Some(std::process::id());
    team.join(entry).unwrap();
    let _presence = team.hold_presence(&me).unwrap();
    let mailbox = team.mailbox();
    let mut watcher = mailbox.watcher(&me).unwrap();
    let waker = watcher.waker();
    let (tx, commands) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
            waker.wake();
        }
        let _ = tx.send("quit".into());
        waker.wake();
    });
    println!("ready");
    loop {
        let outcome = watcher.wait(Duration::from_secs(10));
        for message in mailbox.take_unread(&me).unwrap() {
            if let Some(sent) = message.text.strip_prefix("probe ") {
                let sent: u128 = sent.parse().unwrap();
                println!("wake {}", now_ns().saturating_sub(sent));
            }
        }
        if outcome != WaitOutcome::Woken {
            continue;
        }
        while let Ok(command) = commands.try_recv() {
            if command == "quit" {
                return;
            }
            if let Some(at) = command.strip_prefix("claim ") {
                let at: u128 = at.parse().unwrap();
                let wait = at.saturating_sub(now_ns());
                std::thread::sleep(Duration::from_nanos(wait as u64));
                let list = team.tasks();
                let mut count = 0;
                while list
                    .claim_next(&me, &ClaimOptions::default())
                    .unwrap()
                    .is_some()
                {
                    count += 1;
                }
                println!("claimed {count} {}", now_ns());
            }
        }
    }
}

/// What one round of one set-up measured.
struct RoundResult {
    wakes: Vec<Duration>,
    claims_per_s: f64,
}

/// One round of one set-up with `teams` teams (`t0`, `t1`, …), each a lead and `mate`, in
/// a fresh file home or a fresh schema: every team's `mate` a `--teammate` process (its
/// own member role's login in "pg member", the owner's otherwise); `sends` times, every
/// team's lead (a thread with a store of its own, as a lead process has) sends one message
/// to its mate at the same moment, each timed from just before its send to its mate's
/// `take_unread` returning it; then every mate, at the same moment, claims its team's
/// `claims` tasks created by the lead.
fn teams_round(dsn: &str, setup: &str, teams: usize, sends: usize, claims: usize) -> RoundResult {
    let file_dir = tempfile::tempdir().unwrap();
    let (_pg_dir, home, url) = match setup {
        "file" => (None, RooHome::new(file_dir.path()), String::new()),
        _ => {
            let (dir, home, url) = pg_home(dsn);
            (Some(dir), home, url)
        }
    };
    let names: Vec<String> = (0..teams).map(|i| format!("t{i}")).collect();
    let mut mate_urls = Vec::new();
    for t in &names {
        let team = team_named(&home, t, &["mate".to_string()]);
        for i in 0..claims {
            team.tasks()
                .create(NewTask {
                    subject: format!("c{i}"),
                    ..Default::default()
                })
                .unwrap();
        }
        mate_urls.push(match setup {
            "pg member" => {
                let store = home.pg().unwrap();
                login_url(
                    &url,
                    &store
                        .create_member_role(team.name(), &name("mate"))
                        .unwrap(),
                )
            }
            _ => url.clone(),
        });
    }
    // Each lead a store of its own (its own connections), opened before any timing.
    let leads: Vec<Team> = names
        .iter()
        .map(|t| {
            let lead_home = match setup {
                "file" => home.clone(),
                _ => RooHome::new(file_dir.path().join("lead"))
                    .with_store(PgStore::connect(&url).unwrap()),
            };
            Team::open(&lead_home, name(t)).unwrap()
        })
        .collect();
    let mut mates: Vec<Mate> = names
        .iter()
        .zip(&mate_urls)
        .map(|(t, u)| Mate::spawn(file_dir.path(), t, u))
        .collect();
    for mate in &mut mates {
        assert_eq!(mate.line(), "ready");
    }
    let barrier = std::sync::Barrier::new(teams);
    let wakes: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = leads
            .iter()
            .zip(mates.iter_mut())
            .map(|(lead, mate)| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mailbox = lead.mailbox();
                    let mut samples = Vec::new();
                    for _ in 0..sends {
                        barrier.wait();
                        let text = format!("probe {}", now_ns());
                        mailbox
                            .send(&name("lead"), "mate", Outgoing::text(text, "probe"))
                            .unwrap();
                        let line = mate.line();
                        let ns: u64 = line.strip_prefix("wake ").unwrap().parse().unwrap();
                        samples.push(Duration::from_nanos(ns));
                    }
                    samples
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let go = now_ns() + 300_000_000;
    for mate in &mut mates {
        mate.say(&format!("claim {go}"));
    }
    let (mut claimed, mut end) = (0usize, go);
    for mate in &mut mates {
        let line = mate.line();
        let mut parts = line.strip_prefix("claimed ").unwrap().split(' ');
        claimed += parts.next().unwrap().parse::<usize>().unwrap();
        end = end.max(parts.next().unwrap().parse().unwrap());
    }
    assert_eq!(claimed, teams * claims, "{setup}: claims went missing");
    for mate in mates {
        mate.stop();
    }
    if setup == "pg member" {
        for t in &names {
            home.pg().unwrap().drop_member_roles(&name(t)).unwrap();
        }
    }
    RoundResult {
        wakes,
        claims_per_s: claimed as f64 / ((end - go) as f64 / 1e9),
    }
}

/// Send→wake and claims/s for 1, 10 and 50 teams on the file store, PostgreSQL with the
/// store's own login (as today) and PostgreSQL with each member process logging in as its
/// member role, all three in every round (so that the machine's noise hits them alike), on
/// a throwaway cluster of the benchmark's own (`scripts/pg-cluster`, `max_connections`
/// 200: 50 teams hold about 150 sessions).
fn teams(rounds: usize, quick: bool) {
    println!("\n## Teams: send -> wake and claims/s, file store, owner's login, member roles");
    println!("load average before: {}", load_average());
    let cluster = Cluster::start();
    for teams in [1usize, 10, 50] {
        let sends = if quick { 2 } else { (60 / teams).max(10) };
        let claims = if quick { 3 } else { (400 / teams).max(10) };
        let mut wakes: Vec<Vec<Duration>> = vec![Vec::new(); 3];
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); 3];
        for _ in 0..rounds {
            for (i, setup) in SETUPS.iter().enumerate() {
                let result = teams_round(&cluster.dsn, setup, teams, sends, claims);
                wakes[i].extend(result.wakes);
                rates[i].push(result.claims_per_s);
            }
        }
        println!(
            "\n{teams} team(s): {sends} sends per team per round, {claims} claims per team, \
             {rounds} rounds"
        );
        let mut p = Vec::new();
        for (i, setup) in SETUPS.iter().enumerate() {
            let stats = Stats(wakes[i].clone());
            let mean = rates[i].iter().sum::<f64>() / rates[i].len() as f64;
            let each: Vec<String> = rates[i].iter().map(|r| format!("{r:.0}")).collect();
            println!(
                "{setup:>10}: send -> wake {}; claims/s {mean:.0} (rounds: {})",
                stats.line(),
                each.join(" / ")
            );
            p.push((ms(stats.pct(0.5)), ms(stats.pct(0.99)), mean));
        }
        let ratio = |a: usize, b: usize| {
            format!(
                "p50 {:.2}x  p99 {:.2}x  claims/s {:.2}x",
                p[a].0 / p[b].0,
                p[a].1 / p[b].1,
                p[a].2 / p[b].2
            )
        };
        println!("{:>10}: {}", "owner/file", ratio(1, 0));
        println!("{:>10}: {}", "member/file", ratio(2, 0));
        println!("{:>10}: {}", "member/own", ratio(2, 1));
    }
    connections(&cluster);
    println!("\nload average after: {}", load_average());
}

fn psql(dsn: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([dsn, "-Atqc", sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Sessions on the server per kind of process, each given an `application_name` of its
/// own in its URL: held (rows of `pg_stat_activity`) while it waits, and opened in all
/// (`connection authorized` lines of the server log, with `log_connections` on).
fn connections(cluster: &Cluster) {
    println!("\n## Connections per process (owner's login unless said; PostgreSQL, unix socket)");
    psql(&cluster.dsn, "ALTER SYSTEM SET log_connections = on");
    psql(&cluster.dsn, "SELECT pg_reload_conf()");
    let (dir, home, url) = pg_home(&cluster.dsn);
    let team = team(&home, &["alice".into(), "bob".into(), "mate".into()]);
    let with_app = |app: &str| format!("{url}&application_name={app}");
    let held = |app: &str| -> String {
        std::thread::sleep(Duration::from_millis(500));
        psql(
            &cluster.dsn,
            &format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{app}'"),
        )
    };
    let log = cluster.dir.join("server.log");
    let opened = |app: &str| {
        let suffix = format!("application_name={app}");
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .filter(|l| l.contains("connection authorized") && l.trim_end().ends_with(&suffix))
            .count()
    };
    let row = |what: &str, held: String, app: &str| {
        println!("{what:>58}: {held} held, {} opened", opened(app));
    };
    // A member process as a lead or worker holds it: joined, holding its presence.
    let mut member = Command::new(std::env::current_exe().unwrap())
        .args(["--member", &dir.path().display().to_string()])
        .args([with_app("b_member").as_str(), "alice"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(member.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    row(
        "joined, holding its presence (lead-like), idle",
        held("b_member"),
        "b_member",
    );
    drop(member.stdin.take());
    member.wait().unwrap();
    // A teammate: also its inbox watcher; then after a wake and a claim (worker-like).
    let store = home.pg().unwrap();
    let role_url = login_url(
        &url,
        &store
            .create_member_role(team.name(), &name("mate"))
            .unwrap(),
    );
    for (who, app, mate_url) in [
        ("owner's login", "b_mate", with_app("b_mate")),
        (
            "member role",
            "b_role",
            format!("{role_url}&application_name=b_role"),
        ),
    ] {
        let mut mate = Mate::spawn(dir.path(), "bench", &mate_url);
        assert_eq!(mate.line(), "ready");
        row(&format!("+ inbox watcher waiting ({who})"), held(app), app);
        team.mailbox()
            .send(
                &name("lead"),
                "mate",
                Outgoing::text(format!("probe {}", now_ns()), "p"),
            )
            .unwrap();
        assert!(mate.line().starts_with("wake "));
        team.tasks()
            .create(NewTask {
                subject: "c".into(),
                ..Default::default()
            })
            .unwrap();
        mate.say(&format!("claim {}", now_ns()));
        assert!(mate.line().starts_with("claimed 1 "));
        row(
            &format!("+ after a wake and a claim, waiting ({who})"),
            held(app),
            app,
        );
        mate.stop();
    }
    store.drop_member_roles(team.name()).unwrap();
    let cli_home = dir.path().join("cli");
    let mut watch = Command::new(bin("roo-mail"))
        .args(["watch", "--team", "bench", "--as", "bob", "--json"])
        .env("ROO_HOME", &cli_home)
        .env("ROO_STORE", with_app("b_watch"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(watch.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    row("roo-mail watch, waiting", held("b_watch"), "b_watch");
    let _ = watch.kill();
    let _ = watch.wait();
    let status = Command::new(bin("roo-mail"))
        .args(["send", "--team", "bench", "--from", "lead", "--to", "alice"])
        .args(["--summary", "count", "hello"])
        .env("ROO_HOME", &cli_home)
        .env("ROO_STORE", with_app("b_send"))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    row("roo-mail send, after it exited", held("b_send"), "b_send");
}
