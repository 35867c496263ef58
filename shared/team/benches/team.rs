//! Benchmark of the team runtime (run with `scripts/bench-team`).
//!
//! Every teammate talks to a `roo_llm::mock_server::MockServer` in this process, which
//! stamps each request with the instant it was read (`RecordedRequest::received_at`), so
//! a latency is "something this process did" → "a request arrived", on one clock:
//!
//! 1. spawn: `spawn_in_process(spec)` (from building the spec) → the teammate's first
//!    model request; `roo-worker` process start (`Command::spawn` of the release binary)
//!    → its first model request. The two kinds alternate, so load hits both alike. Then
//!    the lead's Agent tool through a real `roo-lead -p`: the arrival of the lead's
//!    request answered with the Agent call → the teammate's first request, in a git
//!    repository (with its worktree) and outside one, alternating.
//! 2. delivery: `Mailbox::send` → the recipient's next model request that carries the
//!    message, for an idle teammate (waiting on its inbox) and a busy one (mid-run, its
//!    Bash tool running `sleep 0.2`; the message is sent once the command has started).
//!    For the busy case the message can only enter at the next turn, so the figure that
//!    says what the runtime adds is "command ended → next request", compared with the
//!    same run without a message. In-process and `roo-worker`, interleaved.
//! 3. memory: the idle RSS of each `roo-worker` above; the RSS a process gains per idle
//!    in-process teammate (this executable re-run with `--rss-child`, so nothing else of
//!    the benchmark lives in that process).
//! 4. tokens: a scripted two-task job done by `roo-lead -p` with its team tools and two
//!    in-process teammates it spawns vs one `roo-lead -p` doing both tasks, as the prompt
//!    tokens the mock reports per agent, split by its model of Anthropic's prompt cache
//!    into input, cache reads and cache writes, and billed as Anthropic bills them.
//!
//! 5. panes: pane teammates in a private tmux server ([`panes`]).
//! 6. git: a teammate's checkout in a repository of 10,000 files, `git worktree add`
//!    (before issue 18) against the teammate's clone, and the lead's Agent call → the
//!    teammate's first request there.
//! 7. merge: `LeadRepo::merge_checked` (TeamMerge) of a 50-file branch.
//! 8. startup: the lead's Agent call → the teammate's first request in process and in a
//!    tmux pane, and one agent's start-up wall and CPU time, side by side ([`startup`]).
//!
//! 9. budget: what the caps' accounting adds per model request ([`budget`]).
//!
//! `ROO_BENCH_QUICK=1` runs fewer iterations;
//! `ROO_BENCH_ONLY=spawn|delivery|memory|tokens|panes|git|merge|startup|budget` runs one
//! section;
//! `ROO_BENCH_TURN_MS=N` makes the lead's model turn between TeamCreate and the Agent call of
//! the spawn runs last N ms.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "team/budget.rs"]
mod budget;
#[path = "team/panes.rs"]
mod panes;
#[path = "team/startup.rs"]
mod startup;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use roo_agent::permissions::PermissionMode;
use roo_llm::mock_server::{MockServer, Protocol, RecordedRequest};
use roo_llm::script::Script;
use roo_llm::{LlmSettings, Provider, ProviderKind, Usage};
use roo_store::{Member, Name, Outgoing, RooHome, Team};
use roo_team::{
    AgentSettings, Identity, TeamSlot, TeamTools, TeammateHandle, TeammateSpec, Trust,
    spawn_in_process, teammate_tools,
};

const WAIT: Duration = Duration::from_secs(60);
const MODEL: &str = "claude-sonnet-4-5";

/// The Bash command of a busy turn: marks that it started, sleeps, prints when it ended
/// (wall clock, ns) so the benchmark can time the next request from the command's end.
fn busy_command(tag: &str) -> String {
    format!(": > .started-{tag} && sleep 0.2 && echo BENCH_END=$(date +%s%N)")
}

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

/// A release binary next to this benchmark (`target/release/<name>`).
fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join(name);
    assert!(
        path.is_file(),
        "build {name} first: scripts/bench-team builds the release binaries"
    );
    path
}

struct Stats(Vec<Duration>);

impl Stats {
    fn pct(&self, p: f64) -> Duration {
        let mut v = self.0.clone();
        v.sort();
        v[((v.len() - 1) as f64 * p).round() as usize]
    }
    fn line(&self) -> String {
        if self.0.is_empty() {
            return "no samples".into();
        }
        format!(
            "p50 {:>8.2} ms  p90 {:>8.2} ms  min {:>8.2} ms  max {:>8.2} ms  (n={})",
            ms(self.pct(0.5)),
            ms(self.pct(0.9)),
            ms(self.pct(0.0)),
            ms(self.pct(1.0)),
            self.0.len()
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// VmRSS of `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// A script of `extra` (YAML list items, indented by 4) then `plain` "Noted." turns.
fn script(plain: usize, extra: &str) -> Script {
    let mut yaml = String::from("agents:\n  \"*\":\n");
    yaml.push_str(extra);
    for _ in 0..plain {
        yaml.push_str("    - text: Noted.\n");
    }
    Script::parse(&yaml, false).unwrap()
}

/// How many requests `server` has received; `known` is a count from before (it only
/// grows), so only the new ones are copied.
fn request_count(server: &MockServer, known: &mut usize) -> usize {
    *known += server.requests_since(*known).len();
    *known
}

/// The next request from index `start` on whose body contains `marker`: its index and
/// when it arrived.
async fn wait_request(server: &MockServer, start: usize, marker: &str) -> (usize, Instant) {
    let found = std::sync::Mutex::new(None);
    let held = server
        .wait_until(WAIT, |s| {
            let new: Vec<RecordedRequest> = s.requests_since(start);
            match new.iter().position(|r| r.body.to_string().contains(marker)) {
                Some(i) => {
                    *found.lock().unwrap() = Some((start + i, new[i].received_at));
                    true
                }
                None => false,
            }
        })
        .await;
    assert!(held, "no request carrying {marker} arrived");
    found.into_inner().unwrap().unwrap()
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn is_idle(team: &Team, member: &str) -> bool {
    team.config()
        .ok()
        .and_then(|c| c.member(member).map(|m| !m.is_active()))
        .unwrap_or(false)
}

/// The shared world of one section: a `ROO_HOME` with team `bench` led by `lead`.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: RooHome,
    team: Team,
}

impl World {
    fn new(team: &str) -> World {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let home = RooHome::new(root.join("home"));
        let t = name(team);
        let team = Team::create(
            &home,
            t.clone(),
            "benchmark",
            Member::new(name("lead"), &t),
            vec![],
        )
        .unwrap();
        World {
            _dir: dir,
            root,
            home,
            team,
        }
    }

    /// A fresh working directory for member `who`.
    fn cwd(&self, who: &str) -> PathBuf {
        let dir = self.root.join("work").join(who);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}

/// The provider the lead shares with its in-process teammates.
fn provider(url: &str) -> Arc<dyn Provider> {
    let mut s = LlmSettings::defaults(ProviderKind::Anthropic);
    s.model = MODEL.into();
    s.base_url = url.into();
    s.api_key = Some("bench-key".into());
    roo_llm::build_provider(&s).unwrap()
}

/// Spawns in-process teammate `who` as a lead's Agent tool would: its settings, the
/// shared provider, the teammate's team tools, trust granted, Bash allowed.
async fn spawn_teammate(
    world: &World,
    url: &str,
    shared: &Arc<dyn Provider>,
    who: &str,
    prompt: &str,
) -> TeammateHandle {
    let me = name(who);
    let mut settings = AgentSettings::new(
        Identity::teammate(me.clone(), world.team.name().clone(), name("lead")),
        world.home.root().to_path_buf(),
    );
    let cwd = world.cwd(who);
    settings.cwd = Some(cwd.clone());
    settings.project_root = Some(cwd.clone());
    settings.llm.provider = Some("anthropic".into());
    settings.llm.base_url = Some(url.into());
    settings.llm.model = Some(MODEL.into());
    settings.provider = Some(shared.clone());
    settings.trust = Trust::Granted;
    settings.permission_mode = Some(PermissionMode::BypassPermissions);
    settings.sandbox_helper = Some(bin("roo-lead"));
    let mut spec = TeammateSpec::for_member(
        settings,
        world.team.clone(),
        me,
        name("lead"),
        prompt.to_owned(),
    );
    spec.tools = teammate_tools(&TeamTools::new(TeamSlot::bound(spec.binding.clone())));
    spec.member.worktree_path = Some(cwd);
    spawn_in_process(spec).await.unwrap()
}

/// A `roo-worker` process of team `bench` (not started).
fn worker(world: &World, url: &str, who: &str, prompt: &str) -> Command {
    let mut cmd = Command::new(bin("roo-worker"));
    cmd.args(["--team", world.team.name().as_str(), "--name", who])
        .args(["--prompt", prompt])
        .arg("--cwd")
        .arg(world.cwd(who))
        .args([
            "--provider",
            "anthropic",
            "--model",
            MODEL,
            "--base-url",
            url,
        ])
        .args(["--permission-mode", "bypassPermissions", "--trust-project"])
        .env("ROO_HOME", world.home.root())
        .env("ANTHROPIC_API_KEY", "bench-key")
        .env_remove("ROO_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// A started `roo-worker`: killed and reaped if the benchmark fails before `stop`.
struct Worker(Option<std::process::Child>);

impl Worker {
    fn spawn(cmd: &mut Command) -> Worker {
        Worker(Some(cmd.spawn().unwrap()))
    }

    fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, std::process::Child::id)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Ends a `roo-worker` with SIGTERM and reaps it.
async fn stop(mut worker: Worker) {
    let mut child = worker.0.take().unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
}

/// Section 1 (+ the roo-worker half of section 3): spawn → first request.
async fn spawn_section(n: usize) {
    let world = World::new("spawn");
    let server = MockServer::with_script(script(4 * n + 8, ""))
        .await
        .unwrap();
    let url = server.base_url(Protocol::Anthropic);
    let shared = provider(&url);
    let (mut in_process, mut process, mut rss) = (Vec::new(), Vec::new(), Vec::new());
    // One of each first, not counted: page cache, the lazily built parts of the provider.
    for i in 0..=n {
        for kind in [i % 2, 1 - i % 2] {
            let who = format!("{}{i}", if kind == 0 { "ip" } else { "rw" });
            let marker = format!("spawn-{who}: answer ok");
            let start = server.requests().len();
            if kind == 0 {
                let t0 = Instant::now();
                let handle = spawn_teammate(&world, &url, &shared, &who, &marker).await;
                let (_, at) = wait_request(&server, start, &marker).await;
                if i > 0 {
                    in_process.push(at - t0);
                }
                eventually("the teammate to go idle", || is_idle(&world.team, &who)).await;
                handle.cancel();
                handle.wait().await;
            } else {
                let mut cmd = worker(&world, &url, &who, &marker);
                let t0 = Instant::now();
                let child = Worker::spawn(&mut cmd);
                let (_, at) = wait_request(&server, start, &marker).await;
                if i > 0 {
                    process.push(at - t0);
                }
                eventually("the worker to go idle", || is_idle(&world.team, &who)).await;
                // Idle means waiting on its inbox; let the notification's writes finish.
                tokio::time::sleep(Duration::from_millis(200)).await;
                if i > 0 {
                    rss.push(rss_kib(child.id()));
                }
                stop(child).await;
            }
        }
    }
    println!("## Spawn → first model request");
    println!("in-process teammate  {}", Stats(in_process).line());
    println!("roo-worker process   {}", Stats(process).line());
    rss.sort();
    println!(
        "roo-worker idle RSS  median {:.1} MiB  min {:.1} MiB  max {:.1} MiB  (n={})",
        rss[rss.len() / 2] as f64 / 1024.0,
        rss[0] as f64 / 1024.0,
        rss[rss.len() - 1] as f64 / 1024.0,
        rss.len()
    );
}

/// A teammate under test in the delivery section.
enum Target {
    InProcess(TeammateHandle),
    Worker(Worker),
}

/// The wall clock of a monotonic instant (for the `date` the busy command prints).
struct Clock {
    at: Instant,
    wall: SystemTime,
}

impl Clock {
    fn now() -> Clock {
        Clock {
            at: Instant::now(),
            wall: SystemTime::now(),
        }
    }
    /// Nanoseconds since the epoch of `instant`.
    fn wall_ns(&self, instant: Instant) -> i128 {
        let base = self.wall.duration_since(UNIX_EPOCH).unwrap().as_nanos() as i128;
        if instant >= self.at {
            base + (instant - self.at).as_nanos() as i128
        } else {
            base - (self.at - instant).as_nanos() as i128
        }
    }
}

/// The `BENCH_END=<ns>` a busy command printed, from a request body.
fn command_end(request: &RecordedRequest) -> i128 {
    let body = request.body.to_string();
    let at = body
        .rfind("BENCH_END=")
        .expect("the request carries the command's output");
    body[at + "BENCH_END=".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// Section 2: delivery to an idle and to a busy teammate, in-process and roo-worker.
async fn delivery_section(n: usize) {
    let world = World::new("delivery");
    // Per target and iteration: a busy turn with a message and one without.
    let mut busy = String::new();
    for who in ["ip", "rw"] {
        for i in 0..n {
            for variant in ["msg", "none"] {
                let tag = format!("{who}-{i}-{variant}");
                busy.push_str(&format!(
                    "    - when: {{last_user_contains: \"go-{tag}\"}}\n      text: working\n      tool_calls:\n        - {{name: Bash, input: {{command: \"{}\"}}}}\n",
                    busy_command(&tag)
                ));
            }
        }
    }
    let server = MockServer::with_script(script(8 * n + 8, &busy))
        .await
        .unwrap();
    let url = server.base_url(Protocol::Anthropic);
    let shared = provider(&url);
    let lead = name("lead");
    let mailbox = world.team.mailbox();

    let mut known = 0;
    let start = request_count(&server, &mut known);
    let ip =
        Target::InProcess(spawn_teammate(&world, &url, &shared, "ip", "start: answer ok").await);
    let rw = Target::Worker(Worker::spawn(&mut worker(
        &world,
        &url,
        "rw",
        "start: answer ok",
    )));
    wait_request(&server, start, "start: answer ok").await;
    let mut idle: [Vec<Duration>; 2] = Default::default();
    let mut send: [Vec<Duration>; 2] = Default::default();
    let mut busy_total: [Vec<Duration>; 2] = Default::default();
    let mut busy_after_end: [Vec<Duration>; 2] = Default::default();
    let mut busy_baseline: [Vec<Duration>; 2] = Default::default();
    let mut missed = [0usize; 2];
    let settle = || tokio::time::sleep(Duration::from_millis(100));
    for i in 0..n {
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let who = ["ip", "rw"][k];
            eventually("idle", || is_idle(&world.team, who)).await;
            settle().await;

            // Idle: the teammate waits on its inbox.
            let marker = format!("idle-{who}-{i}");
            let start = request_count(&server, &mut known);
            let t0 = Instant::now();
            mailbox
                .send(&lead, who, Outgoing::text(&marker, "probe"))
                .unwrap();
            let sent = t0.elapsed();
            let (_, at) = wait_request(&server, start, &marker).await;
            idle[k].push(at - t0);
            send[k].push(sent);

            // Busy: with a message sent while its command runs, and without, alternated.
            let variants = if i % 2 == 0 {
                ["msg", "none"]
            } else {
                ["none", "msg"]
            };
            for variant in variants {
                eventually("idle", || is_idle(&world.team, who)).await;
                settle().await;
                let tag = format!("{who}-{i}-{variant}");
                // Paired afresh each time, so a slewing wall clock cannot drift far.
                let clock = Clock::now();
                let start = request_count(&server, &mut known);
                mailbox
                    .send(&lead, who, Outgoing::text(format!("go-{tag}"), "go"))
                    .unwrap();
                let started = world
                    .root
                    .join("work")
                    .join(who)
                    .join(format!(".started-{tag}"));
                eventually("the busy command to start", || started.exists()).await;
                let (index, at, t0) = if variant == "msg" {
                    let marker = format!("busy-{tag}");
                    let t0 = Instant::now();
                    mailbox
                        .send(&lead, who, Outgoing::text(&marker, "probe"))
                        .unwrap();
                    let (index, at) = wait_request(&server, start, &marker).await;
                    (index, at, Some(t0))
                } else {
                    let (index, at) = wait_request(&server, start + 1, "").await;
                    (index, at, None)
                };
                // The request right after the go-request is the one with the command's
                // result; a message that missed it would show up as a later index.
                if index != start + 1 {
                    missed[k] += 1;
                }
                let request = &server.requests_since(index)[0];
                let after_end = Duration::from_nanos(
                    u64::try_from(clock.wall_ns(at) - command_end(request)).unwrap_or(0),
                );
                match t0 {
                    Some(t0) => {
                        busy_total[k].push(at - t0);
                        busy_after_end[k].push(after_end);
                    }
                    None => busy_baseline[k].push(after_end),
                }
            }
        }
    }
    println!("## Delivery: Mailbox::send → the recipient's next model request carrying it");
    for (k, label) in ["in-process", "roo-worker"].iter().enumerate() {
        println!(
            "{label:<11} idle                   {}",
            Stats(idle[k].clone()).line()
        );
        println!(
            "{label:<11}   of which the send     {}",
            Stats(send[k].clone()).line()
        );
        println!(
            "{label:<11} busy, send → request   {}",
            Stats(busy_total[k].clone()).line()
        );
        println!(
            "{label:<11} busy, command end → request, with message    {}",
            Stats(busy_after_end[k].clone()).line()
        );
        println!(
            "{label:<11} busy, command end → request, without message {}",
            Stats(busy_baseline[k].clone()).line()
        );
        println!(
            "{label:<11} busy messages that missed the request after the command: {}",
            missed[k]
        );
    }
    for target in [ip, rw] {
        match target {
            Target::InProcess(handle) => {
                handle.cancel();
                handle.wait().await;
            }
            Target::Worker(child) => stop(child).await,
        }
    }
}

/// Section 3 (in-process half): a process's RSS before and after `n` idle in-process
/// teammates, in a child process of its own (`--rss-child N URL`).
async fn memory_section(rounds: usize) {
    let server = MockServer::with_script(script(40 * rounds + 8, ""))
        .await
        .unwrap();
    let url = server.base_url(Protocol::Anthropic);
    println!("## RSS added per idle in-process teammate (bare process: runtime, provider, team)");
    for round in 0..rounds {
        let sizes = if round % 2 == 0 { [4, 8] } else { [8, 4] };
        for n in sizes {
            let out = tokio::process::Command::new(std::env::current_exe().unwrap())
                .args(["--rss-child", &n.to_string(), &url])
                .stdin(Stdio::null())
                .stderr(Stdio::inherit())
                .output()
                .await
                .unwrap();
            assert!(out.status.success(), "the --rss-child run failed");
            let text = String::from_utf8(out.stdout).unwrap();
            let v: Vec<u64> = text
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            let (before, after) = (v[0], v[1]);
            let each = (after as f64 - before as f64) / n as f64 / 1024.0;
            println!(
                "N={n}: before {:.1} MiB, after {:.1} MiB, added {:.2} MiB per teammate",
                before as f64 / 1024.0,
                after as f64 / 1024.0,
                each
            );
        }
    }
}

/// The `--rss-child N URL` process: prints its VmRSS (KiB) after one teammate came and
/// went (so what any agent of the process builds once is in the base), then after `N`
/// idle in-process teammates.
async fn rss_child(args: &[String]) {
    let n: usize = args[0].parse().unwrap();
    let url = &args[1];
    let world = World::new("memory");
    let shared = provider(url);
    let me = std::process::id();
    let warm = spawn_teammate(&world, url, &shared, "warm", "warm up: answer ok").await;
    eventually("the warm-up teammate to go idle", || {
        is_idle(&world.team, "warm")
    })
    .await;
    warm.cancel();
    warm.wait().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rss_kib(me);
    let mut handles = Vec::new();
    for i in 0..n {
        let who = format!("m{i}");
        handles
            .push(spawn_teammate(&world, url, &shared, &who, &format!("{who}: answer ok")).await);
    }
    for i in 0..n {
        let who = format!("m{i}");
        eventually("the teammates to go idle", || is_idle(&world.team, &who)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = rss_kib(me);
    println!("{before} {after}");
    for handle in handles {
        handle.cancel();
        handle.wait().await;
    }
}

/// `PATH` with the release binaries first, so `roo-task` / `roo-mail` in Bash are ours.
fn tool_path() -> String {
    format!(
        "{}:{}",
        bin("roo-task").parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Runs `roo-lead -p` in `cwd` against `url` and returns its JSON result.
async fn lead_run(
    home: &std::path::Path,
    cwd: &std::path::Path,
    url: &str,
    extra: &[&str],
    prompt: &str,
    env: &[(&str, String)],
) -> serde_json::Value {
    let out = tokio::process::Command::new(bin("roo-lead"))
        .arg("-p")
        .arg(prompt)
        .args([
            "--provider",
            "anthropic",
            "--model",
            MODEL,
            "--base-url",
            url,
        ])
        .args(["--permission-mode", "bypassPermissions", "--trust-project"])
        .args(["--output-format", "json"])
        .env("PATH", tool_path())
        .args(extra)
        .current_dir(cwd)
        .env("ROO_HOME", home)
        .env("ANTHROPIC_API_KEY", "bench-key")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(WAIT, out).await.unwrap().unwrap();
    assert!(
        out.status.success(),
        "roo-lead failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The 16 KB input of each task.
fn job_log() -> String {
    (0..400)
        .map(|i| format!("{i:>5} INFO request served in 3 ms\n"))
        .collect()
}

/// The prompt of one agent's requests (or a team's) as the mock reported it: its
/// estimate of every request, ceil(request bytes / 4), split the way the Anthropic API
/// reports prompt caching into uncached input, cache reads and cache writes.
#[derive(Clone, Copy, Default)]
struct Spend {
    requests: usize,
    usage: Usage,
}

impl Spend {
    /// What `requests` cost. Checks that each was answered with usage and that its
    /// prompt is the estimate of its body, as before the cache model.
    fn of<'a>(requests: impl IntoIterator<Item = &'a RecordedRequest>) -> Spend {
        let mut spend = Spend::default();
        for request in requests {
            let usage = request.usage.expect("a request answered without usage");
            let estimate = (request.body.to_string().len() as u64).div_ceil(4).max(1);
            assert_eq!(
                usage.context_tokens(),
                estimate,
                "the mock's prompt estimate"
            );
            spend.requests += 1;
            spend.usage.add(&usage);
        }
        spend
    }

    /// Every prompt token, cached or not.
    fn tokens(&self) -> u64 {
        self.usage.context_tokens()
    }

    /// The prompt as Anthropic bills it, in base input tokens: cache writes at 1.25×,
    /// cache reads at 0.1×, the rest at 1×.
    fn billed(&self) -> f64 {
        self.usage.input_tokens as f64
            + 1.25 * self.usage.cache_write_tokens as f64
            + 0.1 * self.usage.cache_read_tokens as f64
    }

    fn plus(mut self, other: &Spend) -> Spend {
        self.requests += other.requests;
        self.usage.add(&other.usage);
        self
    }

    /// One line of the table: the figures, then the ratios to `solo`'s prompt and
    /// billed prompt.
    fn line(&self, label: &str, solo: &Spend) -> String {
        let u = &self.usage;
        format!(
            "{label:<24}{:>4} {:>8} {:>8} {:>8} {:>8} {:>9.0} {:>7.2} {:>7.2} {:>7.2}",
            self.requests,
            self.tokens(),
            u.input_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            self.billed(),
            self.tokens() as f64 / solo.tokens() as f64,
            self.billed() / solo.billed(),
            self.billed() / solo.tokens() as f64,
        )
    }
}

/// Checks that a `roo-lead -p` JSON result counts the usage the mock reported for the
/// lead's requests (cache reads and writes parsed from the stream).
fn assert_result_usage(result: &serde_json::Value, lead: &Spend) {
    let usage = &result["usage"];
    let count = |key: &str| usage[key].as_u64().unwrap_or(0);
    assert_eq!(
        (
            count("input_tokens"),
            count("cache_read_tokens"),
            count("cache_write_tokens")
        ),
        (
            lead.usage.input_tokens,
            lead.usage.cache_read_tokens,
            lead.usage.cache_write_tokens
        ),
        "the lead's own usage count differs from what the mock reported for its requests"
    );
}

/// A fresh git repository in `dir` (one commit holding `files`), made as a user would.
fn git_repo(dir: &std::path::Path, files: &[(&str, String)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=Bench",
            "-c",
            "user.email=bench@example.invalid",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "initial",
        ],
    ] {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
}

/// The system prompt of an in-process teammate says this (`builder.rs`), the lead's not.
const TEAMMATE_PROMPT: &str = "a RooCode teammate";

/// Whether `request` was sent by a teammate named `who` (any teammate with `None`).
fn sent_by_teammate(request: &RecordedRequest, who: Option<&str>) -> bool {
    let system = request.body["system"].to_string();
    match who {
        Some(who) => system.contains(&format!("You are {who}, {TEAMMATE_PROMPT}")),
        None => system.contains(TEAMMATE_PROMPT),
    }
}

/// One `roo-lead -p` whose model calls TeamCreate, then TaskList (a cheap internal tool,
/// for reference), then Agent{name: alice}; alice answers "ok" and goes idle, the lead
/// answers her idle notification and exits. Returns, from the arrival of the lead's
/// request answered with the Agent call: alice's first request, the lead's next request
/// (the Agent tool returned), and the same span for the TaskList call.
/// With `panes` (a tmux server's `TMUX`/`TMUX_PANE`), alice is a pane teammate.
async fn agent_spawn_once(git: bool, panes: Option<&[(&str, String)]>) -> [Duration; 3] {
    agent_spawn_in(git.then_some(RepoKind::Small), panes).await
}

/// The repository [`agent_spawn_in`] runs the lead in.
#[derive(Clone, Copy)]
enum RepoKind<'a> {
    /// One commit holding README.md.
    Small,
    /// A copy of this repository (`cp -a`).
    Copy(&'a std::path::Path),
}

/// [`agent_spawn_once`] in a repository of `kind`, or outside one with `None`.
async fn agent_spawn_in(
    kind: Option<RepoKind<'_>>,
    panes: Option<&[(&str, String)]>,
) -> [Duration; 3] {
    let git = kind.is_some();
    let mut yaml = String::from("agents:\n  \"*\":\n");
    for _ in 0..4 {
        yaml.push_str(&format!(
            "    - when: {{system_contains: \"{TEAMMATE_PROMPT}\"}}\n      text: ok\n"
        ));
    }
    // `ROO_BENCH_TURN_MS`: how long the lead's model turn between TeamCreate and the Agent
    // call takes (a real model's takes seconds).
    let turn_ms: u64 = std::env::var("ROO_BENCH_TURN_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    yaml.push_str(&format!(
        "    - tool_calls: [{{name: TeamCreate, input: {{team_name: bench}}}}]\n      \
         delay_ms: 0\n    - tool_calls: [{{name: TaskList, input: {{}}}}]\n      delay_ms: \
         {turn_ms}\n"
    ));
    yaml.push_str(
        r#"    - tool_calls: [{name: Agent, input: {name: alice, prompt: "bench-spawn: answer ok"}}]
    - text: Spawned.
"#,
    );
    for _ in 0..8 {
        yaml.push_str("    - text: Noted.\n");
    }
    let server = MockServer::with_script(Script::parse(&yaml, false).unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("project");
    match kind {
        Some(RepoKind::Small) => git_repo(&cwd, &[("README.md", "# bench\n".into())]),
        Some(RepoKind::Copy(template)) => {
            let out = Command::new("cp")
                .arg("-a")
                .arg(template)
                .arg(&cwd)
                .output()
                .unwrap();
            assert!(out.status.success(), "cp -a: {out:?}");
        }
        None => std::fs::create_dir_all(&cwd).unwrap(),
    }
    lead_run(
        &dir.path().join("home"),
        &cwd,
        &server.base_url(Protocol::Anthropic),
        &[
            "--teammate-mode",
            if panes.is_some() {
                "tmux"
            } else {
                "in-process"
            },
        ],
        "Start the bench team.",
        panes.unwrap_or_default(),
    )
    .await;
    let requests = server.requests();
    let lead: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| !sent_by_teammate(r, None))
        .collect();
    let alice = requests
        .iter()
        .find(|r| sent_by_teammate(r, Some("alice")))
        .expect("alice made no model request");
    assert!(
        lead.len() >= 4 && alice.body.to_string().contains("bench-spawn"),
        "unexpected requests: {} from the lead",
        lead.len()
    );
    if git {
        assert!(
            cwd.join(".roocode/worktrees/bench+alice/README.md")
                .is_file(),
            "alice got no clone"
        );
    }
    let agent_call = lead[2].received_at;
    [
        alice.received_at - agent_call,
        lead[3].received_at - agent_call,
        lead[2].received_at - lead[1].received_at,
    ]
}

/// Section 1b: the lead's Agent tool call → the in-process teammate's first model
/// request, through a real `roo-lead -p`, in a git repository (the tool runs `git
/// worktree add`) and outside one (teammates share the directory); alternating.
async fn agent_section(n: usize) {
    let mut figures: [[Vec<Duration>; 3]; 2] = Default::default();
    for i in 0..=n {
        for git in [i % 2 == 0, i % 2 != 0] {
            let spans = agent_spawn_once(git, None).await;
            if i > 0 {
                for (k, span) in spans.into_iter().enumerate() {
                    figures[usize::from(git)][k].push(span);
                }
            }
        }
    }
    println!("## roo-lead -p: Agent call (arrival of the lead's request answered with it) → …");
    for (git, label) in [(1, "git repository (worktree)"), (0, "no repository")] {
        let [alice, returned, cheap] = std::mem::take(&mut figures[git]);
        println!("{label}");
        println!("  teammate's first request  {}", Stats(alice).line());
        println!("  lead's next request       {}", Stats(returned).line());
        println!(
            "  (TaskList call → lead's next request {})",
            Stats(cheap).line()
        );
    }
}

/// How the scripted team does the job.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// As before issue 20's spawn-with-task and reporting idle notification: the lead
    /// calls TeamCreate and two TaskCreates in one turn, Agent alice and Agent bob in the
    /// next; each teammate claims its task (TaskUpdate owner), reads its log, writes the
    /// summary, completes the task, tells the lead (SendMessage) and ends its turn, one
    /// tool call per turn.
    Messages,
    /// With them: the lead calls TeamCreate and two Agents with `task: true` in one turn;
    /// each teammate reads its log, then writes the summary and completes its task in one
    /// turn, then answers with its report (which reaches the lead in its idle
    /// notification).
    Tasks,
}

/// The job done by `roo-lead -p` with its team tools in `shape`, two in-process
/// teammates each in its own worktree; the lead answers each wake-up with "Noted.", its
/// first answer after `delay_ms` (0: teammates' messages reach it as they come; longer:
/// they queue while its turn runs and arrive together). All agents share the lead's
/// provider, so one mock server answers them all; requests are attributed by system
/// prompt. Returns lead, alice, bob.
async fn team_job(shape: Shape, delay_ms: u64) -> [Spend; 3] {
    let mut yaml = String::from("agents:\n  \"*\":\n");
    for (who, id, file) in [("alice", 1, "a"), ("bob", 2, "b")] {
        let when =
            format!("    - when: {{system_contains: \"You are {who}, {TEAMMATE_PROMPT}\"}}\n");
        let claim = format!(
            "      text: \"Claiming task {id}.\"\n      tool_calls: [{{name: TaskUpdate, input: {{id: \"{id}\", owner: {who}}}}}]\n"
        );
        let read = format!(
            "      text: \"Reading {file}.log.\"\n      tool_calls: [{{name: ReadFile, input: {{path: {file}.log}}}}]\n"
        );
        let write = format!(
            "{{name: WriteFile, input: {{path: {file}.summary, content: \"400 lines, no errors\\n\"}}}}"
        );
        let complete = format!("{{name: TaskUpdate, input: {{id: \"{id}\", status: completed}}}}");
        let report = format!("Task {id} is done: {file}.summary says 400 lines, no errors.");
        let turns = match shape {
            Shape::Messages => vec![
                claim,
                read,
                format!("      text: \"Writing the summary.\"\n      tool_calls: [{write}]\n"),
                format!("      text: \"Completing task {id}.\"\n      tool_calls: [{complete}]\n"),
                format!(
                    "      text: \"Telling the lead.\"\n      tool_calls: [{{name: SendMessage, input: {{to: lead, summary: \"{file}.summary written\", message: \"{report}\"}}}}]\n"
                ),
                "      text: Done.\n".to_owned(),
            ],
            Shape::Tasks => vec![
                read,
                format!(
                    "      text: \"Writing the summary and completing task {id}.\"\n      tool_calls: [{write}, {complete}]\n"
                ),
                format!("      text: \"{report}\"\n"),
            ],
        };
        for turn in turns.into_iter().chain(std::iter::repeat_n(
            "      text: Nothing more to do.\n".to_owned(),
            2,
        )) {
            yaml.push_str(&when);
            yaml.push_str(&turn);
        }
    }
    match shape {
        Shape::Messages => yaml.push_str(
            r#"    - text: "Creating the team and the two tasks."
      tool_calls:
        - {name: TeamCreate, input: {team_name: job, description: "two summaries"}}
        - {name: TaskCreate, input: {subject: "summarise a.log", description: "Read a.log and write a.summary with its line count and whether it shows errors."}}
        - {name: TaskCreate, input: {subject: "summarise b.log", description: "Read b.log and write b.summary with its line count and whether it shows errors."}}
    - text: "Spawning alice and bob."
      tool_calls:
        - {name: Agent, input: {name: alice, description: "summarises a.log", prompt: "Claim task 1 and do it: read a.log, write a.summary, complete the task, then tell the lead."}}
        - {name: Agent, input: {name: bob, description: "summarises b.log", prompt: "Claim task 2 and do it: read b.log, write b.summary, complete the task, then tell the lead."}}
"#,
        ),
        Shape::Tasks => yaml.push_str(
            r#"    - text: "Creating the team; alice and bob each get a task."
      tool_calls:
        - {name: TeamCreate, input: {team_name: job, description: "two summaries"}}
        - {name: Agent, input: {name: alice, description: "summarise a.log", task: true, prompt: "Read a.log and write a.summary with its line count and whether it shows errors."}}
        - {name: Agent, input: {name: bob, description: "summarise b.log", task: true, prompt: "Read b.log and write b.summary with its line count and whether it shows errors."}}
"#,
        ),
    }
    yaml.push_str(&format!(
        "    - text: \"Both are working; waiting for them.\"\n      delay_ms: {delay_ms}\n"
    ));
    for _ in 0..12 {
        yaml.push_str("    - text: Noted.\n");
    }
    let server = MockServer::with_script(Script::parse(&yaml, false).unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("project");
    git_repo(&cwd, &[("a.log", job_log()), ("b.log", job_log())]);
    let result = lead_run(
        &dir.path().join("home"),
        &cwd,
        &server.base_url(Protocol::Anthropic),
        &["--teammate-mode", "in-process"],
        "Have alice summarise a.log and bob summarise b.log.",
        &[],
    )
    .await;
    for (who, file) in [("alice", "a"), ("bob", "b")] {
        let summary = cwd.join(format!(".roocode/worktrees/job+{who}/{file}.summary"));
        assert!(
            summary.is_file(),
            "the team did not write {}; the lead's result: {result}",
            summary.display()
        );
    }
    let requests = server.requests();
    let lead = Spend::of(requests.iter().filter(|r| !sent_by_teammate(r, None)));
    let alice = Spend::of(
        requests
            .iter()
            .filter(|r| sent_by_teammate(r, Some("alice"))),
    );
    let bob = Spend::of(requests.iter().filter(|r| sent_by_teammate(r, Some("bob"))));
    assert_eq!(
        lead.requests + alice.requests + bob.requests,
        requests.len(),
        "a request nobody sent"
    );
    assert_result_usage(&result, &lead);
    [lead, alice, bob]
}

/// The job done by one `roo-lead -p` alone, in the same repository: read both logs,
/// write both summaries.
async fn solo_job() -> Spend {
    let solo_script = Script::parse(
        r#"agents:
  "*":
    - text: "Reading a.log."
      tool_calls: [{name: ReadFile, input: {path: a.log}}]
    - text: "Reading b.log."
      tool_calls: [{name: ReadFile, input: {path: b.log}}]
    - text: "Writing the summaries."
      tool_calls:
        - {name: WriteFile, input: {path: a.summary, content: "400 lines, no errors\n"}}
        - {name: WriteFile, input: {path: b.summary, content: "400 lines, no errors\n"}}
    - text: "Done: both logs have 400 lines and no errors."
"#,
        false,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("project");
    git_repo(&cwd, &[("a.log", job_log()), ("b.log", job_log())]);
    let server = MockServer::with_script(solo_script).await.unwrap();
    let result = lead_run(
        &dir.path().join("home"),
        &cwd,
        &server.base_url(Protocol::Anthropic),
        &[],
        "Summarise a.log and b.log into a.summary and b.summary.",
        &[],
    )
    .await;
    assert!(
        cwd.join("b.summary").is_file(),
        "the solo agent did not write b.summary"
    );
    let spend = Spend::of(&server.requests());
    assert_result_usage(&result, &spend);
    spend
}

/// Section 4: input tokens of a scripted two-task job (summarise `a.log` and `b.log`,
/// 16 KB each, in a git repository) done by a `roo-lead -p` with two in-process
/// teammates spawned by its Agent tool, and by one agent alone; per agent, the prompt
/// tokens, how many the cache model reports read and written, and what Anthropic would
/// bill for them.
async fn tokens_section() {
    let solo = solo_job().await;
    println!(
        "## Input tokens of a two-task job (mock estimate: ceil(request bytes / 4); prompt cache as Anthropic reports it)"
    );
    println!(
        "billed = input + 1.25 x cache write + 0.1 x cache read; ratios: prompt / solo prompt, billed / solo billed, billed / solo prompt"
    );
    println!(
        "{:<24}{:>4} {:>8} {:>8} {:>8} {:>8} {:>9} {:>7} {:>7} {:>7}",
        "", "req", "prompt", "input", "read", "write", "billed", "p/p", "b/b", "b/p"
    );
    println!("{}", solo.line("one agent alone", &solo));
    for (shape, label) in [
        (Shape::Messages, "claim, tell by message"),
        (
            Shape::Tasks,
            "task given at spawn, report in idle notification",
        ),
    ] {
        for delay_ms in [0, 500] {
            let [lead, alice, bob] = team_job(shape, delay_ms).await;
            println!("{label}; the lead answers after {delay_ms} ms");
            println!("{}", lead.line("  lead", &solo));
            println!("{}", alice.line("  alice", &solo));
            println!("{}", bob.line("  bob", &solo));
            println!("{}", lead.plus(&alice).plus(&bob).line("  team", &solo));
        }
    }
}

/// A repository of `files` small files (100 per directory) with one commit, and
/// README.md.
fn big_repo(dir: &std::path::Path, files: usize) {
    for i in 0..files {
        let sub = dir.join(format!("src/d{:03}", i / 100));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("f{i:05}.txt")), format!("file {i}\n")).unwrap();
    }
    git_repo(dir, &[("README.md", "# bench\n".into())]);
}

/// Section 6 (issue 18): a teammate's checkout in a repository of 10,000 files. First
/// the checkout alone, alternating: `git worktree add -b` (the design before issue 18,
/// its git command only) and `LeadRepo::add_worktree` (discovery, `git clone --shared
/// --no-checkout`, identity, `checkout -B`, the lead's branch). Then the lead's Agent
/// call → the teammate's first request through `roo-lead -p` in a copy of the
/// repository (the spawner checks the clone out while the teammate starts).
async fn git_section(n: usize) {
    use roo_team::worktree::{Discovered, Git, LeadRepo};
    const FILES: usize = 10_000;
    let template = tempfile::tempdir().unwrap();
    let repo = template.path().join("project");
    big_repo(&repo, FILES);
    let git = Git::new().env("GIT_CONFIG_NOSYSTEM", "1");
    let team = name("bench");
    let mut figures: [Vec<Duration>; 2] = Default::default();
    for i in 0..=n {
        for clone in [i % 2 == 0, i % 2 != 0] {
            let member = name(&format!("m{i}{}", if clone { "c" } else { "w" }));
            let path = repo.join(format!(".roocode/worktrees/bench+{member}"));
            let start = Instant::now();
            if clone {
                let Discovered::Repo(lead) = LeadRepo::discover(&repo, &git).unwrap() else {
                    panic!("not a repository");
                };
                lead.add_worktree(&team, &member).unwrap();
            } else {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                let out = Command::new("git")
                    .args(["worktree", "add", "-q", "-b"])
                    .arg(format!("roo/bench/{member}"))
                    .arg(&path)
                    .arg("HEAD")
                    .current_dir(&repo)
                    .env("GIT_CONFIG_NOSYSTEM", "1")
                    .output()
                    .unwrap();
                assert!(out.status.success(), "git worktree add: {out:?}");
            }
            let took = start.elapsed();
            assert!(path.join("README.md").is_file());
            if i > 0 {
                figures[usize::from(clone)].push(took);
            }
            std::fs::remove_dir_all(&path).unwrap();
        }
    }
    let [worktree, clone] = figures;
    println!("## a teammate's checkout, repository of {FILES} files");
    println!(
        "git worktree add -b (before)      {}",
        Stats(worktree).line()
    );
    println!("LeadRepo::add_worktree (clone)    {}", Stats(clone).line());
    let mut first = Vec::new();
    let mut returned = Vec::new();
    for i in 0..=n {
        let [alice, back, _] = agent_spawn_in(Some(RepoKind::Copy(&repo)), None).await;
        if i > 0 {
            first.push(alice);
            returned.push(back);
        }
    }
    println!("## roo-lead -p in that repository: Agent call → …");
    println!("  teammate's first request  {}", Stats(first).line());
    println!("  lead's next request       {}", Stats(returned).line());
}

/// Section 7 (issue 29): `LeadRepo::merge_checked` (TeamMerge without `protected`) of a normal teammate branch of 50 files (25
/// changed, 25 added in a new directory) into a repository of 2,000 files, timed from the
/// call to its return (fetch from the clone, the checks, `git merge --no-ff`). Each round
/// makes a fresh clone and commit first, untimed. A teammate's identity comes from the
/// lead's repository config.
fn merge_section(n: usize) {
    use roo_team::worktree::{Discovered, Git, LeadRepo, MergeOutcome};
    const FILES: usize = 2_000;
    const CHANGED: usize = 50;
    let template = tempfile::tempdir().unwrap();
    let repo = template.path().join("project");
    big_repo(&repo, FILES);
    for key in [
        ["user.name", "Bench"],
        ["user.email", "bench@example.invalid"],
    ] {
        let out = Command::new("git")
            .args(["config", key[0], key[1]])
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    let git = Git::new().env("GIT_CONFIG_NOSYSTEM", "1");
    let team = name("bench");
    let (mut took, mut cpu) = (Vec::new(), 0);
    for i in 0..=n {
        let member = name(&format!("m{i}"));
        let Discovered::Repo(lead) = LeadRepo::discover(&repo, &git).unwrap() else {
            panic!("not a repository");
        };
        let clone = lead.add_worktree(&team, &member).unwrap().path;
        for f in 0..CHANGED / 2 {
            let k = (i * 97 + f * 31) % FILES;
            let file = clone.join(format!("src/d{:03}/f{k:05}.txt", k / 100));
            std::fs::write(file, format!("file {k}, round {i}\n")).unwrap();
        }
        let new = clone.join(format!("added/r{i}"));
        std::fs::create_dir_all(&new).unwrap();
        for f in 0..CHANGED - CHANGED / 2 {
            std::fs::write(new.join(format!("n{f}.txt")), format!("new {f}\n")).unwrap();
        }
        for args in [&["add", "-A"][..], &["commit", "-q", "-m", "work"]] {
            let out = Command::new("git")
                .args(args)
                .current_dir(&clone)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        }
        let (start, cpu_start) = (Instant::now(), cpu_ticks());
        // As TeamMerge calls it without `protected`.
        let outcome = lead.merge_checked(&team, &member, false).unwrap();
        let (elapsed, cpu_elapsed) = (start.elapsed(), cpu_ticks() - cpu_start);
        assert!(
            matches!(outcome, MergeOutcome::Merged { .. }),
            "{outcome:?}"
        );
        if i > 0 {
            took.push(elapsed);
            cpu += cpu_elapsed;
        }
        std::fs::remove_dir_all(&clone).unwrap();
    }
    let per_merge = cpu as f64 * 1000.0 / clock_ticks_per_second() / n as f64;
    println!("## TeamMerge of a {CHANGED}-file branch, repository of {FILES} files");
    println!("LeadRepo::merge_checked           {}", Stats(took).line());
    println!("  CPU (this process and the git it ran, summed) {per_merge:.1} ms per merge");
}

/// User and system CPU time of this process and of its waited-for children, in clock ticks
/// (`/proc/self/stat` fields 14 to 17): what a merge costs, less bent by other load than
/// the wall clock.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    // Fields from 3 (state) on; utime is field 14.
    after
        .split(' ')
        .skip(11)
        .take(4)
        .map(|f| f.parse::<u64>().unwrap())
        .sum()
}

fn clock_ticks_per_second() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    if args.get(1).map(String::as_str) == Some("--rss-child") {
        return runtime.block_on(rss_child(&args[2..]));
    }
    if args.get(1).map(String::as_str) == Some("--pane-child") {
        return runtime.block_on(panes::pane_child(args[2].parse().unwrap()));
    }
    if args.get(1).map(String::as_str) == Some("--startup-child") {
        return runtime.block_on(startup::startup_child(args[2].parse().unwrap()));
    }
    // `cargo bench` passes `--bench`; anything else is ignored.
    let quick = std::env::var_os("ROO_BENCH_QUICK").is_some();
    let only = std::env::var("ROO_BENCH_ONLY").ok();
    let run = |section: &str| only.as_deref().is_none_or(|o| o == section);
    let n = if quick { 5 } else { 25 };
    println!("# Team runtime benchmark (n = {n} per figure)");
    println!("load average at start: {}", load_average());
    runtime.block_on(async {
        if run("spawn") {
            spawn_section(n).await;
            println!("load average: {}", load_average());
            agent_section(n).await;
            println!("load average: {}", load_average());
        }
        if run("delivery") {
            delivery_section(n).await;
            println!("load average: {}", load_average());
        }
        if run("tokens") {
            tokens_section().await;
            println!("load average: {}", load_average());
        }
        if run("memory") {
            memory_section(if quick { 1 } else { 3 }).await;
            println!("load average: {}", load_average());
        }
        if run("panes") {
            panes::pane_section(n).await;
            println!("load average: {}", load_average());
        }
        if run("git") {
            git_section(n).await;
            println!("load average: {}", load_average());
        }
        if run("merge") {
            merge_section(if quick { 5 } else { 40 });
            println!("load average: {}", load_average());
        }
        if run("startup") {
            startup::startup_section(n).await;
            println!("load average: {}", load_average());
        }
        if run("budget") {
            budget::budget_section(n).await;
            println!("load average: {}", load_average());
        }
    });
}
