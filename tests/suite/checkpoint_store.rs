//! Checkpoint files written by another program: whatever a session's checkpoint file or
//! the object store under `ROO_HOME/checkpoints` says, a rewind never plants a symlink,
//! never sets setuid, setgid or world-writable bits, never reads a content from outside
//! the store or blocks on one, never writes under `.git` or `.roocode/worktrees`, and
//! refuses a content that does not match its name (saying which file); a damaged file is
//! moved aside and said, never used. Also: the tree walk leaves `.roocode/worktrees`
//! alone, and a walk over its time bound skips the checkpoint and says so once.
//!
//! Through roo-agent's public checkpoint API (what the agent loop calls). Directories live
//! under Cargo's target tmp dir, so "outside the project" is not the system temp dir.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use roo_agent::{CallScope, CheckpointLimits, Checkpoints, ConversationMark, RestoreReport};
use roo_tests::TempDir;
use serde_json::{Value, json};

const MARK: ConversationMark = ConversationMark {
    messages: 0,
    tail_blocks: 0,
};

/// A git-looking project, a ROO_HOME and a directory outside both.
struct Setup {
    _dir: TempDir,
    root: PathBuf,
    home: PathBuf,
    outside: PathBuf,
}

fn setup() -> Setup {
    let dir = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("project");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    Setup {
        root,
        home: base.join("home"),
        outside: base.join("outside"),
        _dir: dir,
    }
}

/// Records one prompt in which a file tool changes each of `files` (created first with
/// "before", then written "after"); returns the session's checkpoint file.
fn record(s: &Setup, files: &[&str]) -> PathBuf {
    let cp = Checkpoints::open(&s.home, &s.root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("change the files", MARK).unwrap();
    for rel in files {
        let path = s.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "before").unwrap();
        let pending = cp
            .before_call(&CallScope::Path(path.clone()), &s.root)
            .unwrap()
            .unwrap();
        std::fs::write(&path, "after").unwrap();
        cp.after_call(pending).unwrap();
    }
    session_file(&s.home)
}

fn session_file(home: &Path) -> PathBuf {
    let stores = std::fs::read_dir(home.join("checkpoints")).unwrap();
    let store = stores.flatten().next().unwrap().path();
    store.join("sessions/s1.json")
}

/// Rewrites the first prompt's changes of the checkpoint file at `path` with `edit`.
fn edit_changes(path: &Path, edit: impl FnOnce(&mut serde_json::Map<String, Value>)) {
    let mut log: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let changes = log["prompts"][0]["changes"].as_object_mut().unwrap();
    edit(changes);
    std::fs::write(path, serde_json::to_vec(&log).unwrap()).unwrap();
}

/// Rewinds the session's code to before its first prompt on a thread of its own; a
/// rewind that blocks (a FIFO read) fails the test instead of hanging it.
fn rewind(s: &Setup) -> Result<RestoreReport, String> {
    let (home, root) = (s.home.clone(), s.root.clone());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let result = Checkpoints::open(&home, &root, "s1", CheckpointLimits::default())
            .and_then(|cp| cp.rewind_code(1))
            .map_err(|e| e.to_string());
        let _ = tx.send(result);
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the rewind blocked for 20 s")
}

fn skipped_why(report: &RestoreReport, rel: &str) -> String {
    report
        .skipped
        .iter()
        .find(|(path, _)| path == rel)
        .map(|(_, why)| why.clone())
        .unwrap_or_else(|| panic!("{rel} was not left: {report:?}"))
}

#[test]
fn regression_a_planted_symlink_entry_is_never_created() {
    let s = setup();
    let log = record(&s, &["a.txt"]);
    let secret = s.outside.join("secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    edit_changes(&log, |changes| {
        changes.insert("a.txt".into(), json!({"kind": "symlink", "target": secret}));
    });
    let report = rewind(&s).unwrap();
    let meta = std::fs::symlink_metadata(s.root.join("a.txt")).unwrap();
    assert!(meta.is_file(), "a link was planted: {report:?}");
    assert_eq!(
        std::fs::read_to_string(s.root.join("a.txt")).unwrap(),
        "after"
    );
    assert!(skipped_why(&report, "a.txt").contains("symbolic link"));
}

#[test]
fn regression_a_planted_mode_never_sets_setuid_setgid_or_world_writable() {
    let s = setup();
    let log = record(&s, &["a.txt"]);
    edit_changes(&log, |changes| {
        changes.get_mut("a.txt").unwrap()["mode"] = json!(0o6777);
    });
    let report = rewind(&s).unwrap();
    assert_eq!(report.restored, vec!["a.txt"], "{report:?}");
    assert_eq!(
        std::fs::read_to_string(s.root.join("a.txt")).unwrap(),
        "before"
    );
    let mode = std::fs::metadata(s.root.join("a.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7002, 0, "mode {mode:o}");
}

#[test]
fn regression_a_content_that_does_not_match_or_leads_out_of_the_store_is_refused() {
    let s = setup();
    let log = record(&s, &["a.txt", "b.txt"]);
    // a.txt's saved content is edited in the store; b.txt's names a FIFO outside it.
    let mut blob = String::new();
    edit_changes(&log, |changes| {
        blob = changes["a.txt"]["blob"].as_str().unwrap().to_string();
        let fifo = s.outside.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        changes.get_mut("b.txt").unwrap()["blob"] = json!(format!("..{}", fifo.display()));
    });
    let store = log.parent().unwrap().parent().unwrap();
    let object = store.join("objects").join(&blob[..2]).join(&blob[2..]);
    std::fs::write(&object, "planted").unwrap();

    let Err(error) = rewind(&s) else {
        panic!("a checkpoint file naming a content outside the store was used");
    };
    assert!(
        error.contains("b.txt") && error.contains("moved aside"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(s.root.join("b.txt")).unwrap(),
        "after"
    );

    // With the file's own record of b.txt, the edited content of a.txt is refused by name.
    record(&s, &["b.txt"]);
    let log = session_file(&s.home);
    edit_changes(&log, |changes| {
        changes.insert(
            "a.txt".into(),
            json!({"kind": "file", "blob": blob, "mode": 0o644, "size": 6}),
        );
    });
    let report = rewind(&s).unwrap();
    assert!(
        skipped_why(&report, "a.txt").contains("checksum"),
        "{report:?}"
    );
    assert_eq!(
        std::fs::read_to_string(s.root.join("a.txt")).unwrap(),
        "after"
    );
}

#[test]
fn regression_a_damaged_checkpoint_file_is_moved_aside_and_said() {
    let s = setup();
    let log = record(&s, &["a.txt"]);
    std::fs::write(&log, b"{\"version\": 1, \"root\": ").unwrap();
    let error = Checkpoints::read(&s.home, &s.root, "s1")
        .unwrap_err()
        .to_string();
    assert!(error.contains("moved aside"), "{error}");
    assert!(!log.exists(), "the damaged file was left in place");
    let store = log.parent().unwrap().parent().unwrap();
    let aside: Vec<_> = std::fs::read_dir(store.join("corrupt")).unwrap().collect();
    assert_eq!(aside.len(), 1);
    // A new session file starts in its place.
    let cp = Checkpoints::open(&s.home, &s.root, "s1", CheckpointLimits::default()).unwrap();
    assert!(cp.list().is_empty());
}

#[test]
fn regression_a_rewind_never_writes_under_git_or_roocode_worktrees() {
    let s = setup();
    let log = record(&s, &["a.txt"]);
    let clone = s.root.join(".roocode/worktrees/crew+bob");
    std::fs::create_dir_all(clone.join(".git")).unwrap();
    std::fs::write(clone.join("work.rs"), "bob's work").unwrap();
    std::fs::write(s.root.join(".git/config"), "[core]\n").unwrap();
    edit_changes(&log, |changes| {
        // "Missing": the agent created it, so a rewind would remove it.
        changes.insert(
            ".roocode/worktrees/crew+bob/work.rs".into(),
            json!({"kind": "missing"}),
        );
        changes.insert(".git/config".into(), json!({"kind": "missing"}));
    });
    let outcome = rewind(&s);
    assert_eq!(
        std::fs::read_to_string(clone.join("work.rs")).unwrap(),
        "bob's work",
        "{outcome:?}"
    );
    assert!(s.root.join(".git/config").exists(), "{outcome:?}");
    assert!(outcome.unwrap_err().contains("moved aside"));
}

#[test]
fn regression_a_command_checkpoint_never_walks_roocode_worktrees() {
    let s = setup();
    // A teammate's clone being made: no `.git` in it yet.
    let clone = s.root.join(".roocode/worktrees/crew+alice");
    std::fs::create_dir_all(&clone).unwrap();
    std::fs::write(clone.join("a.txt"), "a").unwrap();
    let cp = Checkpoints::open(&s.home, &s.root, "s1", CheckpointLimits::default()).unwrap();
    cp.begin_prompt("run", MARK).unwrap();
    let pending = cp.before_call(&CallScope::Tree, &s.root).unwrap().unwrap();
    std::fs::write(clone.join("a.txt"), "changed by alice").unwrap();
    std::fs::write(clone.join("new.txt"), "alice's").unwrap();
    std::fs::write(s.root.join("lead.txt"), "lead").unwrap();
    cp.after_call(pending).unwrap();
    assert_eq!(cp.list()[0].files, vec!["+lead.txt"]);
    // Nor does a file tool's write there make a checkpoint.
    let pending = cp
        .before_call(&CallScope::Path(clone.join("a.txt")), &s.root)
        .unwrap();
    assert!(pending.is_none());
}

#[test]
fn a_walk_over_its_time_bound_skips_the_checkpoint_and_says_so_once() {
    let s = setup();
    for i in 0..500 {
        std::fs::write(s.root.join(format!("f{i}.txt")), "x").unwrap();
    }
    let limits = CheckpointLimits {
        max_walk: Duration::ZERO,
        ..CheckpointLimits::default()
    };
    let cp = Checkpoints::open(&s.home, &s.root, "s1", limits).unwrap();
    cp.begin_prompt("run", MARK).unwrap();
    assert!(cp.before_call(&CallScope::Tree, &s.root).unwrap().is_none());
    let notice = cp.take_notice().expect("the skipped checkpoint is told");
    assert!(
        notice.contains("not checkpointed") && notice.contains("max_walk_ms"),
        "{notice}"
    );
    // Told once: the next command is not walked again, and nothing more is said.
    assert!(cp.before_call(&CallScope::Tree, &s.root).unwrap().is_none());
    assert_eq!(cp.take_notice(), None);
    // A file tool's write is still checkpointed.
    let pending = cp
        .before_call(&CallScope::Path(s.root.join("f1.txt")), &s.root)
        .unwrap();
    assert!(pending.is_some());
}
