//! The interactive `roo-lead` inside a private tmux server (`tmux -L roo-test-… -f
//! /dev/null`): with no `--teammate-mode` it detects tmux and opens its teammates in panes
//! of its own window. Its screen shows their message previews and the status line as
//! they go busy, idle and dead; `/exit` closes their panes and leaves no `roo-worker`.
//! Every model is the scripted provider, picked by agent name (each worker replays the
//! same script for its own name).

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_store::{BackendType, Name, RooHome, Team};
use roo_tests::{Pane, TempDir, Tmux, bin, process_gone, wait_until};

/// Live `roo-worker`s whose command line names a path under `root`.
pub(crate) fn workers_under(root: &Path) -> Vec<String> {
    let root = root.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains("roo-worker") && text.contains(&root) && !process_gone(pid) {
            found.push(format!("{pid}: {text}"));
        }
    }
    found
}

/// Live processes other than tmux itself whose working directory is under `root`
/// (a teammate's command left behind).
fn processes_in(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) else {
            continue;
        };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if cwd.starts_with(root) && comm.trim() != "tmux: server" && !process_gone(pid) {
            found.push(format!("{pid} {}: cwd {}", comm.trim(), cwd.display()));
        }
    }
    found
}

/// The lead forms team crew and spawns alice and bob; its later turns answer whatever
/// the person types. Alice greets the lead and is done; bob greets it, then works (his
/// Bash waits for the file `GO`, so the test sees him busy) and goes idle.
const SCRIPT: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Say hello."}}
        - {name: Agent, input: {name: bob, prompt: "Say hello, then wait for GO."}}
    - text: "Alice and bob are on it."
    - text: "Noted."
    - text: "Noted."
    - text: "Noted."
  alice:
    - tool_calls:
        - {name: SendMessage, input: {to: lead, summary: "alice is ready", message: "hello from alice"}}
    - text: "Alice done."
  bob:
    - tool_calls:
        - {name: SendMessage, input: {to: lead, summary: "bob is on it", message: "hello from bob"}}
        - {name: Bash, input: {command: "until [ -e 'GO' ]; do sleep 0.05; done; echo went"}}
    - text: "Bob done."
"#;

fn world() -> (TempDir, PathBuf) {
    let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    std::fs::create_dir_all(root.join("home")).unwrap();
    std::fs::create_dir_all(root.join("roo")).unwrap();
    root.write("project/README.md", "# demo\n");
    let project = root.join("project");
    roo_tests::git_repo_with_identity(&project);
    (root, project)
}

/// The pane titled `title`.
fn pane(tmux: &Tmux, title: &str) -> Option<Pane> {
    tmux.panes().into_iter().find(|p| p.title == title)
}

#[test]
fn the_interactive_lead_in_tmux_opens_pane_teammates_and_shows_their_previews_and_states() {
    let (root, project) = world();
    let script = root.write("script.yaml", SCRIPT);
    let command = format!(
        "{} --provider script --script '{}' --trust-project --permission-mode bypassPermissions",
        bin("roo-lead").display(),
        script.display()
    );
    let tmux = Tmux::start(
        &project,
        &[
            ("ROO_HOME", root.join("roo").display().to_string()),
            ("HOME", root.join("home").display().to_string()),
            ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
        ],
        &command,
    );
    let lead_pane = tmux.panes()[0].id.clone();
    tmux.wait_for("the prompt", |s| s.contains("RooCode") && s.contains('›'));
    tmux.type_text("Say hello, both of you.");
    tmux.keys(&["Enter"]);

    // Panes titled with their names open beside the lead, each running its worker.
    let (alice, bob) = wait_until(
        "panes titled alice and bob whose workers joined",
        Duration::from_secs(60),
        || {
            let both = pane(&tmux, "alice").zip(pane(&tmux, "bob"))?;
            let config = Team::open(
                &RooHome::new(root.join("roo")),
                Name::parse_as("team", "crew").ok()?,
            )
            .ok()?
            .config()
            .ok()?;
            let joined = |p: &Pane| {
                config.member(&p.title).is_some_and(|m| {
                    m.pid == Some(p.pid)
                        && m.backend_type == Some(BackendType::Tmux)
                        && m.pane_id.as_deref() == Some(p.id.as_str())
                })
            };
            (joined(&both.0) && joined(&both.1)).then_some(both)
        },
        || tmux.all_screens(),
    );
    let all = tmux.panes();
    assert_eq!(all.len(), 3, "the lead's pane and two more: {all:#?}");

    // The lead's screen: both previews, bob busy while his command waits.
    let screen = tmux.wait_for("both previews and bob busy", |s| {
        s.contains("✉ alice: alice is ready")
            && s.contains("✉ bob: bob is on it")
            && s.contains("team crew · alice idle · bob busy")
    });
    assert!(
        !screen.contains("✉ alice: hello from alice"),
        "the preview is the summary, not the text:\n{screen}"
    );
    // Each worker streams its own work in its pane.
    let alice_screen = tmux.run(&["capture-pane", "-p", "-t", &alice.id]);
    assert!(
        alice_screen.contains("SendMessage") && alice_screen.contains("Alice done."),
        "alice's pane:\n{alice_screen}"
    );

    // A status line is printed when it changes, never twice in a row.
    let status: Vec<&str> = screen
        .lines()
        .map(str::trim_end)
        .filter(|l| l.starts_with("team crew ·"))
        .collect();
    assert!(
        status.windows(2).all(|w| w[0] != w[1]),
        "the same status line twice:\n{screen}"
    );

    // Bob's command ends: he goes idle.
    root.write("project/.roocode/worktrees/crew+bob/GO", "");
    tmux.wait_for("bob idle in the status line", |s| {
        s.contains("team crew · alice idle · bob idle")
    });

    // The person closes alice's pane: the lead shows her dead.
    tmux.run(&["kill-pane", "-t", &alice.id]);
    tmux.wait_for("alice dead in the status line", |s| {
        s.contains("team crew · alice dead · bob idle")
    });
    assert!(!process_gone(bob.pid as i32), "bob still runs");

    // /exit closes bob's pane and ends his worker; only the lead's pane is left.
    tmux.type_text("/exit");
    tmux.keys(&["Enter"]);
    assert_eq!(tmux.wait_exit(), 0, "{}", tmux.all_screens());
    wait_until(
        "only the lead's pane left and no roo-worker",
        Duration::from_secs(10),
        || {
            let panes = tmux.panes();
            (panes.len() == 1 && panes[0].id == lead_pane && workers_under(root.path()).is_empty())
                .then_some(())
        },
        || format!("{}\n{:?}", tmux.all_screens(), workers_under(root.path())),
    );
    assert!(process_gone(bob.pid as i32));
}

#[test]
fn ctrl_d_at_the_interactive_leads_prompt_ends_a_busy_pane_teammate_and_closes_its_pane() {
    let (root, project) = world();
    let script = root.write("script.yaml", SCRIPT);
    let command = format!(
        "{} --provider script --script '{}' --trust-project --permission-mode bypassPermissions \
         --teammate-mode tmux",
        bin("roo-lead").display(),
        script.display()
    );
    let tmux = Tmux::start(
        &project,
        &[
            ("ROO_HOME", root.join("roo").display().to_string()),
            ("HOME", root.join("home").display().to_string()),
            ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
        ],
        &command,
    );
    let lead_pane = tmux.panes()[0].id.clone();
    tmux.wait_for("the prompt", |s| s.contains("RooCode") && s.contains('›'));
    tmux.type_text("Say hello, both of you.");
    tmux.keys(&["Enter"]);
    // Bob's command waits for a file nobody writes: he is busy when the person leaves.
    tmux.wait_for("bob busy, the lead back at its prompt", |s| {
        s.contains("team crew · alice idle · bob busy") && s.contains("Alice and bob are on it.")
    });
    let bob = pane(&tmux, "bob").unwrap_or_else(|| panic!("{}", tmux.all_screens()));
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_exit(), 0, "{}", tmux.all_screens());
    wait_until(
        "only the lead's pane left and no roo-worker",
        Duration::from_secs(10),
        || {
            let panes = tmux.panes();
            (panes.len() == 1 && panes[0].id == lead_pane && workers_under(root.path()).is_empty())
                .then_some(())
        },
        || format!("{}\n{:?}", tmux.all_screens(), workers_under(root.path())),
    );
    assert!(process_gone(bob.pid as i32));
    wait_until(
        "bob's command to end with him",
        Duration::from_secs(10),
        || processes_in(root.path()).is_empty().then_some(()),
        || format!("{:?}", processes_in(root.path())),
    );
}

/// Kills a private tmux server on drop, and removes its socket file.
struct Server(String);

impl Drop for Server {
    fn drop(&mut self) {
        roo_tests::end_tmux_server(&self.0);
    }
}

#[test]
fn teammate_colours_stay_on_their_own_panes_and_leave_the_leads_window_as_it_was() {
    use roo_team::backend::{Launch, Placement, Socket, TeammateExecutor, TmuxExecutor};

    let (root, project) = world();
    let server = Server(format!("roo-test-{}-colours", std::process::id()));
    let tmux = |args: &[&str]| {
        let out = std::process::Command::new("tmux")
            .args(["-L", &server.0, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    tmux(&[
        "new-session",
        "-d",
        "-s",
        "lead",
        "-x",
        "160",
        "-y",
        "40",
        "--",
        "sleep",
        "100000",
    ]);
    let lead_pane = tmux(&["display-message", "-p", "-t", "lead", "#{pane_id}"])
        .trim()
        .to_string();
    let window_options = || tmux(&["show-options", "-w", "-t", &lead_pane]);
    let before = window_options();
    let script = root.write("script.yaml", "agents:\n  \"*\":\n    - text: \"Ready.\"\n");
    let home = RooHome::new(root.join("roo"));
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let executor = TmuxExecutor::new(
            roo_team::backend::Tmux::new("tmux", Some(Socket::Name(server.0.clone())))
                .with_config("/dev/null"),
            Placement::Window {
                lead_pane: lead_pane.clone(),
            },
            bin("roo-worker"),
            &root.join("roo"),
        );
        for (who, colour) in [("alice", "blue"), ("bob", "magenta")] {
            let me = Name::parse(who).unwrap();
            let mut settings = roo_team::AgentSettings::new(
                roo_team::Identity::teammate(me.clone(), crew.clone(), lead.clone()),
                root.join("roo"),
            );
            settings.llm.provider = Some("script".into());
            settings.llm.script = Some(script.clone());
            executor
                .spawn(Launch {
                    team: team.clone(),
                    name: me.clone(),
                    lead: lead.clone(),
                    prompt: "Say you are ready.".into(),
                    settings,
                    plan_mode_required: false,
                    mode_after_plan: roo_agent::permissions::PermissionMode::Default,
                    agent_type: None,
                    model: None,
                    work_dir: project.clone(),
                    color: Some(colour.into()),
                    tools: Vec::new(),
                    lead_key: None,
                    member_login: None,
                })
                .await
                .unwrap_or_else(|e| panic!("spawn {who}: {e}"));
            let pane = executor.pane_of(&me).unwrap();
            // The colour is the pane's own, shown in its title on the border.
            assert_eq!(
                tmux(&["show-options", "-p", "-v", "-t", &pane, "@roo-color"]).trim(),
                colour
            );
            let title = tmux(&[
                "display-message",
                "-p",
                "-t",
                &pane,
                "#{E:pane-border-format}",
            ]);
            assert!(
                title.contains(&format!("#[fg={colour}] {who} ")),
                "{who}'s border: {title}"
            );
        }
        // Nothing window-wide but the titles on the borders: no border colour of the
        // last teammate spread over every pane, the lead's included.
        let during = window_options();
        assert!(
            !during.contains("pane-border-style") && !during.contains("pane-active-border-style"),
            "{during}"
        );
        assert!(during.contains("pane-border-status top"), "{during}");
        let lead_title = tmux(&[
            "display-message",
            "-p",
            "-t",
            &lead_pane,
            "#{E:pane-border-format}",
        ]);
        assert_eq!(lead_title.trim(), "", "the lead's pane shows no title");
        executor.shutdown_all(false).await;
        let left = tmux(&["list-panes", "-a", "-F", "#{pane_id}"]);
        assert_eq!(left.trim(), lead_pane, "only the lead's pane is left");
        assert_eq!(window_options(), before, "the lead's window as it was");
    });
}
