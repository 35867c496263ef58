//! The remote reaper (issue 33): a teammate on another host stops once its lead's
//! presence is gone (`teammate/lead_watch.rs`), not on a server restart while the lead
//! lives; its clone there is removed by `roo-mail team gc-hosts` once merged, kept and
//! named while its work is not, and a hostile roster record of the clone is refused
//! with nothing run (`worktree/remote_gc.rs`). Hosts A and B as network namespaces, as
//! in `team_ssh.rs` (whose set-up this reuses); one test checks it all in sequence, as
//! each namespace set-up costs seconds.

use std::path::Path;
use std::time::{Duration, Instant};

use roo_store::{Name, PgStore, RooHome, Team};
use roo_tests::hosts::{Hosts, Need, Postgres};
use roo_tests::{bin, wait_until};

use super::team_ssh::{Layout, Prepared, git, lead_on_a, prepare};

/// The lead makes the team and spawns alice on host b, then waits (it is killed with
/// `-9` meanwhile). Alice commits w.txt and runs a command that never ends on its own,
/// its command line marked with `__TOKEN__` so its processes can be found.
const SCRIPT: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew, description: "reaper"}}
    - tool_calls:
        - {name: Agent, input: {name: alice, host: b, task: true, description: "long job", prompt: "Commit w.txt, then work until told."}}
    - tool_calls:
        - {name: Bash, input: {command: "while [ ! -e go-final ]; do sleep 0.2; done; echo go", timeout: 600000}}
    - text: "Done."
    - text: "Waiting."
    - text: "Waiting."
    - text: "Waiting."
  alice:
    - tool_calls:
        - {name: Bash, input: {command: "echo w > w.txt && git add w.txt && git commit -qm 'alice: w' && while true; do sleep 0.2; done # __TOKEN__", timeout: 600000}}
    - text: "Done."
    - text: "Done."
"#;

/// `roo-mail team gc-hosts --team crew <flags>` as the lead's user on host A, in the
/// lead's project.
fn gc_hosts(hosts: &Hosts, pg: &Postgres, layout: &Layout, flags: &str) -> (i32, String) {
    let out = hosts
        .cmd("a", "sh")
        .arg("-c")
        .arg(format!(
            "cd '{project}' && exec '{mail}' team gc-hosts --team crew {flags}",
            project = layout.project().display(),
            mail = bin("roo-mail").display(),
        ))
        .env("ROO_HOME", layout.root.join("roo-a"))
        .env("ROO_STORE", pg.url())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .timeout(Duration::from_secs(120))
        .run();
    (out.code(), format!("{}\n{}", out.stdout(), out.stderr()))
}

/// A lead on host A with alice on host B running a command that never ends:
///
/// 1. the server restarts for 3 s while the lead lives: 33 s later (more than the 30 s
///    window after it is back) alice still runs her command and is not marked stopped;
/// 2. the lead is killed with `-9`: alice's worker on B exits within 60 s (the figure is
///    printed), her command's processes are gone, nothing but sshd runs on B, her task
///    is released with a note saying her lead is gone;
/// 3. `gc-hosts` with her roster entry recording another directory as her clone is
///    refused and touches nothing; with the true record and her commit not merged, her
///    clone is kept and named; once the lead's repository merged her branch, it is
///    removed.
///
/// On the code before the reaper, step 2 fails: the busy worker ran on until its task
/// ended (never, here) plus the 300 s orphan timeout.
#[test]
fn a_remote_teammate_of_a_killed_lead_stops_and_its_clone_goes_once_merged() {
    let Some(hosts) = Hosts::new(&["a", "b"], &[Need::Postgres, Need::Sshd]) else {
        return;
    };
    let pg = hosts.postgres("a");
    let sshd = hosts.sshd("b");
    let token = format!("reaper-beat-{}", std::process::id());
    let Prepared {
        layout,
        project,
        script,
        socket,
        ..
    } = prepare(
        &hosts,
        &sshd,
        "reaper",
        &SCRIPT.replace("__TOKEN__", &token),
    );
    let _server = roo_tests::TmuxServer(socket);
    let lead_process = lead_on_a(
        &hosts,
        &pg,
        &layout,
        &script,
        "Run the long job with alice on host b.",
        600,
    )
    .spawn();
    let clone = layout.remote().join(".roocode/worktrees/crew+alice");
    let log_b = || {
        std::fs::read_to_string(layout.root.join("roo-b/teams/crew/logs/alice.log"))
            .unwrap_or_default()
    };
    let context = || {
        format!(
            "lead:\n{}\nalice's log on B:\n{}\nprocesses on B:\n{}",
            lead_process.log(),
            log_b(),
            hosts.processes("b").join("\n")
        )
    };
    let running = |token: &str| {
        // Any process of the machine (the hosts share its pid namespace).
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .any(|c| String::from_utf8_lossy(&c).contains(token))
    };
    wait_until(
        "alice's command to run on host b",
        Duration::from_secs(120),
        || running(&token).then_some(()),
        context,
    );
    let watch_dir = layout.root.join("watcher");
    let home = RooHome::new(&watch_dir).with_store(
        PgStore::connect(&pg.admin_url().replacen("/postgres?", "/roo_test?", 1)).unwrap(),
    );
    let team = Team::open(&home, Name::parse("crew").unwrap()).unwrap();
    let entry = || team.config().unwrap().member("alice").unwrap().clone();
    let task = team.tasks().list(&Default::default()).unwrap()[0].clone();
    assert_eq!(task.owner.as_ref().map(Name::as_str), Some("alice"));

    // 1. A short server restart while the lead lives: nobody quits.
    hosts.stop_postgres(&pg);
    std::thread::sleep(Duration::from_secs(3));
    hosts.start_postgres(&pg);
    std::thread::sleep(Duration::from_secs(33));
    assert!(
        running(&token),
        "alice quit after a restart:\n{}",
        context()
    );
    assert!(entry().dead_at.is_none(), "{:?}\n{}", entry(), context());
    assert!(hosts.exit_status(&lead_process).is_none(), "{}", context());

    // 2. kill -9 of the lead.
    let lead_pid = team.config().unwrap().lead().unwrap().pid.unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(lead_pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let killed = Instant::now();
    let others_on_b = || -> Vec<String> {
        hosts
            .processes("b")
            .into_iter()
            .filter(|p| !p.contains("sshd"))
            .collect()
    };
    wait_until(
        "alice's worker and command to end on host b",
        Duration::from_secs(90),
        || {
            (!running(&token) && others_on_b().is_empty() && entry().dead_at.is_some())
                .then_some(())
        },
        context,
    );
    let took = killed.elapsed();
    eprintln!(
        "figure: lead killed -9 -> alice's worker on host b gone, her command killed: {:.1} s",
        took.as_secs_f64()
    );
    assert!(took < Duration::from_secs(60), "{took:?}\n{}", context());
    let reason = entry().dead_reason.unwrap_or_default();
    assert!(reason.contains("its lead is gone"), "{reason}");
    let released = team.tasks().get(&task.id).unwrap();
    assert_eq!(released.owner, None, "{released:?}");
    assert!(
        released
            .notes
            .iter()
            .any(|n| n.text.contains("alice stopped: its lead is gone")),
        "{released:?}"
    );
    hosts.kill(&lead_process);

    // 3. gc-hosts. A hostile record of her clone (another directory, with a file in it):
    // refused, nothing removed, nothing run there.
    let canary = layout.root.join("canary");
    std::fs::create_dir_all(canary.join(".git")).unwrap();
    std::fs::write(canary.join("keep"), "x").unwrap();
    let recorded = entry().worktree_path;
    assert_eq!(recorded.as_deref(), Some(clone.as_path()));
    for hostile in [
        canary.clone(),
        clone.join(".."),
        Path::new("/").to_path_buf(),
    ] {
        team.update_member("alice", |m| m.worktree_path = Some(hostile.clone()))
            .unwrap();
        let (code, out) = gc_hosts(&hosts, &pg, &layout, "");
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("alice: refused: the recorded clone"), "{out}");
        assert!(canary.join("keep").exists() && clone.join("w.txt").exists());
    }
    team.update_member("alice", |m| m.worktree_path = recorded.clone())
        .unwrap();
    // Her commit is not merged: kept, and named.
    let (code, out) = gc_hosts(&hosts, &pg, &layout, "");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("alice: kept") && out.contains("crew+alice") && out.contains("lacks"),
        "{out}"
    );
    assert!(clone.join("w.txt").exists());
    // Merged (gc-hosts fetched her branch): removed.
    git(
        &project,
        &[
            "merge",
            "-q",
            "--no-ff",
            "-m",
            "merge alice",
            "roo/crew/alice",
        ],
    );
    let (code, out) = gc_hosts(&hosts, &pg, &layout, "--dry-run");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("would be removed") && clone.exists(), "{out}");
    let (code, out) = gc_hosts(&hosts, &pg, &layout, "");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("alice: removed"), "{out}");
    assert!(!clone.exists(), "{out}");
    assert!(layout.remote().join(".git").is_dir());
}
