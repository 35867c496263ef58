//! The interactive `roo-lead` inside a private tmux server (`tmux -L roo-test-… -f
//! /dev/null`): with no `--teammate-mode` it detects tmux and opens its teammates in panes
//! of its own window. Its screen shows their message previews and the status line as
//! they go busy, idle and dead; `/exit` closes their panes and leaves no `roo-worker`.
//! Every model is the scripted provider, picked by agent name (each worker replays the
//! same script for its own name).

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_store::{BackendType, Name, RooHome, Team};
use roo_tests::{Pane, TempDir, Tmux, bin, git, process_gone, wait_until};

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
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["config", "user.name", "Roo Test"]);
    git(&project, &["config", "user.email", "roo@example.invalid"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "initial"]);
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
