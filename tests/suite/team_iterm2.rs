//! Pane teammates on the iTerm2 backend, without iTerm2: a headless
//! `roo-lead -p --teammate-mode iterm2` runs with `TERM_PROGRAM=iTerm.app` and
//! `ITERM_SESSION_ID` set and a fake `it2` first on its `PATH`. The fake implements the
//! `it2` commands the backend issues well enough to run what is typed into a pane: a
//! "session" is a background shell (its own process group, an environment of its own
//! like a new terminal's, not the lead's) that runs the line `it2 session run` types
//! and then stays, as a shell in a pane would; `session list --json` lists the live
//! ones; `session close` hangs up its process group. Every command line the fake gets,
//! and its environment, is logged. This checks the executor against the commands of `it2` 0.2.3 as the
//! layer's unit tests pin them, not against a real iTerm2.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_store::{BackendType, MemberState, Name, RooHome, TaskId, TaskStatus, Team};
use roo_tests::{TempDir, TestCommand, bin, process_gone, read_pid, wait_until};

use super::team_panes::{ArgvSampler, CANARY, KILLED, LEAD, TEAMMATES, workers_under};

/// The lead's own session (its `$ITERM_SESSION_ID`).
const LEAD_GUID: &str = "2A3B1C4D-0000-4000-8000-00000000ABCD";

/// The fake `it2`. `{state}` is its state directory, `{lead}` the lead's session.
const FAKE_IT2: &str = r#"#!/bin/sh
d='{state}'
# One write per call (the record built first): calls made at the same time must not
# interleave their lines.
rec=$(for a in "$@"; do printf '%s\n' "$a"; done; echo --end--)
printf '%s\n' "$rec" >> "$d/calls"
env >> "$d/env"
sub="$1 $2"
shift 2
sid=
text=
while [ $# -gt 0 ]; do
  case "$1" in
    --session) sid="$2"; shift 2 ;;
    --) text="$2"; shift 2 ;;
    *) shift ;;
  esac
done
live() {
  [ "$1" = '{lead}' ] && return 0
  [ -f "$d/s/$1.pid" ] && kill -0 "$(cat "$d/s/$1.pid")" 2>/dev/null
}
if [ -n "$sid" ] && ! live "$sid"; then
  echo "Error: Session '$sid' not found" >&2; exit 3
fi
case "$sub" in
  "session split")
    id=$(printf '%08X-0000-4000-8000-000000000000' "$$")
    mkfifo "$d/s/$id.in"
    # A new terminal's environment, not the lead's; the shell reads what is typed,
    # then stays until the pane is closed.
    P="$PATH" H="$HOME" setsid sh -c 'exec env -i PATH="$P" HOME="$H" TERM_PROGRAM=iTerm.app ITERM_SESSION_ID="w0t0p1:$0" sh -c "sh -s < \"\$0\"; while :; do sleep 1; done" "$1"' "$id" "$d/s/$id.in" > "$d/s/$id.out" 2>&1 < /dev/null &
    echo $! > "$d/s/$id.pid"
    echo "$id $!" >> "$d/sessions"
    echo "Created new pane: $id" ;;
  "session set-name")
    printf '%s' "$text" > "$d/s/$sid.name"
    echo "Session name set to: $text" ;;
  "session run")
    printf '%s\n' "$text" > "$d/s/$sid.in" ;;
  "session close")
    if [ "$sid" = '{lead}' ]; then echo "closed the lead's session" >> "$d/violations"; exit 0; fi
    kill -HUP "-$(cat "$d/s/$sid.pid")" 2>/dev/null
    rm -f "$d/s/$sid.pid"
    echo "Closed session $sid" ;;
  "session list")
    printf '[{"id": "{lead}", "name": "lead"}'
    for f in "$d"/s/*.pid; do
      [ -f "$f" ] || continue
      id=$(basename "$f" .pid)
      live "$id" && printf ', {"id": "%s", "name": "%s"}' "$id" "$(cat "$d/s/$id.name" 2>/dev/null)"
    done
    echo ']' ;;
  *) echo "Error: no such command: $sub" >&2; exit 1 ;;
esac
"#;

struct World {
    root: TempDir,
}

impl World {
    fn new() -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("roo")).unwrap();
        std::fs::create_dir_all(root.join("it2/s")).unwrap();
        root.write("project/README.md", "# demo\n");
        let project = root.join("project");
        roo_tests::git_repo_with_identity(&project);
        root.write(
            "roo/config.yaml",
            "sandbox: {pass_env: [EXTRA_SERVICE_API_KEY]}\n",
        );
        let fake = root.write(
            "bin/it2",
            FAKE_IT2
                .replace("{state}", &root.join("it2").display().to_string())
                .replace("{lead}", LEAD_GUID),
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        World { root }
    }

    fn project(&self) -> PathBuf {
        self.root.join("project")
    }

    fn team(&self) -> Option<Team> {
        Team::open(
            &RooHome::new(self.root.join("roo")),
            Name::parse_as("team", "crew").unwrap(),
        )
        .ok()
    }

    /// `roo-lead -p` inside "iTerm2", with `script`; the canary only in its environment.
    fn lead(&self, script: &str) -> TestCommand {
        let script = self.root.write("script.yaml", script);
        let bins: PathBuf = bin("roo-mail").parent().unwrap().to_path_buf();
        let path = format!(
            "{}:{}:{}",
            self.root.join("bin").display(),
            bins.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        TestCommand::new(bin("roo-lead"))
            .env("PATH", path)
            .env("ROO_HOME", self.root.join("roo"))
            .env("HOME", self.root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("TERM_PROGRAM", "iTerm.app")
            .env("ITERM_SESSION_ID", format!("w0t0p0:{LEAD_GUID}"))
            .env("EXTRA_SERVICE_API_KEY", CANARY)
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .env_remove("ROO_TEAMMATE_MODE")
            .current_dir(self.project())
            .args(["-p", "Ship a.txt and b.txt with two pane teammates."])
            .args(["--provider", "script", "--script"])
            .arg(script)
            .args(["--permission-mode", "bypassPermissions"])
            .args(["--output-format", "stream-json"])
            .args(["--teammate-mode", "iterm2", "--team-timeout", "120"])
    }

    /// The fake's sessions so far: id and the pid of its process group's leader.
    fn sessions(&self) -> Vec<(String, i32)> {
        std::fs::read_to_string(self.root.join("it2/sessions"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (id, pid) = l.split_once(' ')?;
                Some((id.to_string(), pid.parse().ok()?))
            })
            .collect()
    }

    fn session_name(&self, id: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(format!("it2/s/{id}.name"))).ok()
    }

    /// The commands the fake ran, each as its arguments.
    fn calls(&self) -> Vec<Vec<String>> {
        let log = std::fs::read_to_string(self.root.join("it2/calls")).unwrap_or_default();
        let mut calls = vec![];
        let mut current = vec![];
        for line in log.lines() {
            if line == "--end--" {
                calls.push(std::mem::take(&mut current));
            } else {
                current.push(line.to_string());
            }
        }
        calls
    }

    fn describe(&self) -> String {
        let outs: String = self
            .sessions()
            .iter()
            .map(|(id, _)| {
                format!(
                    "session {id}:\n{}\n",
                    std::fs::read_to_string(self.root.join(format!("it2/s/{id}.out")))
                        .unwrap_or_default()
                )
            })
            .collect();
        format!("it2 calls: {:#?}\n{outs}", self.calls())
    }

    /// Processes whose command line names the fake's state directory (its sessions).
    fn session_processes(&self) -> Vec<String> {
        let marker = self.root.join("it2").display().to_string();
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(&marker) && !process_gone(pid) {
                found.push(format!("{pid}: {text}"));
            }
        }
        found
    }

    fn git_out(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(self.project())
            .env("HOME", self.root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }
}

#[test]
fn iterm2_pane_teammates_do_a_team_job_through_it2_and_leave_nothing_behind() {
    let world = World::new();
    let keyfile = std::env::temp_dir().join(format!(
        "roo-iterm2-key-{}-{}",
        std::process::id(),
        world.root.path().file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&keyfile);
    let script = format!(
        "agents:\n{}{}",
        LEAD.trim_start_matches('\n'),
        TEAMMATES
            .trim_start_matches('\n')
            .replace("KEYFILE", &keyfile.display().to_string())
    );
    let sampler = ArgvSampler::start(CANARY);
    let lead = world.lead(&script).spawn();

    // Both panes open, named after the teammates, and their workers join from them.
    let joined = wait_until(
        "alice and bob to join from their iTerm2 sessions",
        Duration::from_secs(60),
        || {
            let config = world.team()?.config().ok()?;
            let sessions = world.sessions();
            let mut found = Vec::new();
            for who in ["alice", "bob"] {
                let member = config.member(who)?;
                let pane = member.pane_id.clone()?;
                let (_, leader) = sessions.iter().find(|(id, _)| *id == pane)?;
                (world.session_name(&pane).as_deref() == Some(who)).then_some(())?;
                found.push((member.clone(), pane, *leader));
            }
            Some(found)
        },
        || world.describe(),
    );
    for (member, pane, _) in &joined {
        assert_eq!(
            member.backend_type,
            Some(BackendType::Iterm2),
            "{member:#?}"
        );
        assert!(
            member.pid.is_some() && member.color.is_some(),
            "{member:#?}"
        );
        assert_ne!(pane, LEAD_GUID);
    }

    let out = lead.wait();
    let (hits, rounds) = sampler.finish();
    assert_eq!(
        out.code(),
        0,
        "{}\n{}\n{}",
        out.stdout(),
        out.stderr(),
        world.describe()
    );

    // The job: both files merged, each committed in its worktree; the team deleted.
    assert_eq!(
        std::fs::read_to_string(world.project().join("a.txt")).unwrap(),
        "a\n"
    );
    assert_eq!(
        std::fs::read_to_string(world.project().join("b.txt")).unwrap(),
        "b\n"
    );
    let merges = world.git_out(&["log", "--merges", "--format=%s", "main"]);
    assert_eq!(merges.lines().count(), 2, "{merges}");
    assert!(
        out.stdout().contains(r#""from":"bob""#) && out.stdout().contains("both done"),
        "bob's report reached the lead: {}",
        out.stdout()
    );
    assert!(world.team().is_none(), "the lead deleted the team");

    // The panes: the first beside the lead's, the second below the first; each named,
    // started by typing the launcher line; closed at the end, the lead's never.
    let calls = world.calls();
    let splits: Vec<&Vec<String>> = calls.iter().filter(|c| c[1] == "split").collect();
    assert_eq!(splits.len(), 2, "{calls:#?}");
    assert_eq!(
        splits[0][..],
        ["session", "split", "--vertical", "--session", LEAD_GUID]
    );
    let sessions = world.sessions();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert_eq!(
        splits[1][..],
        ["session", "split", "--session", sessions[0].0.as_str()]
    );
    let runs: Vec<&Vec<String>> = calls.iter().filter(|c| c[1] == "run").collect();
    assert_eq!(runs.len(), 2, "{calls:#?}");
    for run in &runs {
        assert!(
            run[5].starts_with(" /bin/sh '") && run[5].contains("/run/iterm2/"),
            "{run:?}"
        );
    }
    let mut closed: Vec<&str> = calls
        .iter()
        .filter(|c| c[1] == "close")
        .map(|c| c[4].as_str())
        .collect();
    closed.sort();
    let mut ours: Vec<&str> = sessions.iter().map(|(id, _)| id.as_str()).collect();
    ours.sort();
    assert_eq!(closed, ours, "each of its sessions closed once: {calls:#?}");
    assert!(!world.root.join("it2/violations").exists());

    // Nothing left: no worker, no session's processes, no launcher, pid or handoff file.
    assert_eq!(workers_under(world.root.path()), Vec::<String>::new());
    // A closed session's processes end on the hang-up, soon after `close` answers.
    wait_until(
        "the closed sessions' processes to end",
        Duration::from_secs(10),
        || {
            (sessions.iter().all(|(_, leader)| process_gone(*leader))
                && world.session_processes().is_empty())
            .then_some(())
        },
        || format!("{:?}\n{:#?}", sessions, world.session_processes()),
    );
    for dir in ["roo/run/iterm2", "roo/run/handoff"] {
        let left: Vec<_> = std::fs::read_dir(world.root.join(dir))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{dir} holds {left:?}");
    }

    // The key reached a worker through the handoff, never a command line.
    let seen = std::fs::read_to_string(&keyfile).unwrap_or_default();
    let _ = std::fs::remove_file(&keyfile);
    assert_eq!(seen, CANARY, "the worker got the lead's key");
    assert!(rounds > 10, "the sampler ran");
    assert!(hits.is_empty(), "the key was on a command line: {hits:#?}");
    let log = std::fs::read_to_string(world.root.join("it2/calls")).unwrap();
    assert!(!log.contains(CANARY), "the key was on it2's argv: {log}");
    // Nor in its environment: the lead sealed its keys away before running anything.
    let env = std::fs::read_to_string(world.root.join("it2/env")).unwrap();
    assert!(env.contains("ITERM_SESSION_ID="), "{env}");
    assert!(!env.contains(CANARY), "the key was in it2's environment");
}

#[test]
fn a_closed_iterm2_pane_releases_its_task_and_a_message_starts_the_teammate_again() {
    let world = World::new();
    let lead = world.lead(KILLED).spawn();
    let team = wait_until(
        "the team",
        Duration::from_secs(60),
        || world.team(),
        || world.describe(),
    );
    let state = |team: &Team| {
        team.config()
            .ok()
            .and_then(|c| c.member("alice").map(|m| m.observed_state()))
    };
    let first = wait_until(
        "alice to be idle in her iTerm2 pane",
        Duration::from_secs(60),
        || {
            let member = team.config().ok()?.member("alice")?.clone();
            (member.observed_state() == MemberState::Idle).then_some(())?;
            member.pane_id
        },
        || world.describe(),
    );

    // A message from outside the team's processes wakes her; she claims the task.
    TestCommand::new(bin("roo-mail"))
        .env("ROO_HOME", world.root.join("roo"))
        .args(["send", "--team", "crew", "--as", "lead", "--to", "alice"])
        .args(["--summary", "ping", "ping from the test: claim task 1"])
        .run()
        .assert_ok();
    let pid_file = world
        .project()
        .join(".roocode/worktrees/crew+alice/sleeper.pid");
    let sleeper = wait_until(
        "alice's command to start",
        Duration::from_secs(30),
        || read_pid(&pid_file),
        || world.describe(),
    );

    // The user closes her pane: she is found dead and her task goes back to pending.
    TestCommand::new(world.root.join("bin/it2"))
        .args(["session", "close", "--force", "--session", &first])
        .run()
        .assert_ok();
    let one = TaskId::parse("1").unwrap();
    wait_until(
        "task 1 to be released",
        Duration::from_secs(10),
        || {
            let task = team.tasks().get(&one).ok()?;
            (task.status == TaskStatus::Pending && task.owner.is_none()).then_some(())
        },
        || format!("{:#?}\n{}", team.tasks().get(&one), world.describe()),
    );
    assert_eq!(state(&team), Some(MemberState::Dead));
    wait_until(
        "alice's command to end with her pane",
        Duration::from_secs(10),
        || process_gone(sleeper).then_some(()),
        || format!("pid {sleeper}"),
    );

    // The lead messages her: she starts again in a new pane; TaskStop then ends her and
    // closes that pane while the lead runs.
    world.root.write("project/release-lead", "");
    // Her task was never finished: no success.
    let out = lead.wait();
    assert_eq!(out.code(), 1, "{}\n{}", out.stderr(), world.describe());
    assert!(out.stderr().contains("work was lost"), "{}", out.stderr());
    assert!(out.stdout().contains("back\\n"), "{}", out.stdout());
    assert!(out.stdout().contains("stopped\\n"), "{}", out.stdout());
    let sessions = world.sessions();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert_eq!(sessions[0].0, first);
    let calls = world.calls();
    assert!(
        calls
            .iter()
            .any(|c| c[1] == "close" && c[4] == sessions[1].0),
        "her second pane was closed: {calls:#?}"
    );
    assert!(!world.root.join("it2/violations").exists());
    wait_until(
        "no session process and no worker left",
        Duration::from_secs(10),
        || {
            (world.session_processes().is_empty() && workers_under(world.root.path()).is_empty())
                .then_some(())
        },
        || format!("{:#?}", world.session_processes()),
    );
}

#[test]
fn an_iterm2_worker_that_cannot_start_is_a_spawn_error_and_leaves_no_pane() {
    use roo_team::backend::iterm2::{It2, SessionId};
    use roo_team::backend::{ITerm2Executor, Launch, TeammateExecutor};

    let world = World::new();
    let home = RooHome::new(world.root.join("roo"));
    let crew = Name::parse("crew").unwrap();
    let lead = Name::parse("lead").unwrap();
    let team = Team::create(
        &home,
        crew.clone(),
        "",
        roo_store::Member::new(lead.clone(), &crew),
        Vec::new(),
    )
    .unwrap();
    // The team is gone before the worker starts: it refuses to join (exit 2).
    team.delete(true).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let executor = ITerm2Executor::new(
            It2::new(world.root.join("bin/it2")),
            SessionId::parse(LEAD_GUID).unwrap(),
            bin("roo-worker"),
            &world.root.join("roo"),
        );
        let alice = Name::parse("alice").unwrap();
        let mut settings = roo_team::AgentSettings::new(
            roo_team::Identity::teammate(alice.clone(), crew.clone(), lead.clone()),
            world.root.join("roo"),
        );
        settings.llm.provider = Some("script".into());
        settings.llm.script = Some(world.root.write("script.yaml", "- text: x\n"));
        eprintln!("(the spawn below is expected to fail)");
        let err = executor
            .spawn(Launch {
                team: team.clone(),
                name: alice.clone(),
                lead: lead.clone(),
                prompt: "hi".into(),
                settings,
                plan_mode_required: false,
                mode_after_plan: roo_agent::permissions::PermissionMode::Default,
                agent_type: None,
                model: None,
                work_dir: world.project(),
                color: None,
                tools: Vec::new(),
                lead_key: None,
                member_login: None,
            })
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("start alice: roo-worker exited before joining the team"),
            "{err}\n{}",
            world.describe()
        );
        assert!(!executor.is_active(&alice));
        assert!(executor.panes().panes().is_empty());
    });
    let sessions = world.sessions();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let calls = world.calls();
    assert_eq!(
        calls.last().unwrap()[..],
        [
            "session",
            "close",
            "--force",
            "--session",
            sessions[0].0.as_str()
        ],
        "its pane was closed: {calls:#?}"
    );
    wait_until(
        "its session's processes to end",
        Duration::from_secs(10),
        || world.session_processes().is_empty().then_some(()),
        || format!("{:#?}", world.session_processes()),
    );
    for dir in ["roo/run/iterm2", "roo/run/handoff"] {
        let left: Vec<_> = std::fs::read_dir(world.root.join(dir))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{dir} holds {left:?}");
    }
}
