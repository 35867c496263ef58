//! Issue 31's done criterion for the team view: a real lead (`roo-lead -p`, scripted
//! model) in a private tmux (`tmux -L roo-test-… -f /dev/null`) drives a two-teammate
//! team in panes; mid-run, while both teammates hold their tasks (their commands wait for
//! a file the test creates), `roo-mail team top --once` shows each member with its task
//! and state, the task that waits on both shown blocked, and a cost per member; the live
//! view in a terminal of its own follows a member and quits on `q`; after the run the
//! team's event log holds what the run did, in order, consistent with the final state.
//! The same on the PostgreSQL store (skipped without `ROO_TEST_PG_DSN`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_store::{Name, PgStore, RooHome, Team};
use roo_tests::{
    TempDir, TestCommand, Tmux, bin, child_of, path_with_bins, process_gone, wait_until,
};

struct World {
    root: TempDir,
    /// The PostgreSQL store's URL; `None`: files.
    url: Option<String>,
    /// The file the teammates' commands wait for.
    go: PathBuf,
}

impl World {
    fn new(url: Option<String>) -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("roo")).unwrap();
        root.write("project/README.md", "# demo\n");
        roo_tests::git_repo_with_identity(&root.join("project"));
        // The sandbox leaves the system temp dir readable to the teammates' commands.
        let go = std::env::temp_dir().join(format!(
            "roo-top-go-{}-{}",
            std::process::id(),
            root.path().file_name().unwrap().to_string_lossy()
        ));
        let _ = std::fs::remove_file(&go);
        World { root, url, go }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("ROO_HOME", self.root.join("roo").display().to_string()),
            ("HOME", self.root.join("home").display().to_string()),
            ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
            ("NO_COLOR", "1".to_string()),
        ];
        if let Some(url) = &self.url {
            env.push(("ROO_STORE", url.clone()));
        }
        env
    }

    fn team(&self) -> Option<Team> {
        let home = RooHome::new(self.root.join("roo"));
        let home = match &self.url {
            Some(url) => home.with_store(PgStore::connect(url).unwrap()),
            None => home,
        };
        Team::open(&home, Name::parse_as("team", "crew").unwrap()).ok()
    }

    fn roo_mail(&self, args: &[&str]) -> TestCommand {
        let mut cmd = TestCommand::new(bin("roo-mail")).args(args);
        for (k, v) in self.env() {
            cmd = cmd.env(k, v);
        }
        cmd.env_remove("ROO_TEAM").env_remove("ROO_AGENT_NAME")
    }

    fn top_once(&self) -> String {
        let out = self.top_once_run();
        out.assert_ok();
        out.stdout()
    }

    fn top_once_run(&self) -> roo_tests::RunOutput {
        self.roo_mail(&["team", "top", "--team", "crew", "--once"])
            .env("COLUMNS", "100")
            .env("LINES", "30")
            .run()
    }

    fn output(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            std::fs::read_to_string(self.root.join("lead.out")).unwrap_or_default(),
            std::fs::read_to_string(self.root.join("lead.err")).unwrap_or_default(),
        )
    }

    /// The scripted team: the lead creates three tasks (the third waits on the other
    /// two), spawns alice and bob in panes; each claims its task in one turn, then runs a
    /// command that waits for the test's file, then completes the task and reports.
    fn script(&self) -> PathBuf {
        let wait = format!(
            "until [ -f '{}' ]; do sleep 0.05; done; echo ok",
            self.go.display()
        );
        let teammate = |who: &str, id: &str, file: &str| {
            format!(
                r#"  {who}:
    - tool_calls:
        - {{name: TaskUpdate, input: {{id: "{id}", owner: {who}}}}}
    - tool_calls:
        - {{name: Bash, input: {{command: "{wait} && echo {who} > {file}"}}}}
    - tool_calls:
        - {{name: TaskUpdate, input: {{id: "{id}", status: completed}}}}
        - {{name: SendMessage, input: {{to: lead, summary: "{file} written", message: "{file} is written"}}}}
    - text: "Task {id} done."
    - text: "Done."
"#
            )
        };
        let script = format!(
            r#"agents:
  lead:
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew, description: "two files"}}}}
        - {{name: TaskCreate, input: {{subject: "Write a.txt"}}}}
        - {{name: TaskCreate, input: {{subject: "Write b.txt"}}}}
        - {{name: TaskCreate, input: {{subject: "Check both files", blocked_by: ["1", "2"]}}}}
    - tool_calls:
        - {{name: Agent, input: {{name: alice, description: "writes a", prompt: "Claim task 1 and write a.txt."}}}}
        - {{name: Agent, input: {{name: bob, description: "writes b", prompt: "Claim task 2 and write b.txt."}}}}
    - text: "Waiting for my teammates."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
{}{}"#,
            teammate("alice", "1", "a.txt"),
            teammate("bob", "2", "b.txt")
        );
        self.root.write("script.yaml", script)
    }

    /// Starts the lead in a private tmux server; it writes its exit status to a file.
    fn start_lead(&self) -> Tmux {
        let script = self.script();
        // A model with a known price, so each member's spend has a cost.
        let run = self.root.write(
            "run-lead.sh",
            format!(
                "PATH='{path}'\nexport PATH\n\
                 '{lead}' -p 'Write a.txt and b.txt with two pane teammates.' \
                 --provider script --script '{script}' --model claude-sonnet-4-5 \
                 --permission-mode bypassPermissions --output-format stream-json \
                 --teammate-mode tmux --team-timeout 120 \
                 > '{out}' 2> '{err}'\necho $? > '{code}.part' && mv '{code}.part' '{code}'\n",
                path = path_with_bins(),
                lead = bin("roo-lead").display(),
                script = script.display(),
                out = self.root.join("lead.out").display(),
                err = self.root.join("lead.err").display(),
                code = self.root.join("lead.code").display(),
            ),
        );
        Tmux::start(
            &self.root.join("project"),
            &self.env(),
            &format!("sh '{}'", run.display()),
        )
    }

    fn lead_exit(&self, tmux: &Tmux) -> i32 {
        wait_until(
            "the lead to exit",
            Duration::from_secs(120),
            || {
                std::fs::read_to_string(self.root.join("lead.code"))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            },
            || format!("{}\n{}", tmux.all_screens(), self.output()),
        )
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.go);
    }
}

/// The line of `frame` that starts (after the marker gutter) with `word`.
fn line_of<'a>(frame: &'a str, word: &str) -> &'a str {
    frame
        .lines()
        .find(|l| l.trim_start().starts_with(word))
        .unwrap_or_else(|| panic!("no line for {word}:\n{frame}"))
}

/// Mid-run: both teammates on their tasks, with a cost; the third task blocked.
fn check_top_mid_run(world: &World, tmux: &Tmux) -> String {
    let frame = wait_until(
        "team top to show alice and bob busy on their tasks, each with a cost",
        Duration::from_secs(60),
        || {
            // Until the lead has created the team, there is nothing to show.
            let out = world.top_once_run();
            let frame = (out.code() == 0).then(|| out.stdout())?;
            let ok = |who: &str, task: &str| {
                frame.lines().any(|l| {
                    l.trim_start().starts_with(who)
                        && l.contains("busy")
                        && l.contains(task)
                        && l.contains('$')
                })
            };
            (ok("alice", "#1 Write a.txt") && ok("bob", "#2 Write b.txt")).then_some(frame)
        },
        || {
            let out = world.top_once_run();
            format!(
                "{}{}\n{}\n{}",
                out.stdout(),
                out.stderr(),
                tmux.all_screens(),
                world.output()
            )
        },
    );
    assert!(!frame.contains('\x1b'), "plain text: {frame:?}");
    for l in frame.lines() {
        assert!(l.chars().count() <= 100, "wider than asked: {l:?}");
    }
    let check = line_of(&frame, "#3");
    assert!(
        check.contains("blocked") && check.contains("waits on #1, #2"),
        "{frame}"
    );
    assert!(line_of(&frame, "#1").contains("in progress"), "{frame}");
    assert!(line_of(&frame, "alice").contains("tmux %"), "{frame}");
    frame
}

/// Selects member `who` in a live view: as many `j` as rows above it (the view starts on
/// the first; the roster's order is the order the teammates were spawned in, which the
/// lead's parallel spawns do not fix), then waits for the marker on its row.
fn select(screen: &dyn Fn() -> String, keys: &dyn Fn(&[&str]), who: &str) {
    let shown = screen();
    let rows: Vec<String> = shown
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("MEMBER"))
        .skip(1)
        .take_while(|l| !l.starts_with("TASKS"))
        .filter_map(|l| l.split_whitespace().find(|w| *w != ">").map(str::to_owned))
        .collect();
    let index = rows
        .iter()
        .position(|r| r == who)
        .unwrap_or_else(|| panic!("no {who} in {rows:?}:\n{shown}"));
    keys(&vec!["j"; index]);
    let marked = format!("> {who} ");
    wait_until(
        &format!("{who} selected"),
        Duration::from_secs(10),
        || {
            screen()
                .lines()
                .any(|l| l.starts_with(&marked))
                .then_some(())
        },
        screen,
    );
}

/// The live view in a terminal of its own: it shows the team, follows bob, and `q`
/// ends it with the terminal given back.
fn check_live_view(world: &World) {
    let view = Tmux::start(
        &world.root.join("project"),
        &world.env(),
        // The status goes to a file: what is printed after the alternate screen is left
        // is not kept on the screen of a pane that then dies.
        &format!(
            "'{}' team top --team crew; echo $? > '{}'",
            bin("roo-mail").display(),
            world.root.join("view.code").display()
        ),
    );
    view.wait_for("the live view", |s| {
        s.contains("MEMBER") && s.contains("alice") && s.contains("q quit")
    });
    select(&|| view.screen(), &|k| view.keys(k), "bob");
    view.keys(&["Enter"]);
    view.wait_for("bob followed", |s| s.contains("FOLLOWING bob"));
    view.keys(&["Escape"]);
    view.wait_for("the board again", |s| s.contains("TASKS"));
    view.keys(&["q"]);
    let code = wait_until(
        "the view to exit",
        Duration::from_secs(10),
        // The shell creates the file before it writes the status: wait for the line.
        || {
            std::fs::read_to_string(world.root.join("view.code"))
                .ok()
                .filter(|code| code.ends_with('\n'))
        },
        || view.screen(),
    );
    assert_eq!(code.trim(), "0", "{}", view.screen());
    let after = view.screen();
    assert!(
        !after.contains("MEMBER"),
        "the alternate screen was left: {after}"
    );
}

/// `o` in a view running in the lead's tmux makes the selected teammate's pane the
/// active one.
fn check_open_pane(world: &World, tmux: &Tmux) {
    let env: String = world
        .env()
        .iter()
        .map(|(k, v)| format!("{k}='{v}' "))
        .collect();
    tmux.run(&[
        "new-window",
        "-d",
        "-n",
        "view",
        &format!(
            "env {env}'{}' team top --team crew",
            bin("roo-mail").display()
        ),
    ]);
    let screen = || tmux.run(&["capture-pane", "-p", "-t", "main:view"]);
    let alice = world.team().unwrap().config().unwrap();
    let alice = alice.member("alice").unwrap().pane_id.clone().unwrap();
    let active = || {
        tmux.run(&["display-message", "-p", "-t", &alice, "#{pane_active}"])
            .trim()
            .to_owned()
    };
    assert_eq!(active(), "0", "the lead's pane is the active one at first");
    wait_until(
        "the view in the lead's tmux",
        Duration::from_secs(20),
        || screen().contains("q quit").then_some(()),
        screen,
    );
    let keys = |k: &[&str]| {
        let mut args = vec!["send-keys", "-t", "main:view"];
        args.extend_from_slice(k);
        tmux.run(&args);
    };
    select(&screen, &keys, "alice");
    keys(&["o"]);
    wait_until(
        "alice's pane switched to",
        Duration::from_secs(20),
        || (screen().contains("switched to alice's pane") && active() == "1").then_some(()),
        || format!("{}\nactive: {}", screen(), active()),
    );
    tmux.run(&["send-keys", "-t", "main:view", "q"]);
}

fn run_team(world: &World) {
    let tmux = world.start_lead();
    check_top_mid_run(world, &tmux);
    check_live_view(world);
    check_open_pane(world, &tmux);
    std::fs::write(&world.go, "go").unwrap();
    let code = world.lead_exit(&tmux);
    assert_eq!(code, 0, "{}", world.output());
    // After the run: both tasks done, so the check task is no longer blocked.
    let frame = world.top_once();
    assert!(line_of(&frame, "#1").contains("done"), "{frame}");
    assert!(line_of(&frame, "#2").contains("done"), "{frame}");
    assert!(line_of(&frame, "#3").contains("pending"), "{frame}");
    let team = world.team().expect("the team is kept after the run");
    let tasks = team.tasks().list(&Default::default()).unwrap();
    assert_eq!(tasks.len(), 3);
    check_log(world);
}

/// `roo-mail log --json` after the run: every kind of change the run made, in order
/// (seq strictly increasing, times never going back), consistent with the final state.
fn check_log(world: &World) {
    let out = world.roo_mail(&["log", "--team", "crew", "--json"]).run();
    out.assert_ok();
    let events: Vec<serde_json::Value> = out
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let shown = || {
        events
            .iter()
            .map(|e| format!("{} {} {}", e["seq"], e["actor"], e["kind"]))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // In order: seq 1, 2, 3, … and the store's times never going back.
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "{}", shown());
        if i > 0 {
            assert!(
                events[i - 1]["time"].as_str() <= e["time"].as_str(),
                "{}",
                shown()
            );
        }
    }
    let seq_of = |what: &str, test: &dyn Fn(&serde_json::Value) -> bool| -> u64 {
        events
            .iter()
            .find(|e| test(e))
            .and_then(|e| e["seq"].as_u64())
            .unwrap_or_else(|| panic!("no event {what} in the log:\n{}", shown()))
    };
    let kind = |e: &serde_json::Value, k: &str| e["kind"] == k;
    assert!(kind(&events[0], "team_created") && events[0]["actor"] == "lead");
    for (id, who, subject) in [
        ("1", "alice", "Write a.txt"),
        ("2", "bob", "Write b.txt"),
        ("3", "", "Check both files"),
    ] {
        let created = seq_of(&format!("task {id} created"), &|e| {
            kind(e, "task_created") && e["task"] == id && e["subject"] == subject
        });
        if who.is_empty() {
            // The check task waited on both: nobody claimed it.
            assert!(
                !events
                    .iter()
                    .any(|e| e["task"] == id && !kind(e, "task_created")),
                "{}",
                shown()
            );
            continue;
        }
        let joined = seq_of(&format!("{who} joined"), &|e| {
            kind(e, "join") && e["member"] == who
        });
        let claimed = seq_of(&format!("task {id} claimed by {who}"), &|e| {
            kind(e, "task_claimed") && e["task"] == id && e["owner"] == who && e["actor"] == who
        });
        let completed = seq_of(&format!("task {id} completed"), &|e| {
            kind(e, "task_completed") && e["task"] == id
        });
        assert!(
            created < claimed && joined < claimed && claimed < completed,
            "{}",
            shown()
        );
        let sent = seq_of(&format!("{who}'s report"), &|e| {
            kind(e, "message_sent") && e["from"] == who && e["to"] == "lead"
        });
        assert!(completed < sent, "{}", shown());
    }
    // Consistent with the final state: what the log last says of each task is its state.
    let team = world.team().unwrap();
    for task in team.tasks().list(&Default::default()).unwrap() {
        let last = events
            .iter()
            .rev()
            .find(|e| e["task"] == task.id.as_str())
            .unwrap();
        let expected = match task.status {
            roo_store::TaskStatus::Completed => "task_completed",
            roo_store::TaskStatus::InProgress => "task_claimed",
            roo_store::TaskStatus::Pending => "task_created",
        };
        assert_eq!(last["kind"], expected, "task {}: {}", task.id, shown());
    }
    let config = team.config().unwrap();
    for e in events.iter().filter(|e| kind(e, "join")) {
        let member = e["member"].as_str().unwrap();
        assert!(
            config.member(member).is_some(),
            "{member} joined but is not in the roster"
        );
    }
    // Delivered messages are sent ones, delivered after they were sent.
    for e in events.iter().filter(|e| kind(e, "message_delivered")) {
        for id in e["ids"].as_array().unwrap() {
            let sent = seq_of(&format!("message {id} sent"), &|s| {
                kind(s, "message_sent") && &s["id"] == id
            });
            assert!(sent < e["seq"].as_u64().unwrap(), "{}", shown());
        }
    }
    // Never a body: only ids and summaries.
    assert!(!out.stdout().contains("is written\""), "{}", out.stdout());
}

#[test]
fn team_top_shows_a_pane_team_mid_run_with_its_blocked_task_and_costs() {
    let world = World::new(None);
    run_team(&world);
}

#[test]
fn team_top_shows_a_pane_team_on_the_postgresql_store() {
    let Some(url) = roo_tests::pg::store_url() else {
        return;
    };
    let world = World::new(Some(url));
    run_team(&world);
}

#[test]
fn the_live_view_gives_the_terminal_back_on_sigterm_and_sighup() {
    let world = World::new(None);
    world
        .roo_mail(&["team", "create", "--team", "crew", "--lead", "lead"])
        .args(["--member", "alice"])
        .run()
        .assert_ok();
    for (signal, name) in [
        (nix::sys::signal::Signal::SIGTERM, "term"),
        (nix::sys::signal::Signal::SIGHUP, "hup"),
    ] {
        let code = world.root.join(format!("{name}.code"));
        let stty = world.root.join(format!("{name}.stty"));
        // What the terminal's modes are once the view is gone: raw mode would show
        // `-icanon -echo`.
        let view = Tmux::start(
            &world.root.join("project"),
            &world.env(),
            &format!(
                "'{}' team top --team crew; echo $? > '{}'; stty -a > '{}'",
                bin("roo-mail").display(),
                code.display(),
                stty.display()
            ),
        );
        view.wait_for("the live view", |s| {
            s.contains("MEMBER") && s.contains("alice")
        });
        let shell = view.panes()[0].pid;
        let pid = wait_until(
            "the view's process",
            Duration::from_secs(10),
            || child_of(shell, "team top"),
            || view.screen(),
        );
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).unwrap();
        let modes = wait_until(
            "the view to exit and the modes to be read",
            Duration::from_secs(10),
            || {
                std::fs::read_to_string(&stty)
                    .ok()
                    .filter(|s| !s.is_empty())
            },
            || view.screen(),
        );
        assert_eq!(
            std::fs::read_to_string(&code).unwrap().trim(),
            "0",
            "{name}"
        );
        assert!(
            modes.contains(" icanon") && modes.contains(" echo "),
            "{name}: the terminal stayed raw: {modes}"
        );
    }
}

/// `roo-mail team top --team crew` in a private tmux, once it shows `member`: the server
/// and the view's pid.
fn open_view(world: &World, member: &str) -> (Tmux, i32) {
    let view = Tmux::start(
        &world.root.join("project"),
        &world.env(),
        &format!("'{}' team top --team crew", bin("roo-mail").display()),
    );
    view.wait_for("the live view", |s| {
        s.contains("MEMBER") && s.contains(member)
    });
    let shell = view.panes()[0].pid;
    let pid = wait_until(
        "the view's process",
        Duration::from_secs(10),
        || child_of(shell, "team top"),
        || view.screen(),
    );
    (view, pid)
}

/// Threads and inotify instances of process `pid`.
fn threads_and_inotify(pid: i32) -> (usize, usize) {
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
    let inotify = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| {
        d.filter_map(Result::ok)
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .filter(|l| l.to_string_lossy().contains("inotify"))
            .count()
    });
    (threads, inotify)
}

/// Issue 31 review: the live view made one watcher per inbox, each a notify instance
/// with a thread of its own (51 members: 107 threads and 53 of the user's 128 inotify
/// instances), and read every message of every inbox each frame. One watcher on the
/// team's event log now wakes it, whatever the team's size, and a change still shows.
#[test]
fn the_live_view_watches_a_big_team_with_one_watcher() {
    let world = World::new(None);
    let members: Vec<String> = (0..30).map(|i| format!("m{i:02}")).collect();
    let mut create = world.roo_mail(&["team", "create", "--team", "crew", "--lead", "lead"]);
    for m in &members {
        create = create.args(["--member", m]);
    }
    create.run().assert_ok();
    let team = world.team().unwrap();
    for m in &members {
        let from = Name::parse(m).unwrap();
        team.mailbox()
            .send(
                &from,
                "lead",
                roo_store::Outgoing::text("body", format!("from {m}")),
            )
            .unwrap();
    }
    let (view, pid) = open_view(&world, "m00");
    let (threads, inotify) = threads_and_inotify(pid);
    assert!(threads <= 4, "{threads} threads for 31 inboxes");
    assert!(inotify <= 1, "{inotify} inotify instances for 31 inboxes");
    // The one watcher still sees a change: a new task shows without a key.
    let mut create = TestCommand::new(bin("roo-task")).args([
        "create",
        "--team",
        "crew",
        "--as",
        "lead",
        "--subject",
        "fresh work",
    ]);
    for (k, v) in world.env() {
        create = create.env(k, v);
    }
    create.run().assert_ok();
    view.wait_for("the new task", |s| s.contains("fresh work"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

/// Issue 31: a view whose terminal hung up (its tmux server killed, its ssh session
/// dropped) span for ever at a third of a core, deaf to SIGTERM: crossterm reads a
/// terminal until a read would block, and a hung-up terminal's reads return 0 at once.
/// It now ends.
#[test]
fn the_live_view_ends_when_its_terminal_hangs_up() {
    let world = World::new(None);
    world
        .roo_mail(&["team", "create", "--team", "crew", "--lead", "lead"])
        .args(["--member", "alice"])
        .run()
        .assert_ok();
    let (view, pid) = open_view(&world, "alice");
    roo_tests::end_tmux_server(view.socket());
    let gone = wait_until(
        "the view to end after its terminal hung up",
        Duration::from_secs(10),
        || process_gone(pid).then_some(true),
        || {
            // Do not leave it spinning when the check fails.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            format!("pid {pid} still runs")
        },
    );
    assert!(gone);
}
