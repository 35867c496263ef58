//! The lead's unconfined git and what a teammate's clone points it at (issue 29, item 3).
//!
//! A real repository, a teammate's clone made by the runtime (`roo_team::worktree`), a
//! commit in it, then an attack planted in its `.git` the way a hostile teammate would
//! (its sandbox may write its clone): a symlink to the user's `~/.git-credentials`, a
//! FIFO, alternates naming another repository, a config include of the canary, a
//! `commondir`. Each fetch is refused before git runs, the error carries no byte of the
//! canary, nothing reaches the lead's repository, and a FIFO never stalls the fetch.
//! One case runs end to end: a scripted `roo-lead -p` whose in-process teammate plants
//! the grafts symlink and whose TeamMerge is refused.
//!
//! Every directory lives under Cargo's target tmp dir, not the system temp dir.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roo_store::Name;
use roo_team::worktree::{Discovered, Git, LeadRepo, Workspace, WorktreeError, prepare};
use roo_tests::{TempDir, TestCommand, bin, git};

const TOKEN: &str = "ghp_CANARYTOKEN29fetch";

/// How the check names a link or special file: found by the walk, as one of the small
/// files git reads whole, or as a file that must not exist.
const ANY_LINK: [&str; 3] = ["symlink or special file", "not a regular file", "exists"];

struct World {
    root: TempDir,
}

impl World {
    fn new() -> World {
        let root = TempDir::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        std::fs::create_dir_all(root.join("roo")).unwrap();
        root.write(
            "home/.git-credentials",
            format!("https://user:{TOKEN}@github.com\n"),
        );
        root.write("project/README.md", "# demo\n");
        roo_tests::git_repo_with_identity(&root.join("project"));
        World { root }
    }

    fn project(&self) -> PathBuf {
        self.root.join("project")
    }

    fn canary(&self) -> PathBuf {
        self.root.join("home/.git-credentials")
    }

    fn git(&self) -> Git {
        Git::new()
            .env("HOME", self.root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
    }

    /// Alice's clone, made by the runtime, with one commit on her branch.
    fn clone_with_commit(&self) -> PathBuf {
        let ws = prepare(&self.project(), &name("team"), &name("alice"), &self.git()).unwrap();
        let Workspace::Worktree(w) = ws else {
            panic!("no worktree: {ws:?}")
        };
        std::fs::write(w.path.join("c.txt"), "sea\n").unwrap();
        git(&w.path, &["add", "c.txt"]);
        git(&w.path, &["commit", "-q", "-m", "alice: add c"]);
        w.path
    }

    fn lead(&self) -> LeadRepo {
        match LeadRepo::discover(&self.project(), &self.git()).unwrap() {
            Discovered::Repo(repo) => repo,
            Discovered::Shared { why, .. } => panic!("no repository: {why:?}"),
        }
    }

    /// The lead's `roo/team/alice` and its whole ref list, to compare.
    fn lead_refs(&self) -> String {
        git(
            &self.project(),
            &["for-each-ref", "--format=%(refname) %(objectname)"],
        )
    }
}

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

/// `fetch_member` in a thread, with a hang guard far above anything it should take.
fn fetch_guarded(lead: &LeadRepo) -> Result<bool, WorktreeError> {
    let lead = lead.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(lead.fetch_member(&name("team"), &name("alice")));
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("the fetch did not return (hang guard)")
}

/// The fetch is refused before git runs, naming `why`; no canary byte in the message.
fn assert_refused(world: &World, lead: &LeadRepo, why: &str) {
    assert_refused_any(world, lead, &[why]);
}

/// [`assert_refused`], naming one of `whys`.
fn assert_refused_any(world: &World, lead: &LeadRepo, whys: &[&str]) {
    let before = world.lead_refs();
    let err = fetch_guarded(lead).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(&err, WorktreeError::UnsafeClone { why: said, .. }
            if whys.iter().any(|why| said.contains(why))),
        "expected a refusal naming one of {whys:?}: {text}"
    );
    assert!(
        !text.contains(TOKEN),
        "the canary reached the message: {text}"
    );
    assert!(
        !text.contains("github.com"),
        "file content in the message: {text}"
    );
    assert_eq!(world.lead_refs(), before, "the lead's refs moved");
}

/// Replaces `path` (a file or nothing) with what `plant` makes, runs `check`, puts it back.
fn planted(path: &Path, plant: impl FnOnce(&Path), check: impl FnOnce()) {
    let saved = std::fs::read(path).ok();
    let _ = std::fs::remove_file(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    plant(path);
    check();
    std::fs::remove_file(path).unwrap();
    if let Some(bytes) = saved {
        std::fs::write(path, bytes).unwrap();
    }
}

#[test]
fn whatever_git_would_read_from_a_clone_through_a_symlink_is_refused_without_a_canary_byte() {
    let world = World::new();
    let clone = world.clone_with_commit();
    let lead = world.lead();
    let dot_git = clone.join(".git");
    // Every file git reads from a repository, as a symlink to the user's credentials.
    let pack = std::fs::read_dir(dot_git.join("objects/pack"))
        .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut targets: Vec<PathBuf> = [
        "info/grafts",
        "info/attributes",
        "info/exclude",
        "info/refs",
        "objects/info/alternates",
        "objects/info/packs",
        "shallow",
        "packed-refs",
        "HEAD",
        "FETCH_HEAD",
        "index",
        "config",
        "refs/heads/roo/team/alice",
        "logs/HEAD",
        "objects/pack/pack-0000000000000000000000000000000000000000.idx",
        "objects/pack/pack-0000000000000000000000000000000000000000.keep",
        "objects/pack/pack-0000000000000000000000000000000000000000.promisor",
    ]
    .iter()
    .map(|rel| dot_git.join(rel))
    .collect();
    targets.extend(pack);
    for target in &targets {
        planted(
            target,
            |p| std::os::unix::fs::symlink(world.canary(), p).unwrap(),
            || assert_refused_any(&world, &lead, &ANY_LINK),
        );
    }
    // `.git` itself a symlink (to a real git directory elsewhere): not a clone to fetch.
    // Put right, the fetch works and brings alice's commit.
    assert!(lead.fetch_member(&name("team"), &name("alice")).unwrap());
    let log = git(
        &world.project(),
        &["log", "-1", "--format=%s", "roo/team/alice"],
    );
    assert_eq!(log.trim(), "alice: add c");
}

#[test]
fn a_fifo_in_a_clone_is_refused_at_once_and_never_stalls_the_fetch() {
    let world = World::new();
    let clone = world.clone_with_commit();
    let lead = world.lead();
    for rel in ["info/grafts", "shallow", "objects/info/alternates", "HEAD"] {
        planted(
            &clone.join(".git").join(rel),
            |p| nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap(),
            || assert_refused_any(&world, &lead, &ANY_LINK),
        );
    }
}

#[test]
fn alternates_includes_commondir_and_grafts_that_point_git_elsewhere_are_refused() {
    let world = World::new();
    let clone = world.clone_with_commit();
    let lead = world.lead();
    let dot_git = clone.join(".git");
    // Another repository the teammate would have the lead read.
    let other = world.root.join("private");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("s.txt"), "PRIVATE\n").unwrap();
    roo_tests::git_repo_with_identity(&other);
    let other_head = git(&other, &["rev-parse", "HEAD"]).trim().to_string();

    // Alternates naming the other repository's objects, alone or after the lead's.
    let alternates = dot_git.join("objects/info/alternates");
    let original = std::fs::read_to_string(&alternates).unwrap();
    for text in [
        format!("{original}{}\n", other.join(".git/objects").display()),
        format!("{}\n", other.join(".git/objects").display()),
    ] {
        std::fs::write(&alternates, text).unwrap();
        assert_refused(&world, &lead, "names other object stores");
    }
    std::fs::write(&alternates, &original).unwrap();

    // A config include of the canary, plain and conditional.
    let config = dot_git.join("config");
    let saved = std::fs::read_to_string(&config).unwrap();
    for extra in [
        format!("[include]\n\tpath = {}\n", world.canary().display()),
        format!(
            "[includeIf \"gitdir:/\"]\n\tpath = {}\n",
            world.canary().display()
        ),
        "[extensions]\n\tpartialClone = origin\n".to_string(),
    ] {
        std::fs::write(&config, format!("{saved}{extra}")).unwrap();
        assert_refused(&world, &lead, "config");
    }
    std::fs::write(&config, &saved).unwrap();

    // Indirection files and grafts, as regular files.
    for (rel, text) in [
        ("commondir", format!("{}\n", other.join(".git").display())),
        ("gitdir", format!("{}\n", other.join(".git").display())),
        ("info/grafts", format!("{other_head}\n")),
        (
            "objects/info/http-alternates",
            "http://example.invalid/objects\n".to_string(),
        ),
    ] {
        let path = dot_git.join(rel);
        std::fs::write(&path, text).unwrap();
        assert_refused(&world, &lead, "exists");
        std::fs::remove_file(&path).unwrap();
    }
    // Nothing of the other repository reached the lead's objects.
    let has = std::process::Command::new("git")
        .args(["cat-file", "-e", &other_head])
        .current_dir(world.project())
        .status()
        .unwrap();
    assert!(!has.success());
    assert!(lead.fetch_member(&name("team"), &name("alice")).unwrap());
}

/// The host's side of a remote fetch (`--upload-pack`), run here through git's local
/// transport, which starts it through the shell exactly as ssh does on the host.
#[test]
fn the_hosts_upload_pack_check_refuses_a_planted_clone_and_serves_a_clean_one() {
    let world = World::new();
    let clone = world.clone_with_commit();
    let command = roo_team::worktree::remote::upload_pack_command(&world.project()).unwrap();
    let fetch = || {
        // `timeout`: a hang guard only.
        std::process::Command::new("timeout")
            .args([
                "120",
                "git",
                "-c",
                "core.hooksPath=/dev/null",
                "fetch",
                "--quiet",
                "--no-tags",
            ])
            .arg(format!("--upload-pack={command}"))
            .arg(&clone)
            .arg("refs/heads/roo/team/alice:refs/remotes/check/alice")
            .current_dir(world.project())
            .env("HOME", world.root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap()
    };
    let grafts = clone.join(".git/info/grafts");
    std::os::unix::fs::symlink(world.canary(), &grafts).unwrap();
    let out = fetch();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("roo-refused: special-file"), "{stderr}");
    assert!(!stderr.contains(TOKEN), "{stderr}");
    std::fs::remove_file(&grafts).unwrap();
    let config = clone.join(".git/config");
    let saved = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{saved}[include]\n\tpath = {}\n", world.canary().display()),
    )
    .unwrap();
    let out = fetch();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("roo-refused: config"), "{stderr}");
    std::fs::write(&config, saved).unwrap();
    // A FIFO: refused before upload-pack opens it.
    nix::unistd::mkfifo(&grafts, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let out = fetch();
    assert!(String::from_utf8_lossy(&out.stderr).contains("roo-refused: special-file"));
    std::fs::remove_file(&grafts).unwrap();
    // Alternates naming another repository's objects.
    let other = world.root.join("private");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("s.txt"), "PRIVATE\n").unwrap();
    roo_tests::git_repo_with_identity(&other);
    let alternates = clone.join(".git/objects/info/alternates");
    let original = std::fs::read_to_string(&alternates).unwrap();
    std::fs::write(
        &alternates,
        format!("{}\n", other.join(".git/objects").display()),
    )
    .unwrap();
    let out = fetch();
    assert!(String::from_utf8_lossy(&out.stderr).contains("roo-refused: alternates"));
    std::fs::write(&alternates, original).unwrap();
    let out = fetch();
    assert!(out.status.success(), "{out:?}");
}

/// End to end: the teammate (in-process, sandboxed) commits, then links its clone's
/// `.git/info/grafts` to the user's `~/.git-credentials`; the lead's TeamMerge is
/// refused and the token is nowhere in what the lead's model saw or the store kept.
#[test]
fn team_merge_of_a_clone_with_grafts_linked_to_the_credentials_leaks_nothing() {
    let world = World::new();
    let canary = world.canary();
    let script = format!(
        r#"agents:
  lead:
    - tool_calls:
        - {{name: TeamCreate, input: {{team_name: crew, description: "one file"}}}}
    - tool_calls:
        - {{name: Agent, input: {{name: alice, description: "writes a", prompt: "Commit a.txt."}}}}
    - text: "Waiting for alice."
    - when: {{last_user_contains: "planted"}}
      tool_calls:
        - {{name: TeamMerge, input: {{name: alice}}}}
    - text: "Done."
    - text: "Done."
    - text: "Done."
    - text: "Done."
  alice:
    - tool_calls:
        - {{name: Bash, input: {{command: "echo a > a.txt && git add a.txt && git commit -qm 'alice: add a.txt' && ln -s {canary} .git/info/grafts"}}}}
        - {{name: SendMessage, input: {{to: lead, summary: "planted", message: "planted"}}}}
    - text: "Done."
"#,
        canary = canary.display()
    );
    let script = world.root.write("script.yaml", script);
    let before = git(&world.project(), &["rev-parse", "HEAD"]);
    let out = TestCommand::new(bin("roo-lead"))
        .env("ROO_HOME", world.root.join("roo"))
        .env("HOME", world.root.join("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .current_dir(world.project())
        .args(["-p", "Ship a.txt with a teammate."])
        .args(["--provider", "script", "--script"])
        .arg(script)
        .args(["--permission-mode", "bypassPermissions"])
        .args(["--output-format", "stream-json"])
        .run();
    let stdout = out.stdout();
    assert!(
        stdout.contains("refused") && stdout.contains("info/grafts"),
        "the merge was not refused:\n{stdout}\n{}",
        out.stderr()
    );
    assert!(
        !stdout.contains(TOKEN),
        "the token reached the lead's model:\n{stdout}"
    );
    // Nor anything the store kept (transcripts, inboxes).
    let mut stack = vec![world.root.join("roo")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(TOKEN),
                    "the token is in {}",
                    path.display()
                );
            }
        }
    }
    assert_eq!(git(&world.project(), &["rev-parse", "HEAD"]), before);
    assert!(!world.project().join("a.txt").exists());
}

/// Alternates that name the lead's objects through a link the teammate could retarget
/// after the check (in its clone, or in a shared temp dir) are refused too.
#[test]
fn alternates_that_reach_the_leads_objects_through_a_link_are_refused() {
    let world = World::new();
    let clone = world.clone_with_commit();
    let lead = world.lead();
    let link = clone.join("objects-link");
    std::os::unix::fs::symlink(world.project().join(".git/objects"), &link).unwrap();
    let alternates = clone.join(".git/objects/info/alternates");
    let original = std::fs::read_to_string(&alternates).unwrap();
    std::fs::write(&alternates, format!("{}\n", link.display())).unwrap();
    assert_refused(&world, &lead, "names other object stores");
    // The line the clone was made with: accepted.
    std::fs::write(&alternates, original).unwrap();
    assert!(lead.fetch_member(&name("team"), &name("alice")).unwrap());
}

/// A restarted teammate reuses its clone: a FIFO or link an earlier one planted there is
/// refused before any git reads the clone, and the spawn does not stall.
#[test]
fn reusing_a_planted_clone_is_refused_before_git_reads_it() {
    let world = World::new();
    let clone = world.clone_with_commit();
    let head = clone.join(".git/HEAD");
    std::fs::remove_file(&head).unwrap();
    nix::unistd::mkfifo(&head, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let (project, git) = (world.project(), world.git());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(prepare(&project, &name("team"), &name("alice"), &git));
    });
    let err = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the reuse did not return (hang guard)")
        .unwrap_err();
    assert!(
        err.to_string().contains("a clone git must not read"),
        "{err}"
    );
}

/// The issue's leak as it happened: a branch the lead cannot take (rewritten after the
/// lead fetched it) and `info/grafts` linked to the credentials — git's failure message
/// quoted the graft data. Refused, and no canary byte in what the model is told.
#[test]
fn a_rejected_fetch_of_a_clone_with_linked_grafts_tells_nothing_of_the_file() {
    let world = World::new();
    let clone = world.clone_with_commit();
    let lead = world.lead();
    assert!(lead.fetch_member(&name("team"), &name("alice")).unwrap());
    git(
        &clone,
        &["commit", "-q", "--amend", "-m", "alice: rewritten"],
    );
    std::os::unix::fs::symlink(world.canary(), clone.join(".git/info/grafts")).unwrap();
    let before = world.lead_refs();
    let err = fetch_guarded(&lead).unwrap_err();
    let text = err.to_string();
    assert!(
        !text.contains(TOKEN),
        "the canary reached the message: {text}"
    );
    assert!(
        !text.contains("github.com"),
        "file content in the message: {text}"
    );
    assert!(matches!(err, WorktreeError::UnsafeClone { .. }), "{text}");
    assert_eq!(world.lead_refs(), before);
}
