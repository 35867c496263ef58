//! Section 5 of the team benchmark: pane teammates in a private tmux server
//! (`tmux -L roo-bench-<pid> -f /dev/null`, killed at the end).
//!
//! It runs in a child process (`--pane-child N`) whose environment holds the model's key,
//! as a lead's does: the executor hands that environment to each worker.
//!
//! - the lead's Agent tool with `--teammate-mode tmux` (a real `roo-lead -p` given the
//!   server's `TMUX`/`TMUX_PANE`): the arrival of the lead's request answered with the
//!   Agent call → the pane teammate's first request, in a git repository and outside one;
//! - `TmuxExecutor::spawn` called → the pane teammate's first request;
//! - delivery to an idle pane teammate: `Mailbox::send` plus the executor's nudge (what
//!   the lead's SendMessage does) → its next request; to a busy one: its command's end →
//!   its next request, with the message and without;
//! - the idle RSS of the pane's `roo-worker`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use roo_llm::mock_server::{MockServer, Protocol};
use roo_team::backend::{Launch, Placement, Socket, TeammateExecutor, Tmux, TmuxExecutor};
use roo_team::{AgentSettings, Identity, Trust};

use super::{
    Clock, MODEL, Stats, World, agent_spawn_once, bin, busy_command, command_end, eventually,
    is_idle, name, request_count, rss_kib, script, wait_request,
};

/// A private tmux server with one window; killed on drop.
pub(crate) struct PrivateTmux {
    socket: String,
    socket_path: String,
    pane: String,
}

impl PrivateTmux {
    pub(crate) fn start() -> PrivateTmux {
        let socket = format!("roo-bench-{}", std::process::id());
        let tmux = |args: &[&str]| {
            let out = Command::new("tmux")
                .args(["-L", &socket, "-f", "/dev/null"])
                .args(args)
                .output()
                .expect("tmux runs");
            assert!(out.status.success(), "tmux {args:?}: {out:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        tmux(&[
            "new-session",
            "-d",
            "-s",
            "bench",
            "-x",
            "200",
            "-y",
            "50",
            "--",
            "sleep",
            "1000000",
        ]);
        let socket_path = tmux(&["display-message", "-p", "-t", "bench", "#{socket_path}"]);
        let pane = tmux(&["display-message", "-p", "-t", "bench", "#{pane_id}"]);
        PrivateTmux {
            socket,
            socket_path,
            pane,
        }
    }

    /// What a process inside that pane has: `TMUX` and `TMUX_PANE`.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("TMUX", format!("{},0,0", self.socket_path)),
            ("TMUX_PANE", self.pane.clone()),
        ]
    }

    fn executor(&self, world: &World) -> TmuxExecutor {
        TmuxExecutor::new(
            Tmux::new("tmux", Some(Socket::Name(self.socket.clone()))).with_config("/dev/null"),
            Placement::Window {
                lead_pane: self.pane.clone(),
            },
            bin("roo-worker"),
            world.home.root(),
        )
    }
}

impl Drop for PrivateTmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .stderr(Stdio::null())
            .status();
    }
}

/// Runs the section in a child process that holds the key (see the module docs).
pub(crate) async fn pane_section(n: usize) {
    let status = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--pane-child", &n.to_string()])
        .env("ANTHROPIC_API_KEY", "bench-key")
        .stdin(Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.success(), "the --pane-child run failed");
}

/// The `--pane-child N` process.
pub(crate) async fn pane_child(n: usize) {
    let tmux = PrivateTmux::start();
    agent_in_panes(n, &tmux).await;
    executor_and_delivery(n, &tmux).await;
}

async fn agent_in_panes(n: usize, tmux: &PrivateTmux) {
    let env = tmux.env();
    let mut figures: [[Vec<Duration>; 3]; 2] = Default::default();
    for i in 0..=n {
        for git in [i % 2 == 0, i % 2 != 0] {
            let spans = agent_spawn_once(git, Some(&env)).await;
            if i > 0 {
                for (k, span) in spans.into_iter().enumerate() {
                    figures[usize::from(git)][k].push(span);
                }
            }
        }
    }
    println!(
        "## roo-lead -p --teammate-mode tmux: Agent call (arrival of the lead's request answered with it) → …"
    );
    for (git, label) in [(1, "git repository (worktree)"), (0, "no repository")] {
        let [alice, returned, _] = std::mem::take(&mut figures[git]);
        println!("{label}");
        println!("  pane teammate's first request  {}", Stats(alice).line());
        println!(
            "  lead's next request            {}",
            Stats(returned).line()
        );
    }
}

fn launch(world: &World, url: &str, who: &str, prompt: &str) -> Launch {
    let mut settings = AgentSettings::new(
        Identity::teammate(name(who), world.team.name().clone(), name("lead")),
        world.home.root().to_path_buf(),
    );
    settings.llm.provider = Some("anthropic".into());
    settings.llm.model = Some(MODEL.into());
    settings.llm.base_url = Some(url.into());
    settings.permission_mode = Some(roo_agent::permissions::PermissionMode::BypassPermissions);
    settings.trust = Trust::Granted;
    Launch {
        team: world.team.clone(),
        name: name(who),
        lead: name("lead"),
        prompt: prompt.into(),
        settings,
        plan_mode_required: false,
        mode_after_plan: roo_agent::permissions::PermissionMode::BypassPermissions,
        agent_type: None,
        model: None,
        work_dir: world.cwd(who),
        color: None,
        tools: Vec::new(),
        lead_key: None,
        member_login: None,
    }
}

async fn executor_and_delivery(n: usize, tmux: &PrivateTmux) {
    let world = World::new("panes");
    let mut busy = String::new();
    for i in 0..n {
        for variant in ["msg", "none"] {
            let tag = format!("pane-{i}-{variant}");
            busy.push_str(&format!(
                "    - when: {{last_user_contains: \"go-{tag}\"}}\n      text: working\n      tool_calls:\n        - {{name: Bash, input: {{command: \"{}\"}}}}\n",
                busy_command(&tag)
            ));
        }
    }
    let server = MockServer::with_script(script(12 * n + 16, &busy))
        .await
        .unwrap();
    let url = server.base_url(Protocol::Anthropic);
    let executor = tmux.executor(&world);
    let lead = name("lead");
    let mailbox = world.team.mailbox();
    let mut known = 0;

    // Spawn: each round a fresh teammate, closed again after its first request.
    let mut spawn = Vec::new();
    for i in 0..=n {
        let who = format!("s{i}");
        let marker = format!("pane-spawn-{i}");
        let start = request_count(&server, &mut known);
        let t0 = Instant::now();
        executor
            .spawn(launch(&world, &url, &who, &marker))
            .await
            .unwrap();
        let (_, at) = wait_request(&server, start, &marker).await;
        if i > 0 {
            spawn.push(at - t0);
        }
        eventually("idle", || is_idle(&world.team, &who)).await;
        executor.kill(&name(&who)).await.unwrap();
    }
    println!("## TmuxExecutor::spawn called → the pane teammate's first request");
    println!("pane teammate   {}", Stats(spawn).line());

    // Delivery and memory: one pane teammate.
    let who = "pane";
    let start = request_count(&server, &mut known);
    executor
        .spawn(launch(&world, &url, who, "start: answer ok"))
        .await
        .unwrap();
    wait_request(&server, start, "start: answer ok").await;
    let settle = || tokio::time::sleep(Duration::from_millis(100));
    let (mut idle, mut after_end, mut baseline) = (Vec::new(), Vec::new(), Vec::new());
    let mut rss = Vec::new();
    let pid = world
        .team
        .config()
        .unwrap()
        .member(who)
        .and_then(|m| m.pid)
        .unwrap();
    for i in 0..n {
        eventually("idle", || is_idle(&world.team, who)).await;
        settle().await;
        rss.push(rss_kib(pid));
        let marker = format!("idle-pane-{i}");
        let start = request_count(&server, &mut known);
        let t0 = Instant::now();
        mailbox
            .send(&lead, who, roo_store::Outgoing::text(&marker, "probe"))
            .unwrap();
        executor.wake(&name(who)).unwrap();
        let (_, at) = wait_request(&server, start, &marker).await;
        idle.push(at - t0);

        let variants = if i % 2 == 0 {
            ["msg", "none"]
        } else {
            ["none", "msg"]
        };
        for variant in variants {
            eventually("idle", || is_idle(&world.team, who)).await;
            settle().await;
            let tag = format!("pane-{i}-{variant}");
            let clock = Clock::now();
            let start = request_count(&server, &mut known);
            mailbox
                .send(
                    &lead,
                    who,
                    roo_store::Outgoing::text(format!("go-{tag}"), "go"),
                )
                .unwrap();
            executor.wake(&name(who)).unwrap();
            let started = world
                .root
                .join("work")
                .join(who)
                .join(format!(".started-{tag}"));
            eventually("the busy command to start", || started.exists()).await;
            let (index, at) = if variant == "msg" {
                let marker = format!("busy-{tag}");
                mailbox
                    .send(&lead, who, roo_store::Outgoing::text(&marker, "probe"))
                    .unwrap();
                executor.wake(&name(who)).unwrap();
                wait_request(&server, start, &marker).await
            } else {
                wait_request(&server, start + 1, "").await
            };
            let request = &server.requests_since(index)[0];
            let span = Duration::from_nanos(
                u64::try_from(clock.wall_ns(at) - command_end(request)).unwrap_or(0),
            );
            if variant == "msg" {
                after_end.push(span);
            } else {
                baseline.push(span);
            }
        }
    }
    println!("## Delivery to a pane teammate: Mailbox::send + nudge → its next request");
    println!(
        "pane idle                                   {}",
        Stats(idle).line()
    );
    println!(
        "pane busy, command end → request, with message    {}",
        Stats(after_end).line()
    );
    println!(
        "pane busy, command end → request, without message {}",
        Stats(baseline).line()
    );
    rss.sort_unstable();
    println!(
        "## pane teammate's roo-worker, idle: VmRSS median {:.1} MiB (min {:.1}, max {:.1})",
        rss[rss.len() / 2] as f64 / 1024.0,
        rss[0] as f64 / 1024.0,
        rss[rss.len() - 1] as f64 / 1024.0
    );
    executor.shutdown_all(false).await;
}
