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

/// Another repository of the user's (`private`, one commit): (its path, its `HEAD`).
fn private_repo(world: &World) -> (PathBuf, String) {
    let other = world.root.join("private");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("s.txt"), "PRIVATE\n").unwrap();
    roo_tests::git_repo_with_identity(&other);
    let head = git(&other, &["rev-parse", "HEAD"]).trim().to_string();
    (other, head)
}

/// Whether the lead's repository has object `id`.
fn lead_has(world: &World, id: &str) -> bool {
    std::process::Command::new("git")
        .args(["cat-file", "-e", id])
        .current_dir(world.project())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .unwrap()
        .success()
}

/// The clone's work tree made a repository of its own, which `upload-pack` given the
/// clone's top directory serves once `.git` lost its `HEAD`: `HEAD`, `refs/` with the
/// branch a symlink to another repository's ref, and `objects/info/alternates` naming
/// that repository's objects.
fn plant_worktree_repository(clone: &Path, other: &Path) {
    std::fs::remove_file(clone.join(".git/HEAD")).unwrap();
    std::fs::write(clone.join("HEAD"), "ref: refs/heads/roo/team/alice\n").unwrap();
    std::fs::create_dir_all(clone.join("refs/heads/roo/team")).unwrap();
    std::os::unix::fs::symlink(
        other.join(".git/refs/heads/main"),
        clone.join("refs/heads/roo/team/alice"),
    )
    .unwrap();
    std::fs::create_dir_all(clone.join("objects/info")).unwrap();
    std::fs::write(
        clone.join("objects/info/alternates"),
        format!("{}\n", other.join(".git/objects").display()),
    )
    .unwrap();
}

/// A `.git` without `HEAD` is no repository to git, which then took the clone's top
/// directory for one: the teammate's work tree, outside the check, packed another
/// repository of the user's into the lead's objects. Refused, and nothing comes in.
#[test]
fn a_clone_whose_git_has_no_head_cannot_make_the_lead_serve_its_work_tree() {
    let world = World::new();
    let clone = world.clone_with_commit();
    let lead = world.lead();
    let (other, other_head) = private_repo(&world);
    plant_worktree_repository(&clone, &other);
    let before = world.lead_refs();
    let result = fetch_guarded(&lead);
    assert!(
        !lead_has(&world, &other_head),
        "another repository's commit reached the lead's objects: {result:?}"
    );
    assert_eq!(world.lead_refs(), before, "the lead's refs moved");
    let err = result.unwrap_err();
    assert!(
        matches!(&err, WorktreeError::UnsafeClone { why, .. } if why.contains(".git/HEAD")),
        "{err}"
    );
    // A HEAD that is not one (a FIFO is the walk's; here text) is refused too.
    std::fs::write(clone.join(".git/HEAD"), "garbage\n").unwrap();
    assert_refused(&world, &lead, ".git/HEAD");
    std::fs::write(clone.join(".git/HEAD"), "ref: refs/heads/roo/team/alice\n").unwrap();
    assert!(lead.fetch_member(&name("team"), &name("alice")).unwrap());
    assert!(!lead_has(&world, &other_head));
}

/// The host's side: the same planted work tree is refused, and `upload-pack --strict`
/// serves `.git` only.
#[test]
fn the_hosts_upload_pack_never_serves_a_clones_work_tree() {
    let world = World::new();
    let clone = world.clone_with_commit();
    let (other, other_head) = private_repo(&world);
    plant_worktree_repository(&clone, &other);
    let command = roo_team::worktree::remote::upload_pack_command(&world.project()).unwrap();
    let out = std::process::Command::new("timeout")
        .args(["120", "git", "-c", "core.hooksPath=/dev/null", "fetch"])
        .args(["--quiet", "--no-tags"])
        .arg(format!("--upload-pack={command}"))
        .arg(&clone)
        .arg("refs/heads/roo/team/alice:refs/remotes/check/alice")
        .current_dir(world.project())
        .env("HOME", world.root.join("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!lead_has(&world, &other_head), "{stderr}");
    assert!(!out.status.success());
    assert!(stderr.contains("roo-refused: head"), "{stderr}");
}

/// The clone's config exchanged with a FIFO (`renameat2(RENAME_EXCHANGE)`, over and
/// over) while the lead checks it: the check reads the file itself without blocking, so
/// it never waits on the FIFO, however the two interleave.
// Linux only: it uses a Linux system call (renameat2, F_SETPIPE_SZ).
#[cfg(target_os = "linux")]
#[test]
fn a_config_swapped_for_a_fifo_after_the_walk_never_stalls_the_check() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let world = World::new();
    let clone = world.clone_with_commit();
    let lead = world.lead();
    let config = clone.join(".git/config");
    let fifo = clone.join("config.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, config, fifo) = (stop.clone(), config.clone(), fifo.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                nix::fcntl::renameat2(
                    nix::fcntl::AT_FDCWD,
                    config.as_path(),
                    nix::fcntl::AT_FDCWD,
                    fifo.as_path(),
                    nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                )
                .unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let (lead, clone) = (lead.clone(), clone.clone());
        std::thread::spawn(move || {
            // At least 300 checks and 3 s of them: the swaps land anywhere in the check.
            let started = std::time::Instant::now();
            let (mut refused, mut checks) = (0, 0);
            while checks < 300 || started.elapsed() < Duration::from_secs(3) {
                if lead.check_clone(&clone).is_err() {
                    refused += 1;
                }
                checks += 1;
            }
            let _ = tx.send(refused);
        });
    }
    let finished = rx.recv_timeout(Duration::from_secs(60));
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    // A reader stuck on the FIFO (a failed run) gets its end of file.
    for path in [&config, &fifo] {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(path);
    }
    // Put the regular file back where git reads it.
    if !std::fs::symlink_metadata(&config).unwrap().is_file() {
        std::fs::rename(&config, clone.join("swap")).unwrap();
        std::fs::rename(&fifo, &config).unwrap();
        std::fs::rename(clone.join("swap"), &fifo).unwrap();
    }
    let refused = finished.expect("the check stalled on the FIFO (hang guard)");
    assert!(swaps > 0 && refused > 0, "swaps {swaps}, refused {refused}");
    lead.check_clone(&clone).unwrap();
}

/// The clone's config names a FIFO as `core.attributesFile`: `upload-pack`'s
/// pack-objects would open it and wait. The fetch names `/dev/null` in upload-pack's own
/// settings (a `-c` of the fetching git never reaches it), so the fetch completes.
#[test]
fn an_attribute_file_the_clones_config_names_never_stalls_the_fetch() {
    let world = World::new();
    let clone = world.clone_with_commit();
    let lead = world.lead();
    let fifo = world.root.join("attributes.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    git(
        &clone,
        &["config", "core.attributesFile", fifo.to_str().unwrap()],
    );
    let started = std::time::Instant::now();
    let fetched = fetch_guarded(&lead);
    assert!(
        matches!(fetched, Ok(true)),
        "{fetched:?} after {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Before each lead turn: a fetch that failed is tried again only once the clone's
/// branch changed, and a teammate on a host that failed is not tried again at once.
#[test]
fn a_failed_turn_fetch_is_not_retried_every_turn() {
    use roo_team::worktree::{RemoteRepo, SyncState};
    let world = World::new();
    let clone = world.clone_with_commit();
    let log = world.root.join("fetches.log");
    let wrapper = world.root.write(
        "bin/git-counting",
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" fetch \"*) echo fetch >> '{}';; esac\nexec git \"$@\"\n",
            log.display()
        ),
    );
    let ssh_log = world.root.join("ssh.log");
    let fake_ssh = world.root.write(
        "bin/ssh-refused",
        format!(
            "#!/bin/sh\necho ssh >> '{}'\necho 'ssh: connect to host far.invalid port 22: \
             Connection refused' >&2\nexit 255\n",
            ssh_log.display()
        ),
    );
    for program in [&wrapper, &fake_ssh] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(program, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let count = |path: &Path| {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let lead =
        match LeadRepo::discover(&world.project(), &world.git().with_program(&wrapper)).unwrap() {
            Discovered::Repo(repo) => repo,
            Discovered::Shared { why, .. } => panic!("no repository: {why:?}"),
        };
    let team = name("team");
    let mut state = SyncState::default();
    assert_eq!(lead.sync_team(&team, &mut state), vec![name("alice")]);
    assert_eq!(count(&log), 1);
    // Rewritten: the lead cannot take it. Tried once, not again each turn.
    git(
        &clone,
        &["commit", "-q", "--amend", "-m", "alice: rewritten"],
    );
    for _ in 0..3 {
        assert!(lead.sync_team(&team, &mut state).is_empty());
    }
    assert_eq!(count(&log), 2, "a failed fetch was tried again unchanged");
    // The branch moved: tried again (and fails again).
    std::fs::write(clone.join("d.txt"), "more\n").unwrap();
    git(&clone, &["add", "d.txt"]);
    git(&clone, &["commit", "-q", "-m", "alice: add d"]);
    assert!(lead.sync_team(&team, &mut state).is_empty());
    assert_eq!(count(&log), 3);
    // A teammate on a host that refuses the connection: once, not each turn.
    let host = roo_agent::config::HostConfig {
        name: name("far"),
        ssh: "far.invalid".to_string(),
        repo: PathBuf::from("/srv/far/project"),
        roo_worker: "roo-worker".to_string(),
        ssh_config: None,
        tmux_socket: None,
    };
    let mut remote = RemoteRepo::of(&host).unwrap();
    remote.ssh = remote.ssh.with_program(&fake_ssh);
    let lead = lead.with_remotes([(name("bob"), remote)].into_iter().collect());
    for _ in 0..3 {
        assert!(!lead.sync_team(&team, &mut state).contains(&name("bob")));
    }
    assert_eq!(count(&ssh_log), 1, "a failing host was tried every turn");
}

/// The host's side of a fetch is bounded as a whole: a git there that never returns
/// (here a `git` on `PATH` that sleeps) is ended with everything it started, so
/// nothing is left running on the host once the lead gave up.
#[test]
fn the_hosts_upload_pack_is_bounded_and_leaves_nothing_running() {
    let world = World::new();
    let clone = world.clone_with_commit();
    let pids = world.root.join("pids");
    let fake = world.root.write(
        "fakebin/git",
        format!(
            "#!/bin/sh\necho $$ >> '{}'\nexec sleep 1000\n",
            pids.display()
        ),
    );
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let command = roo_team::worktree::remote::upload_pack_command_within(
        &world.project(),
        Duration::from_secs(2),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        world.root.join("fakebin").display(),
        std::env::var("PATH").unwrap()
    );
    let quoted = format!("'{}'", clone.display());
    let started = std::time::Instant::now();
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{command} {quoted}"))
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ended = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let started_pids: Vec<i32> = std::fs::read_to_string(&pids)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let alive = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim()
                .starts_with('Z')
        })
    };
    // Killed with its group: gone at once, or after a moment for init to reap it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while started_pids.iter().any(|&p| alive(p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<i32> = started_pids.iter().copied().filter(|&p| alive(p)).collect();
    for &pid in &left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let status = ended.expect("the host's side ran past its bound (hang guard)");
    assert!(!status.success());
    assert!(!started_pids.is_empty(), "the fake git never ran");
    assert!(left.is_empty(), "left running: {left:?}");
}
