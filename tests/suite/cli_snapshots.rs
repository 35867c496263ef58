//! Snapshots of the CLIs' surface (issue 19): the `--help` of every command of `roo-mail`,
//! `roo-task`, `roo-worker` and `roo-lead`, and every `--json` shape of `roo-mail` and
//! `roo-task`, byte for byte — JSON key order included. A change fails here until its
//! snapshot in `snapshots/` is reviewed and accepted (`cargo insta review`, or move the
//! `.snap.new` file insta writes over the `.snap`); a snapshot whose command is gone
//! fails too, until it is deleted.
//!
//! Help is rendered [`COLUMNS`] wide without colours (stdout is a pipe), whatever the
//! terminal running the tests. JSON is printed as the CLI prints it, with the values that
//! change from run to run — times, generated message ids, pids, the temp home — replaced
//! by placeholders ([`redact`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regex::Regex;
use roo_tests::{TempHome, TestCommand, bin};

/// The width help is rendered at (clap caps it at 100 anyway).
const COLUMNS: &str = "100";

/// Where the snapshots live.
fn snapshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("suite/snapshots")
}

/// Snapshot names `snapshots/<name>.snap`, without the module prefix.
fn settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path(snapshot_dir());
    settings
}

/// Fails if `snapshots/` holds a `<prefix>*.snap` that no test asserted (its command is
/// gone or renamed).
fn assert_no_orphans(prefix: &str, asserted: &BTreeSet<String>) {
    let on_disk: BTreeSet<String> = std::fs::read_dir(snapshot_dir())
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".snap")?;
            stem.starts_with(prefix).then(|| stem.to_owned())
        })
        .collect();
    let orphans: Vec<&String> = on_disk.difference(asserted).collect();
    assert!(
        orphans.is_empty(),
        "snapshots of commands that no longer exist (delete them): {orphans:?}"
    );
}

// ---------------------------------------------------------------------------------------
// --help

/// `program path… --help`, as a person reading it in a 100-column pipe sees it.
/// Every `ROO_*` variable is removed: help shows the value of an `[env: …]` flag.
fn help(program: &str, path: &[String]) -> String {
    let mut cmd = TestCommand::new(bin(program))
        .args(path)
        .arg("--help")
        .env("COLUMNS", COLUMNS)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("ROO_") {
            cmd = cmd.env_remove(key);
        }
    }
    let out = cmd.run();
    out.assert_ok();
    out.stdout()
}

/// The subcommands a help lists under `Commands:` (clap's own `help` aside).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.strip_prefix("  "))
        .filter(|line| !line.starts_with(' '))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Snapshots the help of `path` and of every subcommand below it.
fn snapshot_help_tree(program: &str, path: Vec<String>, asserted: &mut BTreeSet<String>) {
    let text = help(program, &path);
    let name = std::iter::once(program.to_owned())
        .chain(path.iter().cloned())
        .collect::<Vec<_>>()
        .join("-");
    let name = format!("help-{name}");
    insta::assert_snapshot!(name.clone(), text);
    asserted.insert(name);
    for sub in subcommands(&text) {
        let mut below = path.clone();
        below.push(sub);
        snapshot_help_tree(program, below, asserted);
    }
}

#[test]
fn every_help_is_snapshotted() {
    let mut asserted = BTreeSet::new();
    settings().bind(|| {
        for program in ["roo-mail", "roo-task", "roo-worker", "roo-lead"] {
            snapshot_help_tree(program, Vec::new(), &mut asserted);
        }
    });
    // The walk found the nested commands, not just the tops.
    for expected in [
        "help-roo-mail-team-join",
        "help-roo-task-team-create",
        "help-roo-task-claim",
        "help-roo-lead-demo",
    ] {
        assert!(asserted.contains(expected), "{expected}: {asserted:?}");
    }
    assert_no_orphans("help-", &asserted);
}

#[test]
fn help_width_does_not_follow_the_terminal() {
    let narrow = TestCommand::new(bin("roo-task"))
        .args(["claim", "--help"])
        .env("COLUMNS", "40")
        .run();
    narrow.assert_ok();
    let wide = help("roo-task", &["claim".to_owned()]);
    // COLUMNS is honoured (so the snapshots pin it): a narrow pipe wraps sooner.
    assert_ne!(narrow.stdout(), wide);
    assert!(
        wide.lines().all(|line| line.chars().count() <= 100),
        "{wide}"
    );
}

// ---------------------------------------------------------------------------------------
// --json

/// `text` with the values that differ between runs replaced: the temp home and working
/// directory, times, generated message ids, pids, assignment keys and quarantine names.
fn redact(text: &str, env: &TempHome) -> String {
    let mut text = text
        .replace(&env.path().display().to_string(), "[home]")
        .replace(&env.cwd.path().display().to_string(), "[cwd]");
    for (pattern, with) in [
        (
            r"\d{4}-\d{2}-\d{2}T\d{2}[:-]\d{2}[:-]\d{2}\.\d{3}Z",
            "[time]",
        ),
        (r"msg-\d+-\d+-\d+(-[0-9a-f]{12})?", "[msg-id]"),
        (r#""pid": \d+"#, r#""pid": "[pid]""#),
        (r"assign-(\d+)-\d+", "assign-$1-[ms]"),
    ] {
        text = Regex::new(pattern)
            .unwrap()
            .replace_all(&text, with)
            .into_owned();
    }
    text
}

/// A team driven through every `--json` command, each output snapshotted.
struct Shapes {
    env: TempHome,
    asserted: BTreeSet<String>,
}

impl Shapes {
    /// Runs `program --team demo --json args…`, expects exit `code`, snapshots stdout as
    /// `json-<program>-<name>` and returns it (unredacted).
    fn json(&mut self, program: &str, name: &str, args: &[&str], code: i32) -> String {
        let out = self
            .env
            .cmd(program)
            .args(["--team", "demo", "--json"])
            .args(args)
            .run();
        out.assert_code(code);
        // Each shape is JSON (pretty, or one object per line for `watch`).
        let stdout = out.stdout();
        if name == "watch" {
            for line in stdout.lines() {
                serde_json::from_str::<serde_json::Value>(line).unwrap();
            }
        } else {
            out.json();
        }
        self.snapshot(&format!("json-{program}-{name}"), &stdout);
        stdout
    }

    fn snapshot(&mut self, name: &str, text: &str) {
        insta::assert_snapshot!(name.to_owned(), redact(text, &self.env));
        self.asserted.insert(name.to_owned());
    }
}

/// The `id` of the first message of a `send --json` array.
fn first_id(sent: &str) -> String {
    let sent: serde_json::Value = serde_json::from_str(sent).unwrap();
    sent[0]["id"].as_str().unwrap().to_owned()
}

#[test]
fn every_json_shape_is_snapshotted() {
    let mut s = Shapes {
        env: TempHome::new(),
        asserted: BTreeSet::new(),
    };
    let pid = std::process::id().to_string();
    settings().bind(|| {
        // Teams and members, through either CLI.
        s.json(
            "roo-mail",
            "team-create",
            &["team", "create", "--lead", "lead", "--member", "alice"]
                .iter()
                .chain(&["--member", "bob", "--member", "carol"])
                .chain(&["--description", "snapshots"])
                .copied()
                .collect::<Vec<_>>(),
            0,
        );
        let other = s
            .env
            .task()
            .args([
                "team", "create", "--team", "other", "--lead", "lead", "--json",
            ])
            .run();
        other.assert_ok();
        s.snapshot("json-roo-task-team-create", &other.stdout());
        s.json(
            "roo-mail",
            "team-add",
            &[
                "team",
                "add",
                "dave",
                "--agent-type",
                "Explore",
                "--model",
                "m1",
                "--color",
                "green",
                "--plan-mode-required",
            ],
            0,
        );
        s.json(
            "roo-mail",
            "team-join-new",
            &["team", "join", "erin", "--pid", &pid, "--backend", "tmux"]
                .iter()
                .chain(&["--pane-id", "%3", "--worktree", "/srv/wt/erin"])
                .copied()
                .collect::<Vec<_>>(),
            0,
        );
        s.json(
            "roo-task",
            "team-join-take-over",
            &[
                "team",
                "join",
                "carol",
                "--pid",
                &pid,
                "--agent-type",
                "Plan",
            ],
            0,
        );

        // Mail.
        let sent = s.json(
            "roo-mail",
            "send",
            &[
                "send",
                "--as",
                "lead",
                "--to",
                "alice",
                "--summary",
                "start on the parser",
            ]
            .iter()
            .chain(&["Please take task 1: the parser."])
            .copied()
            .collect::<Vec<_>>(),
            0,
        );
        let id = first_id(&sent);
        s.json(
            "roo-mail",
            "send-broadcast",
            &[
                "send",
                "--as",
                "lead",
                "--to",
                "*",
                "--type",
                "status_update",
            ]
            .iter()
            .chain(&["--id", "kickoff", "kick-off at noon"])
            .copied()
            .collect::<Vec<_>>(),
            0,
        );
        s.json(
            "roo-mail",
            "send-typed",
            &[
                "send",
                "--as",
                "lead",
                "--to",
                "alice",
                "--type",
                "shutdown_request",
            ]
            .iter()
            .chain(&["--request-id", "r1", "wrap up"])
            .copied()
            .collect::<Vec<_>>(),
            0,
        );
        s.json("roo-mail", "read", &["read", "--as", "alice"], 0);
        s.json(
            "roo-mail",
            "watch",
            &["watch", "--as", "bob", "--existing", "--count", "1"]
                .iter()
                .chain(&["--timeout", "30"])
                .copied()
                .collect::<Vec<_>>(),
            0,
        );
        s.json("roo-mail", "ack", &["ack", "--as", "alice", &id], 0);
        s.json("roo-mail", "status", &["status", &id], 0);
        s.json("roo-mail", "list", &["list"], 0);

        // Tasks.
        s.json(
            "roo-task",
            "create",
            &["create", "--subject", "the parser", "--path", "src/parser/"]
                .iter()
                .chain(&["--active-form", "Writing the parser", "--meta", "prio=1"])
                .chain(&["--description", "tokens, then the tree"])
                .copied()
                .collect::<Vec<_>>(),
            0,
        );
        s.json(
            "roo-task",
            "create-blocked",
            &["create", "--subject", "the tests", "--blocked-by", "1"],
            0,
        );
        s.json(
            "roo-task",
            "create-overlapping",
            &[
                "create",
                "--subject",
                "the lexer",
                "--path",
                "src/parser/lex.rs",
            ],
            0,
        );
        s.json("roo-task", "ready", &["ready"], 0);
        s.json(
            "roo-task",
            "update",
            &["update", "2", "--as", "lead", "--note", "after the parser"],
            0,
        );
        s.json("roo-task", "claim", &["claim", "1", "--as", "alice"], 0);
        s.json(
            "roo-task",
            "claim-already-owned",
            &["claim", "1", "--as", "bob"],
            1,
        );
        s.json(
            "roo-task",
            "claim-blocked",
            &["claim", "2", "--as", "bob"],
            1,
        );
        s.json(
            "roo-task",
            "claim-scope-conflict",
            &["claim", "3", "--as", "bob"],
            1,
        );
        s.json(
            "roo-task",
            "claim-none-ready",
            &["claim", "--next", "--as", "bob"],
            1,
        );
        s.json("roo-task", "renew", &["renew", "1", "--as", "alice"], 0);
        s.json(
            "roo-task",
            "add-usage",
            &[
                "add-usage",
                "1",
                "--as",
                "alice",
                "--input",
                "1200",
                "--output",
            ]
            .iter()
            .chain(&["340", "--requests", "1", "--cost", "0.0123"])
            .copied()
            .collect::<Vec<_>>(),
            0,
        );
        s.json("roo-task", "get", &["get", "1"], 0);
        s.json(
            "roo-task",
            "create-done",
            &["create", "--subject", "the readme"],
            0,
        );
        s.json(
            "roo-task",
            "update-completed",
            &["update", "4", "--status", "completed"],
            0,
        );
        s.json(
            "roo-task",
            "claim-not-pending",
            &["claim", "4", "--as", "bob"],
            1,
        );
        s.json("roo-task", "list", &["list"], 0);
        s.json(
            "roo-task",
            "assign",
            &["assign", "3", "bob", "--as", "lead"],
            0,
        );
        s.json(
            "roo-mail",
            "team-mark-dead",
            &[
                "team",
                "mark-dead",
                "bob",
                "--as",
                "lead",
                "--reason",
                "pane closed",
            ],
            0,
        );
        s.json(
            "roo-task",
            "create-ready",
            &["create", "--subject", "the release notes"],
            0,
        );
        s.json(
            "roo-task",
            "claim-next",
            &["claim", "--next", "--as", "dave"],
            0,
        );
        s.json("roo-mail", "team-remove", &["team", "remove", "dave"], 0);
        s.json("roo-task", "reclaim", &["reclaim", "--as", "lead"], 0);
        s.json("roo-task", "delete", &["delete", "2", "--as", "lead"], 0);

        // A broadcast that reaches only some recipients: alice's inbox cannot be written.
        let inbox = s.env.path().join("teams/demo/inboxes/alice.json");
        std::fs::remove_file(&inbox).unwrap();
        std::fs::create_dir_all(&inbox).unwrap();
        s.json(
            "roo-mail",
            "send-partial",
            &[
                "send",
                "--as",
                "lead",
                "--to",
                "*",
                "--type",
                "status_update",
            ]
            .iter()
            .chain(&["--id", "retry-me", "again"])
            .copied()
            .collect::<Vec<_>>(),
            3,
        );
        std::fs::remove_dir(&inbox).unwrap();

        // Damaged data: one JSON line on stderr, and what doctor lists.
        s.json("roo-mail", "doctor-clean", &["doctor"], 0);
        let tasks = s.env.path().join("tasks/demo/tasks.json");
        let mut doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&tasks).unwrap()).unwrap();
        doc["tasks"][0]["status"] = "done".into();
        std::fs::write(&tasks, serde_json::to_vec(&doc).unwrap()).unwrap();
        s.env
            .task()
            .args(["create", "--team", "demo", "--subject", "quarantine it"])
            .run()
            .assert_ok();
        let listed = s
            .env
            .task()
            .args(["list", "--team", "demo", "--json"])
            .run();
        listed.assert_ok();
        s.snapshot("json-roo-task-stderr-warnings", &listed.stderr());
        s.json("roo-task", "doctor", &["doctor"], 0);
        s.json(
            "roo-mail",
            "doctor-acknowledge",
            &["doctor", "--acknowledge"],
            0,
        );

        s.json("roo-mail", "team-show", &["team", "show"], 0);
        s.json("roo-task", "team-delete", &["team", "delete", "--force"], 0);
    });
    assert_no_orphans("json-", &s.asserted);
}
