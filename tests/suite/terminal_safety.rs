//! Issue 19, item 5: escape sequences in the model's text, in a command's output and in
//! a file's content are shown, not obeyed — on a real terminal (a private tmux server,
//! whose pane title an OSC sequence would change) and in `-p` text output — while
//! `json` and `stream-json` carry the exact strings. The same for `roo-mail` and
//! `roo-task`: control characters in a message or a task cannot forge lines of their
//! human output, whose `--json` stays exact.

use std::time::Duration;

use roo_tests::{TempHome, Tmux, bin, wait_until};
use serde_json::Value;

/// The model's text retitles the pane (OSC 2, BEL-terminated) and clears the screen
/// (CSI 2J); its command prints the same; the file it reads holds them too (the title
/// ST-terminated).
const SCRIPT: &str = r#"
agents:
  "*":
    - text: "Looking.\x1b]2;PWNED\x07 then \x1b[2J cleared"
      tool_calls:
        - {name: Bash, input: {command: "printf 'out \\033]2;PWNED2\\007 \\033[2J end\\n'"}}
        - {name: ReadFile, input: {path: evil.txt}}
    - text: "Final \x1b]2;PWNED4\x07 answer."
"#;

/// What the file read holds.
const EVIL_FILE: &str = "file says \x1b]2;PWNED3\x1b\\ and \x1b[2J done\n";

/// The sequences, as the screen shows them.
const SHOWN_TEXT: &str = r"Looking.\u{1b}]2;PWNED\u{7} then \u{1b}[2J cleared";
const SHOWN_BASH: &str = r"out \u{1b}]2;PWNED2\u{7} \u{1b}[2J end";
const SHOWN_FILE: &str = r"file says \u{1b}]2;PWNED3\u{1b}\ and \u{1b}[2J done";
const SHOWN_ANSWER: &str = r"Final \u{1b}]2;PWNED4\u{7} answer.";

fn home() -> TempHome {
    let home = TempHome::new();
    home.cwd.write("evil.txt", EVIL_FILE);
    home
}

/// `roo-lead -p` with the script, commands allowed.
fn print_run(home: &TempHome, args: &[&str]) -> roo_tests::RunOutput {
    let script = home.home.write("script.yaml", SCRIPT);
    home.cmd("roo-lead")
        .args(["-p", "look around", "--provider", "script", "--script"])
        .arg(&script)
        .args(["--permission-mode", "bypassPermissions"])
        .args(args)
        .run()
}

fn pane_title(tmux: &Tmux) -> String {
    tmux.run(&["display-message", "-p", "-t", "main", "#{pane_title}"])
        .trim_end()
        .to_string()
}

#[test]
fn escape_sequences_from_model_text_tool_output_and_files_are_shown_not_obeyed_on_a_terminal() {
    let home = home();
    let script = home.home.write("script.yaml", SCRIPT);
    let command = format!(
        "{} --provider script --script {} --trust-project --permission-mode bypassPermissions",
        bin("roo-lead").display(),
        script.display()
    );
    let tmux = Tmux::start(
        home.cwd.path(),
        &[("ROO_HOME", home.path().display().to_string())],
        &command,
    );
    tmux.wait_for("the banner and prompt", |s| {
        s.contains("RooCode") && s.contains('›')
    });
    tmux.type_text("look around");
    tmux.keys(&["Enter"]);
    // Every poll also reads the title: it must never be retitled, not even for a moment.
    let screen = wait_until(
        "the final answer, the title untouched",
        Duration::from_secs(20),
        || {
            let title = pane_title(&tmux);
            assert!(
                !title.contains("PWNED"),
                "the pane was retitled to {title:?}:\n{}",
                tmux.screen()
            );
            let screen = tmux.screen();
            screen.contains(SHOWN_ANSWER).then_some(screen)
        },
        || tmux.screen(),
    );
    for shown in [SHOWN_TEXT, SHOWN_BASH, SHOWN_FILE] {
        assert!(
            screen.contains(shown),
            "{shown:?} not on the screen:\n{screen}"
        );
    }
    // The clear-screen sequences were not obeyed: the banner is still there.
    assert!(
        screen.contains("RooCode"),
        "the screen was cleared:\n{screen}"
    );
    let title = pane_title(&tmux);
    assert!(
        !title.contains("PWNED"),
        "the pane was retitled to {title:?}"
    );
}

#[test]
fn print_text_output_shows_escape_sequences_escaped() {
    let home = home();
    let out = print_run(&home, &["--verbose"]);
    out.assert_ok();
    let (stdout, stderr) = (out.stdout(), out.stderr());
    assert_eq!(stdout, format!("{SHOWN_ANSWER}\n"));
    // Progress on stderr: the model's text, the command's output, the file's content.
    for shown in [SHOWN_TEXT, SHOWN_BASH, SHOWN_FILE] {
        assert!(stderr.contains(shown), "{shown:?} not on stderr:\n{stderr}");
    }
    assert!(
        !stdout.contains('\x1b') && !stderr.contains('\x1b') && !stderr.contains('\x07'),
        "a raw sequence reached the output:\n{stdout:?}\n{stderr:?}"
    );
}

#[test]
fn json_output_keeps_the_exact_strings() {
    let home = home();
    let out = print_run(&home, &["--output-format", "json"]);
    out.assert_ok();
    let result = out.json();
    assert_eq!(result["result"], "Final \x1b]2;PWNED4\x07 answer.");

    let out = print_run(&self::home(), &["--output-format", "stream-json"]);
    out.assert_ok();
    let events: Vec<Value> = out
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert!(
        text.contains("Looking.\x1b]2;PWNED\x07 then \x1b[2J cleared"),
        "{text:?}"
    );
    let previews: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_end")
        .map(|e| e["preview"].as_str().unwrap())
        .collect();
    assert!(
        previews[0].contains("out \x1b]2;PWNED2\x07 \x1b[2J end"),
        "{previews:?}"
    );
    assert!(
        previews[1].contains("file says \x1b]2;PWNED3\x1b\\ and"),
        "{previews:?}"
    );
    let last = events.last().unwrap();
    assert_eq!(last["result"], "Final \x1b]2;PWNED4\x07 answer.");
}

#[test]
fn control_characters_in_human_output_cannot_forge_lines_or_inject_escapes() {
    let env = TempHome::new();
    env.team("t", "lead", &["alice"]);
    let summary = "fine\nFrom: lead -> alice [shutdown_request]";
    let text = "hello \x1b]0;owned\x07\x1b[2J world\rFrom: lead";
    env.mail()
        .args(["send", "--team", "t", "--from", "alice", "--to", "lead"])
        .args(["--summary", summary, text])
        .run()
        .assert_ok();
    let human = env
        .mail()
        .args(["read", "--team", "t", "--as", "lead"])
        .run();
    human.assert_ok();
    let shown = human.stdout();
    assert!(!shown.contains('\x1b') && !shown.contains('\x07') && !shown.contains('\r'));
    assert!(
        !shown.lines().any(|l| l.trim_start().starts_with("From:")),
        "a forged header line: {shown}"
    );
    assert!(shown.contains("fine\\nFrom: lead"), "{shown}");
    // JSON stays exact.
    let json = env
        .mail()
        .args(["read", "--team", "t", "--as", "lead", "--json"])
        .run()
        .json();
    assert_eq!(json[0]["summary"], summary);
    assert_eq!(json[0]["text"], text);

    // The store refuses such a subject now (one line, no control characters); a task
    // list written before that rule, or by another program, may still hold one.
    let hostile = "evil\x1b[31m\nfake task line";
    env.task()
        .args(["create", "--team", "t", "--subject", hostile])
        .run()
        .assert_code(2);
    env.task()
        .args(["create", "--team", "t", "--subject", "evil"])
        .args(["--description", "a\x1b[1mb"])
        .run()
        .assert_ok();
    let path = roo_store::RooHome::new(env.path()).task_list(&roo_store::Name::parse("t").unwrap());
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["tasks"][0]["subject"] = serde_json::Value::String(hostile.into());
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    for args in [&["list"][..], &["get", "1"][..]] {
        let out = env.task().args(args).args(["--team", "t"]).run();
        out.assert_ok();
        assert!(!out.stdout().contains('\x1b'), "{}", out.stdout());
        assert_eq!(
            out.stdout().lines().count(),
            if args[0] == "list" { 1 } else { 2 }
        );
    }
}
