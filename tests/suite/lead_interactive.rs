//! The interactive `roo-lead` in a real terminal: a private tmux server per test.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use roo_tests::{TempHome, Tmux, bin, bugfix_repo, process_gone, read_pid, wait_until};

/// Starts `roo-lead` with a script in a tmux pane over the home's project.
fn start(home: &TempHome, script: &Path, extra: &str) -> Tmux {
    let command = format!(
        "{} --provider script --script {} --trust-project {extra}",
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
    tmux
}

#[test]
fn a_session_streams_asks_and_remembers_always_allow() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let script = home.home.write(
        "session.yaml",
        r#"
agents:
  "*":
    - text: "Reading calc.py."
      tool_calls:
        - {name: ReadFile, input: {path: calc.py}}
    - text: "Fixing the loop."
      tool_calls:
        - {name: EditFile, input: {path: calc.py, old_string: "    for v in values[1:]:", new_string: "    for v in values:"}}
    - text: "Fixed the loop in average()."
    - text: "Tidying the docstring."
      tool_calls:
        - {name: EditFile, input: {path: calc.py, old_string: "Small statistics helpers.", new_string: "Small statistics helpers (mean, spread)."}}
    - text: "Second edit done."
"#,
    );
    let tmux = start(&home, &script, "");
    tmux.type_text("fix the bug in calc.py");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the permission question for the edit", |s| {
        s.contains("[y] yes") && s.contains("EditFile(calc.py)")
    });
    assert!(
        screen.contains("Reading calc.py."),
        "streamed text:\n{screen}"
    );
    assert!(
        screen.contains("● ReadFile(calc.py)"),
        "tool line:\n{screen}"
    );
    assert!(
        screen.contains("always (saves: EditFile(:/calc.py))"),
        "the rule \"always\" saves is shown:\n{screen}"
    );
    tmux.keys(&["a"]);
    tmux.wait_for("the answer after the edit", |s| {
        s.contains("always allowed") && s.contains("Fixed the loop in average().")
    });
    assert!(home.cwd.read("calc.py").contains("    for v in values:\n"));
    let local = home.cwd.read(".roocode/config.local.yaml");
    assert!(
        local.contains("EditFile"),
        "always-allow rule saved:\n{local}"
    );

    // The saved rule covers the next edit of the file: no second question.
    tmux.type_text("tidy the docstring");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the second answer", |s| s.contains("Second edit done."));
    // An answered question leaves the pinned block and one record in the stream.
    assert_eq!(
        screen.matches("? EditFile(calc.py)").count(),
        1,
        "asked again:\n{screen}"
    );
    assert!(!screen.contains("[y] yes"), "{screen}");
    assert!(home.cwd.read("calc.py").contains("(mean, spread)"));

    // Slash commands never reach the model.
    tmux.type_text("/cost");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the cost report", |s| {
        s.contains("cache read") && s.contains("tokens")
    });
    tmux.type_text("/mode acceptEdits");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the mode change", |s| {
        s.contains("permission mode: acceptEdits")
    });
    tmux.type_text("/nonsense");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the unknown-command error", |s| {
        s.contains("unknown command /nonsense")
    });

    // Ctrl+C twice leaves.
    tmux.keys(&["C-c"]);
    tmux.wait_for("the exit hint", |s| {
        s.contains("press Ctrl+C again to exit")
    });
    tmux.keys(&["C-c"]);
    assert_eq!(tmux.wait_exit(), 0);
}

#[test]
fn escape_stops_a_long_command_but_not_the_program() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let script = home.home.write(
        "long.yaml",
        r#"
agents:
  "*":
    - text: "Starting the long job."
      tool_calls:
        - name: Bash
          input: {command: "echo $$ > bash.pid; sleep 300 & echo $! > sleep.pid; wait", timeout_ms: 600000}
    - text: "Still here after the stop."
"#,
    );
    let tmux = start(&home, &script, "--permission-mode bypassPermissions");
    tmux.type_text("run the long job");
    tmux.keys(&["Enter"]);
    let sleep_pid = wait_until(
        "the long command to start",
        Duration::from_secs(20),
        || read_pid(&home.cwd.join("sleep.pid")),
        || tmux.screen(),
    );
    let bash_pid = read_pid(&home.cwd.join("bash.pid")).unwrap();
    tmux.keys(&["Escape"]);
    let stopped = std::panic::catch_unwind(|| {
        tmux.wait_for("the run to stop", |s| s.contains("stopped"));
        wait_until(
            "the command's process group to be killed",
            Duration::from_secs(10),
            || process_gone(sleep_pid).then_some(()),
            || tmux.screen(),
        );
    });
    if let Err(panic) = stopped {
        let _ = killpg(Pid::from_raw(bash_pid), Signal::SIGKILL);
        std::panic::resume_unwind(panic);
    }
    assert!(!tmux.exited(), "Esc stops the loop, not the program");

    tmux.type_text("are you still there?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the next answer", |s| {
        s.contains("Still here after the stop.")
    });
    tmux.type_text("/exit");
    tmux.keys(&["Enter"]);
    assert_eq!(tmux.wait_exit(), 0);
}

#[test]
fn mcp_servers_in_the_repl_warn_list_prompts_restart_and_stop_on_escape_without_painting_stderr() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let everything = roo_tests::mcp_servers_dir().join(roo_tests::EVERYTHING_ENTRY);
    home.home.write(
        "config.yaml",
        format!(
            "mcp_defer: never\nmcp_servers:\n  everything:\n    command: node\n    args: [\"{}\", \"stdio\"]\n  ghost:\n    command: /nonexistent/mcp-server\n",
            everything.display()
        ),
    );
    let script = home.home.write(
        "mcp.yaml",
        r#"
agents:
  "*":
    - text: "Hello."
    - when: {last_user_contains: "What's weather in Paris"}
      text: "Sunny in Paris."
    - text: "Starting the long operation."
      tool_calls:
        - {name: mcp__everything__trigger-long-running-operation, input: {duration: 300, steps: 300}}
    - text: "Still here after the stop."
"#,
    );
    let tmux = start(&home, &script, "--permission-mode bypassPermissions");
    tmux.type_text("hi");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the answer and the warning", |s| {
        s.contains("Hello.") && s.contains("warning: MCP server `ghost` failed to start")
    });
    assert!(
        !screen.contains("Starting default (STDIO) server"),
        "a server's stderr reached the terminal:\n{screen}"
    );

    tmux.type_text("/mcp");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the server list", |s| {
        s.contains("everything (stdio: node): connected,")
            && s.contains("ghost (stdio: /nonexistent/mcp-server): failed")
    });
    tmux.type_text("/help");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the prompts in the help", |s| {
        s.contains("/mcp__everything__args-prompt city [state]")
    });
    tmux.type_text("/mcp__everything__args-prompt Paris");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the answer to the prompt", |s| {
        s.contains("Sunny in Paris.")
    });

    tmux.type_text("run the long operation");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the long call to start", |s| {
        s.contains("Starting the long operation.")
    });
    tmux.keys(&["Escape"]);
    tmux.wait_for("the run to stop", |s| s.contains("stopped"));
    tmux.type_text("are you still there?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the next answer", |s| {
        s.contains("Still here after the stop.")
    });
    tmux.type_text("/mcp restart everything");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the restart", |s| {
        s.contains("MCP server `everything` restarted:")
    });
    tmux.type_text("/mcp restart ghost");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the failed restart", |s| {
        s.contains("error: MCP server `ghost` failed")
    });
    tmux.type_text("/exit");
    tmux.keys(&["Enter"]);
    assert_eq!(tmux.wait_exit(), 0);
}

#[test]
fn ctrl_b_moves_a_waiting_sub_agent_to_the_background_and_its_result_comes_later() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    home.home.write(
        "agents/waiter.md",
        "---\nname: Waiter\ndescription: waits for a file\n---\nROLE-WAITER\n",
    );
    let script = home.home.write(
        "waiter.yaml",
        r#"
agents:
  "*":
    - when: {system_contains: "ROLE-WAITER", last_user_contains: "released"}
      text: "The file came."
    - when: {system_contains: "ROLE-WAITER"}
      text: "Waiting for the file."
      tool_calls:
        - name: Bash
          input: {command: "touch started; while [ ! -f go ]; do sleep 0.05; done; echo released"}
    - when: {last_user_contains: "moved it to the background"}
      text: "It runs in the background now."
    - when: {last_user_contains: "task-notification"}
      text: "The waiter reported back."
    - text: "Delegating."
      tool_calls:
        - name: Agent
          input: {prompt: "wait for go", subagent_type: "Waiter", description: "wait for go"}
"#,
    );
    let tmux = start(&home, &script, "--permission-mode bypassPermissions");
    tmux.type_text("delegate the wait");
    tmux.keys(&["Enter"]);
    wait_until(
        "the sub-agent's command to start",
        Duration::from_secs(20),
        || home.cwd.join("started").exists().then_some(()),
        || tmux.screen(),
    );
    tmux.keys(&["C-b"]);
    tmux.wait_for("the key's confirmation and the parent's answer", |s| {
        s.contains("moved 1 sub-agent to the background")
            && s.contains("It runs in the background now.")
    });
    // The child kept running; release it and ask again: its result is delivered.
    std::fs::write(home.cwd.join("go"), "").unwrap();
    tmux.wait_for("the task's end line", |s| {
        s.contains("a1") && s.contains("completed")
    });
    tmux.type_text("any news?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the notification's answer", |s| {
        s.contains("The waiter reported back.")
    });
    tmux.type_text("/exit");
    tmux.keys(&["Enter"]);
    assert_eq!(tmux.wait_exit(), 0);
}

/// Issue 31: the session's key reader span for ever once its terminal hung up (crossterm
/// reads a terminal until a read would block, and a hung-up terminal's reads return 0 at
/// once); only SIGHUP ended the session. Started with SIGHUP ignored (`nohup`, or a hang-up
/// that sends none), its terminal gone, the session now ends.
#[test]
fn the_session_ends_when_its_terminal_hangs_up() {
    let home = TempHome::new();
    bugfix_repo(home.cwd.path());
    let script = home
        .home
        .write("idle.yaml", "agents:\n  \"*\":\n    - text: \"ok\"\n");
    let tmux = Tmux::start(
        home.cwd.path(),
        &[("ROO_HOME", home.path().display().to_string())],
        &format!(
            "trap '' HUP; {} --provider script --script {} --trust-project",
            bin("roo-lead").display(),
            script.display()
        ),
    );
    tmux.wait_for("the banner and prompt", |s| {
        s.contains("RooCode") && s.contains('›')
    });
    let shell = tmux.panes()[0].pid;
    let pid = wait_until(
        "the lead's process",
        Duration::from_secs(10),
        || roo_tests::child_of(shell, "roo-lead"),
        || tmux.screen(),
    );
    roo_tests::end_tmux_server(tmux.socket());
    let gone = wait_until(
        "the session to end after its terminal hung up",
        Duration::from_secs(10),
        || process_gone(pid).then_some(true),
        || {
            // Do not leave it spinning when the check fails.
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
            format!("pid {pid} still runs")
        },
    );
    assert!(gone);
}
