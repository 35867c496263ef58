//! The idle interactive lead takes its teammates' messages as a turn of its own: one
//! typed prompt starts a whole team job and the lead reacts to each report without the
//! person typing again. The person's half-typed line is kept through such a turn; Esc
//! stops one and pauses them until the next prompt; `team_turns: false` in the user's
//! config leaves messages for the next prompt. A teammate the lead shuts down is shown
//! as shut down, not dead. A private tmux server per test; teammates in its panes or
//! in-process, the scripted provider picking turns by agent name and by the messages
//! delivered.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_tests::{TempDir, Tmux, bin, wait_until};

/// Each teammate waits for the file `GO` in its own clone, writes its file and tells
/// the lead; the lead answers each report by name. What a turn shows depends on the
/// message or tool result it got (`when: last_user_contains`), so a turn that took no
/// message, or the wrong one, shows up as a wrong line on the screen; other wake-ups
/// (alice's answer to the shutdown request may come in a turn of its own) get "Noted.".
const SCRIPT: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Write a.txt once GO is there, then tell the lead."}}
        - {name: Agent, input: {name: bob, prompt: "Write b.txt once GO is there, then tell the lead."}}
    - when: {last_user_contains: "spawned teammate bob"}
      text: "Alice and bob are on it."
    - when: {last_user_contains: "a.txt is written"}
      tool_calls:
        - {name: SendMessage, input: {to: alice, type: shutdown_request, message: "Thanks, you can stop."}}
    - when: {last_user_contains: "sent to alice"}
      text: "Alice reports a.txt; she may stop."
    - when: {last_user_contains: "b.txt is written"}
      tool_calls:
        - {name: TeamDelete, input: {}}
    - when: {last_user_contains: "deleted team crew"}
      text: "Both files are written; the team is deleted."
    - text: "Noted."
    - text: "Noted."
    - text: "Noted."
    - text: "Noted."
  alice:
    - tool_calls:
        - {name: Bash, input: {command: "until [ -e GO ]; do sleep 0.05; done; echo A > a.txt"}}
    - tool_calls:
        - {name: SendMessage, input: {to: lead, summary: "a.txt is written", message: "a.txt is written"}}
    - text: "Alice done."
  bob:
    - tool_calls:
        - {name: Bash, input: {command: "until [ -e GO ]; do sleep 0.05; done; echo B > b.txt"}}
    - tool_calls:
        - {name: SendMessage, input: {to: lead, summary: "b.txt is written", message: "b.txt is written"}}
    - text: "Bob done."
"#;

struct World {
    root: TempDir,
    project: PathBuf,
}

impl World {
    fn new(script: &str, user_config: &str) -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        std::fs::create_dir_all(root.join("home")).unwrap();
        root.write("roo/config.yaml", user_config);
        root.write("script.yaml", script);
        root.write("project/README.md", "# demo\n");
        let project = root.join("project");
        roo_tests::git_repo_with_identity(&project);
        World { root, project }
    }

    /// The interactive lead in a private tmux server, at its prompt; its teammates in
    /// `mode` (`tmux`: `roo-worker`s in panes of its window).
    fn lead(&self, mode: &str) -> Tmux {
        let command = format!(
            "{} --provider script --script '{}' --trust-project --permission-mode bypassPermissions --teammate-mode {mode}",
            bin("roo-lead").display(),
            self.root.join("script.yaml").display()
        );
        let tmux = Tmux::start(
            &self.project,
            &[
                ("ROO_HOME", self.root.join("roo").display().to_string()),
                ("HOME", self.root.join("home").display().to_string()),
                ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
            ],
            &command,
        );
        tmux.wait_for("the prompt", |s| s.contains("RooCode") && s.contains('›'));
        tmux
    }

    /// Lets `member` go on: the file its command waits for, in its own clone.
    fn go(&self, member: &str) {
        self.root
            .write(format!("project/.roocode/worktrees/crew+{member}/GO"), "");
    }

    fn clone_file(&self, member: &str, file: &str) -> Option<String> {
        std::fs::read_to_string(
            self.project
                .join(format!(".roocode/worktrees/crew+{member}/{file}")),
        )
        .ok()
    }
}

/// The one prompt, then the lead's first turn done: both teammates spawned and waiting.
fn start_job(tmux: &Tmux) {
    tmux.type_text("Have alice write a.txt and bob write b.txt.");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the lead's first turn done", |s| {
        s.contains("Alice and bob are on it.") && at_empty_prompt(s)
    });
}

/// Whether the last prompt on `screen` is empty: the lead is idle (keys typed during a
/// run are not taken as input).
fn at_empty_prompt(screen: &str) -> bool {
    screen
        .lines()
        .rfind(|l| l.starts_with('›'))
        .is_some_and(|l| l.trim_end() == "›")
}

/// `/exit` at the idle prompt; the lead exits 0.
fn exit(tmux: &Tmux) {
    tmux.wait_for("the idle prompt", at_empty_prompt);
    tmux.type_text("/exit");
    tmux.keys(&["Enter"]);
    assert_eq!(tmux.wait_exit(), 0, "{}", tmux.screen());
}

fn count(screen: &str, needle: &str) -> usize {
    screen.matches(needle).count()
}

#[test]
fn one_typed_prompt_runs_a_whole_team_job_the_lead_reacting_to_each_report() {
    let world = World::new(SCRIPT, "");
    let tmux = world.lead("tmux");
    start_job(&tmux);

    // The person starts typing something else; alice finishes meanwhile.
    tmux.type_text("half typed");
    world.go("alice");
    // The lead takes her report up on its own and asks her to stop; she shuts down,
    // and the lead says so: a shutdown is not a death.
    let screen = tmux.wait_for("the lead's own turn on alice's report", |s| {
        s.contains("Alice reports a.txt; she may stop.")
            && s.contains("team crew · alice shut down · bob busy")
            && s.contains("› half typed")
    });
    assert!(
        screen.contains("✉ alice: a.txt is written"),
        "the message shown first:\n{screen}"
    );
    assert!(
        screen.contains("» teammates' messages"),
        "the turn is shown as the team's:\n{screen}"
    );
    assert_eq!(world.clone_file("alice", "a.txt").as_deref(), Some("A\n"));

    // Bob finishes: the lead deletes the team, shutting him down too.
    world.go("bob");
    // The person's line survives both turns, untouched, at the prompt after them.
    let screen = tmux.wait_for("the lead's turn on bob's report, then the prompt", |s| {
        s.contains("Both files are written; the team is deleted.")
            && s.lines().rfind(|l| l.starts_with('›')).map(str::trim_end) == Some("› half typed")
    });
    assert!(
        screen.contains("shut down: bob"),
        "the deletion says bob shut down:\n{screen}"
    );
    assert!(
        !screen.contains("died") && !screen.contains("is no longer running"),
        "a shutdown is not a death:\n{screen}"
    );
    assert_eq!(
        count(&screen, "Alice reports a.txt"),
        1,
        "one turn per report:\n{screen}"
    );

    tmux.keys(&["C-u"]);
    exit(&tmux);
    let left = crate::suite::panes_interactive::workers_under(world.root.path());
    assert!(left.is_empty(), "workers left running: {left:?}");
}

/// The lead's turn on alice's report runs a long command: Esc stops it, and bob's
/// report then waits for the person's prompt.
const ESC_SCRIPT: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Write a.txt once GO is there, then tell the lead."}}
        - {name: Agent, input: {name: bob, prompt: "Write b.txt once GO is there, then tell the lead."}}
    - when: {last_user_contains: "spawned teammate bob"}
      text: "Alice and bob are on it."
    - when: {last_user_contains: "a.txt is written"}
      tool_calls:
        - {name: Bash, input: {command: "echo checking a.txt; sleep 60"}}
    - when: {last_user_contains: "b.txt is written"}
      text: "Bob reports b.txt."
    - text: "Noted."
    - text: "Noted."
    - text: "Noted."
  alice:
    - tool_calls:
        - {name: Bash, input: {command: "until [ -e GO ]; do sleep 0.05; done; echo A > a.txt"}}
    - tool_calls:
        - {name: SendMessage, input: {to: lead, summary: "a.txt is written", message: "a.txt is written"}}
    - text: "Alice done."
  bob:
    - tool_calls:
        - {name: Bash, input: {command: "until [ -e GO ]; do sleep 0.05; done; echo B > b.txt"}}
    - tool_calls:
        - {name: SendMessage, input: {to: lead, summary: "b.txt is written", message: "b.txt is written"}}
    - text: "Bob done."
"#;

#[test]
fn esc_stops_a_team_turn_and_later_messages_wait_for_the_persons_prompt() {
    let world = World::new(ESC_SCRIPT, "");
    let tmux = world.lead("in-process");
    start_job(&tmux);
    world.go("alice");
    tmux.wait_for("the team turn's long command", |s| {
        s.contains("» teammates' messages") && s.contains("echo checking a.txt")
    });
    tmux.keys(&["Escape"]);
    tmux.wait_for("the turn stopped and team turns paused", |s| {
        s.contains("teammates' messages now wait for your next prompt")
    });

    world.go("bob");
    tmux.wait_for("bob's report shown", |s| {
        s.contains("✉ bob: b.txt is written")
    });
    // Paused: no turn of its own however long the report waits.
    std::thread::sleep(Duration::from_millis(2500));
    let screen = tmux.screen();
    assert!(
        !screen.contains("Bob reports b.txt."),
        "no team turn while paused:\n{screen}"
    );
    assert_eq!(count(&screen, "» teammates' messages"), 1, "{screen}");

    // The person's prompt takes bob's report along.
    tmux.type_text("carry on");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the person's turn with bob's report", |s| {
        s.contains("Bob reports b.txt.")
    });
    exit(&tmux);
}

#[test]
fn with_team_turns_off_teammates_messages_wait_for_the_next_prompt() {
    let world = World::new(SCRIPT, "team_turns: false\n");
    let tmux = world.lead("in-process");
    start_job(&tmux);
    world.go("alice");
    tmux.wait_for("alice's report shown", |s| {
        s.contains("✉ alice: a.txt is written")
    });
    wait_until(
        "alice idle",
        Duration::from_secs(20),
        || tmux.screen().contains("alice idle").then_some(()),
        || tmux.screen(),
    );
    std::thread::sleep(Duration::from_millis(2500));
    let screen = tmux.screen();
    assert!(
        !screen.contains("» teammates' messages") && !screen.contains("Alice reports a.txt"),
        "no turn of the team's with team_turns: false:\n{screen}"
    );
    tmux.type_text("what did alice say?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the person's turn with alice's report", |s| {
        s.contains("Alice reports a.txt")
    });
    exit(&tmux);
}
