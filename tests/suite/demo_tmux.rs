//! `roo-lead demo` in a terminal: inside a private tmux server (`tmux -L roo-test-… -f
//! /dev/null`), where detection puts alice and bob in panes of the demo's window, and
//! with `--teammate-mode in-process` on the same terminal, where their lines are
//! interleaved with the lead's, prefixed with their names in their colours.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_tests::{TempDir, Tmux, bin, wait_until};

use super::panes_interactive::workers_under;

/// A scratch root with the `TMPDIR` the demo makes its directory in and a `HOME`.
fn world() -> (TempDir, PathBuf) {
    let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    std::fs::create_dir_all(root.join("tmp")).unwrap();
    std::fs::create_dir_all(root.join("home")).unwrap();
    let tmp = root.join("tmp");
    (root, tmp)
}

/// Runs `roo-lead demo <flags>` as the only pane of a private tmux server. The user's
/// `ROO_STORE` names a PostgreSQL server nobody runs: the demo keeps its team in files,
/// and so must the pane workers it starts.
fn start_demo(root: &TempDir, flags: &str) -> Tmux {
    Tmux::start(
        root.path(),
        &[
            ("ROO_STORE", "postgresql://roo@127.0.0.1:1/roo".to_string()),
            ("TMPDIR", root.join("tmp").display().to_string()),
            ("HOME", root.join("home").display().to_string()),
            ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
            ("TERM", "xterm-256color".to_string()),
        ],
        &format!("{} demo --timeout 120 {flags}", bin("roo-lead").display()),
    )
}

/// Everything the demo's pane printed, its history included (`-e`: with colours).
fn history(tmux: &Tmux, pane: &str, escapes: bool) -> String {
    let mut args = vec!["capture-pane", "-p", "-J", "-S", "-", "-t", pane];
    if escapes {
        args.push("-e");
    }
    tmux.run(&args)
}

/// The value after `label` on the summary line that starts with it.
fn summary_line<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no summary line {label:?} in:\n{text}"))
}

/// `name N` in a summary part such as `19 (lead 10, alice 4, bob 5)`.
fn part_of(line: &str, name: &str) -> u64 {
    line.split(['(', ',', ')'])
        .map(str::trim)
        .find_map(|p| p.strip_prefix(&format!("{name} ")))
        .and_then(|n| n.split('/').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no part for {name} in {line:?}"))
}

#[test]
fn the_demo_in_tmux_opens_titled_coloured_panes_for_alice_and_bob_and_leaves_nothing() {
    let (root, tmp) = world();
    let tmux = start_demo(&root, "--pace-ms 250");
    let lead_pane = tmux.panes()[0].id.clone();
    let options_before = tmux.run(&["show-options", "-w", "-t", &lead_pane]);
    // While it runs: every pane other than the demo's, with what it last showed.
    let seen: std::cell::RefCell<BTreeMap<String, (String, String)>> = Default::default();
    let code = wait_until(
        "the demo to end",
        Duration::from_secs(120),
        || {
            for pane in tmux.panes() {
                if pane.id == lead_pane || pane.dead {
                    continue;
                }
                // The pane may close at any time: a failed query counts as nothing.
                let ask = |args: &[&str]| {
                    std::process::Command::new("tmux")
                        .args(["-L", tmux.socket(), "-f", "/dev/null"])
                        .args(args)
                        .output()
                        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                        .unwrap_or_default()
                };
                // With its history: it only grows, so the longest is the latest.
                let screen = ask(&["capture-pane", "-p", "-J", "-S", "-", "-t", &pane.id]);
                // Title and colour read at once: a pane is titled, then coloured.
                let dressed = ask(&[
                    "display-message",
                    "-p",
                    "-t",
                    &pane.id,
                    "#{@roo-color}\t#{pane_title}",
                ]);
                let Some((colour, title)) = dressed.trim_end().split_once('\t') else {
                    continue;
                };
                if colour.is_empty() {
                    continue; // a pane still being dressed
                }
                let (colour, title) = (colour.to_string(), title.to_string());
                let mut seen = seen.borrow_mut();
                let entry = seen.entry(title).or_default();
                if screen.trim().len() >= entry.0.trim().len() {
                    entry.0 = screen;
                }
                entry.1 = colour;
            }
            tmux.exit_status()
        },
        || format!("{}\nseen: {:#?}", tmux.all_screens(), seen.borrow()),
    );
    let seen = seen.into_inner();
    let out = history(&tmux, &lead_pane, false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("teammates run in tmux panes"), "{out}");

    // A pane each, titled with the name, coloured, showing the worker's own work.
    let titles: Vec<&String> = seen.keys().collect();
    assert_eq!(titles, ["alice", "bob"], "{seen:#?}");
    let (alice, alice_colour) = &seen["alice"];
    let (bob, bob_colour) = &seen["bob"];
    assert!(
        !alice_colour.is_empty() && !bob_colour.is_empty() && alice_colour != bob_colour,
        "{alice_colour:?} {bob_colour:?}"
    );
    assert!(
        alice.contains("● Bash(sh tests/test_slug.sh)"),
        "alice's pane:\n{alice}"
    );
    assert!(
        bob.contains("● Bash(sh tests/test_stats.sh)"),
        "bob's pane:\n{bob}"
    );
    // Their work stays in their panes, not in the lead's.
    assert!(!out.contains("alice  │"), "{out}");

    // The summary counts the pane teammates' messages, tokens and requests.
    assert_eq!(summary_line(&out, "tasks"), "3/3 completed", "{out}");
    let messages = summary_line(&out, "messages");
    assert!(
        messages.contains(" text") && !messages.starts_with("0 "),
        "{out}"
    );
    for line in [summary_line(&out, "tokens"), summary_line(&out, "requests")] {
        for name in ["lead", "alice", "bob"] {
            assert!(part_of(line, name) > 0, "{name} in {line:?}");
        }
    }

    // Nothing left: no pane but the demo's, its window as it was, no worker, no dir.
    let panes = tmux.panes();
    assert_eq!(panes.len(), 1, "{panes:#?}");
    assert_eq!(
        tmux.run(&["show-options", "-w", "-t", &lead_pane]),
        options_before
    );
    assert_eq!(workers_under(root.path()), Vec::<String>::new());
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn the_demo_in_process_on_a_terminal_prefixes_teammates_lines_with_coloured_names() {
    let (root, tmp) = world();
    let tmux = start_demo(&root, "--pace-ms 0 --teammate-mode in-process");
    let code = wait_until(
        "the demo to end",
        Duration::from_secs(120),
        || tmux.exit_status(),
        || tmux.all_screens(),
    );
    let out = history(&tmux, "main", false);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        tmux.panes().len(),
        1,
        "no pane opened: {}",
        tmux.all_screens()
    );
    for needle in [
        "teammates run in-process",
        "alice  │ ● Bash(sh tests/test_slug.sh)",
        "bob    │ ● Bash(sh tests/test_stats.sh)",
    ] {
        assert!(out.contains(needle), "{needle:?} missing in:\n{out}");
    }
    assert_eq!(summary_line(&out, "tasks"), "3/3 completed", "{out}");

    // On a terminal each name is in its own colour: a foreground SGR in the escapes
    // right before the name that starts a prefixed line.
    let coloured = history(&tmux, "main", true);
    let colour_of = |name: &str| -> String {
        coloured
            .lines()
            .filter(|l| strip_escapes(l).starts_with(&format!("{name:<6} │")))
            .find_map(|l| foreground(&l[..l.find(name)?]))
            .unwrap_or_else(|| panic!("{name}'s prefix is not coloured:\n{coloured}"))
    };
    let (alice, bob) = (colour_of("alice"), colour_of("bob"));
    assert_ne!(alice, bob, "alice and bob share a colour");
    assert_eq!(workers_under(root.path()), Vec::<String>::new());
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `text` without its `ESC [ … m` sequences.
fn strip_escapes(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        rest = after.find('m').map(|m| &after[m + 1..]).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// The last foreground colour set by the SGR sequences of `escapes` (which hold only
/// escape sequences), e.g. `34` or `38;5;208`.
fn foreground(escapes: &str) -> Option<String> {
    if !strip_escapes(escapes).is_empty() {
        return None;
    }
    let mut colour = None;
    for sgr in escapes.split("\x1b[").filter_map(|s| s.strip_suffix('m')) {
        let params: Vec<&str> = sgr.split(';').collect();
        let mut i = 0;
        while i < params.len() {
            match params[i].parse::<u32>().unwrap_or(0) {
                0 | 39 => colour = None,
                n @ (30..=37 | 90..=97) => colour = Some(n.to_string()),
                38 => {
                    let len = if params.get(i + 1) == Some(&"5") {
                        3
                    } else {
                        5
                    };
                    colour = Some(params[i..(i + len).min(params.len())].join(";"));
                    i += len - 1;
                }
                _ => {}
            }
            i += 1;
        }
    }
    colour
}

#[test]
fn the_demo_on_a_terminal_outside_tmux_runs_in_process_not_in_a_detached_session() {
    let (root, tmp) = world();
    // tmux is installed but the demo's terminal is not inside it (the harness's pane
    // variables removed). Its default server's socket goes under the test's directory,
    // so a detached session, if one were made, would not be on a real server.
    let sockets = root.join("tmux-sockets");
    std::fs::create_dir_all(&sockets).unwrap();
    let tmux = Tmux::start(
        root.path(),
        &[
            ("TMPDIR", tmp.display().to_string()),
            ("HOME", root.join("home").display().to_string()),
            ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
            ("TERM", "xterm-256color".to_string()),
        ],
        &format!(
            "env -u TMUX -u TMUX_PANE TMUX_TMPDIR='{}' {} demo --pace-ms 0 --timeout 120",
            sockets.display(),
            bin("roo-lead").display()
        ),
    );
    let code = wait_until(
        "the demo to end",
        Duration::from_secs(120),
        || tmux.exit_status(),
        || tmux.all_screens(),
    );
    let kill_stray_server = || {
        for entry in walk(&sockets) {
            let _ = std::process::Command::new("tmux")
                .arg("-S")
                .arg(&entry)
                .arg("kill-server")
                .stderr(std::process::Stdio::null())
                .status();
        }
    };
    let out = history(&tmux, "main", false);
    let stray = walk(&sockets);
    kill_stray_server();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("teammates run in-process"), "{out}");
    assert!(
        out.contains("alice  │ ● Bash(sh tests/test_slug.sh)"),
        "{out}"
    );
    assert!(stray.is_empty(), "a tmux server was started: {stray:?}");
    assert_eq!(workers_under(root.path()), Vec::<String>::new());
}

/// Every file under `dir`, recursively.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}
