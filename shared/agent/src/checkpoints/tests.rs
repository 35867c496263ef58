#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn mark() -> ConversationMark {
    ConversationMark {
        messages: 0,
        tail_blocks: 0,
    }
}

fn project() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let home = dir.path().join("home");
    let root = std::fs::canonicalize(&root).unwrap();
    (dir, root, home)
}

#[test]
fn a_file_tool_call_is_rewound_and_a_created_file_removed() {
    let (_dir, root, home) = project();
    std::fs::write(root.join("a.txt"), "one").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("change a", mark()).unwrap();
    let pending = cp
        .before_call(&CallScope::Path(root.join("a.txt")), &root)
        .unwrap()
        .unwrap();
    std::fs::write(root.join("a.txt"), "two, longer").unwrap();
    cp.after_call(pending).unwrap();
    let pending = cp
        .before_call(&CallScope::Path(root.join("new.txt")), &root)
        .unwrap()
        .unwrap();
    std::fs::write(root.join("new.txt"), "new").unwrap();
    cp.after_call(pending).unwrap();
    std::fs::write(root.join("mine.txt"), "the user's").unwrap();

    let listed = cp.list();
    assert_eq!(listed[0].files, vec!["~a.txt", "+new.txt"]);
    let report = cp.rewind_code(1).unwrap();
    assert_eq!(report.restored, vec!["a.txt"]);
    assert_eq!(report.removed, vec!["new.txt"]);
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "one");
    assert!(!root.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("mine.txt")).unwrap(),
        "the user's"
    );
}

#[test]
fn a_command_in_a_git_project_is_rewound_from_the_tree_walk() {
    let (_dir, root, home) = project();
    std::fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "fn a() {}").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("run a command", mark()).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    std::fs::write(root.join("src/lib.rs"), "broken").unwrap();
    std::fs::write(root.join("src/new.rs"), "new").unwrap();
    std::fs::create_dir_all(root.join("ignored")).unwrap();
    std::fs::write(root.join("ignored/out"), "x").unwrap();
    cp.after_call(pending).unwrap();
    // A later user change between calls is not the agent's (later than the file system
    // clock's tick: the command's changes are told by their times).
    later();
    std::fs::write(root.join("notes.txt"), "user").unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    cp.after_call(pending).unwrap();

    assert_eq!(cp.list()[0].files, vec!["~src/lib.rs", "+src/new.rs"]);
    cp.rewind_code(1).unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("src/lib.rs")).unwrap(),
        "fn a() {}"
    );
    assert!(!root.join("src/new.rs").exists());
    assert!(root.join("notes.txt").exists());
    assert!(root.join("ignored/out").exists());
}

#[test]
fn a_restore_never_writes_through_a_symlinked_directory() {
    let (dir, root, home) = project();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::write(root.join("d/f.txt"), "before").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let pending = cp
        .before_call(&CallScope::Path(root.join("d/f.txt")), &root)
        .unwrap()
        .unwrap();
    std::fs::write(root.join("d/f.txt"), "after").unwrap();
    cp.after_call(pending).unwrap();
    // The directory is swapped for a link out of the project.
    std::fs::remove_dir_all(root.join("d")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("d")).unwrap();
    let report = cp.rewind_code(1).unwrap();
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert!(!outside.join("f.txt").exists());
}

#[test]
fn a_rewind_is_itself_a_checkpoint_that_undoes_it() {
    let (_dir, root, home) = project();
    std::fs::write(root.join("a.txt"), "one").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let pending = cp
        .before_call(&CallScope::Path(root.join("a.txt")), &root)
        .unwrap()
        .unwrap();
    std::fs::write(root.join("a.txt"), "two").unwrap();
    cp.after_call(pending).unwrap();
    cp.rewind_code(1).unwrap();
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "one");
    assert_eq!(cp.list().len(), 1);
    cp.rewind_code(1).unwrap();
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "two");
    // A resumed session reads its checkpoints back.
    let again = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    assert_eq!(again.list().len(), 1);
}

#[test]
fn a_nested_repository_is_not_walked() {
    let (_dir, root, home) = project();
    std::fs::create_dir_all(root.join(".roocode/worktrees/crew+alice/.git")).unwrap();
    std::fs::write(root.join(".roocode/worktrees/crew+alice/a.txt"), "a").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    // A teammate writes in its clone while the lead's command runs.
    std::fs::write(root.join(".roocode/worktrees/crew+alice/a.txt"), "changed").unwrap();
    std::fs::write(root.join("lead.txt"), "lead").unwrap();
    cp.after_call(pending).unwrap();
    assert_eq!(cp.list()[0].files, vec!["+lead.txt"]);
}

#[test]
fn the_walk_honours_nested_gitignore_files_and_the_exclude_file() {
    let (_dir, root, home) = project();
    std::fs::write(root.join(".gitignore"), "*.log\n!keep.log\nbuild/\n").unwrap();
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::write(root.join("sub/.gitignore"), "local.txt\n").unwrap();
    std::fs::create_dir_all(root.join(".git/info")).unwrap();
    std::fs::write(root.join(".git/info/exclude"), "excluded.txt\n").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    for rel in [
        "a.log",
        "keep.log",
        "build/x",
        "local.txt",
        "sub/local.txt",
        "sub/deeper/local.txt",
        "sub/x.txt",
        "excluded.txt",
        "sub/a.log",
    ] {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
    }
    cp.after_call(pending).unwrap();
    assert_eq!(
        cp.list()[0].files,
        vec!["+keep.log", "+local.txt", "+sub/x.txt"]
    );
}

#[test]
fn hostile_files_neither_block_nor_escape_a_checkpoint() {
    let (dir, root, home) = project();
    // A FIFO (opening it would block), a file over the size limit, git-looking names, a
    // filter an attributes file asks for, and a symlink out of the project.
    nix::unistd::mkfifo(&root.join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::write(root.join("big.bin"), vec![7u8; 4096]).unwrap();
    std::fs::create_dir_all(root.join("refs/heads")).unwrap();
    std::fs::write(root.join("refs/heads/main"), "not a ref").unwrap();
    std::fs::write(root.join("HEAD"), "ref: refs/heads/main").unwrap();
    std::fs::write(root.join(".gitattributes"), "* filter=evil\n").unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    std::os::unix::fs::symlink(&secret, root.join("link")).unwrap();
    let limits = CheckpointLimits {
        max_file_bytes: 1024,
        ..CheckpointLimits::default()
    };
    let cp = Checkpoints::open(&home, &root, "s1", limits).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    std::fs::write(root.join("big.bin"), b"small now").unwrap();
    std::fs::write(root.join("HEAD"), "changed").unwrap();
    std::fs::remove_file(root.join("link")).unwrap();
    std::fs::write(root.join("link"), "a file now").unwrap();
    cp.after_call(pending).unwrap();

    let report = cp.rewind_code(1).unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("HEAD")).unwrap(),
        "ref: refs/heads/main"
    );
    // A rewind never makes a link (the checkpoint file may have been written by another
    // program): the file is left and said; the link's target was never written.
    assert_eq!(
        std::fs::read_to_string(root.join("link")).unwrap(),
        "a file now"
    );
    assert!(
        report
            .skipped
            .iter()
            .any(|(path, why)| path == "link" && why.contains("symbolic link")),
        "{report:?}"
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret");
    // The file over the limit was not kept: left as it is, and said.
    assert!(
        report
            .skipped
            .iter()
            .any(|(path, why)| path == "big.bin" && why.contains("limit")),
        "{report:?}"
    );
    assert_eq!(std::fs::read(root.join("big.bin")).unwrap(), b"small now");
}

#[test]
fn huge_limits_in_the_config_saturate_rather_than_wrap() {
    let limits = CheckpointLimits::from_section(&CheckpointsSection {
        max_age_days: Some(u64::MAX),
        max_total_mb: Some(u64::MAX / 2),
        max_file_kb: Some(u64::MAX / 2),
        ..Default::default()
    });
    // A wrapped product would make the age a few seconds and prune every session.
    assert!(limits.max_age > Duration::from_secs(1 << 40));
    assert_eq!(limits.max_total_bytes, u64::MAX);
    assert_eq!(limits.max_file_bytes, u64::MAX);
}

#[test]
fn a_rewind_leaves_a_file_whose_present_state_it_could_not_keep_for_an_undo() {
    let (_dir, root, home) = project();
    let limits = CheckpointLimits {
        max_file_bytes: 16,
        ..CheckpointLimits::default()
    };
    let cp = Checkpoints::open(&home, &root, "s1", limits).unwrap();
    cp.begin_prompt("make a log", mark()).unwrap();
    let pending = cp
        .before_call(&CallScope::Path(root.join("big.log")), &root)
        .unwrap()
        .unwrap();
    std::fs::write(root.join("big.log"), "agent").unwrap();
    cp.after_call(pending).unwrap();
    // The user's work lands in the file afterwards, past what a checkpoint keeps.
    let users = "the user's own work, longer than the limit";
    std::fs::write(root.join("big.log"), users).unwrap();

    let report = cp.rewind_code(1).unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("big.log")).unwrap(),
        users
    );
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert!(
        report.describe().contains("big.log"),
        "{}",
        report.describe()
    );
}

/// Runs `f` on a thread of its own, failing (not hanging) if it takes longer than 20 s;
/// on a timeout `unblock` runs first so a reader stuck on a FIFO is released.
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static, unblock: impl FnOnce()) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(value) => value,
        Err(_) => {
            unblock();
            panic!("blocked on a non-regular file");
        }
    }
}

/// Opens the write end of `fifo` without blocking, so a reader blocked on it gets EOF.
fn release(fifo: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(fifo);
}

#[test]
fn a_gitignore_linked_to_dev_zero_or_a_fifo_does_not_stop_the_walk() {
    for hostile in ["zero", "fifo", "exclude-fifo"] {
        let (_dir, root, _home) = project();
        std::fs::write(root.join("kept.txt"), "k").unwrap();
        let planted = match hostile {
            "zero" => {
                std::os::unix::fs::symlink("/dev/zero", root.join(".gitignore")).unwrap();
                root.join(".gitignore")
            }
            "fifo" => root.join(".gitignore"),
            _ => {
                std::fs::create_dir_all(root.join(".git/info")).unwrap();
                root.join(".git/info/exclude")
            }
        };
        if hostile != "zero" {
            nix::unistd::mkfifo(&planted, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        }
        let walked_root = root.clone();
        let files = within(
            move || scan::walk_files(&walked_root, 1000, Duration::from_secs(10)),
            || release(&planted),
        )
        .unwrap_or_else(|stop| panic!("{hostile}: the walk stopped: {stop:?}"));
        assert!(files.contains_key("kept.txt"), "{hostile}: {files:?}");
    }
}

#[test]
fn a_file_limit_below_the_initial_capacity_walks_the_tree() {
    let (_dir, root, _home) = project();
    std::fs::write(root.join("a.txt"), "a").unwrap();
    std::fs::write(root.join("b.txt"), "b").unwrap();
    let files = scan::walk_files(&root, 10, Duration::from_secs(10)).unwrap();
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(
        scan::walk_files(&root, 1, Duration::from_secs(10)),
        Err(scan::WalkStop::Files(1))
    );
}

#[test]
fn a_fifo_at_the_session_file_is_moved_aside_not_waited_on() {
    let (_dir, root, home) = project();
    let sessions = home
        .join("checkpoints")
        .join(project_key(&root))
        .join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let fifo = sessions.join("s1.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let (opened_home, opened_root) = (home.clone(), root.clone());
    let opened = within(
        move || {
            Checkpoints::open(
                &opened_home,
                &opened_root,
                "s1",
                CheckpointLimits::default(),
            )
            .map(|_| ())
        },
        || release(&fifo),
    );
    let err = opened.unwrap_err().to_string();
    assert!(err.contains("FIFO") && err.contains("moved aside"), "{err}");
    assert!(std::fs::symlink_metadata(&fifo).is_err());
    // Opened again, the session starts afresh.
    Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
}

#[test]
fn git_and_worktree_names_are_refused_in_any_case() {
    for rel in [
        ".GIT/config",
        "a/.Git/HEAD",
        ".RooCode/Worktrees/x",
        ".roocode/WORKTREES",
    ] {
        assert_eq!(scan::checked_relative(Path::new(rel)), None, "{rel}");
    }
    for rel in ["a/.gitx", ".roocode/worktreesx/a", ".gitignore"] {
        assert_eq!(
            scan::checked_relative(Path::new(rel)).as_deref(),
            Some(rel),
            "{rel}"
        );
    }
}

/// Waits past the file system clock's tick (file times come from a coarse clock): a change
/// made after this is later, by its times, than a command that returned before.
fn later() {
    std::thread::sleep(Duration::from_millis(50));
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap()
}

#[test]
fn a_command_costs_one_walk_and_the_next_walk_finds_what_it_changed() {
    let (_dir, root, home) = project();
    std::fs::write(root.join("a.txt"), "one").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    std::fs::write(root.join("a.txt"), "two").unwrap();
    cp.after_call(pending).unwrap();
    // Nothing compared yet: the command's return only noted its time.
    assert!(cp.state().log.prompts[0].changes.is_empty());
    // The walk before the next command finds it, and keeps what the next may change.
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    assert_eq!(
        cp.state().log.prompts[0].changes.keys().collect::<Vec<_>>(),
        vec!["a.txt"]
    );
    std::fs::write(root.join("a.txt"), "three").unwrap();
    cp.after_call(pending).unwrap();
    cp.rewind_code(1).unwrap();
    assert_eq!(read(&root, "a.txt"), "one");
}

/// A process the command started and left running deletes a file after the command
/// returned: the deletion is the command's. On the code before settling (a walk right
/// after the command), the deletion was never kept and the rewind left `data.txt` gone.
/// The log it created and goes on writing after the return changed later than the
/// command returned: like a person's file, it is not the command's, and a rewind leaves it.
#[test]
fn regression_what_a_commands_background_process_deletes_after_it_returned_is_put_back() {
    let (_dir, root, home) = project();
    std::fs::write(root.join("data.txt"), "precious").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("start the server", mark()).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    // The command: starts a server in the background, which writes its log, and returns.
    std::fs::write(root.join("server.log"), "started\n").unwrap();
    let mut server = std::process::Command::new("sh")
        .args(["-c", "sleep 0.2; rm data.txt; echo serving >> server.log"])
        .current_dir(&root)
        .spawn()
        .unwrap();
    cp.after_call(pending).unwrap();
    server.wait().unwrap();

    let report = cp.rewind_code(1).unwrap();
    assert_eq!(read(&root, "data.txt"), "precious", "{report:?}");
    assert_eq!(
        read(&root, "server.log"),
        "started\nserving\n",
        "{report:?}"
    );
}

#[test]
fn a_file_a_command_created_and_a_file_tool_then_changed_is_removed_by_a_rewind() {
    let (_dir, root, home) = project();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    std::fs::write(root.join("gen.rs"), "generated").unwrap();
    cp.after_call(pending).unwrap();
    // The file tool's call finds the command's changes first: the file was the
    // command's creation, not a file that held "generated" before the prompt.
    let target = root.join("gen.rs");
    let pending = cp
        .before_call(&CallScope::Path(target.clone()), &root)
        .unwrap()
        .unwrap();
    std::fs::write(&target, "edited").unwrap();
    cp.after_call(pending).unwrap();
    assert_eq!(cp.list()[0].files, vec!["+gen.rs"]);
    cp.rewind_code(1).unwrap();
    assert!(!target.exists());
}

#[test]
fn a_persons_edit_after_the_command_returned_is_not_the_commands() {
    let (_dir, root, home) = project();
    std::fs::write(root.join("a.txt"), "one").unwrap();
    std::fs::write(root.join("mine.txt"), "mine").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    std::fs::write(root.join("a.txt"), "two").unwrap();
    cp.after_call(pending).unwrap();
    later();
    // Between the agent's calls, the person edits their file and makes a new one.
    std::fs::write(root.join("mine.txt"), "mine, edited").unwrap();
    std::fs::write(root.join("new.txt"), "the person's").unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    cp.after_call(pending).unwrap();
    assert_eq!(cp.list()[0].files, vec!["~a.txt"]);
    cp.rewind_code(1).unwrap();
    assert_eq!(read(&root, "a.txt"), "one");
    assert_eq!(read(&root, "mine.txt"), "mine, edited");
    assert_eq!(read(&root, "new.txt"), "the person's");
}

#[test]
fn the_end_of_a_run_settles_so_later_deletions_are_not_the_agents() {
    let (_dir, root, home) = project();
    std::fs::write(root.join("a.txt"), "one").unwrap();
    std::fs::write(root.join("mine.txt"), "mine").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    std::fs::write(root.join("a.txt"), "two").unwrap();
    cp.after_call(pending).unwrap();
    // The run ends (the loop settles), then the person deletes their file.
    cp.settle().unwrap();
    std::fs::remove_file(root.join("mine.txt")).unwrap();
    cp.begin_prompt("q", mark()).unwrap();
    let listed = cp.list();
    assert_eq!(listed[1].files, vec!["~a.txt"]);
    assert!(listed[0].files.is_empty(), "{listed:?}");
    cp.rewind_code(1).unwrap();
    assert!(!root.join("mine.txt").exists());
}

#[test]
fn a_command_that_never_returned_owns_every_change_found() {
    let (_dir, root, home) = project();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    // Its call was cancelled: no after_call.
    let _pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    later();
    std::fs::write(root.join("half.txt"), "half written").unwrap();
    cp.settle().unwrap();
    assert_eq!(cp.list()[0].files, vec!["+half.txt"]);
}

/// A person's file moved into the project after the command returned keeps its old birth
/// time; its change time (set by the rename) tells it is not the command's. On the code
/// that went by the birth time alone, the rewind deleted `data.csv`, its only copy.
#[test]
fn regression_a_file_moved_in_after_the_command_returned_is_not_the_commands() {
    let (dir, root, home) = project();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("data.csv"), "the person's data").unwrap();
    std::fs::write(outside.join("linked.csv"), "linked").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    std::fs::write(root.join("a.txt"), "made by the command").unwrap();
    cp.after_call(pending).unwrap();
    later();
    std::fs::rename(outside.join("data.csv"), root.join("data.csv")).unwrap();
    std::fs::hard_link(outside.join("linked.csv"), root.join("linked.csv")).unwrap();
    cp.settle().unwrap();
    assert_eq!(cp.list()[0].files, vec!["+a.txt"]);
    let report = cp.rewind_code(1).unwrap();
    assert!(!root.join("a.txt").exists(), "{report:?}");
    assert_eq!(read(&root, "data.csv"), "the person's data");
    assert_eq!(read(&root, "linked.csv"), "linked");
}

/// Sub-agents share the checkpoints, and a background one runs beside its parent: a run's
/// end settles while another agent's command still runs. On the code with one record for
/// every command, that settle dropped the running command's record (the rewind left
/// "two"), and the older command's return ended the newer one's record early (the rewind
/// left `b.txt`).
#[test]
fn regression_a_settle_while_a_command_runs_keeps_its_record() {
    let (_dir, root, home) = project();
    std::fs::write(root.join("a.txt"), "one").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let first = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    // Another agent's run ends while this command runs.
    cp.settle().unwrap();
    let second = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    std::fs::write(root.join("a.txt"), "two").unwrap();
    cp.after_call(first).unwrap();
    later();
    // The second command, still running, writes after the first returned.
    std::fs::write(root.join("b.txt"), "by the second").unwrap();
    cp.settle().unwrap();
    cp.after_call(second).unwrap();
    cp.settle().unwrap();
    assert_eq!(cp.list()[0].files, vec!["~a.txt", "+b.txt"]);
    let report = cp.rewind_code(1).unwrap();
    assert_eq!(read(&root, "a.txt"), "one", "{report:?}");
    assert!(!root.join("b.txt").exists(), "{report:?}");
}

/// A command whose call is dropped (cancelled) counts as returned then: a later change is
/// not its.
#[test]
fn a_dropped_commands_record_ends_when_it_is_dropped() {
    let (_dir, root, home) = project();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    std::fs::write(root.join("half.txt"), "half written").unwrap();
    drop(pending);
    later();
    std::fs::write(root.join("mine.txt"), "the person's").unwrap();
    cp.settle().unwrap();
    assert_eq!(cp.list()[0].files, vec!["+half.txt"]);
}

/// A run's end (another agent's) settles while a command runs: on the code that cleared
/// every record there, the command's change was never kept and the rewind left "two".
#[test]
fn regression_a_run_end_while_a_command_runs_keeps_its_record() {
    let (_dir, root, home) = project();
    std::fs::write(root.join("a.txt"), "one").unwrap();
    let cp = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("p", mark()).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &root).unwrap().unwrap();
    cp.settle().unwrap();
    std::fs::write(root.join("a.txt"), "two").unwrap();
    cp.after_call(pending).unwrap();
    cp.settle().unwrap();
    assert_eq!(cp.list()[0].files, vec!["~a.txt"]);
    cp.rewind_code(1).unwrap();
    assert_eq!(read(&root, "a.txt"), "one");
}
