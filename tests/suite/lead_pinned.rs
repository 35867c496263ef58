//! The interactive lead never buries a question: questions (teammates' and its own) stay
//! pinned above the prompt while the stream scrolls above them, keys answer the oldest,
//! the answer's record names the question it answered, and a spinner shows while the
//! model works. A private tmux server per test, the lead on a scripted model, its
//! teammates in-process.
//!
//! Directories live under Cargo's target tmp dir, as in `team_approvals`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_tests::{TempDir, Tmux, bin, wait_until};

struct World {
    root: TempDir,
}

impl World {
    fn new() -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("roo")).unwrap();
        root.write("project/README.md", "# demo\n");
        roo_tests::git_repo_with_identity(&root.join("project"));
        World { root }
    }

    /// The interactive lead with `script`, in tmux, at its prompt; `NO_COLOR` when
    /// `plain`.
    fn lead(&self, script: &str, plain: bool) -> Tmux {
        let script = self.root.write("script.yaml", script);
        let command = format!(
            "{} --provider script --script {} --trust-project --teammate-mode in-process",
            bin("roo-lead").display(),
            script.display()
        );
        let mut env = vec![
            ("ROO_HOME", self.root.join("roo").display().to_string()),
            ("HOME", self.root.join("home").display().to_string()),
            ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
        ];
        if plain {
            env.push(("NO_COLOR", "1".to_string()));
        }
        let tmux = Tmux::start(&self.root.join("project"), &env, &command);
        tmux.wait_for("the prompt", |s| s.contains("RooCode") && s.contains('›'));
        tmux
    }

    fn worktree_file(&self, member: &str, name: &str) -> PathBuf {
        self.root
            .join("project/.roocode/worktrees")
            .join(format!("crew+{member}"))
            .join(name)
    }
}

/// The last line of the screen that is not blank.
fn last_line(screen: &str) -> &str {
    screen
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
}

/// Alice asks; while her question waits the lead streams 20 lines, spawns bob, and bob
/// asks too; the lead's turn then takes 3 s more.
const TWO_ASK: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Write alpha.txt."}}
    - delay_ms: 2500
      text: "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\nline 9\nline 10\nline 11\nline 12\nline 13\nline 14\nline 15\nline 16\nline 17\nline 18\nline 19\nline 20\n"
      tool_calls:
        - {name: Agent, input: {name: bob, prompt: "Write beta.txt."}}
    - delay_ms: 3000
      text: "Both are on it."
    - text: "Noted."
    - text: "Noted."
    - text: "Noted."
  alice:
    - tool_calls:
        - {name: WriteFile, input: {path: alpha.txt, content: "a\n"}}
    - text: "Done."
  bob:
    - tool_calls:
        - {name: WriteFile, input: {path: beta.txt, content: "b\n"}}
    - text: "Done."
"#;

#[test]
fn a_question_stays_pinned_and_answerable_while_lines_stream_and_another_teammate_asks() {
    let world = World::new();
    // A small terminal without colours.
    let tmux = world.lead(TWO_ASK, true);
    tmux.run(&["resize-window", "-t", "main", "-x", "80", "-y", "24"]);
    tmux.type_text("Build it with alice and bob.");
    tmux.keys(&["Enter"]);
    tmux.wait_for("alice's question", |s| {
        s.contains("? teammate alice: WriteFile(alpha.txt)") && s.contains("[y] yes")
    });
    // 20 lines stream, bob joins and asks: alice's question is still there, under them,
    // and bob's waits behind it; the last line says so (no free prompt).
    let screen = tmux.wait_for("bob's question queued behind alice's", |s| {
        s.contains("line 20") && s.contains("then (Tab) ? teammate bob: WriteFile(beta.txt)")
    });
    let question = screen
        .find("? teammate alice: WriteFile(alpha.txt)")
        .unwrap();
    assert!(question > screen.find("line 20").unwrap(), "{screen}");
    // Bob's spawn may have scrolled off the 24 rows (and his join may come after his
    // question): the question stays under his spawn, looked for in the history.
    let history = tmux.run(&["capture-pane", "-p", "-S", "-", "-t", "main"]);
    let pinned = history
        .rfind("? teammate alice: WriteFile(alpha.txt)")
        .unwrap();
    assert!(pinned > history.find("Agent(bob)").unwrap(), "{history}");
    assert!(screen[question..].contains("write alpha.txt"), "{screen}");
    let last = last_line(&screen);
    assert!(
        last.contains("working") && last.contains("2 questions wait — y/n answers alice's"),
        "{screen}"
    );
    // A teammate's call saves no rule: no "always".
    assert!(!screen.contains("[a] always"), "{screen}");
    assert_eq!(screen.lines().count(), 24, "{screen}");
    let styled = tmux.run(&["capture-pane", "-p", "-e", "-t", "main"]);
    assert!(!styled.contains('\x1b'), "NO_COLOR: {styled:?}");
    assert!(!world.worktree_file("alice", "alpha.txt").exists());

    // Tab brings bob's first, and again alice's.
    tmux.keys(&["Tab"]);
    tmux.wait_for("bob's question first", |s| {
        s.contains("then (Tab) ? teammate alice: WriteFile(alpha.txt)")
            && last_line(s).contains("y/n answers bob's")
    });
    tmux.keys(&["Tab"]);
    tmux.wait_for("alice's question first again", |s| {
        last_line(s).contains("y/n answers alice's")
    });
    // y answers alice's (the first), and the record names it.
    tmux.keys(&["y"]);
    let screen = tmux.wait_for("the answer's record and bob's question first", |s| {
        s.contains("? teammate alice: WriteFile(alpha.txt) → allowed once")
            && last_line(s).contains("1 question waits — y/n answers bob's")
    });
    assert!(screen.contains("  write beta.txt"), "{screen}");
    wait_until(
        "alice's file",
        Duration::from_secs(20),
        || {
            world
                .worktree_file("alice", "alpha.txt")
                .is_file()
                .then_some(())
        },
        || tmux.screen(),
    );
    assert!(!world.worktree_file("bob", "beta.txt").exists());

    // Stray keys while a question waits go nowhere, during the run and after it.
    tmux.type_text("zq");
    let screen = tmux.wait_for("the run's end with bob's question still pinned", |s| {
        s.contains("Both are on it.") && last_line(s).starts_with("› 1 question waits")
    });
    tmux.type_text("xw");
    tmux.keys(&["n"]);
    let screen_after = tmux.wait_for("bob's answer", |s| {
        s.contains("? teammate bob: WriteFile(beta.txt) → denied")
    });
    for screen in [&screen, &screen_after] {
        assert!(
            !screen.contains("zq") && !screen.contains("xw"),
            "a stray key reached the prompt:\n{screen}"
        );
    }
    assert!(!world.worktree_file("bob", "beta.txt").exists());
    leave_at_the_free_prompt(&tmux);
}

#[test]
fn a_spinner_shows_elapsed_time_and_tokens_while_the_model_works_and_goes_after() {
    let world = World::new();
    let tmux = world.lead(
        r#"
agents:
  "*":
    - text: "Reading."
      usage: {input_tokens: 10, output_tokens: 42}
      tool_calls:
        - {name: ReadFile, input: {path: README.md}}
    - delay_ms: 3500
      text: "Thought it over."
"#,
        false,
    );
    tmux.type_text("think slowly");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the spinner at two seconds", |s| {
        last_line(s).contains("working · 2s · ↓ 42 tokens · Esc stops")
    });
    // The first response's reported usage counts; the second has not streamed yet.
    assert!(screen.contains("● ReadFile(README.md)"), "{screen}");
    assert!(!screen.contains("Thought it over."), "{screen}");
    let screen = tmux.wait_for("the answer", |s| s.contains("Thought it over."));
    assert!(
        !screen.contains("working ·"),
        "the spinner stays:\n{screen}"
    );
    assert_eq!(last_line(&screen).trim(), "›", "{screen}");
    tmux.type_text("/exit");
    tmux.keys(&["Enter"]);
    assert_eq!(tmux.wait_exit(), 0, "{}", tmux.screen());
}

/// The lead spawns alice and is done; alice asks after a pause, while the person is
/// at the prompt.
const LATE_ASK: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Write alpha.txt."}}
    - text: "Alice is on it."
    - text: "Noted."
    - text: "Noted."
  alice:
    - delay_ms: 2500
      tool_calls:
        - {name: WriteFile, input: {path: alpha.txt, content: "a\n"}}
    - text: "Done."
"#;

/// Issue 31 review, item 1: letters typed at the prompt as a teammate's question opens
/// (`please try again`, its `y`) answered the question. They are dropped while the
/// person types on; the question is answered only once it is armed and `[y]` shows.
#[test]
fn letters_typed_as_a_question_opens_do_not_answer_it() {
    let world = World::new();
    let tmux = world.lead(LATE_ASK, true);
    tmux.type_text("Build it with alice.");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the lead's turn done", |s| {
        s.contains("Alice is on it.") && last_line(s).trim() == "›"
    });
    // Type on, a key every 100 ms, until the question is there, and for two seconds
    // after: `y`s and `a`s among them.
    tmux.type_text("please ");
    let typed = "try again and say yes, always, yes yes yes";
    let mut keys = typed.chars().cycle();
    // The screen is read every fourth key only, so the keys stay well within the
    // typing gap even on a loaded machine.
    let mut after = None;
    let mut sent = 0;
    while after.is_none_or(|n| n < 20) {
        let c = keys.next().unwrap_or('y');
        tmux.type_text(&c.to_string());
        sent += 1;
        std::thread::sleep(Duration::from_millis(80));
        if after.is_none()
            && sent % 4 == 0
            && tmux
                .screen()
                .contains("? teammate alice: WriteFile(alpha.txt)")
        {
            after = Some(0);
        }
        after = after.map(|n| n + 1);
    }
    let screen = tmux.wait_for("alice's question armed", |s| {
        s.contains("[y] yes") && last_line(s).contains("y/n answers alice's")
    });
    assert!(
        !screen.contains("→ allowed") && !screen.contains("→ denied"),
        "a typed letter answered the question:\n{screen}"
    );
    assert!(
        screen.contains("typed before the question was ready dropped"),
        "{screen}"
    );
    assert!(!world.worktree_file("alice", "alpha.txt").exists());
    tmux.keys(&["y"]);
    tmux.wait_for("the answer's record", |s| {
        s.contains("? teammate alice: WriteFile(alpha.txt) → allowed once")
    });
    wait_until(
        "alice's file",
        Duration::from_secs(20),
        || {
            world
                .worktree_file("alice", "alpha.txt")
                .is_file()
                .then_some(())
        },
        || tmux.screen(),
    );
    // The line typed before the question opened is still at the prompt.
    tmux.wait_for("the prompt with the typed line", |s| {
        last_line(s).starts_with("› please ")
    });
    tmux.keys(&["C-u"]);
    tmux.type_text("/exit");
    tmux.keys(&["Enter"]);
    assert_eq!(tmux.wait_exit(), 0, "{}", tmux.screen());
}

/// Issue 31 review, item 3: `/team`'s full-screen view hid a teammate's question that
/// arrived while it was open. The view leaves, and the question is pinned.
#[test]
fn a_question_that_arrives_while_team_view_is_open_closes_the_view_and_is_pinned() {
    let world = World::new();
    let tmux = world.lead(LATE_ASK, true);
    tmux.type_text("Build it with alice.");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the lead's turn done", |s| {
        s.contains("Alice is on it.") && last_line(s).trim() == "›"
    });
    tmux.type_text("/team");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the team view", |s| {
        s.contains("team crew: ") && s.contains("q quit")
    });
    let screen = tmux.wait_for("the view gone and alice's question pinned", |s| {
        !s.contains("q quit")
            && s.contains("? teammate alice: WriteFile(alpha.txt)")
            && s.contains("[y] yes")
    });
    assert!(
        !world.worktree_file("alice", "alpha.txt").exists(),
        "{screen}"
    );
    tmux.keys(&["y"]);
    wait_until(
        "alice's file",
        Duration::from_secs(20),
        || {
            world
                .worktree_file("alice", "alpha.txt")
                .is_file()
                .then_some(())
        },
        || tmux.screen(),
    );
    leave_at_the_free_prompt(&tmux);
}

/// Issue 31 review, item 4: while questions wait, Ctrl+T gives the prompt the keys
/// (the question stays pinned), and Ctrl+T again gives them back.
#[test]
fn ctrl_t_types_at_the_prompt_while_a_question_stays_pinned() {
    let world = World::new();
    let tmux = world.lead(LATE_ASK, true);
    tmux.type_text("Build it with alice.");
    tmux.keys(&["Enter"]);
    tmux.wait_for("alice's question armed", |s| {
        s.contains("Alice is on it.") && last_line(s).contains("y/n answers alice's")
    });
    tmux.keys(&["C-t"]);
    tmux.type_text("hello yes");
    let screen = tmux.wait_for("the line at the prompt under the question", |s| {
        last_line(s).starts_with("› hello yes") && s.contains("Ctrl+T answers")
    });
    assert!(
        screen.contains("? teammate alice: WriteFile(alpha.txt)"),
        "{screen}"
    );
    assert!(!screen.contains("→ allowed"), "{screen}");
    tmux.keys(&["C-t"]);
    tmux.wait_for("the keys back at the question", |s| {
        last_line(s).contains("y/n answers alice's")
    });
    tmux.keys(&["y"]);
    tmux.wait_for("the answer's record", |s| {
        s.contains("? teammate alice: WriteFile(alpha.txt) → allowed once")
    });
    tmux.wait_for("the kept line at the prompt", |s| {
        last_line(s).starts_with("› hello yes")
    });
    tmux.keys(&["C-u"]);
    tmux.type_text("/exit");
    tmux.keys(&["Enter"]);
    assert_eq!(tmux.wait_exit(), 0, "{}", tmux.screen());
}

/// Issue 31 review: on a terminal under about 14 rows the pinned block outgrew the
/// screen and its headline scrolled away. At 80×7 the headline, a marker of what is
/// cut, the answer keys and the status line stay; `v` shows the whole call, `y` runs it.
#[test]
fn on_a_short_terminal_the_question_keeps_its_headline_keys_and_prompt() {
    let world = World::new();
    let steps: String = (1..=30).map(|i| format!("echo step{i}\\n")).collect();
    let script = format!(
        "agents:\n  \"*\":\n    - text: \"Running the steps.\"\n      tool_calls:\n        \
         - {{name: Bash, input: {{command: \"{steps}\"}}}}\n    - text: \"All steps ran.\"\n"
    );
    let tmux = world.lead(&script, true);
    tmux.run(&["resize-window", "-t", "main", "-x", "80", "-y", "7"]);
    tmux.wait_for("the short window", |s| s.lines().count() <= 7);
    tmux.type_text("run the steps");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the question armed", |s| {
        last_line(s).contains("y/n answers the lead's")
    });
    let lines: Vec<&str> = screen.lines().collect();
    assert!(lines.len() <= 7, "{screen}");
    assert!(
        screen.contains("? Bash(echo step1"),
        "headline gone:\n{screen}"
    );
    assert!(screen.contains("[y] yes"), "keys gone:\n{screen}");
    assert!(screen.contains("[v] view all"), "{screen}");
    assert!(
        screen.contains("cut: the terminal is only 7 rows high"),
        "{screen}"
    );
    tmux.keys(&["v"]);
    tmux.keys(&["y"]);
    tmux.wait_for("the steps run", |s| s.contains("All steps ran."));
    leave_at_the_free_prompt(&tmux);
}

/// Issue 31 review: at 80×6 the screen cut the call's only row (its headline cut short
/// too), and `y` ran a command the person never saw whole. Now `y` asks for `v` first.
#[test]
fn on_a_very_short_terminal_yes_needs_the_call_seen_first() {
    let world = World::new();
    let command = format!("echo {}", "a".repeat(69));
    let script = format!(
        "agents:\n  \"*\":\n    - text: \"Running it.\"\n      tool_calls:\n        \
         - {{name: Bash, input: {{command: \"{command}\"}}}}\n    - text: \"It ran.\"\n"
    );
    let tmux = world.lead(&script, true);
    tmux.run(&["resize-window", "-t", "main", "-x", "80", "-y", "6"]);
    tmux.wait_for("the short window", |s| s.lines().count() <= 6);
    tmux.type_text("run it");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the question armed", |s| {
        last_line(s).contains("answers the lead's")
    });
    assert!(screen.contains("rows cut"), "{screen}");
    tmux.keys(&["y"]);
    tmux.wait_for("the hint", |s| {
        s.contains("press v to see them before allowing it")
    });
    assert!(!tmux.screen().contains("It ran."));
    tmux.keys(&["v"]);
    tmux.wait_for("the whole call", |s| s.contains(&command));
    tmux.keys(&["y"]);
    tmux.wait_for("the command run", |s| s.contains("It ran."));
    leave_at_the_free_prompt(&tmux);
}

/// Issue 31 review: a question pinned before `/team` opened (the prompt had the keys
/// through Ctrl+T) stayed out of sight behind the view until a new one came. `/team`
/// now does not open while questions wait, says why, and the question stays answerable.
#[test]
fn team_view_does_not_open_over_a_question_already_waiting() {
    let world = World::new();
    let tmux = world.lead(LATE_ASK, true);
    tmux.type_text("Build it with alice.");
    tmux.keys(&["Enter"]);
    tmux.wait_for("alice's question armed", |s| {
        s.contains("Alice is on it.") && last_line(s).contains("y/n answers alice's")
    });
    tmux.keys(&["C-t"]);
    tmux.type_text("/team");
    tmux.wait_for("the command at the prompt", |s| {
        last_line(s).starts_with("› /team")
    });
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the refusal", |s| {
        s.contains("/team did not open: 1 question waits below")
    });
    assert!(!screen.contains("q quit"), "{screen}");
    assert!(
        screen.contains("? teammate alice: WriteFile(alpha.txt)"),
        "{screen}"
    );
    tmux.wait_for("the keys back at the question", |s| {
        last_line(s).contains("y/n answers alice's")
    });
    tmux.keys(&["y"]);
    wait_until(
        "alice's file",
        Duration::from_secs(20),
        || {
            world
                .worktree_file("alice", "alpha.txt")
                .is_file()
                .then_some(())
        },
        || tmux.screen(),
    );
    leave_at_the_free_prompt(&tmux);
}

/// Alice asks to write alpha.txt; denied, she would go on to beta.txt.
const PAUSE_ASK: &str = r#"
agents:
  lead:
    - tool_calls:
        - {name: TeamCreate, input: {team_name: crew}}
        - {name: Agent, input: {name: alice, prompt: "Write alpha.txt."}}
    - text: "Alice is on it."
    - text: "Noted."
    - text: "Noted."
  alice:
    - delay_ms: 2500
      tool_calls:
        - {name: WriteFile, input: {path: alpha.txt, content: "a\n"}}
    - tool_calls:
        - {name: WriteFile, input: {path: beta.txt, content: "b\n"}}
    - text: "Done."
"#;

/// Issue 31 review: no answer stopped a teammate. `p` on a teammate's question (shown
/// in the key legend) denies the call and stops the teammate's current work: it goes
/// idle and does not take its next step.
#[test]
fn p_denies_a_teammates_call_and_pauses_the_teammate() {
    let world = World::new();
    let tmux = world.lead(PAUSE_ASK, true);
    tmux.type_text("Build it with alice.");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("alice's question armed", |s| {
        s.contains("Alice is on it.") && last_line(s).contains("y/n answers alice's")
    });
    assert!(screen.contains("[p] no, pause alice"), "{screen}");
    tmux.keys(&["p"]);
    tmux.wait_for("the record and alice idle", |s| {
        s.contains("? teammate alice: WriteFile(alpha.txt) → denied, alice paused")
            && s.contains("alice idle")
    });
    // Alice's next step would ask about beta.txt: a message to the lead would come
    // first if she went on, so the lead's prompt being free and quiet is the check.
    let screen = tmux.wait_for("the free prompt", |s| last_line(s).trim() == "›");
    assert!(!screen.contains("beta.txt"), "{screen}");
    assert!(!world.worktree_file("alice", "alpha.txt").exists());
    tmux.type_text("/exit");
    tmux.keys(&["Enter"]);
    assert_eq!(tmux.wait_exit(), 0, "{}", tmux.screen());
    assert!(!world.worktree_file("alice", "beta.txt").exists());
}

/// Waits for the free prompt, types `/exit` and checks the lead ends with 0.
fn leave_at_the_free_prompt(tmux: &Tmux) {
    tmux.wait_for("the free prompt", |s| last_line(s).trim() == "›");
    tmux.type_text("/exit");
    tmux.keys(&["Enter"]);
    assert_eq!(tmux.wait_exit(), 0, "{}", tmux.screen());
}
