//! Checkpoints and `/rewind` in the interactive lead (a private tmux server per test), with
//! the scripted HTTP model recording every request: a rewind puts back the files the
//! agent changed in the last prompts and the conversation, and leaves everything else —
//! the user's own untracked file, the user's git refs, stash, index and config — as it was.

use std::collections::BTreeMap;
use std::path::Path;

use roo_tests::{MockLlm, TempHome, Tmux, bin, git, git_init_commit};

/// The bytes of every part of the user's repository that a checkpoint must never touch:
/// refs, packed refs, reflogs (the stash's included), the index, HEAD and config.
fn git_state(repo: &Path) -> BTreeMap<String, Vec<u8>> {
    fn add(dir: &Path, base: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                add(&path, base, out);
            } else {
                let rel = path.strip_prefix(base).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let git_dir = repo.join(".git");
    let mut out = BTreeMap::new();
    add(&git_dir.join("refs"), &git_dir, &mut out);
    add(&git_dir.join("logs"), &git_dir, &mut out);
    for file in ["packed-refs", "index", "HEAD", "config"] {
        if let Ok(bytes) = std::fs::read(git_dir.join(file)) {
            out.insert(file.to_string(), bytes);
        }
    }
    out
}

/// A repository with a stash, a staged change, a tag and packed refs: state of the user's
/// that a rewind must leave byte for byte.
fn repo(home: &TempHome) {
    let cwd = home.cwd.path();
    home.cwd.write("app.txt", "v0\n");
    home.cwd.write("lib.txt", "library\n");
    git_init_commit(cwd);
    git(cwd, &["tag", "v0"]);
    git(cwd, &["pack-refs", "--all"]);
    home.cwd.write("lib.txt", "stashed work\n");
    git(cwd, &["stash", "push", "-q", "-m", "users-stash"]);
    home.cwd.write("staged.txt", "staged\n");
    git(cwd, &["add", "staged.txt"]);
    // The user's own untracked file, which the agent never touches.
    home.cwd.write("notes.txt", "my notes\n");
    // Refresh the index's stat data now, so a `git status` of anyone later rewrites nothing.
    git(cwd, &["status", "--porcelain"]);
}

const SCRIPT: &str = r#"
agents:
  "*":
    - tool_calls:
        - {name: WriteFile, input: {path: app.txt, content: "v1\n"}}
    - text: "First change done."
    - tool_calls:
        - {name: EditFile, input: {path: app.txt, old_string: "v1", new_string: "v2"}}
    - tool_calls:
        - {name: Bash, input: {command: "echo made > made.txt"}}
    - text: "Second change done."
    - tool_calls:
        - {name: WriteFile, input: {path: app.txt, content: "v3\n"}}
        - {name: WriteFile, input: {path: src/new.txt, content: "new\n"}}
    - text: "Third change done."
    - text: "After the rewind."
"#;

/// Starts the interactive lead against `mock` over the home's project.
fn start(home: &TempHome, mock: &MockLlm) -> Tmux {
    let command = format!(
        "{} --provider anthropic --model claude-sonnet-4-5 --base-url {} --trust-project \
         --permission-mode bypassPermissions",
        bin("roo-lead").display(),
        mock.base_url("anthropic")
    );
    let tmux = Tmux::start(
        home.cwd.path(),
        &[
            ("ROO_HOME", home.path().display().to_string()),
            ("ANTHROPIC_API_KEY", "test-key".to_string()),
        ],
        &command,
    );
    tmux.wait_for("the banner and prompt", |s| {
        s.contains("RooCode") && s.contains('›')
    });
    tmux
}

fn prompt(tmux: &Tmux, text: &str, answer: &str) -> String {
    tmux.type_text(text);
    tmux.keys(&["Enter"]);
    tmux.wait_for(answer, |s| s.contains(answer))
}

/// The text of every message of a recorded request.
fn conversation(body: &serde_json::Value) -> String {
    serde_json::to_string(&body["messages"]).unwrap()
}

#[test]
fn rewind_puts_back_the_agents_files_and_conversation_and_nothing_of_the_users() {
    let home = TempHome::new();
    repo(&home);
    let before = git_state(home.cwd.path());
    let mock = MockLlm::start(SCRIPT);
    let tmux = start(&home, &mock);

    prompt(&tmux, "first change please", "First change done.");
    prompt(&tmux, "second change please", "Second change done.");
    // The user edits their own file between prompts.
    home.cwd.write("notes.txt", "my notes, edited\n");
    prompt(&tmux, "third change please", "Third change done.");
    assert_eq!(home.cwd.read("app.txt"), "v3\n");
    assert_eq!(home.cwd.read("made.txt"), "made\n");
    assert_eq!(home.cwd.read("src/new.txt"), "new\n");

    // The listing: newest first, with the files each prompt changed.
    tmux.type_text("/rewind");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the checkpoint listing", |s| {
        s.contains("rewind with /rewind N")
    });
    let third = screen.find("3  third change please").expect(&screen);
    let second = screen.find("2  second change please").expect(&screen);
    let first = screen.find("1  first change please").expect(&screen);
    assert!(third < second && second < first, "newest first:\n{screen}");
    assert!(screen[third..second].contains("+src/new.txt"), "{screen}");
    assert!(screen[second..first].contains("+made.txt"), "{screen}");
    assert!(screen[second..first].contains("~app.txt"), "{screen}");

    // Rewind the last two prompts: code and conversation.
    tmux.type_text("/rewind 2 both");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the rewind report", |s| s.contains("conversation rewound"));
    assert!(screen.contains("restored app.txt"), "{screen}");
    assert!(screen.contains("removed made.txt"), "{screen}");
    assert!(screen.contains("removed src/new.txt"), "{screen}");
    assert_eq!(home.cwd.read("app.txt"), "v1\n");
    assert!(!home.cwd.join("made.txt").exists());
    assert!(!home.cwd.join("src/new.txt").exists());
    assert_eq!(home.cwd.read("notes.txt"), "my notes, edited\n");
    assert_eq!(home.cwd.read("staged.txt"), "staged\n");
    assert_eq!(home.cwd.read("lib.txt"), "library\n");
    assert_eq!(
        git_state(home.cwd.path()),
        before,
        "the user's refs, stash, index or config changed"
    );

    // The next request carries the first prompt but none of the rewound turns.
    prompt(&tmux, "what now", "After the rewind.");
    let requests = mock.requests();
    let last = conversation(&requests.last().unwrap().body);
    assert!(last.contains("first change please"), "{last}");
    assert!(last.contains("what now"), "{last}");
    for gone in [
        "second change please",
        "third change please",
        "Second change done.",
    ] {
        assert!(!last.contains(gone), "{gone} is still sent:\n{last}");
    }

    tmux.keys(&["C-c"]);
    tmux.wait_for("the exit hint", |s| {
        s.contains("press Ctrl+C again to exit")
    });
    tmux.keys(&["C-c"]);
    assert_eq!(tmux.wait_exit(), 0);

    // Headless, the past session's checkpoints are listed, newest first.
    let out = home.cmd("roo-lead").arg("--rewind").run();
    out.assert_ok();
    let listed = out.stdout();
    let now = listed.find("3  what now").expect(&listed);
    let undo = listed
        .find("2  (the files as they were before rewinding to 2)")
        .expect(&listed);
    let first = listed.find("1  first change please").expect(&listed);
    assert!(now < undo && undo < first, "{listed}");
    assert!(listed[undo..first].contains("~src/new.txt"), "{listed}");
    assert!(
        listed.contains("rewind with: roo-lead --resume"),
        "{listed}"
    );
}

/// Bytes of every file under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => bytes_under(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

/// A command's checkpoint keeps the whole tree: one whose files together are larger than
/// the store may hold (`max_total_mb`) is not copied into `ROO_HOME` at all, as one with too
/// many files is not walked (before, the first command of a session copied every file of
/// up to `max_file_kb` into the store, whatever their total: a project's untracked data
/// could fill the disk and stall the agent). It is said once, to the person and the agent.
#[test]
fn a_command_in_a_tree_larger_than_the_store_limit_copies_nothing_into_roo_home() {
    let home = TempHome::new();
    let cwd = home.cwd.path();
    home.cwd.write("app.txt", "v0\n");
    git_init_commit(cwd);
    // Six untracked files of 600 KiB each (3.5 MiB, distinct contents), each under the
    // per-file limit; the store may hold 1 MiB.
    for i in 0..6u8 {
        let content: Vec<u8> = (0..600 * 1024u32)
            .map(|n| (n.wrapping_mul(31).wrapping_add(u32::from(i) * 7) % 251) as u8)
            .collect();
        home.cwd.write(format!("data/part{i}.bin"), content);
    }
    std::fs::write(
        home.path().join("config.yaml"),
        "checkpoints:\n  max_total_mb: 1\n  max_file_kb: 1024\n",
    )
    .unwrap();
    let script = home.home.write(
        "script.yaml",
        r#"
agents:
  "*":
    - tool_calls:
        - {name: Bash, input: {command: "echo ran > ran.txt"}}
    - tool_calls:
        - {name: Bash, input: {command: "echo again >> ran.txt"}}
    - text: "Done."
"#,
    );
    let out = home
        .cmd("roo-lead")
        .args(["-p", "run it", "--provider", "script", "--script"])
        .arg(&script)
        .args(["--permission-mode", "bypassPermissions", "--trust-project"])
        .run();
    out.assert_ok();
    assert_eq!(home.cwd.read("ran.txt"), "ran\nagain\n");
    let kept = bytes_under(&home.path().join("checkpoints"));
    assert!(
        kept < 1 << 20,
        "{kept} bytes kept under ROO_HOME/checkpoints for a store limit of 1 MiB"
    );
    // The person is told, once, even in a quiet `-p` run (before, nothing was said).
    let stderr = out.stderr();
    assert_eq!(
        stderr
            .matches("shell commands are not checkpointed for the rest of this session")
            .count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("max_total_mb"), "{stderr}");
}
